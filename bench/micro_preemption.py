"""Cost of a preempting scheduling cycle alone, in-process, by node count (PreemptionBasic's shape).

    python -m bench.micro_preemption --nodes 500 5000 --pods 1000

Builds the scheduler's cache with N nodes of 4 cpu / 32Gi, each holding four
low-priority pods of 900m (priority 0), as PreemptionBasic's init pods, and
queues P pods of 3970m at priority 10000 (upstream's preemptor template):
each fits only a node emptied of all four. Then it times ``schedule_one``
for each: PreFilter and Filter fail everywhere, DefaultPreemption's
PostFilter dry-runs max(10%, 100) candidate nodes, picks one and nominates
the pod there. The API is a no-op fake, so no I/O is measured, and evicted
pods stay in the cache: every later preemptor sees the earlier ones'
nominations hold their nodes, as in the real run while victims go. The
first 10% of cycles are dropped as warm-up. Reports mean, p50 and p99 per
cycle.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import numpy as np

from bench.micro_cycle import _NoAPI, time_cycles
from scheduler.config import parse_config
from scheduler.framework.clock import Clock
from scheduler.scheduler import Scheduler


class _NoEvictions(_NoAPI):
    async def delete_pod(self, *args: object, **kwargs: object) -> None:
        pass


def _pod(name: str, cpu: str, priority: int, node: str = "") -> dict:
    spec = {"schedulerName": "tandem-scheduler", "priority": priority, "containers": [{
        "name": "pause", "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": cpu, "memory": "500Mi"}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "bench", "uid": name}, "spec": spec,
            "status": {"phase": "Running" if node else "Pending"}}


async def measure(nodes: int, pods: int) -> tuple[np.ndarray, int]:
    doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "profiles": [{"schedulerName": "tandem-scheduler"}]}
    s = Scheduler(parse_config(doc, "micro_preemption"), _NoEvictions(), seed=1, clock=Clock())
    s.preemption.activate = lambda uids: None     # preemptors stay held: each is timed once, on its first cycle
    for i in range(nodes):
        s.on_node_add({"metadata": {"name": f"node-{i}", "labels": {"kubernetes.io/hostname": f"node-{i}"}},
                       "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}}})
        for j in range(4):
            s.on_pod_add(_pod(f"low-{i}-{j}", "900m", 0, f"node-{i}"))
    for i in range(pods):
        s.on_pod_add(_pod(f"high-{i}", "3970m", 10000))
    durations = await time_cycles(s, pods)
    nominated = len(set(s.cache.nominations.node_of.values()))   # distinct nodes the preemptors hold
    return durations, nominated


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.micro_preemption")
    p.add_argument("--nodes", type=int, nargs="+", default=[500, 5000])
    p.add_argument("--pods", type=int, default=1000, help="preemptors (at most the node count)")
    args = p.parse_args(argv)
    print(f"{'nodes':>6}  {'preemptors':>10}  {'held':>9}  {'mean':>6} {'p50':>6} {'p99':>6}  (ms per cycle)")
    for n in args.nodes:
        d, nominated = asyncio.run(measure(n, min(args.pods, n)))
        print(f"{n:>6}  {min(args.pods, n):>10}  {nominated:>9}  {d.mean():6.2f} {np.percentile(d, 50):6.2f} "
              f"{np.percentile(d, 99):6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
