"""VolumeRestrictions: inline disks one pod at a time per node, and a ReadWriteOncePod claim one pod at a time.

Upstream's plugin (pkg/scheduler/framework/plugins/volumerestrictions), both parts:

* **Disk conflicts** (satisfyVolumeConflicts, isVolumeConflict): a node where a
  placed pod uses the same inline disk fails, Unschedulable (``node(s) had no
  available disk``): the same GCE disk (``pdName``) or iSCSI volume (``iqn``)
  unless both mounts are read-only; the same EBS volume (``volumeID``), even
  read-only; the same RBD image (a Ceph monitor in common, same pool and
  image) unless both are read-only. The placed pods' disks are counted per
  node in ``handle.disks`` (scheduler/state/disks.py), so Filter reads the
  few nodes that use the pod's disks, never the pods.
* **ReadWriteOncePod.** PreFilter reads the claims of the pod's
  ``persistentVolumeClaim`` volumes (UnschedulableAndUnresolvable,
  ``persistentvolumeclaim "data" not found``, for a missing one) and counts
  those with the ``ReadWriteOncePod`` access mode that a placed pod already
  uses (upstream's IsPVCUsedByPods: every pod bound or assumed, terminating
  ones included, since they still hold the volume). If any is, Filter
  rejects every node, Unschedulable (``node has pod using
  PersistentVolumeClaim with the same name and ReadWriteOncePod access
  mode``).

A disk conflict is reported before a ReadWriteOncePod one, as upstream. Both
may be lifted by preemption: its dry runs add and remove pods through
AddPod/RemovePod, which adjust the claim count and, per row they touch, the
disks. A pod with neither is skipped. A profile that disables
VolumeRestrictions keeps upstream's meaning: none of this is evaluated. The
claims come from ``handle.volumes``' assumed view, as for every plugin in the
cycle (upstream reads its lister; an assumption changes no field read here),
the claims placed pods use from the cache (``claim_users``, kept as pods are
placed and removed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework import (
    ActionType, ClusterEvent, ClusterEventWithHint, Code, CycleState, FilterResult, QueueingHint, Rejection,
    Resource, Status, register,
)
from scheduler.model import Pod, pvc_volume_claim_keys, pvc_volume_claims, uses_pvc_volume_claim

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

NAME = "VolumeRestrictions"
STATE_KEY = "PreFilter" + NAME

ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT = ("node has pod using PersistentVolumeClaim with the same name and "
                                           "ReadWriteOncePod access mode")
READ_WRITE_ONCE_POD = "ReadWriteOncePod"

_SKIP = Status(Code.SKIP)
_OK = Status()


@dataclass(slots=True)
class _State:
    """The pod's ReadWriteOncePod claims and how many of them placed pods use (preFilterState); and the disks
    of the pods preemption's dry run added or took away, per row: disk key -> [uses, read-write uses]."""

    claims: frozenset[str]
    conflicts: int
    disks: dict[int, dict[str, list[int]]] = field(default_factory=dict)

    def clone(self) -> "_State":
        return _State(self.claims, self.conflicts,
                      {r: {k: list(c) for k, c in d.items()} for r, d in self.disks.items()})


@register
class VolumeRestrictions:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"EnqueueExtensions", "PreFilter", "PreFilterExtensions", "Filter"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None:
        self.handle = handle

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # the pod using the claim goes (spec.volumes is immutable, so a pod update never helps)
            ClusterEventWithHint(ClusterEvent(Resource.POD, ActionType.DELETE), _shares_a_claim),
            ClusterEventWithHint(ClusterEvent(Resource.NODE, ActionType.ADD)),
            # the claim whose access modes PreFilter needs is created (isSchedulableAfterPersistentVolumeClaimAdded)
            ClusterEventWithHint(ClusterEvent(Resource.PVC, ActionType.ADD), _uses_claim),
        ]

    # ------------------------------------------------------------------ PreFilter

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeTable) -> tuple[None, Status]:
        if not pod.pvcs and not pod.disks:
            return None, _SKIP
        store = self.handle.volumes
        claims = set()
        conflicts = 0
        for key in pvc_volume_claim_keys(pod) if pod.pvcs else ():
            pvc = store.assumed_claim_by_key(key)
            if pvc is None:
                name = key.partition("/")[2]
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f'persistentvolumeclaim "{name}" not found')
            if READ_WRITE_ONCE_POD in pvc.access_modes and pvc.name not in claims:
                claims.add(pvc.name)
                # at most one pod can be using a ReadWriteOncePod claim, so each used claim counts once
                if self.handle.claim_users.get(key, 0) > 0:
                    conflicts += 1
        if not conflicts and not pod.disks:
            return None, _SKIP   # as upstream: nothing to check per node, even in preemption's dry runs
        state.write(STATE_KEY, _State(frozenset(claims), conflicts))
        return None, _OK

    # ------------------------------------------------------------------ PreFilterExtensions

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, row: int) -> Status:
        return self._update(state, pod, pod_to_add, row, 1)

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, row: int) -> Status:
        return self._update(state, pod, pod_to_remove, row, -1)

    def _update(self, state: CycleState, pod: Pod, other: Pod, row: int, delta: int) -> Status:
        """updateWithPod: ``other``'s uses of the pod's ReadWriteOncePod claims (in the pod's namespace: claims
        are namespaced, where upstream compares names only); and ``other``'s disks on ``row``, which upstream's
        Filter would find in the dry run's NodeInfo."""
        s: _State | None = state.get(STATE_KEY)
        if s is None:
            return Status(Code.ERROR, f'cannot read "{STATE_KEY}" from cycleState', plugin=NAME)
        if pod.disks and other.disks:
            d = s.disks.setdefault(row, {})
            for key, read_only, _ in other.disks:
                c = d.setdefault(key, [0, 0])
                c[0] += delta
                c[1] += delta * (not read_only)
        if other.namespace != pod.namespace or not other.pvcs:
            return _OK
        s.conflicts += delta * sum(1 for name in pvc_volume_claims(other) if name in s.claims)
        return _OK

    # ------------------------------------------------------------------ Filter

    def filter(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> FilterResult:
        s: _State | None = state.get(STATE_KEY)
        if s is None:   # PreFilter skipped the pod, or is disabled: nothing Filter alone can tell
            return FilterResult.all_pass(len(rows))
        disk = self._disk_conflicts(s, pod, nodes, rows) if pod.disks else np.zeros(len(rows), dtype=bool)
        rejections = [Rejection(ERR_REASON_DISK_CONFLICT, disk, Code.UNSCHEDULABLE)] if disk.any() else []
        if s.conflicts > 0:
            rejections.append(Rejection(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT, ~disk, Code.UNSCHEDULABLE))
            return FilterResult(np.zeros(len(rows), dtype=bool), [r for r in rejections if r.mask.any()])
        return FilterResult(~disk, rejections)

    def _disk_conflicts(self, s: _State, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> np.ndarray:
        """bool[k]: the rows where a placed pod uses one of the pod's disks in a conflicting way. The nodes come
        from the disk index (few per disk); the rows a dry run changed are recounted with its changes."""
        index = self.handle.disks
        bad: set[int] = set()
        for key, read_only, may_share in pod.disks:
            for node in index.conflicting(key, read_only, may_share):
                r = nodes.row(node)
                if r is not None:
                    bad.add(r)
        out = np.isin(rows, list(bad)) if bad else np.zeros(len(rows), dtype=bool)
        for r, changed in s.disks.items():
            at = np.flatnonzero(rows == r)
            if not len(at):
                continue
            uses = index.uses
            name = nodes.names[r]
            hit = False
            for key, read_only, may_share in pod.disks:
                col = 1 if read_only and may_share else 0
                base = uses.get(key, {}).get(name, (0, 0))[col]
                if base + changed.get(key, (0, 0))[col] > 0:
                    hit = True
                    break
            out[at] = hit
        return out


def _shares_a_claim(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterPodDeleted: a deleted pod of the namespace whose disks conflicted with the pod's, or
    that used one of the pod's claims (upstream skips pods of other namespaces for both)."""
    deleted = old
    if not isinstance(deleted, Pod):
        return QueueingHint.QUEUE
    if deleted.namespace != pod.namespace:
        return QueueingHint.SKIP
    if pod.disks and deleted.disks:
        theirs = {key: ro for key, ro, _ in deleted.disks}
        for key, read_only, may_share in pod.disks:
            if key in theirs and not (may_share and read_only and theirs[key]):
                return QueueingHint.QUEUE
    if not deleted.pvcs or not pod.pvcs:
        return QueueingHint.SKIP
    if set(pvc_volume_claims(deleted)) & set(pvc_volume_claims(pod)):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP



def _uses_claim(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterPersistentVolumeClaimAdded: a claim of one of the pod's persistentVolumeClaim volumes."""
    return QueueingHint.QUEUE if uses_pvc_volume_claim(pod, new) else QueueingHint.SKIP
