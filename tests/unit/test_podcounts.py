"""The cache's incremental pod counts against a plain walk over the placed pods, on random clusters."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.framework.topology import PREFERRED, REQUIRED_AFFINITY, REQUIRED_ANTI, domain_counts, pod_matches
from scheduler.model import (
    EVERYTHING, NOTHING, AffinityTerm, LabelSelector, Node, Pod, PodAffinity, PodSelection, Requirement,
)
from scheduler.state.cache import Cache

NAMESPACES = ("a", "b", "c")
NS_LABELS = {"a": {"team": "x"}, "b": {"team": "y"}, "c": {}}
ZONE = "topology.kubernetes.io/zone"


def selections() -> st.SearchStrategy[PodSelection]:
    req = st.builds(Requirement, st.sampled_from(["app", "tier"]), st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
                    st.sampled_from([frozenset(), frozenset({"web"}), frozenset({"web", "db"})]))
    selector = st.one_of(st.just(NOTHING), st.just(EVERYTHING),
                         st.lists(req, max_size=2).map(lambda rs: LabelSelector(tuple(sorted(set(rs), key=repr)))))
    ns_selector = st.sampled_from([NOTHING, EVERYTHING, LabelSelector((Requirement("team", "In", frozenset({"x"})),))])
    return st.builds(PodSelection, selector, st.frozensets(st.sampled_from(NAMESPACES), max_size=2), ns_selector)


def terms() -> st.SearchStrategy[AffinityTerm]:
    return st.builds(AffinityTerm, selections(), st.sampled_from(["kubernetes.io/hostname", ZONE]),
                     st.integers(1, 100))


def pods() -> st.SearchStrategy[Pod]:
    aff = st.one_of(st.none(), st.builds(PodAffinity, st.lists(terms(), max_size=1).map(tuple),
                                         st.lists(terms(), max_size=1).map(tuple), st.lists(terms(), max_size=1).map(tuple),
                                         st.lists(terms(), max_size=1).map(tuple)))
    labels = st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["web", "db"]), max_size=2)
    return st.builds(lambda ns, lb, a, d: Pod(uid="", namespace=ns, name="p", labels=lb, pod_affinity=a, deleting=d),
                     st.sampled_from(NAMESPACES), labels, aff, st.booleans())


ops = st.lists(st.tuples(st.sampled_from(["assume", "bind", "forget", "delete", "relabel", "node-gone"]),
                         st.integers(0, 7), pods()), max_size=40)


def cluster() -> Cache:
    cache = Cache()
    for i in range(6):
        cache.add_node(Node(f"n{i}", labels={"kubernetes.io/hostname": f"n{i}", ZONE: f"z{i % 3}"}))
    for ns, labels in NS_LABELS.items():
        cache.set_namespace(ns, labels)
    return cache


def brute_column(cache: Cache, parts, skip_deleting: bool) -> np.ndarray:
    out = np.zeros(cache.nodes.cap, dtype=np.int64)
    for st_ in cache.pods.values():
        p = st_.pod
        if skip_deleting and p.deleting:
            continue
        if pod_matches(parts, p, NS_LABELS.get(p.namespace, {})):
            out[cache.nodes.row(st_.node)] += 1
    return out


@settings(max_examples=150, deadline=None)
@given(ops, st.lists(selections(), min_size=1, max_size=2).map(tuple), st.booleans(), st.booleans())
def test_counts_match_a_walk_over_placed_pods(script, parts, skip_deleting, register_first):
    cache = cluster()
    if register_first:   # a column registered before the pods arrive is kept up to date incrementally
        cache.counts.column(parts, skip_deleting)
    for n, (op, slot, pod) in enumerate(script):
        uid = f"u{slot}"
        pod = dataclasses.replace(pod, uid=uid, name=uid)
        node = f"n{slot % 6}"
        if op == "assume" and uid not in cache.pods:
            cache.assume(pod, node)
        elif op == "bind":
            cache.add_pod(dataclasses.replace(pod, node_name=cache.where(uid) or node))
        elif op == "forget":
            cache.forget(pod)
        elif op == "delete":
            cache.remove_pod(pod)
        elif op == "relabel" and uid in cache.pods:
            cache.update_pod(dataclasses.replace(pod, node_name=cache.where(uid)))
        elif op == "node-gone":
            cache.remove_node(node)
    got = cache.counts.column(parts, skip_deleting)
    want = brute_column(cache, parts, skip_deleting)
    assert got[: cache.nodes.n].tolist() == want[: cache.nodes.n].tolist()
    # the held terms, by kind, against the placed pods' own terms
    want_held: dict = {}
    for st_ in cache.pods.values():
        aff = st_.pod.pod_affinity
        if aff is None:
            continue
        row = cache.nodes.row(st_.node)
        for kind, ts, sign in ((REQUIRED_ANTI, aff.required_anti, 0), (REQUIRED_AFFINITY, aff.required, 0),
                               (PREFERRED, aff.preferred, 1), (PREFERRED, aff.preferred_anti, -1)):
            for t in ts:
                arr = want_held.setdefault((kind, t.selection, t.topology_key), np.zeros(cache.nodes.cap, np.int64))
                arr[row] += t.weight * sign if sign else 1
    got_held = {(k, h.selection, h.topology_key): h.counts[: cache.nodes.n].tolist()
                for k in (REQUIRED_ANTI, REQUIRED_AFFINITY, PREFERRED) for h in cache.counts.held_terms(k)}
    assert set(got_held) == {k for k in want_held}
    for k, arr in want_held.items():
        assert got_held[k] == arr[: cache.nodes.n].tolist(), k


def test_a_namespace_relabel_recounts_columns_that_select_namespaces_by_label():
    cache = cluster()
    team_x = PodSelection(EVERYTHING, frozenset(), LabelSelector((Requirement("team", "In", frozenset({"x"})),)))
    cache.assume(Pod(uid="1", namespace="b", name="p", labels={"app": "web"}), "n0")
    assert cache.counts.column((team_x,))[cache.nodes.row("n0")] == 0
    cache.set_namespace("b", {"team": "x"})
    assert cache.counts.column((team_x,))[cache.nodes.row("n0")] == 1


def test_domain_counts_sum_per_zone_and_ignore_nodes_without_the_key():
    cache = cluster()
    cache.add_node(Node("bare"))
    for i, node in enumerate(["n0", "n3", "n1", "bare"]):     # n0 and n3 are in z0, n1 in z1
        cache.assume(Pod(uid=str(i), namespace="a", name=str(i), labels={"app": "web"}), node)
    sel = (PodSelection(LabelSelector((Requirement("app", "In", frozenset({"web"})),)), frozenset({"a"})),)
    per_zone = domain_counts(cache.nodes, ZONE, cache.counts.column(sel))
    values = cache.nodes.label_values(ZONE)
    assert {values[i]: int(c) for i, c in enumerate(per_zone) if i} == {"z0": 2, "z1": 1, "z2": 0}
    assert int(per_zone[0]) == 1    # the pod on the node without a zone lands in "no domain"


def test_columns_grow_with_the_node_table():
    cache = cluster()
    sel = (PodSelection(EVERYTHING, frozenset({"a"})),)
    cache.counts.column(sel)
    for i in range(3000):
        cache.add_node(Node(f"m{i}"))
    cache.assume(Pod(uid="x", namespace="a", name="x"), "m2999")
    col = cache.counts.column(sel)
    assert len(col) == cache.nodes.cap and col[cache.nodes.row("m2999")] == 1
