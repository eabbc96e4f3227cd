"""scheduler/framework/nodetable.py and scheduler/state/cache.py: the node table's rows and columns, and pods
charged to them (upstream's cache.go)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from scheduler.framework.nodetable import R_CPU, R_MEMORY, R_PODS, NodeTable
from scheduler.model import (
    DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, Node, Pod, Taint, parse_node, parse_pod, parse_pod_group,
)
from scheduler.state.cache import Cache

Gi = 2**30


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: str = "110", labels: dict[str, str] | None = None,
         taints: list[dict[str, str]] | None = None, unschedulable: bool = False,
         images: list[tuple[list[str], int]] | None = None, extra: dict[str, Any] | None = None) -> Node:
    alloc = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    return parse_node({"metadata": {"name": name, "labels": labels or {}},
                       "spec": {"taints": taints or [], "unschedulable": unschedulable},
                       "status": {"allocatable": alloc,
                                  "images": [{"names": n, "sizeBytes": s} for n, s in images or []]}})


def pod(uid: str, node_name: str = "", cpu: str | None = "500m", memory: str | None = "1Gi",
        host_ports: list[dict[str, Any]] | None = None, phase: str = "Running", extra: dict[str, Any] | None = None) -> Pod:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    requests.update(extra or {})
    return parse_pod({"metadata": {"name": uid, "namespace": "ns", "uid": uid},
                      "spec": {"nodeName": node_name,
                               "containers": [{"name": "c", "resources": {"requests": requests},
                                               "ports": host_ports or []}]},
                      "status": {"phase": phase}})


def requested(cache: Cache, name: str) -> tuple[int, int, int]:
    """(cpu millicores, memory bytes, pods) charged to a node's row."""
    t = cache.nodes
    row = t.row(name)
    assert row is not None, f"{name} has no row"
    return int(t.requested[row, R_CPU]), int(t.requested[row, R_MEMORY]), int(t.requested[row, R_PODS])


def nonzero(cache: Cache, name: str) -> tuple[int, int]:
    row = cache.nodes.row(name)
    return int(cache.nodes.nonzero[row, 0]), int(cache.nodes.nonzero[row, 1])


def valid_names(cache: Cache) -> list[str]:
    return cache.nodes.names_of(cache.nodes.rows())


# ---------------------------------------------------------------------------- nodes


def test_add_node_fills_a_row() -> None:
    c = Cache()
    c.add_node(node("a", cpu="2", memory="4Gi", pods="10", extra={"nvidia.com/gpu": "1"}))
    t = c.nodes
    row = t.row("a")
    assert valid_names(c) == ["a"] and len(t) == 1
    assert (t.alloc[row, R_CPU], t.alloc[row, R_MEMORY], t.alloc[row, R_PODS]) == (2000, 4 * Gi, 10)
    assert t.alloc[row, t.resource_index["nvidia.com/gpu"]] == 1
    assert c.node("a") is t.node(row) and c.node("ghost") is None


def test_labels_are_interned_per_key() -> None:
    c = Cache()
    c.add_node(node("a", labels={"zone": "z1", "disk": "ssd"}))
    c.add_node(node("b", labels={"zone": "z2"}))
    c.add_node(node("c", labels={"zone": "z1"}))
    t = c.nodes
    zone = t.label("zone")
    rows = [t.row(n) for n in "abc"]
    assert [int(zone[r]) for r in rows] == [t.label_id("zone", "z1"), t.label_id("zone", "z2"), t.label_id("zone", "z1")]
    assert t.label_id("zone", "z1") != t.label_id("zone", "z2") and 0 not in (t.label_id("zone", "z1"),)
    assert int(t.label("disk")[t.row("b")]) == 0, "a node without the key has id 0"
    assert t.label_id("zone", "z9") == 0, "a value no node carries has id 0"
    assert t.label_id("rack", "r1") == 0 and t.label("rack") is None, "a key no node carries has no column"
    assert t.label_values("zone")[t.label_id("zone", "z2")] == "z2" and t.label_values("zone")[0] == ""


def test_update_node_rewrites_its_columns() -> None:
    c = Cache()
    c.add_node(node("a", cpu="2", labels={"zone": "z1", "old": "x"}, taints=[{"key": "k", "effect": "NoSchedule"}],
                    images=[(["nginx:1"], 100)]))
    c.add_node(node("b", labels={"zone": "z1"}, taints=[{"key": "k", "effect": "NoSchedule"}], images=[(["nginx:1"], 100)]))
    c.update_node(node("a", cpu="3", labels={"zone": "z2"}, unschedulable=True,
                       taints=[{"key": "other", "effect": "NoExecute"}], images=[(["redis:7"], 50)]))
    t = c.nodes
    a, b = t.row("a"), t.row("b")
    assert t.alloc[a, R_CPU] == 3000
    assert t.label("zone")[a] == t.label_id("zone", "z2") and t.label("zone")[b] == t.label_id("zone", "z1")
    assert t.label("old")[a] == 0, "a label the node lost reads as absent"
    assert t.unschedulable[a] and not t.unschedulable[b]
    k, other = t.taint_ids[Taint("k")], t.taint_ids[Taint("other", "", "NoExecute")]
    assert not t.taints[a, k] and t.taints[a, other] and t.taints[b, k]
    assert t.image_size("nginx:1")[a] == 0 and t.image_size("nginx:1")[b] == 100
    assert t.image_size("redis:7")[a] == 50 and t.image_size("busybox") is None
    assert valid_names(c) == ["a", "b"], "an update does not add a row"


def test_a_nodes_taints_are_its_row_in_the_taint_columns() -> None:
    c = Cache()
    c.add_node(node("a", taints=[{"key": "x", "effect": "NoSchedule"}, {"key": "y", "effect": "PreferNoSchedule"}]))
    c.add_node(node("b", taints=[{"key": "y", "effect": "PreferNoSchedule"}]))
    t = c.nodes
    x, y = t.taint_ids[Taint("x")], t.taint_ids[Taint("y", "", "PreferNoSchedule")]
    assert (t.taints[t.row("a"), x], t.taints[t.row("a"), y]) == (True, True)
    assert (t.taints[t.row("b"), x], t.taints[t.row("b"), y]) == (False, True)
    c.update_node(node("a", taints=[{"key": "y", "effect": "PreferNoSchedule"}]))
    assert (t.taints[t.row("a"), x], t.taints[t.row("a"), y]) == (False, True), "an update rewrites the row"


def test_rows_is_cached_until_the_set_of_nodes_changes() -> None:
    c = Cache()
    c.add_node(node("a"))
    first = c.nodes.rows()
    assert c.nodes.rows() is first
    c.add_pod(pod("p", "a"))
    assert c.nodes.rows() is first, "charging a pod does not change which rows hold nodes"
    c.add_node(node("b"))
    second = c.nodes.rows()
    assert second is not first and list(second) == [0, 1]
    c.remove_node("a")
    assert c.nodes.names_of(c.nodes.rows()) == ["b"]


def test_a_removed_node_without_pods_frees_its_row_for_reuse() -> None:
    c = Cache()
    c.add_node(node("a", labels={"zone": "z1"}, taints=[{"key": "k", "effect": "NoSchedule"}], images=[(["img"], 9)]))
    c.add_node(node("b"))
    row = c.nodes.row("a")
    c.remove_node("a")
    t = c.nodes
    assert t.row("a") is None and c.node("a") is None and valid_names(c) == ["b"]
    c.add_node(node("c"))
    assert t.row("c") == row, "the freed row is reused"
    assert t.label("zone")[row] == 0 and not t.taints[row].any() and t.image_size("img")[row] == 0
    assert requested(c, "c") == (0, 0, 0)


# ---------------------------------------------------------------------------- pods


def test_a_bound_pod_is_charged_and_discharged() -> None:
    c = Cache()
    c.add_node(node("a"))
    p = pod("p", "a", cpu="500m", memory=None,
            host_ports=[{"containerPort": 80, "hostPort": 8080}, {"containerPort": 53, "hostPort": 53,
                                                                    "protocol": "UDP", "hostIP": "10.0.0.1"}])
    c.add_pod(p)
    row = c.nodes.row("a")
    assert requested(c, "a") == (500, 0, 1)
    assert nonzero(c, "a") == (500, DEFAULT_MEMORY_REQUEST), "nonzero counts the default for missing memory"
    assert c.nodes.port_use("TCP", 8080)[row] == 1 and c.nodes.port_use("UDP", 53)[row] == 1
    assert c.nodes.port_use_on("0.0.0.0", "TCP", 8080)[row] == 1 and c.nodes.port_use_on("10.0.0.1", "UDP", 53)[row] == 1
    assert c.where("p") == "a" and [x.uid for x in c.pods_on("a")] == ["p"]
    c.remove_pod(p)
    assert requested(c, "a") == (0, 0, 0) and nonzero(c, "a") == (0, 0)
    assert c.nodes.port_use("TCP", 8080)[row] == 0 and c.nodes.port_use_on("10.0.0.1", "UDP", 53)[row] == 0
    assert c.where("p") is None and list(c.pods_on("a")) == []


def test_pods_without_requests_count_defaults_in_nonzero_only() -> None:
    c = Cache()
    c.add_node(node("a"))
    c.add_pod(pod("p", "a", cpu=None, memory=None))
    c.add_pod(pod("q", "a", cpu=None, memory=None))
    assert requested(c, "a") == (0, 0, 2)
    assert nonzero(c, "a") == (2 * DEFAULT_MILLI_CPU_REQUEST, 2 * DEFAULT_MEMORY_REQUEST)


def test_assume_then_add_pod_confirms_without_charging_twice() -> None:
    c = Cache()
    c.add_node(node("a"))
    p = pod("p", cpu="1")
    c.assume(p, "a")
    assert c.is_assumed("p") and requested(c, "a") == (1000, Gi, 1)
    bound = pod("p", "a", cpu="1")
    c.add_pod(bound)
    assert not c.is_assumed("p") and requested(c, "a") == (1000, Gi, 1)
    c.forget(bound)
    assert requested(c, "a") == (1000, Gi, 1), "forget leaves a confirmed pod alone"


def test_assume_then_forget_takes_the_charge_back() -> None:
    c = Cache()
    c.add_node(node("a"))
    p = pod("p", cpu="1", host_ports=[{"containerPort": 1, "hostPort": 9000}])
    c.assume(p, "a")
    c.forget(p)
    assert requested(c, "a") == (0, 0, 0) and nonzero(c, "a") == (0, 0)
    assert c.nodes.port_use("TCP", 9000)[c.nodes.row("a")] == 0
    assert c.where("p") is None and not c.is_assumed("p")


def test_assuming_a_pod_twice_is_a_bug() -> None:
    c = Cache()
    c.add_node(node("a"))
    c.assume(pod("p"), "a")
    with pytest.raises(ValueError, match="already in the cache"):
        c.assume(pod("p"), "a")


def test_a_pod_assumed_on_one_node_but_bound_to_another_moves_its_charge() -> None:
    c = Cache()
    c.add_node(node("a"))
    c.add_node(node("b"))
    c.assume(pod("p", cpu="1"), "a")
    c.add_pod(pod("p", "b", cpu="1"))
    assert requested(c, "a") == (0, 0, 0) and requested(c, "b") == (1000, Gi, 1)
    assert c.where("p") == "b" and not c.is_assumed("p")


def test_an_update_with_new_requests_recharges() -> None:
    c = Cache()
    c.add_node(node("a"))
    c.add_pod(pod("p", "a", cpu="1"))
    c.update_pod(pod("p", "a", cpu="250m"))
    assert requested(c, "a") == (250, Gi, 1)


@pytest.mark.parametrize("phase", [
    pytest.param("Succeeded", id="a succeeded pod frees its node"),
    pytest.param("Failed", id="a failed pod frees its node"),
])
def test_terminal_pods_are_discharged(phase: str) -> None:
    c = Cache()
    c.add_node(node("a"))
    c.add_pod(pod("p", "a"))
    c.update_pod(pod("p", "a", phase=phase))
    assert requested(c, "a") == (0, 0, 0) and c.where("p") is None
    c.add_pod(pod("q", "a", phase=phase))
    assert requested(c, "a") == (0, 0, 0), "a pod that arrives terminal is never charged"


def test_a_pod_without_a_node_is_not_charged() -> None:
    c = Cache()
    c.add_node(node("a"))
    c.add_pod(pod("p", ""))
    assert c.where("p") is None and requested(c, "a") == (0, 0, 0)


def test_a_pod_on_an_unknown_node_waits_on_an_invalid_row() -> None:
    c = Cache()
    c.add_node(node("a"))
    c.add_pod(pod("p", "later", cpu="1"))
    t = c.nodes
    row = t.row("later")
    assert row is not None and not t.valid[row]
    assert valid_names(c) == ["a"], "a placeholder row is not offered to plugins"
    assert requested(c, "later") == (1000, Gi, 1)
    c.add_node(node("later", labels={"zone": "z"}))
    assert t.row("later") == row and t.valid[row] and valid_names(c) == ["a", "later"]
    assert requested(c, "later") == (1000, Gi, 1), "the node arrives with the pod already charged"
    assert t.label("zone")[row] == t.label_id("zone", "z")


def test_a_placeholder_row_goes_with_its_last_pod() -> None:
    c = Cache()
    c.add_pod(pod("p", "ghost"))
    row = c.nodes.row("ghost")
    c.remove_pod(pod("p", "ghost"))
    assert c.nodes.row("ghost") is None and row in c.nodes.free


def test_a_removed_node_keeps_its_charge_until_its_last_pod_goes() -> None:
    c = Cache()
    c.add_node(node("a", labels={"zone": "z1"}))
    c.add_node(node("b"))
    c.add_pod(pod("p", "a", cpu="1"))
    c.assume(pod("q", cpu="1"), "a")
    row = c.nodes.row("a")
    c.remove_node("a")
    t = c.nodes
    assert valid_names(c) == ["b"] and c.node("a") is None
    assert t.row("a") == row and not t.valid[row]
    assert requested(c, "a") == (2000, 2 * Gi, 2)
    assert t.label("zone")[row] == 0 and t.alloc[row].sum() == 0
    c.remove_pod(pod("p", "a"))
    assert t.row("a") == row, "one pod still names the node"
    c.forget(pod("q"))
    assert t.row("a") is None and row in t.free, "the last pod freed the row"
    c.add_node(node("c"))
    assert t.row("c") == row and requested(c, "c") == (0, 0, 0) and nonzero(c, "c") == (0, 0)


def test_a_node_removed_and_added_back_keeps_its_pods_charge() -> None:
    c = Cache()
    c.add_node(node("a"))
    c.add_pod(pod("p", "a", cpu="1"))
    c.remove_node("a")
    c.add_node(node("a", cpu="8"))
    assert valid_names(c) == ["a"] and requested(c, "a") == (1000, Gi, 1)
    assert c.nodes.alloc[c.nodes.row("a"), R_CPU] == 8000


# ---------------------------------------------------------------------------- shape


def test_the_table_grows_past_its_initial_capacity() -> None:
    c = Cache()
    start = c.nodes.cap
    assert start == 1024
    n = start + 100
    c.add_node(node("n0", labels={"zone": "first"}, taints=[{"key": "t", "effect": "NoSchedule"}], images=[(["img"], 5)]))
    c.add_pod(pod("p0", "n0", cpu="1", host_ports=[{"containerPort": 1, "hostPort": 7000}]))
    for i in range(1, n):
        c.add_node(node(f"n{i}", labels={"zone": f"z{i % 3}"}))
    c.add_pod(pod("plast", f"n{n - 1}", cpu="2"))
    t = c.nodes
    assert t.cap >= n and len(t) == n and len(t.valid) == t.cap
    r0, rl = t.row("n0"), t.row(f"n{n - 1}")
    assert t.label("zone")[r0] == t.label_id("zone", "first") and t.label("zone")[rl] == t.label_id("zone", f"z{(n - 1) % 3}")
    assert t.taints[r0, t.taint_ids[Taint("t")]] and t.image_size("img")[r0] == 5
    assert t.port_use("TCP", 7000)[r0] == 1 and len(t.port_use("TCP", 7000)) == t.cap
    assert requested(c, "n0") == (1000, Gi, 1) and requested(c, f"n{n - 1}") == (2000, Gi, 1)
    assert all(len(col) == t.cap for col in (t.alloc, t.requested, t.nonzero, t.unschedulable, t.taints))


def test_extended_resources_add_columns_without_losing_data() -> None:
    c = Cache()
    c.add_node(node("a", cpu="4"))
    c.add_pod(pod("p", "a", cpu="1"))
    width = len(c.nodes.resources)
    c.add_node(node("gpu", extra={"nvidia.com/gpu": "8"}))
    c.add_pod(pod("q", "gpu", cpu="1", extra={"nvidia.com/gpu": "2", "example.com/foo": "3"}))
    t = c.nodes
    gpu, foo = t.resource_col("nvidia.com/gpu"), t.resource_col("example.com/foo")
    assert len(t.resources) == width + 2 == t.alloc.shape[1] == t.requested.shape[1]
    assert t.alloc[t.row("a"), R_CPU] == 4000 and requested(c, "a") == (1000, Gi, 1), "old columns survive widening"
    assert t.alloc[t.row("gpu"), gpu] == 8 and t.requested[t.row("gpu"), gpu] == 2
    assert t.requested[t.row("gpu"), foo] == 3 and t.alloc[t.row("gpu"), foo] == 0
    assert t.alloc[t.row("a"), gpu] == 0
    c.remove_pod(pod("q", "gpu"))
    assert not t.requested[t.row("gpu")].any()


def test_a_new_taint_widens_the_taint_columns_without_losing_data() -> None:
    t = NodeTable(capacity=4)
    t.set_node(node("a", taints=[{"key": "one", "effect": "NoSchedule"}]))
    t.set_node(node("b", taints=[{"key": "two", "effect": "NoExecute"}]))
    a, b = t.row("a"), t.row("b")
    assert t.taints.shape[1] == 2
    assert np.array_equal(t.taints[[a, b]], [[True, False], [False, True]])


# ---------------------------------------------------------------------------- the gang index


def member(uid: str, group: str = "g", ns: str = "ns", node: str = "") -> Pod:
    return Pod(uid=uid, namespace=ns, name=uid, pod_group=group, node_name=node, requests={"cpu": 100})


def test_membership_follows_pod_adds_moves_and_deletes() -> None:
    gangs = Cache().gangs
    a, b = member("a"), member("b")
    gangs.update_membership(None, a)
    gangs.update_membership(None, b)
    assert gangs.member_uids("ns/g") == {"a", "b"}
    moved = member("a", group="h")
    gangs.update_membership(a, moved)
    assert gangs.member_uids("ns/g") == {"b"} and gangs.member_uids("ns/h") == {"a"}
    gangs.update_membership(b, None)
    assert "ns/g" not in gangs.members, "an emptied group leaves the index"
    assert gangs.member_uids("ns/g") == set()
    other_ns = member("a", group="h", ns="other")
    gangs.update_membership(moved, other_ns)
    assert gangs.member_uids("ns/h") == set() and gangs.member_uids("other/h") == {"a"}


def test_placed_members_are_the_cache_pods_of_the_gang_bound_or_assumed() -> None:
    cache = Cache()
    cache.add_node(parse_node({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "pods": "10"}}}))
    cache.assume(member("a"), "n1")
    cache.add_pod(member("b", node="n1"))
    cache.add_pod(member("x", group="other", node="n1"))
    assert cache.gangs.placed_members("ns/g") == {"a": "n1", "b": "n1"}
    cache.forget(member("a"))
    cache.remove_pod(member("b", node="n1"))
    assert cache.gangs.placed_members("ns/g") == {} and "ns/g" not in cache.gangs.placed


def test_the_podgroup_record_is_kept_by_key() -> None:
    gangs = Cache().gangs
    pg = parse_pod_group({"metadata": {"name": "g", "namespace": "ns"}, "spec": {"minMember": 2}})
    gangs.set_group(pg)
    assert gangs.group("ns/g") is pg
    gangs.remove_group("ns/g")
    assert gangs.group("ns/g") is None


def test_a_bound_member_whose_group_label_changes_moves_in_the_gang_index() -> None:
    cache = Cache()
    cache.add_node(parse_node({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "pods": "10"}}}))
    cache.add_pod(member("a", node="n1"))
    cache.add_pod(member("a", group="h", node="n1"))
    assert cache.gangs.placed_members("ns/g") == {} and cache.gangs.placed_members("ns/h") == {"a": "n1"}
    cache.add_pod(dataclasses.replace(member("a", node="n1"), pod_group=""))
    assert cache.gangs.placed == {}


# ---------------------------------------------------------------------------- nominations

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _walk_plan(cache: Cache, p: Pod) -> dict[int, tuple[int, ...]]:
    """What the nominated pods of priority >= p's (not p) add per valid row, by walking them."""
    nodes = cache.nodes
    out: dict[int, list[int]] = {}
    for uid, name in cache.nominations.node_of.items():
        q = cache.nominations.pods[uid]
        row = nodes.row(name)
        if uid == p.uid or q.priority < p.priority or row is None or not nodes.valid[row]:
            continue
        acc = out.setdefault(row, [0] * len(nodes.resources))
        for r, v in q.requests.items():
            if r in nodes.resource_index:      # no node has it: no column (Fit rejects the pod anyway)
                acc[nodes.resource_index[r]] += v
        acc[R_PODS] += 1
    return {row: tuple(v) for row, v in out.items()}


_NOM_OPS = st.lists(st.tuples(st.sampled_from(["set", "clear", "add_node", "remove_node", "plan"]),
                              st.integers(0, 5), st.sampled_from(["n0", "n1", "n2", "n3"]), st.sampled_from([0, 5, 10]),
                              st.booleans()), max_size=40)


@settings(max_examples=150, deadline=None)
@given(_NOM_OPS)
def test_nominations_plan_matches_a_walk_over_the_nominated_pods(ops: list[tuple[str, int, str, int, bool]]) -> None:
    """The per-priority sums kept on every set and clear equal a walk, whatever the order of nominations, nodes
    coming and going (rows reused) and new extended resources."""
    cache = Cache()
    for name in ("n0", "n1"):
        cache.add_node(node(name))
    nominated: dict[str, Pod] = {}
    for op, i, name, prio, gpu in ops:
        uid = f"p{i}"
        if op == "set":
            q = dataclasses.replace(pod(uid, extra={"example.com/gpu": "1"} if gpu else None), priority=prio)
            nominated[uid] = q
            cache.nominations.set(q, name)
        elif op == "clear":
            cache.nominations.clear(uid)
        elif op == "add_node":
            cache.add_node(node(name, extra={"example.com/gpu": "2"} if gpu else None))
        elif op == "remove_node":
            cache.remove_node(name)
        else:
            q = dataclasses.replace(nominated.get(uid) or pod(uid), priority=prio)
            plan = cache.nominations.plan(q, cache.nodes)
            want = _walk_plan(cache, q)
            got = {} if plan is None else {r: tuple(d) for r, d in zip(plan.rows.tolist(), plan.delta.tolist())}
            assert got == want
            if plan is not None:
                assert sorted(r for r, _ in plan.pods(cache.nodes)) == sorted(
                    r for r, c in want.items() for _ in range(c[R_PODS]))
    for name in {"n0", "n1", "n2", "n3"}:
        assert sorted(p.uid for p in cache.nominations.on(name)) == sorted(
            u for u, n in cache.nominations.node_of.items() if n == name)


def _resizing(status_requests: dict[str, str] | None) -> Pod:
    """A bound pod "r": container "c" asks 1 cpu and nothing else, "m" 1Gi of memory; c's status reports
    ``status_requests`` (None: no resources)."""
    cs: dict[str, Any] = {"name": "c"}
    if status_requests is not None:
        cs["resources"] = {"requests": status_requests}
    return parse_pod({"metadata": {"name": "r", "namespace": "ns", "uid": "r"},
                      "spec": {"nodeName": "n1", "containers": [
                          {"name": "c", "resources": {"requests": {"cpu": "1"}}},
                          {"name": "m", "resources": {"requests": {"memory": "1Gi"}}}]},
                      "status": {"phase": "Running", "containerStatuses": [cs]}})


@pytest.mark.parametrize("before, after, want", [
    pytest.param(None, {"cpu": "3"}, (3000, Gi, 1), id="a status reporting more than the spec re-charges the node"),
    pytest.param({"cpu": "3"}, {"cpu": "1"}, (1000, Gi, 1), id="a finished resize down gives the room back"),
    pytest.param(None, {"cpu": "1", "memory": "0"}, (1000, Gi, 1),
                 id="a status naming an explicit zero memory moves only the nonzero charge"),
])
def test_a_bound_pods_status_update_recharges_what_it_holds(before: dict[str, str] | None, after: dict[str, str],
                                                             want: tuple[int, int, int]) -> None:
    cache = Cache()
    cache.add_node(node("n1"))
    old, new = _resizing(before), _resizing(after)
    cache.add_pod(old)
    cache.update_pod(new)
    assert requested(cache, "n1") == want
    assert nonzero(cache, "n1") == (new.nonzero_cpu, new.nonzero_memory)
    cache.remove_pod(new)
    assert requested(cache, "n1") == (0, 0, 0) and nonzero(cache, "n1") == (0, 0), "nothing is left behind"
