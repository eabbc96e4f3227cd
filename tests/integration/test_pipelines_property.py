"""Property: whatever the runs, stages, node sizes and cordons, NodeColocation keeps its promises.

Hypothesis draws a small cluster (2-4 nodes of 1, 2 or 4 cpus), 2-5 pipeline runs of 1-3 stages of 1-3
tasks (each task 250m, 500m or 1 cpu), a mode (pipelineruns or isolate-pipelinerun) and cordons that
land between rounds. Each example starts a fresh simulated cluster and scheduler with the profile of
config/pipelines.yaml, then plays Tekton and the kubelet in rounds: a run's next stage is created once
every pod of its stage has Succeeded; after the scheduler settles, a random part of the running pods
Succeed. The test's own Python (never the plugin) checks, at every bind as the API server commits it:

(a) pipelineruns: the pod's run has no running pod on another node (never two nodes for a live run);
(b) isolate-pipelinerun: no other run has a running pod on the node (never two runs on a node);

and once settled at the end:

(c) no node is over-committed in cpu by its running pods;
(d) every pending pod is explained: PodScheduled=False with a message; when its run still has a pod
    running on a node, the message names the run and that node.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.simcluster import SimCluster
from bench.simcluster.agent import AgentConfig
from scheduler.app import App
from tests.integration.test_pipelines import RUN_LABEL, colocation, task
from tests.integration.test_scheduler import MERGE, NODES, NS, PODS, make_node, scheduled_condition

QUIET = 0.35        # seconds without a bind: the scheduler has settled for this round
SETTLE_LIMIT = 10   # seconds a round may take to settle
TERMINAL = ("Succeeded", "Failed")

CPU_REQ = ("250m", "500m", "1")


@st.composite
def scenarios(draw: Any) -> dict[str, Any]:
    nodes = [draw(st.sampled_from(("1", "2", "4"))) for _ in range(draw(st.integers(2, 4)))]
    runs = [[[draw(st.sampled_from(CPU_REQ)) for _ in range(draw(st.integers(1, 3)))]
             for _ in range(draw(st.integers(1, 3)))]
            for _ in range(draw(st.integers(2, 5)))]
    cordons = draw(st.lists(st.tuples(st.integers(0, 3), st.integers(0, len(nodes) - 1)), max_size=2))
    return {"mode": draw(st.sampled_from(("pipelineruns", "isolate-pipelinerun"))), "nodes": nodes,
            "runs": runs, "cordons": cordons, "seed": draw(st.integers(0, 2 ** 16))}


def cpu_m(v: str) -> int:
    return int(v[:-1]) if v.endswith("m") else int(v) * 1000


def run_of(pod: dict[str, Any]) -> str:
    return (pod["metadata"].get("labels") or {}).get(RUN_LABEL, "")


def live(pod: dict[str, Any]) -> bool:
    return bool(pod["spec"].get("nodeName")) and (pod.get("status") or {}).get("phase") not in TERMINAL


async def scenario(sc: dict[str, Any]) -> None:
    mode = sc["mode"]
    rng = random.Random(sc["seed"])
    cfg = colocation(mode, podInitialBackoffSeconds=0.05, podMaxBackoffSeconds=0.3)
    violations: list[str] = []
    last_bind = [time.monotonic()]
    with tempfile.TemporaryDirectory() as tmp:
        kc = f"{tmp}/kubeconfig"
        async with SimCluster(nodes=0, agent=AgentConfig(ready_delay=0.02, tick=0.01), kubeconfig=kc) as cluster:
            store = cluster.store
            names = [f"node-{i}" for i in range(len(sc["nodes"]))]
            for name, cpu in zip(names, sc["nodes"]):
                store.create(NODES, "", make_node(name, cpu=cpu, memory="64Gi"))

            def pods() -> list[dict[str, Any]]:
                return [e.obj() for e in store.table(PODS).objects.values() if e.key[0] == NS]

            def on_write(verb: str, resource: str, ns: str, name: str, result: Any) -> None:
                if resource != "pods/binding" or not hasattr(result, "obj"):
                    return
                last_bind[0] = time.monotonic()
                pod = result.obj()
                run, node = run_of(pod), pod["spec"]["nodeName"]
                for other in pods():
                    if other["metadata"]["name"] == name or not live(other):
                        continue
                    if mode == "pipelineruns" and run_of(other) == run and other["spec"]["nodeName"] != node:
                        violations.append(f"(a) {name} of {run} bound to {node} while {other['metadata']['name']} "
                                          f"runs on {other['spec']['nodeName']}")
                    if mode != "pipelineruns" and run_of(other) != run and other["spec"]["nodeName"] == node:
                        violations.append(f"(b) {name} of {run} bound to {node} while {other['metadata']['name']} "
                                          f"of {run_of(other)} runs there")

            store.observe(on_write)
            stage = {r: -1 for r in range(len(sc["runs"]))}
            async with App(cfg, kubeconfig=kc):
                for rnd in range(12):
                    for when, n in sc["cordons"]:
                        if when == rnd:
                            store.patch(NODES, "", names[n], MERGE, b'{"spec": {"unschedulable": true}}')
                    current = pods()
                    created = False
                    for r, stages in enumerate(sc["runs"]):
                        mine = [p for p in current if run_of(p) == f"run-{r}"]
                        done = all((p.get("status") or {}).get("phase") in TERMINAL for p in mine)
                        if done and stage[r] + 1 < len(stages):
                            stage[r] += 1
                            for t, cpu in enumerate(stages[stage[r]]):
                                store.create(PODS, NS, task(f"run-{r}", f"s{stage[r]}t{t}", cpu=cpu, memory="1Mi"))
                            created = True
                    last_bind[0] = time.monotonic()
                    deadline = time.monotonic() + SETTLE_LIMIT
                    while time.monotonic() - last_bind[0] < QUIET:
                        assert time.monotonic() < deadline, f"never settled in round {rnd}"
                        await asyncio.sleep(0.03)
                    running = [p for p in pods() if (p.get("status") or {}).get("phase") == "Running"]
                    finishing = [p for p in running if rng.random() < 0.7]
                    for p in finishing:
                        p["status"]["phase"] = "Succeeded"
                        store.update(PODS, NS, p["metadata"]["name"], p, "status")
                    if not created and not running and rnd > max(w for w, _ in sc["cordons"] or [(0, 0)]):
                        break

                # (d) every pending pod explained, once the scheduler has had its say
                def unexplained() -> list[str]:
                    out = []
                    now = pods()
                    for p in now:
                        if p["spec"].get("nodeName"):
                            continue
                        c = scheduled_condition(p)
                        msg = c.get("message") or ""
                        if c.get("status") != "False" or not msg:
                            out.append(f"{p['metadata']['name']}: no PodScheduled=False message")
                            continue
                        holders = {o["spec"]["nodeName"] for o in now if run_of(o) == run_of(p) and live(o)}
                        if mode == "pipelineruns" and holders:
                            (node,) = holders
                            want = f"PipelineRun {NS}/{run_of(p)} holds node {node}"
                            if want not in msg:
                                out.append(f"{p['metadata']['name']}: {msg!r} does not say {want!r}")
                    return out

                deadline = time.monotonic() + 5
                while unexplained() and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                left = unexplained()
            final_nodes = {e.key[1]: e.obj() for e in store.table(NODES).objects.values()}
            final = pods()

    context = f"\nscenario: {sc}\npods: { {p['metadata']['name']: p['spec'].get('nodeName') for p in final} }"
    assert not violations, "\n".join(violations) + context
    assert not left, "\n".join(left) + context
    # (c) no over-commit by running pods
    used = {n: 0 for n in final_nodes}
    for p in final:
        if live(p):
            used[p["spec"]["nodeName"]] += cpu_m(p["spec"]["containers"][0]["resources"]["requests"]["cpu"])
    for n, o in final_nodes.items():
        assert used[n] <= cpu_m(o["status"]["allocatable"]["cpu"]), f"{n} over-committed: {used[n]}m{context}"


@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(sc=scenarios())
def test_runs_never_split_never_share_in_isolation_never_overcommit_and_every_wait_is_explained(sc):
    asyncio.run(scenario(sc))
