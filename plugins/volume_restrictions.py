"""VolumeRestrictions: a ReadWriteOncePod claim is used by one pod at a time.

Upstream's plugin (pkg/scheduler/framework/plugins/volumerestrictions) does
two things; tandem does the first and refuses what would need the second:

* **ReadWriteOncePod.** PreFilter reads the claims of the pod's
  ``persistentVolumeClaim`` volumes (UnschedulableAndUnresolvable,
  ``persistentvolumeclaim "data" not found``, for a missing one) and counts
  those with the ``ReadWriteOncePod`` access mode that a placed pod already
  uses (upstream's IsPVCUsedByPods: every pod bound or assumed, terminating
  ones included, since they still hold the volume). If any is, Filter
  rejects every node, Unschedulable (``node has pod using
  PersistentVolumeClaim with the same name and ReadWriteOncePod access
  mode``): preemption may evict the user, through AddPod/RemovePod.
* **Disk conflicts** of inline ``gcePersistentDisk``, ``awsElasticBlockStore``,
  ``rbd`` and ``iscsi`` volumes with the same disk used by another pod on
  the node (upstream: ``node(s) had no available disk``). tandem does not
  check these yet. A pod with such a volume is refused at PreFilter,
  UnschedulableAndUnresolvable, naming the volume; it is never placed as if
  the conflict could not exist.

A pod with neither is skipped. A profile that disables VolumeRestrictions
keeps upstream's meaning: none of this is evaluated. The claims come from
``handle.volumes``, the claims placed pods use from the cache
(``claim_users``, kept as pods are placed and removed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework import (
    ActionType, ClusterEvent, ClusterEventWithHint, Code, CycleState, FilterResult, QueueingHint, Resource, Status,
    register,
)
from scheduler.model import Pod, pvc_volume_claims, uses_pvc_volume_claim

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

NAME = "VolumeRestrictions"
STATE_KEY = "PreFilter" + NAME

ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT = ("node has pod using PersistentVolumeClaim with the same name and "
                                           "ReadWriteOncePod access mode")
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
DISK_CONFLICTS_NOT_CHECKED = "tandem does not check inline disk conflicts yet"

_SKIP = Status(Code.SKIP)
_OK = Status()


@dataclass(frozen=True, slots=True)
class _State:
    """The pod's ReadWriteOncePod claims, and how many of them placed pods use (preFilterState)."""

    claims: frozenset[str]
    conflicts: int


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
        if pod.conflict_disks:
            volume, source = pod.conflict_disks[0]
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                f'volume "{volume}" ({source}) may conflict with the same disk used by another '
                                f"pod on the node: {DISK_CONFLICTS_NOT_CHECKED}")
        if not pod.pvcs:
            return None, _SKIP
        store = self.handle.volumes
        claims = set()
        for name in pvc_volume_claims(pod):
            pvc = store.claim(pod.namespace, name)
            if pvc is None:
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f'persistentvolumeclaim "{name}" not found')
            if READ_WRITE_ONCE_POD in pvc.access_modes:
                claims.add(name)
        users = self.handle.claim_users
        # at most one pod can be using a ReadWriteOncePod claim, so each used claim counts once
        conflicts = sum(1 for name in claims if users.get(f"{pod.namespace}/{name}", 0) > 0)
        if not conflicts:
            return None, _SKIP   # as upstream: nothing to check per node, even in preemption's dry runs
        state.write(STATE_KEY, _State(frozenset(claims), conflicts))
        return None, _OK

    # ------------------------------------------------------------------ PreFilterExtensions

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, row: int) -> Status:
        return self._update(state, pod, pod_to_add, 1)

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, row: int) -> Status:
        return self._update(state, pod, pod_to_remove, -1)

    def _update(self, state: CycleState, pod: Pod, other: Pod, delta: int) -> Status:
        """updateWithPod: ``other``'s uses of the pod's ReadWriteOncePod claims (in the pod's namespace: claims
        are namespaced, where upstream compares names only)."""
        s: _State | None = state.get(STATE_KEY)
        if s is None:
            return Status(Code.ERROR, f'cannot read "{STATE_KEY}" from cycleState', plugin=NAME)
        if other.namespace != pod.namespace or not other.pvcs:
            return _OK
        n = sum(1 for name in pvc_volume_claims(other) if name in s.claims)
        if n:
            state.write(STATE_KEY, _State(s.claims, s.conflicts + delta * n))
        return _OK

    # ------------------------------------------------------------------ Filter

    def filter(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> FilterResult:
        s: _State | None = state.get(STATE_KEY)
        if s is None:   # PreFilter skipped the pod, or is disabled: nothing Filter alone can tell
            return FilterResult.all_pass(len(rows))
        if s.conflicts > 0:
            return FilterResult.reject_all(len(rows), ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT, Code.UNSCHEDULABLE)
        return FilterResult.all_pass(len(rows))


def _shares_a_claim(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterPodDeleted: a deleted pod of the namespace that used one of the pod's claims."""
    deleted = old
    if not isinstance(deleted, Pod):
        return QueueingHint.QUEUE
    if deleted.namespace != pod.namespace or not deleted.pvcs or not pod.pvcs:
        return QueueingHint.SKIP
    if set(pvc_volume_claims(deleted)) & set(pvc_volume_claims(pod)):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP



def _uses_claim(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterPersistentVolumeClaimAdded: a claim of one of the pod's persistentVolumeClaim volumes."""
    return QueueingHint.QUEUE if uses_pvc_volume_claim(pod, new) else QueueingHint.SKIP
