"""Micro-benchmark: NodeResourcesFit and NodeResourcesBalancedAllocation on one pod, per cluster size.

Times what one scheduling cycle spends in these plugins for a typical pod
(cpu + memory requests): Fit PreFilter + Filter over every node, then Fit
PreScore + Score (LeastAllocated) and BalancedAllocation PreScore + Score
over the feasible nodes, plus the argmax that picks the node. The node
table is filled the way the cache fills it (nodes added, pods charged), a
quarter of the nodes too full for the pod, a tenth carrying a GPU.

Run: .venv/bin/python -m bench.micro_resources [--sizes 500,5000,15000] [--repeat 200]
Prints microseconds per pod (the median of ``--repeat`` runs) per stage.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import numpy as np

from plugins.node_resources_balanced_allocation import NodeResourcesBalancedAllocation
from plugins.node_resources_fit import NodeResourcesFit
from scheduler.framework import CycleState, Handle
from scheduler.framework.clock import Clock
from scheduler.model import parse_node, parse_pod
from scheduler.state.cache import Cache


def build(n: int, seed: int = 1) -> Cache:
    rng = random.Random(seed)
    cache = Cache()
    uid = 0
    for i in range(n):
        alloc = {"cpu": "32", "memory": "128Gi", "ephemeral-storage": "100Gi", "pods": "110"}
        if i % 10 == 0:
            alloc["example.com/gpu"] = "8"
        name = f"node-{i}"
        cache.add_node(parse_node({"metadata": {"name": name}, "status": {"allocatable": alloc}}))
        # a quarter of the nodes are nearly full on cpu; the rest carry a few pods
        pods = [("31", "8Gi")] if i % 4 == 0 else [(f"{rng.randint(1, 8)}", f"{rng.randint(1, 32)}Gi")
                                                   for _ in range(rng.randint(0, 4))]
        for cpu, mem in pods:
            uid += 1
            cache.add_pod(parse_pod({
                "metadata": {"name": f"p{uid}", "namespace": "bench", "uid": f"u{uid}"},
                "spec": {"nodeName": name, "containers": [
                    {"name": "c", "image": "img", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]},
            }))
    return cache


def incoming_pod() -> object:
    return parse_pod({"metadata": {"name": "incoming", "namespace": "bench", "uid": "incoming"},
                      "spec": {"containers": [{"name": "c", "image": "img",
                                               "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}}]}})


def run(n: int, repeat: int) -> dict[str, float]:
    cache = build(n)
    handle = Handle(cache, clock=Clock())   # the bench process's clock (the plugins read none here)
    fit = NodeResourcesFit(None, handle)
    bal = NodeResourcesBalancedAllocation(None, handle)
    pod = incoming_pod()
    table = cache.nodes
    rows = table.rows()
    stages: dict[str, list[float]] = {"filter": [], "fit score": [], "balanced score": [], "argmax": [], "total": []}
    clock = time.perf_counter
    for _ in range(repeat + 10):  # the first 10 warm up
        t0 = clock()
        state = CycleState()
        fit.pre_filter(state, pod, table)
        res = fit.filter(state, pod, table, rows)
        feasible = rows[res.passed]
        t1 = clock()
        fit.pre_score(state, pod, table, feasible)
        s1 = fit.score(state, pod, table, feasible)
        t2 = clock()
        bal.pre_score(state, pod, table, feasible)
        s2 = bal.score(state, pod, table, feasible)
        t3 = clock()
        best = feasible[int(np.argmax(s1 + s2))]
        t4 = clock()
        for k, v in (("filter", t1 - t0), ("fit score", t2 - t1), ("balanced score", t3 - t2),
                     ("argmax", t4 - t3), ("total", t4 - t0)):
            stages[k].append(v)
    assert best >= 0 and len(feasible) < len(rows)
    return {k: statistics.median(v[10:]) * 1e6 for k, v in stages.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="500,5000,15000", help="comma-separated node counts")
    ap.add_argument("--repeat", type=int, default=200, help="timed runs per size (median reported)")
    opts = ap.parse_args()
    print(f"{'nodes':>7}  {'filter':>8}  {'fit score':>9}  {'balanced':>8}  {'argmax':>6}  {'total us/pod':>12}")
    for n in (int(s) for s in opts.sizes.split(",")):
        r = run(n, opts.repeat)
        print(f"{n:>7}  {r['filter']:>8.1f}  {r['fit score']:>9.1f}  {r['balanced score']:>8.1f}  "
              f"{r['argmax']:>6.1f}  {r['total']:>12.1f}")


if __name__ == "__main__":
    main()
