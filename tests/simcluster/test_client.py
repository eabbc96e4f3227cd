"""The generated kubernetes-asyncio client, unmodified, against the server.

tandem talks to the API server through kubernetes-asyncio, so the stand-in
must satisfy the generated models and helpers exactly as kube-apiserver
does: response shapes it deserializes, the content types it picks for
patches (strategic merge for built-in types given a dict; custom objects
need an explicit merge-patch content type), the Status a binding answers
with (which is why binding is called with ``_preload_content=False``: the
generated code would try to read the Status as a V1Binding), and the watch
helper's resume-from-last-resourceVersion when the server ends a stream.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import orjson
import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from tests.simcluster.conftest import Target, pod_body

pytestmark = pytest.mark.asyncio(loop_scope="session")

PG_GROUP, PG_VERSION, PG_PLURAL = "scheduling.x-k8s.io", "v1alpha1", "podgroups"
MERGE = "application/merge-patch+json"


async def without_kubelets(target: Target) -> None:
    """The real test server has no kubelets: stop the stand-in's so bound pods stay as written."""
    if target.sim is not None and target.sim.node_agent is not None:
        await target.sim.node_agent.stop()


async def core(target: Target) -> client.CoreV1Api:
    return client.CoreV1Api(await target.api_client())


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=123456)


# ----------------------------------------------------------------------------- core/v1 pods

async def test_pods_create_get_list_replace_and_delete(target):
    v1 = await core(target)
    ns = target.ns
    created = await v1.create_namespaced_pod(ns, pod_body("p", labels={"app": "a"}))
    assert isinstance(created, client.V1Pod)
    assert created.metadata.uid and created.metadata.resource_version
    assert created.status.phase == "Pending"
    assert created.spec.containers[0].resources.requests == {"cpu": "100m", "memory": "128Mi"}

    got = await v1.read_namespaced_pod("p", ns)
    assert got.metadata.uid == created.metadata.uid

    lst = await v1.list_namespaced_pod(ns, label_selector="app=a")
    assert [p.metadata.name for p in lst.items] == ["p"]
    assert lst.metadata.resource_version
    assert (await v1.list_namespaced_pod(ns, label_selector="app=b")).items == []

    got.metadata.labels["app"] = "b"
    replaced = await v1.replace_namespaced_pod("p", ns, got)
    assert replaced.metadata.labels == {"app": "b"}
    assert int(replaced.metadata.resource_version) > int(got.metadata.resource_version)

    got.metadata.labels["app"] = "c"  # the old resourceVersion: a conflict
    with pytest.raises(ApiException) as exc:
        await v1.replace_namespaced_pod("p", ns, got)
    assert exc.value.status == 409
    assert orjson.loads(exc.value.body)["reason"] == "Conflict"

    deleted = await v1.delete_namespaced_pod("p", ns)
    assert deleted.metadata.name == "p"
    with pytest.raises(ApiException) as exc:
        await v1.read_namespaced_pod("p", ns)
    assert exc.value.status == 404


PATCH_CASES = [
    ({"spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]}}, None, 200,
     "a strategic merge patch merges containers by name"),
    ({"spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]}}, MERGE, 422,
     "a merge patch replaces the containers list, which a pod update may not do"),
    ({"metadata": {"labels": {"patched": "yes"}}}, MERGE, 200, "a merge patch sets a label"),
    ([{"op": "add", "path": "/metadata/labels/patched", "value": "yes"}], None, 200,
     "a list body is sent as a JSON patch"),
]


@pytest.mark.parametrize("body,content_type,status", [c[:3] for c in PATCH_CASES], ids=[c[3] for c in PATCH_CASES])
async def test_pod_patch_through_the_client(target, body, content_type, status):
    v1 = await core(target)
    await v1.create_namespaced_pod(target.ns, pod_body("p", labels={"app": "a"}))
    kw: dict[str, Any] = {"_content_type": content_type} if content_type else {}
    if status != 200:
        with pytest.raises(ApiException) as exc:
            await v1.patch_namespaced_pod("p", target.ns, body, **kw)
        assert exc.value.status == status
        assert orjson.loads(exc.value.body)["reason"] == "Invalid"
        return
    pod = await v1.patch_namespaced_pod("p", target.ns, body, **kw)
    c = pod.spec.containers[0]
    if "spec" in body:
        assert c.image == "registry.k8s.io/pause:3.9"
        assert c.resources.requests == {"cpu": "100m", "memory": "128Mi"}  # kept: merged by name
    else:
        assert pod.metadata.labels == {"app": "a", "patched": "yes"}


async def test_binding_through_create_namespaced_pod_binding(target):
    await without_kubelets(target)
    v1 = await core(target)
    await v1.create_namespaced_pod(target.ns, pod_body("p"))
    binding = client.V1Binding(metadata=client.V1ObjectMeta(name="p"),
                               target=client.V1ObjectReference(api_version="v1", kind="Node", name="node-1"))
    # the server answers with a Status, which the generated code cannot read as a V1Binding
    resp = await v1.create_namespaced_pod_binding("p", target.ns, binding, _preload_content=False)
    assert resp.status == 201
    status = orjson.loads(await resp.read())
    assert (status["kind"], status["status"]) == ("Status", "Success")

    pod = await v1.read_namespaced_pod("p", target.ns)
    assert pod.spec.node_name == "node-1"
    scheduled = [c for c in pod.status.conditions if c.type == "PodScheduled"]
    assert scheduled and scheduled[0].status == "True"

    again = await v1.create_namespaced_pod_binding("p", target.ns, binding, _preload_content=False)
    assert again.status == 409
    assert orjson.loads(await again.read())["reason"] == "Conflict"


# ----------------------------------------------------------------------------- custom objects

def podgroup(name: str, min_member: int = 2) -> dict[str, Any]:
    return {"apiVersion": f"{PG_GROUP}/{PG_VERSION}", "kind": "PodGroup",
            "metadata": {"name": name}, "spec": {"minMember": min_member}}


async def test_podgroups_through_custom_objects_api(target):
    co = client.CustomObjectsApi(await target.api_client())
    ns = target.ns
    args = (PG_GROUP, PG_VERSION, ns, PG_PLURAL)
    created = await co.create_namespaced_custom_object(*args, podgroup("g"))
    assert created["metadata"]["generation"] == 1
    assert (await co.get_namespaced_custom_object(*args, "g"))["spec"]["minMember"] == 2
    lst = await co.list_namespaced_custom_object(*args)
    assert lst["kind"] == "PodGroupList"
    assert [i["metadata"]["name"] for i in lst["items"]] == ["g"]

    patched = await co.patch_namespaced_custom_object(*args, "g", {"spec": {"minMember": 3}}, _content_type=MERGE)
    assert patched["spec"]["minMember"] == 3
    assert patched["metadata"]["generation"] == 2

    # custom resources take no strategic merge patch: 415
    with pytest.raises(ApiException) as exc:
        await co.patch_namespaced_custom_object(*args, "g", {"spec": {"minMember": 4}},
                                                _content_type="application/strategic-merge-patch+json")
    assert exc.value.status == 415

    patched["spec"]["minMember"] = 4
    replaced = await co.replace_namespaced_custom_object(*args, "g", patched)
    assert replaced["spec"]["minMember"] == 4

    status = await co.patch_namespaced_custom_object_status(*args, "g", {"status": {"phase": "Pending"}},
                                                            _content_type=MERGE)
    assert status["status"]["phase"] == "Pending"
    assert status["metadata"]["generation"] == 3  # status writes do not bump generation

    await co.delete_namespaced_custom_object(*args, "g")
    with pytest.raises(ApiException) as exc:
        await co.get_namespaced_custom_object(*args, "g")
    assert exc.value.status == 404


async def test_podgroups_watch_through_custom_objects_api(target):
    co = client.CustomObjectsApi(await target.api_client())
    args = (PG_GROUP, PG_VERSION, target.ns, PG_PLURAL)
    rv = (await co.list_namespaced_custom_object(*args))["metadata"]["resourceVersion"]
    await co.create_namespaced_custom_object(*args, podgroup("g"))
    await co.patch_namespaced_custom_object(*args, "g", {"spec": {"minMember": 5}}, _content_type=MERGE)
    events = []
    async with watch.Watch() as w:
        async for ev in w.stream(co.list_namespaced_custom_object, *args, resource_version=rv, timeout_seconds=2):
            events.append((ev["type"], ev["object"]["metadata"]["name"], ev["object"]["spec"]["minMember"]))
            if len(events) == 2:
                w.stop()
    assert events == [("ADDED", "g", 2), ("MODIFIED", "g", 5)]


# ----------------------------------------------------------------------------- events.k8s.io and leases

async def test_events_v1_create_list_and_the_same_event_in_core_v1(target):
    ev1 = client.EventsV1Api(await target.api_client())
    v1 = await core(target)
    body = client.EventsV1Event(
        metadata=client.V1ObjectMeta(name="e1"),
        event_time=now(),
        reporting_controller="tandem.dev/scheduler",
        reporting_instance="tandem-0",
        action="Scheduling",
        reason="FailedScheduling",
        type="Warning",
        note="0/3 nodes are available",
        regarding=client.V1ObjectReference(kind="Pod", namespace=target.ns, name="p", api_version="v1"))
    created = await ev1.create_namespaced_event(target.ns, body)
    assert isinstance(created, client.EventsV1Event)
    assert created.reason == "FailedScheduling" and created.note == "0/3 nodes are available"

    listed = await ev1.list_namespaced_event(target.ns, field_selector="regarding.name=p")
    assert [e.metadata.name for e in listed.items] == ["e1"]
    # one storage, two views: the core/v1 event of the same object
    core_ev = await v1.read_namespaced_event("e1", target.ns)
    assert core_ev.message == "0/3 nodes are available"
    assert core_ev.involved_object.name == "p"
    assert core_ev.reporting_component == "tandem.dev/scheduler"

    # what an events/v1 recorder does on a repeat: patch the series; everything else is immutable
    series = {"series": {"count": 2, "lastObservedTime": now().isoformat()}}
    patched = await ev1.patch_namespaced_event("e1", target.ns, series, _content_type=MERGE)
    assert patched.series.count == 2
    with pytest.raises(ApiException) as exc:
        await ev1.patch_namespaced_event("e1", target.ns, {"note": "1/3 nodes are available"}, _content_type=MERGE)
    assert exc.value.status == 422
    causes = orjson.loads(exc.value.body)["details"]["causes"]
    assert [(c["field"], c["reason"]) for c in causes] == [("message", "FieldValueInvalid")]
    assert "field is immutable" in causes[0]["message"]
    await ev1.delete_namespaced_event("e1", target.ns)
    assert (await ev1.list_namespaced_event(target.ns)).items == []


async def test_leases_through_coordination_v1(target):
    co = client.CoordinationV1Api(await target.api_client())
    ns = target.ns
    spec = client.V1LeaseSpec(holder_identity="tandem-0", lease_duration_seconds=15,
                              acquire_time=now(), renew_time=now())
    created = await co.create_namespaced_lease(ns, client.V1Lease(metadata=client.V1ObjectMeta(name="tandem"),
                                                                  spec=spec))
    assert created.spec.holder_identity == "tandem-0"
    assert created.spec.renew_time is not None

    got = await co.read_namespaced_lease("tandem", ns)
    got.spec.holder_identity = "tandem-1"
    got.spec.lease_transitions = 1
    replaced = await co.replace_namespaced_lease("tandem", ns, got)
    assert (replaced.spec.holder_identity, replaced.spec.lease_transitions) == ("tandem-1", 1)

    patched = await co.patch_namespaced_lease("tandem", ns, {"spec": {"leaseDurationSeconds": 30}})
    assert patched.spec.lease_duration_seconds == 30
    assert [x.metadata.name for x in (await co.list_namespaced_lease(ns)).items] == ["tandem"]

    await co.delete_namespaced_lease("tandem", ns)
    with pytest.raises(ApiException) as exc:
        await co.read_namespaced_lease("tandem", ns)
    assert exc.value.status == 404


# ----------------------------------------------------------------------------- the watch helper

async def test_watch_helper_streams_typed_events_until_timeout_seconds(target):
    v1 = await core(target)
    rv = (await v1.list_namespaced_pod(target.ns)).metadata.resource_version
    await v1.create_namespaced_pod(target.ns, pod_body("a"))
    await v1.patch_namespaced_pod("a", target.ns, {"metadata": {"labels": {"x": "1"}}})
    events = []
    async with watch.Watch() as w:
        async for ev in w.stream(v1.list_namespaced_pod, target.ns, resource_version=rv, timeout_seconds=1):
            events.append(ev)
    # the stream ended by itself (server-side timeoutSeconds) after both events
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "a"), ("MODIFIED", "a")]
    assert all(isinstance(e["object"], client.V1Pod) for e in events)
    assert w.resource_version == events[-1]["object"].metadata.resource_version


async def test_watch_helper_resumes_across_a_server_side_timeout(target):
    target.only_sim("the real server times a watch out only after --min-request-timeout (30 min by default)")
    target.sim.server.max_watch_timeout = 0.5  # every stream ends after half a second
    v1 = await core(target)
    rv = (await v1.list_namespaced_pod(target.ns)).metadata.resource_version
    names: list[str] = []
    requests_before = target.sim.server.requests

    async def writer() -> None:
        for i in range(4):
            await v1.create_namespaced_pod(target.ns, pod_body(f"p{i}"))
            await asyncio.sleep(0.4)  # spread over several server-side timeouts

    task = asyncio.create_task(writer())
    async with watch.Watch() as w:
        # no timeout_seconds: the helper watches forever, reconnecting from its last resourceVersion
        async for ev in w.stream(v1.list_namespaced_pod, target.ns, resource_version=rv, _request_timeout=10):
            assert ev["type"] == "ADDED"
            names.append(ev["object"].metadata.name)
            if len(names) == 4:
                w.stop()
                break
    await task
    assert names == ["p0", "p1", "p2", "p3"]  # none lost, none repeated
    assert target.sim.server.requests - requests_before >= 4 + 2  # 4 creates and at least 2 watch requests
