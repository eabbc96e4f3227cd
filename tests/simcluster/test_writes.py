"""Object writes on the simulated cluster, held to what kube-apiserver does.

Every assertion here holds on a real kube-apiserver too (the ``target``
fixture runs each test against both when one is available), so the stand-in
cannot drift: resourceVersion and system metadata, optimistic concurrency,
spec/status separation, the three patch flavours, deletion with
preconditions, grace and finalizers, dry runs, pod defaulting and admission,
the pod update rules, event conversion, and the smaller built-in kinds.

The real test server has no kubelets, so tests that need a pod to stay put
on a node first stop the stand-in's node agent (:func:`without_kubelets`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

import pytest

from tests.simcluster.conftest import Resp, Target, node_body, pod_body

pytestmark = pytest.mark.asyncio(loop_scope="session")

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STALE = "the object has been modified; please apply your changes to the latest version and try again"


# ---------------------------------------------------------------------------- helpers

def pods(t: Target) -> str:
    return f"/api/v1/namespaces/{t.ns}/pods"


def podgroups(t: Target) -> str:
    return f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{t.ns}/podgroups"


def leases(t: Target) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{t.ns}/leases"


def nodes(_: Target) -> str:
    return "/api/v1/nodes"


def podgroup_body(name: str, min_member: int = 2) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name}, "spec": {"minMember": min_member}}


def lease_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"holderIdentity": "tester", "leaseDurationSeconds": 15}}


def rv(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


def assert_status(r: Resp, code: int, reason: str | None) -> dict[str, Any]:
    """The reply is a failure ``Status`` with this code and reason; returns the body."""
    assert r.status == code, r.body
    body = r.body
    assert isinstance(body, dict), body
    assert (body.get("kind"), body.get("apiVersion"), body.get("status"), body.get("code")) == \
        ("Status", "v1", "Failure", code), body
    assert body.get("reason") == reason, body
    return body


async def create(t: Target, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = await t.req("POST", path, body)
    assert r.status == 201, r.body
    return r.body


async def get(t: Target, path: str) -> dict[str, Any]:
    r = await t.req("GET", path)
    assert r.status == 200, r.body
    return r.body


async def assert_gone(t: Target, path: str) -> None:
    r = await t.req("GET", path)
    assert r.status == 404, r.body


async def without_kubelets(t: Target) -> None:
    """The real test server runs no kubelets; stop the stand-in's so pods on nodes stay put alike."""
    if t.sim is not None and t.sim.node_agent is not None:
        await t.sim.node_agent.stop()


@dataclass(frozen=True)
class Kind:
    """One resource as the table-driven tests use it."""

    name: str
    collection: Callable[[Target], str]
    body: Callable[[str], dict[str, Any]]

    def path(self, t: Target, name: str) -> str:
        return f"{self.collection(t)}/{name}"


POD = Kind("pod", pods, lambda n: pod_body(n, labels={"app": "web"}))
NODE = Kind("node", nodes, lambda n: node_body(n))
PODGROUP = Kind("podgroup", podgroups, podgroup_body)
LEASE = Kind("lease", leases, lease_body)


def unique(t: Target, suffix: str = "obj") -> str:
    # nodes and other cluster-scoped objects outlive the test on the real server: names carry the namespace
    return f"{t.ns}-{suffix}"


# ---------------------------------------------------------------------------- resourceVersion and metadata

async def test_resource_version_is_global_and_increases_on_every_write(target):
    pod = await create(target, pods(target), pod_body("p"))
    lease = await create(target, leases(target), lease_body("l"))
    pod["metadata"]["labels"] = {"step": "3"}
    r = await target.req("PUT", f"{pods(target)}/p", pod)
    assert r.status == 200, r.body
    updated = r.body
    r = await target.req("PATCH", f"{leases(target)}/l", {"spec": {"holderIdentity": "other"}},
                         content_type=MERGE)
    assert r.status == 200, r.body
    patched = r.body
    node = await create(target, "/api/v1/nodes", node_body(unique(target, "node")))

    versions = [rv(pod), rv(lease), rv(updated), rv(patched), rv(node)]
    assert versions == sorted(versions) and len(set(versions)) == len(versions), versions
    listed = await get(target, pods(target))
    assert int(listed["metadata"]["resourceVersion"]) >= versions[-1]


@pytest.mark.parametrize("kind", [POD, NODE, PODGROUP, LEASE], ids=lambda k: f"a {k.name}")
async def test_update_that_changes_nothing_keeps_the_resource_version(target, kind):
    name = unique(target)
    created = await create(target, kind.collection(target), kind.body(name))
    r = await target.req("PUT", kind.path(target, name), created)
    assert r.status == 200, r.body
    assert r.body["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    r = await target.req("PATCH", kind.path(target, name), {}, content_type=MERGE)
    assert r.status == 200, r.body
    assert r.body["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_uid_and_creation_timestamp_are_set_by_the_server(target):
    body = pod_body("p")
    body["metadata"].update(uid="not-a-real-uid", creationTimestamp="2001-01-01T00:00:00Z")
    pod = await create(target, pods(target), body)
    meta = pod["metadata"]
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", meta["uid"]), meta
    assert meta["creationTimestamp"] != "2001-01-01T00:00:00Z"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["creationTimestamp"])


async def test_create_with_a_resource_version_is_refused_by_storage(target):
    body = pod_body("p")
    body["metadata"]["resourceVersion"] = "12345"
    r = await target.req("POST", pods(target), body)
    # etcd3 store.Create's ErrResourceVersionSetOnCreate is a bare error: kube-apiserver answers 500
    assert_status(r, 500, None)
    assert r.body["message"] == "resourceVersion should not be set on objects to be created"
    await assert_gone(target, f"{pods(target)}/p")


async def test_invalid_object_with_a_taken_name_is_422_before_409(target):
    await create(target, pods(target), pod_body("p"))
    r = await target.req("POST", pods(target), pod_body("p", cpu="-1"))
    assert_status(r, 422, "Invalid")


async def test_update_cannot_change_the_creation_timestamp(target):
    pod = await create(target, pods(target), pod_body("p"))
    born = pod["metadata"]["creationTimestamp"]
    pod["metadata"]["creationTimestamp"] = "2001-01-01T00:00:00Z"
    pod["metadata"]["labels"] = {"touched": "yes"}
    r = await target.req("PUT", f"{pods(target)}/p", pod)
    assert r.status == 200, r.body
    assert r.body["metadata"]["creationTimestamp"] == born
    assert r.body["metadata"]["labels"] == {"touched": "yes"}


async def test_update_with_a_different_uid_is_409_conflict(target):
    pod = await create(target, pods(target), pod_body("p"))
    uid = pod["metadata"]["uid"]
    pod["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    r = await target.req("PUT", f"{pods(target)}/p", pod)
    body = assert_status(r, 409, "Conflict")
    # the uid in an update body is a storage precondition (rest.DefaultUpdatedObjectInfo)
    assert body["message"].startswith('Operation cannot be fulfilled on pods "p": '), body
    assert (f"Precondition failed: UID in precondition: 00000000-0000-0000-0000-000000000000, "
            f"UID in object meta: {uid}") in body["message"], body


async def test_an_updates_uid_precondition_is_checked_before_its_resource_version(target):
    pod = await create(target, pods(target), pod_body("p"))
    stale = {**pod, "metadata": {**pod["metadata"], "uid": "00000000-0000-0000-0000-000000000000"}}
    r = await target.req("PATCH", f"{pods(target)}/p", {"metadata": {"labels": {"a": "b"}}}, content_type=MERGE)
    assert r.status == 200, r.body
    r = await target.req("PUT", f"{pods(target)}/p", stale)
    body = assert_status(r, 409, "Conflict")
    assert "Precondition failed: UID in precondition: 00000000-0000-0000-0000-000000000000" in body["message"], body


@pytest.mark.parametrize("subresource", ["", "/status"], ids=["the pod", "its status"])
async def test_patch_with_a_different_uid_is_422_invalid_not_a_precondition(target, subresource):
    await create(target, pods(target), pod_body("p"))
    wrong = "00000000-0000-0000-0000-000000000000"
    r = await target.req("PATCH", f"{pods(target)}/p{subresource}", {"metadata": {"uid": wrong}},
                         content_type=STRATEGIC)
    body = assert_status(r, 422, "Invalid")
    # a patch has no uid precondition: the patched object fails validation twice, the message says it once
    cause = f'Invalid value: "{wrong}": field is immutable'
    assert body["message"] == f'Pod "p" is invalid: metadata.uid: {cause}', body
    assert body["details"]["causes"] == [{"reason": "FieldValueInvalid", "message": cause, "field": "metadata.uid"}] * 2


@pytest.mark.parametrize("kind,change_spec", [
    pytest.param(POD, lambda o: o["spec"]["containers"][0].update(image="registry.k8s.io/pause:3.9"),
                 id="a pod's image change bumps generation"),
    pytest.param(PODGROUP, lambda o: o["spec"].update(minMember=5),
                 id="a podgroup's minMember change bumps generation"),
])
async def test_generation_starts_at_one_and_only_spec_changes_bump_it(target, kind, change_spec):
    obj = await create(target, kind.collection(target), kind.body("g"))
    assert obj["metadata"]["generation"] == 1
    obj["metadata"]["labels"] = {"only": "labels"}
    r = await target.req("PUT", kind.path(target, "g"), obj)
    assert r.status == 200, r.body
    assert r.body["metadata"]["generation"] == 1
    obj = r.body
    change_spec(obj)
    r = await target.req("PUT", kind.path(target, "g"), obj)
    assert r.status == 200, r.body
    assert r.body["metadata"]["generation"] == 2
    # a spec write that changes nothing is no change
    r = await target.req("PUT", kind.path(target, "g"), r.body)
    assert r.body["metadata"]["generation"] == 2


async def test_generate_name_appends_five_random_characters(target):
    body = pod_body("")
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = "web-"
    first = await create(target, pods(target), body)
    second = await create(target, pods(target), body)
    for pod in (first, second):
        assert re.fullmatch(r"web-[bcdfghjklmnpqrstvwxz2456789]{5}", pod["metadata"]["name"]), pod["metadata"]
        assert pod["metadata"]["generateName"] == "web-"
    assert first["metadata"]["name"] != second["metadata"]["name"]


@pytest.mark.parametrize("kind,qualified,group", [
    pytest.param(POD, "pods", None, id="a pod twice is pods already exists"),
    pytest.param(LEASE, "leases.coordination.k8s.io", "coordination.k8s.io",
                 id="a lease twice is leases.coordination.k8s.io already exists"),
    pytest.param(PODGROUP, "podgroups.scheduling.x-k8s.io", "scheduling.x-k8s.io",
                 id="a podgroup twice is podgroups.scheduling.x-k8s.io already exists"),
])
async def test_create_of_an_existing_name_is_409_already_exists(target, kind, qualified, group):
    await create(target, kind.collection(target), kind.body("dup"))
    r = await target.req("POST", kind.collection(target), kind.body("dup"))
    body = assert_status(r, 409, "AlreadyExists")
    assert body["message"] == f'{qualified} "dup" already exists'
    assert body["details"]["name"] == "dup"
    assert body["details"]["kind"] == qualified.split(".")[0]
    assert body["details"].get("group") == group


@pytest.mark.parametrize("kind", [POD, NODE, PODGROUP, LEASE], ids=lambda k: f"a {k.name}")
async def test_update_with_stale_resource_version_is_409_conflict(target, kind):
    name = unique(target)
    obj = await create(target, kind.collection(target), kind.body(name))
    obj["metadata"]["labels"] = {"round": "1"}
    r = await target.req("PUT", kind.path(target, name), obj)
    assert r.status == 200, r.body
    obj["metadata"]["labels"] = {"round": "2"}  # still carries the first resourceVersion
    r = await target.req("PUT", kind.path(target, name), obj)
    body = assert_status(r, 409, "Conflict")
    plural = kind.collection(target).rsplit("/", 1)[1]
    group = kind.collection(target).split("/")[2] if kind.collection(target).startswith("/apis/") else ""
    qualified = f"{plural}.{group}" if group else plural
    assert body["message"] == f'Operation cannot be fulfilled on {qualified} "{name}": {STALE}'
    assert body["details"]["name"] == name and body["details"]["kind"] == plural


async def test_resource_version_precondition_in_an_update_must_be_current(target):
    pod = await create(target, pods(target), pod_body("p"))
    pod["metadata"]["resourceVersion"] = str(rv(pod) - 1)
    r = await target.req("PUT", f"{pods(target)}/p", pod)
    assert_status(r, 409, "Conflict")


# ---------------------------------------------------------------------------- spec and status

def _pod_status_change(o: dict[str, Any]) -> None:
    o["status"]["phase"] = "Running"


def _node_status_change(o: dict[str, Any]) -> None:
    o["status"]["capacity"]["cpu"] = "99"


def _podgroup_status_change(o: dict[str, Any]) -> None:
    o["status"] = {"phase": "Running", "scheduled": 2}


@pytest.mark.parametrize("kind,change_status,read_status", [
    pytest.param(POD, _pod_status_change, lambda o: o["status"]["phase"], id="a pod keeps phase Pending"),
    pytest.param(NODE, _node_status_change, lambda o: o["status"]["capacity"]["cpu"], id="a node keeps its capacity"),
    pytest.param(PODGROUP, _podgroup_status_change, lambda o: o.get("status", {}).get("phase"),
                 id="a podgroup keeps no status"),
])
async def test_update_of_the_main_resource_ignores_status(target, kind, change_status, read_status):
    name = unique(target)
    created = await create(target, kind.collection(target), kind.body(name))
    before = read_status(created)
    obj = dict(created)
    change_status(obj)
    obj["metadata"]["labels"] = {**(obj["metadata"].get("labels") or {}), "written": "yes"}
    r = await target.req("PUT", kind.path(target, name), obj)
    assert r.status == 200, r.body
    assert r.body["metadata"]["labels"]["written"] == "yes"
    assert read_status(r.body) == before
    assert read_status(await get(target, kind.path(target, name))) == before


def _pod_spec_change(o: dict[str, Any]) -> None:
    o["spec"]["containers"][0]["image"] = "registry.k8s.io/pause:3.9"


def _node_spec_change(o: dict[str, Any]) -> None:
    o.setdefault("spec", {})["unschedulable"] = True


def _podgroup_spec_change(o: dict[str, Any]) -> None:
    o["spec"]["minMember"] = 9


@pytest.mark.parametrize("kind,change_spec,read_spec,change_status,read_status", [
    pytest.param(POD, _pod_spec_change, lambda o: o["spec"]["containers"][0]["image"],
                 _pod_status_change, lambda o: o["status"]["phase"], id="a pod keeps its image"),
    pytest.param(NODE, _node_spec_change, lambda o: bool(o.get("spec", {}).get("unschedulable")),
                 _node_status_change, lambda o: o["status"]["capacity"]["cpu"], id="a node stays schedulable"),
    pytest.param(PODGROUP, _podgroup_spec_change, lambda o: o["spec"]["minMember"],
                 _podgroup_status_change, lambda o: o["status"]["phase"], id="a podgroup keeps minMember"),
])
async def test_status_update_ignores_spec_changes(target, kind, change_spec, read_spec, change_status,
                                                  read_status):
    name = unique(target)
    created = await create(target, kind.collection(target), kind.body(name))
    spec_before = read_spec(created)
    obj = await get(target, kind.path(target, name))
    change_spec(obj)
    change_status(obj)
    r = await target.req("PUT", kind.path(target, name) + "/status", obj)
    assert r.status == 200, r.body
    assert read_spec(r.body) == spec_before
    assert read_status(r.body) == read_status(obj)
    stored = await get(target, kind.path(target, name))
    assert read_spec(stored) == spec_before and read_status(stored) == read_status(obj)


@pytest.mark.parametrize("kind,keeps_label", [
    # pods/status and nodes/status strategies reset only spec (and ownerReferences); the labels
    # in the body are written, as kube-apiserver does. A custom resource's status write resets
    # all of metadata.
    pytest.param(POD, True, id="a pod's status write takes label changes along"),
    pytest.param(NODE, True, id="a node's status write takes label changes along"),
    pytest.param(PODGROUP, False, id="a podgroup's status write drops label changes"),
])
async def test_status_update_and_labels(target, kind, keeps_label):
    name = unique(target)
    await create(target, kind.collection(target), kind.body(name))
    obj = await get(target, kind.path(target, name))
    obj["metadata"]["labels"] = {**(obj["metadata"].get("labels") or {}), "via-status": "yes"}
    obj.setdefault("status", {})
    r = await target.req("PUT", kind.path(target, name) + "/status", obj)
    assert r.status == 200, r.body
    labels = (await get(target, kind.path(target, name)))["metadata"].get("labels") or {}
    assert ("via-status" in labels) is keeps_label, labels


# ---------------------------------------------------------------------------- patch

async def test_merge_patch_sets_and_removes_labels(target):
    await create(target, pods(target), pod_body("p", labels={"app": "web", "tier": "front"}))
    r = await target.req("PATCH", f"{pods(target)}/p",
                         {"metadata": {"labels": {"tier": None, "track": "canary"}}}, content_type=MERGE)
    assert r.status == 200, r.body
    assert r.body["metadata"]["labels"] == {"app": "web", "track": "canary"}


async def test_strategic_merge_patch_of_one_pod_condition_leaves_the_others(target):
    await create(target, pods(target), pod_body("p"))
    status = f"{pods(target)}/p/status"
    for cond in ({"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
                 {"type": "Initialized", "status": "True"}):
        r = await target.req("PATCH", status, {"status": {"conditions": [cond]}}, content_type=STRATEGIC)
        assert r.status == 200, r.body
    r = await target.req("PATCH", status, {"status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}},
                         content_type=STRATEGIC)
    assert r.status == 200, r.body
    by_type = {c["type"]: c for c in r.body["status"]["conditions"]}
    assert set(by_type) == {"PodScheduled", "Initialized"}
    assert by_type["PodScheduled"]["status"] == "True"
    assert by_type["Initialized"]["status"] == "True"


async def test_strategic_merge_patch_merges_containers_by_name(target):
    body = pod_body("p")
    body["spec"]["containers"].append({"name": "sidecar", "image": "registry.k8s.io/pause:3.10"})
    await create(target, pods(target), body)
    r = await target.req("PATCH", f"{pods(target)}/p",
                         {"spec": {"containers": [{"name": "sidecar", "image": "registry.k8s.io/pause:3.9"}]}},
                         content_type=STRATEGIC)
    assert r.status == 200, r.body
    images = {c["name"]: c["image"] for c in r.body["spec"]["containers"]}
    assert images == {"app": "registry.k8s.io/pause:3.10", "sidecar": "registry.k8s.io/pause:3.9"}


async def test_json_patch_adds_and_replaces(target):
    await create(target, pods(target), pod_body("p", labels={"app": "web"}))
    r = await target.req("PATCH", f"{pods(target)}/p", [
        {"op": "test", "path": "/metadata/labels/app", "value": "web"},
        {"op": "add", "path": "/metadata/labels/tier", "value": "front"},
        {"op": "replace", "path": "/metadata/labels/app", "value": "api"},
    ], content_type=JSON_PATCH)
    assert r.status == 200, r.body
    assert r.body["metadata"]["labels"] == {"app": "api", "tier": "front"}


async def test_json_patch_whose_test_op_fails_is_422_and_changes_nothing(target):
    pod = await create(target, pods(target), pod_body("p", labels={"app": "web"}))
    r = await target.req("PATCH", f"{pods(target)}/p", [
        {"op": "test", "path": "/metadata/labels/app", "value": "not-web"},
        {"op": "add", "path": "/metadata/labels/tier", "value": "front"},
    ], content_type=JSON_PATCH)
    body = assert_status(r, 422, "Invalid")
    # the patch handler's errors.NewGenericServerResponse(422, ...): a fixed message
    assert body["message"] == "the server rejected our request due to an error in our request"
    after = await get(target, f"{pods(target)}/p")
    assert after["metadata"]["resourceVersion"] == pod["metadata"]["resourceVersion"]
    assert after["metadata"]["labels"] == {"app": "web"}


async def test_strategic_merge_patch_on_a_podgroup_is_415(target):
    await create(target, podgroups(target), podgroup_body("g"))
    r = await target.req("PATCH", f"{podgroups(target)}/g", {"spec": {"minMember": 3}}, content_type=STRATEGIC)
    body = assert_status(r, 415, "UnsupportedMediaType")
    assert body["message"].startswith("the body of the request was in an unknown format - accepted media types "
                                      "include: "), body
    accepted = body["message"].split("include: ", 1)[1].split(", ")
    assert {JSON_PATCH, MERGE} <= set(accepted) and STRATEGIC not in accepted, accepted
    r = await target.req("PATCH", f"{podgroups(target)}/g", {"spec": {"minMember": 3}}, content_type=MERGE)
    assert r.status == 200 and r.body["spec"]["minMember"] == 3, r.body


# ---------------------------------------------------------------------------- delete

@pytest.mark.parametrize("field", ["uid", "resourceVersion"],
                         ids=["a uid precondition that does not match is 409",
                              "a resourceVersion precondition that does not match is 409"])
async def test_delete_with_a_stale_precondition_is_409_conflict(target, field):
    pod = await create(target, pods(target), pod_body("p"))
    uid, version = pod["metadata"]["uid"], pod["metadata"]["resourceVersion"]
    wrong = {"uid": "00000000-0000-0000-0000-000000000000", "resourceVersion": str(int(version) - 1)}[field]
    r = await target.req("DELETE", f"{pods(target)}/p", {"preconditions": {field: wrong}})
    body = assert_status(r, 409, "Conflict")
    # rest.BeforeDelete names the kind, not the resource, in this Conflict
    if field == "uid":
        why = (f"the UID in the precondition ({wrong}) does not match the UID in record ({uid}). "
               f"The object might have been deleted and then recreated")
    else:
        why = (f"the ResourceVersion in the precondition ({wrong}) does not match the ResourceVersion in "
               f"record ({version}). The object might have been modified")
    assert body["message"] == f'Operation cannot be fulfilled on Pod "p": {why}'
    assert body["details"]["name"] == "p" and body["details"]["kind"] == "Pod"
    await get(target, f"{pods(target)}/p")  # still there


async def test_delete_of_a_podgroup_with_a_stale_uid_names_the_group(target):
    pg = await create(target, podgroups(target), podgroup_body("g"))
    r = await target.req("DELETE", f"{podgroups(target)}/g", {"preconditions": {"uid": "nope"}})
    body = assert_status(r, 409, "Conflict")
    assert body["message"] == (
        'Operation cannot be fulfilled on PodGroup.scheduling.x-k8s.io "g": the UID in the precondition (nope) '
        f'does not match the UID in record ({pg["metadata"]["uid"]}). The object might have been deleted and then '
        'recreated')


async def test_delete_of_a_namespace_with_a_stale_uid_uses_the_namespace_registry_wording(target):
    ns = await create(target, "/api/v1/namespaces", {"metadata": {"name": f"{target.ns}-x"}})
    r = await target.req("DELETE", f"/api/v1/namespaces/{target.ns}-x", {"preconditions": {"uid": "nope"}})
    body = assert_status(r, 409, "Conflict")
    assert body["message"] == (f'Operation cannot be fulfilled on namespaces "{target.ns}-x": Precondition failed: '
                               f'UID in precondition: nope, UID in object meta: {ns["metadata"]["uid"]}')
    r = await target.req("DELETE", f"/api/v1/namespaces/{target.ns}-x")
    assert r.status == 200, r.body


async def test_delete_with_matching_preconditions_deletes(target):
    pod = await create(target, pods(target), pod_body("p"))
    r = await target.req("DELETE", f"{pods(target)}/p", {"preconditions": {
        "uid": pod["metadata"]["uid"], "resourceVersion": pod["metadata"]["resourceVersion"]}})
    assert r.status == 200, r.body
    await assert_gone(target, f"{pods(target)}/p")


async def test_pod_on_a_node_is_deleted_gracefully_then_at_once_with_grace_zero(target):
    await without_kubelets(target)
    [node] = await target.make_nodes(1)
    await create(target, pods(target), pod_body("p", nodeName=node))
    r = await target.req("DELETE", f"{pods(target)}/p")
    # kube-apiserver answers 200 even though the pod is still there (202 only with orphanDependents=false)
    assert r.status == 200, r.body
    assert r.body["kind"] == "Pod"
    meta = r.body["metadata"]
    assert meta["deletionTimestamp"] and meta["deletionGracePeriodSeconds"] == 30
    assert meta["generation"] == 2  # the first graceful delete bumps generation
    still = await get(target, f"{pods(target)}/p")
    assert still["metadata"]["deletionTimestamp"] == meta["deletionTimestamp"]

    r = await target.req("DELETE", f"{pods(target)}/p", params={"gracePeriodSeconds": "0"})
    assert r.status == 200, r.body
    await assert_gone(target, f"{pods(target)}/p")


async def test_pod_delete_with_a_longer_grace_does_not_extend_it(target):
    await without_kubelets(target)
    [node] = await target.make_nodes(1)
    await create(target, pods(target), pod_body("p", nodeName=node))
    r = await target.req("DELETE", f"{pods(target)}/p", params={"gracePeriodSeconds": "10"})
    assert r.status == 200 and r.body["metadata"]["deletionGracePeriodSeconds"] == 10, r.body
    first = r.body["metadata"]
    r = await target.req("DELETE", f"{pods(target)}/p", params={"gracePeriodSeconds": "60"})
    assert r.status == 200, r.body
    assert r.body["metadata"]["deletionGracePeriodSeconds"] == 10
    assert r.body["metadata"]["deletionTimestamp"] == first["deletionTimestamp"]
    await target.req("DELETE", f"{pods(target)}/p", params={"gracePeriodSeconds": "0"})


async def test_pod_not_on_a_node_is_deleted_at_once(target):
    await create(target, pods(target), pod_body("p"))
    r = await target.req("DELETE", f"{pods(target)}/p")
    assert r.status == 200, r.body
    assert r.body["kind"] == "Pod" and r.body["metadata"]["name"] == "p"
    await assert_gone(target, f"{pods(target)}/p")


async def test_delete_of_a_missing_object_is_404(target):
    r = await target.req("DELETE", f"{pods(target)}/ghost")
    body = assert_status(r, 404, "NotFound")
    assert body["message"] == 'pods "ghost" not found'


@pytest.mark.parametrize("kind", [
    Kind("pod without a node", pods, lambda n: pod_body(n)),
    LEASE,
    PODGROUP,
], ids=lambda k: f"a {k.name} waits for its finalizer")
async def test_finalizers_hold_a_deleted_object_until_removed(target, kind):
    body = kind.body("held")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    created = await create(target, kind.collection(target), body)
    r = await target.req("DELETE", kind.path(target, "held"))
    assert r.status == 200, r.body
    assert r.body["metadata"]["deletionTimestamp"], r.body
    assert r.body["metadata"]["uid"] == created["metadata"]["uid"]
    held = await get(target, kind.path(target, "held"))
    assert held["metadata"]["deletionTimestamp"] and held["metadata"]["finalizers"] == ["example.com/hold"]
    assert held["metadata"].get("deletionGracePeriodSeconds") == 0

    r = await target.req("PATCH", kind.path(target, "held"), {"metadata": {"finalizers": None}}, content_type=MERGE)
    assert r.status == 200, r.body
    await assert_gone(target, kind.path(target, "held"))


async def test_dry_run_persists_nothing(target):
    dry = {"dryRun": "All"}
    r = await target.req("POST", pods(target), pod_body("ghost"), params=dry)
    assert r.status == 201, r.body
    assert r.body["metadata"]["name"] == "ghost" and r.body["status"]["phase"] == "Pending"
    await assert_gone(target, f"{pods(target)}/ghost")

    pod = await create(target, pods(target), pod_body("p", labels={"app": "web"}))
    changed = dict(pod, metadata={**pod["metadata"], "labels": {"app": "dry"}})
    r = await target.req("PUT", f"{pods(target)}/p", changed, params=dry)
    assert r.status == 200 and r.body["metadata"]["labels"] == {"app": "dry"}, r.body
    r = await target.req("PATCH", f"{pods(target)}/p", {"metadata": {"labels": {"app": "dry"}}},
                         content_type=MERGE, params=dry)
    assert r.status == 200 and r.body["metadata"]["labels"] == {"app": "dry"}, r.body
    r = await target.req("DELETE", f"{pods(target)}/p", params=dry)
    assert r.status == 200, r.body
    after = await get(target, f"{pods(target)}/p")
    assert after["metadata"]["resourceVersion"] == pod["metadata"]["resourceVersion"]
    assert after["metadata"]["labels"] == {"app": "web"}


async def test_a_namespace_is_labelled_with_its_name_on_every_write(target):
    name = unique(target, "labelled")
    created = await create(target, "/api/v1/namespaces", {"metadata": {"name": name, "labels": {"team": "a"}}})
    assert created["metadata"]["labels"] == {"team": "a", "kubernetes.io/metadata.name": name}
    created["metadata"]["labels"] = {"kubernetes.io/metadata.name": "something-else"}
    r = await target.req("PUT", f"/api/v1/namespaces/{name}", created)
    assert r.status == 200, r.body
    assert r.body["metadata"]["labels"] == {"kubernetes.io/metadata.name": name}
    r = await target.req("PATCH", f"/api/v1/namespaces/{name}", {"metadata": {"labels": None}}, content_type=MERGE)
    assert r.status == 200, r.body
    assert r.body["metadata"]["labels"] == {"kubernetes.io/metadata.name": name}


async def test_create_in_a_missing_namespace_is_404(target):
    r = await target.req("POST", "/api/v1/namespaces/no-such-namespace/pods", pod_body("p"))
    body = assert_status(r, 404, "NotFound")
    assert body["message"] == 'namespaces "no-such-namespace" not found'
    assert body["details"] == {"name": "no-such-namespace", "kind": "namespaces"}


async def test_delete_collection_deletes_only_what_the_label_selector_matches(target):
    for i in range(3):
        await create(target, pods(target), pod_body(f"a{i}", labels={"app": "a"}))
    for i in range(2):
        await create(target, pods(target), pod_body(f"b{i}", labels={"app": "b"}))
    r = await target.req("DELETE", pods(target), params={"labelSelector": "app=a"})
    assert r.status == 200, r.body
    assert r.body["kind"] == "PodList"
    assert sorted(p["metadata"]["name"] for p in r.body["items"]) == ["a0", "a1", "a2"]
    left = await get(target, pods(target))
    assert sorted(p["metadata"]["name"] for p in left["items"]) == ["b0", "b1"]


# ---------------------------------------------------------------------------- pod defaults and admission

@pytest.mark.parametrize("resources,qos", [
    pytest.param({"requests": {"cpu": "100m"}}, "Burstable", id="requests only is Burstable"),
    pytest.param({}, "BestEffort", id="no requests or limits is BestEffort"),
    pytest.param({"limits": {"cpu": "1", "memory": "1Gi"}}, "Guaranteed",
                 id="limits only is Guaranteed with requests copied from limits"),
])
async def test_pod_is_defaulted_as_the_api_server_does(target, resources, qos):
    body = pod_body("p")
    body["spec"]["containers"][0]["resources"] = resources
    pod = await create(target, pods(target), body)
    spec, status = pod["spec"], pod["status"]
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["restartPolicy"] == "Always" and spec["dnsPolicy"] == "ClusterFirst"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["priority"] == 0
    assert status["phase"] == "Pending" and status["qosClass"] == qos
    if "limits" in resources:
        assert spec["containers"][0]["resources"]["requests"] == resources["limits"]
    # DefaultTolerationSeconds admission
    tolerations = {(t["key"], t["operator"], t["effect"], t["tolerationSeconds"]) for t in spec["tolerations"]}
    assert tolerations == {("node.kubernetes.io/not-ready", "Exists", "NoExecute", 300),
                           ("node.kubernetes.io/unreachable", "Exists", "NoExecute", 300)}


async def test_pod_priority_comes_from_its_priority_class(target):
    name = unique(target, "high")
    await create(target, "/apis/scheduling.k8s.io/v1/priorityclasses",
                 {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                  "metadata": {"name": name}, "value": 1000})
    try:
        pod = await create(target, pods(target), pod_body("p", priorityClassName=name))
        assert pod["spec"]["priority"] == 1000
        assert pod["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    finally:
        await target.req("DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")


async def test_pod_with_a_missing_priority_class_is_403_forbidden(target):
    r = await target.req("POST", pods(target), pod_body("p", priorityClassName="no-such-class"))
    body = assert_status(r, 403, "Forbidden")
    assert body["message"] == 'pods "p" is forbidden: no PriorityClass with name no-such-class was found'
    await assert_gone(target, f"{pods(target)}/p")


def _set_node_name(o: dict[str, Any]) -> None:
    o["spec"]["nodeName"] = "somewhere"


def _raise_requests(o: dict[str, Any]) -> None:
    o["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"


@pytest.mark.parametrize("change", [_set_node_name, _raise_requests],
                         ids=["setting spec.nodeName by update is 422", "changing requests by update is 422"])
async def test_pod_spec_update_outside_the_mutable_fields_is_422(target, change):
    pod = await create(target, pods(target), pod_body("p"))
    change(pod)
    r = await target.req("PUT", f"{pods(target)}/p", pod)
    body = assert_status(r, 422, "Invalid")
    assert body["message"].startswith('Pod "p" is invalid: spec: Forbidden: pod updates may not change fields '
                                      'other than '), body["message"]
    causes = body["details"]["causes"]
    assert [(c["field"], c["reason"]) for c in causes] == [("spec", "FieldValueForbidden")], causes


def _change_image(o: dict[str, Any]) -> None:
    o["spec"]["containers"][0]["image"] = "registry.k8s.io/pause:3.9"


def _add_toleration(o: dict[str, Any]) -> None:
    o["spec"]["tolerations"].append({"key": "dedicated", "operator": "Equal", "value": "batch",
                                     "effect": "NoSchedule"})


def _drop_a_gate(o: dict[str, Any]) -> None:
    o["spec"]["schedulingGates"] = [{"name": "example.com/b"}]


@pytest.mark.parametrize("change", [_change_image, _add_toleration, _drop_a_gate],
                         ids=["changing an image is allowed", "adding a toleration is allowed",
                              "removing a scheduling gate is allowed"])
async def test_pod_spec_update_of_a_mutable_field_is_allowed(target, change):
    body = pod_body("p", schedulingGates=[{"name": "example.com/a"}, {"name": "example.com/b"}])
    pod = await create(target, pods(target), body)
    change(pod)
    r = await target.req("PUT", f"{pods(target)}/p", pod)
    assert r.status == 200, r.body
    assert r.body["spec"] == {**pod["spec"]}


async def test_adding_a_scheduling_gate_is_422(target):
    pod = await create(target, pods(target), pod_body("p", schedulingGates=[{"name": "example.com/a"}]))
    pod["spec"]["schedulingGates"].append({"name": "example.com/new"})
    r = await target.req("PUT", f"{pods(target)}/p", pod)
    body = assert_status(r, 422, "Invalid")
    assert [(c["field"], c["reason"]) for c in body["details"]["causes"]] == \
        [("spec.schedulingGates[1].name", "FieldValueForbidden")], body
    assert "only deletion is allowed, but found new scheduling gate 'example.com/new'" in body["message"]


# ---------------------------------------------------------------------------- events

def core_event(t: Target, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "namespace": t.ns, "name": "p", "apiVersion": "v1"},
            "reason": "Scheduled", "message": "Successfully assigned p to n1", "type": "Normal",
            "source": {"component": "default-scheduler"}, "count": 1,
            "firstTimestamp": "2024-05-01T12:00:00Z", "lastTimestamp": "2024-05-01T12:00:00Z"}


def events_v1_event(t: Target, name: str) -> dict[str, Any]:
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name},
            "eventTime": "2024-05-01T12:00:00.000000Z", "reportingController": "example.com/tester",
            "reportingInstance": "tester-1", "action": "Binding", "reason": "Scheduled",
            "regarding": {"kind": "Pod", "namespace": t.ns, "name": "p", "apiVersion": "v1"},
            "note": "Successfully assigned p to n1", "type": "Normal"}


async def test_core_event_reads_back_through_events_k8s_io_with_renamed_fields(target):
    await create(target, f"/api/v1/namespaces/{target.ns}/events", core_event(target, "e1"))
    ev = await get(target, f"/apis/events.k8s.io/v1/namespaces/{target.ns}/events/e1")
    assert (ev["apiVersion"], ev["kind"]) == ("events.k8s.io/v1", "Event")
    assert ev["regarding"]["name"] == "p" and ev["regarding"]["namespace"] == target.ns
    assert ev["note"] == "Successfully assigned p to n1"
    assert ev["deprecatedSource"] == {"component": "default-scheduler"}
    assert ev["deprecatedCount"] == 1
    assert ev["deprecatedFirstTimestamp"] == "2024-05-01T12:00:00Z"
    assert ev["reason"] == "Scheduled" and ev["type"] == "Normal"
    for core_name in ("involvedObject", "message", "source", "count", "firstTimestamp"):
        assert core_name not in ev
    listed = await get(target, f"/apis/events.k8s.io/v1/namespaces/{target.ns}/events")
    assert [e["metadata"]["name"] for e in listed["items"]] == ["e1"]


async def test_events_k8s_io_event_reads_back_through_core_v1_with_renamed_fields(target):
    await create(target, f"/apis/events.k8s.io/v1/namespaces/{target.ns}/events", events_v1_event(target, "e2"))
    ev = await get(target, f"/api/v1/namespaces/{target.ns}/events/e2")
    assert (ev["apiVersion"], ev["kind"]) == ("v1", "Event")
    assert ev["involvedObject"]["name"] == "p"
    assert ev["message"] == "Successfully assigned p to n1"
    assert ev["reportingComponent"] == "example.com/tester" and ev["reportingInstance"] == "tester-1"
    assert ev["action"] == "Binding" and ev["reason"] == "Scheduled"
    assert ev["eventTime"] == "2024-05-01T12:00:00.000000Z"
    for v1_name in ("regarding", "note", "reportingController"):
        assert v1_name not in ev


async def test_an_events_k8s_io_write_is_refused_in_the_name_of_the_core_event(target):
    path = f"/apis/events.k8s.io/v1/namespaces/{target.ns}/events"
    await create(target, path, events_v1_event(target, "e3"))
    r = await target.req("PATCH", f"{path}/e3", {"reason": "Other"}, content_type=MERGE)
    body = assert_status(r, 422, "Invalid")
    assert body["message"] == 'Event "e3" is invalid: reason: Invalid value: "Other": field is immutable'
    assert body["details"]["kind"] == "Event" and "group" not in body["details"]


# ---------------------------------------------------------------------------- the other kinds

@dataclass(frozen=True)
class RoundTrip:
    plural: str
    collection: Callable[[Target], str]
    body: Callable[[str], dict[str, Any]]
    cluster_scoped: bool = False


ROUND_TRIPS = [
    RoundTrip("leases", leases, lease_body),
    RoundTrip("priorityclasses", lambda t: "/apis/scheduling.k8s.io/v1/priorityclasses",
              lambda n: {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n},
                         "value": 100, "description": "round trip"}, cluster_scoped=True),
    RoundTrip("poddisruptionbudgets", lambda t: f"/apis/policy/v1/namespaces/{t.ns}/poddisruptionbudgets",
              lambda n: {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": n},
                         "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}),
    RoundTrip("persistentvolumes", lambda t: "/api/v1/persistentvolumes",
              lambda n: {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": n},
                         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                  "hostPath": {"path": "/tmp/round-trip"}}}, cluster_scoped=True),
    RoundTrip("persistentvolumeclaims", lambda t: f"/api/v1/namespaces/{t.ns}/persistentvolumeclaims",
              lambda n: {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": n},
                         "spec": {"accessModes": ["ReadWriteOnce"],
                                  "resources": {"requests": {"storage": "1Gi"}}}}),
    RoundTrip("storageclasses", lambda t: "/apis/storage.k8s.io/v1/storageclasses",
              lambda n: {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": n},
                         "provisioner": "example.com/fake"}, cluster_scoped=True),
]


@pytest.mark.parametrize("kind", ROUND_TRIPS, ids=lambda k: f"{k.plural} round-trip")
async def test_create_get_list_delete_round_trip(target, kind):
    name = unique(target, "rt") if kind.cluster_scoped else "rt"
    coll = kind.collection(target)
    created = await create(target, coll, kind.body(name))
    assert created["metadata"]["name"] == name and created["metadata"]["uid"]
    got = await get(target, f"{coll}/{name}")
    assert got["metadata"]["uid"] == created["metadata"]["uid"]
    listed = await get(target, coll)
    assert listed["kind"] == created["kind"] + "List"
    assert name in [o["metadata"]["name"] for o in listed["items"]]
    r = await target.req("DELETE", f"{coll}/{name}")
    assert r.status == 200, r.body
    r = await target.req("GET", f"{coll}/{name}")
    if r.status == 200:
        # the StorageObjectInUseProtection admission plugin puts kubernetes.io/pv(c)-protection on
        # volumes and claims; without the controller that clears it (the stand-in runs one), the delete waits
        assert r.body["metadata"]["deletionTimestamp"], r.body
        r = await target.req("PATCH", f"{coll}/{name}", {"metadata": {"finalizers": None}}, content_type=MERGE)
        assert r.status in (200, 404), r.body  # 404: the stand-in's protection controller got there first
    await assert_gone(target, f"{coll}/{name}")
