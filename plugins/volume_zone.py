"""VolumeZone: a pod whose bound volume is labelled with a zone or region goes to a node there.

Upstream's plugin (pkg/scheduler/framework/plugins/volumezone) predates
volume node affinity: a PersistentVolume labelled
``topology.kubernetes.io/zone`` or ``/region`` (or the deprecated
``failure-domain.beta.kubernetes.io/*``; the value may list several zones
separated by ``__``) can only be used from a node whose same label holds one
of those values. tandem does what it does, with its messages and codes:

* **PreFilter** reads the claims of the pod's ``persistentVolumeClaim``
  volumes (not generic ephemeral ones, as upstream) and their volumes'
  labels, in the assumed view as every plugin in the cycle (upstream reads
  its listers; an assumption changes no field read here). UnschedulableAndUnresolvable for a claim that does not exist
  (``persistentvolumeclaim "data" not found``), a claim with no volume and no
  class, a class or a volume that does not exist, and a claim with no volume
  whose class binds at once (``PersistentVolume had no name``); a claim with
  no volume whose class binds on first consumer is left to VolumeBinding. A
  pod whose volumes carry no zone label is skipped.
* **Filter** rejects a node, UnschedulableAndUnresolvable (``node(s) had no
  available volume zone``), whose label is missing or not among a volume's
  zones; a beta label on the volume is also matched against the node's GA
  label when the node lacks the beta one. A node with none of the four
  labels fits (a single-zone cluster whose nodes are not labelled), as
  upstream. The labels are compared over the node table's label columns,
  never node by node.

A profile that disables VolumeZone keeps upstream's meaning: the zone labels
are not evaluated. Volume node affinity is VolumeBinding's job, not this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework import (
    ActionType, ClusterEvent, ClusterEventWithHint, Code, CycleState, FilterResult, QueueingHint, Resource, Status,
    register,
)
from scheduler.model import (
    BINDING_WAIT_FOR_FIRST_CONSUMER, PV_TOPOLOGY_LABELS, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass,
    pvc_volume_claim_keys, uses_pvc_volume_claim,
)

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

NAME = "VolumeZone"
STATE_KEY = "PreFilter" + NAME

ERR_REASON_CONFLICT = "node(s) had no available volume zone"

_UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
_SKIP = Status(Code.SKIP)
_OK = Status()

# translateToGALabel: a volume's beta label is matched against the node's GA label when the node lacks the beta one
_GA_LABEL = {"failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
             "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region"}

Topology = tuple[str, frozenset[str]]   # (label key, the zones a volume lists under it)


@dataclass(frozen=True, slots=True)
class _Topologies:
    """What Filter checks, from PreFilter: every zone label of every bound volume of the pod."""

    items: tuple[Topology, ...]


@register
class VolumeZone:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"EnqueueExtensions", "PreFilter", "Filter"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None:
        self.handle = handle

    # ------------------------------------------------------------------ queueing

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # a class that binds on first consumer lets a claim without a volume through (the mode is immutable)
            ClusterEventWithHint(ClusterEvent(Resource.STORAGE_CLASS, ActionType.ADD), _waits_for_first_consumer),
            # a node in the volume's zone joins, or gets the label
            ClusterEventWithHint(ClusterEvent(Resource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)),
            # the claim is created or gets its volume
            ClusterEventWithHint(ClusterEvent(Resource.PVC, ActionType.ADD | ActionType.UPDATE),
                                 _uses_claim),
            # the volume is created or its zone labels change
            ClusterEventWithHint(ClusterEvent(Resource.PV, ActionType.ADD | ActionType.UPDATE), _topology_changed),
        ]

    # ------------------------------------------------------------------ PreFilter

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeTable) -> tuple[None, Status]:
        st, topologies = self._topologies(pod)
        if not st.is_success():
            return None, st
        if not topologies:
            return None, _SKIP
        state.write(STATE_KEY, _Topologies(topologies))
        return None, _OK

    def _topologies(self, pod: Pod) -> tuple[Status, tuple[Topology, ...]]:
        """getPVbyPod: the first problem with a claim (in volume order), or its volumes' zone labels."""
        store = self.handle.volumes
        out: list[Topology] = []
        for key in pvc_volume_claim_keys(pod):
            name = key[len(pod.namespace) + 1:]
            if not name:
                return Status(_UNRESOLVABLE, "PersistentVolumeClaim had no name"), ()
            pvc: PersistentVolumeClaim | None = store.assumed_claim_by_key(key)
            if pvc is None:
                return Status(_UNRESOLVABLE, f'persistentvolumeclaim "{name}" not found'), ()
            if not pvc.volume_name:
                if not pvc.storage_class:
                    return Status(_UNRESOLVABLE, "PersistentVolumeClaim had no pv name and storageClass name"), ()
                cls: StorageClass | None = store.classes.get(pvc.storage_class)
                if cls is None:
                    return Status(_UNRESOLVABLE, f'storageclass.storage.k8s.io "{pvc.storage_class}" not found'), ()
                if cls.binding_mode == BINDING_WAIT_FOR_FIRST_CONSUMER:
                    continue   # no volume yet to be in a zone
                return Status(_UNRESOLVABLE, "PersistentVolume had no name"), ()
            pv: PersistentVolume | None = store.assumed_volume(pvc.volume_name)
            if pv is None:
                return Status(_UNRESOLVABLE, f'persistentvolume "{pvc.volume_name}" not found'), ()
            out.extend(pv.topologies)
        return _OK, tuple(out)

    # ------------------------------------------------------------------ Filter

    def filter(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> FilterResult:
        data = state.get(STATE_KEY)
        if data is None:   # PreFilter disabled: work it out here
            if not pod.pvcs:
                return FilterResult.all_pass(len(rows))
            st, topologies = self._topologies(pod)
            if not st.is_success():
                return FilterResult.reject_all(len(rows), st.message(), st.code)
        else:
            topologies = data.items
        return FilterResult.from_mask(zone_mask(topologies, nodes, rows), ERR_REASON_CONFLICT, _UNRESOLVABLE)


def zone_mask(topologies: tuple[Topology, ...], nodes: NodeTable, rows: np.ndarray) -> np.ndarray:
    """bool[k]: the rows (int64[k]) where every volume zone label matches, or that carry none of the four labels."""
    labelled = np.zeros(len(rows), dtype=bool)
    for key in PV_TOPOLOGY_LABELS:
        col = nodes.label(key)
        if col is not None:
            labelled |= col[rows] != 0
    ok = np.ones(len(rows), dtype=bool)
    for key, zones in topologies:
        hit, present = _label_in(nodes, rows, key, zones)
        ga = _GA_LABEL.get(key)
        if ga is not None:
            ga_hit, _ = _label_in(nodes, rows, ga, zones)
            hit = np.where(present, hit, ga_hit)   # the node's own beta label wins when it has one
        ok &= hit
    return ok | ~labelled


def _label_in(nodes: NodeTable, rows: np.ndarray, key: str, values: frozenset[str]) -> tuple[np.ndarray, np.ndarray]:
    """(bool[k] the row's ``key`` label is one of ``values``, bool[k] the row has the label at all)."""
    col = nodes.label(key)
    if col is None:
        none = np.zeros(len(rows), dtype=bool)
        return none, none
    ids = col[rows]
    want = np.zeros(len(nodes.label_values(key)), dtype=bool)
    for v in values:
        want[nodes.label_id(key, v)] = True
    want[0] = False   # label_id is 0 for a value no node has, and 0 is also "absent"
    return want[ids], ids != 0


def _waits_for_first_consumer(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterStorageClassAdded: only a class that binds on first consumer can help."""
    if isinstance(new, StorageClass) and new.binding_mode == BINDING_WAIT_FOR_FIRST_CONSUMER:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _uses_claim(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterPersistentVolumeClaimChange: a claim of one of the pod's persistentVolumeClaim volumes."""
    return QueueingHint.QUEUE if uses_pvc_volume_claim(pod, new) else QueueingHint.SKIP


def _topology_changed(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterPersistentVolumeChange: a new volume, or one whose zone labels changed."""
    if old is None or not isinstance(new, PersistentVolume) or old.topologies != new.topologies:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP
