"""Pods with PersistentVolumeClaims end to end on the simulated cluster (VolumeBinding).

The simulated cluster runs the PV controller and a topology-aware provisioner
(bench/simcluster/volumes.py); some tests create claims already bound, as the PV
controller leaves them (a volume named and ``pv.kubernetes.io/bind-completed``).
What is checked is what a kube-scheduler user sees: a pod whose claim is
missing stays Pending with FailedScheduling naming the claim; it binds once the claim is bound (the PVC
event requeues it); a volume's node affinity keeps the pod on the nodes it
names; and a profile that disables the volume plugins places the pod as upstream
would without the plugins. A volume labelled with a zone (VolumeZone) keeps
the pod in that zone. A ReadWriteOncePod claim serves one pod at a time, and
an inline disk one pod per node (VolumeRestrictions). A node takes as many CSI
volumes as its CSINode allows (NodeVolumeLimits).
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from bench.simcluster import errors as sim_errors
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
                         and "default/nowhere" in env.app.scheduler.cache.volumes.api_claims, 10, "the claims to be seen")
        for i in range(4):
            env.create_pod(pod_with_claim(f"db-{i}", "data"))
        env.create_pod(pod_with_claim("lost", "nowhere"))
        placed = await bound(env, *(f"db-{i}" for i in range(4)))
        assert set(placed.values()) <= {"node-b1", "node-b2"}, placed
        c = await unschedulable(env, "lost")
        assert c["message"] == (f"0/3 nodes are available: 3 {reason}. "
                                "no new claims to deallocate, preemption: "
                                "0/3 nodes are available: 3 Preemption is not helpful for scheduling."), c

        env.create_node(zoned("node-c", "c"))   # a node in the volume's zone joins: the pod goes there
        assert (await bound(env, "lost")) == {"lost": "node-c"}


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
                         and "default/solo" in env.app.scheduler.cache.volumes.api_claims, 10, "the claim to be seen")
        env.create_pod(pod_with_claim("first", "solo"))
        await bound(env, "first")
        env.create_pod(pod_with_claim("second", "solo"))
        c = await unschedulable(env, "second")
        assert c["message"] == ("0/2 nodes are available: 2 node has pod using PersistentVolumeClaim with the same "
                                "name and ReadWriteOncePod access mode. "
                                "no new claims to deallocate, preemption: 0/2 nodes are available: "
                                "2 No preemption victims found for incoming pod."), c
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
        assert c["message"] == ("0/2 nodes are available: 2 node(s) had no available disk. "
                                "no new claims to deallocate, preemption: 0/2 nodes "
                                "are available: 2 No preemption victims found for incoming pod."), c
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
            claims = [cache.volumes.assumed_claim(NS, f"data-{i}") for i in range(3)] if cache is not None else [None]
            return "node-0" in cache.attachments.csinodes and all(c is not None and c.bound for c in claims)

        await eventually(ready, 10, "the CSINode and the bound claims to be seen")
        env.create_pod(pod_with_claim("p0", "data-0"))
        env.create_pod(pod_with_claim("p1", "data-1"))
        await bound(env, "p0", "p1")
        env.create_pod(pod_with_claim("p2", "data-2"))
        c = await unschedulable(env, "p2")
        assert c["message"] == ("0/1 nodes are available: 1 node(s) exceed max volume count. "
                                "no new claims to deallocate, preemption: 0/1 "
                                "nodes are available: 1 No preemption victims found for incoming pod."), c
        env.create_pod(pod_with_claim("p0-again", "data-0"))   # a volume already there takes no new slot
        await bound(env, "p0-again")
        env.store.delete(PODS, NS, "p1", grace=0)   # a pod with a volume goes: the deletion requeues p2
        await bound(env, "p2")


# ---------------------------------------------------------------------------- WaitForFirstConsumer

LOCAL_CLASS = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
               "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}


def local_pv(name: str, node: str, size: str = "1Gi") -> dict[str, Any]:
    """A local volume of the WaitForFirstConsumer class, usable from one node (what local-static-provisioner makes)."""
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                     "persistentVolumeReclaimPolicy": "Retain", "local": {"path": f"/mnt/{name}"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}}


def wffc_claim(name: str, size: str = "1Gi", storage_class: str = "local") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": NS},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                     "resources": {"requests": {"storage": size}}}}


def host(name: str, **labels: str) -> dict[str, Any]:
    return make_node(name, labels={"kubernetes.io/hostname": name, **labels})


def replica(set_name: str, i: int, anti_affinity: bool = True) -> dict[str, Any]:
    """A StatefulSet's pod ``<set>-<i>`` with its volumeClaimTemplate's claim ``data-<set>-<i>`` (the stand-in
    has no StatefulSet controller: the test makes what it would)."""
    body = pod_with_claim(f"{set_name}-{i}", f"data-{set_name}-{i}", labels={"app": set_name})
    if anti_affinity:
        body["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": set_name}}, "topologyKey": "kubernetes.io/hostname"}]}}
    return body


def claim_of(env: Any, name: str) -> dict[str, Any]:
    return env.store.get_obj(PVCS, NS, name) or {}


def volumes_of(env: Any) -> dict[str, dict[str, Any]]:
    return {e.obj()["metadata"]["name"]: e.obj() for e in env.store.table(PVS).objects.values()}


async def test_a_stateful_set_with_local_volumes_gets_the_smallest_one_per_node_never_one_twice(tmp_path):
    nodes = [host(f"node-{i}") for i in range(3)]
    async with running(tmp_path, nodes) as env:
        env.store.create(STORAGE_CLASSES, "", copy.deepcopy(LOCAL_CLASS))
        for i in range(3):   # each node: a large volume and a small one that fits
            env.store.create(PVS, "", local_pv(f"big-{i}", f"node-{i}", "10Gi"))
            env.store.create(PVS, "", local_pv(f"small-{i}", f"node-{i}", "2Gi"))
        env.store.create(PVS, "", local_pv("tiny-0", "node-0", "512Mi"))   # too small for the claims
        for i in range(3):
            env.store.create(PVCS, NS, wffc_claim(f"data-db-{i}", "1Gi"))
        for i in range(3):   # created together: their cycles run back to back
            env.create_pod(replica("db", i))
        placed = await bound(env, "db-0", "db-1", "db-2")
        assert sorted(placed.values()) == ["node-0", "node-1", "node-2"], placed   # anti-affinity: one per node
        vols = volumes_of(env)
        for i in range(3):
            c = claim_of(env, f"data-db-{i}")
            name = c["spec"].get("volumeName")
            assert name and name.startswith("small-"), c
            node = name.split("-", 1)[1]
            assert placed[f"db-{i}"] == f"node-{node}", (placed, name)
            ref = vols[name]["spec"]["claimRef"]
            assert (ref["name"], ref["uid"]) == (f"data-db-{i}", c["metadata"]["uid"])
            assert vols[name]["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
        bound_to = [v["spec"]["claimRef"]["name"] for v in vols.values() if v["spec"].get("claimRef")]
        assert sorted(bound_to) == ["data-db-0", "data-db-1", "data-db-2"], bound_to   # each volume once


async def test_two_pods_back_to_back_never_share_a_volume_and_the_third_waits_with_upstreams_reason(tmp_path):
    async with running(tmp_path, [host("node-0")]) as env:
        env.store.create(STORAGE_CLASSES, "", copy.deepcopy(LOCAL_CLASS))
        env.store.create(PVS, "", local_pv("pv-a", "node-0"))
        env.store.create(PVS, "", local_pv("pv-b", "node-0"))
        for i in range(3):
            env.store.create(PVCS, NS, wffc_claim(f"data-web-{i}"))
        await eventually(lambda: env.app.scheduler is not None
                         and "default/data-web-2" in env.app.scheduler.cache.volumes.api_claims, 10, "the claims")
        for i in range(3):
            env.create_pod(replica("web", i, anti_affinity=False))
        await eventually(lambda: sum(bool(env.node_of(f"web-{i}")) for i in range(3)) == 2, 10, "two pods bound")
        waiting = next(f"web-{i}" for i in range(3) if not env.node_of(f"web-{i}"))
        c = await unschedulable(env, waiting)
        assert c["message"] == ("0/1 nodes are available: 1 node(s) didn't find available persistent volumes to "
                                "bind. no new claims to deallocate, preemption: 0/1 nodes are available: "
                                "1 Preemption is not helpful for scheduling."), c
        names = sorted(claim_of(env, f"data-web-{i}")["spec"].get("volumeName", "") for i in range(3))
        assert names == ["", "pv-a", "pv-b"], names


async def test_provisioning_happens_in_the_allowed_zone_with_selected_node_written_before_the_pod_binds(tmp_path):
    nodes = [host("node-a", **{"topology.kubernetes.io/zone": "a"}),
             host("node-b", **{"topology.kubernetes.io/zone": "b"})]
    async with running(tmp_path, nodes) as env:
        order: list[tuple[str, str]] = []

        def on_write(verb: str, resource: str, ns: str, name: str, result: Any) -> None:
            if resource == "pods/binding":
                order.append(("bind", name))
            elif resource == "persistentvolumeclaims" and verb == "update" and name == "data-app-0" \
                    and not isinstance(result, sim_errors.APIError):
                order.append(("claim", name))

        env.store.observe(on_write)
        env.store.create(STORAGE_CLASSES, "", {
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "zonal"},
            "provisioner": "simcluster.tandem.dev", "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["b"]}]}]})
        env.store.create(PVCS, NS, wffc_claim("data-app-0", storage_class="zonal"))
        env.create_pod(replica("app", 0, anti_affinity=False))
        assert (await bound(env, "app-0")) == {"app-0": "node-b"}
        c = claim_of(env, "data-app-0")
        assert c["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "node-b", c
        assert c["status"]["phase"] == "Bound" and c["spec"]["volumeName"], c
        assert order.index(("claim", "data-app-0")) < order.index(("bind", "app-0")), order
        pv = volumes_of(env)[c["spec"]["volumeName"]]
        assert "b" in str(pv["spec"]["nodeAffinity"]), pv   # the provisioner made it in zone b


async def test_a_claim_deleted_while_its_pod_waits_keeps_it_pending_and_its_return_binds_it(tmp_path):
    async with running(tmp_path, [host("node-0")]) as env:
        env.store.create(STORAGE_CLASSES, "", copy.deepcopy(LOCAL_CLASS))
        env.store.create(PVS, "", local_pv("pv-1", "node-1"))     # on a node that is not there yet
        env.store.create(PVCS, NS, wffc_claim("data-db-0"))
        env.create_pod(replica("db", 0, anti_affinity=False))
        c = await unschedulable(env, "db-0")
        assert "1 node(s) didn't find available persistent volumes to bind" in c["message"], c
        env.store.delete(PVCS, NS, "data-db-0")
        await eventually(lambda: not claim_of(env, "data-db-0"), 10, "the claim to go")
        env.create_node(host("node-1"))   # a node add retries the pod (a claim's deletion does not)
        await eventually(lambda: 'persistentvolumeclaim "data-db-0" not found'
                         in scheduled_condition(env.pod("db-0")).get("message", ""), 10, "the claim's absence named")
        await stays(lambda: not env.node_of("db-0"), 0.3, "a pod bound without its claim")
        env.store.create(PVCS, NS, wffc_claim("data-db-0"))   # the claim's return requeues the pod
        assert (await bound(env, "db-0")) == {"db-0": "node-1"}
        assert claim_of(env, "data-db-0")["spec"]["volumeName"] == "pv-1"


def _timeout_config(seconds: int) -> Any:
    return parse_config({**BASE_CONFIG, "profiles": [{"schedulerName": "tandem-scheduler", "pluginConfig": [
        {"name": "VolumeBinding", "args": {"bindTimeoutSeconds": seconds}}]}]}, "<test>")


async def test_a_bind_timeout_requeues_the_pod_and_releases_the_assumed_volume(tmp_path):
    from bench.simcluster.volumes import PersistentVolumeController
    # no PV controller: nobody completes the binding, so PreBind times out
    async with running(tmp_path, [host("node-0")], _timeout_config(1), volumes=None) as env:
        env.store.create(STORAGE_CLASSES, "", copy.deepcopy(LOCAL_CLASS))
        env.store.create(PVS, "", local_pv("pv-0", "node-0"))
        env.store.patch(PVS, "", "pv-0", "application/merge-patch+json", b'{"status": {"phase": "Available"}}',
                        subresource="status")   # what the PV controller would say of it
        env.store.create(PVCS, NS, wffc_claim("data-db-0"))
        env.create_pod(replica("db", 0, anti_affinity=False))
        await eventually(lambda: env.events_by_reason("db-0", "FailedScheduling"), 10, "the timeout")
        notes = [e["note"] for e in await env.events_by_reason("db-0", "FailedScheduling")]
        assert notes[0] == ('running PreBind plugin "VolumeBinding": binding volumes: context deadline exceeded'), notes
        assert scheduled_condition(env.pod("db-0"))["reason"] == "SchedulerError"
        vols = env.app.scheduler.cache.volumes
        assert not vols._pv_assumptions and not vols._pvc_assumptions   # Unreserve released the assumption
        assert not env.node_of("db-0")
        controller = PersistentVolumeController(env.store, tick=0.02)   # the PV controller comes up
        controller.start()
        try:
            assert (await bound(env, "db-0", timeout=20)) == {"db-0": "node-0"}   # requeued, and bound
            assert claim_of(env, "data-db-0")["spec"]["volumeName"] == "pv-0"
        finally:
            await controller.stop()


async def test_a_kill_during_pre_bind_loses_nothing_and_the_restart_binds_the_claim_once(tmp_path):
    from bench.simcluster import SimCluster
    from bench.simcluster.agent import AgentConfig
    from bench.simcluster.volumes import PersistentVolumeController
    from scheduler.app import App
    from tests.integration.test_scheduler import NODES, Env, config

    kc = tmp_path / "kubeconfig"
    async with SimCluster(nodes=0, agent=AgentConfig(ready_delay=0.05, tick=0.01), volumes=None,
                          kubeconfig=kc) as cluster:
        env = Env(cluster, None, None)  # type: ignore[arg-type]
        for n in ("node-0", "node-1"):
            cluster.store.create(NODES, "", host(n))
        env.store.create(STORAGE_CLASSES, "", copy.deepcopy(LOCAL_CLASS))
        env.store.create(PVS, "", local_pv("pv-1", "node-1"))
        env.store.patch(PVS, "", "pv-1", "application/merge-patch+json", b'{"status": {"phase": "Available"}}',
                        subresource="status")
        env.store.create(PVCS, NS, wffc_claim("data-db-0"))
        env.create_pod(replica("db", 0, anti_affinity=False))
        async with App(config(), kubeconfig=str(kc)) as app:
            # PreBind has written the claimRef and waits for a PV controller that is not there
            await eventually(lambda: (volumes_of(env)["pv-1"]["spec"].get("claimRef") or {}).get("uid"), 10,
                             "PreBind's claimRef")
            for task in list(app.scheduler._tasks):   # killed mid-PreBind: no Unreserve, no more writes
                task.cancel()
            await asyncio.sleep(0)
        assert not env.node_of("db-0")
        controller = PersistentVolumeController(env.store, tick=0.02)
        controller.start()
        try:
            async with App(config(), kubeconfig=str(kc)):
                assert (await bound(env, "db-0", timeout=20)) == {"db-0": "node-1"}
                c = claim_of(env, "data-db-0")
                assert c["spec"]["volumeName"] == "pv-1" and c["status"]["phase"] == "Bound", c
                refs = [v["spec"]["claimRef"]["name"] for v in volumes_of(env).values() if v["spec"].get("claimRef")]
                assert refs == ["data-db-0"]
        finally:
            await controller.stop()
