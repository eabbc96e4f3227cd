"""VolumeBinding: a pod's PersistentVolumeClaims must be usable where it is placed, and are bound for it.

Upstream's plugin (pkg/scheduler/framework/plugins/volumebinding, 1.36) with its binder (binder.go), over
tandem's PV index and assume cache (scheduler/state/volumes.py, through ``handle.volumes``). PreFilter, Filter
and Reserve read claims and volumes in the assumed view (``assumed_claim_by_key``, ``assumed_volume``: upstream's
pvcCache and pvCache), so a volume an earlier cycle took is taken; PreBind's wait reads the API view
(``api_claims``, ``api_volumes``: GetAPIPVC/GetAPIPV), since it waits for the API to confirm those assumptions.

* **PreFilter** sorts the pod's claims (GetPodVolumeClaims): bound (a volume named and the PV controller's
  bind-completed annotation), unbound with delayed binding (a WaitForFirstConsumer class, no volume named),
  and unbound immediate (``pod has unbound immediate PersistentVolumeClaims``: the PV controller binds
  those, a claim only pre-bound included). A generic ephemeral volume's claim is ``<pod>-<volume>``. A
  missing claim, a lost one, one being deleted, or an ephemeral one not created for this pod is
  UnschedulableAndUnresolvable with upstream's words; as upstream (podHasPVCs before GetPodVolumeClaims),
  every claim is checked for these before any for its binding, so they are named before an unbound
  immediate claim that comes earlier in the pod. It returns no PreFilterResult, as kube-scheduler
  1.36.2 does not narrow the nodes for a bound volume pinned by hostname either (seen on a real control
  plane: a pod whose local volume is on a full node reads "3 Insufficient cpu" on 3 nodes, not "2
  node(s) didn't satisfy plugin(s) [VolumeBinding]"; tests/integration/test_messages_kube_scheduler.py).
  Older releases' binder had GetEligibleNodes for that.
* **Filter** (FindPodVolumes) answers for all rows at once, with upstream's four reasons, all
  UnschedulableAndUnresolvable: a bound claim's volume whose node affinity rejects the node (``node(s)
  didn't match PersistentVolume's node affinity``) or that does not exist (``node(s) unavailable due to
  one or more pvc(s) bound to non-existent pv(s)``), the first problem in claim order deciding; for the
  delayed claims (smallest request first), the smallest available volume that matches (FindMatchingVolume,
  :meth:`Volumes.best_static`), else provisioning: a class that provisions, whose allowedTopologies admit
  the node (else ``node(s) didn't find available persistent volumes to bind``), and, where the class's
  CSIDriver has ``storageCapacity: true``, a CSIStorageCapacity of the class that selects the node and is
  large enough (else ``node(s) did not have enough free storage``). A claim with ``selected-node`` is
  provisioned there and nowhere else.
* **Reserve** (AssumePodVolumes) takes the choice for the chosen node and assumes it: the volume's claimRef
  set, or the claim's ``volume.kubernetes.io/selected-node``, so the next cycle sees the volume taken even
  before the API does. **Unreserve** reverts it.
* **PreBind** (BindPodVolumes), in the binding task, writes as kube-scheduler does: the volume's claimRef
  (with the claim's uid) and ``pv.kubernetes.io/bound-by-controller: "yes"``, the claim's selected-node,
  each an update with the resourceVersion read (a conflict fails the attempt); then waits until the PV
  controller has bound every claim (checkBindings, on the API view), re-checking at each PV or
  PVC event (and at least once a second of the injected clock, for deletions of the pod or node), up to
  ``bindTimeoutSeconds``. A timeout, a conflict or a binding undone is an error: the binding cycle
  unreserves and requeues the pod, with upstream's text (``running PreBind plugin "VolumeBinding": binding
  volumes: context deadline exceeded``).

No Score: StorageCapacityScoring (``shape``) is refused by name, as it was. A profile that disables
VolumeBinding keeps upstream's meaning: the claims are not evaluated.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework import (
    ActionType, ClusterEvent, ClusterEventWithHint, Code, ConfigError, CycleState, FilterResult, QueueingHint,
    Rejection, Resource, Status, register,
)
from scheduler.model import (
    ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE, BINDING_WAIT_FOR_FIRST_CONSUMER, NOT_SUPPORTED_PROVISIONER, ClaimRef,
    PersistentVolume, PersistentVolumeClaim, Pod,
)

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

NAME = "VolumeBinding"
STATE_KEY = "PreFilter" + NAME
PLAN_KEY = "Reserve" + NAME
FOUND_KEY = "Filter" + NAME

ERR_REASON_NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
# what wait.PollUntilContextTimeout's expired context says, wrapped as BindPodVolumes wraps it
ERR_BIND_TIMEOUT = "binding volumes: context deadline exceeded"

_SKIP = Status(Code.SKIP)
_OK = Status()
_UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE

# upstream's default bind timeout (VolumeBindingArgs.bindTimeoutSeconds)
DEFAULT_BIND_TIMEOUT_SECONDS = 600
# wait.PollUntilContextTimeout's interval: the longest PreBind goes without re-checking (events come sooner)
RECHECK_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class VolumeBindingArgs:
    """VolumeBindingArgs. ``bindTimeoutSeconds`` bounds PreBind's wait for the PV controller. ``shape`` scores
    storage capacity, behind the StorageCapacityScoring feature gate upstream, which tandem does not have."""

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
class _Claims:
    """PreFilter's sorting of the pod's claims: bound ones (in volume order), delayed ones (by request)."""

    bound: tuple[PersistentVolumeClaim, ...]
    delayed: tuple[PersistentVolumeClaim, ...]


@dataclass(slots=True)
class _Found:
    """FindPodVolumes over k rows: each reason's rows, and per delayed claim its volume per row (-1: provision)."""

    node_conflict: np.ndarray
    bind_conflict: np.ndarray
    no_space: np.ndarray
    pv_missing: np.ndarray
    matches: list[Any]              # one Match per claim to match (the delayed claims without selected-node)

    def passed(self) -> np.ndarray:
        return ~(self.node_conflict | self.bind_conflict | self.no_space | self.pv_missing)


@dataclass(slots=True)
class _Plan:
    """What Reserve assumed for the chosen node (PodVolumes): the volumes to bind (the assumed objects) to
    their claims, and the claims to provision (assumed with selected-node); the versions PreBind wrote."""

    node: str
    static: list[tuple[PersistentVolume, PersistentVolumeClaim, bool]]   # (assumed PV, claim, needs a write)
    provision: list[PersistentVolumeClaim]
    written: dict[str, str]                                              # "pv/x" or "pvc/ns/x" -> version


@register
class VolumeBinding:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"EnqueueExtensions", "PreFilter", "Filter", "Reserve", "PreBind"})
    Args = VolumeBindingArgs

    def __init__(self, args: VolumeBindingArgs | None, handle: Any) -> None:
        self.args = args if args is not None else VolumeBindingArgs()
        self.handle = handle

    # ------------------------------------------------------------------ queueing

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # a missing or misconfigured class (binding mode, allowedTopologies)
            ClusterEventWithHint(ClusterEvent(Resource.STORAGE_CLASS, ActionType.ADD | ActionType.UPDATE),
                                 _class_changed),
            # the claim the pod waits for is created or bound (a claim's deletion never helps: not registered)
            ClusterEventWithHint(ClusterEvent(Resource.PVC, ActionType.ADD | ActionType.UPDATE), _uses_claim),
            # a volume appears, frees up, or its node affinity changes
            ClusterEventWithHint(ClusterEvent(Resource.PV, ActionType.ADD | ActionType.UPDATE)),
            # a node that a volume's affinity or a class's topology admits joins or gets the labels (upstream
            # registers taints too, with every plugin that registers Node/Add)
            ClusterEventWithHint(ClusterEvent(Resource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL
                                              | ActionType.UPDATE_NODE_TAINT)),
            ClusterEventWithHint(ClusterEvent(Resource.CSI_NODE, ActionType.ADD | ActionType.UPDATE), _csi_node_changed),
            ClusterEventWithHint(ClusterEvent(Resource.CSI_DRIVER, ActionType.UPDATE), _csi_driver_changed),
            ClusterEventWithHint(ClusterEvent(Resource.CSI_STORAGE_CAPACITY, ActionType.ADD | ActionType.UPDATE),
                                 _capacity_changed),
        ]

    # ------------------------------------------------------------------ PreFilter

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeTable) -> tuple[None, Status]:
        if not pod.pvcs:
            return None, _SKIP
        st, claims = self._claims(pod)
        if not st.is_success():
            return None, st
        state.write(STATE_KEY, claims)   # Reserve reads it too
        if not claims.delayed:
            vols = self.handle.volumes
            for c in claims.bound:
                pv = vols.assumed_volume(c.volume_name)
                if pv is None or pv.node_affinity_terms is not None:
                    return None, _OK
            return None, _SKIP   # every claim bound to a volume usable from any node: nothing to filter
        return None, _OK

    def _claims(self, pod: Pod) -> tuple[Status, _Claims]:
        """podHasPVCs, then GetPodVolumeClaims, as upstream's PreFilter runs them: first every claim must exist,
        not be lost or being deleted, and (a generic ephemeral volume's) be the pod's, the first problem in
        volume order deciding; only then are the claims sorted by binding, any unbound immediate one refusing
        the pod. So a missing claim is named even after an unbound immediate one. Both passes read the assumed
        view (upstream's first reads the lister: the same fields, an assumption adds only selected-node)."""
        store = self.handle.volumes
        ephemeral = pod.ephemeral_pvcs
        pvcs: list[PersistentVolumeClaim] = []
        for name, key in zip(pod.pvcs, pod.claim_keys):
            pvc = store.assumed_claim_by_key(key)
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
            pvcs.append(pvc)
        bound: list[PersistentVolumeClaim] = []
        delayed: list[PersistentVolumeClaim] = []
        for pvc in pvcs:
            if pvc.bound:
                bound.append(pvc)
                continue
            cls = store.classes.get(pvc.storage_class) if pvc.storage_class else None
            # volume.IsDelayBindingMode: no class, or a class that does not exist, binds at once; a pre-bound
            # claim (a volume named, the binding not completed) is treated as immediate
            if cls is None or cls.binding_mode != BINDING_WAIT_FOR_FIRST_CONSUMER or pvc.volume_name:
                return Status(_UNRESOLVABLE, ERR_UNBOUND_IMMEDIATE), _NONE
            delayed.append(pvc)
        # findMatchingVolumes: the smallest requests first, so each gets the smallest fit
        delayed.sort(key=lambda c: c.request)
        return _OK, _Claims(tuple(bound), tuple(delayed))

    # ------------------------------------------------------------------ Filter

    def filter(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> FilterResult:
        claims = state.get(STATE_KEY)
        if claims is None:   # PreFilter disabled: evaluate here, as far as Filter can say anything
            if not pod.pvcs:
                return FilterResult.all_pass(len(rows))
            st, claims = self._claims(pod)
            if not st.is_success():
                return FilterResult.reject_all(len(rows), st.message(), st.code)
        found = self._find(claims, nodes, rows)
        ok = found.passed()
        if claims.delayed:
            # podVolumesByNode: Reserve reads its node's choice from here (the cycle cannot change the index
            # in between); the entry is this cycle's own, replaced by every Filter run
            state.write(FOUND_KEY, (rows, found))
        if ok.all():
            return FilterResult(ok)
        # FindPodVolumes' order of reasons
        rejections = [Rejection(reason, mask, _UNRESOLVABLE) for reason, mask in (
            (ERR_REASON_NODE_CONFLICT, found.node_conflict), (ERR_REASON_BIND_CONFLICT, found.bind_conflict),
            (ERR_REASON_NOT_ENOUGH_SPACE, found.no_space), (ERR_REASON_PV_NOT_EXIST, found.pv_missing)) if mask.any()]
        return FilterResult(ok, rejections)

    def _find(self, claims: _Claims, nodes: NodeTable, rows: np.ndarray) -> _Found:
        """FindPodVolumes for every row at once (shapes: bool[k] masks, k = len(rows))."""
        vols = self.handle.volumes
        k = len(rows)
        found = _Found(np.zeros(k, bool), np.zeros(k, bool), np.zeros(k, bool), np.zeros(k, bool), [])
        # checkBoundClaims: per row, the first bound claim with a problem decides
        undecided = np.ones(k, dtype=bool)
        for pvc in claims.bound:
            if vols.assumed_volume(pvc.volume_name) is None:
                found.pv_missing |= undecided
                break
            admitted = vols.admits(pvc.volume_name, rows)
            found.node_conflict |= undecided & ~admitted
            undecided &= admitted
        if not claims.delayed:
            return found
        # a claim with selected-node goes to that node only (the fast path), and is provisioned there
        live = np.ones(k, dtype=bool)
        selected = [c for c in claims.delayed if c.selected_node is not None]
        for c in selected:
            row = nodes.row(c.selected_node)  # type: ignore[arg-type]
            live &= rows == (-1 if row is None else row)
        found.bind_conflict |= ~live
        to_match = [c for c in claims.delayed if c.selected_node is None]
        for c in to_match:
            found.matches.append(vols.best_static(c, rows, found.matches))
        # checkVolumeProvisions over the claims left to provision on each row, the first failure deciding
        pending = live.copy()
        for c, need in [(c, live) for c in selected] + [(c, m.slot < 0) for c, m in zip(to_match, found.matches)]:
            need = need & pending
            if not need.any():
                continue
            cls = vols.classes.get(c.storage_class)
            if cls is None or not cls.provisioner or cls.provisioner == NOT_SUPPORTED_PROVISIONER:
                found.bind_conflict |= need
                pending &= ~need
                continue
            if cls.allowed_topologies:
                topo = _topology_mask(cls.allowed_topologies, nodes, rows)
                found.bind_conflict |= need & ~topo
                pending &= topo | ~need
                need &= topo
            room = self._capacity_mask(c, cls.name, cls.provisioner, rows)
            if room is not None:
                found.no_space |= need & ~room
                pending &= room | ~need
        return found

    def _capacity_mask(self, claim: PersistentVolumeClaim, cls: str, provisioner: str,
                       rows: np.ndarray) -> np.ndarray | None:
        """hasEnoughCapacity: None where capacity is not checked (no request, no CSIDriver of the provisioner,
        or one without storageCapacity); else the rows some CSIStorageCapacity of the class, large enough,
        selects by its nodeTopology (one compare over the rows: scheduler/state/capacities.py)."""
        vols = self.handle.volumes
        driver = vols.drivers.get(provisioner)
        if claim.request == 0 or driver is None or not driver.storage_capacity:
            return None
        return vols.capacity_index.room(cls, claim.request, rows)

    # ------------------------------------------------------------------ Reserve / Unreserve

    def reserve(self, state: CycleState, pod: Pod, node: str) -> Status:
        """AssumePodVolumes: the choice Filter made for ``node`` (the same answer, computed for its row)."""
        claims = state.get(STATE_KEY)
        if claims is None:
            if not pod.pvcs:
                return _OK
            st, claims = self._claims(pod)
            if not st.is_success():
                return Status(Code.ERROR, st.message())
        if not claims.delayed:
            return _OK   # arePodVolumesBound: nothing to assume, nothing for PreBind to do
        nodes = self.handle.nodes
        row = nodes.row(node)
        if row is None:
            return Status(Code.ERROR, f'no pod volumes found for node "{node}"')
        at = 0
        hit = state.get(FOUND_KEY)
        if hit is not None and len(idx := np.flatnonzero(hit[0] == row)):
            found, at = hit[1], int(idx[0])
        else:   # Filter did not run for this node (disabled, or skipped): the same answer, for its row alone
            found = self._find(claims, nodes, np.array([row], dtype=np.int64))
        if not found.passed()[at]:
            return Status(Code.ERROR, f'no pod volumes found for node "{node}"')
        vols = self.handle.volumes
        plan = _Plan(node, [], [], {})
        to_match = [c for c in claims.delayed if c.selected_node is None]
        unmatched = []
        for c, m in zip(to_match, found.matches):
            name = m.name(at)
            if name is None:
                unmatched.append(c)
                continue
            pv = vols.assumed_volume(name)
            assert pv is not None
            new, dirty = _bind_volume_to_claim(pv, c)
            if dirty:
                vols.assume_pv(new)
            plan.static.append((new, c, dirty))
        for c in [c for c in claims.delayed if c.selected_node is not None] + unmatched:
            assumed = replace(c, selected_node=node)
            vols.assume_pvc(assumed)
            plan.provision.append(assumed)
        state.write(PLAN_KEY, plan)
        return _OK

    def unreserve(self, state: CycleState, pod: Pod, node: str) -> None:
        """RevertAssumedPodVolumes."""
        plan = state.get(PLAN_KEY)
        if plan is None:
            return
        vols = self.handle.volumes
        for pv, _, dirty in plan.static:
            if dirty:
                vols.restore_pv(pv.name)
        for c in plan.provision:
            vols.restore_pvc(c.key)

    # ------------------------------------------------------------------ PreBind

    async def pre_bind(self, state: CycleState, pod: Pod, node: str) -> Status:
        """BindPodVolumes: the API writes (bindAPIUpdate), then the wait for the PV controller (checkBindings)."""
        plan: _Plan | None = state.get(PLAN_KEY)
        if plan is None:
            return _OK   # all bound: no need to bind volumes
        client = self.handle.client
        try:
            for pv, claim, dirty in plan.static:
                if dirty:
                    got = await client.update(f"/api/v1/persistentvolumes/{pv.name}", _pv_body(pv, claim))
                    plan.written["pv/" + pv.name] = str((got.get("metadata") or {}).get("resourceVersion", ""))
            for claim in plan.provision:
                body = copy.deepcopy(claim.raw)
                body.setdefault("metadata", {}).setdefault("annotations", {})[ANN_SELECTED_NODE] = node
                got = await client.update(
                    f"/api/v1/namespaces/{claim.namespace}/persistentvolumeclaims/{claim.name}", body)
                plan.written["pvc/" + claim.key] = str((got.get("metadata") or {}).get("resourceVersion", ""))
        except Exception as exc:  # noqa: BLE001 - the API said no (409 conflict, ...): upstream returns its error
            return Status(Code.ERROR, getattr(exc, "message", "") or str(exc), error=exc)
        return await self._wait(pod, plan)

    async def _wait(self, pod: Pod, plan: _Plan) -> Status:
        """Until checkBindings says every claim is bound, it fails, or bindTimeoutSeconds pass (upstream polls
        each second; here each PV/PVC event wakes the check, and the clock at least once a second)."""
        clock = self.handle.clock
        vols = self.handle.volumes
        deadline = clock() + self.args.bind_timeout_seconds
        # the objects whose events can end the wait: the volumes and claims bound, the claims provisioned (and
        # the volumes they get, which the claim's own update names)
        keys = [f"pv/{pv.name}" for pv, _, _ in plan.static] + [f"pvc/{c.key}" for _, c, _ in plan.static] \
            + [f"pvc/{c.key}" for c in plan.provision]
        while True:
            remaining = deadline - clock()
            if remaining <= 0:
                return Status(Code.ERROR, ERR_BIND_TIMEOUT)
            fut = vols.changed(keys)
            timer = clock.call_later(min(remaining, RECHECK_SECONDS), _wake, fut)
            try:
                await fut
            finally:
                timer.cancel()
                vols.forget_waiter(keys, fut)
            done, problem = self._check_bindings(pod, plan)
            if problem:
                return Status(Code.ERROR, f"binding volumes: {problem}")
            if done:
                return _OK

    def _check_bindings(self, pod: Pod, plan: _Plan) -> tuple[bool, str]:
        """checkBindings on the API view: (all bound, "" or why binding must be retried)."""
        vols = self.handle.volumes
        nodes = self.handle.nodes
        row = nodes.row(plan.node)
        if row is None or nodes.node(row) is None:
            return False, f'failed to get node "{plan.node}": node "{plan.node}" not found'
        if pod.uid not in self.handle.pods:
            return False, f'pod does not exist any more: pod "{pod.name}" not found'
        at = np.array([row], dtype=np.int64)
        for pv, claim, _ in plan.static:
            api = vols.api_volumes.get(pv.name)
            if api is None:
                return False, f'failed to check binding: could not find v1.PersistentVolume "{pv.name}"'
            pvc = vols.api_claims.get(claim.key)
            if pvc is None:
                return False, f'failed to check binding: could not find v1.PersistentVolumeClaim "{claim.key}"'
            wrote = plan.written.get("pv/" + pv.name)
            if wrote and _older(api.resource_version, wrote):
                return False, ""   # our write has not come back through the informer yet
            if not vols.admits(api.name, at)[0]:
                return False, (f'pv "{api.name}" node affinity doesn\'t match node "{plan.node}": '
                               "no matching NodeSelectorTerms")
            if api.claim_ref is None or not api.claim_ref.uid:
                return False, f'ClaimRef got reset for pv "{api.name}"'
            if not pvc.bound:
                return False, ""
        for claim in plan.provision:
            pvc = vols.api_claims.get(claim.key)
            if pvc is None:
                return False, f'failed to check provisioning pvc: could not find v1.PersistentVolumeClaim "{claim.key}"'
            wrote = plan.written.get("pvc/" + claim.key)
            if wrote and _older(pvc.resource_version, wrote):
                return False, ""
            if pvc.selected_node != plan.node:
                # a provisioner that fails removes selected-node: the signal to schedule again
                return False, f'provisioning failed for PVC "{pvc.name}"'
            if pvc.volume_name:
                api = vols.api_volumes.get(pvc.volume_name)
                if api is None:
                    return False, ""   # not seen yet; a deleted one unbinds the claim eventually
                if not vols.admits(api.name, at)[0]:
                    return False, (f'pv "{api.name}" node affinity doesn\'t match node "{plan.node}": '
                                   "no matching NodeSelectorTerms")
            if not pvc.bound:
                return False, ""
        return True, ""


_NONE = _Claims((), ())


def _wake(fut: Any) -> None:
    if not fut.done():
        fut.set_result(None)


def _older(version: str, than: str) -> bool:
    if version.isdigit() and than.isdigit():
        return int(version) < int(than)
    return False


def _bind_volume_to_claim(pv: PersistentVolume, claim: PersistentVolumeClaim) -> tuple[PersistentVolume, bool]:
    """GetBindVolumeToClaim: the volume with its claimRef naming the claim (and its uid), and bound-by-controller
    when the volume was not bound to the claim already; and whether that changed anything."""
    ref = ClaimRef(claim.namespace, claim.name, claim.uid)
    was_bound = pv.claim_ref is not None and pv.claim_ref.names(claim)
    dirty = pv.claim_ref != ref
    set_ann = not was_bound and not pv.bound_by_controller
    if not dirty and not set_ann:
        return pv, False
    return replace(pv, claim_ref=ref, bound_by_controller=pv.bound_by_controller or set_ann), True


def _pv_body(pv: PersistentVolume, claim: PersistentVolumeClaim) -> dict[str, Any]:
    """The volume as the API has it (the version Reserve saw), with the claimRef as reference.GetReference
    writes it (kind, namespace, name, uid, apiVersion, resourceVersion) and the annotation."""
    body = copy.deepcopy(pv.raw) if pv.raw is not None else {"metadata": {"name": pv.name}}
    body.setdefault("spec", {})["claimRef"] = {
        "kind": "PersistentVolumeClaim", "namespace": claim.namespace, "name": claim.name, "uid": claim.uid,
        "apiVersion": "v1", "resourceVersion": claim.resource_version}
    if pv.bound_by_controller:
        body.setdefault("metadata", {}).setdefault("annotations", {}).setdefault(ANN_BOUND_BY_CONTROLLER, "yes")
    return body


def _topology_mask(terms: tuple[tuple[tuple[str, frozenset[str]], ...], ...], nodes: NodeTable,
                   rows: np.ndarray) -> np.ndarray:
    """MatchTopologySelectorTerms: bool[k], the rows whose labels satisfy some term (every key's value listed)."""
    m = np.zeros(len(rows), dtype=bool)
    for term in terms:
        t = np.ones(len(rows), dtype=bool)
        for key, values in term:
            col = nodes.label(key)
            if col is None:
                t[:] = False
                break
            ids = [nodes.label_id(key, v) for v in values]
            t &= np.isin(col[rows], [i for i in ids if i])
        m |= t
    return m


# ---------------------------------------------------------------------------- queueing hints

def _uses_claim(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterPersistentVolumeClaimChange: a claim of the pod's, in its namespace."""
    if isinstance(new, PersistentVolumeClaim) and new.namespace == pod.namespace and new.name in pod.pvcs:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _class_changed(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterStorageClassChange: a new class, or one whose allowedTopologies changed."""
    if old is None or getattr(old, "allowed_topologies", None) != getattr(new, "allowed_topologies", None):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _csi_node_changed(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterCSINodeChange: a new CSINode, or one whose migrated plugins changed."""
    if old is None or getattr(old, "migrated", None) != getattr(new, "migrated", None):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _csi_driver_changed(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterCSIDriverChange: whether the driver's capacity is checked changed."""
    if old is None or getattr(old, "storage_capacity", None) != getattr(new, "storage_capacity", None):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _capacity_changed(pod: Pod, old: Any, new: Any) -> int:
    """isSchedulableAfterCSIStorageCapacityChange: a new capacity, or one grown, moved, or of another class."""
    if old is None or new is None:
        return QueueingHint.QUEUE
    if (old.storage_class != new.storage_class or old.node_topology != new.node_topology
            or (new.limit or 0) > (old.limit or 0)):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP
