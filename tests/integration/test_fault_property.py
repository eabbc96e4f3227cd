"""Property: plugins that raise at random points lose no pod, bind none twice and never stop the loop.

Hypothesis draws a small cluster (1-4 nodes with random cpu / memory
capacity), a mix of single pods and gangs (PodGroups of 1-4 members,
minMember between 1 and the size), and a seed. Each example starts a fresh
simulated cluster and scheduler with the profile of config/gang.yaml plus a
fault-injecting plugin (tests/unit/test_containment.py's TestFaults, at
Filter, Score, Reserve, Permit and PreBind), and wraps the Coscheduling plugin's Gang hooks (``gang_key``,
``gang_failed``) and QueueSort key and the cache's ``assume`` the same way.
Every one of those calls raises with probability RATE, from one seeded
random stream. Once no pod has been bound for QUIET seconds and the queue
holds nothing active, in backoff or in flight, the test stops the faults and
checks, with its own Python over the API server's objects:

(a) no pod lost: each pod is bound, or is in the scheduler's queue and
    carries PodScheduled=False with a reason (gated: the gating plugin);
(b) no pod bound twice: the scheduler's successful binding cycles number
    exactly the pods bound;
(c) no node over-committed in cpu or memory;
(d) nothing holds room: no assumed pod that is not bound, nothing waiting
    at Permit, nothing left in flight in the queue;
(e) the scheduling loop is alive, and a pod created after the faults stop
    is bound.

The examples are few (8, derandomized) because each runs a cluster and a
scheduler for a second or two.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import tempfile
import time
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.simcluster import SimCluster
from bench.simcluster.agent import AgentConfig
from scheduler.app import App
from scheduler.config import parse_config
from tests.integration.test_gang_property import GANG_CONFIG, GROUP_LABEL, NODES, NS, POD_GROUPS, PODS
from tests.unit.test_containment import InjectedFault, TestFaults

RATE = 0.05          # the chance that one call raises
QUIET = 1.0          # seconds without a bind and with nothing to retry: the scheduler has settled
SETTLE_LIMIT = 20.0  # seconds: not settled by then is a failure of its own


class RandomFaults:
    """One seeded stream decides, call by call, whether a call raises."""

    def __init__(self, seed: int, rate: float) -> None:
        self.rng = random.Random(seed)
        self.rate = rate
        self.on = True
        self.raised = 0

    def hit(self, point: str, what: str = "") -> None:
        if self.on and self.rng.random() < self.rate:
            self.raised += 1
            raise InjectedFault(f"injected at {point}")

    def wrap(self, obj: Any, method: str) -> None:
        real = getattr(obj, method)

        def faulty(*args: Any, **kw: Any) -> Any:
            self.hit(method)
            return real(*args, **kw)

        setattr(obj, method, faulty)


# ---------------------------------------------------------------------------- the workload

CPU_CAP = (1, 2, 4)            # cores
MEM_CAP = (1, 2, 4)            # GiB
CPU_REQ = (250, 500, 1000)     # millicores
MEM_REQ = (128, 512)           # MiB


@dataclasses.dataclass(frozen=True)
class Workload:
    nodes: tuple[tuple[int, int], ...]                 # (cores, GiB) per node
    pods: tuple[tuple[str, str, int, int], ...]        # (name, gang or "", millicores, MiB), in arrival order
    gangs: tuple[tuple[str, int], ...]                 # (name, minMember)
    seed: int


@st.composite
def workloads(draw: Any) -> Workload:
    nodes = tuple((draw(st.sampled_from(CPU_CAP)), draw(st.sampled_from(MEM_CAP)))
                  for _ in range(draw(st.integers(1, 4))))
    shape = st.tuples(st.sampled_from(CPU_REQ), st.sampled_from(MEM_REQ))
    pods = [(f"single-{i}", "", *draw(shape)) for i in range(draw(st.integers(0, 6)))]
    gangs = []
    for g in range(draw(st.integers(1, 3))):
        size = draw(st.integers(1, 4))
        gangs.append((f"gang-{g}", draw(st.integers(1, size))))
        cpu, mem = draw(shape)
        pods += [(f"gang-{g}-{m}", f"gang-{g}", cpu, mem) for m in range(size)]
    return Workload(nodes, tuple(draw(st.permutations(pods))), tuple(gangs), draw(st.integers(0, 2 ** 16)))


def node_object(i: int, cores: int, gib: int) -> dict[str, Any]:
    cap = {"cpu": str(cores), "memory": f"{gib}Gi", "pods": "110"}
    return {"metadata": {"name": f"node-{i}"},
            "status": {"capacity": cap, "allocatable": cap, "conditions": [{"type": "Ready", "status": "True"}]}}


def pod_object(name: str, gang: str, cpu: int, mem: int, scheduler_name: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if gang:
        meta["labels"] = {GROUP_LABEL: gang}
    return {"metadata": meta, "spec": {
        "schedulerName": scheduler_name,
        "containers": [{"name": "c", "image": "pause",
                        "resources": {"requests": {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}}}]}}


def faulty_config() -> tuple[Any, str]:
    """config/gang.yaml with TestFaults enabled, test-sized backoffs and client limits."""
    doc = yaml.safe_load(GANG_CONFIG.read_text())
    profile = doc["profiles"][0]
    profile["plugins"]["multiPoint"]["enabled"].insert(0, {"name": TestFaults.NAME})
    cfg = parse_config(doc, str(GANG_CONFIG))
    cfg = dataclasses.replace(cfg, pod_initial_backoff_seconds=0.05, pod_max_backoff_seconds=0.2,
                              client_qps=2000, client_burst=4000)
    return cfg, profile["schedulerName"]


# ---------------------------------------------------------------------------- the property


def settled(sched: Any, bound: int, last: list[float]) -> bool:
    """No new bind for QUIET seconds, and nothing the queue would retry by itself."""
    now = time.monotonic()
    if bound != last[0]:
        last[:] = [bound, now]
        return False
    counts = sched.queue.counts()
    return (now - last[1] >= QUIET and counts["active"] == counts["backoff"] == 0
            and not sched.queue._inflight)


async def scenario(w: Workload) -> None:
    cfg, scheduler_name = faulty_config()
    with tempfile.TemporaryDirectory() as tmp:
        kc = f"{tmp}/kubeconfig"
        async with SimCluster(nodes=0, agent=AgentConfig(ready_delay=0.02, tick=0.01), kubeconfig=kc) as cluster:
            for i, (cores, gib) in enumerate(w.nodes):
                cluster.store.create(NODES, "", node_object(i, cores, gib))
            for name, min_member in w.gangs:
                cluster.store.create(POD_GROUPS, NS, {
                    "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": NS},
                    "spec": {"minMember": min_member, "scheduleTimeoutSeconds": 60}})

            def pods() -> dict[str, dict[str, Any]]:
                return {e.key[1]: e.obj() for e in cluster.store.table(PODS).objects.values() if e.key[0] == NS}

            async with App(cfg, kubeconfig=kc) as app:
                sched = app.scheduler
                assert sched is not None
                fw = sched.frameworks[scheduler_name]
                faults = RandomFaults(w.seed, RATE)
                fw.plugins[TestFaults.NAME].faults = faults
                gang = fw.plugins["Coscheduling"]
                for method in ("gang_key", "gang_failed", "sort_key"):
                    faults.wrap(gang, method)
                faults.wrap(sched.cache, "assume")
                for name, group, cpu, mem in w.pods:
                    cluster.store.create(PODS, NS, pod_object(name, group, cpu, mem, scheduler_name))
                deadline = time.monotonic() + SETTLE_LIMIT
                last = [-1, time.monotonic()]
                while not settled(sched, sum(1 for p in pods().values() if p["spec"].get("nodeName")), last):
                    assert time.monotonic() < deadline, f"never settled in {SETTLE_LIMIT}s: {sched.queue.counts()}"
                    await asyncio.sleep(0.05)
                faults.on = False
                view = pods()
                queue_where = {sched.pods[uid].name: where for uid, where in sched.queue.where.items()
                               if uid in sched.pods}
                gated_by = {sched.pods[uid].name: qi.gated_by for uid, qi in sched.queue.infos.items()
                            if uid in sched.pods}
                assumed = sorted(s.pod.name for s in sched.cache.pods.values()
                                 if s.assumed and not (view.get(s.pod.name) or {}).get("spec", {}).get("nodeName"))
                waiting = sorted(wp.pod.name for f in sched.frameworks.values() for wp in f.waiting.values())
                inflight = sorted(sched.queue._inflight)
                scheduled = sched.scheduled
                loop_alive = app._loop_task is not None and not app._loop_task.done()

                # (e) the loop still schedules: a pod created now is bound
                cluster.store.create(PODS, NS, pod_object("after", "", 0, 0, scheduler_name))
                until = time.monotonic() + 5
                while not (pods().get("after") or {}).get("spec", {}).get("nodeName"):
                    assert time.monotonic() < until, "a pod created after the faults was never bound"
                    await asyncio.sleep(0.02)

    context = (f"\nnodes: {w.nodes}\ngangs: {w.gangs}\nseed: {w.seed}, {faults.raised} faults"
               f"\nplaced: { {n: p['spec'].get('nodeName') for n, p in sorted(view.items())} }"
               f"\nqueue: {queue_where}")
    assert loop_alive, f"the scheduling loop died{context}"

    # (a) no pod lost
    bound = {n for n, p in view.items() if p["spec"].get("nodeName")}
    for name, _, _, _ in w.pods:
        if name in bound:
            continue
        where = queue_where.get(name)
        assert where in ("active", "backoff", "unschedulable", "gated"), f"{name} is lost ({where}){context}"
        conds = [c for c in (view[name].get("status") or {}).get("conditions") or ()
                 if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason")]
        assert conds or (where == "gated" and gated_by.get(name)), f"{name} is pending with no reason{context}"

    # (b) no pod bound twice
    assert scheduled == len(bound), f"{scheduled} successful binding cycles for {len(bound)} bound pods{context}"

    # (c) no node over-committed
    requests = {name: (cpu, mem) for name, _, cpu, mem in w.pods}
    for i, (cores, gib) in enumerate(w.nodes):
        on = [requests[n] for n in bound if view[n]["spec"]["nodeName"] == f"node-{i}"]
        assert sum(c for c, _ in on) <= cores * 1000 and sum(m for _, m in on) <= gib * 1024, (
            f"node-{i} is over-committed: {on}{context}")

    # (d) nothing holds room
    assert not assumed, f"assumed but never bound: {assumed}{context}"
    assert not waiting, f"still waiting at Permit: {waiting}{context}"
    assert not inflight, f"still in flight: {inflight}{context}"


@settings(max_examples=8, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(w=workloads())
def test_random_plugin_faults_lose_no_pod_bind_none_twice_and_keep_the_loop(w: Workload) -> None:
    asyncio.run(scenario(w))
