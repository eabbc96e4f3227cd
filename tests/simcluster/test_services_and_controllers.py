"""Services, ReplicationControllers, ReplicaSets and StatefulSets, held to kube-apiserver.

The scheduler reads these four kinds for PodTopologySpread's system default
constraints (upstream ``helper.DefaultSelector``): the selectors of the
Services that select a pod and of the controller that owns it. The stand-in
serves them as the real server stores them, and no more: scheme defaulting,
the status each create starts from, the status subresource, generation,
field selectors, strategic merge patch keys, discovery and the delete
response. It allocates no clusterIP. Both servers run a ReplicaSet
controller (tests/simcluster/test_replicasets.py), which writes a new
ReplicaSet's status and makes its pods: a test that writes a ReplicaSet with
the resourceVersion it read first waits for that controller to be done
(:func:`idle`), and one that watches leaves its status writes out.

Every test runs against the stand-in and, when ``KUBEBUILDER_ASSETS`` is set,
a real kube-apiserver; the bodies are ones the real server's validation
accepts.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

import pytest

from tests.simcluster.conftest import Target
from tests.simcluster.test_volumes import until
from tests.simcluster.test_writes import MERGE, STRATEGIC, assert_status, create, get

pytestmark = pytest.mark.asyncio(loop_scope="session")

IMAGE = "registry.k8s.io/pause:3.10"
BACKGROUND = {"propagationPolicy": "Background"}


def template(labels: dict[str, str] | None = None, containers: int = 1) -> dict[str, Any]:
    return {"metadata": {"labels": labels or {"app": "web"}},
            "spec": {"containers": [{"name": f"app{i}" if i else "app", "image": IMAGE} for i in range(containers)]}}


def service_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}


def replication_controller_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": name},
            "spec": {"selector": {"app": "web"}, "template": template()}}


def replica_set_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template()}}


def stateful_set_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
            "spec": {"serviceName": "web", "selector": {"matchLabels": {"app": "web"}}, "template": template()}}


@dataclass(frozen=True)
class Kind:
    plural: str
    group: str
    body: Callable[[str], dict[str, Any]]
    change_spec: Callable[[dict[str, Any]], None]      # a valid spec change
    change_status: Callable[[dict[str, Any]], None]    # a valid status change
    read_status: Callable[[dict[str, Any]], Any]

    def collection(self, t: Target) -> str:
        prefix = f"/apis/{self.group}/v1" if self.group else "/api/v1"
        return f"{prefix}/namespaces/{t.ns}/{self.plural}"

    def path(self, t: Target, name: str) -> str:
        return f"{self.collection(t)}/{name}"


def _scale(o: dict[str, Any]) -> None:
    o["spec"]["replicas"] = 3


def _observe_two(o: dict[str, Any]) -> None:
    o["status"]["replicas"] = 2


def _select_other(o: dict[str, Any]) -> None:
    o["spec"]["selector"] = {"app": "other"}


def _condition(o: dict[str, Any]) -> None:
    o["status"]["conditions"] = [{"type": "Checked", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z",
                                  "reason": "Testing", "message": "written by a test"}]


def _replicas(o: dict[str, Any]) -> Any:
    return o["status"]["replicas"]


def _conditions(o: dict[str, Any]) -> Any:
    return [c["reason"] for c in o["status"].get("conditions") or []]


SERVICE = Kind("services", "", service_body, _select_other, _condition, _conditions)
REPLICATION_CONTROLLER = Kind("replicationcontrollers", "", replication_controller_body, _scale, _observe_two,
                              _replicas)
REPLICA_SET = Kind("replicasets", "apps", replica_set_body, _scale, _observe_two, _replicas)
STATEFUL_SET = Kind("statefulsets", "apps", stateful_set_body, _scale, _observe_two, _replicas)
KINDS = [SERVICE, REPLICATION_CONTROLLER, REPLICA_SET, STATEFUL_SET]
CONTROLLERS = [REPLICATION_CONTROLLER, REPLICA_SET, STATEFUL_SET]


def kind_id(k: Kind) -> str:
    return k.plural


async def idle(t: Target, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as stored once its controller has nothing more to write: a ReplicaSet whose status has
    caught up with its generation and its replicas (its pods made; none ever starts). The other kinds
    have no controller here: ``obj`` itself."""
    if kind is not REPLICA_SET:
        return obj
    return await until(lambda: get(t, kind.path(t, obj["metadata"]["name"])),
                       lambda o: o["status"].get("observedGeneration") == o["metadata"]["generation"]
                       and o["status"].get("replicas") == o["spec"]["replicas"], "the ReplicaSet controller idle",
                       15.0)


def _by_the_test(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The watch events without a controller's status writes (MODIFIED, same spec and labels as before)."""
    kept: list[dict[str, Any]] = []
    last: dict[str, Any] | None = None
    for e in events:
        obj = e["object"]
        if not (e["type"] == "MODIFIED" and last is not None and obj.get("spec") == last.get("spec")
                and obj["metadata"].get("labels") == last["metadata"].get("labels")):
            kept.append(e)
        last = obj
    return kept


# ---------------------------------------------------------------------------- lifecycle

@pytest.mark.parametrize("kind", KINDS, ids=kind_id)
async def test_create_get_list_watch_and_delete(target, kind):
    coll = kind.collection(target)
    start = (await get(target, coll))["metadata"]["resourceVersion"]
    created = await create(target, coll, kind.body("one"))
    assert created["kind"] == kind.body("one")["kind"] and created["metadata"]["uid"]
    assert (await get(target, kind.path(target, "one")))["metadata"]["uid"] == created["metadata"]["uid"]
    listed = await get(target, coll)
    assert listed["kind"] == created["kind"] + "List"
    assert [o["metadata"]["name"] for o in listed["items"]] == ["one"]
    r = await target.req("PATCH", kind.path(target, "one"), {"metadata": {"labels": {"tier": "x"}}},
                         content_type=MERGE)
    assert r.status == 200, r.body

    # what kubectl sends: no garbage-collector finalizer, so the object goes at once
    r = await target.req("DELETE", kind.path(target, "one"), BACKGROUND)
    assert r.status == 200, r.body
    if kind is SERVICE:  # the service storage answers with the deleted object (ReturnDeletedObject)
        assert (r.body["kind"], r.body["metadata"]["uid"]) == ("Service", created["metadata"]["uid"])
    else:
        assert (r.body["kind"], r.body["status"]) == ("Status", "Success"), r.body
        assert r.body["details"]["name"] == "one" and r.body["details"]["kind"] == kind.plural
        assert r.body["details"].get("group") == (kind.group or None)
        assert r.body["details"]["uid"] == created["metadata"]["uid"]
    r = await target.req("GET", kind.path(target, "one"))
    assert r.status == 404, r.body

    events = _by_the_test(await target.watch(coll, {"resourceVersion": start}, timeout=5,
                                              stop=lambda e: e["type"] == "DELETED"))
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == \
        [("ADDED", "one"), ("MODIFIED", "one"), ("DELETED", "one")]
    assert events[2]["object"]["metadata"]["labels"]["tier"] == "x"  # the last state


# ---------------------------------------------------------------------------- defaults and status

@pytest.mark.parametrize("kind, status_sent, spec, status", [
    pytest.param(SERVICE, {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}},
                 {"type": "ClusterIP", "sessionAffinity": "None", "internalTrafficPolicy": "Cluster",
                  "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}]},
                 {"loadBalancer": {}}, id="a service is a ClusterIP one with TCP ports to the same target port"),
    pytest.param(REPLICATION_CONTROLLER, {"replicas": 5}, {"replicas": 1}, {"replicas": 0},
                 id="a replication controller wants one replica"),
    pytest.param(REPLICA_SET, {"replicas": 5}, {"replicas": 1}, {"replicas": 0},
                 id="a replica set wants one replica"),
    pytest.param(STATEFUL_SET, {"replicas": 5, "readyReplicas": 5},
                 {"replicas": 1, "podManagementPolicy": "OrderedReady", "revisionHistoryLimit": 10,
                  "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                  "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"}},
                 {"replicas": 0, "availableReplicas": 0},
                 id="a stateful set rolls one replica in order and retains its claims"),
])
async def test_create_defaults_the_spec_and_starts_from_the_zero_status(target, kind, status_sent, spec, status):
    body = kind.body("d")
    body["status"] = status_sent  # PrepareForCreate drops whatever status the client sent
    created = await create(target, kind.collection(target), body)
    assert {k: created["spec"].get(k) for k in spec} == spec
    assert created["status"] == status
    assert created["metadata"].get("generation") == (None if kind is SERVICE else 1)


def _service(**spec: Any) -> dict[str, Any]:
    body = service_body("v")
    body["spec"].update(spec)
    return body


def _stateful_set(**spec: Any) -> dict[str, Any]:
    body = stateful_set_body("v")
    body["spec"].update(spec)
    return body


@pytest.mark.parametrize("kind, body, expected", [
    pytest.param(SERVICE, _service(sessionAffinity="ClientIP"),
                 {"sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}}},
                 id="a ClientIP affinity gets three hours"),
    pytest.param(SERVICE, _service(type="NodePort"),
                 {"externalTrafficPolicy": "Cluster", "internalTrafficPolicy": "Cluster"},
                 id="a node port service spreads outside and inside traffic cluster-wide"),
    pytest.param(SERVICE, _service(type="LoadBalancer"),
                 {"externalTrafficPolicy": "Cluster", "allocateLoadBalancerNodePorts": True},
                 id="a load balancer allocates node ports"),
    pytest.param(SERVICE, _service(externalIPs=["198.51.100.1"]), {"externalTrafficPolicy": "Cluster"},
                 id="a cluster IP service with external IPs is externally accessible"),
    pytest.param(SERVICE, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "v"},
                           "spec": {"type": "ExternalName", "externalName": "db.example.com"}},
                 {"sessionAffinity": "None", "internalTrafficPolicy": None, "externalTrafficPolicy": None},
                 id="an external name service gets no traffic policy"),
    pytest.param(STATEFUL_SET, _stateful_set(updateStrategy={"type": "RollingUpdate"}),
                 {"updateStrategy": {"type": "RollingUpdate"}},
                 id="a stateful set's own RollingUpdate strategy gets no partition"),
    pytest.param(STATEFUL_SET, _stateful_set(updateStrategy={"type": "OnDelete"},
                                             persistentVolumeClaimRetentionPolicy={"whenDeleted": "Delete"}),
                 {"updateStrategy": {"type": "OnDelete"},
                  "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"}},
                 id="a stateful set keeps what it asks for and gets the rest"),
])
async def test_create_defaults_what_the_spec_leaves_unset(target, kind, body, expected):
    created = await create(target, kind.collection(target), body)
    assert {k: created["spec"].get(k) for k in expected} == expected


async def test_replication_controller_selector_and_labels_default_to_the_templates(target):
    body = replication_controller_body("rc")
    del body["spec"]["selector"]
    body["spec"]["template"] = template({"app": "web", "tier": "db"})
    created = await create(target, REPLICATION_CONTROLLER.collection(target), body)
    assert created["spec"]["selector"] == {"app": "web", "tier": "db"}
    assert created["metadata"]["labels"] == {"app": "web", "tier": "db"}


@pytest.mark.parametrize("kind", CONTROLLERS, ids=kind_id)
async def test_an_update_that_drops_a_defaulted_field_gets_it_back_and_keeps_its_generation(target, kind):
    created = await idle(target, kind, await create(target, kind.collection(target), kind.body("u")))
    del created["spec"]["replicas"]
    r = await target.req("PUT", kind.path(target, "u"), created)
    assert r.status == 200, r.body
    assert r.body["spec"]["replicas"] == 1
    assert r.body["metadata"]["generation"] == 1
    assert r.body["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]  # nothing changed


@pytest.mark.parametrize("kind", KINDS, ids=kind_id)
async def test_an_update_of_the_object_keeps_its_status(target, kind):
    created = await idle(target, kind, await create(target, kind.collection(target), kind.body("s")))
    before = kind.read_status(created)
    kind.change_status(created)
    created["metadata"]["labels"] = {"written": "yes"}
    r = await target.req("PUT", kind.path(target, "s"), created)
    assert r.status == 200, r.body
    assert r.body["metadata"]["labels"] == {"written": "yes"}
    assert kind.read_status(r.body) == before


@pytest.mark.parametrize("kind", KINDS, ids=kind_id)
async def test_a_status_write_keeps_the_spec_and_writes_labels(target, kind):
    created = await idle(target, kind, await create(target, kind.collection(target), kind.body("s")))
    obj = copy.deepcopy(created)
    kind.change_spec(obj)
    kind.change_status(obj)
    obj["metadata"]["labels"] = {"via-status": "yes"}
    r = await target.req("PUT", kind.path(target, "s") + "/status", obj)
    assert r.status == 200, r.body
    stored = await get(target, kind.path(target, "s"))
    # each of these status strategies resets only spec: the body's labels are written
    assert stored["spec"] == created["spec"]
    assert kind.read_status(r.body) == kind.read_status(obj)  # a controller may write its own afterwards
    assert stored["metadata"]["labels"] == {"via-status": "yes"}
    assert stored["metadata"].get("generation") == created["metadata"].get("generation")


@pytest.mark.parametrize("kind", CONTROLLERS, ids=kind_id)
async def test_a_spec_change_bumps_the_generation_and_a_label_change_does_not(target, kind):
    obj = await idle(target, kind, await create(target, kind.collection(target), kind.body("g")))
    obj["metadata"]["labels"] = {"only": "labels"}
    r = await target.req("PUT", kind.path(target, "g"), obj)
    assert r.status == 200 and r.body["metadata"]["generation"] == 1, r.body
    obj = r.body
    kind.change_spec(obj)
    r = await target.req("PUT", kind.path(target, "g"), obj)
    assert r.status == 200 and r.body["metadata"]["generation"] == 2, r.body


# ---------------------------------------------------------------------------- selectors, patches, discovery

@pytest.mark.parametrize("kind, selector, selected", [
    pytest.param(SERVICE, "spec.type=ClusterIP", True, id="services select on spec.type"),
    pytest.param(SERVICE, "spec.type=NodePort", False, id="services select on spec.type, not matching"),
    pytest.param(REPLICATION_CONTROLLER, "status.replicas=0", True,
                 id="replication controllers select on status.replicas"),
    pytest.param(REPLICA_SET, "metadata.name=f", True, id="replica sets select on their name"),
    pytest.param(STATEFUL_SET, "metadata.name=other", False, id="stateful sets select on their name, not matching"),
])
async def test_field_selectors(target, kind, selector, selected):
    await create(target, kind.collection(target), kind.body("f"))
    listed = await get(target, kind.collection(target) + f"?fieldSelector={selector}")
    assert [o["metadata"]["name"] for o in listed["items"]] == (["f"] if selected else [])


async def test_field_selector_on_an_unsupported_field_is_400(target):
    r = await target.req("GET", SERVICE.collection(target), params={"fieldSelector": "status.phase=Running"})
    body = assert_status(r, 400, "BadRequest")
    assert "field label not supported: status.phase" in body["message"]


async def test_strategic_merge_patch_merges_service_ports_by_port(target):
    body = service_body("ports")
    body["spec"]["ports"] = [{"name": "http", "port": 80}, {"name": "https", "port": 443}]
    await create(target, SERVICE.collection(target), body)
    r = await target.req("PATCH", SERVICE.path(target, "ports"), {"spec": {"ports": [{"port": 443, "targetPort": 8443}]}},
                         content_type=STRATEGIC)
    assert r.status == 200, r.body
    assert [(p["name"], p["port"], p["targetPort"]) for p in r.body["spec"]["ports"]] == \
        [("http", 80, 80), ("https", 443, 8443)]


async def test_strategic_merge_patch_merges_template_containers_by_name(target):
    body = replica_set_body("containers")
    body["spec"]["template"] = template(containers=2)
    await create(target, REPLICA_SET.collection(target), body)
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "app1", "image": "registry.k8s.io/pause:3.9"}]}}}}
    r = await target.req("PATCH", REPLICA_SET.path(target, "containers"), patch, content_type=STRATEGIC)
    assert r.status == 200, r.body
    assert [(c["name"], c["image"]) for c in r.body["spec"]["template"]["spec"]["containers"]] == \
        [("app", IMAGE), ("app1", "registry.k8s.io/pause:3.9")]
    assert r.body["metadata"]["generation"] == 2


@pytest.mark.parametrize("path, name, kind, short", [
    pytest.param("/api/v1", "services", "Service", "svc", id="services"),
    pytest.param("/api/v1", "replicationcontrollers", "ReplicationController", "rc", id="replicationcontrollers"),
    pytest.param("/apis/apps/v1", "replicasets", "ReplicaSet", "rs", id="replicasets"),
    pytest.param("/apis/apps/v1", "statefulsets", "StatefulSet", "sts", id="statefulsets"),
])
async def test_discovery_lists_the_resource_and_its_status(target, path, name, kind, short):
    resources = {r["name"]: r for r in (await get(target, path))["resources"]}
    entry = resources[name]
    assert (entry["kind"], entry["namespaced"], entry["shortNames"], entry["categories"]) == \
        (kind, True, [short], ["all"])
    assert {"create", "delete", "get", "list", "patch", "update", "watch"} <= set(entry["verbs"])
    status = resources[f"{name}/status"]
    assert (status["kind"], sorted(status["verbs"])) == (kind, ["get", "patch", "update"])


async def test_the_apps_group_is_discovered(target):
    groups = {g["name"]: g for g in (await get(target, "/apis"))["groups"]}
    assert groups["apps"]["preferredVersion"] == {"groupVersion": "apps/v1", "version": "v1"}
