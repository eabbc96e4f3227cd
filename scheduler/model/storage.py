"""PersistentVolumeClaims, PersistentVolumes and StorageClasses as the volume plugins read them, and a pod's claims."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scheduler.model.csi import in_tree_volume
from scheduler.model.fields import _d, _l
from scheduler.model.pod import Pod

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"          # the PV controller finished binding a claim
ANN_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"    # the beta field, still read first upstream
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

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def bound(self) -> bool:
        """isPVCFullyBound: a volume named and the binding completed (a claim only pre-bound is not)."""
        return bool(self.volume_name) and self.bind_completed


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


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    binding_mode: str = BINDING_IMMEDIATE     # volumeBindingMode (the API defaults it to Immediate)
    provisioner: str = ""


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
        access_modes=tuple(m for m in _l(spec.get("accessModes")) if isinstance(m, str)))


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
    return PersistentVolume(
        name=str(meta.get("name", "")), uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        node_affinity_terms=(tuple(_l(terms)) if required is not None else None),
        phase=status.get("phase") if isinstance(status.get("phase"), str) else "",
        topologies=tuple(topologies),
        csi_driver=str(csi.get("driver") or ""), csi_handle=str(csi.get("volumeHandle") or ""),
        in_tree=None if csi else in_tree_volume(spec, zone if isinstance(zone, str) else ""))


def _label_zones(value: str) -> frozenset[str]:
    """LabelZonesToSet: the trimmed "__"-separated zones; empty (upstream: an error) if one of them is empty."""
    zones = [z.strip() for z in value.split(MULTI_ZONE_DELIMITER)]
    return frozenset() if any(not z for z in zones) else frozenset(zones)


def parse_storage_class(obj: dict[str, Any]) -> StorageClass:
    mode = obj.get("volumeBindingMode")
    return StorageClass(name=str(_d(obj.get("metadata")).get("name", "")),
                        binding_mode=mode if isinstance(mode, str) and mode else BINDING_IMMEDIATE,
                        provisioner=str(obj.get("provisioner") or ""))


def pvc_volume_claims(pod: Pod) -> list[str]:
    """The claims of the pod's persistentVolumeClaim volumes, in order, without generic ephemeral volumes'
    (what VolumeZone and VolumeRestrictions read, and upstream's NodeInfo counts as a pod's claims)."""
    ephemeral = set(pod.ephemeral_pvcs)
    return [n for n in pod.pvcs if n not in ephemeral] if ephemeral else list(pod.pvcs)


def uses_pvc_volume_claim(pod: Pod, claim: Any) -> bool:
    """Is ``claim`` (a PersistentVolumeClaim) the claim of one of the pod's persistentVolumeClaim volumes?"""
    return isinstance(claim, PersistentVolumeClaim) and claim.namespace == pod.namespace \
        and claim.name in pvc_volume_claims(pod)


def volume_refs(pod: Pod) -> list[tuple[str, ...]]:
    """The volumes of ``pod`` NodeVolumeLimits may count, as references that stay valid while claims bind:
    ("claim", "ns/name") for its claims (generic ephemeral ones included), ("inline", plugin, handle) for its
    migratable inline volumes."""
    refs: list[tuple[str, ...]] = [("claim", f"{pod.namespace}/{name}") for name in pod.pvcs]
    refs.extend(("inline", plugin, handle) for plugin, handle in pod.inline_attach)
    return refs
