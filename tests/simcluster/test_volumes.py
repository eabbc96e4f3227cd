"""Volumes and claims: the stand-in's volume controllers against kube-controller-manager's.

The PV controller's behaviours run on both servers: on the real one a
kube-controller-manager from ``KUBEBUILDER_ASSETS`` runs its
persistentvolume-binder and the two protection controllers for this module
(:func:`tests.support.envtest.controller_manager`), so the same test checks
the same writes, phases and events there. Classes and volumes are
cluster-scoped and the real controller binds across namespaces, so every
name carries the test's namespace.

The provisioner and the CSINodes are the stand-in's own (the real server has
no provisioner for :data:`PROVISIONER` and no kubelets): those tests run on
the stand-in only, and say so.

Every wait is for a condition, with a bound; none sleeps.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, Awaitable, Callable

import pytest
import pytest_asyncio

from bench.simcluster.volumes import ATTACH_LIMIT, PROVISIONER
from tests.simcluster.conftest import Target, node_body, pod_body
from tests.simcluster.test_writes import MERGE, create, get, unique
from tests.support import envtest

pytestmark = pytest.mark.asyncio(loop_scope="session")

PV_CONTROLLERS = ("persistentvolume-binder-controller", "persistentvolumeclaim-protection-controller",
                  "persistentvolume-protection-controller")
NO_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT = 20.0  # seconds; the real controller's first sync of a new object can take a few


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def kcm(real_server: envtest.RealAPIServer | None,
              tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str | None]:
    """kube-controller-manager's volume controllers on the real server for this module; None when
    running, else why not."""
    reason = envtest.controller_manager_skip_reason()
    if reason is not None or real_server is None:
        yield reason or "the real kube-apiserver did not start"
        return
    async with envtest.controller_manager(real_server, tmp_path_factory.mktemp("kcm"), PV_CONTROLLERS):
        yield None


@pytest_asyncio.fixture(loop_scope="session")
async def cluster(target: Target, kcm: str | None) -> Target:
    """The target, with the volume controllers running on it."""
    if target.kind == "real" and kcm is not None:
        pytest.skip(kcm)
    return target


# ---------------------------------------------------------------------------- helpers

def pvs() -> str:
    return "/api/v1/persistentvolumes"


def pvcs(t: Target) -> str:
    return f"/api/v1/namespaces/{t.ns}/persistentvolumeclaims"


def classes() -> str:
    return "/apis/storage.k8s.io/v1/storageclasses"


def storage_class(name: str, provisioner: str = NO_PROVISIONER, mode: str = "Immediate",
                  **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": provisioner, "volumeBindingMode": mode, **fields}


async def new_class(t: Target, suffix: str = "imm", provisioner: str = NO_PROVISIONER, **fields: Any) -> str:
    """A StorageClass of this test's own (the real controller serves every namespace); returns its name."""
    name = unique(t, suffix)
    await create(t, classes(), storage_class(name, provisioner, **fields))
    return name


def volume(name: str, size: str, cls: str, modes: tuple[str, ...] = ("ReadWriteOnce",), policy: str = "Retain",
           labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    body = {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": cls,
            "persistentVolumeReclaimPolicy": policy, **spec}
    if not any(k in spec for k in ("hostPath", "local", "csi")):
        body["hostPath"] = {"path": f"/tmp/tandem-simvol/{name}"}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "labels": labels or {}},
            "spec": body}


def local(node: str) -> dict[str, Any]:
    return {"local": {"path": "/mnt/disk"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}


def claim(name: str, size: str, cls: str, modes: tuple[str, ...] = ("ReadWriteOnce",),
          annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"accessModes": list(modes), "storageClassName": cls,
                     "resources": {"requests": {"storage": size}}, **spec}}


async def until(fetch: Callable[[], Awaitable[Any]], ok: Callable[[Any], bool], what: str,
                timeout: float = WAIT) -> Any:
    """Poll ``fetch`` until ``ok`` holds of its answer; returns that answer."""
    deadline = time.monotonic() + timeout
    while True:
        got = await fetch()
        if ok(got):
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}; last: {got}")
        await asyncio.sleep(0.05)


async def fetch(t: Target, path: str) -> dict[str, Any] | None:
    r = await t.req("GET", path)
    assert r.status in (200, 404), r.body
    return r.body if r.status == 200 else None


def phase(obj: dict[str, Any] | None) -> str | None:
    return None if obj is None else (obj.get("status") or {}).get("phase")


async def events_of(t: Target, ns: str, name: str) -> list[dict[str, Any]]:
    body = await get(t, f"/api/v1/namespaces/{ns}/events?fieldSelector=involvedObject.name%3D{name}")
    return body["items"]


async def event(t: Target, ns: str, name: str, reason: str) -> dict[str, Any]:
    found = await until(lambda: events_of(t, ns, name), lambda evs: any(e["reason"] == reason for e in evs),
                        f"a {reason} event on {name}")
    return next(e for e in found if e["reason"] == reason)


def annotations(obj: dict[str, Any]) -> dict[str, str]:
    return obj["metadata"].get("annotations") or {}


# ---------------------------------------------------------------------------- the kinds a scheduler reads

async def test_the_storage_kinds_a_scheduler_reads_are_served_as_upstream_serves_them(target):
    body = await get(target, "/apis/storage.k8s.io/v1")
    served = {r["name"]: (r["namespaced"], r["kind"], tuple(r.get("shortNames") or ()), "watch" in r["verbs"])
              for r in body["resources"]}
    assert served["csinodes"] == (False, "CSINode", (), True)
    assert served["csidrivers"] == (False, "CSIDriver", (), True)
    assert served["csistoragecapacities"] == (True, "CSIStorageCapacity", (), True)
    assert served["volumeattachments"] == (False, "VolumeAttachment", (), True)
    assert "volumeattachments/status" in served


async def test_a_volume_attachment_is_stored_without_the_status_it_was_created_with(target):
    name = unique(target, "va")
    created = await create(target, "/apis/storage.k8s.io/v1/volumeattachments", {
        "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": name},
        "spec": {"attacher": PROVISIONER, "nodeName": unique(target, "node"),
                 "source": {"persistentVolumeName": unique(target, "pv")}},
        "status": {"attached": True}})
    assert created["status"] == {"attached": False}
    listed = await get(target, "/apis/storage.k8s.io/v1/volumeattachments")
    assert name in [v["metadata"]["name"] for v in listed["items"]]
    await target.req("DELETE", f"/apis/storage.k8s.io/v1/volumeattachments/{name}")


async def test_volumes_and_claims_get_their_defaults_and_protection_finalizers(target):
    pv = await create(target, pvs(), {"apiVersion": "v1", "kind": "PersistentVolume",
                                      "metadata": {"name": unique(target, "defaults")},
                                      "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                               "hostPath": {"path": "/tmp/tandem-simvol/d"}}})
    assert pv["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert pv["spec"]["volumeMode"] == "Filesystem"
    assert pv["spec"]["hostPath"] == {"path": "/tmp/tandem-simvol/d", "type": ""}
    assert pv["status"]["phase"] == "Pending" and pv["status"]["lastPhaseTransitionTime"]
    pvc = await create(target, pvcs(target), {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                              "metadata": {"name": "d"},
                                              "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                                                       "resources": {"requests": {"storage": "1Gi"}}}})
    assert pvc["metadata"]["finalizers"] == ["kubernetes.io/pvc-protection"]
    assert pvc["spec"]["volumeMode"] == "Filesystem"
    assert pvc["status"] == {"phase": "Pending"}
    sc = await create(target, classes(), {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                          "metadata": {"name": unique(target, "sc")}, "provisioner": "example.com/x"})
    assert (sc["reclaimPolicy"], sc["volumeBindingMode"]) == ("Delete", "Immediate")
    for path in (f"{pvs()}/{pv['metadata']['name']}", f"{pvcs(target)}/d"):
        r = await target.req("PATCH", path, {"metadata": {"finalizers": None}}, content_type=MERGE)
        assert r.status in (200, 404), r.body
        await target.req("DELETE", path)


# ---------------------------------------------------------------------------- the PV controller (both servers)

async def test_an_immediate_claim_is_bound_to_the_smallest_volume_that_fits(cluster):
    t = cluster
    cls = await new_class(t)
    small, fits, big = unique(t, "1g"), unique(t, "5g"), unique(t, "10g")
    for name, size in ((small, "1Gi"), (big, "10Gi"), (fits, "5Gi")):
        await create(t, pvs(), volume(name, size, cls))
    await create(t, pvs(), volume(unique(t, "rwx"), "2Gi", cls, modes=("ReadWriteMany",)))
    await create(t, pvs(), volume(unique(t, "block"), "2Gi", cls, volumeMode="Block"))
    await create(t, pvs(), volume(unique(t, "fast"), "8Gi", cls, labels={"tier": "fast"}))
    await until(lambda: fetch(t, f"{pvs()}/{small}"), lambda pv: phase(pv) == "Available", "the volume Available")

    await create(t, pvcs(t), claim("data", "2Gi", cls))
    await create(t, pvcs(t), claim("picky", "2Gi", cls, selector={"matchLabels": {"tier": "fast"}}))
    pvc = await until(lambda: fetch(t, f"{pvcs(t)}/data"), lambda c: phase(c) == "Bound", "the claim Bound")
    assert pvc["spec"]["volumeName"] == fits
    assert annotations(pvc) == {"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes"}
    assert pvc["status"]["capacity"] == {"storage": "5Gi"} and pvc["status"]["accessModes"] == ["ReadWriteOnce"]
    pv = await until(lambda: fetch(t, f"{pvs()}/{fits}"), lambda v: phase(v) == "Bound", "the volume Bound")
    ref = pv["spec"]["claimRef"]
    assert (ref["kind"], ref["apiVersion"], ref["namespace"], ref["name"], ref["uid"]) == \
        ("PersistentVolumeClaim", "v1", t.ns, "data", pvc["metadata"]["uid"])
    assert annotations(pv) == {"pv.kubernetes.io/bound-by-controller": "yes"}
    picky = await until(lambda: fetch(t, f"{pvcs(t)}/picky"), lambda c: phase(c) == "Bound", "the selective claim Bound")
    assert picky["spec"]["volumeName"] == unique(t, "fast")
    for name in (small, big, unique(t, "rwx"), unique(t, "block")):
        left = await fetch(t, f"{pvs()}/{name}")
        assert phase(left) == "Available" and "claimRef" not in left["spec"], left


async def test_a_claim_ref_written_by_a_scheduler_is_completed_into_a_binding(cluster):
    t = cluster
    cls = await new_class(t, "wffc", mode="WaitForFirstConsumer")
    name = unique(t, "local")
    await create(t, pvs(), volume(name, "1Gi", cls, **local(unique(t, "node"))))
    pvc = await create(t, pvcs(t), claim("data", "1Gi", cls))
    ev = await event(t, t.ns, "data", "WaitForFirstConsumer")
    assert (ev["type"], ev["message"], ev["source"]["component"]) == \
        ("Normal", "waiting for first consumer to be created before binding", "persistentvolume-controller")
    pv = await until(lambda: fetch(t, f"{pvs()}/{name}"), lambda v: phase(v) == "Available", "the volume Available")
    assert "claimRef" not in pv["spec"]  # a delayed claim is not bound by the controller

    # kube-scheduler's PreBind: the claimRef with the claim's uid, and bound-by-controller
    pv["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": t.ns, "name": "data",
                              "uid": pvc["metadata"]["uid"], "resourceVersion": pvc["metadata"]["resourceVersion"]}
    pv["metadata"]["annotations"] = {"pv.kubernetes.io/bound-by-controller": "yes"}
    r = await t.req("PUT", f"{pvs()}/{name}", pv)
    assert r.status == 200, r.body
    bound = await until(lambda: fetch(t, f"{pvcs(t)}/data"), lambda c: phase(c) == "Bound", "the claim Bound")
    assert bound["spec"]["volumeName"] == name
    assert annotations(bound) == {"pv.kubernetes.io/bind-completed": "yes",
                                  "pv.kubernetes.io/bound-by-controller": "yes"}
    pv = await until(lambda: fetch(t, f"{pvs()}/{name}"), lambda v: phase(v) == "Bound", "the volume Bound")
    assert pv["spec"]["claimRef"]["resourceVersion"] == pvc["metadata"]["resourceVersion"]  # left as written


async def test_a_delayed_claim_names_the_unscheduled_pods_that_wait_for_it(cluster):
    t = cluster
    cls = await new_class(t, "wffc", mode="WaitForFirstConsumer")
    for name in ("web-1", "web-0"):
        await create(t, f"/api/v1/namespaces/{t.ns}/pods",
                     pod_body(name, volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "shared"}}]))
    await create(t, f"/api/v1/namespaces/{t.ns}/pods",
                 pod_body("solo", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "own"}}]))
    await create(t, pvcs(t), claim("shared", "1Gi", cls))
    await create(t, pvcs(t), claim("own", "1Gi", cls))
    ev = await event(t, t.ns, "shared", "WaitForPodScheduled")
    # upstream lists them in its pod index's order, which is no order
    assert ev["type"] == "Normal" and ev["message"] in ("waiting for pods web-0,web-1 to be scheduled",
                                                        "waiting for pods web-1,web-0 to be scheduled")
    ev = await event(t, t.ns, "own", "WaitForPodScheduled")
    assert ev["message"] == "waiting for pod solo to be scheduled"


async def test_a_selected_node_hands_a_delayed_claim_to_its_provisioner(cluster):
    t = cluster
    wffc, imm = unique(t, "wffc"), unique(t, "imm")
    await create(t, classes(), storage_class(wffc, "example.com/external", "WaitForFirstConsumer"))
    await create(t, classes(), storage_class(imm, "example.com/external"))
    await create(t, pvcs(t), claim("later", "1Gi", wffc))
    await create(t, pvcs(t), claim("now", "1Gi", imm))
    await event(t, t.ns, "later", "WaitForFirstConsumer")
    assert not {k for k in annotations(await get(t, f"{pvcs(t)}/later")) if "provisioner" in k}
    ev = await event(t, t.ns, "now", "ExternalProvisioning")
    assert ev["message"] == ("Waiting for a volume to be created either by the external provisioner "
                             "'example.com/external' or manually by the system administrator. If volume creation "
                             "is delayed, please verify that the provisioner is running and correctly registered.")

    # kube-scheduler's PreBind for provisioning: selected-node only
    r = await t.req("PATCH", f"{pvcs(t)}/later",
                    {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "n1"}}}, content_type=MERGE)
    assert r.status == 200, r.body
    for name in ("later", "now"):
        pvc = await until(lambda name=name: fetch(t, f"{pvcs(t)}/{name}"),
                          lambda c: "volume.kubernetes.io/storage-provisioner" in annotations(c),
                          f"{name}: the provisioner annotations")
        assert annotations(pvc)["volume.kubernetes.io/storage-provisioner"] == "example.com/external"
        assert annotations(pvc)["volume.beta.kubernetes.io/storage-provisioner"] == "example.com/external"
        assert phase(pvc) == "Pending" and not pvc["spec"].get("volumeName")
    await event(t, t.ns, "later", "ExternalProvisioning")


async def test_claims_nothing_can_serve_get_upstreams_events(cluster):
    t = cluster
    imm = await new_class(t)
    await create(t, pvs(), volume(unique(t, "rwo"), "1Gi", imm))
    await create(t, pvcs(t), claim("too-big", "100Gi", imm))
    await create(t, pvcs(t), claim("no-class", "1Gi", ""))
    await create(t, pvcs(t), claim("no-such-class", "1Gi", unique(t, "missing")))
    await create(t, pvcs(t), claim("mismatch", "1Gi", imm, modes=("ReadWriteMany",), volumeName=unique(t, "rwo")))
    expected = {
        "too-big": ("Warning", "ProvisioningFailed", "no volume plugin matched name: kubernetes.io/no-provisioner"),
        "no-class": ("Normal", "FailedBinding", "no persistent volumes available for this claim and no storage class is set"),
        "no-such-class": ("Warning", "ProvisioningFailed",
                          f'storageclass.storage.k8s.io "{unique(t, "missing")}" not found'),
        "mismatch": ("Warning", "VolumeMismatch", f'Cannot bind to requested volume "{unique(t, "rwo")}": incompatible accessMode'),
    }
    for name, (type_, reason, message) in expected.items():
        ev = await event(t, t.ns, name, reason)
        assert (ev["type"], ev["message"]) == (type_, message)
        assert phase(await get(t, f"{pvcs(t)}/{name}")) == "Pending"


async def test_a_deleted_claim_is_reclaimed_by_its_volumes_policy(cluster):
    t = cluster
    cls = await new_class(t)
    keep, scrap, stuck = unique(t, "keep"), unique(t, "scrap"), unique(t, "stuck")
    await create(t, pvs(), volume(keep, "1Gi", cls))
    await create(t, pvs(), volume(scrap, "2Gi", cls, policy="Delete"))  # a /tmp hostPath: deletable in-tree
    await create(t, pvs(), volume(stuck, "3Gi", cls, policy="Delete", **local(unique(t, "node"))))
    for name, size in (("keep", "1Gi"), ("scrap", "2Gi"), ("stuck", "3Gi")):
        await create(t, pvcs(t), claim(name, size, cls))
    for name in ("keep", "scrap", "stuck"):
        await until(lambda name=name: fetch(t, f"{pvcs(t)}/{name}"), lambda c: phase(c) == "Bound", f"{name} Bound")
        r = await t.req("DELETE", f"{pvcs(t)}/{name}")
        assert r.status == 200, r.body
    for name in ("keep", "scrap", "stuck"):  # no pod uses them: the protection finalizer goes, then the claim
        await until(lambda name=name: fetch(t, f"{pvcs(t)}/{name}"), lambda c: c is None, f"claim {name} gone")

    kept = await until(lambda: fetch(t, f"{pvs()}/{keep}"), lambda v: phase(v) == "Released", "Retain: Released")
    assert kept["spec"]["claimRef"]["name"] == "keep"  # a released volume keeps its claimRef
    await until(lambda: fetch(t, f"{pvs()}/{scrap}"), lambda v: v is None, "Delete: the volume gone")
    failed = await until(lambda: fetch(t, f"{pvs()}/{stuck}"), lambda v: phase(v) == "Failed", "no deleter: Failed")
    message = f'error getting deleter volume plugin for volume "{stuck}": no volume plugin matched'
    assert failed["status"]["message"] == message
    ev = await event(t, "default", stuck, "VolumeFailedDelete")
    assert (ev["type"], ev["message"], ev["involvedObject"]["kind"]) == ("Warning", message, "PersistentVolume")


async def test_a_bound_volume_is_protected_and_its_claim_is_lost_when_it_goes(cluster):
    t = cluster
    cls = await new_class(t)
    name = unique(t, "pv")
    await create(t, pvs(), volume(name, "1Gi", cls))
    await create(t, pvcs(t), claim("data", "1Gi", cls))
    await until(lambda: fetch(t, f"{pvcs(t)}/data"), lambda c: phase(c) == "Bound", "the claim Bound")
    r = await t.req("DELETE", f"{pvs()}/{name}")
    assert r.status == 200, r.body
    # a claim to it keeps it (not Bound any more would let pv-protection lift its finalizer) ...
    await until(lambda: fetch(t, f"{pvcs(t)}/data"), lambda c: c is not None, "the claim")
    pv = await fetch(t, f"{pvs()}/{name}")
    assert pv is not None and pv["metadata"]["deletionTimestamp"] and phase(pv) == "Bound"
    # ... until someone forces it out: the claim is then Lost
    r = await t.req("PATCH", f"{pvs()}/{name}", {"metadata": {"finalizers": None}}, content_type=MERGE)
    assert r.status == 200, r.body
    lost = await until(lambda: fetch(t, f"{pvcs(t)}/data"), lambda c: phase(c) == "Lost", "the claim Lost")
    assert lost["status"] == {"phase": "Lost"}
    ev = await event(t, t.ns, "data", "ClaimLost")
    assert (ev["type"], ev["message"]) == ("Warning", "Bound claim has lost its PersistentVolume. Data on the volume is lost!")


async def test_a_claim_used_by_a_scheduled_pod_is_kept_until_the_pod_goes(cluster):
    t = cluster
    cls = await new_class(t)
    await create(t, pvs(), volume(unique(t, "pv"), "1Gi", cls))
    await create(t, pvcs(t), claim("data", "1Gi", cls))
    pod = pod_body("user", nodeName=unique(t, "node"),
                   volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}])
    await create(t, f"/api/v1/namespaces/{t.ns}/pods", pod)
    await until(lambda: fetch(t, f"{pvcs(t)}/data"), lambda c: phase(c) == "Bound", "the claim Bound")
    r = await t.req("DELETE", f"{pvcs(t)}/data")
    assert r.status == 200, r.body
    # the control: a claim nobody uses, deleted after this one, is gone first
    await create(t, pvcs(t), claim("free", "1Gi", ""))
    await t.req("DELETE", f"{pvcs(t)}/free")
    await until(lambda: fetch(t, f"{pvcs(t)}/free"), lambda c: c is None, "the unused claim gone")
    held = await fetch(t, f"{pvcs(t)}/data")
    assert held is not None and held["metadata"]["deletionTimestamp"], held
    r = await t.req("DELETE", f"/api/v1/namespaces/{t.ns}/pods/user", params={"gracePeriodSeconds": "0"})
    assert r.status == 200, r.body
    await until(lambda: fetch(t, f"{pvcs(t)}/data"), lambda c: c is None, "the claim gone with its pod")


# ---------------------------------------------------------------------------- the test provisioner (stand-in only)

ONLY_SIM = f"the provisioner {PROVISIONER} and the CSINodes are the stand-in's; the real server has neither"


def zone_affinity(key: str, value: str) -> dict[str, Any]:
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]}}


async def nodes_in_zones(t: Target, zones: dict[str, str]) -> None:
    for name, zone in zones.items():
        await create(t, "/api/v1/nodes", node_body(name, labels={"topology.kubernetes.io/zone": zone}))


@pytest.mark.parametrize("parameters, key, where", [
    pytest.param({}, "topology.kubernetes.io/zone", "zone-b", id="zone by default"),
    pytest.param({"topology": "zone"}, "topology.kubernetes.io/zone", "zone-b", id="zone"),
    pytest.param({"topology": "hostname"}, "kubernetes.io/hostname", "node-b", id="hostname"),
])
async def test_the_provisioner_makes_the_volume_where_the_selected_node_is(target, parameters, key, where):
    target.only_sim(ONLY_SIM)
    t = target
    await nodes_in_zones(t, {unique(t, "node-a"): "zone-a", unique(t, "node-b"): "zone-b"})
    cls = unique(t, "dyn")
    await create(t, classes(), storage_class(cls, PROVISIONER, "WaitForFirstConsumer", parameters=parameters,
                                             reclaimPolicy="Retain", mountOptions=["noatime"]))
    pvc = await create(t, pvcs(t), claim("data", "3Gi", cls, annotations={
        "volume.kubernetes.io/selected-node": unique(t, "node-b")}))
    bound = await until(lambda: fetch(t, f"{pvcs(t)}/data"), lambda c: phase(c) == "Bound", "the claim Bound")
    name = f"pvc-{pvc['metadata']['uid']}"
    assert bound["spec"]["volumeName"] == name
    assert annotations(bound)["volume.kubernetes.io/storage-provisioner"] == PROVISIONER
    pv = await get(t, f"{pvs()}/{name}")
    want = unique(t, where) if where.startswith("node") else where
    assert pv["spec"]["nodeAffinity"] == zone_affinity(key, want)
    assert pv["spec"]["capacity"] == {"storage": "3Gi"}
    assert (pv["spec"]["persistentVolumeReclaimPolicy"], pv["spec"]["mountOptions"]) == ("Retain", ["noatime"])
    assert pv["spec"]["csi"]["driver"] == PROVISIONER
    assert annotations(pv) == {"pv.kubernetes.io/provisioned-by": PROVISIONER}
    assert phase(pv) == "Bound"
    await event(t, t.ns, "data", "ProvisioningSucceeded")


async def test_the_provisioner_refuses_a_node_outside_the_allowed_topologies_until_one_is_chosen(target):
    target.only_sim(ONLY_SIM)
    t = target
    await nodes_in_zones(t, {unique(t, "node-a"): "zone-a", unique(t, "node-b"): "zone-b"})
    cls = unique(t, "dyn")
    await create(t, classes(), storage_class(cls, PROVISIONER, "WaitForFirstConsumer", allowedTopologies=[
        {"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["zone-a"]}]}]))
    await create(t, pvcs(t), claim("data", "1Gi", cls, annotations={
        "volume.kubernetes.io/selected-node": unique(t, "node-b")}))
    ev = await event(t, t.ns, "data", "ProvisioningFailed")
    assert ev["message"] == (f'failed to provision volume with StorageClass "{cls}": selected node '
                             f'"{unique(t, "node-b")}" is not in the allowed topologies of the class')
    assert phase(await get(t, f"{pvcs(t)}/data")) == "Pending"
    r = await t.req("PATCH", f"{pvcs(t)}/data", {"metadata": {"annotations": {
        "volume.kubernetes.io/selected-node": unique(t, "node-a")}}}, content_type=MERGE)
    assert r.status == 200, r.body
    bound = await until(lambda: fetch(t, f"{pvcs(t)}/data"), lambda c: phase(c) == "Bound", "the claim Bound")
    pv = await get(t, f"{pvs()}/{bound['spec']['volumeName']}")
    assert pv["spec"]["nodeAffinity"] == zone_affinity("topology.kubernetes.io/zone", "zone-a")


async def test_the_provisioner_serves_an_immediate_claim_without_topology_and_deletes_its_volume(target):
    target.only_sim(ONLY_SIM)
    t = target
    cls = unique(t, "dyn")
    await create(t, classes(), storage_class(cls, PROVISIONER))
    await create(t, pvcs(t), claim("data", "2Gi", cls, modes=("ReadWriteMany",), volumeMode="Block"))
    bound = await until(lambda: fetch(t, f"{pvcs(t)}/data"), lambda c: phase(c) == "Bound", "the claim Bound")
    name = bound["spec"]["volumeName"]
    pv = await get(t, f"{pvs()}/{name}")
    assert "nodeAffinity" not in pv["spec"]
    assert (pv["spec"]["accessModes"], pv["spec"]["volumeMode"]) == (["ReadWriteMany"], "Block")
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete"  # the class's default
    r = await t.req("DELETE", f"{pvcs(t)}/data")
    assert r.status == 200, r.body
    await until(lambda: fetch(t, f"{pvs()}/{name}"), lambda v: v is None, "the provisioned volume deleted")


async def test_every_node_gets_a_csinode_with_the_drivers_attach_limit(target):
    target.only_sim(ONLY_SIM)
    t = target
    plain, limited = unique(t, "plain"), unique(t, "limited")
    await create(t, "/api/v1/nodes", node_body(plain))
    body = node_body(limited)
    body["metadata"]["annotations"] = {ATTACH_LIMIT: "7"}
    node = await create(t, "/api/v1/nodes", body)
    csinode = await until(lambda: fetch(t, f"/apis/storage.k8s.io/v1/csinodes/{limited}"), lambda c: c is not None,
                          "the CSINode")
    assert csinode["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": limited,
                                                       "uid": node["metadata"]["uid"]}]
    assert csinode["spec"]["drivers"] == [{"name": PROVISIONER, "nodeID": limited, "allocatable": {"count": 7},
                                           "topologyKeys": ["kubernetes.io/hostname", "topology.kubernetes.io/zone"]}]
    other = await until(lambda: fetch(t, f"/apis/storage.k8s.io/v1/csinodes/{plain}"), lambda c: c is not None,
                        "the CSINode")
    assert "allocatable" not in other["spec"]["drivers"][0]  # no limit configured
    assert (await get(t, f"/apis/storage.k8s.io/v1/csidrivers/{PROVISIONER}"))["spec"]["attachRequired"] is True
    await t.req("DELETE", f"/api/v1/nodes/{limited}")
    await until(lambda: fetch(t, f"/apis/storage.k8s.io/v1/csinodes/{limited}"), lambda c: c is None,
                "the CSINode gone with its node")
