"""The pods/binding subresource, as kube-scheduler uses it, held to kube-apiserver.

A bind is the one write a scheduler cannot get wrong: it must land once,
report a conflict in the exact words clients match on, and never let two
binders place the same pod. These run against the stand-in and, when one is
available, a real kube-apiserver (``target``).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s

from tests.simcluster.conftest import Resp, Target, pod_body

pytestmark = pytest.mark.asyncio(loop_scope="session")


def pods(t: Target) -> str:
    return f"/api/v1/namespaces/{t.ns}/pods"


def binding(name: str, node: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, **meta},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}


async def bind(t: Target, name: str, node: str, **meta: Any) -> Resp:
    return await t.req("POST", f"{pods(t)}/{name}/binding", binding(name, node, **meta))


async def create_pod(t: Target, name: str, **spec: Any) -> dict[str, Any]:
    r = await t.req("POST", pods(t), pod_body(name, **spec))
    assert r.status == 201, r.body
    return r.body


async def get_pod(t: Target, name: str) -> dict[str, Any]:
    r = await t.req("GET", f"{pods(t)}/{name}")
    assert r.status == 200, r.body
    return r.body


def assert_status(r: Resp, code: int, reason: str | None) -> dict[str, Any]:
    assert r.status == code, r.body
    body = r.body
    assert isinstance(body, dict), body
    assert (body.get("kind"), body.get("apiVersion"), body.get("status"), body.get("code")) == \
        ("Status", "v1", "Failure", code), body
    assert body.get("reason") == reason, body
    return body


async def without_kubelets(t: Target) -> None:
    """The real test server runs no kubelets; stop the stand-in's so bound pods stay Pending alike."""
    if t.sim is not None and t.sim.node_agent is not None:
        await t.sim.node_agent.stop()


async def test_binding_sets_the_node_and_pod_scheduled_and_answers_201_success(target):
    await without_kubelets(target)
    await create_pod(target, "p")
    r = await bind(target, "p", "node-a")
    assert r.status == 201, r.body
    assert r.body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    pod = await get_pod(target, "p")
    assert pod["spec"]["nodeName"] == "node-a"
    scheduled = [c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"]
    assert len(scheduled) == 1 and scheduled[0]["status"] == "True", pod["status"]
    assert pod["status"]["phase"] == "Pending"


async def test_binding_merges_its_annotations_into_the_pod(target):
    await without_kubelets(target)
    body = pod_body("p")
    body["metadata"]["annotations"] = {"kept": "yes"}
    r = await target.req("POST", pods(target), body)
    assert r.status == 201, r.body
    r = await bind(target, "p", "node-a", annotations={"example.com/bound-by": "tandem"})
    assert r.status == 201, r.body
    assert (await get_pod(target, "p"))["metadata"]["annotations"] == {"kept": "yes",
                                                                      "example.com/bound-by": "tandem"}


async def test_second_bind_is_409_conflict_already_assigned(target):
    await without_kubelets(target)
    await create_pod(target, "p")
    assert (await bind(target, "p", "node-a")).status == 201
    r = await bind(target, "p", "node-b")
    body = assert_status(r, 409, "Conflict")
    assert body["message"] == ('Operation cannot be fulfilled on pods/binding "p": '
                               'pod p is already assigned to node "node-a"')
    assert body["details"] == {"name": "p", "kind": "pods/binding"}
    assert (await get_pod(target, "p"))["spec"]["nodeName"] == "node-a"


async def test_binding_a_missing_pod_is_404(target):
    r = await bind(target, "ghost", "node-a")
    body = assert_status(r, 404, "NotFound")
    assert body["message"] == 'pods "ghost" not found'


async def test_binding_a_pod_with_scheduling_gates_is_409(target):
    await create_pod(target, "p", schedulingGates=[{"name": "example.com/wait"}])
    r = await bind(target, "p", "node-a")
    body = assert_status(r, 409, "Conflict")
    assert body["message"] == ('Operation cannot be fulfilled on pods/binding "p": '
                               'pod p has non-empty .spec.schedulingGates')
    assert not (await get_pod(target, "p"))["spec"].get("nodeName")


async def test_binding_a_pod_being_deleted_is_409(target):
    body = pod_body("p")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    r = await target.req("POST", pods(target), body)
    assert r.status == 201, r.body
    r = await target.req("DELETE", f"{pods(target)}/p")
    assert r.status == 200 and r.body["metadata"]["deletionTimestamp"], r.body
    try:
        r = await bind(target, "p", "node-a")
        body = assert_status(r, 409, "Conflict")
        assert body["message"] == ('Operation cannot be fulfilled on pods/binding "p": '
                                   'pod p is being deleted, cannot be assigned to a host')
    finally:
        await target.req("PATCH", f"{pods(target)}/p", {"metadata": {"finalizers": None}},
                         content_type="application/merge-patch+json")


async def test_binding_with_a_wrong_uid_precondition_is_409(target):
    pod = await create_pod(target, "p")
    wrong = "00000000-0000-0000-0000-000000000000"
    r = await bind(target, "p", "node-a", uid=wrong)
    body = assert_status(r, 409, "Conflict")
    # a storage precondition of the pod update: the Conflict is on "pods", in StorageError's words
    assert body["message"].startswith('Operation cannot be fulfilled on pods "p": '), body
    assert (f"Precondition failed: UID in precondition: {wrong}, UID in object meta: {pod['metadata']['uid']}"
            in body["message"]), body
    assert not (await get_pod(target, "p"))["spec"].get("nodeName")


async def test_binding_with_the_right_uid_and_resource_version_binds(target):
    await without_kubelets(target)
    pod = await create_pod(target, "p")
    r = await bind(target, "p", "node-a", uid=pod["metadata"]["uid"],
                   resourceVersion=pod["metadata"]["resourceVersion"])
    assert r.status == 201, r.body


async def test_binding_with_a_stale_resource_version_is_409(target):
    pod = await create_pod(target, "p")
    r = await target.req("PATCH", f"{pods(target)}/p", {"metadata": {"labels": {"moved": "on"}}},
                         content_type="application/merge-patch+json")
    assert r.status == 200, r.body
    r = await bind(target, "p", "node-a", resourceVersion=pod["metadata"]["resourceVersion"])
    body = assert_status(r, 409, "Conflict")
    assert "Precondition failed: ResourceVersion in precondition: " in body["message"], body


async def test_binding_whose_name_differs_from_the_url_is_400(target):
    await create_pod(target, "p")
    r = await target.req("POST", f"{pods(target)}/p/binding", binding("other", "node-a"))
    body = assert_status(r, 400, "BadRequest")
    assert body["message"] == "name in URL does not match name in Binding object"
    no_name = binding("p", "node-a")
    del no_name["metadata"]["name"]
    r = await target.req("POST", f"{pods(target)}/p/binding", no_name)
    assert_status(r, 400, "BadRequest")


async def test_binding_without_target_name_is_refused_with_the_validation_message(target):
    await create_pod(target, "p")
    body = binding("p", "")
    r = await target.req("POST", f"{pods(target)}/p/binding", body)
    # BindingREST.Create returns ValidatePodBinding's errors unwrapped, so kube-apiserver answers them
    # as an internal error with no reason (kubernetes/kubernetes#139488)
    body = assert_status(r, 500, None)
    assert body["message"] == "target.name: Required value"
    assert not (await get_pod(target, "p"))["spec"].get("nodeName")


async def test_binding_through_the_generated_client(target):
    await without_kubelets(target)
    await create_pod(target, "p")
    api = k8s.CoreV1Api(await target.api_client())
    body = k8s.V1Binding(metadata=k8s.V1ObjectMeta(name="p"),
                         target=k8s.V1ObjectReference(api_version="v1", kind="Node", name="node-a"))
    # the generated client cannot deserialize the Status the server answers: read it raw
    resp = await api.create_namespaced_pod_binding("p", target.ns, body, _preload_content=False)
    try:
        assert resp.status == 201
        reply = await resp.json()
    finally:
        resp.release()
    assert reply["status"] == "Success"
    pod = await api.read_namespaced_pod("p", target.ns)
    assert pod.spec.node_name == "node-a"
    # unpreloaded replies are not checked by the client either: the conflict is the caller's to read
    resp = await api.create_namespaced_pod_binding("p", target.ns, body, _preload_content=False)
    try:
        assert resp.status == 409
        assert (await resp.json())["reason"] == "Conflict"
    finally:
        resp.release()


async def test_concurrent_binds_of_distinct_pods_all_succeed(target):
    await without_kubelets(target)
    n = 200
    created = await asyncio.gather(*(target.req("POST", pods(target), pod_body(f"p{i}")) for i in range(n)))
    assert all(r.status == 201 for r in created)
    results = await asyncio.gather(*(bind(target, f"p{i}", f"node-{i % 7}") for i in range(n)))
    assert Counter(r.status for r in results) == {201: n}
    r = await target.req("GET", pods(target))
    assert {p["metadata"]["name"]: p["spec"].get("nodeName") for p in r.body["items"]} == \
        {f"p{i}": f"node-{i % 7}" for i in range(n)}


async def test_concurrent_binds_of_one_pod_to_different_nodes_bind_it_exactly_once(target):
    await without_kubelets(target)
    await create_pod(target, "p")
    n = 200
    results = await asyncio.gather(*(bind(target, "p", f"node-{i}") for i in range(n)))
    statuses = Counter(r.status for r in results)
    assert statuses == {201: 1, 409: n - 1}, statuses
    [winner] = [i for i, r in enumerate(results) if r.status == 201]
    assert (await get_pod(target, "p"))["spec"]["nodeName"] == f"node-{winner}"
    for r in results:
        if r.status == 409:
            assert r.body["message"].startswith('Operation cannot be fulfilled on pods/binding "p": '), r.body
