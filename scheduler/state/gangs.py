"""The one gang index: PodGroup records, the pods that name each, and the members on nodes.

The queue, the plugins (through the Handle) and the PodGroup status
controller all read this one index; the informer handlers and the cache
keep it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from scheduler.model import Pod, PodGroup


class GangIndex:
    """Every gang the scheduler knows, by key (``"ns/podgroup"``, or ``"scheduling.k8s.io/ns/podgroup"`` for
    the native API: :attr:`Pod.gang`, :attr:`PodGroup.key`).

    * ``groups``: key -> :class:`PodGroup` record (the PodGroup informer's);
    * ``members``: key -> uids of the pods that name the group, in any state
      (the pod informer's; a group may have members before its PodGroup exists);
    * ``placed``: key -> uid -> node of the members bound or assumed (the cache's
      own pods, kept in step by :class:`Cache`).

    Upkeep is O(1) per pod event; readers get live views (never mutate them).
    """

    __slots__ = ("groups", "members", "placed", "crd_served", "_failed_domains")

    def __init__(self) -> None:
        self.groups: dict[str, PodGroup] = {}
        self.members: dict[str, set[str]] = {}
        self.placed: dict[str, dict[str, str]] = {}
        # key -> the topology domains the gang's group cycle tried and could not fit it in, since the last
        # cluster event that could change that, each with the plugins that turned members away there
        # (scheduler/groupcycle.py; the queue forgets them)
        self._failed_domains: dict[str, dict[str, frozenset[str]]] = {}
        # does the API server serve scheduler-plugins' PodGroup CRD? The App says so after discovery, before
        # any pod arrives; until then (and in tests that build a scheduler alone) it is assumed served
        self.crd_served = True

    def group(self, key: str) -> PodGroup | None:
        return self.groups.get(key)

    def member_uids(self, key: str) -> set[str]:
        return self.members.get(key, _NO_MEMBERS)

    def placed_members(self, key: str) -> dict[str, str]:
        """Members of ``key`` on a node, bound or assumed: uid -> node."""
        return self.placed.get(key, _NO_PLACED)

    def failed_domains(self, key: str) -> Mapping[str, frozenset[str]]:
        """The topology domains gang ``key`` was tried in and did not fit, since a cluster event could change it,
        each with the plugins that turned its members away there (whose events may change that)."""
        return self._failed_domains.get(key, _NO_DOMAINS)

    # ------------------------------------------------------------------ the group cycle's memory

    def domain_failed(self, key: str, domain: str, plugins: frozenset[str]) -> None:
        """Remember that gang ``key`` does not fit in ``domain`` (its group cycle tried it; ``plugins`` said no)."""
        if key in self.groups:
            self._failed_domains.setdefault(key, {})[domain] = plugins

    def forget_failed_domains(self, key: str) -> None:
        """A cluster event may have changed what fits where: every domain is worth a try again."""
        self._failed_domains.pop(key, None)

    # ------------------------------------------------------------------ upkeep

    def set_group(self, pg: PodGroup) -> None:
        self.groups[pg.key] = pg

    def remove_group(self, key: str) -> None:
        self.groups.pop(key, None)
        self._failed_domains.pop(key, None)

    def update_membership(self, old: Pod | None, new: Pod | None) -> None:
        """A pod was added (old None), updated, or deleted (new None): keep ``members`` in step."""
        if old is not None and old.gang and (new is None or new.gang != old.gang):
            key = old.gang
            uids = self.members.get(key)
            if uids is not None:
                uids.discard(old.uid)
                if not uids:
                    del self.members[key]
        if new is not None and new.gang:
            self.members.setdefault(new.gang, set()).add(new.uid)

    def _place(self, pod: Pod, node: str) -> None:
        self.placed.setdefault(pod.gang, {})[pod.uid] = node

    def _unplace(self, pod: Pod) -> None:
        key = pod.gang
        on = self.placed.get(key)
        if on is not None:
            on.pop(pod.uid, None)
            if not on:
                del self.placed[key]


_NO_MEMBERS: set[str] = set()
_NO_PLACED: dict[str, str] = {}
_NO_DOMAINS: Mapping[str, frozenset[str]] = MappingProxyType({})
