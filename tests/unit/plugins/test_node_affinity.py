"""NodeAffinity: nodeSelector, required and preferred node affinity, addedAffinity (plugins/node_affinity.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from plugins.node_affinity import (
    ERR_REASON_CONFLICT, ERR_REASON_ENFORCED, ERR_REASON_POD, NodeAffinity, NodeAffinityArgs,
)
from scheduler.framework import Code, ConfigError, CycleState, QueueingHint, parse_args
from scheduler.model import parse_node, parse_pod
from scheduler.state.cache import Cache


def make_cache(nodes: dict[str, dict[str, str]]) -> Cache:
    cache = Cache()
    for name, labels in nodes.items():
        cache.add_node(parse_node({"metadata": {"name": name, "labels": labels}}))
    return cache


def make_pod(node_selector: dict[str, str] | None = None, required: Any = "absent",
             preferred: list[dict[str, Any]] | None = None) -> Any:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    na: dict[str, Any] = {}
    if required != "absent":
        na["requiredDuringSchedulingIgnoredDuringExecution"] = required
    if preferred is not None:
        na["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    if na:
        spec["affinity"] = {"nodeAffinity": na}
    return parse_pod({"metadata": {"name": "p", "namespace": "default", "uid": "u1"}, "spec": spec})


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


def terms(*ts: dict[str, Any]) -> dict[str, Any]:
    return {"nodeSelectorTerms": list(ts)}


def plugin(added: dict[str, Any] | None = None) -> NodeAffinity:
    args = parse_args(NodeAffinityArgs, {"addedAffinity": added} if added is not None else {}, "args")
    return NodeAffinity(args, None)


def run_filter(pl: NodeAffinity, pod: Any, cache: Cache) -> dict[str, str | None]:
    """Node name -> None (fits) or the reason it was rejected; PreFilter narrowing counts as a rejection."""
    nodes = cache.nodes
    state = CycleState()
    result, st = pl.pre_filter(state, pod, nodes)
    rows = nodes.rows()
    names = nodes.names_of(rows)
    if st.code == Code.SKIP:
        return dict.fromkeys(names)
    assert st.is_success(), st
    res = pl.filter(state, pod, nodes, rows)
    out: dict[str, str | None] = {}
    for i, name in enumerate(names):
        reasons = [r.reason for r in res.rejections if r.mask[i]]
        assert bool(reasons) == (not res.passed[i])
        out[name] = reasons[0] if reasons else None
        if result is not None and result.node_names is not None and name not in result.node_names:
            out[name] = "narrowed by PreFilter"
    return out


NODES = {
    "n1": {"zone": "a", "disk": "ssd", "kernel": "0206", "gpu": ""},
    "n2": {"zone": "b", "disk": "hdd", "kernel": "204"},
    "n3": {"zone": "c", "kernel": "abc"},
    "n4": {},
}

FILTER_CASES = [
    pytest.param({}, None, {"n1", "n2", "n3", "n4"}, id="a pod without selector or affinity fits every node"),
    pytest.param({"node_selector": {"zone": "a", "disk": "ssd"}}, None, {"n1"},
                 id="nodeSelector needs every pair"),
    pytest.param({"node_selector": {"zone": "z"}}, None, set(), id="nodeSelector with a value no node has fits nothing"),
    pytest.param({"node_selector": {"gpu": ""}}, None, {"n1"}, id="nodeSelector matches an empty label value"),
    pytest.param({}, terms({"matchExpressions": [expr("zone", "In", "a", "b")]}), {"n1", "n2"},
                 id="In matches any listed value"),
    pytest.param({}, terms({"matchExpressions": [expr("zone", "In", "x")]}), set(),
                 id="In with values no node has matches nothing"),
    pytest.param({}, terms({"matchExpressions": [expr("zone", "NotIn", "a")]}), {"n2", "n3", "n4"},
                 id="NotIn matches other values and nodes without the key"),
    pytest.param({}, terms({"matchExpressions": [expr("nolabel", "NotIn", "a")]}), {"n1", "n2", "n3", "n4"},
                 id="NotIn on a key no node has matches every node"),
    pytest.param({}, terms({"matchExpressions": [expr("gpu", "Exists")]}), {"n1"},
                 id="Exists matches a key with an empty value"),
    pytest.param({}, terms({"matchExpressions": [expr("disk", "DoesNotExist")]}), {"n3", "n4"},
                 id="DoesNotExist matches nodes without the key"),
    pytest.param({}, terms({"matchExpressions": [expr("kernel", "Gt", "204")]}), {"n1"},
                 id="Gt compares integers and skips non-numeric labels"),
    pytest.param({}, terms({"matchExpressions": [expr("kernel", "Lt", "206")]}), {"n2"},
                 id="Lt reads a leading zero as decimal"),
    pytest.param({}, terms({"matchExpressions": [expr("kernel", "Gt", "0")]}), {"n1", "n2"},
                 id="Gt skips non-numeric and missing labels"),
    pytest.param({}, terms({"matchExpressions": [expr("kernel", "Gt", "-1")]}), set(),
                 id="a negative Gt bound is no valid label value and never matches"),
    pytest.param({}, terms({"matchExpressions": [expr("kernel", "Gt", "two")]}), set(),
                 id="Gt with a non-integer value never matches"),
    pytest.param({}, terms({"matchExpressions": [expr("kernel", "Lt", "1", "300")]}), set(),
                 id="Lt with two values never matches"),
    pytest.param({}, terms({"matchExpressions": [expr("zone", "In")]}), set(),
                 id="In without values never matches"),
    pytest.param({}, terms({"matchExpressions": [expr("zone", "Exists", "a")]}), set(),
                 id="Exists with values never matches"),
    pytest.param({}, terms({"matchExpressions": [expr("zone", "NotIn", "invalid value: ___@#$%^")]}), set(),
                 id="an invalid label value makes the term match nothing"),
    pytest.param({}, terms({"matchExpressions": [expr("zone", "In", "a", "b"), expr("disk", "Exists")]}),
                 {"n1", "n2"}, id="expressions in a term are ANDed"),
    pytest.param({}, terms({"matchExpressions": [expr("zone", "In", "a"), expr("disk", "In", "hdd")]}), set(),
                 id="a term fails when one of its expressions fails"),
    pytest.param({}, terms({"matchExpressions": [expr("zone", "In", "a")]},
                           {"matchExpressions": [expr("zone", "In", "c")]}), {"n1", "n3"},
                 id="terms are ORed"),
    pytest.param({}, terms({"matchExpressions": [expr("kernel", "Gt", "x")]},
                           {"matchExpressions": [expr("zone", "In", "c")]}), {"n3"},
                 id="a term that does not parse leaves the other terms working"),
    pytest.param({}, terms(), set(), id="an empty term list matches nothing"),
    pytest.param({}, {}, set(), id="a required selector without terms matches nothing"),
    pytest.param({}, terms({}), set(), id="a term without expressions matches nothing"),
    pytest.param({}, terms({"matchExpressions": []}, {"matchExpressions": [expr("zone", "In", "b")]}), {"n2"},
                 id="an empty term is skipped while the others still match"),
    pytest.param({"node_selector": {"disk": "ssd"}}, terms({"matchExpressions": [expr("zone", "In", "a", "b")]}),
                 {"n1"}, id="nodeSelector and required affinity must both hold"),
    pytest.param({"node_selector": {"disk": "hdd"}}, terms({"matchExpressions": [expr("zone", "In", "a")]}),
                 set(), id="affinity matching does not help when nodeSelector fails"),
    pytest.param({}, terms({"matchFields": [expr("metadata.name", "In", "n2")]}), {"n2"},
                 id="matchFields metadata.name In picks that node"),
    pytest.param({}, terms({"matchFields": [expr("metadata.name", "NotIn", "n2")]}), {"n1", "n3", "n4"},
                 id="matchFields metadata.name NotIn excludes that node"),
    pytest.param({}, terms({"matchFields": [expr("metadata.name", "In", "n1", "n2")]}), set(),
                 id="matchFields with two values never matches"),
    pytest.param({}, terms({"matchFields": [expr("metadata.name", "In", "n1")],
                            "matchExpressions": [expr("zone", "In", "b")]}), set(),
                 id="matchFields and matchExpressions in one term are ANDed"),
    pytest.param({}, terms({"matchFields": [expr("metadata.name", "In", "n1")]},
                           {"matchExpressions": [expr("zone", "In", "b")]}), {"n1", "n2"},
                 id="a matchFields term ORed with a matchExpressions term"),
]


@pytest.mark.parametrize("selector, required, want", FILTER_CASES)
def test_filter_matches_upstream(selector: dict[str, Any], required: Any, want: set[str]) -> None:
    pod = make_pod(node_selector=selector.get("node_selector"), required="absent" if required is None else required)
    got = run_filter(plugin(), pod, make_cache(NODES))
    assert {n for n, reason in got.items() if reason is None} == want


def test_rejection_reason_and_code_are_upstreams() -> None:
    pod = make_pod(node_selector={"zone": "a"})
    cache = make_cache(NODES)
    pl = plugin()
    state = CycleState()
    pl.pre_filter(state, pod, cache.nodes)
    res = pl.filter(state, pod, cache.nodes, cache.nodes.rows())
    assert [(r.reason, r.code, int(r.mask.sum())) for r in res.rejections] == [
        ("node(s) didn't match Pod's node affinity/selector", Code.UNSCHEDULABLE_AND_UNRESOLVABLE, 3)]


def test_gt_does_not_match_a_label_beyond_int64() -> None:
    cache = make_cache({"big": {"v": str(2**63)}, "max": {"v": str(2**63 - 1)}})
    pod = make_pod(required=terms({"matchExpressions": [expr("v", "Gt", "0")]}))
    assert run_filter(plugin(), pod, cache) == {"big": ERR_REASON_POD, "max": None}


def test_gt_sees_label_values_added_after_the_first_cycle() -> None:
    cache = make_cache({"a": {"v": "1"}})
    pl = plugin()
    pod = make_pod(required=terms({"matchExpressions": [expr("v", "Gt", "5")]}))
    assert run_filter(pl, pod, cache) == {"a": ERR_REASON_POD}
    cache.add_node(parse_node({"metadata": {"name": "b", "labels": {"v": "9"}}}))
    assert run_filter(pl, pod, cache) == {"a": ERR_REASON_POD, "b": None}


def test_filter_without_prefilter_state_computes_it() -> None:
    cache = make_cache(NODES)
    pod = make_pod(node_selector={"zone": "b"})
    res = plugin().filter(CycleState(), pod, cache.nodes, cache.nodes.rows())
    assert cache.nodes.names_of(cache.nodes.rows()[res.passed]) == ["n2"]


# ---------------------------------------------------------------------------- PreFilter

PRE_FILTER_CASES = [
    pytest.param(None, "absent", "skip", id="nothing to check means Skip"),
    pytest.param({"zone": "a"}, "absent", None, id="a nodeSelector alone does not narrow the nodes"),
    pytest.param(None, terms(), None, id="an empty term list does not narrow the nodes"),
    pytest.param(None, terms({"matchFields": [expr("metadata.name", "In", "n1")]}), {"n1"},
                 id="matchFields metadata.name In narrows to that node"),
    pytest.param(None, terms({"matchFields": [expr("metadata.name", "In", "n1", "n2")]}), {"n1", "n2"},
                 id="every listed name is kept even where the term cannot parse"),
    pytest.param(None, terms({"matchFields": [expr("metadata.name", "In", "n1")]},
                             {"matchFields": [expr("metadata.name", "In", "n3")]}), {"n1", "n3"},
                 id="names of ORed terms are united"),
    pytest.param(None, terms({"matchFields": [expr("metadata.name", "In", "n1", "n2"),
                                              expr("metadata.name", "In", "n2", "n3")]}), {"n2"},
                 id="names within one term are intersected"),
    pytest.param(None, terms({"matchFields": [expr("metadata.name", "In", "n1")]},
                             {"matchExpressions": [expr("zone", "In", "b")]}), None,
                 id="a term without a name requirement disables narrowing"),
    pytest.param(None, terms({"matchFields": [expr("metadata.name", "In", "n1")]}, {}), None,
                 id="an empty term disables narrowing"),
    pytest.param(None, terms({"matchFields": [expr("metadata.name", "NotIn", "n1")]}), None,
                 id="NotIn on the name does not narrow"),
    pytest.param(None, terms({"matchFields": [expr("metadata.name", "In", "n1"),
                                              expr("metadata.name", "In", "n2")]}), "conflict",
                 id="conflicting names in every term are unresolvable"),
]


@pytest.mark.parametrize("selector, required, want", PRE_FILTER_CASES)
def test_pre_filter_narrows_to_named_nodes(selector: Any, required: Any, want: Any) -> None:
    pod = make_pod(node_selector=selector, required=required)
    result, st = plugin().pre_filter(CycleState(), pod, make_cache(NODES).nodes)
    if want == "skip":
        assert st.code == Code.SKIP
    elif want == "conflict":
        assert (st.code, st.reasons) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_CONFLICT,))
    else:
        assert st.is_success()
        assert (None if result is None else set(result.node_names)) == want


def test_pre_filter_does_not_skip_when_affinity_is_added() -> None:
    pl = plugin({"requiredDuringSchedulingIgnoredDuringExecution": terms({"matchExpressions": [expr("zone", "Exists")]})})
    _, st = pl.pre_filter(CycleState(), make_pod(), make_cache(NODES).nodes)
    assert st.is_success()


# ---------------------------------------------------------------------------- addedAffinity

def test_added_affinity_rejects_with_the_enforced_reason_first() -> None:
    pl = plugin({"requiredDuringSchedulingIgnoredDuringExecution":
                 terms({"matchExpressions": [expr("zone", "In", "a", "b")]})})
    pod = make_pod(node_selector={"disk": "ssd"})
    assert run_filter(pl, pod, make_cache(NODES)) == {
        "n1": None, "n2": ERR_REASON_POD, "n3": ERR_REASON_ENFORCED, "n4": ERR_REASON_ENFORCED}


def test_added_preferred_terms_add_to_the_pods_own() -> None:
    pl = plugin({"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 3, "preference": {"matchExpressions": [expr("zone", "In", "c")]}}]})
    pod = make_pod(preferred=[{"weight": 1, "preference": {"matchExpressions": [expr("zone", "In", "a")]}}])
    assert scores(pl, pod, make_cache(NODES), normalize=False) == {"n1": 1, "n2": 0, "n3": 3, "n4": 0}


ARGS_ERRORS = [
    pytest.param({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms(
        {"matchExpressions": [expr("zone", "Near", "a")]})}},
        "args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator",
        id="an unknown operator names the expression"),
    pytest.param({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchFields": [expr("metadata.name", "In", "a", "b")]}}]}},
        "args.addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].matchFields[0].values",
        id="matchFields with two values names the values"),
    pytest.param({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms(
        {"matchExpressions": [expr("kernel", "Gt", "x")]})}},
        "args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values[0]",
        id="a non-integer Gt value names the value"),
    pytest.param({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms(
        {"matchExpressions": [expr("bad key!", "Exists")]})}},
        "args.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key",
        id="an invalid label key names the key"),
    pytest.param({"addedAffinity": {"requiredDuringScheduling": {}}}, "args.addedAffinity.requiredDuringScheduling",
                 id="an unknown field is named"),
]


@pytest.mark.parametrize("raw, field", ARGS_ERRORS)
def test_invalid_added_affinity_is_a_config_error(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_args(NodeAffinityArgs, raw, "args")
    assert str(err.value).startswith(field + ":")


def test_zero_weight_added_terms_are_not_validated() -> None:
    parse_args(NodeAffinityArgs, {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 0, "preference": {"matchExpressions": [expr("k", "Bogus")]}}]}}, "args")


# ---------------------------------------------------------------------------- Score

def scores(pl: NodeAffinity, pod: Any, cache: Cache, normalize: bool = True) -> dict[str, int] | str:
    nodes = cache.nodes
    rows = nodes.rows()
    state = CycleState()
    st = pl.pre_score(state, pod, nodes, rows)
    if st.code == Code.SKIP:
        return "skip"
    s = pl.score(state, pod, nodes, rows)
    assert s.dtype == np.int64
    if normalize:
        pl.normalize(state, pod, s)
    return dict(zip(nodes.names_of(rows), s.tolist()))


SCORE_CASES = [
    pytest.param(None, "skip", id="no preferred terms means Skip"),
    pytest.param([{"weight": 5, "preference": {"matchExpressions": [expr("zone", "In", "x")]}}],
                 {"n1": 0, "n2": 0, "n3": 0, "n4": 0}, id="no node matches so every score stays zero"),
    pytest.param([{"weight": 2, "preference": {"matchExpressions": [expr("zone", "In", "a")]}}],
                 {"n1": 100, "n2": 0, "n3": 0, "n4": 0}, id="the only matching node gets the maximum"),
    pytest.param([{"weight": 2, "preference": {"matchExpressions": [expr("zone", "In", "a")]}},
                  {"weight": 3, "preference": {"matchExpressions": [expr("kernel", "Exists")]}},
                  {"weight": 5, "preference": {"matchExpressions": [expr("disk", "In", "hdd")]}}],
                 {"n1": 62, "n2": 100, "n3": 37, "n4": 0}, id="weights of matching terms are summed and scaled by the best"),
    pytest.param([{"weight": 0, "preference": {"matchExpressions": [expr("zone", "In", "a")]}},
                  {"weight": 4, "preference": {"matchExpressions": [expr("zone", "In", "b")]}}],
                 {"n1": 0, "n2": 100, "n3": 0, "n4": 0}, id="a zero weight term never scores"),
    pytest.param([{"weight": 4, "preference": {}},
                  {"weight": 1, "preference": {"matchFields": [expr("metadata.name", "In", "n3")]}}],
                 {"n1": 0, "n2": 0, "n3": 100, "n4": 0}, id="an empty preference never scores and matchFields does"),
    pytest.param([{"weight": 7, "preference": {"matchExpressions": [expr("kernel", "Lt", "x")]}},
                  {"weight": 1, "preference": {"matchExpressions": [expr("kernel", "Lt", "300")]}}],
                 {"n1": 100, "n2": 100, "n3": 0, "n4": 0}, id="an unparsable term never scores"),
]


@pytest.mark.parametrize("preferred, want", SCORE_CASES)
def test_score_sums_preferred_weights(preferred: Any, want: Any) -> None:
    assert scores(plugin(), make_pod(preferred=preferred), make_cache(NODES)) == want


def test_normalize_keeps_ratios_with_integer_division() -> None:
    s = np.array([0, 1, 3, 7], dtype=np.int64)
    plugin().normalize(CycleState(), make_pod(), s)
    assert s.tolist() == [0, 14, 42, 100]


# ---------------------------------------------------------------------------- queueing

def node(name: str, **labels: str) -> Any:
    return parse_node({"metadata": {"name": name, "labels": labels}})


HINT_CASES = [
    pytest.param(None, node("x", zone="a"), QueueingHint.QUEUE, id="an added node that matches queues the pod"),
    pytest.param(None, node("x", zone="b"), QueueingHint.SKIP, id="an added node that does not match is skipped"),
    pytest.param(node("x", zone="b"), node("x", zone="a"), QueueingHint.QUEUE,
                 id="an update that makes the node match queues the pod"),
    pytest.param(node("x", zone="a"), node("x", zone="a", extra="1"), QueueingHint.SKIP,
                 id="an update of a node that matched already is skipped"),
]


@pytest.mark.parametrize("old, new, want", HINT_CASES)
def test_node_change_hint(old: Any, new: Any, want: int) -> None:
    pl = plugin()
    (ev,) = pl.events_to_register()
    assert ev.hint(make_pod(node_selector={"zone": "a"}), old, new) == want


def test_hint_skips_nodes_outside_the_added_affinity() -> None:
    pl = plugin({"requiredDuringSchedulingIgnoredDuringExecution": terms({"matchExpressions": [expr("zone", "In", "b")]})})
    (ev,) = pl.events_to_register()
    assert ev.hint(make_pod(), None, node("x", zone="a")) == QueueingHint.SKIP


def test_normalize_truncates_negative_added_weights_toward_zero_as_go() -> None:
    s = np.array([-1, 0, 7], dtype=np.int64)
    plugin().normalize(CycleState(), make_pod(), s)
    assert s.tolist() == [-14, 0, 100]
