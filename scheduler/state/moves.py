"""Moves the rebalancer made or plans (scheduler/consolidation/), as the scheduling cycle reads them.

A :class:`Move` takes one running pod off its *source* node so that a replacement its controller creates
(a ReplicaSet's or a StatefulSet's next pod) runs on the planned *target*. Between the eviction and the
replacement's placement the move steers: the owner's next pod is nominated to the target (the scheduler's
evaluateNominatedNode path tries it first), and until :data:`STEER_TTL_SECONDS` after the eviction no pod of
that owner may go back to the source (Consolidation's Filter, plugins/consolidation.py). A replacement that
binds anywhere but the target is a *bounce-back*.

Everything here is derived from the rebalancer's own plans; nothing is persisted. A restart forgets the
steering, as a descheduler restart forgets its evictions.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from scheduler.model import Pod

STEER_TTL_SECONDS = 300.0   # how long a move steers its owner's next pod (and keeps it off the source)

# a move's life (``Move.state``)
PLANNED, EVICTING, EVICTED, PLACED, DONE, ABORTED = "planned", "evicting", "evicted", "placed", "done", "aborted"
IN_FLIGHT = frozenset({EVICTING, EVICTED, PLACED})   # from the eviction until the replacement is bound and Ready


def controller_of(pod: Pod) -> tuple[str, str, str] | None:
    """(kind, name, uid) of the pod's controller ownerReference, or None."""
    for o in pod.owners:
        if o.controller:
            return o.kind, o.name, o.uid
    return None


@dataclass(eq=False)
class Move:
    pod: Pod                      # the pod moved (as planned)
    owner_uid: str                # its controller's uid
    owner: str                    # "ReplicaSet ns/name", as messages name it
    source: str
    target: str
    strategy: str                 # "defragment", "compact", "spread"
    why: str                      # the end of the event's note ("to open room for pod group ns/g")
    state: str = PLANNED
    evicted_at: float = 0.0       # clock time of the eviction
    replacement: str = ""         # the uid of the pod that replaced it
    tries: int = 0                # evictions refused (429) so far
    profile: str = ""             # the profile whose plan it is
    bound: bool = False           # its replacement was bound (timed, and checked for a bounce-back)
    answered: bool = False        # its eviction was answered (success)
    ready: bool = False           # its replacement is Ready (the move is done once answered too)


class Moves:
    """The moves in flight and the steering they do, indexed for the cycle (O(1) when nothing moves)."""

    def __init__(self) -> None:
        self.awaiting: dict[str, deque[Move]] = {}        # owner uid -> evicted moves whose replacement is due
        self.avoid: dict[str, dict[str, float]] = {}      # owner uid -> source node -> until (clock time)
        self.replacements: dict[str, Move] = {}           # replacement pod uid -> its move, until Ready
        self.moving: dict[str, Move] = {}                 # uid of a pod planned or being evicted -> its move
        # Job uid -> whether its podFailurePolicy ignores DisruptionTarget (its pods may move), from the Job
        # informer the App runs while a profile enables Consolidation
        self.jobs: dict[str, bool] = {}
        self.version = 0

    def __bool__(self) -> bool:
        return bool(self.avoid or self.moving or self.replacements)

    def avoided(self, owner_uid: str, now: float) -> list[str]:
        """The source nodes the owner's pods may not go back to now."""
        on = self.avoid.get(owner_uid)
        if not on:
            return []
        live = [n for n, until in on.items() if until > now]
        if len(live) != len(on):
            for n in [n for n, until in on.items() if until <= now]:
                del on[n]
            if not on:
                del self.avoid[owner_uid]
            self.version += 1
        return live

    def prune(self, now: float) -> None:
        """Forget the sources whose TTL has passed (so the cycle's check stays O(1) once nothing moves)."""
        for owner in list(self.avoid):
            self.avoided(owner, now)

    def expect(self, m: Move, now: float) -> None:
        """``m``'s eviction is about to be asked for: from now on the owner's next pod is its replacement (the
        owner's controller may create it, and it may be in a cycle, before the eviction's answer arrives)."""
        m.state, m.evicted_at = EVICTING, now
        self.awaiting.setdefault(m.owner_uid, deque()).append(m)
        self.avoid.setdefault(m.owner_uid, {})[m.source] = now + STEER_TTL_SECONDS
        self.version += 1

    def refused(self, m: Move) -> None:
        """The eviction was not made: no replacement is due (the source stays avoided until its TTL); a pod of the
        owner steered meanwhile was not its replacement."""
        if m.replacement:
            self.replacements.pop(m.replacement, None)
            m.replacement = ""
        m.state = EVICTING
        q = self.awaiting.get(m.owner_uid)
        if q is not None and m in q:
            q.remove(m)
            if not q:
                del self.awaiting[m.owner_uid]

    def evicted(self, m: Move, now: float) -> None:
        """The eviction was made (its replacement may have come already: then it stays PLACED)."""
        m.evicted_at, m.answered = now, True
        self.moving.pop(m.pod.uid, None)
        if m.state == EVICTING:
            m.state = EVICTED
        self.version += 1

    def next_for(self, owner_uid: str) -> Move | None:
        """The oldest move of the owner being evicted or evicted, still waiting for its replacement."""
        q = self.awaiting.get(owner_uid)
        while q:
            m = q[0]
            if m.state in (EVICTING, EVICTED):
                return m
            q.popleft()
        if q is not None:
            del self.awaiting[owner_uid]
        return None

    def replaced(self, m: Move, pod: Pod) -> None:
        """``pod`` is the replacement of ``m``: it leaves the owner's line."""
        m.replacement, m.state = pod.uid, PLACED
        q = self.awaiting.get(m.owner_uid)
        if q is not None:
            try:
                q.remove(m)
            except ValueError:
                pass
            if not q:
                del self.awaiting[m.owner_uid]
        self.replacements[pod.uid] = m

    def end(self, m: Move, state: str) -> None:
        m.state = state
        self.moving.pop(m.pod.uid, None)
        if m.replacement:
            self.replacements.pop(m.replacement, None)
        q = self.awaiting.get(m.owner_uid)
        if q is not None and m in q:
            q.remove(m)
            if not q:
                del self.awaiting[m.owner_uid]
        self.version += 1


def disruption_ignored(job: dict) -> bool:
    """Does a Job's ``spec.podFailurePolicy`` ignore a pod failed by an eviction (condition DisruptionTarget)?
    Its rules are tried in order and the first that matches decides: an ``onPodConditions`` rule naming
    DisruptionTarget (status True, the default) decides by its action (Ignore: the pod does not count against
    ``backoffLimit``); an ``onExitCodes`` rule before it might match the evicted container's exit code, so it
    decides no."""
    policy = (job.get("spec") or {}).get("podFailurePolicy") or {}
    for rule in policy.get("rules") or ():
        if not isinstance(rule, dict):
            return False
        if rule.get("onExitCodes"):
            return False
        for cond in rule.get("onPodConditions") or ():
            if isinstance(cond, dict) and cond.get("type") == "DisruptionTarget" \
                    and cond.get("status", "True") == "True":
                return rule.get("action") == "Ignore"
    return False
