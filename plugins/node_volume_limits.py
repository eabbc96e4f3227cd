"""NodeVolumeLimits: a node takes no more unique volumes of a CSI driver than its CSINode allows.

Upstream's plugin (pkg/scheduler/framework/plugins/nodevolumelimits/csi.go,
CSILimits): a node's limit per driver is its CSINode's
``spec.drivers[].allocatable.count`` (no CSINode, or no count: no limit). In
use there are the unique volumes (``<driver>/<volumeHandle>``) of the node's
pods and of its VolumeAttachments; the new pod's volumes that a pod there
already uses are not new. A driver whose new volumes would take the node past
its count fails it, Unschedulable (``node(s) exceed max volume count``).

What counts, and how claims map to drivers, is in scheduler/state/attach.py
(bound CSI volumes, claims not bound yet by their class's provisioner,
migratable in-tree volumes under their CSI driver where the CSINode says they
are migrated). Inline CSI (ephemeral) volumes are not attachable and, as
upstream, not counted. For the pod in the cycle, a claim that does not exist
is unresolvable (``looking up PVC ns/name: persistentvolumeclaims "name" not
found``) and a generic ephemeral volume's claim the pod does not own is an
error, as upstream. Upstream's alpha VolumeLimitScaling (a CSIDriver's
``preventPodSchedulingIfMissing``) is off by default in 1.36 and not done.

The per-node counts are columns (``handle.attachments``); Filter resolves only
the pod's volumes (its claims read in the assumed view, as by every plugin in
the cycle; upstream reads its lister, and an assumption changes nothing counted)
and compares arrays over the rows. PreFilter settles the
common case, a pod whose volumes, counted as new on every node, fit the
least headroom of any node (kept per driver), with Skip (the same verdict:
every node passes), while no pod is nominated. Preemption's dry runs
adjust the counts of the rows they change through AddPod/RemovePod (upstream
reads the dry run's NodeInfo instead); those few rows are recounted exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework import (
    ActionType, ClusterEvent, ClusterEventWithHint, Code, CycleState, FilterResult, QueueingHint, Resource, Status,
    register,
)
from scheduler.model import (
    MIGRATABLE_PLUGINS, CSINode, PersistentVolumeClaim, Pod, VolumeAttachment, in_tree_driver,
)

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

NAME = "NodeVolumeLimits"
STATE_KEY = "PreFilter" + NAME
ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"

_SKIP = Status(Code.SKIP)
_OK = Status()


@dataclass(slots=True)
class _State:
    """The pod's attachable volumes (unique name, driver, in-tree plugin or ""), or why they cannot be read; and
    the volume references preemption's dry run added (+) or took away (-) per row."""

    volumes: tuple[tuple[str, str, str], ...] = ()
    error: Status | None = None
    delta: dict[int, dict[tuple[str, ...], int]] = field(default_factory=dict)

    def clone(self) -> "_State":
        return _State(self.volumes, self.error, {r: dict(d) for r, d in self.delta.items()})


@register
class NodeVolumeLimits:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"EnqueueExtensions", "PreFilter", "PreFilterExtensions", "Filter"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None:
        self.handle = handle

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # any new CSINode may have room (no hint, as upstream); an update only when a count grew or went
            ClusterEventWithHint(ClusterEvent(Resource.CSI_NODE, ActionType.ADD)),
            ClusterEventWithHint(ClusterEvent(Resource.CSI_NODE, ActionType.UPDATE), _limit_grew),
            ClusterEventWithHint(ClusterEvent(Resource.ASSIGNED_POD, ActionType.DELETE), _had_volumes),
            ClusterEventWithHint(ClusterEvent(Resource.PVC, ActionType.ADD), _is_a_claim_of),
            ClusterEventWithHint(ClusterEvent(Resource.VOLUME_ATTACHMENT, ActionType.DELETE), self._detached),
        ]

    # ------------------------------------------------------------------ PreFilter

    def pre_filter(self, state: CycleState, pod: Pod, nodes: "NodeTable") -> tuple[None, Status]:
        if not pod.pvcs and not pod.inline_attach:
            return None, _SKIP   # no claim, no generic ephemeral or migratable inline volume
        attach = self.handle.attachments
        store = self.handle.volumes
        limited = attach.limited
        ephemeral = pod.ephemeral_pvcs
        found: dict[str, tuple[str, str, str]] = {}
        for name, key in zip(pod.pvcs, pod.claim_keys):
            pvc = store.assumed_claim_by_key(key)
            if pvc is None:
                # upstream finds this in Filter, for every node: counted per node in the message
                state.write(STATE_KEY, _State(error=Status(
                    Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                    f'looking up PVC {pod.namespace}/{name}: persistentvolumeclaims "{name}" not found')))
                return None, _OK
            if name in ephemeral and pvc.controller_uid != pod.uid:   # ephemeral.VolumeIsForPod
                state.write(STATE_KEY, _State(error=Status(
                    Code.ERROR, f"PVC {pod.namespace}/{name} was not created for pod {pod.key} (pod is not owner)",
                    plugin=NAME)))
                return None, _OK
            if limited:
                r = attach.resolve_claim(pvc)
                if r is not None:
                    found[r[0]] = r
        if not limited:
            return None, _SKIP   # no CSINode limits any driver: every node fits, as upstream's Filter would find
        for plugin, handle in pod.inline_attach:
            r = attach.resolve_inline(plugin, handle)
            found[r[0]] = r
        counted = [r for r in found.values() if r[1] in limited]
        if not counted:
            # nothing to count, or no CSINode limits these drivers anywhere: every node fits, as upstream's
            # Filter would find (CSINodes do not change within a cycle)
            return None, _SKIP
        if not len(self.handle.nominations) and attach.volumes_fit_everywhere(counted):
            # every node fits, and Filter need not run to find it (the common case: nodes with room for the
            # pod's volumes even counted as new on each). Not while any pod is nominated: Filter would charge
            # nominated pods' volumes to their nodes (RunFilterPluginsWithNominatedPods), and a skipped plugin
            # is not asked.
            # Preemption's dry runs only take pods away, or give back pods the counts held already, so a pod
            # that fits every node now fits in them too.
            return None, _SKIP
        state.write(STATE_KEY, _State(tuple(found.values())))
        return None, _OK

    # ------------------------------------------------------------------ PreFilterExtensions

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, row: int) -> Status:
        return self._update(state, pod_to_add, row, 1)

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, row: int) -> Status:
        return self._update(state, pod_to_remove, row, -1)

    def _update(self, state: CycleState, other: Pod, row: int, sign: int) -> Status:
        s: _State | None = state.get(STATE_KEY)
        if s is None:
            return Status(Code.ERROR, f'cannot read "{STATE_KEY}" from cycleState', plugin=NAME)
        refs = other.volume_refs   # the same references the cache counts placed pods by
        if refs:
            d = s.delta.setdefault(row, {})
            for ref in refs:
                d[ref] = d.get(ref, 0) + sign
        return _OK

    # ------------------------------------------------------------------ Filter

    def filter(self, state: CycleState, pod: Pod, nodes: "NodeTable", rows: np.ndarray) -> FilterResult:
        s: _State | None = state.get(STATE_KEY)
        k = len(rows)
        if s is None:
            return FilterResult.all_pass(k)
        if s.error is not None:
            if s.error.code == Code.ERROR:
                return FilterResult(np.zeros(k, dtype=bool), error=s.error)
            return FilterResult.reject_all(k, s.error.message(), s.error.code)
        over = self._over(s, rows)
        for r, delta in s.delta.items():
            at = np.flatnonzero(rows == r)
            if len(at):
                over[at] = self._over_one(s, nodes.names[r], delta)
        return FilterResult.from_mask(~over, ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)

    def _over(self, s: _State, rows: np.ndarray) -> np.ndarray:
        """bool[k]: the rows where a driver's new volumes exceed its count.

        Per driver of the pod's volumes that some CSINode limits, ``need`` (int[k]) is how many of its volumes
        are new on each row (a volume a pod there already uses is not; an in-tree one counts only where the
        node migrated its plugin), checked against that driver's ``headroom`` column (count - used) at
        ``rows``: for CSI volumes not on any node yet, one take and one compare per driver."""
        attach = self.handle.attachments
        limited = attach.limited
        by_driver: dict[str, list[tuple[str, str]]] = {}
        for unique, driver, plugin in s.volumes:
            if driver in limited:
                by_driver.setdefault(driver, []).append((unique, plugin))
        k = len(rows)
        over = np.zeros(k, dtype=bool)
        if not by_driver:
            return over
        cols = attach.drivers
        for driver, vols in by_driver.items():
            c = cols[driver]
            if not any(plugin for _, plugin in vols):
                # CSI volumes count on every node: need is len(vols) but where a pod there already uses one
                there = [r for unique, _ in vols for r in attach.rows_using(unique)]
                if not there:
                    if not attach.fits_everywhere(c, len(vols)):   # the common answer, without a look at rows
                        over |= attach.headroom[rows, c] < len(vols)
                    continue
                need = len(vols) - _count_in(rows, there)
                over |= (need > 0) & (attach.headroom[rows, c] < need)
                continue
            need = np.zeros(k, dtype=np.int64)
            for unique, plugin in vols:
                add = attach.migrated[rows, _PLUGIN_COL[plugin]] if plugin else np.ones(k, dtype=bool)
                there = attach.rows_using(unique)
                if there:    # a volume a pod on the node uses is not new there
                    add = add & ~np.isin(rows, there)
                need += add
            # only drivers with new volumes are checked: a node already past a count still takes a pod whose
            # volumes are all there (upstream checks newVolumeCount's drivers)
            over |= (need > 0) & (attach.headroom[rows, c] < need)
        return over

    def _over_one(self, s: _State, node: str, delta: dict[tuple[str, ...], int]) -> bool:
        """The same verdict for one row a dry run changed, recounted from its volumes (O(the node's volumes))."""
        attach = self.handle.attachments
        per_driver, on_node = attach.node_counts(node, delta)
        limits = attach.limits_on(node)
        migrated = attach.migrated_on(node)
        new: dict[str, int] = {}
        for unique, driver, plugin in s.volumes:
            if (not plugin or plugin in migrated) and unique not in on_node:
                new[driver] = new.get(driver, 0) + 1
        return any(d in limits and per_driver.get(d, 0) + n > limits[d] for d, n in new.items())

    # ------------------------------------------------------------------ queueing hints

    def _detached(self, pod: Pod, old: Any, new: Any) -> int:
        """isSchedulableAfterVolumeAttachmentDeleted: the attachment was of a volume one of the pod's claims is
        bound to, or (an inline spec) of the driver of one of its migratable inline volumes."""
        va = old
        if not isinstance(va, VolumeAttachment):
            return QueueingHint.QUEUE
        if va.pv_name:
            store = self.handle.volumes
            for name in pod.pvcs:
                pvc = store.assumed_claim(pod.namespace, name)
                if pvc is not None and pvc.volume_name == va.pv_name:
                    return QueueingHint.QUEUE
            return QueueingHint.SKIP
        drivers = {in_tree_driver(plugin) for plugin, _ in pod.inline_attach}
        return QueueingHint.QUEUE if va.attacher in drivers else QueueingHint.SKIP


_PLUGIN_COL = {p: i for i, p in enumerate(MIGRATABLE_PLUGINS)}   # the columns of Attachments.migrated


def _count_in(rows: np.ndarray, there: list[int]) -> np.ndarray:
    """int[k]: how many of ``there`` (rows, repeats counted) each of ``rows`` is."""
    out = np.zeros(len(rows), dtype=np.int64)
    for r in there:
        out += rows == r
    return out


def _limit_grew(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterCSINodeUpdated: a driver's count grew, or went away (no limit)."""
    if not isinstance(old, CSINode) or not isinstance(new, CSINode):
        return QueueingHint.QUEUE
    now = dict(new.limits)
    for driver, count in old.limits:
        if now.get(driver, count + 1) > count:
            return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _had_volumes(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterPodDeleted: a placed pod with a claim, a generic ephemeral or a migratable inline volume
    went."""
    deleted = old
    if not isinstance(deleted, Pod):
        return QueueingHint.QUEUE
    if not deleted.node_name:
        return QueueingHint.SKIP
    return QueueingHint.QUEUE if deleted.pvcs or deleted.inline_attach else QueueingHint.SKIP


def _is_a_claim_of(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterPVCAdded: a claim of one of the pod's volumes (generic ephemeral ones included)."""
    if not isinstance(new, PersistentVolumeClaim) or new.namespace != pod.namespace:
        return QueueingHint.SKIP
    return QueueingHint.QUEUE if new.name in pod.pvcs else QueueingHint.SKIP
