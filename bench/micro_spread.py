"""Micro-benchmark: PodTopologySpread on one pod with one zone constraint, per cluster size.

Times what one scheduling cycle spends in PodTopologySpread for a pod with
one ``topology.kubernetes.io/zone`` constraint (maxSkew 1, a matchLabels
selector): PreFilter + Filter over every node for ``DoNotSchedule``, and
PreScore + Score + NormalizeScore over every node for ``ScheduleAnyway``.
The cluster is built through the cache: N nodes over three zones, each with
its hostname, and ``--pods`` placed pods spread at random, a third of them
matching the selector. The first call, which registers the selector's count
column (the one walk over the placed pods), is reported on its own; after
that the cache keeps the column as pods come and go.

Run: .venv/bin/python -m bench.micro_spread [--sizes 5000] [--pods 10000] [--repeat 500]
Prints microseconds per pod (the median of ``--repeat`` runs) per stage.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from plugins.pod_topology_spread import PodTopologySpread, PodTopologySpreadArgs
from scheduler.framework import CycleState, Handle
from scheduler.framework.clock import Clock
from scheduler.model import Pod, parse_node, parse_pod
from scheduler.state.cache import Cache

ZONE = "topology.kubernetes.io/zone"


def build(nodes: int, pods: int, seed: int = 1) -> Cache:
    rng = random.Random(seed)
    cache = Cache()
    for i in range(nodes):
        name = f"node-{i}"
        cache.add_node(parse_node({"metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, ZONE: f"zone-{i % 3}"}},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}}}))
    for j in range(pods):
        app = rng.choice(("web", "api", "batch"))
        cache.add_pod(parse_pod({
            "metadata": {"name": f"p{j}", "namespace": "bench", "uid": f"u{j}", "labels": {"app": app}},
            "spec": {"nodeName": f"node-{rng.randrange(nodes)}", "containers": [
                {"name": "c", "image": "img", "resources": {"requests": {"cpu": "100m"}}}]},
        }))
    return cache


def incoming(when: str) -> Pod:
    return parse_pod({"metadata": {"name": "incoming", "namespace": "bench", "uid": "incoming",
                                   "labels": {"app": "web"}},
                      "spec": {"containers": [{"name": "c", "image": "img"}],
                               "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE,
                                                              "whenUnsatisfiable": when,
                                                              "labelSelector": {"matchLabels": {"app": "web"}}}]}})


def run(nodes: int, pods: int, repeat: int) -> dict[str, float]:
    cache = build(nodes, pods)
    pl = PodTopologySpread(PodTopologySpreadArgs(defaulting_type="List"), Handle(cache, clock=Clock()))
    table = cache.nodes
    rows = table.rows()
    hard, soft = incoming("DoNotSchedule"), incoming("ScheduleAnyway")
    clock = time.perf_counter
    t0 = clock()
    pl.pre_filter(CycleState(), hard, table)
    first = clock() - t0
    stages: dict[str, list[float]] = {"filter": [], "score": []}
    for _ in range(repeat + 10):  # the first 10 warm up
        t0 = clock()
        state = CycleState()
        pl.pre_filter(state, hard, table)
        res = pl.filter(state, hard, table, rows)
        t1 = clock()
        state = CycleState()
        pl.pre_score(state, soft, table, rows)
        scores = pl.score(state, soft, table, rows)
        pl.normalize(state, soft, scores)
        t2 = clock()
        stages["filter"].append(t1 - t0)
        stages["score"].append(t2 - t1)
    assert res.passed.any() and len(scores) == len(rows)
    out = {k: statistics.median(v[10:]) * 1e6 for k, v in stages.items()}
    out["first"] = first * 1e6
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="5000", help="comma-separated node counts")
    ap.add_argument("--pods", type=int, default=10000, help="placed pods")
    ap.add_argument("--repeat", type=int, default=500, help="timed runs per size (median reported)")
    opts = ap.parse_args()
    print(f"{'nodes':>7}  {'pods':>6}  {'first PreFilter':>15}  {'PreFilter+Filter':>16}  "
          f"{'PreScore+Score+Normalize':>24}  (us per pod)")
    for n in (int(s) for s in opts.sizes.split(",")):
        r = run(n, opts.pods, opts.repeat)
        print(f"{n:>7}  {opts.pods:>6}  {r['first']:>15.1f}  {r['filter']:>16.1f}  {r['score']:>24.1f}")


if __name__ == "__main__":
    main()
