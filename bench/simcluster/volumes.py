"""The volume controllers a real cluster runs, played by the simulated cluster.

A scheduler that binds volumes (VolumeBinding) only writes its half: a
PersistentVolume's ``claimRef`` for a static binding, a claim's
``volume.kubernetes.io/selected-node`` for provisioning. It then waits for
kube-controller-manager's PV controller (and, for provisioning, an external
provisioner) to finish the job. Without them here, a pod with a claim would
wait forever on the stand-in where it binds on a real cluster. So the
stand-in runs three loops over its store:

:class:`PersistentVolumeController`, kube-controller-manager 1.36's
``persistentvolume-binder-controller`` plus its ``pvc-protection`` and
``pv-protection`` controllers (``pkg/controller/volume/persistentvolume``,
``.../pvcprotection``, ``.../pvprotection``), written from upstream's
syncClaim / syncVolume and checked against a real one:

* an unbound claim of an Immediate class (or of no class) is bound to the
  smallest Available volume of its class whose access modes include the
  claim's (volumes with the fewest modes first, as upstream's index
  searches), whose volume mode equals the claim's, whose labels the claim's
  selector selects and whose capacity covers the request; a volume
  pre-bound to the claim (its claimRef names it) wins whatever its size;
* a claim of a WaitForFirstConsumer class is bound only to a volume whose
  claimRef names it (what a scheduler writes); until then it gets a
  ``WaitForFirstConsumer`` event, or ``WaitForPodScheduled`` naming the
  unscheduled pods that use it;
* a claim with no volume for it and a class is handed to provisioning: the
  ``volume.kubernetes.io/storage-provisioner`` annotations (and the beta
  one) name the class's provisioner and an ``ExternalProvisioning`` event
  says who is awaited. A WaitForFirstConsumer claim is handed over only once
  it carries ``volume.kubernetes.io/selected-node``. A ``kubernetes.io/``
  provisioner (no in-tree plugin runs here) and a missing class give
  ``ProvisioningFailed``; no class gives ``FailedBinding``;
* a binding is written as upstream's bind(): the volume's claimRef (a full
  reference) with ``pv.kubernetes.io/bound-by-controller`` when the
  controller chose it, the volume's phase Bound, the claim's volumeName
  with ``pv.kubernetes.io/bind-completed`` (and bound-by-controller when it
  set volumeName), then the claim's phase Bound with the volume's access
  modes and capacity;
* a claim that loses its volume becomes Lost (``ClaimLost``, or
  ``ClaimMisbound`` when the volume names another claim);
* a volume whose claim is gone (or was recreated under a new uid) becomes
  Released and is reclaimed by its policy: Retain keeps it; Delete waits for
  its external provisioner (``pv.kubernetes.io/provisioned-by`` not under
  ``kubernetes.io/``), deletes a ``/tmp/`` hostPath one as the in-tree
  plugin does, and otherwise marks it Failed with ``VolumeFailedDelete``;
  Recycle, which no plugin here does, marks it Failed with
  ``VolumeFailedRecycle``;
* the protection finalizers that admission puts on every volume and claim
  are lifted when a deleted claim has no scheduled, running pod using it,
  and when a deleted volume is not Bound.

Deliberately faster than upstream: a pending claim is looked at again when
a volume of its class appears or frees up, and when its class changes,
rather than at the next 15-second resync.

:class:`TestProvisioner`, the external-provisioner and node plugin of the
simulated cluster's own CSI driver, :data:`PROVISIONER` (and of
:data:`CAPACITY_PROVISIONER`, the same driver under another name whose
CSIDriver has ``storageCapacity: true``, so that schedulers check its
CSIStorageCapacity objects: the stand-in writes none, a workload writes
them, as TopoLVM's controller publishes one per node):

* it provisions the claims handed to it (the storage-provisioner annotation
  names it and the class's provisioner is it): a volume named
  ``pvc-<claim uid>`` of the requested size, access and volume modes, with
  the class's reclaim policy and mount options, a CSI source of the driver,
  and a claimRef to the claim, which the PV controller then binds. With
  ``selected-node`` the volume is pinned where the class's
  ``parameters.topology`` says: ``zone`` (the default; the node's
  ``topology.kubernetes.io/zone``), ``hostname`` (its
  ``kubernetes.io/hostname``) or ``none``, and only if the node is in the
  class's ``allowedTopologies``. An Immediate claim's volume gets the
  allowedTopologies as its node affinity, or none. A failure is a
  ``ProvisioningFailed`` event and is retried when nodes or classes change;
* it deletes the Released volumes it provisioned whose policy is Delete;
* it registers the driver on every node: one CSINode per Node, as a kubelet
  does, listing the driver with ``allocatable.count`` from the node's
  :data:`ATTACH_LIMIT` annotation or the configured default (none: no
  limit), and a CSIDriver object for it.

Like the other loops of :mod:`bench.simcluster.looping` they read the store
directly and write through it, so clients see exactly the writes and events
kube-controller-manager and a provisioner would make. Not simulated: the
recycler, in-tree provisioners and their CSI migration, volume expansion and
VolumeAttributesClasses, the retroactive default StorageClass, the
attach/detach controller (no VolumeAttachments are written), CSIStorageCapacity
objects, and the events' exact repetition (each one is recorded again,
with its count, whenever the same sync repeats it). This module must never
import ``scheduler/`` or ``plugins/``.
"""

from __future__ import annotations

import copy
import logging
import re
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from bench.simcluster import errors
from bench.simcluster.defaults import PV_PROTECTION, PVC_PROTECTION, QuantityError, parse_quantity
from bench.simcluster.looping import StoreLoop
from bench.simcluster.resources import lookup
from bench.simcluster.selectors import NOTHING, SelectorError, label_selector_from_object
from bench.simcluster.store import DELETED, MATCH_ALL, Entry, Key, Store, Watcher

log = logging.getLogger("simcluster.volumes")

PVS = lookup("", "v1", "persistentvolumes")
PVCS = lookup("", "v1", "persistentvolumeclaims")
PODS = lookup("", "v1", "pods")
NODES = lookup("", "v1", "nodes")
EVENTS = lookup("", "v1", "events")
CLASSES = lookup("storage.k8s.io", "v1", "storageclasses")
CSINODES = lookup("storage.k8s.io", "v1", "csinodes")
CSIDRIVERS = lookup("storage.k8s.io", "v1", "csidrivers")

PROVISIONER = "simcluster.tandem.dev"  # the stand-in's CSI driver; a driver name is a DNS subdomain
CAPACITY_PROVISIONER = "capacity.simcluster.tandem.dev"  # the same, with its capacity checked (storageCapacity)
DRIVERS = (PROVISIONER, CAPACITY_PROVISIONER)
ATTACH_LIMIT = "simcluster.tandem.dev/csi-attach-limit"  # node annotation: the driver's allocatable.count
TOPOLOGY_PARAMETER = "topology"  # StorageClass parameter of PROVISIONER: zone | hostname | none

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"

ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"

CONTROLLER_COMPONENT = "persistentvolume-controller"
PROVISIONER_COMPONENT = f"{PROVISIONER}_simcluster"  # external-provisioner reports "<driver>_<identity>"
RETRY_AFTER = 1.0  # seconds before an object whose write failed is synced again

_TMP_HOST_PATH = re.compile(r"^/tmp/.+")  # the in-tree hostPath deleter's rule


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _annotations(obj: dict[str, Any]) -> dict[str, Any]:
    return _dict(_dict(obj.get("metadata")).get("annotations"))


def _phase(obj: dict[str, Any]) -> str:
    return _dict(obj.get("status")).get("phase") or ""


def _being_deleted(obj: dict[str, Any]) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def _storage(obj_resources: Any) -> Fraction | None:
    try:
        return parse_quantity(_dict(obj_resources).get("storage", "0"))
    except QuantityError:
        return None


# ---------------------------------------------------------------------------- matching (component-helpers storage/volume)

def storage_class_of(obj: dict[str, Any]) -> str:
    """GetPersistentVolumeClaimClass and GetPersistentVolumeClass, which read a claim and a volume alike: the
    beta annotation, else spec.storageClassName, else ""."""
    ann = _annotations(obj)
    if ANN_BETA_STORAGE_CLASS in ann:
        return ann[ANN_BETA_STORAGE_CLASS]
    return _dict(obj.get("spec")).get("storageClassName") or ""


claim_class = volume_class = storage_class_of


def claim_key(pvc: dict[str, Any]) -> Key:
    return pvc["metadata"]["namespace"], pvc["metadata"]["name"]


def claim_ref_key(pv: dict[str, Any]) -> Key | None:
    ref = _dict(pv.get("spec")).get("claimRef")
    if not isinstance(ref, dict):
        return None
    return ref.get("namespace") or "", ref.get("name") or ""


def is_bound_to_claim(pv: dict[str, Any], pvc: dict[str, Any]) -> bool:
    """IsVolumeBoundToClaim: the claimRef names the claim, and its uid if it has one."""
    ref = _dict(pv.get("spec")).get("claimRef")
    if not isinstance(ref, dict):
        return False
    meta = pvc["metadata"]
    if ref.get("name") != meta["name"] or (ref.get("namespace") or "") != meta["namespace"]:
        return False
    return not ref.get("uid") or ref["uid"] == meta.get("uid")


def _modes(obj: dict[str, Any]) -> list[str]:
    modes = _dict(obj.get("spec")).get("accessModes")
    return [m for m in modes if isinstance(m, str)] if isinstance(modes, list) else []


def access_modes_fit(pvc: dict[str, Any], pv: dict[str, Any]) -> bool:
    """CheckAccessModes: the volume offers every mode the claim asks for."""
    offered = set(_modes(pv))
    return all(m in offered for m in _modes(pvc))


def volume_mode_mismatch(pvc: dict[str, Any], pv: dict[str, Any]) -> bool:
    """CheckVolumeModeMismatches: an unset mode is Filesystem."""
    return (_dict(pvc.get("spec")).get("volumeMode") or "Filesystem") != \
        (_dict(pv.get("spec")).get("volumeMode") or "Filesystem")


def find_matching_volume(pvc: dict[str, Any], volumes: list[dict[str, Any]], delay_binding: bool) -> dict[str, Any] | None:
    """FindMatchingVolume without a node (the PV controller's path); raises ValueError on a bad selector.

    A volume pre-bound to the claim is returned at once; with ``delay_binding`` nothing else is.
    Otherwise the smallest Available volume of the claim's class that the selector selects.
    """
    spec = _dict(pvc.get("spec"))
    requested = _storage(_dict(spec.get("resources")).get("requests")) or Fraction(0)
    wanted_class = claim_class(pvc)
    selector = None
    if spec.get("selector") is not None:
        try:
            selector = label_selector_from_object(spec["selector"])
        except SelectorError as exc:
            raise ValueError(f"error creating internal label selector for claim: "
                             f"{pvc['metadata']['namespace']}/{pvc['metadata']['name']}: {exc}") from None
    best, best_size = None, None
    for pv in volumes:
        if _dict(pv.get("spec")).get("claimRef") is not None and not is_bound_to_claim(pv, pvc):
            continue
        size = _storage(_dict(pv.get("spec")).get("capacity"))
        if size is None or size < requested:
            continue
        if volume_mode_mismatch(pvc, pv) or _being_deleted(pv):
            continue
        if is_bound_to_claim(pv, pvc):
            return pv
        if delay_binding:
            continue  # the scheduler chooses, by node
        if _phase(pv) != "Available":
            continue
        if selector is not None and (selector is NOTHING or not selector(pv["metadata"].get("labels") or {})):
            continue
        if volume_class(pv) != wanted_class:
            continue
        if best_size is None or size < best_size:
            best, best_size = pv, size
    return best


def find_best_match(pvc: dict[str, Any], volumes: list[dict[str, Any]], delay_binding: bool) -> dict[str, Any] | None:
    """findByClaim: volumes grouped by their set of access modes, the sets that hold every mode the
    claim asks for tried from the fewest modes up, the first match wins."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for pv in volumes:
        groups.setdefault(tuple(sorted(set(_modes(pv)))), []).append(pv)
    wanted = set(_modes(pvc))
    for modes in sorted((m for m in groups if wanted <= set(m)), key=lambda m: (len(m), m)):
        found = find_matching_volume(pvc, groups[modes], delay_binding)
        if found is not None:
            return found
    return None


def volume_satisfies_claim(pv: dict[str, Any], pvc: dict[str, Any]) -> str:
    """checkVolumeSatisfyClaim: "" when a claim may take the volume it names, else why not."""
    if _being_deleted(pv):
        return f'the volume is marked for deletion "{pv["metadata"]["name"]}"'
    requested = _storage(_dict(_dict(pvc.get("spec")).get("resources")).get("requests")) or Fraction(0)
    size = _storage(_dict(pv.get("spec")).get("capacity"))
    if size is None or int(size) < int(requested):  # upstream compares Value(), whole bytes
        return "requested PV is too small"
    if volume_class(pv) != claim_class(pvc):
        return "storageClassName does not match"
    if volume_mode_mismatch(pvc, pv):
        return "incompatible volumeMode"
    if not access_modes_fit(pvc, pv):
        return "incompatible accessMode"
    return ""


def claim_reference(pvc: dict[str, Any]) -> dict[str, Any]:
    """reference.GetReference of a claim, as a volume's claimRef."""
    meta = pvc["metadata"]
    return {"kind": "PersistentVolumeClaim", "namespace": meta["namespace"], "name": meta["name"],
            "uid": meta.get("uid", ""), "apiVersion": "v1", "resourceVersion": meta.get("resourceVersion", "")}


def claims_of_pod(pod: dict[str, Any]) -> list[tuple[str, bool]]:
    """(claim name, is an ephemeral volume's claim) for each claim the pod's volumes use."""
    out = []
    volumes = _dict(pod.get("spec")).get("volumes")
    for v in volumes if isinstance(volumes, list) else ():
        if not isinstance(v, dict):
            continue
        ref = v.get("persistentVolumeClaim")
        if isinstance(ref, dict) and ref.get("claimName"):
            out.append((ref["claimName"], False))
        elif isinstance(v.get("ephemeral"), dict):
            out.append((f"{pod['metadata']['name']}-{v.get('name', '')}", True))  # ephemeral.VolumeClaimName
    return out


# ---------------------------------------------------------------------------- events

class EventRecorder:
    """core/v1 Events as client-go's recorder writes them: one per object, reason and message, whose
    count and lastTimestamp grow when it repeats. Cluster-scoped objects' events go to "default"."""

    def __init__(self, store: Store, component: str) -> None:
        self.store = store
        self.component = component
        self._seen: dict[tuple[str, str, str, str], Key] = {}

    def event(self, rt_kind: str, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        meta = obj["metadata"]
        ns = meta.get("namespace") or "default"
        now = self.store.now()
        key = (meta.get("uid", ""), type_, reason, message)
        try:
            known = self._seen.get(key)
            if known is not None:
                prior = self.store.get_obj(EVENTS, *known)
                if prior is not None:
                    prior["count"] = (prior.get("count") or 1) + 1
                    prior["lastTimestamp"] = now
                    self.store.update(EVENTS, known[0], known[1], prior)
                    return
            involved = {"kind": rt_kind, "name": meta["name"], "uid": meta.get("uid", ""), "apiVersion": "v1",
                        "resourceVersion": meta.get("resourceVersion", "")}
            if meta.get("namespace"):
                involved["namespace"] = meta["namespace"]
            body = {"apiVersion": "v1", "kind": "Event",
                    "metadata": {"name": f"{meta['name']}.{time.time_ns():x}", "namespace": ns},
                    "involvedObject": involved, "reason": reason, "message": message, "type": type_,
                    "source": {"component": self.component}, "reportingComponent": self.component,
                    "reportingInstance": "", "firstTimestamp": now, "lastTimestamp": now, "count": 1,
                    "eventTime": None}
            entry = self.store.create(EVENTS, ns, body)
            self._seen[key] = entry.key
        except errors.APIError as exc:  # an event is best effort, as the recorder's are
            log.warning("event %s on %s/%s not recorded: %s", reason, ns, meta["name"], exc.message)


# ---------------------------------------------------------------------------- the PV controller

@dataclass(slots=True)
class _Cursors:
    volumes: Watcher
    claims: Watcher
    classes: Watcher
    pods: Watcher


@dataclass(slots=True)
class _Index:
    """What the PV controller keeps of the store so a sync never scans it all."""

    volumes_by_class: dict[str, set[str]] = field(default_factory=dict)
    volume_facts: dict[str, tuple[str, Key | None]] = field(default_factory=dict)  # name -> (class, claimRef)
    volumes_by_claim: dict[Key, set[str]] = field(default_factory=dict)
    unbound_by_class: dict[str, set[Key]] = field(default_factory=dict)   # claims without volumeName
    claim_facts: dict[Key, tuple[str, bool]] = field(default_factory=dict)  # claim -> (class, unbound)
    terminating: dict[str, set[str]] = field(default_factory=dict)  # ns -> claims being deleted
    users: dict[Key, set[str]] = field(default_factory=dict)        # claim -> pods whose volumes name it
    pod_claims: dict[Key, list[str]] = field(default_factory=dict)  # pod -> the claims it names

    def volume(self, name: str, pv: dict[str, Any] | None) -> None:
        old = self.volume_facts.pop(name, None)
        if old is not None:
            _discard(self.volumes_by_class, old[0], name)
            if old[1] is not None:
                _discard(self.volumes_by_claim, old[1], name)
        if pv is None:
            return
        facts = (volume_class(pv), claim_ref_key(pv))
        self.volume_facts[name] = facts
        self.volumes_by_class.setdefault(facts[0], set()).add(name)
        if facts[1] is not None:
            self.volumes_by_claim.setdefault(facts[1], set()).add(name)

    def claim(self, key: Key, pvc: dict[str, Any] | None) -> None:
        old = self.claim_facts.pop(key, None)
        if old is not None and old[1]:
            _discard(self.unbound_by_class, old[0], key)
        _discard(self.terminating, key[0], key[1])
        if pvc is None:
            return
        facts = (claim_class(pvc), not _dict(pvc.get("spec")).get("volumeName"))
        self.claim_facts[key] = facts
        if facts[1]:
            self.unbound_by_class.setdefault(facts[0], set()).add(key)
        if _being_deleted(pvc):
            self.terminating.setdefault(key[0], set()).add(key[1])

    def pod(self, key: Key, pod: dict[str, Any] | None) -> None:
        for name in self.pod_claims.pop(key, ()):
            _discard(self.users, (key[0], name), key[1])
        if pod is None:
            return
        names = [name for name, _ in claims_of_pod(pod)]
        if names:
            self.pod_claims[key] = names
            for name in names:
                self.users.setdefault((key[0], name), set()).add(key[1])


def _discard(index: dict[Any, set[Any]], key: Any, value: Any) -> None:
    members = index.get(key)
    if members is not None:
        members.discard(value)
        if not members:
            del index[key]


class PersistentVolumeController(StoreLoop):
    """kube-controller-manager's PV binder and protection controllers; started by :class:`SimCluster`."""

    def __init__(self, store: Store, tick: float = 0.02) -> None:
        super().__init__("simcluster-pv-controller", tick, log)
        self.store = store
        self.recorder = EventRecorder(store, CONTROLLER_COMPONENT)
        self._index = _Index()
        self._dirty_volumes: set[str] = set()
        self._dirty_claims: set[Key] = set()
        self._retry: dict[tuple[str, Any], float] = {}  # ("pv", name) | ("pvc", key) -> clock time
        self.writes = 0

    # ------------------------------------------------------------------ loop

    def _resync(self) -> _Cursors:
        rv = str(self.store.rv)
        cursors = _Cursors(*(self.store.watcher(rt, "", MATCH_ALL, rv, send_initial=False)
                             for rt in (PVS, PVCS, CLASSES, PODS)))
        self._index = _Index()
        for entry in list(self.store.table(PODS).objects.values()):
            self._on_pod(entry)
        for entry in list(self.store.table(PVS).objects.values()):
            self._index.volume(entry.key[1], entry.obj())
            self._dirty_volumes.add(entry.key[1])
        for entry in list(self.store.table(PVCS).objects.values()):
            self._index.claim(entry.key, entry.obj())
            self._dirty_claims.add(entry.key)
        return cursors

    def _step(self, cursors: _Cursors) -> None:
        self._drain(cursors)
        now = self.store.clock()
        for what, when in list(self._retry.items()):
            if when <= now:
                del self._retry[what]
                if what[0] == "pv":
                    self._dirty_volumes.add(what[1])
                else:
                    self._dirty_claims.add(what[1])
        # volumes first: a volume's sync may hand its claim to this same step
        volumes, self._dirty_volumes = self._dirty_volumes, set()
        for name in sorted(volumes):
            self._guarded(("pv", name), self._sync_volume, name)
        claims, self._dirty_claims = self._dirty_claims, set()
        for key in sorted(claims):
            self._guarded(("pvc", key), self._sync_claim, key)

    def _guarded(self, what: tuple[str, Any], sync: Any, arg: Any) -> None:
        try:
            sync(arg)
        except errors.APIError as exc:
            if exc.code == 409:  # changed under us: synced again from what is stored
                (self._dirty_volumes if what[0] == "pv" else self._dirty_claims).add(arg)
            elif exc.code != 404:
                log.warning("pv controller: %s %s: %s", what[0], arg, exc.message)
                self._retry[what] = self.store.clock() + RETRY_AFTER
        except Exception:  # one object's bug must not starve the others: retried, as upstream requeues
            log.exception("pv controller: syncing %s %s failed; retrying", what[0], arg)
            self._retry[what] = self.store.clock() + RETRY_AFTER

    def _drain(self, cursors: _Cursors) -> None:
        while True:
            seen = False
            for ev in cursors.volumes.poll_events():
                seen = True
                name = ev.new.key[1]
                pv = None if ev.type == DELETED else ev.new.obj()
                self._index.volume(name, pv)
                if pv is None:
                    # a bound claim whose volume is gone becomes Lost
                    old = ev.new.obj()
                    ref = claim_ref_key(old)
                    if ref is not None:
                        self._dirty_claims.add(ref)
                    continue
                self._dirty_volumes.add(name)
                if (_phase(pv) == "Available" or _dict(pv.get("spec")).get("claimRef") is None) \
                        and not self._class_delays(volume_class(pv)):
                    # a volume to take: the pending claims of its class look again (upstream waits for
                    # its periodic resync). A delayed class's claims take only what a scheduler gives them.
                    self._dirty_claims.update(self._index.unbound_by_class.get(volume_class(pv), ()))
            for ev in cursors.claims.poll_events():
                seen = True
                key = ev.new.key
                pvc = None if ev.type == DELETED else ev.new.obj()
                self._index.claim(key, pvc)
                if pvc is not None:
                    self._dirty_claims.add(key)
                else:
                    # the volumes bound to it are released
                    self._dirty_volumes.update(self._index.volumes_by_claim.get(key, ()))
                    volume = _dict(ev.new.obj().get("spec")).get("volumeName")
                    if volume:
                        self._dirty_volumes.add(volume)
            for ev in cursors.classes.poll_events():
                seen = True
                self._dirty_claims.update(self._index.unbound_by_class.get(ev.new.key[1], ()))
            for ev in cursors.pods.poll_events():
                seen = True
                self._on_pod(ev.new, ev.type == DELETED)
            if not seen:
                return

    def _on_pod(self, entry: Entry, deleted: bool = False) -> None:
        key = entry.key
        if not deleted and b'"persistentVolumeClaim"' not in entry.raw and b'"ephemeral"' not in entry.raw:
            if key in self._index.pod_claims:
                self._index.pod(key, None)
            return  # most pods name no claim: not parsed
        self._index.pod(key, None if deleted else entry.obj())
        ns = key[0]
        terminating = self._index.terminating.get(ns)
        if terminating:  # a pod that goes, or finishes, may free a claim being deleted
            self._dirty_claims.update((ns, name) for name in terminating)

    # ------------------------------------------------------------------ claims

    def _sync_claim(self, key: Key) -> None:
        pvc = self.store.get_obj(PVCS, *key)
        if pvc is None:
            return
        if _being_deleted(pvc) and PVC_PROTECTION in (pvc["metadata"].get("finalizers") or ()):
            if not self._claim_in_use(pvc):
                self._remove_finalizer(PVCS, pvc, PVC_PROTECTION)
                return
        if ANN_BIND_COMPLETED in _annotations(pvc):
            self._sync_bound_claim(pvc)
        else:
            self._sync_unbound_claim(pvc)

    def _claim_in_use(self, pvc: dict[str, Any]) -> bool:
        """The pvc-protection controller's podUsesPVC: a scheduled pod names it, in any phase, until the pod
        is gone; an ephemeral volume's claim (one the pod controls) until the pod is shut down (being
        deleted with grace 0)."""
        ns, name = claim_key(pvc)
        owners = {r.get("uid") for r in pvc["metadata"].get("ownerReferences") or ()
                  if isinstance(r, dict) and r.get("controller") is True}
        for pod_name in self._index.users.get((ns, name), ()):
            pod = self.store.get_obj(PODS, ns, pod_name)
            if pod is None or not _dict(pod.get("spec")).get("nodeName"):
                continue
            meta = pod["metadata"]
            shut_down = bool(meta.get("deletionTimestamp")) and meta.get("deletionGracePeriodSeconds") == 0
            for claim, ephemeral in claims_of_pod(pod):
                if claim == name and (not ephemeral or (not shut_down and meta.get("uid") in owners)):
                    return True
        return False

    def _delay_binding(self, pvc: dict[str, Any]) -> bool:
        """IsDelayBindingMode: the claim's class binds on first consumer (a missing class does not)."""
        return self._class_delays(claim_class(pvc))

    def _class_delays(self, name: str) -> bool:
        if not name:
            return False
        sc = self.store.get_obj(CLASSES, "", name)
        return sc is not None and sc.get("volumeBindingMode") == "WaitForFirstConsumer"

    def _volumes_for(self, pvc: dict[str, Any], delay: bool) -> list[dict[str, Any]]:
        # delayed binding takes only a volume pre-bound to the claim: only those need looking at
        names = self._index.volumes_by_claim.get(claim_key(pvc), set()) if delay else \
            self._index.volumes_by_class.get(claim_class(pvc), set()) | \
            self._index.volumes_by_claim.get(claim_key(pvc), set())
        found = (self.store.get_obj(PVS, "", n) for n in sorted(names))
        return [pv for pv in found if pv is not None]

    def _sync_unbound_claim(self, pvc: dict[str, Any]) -> None:
        spec = _dict(pvc.get("spec"))
        wanted = spec.get("volumeName")
        if not wanted:
            delay = self._delay_binding(pvc)
            try:
                pv = find_best_match(pvc, self._volumes_for(pvc, delay), delay)
            except ValueError as exc:
                log.warning("pv controller: %s", exc)
                return
            if pv is not None:
                self._bind(pv, pvc)
                return
            if delay and ANN_SELECTED_NODE not in _annotations(pvc):
                self._event_waiting_for_consumer(pvc)
            elif claim_class(pvc):
                self._provision(pvc)
                return
            else:
                self.recorder.event("PersistentVolumeClaim", pvc, "Normal", "FailedBinding",
                                    "no persistent volumes available for this claim and no storage class is set")
            self._claim_status(pvc, "Pending", None)
            return
        pv = self.store.get_obj(PVS, "", wanted)
        if pv is None:
            self._claim_status(pvc, "Pending", None)  # asked for a volume that does not exist (yet)
            return
        if _dict(pv.get("spec")).get("claimRef") is None:
            why = volume_satisfies_claim(pv, pvc)
            if why:
                self.recorder.event("PersistentVolumeClaim", pvc, "Warning", "VolumeMismatch",
                                    f'Cannot bind to requested volume "{wanted}": {why}')
                self._claim_status(pvc, "Pending", None)
            else:
                self._bind(pv, pvc)
        elif is_bound_to_claim(pv, pvc):
            self._bind(pv, pvc)
        elif ANN_BOUND_BY_CONTROLLER not in _annotations(pvc):
            self._claim_status(pvc, "Pending", None)  # a volume someone else holds: retried later
        else:
            log.warning("pv controller: invalid binding of claim %s/%s to volume %s: volume already claimed",
                        *claim_key(pvc), wanted)

    def _event_waiting_for_consumer(self, pvc: dict[str, Any]) -> None:
        """emitEventForUnboundDelayBindingClaim."""
        ns, name = claim_key(pvc)
        waiting = []
        for pod_name in sorted(self._index.users.get((ns, name), ())):
            pod = self.store.get_obj(PODS, ns, pod_name)
            if pod is not None and not _dict(pod.get("spec")).get("nodeName"):
                waiting.append(pod_name)
        if not waiting:
            self.recorder.event("PersistentVolumeClaim", pvc, "Normal", "WaitForFirstConsumer",
                                "waiting for first consumer to be created before binding")
        elif len(waiting) == 1:
            self.recorder.event("PersistentVolumeClaim", pvc, "Normal", "WaitForPodScheduled",
                                f"waiting for pod {waiting[0]} to be scheduled")
        else:
            self.recorder.event("PersistentVolumeClaim", pvc, "Normal", "WaitForPodScheduled",
                                f"waiting for pods {','.join(waiting)} to be scheduled")

    def _provision(self, pvc: dict[str, Any]) -> None:
        """provisionClaim: hand the claim to its class's provisioner."""
        class_name = claim_class(pvc)
        sc = self.store.get_obj(CLASSES, "", class_name)
        if sc is None:
            self.recorder.event("PersistentVolumeClaim", pvc, "Warning", "ProvisioningFailed",
                                f'storageclass.storage.k8s.io "{class_name}" not found')
            return  # retried when the class appears
        provisioner = sc.get("provisioner") or ""
        if provisioner.startswith("kubernetes.io/"):
            # no in-tree volume plugin provisions here (nor kubernetes.io/no-provisioner anywhere)
            self.recorder.event("PersistentVolumeClaim", pvc, "Warning", "ProvisioningFailed",
                                f"no volume plugin matched name: {provisioner}")
            return
        ann = _annotations(pvc)
        if ann.get(ANN_STORAGE_PROVISIONER) != provisioner:
            pvc["metadata"]["annotations"] = {**ann, ANN_BETA_STORAGE_PROVISIONER: provisioner,
                                              ANN_STORAGE_PROVISIONER: provisioner}
            pvc = self._write(PVCS, pvc)
        self.recorder.event(
            "PersistentVolumeClaim", pvc, "Normal", "ExternalProvisioning",
            f"Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually "
            "by the system administrator. If volume creation is delayed, please verify that the provisioner is "
            "running and correctly registered.")

    def _sync_bound_claim(self, pvc: dict[str, Any]) -> None:
        wanted = _dict(pvc.get("spec")).get("volumeName")
        if not wanted:
            self._claim_lost(pvc, "ClaimLost",
                             "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!")
            return
        pv = self.store.get_obj(PVS, "", wanted)
        if pv is None:
            self._claim_lost(pvc, "ClaimLost", "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
            return
        ref = _dict(pv.get("spec")).get("claimRef")
        if ref is None or ref.get("uid") == pvc["metadata"].get("uid"):
            self._bind(pv, pvc)  # unbound volume re-bound, or a no-op when all is in place
        else:
            self._claim_lost(pvc, "ClaimMisbound", "Two claims are bound to the same volume, this one is bound incorrectly")

    def _claim_lost(self, pvc: dict[str, Any], reason: str, message: str) -> None:
        if _phase(pvc) != "Lost":  # updateClaimStatusWithEvent: the event only with the change
            pvc = self._claim_status(pvc, "Lost", None)
            self.recorder.event("PersistentVolumeClaim", pvc, "Warning", reason, message)

    # ------------------------------------------------------------------ volumes

    def _sync_volume(self, name: str) -> None:
        pv = self.store.get_obj(PVS, "", name)
        if pv is None:
            return
        if _being_deleted(pv) and PV_PROTECTION in (pv["metadata"].get("finalizers") or ()) \
                and _phase(pv) != "Bound":
            self._remove_finalizer(PVS, pv, PV_PROTECTION)  # the pv-protection controller
            return
        ref = _dict(pv.get("spec")).get("claimRef")
        if not isinstance(ref, dict) or not ref.get("uid"):
            self._volume_phase(pv, "Available")  # unused, or pre-bound to a claim the claim's sync binds
            return
        pvc = self.store.get_obj(PVCS, ref.get("namespace") or "", ref.get("name") or "")
        if pvc is not None and pvc["metadata"].get("uid") != ref["uid"]:
            pvc = None  # deleted and created again under the same name
        if pvc is None:
            if _phase(pv) not in ("Released", "Failed"):
                pv = self._volume_phase(pv, "Released")
            self._reclaim(pv)
            return
        bound_to = _dict(pvc.get("spec")).get("volumeName")
        if not bound_to:
            self._dirty_claims.add(claim_key(pvc))  # the claim's sync completes the binding
        elif bound_to == name:
            self._volume_phase(pv, "Bound")
        elif ANN_PROVISIONED_BY in _annotations(pv) and \
                _dict(pv.get("spec")).get("persistentVolumeReclaimPolicy") == "Delete":
            # provisioned for a claim that was bound elsewhere: not needed
            if _phase(pv) not in ("Released", "Failed"):
                pv = self._volume_phase(pv, "Released")
            self._reclaim(pv)
        else:
            self._unbind(pv)

    def _unbind(self, pv: dict[str, Any]) -> None:
        """unbindVolume: what the controller bound it lets go; a user's pre-binding keeps its name."""
        ann = _annotations(pv)
        if ANN_BOUND_BY_CONTROLLER in ann:
            pv["spec"].pop("claimRef", None)
            ann = {k: v for k, v in ann.items() if k != ANN_BOUND_BY_CONTROLLER}
            if ann:
                pv["metadata"]["annotations"] = ann
            else:
                pv["metadata"].pop("annotations", None)
        else:
            pv["spec"]["claimRef"].pop("uid", None)
        pv = self._write(PVS, pv)
        self._volume_phase(pv, "Available")

    def _reclaim(self, pv: dict[str, Any]) -> None:
        policy = _dict(pv.get("spec")).get("persistentVolumeReclaimPolicy")
        if policy == "Retain":
            return
        if policy == "Recycle":
            self._volume_failed(pv, "VolumeFailedRecycle", "No recycler plugin found for the volume!")
            return
        if policy != "Delete":
            self.recorder.event("PersistentVolume", pv, "Warning", "VolumeUnknownReclaimPolicy",
                                "Volume has unrecognized PersistentVolumeReclaimPolicy")
            return
        if _being_deleted(pv):
            return
        provisioned_by = _annotations(pv).get(ANN_PROVISIONED_BY)
        if provisioned_by and not provisioned_by.startswith("kubernetes.io/"):
            return  # its external provisioner deletes it
        name = pv["metadata"]["name"]
        host_path = _dict(pv["spec"].get("hostPath"))
        if "hostPath" in pv["spec"]:
            path = host_path.get("path") or ""
            if not _TMP_HOST_PATH.match(path):
                self._volume_failed(pv, "VolumeFailedDelete",
                                    f"host_path deleter only supports /tmp/.+ but received provided {path}")
                return
            self.store.delete(PVS, "", name)
            self.writes += 1
            return
        self._volume_failed(pv, "VolumeFailedDelete",
                            f'error getting deleter volume plugin for volume "{name}": no volume plugin matched')

    def _volume_failed(self, pv: dict[str, Any], reason: str, message: str) -> None:
        """updateVolumePhaseWithEvent: phase Failed with the message, and the event with the change."""
        if _phase(pv) == "Failed":
            return
        pv = self._volume_phase(pv, "Failed", message)
        self.recorder.event("PersistentVolume", pv, "Warning", reason, message)

    # ------------------------------------------------------------------ writes

    def _bind(self, pv: dict[str, Any], pvc: dict[str, Any]) -> None:
        """bind(): the volume's claimRef, its phase, the claim's volumeName, its phase; each only if needed."""
        spec = pv.setdefault("spec", {})
        ann = _annotations(pv)
        ref = _dict(spec.get("claimRef"))
        meta = pvc["metadata"]
        dirty = False
        chose = not is_bound_to_claim(pv, pvc)
        if not ref or ref.get("name") != meta["name"] or ref.get("namespace") != meta["namespace"] \
                or ref.get("uid") != meta.get("uid"):
            spec["claimRef"] = claim_reference(pvc)
            dirty = True
        if chose and ANN_BOUND_BY_CONTROLLER not in ann:
            pv["metadata"]["annotations"] = {**ann, ANN_BOUND_BY_CONTROLLER: "yes"}
            dirty = True
        if dirty:
            pv = self._write(PVS, pv)
        pv = self._volume_phase(pv, "Bound")

        cspec = pvc.setdefault("spec", {})
        cann = dict(_annotations(pvc))
        dirty = False
        if cspec.get("volumeName") != pv["metadata"]["name"]:
            cspec["volumeName"] = pv["metadata"]["name"]
            cann.setdefault(ANN_BOUND_BY_CONTROLLER, "yes")
            dirty = True
        if ANN_BIND_COMPLETED not in cann:
            cann[ANN_BIND_COMPLETED] = "yes"
            dirty = True
        if dirty:
            pvc["metadata"]["annotations"] = cann
            pvc = self._write(PVCS, pvc)
        self._claim_status(pvc, "Bound", pv)

    def _write(self, rt: Any, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        entry = self.store.update(rt, meta.get("namespace", ""), meta["name"], obj)
        self.writes += 1
        return entry.obj()

    def _volume_phase(self, pv: dict[str, Any], phase: str, message: str = "") -> dict[str, Any]:
        """updateVolumePhase: phase and message through the status subresource, when they change."""
        status = _dict(pv.get("status"))
        if status.get("phase") == phase and (status.get("message") or "") == message:
            return pv
        status = {k: v for k, v in status.items() if k != "message"}
        status["phase"] = phase
        if message:
            status["message"] = message
        pv["status"] = status
        entry = self.store.update(PVS, "", pv["metadata"]["name"], pv, "status")
        self.writes += 1
        return entry.obj()

    def _claim_status(self, pvc: dict[str, Any], phase: str, pv: dict[str, Any] | None) -> dict[str, Any]:
        """updateClaimStatus: the phase, and the volume's access modes and capacity (none without one)."""
        status = dict(_dict(pvc.get("status")))
        before = dict(status)
        status["phase"] = phase
        if pv is None:
            status.pop("accessModes", None)
            status.pop("capacity", None)
        else:
            pspec = _dict(pv.get("spec"))
            if status.get("accessModes") != pspec.get("accessModes"):
                status["accessModes"] = copy.deepcopy(pspec.get("accessModes"))
            capacity = _dict(pspec.get("capacity"))
            have = _storage(status.get("capacity"))
            if "storage" not in _dict(status.get("capacity")) or have != _storage(capacity):
                status["capacity"] = copy.deepcopy(capacity)
        if status == before:
            return pvc
        pvc["status"] = status
        meta = pvc["metadata"]
        entry = self.store.update(PVCS, meta["namespace"], meta["name"], pvc, "status")
        self.writes += 1
        return entry.obj()

    def _remove_finalizer(self, rt: Any, obj: dict[str, Any], finalizer: str) -> None:
        meta = obj["metadata"]
        meta["finalizers"] = [f for f in meta.get("finalizers") or () if f != finalizer]
        self.store.update(rt, meta.get("namespace", ""), meta["name"], obj)
        self.writes += 1


# ---------------------------------------------------------------------------- the test provisioner

@dataclass(frozen=True, slots=True)
class VolumeConfig:
    """The stand-in's volume controllers: on in :class:`SimCluster` unless it is given ``volumes=None``."""

    attach_limit: int | None = None  # the driver's CSINode allocatable.count when a node does not say
    tick: float = 0.02


@dataclass(slots=True)
class _ProvisionerCursors:
    claims: Watcher
    volumes: Watcher
    classes: Watcher
    nodes: Watcher


class TestProvisioner(StoreLoop):
    """The stand-in's CSI driver: external-provisioner, deleter and node registration."""

    __test__ = False  # not a pytest class, whatever its name

    def __init__(self, store: Store, config: VolumeConfig) -> None:
        super().__init__("simcluster-provisioner", config.tick, log)
        self.store = store
        self.config = config
        self.recorder = EventRecorder(store, PROVISIONER_COMPONENT)
        self._claims: set[Key] = set()     # to look at
        self._waiting: set[Key] = set()    # failed; looked at again when nodes or classes change
        self._volumes: set[str] = set()
        self._nodes: set[str] = set()
        self.provisioned = 0

    def _resync(self) -> _ProvisionerCursors:
        rv = str(self.store.rv)
        cursors = _ProvisionerCursors(*(self.store.watcher(rt, "", MATCH_ALL, rv, send_initial=False)
                                        for rt in (PVCS, PVS, CLASSES, NODES)))
        register_driver(self.store)
        self._claims.update(self.store.table(PVCS).objects)
        self._volumes.update(k[1] for k in self.store.table(PVS).objects)
        self._nodes.update(k[1] for k in self.store.table(NODES).objects)
        self._nodes.update(k[1] for k in self.store.table(CSINODES).objects)  # one whose node is gone
        return cursors

    def _step(self, cursors: _ProvisionerCursors) -> None:
        while True:
            seen = False
            for ev in cursors.claims.poll_events():
                seen = True
                if ev.type == DELETED:
                    self._claims.discard(ev.new.key)
                    self._waiting.discard(ev.new.key)
                else:
                    self._claims.add(ev.new.key)
            for ev in cursors.volumes.poll_events():
                seen = True
                if ev.type != DELETED:
                    self._volumes.add(ev.new.key[1])
            for watcher in (cursors.classes, cursors.nodes):
                events = watcher.poll_events()
                if events:
                    seen = True
                    self._claims |= self._waiting
                    self._waiting.clear()
                if watcher is cursors.nodes:
                    self._nodes.update(ev.new.key[1] for ev in events)
            if not seen:
                break
        for name in sorted(self._nodes):
            self._guarded(self._sync_csinode, name)
        self._nodes.clear()
        for name in sorted(self._volumes):
            self._guarded(self._sync_volume, name)
        self._volumes.clear()
        claims, self._claims = self._claims, set()
        for key in sorted(claims):
            self._guarded(self._sync_claim, key)

    def _guarded(self, sync: Any, arg: Any) -> None:
        try:
            sync(arg)
        except errors.APIError as exc:
            if exc.code not in (404, 409):
                log.warning("provisioner: %s: %s", arg, exc.message)
            if isinstance(arg, tuple):
                self._waiting.add(arg)
        except Exception:
            log.exception("provisioner: %s failed", arg)

    # ------------------------------------------------------------------ the driver's registration

    def _sync_csinode(self, name: str) -> None:
        register_node(self.store, name, self.config.attach_limit)

    # ------------------------------------------------------------------ deleting

    def _sync_volume(self, name: str) -> None:
        pv = self.store.get_obj(PVS, "", name)
        if pv is None or _being_deleted(pv):
            return
        if _annotations(pv).get(ANN_PROVISIONED_BY) in DRIVERS and _phase(pv) == "Released" \
                and _dict(pv.get("spec")).get("persistentVolumeReclaimPolicy") == "Delete":
            self.store.delete(PVS, "", name)

    # ------------------------------------------------------------------ provisioning

    def _sync_claim(self, key: Key) -> None:
        pvc = self.store.get_obj(PVCS, *key)
        if pvc is None or _being_deleted(pvc) or _dict(pvc.get("spec")).get("volumeName"):
            return
        ann = _annotations(pvc)
        provisioner = ann.get(ANN_STORAGE_PROVISIONER) or ann.get(ANN_BETA_STORAGE_PROVISIONER)
        if provisioner not in DRIVERS:
            return
        sc = self.store.get_obj(CLASSES, "", claim_class(pvc))
        if sc is None or sc.get("provisioner") != provisioner:
            return
        node_name = ann.get(ANN_SELECTED_NODE)
        if sc.get("volumeBindingMode") == "WaitForFirstConsumer" and not node_name:
            return  # external-provisioner waits for the scheduler's choice
        name = f"pvc-{pvc['metadata']['uid']}"
        if self.store.get_obj(PVS, "", name) is not None:
            return  # provisioned already; the PV controller binds it
        try:
            affinity = self._node_affinity(sc, node_name)
            pv = provisioned_volume(name, pvc, sc, affinity)
        except ProvisioningError as exc:
            self.recorder.event("PersistentVolumeClaim", pvc, "Warning", "ProvisioningFailed",
                                f'failed to provision volume with StorageClass "{sc["metadata"]["name"]}": {exc}')
            self._waiting.add(key)
            return
        self.recorder.event("PersistentVolumeClaim", pvc, "Normal", "Provisioning",
                            f'External provisioner is provisioning volume for claim "{key[0]}/{key[1]}"')
        self.store.create(PVS, "", pv)
        self.provisioned += 1
        self.recorder.event("PersistentVolumeClaim", pvc, "Normal", "ProvisioningSucceeded",
                            f"Successfully provisioned volume {name}")

    def _node_affinity(self, sc: dict[str, Any], node_name: str | None) -> dict[str, Any] | None:
        allowed = sc.get("allowedTopologies") if isinstance(sc.get("allowedTopologies"), list) else []
        if not node_name:
            if not allowed:
                return None
            terms = [{"matchExpressions": [{"key": e.get("key"), "operator": "In", "values": list(e.get("values") or [])}
                                           for e in _dict(t).get("matchLabelExpressions") or ()]} for t in allowed]
            return {"required": {"nodeSelectorTerms": terms}}
        node = self.store.get_obj(NODES, "", node_name)
        if node is None:
            raise ProvisioningError(f'failed to get target node: node "{node_name}" not found')
        labels = node["metadata"].get("labels") or {}
        if allowed and not any(_in_topology(labels, t) for t in allowed):
            raise ProvisioningError(f'selected node "{node_name}" is not in the allowed topologies of the class')
        mode = _dict(sc.get("parameters")).get(TOPOLOGY_PARAMETER, "zone")
        if mode == "none":
            return None
        if mode not in ("zone", "hostname"):
            raise ProvisioningError(f'parameter {TOPOLOGY_PARAMETER}: "{mode}" is not one of zone, hostname, none')
        key = ZONE_LABEL if mode == "zone" else HOSTNAME_LABEL
        if key not in labels:
            raise ProvisioningError(f'selected node "{node_name}" has no label {key}')
        return {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "In", "values": [labels[key]]}]}]}}


class ProvisioningError(Exception):
    """Why a claim cannot be provisioned now; the ProvisioningFailed event's message."""


def _in_topology(labels: dict[str, str], term: Any) -> bool:
    return all(labels.get(e.get("key")) in (e.get("values") or ())
               for e in _dict(term).get("matchLabelExpressions") or () if isinstance(e, dict))


def provisioned_volume(name: str, pvc: dict[str, Any], sc: dict[str, Any],
                       affinity: dict[str, Any] | None) -> dict[str, Any]:
    """The volume external-provisioner would create for ``pvc`` of class ``sc``."""
    spec = _dict(pvc.get("spec"))
    request = _dict(_dict(spec.get("resources")).get("requests")).get("storage")
    if request is None:
        raise ProvisioningError("the claim requests no storage")
    pv_spec: dict[str, Any] = {
        "accessModes": list(_modes(pvc)), "capacity": {"storage": request},
        "claimRef": claim_reference(pvc),
        "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy") or "Delete",
        "storageClassName": sc["metadata"]["name"], "volumeMode": spec.get("volumeMode") or "Filesystem",
        "csi": {"driver": sc["provisioner"], "volumeHandle": name},
    }
    if sc.get("mountOptions"):
        pv_spec["mountOptions"] = list(sc["mountOptions"])
    if affinity is not None:
        pv_spec["nodeAffinity"] = affinity
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {ANN_PROVISIONED_BY: sc["provisioner"]}}, "spec": pv_spec}


def csinode_for(node: dict[str, Any], attach_limit: int | None) -> dict[str, Any]:
    """The CSINode a kubelet registers for ``node`` with the stand-in's driver."""
    meta = node["metadata"]
    driver: dict[str, Any] = {"name": PROVISIONER, "nodeID": meta["name"],
                              "topologyKeys": [HOSTNAME_LABEL, ZONE_LABEL]}
    raw = (meta.get("annotations") or {}).get(ATTACH_LIMIT)
    limit = attach_limit
    if raw is not None:
        try:
            limit = int(raw)
        except ValueError:
            log.warning("node %s: annotation %s=%r is not a count; using the default", meta["name"], ATTACH_LIMIT, raw)
    if limit is not None:
        driver["allocatable"] = {"count": limit}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
            "metadata": {"name": meta["name"], "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta["uid"]}]},
            "spec": {"drivers": [driver]}}


def register_driver(store: Store) -> None:
    """The CSIDriver objects of :data:`DRIVERS`, unless there are."""
    for name in DRIVERS:
        if store.get_obj(CSIDRIVERS, "", name) is not None:
            continue
        store.create(CSIDRIVERS, "", {
            "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": name},
            # the defaults of storage/v1 CSIDriverSpec, written out: nothing defaults them here
            "spec": {"attachRequired": True, "podInfoOnMount": False, "requiresRepublish": False,
                     "storageCapacity": name == CAPACITY_PROVISIONER, "fsGroupPolicy": "ReadWriteOnceWithFSType",
                     "volumeLifecycleModes": ["Persistent"], "seLinuxMount": False}})


def register_node(store: Store, name: str, attach_limit: int | None) -> None:
    """Node ``name``'s CSINode as its kubelet would keep it: made for the node, gone with it."""
    node = store.get_obj(NODES, "", name)
    have = store.get_obj(CSINODES, "", name)
    if node is None:
        if have is not None:  # the garbage collector follows the owner reference upstream
            store.delete(CSINODES, "", name)
        return
    if have is not None and any(r.get("uid") == node["metadata"]["uid"]
                                for r in have["metadata"].get("ownerReferences") or ()):
        return
    if have is not None:  # a node deleted and created again under its name
        store.delete(CSINODES, "", name)
    store.create(CSINODES, "", csinode_for(node, attach_limit))
