"""PodDisruptionBudgets: what the API server stores, and the status the disruption controller keeps.

The first tests hold on a real kube-apiserver too (the ``target`` fixture
runs them against both): a created budget starts from the zero status of
its Go type, and a status write takes the body's labels along, because the
poddisruptionbudgets/status strategy resets only spec.

The others watch the stand-in's disruption controller keep the status as
kube-controller-manager's does, so they run on the simulated cluster only:
they let its node agent run their pods (a real kube-apiserver has no
kubelets to make pods Ready) and read its store. (The eviction subresource's
dealings with the disruption controller run on both servers, in
tests/simcluster/test_eviction.py.) They wait for the status they expect by polling the store, never by
sleeping; the arithmetic case by case is in
tests/unit/simcluster/test_disruption.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.simcluster import SimCluster
from bench.simcluster.agent import NEVER_READY, TERMINATION_SECONDS
from bench.simcluster.disruption import PDBS, PODS
from bench.simcluster.store import rfc3339
from tests.simcluster.conftest import Target, pod_body
from tests.simcluster.test_services_and_controllers import replica_set_body
from tests.simcluster.test_writes import MERGE, create, get, pods
from tests.support.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")

ZERO_STATUS = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}


def pdbs(t: Target) -> str:
    return f"/apis/policy/v1/namespaces/{t.ns}/poddisruptionbudgets"


def pdb_body(name: str, selector: dict[str, Any] | None, labels: dict[str, str] | None = None,
             **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                            "metadata": {"name": name, "labels": labels or {}}, "spec": dict(spec)}
    if selector is not None:
        body["spec"]["selector"] = selector
    return body


# ---------------------------------------------------------------------------- the API server (both servers)

async def test_a_created_budget_starts_from_the_zero_status(target):
    body = pdb_body("zero", {"matchLabels": {"app": "web"}}, minAvailable=1)
    body["status"] = {"disruptionsAllowed": 5, "currentHealthy": 5}  # PrepareForCreate drops it
    created = await create(target, pdbs(target), body)
    assert created["status"] == ZERO_STATUS
    assert created["metadata"]["generation"] == 1


async def test_a_status_write_takes_the_bodys_labels_along(target):
    await create(target, pdbs(target), pdb_body("l", {"matchLabels": {"app": "web"}}, {"team": "a"},
                                                minAvailable=1))
    # a merge patch carries no resourceVersion, so the stand-in's controller writing status
    # meanwhile cannot make it conflict
    r = await target.req("PATCH", f"{pdbs(target)}/l/status",
                         {"metadata": {"labels": {"via-status": "yes"}}, "spec": {"minAvailable": 9}},
                         content_type=MERGE)
    assert r.status == 200, r.body
    assert r.body["metadata"]["labels"] == {"team": "a", "via-status": "yes"}
    stored = await get(target, f"{pdbs(target)}/l")
    assert stored["metadata"]["labels"] == {"team": "a", "via-status": "yes"}
    assert stored["spec"]["minAvailable"] == 1  # the status strategy resets spec
    assert stored["metadata"]["generation"] == 1


# ---------------------------------------------------------------------------- the disruption controller (stand-in only)

ONLY_SIM = "the stand-in's node agent runs the pods (a real kube-apiserver has no kubelet)"
NUMBERS = ("expectedPods", "desiredHealthy", "currentHealthy", "disruptionsAllowed")
WEB = {"app": "web"}


def stored(target: Target, name: str = "pdb") -> dict[str, Any]:
    """The budget as the stand-in's store holds it right now."""
    return target.sim.store.get_obj(PDBS, target.ns, name) or {}


def numbers(pdb: dict[str, Any]) -> tuple[int, ...]:
    status = pdb.get("status") or {}
    return tuple(status.get(k, 0) for k in NUMBERS)


def allowed(pdb: dict[str, Any]) -> tuple[str, str, str] | None:
    """The DisruptionAllowed condition's (status, reason, message)."""
    for c in (pdb.get("status") or {}).get("conditions") or []:
        if c["type"] == "DisruptionAllowed":
            return c["status"], c["reason"], c["message"]
    return None


async def status_becomes(target: Target, want: tuple[int, ...], reason: str, name: str = "pdb") -> dict[str, Any]:
    """Wait until the budget's (expectedPods, desiredHealthy, currentHealthy, disruptionsAllowed) are
    ``want`` and its DisruptionAllowed condition has ``reason``, for the generation it has; returns it."""
    def there() -> bool:
        pdb = stored(target, name)
        cond = allowed(pdb)
        return (numbers(pdb) == want and cond is not None and cond[1] == reason
                and pdb["status"].get("observedGeneration") == pdb["metadata"]["generation"])
    try:
        await eventually(there, f"budget {name} at {dict(zip(NUMBERS, want))}, {reason}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last seen: {stored(target, name).get('status')}") from None
    return stored(target, name)


async def running_pods(target: Target, node: str, *names: str, labels: dict[str, str] | None = None,
                       owner: dict[str, Any] | None = None, annotations: dict[str, str] | None = None) -> None:
    """Pods placed on ``node`` (the node agent starts them), then until all are Running."""
    for name in names:
        body = pod_body(name, labels=labels or WEB, nodeName=node)
        if owner is not None:
            body["metadata"]["ownerReferences"] = [owner]
        if annotations:
            body["metadata"]["annotations"] = annotations
        r = await target.req("POST", pods(target), body)
        assert r.status == 201, r.body
    await eventually(lambda: all((target.sim.store.get_obj(PODS, target.ns, n) or {}).get("status", {})
                                 .get("phase") == "Running" for n in names), f"{names} Running")


async def test_status_follows_pods_as_they_come_and_go(target):
    target.only_sim(ONLY_SIM)
    [node] = await target.make_nodes(1)
    await create(target, pdbs(target), pdb_body("pdb", {"matchLabels": WEB}, minAvailable=2))
    await status_becomes(target, (0, 2, 0, 0), "InsufficientPods")
    # a long termination keeps a deleted pod in its terminating state for the whole test
    await running_pods(target, node, "a", "b", "c", annotations={TERMINATION_SECONDS: "30"})
    pdb = await status_becomes(target, (3, 2, 3, 1), "SufficientPods")
    assert allowed(pdb) == ("True", "SufficientPods", "")
    r = await target.req("DELETE", f"{pods(target)}/a")
    assert r.status == 200 and r.body["metadata"]["deletionTimestamp"], r.body
    await status_becomes(target, (3, 2, 2, 0), "InsufficientPods")  # terminating: expected, not healthy
    r = await target.req("DELETE", f"{pods(target)}/a", params={"gracePeriodSeconds": "0"})
    assert r.status == 200, r.body
    await status_becomes(target, (2, 2, 2, 0), "InsufficientPods")
    await running_pods(target, node, "d", "e")
    await status_becomes(target, (4, 2, 4, 2), "SufficientPods")


async def test_pods_that_are_not_ready_are_not_healthy(target):
    target.only_sim(ONLY_SIM)
    [node] = await target.make_nodes(1)
    await running_pods(target, node, "ready")
    await running_pods(target, node, "unready", annotations={NEVER_READY: "true"})
    await create(target, pdbs(target), pdb_body("pdb", {"matchLabels": WEB}, minAvailable=1))
    await status_becomes(target, (2, 1, 1, 0), "InsufficientPods")


async def budget_over_two_pods(target: Target) -> None:
    """Pods a and b Running, and budget ``pdb`` (minAvailable 1) over them, its status written."""
    [node] = await target.make_nodes(1)
    await running_pods(target, node, "a", "b")
    await create(target, pdbs(target), pdb_body("pdb", {"matchLabels": WEB}, minAvailable=1))
    await status_becomes(target, (2, 1, 2, 1), "SufficientPods")


async def test_a_relabelled_pod_leaves_the_budget(target):
    target.only_sim(ONLY_SIM)
    await budget_over_two_pods(target)
    await eventually(target.sim.disruption_controller.caught_up, "the controller idle")
    # the pod's new labels match no budget: only its old ones say which budget to look at again
    r = await target.req("PATCH", f"{pods(target)}/b", {"metadata": {"labels": {"app": "db"}}}, content_type=MERGE)
    assert r.status == 200, r.body
    await status_becomes(target, (1, 1, 1, 0), "InsufficientPods")


async def test_max_unavailable_follows_the_controllers_scale(target):
    target.only_sim(ONLY_SIM)
    [node] = await target.make_nodes(1)
    rs_path = f"/apis/apps/v1/namespaces/{target.ns}/replicasets"
    rs_body = replica_set_body("rs")
    rs_body["spec"]["replicas"] = 3
    rs = await create(target, rs_path, rs_body)
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": rs["metadata"]["uid"],
             "controller": True}
    await running_pods(target, node, "a", "b", "c", owner=owner)
    await create(target, pdbs(target), pdb_body("pdb", {"matchLabels": WEB}, maxUnavailable=1))
    await status_becomes(target, (3, 2, 3, 1), "SufficientPods")
    await eventually(target.sim.disruption_controller.caught_up, "the controller idle")
    # the ReplicaSet controller makes the two pods the scale asks for, and nothing schedules them: the
    # scale moves the numbers, the healthy pods stay
    r = await target.req("PATCH", f"{rs_path}/rs", {"spec": {"replicas": 5}}, content_type=MERGE)
    assert r.status == 200, r.body
    await status_becomes(target, (5, 4, 3, 0), "InsufficientPods")


async def test_a_pod_whose_controller_is_missing_fails_the_sync(target):
    target.only_sim(ONLY_SIM)
    [node] = await target.make_nodes(1)
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone",
             "uid": "7d3b9c1e-0000-4000-8000-000000000000", "controller": True}
    await running_pods(target, node, "a", owner=owner)
    await running_pods(target, node, "b")
    await create(target, pdbs(target), pdb_body("pdb", {"matchLabels": WEB}, maxUnavailable="50%"))
    await eventually(lambda: allowed(stored(target)) is not None, "a DisruptionAllowed condition")
    pdb = stored(target)
    assert allowed(pdb) == ("False", "SyncFailed", 'found no controllers for pod "a"')
    assert pdb["status"]["disruptionsAllowed"] == 0
    r = await target.req("DELETE", f"{pods(target)}/a", params={"gracePeriodSeconds": "0"})
    assert r.status == 200, r.body
    # b has no controller at all: it is left out of the scale, and nothing is expected
    await status_becomes(target, (0, 0, 1, 0), "InsufficientPods")


async def test_a_spec_change_is_observed(target):
    target.only_sim(ONLY_SIM)
    await budget_over_two_pods(target)
    r = await target.req("PATCH", f"{pdbs(target)}/pdb", {"spec": {"minAvailable": 2}}, content_type=MERGE)
    assert r.status == 200 and r.body["metadata"]["generation"] == 2, r.body
    pdb = await status_becomes(target, (2, 2, 2, 0), "InsufficientPods")
    assert pdb["status"]["observedGeneration"] == 2


async def test_disrupted_pods_written_by_an_eviction_are_kept_and_not_healthy(target):
    target.only_sim(ONLY_SIM)
    [node] = await target.make_nodes(1)
    await running_pods(target, node, "a", "b", "c", annotations={TERMINATION_SECONDS: "30"})
    await create(target, pdbs(target), pdb_body("pdb", {"matchLabels": WEB}, minAvailable=2))
    await status_becomes(target, (3, 2, 3, 1), "SufficientPods")
    # what the eviction subresource writes before it deletes the pod, written by hand: the controller alone
    evicted_at = rfc3339(target.sim.store.clock())
    r = await target.req("PATCH", f"{pdbs(target)}/pdb/status", {"status": {"disruptedPods": {"a": evicted_at}}},
                         content_type=MERGE)
    assert r.status == 200, r.body
    pdb = await status_becomes(target, (3, 2, 2, 0), "InsufficientPods")
    assert pdb["status"]["disruptedPods"] == {"a": evicted_at}
    r = await target.req("DELETE", f"{pods(target)}/a")
    assert r.status == 200, r.body
    # once the pod is terminating, the entry has served its purpose
    await eventually(lambda: "disruptedPods" not in stored(target)["status"], "the entry dropped")
    assert numbers(stored(target)) == (3, 2, 2, 0)


async def test_watchers_see_status_writes_and_the_budgets_labels_stay(target):
    target.only_sim(ONLY_SIM)
    created = await create(target, pdbs(target), pdb_body("pdb", {"matchLabels": WEB}, {"team": "a"}, minAvailable=1))
    events = await target.watch(pdbs(target), {"resourceVersion": created["metadata"]["resourceVersion"]},
                                until=1, timeout=5)
    assert [e["type"] for e in events] == ["MODIFIED"]
    pdb = events[0]["object"]
    assert pdb["status"]["observedGeneration"] == 1
    assert allowed(pdb) == ("False", "InsufficientPods", "")
    assert pdb["metadata"]["labels"] == {"team": "a"}


async def test_a_cluster_without_the_node_agent_runs_no_disruption_controller(target):
    target.only_sim(ONLY_SIM)
    async with SimCluster(agent=None) as c:
        assert c.disruption_controller is None
    assert target.sim.disruption_controller is not None
