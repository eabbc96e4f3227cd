"""The ReplicaSet controller: the stand-in's (bench/simcluster/replicasets.py) against kube-controller-manager's.

Every test runs on both servers: on the real one kube-controller-manager
runs its replicaset-controller for the session (``NATIVE_CONTROLLERS`` in
conftest.py). Neither server runs kubelets here (the stand-in's node agent
is stopped, :func:`without_kubelets`), so a pod is Running and Ready when
the test writes its status, and a pod on a node deleted gracefully stays
terminating, on both alike. Every wait is for a condition, with a bound.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from bench.simcluster.store import rfc3339
from tests.simcluster.conftest import Target
from tests.simcluster.test_volumes import until
from tests.simcluster.test_writes import MERGE, create, get, pods, without_kubelets

pytestmark = pytest.mark.asyncio(loop_scope="session")

IMAGE = "registry.k8s.io/pause:3.10"
WEB = {"app": "web"}
TEMPLATE_LABELS = {"app": "web", "tier": "front"}
WAIT = 15.0  # seconds; the real controller acts within milliseconds, its events within a second


def replica_sets(t: Target) -> str:
    return f"/apis/apps/v1/namespaces/{t.ns}/replicasets"


def replica_set_body(name: str, replicas: int, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": WEB},
                     "template": {"metadata": {"labels": TEMPLATE_LABELS, "annotations": {"note": "from the template"}},
                                  "spec": {"containers": [{"name": "app", "image": IMAGE}]}},
                     **spec}}


def owner(rs: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs["metadata"]["name"],
            "uid": rs["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


async def web_pods(t: Target) -> list[dict[str, Any]]:
    """The pods of the test's namespace that the ReplicaSets' selector selects, terminating ones included."""
    r = await t.req("GET", pods(t), params={"labelSelector": "app=web"})
    assert r.status == 200, r.body
    return r.body["items"]


def active(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def names(items: list[dict[str, Any]]) -> set[str]:
    return {p["metadata"]["name"] for p in items}


async def count_becomes(t: Target, n: int, what: str) -> list[dict[str, Any]]:
    """Until exactly ``n`` selected pods are not terminating; returns them."""
    return active(await until(lambda: web_pods(t), lambda items: len(active(items)) == n, what, WAIT))


async def status_becomes(t: Target, name: str, want: dict[str, Any]) -> dict[str, Any]:
    """Until the ReplicaSet's status is exactly ``want``; returns the ReplicaSet."""
    return await until(lambda: get(t, f"{replica_sets(t)}/{name}"), lambda rs: rs.get("status") == want,
                       f"replicaset {name} status {want}", WAIT)


async def start(t: Target, name: str, node: str, *, ready: bool = True) -> None:
    """Bind the pod to ``node`` and write the status a kubelet would: Running, Ready (or not) since now."""
    r = await t.req("POST", f"{pods(t)}/{name}/binding", {"apiVersion": "v1", "kind": "Binding",
                                                          "metadata": {"name": name},
                                                          "target": {"kind": "Node", "name": node}})
    assert r.status == 201, r.body
    await set_running(t, name, ready=ready)


async def set_running(t: Target, name: str, *, ready: bool = True) -> None:
    since = rfc3339(time.time())
    r = await t.req("PATCH", f"{pods(t)}/{name}/status", {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": since}]}},
        content_type=MERGE)
    assert r.status == 200, r.body


async def events(t: Target, reason: str) -> list[str]:
    """The messages of the replicaset-controller's events of ``reason`` in the test's namespace."""
    r = await t.req("GET", f"/api/v1/namespaces/{t.ns}/events", params={"fieldSelector": f"reason={reason}"})
    assert r.status == 200, r.body
    return sorted(e["message"] for e in r.body["items"]
                  if e["source"].get("component") == "replicaset-controller"
                  and e["involvedObject"]["kind"] == "ReplicaSet")


# ---------------------------------------------------------------------------- creating

async def test_a_replica_set_creates_its_pods_from_its_template(target):
    target.needs_controllers("replicaset-controller")
    rs = await create(target, replica_sets(target), replica_set_body("web", 2))
    made = await count_becomes(target, 2, "two pods")
    for pod in made:
        meta = pod["metadata"]
        assert meta["generateName"] == "web-" and meta["name"].startswith("web-") and len(meta["name"]) == 9, meta
        assert meta["labels"] == TEMPLATE_LABELS
        assert meta["annotations"] == {"note": "from the template"}
        assert meta["ownerReferences"] == [owner(rs)]
        assert [(c["name"], c["image"]) for c in pod["spec"]["containers"]] == [("app", IMAGE)]
    await status_becomes(target, "web", {"replicas": 2, "fullyLabeledReplicas": 2, "terminatingReplicas": 0,
                                         "observedGeneration": 1})
    want = sorted(f"Created pod: {n}" for n in names(made))
    await until(lambda: events(target, "SuccessfulCreate"), lambda got: got == want, "the create events", WAIT)


async def test_a_pod_without_all_the_template_labels_is_not_fully_labelled(target):
    target.needs_controllers("replicaset-controller")
    await create(target, replica_sets(target), replica_set_body("web", 2))
    one, _ = await count_becomes(target, 2, "two pods")
    r = await target.req("PATCH", f"{pods(target)}/{one['metadata']['name']}",
                         {"metadata": {"labels": {"tier": None}}}, content_type=MERGE)
    assert r.status == 200, r.body
    # still selected (app=web), so still one of its two replicas
    await status_becomes(target, "web", {"replicas": 2, "fullyLabeledReplicas": 1, "terminatingReplicas": 0,
                                         "observedGeneration": 1})


async def test_a_deleted_pod_is_replaced(target):
    target.needs_controllers("replicaset-controller")
    await create(target, replica_sets(target), replica_set_body("web", 2))
    before = names(await count_becomes(target, 2, "two pods"))
    gone = sorted(before)[0]
    r = await target.req("DELETE", f"{pods(target)}/{gone}")  # unscheduled: it goes at once
    assert r.status == 200, r.body
    after = await until(lambda: web_pods(target), lambda items: len(items) == 2 and gone not in names(items),
                        "a replacement", WAIT)
    assert len(names(after) - before) == 1


async def test_a_terminating_pod_is_replaced_at_once_and_counted_as_terminating(target):
    target.needs_controllers("replicaset-controller")
    await without_kubelets(target)
    [node] = await target.make_nodes(1)
    await create(target, replica_sets(target), replica_set_body("web", 2))
    first, second = await count_becomes(target, 2, "two pods")
    name = first["metadata"]["name"]
    await start(target, name, node)
    await status_becomes(target, "web", {"replicas": 2, "fullyLabeledReplicas": 2, "readyReplicas": 1,
                                         "availableReplicas": 1, "terminatingReplicas": 0, "observedGeneration": 1})
    r = await target.req("DELETE", f"{pods(target)}/{name}")  # on a node: graceful, and no kubelet ends it
    assert r.status == 200 and r.body["metadata"]["deletionTimestamp"], r.body
    now = await count_becomes(target, 2, "a replacement beside the terminating pod")
    assert name not in names(now) and second["metadata"]["name"] in names(now)
    assert name in names(await web_pods(target))
    await status_becomes(target, "web", {"replicas": 2, "fullyLabeledReplicas": 2, "terminatingReplicas": 1,
                                         "observedGeneration": 1})
    r = await target.req("DELETE", f"{pods(target)}/{name}", params={"gracePeriodSeconds": "0"})
    assert r.status == 200, r.body
    await status_becomes(target, "web", {"replicas": 2, "fullyLabeledReplicas": 2, "terminatingReplicas": 0,
                                         "observedGeneration": 1})


# ---------------------------------------------------------------------------- scaling and status

async def test_scaling_down_deletes_unscheduled_pods_before_running_ones(target):
    target.needs_controllers("replicaset-controller")
    await without_kubelets(target)
    [node] = await target.make_nodes(1)
    await create(target, replica_sets(target), replica_set_body("web", 3))
    made = await count_becomes(target, 3, "three pods")
    kept = made[1]["metadata"]["name"]
    await start(target, kept, node)
    await status_becomes(target, "web", {"replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 1,
                                         "availableReplicas": 1, "terminatingReplicas": 0, "observedGeneration": 1})
    r = await target.req("PATCH", f"{replica_sets(target)}/web", {"spec": {"replicas": 1}}, content_type=MERGE)
    assert r.status == 200, r.body
    left = await until(lambda: web_pods(target), lambda items: len(items) == 1, "the two unscheduled pods gone", WAIT)
    assert names(left) == {kept}
    await status_becomes(target, "web", {"replicas": 1, "fullyLabeledReplicas": 1, "readyReplicas": 1,
                                         "availableReplicas": 1, "terminatingReplicas": 0, "observedGeneration": 2})
    want = sorted(f"Deleted pod: {n}" for n in names(made) - {kept})
    await until(lambda: events(target, "SuccessfulDelete"), lambda got: got == want, "the delete events", WAIT)

    r = await target.req("PATCH", f"{replica_sets(target)}/web", {"spec": {"replicas": 0}}, content_type=MERGE)
    assert r.status == 200, r.body
    # the running pod is deleted gracefully: it terminates, and is counted so
    await status_becomes(target, "web", {"replicas": 0, "terminatingReplicas": 1, "observedGeneration": 3})
    [pod] = await web_pods(target)
    assert pod["metadata"]["deletionTimestamp"] and pod["metadata"]["deletionGracePeriodSeconds"] == 30


async def test_a_pod_is_available_once_ready_for_min_ready_seconds(target):
    target.needs_controllers("replicaset-controller")
    await without_kubelets(target)
    [node] = await target.make_nodes(1)
    await create(target, replica_sets(target), replica_set_body("web", 1, minReadySeconds=2))
    [pod] = await count_becomes(target, 1, "one pod")
    await start(target, pod["metadata"]["name"], node)
    ready = {"replicas": 1, "fullyLabeledReplicas": 1, "readyReplicas": 1, "terminatingReplicas": 0,
             "observedGeneration": 1}
    rs = await until(lambda: get(target, f"{replica_sets(target)}/web"),
                     lambda rs: rs["status"].get("readyReplicas") == 1, "the pod ready", WAIT)
    assert rs["status"] == ready  # not available: Ready since a time (to the second) not two seconds old
    # nothing changes by then: the controller looks again minReadySeconds later by itself
    await status_becomes(target, "web", {**ready, "availableReplicas": 1})


# ---------------------------------------------------------------------------- adopting and releasing

async def test_a_matching_orphan_is_adopted_and_a_relabelled_pod_released(target):
    target.needs_controllers("replicaset-controller")
    await without_kubelets(target)
    [node] = await target.make_nodes(1)
    rs = await create(target, replica_sets(target), replica_set_body("web", 1))
    [made] = await count_becomes(target, 1, "its pod")
    orphan = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "orphan", "labels": WEB},
              "spec": {"nodeName": node, "containers": [{"name": "app", "image": IMAGE}]}}
    await create(target, pods(target), orphan)
    # adopted: two pods for one replica, and the unscheduled one goes first
    [kept] = await until(lambda: web_pods(target), lambda items: names(items) == {"orphan"},
                         "the orphan adopted and the unscheduled pod deleted", WAIT)
    assert kept["metadata"]["ownerReferences"] == [owner(rs)]
    assert made["metadata"]["name"] != "orphan"

    r = await target.req("PATCH", f"{pods(target)}/orphan", {"metadata": {"labels": {"app": "other"}}},
                         content_type=MERGE)
    assert r.status == 200, r.body
    await count_becomes(target, 1, "a replacement for the released pod")
    released = await until(lambda: get(target, f"{pods(target)}/orphan"),
                           lambda pod: "ownerReferences" not in pod["metadata"], "the orphan released", WAIT)
    assert released["metadata"]["labels"] == {"app": "other"}
