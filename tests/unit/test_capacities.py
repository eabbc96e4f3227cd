"""The per-class CSIStorageCapacity index (scheduler/state/capacities.py) against upstream's walk.

hasEnoughCapacity, per node: some object of the claim's class, with a limit (maximumVolumeSize, else capacity) of
at least the request and a nodeTopology that selects the node. The index must answer that for every node whatever
the order of objects added, changed, moved between classes and deleted, and of nodes added, relabelled and
removed (rows reused), including a class first asked about midway.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.model import CSIStorageCapacity, parse_csi_storage_capacity, parse_node
from scheduler.state.cache import Cache

NODES = ("n0", "n1", "n2", "n3", "n4")
ZONE = "topology.kubernetes.io/zone"
HOST = "topology.example.com/node"
RACK = "topology.example.com/rack"


def node(name: str, zone: str, rack: str | None = None, host: bool = True) -> Any:
    labels = {ZONE: zone, **({HOST: name} if host else {}), **({RACK: rack} if rack is not None else {})}
    return parse_node({"metadata": {"name": name, "labels": labels},
                       "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})


def capacity(i: int, cls: str, size: str | None, topology: dict[str, Any] | None) -> CSIStorageCapacity:
    obj: dict[str, Any] = {"metadata": {"name": f"cap-{i}", "namespace": "kube-system"}, "storageClassName": cls}
    if size is not None:
        obj["capacity"] = size
    if topology is not None:
        obj["nodeTopology"] = topology
    return parse_csi_storage_capacity(obj)


def walk(cache: Cache, cls: str, request: int) -> list[str]:
    """Upstream's answer: the nodes with room, by walking every object for every node."""
    out = []
    for row in cache.nodes.rows():
        labels = cache.nodes.node(int(row)).labels
        if any(c.storage_class == cls and c.limit is not None and c.limit >= request
               and c.node_topology is not None and c.node_topology.matches(labels)
               for c in cache.volumes.capacities.values()):
            out.append(cache.nodes.names[int(row)])
    return sorted(out)


def indexed(cache: Cache, cls: str, request: int) -> list[str]:
    rows = cache.nodes.rows()
    room = cache.volumes.capacity_index.room(cls, request, rows)
    return sorted(cache.nodes.names[int(r)] for r in rows[room])


def assert_best_is_recomputed(cache: Cache) -> None:
    """Every built class's ``best``, row by row, against the largest limit of its objects whose topology
    matches the node's labels, recomputed from nothing."""
    for cls, c in cache.volumes.capacity_index._classes.items():
        if not c.built:
            continue
        for row in cache.nodes.rows().tolist():
            labels = cache.nodes.node(row).labels
            want = max((o.limit for o in cache.volumes.capacities.values()
                        if o.storage_class == cls and o.limit is not None and o.node_topology is not None
                        and o.node_topology.matches(labels)), default=-1)
            assert c.best[row] == want, (cls, cache.nodes.names[row], labels)


TOPOLOGIES = st.sampled_from([
    None, {}, {"matchLabels": {ZONE: "a"}}, {"matchLabels": {ZONE: "b"}},
    {"matchExpressions": [{"key": ZONE, "operator": "NotIn", "values": ["a"]}]},
    *({"matchLabels": {HOST: n}} for n in NODES),
    # beyond one matchLabels entry: the anchor is one In of several, or there is none (tested on every event)
    {"matchLabels": {ZONE: "a", HOST: "n1"}},
    {"matchLabels": {ZONE: "zz"}},
    {"matchExpressions": [{"key": HOST, "operator": "In", "values": ["n0", "n3", "n9"]}]},
    {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a", "b"]},
                          {"key": HOST, "operator": "NotIn", "values": ["n1"]}]},
    {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a", "c"]},
                          {"key": RACK, "operator": "In", "values": ["r1"]}]},
    {"matchExpressions": [{"key": RACK, "operator": "Exists"}]},
    {"matchExpressions": [{"key": RACK, "operator": "DoesNotExist"}, {"key": ZONE, "operator": "In",
                                                                       "values": ["b"]}]},
    {"matchExpressions": [{"key": HOST, "operator": "DoesNotExist"}]},
    {"matchExpressions": [{"key": ZONE, "operator": "Bogus"}]},   # a parse error: selects nothing
])
OPS = st.lists(st.one_of(
    st.tuples(st.just("set"), st.integers(0, 6), st.sampled_from(["fast", "slow"]),
              st.sampled_from([None, "1Gi", "5Gi", "10Gi"]), TOPOLOGIES),
    st.tuples(st.just("delete"), st.integers(0, 6)),
    st.tuples(st.just("node"), st.sampled_from(NODES), st.sampled_from(["a", "b", "c"]),
              st.sampled_from([None, "r1", "r2"]), st.booleans()),
    st.tuples(st.just("remove"), st.sampled_from(NODES)),
    st.tuples(st.just("ask"), st.sampled_from(["fast", "slow"]), st.sampled_from([1, 5, 10])),
), max_size=40)


@settings(max_examples=500, deadline=None, derandomize=True)
@given(OPS)
def test_the_index_answers_what_a_walk_over_every_object_answers(ops: list[tuple[Any, ...]]) -> None:
    cache = Cache()
    for i, name in enumerate(NODES[:3]):
        cache.add_node(node(name, "ab"[i % 2]))
    gi = 1 << 30
    for op in ops:
        if op[0] == "set":
            cache.volumes.set_capacity(capacity(op[1], op[2], op[3], op[4]))
        elif op[0] == "delete":
            cache.volumes.delete_capacity(f"kube-system/cap-{op[1]}")
        elif op[0] == "node":
            cache.add_node(node(op[1], op[2], op[3], op[4]))
        elif op[0] == "remove":
            cache.remove_node(op[1])
        else:
            assert indexed(cache, op[1], op[2] * gi) == walk(cache, op[1], op[2] * gi), op
        assert_best_is_recomputed(cache)
    for cls in ("fast", "slow"):
        for size in (1, 5, 10):
            assert indexed(cache, cls, size * gi) == walk(cache, cls, size * gi)


def test_a_class_with_an_object_per_node_is_answered_without_a_walk() -> None:
    """The shape of TopoLVM and other local-storage drivers: one object per node. After the first question the
    index answers from its per-row column; an object that shrinks changes only its own node's answer."""
    cache = Cache()
    for i in range(50):
        cache.add_node(node(f"n{i}", "a"))
    for i in range(50):
        cache.volumes.set_capacity(capacity(i, "local", "10Gi", {"matchLabels": {HOST: f"n{i}"}}))
    rows = cache.nodes.rows()
    index = cache.volumes.capacity_index
    assert index.room("local", 5 << 30, rows).all()
    cache.volumes.set_capacity(capacity(7, "local", "1Gi", {"matchLabels": {HOST: "n7"}}))
    room = index.room("local", 5 << 30, rows)
    assert [cache.nodes.names[int(r)] for r in rows[~room]] == ["n7"]
    assert np.array_equal(room, np.array([n != "n7" for n in (cache.nodes.names[int(r)] for r in rows)]))


def test_a_node_event_tests_only_the_objects_its_labels_name() -> None:
    """The inverted label index: with one object per node and one without an In (tested on every event), a
    node's event has as candidates its own object and that one, whichever node; a relabelled node also
    the objects that selected it before (they may stop), and a removed node only those."""
    cache = Cache()
    for i in range(50):
        cache.add_node(node(f"n{i}", "a"))
    for i in range(50):
        cache.volumes.set_capacity(capacity(i, "local", "10Gi", {"matchLabels": {HOST: f"n{i}"}}))
    cache.volumes.set_capacity(capacity(50, "local", "1Gi", {"matchExpressions": [
        {"key": RACK, "operator": "Exists"}]}))
    index = cache.volumes.capacity_index
    index.room("local", 1, cache.nodes.rows())
    c = index._classes["local"]
    row = cache.nodes.row("n7")
    assert c.candidates(row, cache.nodes.node(row).labels) == {"kube-system/cap-7", "kube-system/cap-50"}
    cache.add_node(node("n7", "a", host=False))     # no longer named by cap-7, which selected it
    assert c.candidates(row, cache.nodes.node(row).labels) == {"kube-system/cap-50"}
    cache.add_node(node("n8", "a", rack="r1"))
    row8 = cache.nodes.row("n8")
    assert c.candidates(row8, None) == {"kube-system/cap-8", "kube-system/cap-50"}
    assert_best_is_recomputed(cache)
