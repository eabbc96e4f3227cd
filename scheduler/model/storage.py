"""PersistentVolumeClaims, PersistentVolumes and StorageClasses as the volume plugins read them, and a pod's claims."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scheduler.model.csi import in_tree_volume
from scheduler.model.fields import _d, _l
from scheduler.model.pod import Pod
from scheduler.model.quantity import QuantityError, parse_quantity
from scheduler.model.selectors import LabelSelector, parse_label_selector

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"          # the PV controller finished binding a claim
ANN_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"    # the beta field, still read first upstream
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"      # the node a scheduler picked for provisioning
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"  # the binding was made by a controller (or us)
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"        # a class of static volumes only
VOLUME_AVAILABLE = "Available"
FILESYSTEM = "Filesystem"
BINDING_IMMEDIATE = "Immediate"
BINDING_WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    """A PersistentVolumeClaim, as far as scheduling looks at it."""

    namespace: str
    name: str
    uid: str = ""
    volume_name: str = ""           # spec.volumeName ("" unbound)
    storage_class: str = ""         # the beta annotation, else spec.storageClassName (volume.GetPersistentVolumeClaimClass)
    phase: str = "Pending"          # status.phase: Pending, Bound, Lost
    bind_completed: bool = False    # the PV controller's bind-completed annotation
    deleting: bool = False
    controller_uid: str = ""        # the uid of its controlling owner (a generic ephemeral volume's pod)
    access_modes: tuple[str, ...] = ()   # spec.accessModes
    resource_version: str = ""
    request: int = 0                     # spec.resources.requests.storage, bytes (Quantity.Value: rounded up)
    volume_mode: str = FILESYSTEM        # spec.volumeMode (the API defaults it to Filesystem)
    attributes_class: str = ""           # spec.volumeAttributesClassName
    selector: LabelSelector | None = None   # spec.selector (None: no selector)
    selected_node: str | None = None     # the volume.kubernetes.io/selected-node annotation
    raw: Any = field(default=None, compare=False, repr=False)   # the API object (PreBind updates it)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def bound(self) -> bool:
        """isPVCFullyBound: a volume named and the binding completed (a claim only pre-bound is not)."""
        return bool(self.volume_name) and self.bind_completed


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """spec.claimRef of a PersistentVolume, as far as binding compares it."""

    namespace: str
    name: str
    uid: str = ""

    def names(self, claim: PersistentVolumeClaim) -> bool:
        """IsVolumeBoundToClaim: the reference names the claim (and, if it has a uid, that claim's uid)."""
        return self.name == claim.name and self.namespace == claim.namespace and (not self.uid or self.uid == claim.uid)


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    uid: str = ""
    resource_version: str = ""
    # spec.nodeAffinity.required.nodeSelectorTerms as written; None: the volume can be used from any node
    node_affinity_terms: Any = None
    phase: str = ""
    # its zone and region labels (VolumeZone's getPVTopologies): (label key, the zones it lists), in
    # PV_TOPOLOGY_LABELS order; a value that is not a "__"-separated list of non-empty zones is left out
    topologies: tuple[tuple[str, frozenset[str]], ...] = ()
    # what NodeVolumeLimits counts it as: spec.csi's driver and volumeHandle, or a migratable in-tree source's
    # (plugin, handle) (scheduler/model/csi.py)
    csi_driver: str = ""
    csi_handle: str = ""
    in_tree: tuple[str, str] | None = None
    capacity: int = 0                       # spec.capacity.storage, bytes
    storage_class: str = ""                 # the beta annotation, else spec.storageClassName (GetPersistentVolumeClass)
    access_modes: tuple[str, ...] = ()
    volume_mode: str = FILESYSTEM
    attributes_class: str = ""
    labels: Any = None                      # metadata.labels (a dict; None: none), for claims' selectors
    claim_ref: ClaimRef | None = None
    deleting: bool = False
    bound_by_controller: bool = False       # the pv.kubernetes.io/bound-by-controller annotation
    raw: Any = field(default=None, compare=False, repr=False)   # the API object (PreBind updates it)
    # NodeVolumeLimits' unique name of a CSI volume, "<driver>/<volumeHandle>" ("" when not a CSI volume
    # with a handle): derived once, here, as every placement of a pod using it reads it
    csi_unique: str = field(init=False, default="", compare=False)

    def __post_init__(self) -> None:
        if self.csi_driver and self.csi_handle:
            object.__setattr__(self, "csi_unique", f"{self.csi_driver}/{self.csi_handle}")


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    binding_mode: str = BINDING_IMMEDIATE     # volumeBindingMode (the API defaults it to Immediate)
    provisioner: str = ""
    # allowedTopologies: each term a tuple of (label key, the values it allows); () allows every node
    allowed_topologies: tuple[tuple[tuple[str, frozenset[str]], ...], ...] = ()


@dataclass(frozen=True, slots=True)
class CSIDriver:
    """storage.k8s.io/v1 CSIDriver: whether its volumes' capacity is checked (spec.storageCapacity)."""

    name: str
    storage_capacity: bool = False


@dataclass(frozen=True, slots=True)
class CSIStorageCapacity:
    """storage.k8s.io/v1 CSIStorageCapacity: how large a volume of a class the nodes it selects can get."""

    key: str                                # "ns/name"
    storage_class: str
    limit: int | None                       # maximumVolumeSize if set (more precise), else capacity; None: neither
    node_topology: LabelSelector | None     # None: no node has access


def parse_pvc(obj: dict[str, Any]) -> PersistentVolumeClaim:
    meta, spec, status = _d(obj.get("metadata")), _d(obj.get("spec")), _d(obj.get("status"))
    ann = _d(meta.get("annotations"))
    cls = ann.get(ANN_STORAGE_CLASS) if ANN_STORAGE_CLASS in ann else spec.get("storageClassName")
    controller = next((o for o in map(_d, _l(meta.get("ownerReferences"))) if o.get("controller") is True), {})
    return PersistentVolumeClaim(
        namespace=str(meta.get("namespace", "")), name=str(meta.get("name", "")), uid=str(meta.get("uid", "")),
        volume_name=spec.get("volumeName") if isinstance(spec.get("volumeName"), str) else "",
        storage_class=cls if isinstance(cls, str) else "",
        phase=status.get("phase") if isinstance(status.get("phase"), str) else "Pending",
        bind_completed=ANN_BIND_COMPLETED in ann, deleting=bool(meta.get("deletionTimestamp")),
        controller_uid=str(controller.get("uid", "")),
        access_modes=tuple(m for m in _l(spec.get("accessModes")) if isinstance(m, str)),
        resource_version=str(meta.get("resourceVersion", "")),
        request=_bytes(_d(_d(spec.get("resources")).get("requests")).get("storage")),
        volume_mode=_str(spec.get("volumeMode"), FILESYSTEM), attributes_class=_str(spec.get("volumeAttributesClassName")),
        selector=(parse_label_selector(spec["selector"], "spec.selector") if spec.get("selector") is not None else None),
        selected_node=ann[ANN_SELECTED_NODE] if isinstance(ann.get(ANN_SELECTED_NODE), str) else None, raw=obj)


def _str(v: Any, default: str = "") -> str:
    return v if isinstance(v, str) and v else default


def _bytes(v: Any) -> int:
    """resource.Quantity.Value(): the quantity rounded up to an integer; 0 when absent or malformed (the API
    validates both)."""
    if v is None:
        return 0
    try:
        q = parse_quantity(v)
    except QuantityError:
        return 0
    return -((-q.numerator) // q.denominator) if not isinstance(q, int) else q


# upstream's topologyLabels in VolumeZone, in its order: the deprecated beta labels, then the GA ones
PV_TOPOLOGY_LABELS = ("failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
                      "topology.kubernetes.io/zone", "topology.kubernetes.io/region")
# volumehelpers.LabelZonesToSet's delimiter (cloudvolume.LabelMultiZoneDelimiter)
MULTI_ZONE_DELIMITER = "__"


def parse_pv(obj: dict[str, Any]) -> PersistentVolume:
    meta, spec, status = _d(obj.get("metadata")), _d(obj.get("spec")), _d(obj.get("status"))
    required = _d(spec.get("nodeAffinity")).get("required")
    terms = _d(required).get("nodeSelectorTerms") if required is not None else None
    labels = _d(meta.get("labels"))
    topologies = []
    for key in PV_TOPOLOGY_LABELS:
        value = labels.get(key)
        if isinstance(value, str):
            zones = _label_zones(value)
            if zones:
                topologies.append((key, zones))
    csi = _d(spec.get("csi"))
    zone = labels.get(PV_TOPOLOGY_LABELS[2]) or labels.get(PV_TOPOLOGY_LABELS[0])
    ann = _d(meta.get("annotations"))
    cls = ann.get(ANN_STORAGE_CLASS) if ANN_STORAGE_CLASS in ann else spec.get("storageClassName")
    ref = spec.get("claimRef")
    claim_ref = (ClaimRef(str(ref.get("namespace", "")), str(ref.get("name", "")), str(ref.get("uid", "") or ""))
                 if isinstance(ref, dict) else None)
    return PersistentVolume(
        name=str(meta.get("name", "")), uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        node_affinity_terms=(tuple(_l(terms)) if required is not None else None),
        phase=status.get("phase") if isinstance(status.get("phase"), str) else "",
        topologies=tuple(topologies), capacity=_bytes(_d(spec.get("capacity")).get("storage")),
        storage_class=cls if isinstance(cls, str) else "",
        access_modes=tuple(m for m in _l(spec.get("accessModes")) if isinstance(m, str)),
        volume_mode=_str(spec.get("volumeMode"), FILESYSTEM), attributes_class=_str(spec.get("volumeAttributesClassName")),
        labels=labels or None, claim_ref=claim_ref, deleting=bool(meta.get("deletionTimestamp")),
        bound_by_controller=ANN_BOUND_BY_CONTROLLER in ann, raw=obj,
        csi_driver=str(csi.get("driver") or ""), csi_handle=str(csi.get("volumeHandle") or ""),
        in_tree=None if csi else in_tree_volume(spec, zone if isinstance(zone, str) else ""))


def _label_zones(value: str) -> frozenset[str]:
    """LabelZonesToSet: the trimmed "__"-separated zones; empty (upstream: an error) if one of them is empty."""
    zones = [z.strip() for z in value.split(MULTI_ZONE_DELIMITER)]
    return frozenset() if any(not z for z in zones) else frozenset(zones)


def parse_storage_class(obj: dict[str, Any]) -> StorageClass:
    mode = obj.get("volumeBindingMode")
    terms = []
    for term in map(_d, _l(obj.get("allowedTopologies"))):
        reqs = tuple((str(r.get("key", "")), frozenset(v for v in _l(r.get("values")) if isinstance(v, str)))
                     for r in map(_d, _l(term.get("matchLabelExpressions"))))
        terms.append(reqs)
    return StorageClass(name=str(_d(obj.get("metadata")).get("name", "")),
                        binding_mode=mode if isinstance(mode, str) and mode else BINDING_IMMEDIATE,
                        provisioner=_str(obj.get("provisioner")), allowed_topologies=tuple(terms))


def parse_csi_driver(obj: dict[str, Any]) -> CSIDriver:
    return CSIDriver(name=str(_d(obj.get("metadata")).get("name", "")),
                     storage_capacity=_d(obj.get("spec")).get("storageCapacity") is True)


def parse_csi_storage_capacity(obj: dict[str, Any]) -> CSIStorageCapacity:
    meta = _d(obj.get("metadata"))
    limit = obj.get("maximumVolumeSize") if obj.get("maximumVolumeSize") is not None else obj.get("capacity")
    topo = obj.get("nodeTopology")
    return CSIStorageCapacity(
        key=f"{meta.get('namespace', '')}/{meta.get('name', '')}", storage_class=_str(obj.get("storageClassName")),
        limit=None if limit is None else _bytes(limit),
        node_topology=None if topo is None else parse_label_selector(topo, "nodeTopology"))


def pvc_volume_claims(pod: Pod) -> list[str]:
    """The claims of the pod's persistentVolumeClaim volumes, in order, without generic ephemeral volumes'
    (what VolumeZone and VolumeRestrictions read, and upstream's NodeInfo counts as a pod's claims)."""
    ephemeral = set(pod.ephemeral_pvcs)
    return [n for n in pod.pvcs if n not in ephemeral] if ephemeral else list(pod.pvcs)


def uses_pvc_volume_claim(pod: Pod, claim: Any) -> bool:
    """Is ``claim`` (a PersistentVolumeClaim) the claim of one of the pod's persistentVolumeClaim volumes?"""
    return isinstance(claim, PersistentVolumeClaim) and claim.namespace == pod.namespace \
        and claim.name in pvc_volume_claims(pod)


def pvc_volume_claim_keys(pod: Pod) -> tuple[str, ...]:
    """``pvc_volume_claims`` as the volume store's keys, "<namespace>/<claim>"."""
    if not pod.ephemeral_pvcs:
        return pod.claim_keys
    ephemeral = set(pod.ephemeral_pvcs)
    return tuple(k for n, k in zip(pod.pvcs, pod.claim_keys) if n not in ephemeral)
