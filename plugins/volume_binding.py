"""VolumeBinding: a pod's PersistentVolumeClaims must be usable where it is placed.

Upstream's plugin (pkg/scheduler/framework/plugins/volumebinding) checks a
pod's claims and, for claims not bound yet, finds or provisions a volume and
binds it before the pod (Reserve, PreBind). tandem evaluates the part that
needs no API writes, with upstream's messages and codes, and refuses the
rest instead of ignoring it:

* **PreFilter** skips a pod that uses no claim (no ``persistentVolumeClaim``
  and no generic ``ephemeral`` volume, whose claim is ``<pod>-<volume>``).
  UnschedulableAndUnresolvable, with upstream's words, for a claim that is
  missing (``persistentvolumeclaim "data" not found``; for an ephemeral
  volume ``waiting for ephemeral volume controller to create the
  persistentvolumeclaim "p-scratch"``), lost, being deleted, or (ephemeral)
  not created for this pod; and ``pod has unbound immediate
  PersistentVolumeClaims`` for a claim not bound (a volume named and the PV
  controller's bind-completed annotation) whose class binds at once (or a
  claim only pre-bound), as the PV controller should bind those first.
* A claim not bound whose StorageClass binds on first consumer
  (``WaitForFirstConsumer``) is where upstream would pick a volume or a
  node to provision on and bind it. tandem does not bind or provision
  volumes yet, so the pod is refused, naming the claim and saying so; it is
  never placed as if the claim were not there.
* **Filter** checks the bound claims' PersistentVolumes on each node:
  ``node(s) didn't match PersistentVolume's node affinity`` where a volume's
  ``spec.nodeAffinity.required`` does not match the node (upstream's
  volume.CheckNodeAffinity, which matches the terms against the node's
  labels only, so a matchFields term sees an empty name), and ``node(s)
  unavailable due to one or more pvc(s) bound to non-existent pv(s)``
  everywhere when a bound claim's volume does not exist. Both are
  UnschedulableAndUnresolvable: preemption cannot help. The terms are
  matched over the node table's label columns, never node by node.

A profile that disables VolumeBinding keeps upstream's meaning: the claims
are not evaluated. The claims, volumes and classes come from their
informers through ``handle.volumes``; without them every claim is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework import (
    ActionType, ClusterEvent, ClusterEventWithHint, Code, ConfigError, CycleState, FilterResult, QueueingHint,
    Rejection, Resource, Status, register,
)
from scheduler.framework.nodeaffinity import IN, IntLabels, SelectorTerm, compile_selector, raw_term, term_mask
from scheduler.model import BINDING_WAIT_FOR_FIRST_CONSUMER, PersistentVolume, PersistentVolumeClaim, Pod

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

NAME = "VolumeBinding"
STATE_KEY = "PreFilter" + NAME

ERR_REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"

_SKIP = Status(Code.SKIP)
_OK = Status()
_UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE

# upstream's default bind timeout (VolumeBindingArgs.bindTimeoutSeconds)
DEFAULT_BIND_TIMEOUT_SECONDS = 600


@dataclass(frozen=True, slots=True)
class VolumeBindingArgs:
    """VolumeBindingArgs. ``bindTimeoutSeconds`` is accepted and validated as upstream; it will bound
    PreBind's wait for the PV controller once tandem binds volumes. ``shape`` scores storage capacity,
    behind the StorageCapacityScoring feature gate upstream, which tandem does not have."""

    bind_timeout_seconds: int = DEFAULT_BIND_TIMEOUT_SECONDS
    shape: tuple[Any, ...] = ()

    def validate(self, path: str) -> None:
        if self.bind_timeout_seconds < 0:
            raise ConfigError(f"{path}.bindTimeoutSeconds: Invalid value: {self.bind_timeout_seconds}: "
                              "invalid BindTimeoutSeconds, should not be a negative value")
        if self.shape:
            raise ConfigError(f"{path}.shape: Forbidden: not supported (it needs the StorageCapacityScoring "
                              "feature, which tandem does not have)")


@dataclass(frozen=True, slots=True)
class _Volumes:
    """What Filter checks, from PreFilter: the compiled node affinity of each bound claim's volume
    (label terms, and whether the term's matchFields hold for a node without a name), and whether a
    bound claim's volume is missing."""

    affinities: tuple[tuple[tuple[SelectorTerm, bool], ...], ...]
    missing_pv: bool


@register
class VolumeBinding:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"EnqueueExtensions", "PreFilter", "Filter"})
    Args = VolumeBindingArgs

    def __init__(self, args: VolumeBindingArgs | None, handle: Any) -> None:
        self.args = args if args is not None else VolumeBindingArgs()
        self.handle = handle
        self._ints = IntLabels()
        # volume name -> (the record it was compiled from, its compiled terms): PVs change rarely
        self._compiled: dict[str, tuple[PersistentVolume, tuple[tuple[SelectorTerm, bool], ...]]] = {}

    # ------------------------------------------------------------------ queueing

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # a new class can change a claim's binding mode (upstream: Add | Update; the mode is immutable)
            ClusterEventWithHint(ClusterEvent(Resource.STORAGE_CLASS, ActionType.ADD | ActionType.UPDATE)),
            # the claim the pod waits for is created or bound
            ClusterEventWithHint(ClusterEvent(Resource.PVC, ActionType.ADD | ActionType.UPDATE), _uses_claim),
            # a bound claim's volume appears, or its node affinity changes
            ClusterEventWithHint(ClusterEvent(Resource.PV, ActionType.ADD | ActionType.UPDATE)),
            # a node that matches a volume's node affinity joins or gets the labels
            ClusterEventWithHint(ClusterEvent(Resource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)),
        ]

    # ------------------------------------------------------------------ PreFilter

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeTable) -> tuple[None, Status]:
        if not pod.pvcs:
            return None, _SKIP
        st, vols = self._check(pod)
        if not st.is_success():
            return None, st
        if not vols.affinities and not vols.missing_pv:
            return None, _SKIP   # every claim bound to a volume usable from any node: nothing to filter
        state.write(STATE_KEY, vols)
        return None, _OK

    def _check(self, pod: Pod) -> tuple[Status, _Volumes]:
        """podHasPVCs and GetPodVolumeClaims: the first claim problem (in volume order), or what Filter needs."""
        store = self.handle.volumes
        affinities = []
        missing_pv = False
        ephemeral = pod.ephemeral_pvcs
        for name in pod.pvcs:
            pvc = store.claim(pod.namespace, name)
            is_ephemeral = name in ephemeral
            if pvc is None:
                if is_ephemeral:
                    return Status(_UNRESOLVABLE, "waiting for ephemeral volume controller to create the "
                                                 f'persistentvolumeclaim "{name}"'), _NONE
                return Status(_UNRESOLVABLE, f'persistentvolumeclaim "{name}" not found'), _NONE
            if pvc.phase == "Lost":
                return Status(_UNRESOLVABLE, f'persistentvolumeclaim "{name}" bound to non-existent '
                                             f'persistentvolume "{pvc.volume_name}"'), _NONE
            if pvc.deleting:
                return Status(_UNRESOLVABLE, f'persistentvolumeclaim "{name}" is being deleted'), _NONE
            if is_ephemeral and pvc.controller_uid != pod.uid:
                # ephemeral.VolumeIsForPod
                return Status(_UNRESOLVABLE, f"PVC {pvc.key} was not created for pod {pod.key} "
                                             "(pod is not owner)"), _NONE
            if not pvc.bound:
                st = self._unbound(pvc)
                if st is not None:
                    return st, _NONE
                continue
            pv = store.volumes.get(pvc.volume_name)
            if pv is None:
                missing_pv = True
            elif pv.node_affinity_terms is not None:
                affinities.append(self._terms(pv))
        return _OK, _Volumes(tuple(affinities), missing_pv)

    def _unbound(self, pvc: PersistentVolumeClaim) -> Status | None:
        """A claim not bound: immediate binding (the PV controller's job) or binding on first consumer (ours)."""
        cls = self.handle.volumes.classes.get(pvc.storage_class) if pvc.storage_class else None
        # volume.IsDelayBindingMode: no class, or a class that does not exist, binds at once; a pre-bound
        # claim (a volume named, the binding not completed) is treated as immediate
        if cls is None or cls.binding_mode != BINDING_WAIT_FOR_FIRST_CONSUMER or pvc.volume_name:
            return Status(_UNRESOLVABLE, ERR_UNBOUND_IMMEDIATE)
        return Status(_UNRESOLVABLE, f'persistentvolumeclaim "{pvc.name}" is not bound and its StorageClass '
                                     f'"{cls.name}" binds on first consumer (WaitForFirstConsumer): tandem does '
                                     "not bind or provision volumes yet")

    def _terms(self, pv: PersistentVolume) -> tuple[tuple[SelectorTerm, bool], ...]:
        hit = self._compiled.get(pv.name)
        if hit is not None and hit[0] is pv:
            return hit[1]
        raw = pv.node_affinity_terms or ()
        compiled = tuple((SelectorTerm(t.labels, ()), all((r.values[0] == "") == (r.op == IN) for r in t.fields))
                         for t in compile_selector((raw_term(t) for t in raw), "spec.nodeAffinity.required"))
        self._compiled[pv.name] = (pv, compiled)
        return compiled

    # ------------------------------------------------------------------ Filter

    def filter(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> FilterResult:
        vols = state.get(STATE_KEY)
        if vols is None:   # PreFilter disabled: evaluate here, as far as Filter can say anything
            if not pod.pvcs:
                return FilterResult.all_pass(len(rows))
            st, vols = self._check(pod)
            if not st.is_success():
                return FilterResult.reject_all(len(rows), st.message(), st.code)
        if vols.missing_pv:
            return FilterResult.reject_all(len(rows), ERR_REASON_PV_NOT_EXIST, _UNRESOLVABLE)
        ok = np.ones(len(rows), dtype=bool)
        for terms in vols.affinities:
            ok &= _affinity_mask(terms, nodes, rows, self._ints)
        if ok.all():
            return FilterResult(ok)
        return FilterResult(ok, [Rejection(ERR_REASON_NODE_CONFLICT, ~ok, _UNRESOLVABLE)])


_NONE = _Volumes((), False)


def _affinity_mask(terms: tuple[tuple[SelectorTerm, bool], ...], nodes: NodeTable, rows: np.ndarray,
                   ints: IntLabels) -> np.ndarray:
    """bool[k]: the rows one volume's terms (ORed) accept; no term (all empty or unparsable) accepts none."""
    m = np.zeros(len(rows), dtype=bool)
    for term, fields_hold in terms:
        if fields_hold:
            m |= term_mask(term, nodes, rows, ints)
    return m


def _uses_claim(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterPersistentVolumeClaimChange: a claim of the pod's, in its namespace."""
    if isinstance(new, PersistentVolumeClaim) and new.namespace == pod.namespace and new.name in pod.pvcs:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP
