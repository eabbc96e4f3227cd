"""PodTopologySpread: hard and soft spread constraints, defaults, args, hints (plugins/pod_topology_spread.py).

The tables are upstream's own cases (podtopologyspread filtering_test.go, scoring_test.go,
plugin_test.go), on clusters built through the cache; a property test holds Filter and the
normalized scores to a per-node reference that walks the pods as upstream does.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plugins.pod_topology_spread import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH, ERR_REASON_NODE_LABEL_NOT_MATCH, PRE_FILTER_KEY, PodTopologySpread,
    PodTopologySpreadArgs,
)
from scheduler.config import load_config
from scheduler.framework import ActionType, Code, ConfigError, CycleState, Handle, QueueingHint, Resource, parse_args
from scheduler.framework.clock import FakeClock
from scheduler.framework.runtime import Framework
from scheduler.model import LabelSelector, Node, Pod, parse_label_selector, parse_node, parse_pod
from scheduler.state.cache import Cache

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
DNS, SA = "DoNotSchedule", "ScheduleAnyway"
U, UU = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE
OK = None
FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}
NIL = "nil"                 # a constraint without labelSelector
UNSCHEDULABLE_TAINT = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]


# ---------------------------------------------------------------------------- builders

def n(name: str, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
      cpu: str = "8") -> dict[str, Any]:
    spec: dict[str, Any] = {"taints": taints} if taints else {}
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec,
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}}


def zn(name: str, zone: str, key: str = "node") -> dict[str, Any]:
    """upstream's st.MakeNode().Name(name).Label("zone", zone).Label("node", name)"""
    return n(name, {"zone": zone, key: name})


def spread(max_skew: int, key: str, when: str = DNS, selector: Any = FOO, min_domains: int | None = None,
           affinity_policy: str | None = None, taints_policy: str | None = None,
           match_label_keys: list[str] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when}
    if selector != NIL:
        c["labelSelector"] = selector
    for k, v in (("minDomains", min_domains), ("nodeAffinityPolicy", affinity_policy),
                 ("nodeTaintsPolicy", taints_policy), ("matchLabelKeys", match_label_keys)):
        if v is not None:
            c[k] = v
    return c


def pod(name: str = "p", node: str = "", ns: str = "default", labels: dict[str, str] | None = None,
        constraints: list[dict[str, Any]] | None = None, node_selector: dict[str, str] | None = None,
        affinity: dict[str, Any] | None = None, tolerations: list[dict[str, Any]] | None = None,
        deleting: bool = False, owners: list[dict[str, Any]] | None = None, cpu: str = "100m", **kw: str) -> Pod:
    """``kw`` are more labels (``foo=""``)."""
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": f"{ns}/{name}", "labels": {**(labels or {}), **kw}}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    if owners:
        meta["ownerReferences"] = owners
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    if constraints:
        spec["topologySpreadConstraints"] = constraints
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [affinity]}]}}}
    if tolerations:
        spec["tolerations"] = tolerations
    return parse_pod({"metadata": meta, "spec": spec})


def placed(name: str, node: str, ns: str = "default", deleting: bool = False, **labels: str) -> Pod:
    return pod(name, node=node, ns=ns, deleting=deleting, labels=labels)


@dataclass
class FakeSpreadSelectors:
    """The interface of handle.spread_selectors: selectors of the Services/RCs and the controller selecting a pod."""

    match_labels: dict[str, str]
    controller: list[Any]
    version: int = 1
    namespace: str = "default"

    def default_selector(self, namespace: str, labels: dict[str, str], owners: Any
                         ) -> tuple[dict[str, str], list[Any]] | None:
        if namespace != self.namespace:
            return None
        return self.match_labels, self.controller


def cluster(nodes: list[dict[str, Any]], pods: list[Pod] = ()) -> Cache:  # type: ignore[assignment]
    cache = Cache()
    for obj in nodes:
        cache.add_node(parse_node(obj))
    for p in pods:
        cache.add_pod(p)
    return cache


def plugin(cache: Cache, args: dict[str, Any] | None = None, selectors: Any = None) -> PodTopologySpread:
    """The plugin over ``cache``; by default with ``defaultingType: List`` and no default constraints, as
    upstream's filtering and scoring tests set it up."""
    handle = Handle(cache, clock=FakeClock(), spread_selectors=selectors)
    raw = {"defaultingType": "List"} if args is None else args
    return PodTopologySpread(parse_args(PodTopologySpreadArgs, raw, "args"), handle)


def run_filter(pl: PodTopologySpread, p: Pod, cache: Cache) -> dict[str, Any]:
    """Node name -> None (fits) or (code, reason); a PreFilter Skip lets every node through."""
    state = CycleState()
    _, st = pl.pre_filter(state, p, cache.nodes)
    if st.code == Code.SKIP:
        return dict.fromkeys(cache.nodes.names_of(cache.nodes.rows()))
    assert st.is_success(), st
    return filter_with(pl, state, p, cache)


def filter_with(pl: PodTopologySpread, state: CycleState, p: Pod, cache: Cache) -> dict[str, Any]:
    """Node name -> None (fits) or (code, reason), by Filter over every node with ``state``."""
    nodes = cache.nodes
    rows = nodes.rows()
    names = nodes.names_of(rows)
    res = pl.filter(state, p, nodes, rows)
    assert res.error is None
    out: dict[str, Any] = {}
    for i, name in enumerate(names):
        hit = [(r.code, r.reason) for r in res.rejections if r.mask[i]]
        assert len(hit) == (0 if res.passed[i] else 1), (name, hit)
        out[name] = hit[0] if hit else None
    return out


def codes(verdicts: dict[str, Any]) -> dict[str, Code | None]:
    return {k: None if v is None else v[0] for k, v in verdicts.items()}


def run_score(pl: PodTopologySpread, p: Pod, cache: Cache,
              candidates: list[str] | None = None) -> dict[str, int] | None:
    """Normalized scores of the candidate nodes (all by default); None when PreScore skips."""
    nodes = cache.nodes
    rows = nodes.rows()
    if candidates is not None:
        rows = np.array(sorted(nodes.row(c) for c in candidates), dtype=np.int64)
    state = CycleState()
    st = pl.pre_score(state, p, nodes, rows)
    if st.code == Code.SKIP:
        return None
    assert st.is_success(), st
    scores = pl.score(state, p, nodes, rows)
    assert isinstance(scores, np.ndarray)
    pl.normalize(state, p, scores)
    return dict(zip(nodes.names_of(rows), scores.tolist()))


FOUR = [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2"), zn("node-y", "zone2")]
TAINTED_Y = [n("node-a", {"node": "node-a", "foo": ""}), n("node-b", {"node": "node-b", "foo": ""}),
             n("node-x", {"node": "node-x", "foo": ""}), n("node-y", {"node": "node-y"}, UNSCHEDULABLE_TAINT)]
FOO_ON_Y = [n("node-a", {"node": "node-a", "foo": ""}), n("node-b", {"node": "node-b", "foo": ""}),
            n("node-x", {"node": "node-x", "foo": ""}), n("node-y", {"node": "node-y"})]


NODE_ABC_PLAIN = [n("node-a", {"node": "node-a"}), n("node-b", {"node": "node-b"}), n("node-c", {"node": "node-c"})]


def spread_2_2_1() -> list[Pod]:
    return [placed("p-a1", "node-a", foo=""), placed("p-a2", "node-a", foo=""), placed("p-b1", "node-b", foo=""),
            placed("p-b2", "node-b", foo=""), placed("p-c1", "node-c", foo="")]


def spread_1_1_0_1() -> list[Pod]:
    """upstream's p-b1 on node-a, p-b2 on node-b, p-y1 on node-y."""
    return [placed("p-b1", "node-a", foo=""), placed("p-b2", "node-b", foo=""), placed("p-y1", "node-y", foo="")]


def spread_2_1_0_3() -> list[Pod]:
    return [placed("p-a1", "node-a", foo=""), placed("p-a2", "node-a", foo=""), placed("p-b1", "node-b", foo=""),
            placed("p-y1", "node-y", foo=""), placed("p-y2", "node-y", foo=""), placed("p-y3", "node-y", foo="")]


# ---------------------------------------------------------------------------- Filter: one constraint
# upstream's TestSingleConstraint

SINGLE = [
    pytest.param(pod(foo="", constraints=[spread(1, "zone")]), FOUR, [],
                 {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
                 id="with no existing pods every node fits"),
    pytest.param(pod(foo="", constraints=[spread(1, "zone", selector=BAR)]), FOUR, [],
                 {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
                 id="with no existing pods every node fits even when the pod does not match itself"),
    pytest.param(pod(foo="", constraints=[spread(1, "zone")]), FOUR,
                 [placed("p-a1", "node-a", ns="ns1", foo=""), placed("p-b1", "node-a", ns="ns2", foo=""),
                  placed("p-x1", "node-x", foo=""), placed("p-y1", "node-y", foo="")],
                 {"node-a": OK, "node-b": OK, "node-x": U, "node-y": U},
                 id="existing pods in a different namespace do not count"),
    pytest.param(pod(foo="", constraints=[spread(1, "zone", selector=NIL)]), FOUR,
                 [placed("p-x1", "node-x", foo=""), placed("p-y1", "node-y", foo="")],
                 {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
                 id="existing pods do not match a null selector"),
    pytest.param(pod(foo="", constraints=[spread(1, "zone", selector={})]), FOUR,
                 [placed("p-x1", "node-x", foo=""), placed("p-y1", "node-y", foo="")],
                 {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
                 id="an empty selector counts no existing pod, while the pod matches itself (skew 1)"),
    pytest.param(pod(foo="", constraints=[spread(1, "zone")]), FOUR,
                 [placed("p-a1", "node-a", foo=""), placed("p-a2", "node-a", foo=""),
                  placed("p-b1", "node-b", foo=""), placed("p-y1", "node-y", foo=""),
                  placed("p-y2", "node-y", foo=""), placed("p-y3", "node-y", foo="")],
                 {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
                 id="pods spread across zones as 3/3 so all nodes fit"),
    pytest.param(pod(foo="", constraints=[spread(1, "zone")]),
                 [zn("node-a", "zone1"), n("node-b", {"zon": "zone1", "node": "node-b"}), zn("node-x", "zone2"),
                  zn("node-y", "zone2")],
                 [placed("p-a1", "node-a", foo=""), placed("p-b1", "node-b", foo=""),
                  placed("p-x1", "node-x", foo=""), placed("p-y1", "node-y", foo="")],
                 {"node-a": OK, "node-b": UU, "node-x": U, "node-y": U},
                 id="pods spread across zones as 1/2 because node-b lacks the zone label"),
    pytest.param(pod(foo="", constraints=[spread(1, "rack")]), [zn("node-a", "zone1"), zn("node-x", "zone2")], [],
                 {"node-a": UU, "node-x": UU},
                 id="no node has the rack label so the pod fits nowhere"),
    pytest.param(pod(foo="", constraints=[spread(1, "node")]), FOUR, spread_2_1_0_3(),
                 {"node-a": U, "node-b": U, "node-x": OK, "node-y": U},
                 id="pods spread across nodes as 2/1/0/3 so only node-x fits"),
    pytest.param(pod(foo="", constraints=[spread(2, "node")]), FOUR, spread_2_1_0_3(),
                 {"node-a": U, "node-b": OK, "node-x": OK, "node-y": U},
                 id="pods spread across nodes as 2/1/0/3 with maxSkew 2 so node-b and node-x fit"),
    pytest.param(pod(bar="", constraints=[spread(1, "node")]), FOUR, spread_2_1_0_3(),
                 {"node-a": U, "node-b": OK, "node-x": OK, "node-y": U},
                 id="pods spread across nodes as 2/1/0/3 but the pod does not match itself"),
    pytest.param(pod(foo="", constraints=[spread(1, "node")],
                     affinity={"key": "node", "operator": "In", "values": ["node-a", "node-y"]}),
                 FOUR, spread_2_1_0_3(),
                 {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": U},
                 id="with node affinity to node-a and node-y the pods spread as 2/3 so node-a fits"),
    pytest.param(pod(foo="", constraints=[spread(1, "node")]), [n("node-a", {"node": "node-a"}),
                                                               n("node-b", {"node": "node-b"})],
                 [placed("p-a", "node-a", deleting=True, foo=""), placed("p-b", "node-b", foo="")],
                 {"node-a": OK, "node-b": U},
                 id="terminating pods do not count"),
    pytest.param(pod(foo="", constraints=[spread(1, "zone")],
                     affinity={"key": "node", "operator": "NotIn", "values": ["node-b"]}),
                 FOUR, [placed("p-b1", "node-b", foo=""), placed("p-b2", "node-b", foo=""),
                        placed("p-y1", "node-y", foo="")],
                 {"node-a": OK, "node-b": OK, "node-x": U, "node-y": U},
                 id="with node affinity away from node-b the zones spread as 0/1 so zone1 fits"),
    pytest.param(pod(foo="", constraints=[spread(2, "node", min_domains=4)]),
                 NODE_ABC_PLAIN,
                 spread_2_2_1(),
                 {"node-a": U, "node-b": U, "node-c": OK},
                 id="fewer domains than minDomains make the global minimum 0 so only the third node fits"),
    pytest.param(pod(foo="", constraints=[spread(2, "node", min_domains=2)]),
                 NODE_ABC_PLAIN,
                 spread_2_2_1(),
                 {"node-a": OK, "node-b": OK, "node-c": OK},
                 id="more domains than minDomains keep the real global minimum so all nodes fit"),
    pytest.param(pod(foo="", constraints=[spread(2, "zone", min_domains=3)]), FOUR,
                 spread_1_1_0_1(),
                 {"node-a": U, "node-b": U, "node-x": OK, "node-y": OK},
                 id="zones spread as 2/1 with fewer zones than minDomains so only zone2 fits"),
    pytest.param(pod(foo="", constraints=[spread(2, "zone", min_domains=1)]), FOUR,
                 spread_1_1_0_1(),
                 {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
                 id="zones spread as 2/1 with more zones than minDomains so all nodes fit"),
    pytest.param(pod(foo="", node_selector={"foo": ""}, constraints=[spread(1, "node")]), FOO_ON_Y,
                 spread_1_1_0_1(),
                 {"node-a": U, "node-b": U, "node-x": OK, "node-y": OK},
                 id="nodeAffinityPolicy Honor leaves out the node the nodeSelector does not match"),
    pytest.param(pod(foo="", node_selector={"foo": ""}, constraints=[spread(1, "node", affinity_policy="Ignore")]),
                 FOO_ON_Y,
                 spread_1_1_0_1(),
                 {"node-a": U, "node-b": U, "node-x": OK, "node-y": U},
                 id="nodeAffinityPolicy Ignore counts the node the nodeSelector does not match"),
    pytest.param(pod(foo="", affinity={"key": "foo", "operator": "In", "values": [""]},
                     constraints=[spread(1, "node")]), FOO_ON_Y,
                 spread_1_1_0_1(),
                 {"node-a": U, "node-b": U, "node-x": OK, "node-y": OK},
                 id="nodeAffinityPolicy Honor leaves out the node the required node affinity does not match"),
    pytest.param(pod(foo="", affinity={"key": "foo", "operator": "In", "values": [""]},
                     constraints=[spread(1, "node", affinity_policy="Ignore")]), FOO_ON_Y,
                 spread_1_1_0_1(),
                 {"node-a": U, "node-b": U, "node-x": OK, "node-y": U},
                 id="nodeAffinityPolicy Ignore counts the node the required node affinity does not match"),
    pytest.param(pod(foo="", constraints=[spread(1, "node", taints_policy="Honor")]), TAINTED_Y,
                 spread_1_1_0_1(),
                 {"node-a": U, "node-b": U, "node-x": OK, "node-y": OK},
                 id="nodeTaintsPolicy Honor leaves out the node whose taint the pod does not tolerate"),
    pytest.param(pod(foo="", constraints=[spread(1, "node")]), TAINTED_Y,
                 spread_1_1_0_1(),
                 {"node-a": U, "node-b": U, "node-x": OK, "node-y": U},
                 id="nodeTaintsPolicy Ignore by default counts the tainted node"),
    pytest.param(pod(foo="", constraints=[spread(1, "node", taints_policy="Honor")],
                     tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                                   "effect": "NoSchedule"}]), TAINTED_Y,
                 spread_1_1_0_1(),
                 {"node-a": U, "node-b": U, "node-x": OK, "node-y": U},
                 id="nodeTaintsPolicy Honor counts a tainted node whose taint the pod tolerates"),
    pytest.param(pod(foo="", constraints=[spread(1, "node", taints_policy="Honor")]),
                 [n("node-a", {"node": "node-a"}), n("node-b", {"node": "node-b"}),
                  n("node-y", {"node": "node-y"}, [{"key": "k", "effect": "PreferNoSchedule"}])],
                 spread_1_1_0_1(),
                 {"node-a": OK, "node-b": OK, "node-y": OK},
                 id="nodeTaintsPolicy Honor counts a node whose only taint is PreferNoSchedule"),
]


@pytest.mark.parametrize("p, nodes, pods, want", SINGLE)
def test_filter_one_constraint(p: Pod, nodes: list[dict[str, Any]], pods: list[Pod], want: dict[str, Any]) -> None:
    cache = cluster(nodes, pods)
    assert codes(run_filter(plugin(cache), p, cache)) == want


# ---------------------------------------------------------------------------- Filter: several constraints
# upstream's TestMultipleConstraints

def inclusion(foo: str, tainted: str = "") -> list[dict[str, Any]]:
    """node-a, node-b in zone1 and node-x, node-y in zone2, each with its "node" label; the label foo="" on
    the nodes whose last letter is in ``foo``, the unschedulable taint on those in ``tainted``."""
    zones = ("zone1", "zone1", "zone2", "zone2")
    return [n(f"node-{x}", {"zone": zone, "node": f"node-{x}", **({"foo": ""} if x in foo else {})},
              UNSCHEDULABLE_TAINT if x in tainted else None) for x, zone in zip("abxy", zones)]


def one_each_on_a_b_y() -> list[Pod]:
    return [placed("p-a1", "node-a", foo=""), placed("p-b1", "node-b", foo=""), placed("p-y1", "node-y", foo="")]


MULTIPLE = [
    pytest.param(pod(foo="", constraints=[spread(1, "zone"), spread(1, "node")]), FOUR, spread_2_1_0_3(),
                 {"node-a": U, "node-b": U, "node-x": OK, "node-y": U},
                 id="zone and node constraints, spreads 3/3 and 2/1/0/3, leave node-x"),
    pytest.param(pod(foo="", constraints=[spread(1, "zone"), spread(1, "node")]), FOUR,
                 spread_2_1_0_3() + [placed("p-y4", "node-y", foo="")],
                 {"node-a": U, "node-b": U, "node-x": U, "node-y": U},
                 id="zone and node constraints, spreads 3/4 and 2/1/0/4, leave no node"),
    pytest.param(pod(foo="", bar="", constraints=[spread(1, "zone"), spread(1, "node", selector=BAR)]), FOUR,
                 [placed("p-a1", "node-a", foo=""), placed("p-y1", "node-y", bar="")],
                 {"node-a": U, "node-b": U, "node-x": OK, "node-y": U},
                 id="constraints with different selectors, spreads 1/0 and 1/0/0/1, leave node-x"),
    pytest.param(pod(foo="", bar="", constraints=[spread(1, "zone"), spread(1, "node", selector=BAR)]), FOUR,
                 [placed("p-a1", "node-a", foo=""), placed("p-x1", "node-x", bar=""), placed("p-y1", "node-y", bar="")],
                 {"node-a": U, "node-b": U, "node-x": U, "node-y": U},
                 id="constraints with different selectors, spreads 1/0 and 0/0/1/1, leave no node"),
    pytest.param(pod(foo="", bar="", constraints=[spread(1, "zone"), spread(1, "node", selector=BAR)]), FOUR,
                 [placed("p-a1", "node-a", foo=""), placed("p-a2", "node-a", foo="", bar=""),
                  placed("p-y1", "node-y", foo=""), placed("p-y2", "node-y", foo="", bar=""),
                  placed("p-y3", "node-y", foo="")],
                 {"node-a": U, "node-b": OK, "node-x": U, "node-y": U},
                 id="constraints with different selectors, spreads 2/3 and 1/0/0/1, leave node-b"),
    pytest.param(pod(bar="", constraints=[spread(1, "zone"), spread(1, "node", selector=BAR)]), FOUR,
                 [placed("p-a1", "node-a", foo=""), placed("p-x1", "node-x", bar=""), placed("p-y1", "node-y", bar="")],
                 {"node-a": OK, "node-b": OK, "node-x": U, "node-y": U},
                 id="the pod does not match itself on the zone constraint so only the node constraint decides"),
    pytest.param(pod(foo="", constraints=[spread(1, "zone"), spread(1, "node")]),
                 [zn("node-a", "zone1"), zn("node-b", "zone1"), n("node-x", {"zone": "zone2"}), zn("node-y", "zone2")],
                 [placed("p-a1", "node-a", foo=""), placed("p-y3", "node-y", foo="")],
                 {"node-a": U, "node-b": OK, "node-x": UU, "node-y": U},
                 id="node-x lacks the node label: missing label for it, node-b fits"),
    pytest.param(pod(foo="", node_selector={"foo": ""},
                     constraints=[spread(1, "zone"), spread(1, "node", affinity_policy="Ignore")]),
                 inclusion(foo="abx"),
                 one_each_on_a_b_y(),
                 {"node-a": U, "node-b": U, "node-x": OK, "node-y": U},
                 id="zone honors node affinity and node ignores it, leaving node-x"),
    pytest.param(pod(foo="", constraints=[spread(1, "zone", taints_policy="Honor"), spread(1, "node")]),
                 inclusion(foo="abx", tainted="y"),
                 one_each_on_a_b_y(),
                 {"node-a": U, "node-b": U, "node-x": OK, "node-y": U},
                 id="zone honors taints and node ignores them, leaving node-x"),
    pytest.param(pod(foo="", node_selector={"foo": ""}, constraints=[spread(1, "zone"), spread(1, "node")]),
                 inclusion(foo="axy", tainted="y"),
                 one_each_on_a_b_y(),
                 {"node-a": U, "node-b": OK, "node-x": OK, "node-y": U},
                 id="both constraints honor node affinity and ignore taints"),
    pytest.param(pod(foo="", node_selector={"foo": ""},
                     constraints=[spread(1, "zone", taints_policy="Honor"),
                                  spread(1, "node", affinity_policy="Ignore")]),
                 inclusion(foo="axy", tainted="y"),
                 one_each_on_a_b_y(),
                 {"node-a": U, "node-b": U, "node-x": OK, "node-y": U},
                 id="zone honors affinity and taints and node ignores both, leaving node-x"),
]


@pytest.mark.parametrize("p, nodes, pods, want", MULTIPLE)
def test_filter_several_constraints(p: Pod, nodes: list[dict[str, Any]], pods: list[Pod],
                                    want: dict[str, Any]) -> None:
    cache = cluster(nodes, pods)
    assert codes(run_filter(plugin(cache), p, cache)) == want


def test_filter_reasons_are_upstreams_and_a_node_gets_its_first_failing_constraints() -> None:
    cache = cluster([zn("node-a", "zone1"), n("node-b", {"zone": "zone2"}), zn("node-c", "zone3")],
                    [placed("p-a1", "node-a", foo="")])
    # node-a: the zone skew fails first; node-b: it passes the zone constraint, then lacks "node"
    got = run_filter(plugin(cache), pod(foo="", constraints=[spread(1, "zone"), spread(1, "node")]), cache)
    assert got == {"node-a": (U, ERR_REASON_CONSTRAINTS_NOT_MATCH),
                   "node-b": (UU, ERR_REASON_NODE_LABEL_NOT_MATCH), "node-c": None}
    assert ERR_REASON_CONSTRAINTS_NOT_MATCH == "node(s) didn't match pod topology spread constraints"
    assert ERR_REASON_NODE_LABEL_NOT_MATCH == ("node(s) didn't match pod topology spread constraints "
                                               "(missing required label)")


def test_a_node_failing_several_constraints_gets_only_the_first_ones_reason() -> None:
    cache = cluster([n("a", {"zone": "zone1"}), n("b", {"rack": "r1"}), n("c", {"zone": "zone2", "rack": "r2"}),
                     n("d", {"zone": "zone3", "rack": "r3"}), n("e", {"zone": "zone1", "rack": "r1"})],
                    [placed("p-e1", "e", foo="")])
    got = run_filter(plugin(cache), pod(foo="", constraints=[spread(1, "zone"), spread(1, "rack")]), cache)
    # a: zone1 is one too many (e's pod), and a has no rack; b: no zone, and rack r1 is one too many
    assert got == {"a": (U, ERR_REASON_CONSTRAINTS_NOT_MATCH), "b": (UU, ERR_REASON_NODE_LABEL_NOT_MATCH),
                   "c": None, "d": None, "e": (U, ERR_REASON_CONSTRAINTS_NOT_MATCH)}


def test_pre_filter_skips_a_pod_without_hard_constraints() -> None:
    cache = cluster(FOUR)
    pl = plugin(cache)
    for p in (pod(foo=""), pod(foo="", constraints=[spread(1, "zone", when=SA)])):
        _, st = pl.pre_filter(CycleState(), p, cache.nodes)
        assert st.code == Code.SKIP


@pytest.mark.parametrize("match_label_keys, want", [
    pytest.param(None, {"node-a": U, "node-b": U, "node-x": OK, "node-y": OK},
                 id="without matchLabelKeys every revision counts: zones spread as 2/1"),
    pytest.param(["rev"], {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK},
                 id="matchLabelKeys on the revision counts only the pods of the same revision: 0/0"),
])
def test_match_label_keys_narrow_the_selector_to_the_pods_own_values(
        match_label_keys: list[str] | None, want: dict[str, Any]) -> None:
    cache = cluster(FOUR, [placed("p-a1", "node-a", foo="", rev="1"), placed("p-b1", "node-b", foo="", rev="1"),
                           placed("p-x1", "node-x", foo="", rev="1")])
    p = pod(foo="", rev="2", constraints=[spread(1, "zone", match_label_keys=match_label_keys)])
    assert codes(run_filter(plugin(cache), p, cache)) == want


def test_a_full_domain_still_counts_toward_the_global_minimum() -> None:
    """Eligibility does not depend on room: zone3's only node is full, its 0 matching pods keep the minimum at 0
    (upstream counts it too), so with 1/1/0 and maxSkew 1 the pod fits nowhere: zone1 and zone2 would make a skew
    of 2, and zone3 has no room."""
    nodes = [n("a", {"zone": "zone1"}), n("b", {"zone": "zone2"}), n("c", {"zone": "zone3"}, cpu="1")]
    pods = [placed("p-a", "a", foo=""), placed("p-b", "b", foo=""), pod("filler", node="c", cpu="1")]
    cache = cluster(nodes, pods)
    fw = Framework(load_config(None).profiles[0], Handle(cache, clock=FakeClock()))
    p = pod(foo="", cpu="500m", constraints=[spread(1, "zone")])
    state = CycleState()
    rows, st, diag = fw.run_pre_filter(state, p)
    assert st.is_success()
    feasible, st = fw.run_filter(state, p, rows, diag)
    assert len(feasible) == 0
    assert diag.reasons == {"Insufficient cpu": 1, ERR_REASON_CONSTRAINTS_NOT_MATCH: 2}
    # once zone3 gets room, it is where the pod goes
    cache.remove_pod(pods[2])
    state = CycleState()
    rows, st, diag = fw.run_pre_filter(state, p)
    feasible, st = fw.run_filter(state, p, rows, diag)
    assert cache.nodes.names_of(feasible) == ["c"]


def test_placed_pods_move_the_counts_between_cycles() -> None:
    """The counts are the cache's, kept as pods are assumed, bound and deleted: no walk over pods per cycle."""
    cache = cluster([n("a", {"zone": "zone1"}), n("b", {"zone": "zone2"})])
    pl = plugin(cache)
    p = pod(foo="", constraints=[spread(1, "zone")])
    assert codes(run_filter(pl, p, cache)) == {"a": OK, "b": OK}
    first = placed("p1", "a", foo="")
    cache.assume(first, "a")
    assert codes(run_filter(pl, p, cache)) == {"a": U, "b": OK}
    cache.add_pod(placed("p2", "b", foo=""))
    assert codes(run_filter(pl, p, cache)) == {"a": OK, "b": OK}
    cache.forget(first)
    assert codes(run_filter(pl, p, cache)) == {"a": OK, "b": U}
    cache.update_pod(placed("p2", "b", foo="", deleting=True))   # terminating: no longer counts
    assert codes(run_filter(pl, p, cache)) == {"a": OK, "b": OK}


def test_nodes_added_relabelled_and_removed_between_cycles_are_seen_at_once() -> None:
    cache = cluster([n("a", {"zone": "zone1"}), n("b", {"zone": "zone2"})], [placed("p-a1", "a", foo="")])
    pl = plugin(cache)
    p = pod(foo="", constraints=[spread(1, "zone")])
    assert codes(run_filter(pl, p, cache)) == {"a": U, "b": OK}
    cache.update_node(parse_node(n("b", {"zone": "zone1"})))            # one zone left, with one pod
    assert codes(run_filter(pl, p, cache)) == {"a": OK, "b": OK}
    cache.add_node(parse_node(n("c", {"zone": "zone3"})))               # an empty zone again
    assert codes(run_filter(pl, p, cache)) == {"a": U, "b": U, "c": OK}
    cache.remove_node("c")
    cache.update_node(parse_node(n("b", {"rack": "r1"})))               # b loses the key
    assert codes(run_filter(pl, p, cache)) == {"a": OK, "b": UU}


# ---------------------------------------------------------------------------- AddPod / RemovePod
# upstream's TestPreFilterStateAddPod and TestPreFilterStateRemovePod, and what preemption's dry runs rely on

def spread_counts(state: CycleState, cache: Cache) -> dict[str, tuple[dict[str, int], int]]:
    """Per hard constraint's key: matching pods per eligible domain (upstream's TpPairToMatchNum) and the
    global minimum (what its critical paths give)."""
    out = {}
    for c in state.read(PRE_FILTER_KEY).constraints:
        values = cache.nodes.label_values(c.key)
        out[c.key] = ({values[v]: int(c.match[v]) for v in np.flatnonzero(c.present).tolist()}, c.min_match)
    return out


def fresh_spread_counts(pl: PodTopologySpread, p: Pod, cache: Cache) -> dict[str, tuple[dict[str, int], int]]:
    state = CycleState()
    assert pl.pre_filter(state, p, cache.nodes)[1].is_success()
    return spread_counts(state, cache)


def prefiltered(pl: PodTopologySpread, p: Pod, cache: Cache) -> CycleState:
    state = CycleState()
    _, st = pl.pre_filter(state, p, cache.nodes)
    assert st.is_success(), st
    return state


NODE_AB = [zn("node-a", "zone1"), zn("node-b", "zone1")]
NODE_AX = [zn("node-a", "zone1"), zn("node-x", "zone2")]
NODE_ABX = [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2")]
NODE_ABXY = NODE_ABX + [zn("node-y", "zone2")]
FOO_BAR_ON_A = [n("node-a", {"zone": "zone1", "node": "node-a", "foo": "bar"}),
                n("node-b", {"zone": "zone2", "node": "node-b", "foo": ""})]
NOT_FOO_BAR = {"key": "foo", "operator": "NotIn", "values": ["bar"]}
ZONE_NODE = [spread(1, "zone"), spread(1, "node")]
P_A1 = placed("p-a1", "node-a", foo="")

# upstream's TestPreFilterStateAddPod: preemptor, nodes, placed pods, the pod added (on its node), counts after
ADD_CASES = [
    pytest.param(pod(foo="", constraints=[spread(1, "node")]), NODE_AB, [], placed("p-a1", "node-a", foo=""),
                 {"node": ({"node-a": 1, "node-b": 0}, 0)}, id="node a and b both impact current min match"),
    pytest.param(pod(foo="", constraints=[spread(1, "node")]), NODE_AB, [placed("p-b1", "node-b", foo="")],
                 placed("p-a1", "node-a", foo=""), {"node": ({"node-a": 1, "node-b": 1}, 1)},
                 id="only node a impacts current min match"),
    pytest.param(pod(foo="", constraints=[spread(1, "node")]), NODE_AB, [placed("p-b1", "node-b", foo="")],
                 placed("p-a1", "node-a", ns="ns1", foo=""), {"node": ({"node-a": 0, "node-b": 1}, 0)},
                 id="add a pod in a different namespace doesn't change topologyKeyToMinPodsMap"),
    pytest.param(pod(foo="", constraints=[spread(1, "node")]), NODE_AB, [placed("p-b1", "node-b", foo="")],
                 placed("p-b2", "node-b", foo=""), {"node": ({"node-a": 0, "node-b": 2}, 0)},
                 id="add pod on non-critical node won't trigger re-calculation"),
    pytest.param(pod(foo="", constraints=ZONE_NODE), NODE_AX, [], placed("p-a1", "node-a", foo=""),
                 {"zone": ({"zone1": 1, "zone2": 0}, 0), "node": ({"node-a": 1, "node-x": 0}, 0)},
                 id="node a and x both impact topologyKeyToMinPodsMap on zone and node"),
    pytest.param(pod(foo="", constraints=ZONE_NODE), NODE_AX, [placed("p-x1", "node-x", foo="")],
                 placed("p-a1", "node-a", foo=""),
                 {"zone": ({"zone1": 1, "zone2": 1}, 1), "node": ({"node-a": 1, "node-x": 1}, 1)},
                 id="only node a impacts topologyKeyToMinPodsMap on zone and node"),
    pytest.param(pod(foo="", constraints=ZONE_NODE), NODE_ABX,
                 [placed("p-b1", "node-b", foo=""), placed("p-b2", "node-b", foo=""), placed("p-x1", "node-x", foo="")],
                 placed("p-a1", "node-a", foo=""),
                 {"zone": ({"zone1": 3, "zone2": 1}, 1), "node": ({"node-a": 1, "node-b": 2, "node-x": 1}, 1)},
                 id="node a impacts topologyKeyToMinPodsMap on node, node x impacts topologyKeyToMinPodsMap on zone"),
    pytest.param(pod(foo="", bar="", constraints=[spread(1, "zone"), spread(1, "node", selector=BAR)]), NODE_ABX,
                 [placed("p-b1", "node-b", foo="", bar=""), placed("p-x1", "node-x", foo="", bar=""),
                  placed("p-x2", "node-x", bar="")], placed("p-a1", "node-a", foo=""),
                 {"zone": ({"zone1": 2, "zone2": 1}, 1), "node": ({"node-a": 0, "node-b": 1, "node-x": 2}, 0)},
                 id="Constraints hold different labelSelectors, node a impacts topologyKeyToMinPodsMap on zone"),
    pytest.param(pod(foo="", constraints=[spread(1, "zone")], affinity=NOT_FOO_BAR), FOO_BAR_ON_A,
                 [placed("p-a2", "node-a", foo=""), placed("p-b1", "node-b", foo="")], placed("p-a1", "node-a", foo=""),
                 {"zone": ({"zone2": 1}, 1)},
                 id="add a pod when scheduling node affinity unmatched pod with NodeInclusionPolicy enabled"),
    pytest.param(pod(foo="", constraints=[spread(1, "zone")]), FOO_BAR_ON_A,
                 [placed("p-a1", "node-a", foo=""), placed("p-b2", "node-b", foo="")], placed("p-b1", "node-b"),
                 {"zone": ({"zone1": 1, "zone2": 1}, 1)},
                 id="add a label selector not matched pod when with NodeInclusionPolicy enabled"),
    pytest.param(pod(foo="", constraints=[spread(1, "zone", taints_policy="Honor")]),
                 [n("node-a", {"zone": "zone1"}, UNSCHEDULABLE_TAINT), n("node-b", {"zone": "zone2"})],
                 [placed("p-b2", "node-b", foo="")], placed("p-a1", "node-a", foo=""), {"zone": ({"zone2": 1}, 1)},
                 id="a pod added to a node whose taint the preemptor does not tolerate counts for nothing when "
                    "nodeTaintsPolicy is Honor"),
]

# upstream's TestPreFilterStateRemovePod: preemptor, nodes, placed pods, the pod removed (from its node), counts after
REMOVE_CASES = [
    pytest.param(pod(foo="", constraints=[spread(1, "zone")]), NODE_ABX,
                 [P_A1, placed("p-b1", "node-b", foo=""), placed("p-x1", "node-x", foo="")], P_A1,
                 {"zone": ({"zone1": 1, "zone2": 1}, 1)},
                 id="one spreadConstraint on zone, topologyKeyToMinPodsMap unchanged"),
    pytest.param(pod(foo="", constraints=[spread(1, "zone")]), NODE_ABXY,
                 [P_A1, placed("p-b1", "node-b", foo=""), placed("p-x1", "node-x", foo=""),
                  placed("p-y1", "node-y", foo="")], P_A1, {"zone": ({"zone1": 1, "zone2": 2}, 1)},
                 id="one spreadConstraint on node, topologyKeyToMinPodsMap changed"),
    pytest.param(pod(foo="", constraints=[spread(1, "zone")]), NODE_ABXY,
                 [placed("p-a0", "node-a", bar=""), P_A1, placed("p-b1", "node-b", foo=""),
                  placed("p-x1", "node-x", foo=""), placed("p-y1", "node-y", foo="")], placed("p-a0", "node-a", bar=""),
                 {"zone": ({"zone1": 2, "zone2": 2}, 2)}, id="delete an irrelevant pod won't help"),
    pytest.param(pod(foo="", constraints=[spread(1, "zone")]), NODE_ABXY,
                 [P_A1, placed("p-b1", "node-b", foo=""), placed("p-x1", "node-x", foo=""),
                  placed("p-y1", "node-y", foo="")], placed("p-a0", "node-a", bar=""),
                 {"zone": ({"zone1": 2, "zone2": 2}, 2)}, id="delete a non-existing pod won't help"),
    pytest.param(pod(foo="", constraints=ZONE_NODE), NODE_ABX,
                 [P_A1, placed("p-a2", "node-a", foo=""), placed("p-b1", "node-b", foo=""),
                  placed("p-x1", "node-x", foo=""), placed("p-x2", "node-x", foo="")], placed("p-x2", "node-x", foo=""),
                 {"zone": ({"zone1": 3, "zone2": 1}, 1), "node": ({"node-a": 2, "node-b": 1, "node-x": 1}, 1)},
                 id="two spreadConstraints"),
    pytest.param(pod(foo="", constraints=[spread(1, "zone")]), NODE_AX,
                 [placed("p-a1", "node-a", deleting=True, foo=""), placed("p-x1", "node-x", foo="")],
                 placed("p-a1", "node-a", deleting=True, foo=""), {"zone": ({"zone1": 0, "zone2": 1}, 0)},
                 id="a terminating victim was never counted, so removing it changes nothing"),
]


@pytest.mark.parametrize("op, preemptor, nodes, existing, other, want",
                         [pytest.param("add", *c.values, id=c.id) for c in ADD_CASES]
                         + [pytest.param("remove", *c.values, id=c.id) for c in REMOVE_CASES])
def test_add_pod_and_remove_pod_move_the_counts_as_upstream(op: str, preemptor: Pod, nodes: list[dict[str, Any]],
                                                            existing: list[Pod], other: Pod, want: Any) -> None:
    """upstream's TestPreFilterStateAddPod and TestPreFilterStateRemovePod: the counts per domain and the
    global minimum after the update, which a PreFilter with the pod bound (or gone) agrees with."""
    cache = cluster(nodes, existing)
    pl = plugin(cache)
    state = prefiltered(pl, preemptor, cache)
    row = cache.nodes.row(other.node_name)
    st = pl.add_pod(state, preemptor, other, row) if op == "add" else pl.remove_pod(state, preemptor, other, row)
    assert st.is_success()
    assert spread_counts(state, cache) == want
    if op == "add":
        cache.add_pod(other)
    else:
        cache.remove_pod(other)
    assert want == fresh_spread_counts(pl, preemptor, cache)


SKEW = (U, ERR_REASON_CONSTRAINTS_NOT_MATCH)
ZONE_SPREAD = pod(foo="", constraints=[spread(1, "zone")])


# preemptor, nodes, placed pods, "add" or "remove", the pod (on its node), verdicts before and after, by node
@pytest.mark.parametrize("preemptor, nodes, pods, op, other, before, after", [
    pytest.param(ZONE_SPREAD, NODE_AX, [], "add", placed("nominated", "node-a", foo=""), [OK, OK], [SKEW, OK],
                 id="adding a nominated pod that matches a spread selector raises skew"),
    pytest.param(ZONE_SPREAD, NODE_AX, [], "add", placed("nominated", "node-a", bar=""), [OK, OK], [OK, OK],
                 id="adding a nominated pod the selector does not match changes nothing"),
    pytest.param(ZONE_SPREAD, NODE_ABX, [P_A1, placed("p-b1", "node-b", foo=""), placed("p-x1", "node-x", foo="")],
                 "remove", P_A1, [SKEW, SKEW, OK], [OK, OK, OK],
                 id="preemption removing a matching pod from the crowded zone lets the pod in"),
    pytest.param(ZONE_SPREAD, NODE_AX, [P_A1, placed("p-x1", "node-x", foo="")], "remove",
                 placed("p-x1", "node-x", foo=""), [OK, OK], [SKEW, OK],
                 id="removing the only pod of a zone at the minimum lowers the minimum"),
    pytest.param(ZONE_SPREAD, NODE_ABX, [P_A1, placed("p-b1", "node-b", foo=""), placed("p-x1", "node-x", foo="")],
                 "remove", placed("p-x1", "node-x", foo=""), [SKEW, SKEW, OK], [SKEW, SKEW, OK],
                 id="removing a pod in the other zone does not help"),
    pytest.param(pod(foo="", constraints=ZONE_NODE), NODE_AX + [n("node-c", {"zone": "zone1"})], [], "add",
                 placed("nominated", "node-c", foo=""), [OK, OK, (UU, ERR_REASON_NODE_LABEL_NOT_MATCH)],
                 [OK, OK, (UU, ERR_REASON_NODE_LABEL_NOT_MATCH)],
                 id="a pod added to a node without every constraint's key counts for no constraint"),
    pytest.param(pod(foo="", constraints=[spread(1, "zone", min_domains=3)]), NODE_AX, [P_A1], "add",
                 placed("nominated", "node-x", foo=""), [SKEW, OK], [SKEW, SKEW],
                 id="with fewer domains than minDomains the global minimum stays 0"),
])
def test_add_pod_and_remove_pod(preemptor: Pod, nodes: list[dict[str, Any]], pods: list[Pod], op: str, other: Pod,
                                before: list[Any], after: list[Any]) -> None:
    cache = cluster(nodes, pods)
    pl = plugin(cache)
    names = [obj["metadata"]["name"] for obj in nodes]
    state = prefiltered(pl, preemptor, cache)
    assert filter_with(pl, state, preemptor, cache) == dict(zip(names, before))
    row = cache.nodes.row(other.node_name)
    st = pl.add_pod(state, preemptor, other, row) if op == "add" else pl.remove_pod(state, preemptor, other, row)
    assert st.is_success()
    assert filter_with(pl, state, preemptor, cache) == dict(zip(names, after))
    if op == "add":
        cache.add_pod(other)
    else:
        cache.remove_pod(other)
    assert run_filter(pl, preemptor, cache) == dict(zip(names, after))


def test_updates_on_clones_leave_the_original_state_alone() -> None:
    """Preemption tries each candidate node on its own clone; updates in several domains of one state (nominated
    pods) keep the exact minimum, where two critical paths would lose it."""
    nodes = [zn("node-a", "zone1"), zn("node-b", "zone2"), zn("node-c", "zone3")]
    cache = cluster(nodes, [placed("p-a1", "node-a", foo=""), placed("p-b1", "node-b", foo=""),
                            placed("p-c1", "node-c", foo="")])
    pl = plugin(cache)
    state = prefiltered(pl, ZONE_SPREAD, cache)
    before = filter_with(pl, state, ZONE_SPREAD, cache)
    assert before == {"node-a": OK, "node-b": OK, "node-c": OK}
    clone = state.clone()
    for name in ("node-a", "node-b"):
        nominated = placed(f"nominated-{name}", name, foo="")
        assert pl.add_pod(clone, ZONE_SPREAD, nominated, cache.nodes.row(name)).is_success()
    assert spread_counts(clone, cache) == {"zone": ({"zone1": 2, "zone2": 2, "zone3": 1}, 1)}
    assert filter_with(pl, clone, ZONE_SPREAD, cache) == {"node-a": SKEW, "node-b": SKEW, "node-c": OK}
    other = state.clone()
    assert pl.remove_pod(other, ZONE_SPREAD, cache.pods["default/p-c1"].pod, cache.nodes.row("node-c")).is_success()
    assert filter_with(pl, other, ZONE_SPREAD, cache) == {"node-a": SKEW, "node-b": SKEW, "node-c": OK}
    assert filter_with(pl, state, ZONE_SPREAD, cache) == before
    assert spread_counts(state, cache) == {"zone": ({"zone1": 1, "zone2": 1, "zone3": 1}, 1)}


def test_add_pod_without_prefilter_state_is_an_error() -> None:
    cache = cluster(NODE_AX)
    st = plugin(cache).add_pod(CycleState(), ZONE_SPREAD, P_A1, cache.nodes.row("node-a"))
    assert st.code == Code.ERROR and PRE_FILTER_KEY in st.message()


# ---------------------------------------------------------------------------- Score
# upstream's TestPodTopologySpreadScore

def h(name: str, **more: str) -> dict[str, Any]:
    """A node with the hostname label (and more labels)."""
    return n(name, {HOST: name, **more})


def hz(name: str, zone: str) -> dict[str, Any]:
    return n(name, {"zone": zone, HOST: name})


def spread_4_3_2_1() -> list[Pod]:
    return ([placed(f"p-a{i}", "node-a", foo="") for i in range(4)] + [placed(f"p-b{i}", "node-b", foo="")
                                                                       for i in range(3)]
            + [placed(f"p-c{i}", "node-c", foo="") for i in range(2)] + [placed("p-d1", "node-d", foo="")])


def spread_4_2_1_3() -> list[Pod]:
    return ([placed(f"p-a{i}", "node-a", foo="") for i in range(4)] + [placed(f"p-b{i}", "node-b", foo="")
                                                                       for i in range(2)]
            + [placed("p-x1", "node-x", foo="")] + [placed(f"p-y{i}", "node-y", foo="") for i in range(3)])


def hostname_2_1_0_3() -> list[Pod]:
    return [placed("p-a1", "node-a", foo=""), placed("p-a2", "node-a", foo=""), placed("p-b1", "node-b", foo=""),
            placed("p-d1", "node-d", foo=""), placed("p-d2", "node-d", foo=""), placed("p-d3", "node-d", foo="")]


ABCD = [h("node-a"), h("node-b"), h("node-c"), h("node-d")]
ZONED_ABXY = [hz("node-a", "zone1"), hz("node-b", "zone1"), hz("node-x", "zone2"), hz("node-y", "zone2")]
NODE_ABC = [n("node-a", {"node": "node-a", "foo": ""}), n("node-b", {"node": "node-b", "foo": ""}),
            n("node-c", {"node": "node-c"})]
NODE_ABC_TAINTED = [n("node-a", {"node": "node-a"}), n("node-b", {"node": "node-b"}),
                    n("node-c", {"node": "node-c"}, UNSCHEDULABLE_TAINT)]


def abc_2_1_1() -> list[Pod]:
    return [placed("p-a1", "node-a", foo=""), placed("p-a2", "node-a", foo=""), placed("p-b1", "node-b", foo=""),
            placed("p-c1", "node-c", foo="")]


SCORE = [
    pytest.param(pod(foo="", constraints=[spread(1, HOST, SA)]), [h("node-a"), h("node-b")], [], None,
                 {"node-a": 100, "node-b": 100}, id="one constraint on node with no existing pods"),
    pytest.param(pod(foo="", constraints=[spread(1, HOST, SA)]), [h("node-a"), h("node-b")],
                 [placed("p-a1", "node-a", foo=""), placed("p-a2", "node-a", foo=""), placed("p-b1", "node-b", foo="")],
                 ["node-a"], {"node-a": 100}, id="the only candidate node scores 100"),
    pytest.param(pod(foo="", constraints=[spread(1, HOST, SA)]), [h("node-a"), h("node-b")],
                 [placed("p-a1", "node-a", foo=""), placed("p-b1", "node-b", foo="")], None,
                 {"node-a": 100, "node-b": 100}, id="all nodes with the same number of matching pods score 100"),
    pytest.param(pod(foo="", constraints=[spread(1, HOST, SA)]), ABCD, hostname_2_1_0_3(), None,
                 {"node-a": 20, "node-b": 60, "node-c": 100, "node-d": 0},
                 id="one constraint on node with 2/1/0/3 over four candidates"),
    pytest.param(pod(foo="", constraints=[spread(1, HOST, SA, selector=NIL)]), ABCD, hostname_2_1_0_3(), None,
                 {"node-a": 100, "node-b": 100, "node-c": 100, "node-d": 100},
                 id="a null selector counts nothing"),
    pytest.param(pod(foo="", constraints=[spread(2, HOST, SA)]), ABCD, hostname_2_1_0_3(), None,
                 {"node-a": 33, "node-b": 66, "node-c": 100, "node-d": 16},
                 id="one constraint on node with 2/1/0/3 and maxSkew 2"),
    pytest.param(pod(foo="", constraints=[spread(3, HOST, SA)]), ABCD, spread_4_3_2_1(), None,
                 {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100},
                 id="one constraint on node with 4/3/2/1 and maxSkew 3"),
    pytest.param(pod(foo="", constraints=[spread(1, HOST, SA)]),
                 [h("node-a"), h("node-b"), h("node-x"), h("node-y")], spread_4_2_1_3(), ["node-a", "node-b", "node-x"],
                 {"node-a": 33, "node-b": 83, "node-x": 100},
                 id="one constraint on node with 3 of 4 nodes candidates"),
    pytest.param(pod(foo="", constraints=[spread(1, HOST, SA)]),
                 [h("node-a"), n("node-b", {"n": "node-b"}), h("node-x"), h("node-y")], spread_4_2_1_3(),
                 ["node-a", "node-b", "node-x"], {"node-a": 16, "node-b": 0, "node-x": 100},
                 id="a candidate without the topology key is ignored and scores 0"),
    pytest.param(pod(foo="", constraints=[spread(1, "zone", SA)]), ZONED_ABXY, spread_4_2_1_3(),
                 ["node-a", "node-b", "node-x"], {"node-a": 75, "node-b": 75, "node-x": 100},
                 id="one constraint on zone with 3 of 4 nodes candidates: the other node's pods still count"),
    pytest.param(pod(foo="", constraints=[spread(1, "zone", SA), spread(1, HOST, SA)]), ZONED_ABXY,
                 [placed("p-a1", "node-a", foo=""), placed("p-a2", "node-a", foo=""), placed("p-b1", "node-b", foo=""),
                  placed("p-x1", "node-x", foo=""), placed("p-x2", "node-x", foo="")]
                 + [placed(f"p-y{i}", "node-y", foo="") for i in range(4)],
                 ["node-a", "node-x"], {"node-a": 100, "node-x": 63},
                 id="zone and node constraints with 2 of 4 nodes candidates"),
    pytest.param(pod(foo="", bar="", constraints=[spread(1, "zone", SA), spread(1, HOST, SA, selector=BAR)]),
                 ZONED_ABXY,
                 [placed("p-a1", "node-a", foo=""), placed("p-b1", "node-b", foo="", bar=""),
                  placed("p-y1", "node-y", foo=""), placed("p-y2", "node-y", bar="")], None,
                 {"node-a": 60, "node-b": 20, "node-x": 100, "node-y": 60},
                 id="zone and node constraints with different selectors"),
    pytest.param(pod(foo="", bar="", constraints=[spread(1, "zone", SA), spread(1, HOST, SA, selector=BAR)]),
                 ZONED_ABXY,
                 [placed("p-b1", "node-b", bar=""), placed("p-x1", "node-x", foo=""),
                  placed("p-y1", "node-y", foo="", bar="")], None,
                 {"node-a": 100, "node-b": 60, "node-x": 40, "node-y": 0},
                 id="zone and node constraints with different selectors and some empty nodes"),
    pytest.param(pod(foo="", bar="", constraints=[spread(1, "zone", SA), spread(1, HOST, SA, selector=BAR)]),
                 ZONED_ABXY,
                 [placed("p-a1", "node-a", foo=""), placed("p-b1", "node-b", foo="", bar=""),
                  placed("p-y1", "node-y", foo=""), placed("p-y2", "node-y", bar="")],
                 ["node-a", "node-b", "node-x"], {"node-a": 50, "node-b": 25, "node-x": 100},
                 id="zone and node constraints with different selectors and 3 of 4 nodes candidates"),
    pytest.param(pod(foo="", constraints=[spread(1, HOST, SA)]), [h("node-a"), h("node-b")],
                 [placed("p-a1", "node-a", ns="ns1", foo=""), placed("p-a2", "node-a", foo=""),
                  placed("p-b1", "node-b", foo=""), placed("p-b2", "node-b", foo="")], None,
                 {"node-a": 100, "node-b": 33}, id="existing pods in a different namespace do not count"),
    pytest.param(pod(foo="", constraints=[spread(1, HOST, SA)]), [h("node-a"), h("node-b")],
                 [placed("p-a", "node-a", deleting=True, foo=""), placed("p-b", "node-b", foo="")], None,
                 {"node-a": 100, "node-b": 0}, id="terminating pods do not count"),
    pytest.param(pod(foo="", constraints=[spread(2, "node", SA, min_domains=10)]),
                 NODE_ABC_PLAIN,
                 spread_2_2_1(), None,
                 {"node-a": 75, "node-b": 75, "node-c": 100}, id="minDomains has no effect on scoring"),
    pytest.param(pod(foo="", node_selector={"foo": ""}, constraints=[spread(1, "node", SA)]), NODE_ABC, abc_2_1_1(),
                 None, {"node-a": 0, "node-b": 33, "node-c": 100},
                 id="nodeAffinityPolicy Honor: the nodeSelector's non-matching node counts nothing"),
    pytest.param(pod(foo="", node_selector={"foo": ""}, constraints=[spread(1, "node", SA, affinity_policy="Ignore")]),
                 NODE_ABC, abc_2_1_1(), None, {"node-a": 66, "node-b": 100, "node-c": 100},
                 id="nodeAffinityPolicy Ignore: every node counts"),
    pytest.param(pod(foo="", affinity={"key": "foo", "operator": "In", "values": [""]},
                     constraints=[spread(1, "node", SA)]), NODE_ABC, abc_2_1_1(), None,
                 {"node-a": 0, "node-b": 33, "node-c": 100},
                 id="nodeAffinityPolicy Honor: the required affinity's non-matching node counts nothing"),
    pytest.param(pod(foo="", constraints=[spread(1, "node", SA, taints_policy="Honor")]), NODE_ABC_TAINTED,
                 abc_2_1_1(), None, {"node-a": 0, "node-b": 33, "node-c": 100},
                 id="nodeTaintsPolicy Honor: the untolerated node counts nothing"),
    pytest.param(pod(foo="", constraints=[spread(1, "node", SA)]), NODE_ABC_TAINTED, abc_2_1_1(), None,
                 {"node-a": 66, "node-b": 100, "node-c": 100}, id="nodeTaintsPolicy Ignore: the tainted node counts"),
    pytest.param(pod(foo="", bar="", constraints=[spread(1, "zone", SA, selector={}, match_label_keys=["foo"]),
                                                  spread(1, HOST, SA, selector={}, match_label_keys=["bar"])]),
                 [hz("node-a", "zone1"), hz("node-b", "zone1"), hz("node-c", "zone2"), hz("node-d", "zone2")],
                 [placed("p-a1", "node-a", foo=""), placed("p-b1", "node-b", foo="", bar=""),
                  placed("p-y1", "node-c", foo=""), placed("p-y2", "node-c", bar="")], None,
                 {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100},
                 id="matchLabelKeys ANDed with an empty selector"),
    pytest.param(pod(foo="", bar="", baz="", constraints=[spread(1, "zone", SA),
                                                          spread(1, HOST, SA, selector=BAR, match_label_keys=["baz"])]),
                 [hz("node-a", "zone1"), hz("node-b", "zone1"), hz("node-c", "zone2"), hz("node-d", "zone2")],
                 [placed("p-a1", "node-a", foo=""), placed("p-b1", "node-b", foo="", bar="", baz=""),
                  placed("p-c1", "node-c", foo=""), placed("p-c2", "node-c", bar=""),
                  placed("p-d3", "node-c", bar="", baz="")], None,
                 {"node-a": 60, "node-b": 20, "node-c": 60, "node-d": 100},
                 id="matchLabelKeys ANDed with a selector"),
]


@pytest.mark.parametrize("p, nodes, pods, candidates, want", SCORE)
def test_score(p: Pod, nodes: list[dict[str, Any]], pods: list[Pod], candidates: list[str] | None,
               want: dict[str, int]) -> None:
    cache = cluster(nodes, pods)
    assert run_score(plugin(cache), p, cache, candidates) == want


@pytest.mark.parametrize("p, args, selectors", [
    pytest.param(pod(), {"defaultingType": "List"}, None, id="the pod has no soft constraints and no defaults"),
    pytest.param(pod(constraints=[spread(1, "zone", DNS)]), None, FakeSpreadSelectors({"foo": ""}, []),
                 id="the pod's own constraints are all hard: no defaults either"),
    pytest.param(pod(foo="bar"), {"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": SA}]}, None,
                 id="default constraints without a selector source"),
    pytest.param(pod(foo="bar"), {"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": SA}]}, FakeSpreadSelectors({}, []),
                 id="default constraints and nothing selecting the pod"),
    pytest.param(pod(foo="bar"), None, FakeSpreadSelectors({}, [None, {}]),
                 id="system defaults and only a nil and an empty controller selector"),
])
def test_pre_score_skips(p: Pod, args: dict[str, Any] | None, selectors: Any) -> None:
    cache = cluster([h("node-a", planet="mars"), h("node-b", planet="mars")])
    pl = plugin(cache, args if args is not None else {}, selectors)   # None: the System defaults
    assert run_score(pl, p, cache) is None


def test_pre_score_skips_without_nodes() -> None:
    cache = cluster([])
    st = plugin(cache).pre_score(CycleState(), pod(constraints=[spread(1, "zone", SA)]), cache.nodes,
                                 np.zeros(0, dtype=np.int64))
    assert st.code == Code.SKIP


def test_the_hostname_weight_counts_the_scored_nodes_that_are_not_ignored() -> None:
    """topologyNormalizingWeight(len(filteredNodes) - len(IgnoredNodes)): with c ignored (no zone), the weight is
    log(3 + 2), so the raw scores 8/2/0 normalize to 0/75/100 (log(4 + 2) would give 9/2/0 and 77)."""
    cache = cluster([hz("a", "z1"), hz("b", "z1"), h("c"), hz("d", "z2")],
                    [placed(f"p-a{i}", "a", foo="") for i in range(5)] + [placed("p-b1", "b", foo="")])
    p = pod(foo="", constraints=[spread(1, HOST, SA), spread(1, "zone", SA, selector=NIL)])
    assert run_score(plugin(cache), p, cache) == {"a": 0, "b": 75, "c": 0, "d": 100}


def test_the_topology_size_counts_the_domains_of_the_scored_nodes_only() -> None:
    """The weight is log(2 + 2) for the two zones of the candidates, not log(3 + 2) for all three: raw scores
    4/1 normalize to 25/100 (5/2 would give 40)."""
    cache = cluster([hz("a", "z1"), hz("b", "z2"), hz("c", "z3")],
                    [placed(f"p-a{i}", "a", foo="") for i in range(3)] + [placed("p-b1", "b", foo="")])
    assert run_score(plugin(cache), pod(foo="", constraints=[spread(1, "zone", SA)]), cache, ["a", "b"]) == {
        "a": 25, "b": 100}


# ---------------------------------------------------------------------------- default constraints

def test_system_defaults_spread_a_services_pods_by_hostname_and_zone_as_one_constraint_would() -> None:
    """upstream: "system defaulting, nodes don't have zone, pods match service" scores like maxSkew 3 on hostname."""
    cache = cluster(ABCD, spread_4_3_2_1())
    pl = plugin(cache, {}, FakeSpreadSelectors({"foo": ""}, []))
    assert run_score(pl, pod(foo=""), cache) == {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}
    # the pod's own constraints, even hard ones only, turn the defaults off
    assert run_score(pl, pod(foo="", constraints=[spread(1, "zone")]), cache) is None


def test_system_defaults_treat_nodes_without_a_zone_as_one_more_zone() -> None:
    """With the system defaults a node is not ignored for lacking a zone: "" is a zone of its own, and nodes
    whose zone label is present but empty share it (upstream reads both as node.Labels[zone] == "")."""
    nodes = [n("a", {HOST: "a", ZONE: "mars"}), n("b", {HOST: "b", ZONE: "mars"}), n("c", {HOST: "c"}),
             n("d", {HOST: "d", ZONE: ""})]
    pods = [placed("p-a1", "a", foo=""), placed("p-c1", "c", foo=""), placed("p-c2", "c", foo="")]
    cache = cluster(nodes, pods)
    pl = plugin(cache, {}, FakeSpreadSelectors({"foo": ""}, []))
    got = run_score(pl, pod(foo=""), cache)
    # hostname: weight log(4+2), counts 1/0/2/0, maxSkew 3; zone: 2 domains (mars, ""), weight log(2+2), counts
    # mars 1, "" 2 (c's two pods), maxSkew 5; c has no zone label so it gets no zone term
    w_host, w_zone = math.log(6), math.log(4)
    raw = {"a": round(1 * w_host + 2 + 1 * w_zone + 4), "b": round(0 * w_host + 2 + 1 * w_zone + 4),
           "c": round(2 * w_host + 2), "d": round(0 * w_host + 2 + 2 * w_zone + 4)}
    top, low = max(raw.values()), min(raw.values())
    assert got == {k: 100 * (top + low - v) // top for k, v in raw.items()}


def test_pods_left_on_a_deleted_node_do_not_count_in_the_empty_zone() -> None:
    """Upstream counts over the snapshot's nodes, and a deleted node is none, though its pods keep its row."""
    nodes = [n("a", {HOST: "a", ZONE: "mars"}), n("d", {HOST: "d", ZONE: ""}), n("gone", {HOST: "gone"})]
    cache = cluster(nodes, [placed("p-a1", "a", foo="")] + [placed(f"p-g{i}", "gone", foo="") for i in range(3)])
    cache.remove_node("gone")
    pl = plugin(cache, {}, FakeSpreadSelectors({"foo": ""}, []))
    # zone: mars 1, "" 0 (d's); hostname: a 1, d 0: a scores higher, so d is the better node
    w_host, w_zone = math.log(2 + 2), math.log(2 + 2)
    raw = {"a": round(w_host + 2 + w_zone + 4), "d": round(2 + 4)}
    top, low = max(raw.values()), min(raw.values())
    assert run_score(pl, pod(foo=""), cache) == {k: 100 * (top + low - v) // top for k, v in raw.items()}


def test_listed_hard_defaults_filter_a_replicaset_pod() -> None:
    """defaultingType List with a DoNotSchedule default: the ReplicaSet's selector is ANDed in."""
    cache = cluster(FOUR, [placed("p-a1", "node-a", app="web", tier="fe"), placed("p-x1", "node-x", app="web"),
                           placed("p-x2", "node-x", app="web", tier="fe")])
    args = {"defaultingType": "List",
            "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": DNS}]}
    rs_selector = {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["fe"]}]}
    pl = plugin(cache, args, FakeSpreadSelectors({"app": "web"}, [rs_selector]))
    # app=web AND tier=fe: 1/1 across zones, so every zone fits
    p = pod(app="web", tier="fe", owners=[{"kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True,
                                             "apiVersion": "apps/v1"}])
    assert codes(run_filter(pl, p, cache)) == {"node-a": OK, "node-b": OK, "node-x": OK, "node-y": OK}
    # the Service's selector alone counts 1/2: zone2 is one too many
    pl = plugin(cache, args, FakeSpreadSelectors({"app": "web"}, []))
    assert codes(run_filter(pl, p, cache)) == {"node-a": OK, "node-b": OK, "node-x": U, "node-y": U}
    # a pod in a namespace nothing selects gets no default constraint
    assert codes(run_filter(pl, pod(ns="other", app="web"), cache)) == dict.fromkeys(
        ["node-a", "node-b", "node-x", "node-y"])


def test_default_selectors_are_asked_again_when_their_version_moves() -> None:
    cache = cluster(FOUR, [placed("p-x1", "node-x", app="web")])
    args = {"defaultingType": "List",
            "defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": DNS}]}
    source = FakeSpreadSelectors({"app": "web"}, [])
    pl = plugin(cache, args, source)
    p = pod(app="web")
    assert codes(run_filter(pl, p, cache))["node-x"] == U
    source.match_labels = {"app": "api"}          # a Service changed, but the version did not: the memo answers
    assert codes(run_filter(pl, p, cache))["node-x"] == U
    source.version += 1
    assert codes(run_filter(pl, p, cache))["node-x"] == OK


# ---------------------------------------------------------------------------- NormalizeScore

def test_normalize_scores_ignored_nodes_zero_and_all_equal_nodes_a_hundred() -> None:
    cache = cluster([h("node-a"), n("node-b", {"n": "b"}), h("node-c")])
    pl = plugin(cache)
    p = pod(foo="", constraints=[spread(1, HOST, SA)])
    # no matching pods anywhere: every score is 0 (maxSkew 1), so every scored node gets 100, the ignored one 0
    assert run_score(pl, p, cache) == {"node-a": 100, "node-b": 0, "node-c": 100}
    only_ignored = run_score(pl, p, cache, ["node-b"])
    assert only_ignored == {"node-b": 0}


# ---------------------------------------------------------------------------- args

def listed(*constraints: dict[str, Any]) -> dict[str, Any]:
    return {"defaultingType": "List", "defaultConstraints": list(constraints)}


@pytest.mark.parametrize("raw, error", [
    pytest.param({}, None, id="the v1 default is System"),
    pytest.param({"defaultingType": "List"}, None, id="List with no constraints"),
    pytest.param(listed({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": DNS},
                        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": SA},
                        {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": SA, "minDomains": 2,
                         "nodeTaintsPolicy": "Honor"}), None, id="List with valid constraints"),
    pytest.param({"defaultingType": "System", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": DNS}]},
                 'args.defaultingType: Invalid value: "System": when .defaultConstraints are not empty',
                 id="System with constraints"),
    pytest.param({"defaultingType": "Sometimes"},
                 'args.defaultingType: Unsupported value: "Sometimes": supported values: "System", "List"',
                 id="an unknown defaulting type"),
    pytest.param(listed({"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": DNS}),
                 "args.defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)",
                 id="maxSkew of zero"),
    pytest.param(listed({"maxSkew": 1, "whenUnsatisfiable": DNS}),
                 "args.defaultConstraints[0].topologyKey: Required value: can not be empty",
                 id="no topology key"),
    pytest.param(listed({"maxSkew": 1, "topologyKey": "-zone", "whenUnsatisfiable": DNS}),
                 'args.defaultConstraints[0].topologyKey: Invalid value: "-zone": name part must consist of',
                 id="an invalid topology key"),
    pytest.param(listed({"maxSkew": 1, "topologyKey": "zone"}),
                 "args.defaultConstraints[0].whenUnsatisfiable: Required value: can not be empty",
                 id="no whenUnsatisfiable"),
    pytest.param(listed({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Sometimes"}),
                 'args.defaultConstraints[0].whenUnsatisfiable: Unsupported value: "Sometimes": supported values: '
                 '"DoNotSchedule", "ScheduleAnyway"', id="an unknown whenUnsatisfiable"),
    pytest.param(listed({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": DNS, "labelSelector": {}}),
                 "args.defaultConstraints[0].labelSelector: Forbidden: constraint must not define a selector",
                 id="a label selector in a default constraint"),
    pytest.param(listed({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": DNS},
                        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": DNS}),
                 'args.defaultConstraints[1]: Duplicate value: "{zone, DoNotSchedule}"',
                 id="the same key and whenUnsatisfiable twice"),
    pytest.param(listed({"maxSkew": "1"}),
                 "args.defaultConstraints[0].maxSkew: expected an integer", id="a string for an integer"),
    pytest.param({"defaultConstraint": []}, "args.defaultConstraint: unknown field", id="a misspelt field"),
])
def test_args_validation(raw: dict[str, Any], error: str | None) -> None:
    if error is None:
        parse_args(PodTopologySpreadArgs, raw, "args")
        return
    with pytest.raises(ConfigError) as exc:
        parse_args(PodTopologySpreadArgs, raw, "args")
    assert error in str(exc.value)


def test_args_report_every_problem_in_one_line() -> None:
    with pytest.raises(ConfigError) as exc:
        parse_args(PodTopologySpreadArgs, {"defaultingType": "System", "defaultConstraints": [
            {"maxSkew": -1, "topologyKey": "zone", "whenUnsatisfiable": DNS}]}, "args")
    assert str(exc.value) == ('args.defaultingType: Invalid value: "System": when .defaultConstraints are not empty; '
                              "args.defaultConstraints[0].maxSkew: Invalid value: -1: not in valid range (0, inf)")


# ---------------------------------------------------------------------------- queueing hints (upstream plugin_test.go)

def node_rec(name: str = "node-a", taints: list[dict[str, str]] | None = None, **labels: str) -> Node:
    return parse_node(n(name, labels, taints))


ZONE_HARD = [spread(1, "zone")]
ZONE_NODE_HARD = [spread(1, "zone"), spread(1, "node")]


@pytest.mark.parametrize("constraints, old, new, want", [
    pytest.param(ZONE_HARD, node_rec(zone="zone1"), node_rec(zone="zone2"), QueueingHint.QUEUE,
                 id="a node changes the value of a topology key"),
    pytest.param(ZONE_HARD, node_rec(foo="bar1"), node_rec(foo="bar2"), QueueingHint.SKIP,
                 id="a node without the keys changes an unrelated label"),
    pytest.param(ZONE_NODE_HARD, node_rec(zone="zone1", node="node1", foo="bar"), node_rec(zone="zone1", node="node1"),
                 QueueingHint.SKIP, id="a node with the keys drops an unrelated label"),
    pytest.param(ZONE_HARD, None, node_rec(foo="bar"), QueueingHint.SKIP, id="a node without the keys is created"),
    pytest.param(ZONE_HARD, None, node_rec(zone="zone1"), QueueingHint.QUEUE, id="a node with the keys is created"),
    pytest.param(ZONE_HARD, node_rec(foo="bar"), None, QueueingHint.SKIP, id="a node without the keys is deleted"),
    pytest.param(ZONE_HARD, node_rec(zone="zone1"), None, QueueingHint.QUEUE, id="a node with the keys is deleted"),
    pytest.param(ZONE_NODE_HARD, None, node_rec(zone="zone1"), QueueingHint.SKIP,
                 id="a node with only one of the keys is created"),
    pytest.param(ZONE_NODE_HARD, None, node_rec(zone="zone1", node="node1"), QueueingHint.QUEUE,
                 id="a node with all the keys is created"),
    pytest.param(ZONE_NODE_HARD, node_rec(zone="zone1"), node_rec(zone="zone1"), QueueingHint.SKIP,
                 id="a node with one of the keys is updated"),
    pytest.param(ZONE_NODE_HARD, node_rec(zone="zone1", node="node1"), node_rec(zone="zone1", node="node2"),
                 QueueingHint.QUEUE, id="a node with all the keys changes one"),
    pytest.param(ZONE_HARD, node_rec(zone="zone1"), node_rec(zone="zone1", taints=UNSCHEDULABLE_TAINT),
                 QueueingHint.QUEUE, id="a node with the keys changes its taints"),
    pytest.param(ZONE_HARD, node_rec(foo="x"), node_rec(foo="x", taints=UNSCHEDULABLE_TAINT), QueueingHint.SKIP,
                 id="a node without the keys changes its taints"),
    pytest.param(ZONE_HARD, node_rec(foo="x"), node_rec(foo="x", zone="zone1"), QueueingHint.QUEUE,
                 id="a node gains the keys"),
    pytest.param(ZONE_HARD, node_rec(zone="zone1"), node_rec(foo="x"), QueueingHint.QUEUE, id="a node loses the keys"),
    pytest.param(ZONE_HARD, None, None, QueueingHint.QUEUE, id="a node the cache never had: when unsure, queue"),
])
def test_hint_after_node_change(constraints: list[dict[str, Any]], old: Node | None, new: Node | None,
                                want: int) -> None:
    pl = plugin(cluster([]))
    assert pl._after_node_change(pod(foo="", constraints=constraints), old, new) == want


FOO_ZONE = [spread(1, "zone")]
FOO_ZONE_BAR_NODE = [spread(1, "zone"), spread(1, "node", selector=BAR)]


@pytest.mark.parametrize("constraints, old, new, want", [
    pytest.param(FOO_ZONE, None, placed("q", "fake-node", foo=""), QueueingHint.QUEUE,
                 id="a placed pod matching the selector is added"),
    pytest.param(FOO_ZONE, None, pod("q", foo=""), QueueingHint.SKIP, id="an unscheduled pod is added"),
    pytest.param(FOO_ZONE, pod("q", bar=""), pod("q", foo=""), QueueingHint.SKIP, id="an unscheduled pod is updated"),
    pytest.param(FOO_ZONE, pod("q", foo=""), None, QueueingHint.SKIP, id="an unscheduled pod is deleted"),
    pytest.param(FOO_ZONE, None, placed("q", "fake-node", ns="fake-namespace", foo=""), QueueingHint.SKIP,
                 id="a placed pod in another namespace is added"),
    pytest.param(FOO_ZONE, None, placed("q", "fake-node", bar=""), QueueingHint.SKIP,
                 id="a placed pod not matching the selector is added"),
    pytest.param(FOO_ZONE, placed("q", "fake-node", foo=""), None, QueueingHint.QUEUE,
                 id="a placed pod matching the selector is deleted"),
    pytest.param(FOO_ZONE, placed("q", "fake-node", bar=""), None, QueueingHint.SKIP,
                 id="a placed pod not matching the selector is deleted"),
    pytest.param(FOO_ZONE, placed("q", "fake-node", foo="", bar="bar1"), placed("q", "fake-node", foo="", bar="bar2"),
                 QueueingHint.SKIP, id="a placed pod changes an unrelated label"),
    pytest.param(FOO_ZONE, placed("q", "fake-node"), placed("q", "fake-node", foo=""), QueueingHint.QUEUE,
                 id="a placed pod gains the label the selector matches"),
    pytest.param(FOO_ZONE, placed("q", "fake-node", foo=""), placed("q", "fake-node"), QueueingHint.QUEUE,
                 id="a placed pod loses the label the selector matches"),
    pytest.param(FOO_ZONE, placed("q", "fake-node", foo="foo1"), placed("q", "fake-node", foo="foo2"),
                 QueueingHint.SKIP, id="a placed pod changes the value of a label the selector only needs to exist"),
    pytest.param(FOO_ZONE_BAR_NODE, placed("q", "fake-node", foo=""), placed("q", "fake-node", foo="", bar="bar2"),
                 QueueingHint.QUEUE, id="a placed pod gains the label of the second constraint's selector"),
    pytest.param(FOO_ZONE_BAR_NODE, placed("q", "fake-node", foo=""), placed("q", "fake-node", foo="", baz=""),
                 QueueingHint.SKIP, id="a placed pod gains a label no selector looks at"),
    pytest.param(FOO_ZONE_BAR_NODE, placed("q", "fake-node", foo="", bar=""),
                 placed("q", "fake-node", foo="", bar="bar2"), QueueingHint.SKIP,
                 id="a placed pod changes a value no selector compares"),
])
def test_hint_after_pod_change(constraints: list[dict[str, Any]], old: Pod | None, new: Pod | None, want: int) -> None:
    pl = plugin(cluster([]))
    assert pl._after_pod_change(pod(foo="", constraints=constraints), old, new) == want


@pytest.mark.parametrize("taints_policy, want", [
    pytest.param("Honor", QueueingHint.QUEUE, id="with nodeTaintsPolicy Honor a new toleration of its own queues"),
    pytest.param(None, QueueingHint.SKIP, id="without nodeTaintsPolicy Honor a new toleration does not matter"),
])
def test_hint_after_the_pods_own_toleration_change(taints_policy: str | None, want: int) -> None:
    pl = plugin(cluster([]))
    me = pod(foo="", constraints=[spread(1, "zone", taints_policy=taints_policy)])
    tolerating = pod(foo="", constraints=[spread(1, "zone", taints_policy=taints_policy)],
                     tolerations=[{"key": "dedicated", "operator": "Exists"}])
    assert pl._after_pod_change(me, me, tolerating) == want


def test_events_registered_are_upstreams() -> None:
    events = {e.event.resource: e.event.action for e in plugin(cluster([])).events_to_register()}
    assert events == {
        Resource.POD: (ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.UPDATE_POD_TOLERATION
                       | ActionType.DELETE),
        Resource.NODE: ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT,
    }


# ---------------------------------------------------------------------------- property
# the vectorized plugin equals a per-node walk over the pods

SELECTORS = [{"matchLabels": {"app": "a"}},
             {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]},
             {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
             {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]}, {}, NIL]
KEYS = [ZONE, HOST, "rack"]
DEDICATED = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]


@st.composite
def scenario(draw: Any) -> dict[str, Any]:
    nodes = []
    for i in range(draw(st.integers(1, 7))):
        labels: dict[str, str] = {}
        if draw(st.integers(0, 5)):
            labels[HOST] = f"n{i}"
        zone = draw(st.sampled_from(["z1", "z2", "z3", "", "", None, None]))
        if zone is not None:
            labels[ZONE] = zone
        if draw(st.booleans()):
            labels["rack"] = draw(st.sampled_from(["r1", "r2"]))
        disk = draw(st.sampled_from(["ssd", "hdd", None]))
        if disk:
            labels["disk"] = disk
        taints = draw(st.sampled_from([None, DEDICATED, [{"key": "soft", "effect": "PreferNoSchedule"}],
                                       [{"key": "gone", "effect": "NoExecute"}]]))
        nodes.append(n(f"n{i}", labels, taints))
    pods = []
    for j in range(draw(st.integers(0, 14))):
        labels = {}
        if draw(st.booleans()):
            labels["app"] = draw(st.sampled_from(["a", "b", "c"]))
        if draw(st.booleans()):
            labels["tier"] = "x"
        pods.append(pod(f"e{j}", node=f"n{draw(st.integers(0, len(nodes) - 1))}",
                        ns=draw(st.sampled_from(["default", "default", "other"])), labels=labels,
                        deleting=draw(st.integers(0, 4)) == 0))
    constraints = []
    used: set[tuple[str, str]] = set()
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2, 3]))):   # no constraints: the defaults apply
        key, when = draw(st.sampled_from(KEYS)), draw(st.sampled_from([DNS, SA]))
        if (key, when) in used:
            continue
        used.add((key, when))
        constraints.append(spread(draw(st.integers(1, 3)), key, when, draw(st.sampled_from(SELECTORS)),
                                  draw(st.sampled_from([None, 1, 2, 4])) if when == DNS else None,
                                  draw(st.sampled_from([None, "Honor", "Ignore"])),
                                  draw(st.sampled_from([None, "Honor", "Ignore"])),
                                  draw(st.sampled_from([None, ["app"]]))))
    me_labels = {}
    if draw(st.booleans()):
        me_labels["app"] = draw(st.sampled_from(["a", "b"]))
    if draw(st.booleans()):
        me_labels["tier"] = "x"
    me = pod("me", labels=me_labels, constraints=constraints,
             node_selector=draw(st.sampled_from([None, {"disk": "ssd"}])),
             affinity=draw(st.sampled_from([None, {"key": "rack", "operator": "NotIn", "values": ["r2"]}])),
             tolerations=draw(st.sampled_from([None, [{"key": "dedicated", "operator": "Exists"}]])))
    defaults = draw(st.sampled_from(["System", "List-hard", "List-soft"]))
    source = draw(st.sampled_from([None, FakeSpreadSelectors({"app": "a"}, []),
                                   FakeSpreadSelectors({}, [{"matchExpressions": [
                                       {"key": "tier", "operator": "Exists"}]}])]))
    candidates = draw(st.lists(st.booleans(), min_size=len(nodes), max_size=len(nodes)))
    return {"nodes": nodes, "pods": pods, "pod": me, "defaults": defaults, "source": source,
            "candidates": [f"n{i}" for i, c in enumerate(candidates) if c]}


def _args(defaults: str) -> dict[str, Any]:
    if defaults == "System":
        return {}
    when = DNS if defaults == "List-hard" else SA
    return {"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": when},
        {"maxSkew": 2, "topologyKey": HOST, "whenUnsatisfiable": when, "nodeTaintsPolicy": "Honor"}]}


@dataclass
class RefConstraint:
    max_skew: int
    key: str
    selector: LabelSelector
    min_domains: int
    honor_affinity: bool
    honor_taints: bool


def ref_constraints(sc: dict[str, Any], when: str) -> list[RefConstraint]:
    """Straight from the pod spec, as upstream's filterTopologySpreadConstraints and buildDefaultConstraints."""
    me: Pod = sc["pod"]
    raw = me.raw["spec"].get("topologySpreadConstraints") or []
    if raw:
        out = []
        for c in raw:
            if c["whenUnsatisfiable"] != when:
                continue
            sel = parse_label_selector(c.get("labelSelector"), "x")
            keys = {k: me.labels[k] for k in c.get("matchLabelKeys") or () if k in me.labels}
            if keys and not sel.nothing:
                sel = parse_label_selector({"matchLabels": keys, "matchExpressions": [
                    {"key": r.key, "operator": r.op, "values": sorted(r.values)} for r in sel.reqs]}, "x")
            out.append(RefConstraint(c["maxSkew"], c["topologyKey"], sel, c.get("minDomains") or 1,
                                     c.get("nodeAffinityPolicy", "Honor") == "Honor",
                                     c.get("nodeTaintsPolicy") == "Honor"))
        return out
    source = sc["source"]
    if source is None:
        return []
    got = source.default_selector(me.namespace, me.labels, me.owners)
    if got is None:
        return []
    exprs = []
    for raw_sel in got[1]:
        s = parse_label_selector(raw_sel, "x")
        exprs += [{"key": r.key, "operator": r.op, "values": sorted(r.values)} for r in s.reqs]
    if not got[0] and not exprs:
        return []
    sel = parse_label_selector({"matchLabels": got[0], "matchExpressions": exprs}, "x")
    defaults = _args(sc["defaults"]).get("defaultConstraints") or [
        {"maxSkew": 3, "topologyKey": HOST, "whenUnsatisfiable": SA},
        {"maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": SA}]
    return [RefConstraint(d["maxSkew"], d["topologyKey"], sel, 1, True, d.get("nodeTaintsPolicy") == "Honor")
            for d in defaults if d["whenUnsatisfiable"] == when]


def ref_policies_pass(me: Pod, node: Node, c: RefConstraint) -> bool:
    if c.honor_affinity:
        if any(node.labels.get(k) != v for k, v in me.node_selector.items()):
            return False
        aff = ((me.affinity or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        if aff:
            e = aff["nodeSelectorTerms"][0]["matchExpressions"][0]   # the one shape the scenario writes: NotIn
            if node.labels.get(e["key"]) in e["values"]:
                return False
    if c.honor_taints:
        for t in node.taints:
            if t.effect in ("NoSchedule", "NoExecute") and not any(
                    (not tol.key or tol.key == t.key) and (not tol.effect or tol.effect == t.effect)
                    and (tol.operator == "Exists" or tol.value == t.value) for tol in me.tolerations):
                return False
    return True


def ref_count(pods: list[Pod], node: str, c: RefConstraint, ns: str) -> int:
    """countPodsMatchSelector over the pods on one node."""
    if c.selector.nothing or not c.selector.reqs:
        return 0
    return sum(1 for p in pods if p.node_name == node and not p.deleting and p.namespace == ns
               and c.selector.matches(p.labels))


def ref_filter(sc: dict[str, Any], nodes: list[Node]) -> dict[str, Any]:
    me: Pod = sc["pod"]
    cons = ref_constraints(sc, DNS)
    if not cons:
        return {nd.name: None for nd in nodes}
    match: list[dict[str, int]] = [{} for _ in cons]
    for nd in nodes:
        if not all(c.key in nd.labels for c in cons):
            continue
        for i, c in enumerate(cons):
            if ref_policies_pass(me, nd, c):
                v = nd.labels[c.key]
                match[i][v] = match[i].get(v, 0) + ref_count(sc["pods"], nd.name, c, me.namespace)
    mins = [0 if len(m) < c.min_domains else min(m.values()) for m, c in zip(match, cons)]
    out: dict[str, Any] = {}
    for nd in nodes:
        out[nd.name] = None
        for i, c in enumerate(cons):
            if c.key not in nd.labels:
                out[nd.name] = (UU, ERR_REASON_NODE_LABEL_NOT_MATCH)
                break
            self_match = 1 if c.selector.matches(me.labels) else 0
            if match[i].get(nd.labels[c.key], 0) + self_match - mins[i] > c.max_skew:
                out[nd.name] = (U, ERR_REASON_CONSTRAINTS_NOT_MATCH)
                break
    return out


def ref_scores(sc: dict[str, Any], nodes: list[Node]) -> dict[str, int] | None:
    me: Pod = sc["pod"]
    cons = ref_constraints(sc, SA)
    filtered = [nd for nd in nodes if nd.name in sc["candidates"]]
    if not nodes or not cons:
        return None
    require_all = bool(me.topology_spread) or sc["defaults"] != "System"
    ignored = {nd.name for nd in filtered if require_all and not all(c.key in nd.labels for c in cons)}
    counts: list[dict[str, int]] = [{} for _ in cons]
    for nd in filtered:
        if nd.name in ignored:
            continue
        for i, c in enumerate(cons):
            if c.key != HOST:
                counts[i].setdefault(nd.labels.get(c.key, ""), 0)
    weights = [math.log((len(filtered) - len(ignored) if c.key == HOST else len(counts[i])) + 2)
               for i, c in enumerate(cons)]
    for nd in nodes:
        if require_all and not all(c.key in nd.labels for c in cons):
            continue
        for i, c in enumerate(cons):
            v = nd.labels.get(c.key, "")
            if ref_policies_pass(me, nd, c) and c.key != HOST and v in counts[i]:
                counts[i][v] += ref_count(sc["pods"], nd.name, c, me.namespace)
    raw: dict[str, int] = {}
    for nd in filtered:
        if nd.name in ignored:
            raw[nd.name] = 0
            continue
        score = 0.0
        for i, c in enumerate(cons):
            if c.key in nd.labels:
                cnt = (ref_count(sc["pods"], nd.name, c, me.namespace) if c.key == HOST
                       else counts[i][nd.labels[c.key]])
                score += float(cnt) * weights[i] + float(c.max_skew - 1)
        raw[nd.name] = int(Decimal(score).to_integral_value(ROUND_HALF_UP))
    kept = [v for k, v in raw.items() if k not in ignored]
    top, low = max([0, *kept]), min(kept, default=0)
    return {k: 0 if k in ignored else 100 if top == 0 else 100 * (top + low - v) // top for k, v in raw.items()}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_filter_and_scores_equal_a_per_node_walk_over_the_pods(sc: dict[str, Any]) -> None:
    cache = cluster(sc["nodes"], sc["pods"])
    pl = plugin(cache, _args(sc["defaults"]), sc["source"])
    nodes = [cache.node(name) for name in cache.nodes.names_of(cache.nodes.rows())]
    assert run_filter(pl, sc["pod"], cache) == ref_filter(sc, nodes)
    if sc["candidates"]:
        assert run_score(pl, sc["pod"], cache, sc["candidates"]) == ref_scores(sc, nodes)


def check_update(pl: PodTopologySpread, me: Pod, cache: Cache, other: Pod, add: bool) -> None:
    """AddPod (``add``) or RemovePod of ``other`` on its node, on a clone of a PreFilter state of the cache as it
    is, filters as a PreFilter run once the cache has ``other`` bound there (or no longer has it), with the same
    counts and minimum, and leaves the state it cloned alone. The cache is left changed."""
    state = prefiltered(pl, me, cache)
    before = filter_with(pl, state, me, cache), spread_counts(state, cache)
    clone = state.clone()
    row = cache.nodes.row(other.node_name)
    assert (pl.add_pod(clone, me, other, row) if add else pl.remove_pod(clone, me, other, row)).is_success()
    assert (filter_with(pl, state, me, cache), spread_counts(state, cache)) == before
    if add:
        cache.add_pod(other)
    else:
        cache.remove_pod(other)
    assert filter_with(pl, clone, me, cache) == run_filter(pl, me, cache)
    assert spread_counts(clone, cache) == fresh_spread_counts(pl, me, cache)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario(), st.integers(0, 6))
def test_add_pod_and_remove_pod_equal_a_prefilter_with_the_pod_added_or_removed(sc: dict[str, Any], where: int) -> None:
    """For each placed pod P: RemovePod of P, and AddPod of P moved to some node, against PreFilter runs."""
    cache = cluster(sc["nodes"], sc["pods"])
    pl = plugin(cache, _args(sc["defaults"]), sc["source"])
    me = sc["pod"]
    if pl.pre_filter(CycleState(), me, cache.nodes)[1].code == Code.SKIP:
        return                       # no hard constraints: PreFilter skips whatever the pods, and no update runs
    names = [obj["metadata"]["name"] for obj in sc["nodes"]]
    for i, p in enumerate(sc["pods"]):
        check_update(pl, me, cache, p, add=False)
        nominated = dataclasses.replace(p, node_name=names[(where + i) % len(names)])
        check_update(pl, me, cache, nominated, add=True)
        cache.remove_pod(nominated)
        cache.add_pod(p)
