"""The pods/eviction subresource (bench/simcluster/eviction.py), held to kube-apiserver's.

Every test runs on both servers; the budget tests need the disruption
controller, which kube-controller-manager runs for the session on the real
one (``NATIVE_CONTROLLERS`` in conftest.py). Neither server runs kubelets
here (:func:`without_kubelets` stops the stand-in's node agent): a pod is
Running and Ready when the test writes its status, and an evicted pod on a
node stays terminating, with its deletionTimestamp, until someone deletes it
with gracePeriodSeconds 0, on both alike. Bodies are compared whole: the
stand-in answers with the real server's words.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.simcluster.conftest import Target, pod_body
from tests.simcluster.test_replicasets import set_running
from tests.simcluster.test_volumes import until
from tests.simcluster.test_writes import MERGE, create, get, pods, without_kubelets

pytestmark = pytest.mark.asyncio(loop_scope="session")

WEB = {"app": "web"}
WAIT = 15.0
SUCCESS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
NUMBERS = ("expectedPods", "desiredHealthy", "currentHealthy", "disruptionsAllowed")


def budgets(t: Target) -> str:
    return f"/apis/policy/v1/namespaces/{t.ns}/poddisruptionbudgets"


def budget(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": WEB}, **spec}}


def eviction(name: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}, **fields}


async def evict(t: Target, name: str, body: dict[str, Any] | None = None, **params: str) -> Any:
    return await t.req("POST", f"{pods(t)}/{name}/eviction", body or eviction(name), params=params or None)


async def running(t: Target, node: str, *names: str, ready: bool = True, **metadata: Any) -> None:
    """Pods on ``node`` (placed there at create), Running, Ready or not, as a kubelet would report them."""
    for name in names:
        body = pod_body(name, labels=WEB, nodeName=node, terminationGracePeriodSeconds=17)
        body["metadata"].update(metadata)
        await create(t, pods(t), body)
        await set_running(t, name, ready=ready)


async def settled(t: Target, name: str, want: tuple[int, ...], disrupted: bool = False) -> dict[str, Any]:
    """Until the budget's (expectedPods, desiredHealthy, currentHealthy, disruptionsAllowed) are ``want``
    for its generation, and it has ``disruptedPods`` only if ``disrupted``; returns it."""
    def there(pdb: dict[str, Any]) -> bool:
        status = pdb.get("status") or {}
        return (tuple(status.get(k, 0) for k in NUMBERS) == want
                and status.get("observedGeneration") == pdb["metadata"]["generation"]
                and ("disruptedPods" in status) == disrupted)
    return await until(lambda: get(t, f"{budgets(t)}/{name}"), there, f"budget {name} at {want}", WAIT)


def disruption_target(pod: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in pod["status"].get("conditions") or [] if c["type"] == "DisruptionTarget"), None)


async def untouched(t: Target, name: str) -> None:
    pod = await get(t, f"{pods(t)}/{name}")
    assert "deletionTimestamp" not in pod["metadata"] and disruption_target(pod) is None, pod


def refusal(cause: str, **details: Any) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": VIOLATION,
            "reason": "TooManyRequests",
            "details": {"causes": [{"reason": "DisruptionBudget", "message": cause}], **details}, "code": 429}


# ---------------------------------------------------------------------------- discovery, shape of the request

async def test_discovery_lists_pods_eviction_as_a_policy_eviction(target):
    resources = {r["name"]: r for r in (await get(target, "/api/v1"))["resources"]}
    assert resources["pods/eviction"] == {"name": "pods/eviction", "singularName": "", "namespaced": True,
                                          "group": "policy", "version": "v1", "kind": "Eviction",
                                          "verbs": ["create"]}


async def test_evicting_a_missing_pod_is_404(target):
    r = await evict(target, "missing")
    assert (r.status, r.body) == (404, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                        "message": 'pods "missing" not found', "reason": "NotFound",
                                        "details": {"name": "missing", "kind": "pods"}, "code": 404})


@pytest.mark.parametrize("body, message", [
    pytest.param(eviction("other"), "name in URL does not match name in Eviction object",
                 id="an eviction naming another pod is refused"),
    pytest.param({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}},
                 'Pod in version "v1" cannot be handled as a Eviction: converting (v1.Pod) to (policy.Eviction): '
                 "unknown conversion", id="a body of another kind is refused"),
    pytest.param(eviction("a", deleteOptions={"gracePeriodSeconds": "soon"}),
                 'Eviction in version "v1" cannot be handled as a Eviction: json: cannot unmarshal string into Go '
                 "struct field DeleteOptions.deleteOptions.gracePeriodSeconds of type int64",
                 id="a grace period that is no number is refused"),
])
async def test_a_body_that_is_no_eviction_of_the_pod_is_400(target, body, message):
    await without_kubelets(target)
    [node] = await target.make_nodes(1)
    await running(target, node, "a")
    r = await evict(target, "a", body)
    assert (r.status, r.body) == (400, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                        "message": message, "reason": "BadRequest", "code": 400})
    await untouched(target, "a")


async def test_only_create_is_served(target):
    await without_kubelets(target)
    [node] = await target.make_nodes(1)
    await running(target, node, "a")
    for method in ("GET", "PUT", "PATCH", "DELETE"):
        r = await target.req(method, f"{pods(target)}/a/eviction", eviction("a"),
                             content_type=MERGE if method == "PATCH" else "application/json")
        assert (r.status, r.body) == (405, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                            "status": "Failure", "message": "the server does not allow this method "
                                                                           "on the requested resource",
                                            "reason": "MethodNotAllowed", "details": {}, "code": 405}), method


# ---------------------------------------------------------------------------- no budget: a graceful delete

@pytest.mark.parametrize("body, grace", [
    pytest.param(eviction("a"), 17, id="the pod's own grace period"),
    pytest.param(eviction("a", deleteOptions={"gracePeriodSeconds": 5}), 5, id="the eviction's grace period"),
    pytest.param(eviction("a", deleteOptions={"gracePeriodSeconds": -1}), 1,
                 id="a negative grace period is one second (a DELETE would refuse it)"),
    pytest.param({"apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": "a"}}, 17,
                 id="a policy/v1beta1 eviction"),
    pytest.param({"metadata": {"name": "a"}}, 17, id="an eviction without kind or apiVersion"),
])
async def test_an_evicted_pod_is_marked_and_deleted_gracefully(target, body, grace):
    await without_kubelets(target)
    [node] = await target.make_nodes(1)
    await running(target, node, "a")
    r = await evict(target, "a", body)
    assert (r.status, r.body) == (201, SUCCESS)
    pod = await get(target, f"{pods(target)}/a")
    assert pod["metadata"]["deletionTimestamp"] and pod["metadata"]["deletionGracePeriodSeconds"] == grace
    assert pod["metadata"]["generation"] == 2  # the first graceful delete bumps it
    condition = disruption_target(pod)
    assert condition is not None and condition["lastTransitionTime"], pod["status"]
    assert {k: v for k, v in condition.items() if k != "lastTransitionTime"} == {
        "type": "DisruptionTarget", "status": "True", "lastProbeTime": None,
        "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"}
    # no kubelet ends it: it stays until a delete with no grace period
    r = await target.req("DELETE", f"{pods(target)}/a", params={"gracePeriodSeconds": "0"})
    assert r.status == 200, r.body
    assert (await target.req("GET", f"{pods(target)}/a")).status == 404


async def test_a_dry_run_eviction_changes_nothing(target):
    await without_kubelets(target)
    [node] = await target.make_nodes(1)
    await running(target, node, "a")
    r = await evict(target, "a", dryRun="All")
    assert (r.status, r.body) == (201, SUCCESS)
    await untouched(target, "a")


async def test_delete_preconditions_are_checked_before_anything_is_written(target):
    await without_kubelets(target)
    [node] = await target.make_nodes(1)
    await running(target, node, "a")
    pod = await get(target, f"{pods(target)}/a")
    uid, rv = pod["metadata"]["uid"], pod["metadata"]["resourceVersion"]
    r = await evict(target, "a", eviction("a", deleteOptions={"preconditions": {"uid": "not-its-uid"}}))
    assert (r.status, r.body) == (409, {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f'Operation cannot be fulfilled on Pod "a": the UID in the precondition (not-its-uid) does not '
                   f"match the UID in record ({uid}). The object might have been deleted and then recreated",
        "reason": "Conflict", "details": {"name": "a", "kind": "Pod"}, "code": 409})
    await untouched(target, "a")
    # the pod's own resourceVersion holds, though the eviction's condition moves it before the delete
    r = await evict(target, "a", eviction("a", deleteOptions={"preconditions": {"uid": uid, "resourceVersion": rv}}))
    assert (r.status, r.body) == (201, SUCCESS)
    assert (await get(target, f"{pods(target)}/a"))["metadata"]["deletionTimestamp"]


# ---------------------------------------------------------------------------- with a budget

async def test_an_eviction_the_budget_allows_spends_it_and_records_the_pod(target):
    target.needs_controllers("disruption-controller")
    await without_kubelets(target)
    [node] = await target.make_nodes(1)
    await running(target, node, "a", "b", "c")
    await create(target, budgets(target), budget("pdb", minAvailable=2))
    before = await settled(target, "pdb", (3, 2, 3, 1))
    r = await evict(target, "a")
    assert (r.status, r.body) == (201, SUCCESS)
    # the eviction's own write comes first: one disruption spent, the pod recorded as disrupted
    [event] = await target.watch(budgets(target), {"resourceVersion": before["metadata"]["resourceVersion"]},
                                 until=1, timeout=5)
    written = event["object"]["status"]
    assert event["type"] == "MODIFIED" and list(written["disruptedPods"]) == ["a"], event
    assert tuple(written[k] for k in NUMBERS) == (3, 2, 3, 0)
    assert [(c["type"], c["status"], c["reason"]) for c in written["conditions"]] == \
        [("DisruptionAllowed", "False", "InsufficientPods")]
    # then the controller: a terminating pod is neither healthy nor disrupted any more (kube-controller-manager
    # may first write the same numbers with the entry kept, if it syncs before it sees the pod terminating)
    await settled(target, "pdb", (3, 2, 2, 0))
    assert (await get(target, f"{pods(target)}/a"))["metadata"]["deletionTimestamp"]

    r = await evict(target, "b")
    assert (r.status, r.body) == (429, refusal("The disruption budget pdb needs 2 healthy pods and has 2 currently"))
    assert "Retry-After" not in r.headers
    await untouched(target, "b")


async def test_a_budget_that_allows_no_disruption_refuses_with_429(target):
    target.needs_controllers("disruption-controller")
    await without_kubelets(target)
    [node] = await target.make_nodes(1)
    await running(target, node, "a", "b")
    await create(target, budgets(target), budget("pdb", minAvailable=2))
    await settled(target, "pdb", (2, 2, 2, 0))
    r = await evict(target, "a")
    assert (r.status, r.body) == (429, refusal("The disruption budget pdb needs 2 healthy pods and has 2 currently"))
    await untouched(target, "a")


async def test_a_budget_whose_status_is_behind_its_generation_is_429_with_retry_after(target):
    await without_kubelets(target)
    [node] = await target.make_nodes(1)
    # the pod's controller does not exist: the disruption controller cannot sync the budget, and
    # leaves observedGeneration behind (failSafe), on both servers alike
    missing = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone",
               "uid": "7d3b9c1e-0000-4000-8000-000000000000", "controller": True}
    await running(target, node, "a", ownerReferences=[missing])
    await create(target, budgets(target), budget("pdb", maxUnavailable=1))
    r = await evict(target, "a")
    assert (r.status, r.body) == (429, refusal("The disruption budget pdb is still being processed by the server.",
                                               retryAfterSeconds=10))
    assert r.headers["Retry-After"] == "10"
    await untouched(target, "a")


async def test_a_pod_with_more_than_one_budget_is_500(target):
    await without_kubelets(target)
    [node] = await target.make_nodes(1)
    await running(target, node, "a")
    await create(target, budgets(target), budget("one", minAvailable=0))
    await create(target, budgets(target), budget("two", maxUnavailable=1))
    r = await evict(target, "a")
    assert (r.status, r.body) == (500, {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        "code": 500})
    await untouched(target, "a")


async def _pending(t: Target, node: str) -> None:
    await create(t, pods(t), pod_body("x", labels=WEB))


async def _finished(t: Target, node: str) -> None:
    await running(t, node, "x")
    r = await t.req("PATCH", f"{pods(t)}/x/status", {"status": {"phase": "Succeeded"}}, content_type=MERGE)
    assert r.status == 200, r.body


async def _terminating(t: Target, node: str) -> None:
    await running(t, node, "x")
    r = await t.req("DELETE", f"{pods(t)}/x")
    assert r.status == 200 and r.body["metadata"]["deletionTimestamp"], r.body


@pytest.mark.parametrize("make, options", [
    pytest.param(_pending, {}, id="an unscheduled pending pod goes at once"),
    pytest.param(_finished, {}, id="a pod that succeeded goes at once"),
    pytest.param(_terminating, {"gracePeriodSeconds": 0}, id="a terminating pod goes when the eviction says so"),
])
async def test_a_pod_that_disrupts_nothing_more_ignores_its_budget(target, make, options):
    target.needs_controllers("disruption-controller")
    await without_kubelets(target)
    [node] = await target.make_nodes(1)
    await running(target, node, "a")
    await create(target, budgets(target), budget("pdb", minAvailable=5))
    await settled(target, "pdb", (1, 5, 1, 0))
    await make(target, node)
    r = await evict(target, "x", eviction("x", deleteOptions=options))
    assert (r.status, r.body) == (201, SUCCESS)
    assert (await target.req("GET", f"{pods(target)}/x")).status == 404


@pytest.mark.parametrize("min_available, policy, outcome", [
    pytest.param(2, None, "evicted", id="an unready pod goes while the budget has its healthy pods"),
    pytest.param(3, None, "needs 3 healthy pods and has 2",
                 id="an unready pod stays while the budget lacks healthy pods (IfHealthyBudget)"),
    pytest.param(3, "AlwaysAllow", "evicted", id="an unready pod goes whatever the budget with AlwaysAllow"),
])
async def test_an_unready_pod_follows_the_unhealthy_pod_eviction_policy(target, min_available, policy, outcome):
    target.needs_controllers("disruption-controller")
    await without_kubelets(target)
    [node] = await target.make_nodes(1)
    await running(target, node, "a", "b")
    await running(target, node, "u", ready=False)
    spec: dict[str, Any] = {"minAvailable": min_available}
    if policy is not None:
        spec["unhealthyPodEvictionPolicy"] = policy
    await create(target, budgets(target), budget("pdb", **spec))
    before = await settled(target, "pdb", (3, min_available, 2, 0))
    r = await evict(target, "u")
    if outcome == "evicted":
        assert (r.status, r.body) == (201, SUCCESS)
        assert disruption_target(await get(target, f"{pods(target)}/u")) is not None
        # an unready pod was not counted healthy: the budget is not spent, and not written
        assert (await get(target, f"{budgets(target)}/pdb"))["metadata"]["resourceVersion"] == \
            before["metadata"]["resourceVersion"]
    else:
        assert (r.status, r.body) == (429, refusal(f"The disruption budget pdb {outcome} currently"))
        await untouched(target, "u")
