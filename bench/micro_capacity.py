"""Cost of keeping the CSIStorageCapacity index (scheduler/state/capacities.py), in-process, by object count.

    python -m bench.micro_capacity --nodes 5000 --objects 0 5000

Builds a cache with N scheduler_perf-like nodes and K CSIStorageCapacity objects of one class, one per node
with ``matchLabels`` on the node's hostname (TopoLVM's shape; K > N wraps), then times, in milliseconds:

* ``build``: the class's first question (``room``), which derives ``best`` for every row;
* ``relabel``: one node relabelled (a label added), per event, over every node: what each node update
  with new labels pays for the index;
* ``join``: one node added, per event, as M new nodes join a cluster whose index is built (the nodes of a
  scale-up, or a cluster whose first volume pod came before its last nodes);
* ``update``: one object's capacity changed, per event (a driver republishing), over every object.

The node events are timed through ``Cache.add_node`` (the node table's columns, the volumes' affinity
groups and the index), so ``--objects 0`` gives what a node event costs without capacity objects.
"""

from __future__ import annotations

import argparse
import sys
import time

from scheduler.model import parse_csi_storage_capacity, parse_node
from scheduler.state.cache import Cache

HOST = "kubernetes.io/hostname"


def _node(name: str, zone: int, extra: dict[str, str] | None = None) -> object:
    return parse_node({"metadata": {"name": name, "labels": {
        HOST: name, "topology.kubernetes.io/zone": f"zone-{zone % 3}", **(extra or {})}},
        "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}}})


def _capacity(i: int, node: str, size: str = "100Gi") -> object:
    return parse_csi_storage_capacity({
        "metadata": {"name": f"cap-{i}", "namespace": "kube-system"}, "storageClassName": "lvm",
        "capacity": size, "nodeTopology": {"matchLabels": {HOST: node}}})


def measure(nodes: int, objects: int, joins: int) -> dict[str, float]:
    """Milliseconds: build (once), and the mean per relabel, join and update event."""
    cache = Cache()
    for i in range(nodes):
        cache.add_node(_node(f"node-{i}", i))
    for i in range(objects):
        cache.volumes.set_capacity(_capacity(i, f"node-{i % nodes}"))
    index = cache.volumes.capacity_index
    t = time.perf_counter()
    index.room("lvm", 1, cache.nodes.rows())
    out = {"build": (time.perf_counter() - t) * 1e3}
    t = time.perf_counter()
    for i in range(nodes):
        cache.add_node(_node(f"node-{i}", i, {"relabelled": "yes"}))
    out["relabel"] = (time.perf_counter() - t) * 1e3 / nodes
    t = time.perf_counter()
    for i in range(joins):
        cache.add_node(_node(f"new-{i}", i))
    out["join"] = (time.perf_counter() - t) * 1e3 / max(joins, 1)
    updates = min(objects, 1000)
    t = time.perf_counter()
    for i in range(updates):
        cache.volumes.set_capacity(_capacity(i, f"node-{i % nodes}", "50Gi"))
    out["update"] = (time.perf_counter() - t) * 1e3 / max(updates, 1)
    assert index.room("lvm", 1, cache.nodes.rows()).sum() == (min(objects, nodes) if objects else 0)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.micro_capacity")
    p.add_argument("--nodes", type=int, nargs="+", default=[5000])
    p.add_argument("--objects", type=int, nargs="+", default=[0, 5000])
    p.add_argument("--joins", type=int, default=1000, help="nodes added after the index is built")
    args = p.parse_args(argv)
    print(f"{'nodes':>6} {'objects':>7}  {'build':>9} {'relabel':>9} {'join':>9} {'update':>9}  "
          "(ms; build once, the others per event)")
    for n in args.nodes:
        for k in args.objects:
            r = measure(n, k, args.joins)
            print(f"{n:>6} {k:>7}  {r['build']:9.3f} {r['relabel']:9.4f} {r['join']:9.4f} {r['update']:9.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
