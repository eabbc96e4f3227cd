"""CSINodes, VolumeAttachments, and the in-tree volume sources CSI migration maps to CSI drivers.

NodeVolumeLimits (plugins/node_volume_limits.py) counts a node's attachable
volumes per CSI driver against ``CSINode.spec.drivers[].allocatable.count``.
A volume is named ``<driver>/<volumeHandle>``, so the same volume used by two
pods, or attached and used, counts once. Upstream reads in-tree volume sources
through csi-translation-lib; tandem maps the attachable ones that 1.36 migrates
(``isCSIMigrationOn``: AWS EBS, GCE PD, Azure Disk, Cinder, Portworx) to their
CSI driver and a handle that is the same for the same disk, which is all the
counting needs. Other in-tree sources (hostPath, local, NFS, ...) are not
attachable and are not counted, as upstream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scheduler.model.fields import _d, _l

# v1.MigratedPluginsAnnotationKey: the in-tree plugins a node's kubelet has migrated to CSI
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"

# in-tree plugin name -> (its CSI driver, the volume source field that names it)
IN_TREE_PLUGINS: dict[str, tuple[str, str]] = {
    "kubernetes.io/aws-ebs": ("ebs.csi.aws.com", "awsElasticBlockStore"),
    "kubernetes.io/gce-pd": ("pd.csi.storage.gke.io", "gcePersistentDisk"),
    "kubernetes.io/azure-disk": ("disk.csi.azure.com", "azureDisk"),
    "kubernetes.io/cinder": ("cinder.csi.openstack.org", "cinder"),
    "kubernetes.io/portworx-volume": ("pxd.portworx.com", "portworxVolume"),
}
MIGRATABLE_PLUGINS: tuple[str, ...] = tuple(IN_TREE_PLUGINS)
_BY_SOURCE = {src: plugin for plugin, (_, src) in IN_TREE_PLUGINS.items()}
_GCE_UNSPECIFIED = "UNSPECIFIED"   # csi-translation-lib's placeholder project (and zone, when unknown)


@dataclass(frozen=True, slots=True)
class CSINode:
    """A CSINode (named as its node), as NodeVolumeLimits reads it."""

    name: str
    limits: tuple[tuple[str, int], ...] = ()     # (driver, allocatable.count) for drivers that set a count
    migrated: frozenset[str] = frozenset()       # in-tree plugin names of the migrated-plugins annotation


@dataclass(frozen=True, slots=True)
class VolumeAttachment:
    """A VolumeAttachment: ``attacher`` (a CSI driver) attaches PersistentVolume ``pv_name`` to ``node``."""

    name: str
    node: str = ""
    attacher: str = ""
    pv_name: str = ""   # spec.source.persistentVolumeName ("" for an inline volume spec, which is not counted)


def parse_csinode(obj: dict[str, Any]) -> CSINode:
    meta, spec = _d(obj.get("metadata")), _d(obj.get("spec"))
    limits = []
    for d in map(_d, _l(spec.get("drivers"))):
        count = _d(d.get("allocatable")).get("count")
        if isinstance(count, int) and not isinstance(count, bool) and isinstance(d.get("name"), str):
            limits.append((d["name"], count))
    ann = _d(meta.get("annotations")).get(MIGRATED_PLUGINS_ANNOTATION)
    migrated = frozenset(p.strip() for p in ann.split(",") if p.strip()) if isinstance(ann, str) else frozenset()
    return CSINode(name=str(meta.get("name", "")), limits=tuple(limits), migrated=migrated)


def parse_volume_attachment(obj: dict[str, Any]) -> VolumeAttachment:
    meta, spec = _d(obj.get("metadata")), _d(obj.get("spec"))
    pv = _d(spec.get("source")).get("persistentVolumeName")
    return VolumeAttachment(name=str(meta.get("name", "")), node=str(spec.get("nodeName") or ""),
                            attacher=str(spec.get("attacher") or ""), pv_name=pv if isinstance(pv, str) else "")


def in_tree_volume(source: dict[str, Any], zone: str = "") -> tuple[str, str] | None:
    """(in-tree plugin, handle) of a pod volume's or a PersistentVolume spec's migratable in-tree source, or None.

    The handle follows csi-translation-lib where it is simple (an EBS ``aws://zone/vol-x`` is ``vol-x``, a GCE
    disk is ``projects/UNSPECIFIED/zones/<zone>/disks/<pdName>``, ``zone`` being the PV's zone label, if any);
    counting only needs the same disk to get the same name."""
    for field, plugin in _BY_SOURCE.items():
        src = source.get(field)
        if not isinstance(src, dict):
            continue
        if field == "awsElasticBlockStore":
            vid = str(src.get("volumeID") or "")
            handle = vid.rstrip("/").rsplit("/", 1)[-1] if vid.startswith("aws://") else vid
        elif field == "gcePersistentDisk":
            zones = [z for z in zone.split("__") if z]
            if len(zones) > 1:   # a regional disk: the region is the zone without its last dash-part
                handle = f"projects/{_GCE_UNSPECIFIED}/regions/{zones[0].rsplit('-', 1)[0]}/disks/{src.get('pdName', '')}"
            else:
                handle = (f"projects/{_GCE_UNSPECIFIED}/zones/{zones[0] if zones else _GCE_UNSPECIFIED}"
                          f"/disks/{src.get('pdName', '')}")
        elif field == "azureDisk":
            handle = str(src.get("diskURI") or "")
        else:   # cinder, portworxVolume
            handle = str(src.get("volumeID") or "")
        return plugin, handle
    return None


def in_tree_driver(plugin: str) -> str:
    """The CSI driver an in-tree plugin (or an in-tree provisioner name) migrates to; "" if none."""
    entry = IN_TREE_PLUGINS.get(plugin)
    return entry[0] if entry else ""

