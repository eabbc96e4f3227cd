"""NodeDeclaredFeatures: pods that need a node feature go only where it is declared (plugins/node_declared_features.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from plugins.node_declared_features import (
    ERR_REASON, RESTART_ALL_CONTAINERS, USER_NAMESPACES_HOST_NETWORK, NodeDeclaredFeatures, required_features,
)
from scheduler.framework import ActionType, ClusterEvent, Code, CycleState, QueueingHint, Resource
from scheduler.model import parse_node, parse_pod
from scheduler.state.cache import Cache

RESTART_ALL = {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}
RESTART = {"action": "Restart", "exitCodes": {"operator": "In", "values": [1]}}


def make_pod(uid: str = "p", containers: list[dict[str, Any]] | None = None, **spec: Any) -> Any:
    containers = containers if containers is not None else [{"name": "c", "image": "x"}]
    return parse_pod({"metadata": {"name": uid, "namespace": "ns", "uid": uid},
                      "spec": {"containers": containers, **spec}})


def with_rules(*rules: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": "c", "image": "x", "restartPolicy": "Never", "restartPolicyRules": list(rules)}]


def node(name: str, *features: str) -> Any:
    status = {"declaredFeatures": list(features)} if features else {}
    return parse_node({"metadata": {"name": name}, "status": status})


@pytest.mark.parametrize("pod, want", [
    pytest.param(make_pod(), (), id="a plain pod needs nothing"),
    pytest.param(make_pod(containers=with_rules(RESTART_ALL)), (RESTART_ALL_CONTAINERS,),
                 id="a container restart rule that restarts all containers"),
    pytest.param(make_pod(containers=[{"name": "app", "image": "x"}],
                          initContainers=[{"name": "init", "image": "x", "restartPolicy": "Never",
                                           "restartPolicyRules": [RESTART_ALL]}]),
                 (RESTART_ALL_CONTAINERS,), id="an init container's rule counts too"),
    pytest.param(make_pod(containers=with_rules(RESTART)), (), id="a rule that restarts only its container needs nothing"),
    pytest.param(make_pod(hostNetwork=True, hostUsers=False), (USER_NAMESPACES_HOST_NETWORK,),
                 id="host network in a user namespace"),
    pytest.param(make_pod(hostNetwork=True), (), id="host network in the host's user namespace needs nothing"),
    pytest.param(make_pod(hostUsers=False), (), id="a user namespace without host network needs nothing"),
    pytest.param(make_pod(containers=with_rules(RESTART_ALL), hostNetwork=True, hostUsers=False),
                 (RESTART_ALL_CONTAINERS, USER_NAMESPACES_HOST_NETWORK), id="both"),
])
def test_required_features(pod: Any, want: tuple[str, ...]) -> None:
    assert required_features(pod) == want


def verdicts(pod: Any, *nodes: Any) -> dict[str, Any] | str:
    """Filter's verdict per node name, or "skip" when PreFilter skips the pod."""
    cache = Cache()
    for n in nodes:
        cache.add_node(n)
    pl, state = NodeDeclaredFeatures(None, None), CycleState()
    result, st = pl.pre_filter(state, pod, cache.nodes)
    assert result is None
    if st.code == Code.SKIP:
        return "skip"
    assert st.is_success()
    rows = cache.nodes.rows()
    res = pl.filter(state, pod, cache.nodes, rows)
    if not res.passed.all():
        assert [(r.reason, r.code) for r in res.rejections] == [(ERR_REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)]
    return dict(zip(cache.nodes.names_of(rows), res.passed.tolist()))


NEEDS_RESTART_ALL = make_pod(containers=with_rules(RESTART_ALL))


@pytest.mark.parametrize("pod, nodes, want", [
    pytest.param(make_pod(), [node("a")], "skip", id="a pod that needs nothing is skipped"),
    pytest.param(NEEDS_RESTART_ALL, [node("old"), node("new", RESTART_ALL_CONTAINERS)],
                 {"old": False, "new": True}, id="only nodes declaring the feature fit"),
    pytest.param(NEEDS_RESTART_ALL, [node("a"), node("b", "SomethingElse")], {"a": False, "b": False},
                 id="no node declares it: none fits"),
    pytest.param(make_pod(containers=with_rules(RESTART_ALL), hostNetwork=True, hostUsers=False),
                 [node("one", RESTART_ALL_CONTAINERS), node("both", USER_NAMESPACES_HOST_NETWORK, RESTART_ALL_CONTAINERS)],
                 {"one": False, "both": True}, id="every required feature must be declared"),
])
def test_filter(pod: Any, nodes: list[Any], want: Any) -> None:
    assert verdicts(pod, *nodes) == want


def test_a_node_that_stops_declaring_a_feature_no_longer_fits() -> None:
    cache = Cache()
    cache.add_node(node("a", RESTART_ALL_CONTAINERS))
    cache.update_node(node("a"))
    cache.add_node(node("b", RESTART_ALL_CONTAINERS))
    cache.remove_node("b")
    cache.add_node(node("c"))   # may reuse b's row: it must not inherit b's features
    col = cache.nodes.declares(RESTART_ALL_CONTAINERS)
    assert col is not None and not np.any(col[cache.nodes.rows()])


def test_requeueing_hints() -> None:
    pl = NodeDeclaredFeatures(None, None)
    (on_node, node_hint), (on_pod, pod_hint) = [(c.event, c.hint) for c in pl.events_to_register()]
    assert on_node.matches(ClusterEvent(Resource.NODE, ActionType.ADD))
    assert on_node.matches(ClusterEvent(Resource.NODE, ActionType.UPDATE_NODE_DECLARED_FEATURE))
    assert not on_node.matches(ClusterEvent(Resource.NODE, ActionType.UPDATE_NODE_LABEL))
    pod = NEEDS_RESTART_ALL
    assert node_hint(pod, None, node("a")) == QueueingHint.QUEUE
    assert node_hint(pod, node("a"), node("a", RESTART_ALL_CONTAINERS)) == QueueingHint.QUEUE
    assert node_hint(pod, node("a", "X"), node("a", "X")) == QueueingHint.SKIP
    assert on_pod.matches(ClusterEvent(Resource.UNSCHEDULED_POD, ActionType.UPDATE))
    assert pod_hint(pod, pod, make_pod("p", containers=with_rules(RESTART_ALL))) == QueueingHint.SKIP
    assert pod_hint(pod, pod, make_pod("p")) == QueueingHint.QUEUE
    assert pod_hint(pod, make_pod("other"), make_pod("other", hostNetwork=True, hostUsers=False)) == QueueingHint.SKIP
