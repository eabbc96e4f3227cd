"""Pods with PersistentVolumeClaims end to end on the simulated cluster (VolumeBinding).

The simulated cluster serves PVCs, PVs and StorageClasses but runs no PV
controller, so the tests play it: a claim is bound when it names its volume
and carries ``pv.kubernetes.io/bind-completed``, as the PV controller leaves
it. What is checked is what a kube-scheduler user sees: a pod whose claim is
missing, or waits for a first consumer tandem cannot be, stays Pending with
FailedScheduling naming the claim; it binds once the claim is bound (the PVC
event requeues it); a volume's node affinity keeps the pod on the nodes it
names; and a profile that disables the volume plugins places the pod as upstream
would without the plugins. A volume labelled with a zone (VolumeZone) keeps
the pod in that zone. A ReadWriteOncePod claim serves one pod at a time, and
an inline disk one pod per node (VolumeRestrictions). A node takes as many CSI
volumes as its CSINode allows (NodeVolumeLimits).
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.simcluster.resources import lookup
from bench.simcluster.volumes import ATTACH_LIMIT, PROVISIONER
from tests.integration.test_scheduler import (
    PODS, BASE_CONFIG, NS, bound, eventually, make_node, make_pod, running, scheduled_condition, stays, unschedulable,
)
from scheduler.config import parse_config

PVCS = lookup("", "v1", "persistentvolumeclaims")
PVS = lookup("", "v1", "persistentvolumes")
STORAGE_CLASSES = lookup("storage.k8s.io", "v1", "storageclasses")


def pod_with_claim(name: str, claim: str, **kw: Any) -> dict[str, Any]:
    return make_pod(name, volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim}}], **kw)


def pv(name: str, zone: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                            "hostPath": {"path": f"/data/{name}"}, "persistentVolumeReclaimPolicy": "Retain"}
    if zone is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}]}}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def pvc(name: str, volume: str = "", storage_class: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if volume:   # bound, as the PV controller leaves a claim it bound
        spec["volumeName"] = volume
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}


def zoned(name: str, zone: str) -> dict[str, Any]:
    return make_node(name, labels={"topology.kubernetes.io/zone": zone})


async def test_a_pod_whose_claim_is_missing_waits_naming_it_and_binds_once_the_claim_is_bound(tmp_path):
    async with running(tmp_path, [make_node("node-0"), make_node("node-1")]) as env:
        env.create_pod(pod_with_claim("db", "data"))
        env.create_pod(make_pod("control"))
        await bound(env, "control")
        c = await unschedulable(env, "db")
        assert c["reason"] == "Unschedulable"
        assert c["message"].startswith('0/2 nodes are available: persistentvolumeclaim "data" not found.'), c
        notes = [e["note"] for e in await env.events_by_reason("db", "FailedScheduling")]
        assert notes and all('persistentvolumeclaim "data" not found' in n for n in notes), notes

        env.store.create(PVS, "", pv("pv-data"))
        env.store.create(PVCS, NS, pvc("data", "pv-data"))   # the claim's creation requeues the pod
        await bound(env, "db")
        assert scheduled_condition(env.pod("db"))["status"] == "True"


def labelled_pv(name: str, zone: str) -> dict[str, Any]:
    """A volume without node affinity whose zone label alone says where it is (VolumeZone's business)."""
    volume = pv(name)
    volume["metadata"]["labels"] = {"topology.kubernetes.io/zone": zone}
    return volume


@pytest.mark.parametrize("make_pv, reason", [
    pytest.param(lambda name, zone: pv(name, zone=zone), "node(s) didn't match PersistentVolume's node affinity",
                 id="node affinity, VolumeBinding"),
    pytest.param(labelled_pv, "node(s) had no available volume zone", id="a zone label, VolumeZone"),
])
async def test_a_volume_in_a_zone_keeps_the_pod_on_the_nodes_there(tmp_path, make_pv, reason):
    nodes = [zoned("node-a", "a"), zoned("node-b1", "b"), zoned("node-b2", "b")]
    async with running(tmp_path, nodes) as env:
        env.store.create(PVS, "", make_pv("pv-zone-b", "b"))
        env.store.create(PVCS, NS, pvc("data", "pv-zone-b"))
        env.store.create(PVS, "", make_pv("pv-zone-c", "c"))
        env.store.create(PVCS, NS, pvc("nowhere", "pv-zone-c"))
        await eventually(lambda: env.app.scheduler is not None
                         and "default/nowhere" in env.app.scheduler.cache.volumes.claims, 10, "the claims to be seen")
        for i in range(4):
            env.create_pod(pod_with_claim(f"db-{i}", "data"))
        env.create_pod(pod_with_claim("lost", "nowhere"))
        placed = await bound(env, *(f"db-{i}" for i in range(4)))
        assert set(placed.values()) <= {"node-b1", "node-b2"}, placed
        c = await unschedulable(env, "lost")
        assert c["message"] == (f"0/3 nodes are available: 3 {reason}. "
                                "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.."), c

        env.create_node(zoned("node-c", "c"))   # a node in the volume's zone joins: the pod goes there
        assert (await bound(env, "lost")) == {"lost": "node-c"}


async def test_a_claim_waiting_for_its_first_consumer_is_refused_by_name_not_ignored(tmp_path):
    async with running(tmp_path, [make_node("node-0")]) as env:
        env.store.create(STORAGE_CLASSES, "", {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                               "metadata": {"name": "local"}, "provisioner": "example.com/local",
                                               "volumeBindingMode": "WaitForFirstConsumer"})
        env.store.create(PVCS, NS, pvc("scratch", storage_class="local"))
        env.create_pod(pod_with_claim("job", "scratch"))
        c = await unschedulable(env, "job")
        assert 'persistentvolumeclaim "scratch" is not bound' in c["message"], c
        assert "WaitForFirstConsumer" in c["message"] and "tandem does not bind or provision volumes yet" in c["message"]
        env.create_pod(make_pod("control"))
        await bound(env, "control")
        await stays(lambda: not env.node_of("job"), 0.3, "a pod placed as if its claim were not there")


async def test_a_profile_that_disables_volume_binding_does_not_evaluate_claims(tmp_path):
    cfg = parse_config({**BASE_CONFIG, "profiles": [
        {"schedulerName": "tandem-scheduler"},
        {"schedulerName": "tandem-no-volumes",
         # VolumeZone, VolumeRestrictions and NodeVolumeLimits read the claims too (a missing one is
         # unresolvable there as well), as upstream
         "plugins": {"multiPoint": {"disabled": [{"name": "VolumeBinding"}, {"name": "VolumeZone"},
                                                 {"name": "VolumeRestrictions"}, {"name": "NodeVolumeLimits"}]}}}]},
        "<test>")
    async with running(tmp_path, [make_node("node-0")], cfg) as env:
        env.create_pod(pod_with_claim("checked", "missing"))
        env.create_pod(pod_with_claim("unchecked", "missing", scheduler="tandem-no-volumes"))
        await bound(env, "unchecked")   # as kube-scheduler without VolumeBinding would place it
        c = await unschedulable(env, "checked")
        assert 'persistentvolumeclaim "missing" not found' in c["message"], c



async def test_a_read_write_once_pod_claim_serves_one_pod_at_a_time(tmp_path):
    async with running(tmp_path, [make_node("node-0"), make_node("node-1")]) as env:
        env.store.create(PVS, "", pv("pv-solo"))
        claim = pvc("solo", "pv-solo")
        claim["spec"]["accessModes"] = ["ReadWriteOncePod"]
        env.store.create(PVCS, NS, claim)
        await eventually(lambda: env.app.scheduler is not None
                         and "default/solo" in env.app.scheduler.cache.volumes.claims, 10, "the claim to be seen")
        env.create_pod(pod_with_claim("first", "solo"))
        await bound(env, "first")
        env.create_pod(pod_with_claim("second", "solo"))
        c = await unschedulable(env, "second")
        assert c["message"] == ("0/2 nodes are available: 2 node has pod using PersistentVolumeClaim with the same "
                                "name and ReadWriteOncePod access mode. preemption: 0/2 nodes are available: "
                                "2 No preemption victims found for incoming pod.."), c
        env.store.delete(PODS, NS, "first", grace=0)   # the claim's user goes: the deletion requeues the pod
        await bound(env, "second")


async def test_the_same_inline_disk_is_used_by_one_pod_per_node(tmp_path):
    ebs = [{"name": "disk", "awsElasticBlockStore": {"volumeID": "vol-1"}}]
    async with running(tmp_path, [make_node("node-0"), make_node("node-1")]) as env:
        env.create_pod(make_pod("first", volumes=ebs))
        env.create_pod(make_pod("second", volumes=ebs))
        where = await bound(env, "first", "second")
        assert set(where.values()) == {"node-0", "node-1"}, where
        env.create_pod(make_pod("third", volumes=ebs))
        c = await unschedulable(env, "third")
        assert c["message"] == ("0/2 nodes are available: 2 node(s) had no available disk. preemption: 0/2 nodes "
                                "are available: 2 No preemption victims found for incoming pod.."), c
        env.store.delete(PODS, NS, "first", grace=0)   # the disk's user goes: the deletion requeues the pod
        assert (await bound(env, "third"))["third"] == where["first"]


def csi_pv(name: str) -> dict[str, Any]:
    """A volume of the simulated cluster's CSI driver, for its PV controller to bind to a claim."""
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "csi": {"driver": PROVISIONER, "volumeHandle": name}, "persistentVolumeReclaimPolicy": "Retain"}}


async def test_a_node_takes_as_many_csi_volumes_as_its_csinode_allows(tmp_path):
    """The node's CSINode (its kubelet's registration of the driver) allows 2 volumes: two pods with one volume
    each bind, the third waits with upstream's reason and binds once a volume's pod is gone."""
    node = make_node("node-0")
    node["metadata"]["annotations"] = {ATTACH_LIMIT: "2"}
    async with running(tmp_path, [node]) as env:
        for i in range(3):   # the PV controller binds each claim to one of the volumes (Immediate, no class)
            env.store.create(PVS, "", csi_pv(f"pv-{i}"))
            env.store.create(PVCS, NS, pvc(f"data-{i}", storage_class=""))

        def ready() -> bool:
            cache = env.app.scheduler.cache if env.app.scheduler is not None else None
            claims = [cache.volumes.claim(NS, f"data-{i}") for i in range(3)] if cache is not None else [None]
            return "node-0" in cache.attachments.csinodes and all(c is not None and c.bound for c in claims)

        await eventually(ready, 10, "the CSINode and the bound claims to be seen")
        env.create_pod(pod_with_claim("p0", "data-0"))
        env.create_pod(pod_with_claim("p1", "data-1"))
        await bound(env, "p0", "p1")
        env.create_pod(pod_with_claim("p2", "data-2"))
        c = await unschedulable(env, "p2")
        assert c["message"] == ("0/1 nodes are available: 1 node(s) exceed max volume count. preemption: 0/1 "
                                "nodes are available: 1 No preemption victims found for incoming pod.."), c
        env.create_pod(pod_with_claim("p0-again", "data-0"))   # a volume already there takes no new slot
        await bound(env, "p0-again")
        env.store.delete(PODS, NS, "p1", grace=0)   # a pod with a volume goes: the deletion requeues p2
        await bound(env, "p2")
