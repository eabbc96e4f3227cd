"""The disruption controller's arithmetic, against a store without a server or an event loop.

Each case builds pods (and the controllers they belong to) in a fresh
store and asks what kube-controller-manager's disruption controller would
write for one budget: the numbers of ``count`` (trySync), the status of
``status_update`` (updatePdbStatus) and of ``fail_safe``. The running
controller, with its watches and writes, is tested in
tests/simcluster/test_disruption.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from bench.simcluster.disruption import (DELETION_TIMEOUT, Counts, SyncError, count, fail_safe, status_update)
from bench.simcluster.resources import lookup
from bench.simcluster.store import Store, rfc3339

PODS = lookup("", "v1", "pods")
PDBS = lookup("policy", "v1", "poddisruptionbudgets")
NS = "default"
NOW = 1_700_000_000.0
WEB = {"app": "web"}

API_VERSIONS = {"ReplicaSet": "apps/v1", "StatefulSet": "apps/v1", "ReplicationController": "v1",
                "Job": "batch/v1", "CronJob": "batch/v1", "Service": "v1"}
RESOURCES = {"ReplicaSet": lookup("apps", "v1", "replicasets"), "StatefulSet": lookup("apps", "v1", "statefulsets"),
             "ReplicationController": lookup("", "v1", "replicationcontrollers")}


@dataclass(frozen=True)
class P:
    """A pod of a case: selected by the budgets here unless its labels say otherwise."""

    name: str
    labels: dict[str, str] = field(default_factory=lambda: dict(WEB))
    ready: bool = True
    terminating: bool = False
    phase: str = "Running"
    owner: str = ""        # "Kind/name" of its controller; a name no controller of the case has is missing
    namespace: str = NS


@dataclass(frozen=True)
class C:
    """A controller of a case."""

    kind: str
    name: str
    replicas: int
    by_deployment: bool = False  # itself controlled by a Deployment (which the stand-in does not serve)


def template() -> dict[str, Any]:
    return {"metadata": {"labels": dict(WEB)}, "spec": {"containers": [{"name": "c", "image": "pause"}]}}


def build(pods: list[P], controllers: list[C] = ()) -> Store:
    store = Store()
    store.create(lookup("", "v1", "namespaces"), "", {"metadata": {"name": "other"}})
    uids: dict[str, str] = {}
    for c in controllers:
        spec: dict[str, Any] = {"replicas": c.replicas, "template": template()}
        spec["selector"] = dict(WEB) if c.kind == "ReplicationController" else {"matchLabels": dict(WEB)}
        meta: dict[str, Any] = {"name": c.name}
        if c.by_deployment:
            meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "deploy",
                                        "uid": "deployment-uid", "controller": True}]
        uids[f"{c.kind}/{c.name}"] = store.create(RESOURCES[c.kind], NS, {"metadata": meta, "spec": spec}).uid
    for p in pods:
        meta = {"name": p.name, "labels": p.labels}
        if p.owner:
            kind, name = p.owner.split("/")
            meta["ownerReferences"] = [{"apiVersion": API_VERSIONS[kind], "kind": kind, "name": name,
                                        "uid": uids.get(p.owner, "uid-of-nothing"), "controller": True}]
        obj = store.create(PODS, p.namespace, {"metadata": meta, "spec": {
            "nodeName": "node-0", "containers": [{"name": "c", "image": "pause"}]}}).obj()
        obj["status"]["phase"] = p.phase
        obj["status"]["conditions"] = [{"type": "Ready", "status": "True" if p.ready else "False"}]
        store.update(PODS, p.namespace, p.name, obj, "status")
        if p.terminating:
            store.delete(PODS, p.namespace, p.name, grace=30)
    return store


def budget(store: Store, spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    pdb = store.create(PDBS, NS, {"metadata": {"name": "pdb"}, "spec": spec}).obj()
    if status is not None:
        pdb["status"] = status
        pdb = store.update(PDBS, NS, "pdb", pdb, "status").obj()
    return pdb


def numbers(c: Counts) -> tuple[int, int, int, int]:
    return c.expected_pods, c.desired_healthy, c.current_healthy, c.disruptions_allowed


RS3 = [C("ReplicaSet", "rs", 3)]
OWNED = [P("a", owner="ReplicaSet/rs"), P("b", owner="ReplicaSet/rs"), P("c", owner="ReplicaSet/rs")]

# (spec, pods, controllers, (expectedPods, desiredHealthy, currentHealthy, disruptionsAllowed), id)
COUNT_CASES = [
    ({"minAvailable": 2, "selector": {"matchLabels": WEB}}, [P("a"), P("b"), P("c")], [], (3, 2, 3, 1),
     "an integer minAvailable expects the selected pods and desires that many"),
    ({"minAvailable": 3, "selector": {"matchLabels": WEB}}, [P("a"), P("b")], [], (2, 3, 2, 0),
     "fewer healthy pods than desired allow no disruption, never a negative one"),
    ({"minAvailable": 1, "selector": {"matchLabels": WEB}}, [P("a"), P("b", ready=False)], [], (2, 1, 1, 0),
     "a pod that is not Ready is expected but not healthy"),
    ({"minAvailable": 1, "selector": {"matchLabels": WEB}}, [P("a"), P("b", terminating=True)], [], (2, 1, 1, 0),
     "a pod being deleted is not healthy even while it is Ready"),
    ({"minAvailable": 1, "selector": {"matchLabels": WEB}}, [P("a"), P("b", ready=False, phase="Failed")], [],
     (2, 1, 1, 0), "a failed pod still counts as expected"),
    ({"minAvailable": 0, "selector": {"matchLabels": WEB}}, [], [], (0, 0, 0, 0),
     "no pods allow no disruption"),
    ({"minAvailable": 1, "selector": {}}, [P("a"), P("b", labels={"app": "db"}), P("c", namespace="other")], [],
     (2, 1, 2, 1), "an empty selector selects every pod of the namespace"),
    ({"minAvailable": 0}, [P("a"), P("b")], [], (0, 0, 0, 0),
     "a null selector selects no pod"),
    ({"minAvailable": 1, "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}},
     [P("a"), P("b", labels={"app": "db"})], [], (1, 1, 1, 0),
     "match expressions select as label selectors do"),
    ({"minAvailable": "50%", "selector": {"matchLabels": WEB}}, OWNED[:2], [C("ReplicaSet", "rs", 4)], (4, 2, 2, 0),
     "a percentage of minAvailable is of the controllers' scale, not of the pods"),
    ({"minAvailable": "50%", "selector": {"matchLabels": WEB}}, OWNED, RS3, (3, 2, 3, 1),
     "a percentage of minAvailable rounds up"),
    ({"maxUnavailable": 1, "selector": {"matchLabels": WEB}}, OWNED, RS3, (3, 2, 3, 1),
     "an integer maxUnavailable desires the scale minus it"),
    ({"maxUnavailable": "34%", "selector": {"matchLabels": WEB}}, OWNED, RS3, (3, 1, 3, 2),
     "a percentage of maxUnavailable rounds up too"),
    ({"maxUnavailable": 5, "selector": {"matchLabels": WEB}}, OWNED, RS3, (3, 0, 3, 3),
     "desiredHealthy is never negative"),
    ({"maxUnavailable": 1, "minAvailable": 3, "selector": {"matchLabels": WEB}}, OWNED, RS3, (3, 2, 3, 1),
     "maxUnavailable wins over minAvailable"),
    ({"maxUnavailable": 0, "selector": {"matchLabels": WEB}},
     [P("a", owner="ReplicaSet/rs"), P("b", owner="StatefulSet/sts"), P("c", owner="ReplicationController/rc"),
      P("d", owner="StatefulSet/sts")],
     [C("ReplicaSet", "rs", 2), C("StatefulSet", "sts", 3), C("ReplicationController", "rc", 4)], (9, 9, 4, 0),
     "each controller's scale is summed once, whatever its kind"),
    ({"maxUnavailable": 1, "selector": {"matchLabels": WEB}}, OWNED[:2] + [P("lone")], RS3, (3, 2, 3, 1),
     "a pod without a controller is left out of the scale"),
    ({"maxUnavailable": 1, "selector": {"matchLabels": WEB}}, OWNED, [C("ReplicaSet", "rs", 3, by_deployment=True)],
     (3, 2, 3, 1), "a replica set of a deployment the stand-in does not serve counts its own scale"),
    ({"minAvailable": 1, "selector": {"matchLabels": WEB}}, [P("a", owner="Job/gone")], [], (1, 1, 1, 0),
     "an integer minAvailable needs no controller"),
]


@pytest.mark.parametrize("spec,pods,controllers,want", [c[:4] for c in COUNT_CASES], ids=[c[4] for c in COUNT_CASES])
def test_count(spec, pods, controllers, want):
    store = build(pods, controllers)
    assert numbers(count(store, budget(store, spec), NOW)) == want


SYNC_ERROR_CASES = [
    ({"maxUnavailable": 1}, [P("a", owner="ReplicaSet/gone")], 'found no controllers for pod "a"',
     "a pod whose controller is gone"),
    ({"minAvailable": "50%"}, [P("a", owner="CronJob/j")], 'no matches for kind "CronJob" in version "batch/v1"',
     "a pod controlled by a kind the stand-in does not serve"),
    ({"minAvailable": "50%"}, [P("a", owner="Job/j")], "jobs.batch does not implement the scale subresource",
     "a pod controlled by a Job, which has no scale"),
    ({"maxUnavailable": 1}, [P("a", owner="Service/s")], "services does not implement the scale subresource",
     "a pod controlled by a kind without a scale"),
    ({"minAvailable": "5"}, [], "invalid value for IntOrString: invalid type: string is not a percentage",
     "a string that is not a percentage"),
    ({"maxUnavailable": "x%"}, [],
     'invalid value for IntOrString: invalid value "x%": strconv.Atoi: parsing "x": invalid syntax',
     "a percentage that is not a number"),
]


@pytest.mark.parametrize("spec,pods,message", [c[:3] for c in SYNC_ERROR_CASES], ids=[c[3] for c in SYNC_ERROR_CASES])
def test_count_fails_the_sync(spec, pods, message):
    store = build(pods)
    with pytest.raises(SyncError) as exc:
        count(store, budget(store, {**spec, "selector": {"matchLabels": WEB}}), NOW)
    assert str(exc.value) == message


def test_a_selector_that_does_not_parse_fails_the_sync():
    store = build([P("a")])
    pdb = budget(store, {"minAvailable": 1, "selector": {"matchExpressions": [{"key": "app", "operator": "Near"}]}})
    with pytest.raises(SyncError, match='"Near" is not a valid label selector operator'):
        count(store, pdb, NOW)


# ---------------------------------------------------------------------------- disruptedPods

def evicted(seconds_ago: float) -> str:
    return rfc3339(NOW - seconds_ago)


def test_disrupted_pods_are_kept_until_the_deletion_timeout_and_are_not_healthy():
    store = build([P("a"), P("b"), P("c"), P("d", terminating=True)])
    recorded = {"a": evicted(10), "b": evicted(DELETION_TIMEOUT + 10), "d": evicted(10), "gone": evicted(10)}
    c = count(store, budget(store, {"minAvailable": 1, "selector": {"matchLabels": WEB}},
                            {"disruptedPods": recorded}), NOW)
    # b's eviction expired and a terminating or missing pod needs no entry: only a stays
    assert c.disrupted_pods == {"a": recorded["a"]}
    assert c.recheck == NOW - 10 + DELETION_TIMEOUT
    assert (c.current_healthy, c.expected_pods) == (2, 4)  # b and c; a is on its way out, d is terminating


# ---------------------------------------------------------------------------- the status written

def stored_budget(status: dict[str, Any] | None = None, generation: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": "pdb", "namespace": NS, "generation": generation},
            "spec": {"minAvailable": 1}, "status": status or {}}


def allowed_condition(status: str, reason: str, at: float = NOW, generation: int = 1,
                      message: str = "") -> dict[str, Any]:
    return {"type": "DisruptionAllowed", "status": status, "observedGeneration": generation,
            "lastTransitionTime": rfc3339(at), "reason": reason, "message": message}


def test_status_with_disruptions_allowed():
    status = status_update(stored_budget(), Counts(3, 1, 3), NOW)
    assert status == {"observedGeneration": 1, "disruptionsAllowed": 2, "currentHealthy": 3, "desiredHealthy": 1,
                      "expectedPods": 3, "conditions": [allowed_condition("True", "SufficientPods")]}


def test_status_without_disruptions_allowed():
    status = status_update(stored_budget(), Counts(3, 3, 2), NOW)
    assert status["disruptionsAllowed"] == 0
    assert status["conditions"] == [allowed_condition("False", "InsufficientPods")]


def test_an_up_to_date_status_is_not_written_again():
    first = status_update(stored_budget(), Counts(3, 1, 3), NOW)
    assert status_update(stored_budget(first), Counts(3, 1, 3), NOW + 60) is None


@pytest.mark.parametrize("counts,generation", [
    (Counts(3, 1, 2), 1),
    (Counts(3, 1, 3), 2),
], ids=["a number changed", "the spec changed since"])
def test_a_changed_status_is_written_and_the_condition_keeps_its_transition_time(counts, generation):
    first = status_update(stored_budget(), Counts(3, 1, 3), NOW)
    status = status_update(stored_budget(first, generation=generation), counts, NOW + 60)
    assert status is not None
    assert status["observedGeneration"] == generation
    # still True: SetStatusCondition moves lastTransitionTime only when the status flips
    assert status["conditions"] == [allowed_condition("True", "SufficientPods", at=NOW, generation=generation)]


def test_the_condition_moves_when_disruptions_stop_being_allowed():
    first = status_update(stored_budget(), Counts(3, 1, 3), NOW)
    status = status_update(stored_budget(first), Counts(3, 1, 1), NOW + 60)
    assert status["conditions"] == [allowed_condition("False", "InsufficientPods", at=NOW + 60)]


def test_fail_safe_keeps_the_numbers_and_allows_nothing():
    first = status_update(stored_budget(), Counts(3, 1, 3), NOW)
    status = fail_safe(stored_budget(first), 'found no controllers for pod "a"', NOW + 60)
    assert {k: status[k] for k in ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods")} == \
        {"disruptionsAllowed": 0, "currentHealthy": 3, "desiredHealthy": 1, "expectedPods": 3}
    assert status["conditions"] == [allowed_condition("False", "SyncFailed", at=NOW + 60,
                                                      message='found no controllers for pod "a"')]
