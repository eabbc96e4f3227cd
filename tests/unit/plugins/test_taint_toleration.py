"""TaintToleration: untolerated NoSchedule/NoExecute taints filter, PreferNoSchedule taints score (plugins/taint_toleration.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from plugins.taint_toleration import TaintToleration
from scheduler.framework import ActionType, Code, CycleState, QueueingHint, Resource
from scheduler.model import parse_node, parse_pod
from scheduler.state.cache import Cache


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


def tol(key: str = "", op: str = "Equal", value: str = "", effect: str = "") -> dict[str, str]:
    t = {"key": key, "operator": op, "effect": effect}
    if value:
        t["value"] = value
    return t


def make_node(name: str, taints: list[dict[str, str]]) -> Any:
    return parse_node({"metadata": {"name": name}, "spec": {"taints": taints}})


def make_cache(nodes: dict[str, list[dict[str, str]]]) -> Cache:
    cache = Cache()
    for name, taints in nodes.items():
        cache.add_node(make_node(name, taints))
    return cache


def make_pod(tolerations: list[dict[str, str]], uid: str = "u1") -> Any:
    return parse_pod({"metadata": {"name": "p", "namespace": "default", "uid": uid},
                      "spec": {"containers": [{"name": "c", "image": "busybox"}], "tolerations": tolerations}})


def run_filter(cache: Cache, pod: Any) -> dict[str, str | None]:
    nodes = cache.nodes
    rows = nodes.rows()
    res = TaintToleration(None, None).filter(CycleState(), pod, nodes, rows)
    out: dict[str, str | None] = {}
    for i, name in enumerate(nodes.names_of(rows)):
        reasons = [r.reason for r in res.rejections if r.mask[i]]
        assert len(reasons) == (0 if res.passed[i] else 1)
        assert all(r.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE for r in res.rejections)
        out[name] = reasons[0] if reasons else None
    return out


FILTER_CASES = [
    pytest.param([], [], None, id="a node without taints fits a pod without tolerations"),
    pytest.param([taint("dedicated", "gpu")], [], "node(s) had untolerated taint(s)",
                 id="an untolerated NoSchedule taint rejects with upstream's reason"),
    pytest.param([taint("dedicated", "gpu", "NoExecute")], [], "node(s) had untolerated taint(s)",
                 id="an untolerated NoExecute taint rejects too"),
    pytest.param([taint("dedicated", "gpu", "PreferNoSchedule")], [], None,
                 id="a PreferNoSchedule taint never rejects"),
    pytest.param([taint("dedicated", "gpu")], [tol("dedicated", "Equal", "gpu", "NoSchedule")], None,
                 id="Equal with the same key value and effect tolerates"),
    pytest.param([taint("dedicated", "gpu")], [tol("dedicated", "Equal", "cpu", "NoSchedule")],
                 "node(s) had untolerated taint(s)", id="Equal with another value does not tolerate"),
    pytest.param([taint("dedicated", "gpu")], [tol("dedicated", "", "gpu")], None,
                 id="an empty operator means Equal"),
    pytest.param([taint("dedicated", "gpu")], [tol("dedicated", "Exists", effect="NoSchedule")], None,
                 id="Exists tolerates any value of the key"),
    pytest.param([taint("dedicated", "gpu")], [tol("other", "Exists")],
                 "node(s) had untolerated taint(s)", id="Exists on another key does not tolerate"),
    pytest.param([taint("a", "1"), taint("b", "2", "NoExecute")], [tol("", "Exists")], None,
                 id="an empty key with Exists tolerates every taint"),
    pytest.param([taint("dedicated", "gpu", "NoExecute")], [tol("dedicated", "Equal", "gpu")], None,
                 id="an empty effect tolerates every effect"),
    pytest.param([taint("dedicated", "gpu", "NoExecute")], [tol("dedicated", "Equal", "gpu", "NoSchedule")],
                 "node(s) had untolerated taint(s)", id="a NoSchedule toleration does not cover NoExecute"),
    pytest.param([taint("dedicated")], [tol("", "Equal")], None,
                 id="an empty key with Equal matches any key whose value is empty, as upstream's matcher does"),
    pytest.param([taint("a", "1"), taint("b", "2")], [tol("a", "Exists")], "node(s) had untolerated taint(s)",
                 id="the reason names the taint left untolerated"),
    pytest.param([taint("z", "1", "PreferNoSchedule"), taint("b", "2"), taint("a", "3")], [],
                 "node(s) had untolerated taint(s)",
                 id="the reason names no taint, whichever is untolerated"),
]


@pytest.mark.parametrize("taints, tolerations, want", FILTER_CASES)
def test_filter_matches_upstream(taints: list[dict[str, str]], tolerations: list[dict[str, str]],
                                 want: str | None) -> None:
    assert run_filter(make_cache({"n": taints}), make_pod(tolerations)) == {"n": want}


def test_nodes_with_different_untolerated_taints_share_one_reason_that_names_no_taint() -> None:
    cache = make_cache({
        "n1": [taint("a", "1"), taint("b", "2")],
        "n2": [taint("b", "2"), taint("a", "1")],   # same taints, other order: first one differs
        "n3": [taint("b", "2")],
        "n4": [taint("c", "3", "PreferNoSchedule")],
        "n5": [taint("a", "1", "NoExecute")],      # another taint that reads the same
    })
    nodes = cache.nodes
    res = TaintToleration(None, None).filter(CycleState(), make_pod([]), nodes, nodes.rows())
    names = np.array(nodes.names_of(nodes.rows()))
    got = {r.reason: sorted(names[r.mask].tolist()) for r in res.rejections}
    assert got == {"node(s) had untolerated taint(s)": ["n1", "n2", "n3", "n5"]}, "kube-scheduler 1.36's words"
    assert names[res.passed].tolist() == ["n4"]


def test_a_taint_removed_from_a_node_no_longer_rejects() -> None:
    cache = make_cache({"n": [taint("a", "1")]})
    pl = TaintToleration(None, None)
    pod = make_pod([])
    assert not pl.filter(CycleState(), pod, cache.nodes, cache.nodes.rows()).passed.any()
    cache.update_node(make_node("n", []))
    assert pl.filter(CycleState(), pod, cache.nodes, cache.nodes.rows()).passed.all()


def scores(cache: Cache, pod: Any) -> dict[str, int]:
    nodes = cache.nodes
    rows = nodes.rows()
    pl = TaintToleration(None, None)
    state = CycleState()
    assert pl.pre_score(state, pod, nodes, rows).is_success()
    s = pl.score(state, pod, nodes, rows)
    pl.normalize(state, pod, s)
    return dict(zip(nodes.names_of(rows), s.tolist()))


PREFER = "PreferNoSchedule"
SCORE_CASES = [
    pytest.param({"n1": [], "n2": [taint("a", "1", PREFER)], "n3": [taint("a", "1", PREFER), taint("b", "2", PREFER)]},
                 [], {"n1": 100, "n2": 50, "n3": 0}, id="fewer intolerable PreferNoSchedule taints score higher"),
    pytest.param({"n1": [taint("a", "1", PREFER)], "n2": [taint("b", "2", PREFER)]},
                 [tol("a", "Equal", "1", PREFER)], {"n1": 100, "n2": 0},
                 id="a PreferNoSchedule toleration removes the penalty"),
    pytest.param({"n1": [taint("a", "1", PREFER)], "n2": []},
                 [tol("a", "Exists")], {"n1": 100, "n2": 100}, id="a toleration without effect covers PreferNoSchedule"),
    pytest.param({"n1": [taint("a", "1", PREFER)], "n2": []},
                 [tol("a", "Exists", effect="NoSchedule")], {"n1": 0, "n2": 100},
                 id="a NoSchedule toleration does not cover PreferNoSchedule"),
    pytest.param({"n1": [taint("a", "1")], "n2": [taint("b", "2", "NoExecute")]},
                 [], {"n1": 100, "n2": 100}, id="only PreferNoSchedule taints count"),
    pytest.param({"n1": [taint("a", "1", PREFER)] + [taint(f"k{i}", "", PREFER) for i in range(2)], "n2": [],
                  "n3": [taint("a", "1", PREFER)]},
                 [], {"n1": 0, "n2": 100, "n3": 67}, id="the reversal uses integer division of the best count"),
]


@pytest.mark.parametrize("nodes, tolerations, want", SCORE_CASES)
def test_score_counts_intolerable_prefer_no_schedule_taints(nodes: dict[str, Any], tolerations: list[dict[str, str]],
                                                           want: dict[str, int]) -> None:
    assert scores(make_cache(nodes), make_pod(tolerations)) == want


def test_score_uses_memoized_tolerations_as_the_cluster_gains_taints() -> None:
    cache = make_cache({"n1": [taint("a", "1", PREFER)]})
    pl = TaintToleration(None, None)
    pod = make_pod([tol("a", "Exists")])
    rows = cache.nodes.rows()
    assert pl.score(CycleState(), pod, cache.nodes, rows).tolist() == [0]
    cache.add_node(make_node("n2", [taint("b", "2", PREFER)]))
    rows = cache.nodes.rows()
    assert pl.score(CycleState(), pod, cache.nodes, rows).tolist() == [0, 1]


def test_events_are_node_add_or_taint_update_and_pod_toleration_update() -> None:
    evs = TaintToleration(None, None).events_to_register()
    assert [(e.event.resource, e.event.action) for e in evs] == [
        (Resource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
        (Resource.POD, ActionType.UPDATE_POD_TOLERATION)]


HINT_CASES = [
    pytest.param(None, [], QueueingHint.QUEUE, id="an added node without taints queues the pod"),
    pytest.param(None, [taint("a", "1")], QueueingHint.SKIP, id="an added node with an untolerated taint is skipped"),
    pytest.param([taint("a", "1")], [], QueueingHint.QUEUE, id="removing the untolerated taint queues the pod"),
    pytest.param([], [taint("c", "1", PREFER)], QueueingHint.SKIP, id="a node that was fine already is skipped"),
]


@pytest.mark.parametrize("old, new, want", HINT_CASES)
def test_node_change_hint(old: Any, new: Any, want: int) -> None:
    node_ev = TaintToleration(None, None).events_to_register()[0]
    old_node = None if old is None else make_node("n", old)
    assert node_ev.hint(make_pod([]), old_node, make_node("n", new)) == want


def test_toleration_hint_queues_only_the_pod_itself() -> None:
    pod_ev = TaintToleration(None, None).events_to_register()[1]
    pod = make_pod([])
    assert pod_ev.hint(pod, pod, make_pod([tol("a", "Exists")])) == QueueingHint.QUEUE
    assert pod_ev.hint(pod, None, make_pod([tol("a", "Exists")], uid="other")) == QueueingHint.SKIP


def test_many_distinct_taints_take_the_two_dimensional_path() -> None:
    # more offending taint columns than the per-column path handles: the 2-D gather path
    many = [taint(f"k{i:02d}", str(i)) for i in range(40)]
    cache = make_cache({"fwd": many, "rev": many[::-1], "none": []})
    assert run_filter(cache, make_pod([])) == {
        "fwd": "node(s) had untolerated taint(s)", "rev": "node(s) had untolerated taint(s)", "none": None}
    prefer = {"all": [taint(f"p{i:02d}", "", PREFER) for i in range(40)], "half": [taint(f"p{i:02d}", "", PREFER)
                                                                                for i in range(20)]}
    assert scores(make_cache(prefer), make_pod([])) == {"all": 0, "half": 50}


def test_taints_survive_the_table_growing() -> None:
    from scheduler.framework.nodetable import NodeTable
    cache = Cache()
    cache.nodes = NodeTable(capacity=2)
    for i in range(5):
        cache.add_node(make_node(f"n{i}", [taint("b", "2"), taint("a", "1")]))
    assert set(run_filter(cache, make_pod([])).values()) == {"node(s) had untolerated taint(s)"}
