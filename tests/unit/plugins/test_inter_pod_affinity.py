"""InterPodAffinity: required and preferred pod (anti-)affinity, both ways (plugins/inter_pod_affinity.py).

The tables are upstream's own cases (filtering_test.go, scoring_test.go, plugin_test.go), with upstream's
empty default namespace spelt "default" and topology keys that the API requires to be non-empty. A
hypothesis test holds Filter and Score to a plain per-node walk over the placed pods, written here the
way upstream's PreFilter and PreScore walk them, on the raw pod specs.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter, defaultdict
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plugins.inter_pod_affinity import (
    ERR_REASON_AFFINITY, ERR_REASON_ANTI_AFFINITY, ERR_REASON_EXISTING_ANTI_AFFINITY, PRE_FILTER_KEY, PRE_SCORE_KEY,
    InterPodAffinity, InterPodAffinityArgs,
)
from scheduler.config import load_config
from scheduler.framework import ActionType, Code, ConfigError, CycleState, Handle, QueueingHint, Resource, parse_args
from scheduler.framework.clock import FakeClock
from scheduler.framework.runtime import Framework
from scheduler.model import Pod, parse_node, parse_pod
from scheduler.state.cache import Cache

AFF, ANTI, EXIST = ERR_REASON_AFFINITY, ERR_REASON_ANTI_AFFINITY, ERR_REASON_EXISTING_ANTI_AFFINITY
CODES = {AFF: Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ANTI: Code.UNSCHEDULABLE, EXIST: Code.UNSCHEDULABLE}

T1, T2 = {"team": "team1"}, {"team": "team2"}
NAMESPACES = {"default": {}, "ns": {}, "NS1": {}, "NS2": {}, "subteam1.team1": T1, "subteam2.team1": T1,
              "subteam1.team2": T2, "subteam2.team2": T2}
_MISSING: Any = object()
_uids = itertools.count()


# ---------------------------------------------------------------------------- building pods and clusters

def In(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


def NotIn(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "NotIn", "values": list(values)}


def Exists(key: str) -> dict[str, Any]:
    return {"key": key, "operator": "Exists"}


def DoesNotExist(key: str) -> dict[str, Any]:
    return {"key": key, "operator": "DoesNotExist"}


def term(topology_key: str, *exprs: dict[str, Any], labels: dict[str, str] | None = None,
         namespaces: list[str] | None = None, ns_selector: Any = _MISSING,
         match_label_keys: list[str] | None = None, mismatch_label_keys: list[str] | None = None) -> dict[str, Any]:
    """A PodAffinityTerm; ``ns_selector`` None is an explicit null, a dict a selector (``{}``: all namespaces)."""
    sel: dict[str, Any] = {}
    if exprs:
        sel["matchExpressions"] = list(exprs)
    if labels is not None:
        sel["matchLabels"] = labels
    t: dict[str, Any] = {"labelSelector": sel, "topologyKey": topology_key}
    if namespaces is not None:
        t["namespaces"] = namespaces
    if ns_selector is not _MISSING:
        t["namespaceSelector"] = ns_selector
    if match_label_keys is not None:
        t["matchLabelKeys"] = match_label_keys
    if mismatch_label_keys is not None:
        t["mismatchLabelKeys"] = mismatch_label_keys
    return t


def weighted(weight: int, t: dict[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": t}


def affinity_spec(affinity: Any = (), anti: Any = (), preferred: Any = (), preferred_anti: Any = ()) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, required, preferred_ in (("podAffinity", affinity, preferred), ("podAntiAffinity", anti, preferred_anti)):
        block = {}
        if required:
            block["requiredDuringSchedulingIgnoredDuringExecution"] = list(required)
        if preferred_:
            block["preferredDuringSchedulingIgnoredDuringExecution"] = list(preferred_)
        if block:
            out[kind] = block
    return out


def make_pod(name: str = "p", ns: str = "default", labels: dict[str, str] | None = None, node: str = "",
             affinity: Any = (), anti: Any = (), preferred: Any = (), preferred_anti: Any = (),
             spec_affinity: dict[str, Any] | None = None, scheduler: str = "tandem-scheduler") -> Pod:
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [{"name": "c", "image": "pause"}]}
    if node:
        spec["nodeName"] = node
    aff = spec_affinity if spec_affinity is not None else affinity_spec(affinity, anti, preferred, preferred_anti)
    if aff:
        spec["affinity"] = aff
    pod = parse_pod({"metadata": {"name": name, "namespace": ns, "uid": f"{name}-{next(_uids)}",
                                  "labels": labels or {}}, "spec": spec})
    assert not pod.invalid, pod.invalid
    return pod


def make_cache(nodes: dict[str, dict[str, str]], placed: Any = ()) -> Cache:
    cache = Cache()
    for name, labels in NAMESPACES.items():
        cache.set_namespace(name, labels)
    for name, labels in nodes.items():
        cache.add_node(parse_node({"metadata": {"name": name, "labels": labels}}))
    for p in placed:
        cache.add_pod(p)
    return cache


def plugin(cache: Cache, **args: Any) -> InterPodAffinity:
    return InterPodAffinity(parse_args(InterPodAffinityArgs, args, "args"), Handle(cache, clock=FakeClock()))


def run_filter(pl: InterPodAffinity, pod: Pod, cache: Cache) -> dict[str, str | None] | str:
    """Node name -> None (fits) or the reason it is rejected; "skip" when PreFilter skips."""
    state = CycleState()
    result, st = pl.pre_filter(state, pod, cache.nodes)
    if st.code == Code.SKIP:
        return "skip"
    assert st.is_success() and result is None, st
    return filter_with(pl, state, pod, cache)


def filter_with(pl: InterPodAffinity, state: CycleState, pod: Pod, cache: Cache) -> dict[str, str | None]:
    """Node name -> None (fits) or the reason it is rejected, by Filter over every node with ``state``."""
    nodes = cache.nodes
    rows = nodes.rows()
    res = pl.filter(state, pod, nodes, rows)
    out: dict[str, str | None] = {}
    for i, name in enumerate(nodes.names_of(rows)):
        reasons = [r for r in res.rejections if r.mask[i]]
        assert len(reasons) <= 1 and bool(reasons) == (not res.passed[i])   # one reason per node: the first
        out[name] = reasons[0].reason if reasons else None
        if reasons:
            assert reasons[0].code == CODES[reasons[0].reason]
    return out


def run_score(pl: InterPodAffinity, pod: Pod, cache: Cache) -> dict[str, int] | str:
    """Node name -> normalized score; "skip" when PreScore skips."""
    nodes = cache.nodes
    rows = nodes.rows()
    state = CycleState()
    if pl.pre_score(state, pod, nodes, rows).code == Code.SKIP:
        return "skip"
    s = pl.score(state, pod, nodes, rows)
    assert s.dtype == np.int64
    pl.normalize(state, pod, s)
    return dict(zip(nodes.names_of(rows), s.tolist()))


# ---------------------------------------------------------------------------- Filter: one node
# (upstream's TestRequiredAffinitySingleNode)

POD_LABEL = {"service": "securityscan"}
POD_LABEL2 = {"security": "S1"}
NODE1 = {"node1": {"region": "r1", "zone": "z11"}}
SCANNER = make_pod("scanner", labels=POD_LABEL, node="node1")
AFFINITY_SCAN = term("region", In("service", "securityscan", "value2"))
ANTI_ANTIVIRUS = term("node", In("service", "antivirusscan", "value2"))
SCAN_IN_ZONE = term("zone", In("service", "securityscan", "value2"))
NOT_SCAN_IN_ZONE = term("zone", NotIn("service", "securityscan", "value2"))

SINGLE_NODE_CASES = [
    pytest.param(make_pod(), [], "skip",
                 id="a pod without required terms skips PreFilter when no placed pod's anti-affinity matches it"),
    pytest.param(make_pod(labels=POD_LABEL2, affinity=[AFFINITY_SCAN]), [SCANNER], None,
                 id="required affinity with In matching the existing pod is satisfied"),
    pytest.param(make_pod(labels=POD_LABEL2, affinity=[term("region", NotIn("service", "securityscan3", "value3"))]),
                 [SCANNER], None, id="required affinity with NotIn matching the existing pod is satisfied"),
    pytest.param(make_pod(labels=POD_LABEL2, affinity=[term("region", In("service", "securityscan", "value2"),
                                                            namespaces=["DiffNameSpace"])]),
                 [make_pod(ns="ns", labels=POD_LABEL, node="node1")], AFF,
                 id="required affinity is not satisfied by a matching pod in another namespace"),
    pytest.param(make_pod(labels=POD_LABEL, affinity=[term("region", In("service", "antivirusscan", "value2"))]),
                 [SCANNER], AFF, id="required affinity whose selector no existing pod matches fails"),
    pytest.param(make_pod(labels=POD_LABEL2, affinity=[
        term("region", Exists("service"), DoesNotExist("wrongkey")),
        term("region", In("service", "securityscan"), NotIn("service", "WrongValue"))]), [SCANNER], None,
        id="several required affinity terms with different operators are all satisfied by one pod"),
    pytest.param(make_pod(labels=POD_LABEL2, affinity=[
        term("region", Exists("service"), DoesNotExist("wrongkey")),
        term("region", In("service", "securityscan2"), NotIn("service", "WrongValue"))]), [SCANNER], AFF,
        id="the expressions of a selector are ANDed so one unmatched expression fails the term"),
    pytest.param(make_pod(labels=POD_LABEL2, affinity=[AFFINITY_SCAN], anti=[ANTI_ANTIVIRUS]), [SCANNER], None,
                 id="required affinity and anti-affinity are both satisfied"),
    pytest.param(make_pod(labels=POD_LABEL2, affinity=[AFFINITY_SCAN], anti=[ANTI_ANTIVIRUS]),
                 [make_pod(labels=POD_LABEL, node="node1", anti=[ANTI_ANTIVIRUS])], None,
                 id="required affinity, anti-affinity and the existing pod's anti-affinity are all satisfied"),
    pytest.param(make_pod(labels=POD_LABEL2, affinity=[AFFINITY_SCAN],
                          anti=[term("zone", In("service", "securityscan", "value2"))]), [SCANNER], ANTI,
                 id="required affinity is satisfied but anti-affinity is not"),
    pytest.param(make_pod(labels=POD_LABEL, affinity=[AFFINITY_SCAN], anti=[ANTI_ANTIVIRUS]),
                 [make_pod(labels=POD_LABEL, node="node1", anti=[SCAN_IN_ZONE])],
                 EXIST, id="the pod's own terms are satisfied but the existing pod's anti-affinity is not"),
    pytest.param(make_pod(labels=POD_LABEL, affinity=[term("region", NotIn("service", "securityscan", "value2"))]),
                 [make_pod(labels=POD_LABEL, node="node2")], AFF,
                 id="a pod not matching its own affinity fails when no pod on a node matches it"),
    pytest.param(make_pod(labels=POD_LABEL),
                 [make_pod(labels=POD_LABEL, node="node1", anti=[SCAN_IN_ZONE])],
                 EXIST, id="an existing pod's anti-affinity applies to a pod without any affinity"),
    pytest.param(make_pod(labels=POD_LABEL),
                 [make_pod(labels=POD_LABEL, node="node1", anti=[NOT_SCAN_IN_ZONE])],
                 "skip", id="an existing pod's anti-affinity that does not match the pod lets PreFilter skip"),
    pytest.param(make_pod(labels=POD_LABEL,
                          anti=[term("region", Exists("service")), term("region", Exists("security"))]),
                 [make_pod(labels=POD_LABEL2, node="node1", anti=[term("zone", Exists("security"))])], ANTI,
                 id="the pod's anti-affinity is checked before the existing pod's"),
    pytest.param(make_pod(labels=POD_LABEL, anti=[term("zone", Exists("service")), term("zone", Exists("security"))]),
                 [make_pod(labels=POD_LABEL2, node="node1", anti=[term("zone", Exists("security"))])], ANTI,
                 id="symmetry a1: the pod's anti-affinity matches the existing pod"),
    pytest.param(make_pod(labels=POD_LABEL2, anti=[term("zone", Exists("security"))]),
                 [make_pod(labels=POD_LABEL, node="node1", anti=[term("zone", Exists("service")),
                                                                 term("zone", Exists("security"))])], EXIST,
                 id="symmetry a2: only the existing pod's anti-affinity matches"),
    pytest.param(make_pod(labels={"abc": "", "xyz": ""},
                          anti=[term("zone", Exists("abc")), term("zone", Exists("def"))]),
                 [make_pod(labels={"def": "", "xyz": ""}, node="node1",
                           anti=[term("zone", Exists("abc")), term("zone", Exists("def"))])], ANTI,
                 id="symmetry b1: both match each other partially and the pod's own terms fail first"),
    pytest.param(make_pod(labels={"def": "", "xyz": ""},
                          anti=[term("zone", Exists("abc")), term("zone", Exists("def"))]),
                 [make_pod(labels={"abc": "", "xyz": ""}, node="node1",
                           anti=[term("zone", Exists("abc")), term("zone", Exists("def"))])], ANTI,
                 id="symmetry b2: both match each other partially and the pod's own terms fail first"),
    pytest.param(make_pod(labels=POD_LABEL2, affinity=[term("region", In("service", "securityscan", "value2"),
                                                            ns_selector={"matchLabels": T1})]),
                 [make_pod(ns="subteam1.team1", labels=POD_LABEL, node="node1")], None,
                 id="a namespaceSelector selects the existing pod's namespace by its labels"),
    pytest.param(make_pod(labels=POD_LABEL2, affinity=[term("region", In("service", "securityscan", "value2"),
                                                            ns_selector={"matchLabels": T1})]),
                 [make_pod(ns="subteam1.team2", labels=POD_LABEL, node="node1")], AFF,
                 id="a namespaceSelector that does not select the existing pod's namespace"),
    pytest.param(make_pod(ns="subteam1.team1", labels=POD_LABEL2,
                          anti=[term("zone", In("service", "securityscan", "value2"),
                                     ns_selector={"matchLabels": T1})]),
                 [make_pod(ns="subteam2.team1", labels=POD_LABEL, node="node1")], ANTI,
                 id="anti-affinity with a namespaceSelector matching another namespace"),
    pytest.param(make_pod(ns="subteam1.team1", labels=POD_LABEL2,
                          anti=[term("zone", In("service", "securityscan", "value2"), ns_selector={})]),
                 [make_pod(ns="subteam2.team1", labels=POD_LABEL, node="node1")], ANTI,
                 id="anti-affinity with an empty namespaceSelector matches every namespace"),
    pytest.param(make_pod(ns="subteam1.team1", labels=POD_LABEL2,
                          anti=[term("zone", In("service", "securityscan", "value2"),
                                     ns_selector={"matchLabels": T1})]),
                 [make_pod(ns="subteam1.team2", labels=POD_LABEL, node="node1")], None,
                 id="anti-affinity with a namespaceSelector not selecting the existing pod's namespace"),
    pytest.param(make_pod(ns="subteam1.team1", labels=POD_LABEL2,
                          anti=[term("zone", In("service", "securityscan"), ns_selector={"matchLabels": T2})]),
                 [make_pod(ns="subteam1.team1", labels=POD_LABEL, node="node1")], None,
                 id="a non-empty namespaceSelector replaces the pod's own namespace"),
]


@pytest.mark.parametrize("pod, placed, want", SINGLE_NODE_CASES)
def test_filter_on_one_node_matches_upstream(pod: Pod, placed: list[Pod], want: Any) -> None:
    cache = make_cache(NODE1, placed)
    got = run_filter(plugin(cache), pod, cache)
    assert got == (want if want == "skip" else {"node1": want})


# ---------------------------------------------------------------------------- Filter: several nodes
# (upstream's TestRequiredAffinityMultipleNodes)

CHINA, CHINA_AZ1, INDIA = {"region": "China"}, {"region": "China", "az": "az1"}, {"region": "India"}
R1Z1 = {"region": "r1", "zone": "z1"}
R1Z2 = {"region": "r1", "zone": "z2"}

MULTI_NODE_CASES = [
    pytest.param(make_pod(affinity=[term("region", In("foo", "bar"))]), [make_pod(node="node1", labels={"foo": "bar"})],
                 {"node1": CHINA, "node2": CHINA_AZ1, "node3": INDIA}, [None, None, AFF],
                 id="every node in the domain of a matching pod passes required affinity"),
    pytest.param(make_pod(labels={"foo": "bar", "service": "securityscan"},
                          affinity=[term("zone", In("foo", "bar")), term("zone", In("service", "securityscan"))]),
                 [make_pod(node="nodeA", labels={"foo": "bar"})],
                 {"nodeA": {"zone": "az1", "hostname": "h1"}, "nodeB": {"zone": "az2", "hostname": "h2"}}, [None, None],
                 id="the first pod of a group with affinity to itself may go anywhere"),
    pytest.param(make_pod(labels={"foo": "bar", "service": "securityscan"},
                          affinity=[term("zone", In("foo", "bar")), term("zone", In("service", "securityscan"))]),
                 [make_pod(node="nodeA", labels={"foo": "bar"})],
                 {"nodeA": {"zoneLabel": "az1", "hostname": "h1"}, "nodeB": {"zoneLabel": "az2", "hostname": "h2"}},
                 [AFF, AFF], id="the first pod of a group still needs nodes carrying the topology keys"),
    pytest.param(make_pod(anti=[term("region", In("foo", "abc"))]), [make_pod(node="nodeA", labels={"foo": "abc"})],
                 {"nodeA": {"region": "r1", "hostname": "nodeA"}, "nodeB": {"region": "r1", "hostname": "nodeB"}},
                 [ANTI, ANTI], id="anti-affinity rejects every node in the domain of a matching pod"),
    pytest.param(make_pod(anti=[term("region", In("foo", "abc")), term("zone", In("service", "securityscan"))]),
                 [make_pod(node="nodeA", labels={"foo": "abc", "service": "securityscan"})],
                 {"nodeA": {**R1Z1, "hostname": "nodeA"}, "nodeB": {**R1Z2, "hostname": "nodeB"}}, [ANTI, ANTI],
                 id="anti-affinity rejects a node when any of its terms matches"),
    pytest.param(make_pod(anti=[term("region", In("foo", "abc"))]), [make_pod(node="nodeA", labels={"foo": "abc"})],
                 {"nodeA": CHINA, "nodeB": CHINA_AZ1, "nodeC": INDIA}, [ANTI, ANTI, None],
                 id="anti-affinity leaves the nodes of other domains"),
    pytest.param(make_pod(ns="NS1", labels={"foo": "123"}, anti=[term("region", In("foo", "bar"))]),
                 [make_pod(node="nodeA", ns="NS1", labels={"foo": "bar"}),
                  make_pod(node="nodeC", ns="NS2", anti=[term("region", In("foo", "123"))])],
                 {"nodeA": CHINA, "nodeB": CHINA_AZ1, "nodeC": INDIA}, [ANTI, ANTI, None],
                 id="an existing pod's anti-affinity covers its own namespace only"),
    pytest.param(make_pod(labels={"foo": ""}),
                 [make_pod(node="nodeA", anti=[term("invalid-node-label", Exists("foo"))])],
                 {"nodeA": {**R1Z1, "hostname": "nodeA"}, "nodeB": {**R1Z1, "hostname": "nodeB"}}, "skip",
                 id="an existing pod's anti-affinity on a key no node carries lets PreFilter skip"),
    pytest.param(make_pod(anti=[term("invalid-node-label", Exists("foo"))]),
                 [make_pod(node="nodeA", labels={"foo": ""})],
                 {"nodeA": {**R1Z1, "hostname": "nodeA"}, "nodeB": {**R1Z1, "hostname": "nodeB"}}, [None, None],
                 id="anti-affinity on a key no node carries rejects nothing"),
    pytest.param(make_pod(labels={"foo": "", "bar": ""}),
                 [make_pod(node="nodeA", anti=[term("zone", Exists("foo"))]),
                  make_pod(node="nodeA", anti=[term("region", Exists("bar"))])],
                 {"nodeA": {**R1Z1, "hostname": "nodeA"}, "nodeB": {**R1Z2, "hostname": "nodeB"}}, [EXIST, EXIST],
                 id="each existing pod's anti-affinity rejects its own domain"),
    pytest.param(make_pod(anti=[term("zone", Exists("foo")), term("region", Exists("bar"))]),
                 [make_pod(node="nodeA", labels={"foo": ""}), make_pod(node="nodeB", labels={"bar": ""})],
                 {"nodeA": {**R1Z1, "hostname": "nodeA"}, "nodeB": {**R1Z2, "hostname": "nodeB"}}, [ANTI, ANTI],
                 id="each anti-affinity term rejects the domain of the pods it matches"),
    pytest.param(make_pod(labels={"foo": "", "bar": ""}),
                 [make_pod(node="nodeA",
                           anti=[term("invalid-node-label", Exists("foo")), term("zone", Exists("bar"))])],
                 {"nodeA": {**R1Z1, "hostname": "nodeA"}, "nodeB": {**R1Z2, "hostname": "nodeB"}}, [EXIST, None],
                 id="an existing pod's term counts only where both its selector and its key match"),
    pytest.param(make_pod(anti=[term("invalid-node-label", Exists("foo")), term("zone", Exists("bar"))]),
                 [make_pod(node="nodeA", labels={"foo": "", "bar": ""})],
                 {"nodeA": {**R1Z1, "hostname": "nodeA"}, "nodeB": {**R1Z2, "hostname": "nodeB"}}, [ANTI, None],
                 id="the pod's term counts only where both its selector and its key match"),
    pytest.param(make_pod(labels={"foo": "", "bar": ""}),
                 [make_pod(node="nodeA", anti=[term("region", Exists("foo")), term("zone", Exists("bar"))])],
                 {"nodeA": {**R1Z1, "hostname": "nodeA"}, "nodeB": {**R1Z2, "hostname": "nodeB"}}, [EXIST, EXIST],
                 id="an existing pod's region term rejects the whole region"),
    pytest.param(make_pod(anti=[term("region", Exists("foo")), term("zone", Exists("bar"))]),
                 [make_pod(node="nodeA", labels={"foo": "", "bar": ""})],
                 {"nodeA": {**R1Z1, "hostname": "nodeA"}, "nodeB": {**R1Z2, "hostname": "nodeB"}}, [ANTI, ANTI],
                 id="the pod's region term rejects the whole region"),
    pytest.param(make_pod(labels={"foo": "", "bar": ""}),
                 [make_pod(node="nodeA", anti=[term("zone", Exists("foo")), term("zone", Exists("labelA"))]),
                  make_pod(node="nodeB", anti=[term("zone", Exists("bar")), term("zone", Exists("labelB"))])],
                 {"nodeA": {**R1Z1, "hostname": "nodeA"}, "nodeB": {**R1Z2, "hostname": "nodeB"},
                  "nodeC": {"region": "r1", "zone": "z3", "hostname": "nodeC"}}, [EXIST, EXIST, None],
                 id="existing pods with one matching anti-affinity term each leave only the third zone"),
    pytest.param(make_pod(affinity=[term("region", Exists("foo")), term("zone", Exists("bar"))]),
                 [make_pod(node="nodeA", labels={"foo": "", "bar": ""})],
                 {"nodeA": {**R1Z1, "hostname": "nodeA"}, "nodeB": {**R1Z1, "hostname": "nodeB"}}, [None, None],
                 id="one pod matching every affinity term satisfies each term in its own domain"),
    pytest.param(make_pod(affinity=[term("region", Exists("foo")), term("zone", Exists("bar"))]),
                 [make_pod(node="nodeA", labels={"foo": ""}), make_pod(node="nodeB", labels={"bar": ""})],
                 {"nodeA": {**R1Z1, "hostname": "nodeA"}, "nodeB": {**R1Z2, "hostname": "nodeB"}}, [AFF, AFF],
                 id="two pods each matching one affinity term do not make one that matches both"),
    # beyond upstream's tables
    pytest.param(make_pod(labels={"app": "web", "rev": "2"}, anti=[term("hostname", labels={"app": "web"},
                                                                        match_label_keys=["rev"])]),
                 [make_pod(node="a", labels={"app": "web", "rev": "1"}),
                  make_pod(node="b", labels={"app": "web", "rev": "2"})],
                 {"a": {"hostname": "a"}, "b": {"hostname": "b"}}, [None, ANTI],
                 id="matchLabelKeys narrows anti-affinity to pods with the pod's own value"),
    pytest.param(make_pod(labels={"tenant": "t1"},
                          affinity=[term("zone", Exists("app"), mismatch_label_keys=["tenant"])]),
                 [make_pod(node="a", labels={"app": "x", "tenant": "t1"}),
                  make_pod(node="c", labels={"app": "x", "tenant": "t2"})],
                 {"a": {"zone": "z1"}, "b": {"zone": "z1"}, "c": {"zone": "z2"}}, [AFF, AFF, None],
                 id="mismatchLabelKeys keeps affinity away from pods with the pod's own value"),
    pytest.param(make_pod(anti=[term("zone", Exists("app"))]),
                 [make_pod(node="a", labels={"app": "x"}, scheduler="default-scheduler")],
                 {"a": {"zone": "z1"}, "b": {"zone": "z2"}}, [ANTI, None],
                 id="pods placed by other schedulers count"),
    pytest.param(make_pod(affinity=[term("zone", Exists("app"))]), [make_pod(node="gone", labels={"app": "x"})],
                 {"a": {"zone": "z1"}}, [AFF],
                 id="a pod on a node that is no longer there counts in no domain"),
]


@pytest.mark.parametrize("pod, placed, nodes, want", MULTI_NODE_CASES)
def test_filter_on_several_nodes_matches_upstream(pod: Pod, placed: list[Pod], nodes: dict[str, Any],
                                                  want: Any) -> None:
    cache = make_cache(nodes, placed)
    got = run_filter(plugin(cache), pod, cache)
    assert got == (want if want == "skip" else dict(zip(nodes, want)))


def test_assumed_pods_count_and_forgetting_them_undoes_it() -> None:
    cache = make_cache({"a": {"zone": "z1"}, "b": {"zone": "z2"}})
    pl = plugin(cache)
    pod = make_pod(labels={"app": "x"}, anti=[term("zone", Exists("app"))])
    sibling = make_pod("sibling", labels={"app": "x"})
    cache.assume(sibling, "a")
    assert run_filter(pl, pod, cache) == {"a": ANTI, "b": None}
    cache.forget(sibling)
    assert run_filter(pl, pod, cache) == {"a": None, "b": None}


def test_filter_without_prefilter_state_works_it_out() -> None:
    cache = make_cache({"a": {"zone": "z1"}, "b": {"zone": "z2"}}, [make_pod(node="a", labels={"app": "x"})])
    pod = make_pod(anti=[term("zone", Exists("app"))])
    res = plugin(cache).filter(CycleState(), pod, cache.nodes, cache.nodes.rows())
    assert res.passed.tolist() == [False, True]
    no_terms = plugin(cache).filter(CycleState(), make_pod(), cache.nodes, cache.nodes.rows())
    assert no_terms.passed.all() and not no_terms.rejections


def test_filter_answers_for_the_rows_it_is_given() -> None:
    cache = make_cache({"a": {"zone": "z1"}, "b": {"zone": "z2"}, "c": {"zone": "z1"}},
                       [make_pod(node="a", labels={"app": "x"})])
    pl = plugin(cache)
    pod = make_pod(anti=[term("zone", Exists("app"))])
    state = CycleState()
    pl.pre_filter(state, pod, cache.nodes)
    rows = np.array([cache.nodes.row("c"), cache.nodes.row("b")], dtype=np.int64)
    res = pl.filter(state, pod, cache.nodes, rows)
    assert res.passed.tolist() == [False, True]
    assert res.rejections[0].mask.tolist() == [True, False]


# ---------------------------------------------------------------------------- AddPod / RemovePod
# (upstream's TestPreFilterStateAddRemovePod, and what preemption's dry runs rely on)

def counts_of(pl: InterPodAffinity, state: CycleState, pod: Pod, cache: Cache) -> dict[str, dict[tuple[str, str], int]]:
    """The counts behind ``state``'s masks by (topology key, value), without the zeros (upstream's maps)."""
    c = pl._counts_of(state.read(PRE_FILTER_KEY), pod, cache.nodes)

    def named(domains: Any) -> dict[tuple[str, str], int]:
        return {(key, cache.nodes.label_values(key)[v]): int(n) for key, per in domains for v, n in enumerate(per) if n}
    return {"affinity": named(c.affinity), "anti": named(c.anti), "existing": named(c.existing)}


def fresh_counts(pl: InterPodAffinity, pod: Pod, cache: Cache) -> dict[str, dict[tuple[str, str], int]] | None:
    """The counts of a PreFilter run now; None when it skips."""
    state = CycleState()
    if pl.pre_filter(state, pod, cache.nodes)[1].code == Code.SKIP:
        return None
    return counts_of(pl, state, pod, cache)


def all_pass(cache: Cache) -> dict[str, str | None]:
    return dict.fromkeys(cache.nodes.names_of(cache.nodes.rows()))


def prefiltered(pl: InterPodAffinity, pod: Pod, cache: Cache) -> CycleState:
    state = CycleState()
    _, st = pl.pre_filter(state, pod, cache.nodes)
    assert st.is_success(), st
    return state


UP_LABEL1, UP_LABEL2, UP_LABEL3 = {"region": "r1", "zone": "z11"}, {"region": "r1", "zone": "z12"}, \
    {"region": "r2", "zone": "z21"}
UP_NODES = {"nodeA": UP_LABEL1, "nodeB": UP_LABEL2, "nodeC": UP_LABEL3}
FOO_BAR = {"foo": "bar"}
ANTI_FOO_BAR = [term("region", In("foo", "bar"))]
COMPLEX = [term("region", In("foo", "bar", "buzz")), term("zone", NotIn("service", "bar", "security", "test"))]


@pytest.mark.parametrize("pending, existing, added, want_anti, want_affinity", [
    pytest.param(make_pod("pending", labels=FOO_BAR, anti=ANTI_FOO_BAR),
                 [make_pod("p1", labels=FOO_BAR, node="nodeA"), make_pod("p2", node="nodeC", anti=ANTI_FOO_BAR)],
                 make_pod("addedPod", labels=FOO_BAR, node="nodeB", anti=ANTI_FOO_BAR),
                 {("region", "r1"): 2}, {},
                 id="preFilterState anti-affinity terms are updated correctly after adding and removing a pod"),
    pytest.param(make_pod("pending", labels=FOO_BAR, anti=COMPLEX),
                 [make_pod("p1", labels=FOO_BAR, node="nodeA"), make_pod("p2", node="nodeC", anti=ANTI_FOO_BAR)],
                 make_pod("addedPod", labels=FOO_BAR, node="nodeA", anti=COMPLEX),
                 {("region", "r1"): 2, ("zone", "z11"): 2, ("zone", "z21"): 1}, {},
                 id="preFilterState anti-affinity terms of several keys are updated correctly after adding and "
                    "removing a pod"),
    pytest.param(make_pod("pending", labels=FOO_BAR, affinity=COMPLEX),
                 [make_pod("p1", labels=FOO_BAR, node="nodeA"),
                  make_pod("p2", node="nodeC", anti=ANTI_FOO_BAR, affinity=COMPLEX)],
                 make_pod("addedPod", labels=FOO_BAR, node="nodeA", anti=COMPLEX),
                 {}, {("region", "r1"): 2, ("zone", "z11"): 2},
                 id="preFilterState matching pod affinity and anti-affinity are updated correctly after adding and "
                    "removing a pod"),
])
def test_add_pod_then_remove_pod_move_the_counts_as_prefilter_would(pending: Pod, existing: list[Pod], added: Pod,
                                                                    want_anti: Any, want_affinity: Any) -> None:
    cache = make_cache(UP_NODES, existing)
    pl = plugin(cache)
    state = prefiltered(pl, pending, cache)
    before = counts_of(pl, state, pending, cache)
    assert pl.add_pod(state, pending, added, cache.nodes.row(added.node_name)).is_success()
    got = counts_of(pl, state, pending, cache)
    assert (got["anti"], got["affinity"]) == (want_anti, want_affinity)
    cache.add_pod(added)
    assert got == fresh_counts(pl, pending, cache)
    assert filter_with(pl, state, pending, cache) == run_filter(pl, pending, cache)
    assert pl.remove_pod(state, pending, added, cache.nodes.row(added.node_name)).is_success()
    assert counts_of(pl, state, pending, cache) == before


WEB = {"app": "web"}
ZONES = {"a": {"zone": "z1", "hostname": "a"}, "b": {"zone": "z1", "hostname": "b"},
         "c": {"zone": "z2", "hostname": "c"}, "d": {"hostname": "d"}}
AWAY_FROM_WEB_ON_HOST = [term("hostname", labels=WEB)]
AWAY_FROM_WEB_IN_ZONE = [term("zone", labels=WEB)]
WITH_WEB_IN_ZONE = [term("zone", labels=WEB)]
VICTIM = make_pod("victim", labels=WEB, node="a")
NOMINATED = make_pod("nominated", labels=WEB, node="c")

# pod, placed pods, "add" or "remove", the pod added or removed (on its nodeName), verdicts before, after (a b c d)
EXTENSION_CASES = [
    pytest.param(make_pod(anti=AWAY_FROM_WEB_ON_HOST), [VICTIM], "remove", VICTIM,
                 [ANTI, None, None, None], [None, None, None, None],
                 id="preemption removing the only anti-affinity match on a node frees the node"),
    pytest.param(make_pod(anti=AWAY_FROM_WEB_IN_ZONE), [VICTIM, NOMINATED], "remove", NOMINATED,
                 [ANTI, ANTI, ANTI, None], [ANTI, ANTI, None, None],
                 id="removing a pod in another zone does not help"),
    pytest.param(make_pod(anti=AWAY_FROM_WEB_IN_ZONE), [VICTIM, make_pod("web-b", labels=WEB, node="b")], "remove",
                 VICTIM, [ANTI, ANTI, None, None], [ANTI, ANTI, None, None],
                 id="removing one of two matches in a zone leaves the zone rejected"),
    pytest.param(make_pod(labels={"app": "db"}),
                 [make_pod("holder", node="a", anti=[term("zone", labels={"app": "db"})])], "remove",
                 None, [EXIST, EXIST, None, None], [None, None, None, None],
                 id="removing a placed pod whose anti-affinity matches the pod frees its zone"),
    pytest.param(make_pod(anti=AWAY_FROM_WEB_IN_ZONE), [VICTIM], "add", NOMINATED,
                 [ANTI, ANTI, None, None], [ANTI, ANTI, ANTI, None],
                 id="adding a nominated pod the anti-affinity matches rejects its zone"),
    pytest.param(make_pod(anti=AWAY_FROM_WEB_IN_ZONE), [], "add", make_pod("nominated", labels=WEB, node="d"),
                 [None, None, None, None], [None, None, None, None],
                 id="a pod added to a node without the topology key counts in no zone"),
    pytest.param(make_pod(anti=AWAY_FROM_WEB_IN_ZONE), [], "add", make_pod("nominated", ns="ns", labels=WEB, node="a"),
                 [None, None, None, None], [None, None, None, None],
                 id="a pod added in another namespace does not count for a term of the pod's own"),
    pytest.param(make_pod(labels={"app": "db"}, anti=[term("hostname", labels={"app": "none"})]), [], "add",
                 make_pod("nominated", node="b", anti=[term("zone", labels={"app": "db"})]),
                 [None, None, None, None], [EXIST, EXIST, None, None],
                 id="an added pod whose anti-affinity matches the pod rejects its zone"),
    pytest.param(make_pod(labels=WEB, affinity=WITH_WEB_IN_ZONE), [], "add", NOMINATED,
                 [None, None, None, AFF], [AFF, AFF, None, AFF],
                 id="adding a pod matching the affinity ends the first-pod rule"),
    pytest.param(make_pod(labels=WEB, affinity=WITH_WEB_IN_ZONE), [VICTIM], "remove", VICTIM,
                 [None, None, AFF, AFF], [None, None, None, AFF],
                 id="removing the last pod matching the affinity lets the first pod go to any zone"),
    pytest.param(make_pod(affinity=WITH_WEB_IN_ZONE), [VICTIM], "remove", VICTIM,
                 [None, None, AFF, AFF], [AFF, AFF, AFF, AFF],
                 id="removing the last match of a pod that does not match its own affinity leaves it nowhere"),
]


@pytest.mark.parametrize("pod, placed_pods, op, other, before, after", EXTENSION_CASES)
def test_add_pod_and_remove_pod(pod: Pod, placed_pods: list[Pod], op: str, other: Pod | None, before: list[Any],
                                after: list[Any]) -> None:
    cache = make_cache(ZONES, placed_pods)
    other = other if other is not None else placed_pods[0]
    pl = plugin(cache)
    state = prefiltered(pl, pod, cache)
    assert filter_with(pl, state, pod, cache) == dict(zip(ZONES, before))
    row = cache.nodes.row(other.node_name)
    st = pl.add_pod(state, pod, other, row) if op == "add" else pl.remove_pod(state, pod, other, row)
    assert st.is_success()
    assert filter_with(pl, state, pod, cache) == dict(zip(ZONES, after))
    if op == "add":                 # what a PreFilter with the pod in the cache says
        cache.add_pod(other)
    else:
        cache.remove_pod(other)
    fresh = run_filter(pl, pod, cache)
    assert (all_pass(cache) if fresh == "skip" else fresh) == dict(zip(ZONES, after))


def test_add_pod_on_a_clone_leaves_the_original_state_alone() -> None:
    cache = make_cache(ZONES, [VICTIM])
    pl = plugin(cache)
    pod = make_pod(labels=WEB, anti=AWAY_FROM_WEB_IN_ZONE, affinity=WITH_WEB_IN_ZONE)
    state = prefiltered(pl, pod, cache)
    before = filter_with(pl, state, pod, cache)
    removed, added = state.clone(), state.clone()
    assert pl.remove_pod(removed, pod, VICTIM, cache.nodes.row("a")).is_success()
    assert pl.add_pod(added, pod, NOMINATED, cache.nodes.row("c")).is_success()
    assert filter_with(pl, removed, pod, cache) == {"a": None, "b": None, "c": None, "d": AFF}   # the first pod again
    assert filter_with(pl, added, pod, cache) == {"a": ANTI, "b": ANTI, "c": ANTI, "d": AFF}
    assert filter_with(pl, state, pod, cache) == before == {"a": ANTI, "b": ANTI, "c": AFF, "d": AFF}


def test_prefilter_keeps_no_counts_and_the_first_update_keeps_them_for_every_clone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cache = make_cache(ZONES, [VICTIM])
    pl = plugin(cache)
    pod = make_pod(anti=AWAY_FROM_WEB_IN_ZONE)
    state = prefiltered(pl, pod, cache)
    assert state.read(PRE_FILTER_KEY).counts == []
    worked_out = []
    count = pl._count
    monkeypatch.setattr(pl, "_count", lambda *args: worked_out.append(1) or count(*args))
    first, second = state.clone(), state.clone()
    assert pl.remove_pod(first, pod, VICTIM, cache.nodes.row("a")).is_success()
    assert pl.add_pod(second, pod, NOMINATED, cache.nodes.row("c")).is_success()
    assert worked_out == [1]
    assert len(state.read(PRE_FILTER_KEY).counts) == 1
    assert filter_with(pl, first, pod, cache) == {"a": None, "b": None, "c": None, "d": None}
    assert filter_with(pl, second, pod, cache) == {"a": ANTI, "b": ANTI, "c": ANTI, "d": None}


def test_add_pod_without_prefilter_state_is_an_error() -> None:
    cache = make_cache(ZONES)
    st = plugin(cache).add_pod(CycleState(), make_pod(anti=AWAY_FROM_WEB_IN_ZONE), NOMINATED, cache.nodes.row("c"))
    assert st.code == Code.ERROR and "PreFilterInterPodAffinity" in st.message()


# ---------------------------------------------------------------------------- Score (TestPreferredAffinity)

S1, S2 = {"security": "S1"}, {"security": "S2"}
AZ1, AZ2 = {"az": "az1"}, {"az": "az2"}
STAY_WITH_S1_IN_REGION = affinity_spec(preferred=[weighted(5, term("region", In("security", "S1")))])
STAY_WITH_S2_IN_REGION = affinity_spec(preferred=[weighted(6, term("region", In("security", "S2")))])
AFFINITY3 = affinity_spec(preferred=[weighted(8, term("region", NotIn("security", "S1"), In("security", "S2"))),
                                     weighted(2, term("region", Exists("security"), DoesNotExist("wrongkey")))])
HARD_AFFINITY = affinity_spec(affinity=[term("region", In("security", "S1", "value2")),
                                        term("region", Exists("security"), DoesNotExist("wrongkey"))])
AWAY_FROM_S1_IN_AZ = affinity_spec(preferred_anti=[weighted(5, term("az", In("security", "S1")))])
AWAY_FROM_S2_IN_AZ = affinity_spec(preferred_anti=[weighted(5, term("az", In("security", "S2")))])
WITH_S1_AWAY_FROM_S2 = affinity_spec(preferred=[weighted(8, term("region", In("security", "S1")))],
                                     preferred_anti=[weighted(5, term("az", In("security", "S2")))])
NS_SELECTOR_TERM = term("region", In("security", "S1"), namespaces=["subteam2.team2"], ns_selector={"matchLabels": T1})
AFFINITY_NS_SELECTOR = affinity_spec(preferred=[weighted(5, NS_SELECTOR_TERM)])
ANTI_AFFINITY_NS_SELECTOR = affinity_spec(preferred_anti=[weighted(5, NS_SELECTOR_TERM)])


def placed(node: str, labels: dict[str, str] | None = None, spec: dict[str, Any] | None = None,
           ns: str = "default") -> Pod:
    return make_pod("e", ns=ns, labels=labels, node=node, spec_affinity=spec)


def spread_over_namespaces(third: str) -> list[Pod]:
    """S1 pods: two of subteam1.team1 and one of ``third`` on node1, one of subteam2.team1 on node2."""
    return [placed("node1", S1, ns="subteam1.team1"), placed("node1", S1, ns="subteam1.team1"),
            placed("node1", S1, ns=third), placed("node2", S1, ns="subteam2.team1")]


SCORE_CASES = [
    pytest.param(make_pod(labels=S1), [], {"node1": CHINA, "node2": INDIA, "node3": AZ1}, "skip", {},
                 id="without any affinity PreScore skips"),
    pytest.param(make_pod(labels=S1, spec_affinity=STAY_WITH_S1_IN_REGION),
                 [placed("node1", S1), placed("node2", S2), placed("node3", S1)],
                 {"node1": CHINA, "node2": INDIA, "node3": AZ1}, [100, 0, 0], {},
                 id="a node in the domain of a matching pod scores highest and one without the key scores nothing"),
    pytest.param(make_pod(spec_affinity=STAY_WITH_S1_IN_REGION), [placed("node1", S1)],
                 {"node1": CHINA, "node2": CHINA_AZ1, "node3": INDIA}, [100, 100, 0], {},
                 id="every node in the domain of a matching pod scores the same"),
    pytest.param(make_pod(labels=S1, spec_affinity=STAY_WITH_S2_IN_REGION),
                 [placed("node1", S2), placed("node1", S2), placed("node2", S2), placed("node3", S2),
                  placed("node4", S2), placed("node5", S2)],
                 {"node1": CHINA, "node2": INDIA, "node3": CHINA, "node4": CHINA, "node5": INDIA},
                 [100, 0, 100, 100, 0], {}, id="the domain with more matching pods scores higher"),
    pytest.param(make_pod(labels=S1, spec_affinity=AFFINITY3),
                 [placed("node1", S1), placed("node2", S2), placed("node3", S1)],
                 {"node1": CHINA, "node2": INDIA, "node3": AZ1}, [20, 100, 0], {},
                 id="weights of several preferred terms with different operators add up"),
    pytest.param(make_pod(labels=S2),
                 [placed("node1", S1, STAY_WITH_S1_IN_REGION), placed("node2", S2, STAY_WITH_S2_IN_REGION)],
                 {"node1": CHINA, "node2": INDIA, "node3": AZ1}, [0, 100, 0], {},
                 id="an existing pod's preferred affinity matching the pod draws it to its domain"),
    pytest.param(make_pod(ns="subteam1.team1", labels=S1),
                 [placed("node1", S1, AFFINITY_NS_SELECTOR), placed("node2", S2, STAY_WITH_S2_IN_REGION)],
                 {"node1": CHINA, "node2": INDIA, "node3": AZ1}, [100, 0, 0], {},
                 id="an existing pod's preferred affinity selects the pod's namespace by its labels"),
    pytest.param(make_pod(ns="subteam1.team1", labels=S1),
                 [placed("node1", S1, ANTI_AFFINITY_NS_SELECTOR), placed("node2", S2, STAY_WITH_S2_IN_REGION)],
                 {"node1": CHINA, "node2": INDIA, "node3": AZ1}, [0, 100, 100], {},
                 id="an existing pod's preferred anti-affinity selects the pod's namespace by its labels"),
    pytest.param(make_pod(labels=S1), [placed("node1", S1, HARD_AFFINITY), placed("node2", S2, HARD_AFFINITY)],
                 {"node1": CHINA, "node2": INDIA, "node3": AZ1}, [100, 100, 0], {},
                 id="an existing pod's required affinity matching the pod scores with the hard weight"),
    pytest.param(make_pod(labels=S1, spec_affinity=AWAY_FROM_S1_IN_AZ), [placed("node1", S1), placed("node2", S2)],
                 {"node1": AZ1, "node2": CHINA}, [0, 100], {},
                 id="preferred anti-affinity scores the domain of a matching pod lowest"),
    pytest.param(make_pod(labels=S1, spec_affinity=AWAY_FROM_S1_IN_AZ), [placed("node1", S1), placed("node2", S1)],
                 {"node1": AZ1, "node2": CHINA}, [0, 100], {},
                 id="preferred anti-affinity ignores matching pods on nodes without the key"),
    pytest.param(make_pod(labels=S1, spec_affinity=AWAY_FROM_S1_IN_AZ),
                 [placed("node1", S1), placed("node1", S1), placed("node2", S2)],
                 {"node1": AZ1, "node2": INDIA}, [0, 100], {},
                 id="preferred anti-affinity scores more matching pods lower"),
    pytest.param(make_pod(labels=S2),
                 [placed("node1", S1, AWAY_FROM_S2_IN_AZ), placed("node2", S2, AWAY_FROM_S1_IN_AZ)],
                 {"node1": AZ1, "node2": AZ2}, [0, 100], {},
                 id="an existing pod's preferred anti-affinity matching the pod pushes it away"),
    pytest.param(make_pod(labels=S1, spec_affinity=WITH_S1_AWAY_FROM_S2), [placed("node1", S1), placed("node2", S1)],
                 {"node1": CHINA, "node2": AZ1}, [100, 0], {},
                 id="preferred affinity and anti-affinity together"),
    pytest.param(make_pod(labels=S1, spec_affinity=WITH_S1_AWAY_FROM_S2),
                 [placed("node1", S1), placed("node1", S1), placed("node2", S1), placed("node3", S1),
                  placed("node3", S1), placed("node4", S1), placed("node5", S1)],
                 {"node1": CHINA_AZ1, "node2": INDIA, "node3": CHINA, "node4": CHINA, "node5": INDIA},
                 [100, 0, 100, 100, 0], {}, id="pods of one service prefer one region"),
    pytest.param(make_pod(labels=S1, spec_affinity=WITH_S1_AWAY_FROM_S2),
                 [placed("node1", S1), placed("node2", S2), placed("node3", None, WITH_S1_AWAY_FROM_S2),
                  placed("node4", None, AWAY_FROM_S1_IN_AZ)],
                 {"node1": CHINA, "node2": AZ1, "node3": INDIA, "node4": AZ2}, [100, 0, 100, 0], {},
                 id="the pod's terms and existing pods' terms add up"),
    pytest.param(make_pod(labels=S1), [placed("node1", S1), placed("node2", None, WITH_S1_AWAY_FROM_S2)],
                 {"node1": CHINA, "node2": CHINA}, [0, 0], {},
                 id="one domain only: every node scores zero"),
    pytest.param(make_pod(ns="subteam1.team1", labels=S1, spec_affinity=AFFINITY_NS_SELECTOR),
                 spread_over_namespaces("subteam1.team2"),
                 {"node1": CHINA, "node2": INDIA}, [100, 0], {},
                 id="preferred affinity counts pods in namespaces its namespaceSelector selects"),
    pytest.param(make_pod(ns="subteam1.team1", labels=S1, spec_affinity=AFFINITY_NS_SELECTOR),
                 spread_over_namespaces("subteam2.team2"),
                 {"node1": CHINA, "node2": INDIA}, [100, 0], {},
                 id="preferred affinity counts pods in its namespaces and the ones its namespaceSelector selects"),
    pytest.param(make_pod(ns="subteam1.team1", labels=S1, spec_affinity=ANTI_AFFINITY_NS_SELECTOR),
                 spread_over_namespaces("subteam1.team2"),
                 {"node1": CHINA, "node2": INDIA}, [0, 100], {},
                 id="preferred anti-affinity counts pods in namespaces its namespaceSelector selects"),
    pytest.param(make_pod(ns="subteam1.team1", labels=S1, spec_affinity=ANTI_AFFINITY_NS_SELECTOR),
                 spread_over_namespaces("subteam2.team2"),
                 {"node1": CHINA, "node2": INDIA}, [0, 100], {},
                 id="preferred anti-affinity counts pods in its namespaces and the ones its namespaceSelector selects"),
    pytest.param(make_pod(labels=S2),
                 [placed("node1", S1, WITH_S1_AWAY_FROM_S2), placed("node2", S2, STAY_WITH_S2_IN_REGION)],
                 {"node1": CHINA, "node2": INDIA}, "skip", {"ignorePreferredTermsOfExistingPods": True},
                 id="ignorePreferredTermsOfExistingPods skips a pod without preferred terms"),
    pytest.param(make_pod(labels=S2),
                 [placed("node1", S1, WITH_S1_AWAY_FROM_S2), placed("node2", S2, STAY_WITH_S2_IN_REGION)],
                 {"node1": CHINA, "node2": INDIA}, [0, 100], {"ignorePreferredTermsOfExistingPods": False},
                 id="existing pods' preferred terms count by default"),
    pytest.param(make_pod(labels=S2), [], {}, "skip", {}, id="no nodes to score means Skip"),
]


@pytest.mark.parametrize("pod, placed_pods, nodes, want, args", SCORE_CASES)
def test_score_matches_upstream(pod: Pod, placed_pods: list[Pod], nodes: dict[str, Any], want: Any,
                                args: dict[str, Any]) -> None:
    cache = make_cache(nodes, placed_pods)
    got = run_score(plugin(cache, **args), pod, cache)
    assert got == (want if want == "skip" else dict(zip(nodes, want)))


HARD_POD_AFFINITY = affinity_spec(affinity=[term("region", In("service", "S1"),
                                                 namespaces=["default", "subteam2.team2"],
                                                 ns_selector={"matchLabels": T1})])
HARD_NODES = {"node1": CHINA, "node2": INDIA, "node3": AZ1}


@pytest.mark.parametrize("ns, weight, want", [
    pytest.param("default", 1, [100, 100, 0], id="with the default weight"),
    pytest.param("default", 0, "skip", id="a zero weight ignores existing pods' required affinity"),
    pytest.param("subteam1.team2", 1, "skip", id="in a namespace the term does not select"),
    pytest.param("subteam1.team1", 1, [100, 100, 0], id="in a namespace the namespaceSelector selects"),
    pytest.param("subteam2.team2", 1, [100, 100, 0], id="in a namespace the term names"),
])
def test_existing_pods_required_affinity_scores_with_hard_pod_affinity_weight(ns: str, weight: int, want: Any) -> None:
    cache = make_cache(HARD_NODES, [placed("node1", None, HARD_POD_AFFINITY), placed("node2", None, HARD_POD_AFFINITY)])
    got = run_score(plugin(cache, hardPodAffinityWeight=weight), make_pod(ns=ns, labels={"service": "S1"}), cache)
    assert got == (want if want == "skip" else dict(zip(HARD_NODES, want)))


def test_raw_scores_sum_the_weights_of_every_domain_a_node_is_in() -> None:
    cache = make_cache({"a": {"region": "r1", "zone": "z1"}, "b": {"region": "r1", "zone": "z2"}, "c": {"zone": "z1"}},
                       [placed("a", {"app": "x"}), placed("b", {"app": "y"})])
    pod = make_pod(preferred=[weighted(3, term("region", Exists("app"))), weighted(10, term("zone", In("app", "x")))],
                   preferred_anti=[weighted(4, term("zone", In("app", "y")))])
    pl = plugin(cache)
    state = CycleState()
    rows = cache.nodes.rows()
    assert pl.pre_score(state, pod, cache.nodes, rows).is_success()
    # a: region r1 (2 pods x 3) + zone z1 (x: 10); b: region r1 (6) + zone z2 (y: -4); c: zone z1 (10)
    assert pl.score(state, pod, cache.nodes, rows).tolist() == [16, 2, 10]


def test_normalize_divides_before_multiplying_as_upstream() -> None:
    cache = make_cache({"a": {"zone": "z"}}, [placed("a", {"app": "x"})])
    pl = plugin(cache)
    pod = make_pod(preferred=[weighted(1, term("zone", Exists("app")))])
    state = CycleState()
    assert pl.pre_score(state, pod, cache.nodes, cache.nodes.rows()).is_success()
    s = np.array([0, 29, 100, -50], dtype=np.int64)
    pl.normalize(state, pod, s)
    # float64(100) * (float64(79) / 150) truncates to 52; 29 - (-50) = 79; 0 - (-50) = 50 -> 33
    assert s.tolist() == [33, 52, 100, 0]
    s = np.array([0, 29, 100], dtype=np.int64)
    pl.normalize(state, pod, s)
    assert s.tolist() == [0, 28, 100]       # 100 * (29 / 100) is 28.999999999999996 in float64
    s = np.array([7, 7], dtype=np.int64)
    pl.normalize(state, pod, s)
    assert s.tolist() == [0, 0]


def test_normalize_leaves_scores_alone_without_a_topology_score() -> None:
    cache = make_cache({"a": {"zone": "z"}})
    s = np.array([3, 5], dtype=np.int64)
    plugin(cache).normalize(CycleState(), make_pod(), s)
    assert s.tolist() == [3, 5]


def test_score_without_prescore_state_works_it_out() -> None:
    cache = make_cache({"a": {"zone": "z1"}, "b": {"zone": "z2"}}, [placed("a", {"app": "x"})])
    pod = make_pod(preferred=[weighted(4, term("zone", Exists("app")))])
    assert plugin(cache).score(CycleState(), pod, cache.nodes, cache.nodes.rows()).tolist() == [4, 0]
    assert PRE_SCORE_KEY == "PreScoreInterPodAffinity"


# ---------------------------------------------------------------------------- args and registration

def test_args_default_to_upstreams() -> None:
    args = parse_args(InterPodAffinityArgs, None, "args")
    assert (args.hard_pod_affinity_weight, args.ignore_preferred_terms_of_existing_pods) == (1, False)
    raw = {"hardPodAffinityWeight": 0, "ignorePreferredTermsOfExistingPods": True}
    args = parse_args(InterPodAffinityArgs, raw, "args")
    assert (args.hard_pod_affinity_weight, args.ignore_preferred_terms_of_existing_pods) == (0, True)


@pytest.mark.parametrize("raw, message", [
    pytest.param({"hardPodAffinityWeight": 101},
                 "args.hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]",
                 id="a hard weight above 100 is refused"),
    pytest.param({"hardPodAffinityWeight": -1},
                 "args.hardPodAffinityWeight: Invalid value: -1: not in valid range [0, 100]",
                 id="a negative hard weight is refused"),
    pytest.param({"hardPodAffinityWeight": "1"}, "args.hardPodAffinityWeight: expected an integer",
                 id="a hard weight that is no integer is refused"),
    pytest.param({"ignorePreferredTermsOfExistingPods": 1},
                 "args.ignorePreferredTermsOfExistingPods: expected true or false",
                 id="ignorePreferredTermsOfExistingPods must be a boolean"),
    pytest.param({"hardPodAffinityWieght": 1}, "args.hardPodAffinityWieght: unknown field",
                 id="a misspelt field is refused"),
])
def test_invalid_args_name_the_field(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_args(InterPodAffinityArgs, raw, "args")
    assert str(e.value).startswith(message)


def test_the_default_profile_runs_it_with_upstreams_weight_between_the_filters_and_balanced_allocation() -> None:
    (profile,) = load_config(None).profiles
    assert profile.weights["InterPodAffinity"] == 2
    for point in ("preFilter", "filter", "preScore", "score"):
        assert "InterPodAffinity" in profile.plugins[point], point
    score = profile.plugins["score"]
    assert (score.index("NodeResourcesFit") < score.index("InterPodAffinity")
            < score.index("NodeResourcesBalancedAllocation"))


# ---------------------------------------------------------------------------- queueing hints (plugin_test.go)

SCAN_AFFINITY = [term("region", In("service", "securityscan", "value2"))]


def on_node(labels: dict[str, str] | None = None, uid: str = "other", **kw: Any) -> Pod:
    return make_pod(uid, labels=labels, node="fake-node", **kw)


def unscheduled(labels: dict[str, str] | None = None, **kw: Any) -> Pod:
    return make_pod("other", labels=labels, **kw)


POD_HINT_CASES = [
    pytest.param(make_pod(affinity=SCAN_AFFINITY), None, on_node(POD_LABEL), QueueingHint.QUEUE,
                 id="an added pod matching the pod's affinity queues it"),
    pytest.param(make_pod(affinity=SCAN_AFFINITY), None, unscheduled(POD_LABEL), QueueingHint.SKIP,
                 id="an added pod without a node is skipped"),
    pytest.param(make_pod(affinity=SCAN_AFFINITY), None, on_node({"aaa": "a"}), QueueingHint.SKIP,
                 id="an added pod not matching the pod's affinity is skipped"),
    pytest.param(make_pod(affinity=SCAN_AFFINITY), on_node({"aaa": "a"}), on_node(POD_LABEL), QueueingHint.QUEUE,
                 id="a pod relabelled to match the pod's affinity queues it"),
    pytest.param(make_pod(affinity=SCAN_AFFINITY), on_node({"service": "value2"}), on_node(POD_LABEL),
                 QueueingHint.SKIP,
                 id="a pod that matched the pod's affinity before and after its relabelling is skipped"),
    pytest.param(make_pod(affinity=SCAN_AFFINITY), unscheduled({"aaa": "a"}), unscheduled(POD_LABEL), QueueingHint.SKIP,
                 id="an updated pod without a node is skipped"),
    pytest.param(make_pod(affinity=SCAN_AFFINITY), on_node(POD_LABEL), on_node({"aaa": "a"}), QueueingHint.SKIP,
                 id="a pod relabelled away from the pod's affinity is skipped"),
    pytest.param(make_pod(affinity=[term("hostname", Exists("aaa")), term("hostname", Exists("bbb"))]),
                 on_node({"aaa": "a"}), on_node(POD_LABEL), QueueingHint.SKIP,
                 id="a pod relabelled away from one of several affinity terms is skipped"),
    pytest.param(make_pod(affinity=[term("hostname", Exists("aaa")), term("hostname", Exists("bbb"))]),
                 on_node({"aaa": "a"}), on_node({"aaa": "", "bbb": ""}), QueueingHint.QUEUE,
                 id="a pod relabelled to match every affinity term queues it"),
    pytest.param(make_pod(anti=SCAN_AFFINITY), on_node(POD_LABEL), on_node({"service": "aaaa"}), QueueingHint.QUEUE,
                 id="a pod relabelled away from the pod's anti-affinity queues it"),
    pytest.param(make_pod(anti=SCAN_AFFINITY), on_node({"service": "bbb"}), on_node(POD_LABEL), QueueingHint.SKIP,
                 id="a pod relabelled into the pod's anti-affinity is skipped"),
    pytest.param(make_pod(anti=SCAN_AFFINITY), on_node({"aaa": "a"}), None, QueueingHint.SKIP,
                 id="a deleted pod the pod's anti-affinity does not match is skipped"),
    pytest.param(make_pod(anti=SCAN_AFFINITY), on_node(POD_LABEL), None, QueueingHint.QUEUE,
                 id="a deleted pod the pod's anti-affinity matched queues it"),
    pytest.param(make_pod(labels=POD_LABEL), on_node(anti=SCAN_AFFINITY), None, QueueingHint.QUEUE,
                 id="a deleted pod whose anti-affinity matched the pod queues it"),
    pytest.param(make_pod(labels={"service": "foo"}), on_node(anti=SCAN_AFFINITY), None, QueueingHint.SKIP,
                 id="a deleted pod whose anti-affinity does not match the pod is skipped"),
    pytest.param(make_pod(labels={"service": "foo"}, anti=SCAN_AFFINITY),
                 on_node({"service": "foo"}, anti=SCAN_AFFINITY), None, QueueingHint.SKIP,
                 id="a deleted pod matching neither way is skipped"),
    # beyond upstream's table
    pytest.param(make_pod(affinity=SCAN_AFFINITY), unscheduled(POD_LABEL), on_node(POD_LABEL), QueueingHint.QUEUE,
                 id="a matching pod that just got its node counts as added"),
    pytest.param(make_pod(labels=POD_LABEL, affinity=SCAN_AFFINITY), on_node(POD_LABEL), None, QueueingHint.QUEUE,
                 id="a deleted last match lets the first-pod rule apply to a pod matching its own terms"),
    pytest.param(make_pod(affinity=SCAN_AFFINITY), on_node(POD_LABEL), None, QueueingHint.SKIP,
                 id="a deleted match cannot help a pod that does not match its own terms"),
    pytest.param(make_pod(labels=POD_LABEL, affinity=SCAN_AFFINITY), on_node(POD_LABEL), on_node({"aaa": "a"}),
                 QueueingHint.QUEUE, id="a last match relabelled away lets the first-pod rule apply"),
    pytest.param(make_pod(anti=SCAN_AFFINITY), unscheduled(POD_LABEL), None, QueueingHint.SKIP,
                 id="a deleted pod without a node is skipped"),
]


@pytest.mark.parametrize("pod, old, new, want", POD_HINT_CASES)
def test_pod_change_hint(pod: Pod, old: Pod | None, new: Pod | None, want: int) -> None:
    pl = plugin(make_cache({}))
    pod_event, _ = pl.events_to_register()
    assert pod_event.hint(pod, old, new) == want


def test_an_update_of_the_pod_itself_queues_it() -> None:
    pod = make_pod(labels={"foo": "bar"})
    pod_event, _ = plugin(make_cache({})).events_to_register()
    assert pod_event.hint(pod, pod, dataclasses.replace(pod, labels={"foo": "baz"})) == QueueingHint.QUEUE


def node(name: str = "node-a", **labels: str) -> Any:
    return parse_node({"metadata": {"name": name, "labels": labels}})


ZONE_AFFINITY = [term("zone", In("service", "securityscan", "value2"))]
ZONE_ANTI = [term("zone", labels={"another": "label"})]

NODE_HINT_CASES = [
    pytest.param(make_pod(affinity=ZONE_AFFINITY), None, node(zone="zone1"), QueueingHint.QUEUE,
                 id="an added node with the affinity topology key queues the pod"),
    pytest.param(make_pod(affinity=[term("region", In("service", "securityscan"))]), None, node(zone="zone1"),
                 QueueingHint.SKIP, id="an added node without the affinity topology key is skipped"),
    pytest.param(make_pod(affinity=ZONE_AFFINITY), node(aaa="a"), node(aaa="b"), QueueingHint.SKIP,
                 id="a label change away from the topology keys is skipped"),
    pytest.param(make_pod(affinity=ZONE_AFFINITY), node(zone="zone1"), node(zone="zone1", unrelated="x"),
                 QueueingHint.SKIP,
                 id="a new unrelated label is skipped"),
    pytest.param(make_pod(affinity=ZONE_AFFINITY), node(zone="zone1"), node(zone="zone2"), QueueingHint.QUEUE,
                 id="a changed affinity topology value queues the pod"),
    pytest.param(make_pod(affinity=ZONE_AFFINITY), node(aaa="a"), node(zone="zone1"), QueueingHint.QUEUE,
                 id="a node gaining the affinity topology key queues the pod"),
    pytest.param(make_pod(anti=ZONE_ANTI), None, node(zone="zone1"), QueueingHint.QUEUE,
                 id="an added node with the anti-affinity topology key queues the pod"),
    pytest.param(make_pod(anti=ZONE_ANTI), None, node(), QueueingHint.QUEUE,
                 id="an added node without the anti-affinity topology key queues the pod"),
    pytest.param(make_pod(anti=ZONE_ANTI), node(zone="zone1"), node(zone="zone1", unrelated="x"), QueueingHint.SKIP,
                 id="a new label unrelated to the anti-affinity is skipped"),
    pytest.param(make_pod(anti=ZONE_ANTI), node(zone="zone1"), node(zone="zone2"), QueueingHint.QUEUE,
                 id="a changed anti-affinity topology value queues the pod"),
    pytest.param(make_pod(anti=ZONE_ANTI), node(aaa="a"), node(zone="zone1"), QueueingHint.SKIP,
                 id="a node gaining the anti-affinity topology key is skipped"),
    pytest.param(make_pod(anti=ZONE_ANTI), node(zone="zone1"), node(aaa="a"), QueueingHint.QUEUE,
                 id="a node losing the anti-affinity topology key queues the pod"),
    # beyond upstream's table
    pytest.param(make_pod(labels={"app": "db"}), None, node(), QueueingHint.QUEUE,
                 id="an added node may take a pod that existing pods' anti-affinity keeps out elsewhere"),
    pytest.param(make_pod(affinity=ZONE_AFFINITY), node(zone="zone1"), node(), QueueingHint.QUEUE,
                 id="a node losing the affinity topology key queues the pod for the first-pod rule"),
]


@pytest.mark.parametrize("pod, old, new, want", NODE_HINT_CASES)
def test_node_change_hint(pod: Pod, old: Any, new: Any, want: int) -> None:
    pl = plugin(make_cache({}))
    _, node_event = pl.events_to_register()
    assert node_event.hint(pod, old, new) == want


def test_node_hint_follows_the_keys_of_existing_pods_anti_affinity_matching_the_pod() -> None:
    holder = make_pod("holder", node="n", anti=[term("rack", Exists("app"))])
    cache = make_cache({"n": {"rack": "r1"}}, [holder])
    _, node_event = plugin(cache).events_to_register()
    assert node_event.hint(make_pod(labels={"app": "db"}), node(rack="r1"), node(rack="r2")) == QueueingHint.QUEUE
    assert node_event.hint(make_pod(labels={"other": "x"}), node(rack="r1"), node(rack="r2")) == QueueingHint.SKIP


def test_events_are_assigned_pod_changes_and_node_additions_and_label_changes() -> None:
    pod_event, node_event = plugin(make_cache({})).events_to_register()
    assert (pod_event.event.resource, pod_event.event.action) == (
        Resource.ASSIGNED_POD, ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE)
    assert (node_event.event.resource, node_event.event.action) == (
        Resource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)


# ---------------------------------------------------------------------------- against a walk over the pods

KEYS = ("kubernetes.io/hostname", "topology.kubernetes.io/zone", "topology.kubernetes.io/region")
NS_NAMES = ("a", "b", "c")
NS_LABELS = {"a": {"team": "x"}, "b": {"team": "y"}, "c": {}}


def _selector_matches(sel: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """metav1.LabelSelectorAsSelector(sel).Matches(labels), on the raw selector."""
    if sel is None:
        return False
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions") or ():
        k, op, vals = e["key"], e["operator"], e.get("values") or []
        if op == "In" and labels.get(k) not in vals:
            return False
        if op == "NotIn" and k in labels and labels[k] in vals:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True


class RefTerm:
    """upstream's AffinityTerm built from the raw PodAffinityTerm of ``owner`` (namespaces, matchLabelKeys)."""

    def __init__(self, raw: dict[str, Any], owner: dict[str, Any], weight: int = 0) -> None:
        meta = owner["metadata"]
        own = meta.get("labels") or {}
        sel = raw.get("labelSelector")
        if sel is not None:
            exprs = list(sel.get("matchExpressions") or [])
            for field, op in (("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn")):
                exprs += [{"key": k, "operator": op, "values": [own[k]]} for k in raw.get(field) or [] if k in own]
            sel = {"matchLabels": sel.get("matchLabels") or {}, "matchExpressions": exprs}
        self.selector = sel
        self.ns_selector = raw.get("namespaceSelector")
        names = raw.get("namespaces") or []
        # getNamespacesFromPodAffinityTerm: neither namespaces nor a (non-null) namespaceSelector: its own
        self.namespaces = set(names) if names or self.ns_selector is not None else {meta["namespace"]}
        self.key = raw["topologyKey"]
        self.weight = weight

    def matches(self, pod: dict[str, Any]) -> bool:
        ns = pod["metadata"]["namespace"]
        if ns not in self.namespaces and not _selector_matches(self.ns_selector, NS_LABELS[ns]):
            return False
        return _selector_matches(self.selector, pod["metadata"].get("labels") or {})


def ref_terms(pod: dict[str, Any]) -> dict[str, list[RefTerm]]:
    aff = pod["spec"].get("affinity") or {}
    out: dict[str, list[RefTerm]] = {"req": [], "anti": [], "pref": [], "pref_anti": []}
    for block, req, pref in (("podAffinity", "req", "pref"), ("podAntiAffinity", "anti", "pref_anti")):
        b = aff.get(block) or {}
        out[req] = [RefTerm(t, pod) for t in b.get("requiredDuringSchedulingIgnoredDuringExecution") or []]
        out[pref] = [RefTerm(w["podAffinityTerm"], pod, w["weight"])
                     for w in b.get("preferredDuringSchedulingIgnoredDuringExecution") or []]
    return out


def reference(incoming: dict[str, Any], placed_pods: list[dict[str, Any]], nodes: dict[str, dict[str, str]],
              hard_weight: int, ignore_existing: bool) -> tuple[dict[str, str | None] | str, list[int] | str]:
    """Filter verdicts and normalized scores the way upstream's PreFilter/Filter and PreScore/Score walk pods."""
    me = ref_terms(incoming)
    on_nodes = [(p, nodes[p["spec"]["nodeName"]]) for p in placed_pods if p["spec"]["nodeName"] in nodes]
    existing_anti: Counter = Counter()
    aff_counts: Counter = Counter()
    anti_counts: Counter = Counter()
    for p, labels in on_nodes:
        for t in ref_terms(p)["anti"]:
            if t.matches(incoming) and t.key in labels:
                existing_anti[(t.key, labels[t.key])] += 1
        if me["req"] and all(t.matches(p) for t in me["req"]):
            for t in me["req"]:
                if t.key in labels:
                    aff_counts[(t.key, labels[t.key])] += 1
        for t in me["anti"]:
            if t.matches(p) and t.key in labels:
                anti_counts[(t.key, labels[t.key])] += 1
    verdicts: dict[str, str | None] | str
    if not existing_anti and not me["req"] and not me["anti"]:
        verdicts = "skip"
    else:
        verdicts = {}
        first_pod = not aff_counts and bool(me["req"]) and all(t.matches(incoming) for t in me["req"])
        for name, labels in nodes.items():
            verdict = None
            exist = True
            for t in me["req"]:
                if t.key not in labels:
                    verdict = AFF
                    break
                if aff_counts[(t.key, labels[t.key])] <= 0:
                    exist = False
            if verdict is None and not exist and not first_pod:
                verdict = AFF
            if verdict is None and any(t.key in labels and anti_counts[(t.key, labels[t.key])] > 0 for t in me["anti"]):
                verdict = ANTI
            if verdict is None and any(existing_anti[(k, v)] > 0 for k, v in labels.items()):
                verdict = EXIST
            verdicts[name] = verdict

    has_constraints = bool(me["pref"] or me["pref_anti"])
    if ignore_existing and not has_constraints:
        return verdicts, "skip"
    topo: dict[tuple[str, str], int] = defaultdict(int)
    for p, labels in on_nodes:
        if not labels:
            continue
        theirs = ref_terms(p)

        def process(terms: list[RefTerm], target: dict[str, Any], weight: int | None, sign: int) -> None:
            for t in terms:
                if t.matches(target) and t.key in labels:
                    topo[(t.key, labels[t.key])] += sign * (t.weight if weight is None else weight)

        process(me["pref"], p, None, 1)
        process(me["pref_anti"], p, None, -1)
        if hard_weight > 0:
            process(theirs["req"], incoming, hard_weight, 1)
        process(theirs["pref"], incoming, None, 1)
        process(theirs["pref_anti"], incoming, None, -1)
    if not topo:
        return verdicts, "skip"
    raw = [sum(v for (k, val), v in topo.items() if labels.get(k) == val) for labels in nodes.values()]
    lo, hi = min(raw), max(raw)
    return verdicts, [int(100.0 * ((s - lo) / (hi - lo))) if hi > lo else 0 for s in raw]


def raw_selector() -> st.SearchStrategy[dict[str, Any] | None]:
    expr = st.fixed_dictionaries({"key": st.sampled_from(["app", "tier"]), "operator": st.sampled_from(["In", "NotIn"]),
                                  "values": st.lists(st.sampled_from(["web", "db"]), min_size=1, max_size=2)})
    presence = st.fixed_dictionaries({"key": st.sampled_from(["app", "tier"]),
                                      "operator": st.sampled_from(["Exists", "DoesNotExist"])})
    sel = st.fixed_dictionaries({}, optional={
        "matchLabels": st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["web", "db"]), max_size=1),
        "matchExpressions": st.lists(st.one_of(expr, presence), max_size=2)})
    # a nil selector (it matches nothing) a quarter of the time
    return st.integers(0, 3).flatmap(lambda i: st.just(None) if i == 0 else sel)


def raw_term() -> st.SearchStrategy[dict[str, Any]]:
    def build(sel: Any, key: str, names: Any, ns_sel: Any, mlk: Any, mmlk: Any) -> dict[str, Any]:
        t: dict[str, Any] = {"labelSelector": sel, "topologyKey": key}
        if names is not None:
            t["namespaces"] = names
        if ns_sel != "absent":
            t["namespaceSelector"] = ns_sel
        if mlk:
            t["matchLabelKeys"] = mlk
        if mmlk:
            t["mismatchLabelKeys"] = mmlk
        return t
    return st.builds(build, raw_selector(), st.sampled_from(KEYS),
                     st.one_of(st.none(), st.lists(st.sampled_from(NS_NAMES), max_size=2, unique=True)),
                     st.sampled_from(["absent", None, {}, {"matchLabels": {"team": "x"}},
                                      {"matchExpressions": [{"key": "team", "operator": "Exists"}]}]),
                     st.sampled_from([None, ["tier"]]), st.sampled_from([None, ["app"]]))


def raw_pod(with_node: bool) -> st.SearchStrategy[dict[str, Any]]:
    none: st.SearchStrategy[list[Any]] = st.just([])
    terms = st.one_of(none, none, st.lists(raw_term(), min_size=1, max_size=2))     # two times in three: none
    weights = st.one_of(none, st.lists(st.builds(lambda w, t: {"weight": w, "podAffinityTerm": t},
                                                        st.integers(1, 100), raw_term()), min_size=1, max_size=2))

    def build(ns: str, labels: dict[str, str], node: int, req: Any, anti: Any, pref: Any,
              pref_anti: Any) -> dict[str, Any]:
        spec: dict[str, Any] = {"affinity": affinity_spec(req, anti, pref, pref_anti)}
        if with_node:
            spec["nodeName"] = f"n{node}"
        return {"metadata": {"namespace": ns, "labels": labels}, "spec": spec}
    return st.builds(build, st.sampled_from(("a", "a", "b", "c")),
                     st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["web", "db"]), max_size=2),
                     st.integers(0, 6), terms, terms, weights, weights)    # n6 is a node that is not there


def raw_nodes() -> st.SearchStrategy[dict[str, dict[str, str]]]:
    """Up to six nodes with hostname, zone and region labels, some of which are missing."""
    def build(specs: list[tuple[int, int, frozenset[str]]]) -> dict[str, dict[str, str]]:
        out = {}
        for i, (zone, region, missing) in enumerate(specs):
            labels = {KEYS[0]: f"n{i}", KEYS[1]: f"z{zone}", KEYS[2]: f"r{region}"}
            out[f"n{i}"] = {k: v for k, v in labels.items() if k not in missing}
        return out
    one = st.tuples(st.integers(0, 2), st.integers(0, 1), st.frozensets(st.sampled_from(KEYS), max_size=2))
    return st.lists(one, min_size=1, max_size=6).map(build)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_nodes(), st.lists(raw_pod(True), min_size=1, max_size=12), raw_pod(False), st.integers(0, 3), st.booleans(),
       st.booleans())
def test_filter_and_score_equal_a_walk_over_the_placed_pods(nodes: dict[str, dict[str, str]], placed_raw: list[Any],
                                                            incoming_raw: Any, hard_weight: int, ignore_existing: bool,
                                                            assume: bool) -> None:
    cache = Cache()
    for ns, labels in NS_LABELS.items():
        cache.set_namespace(ns, labels)
    for name, labels in nodes.items():
        cache.add_node(parse_node({"metadata": {"name": name, "labels": labels}}))
    for i, raw in enumerate(placed_raw):
        raw["metadata"].update(name=f"e{i}", uid=f"e{i}")
        p = parse_pod(raw)
        if assume:         # assumed pods count as bound ones do
            cache.assume(p, p.node_name)
        else:              # pods on nodes that are not (or no longer) there count in no domain
            cache.add_pod(p)
    incoming_raw["metadata"].update(name="p", uid="p")
    pod = parse_pod(incoming_raw)
    pl = InterPodAffinity(InterPodAffinityArgs(hard_weight, ignore_existing), Handle(cache, clock=FakeClock()))

    want_filter, want_score = reference(incoming_raw, placed_raw, nodes, hard_weight, ignore_existing)
    assert run_filter(pl, pod, cache) == want_filter
    got_score = run_score(pl, pod, cache)
    zeros = [0] * len(nodes)
    if got_score == "skip":
        # a Skip adds nothing, which is what a topology score of all-equal nodes normalizes to
        assert want_score in ("skip", zeros)
    else:
        assert list(got_score.values()) == (zeros if want_score == "skip" else want_score)


def check_update(pl: InterPodAffinity, pod: Pod, cache: Cache, other: Pod, add: bool) -> None:
    """AddPod (``add``) or RemovePod of ``other`` on its node, on a clone of a PreFilter state of the cache as it
    is, filters and counts as a PreFilter run once the cache has ``other`` bound there (or no longer has it), and
    leaves the state it cloned alone. The cache is left changed."""
    state = CycleState()
    ran = pl.pre_filter(state, pod, cache.nodes)[1].code != Code.SKIP   # the extensions run only after it did
    if ran:
        before = filter_with(pl, state, pod, cache)
        clone = state.clone()
        row = cache.nodes.row(other.node_name)
        assert (pl.add_pod(clone, pod, other, row) if add else pl.remove_pod(clone, pod, other, row)).is_success()
        assert filter_with(pl, state, pod, cache) == before
        assert counts_of(pl, state, pod, cache) == fresh_counts(pl, pod, cache)
        got, got_counts = filter_with(pl, clone, pod, cache), counts_of(pl, clone, pod, cache)
    if add:
        cache.add_pod(other)
    else:
        cache.remove_pod(other)
    if ran:
        want = run_filter(pl, pod, cache)
        if want == "skip":          # every node passes, and there are no counts to compare
            assert got == all_pass(cache)
        else:
            assert (got, got_counts) == (want, fresh_counts(pl, pod, cache))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_nodes(), st.lists(raw_pod(True), min_size=1, max_size=12), raw_pod(False), st.integers(0, 5))
def test_add_pod_and_remove_pod_equal_a_prefilter_with_the_pod_added_or_removed(
        nodes: dict[str, dict[str, str]], placed_raw: list[Any], incoming_raw: Any, where: int) -> None:
    """For each placed pod P: RemovePod of P, and AddPod of P moved to some node, against PreFilter runs."""
    cache = Cache()
    for ns, labels in NS_LABELS.items():
        cache.set_namespace(ns, labels)
    for name, labels in nodes.items():
        cache.add_node(parse_node({"metadata": {"name": name, "labels": labels}}))
    placed = []
    for i, raw in enumerate(placed_raw):
        raw["metadata"].update(name=f"e{i}", uid=f"e{i}")
        placed.append(parse_pod(raw))
        cache.add_pod(placed[-1])
    incoming_raw["metadata"].update(name="p", uid="p")
    pod = parse_pod(incoming_raw)
    pl = InterPodAffinity(InterPodAffinityArgs(), Handle(cache, clock=FakeClock()))
    names = list(nodes)
    for i, p in enumerate(placed):
        check_update(pl, pod, cache, p, add=False)
        nominated = dataclasses.replace(p, node_name=names[(where + i) % len(names)])
        check_update(pl, pod, cache, nominated, add=True)
        cache.remove_pod(nominated)
        cache.add_pod(p)


# ---------------------------------------------------------------------------- in the default profile

def test_the_default_profile_filters_and_scores_with_it() -> None:
    (profile,) = load_config(None).profiles
    alloc = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    cache = make_cache({})
    for name, zone in (("a", "z1"), ("b", "z1"), ("c", "z2"), ("d", "z3")):
        cache.add_node(parse_node({"metadata": {"name": name, "labels": {"zone": zone}},
                                   "status": {"allocatable": alloc}}))
    cache.add_pod(make_pod("web-1", labels={"app": "web"}, node="a"))
    cache.add_pod(make_pod("db-1", labels={"app": "db"}, node="d"))
    fw = Framework(profile, Handle(cache, scheduler_name=profile.scheduler_name, clock=FakeClock()))
    pod = make_pod(labels={"app": "web"}, anti=[term("zone", labels={"app": "web"})],
                   preferred=[weighted(100, term("zone", labels={"app": "db"}))])
    state = CycleState()
    rows, st, diag = fw.run_pre_filter(state, pod)
    assert st.is_success()
    rows, st = fw.run_filter(state, pod, rows, diag)
    assert cache.nodes.names_of(rows) == ["c", "d"]
    assert diag.message() == "0/4 nodes are available: 2 node(s) didn't match pod anti-affinity rules."
    total, st = fw.run_score(state, pod, rows)
    assert st.is_success() and total[1] > total[0]     # d, next to the db, wins by InterPodAffinity's weight 2
