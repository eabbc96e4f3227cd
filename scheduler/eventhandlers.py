"""Informer events -> the cache and the queue (upstream's pkg/scheduler/eventhandlers.go).

The informers call the ``on_*`` handlers of :class:`EventHandlers` (mixed
into :class:`scheduler.scheduler.Scheduler`) for pods, nodes, PodGroups,
PriorityClasses, namespaces, PersistentVolumeClaims, PersistentVolumes,
StorageClasses, CSINodes, VolumeAttachments, CSIDrivers and CSIStorageCapacities. A handler parses the object; updates the cache (nodes, bound
pods), the queue (unscheduled pods of our profiles) and the indexes that
plugins and the PodGroup status controller read (pods by uid, PodGroups, the
members of each group); then tells the queue which cluster event happened, so
that the pods it may help are requeued.

Handlers run on the event loop between cycles. They never await, never call
the API and never loop over all pods or nodes (a group listener call is
O(1)); they never schedule either: a pod they queue waits for the scheduling
loop (schedule_one.py).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

from scheduler.framework.interface import ActionType, ClusterEvent, Resource
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Code, Status
from scheduler.model import (
    Node, Pod, parse_csi_driver, parse_csi_storage_capacity, parse_csinode, parse_native_pod_group, parse_node,
    parse_pdb, parse_pod, parse_pod_group, parse_pv, parse_pvc, parse_storage_class, parse_volume_attachment,
)
from scheduler.model.dra import parse_device_class, parse_resource_claim, parse_resource_slice, pod_claims
from scheduler.preenqueue import PreEnqueueReports
from scheduler.queue import SchedulingQueue
from scheduler.state.cache import Cache

if TYPE_CHECKING:
    from scheduler.consolidation import Rebalancer

log = logging.getLogger("tandem.scheduler")

PRIORITY_CLASS = "PriorityClass"   # the cluster event resource of scheduling.k8s.io/v1 PriorityClasses


class EventHandlers:
    """The informer handlers of :class:`~scheduler.scheduler.Scheduler`, whose ``__init__`` sets this state."""

    cache: Cache
    queue: SchedulingQueue
    frameworks: dict[str, Framework]
    pods: dict[str, Pod]
    group_listeners: list[Callable[[str], None]]
    priority_classes: set[str] | None
    pdbs: dict[str, Any]
    rebalancer: "Rebalancer"
    _conditions: dict[str, tuple[str, str]]
    _sort_failures: dict[str, str]
    reports: PreEnqueueReports

    if TYPE_CHECKING:
        # held capacity's ends (holding.py, a mixin of the Scheduler); declared for the reader and the type checker
        def _held_pod_changed(self, old: Pod | None, pod: Pod | None) -> None: ...

        def _held_node_gone(self, name: str) -> None: ...

        def _settle_holds(self) -> None: ...

    # ------------------------------------------------------------------ informer handlers (pods)

    def _group_changed(self, old: Pod | None, pod: Pod | None) -> None:
        for p in (old, pod):
            if p is not None and p.gang:
                key = p.gang
                for fn in self.group_listeners:
                    fn(key)
                if old is not None and pod is not None and old.gang == pod.gang:
                    return  # same group: once is enough

    def _store_pod(self, obj: dict[str, Any]) -> tuple[Pod, Pod | None]:
        """Parse an added or updated pod, keep it as the latest record and its gang membership current."""
        pod = parse_pod(obj)
        old = self.pods.get(pod.uid)
        self.cache.gangs.update_membership(old, pod)
        self.pods[pod.uid] = pod
        if self.group_listeners:
            self._group_changed(old, pod)
        if pod.node_name:
            self._conditions.pop(pod.uid, None)   # bound: no PodScheduled=False of ours to keep current
            self.reports.forget(pod.uid)
        nominations = self.cache.nominations
        if pod.node_name or pod.deleting or pod.terminal or pod.scheduler_name not in self.frameworks:
            if nominations:
                nominations.clear(pod.uid)
        elif pod.nominated_node_name:
            # (one of ours being written is kept; a held unit's member is nominated by its hold, not charged twice)
            if nominations.get(pod.uid) in ("", pod.nominated_node_name) and pod.uid not in nominations.held.member_of:
                nominations.set(pod, pod.nominated_node_name)
        elif old is not None and old.nominated_node_name and nominations.get(pod.uid) == old.nominated_node_name:
            nominations.clear(pod.uid)   # someone cleared it in the API
        if nominations.held.member_of and pod.uid in nominations.held.member_of:
            self._held_pod_changed(old, pod)   # a held unit's member changed (holding.py)
        if self.cache.moves.replacements and pod.uid in self.cache.moves.replacements:
            self.rebalancer.replacement_changed(pod, pod.uid)   # a moved pod's replacement bound, or Ready
        if pod.resource_claims or (old is not None and old.resource_claims):
            waiting = not pod.node_name and not pod.deleting and not pod.terminal
            self.cache.devices.track_pod(pod.uid, pod.namespace, tuple(
                pc.claim for pc in pod_claims(pod.raw) if pc.claim) if waiting else ())
        return pod, old

    def on_pod_add(self, obj: dict[str, Any]) -> None:
        pod, _ = self._store_pod(obj)
        if pod.node_name:
            if not pod.terminal:
                self.cache.add_pod(pod)
                self.queue.delete(pod.uid)  # bound by someone: not ours to schedule any more
                self.queue.on_event(ClusterEvent(Resource.ASSIGNED_POD, ActionType.ADD, "AssignedPodAdd"), None, pod)
            else:
                self.cache.finish_pod(pod)   # charged nowhere; its run keeps its node (state/runs.py)
        elif pod.scheduler_name in self.frameworks and not pod.deleting:
            self.queue.add(pod, pod.scheduler_name)

    def on_pod_update(self, old_obj: dict[str, Any], obj: dict[str, Any]) -> None:
        pod, old = self._store_pod(obj)
        if pod.node_name:
            if pod.terminal:
                # finished pods free their node (the informer's assigned-and-not-terminal filter); the run
                # index keeps them until they are deleted
                self.cache.finish_pod(pod)
                self.queue.on_event(ClusterEvent(Resource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"), old, None)
                if self.cache.nominations.held.room_free:
                    self._settle_holds()   # a held unit's last awaited pod ended: its members go now
                return
            was_cached = self.cache.where(pod.uid) is not None
            self.cache.update_pod(pod)
            self.queue.delete(pod.uid)
            if old is None or not old.node_name or not was_cached:
                self.queue.on_event(ClusterEvent(Resource.ASSIGNED_POD, ActionType.ADD, "AssignedPodAdd"), old, pod)
            else:
                action = 0
                if old.labels != pod.labels:
                    action |= ActionType.UPDATE_POD_LABEL
                if any(pod.requests.get(k, 0) < v for k, v in old.requests.items()):
                    action |= ActionType.UPDATE_POD_SCALE_DOWN
                if action:
                    self.queue.on_event(ClusterEvent(Resource.ASSIGNED_POD, action, "AssignedPodUpdate"), old, pod)
        elif pod.scheduler_name in self.frameworks:
            if pod.deleting:
                self._forget_unbound(pod)
            elif pod.uid in self.queue:
                self.queue.update(pod)
            elif not self.cache.is_assumed(pod.uid) and pod.uid not in self._waiting_uids():
                self.queue.add(pod, pod.scheduler_name)

    def on_pod_delete(self, obj: dict[str, Any]) -> None:
        pod = parse_pod(obj)
        old = self.pods.pop(pod.uid, pod)
        self.cache.gangs.update_membership(old, None)
        if self.group_listeners:
            self._group_changed(old, None)
        if old.gang and not self.cache.gangs.member_uids(old.gang) and old.gang not in self.cache.gangs.groups:
            self._forget_gang(old.gang)   # its last pod went, and its PodGroup is gone too
        self._conditions.pop(pod.uid, None)
        self._sort_failures.pop(pod.uid, None)
        self.reports.forget(pod.uid)
        if old.resource_claims:
            self.cache.devices.track_pod(pod.uid, pod.namespace, ())
        if self.cache.nominations.held.member_of and pod.uid in self.cache.nominations.held.member_of:
            self._held_pod_changed(old, None)   # a held unit's member was deleted (holding.py)
        if self.cache.moves.replacements and pod.uid in self.cache.moves.replacements:
            self.rebalancer.replacement_changed(None, pod.uid)
        if self.cache.nominations:
            self.cache.nominations.clear(pod.uid)
        self._forget_unbound(pod)
        # a finished pod of a pipeline run still held its run's node: its deletion may free the run to move
        if self.cache.where(pod.uid) is not None or self.cache.runs.is_finished_member(pod.uid):
            self.cache.remove_pod(pod)
            self.queue.on_event(ClusterEvent(Resource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"), old, None)
            if self.cache.nominations.held.room_free:
                self._settle_holds()   # a held unit's last awaited pod ended: its members go now

    def _forget_unbound(self, pod: Pod) -> None:
        self.queue.delete(pod.uid)
        for fw in self.frameworks.values():
            wp = fw.get_waiting_pod(pod.uid)
            if wp is not None:
                wp.reject("", "pod was deleted while waiting")

    def _waiting_uids(self) -> set[str]:
        out: set[str] = set()
        for fw in self.frameworks.values():
            out.update(fw.waiting)
        return out

    # ------------------------------------------------------------------ informer handlers (PodDisruptionBudgets)

    def on_pdb_add(self, obj: dict[str, Any]) -> None:
        pdb = parse_pdb(obj)
        self.pdbs[pdb.key] = pdb

    def on_pdb_update(self, old_obj: dict[str, Any], obj: dict[str, Any]) -> None:
        self.on_pdb_add(obj)

    def on_pdb_delete(self, obj: dict[str, Any]) -> None:
        self.pdbs.pop(parse_pdb(obj).key, None)

    # ------------------------------------------------------------------ informer handlers (volumes)

    # PersistentVolumeClaims, PersistentVolumes and StorageClasses, for VolumeBinding; a claim created or bound,
    # a volume created or changed may make a pod that waits for them schedulable (upstream registers Add and
    # Update of each; a deletion can only make things worse)

    def on_pvc_add(self, obj: dict[str, Any]) -> None:
        pvc = parse_pvc(obj)
        self.cache.volumes.set_pvc(pvc)
        self.cache.attachments.claim_changed(pvc.key)
        self.queue.on_event(ClusterEvent(Resource.PVC, ActionType.ADD, "PersistentVolumeClaimAdd"), None, pvc)

    def on_pvc_update(self, old_obj: dict[str, Any], obj: dict[str, Any]) -> None:
        pvc = parse_pvc(obj)
        old = self.cache.volumes.api_claims.get(pvc.key)
        self.cache.volumes.set_pvc(pvc)
        if old is None or (old.volume_name, old.storage_class) != (pvc.volume_name, pvc.storage_class):
            self.cache.attachments.claim_changed(pvc.key)
        # a status or label change scheduling does not read moves nobody
        if old is None or replace(old, resource_version=pvc.resource_version) != pvc:
            self.queue.on_event(ClusterEvent(Resource.PVC, ActionType.UPDATE, "PersistentVolumeClaimUpdate"),
                                old, pvc)

    def on_pvc_delete(self, obj: dict[str, Any]) -> None:
        key = parse_pvc(obj).key
        self.cache.volumes.delete_pvc(key)
        self.cache.attachments.claim_changed(key)

    def on_pv_add(self, obj: dict[str, Any]) -> None:
        pv = parse_pv(obj)
        self.cache.volumes.set_pv(pv)
        self.cache.attachments.volume_changed(pv.name)
        self.queue.on_event(ClusterEvent(Resource.PV, ActionType.ADD, "PersistentVolumeAdd"), None, pv)

    def on_pv_update(self, old_obj: dict[str, Any], obj: dict[str, Any]) -> None:
        pv = parse_pv(obj)
        old = self.cache.volumes.api_volumes.get(pv.name)
        self.cache.volumes.set_pv(pv)
        if old is None or (old.csi_driver, old.csi_handle, old.in_tree) != (pv.csi_driver, pv.csi_handle, pv.in_tree):
            self.cache.attachments.volume_changed(pv.name)
        # what VolumeBinding (node affinity, phase, claimRef, size, modes, class, labels) and VolumeZone (zone
        # labels) read: a new resourceVersion alone moves nobody
        if old is None or replace(old, resource_version=pv.resource_version) != pv:
            self.queue.on_event(ClusterEvent(Resource.PV, ActionType.UPDATE, "PersistentVolumeUpdate"), old, pv)

    def on_pv_delete(self, obj: dict[str, Any]) -> None:
        name = parse_pv(obj).name
        self.cache.volumes.delete_pv(name)
        self.cache.attachments.volume_changed(name)

    def on_storage_class_add(self, obj: dict[str, Any]) -> None:
        sc = parse_storage_class(obj)
        self.cache.volumes.classes[sc.name] = sc
        self.cache.attachments.class_changed(sc.name)
        self.queue.on_event(ClusterEvent(Resource.STORAGE_CLASS, ActionType.ADD, "StorageClassAdd"), None, sc)

    def on_storage_class_update(self, old_obj: dict[str, Any], obj: dict[str, Any]) -> None:
        sc = parse_storage_class(obj)
        old = self.cache.volumes.classes.get(sc.name)
        self.cache.volumes.classes[sc.name] = sc
        if old != sc:   # volumeBindingMode is immutable: allowedTopologies or a class seen for the first time
            self.queue.on_event(ClusterEvent(Resource.STORAGE_CLASS, ActionType.UPDATE, "StorageClassUpdate"),
                                old, sc)

    def on_storage_class_delete(self, obj: dict[str, Any]) -> None:
        name = parse_storage_class(obj).name
        self.cache.volumes.classes.pop(name, None)
        self.cache.attachments.class_changed(name)

    # ------------------------------------------------------------------ informer handlers (volume attachment)

    # CSINodes (the nodes' attach limits per CSI driver) and VolumeAttachments, for NodeVolumeLimits; the
    # events it registers: a CSINode added or its counts grown, an attachment deleted

    def on_csinode_add(self, obj: dict[str, Any]) -> None:
        cn = parse_csinode(obj)
        self.cache.attachments.set_csinode(cn)
        self.queue.on_event(ClusterEvent(Resource.CSI_NODE, ActionType.ADD, "CSINodeAdd"), None, cn)

    def on_csinode_update(self, old_obj: dict[str, Any], obj: dict[str, Any]) -> None:
        cn = parse_csinode(obj)
        old = self.cache.attachments.csinodes.get(cn.name)
        self.cache.attachments.set_csinode(cn)
        if old != cn:
            self.queue.on_event(ClusterEvent(Resource.CSI_NODE, ActionType.UPDATE, "CSINodeUpdate"), old, cn)

    def on_csinode_delete(self, obj: dict[str, Any]) -> None:
        self.cache.attachments.remove_csinode(parse_csinode(obj).name)

    def on_volume_attachment_add(self, obj: dict[str, Any]) -> None:
        self.cache.attachments.set_attachment(parse_volume_attachment(obj))

    def on_volume_attachment_update(self, old_obj: dict[str, Any], obj: dict[str, Any]) -> None:
        self.cache.attachments.set_attachment(parse_volume_attachment(obj))

    def on_volume_attachment_delete(self, obj: dict[str, Any]) -> None:
        va = parse_volume_attachment(obj)
        self.cache.attachments.remove_attachment(va.name)
        self.queue.on_event(ClusterEvent(Resource.VOLUME_ATTACHMENT, ActionType.DELETE, "VolumeAttachmentDelete"),
                            va, None)

    # CSIDrivers (whether a driver's capacity is checked) and CSIStorageCapacities, for provisioning in
    # VolumeBinding's Filter; upstream registers CSIDriver Update and CSIStorageCapacity Add and Update

    def on_csi_driver_add(self, obj: dict[str, Any]) -> None:
        d = parse_csi_driver(obj)
        self.cache.volumes.drivers[d.name] = d
        self.queue.on_event(ClusterEvent(Resource.CSI_DRIVER, ActionType.ADD, "CSIDriverAdd"), None, d)

    def on_csi_driver_update(self, old_obj: dict[str, Any], obj: dict[str, Any]) -> None:
        d = parse_csi_driver(obj)
        old = self.cache.volumes.drivers.get(d.name)
        self.cache.volumes.drivers[d.name] = d
        if old != d:
            self.queue.on_event(ClusterEvent(Resource.CSI_DRIVER, ActionType.UPDATE, "CSIDriverUpdate"), old, d)

    def on_csi_driver_delete(self, obj: dict[str, Any]) -> None:
        self.cache.volumes.drivers.pop(parse_csi_driver(obj).name, None)

    def on_capacity_add(self, obj: dict[str, Any]) -> None:
        c = parse_csi_storage_capacity(obj)
        self.cache.volumes.set_capacity(c)
        self.queue.on_event(ClusterEvent(Resource.CSI_STORAGE_CAPACITY, ActionType.ADD, "CSIStorageCapacityAdd"),
                            None, c)

    def on_capacity_update(self, old_obj: dict[str, Any], obj: dict[str, Any]) -> None:
        c = parse_csi_storage_capacity(obj)
        old = self.cache.volumes.capacities.get(c.key)
        self.cache.volumes.set_capacity(c)
        if old != c:
            self.queue.on_event(ClusterEvent(Resource.CSI_STORAGE_CAPACITY, ActionType.UPDATE,
                                             "CSIStorageCapacityUpdate"), old, c)

    def on_capacity_delete(self, obj: dict[str, Any]) -> None:
        self.cache.volumes.delete_capacity(parse_csi_storage_capacity(obj).key)

    # DRA (resource.k8s.io/v1): claims (whose allocations hold devices), the drivers' slices, the classes;
    # upstream's DynamicResources registers ResourceClaim Add/Update, ResourceSlice Add/Update, DeviceClass
    # Add/Update

    # A claim's own event concerns only the pods that name it (and its owner): those are the only ones it is
    # offered to, not every pod waiting for devices (a claim per pod would make the hints quadratic). Devices
    # freed (an allocation cleared, an allocated claim deleted) may help any of them: those go to all.

    def on_resource_claim_add(self, obj: dict[str, Any]) -> None:
        c = parse_resource_claim(obj)
        devices = self.cache.devices
        devices.set_claim(c)
        self.queue.on_event(ClusterEvent(Resource.RESOURCE_CLAIM, ActionType.ADD, "ResourceClaimAdd"), None, c,
                            only=devices.concerned(c))

    def on_resource_claim_update(self, old_obj: dict[str, Any], obj: dict[str, Any]) -> None:
        c = parse_resource_claim(obj)
        devices = self.cache.devices
        old = devices.set_claim(c)
        # freed in the view the cycle reads: an informer update older than what PreBind wrote and assumed (the
        # finalizer's, before the allocation's) frees nothing
        now = devices.claim(c.namespace, c.name)
        freed = old is not None and old.allocation is not None and (now is None or now.allocation is None)
        self.queue.on_event(ClusterEvent(Resource.RESOURCE_CLAIM, ActionType.UPDATE, "ResourceClaimUpdate"), old, c,
                            only=None if freed else devices.concerned(c))

    def on_resource_claim_delete(self, obj: dict[str, Any]) -> None:
        c = parse_resource_claim(obj)
        devices = self.cache.devices
        devices.delete_claim(c)
        # a deleted claim frees its devices (upstream's allocated-devices tracker; no hint registered)
        self.queue.on_event(ClusterEvent(Resource.RESOURCE_CLAIM, ActionType.DELETE, "ResourceClaimDelete"), c, None,
                            only=None if c.allocation is not None else devices.concerned(c))

    def on_resource_slice_add(self, obj: dict[str, Any]) -> None:
        s = parse_resource_slice(obj)
        self.cache.devices.set_slice(s)
        self.queue.on_event(ClusterEvent(Resource.RESOURCE_SLICE, ActionType.ADD, "ResourceSliceAdd"), None, s)

    def on_resource_slice_update(self, old_obj: dict[str, Any], obj: dict[str, Any]) -> None:
        s = parse_resource_slice(obj)
        old = self.cache.devices.slices.get(s.name)
        self.cache.devices.set_slice(s)
        if old != s:
            self.queue.on_event(ClusterEvent(Resource.RESOURCE_SLICE, ActionType.UPDATE, "ResourceSliceUpdate"),
                                old, s)

    def on_resource_slice_delete(self, obj: dict[str, Any]) -> None:
        self.cache.devices.delete_slice(str((obj.get("metadata") or {}).get("name", "")))

    def on_device_class_add(self, obj: dict[str, Any]) -> None:
        c = parse_device_class(obj)
        self.cache.devices.set_class(c)
        self.queue.on_event(ClusterEvent(Resource.DEVICE_CLASS, ActionType.ADD, "DeviceClassAdd"), None, c)

    def on_device_class_update(self, old_obj: dict[str, Any], obj: dict[str, Any]) -> None:
        c = parse_device_class(obj)
        old = self.cache.devices.classes.get(c.name)
        self.cache.devices.set_class(c)
        if old != c:
            self.queue.on_event(ClusterEvent(Resource.DEVICE_CLASS, ActionType.UPDATE, "DeviceClassUpdate"), old, c)

    def on_device_class_delete(self, obj: dict[str, Any]) -> None:
        self.cache.devices.delete_class(str((obj.get("metadata") or {}).get("name", "")))

    # ------------------------------------------------------------------ informer handlers (priority classes)

    def on_priority_class_add(self, obj: dict[str, Any]) -> None:
        if self.priority_classes is None:
            self.priority_classes = set()
        self.priority_classes.add(str((obj.get("metadata") or {}).get("name", "")))
        # a pod that named a missing class may be schedulable now
        self.queue.on_event(ClusterEvent(PRIORITY_CLASS, ActionType.ADD, "PriorityClassAdd"), None, obj)

    def on_priority_class_update(self, old_obj: dict[str, Any], obj: dict[str, Any]) -> None:
        pass  # only names matter here

    def on_priority_class_delete(self, obj: dict[str, Any]) -> None:
        if self.priority_classes is not None:
            self.priority_classes.discard(str((obj.get("metadata") or {}).get("name", "")))

    # ------------------------------------------------------------------ informer handlers (namespaces)

    # namespace labels, for InterPodAffinity's namespaceSelector; a malformed namespace has no name to keep

    def on_namespace_add(self, obj: dict[str, Any]) -> None:
        name, labels = _namespace(obj)
        if name:
            self.cache.set_namespace(name, labels)

    def on_namespace_update(self, old_obj: dict[str, Any], obj: dict[str, Any]) -> None:
        self.on_namespace_add(obj)

    def on_namespace_delete(self, obj: dict[str, Any]) -> None:
        name, _ = _namespace(obj)
        if name:
            self.cache.remove_namespace(name)

    # ------------------------------------------------------------------ informer handlers (podgroups)

    def _pod_group_changed(self, key: str) -> None:
        for fn in self.group_listeners:
            fn(key)

    # PodGroups are parsed once, here, into the cache's gang index; cluster events carry the records.
    # ``native``: the object is a scheduling.k8s.io/v1alpha2 PodGroup (its informer says so: list items
    # may lack apiVersion), else scheduler-plugins' CRD

    def on_pod_group_add(self, obj: dict[str, Any], native: bool = False) -> None:
        pg = parse_native_pod_group(obj) if native else parse_pod_group(obj)
        self.cache.gangs.set_group(pg)
        self._pod_group_changed(pg.key)
        self.queue.on_event(ClusterEvent(Resource.POD_GROUP, ActionType.ADD, "PodGroupAdd"), None, pg)

    def on_pod_group_update(self, old_obj: dict[str, Any], obj: dict[str, Any], native: bool = False) -> None:
        pg = parse_native_pod_group(obj) if native else parse_pod_group(obj)
        gangs = self.cache.gangs
        old = gangs.group(pg.key)
        gangs.set_group(pg)
        self._pod_group_changed(pg.key)
        if old is None or old.spec != pg.spec:
            self.queue.on_event(ClusterEvent(Resource.POD_GROUP, ActionType.UPDATE, "PodGroupUpdate"), old, pg)

    def on_pod_group_delete(self, obj: dict[str, Any], native: bool = False) -> None:
        pg = parse_native_pod_group(obj) if native else parse_pod_group(obj)
        self.cache.gangs.remove_group(pg.key)
        self._pod_group_changed(pg.key)
        self._reject_waiting_members(pg.key, f"PodGroup {pg.key} was deleted")
        if not self.cache.gangs.member_uids(pg.key):
            self._forget_gang(pg.key)   # pods that still name it keep what their gang plugin holds until they go
        self.queue.on_event(ClusterEvent(Resource.POD_GROUP, ActionType.DELETE, "PodGroupDelete"), pg, None)

    def _forget_gang(self, key: str) -> None:
        """Gang ``key`` is gone (no PodGroup, no pod): its gang plugins drop what they kept for it."""
        for fw in self.frameworks.values():
            if fw.gang is not None:
                try:
                    fw.gang.forget(key)
                except Exception:  # the Gang hooks bypass Framework._call: a bug there must not stop the informer
                    log.exception("plugin %s failed to forget gang %s", fw.gang.NAME, key)

    def _reject_waiting_members(self, key: str, msg: str) -> None:
        """Reject the members of gang ``key`` held at Permit: their quorum can no longer come.

        Left waiting, they would hold their room until the PodGroup's scheduleTimeoutSeconds (up to 15
        minutes). ``Framework.reject_waiting`` settles every member first and then releases each one's room
        once, synchronously; the binding task requeues and reports the pod, which then waits at PreEnqueue
        for its PodGroup ("not found"). The gang index keeps a deleted group's members, so this is
        O(members), never O(pods), and no gang hook is called.
        """
        uids = self.cache.gangs.member_uids(key)
        if not uids:
            return
        for fw in self.frameworks.values():
            if fw.gang is not None:
                fw.reject_waiting(uids, Status(Code.UNSCHEDULABLE, msg, plugin=fw.gang.NAME))

    # ------------------------------------------------------------------ informer handlers (nodes)

    def on_node_add(self, obj: dict[str, Any]) -> None:
        node = parse_node(obj)
        if node.invalid:
            log.warning("node %s: %s; scheduling onto it as far as it parses", node.name, node.invalid)
        self.cache.add_node(node)
        self.cache.devices.node_changed(node.name)
        self.queue.on_event(ClusterEvent(Resource.NODE, ActionType.ADD, "NodeAdd"), None, node)

    def on_node_update(self, old_obj: dict[str, Any], obj: dict[str, Any]) -> None:
        node = parse_node(obj)
        old = self.cache.node(node.name)
        self.cache.update_node(node)
        if old is None:
            self.cache.devices.node_changed(node.name)
            self.queue.on_event(ClusterEvent(Resource.NODE, ActionType.ADD, "NodeAdd"), None, node)
            return
        action = node_update_action(old, node)
        if action:
            self.queue.on_event(ClusterEvent(Resource.NODE, action, "NodeUpdate"), old, node)

    def on_node_delete(self, obj: dict[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name", ""))
        old = self.cache.node(name)
        self.cache.remove_node(name)
        self.cache.devices.node_changed(name)
        if self.cache.nominations.held.on_node:
            self._held_node_gone(name)   # capacity held there for a unit: it plans again (holding.py)
        self.queue.on_event(ClusterEvent(Resource.NODE, ActionType.DELETE, "NodeDelete"), old, None)


def node_update_action(old: Node, new: Node) -> int:
    action = 0
    if old.allocatable != new.allocatable:
        action |= ActionType.UPDATE_NODE_ALLOCATABLE
    if old.labels != new.labels:
        action |= ActionType.UPDATE_NODE_LABEL
    if old.taints != new.taints or old.unschedulable != new.unschedulable:
        action |= ActionType.UPDATE_NODE_TAINT
    if old.ready != new.ready:
        action |= ActionType.UPDATE_NODE_CONDITION
    if old.annotations != new.annotations:
        action |= ActionType.UPDATE_NODE_ANNOTATION
    if old.declared_features != new.declared_features:
        action |= ActionType.UPDATE_NODE_DECLARED_FEATURE
    return action


def _namespace(obj: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """A namespace's name ("" when it has none) and its labels (string values only, as a label map has)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        log.warning("ignoring a namespace without a name: %r", obj)
        return "", {}
    labels = meta.get("labels")
    labels = {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)} \
        if isinstance(labels, dict) else {}
    return meta["name"], labels
