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


def node(name: str, zone: str) -> Any:
    return parse_node({"metadata": {"name": name, "labels": {ZONE: zone, HOST: name}},
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


TOPOLOGIES = st.sampled_from([
    None, {}, {"matchLabels": {ZONE: "a"}}, {"matchLabels": {ZONE: "b"}},
    {"matchExpressions": [{"key": ZONE, "operator": "NotIn", "values": ["a"]}]},
    *({"matchLabels": {HOST: n}} for n in NODES),
])
OPS = st.lists(st.one_of(
    st.tuples(st.just("set"), st.integers(0, 6), st.sampled_from(["fast", "slow"]),
              st.sampled_from([None, "1Gi", "5Gi", "10Gi"]), TOPOLOGIES),
    st.tuples(st.just("delete"), st.integers(0, 6)),
    st.tuples(st.just("node"), st.sampled_from(NODES), st.sampled_from(["a", "b", "c"])),
    st.tuples(st.just("remove"), st.sampled_from(NODES)),
    st.tuples(st.just("ask"), st.sampled_from(["fast", "slow"]), st.sampled_from([1, 5, 10])),
), max_size=40)


@settings(max_examples=300, deadline=None, derandomize=True)
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
            cache.add_node(node(op[1], op[2]))
        elif op[0] == "remove":
            cache.remove_node(op[1])
        else:
            assert indexed(cache, op[1], op[2] * gi) == walk(cache, op[1], op[2] * gi), op
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
