"""Tekton PipelineRuns end to end on the simulated cluster: NodeColocation, with no placeholder pods.

Each run is pods labelled ``tekton.dev/pipelineRun: <run>`` created stage by stage, as Tekton creates TaskRun
pods: the next stage once the previous stage's pods have Succeeded (the test marks them so, playing the
kubelet, after the node agent reports them Running). What is checked is what a Tekton user sees: every pod of
a run on one node; a task waiting on its run's full node with the run and the node named, binding there once
room frees; one run per node in isolate mode; a cordoned node left once no pod of the run runs there; runs
that share a ReadWriteOnce workspace on one node, in the zone of its volume; a restart that keeps a run
where it was; and a profile without NodeColocation next to one with it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from bench.simcluster import SimCluster
from bench.simcluster.agent import AgentConfig
from scheduler.apiclient import from_kubeconfig
from scheduler.app import App
from scheduler.config import SchedulerConfig
from scheduler.framework.clock import Clock
from tests.integration.test_scheduler import (
    NODES, NS, PODS, SCHED, Env, bound, config, eventually, make_node, make_pod, phase, record_binds, running, stays,
    unschedulable,
)
from tests.integration.test_volumes import PVCS, PVS, pv, pvc

RUN_LABEL = "tekton.dev/pipelineRun"


def colocation(mode: str = "pipelineruns", **extra: Any) -> SchedulerConfig:
    """The profile of config/pipelines.yaml with ``mode``, and the tests' short backoffs."""
    return config(profiles=[{
        "schedulerName": SCHED,
        "plugins": {"multiPoint": {"enabled": [{"name": "NodeColocation"}]},
                    "filter": {"enabled": [{"name": "NodeColocation"}]},
                    "postFilter": {"enabled": [{"name": "NodeColocation"}]}},
        "pluginConfig": [{"name": "NodeColocation", "args": {"mode": mode}}]}], **extra)


def task(run: str, name: str, cpu: str = "100m", claims: tuple[str, ...] = (), **kw: Any) -> dict[str, Any]:
    volumes = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    body = make_pod(f"{run}-{name}", cpu=cpu, labels={RUN_LABEL: run, "tekton.dev/pipelineTask": name},
                    restartPolicy="Never", **({"volumes": volumes} if volumes else {}), **kw)
    return body


async def succeed(env: Env, *names: str) -> None:
    """Play the kubelet: the pods' containers exit 0 (once the node agent has started them)."""
    await eventually(lambda: all(phase(env.pod(n)) == "Running" for n in names), 10, f"{names} to run")
    for n in names:
        obj = env.pod(n)
        obj["status"]["phase"] = "Succeeded"
        env.store.update(PODS, NS, n, obj, "status")


async def run_stage(env: Env, run: str, stage: int, tasks: int, **kw: Any) -> dict[str, str]:
    names = [f"s{stage}t{i}" for i in range(tasks)]
    for n in names:
        env.create_pod(task(run, n, **kw))
    return await bound(env, *(f"{run}-{n}" for n in names))


# ---------------------------------------------------------------------------- pipelineruns

async def test_eight_runs_of_two_stages_each_end_on_one_node_per_run(tmp_path):
    nodes = [make_node(f"node-{i}") for i in range(6)]
    async with running(tmp_path, nodes, colocation()) as env:
        runs = [f"run-{i}" for i in range(8)]
        first = {r: await run_stage(env, r, 1, 2) for r in runs}
        for r in runs:
            await succeed(env, *first[r])
        second = {r: await run_stage(env, r, 2, 2) for r in runs}
        for r in runs:
            assert len(set(first[r].values()) | set(second[r].values())) == 1, (r, first[r], second[r])
        # the first pods chose with the normal scores (LeastAllocated): the runs spread over the nodes
        assert len({next(iter(first[r].values())) for r in runs}) == 6


async def test_a_task_waits_on_its_runs_full_node_naming_both_and_binds_there_once_room_frees(tmp_path):
    nodes = [make_node("node-a", cpu="2"), make_node("node-b", cpu="2")]
    async with running(tmp_path, nodes, colocation()) as env:
        held = (await run_stage(env, "run-1", 1, 1, cpu="1500m"))["run-1-s1t0"]
        env.create_pod(task("run-1", "next", cpu="1"))
        c = await unschedulable(env, "run-1-next")
        assert c["message"].startswith(
            "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match the node of the pod's PipelineRun. "
            f"PipelineRun default/run-1 holds node {held}: Insufficient cpu"), c
        notes = [e["note"] for e in await env.events_by_reason("run-1-next", "FailedScheduling")]
        assert any(f"PipelineRun default/run-1 holds node {held}: Insufficient cpu" in n for n in notes), notes
        await stays(lambda: not env.node_of("run-1-next"), 0.3, "the task must not go to the empty node")
        await succeed(env, "run-1-s1t0")
        assert (await bound(env, "run-1-next")) == {"run-1-next": held}


async def test_a_cordoned_node_is_left_only_once_no_pod_of_the_run_runs_there(tmp_path):
    nodes = [make_node("node-a"), make_node("node-b"), make_node("node-c")]
    async with running(tmp_path, nodes, colocation()) as env:
        stage1 = await run_stage(env, "run-1", 1, 2)
        held = stage1["run-1-s1t0"]
        assert set(stage1.values()) == {held}
        env.patch_node(held, {"spec": {"unschedulable": True}})
        await succeed(env, "run-1-s1t0")
        env.create_pod(task("run-1", "s2t0"))
        c = await unschedulable(env, "run-1-s2t0")
        assert f"PipelineRun default/run-1 holds node {held}: node(s) were unschedulable" in c["message"], c
        await stays(lambda: not env.node_of("run-1-s2t0"), 0.3, "a stage-1 pod still runs on the cordoned node")
        await succeed(env, "run-1-s1t1")
        moved = (await bound(env, "run-1-s2t0", timeout=5))["run-1-s2t0"]
        assert moved != held
        env.create_pod(task("run-1", "s2t1"))
        assert (await bound(env, "run-1-s2t1")) == {"run-1-s2t1": moved}, "the run holds its new node"


# ---------------------------------------------------------------------------- isolate-pipelinerun

async def test_isolate_puts_seven_runs_on_six_nodes_one_at_a_time(tmp_path):
    nodes = [make_node(f"node-{i}") for i in range(6)]
    async with running(tmp_path, nodes, colocation("isolate-pipelinerun")) as env:
        placed = {f"run-{i}": await run_stage(env, f"run-{i}", 1, 2) for i in range(6)}
        assert len({next(iter(p.values())) for p in placed.values()}) == 6, placed
        env.create_pod(task("run-6", "s1t0"))
        c = await unschedulable(env, "run-6-s1t0")
        assert c["message"].startswith("0/6 nodes are available: 6 node(s) held by another PipelineRun. "
                                       "PipelineRun default/run-6 waits for a node that no other PipelineRun holds"), c
        await succeed(env, "run-3-s1t0")
        await stays(lambda: not env.node_of("run-6-s1t0"), 0.3, "run-3 still runs a pod")
        await succeed(env, "run-3-s1t1")
        free = placed["run-3"]["run-3-s1t0"]
        assert (await bound(env, "run-6-s1t0", timeout=5)) == {"run-6-s1t0": free}


# ---------------------------------------------------------------------------- workspaces

async def test_runs_sharing_a_read_write_once_workspace_share_a_node_in_its_volumes_zone(tmp_path):
    zoned = [make_node(f"node-{z}{i}", labels={"topology.kubernetes.io/zone": z}) for z in "ab" for i in range(3)]
    async with running(tmp_path, zoned, colocation("workspaces")) as env:
        env.store.create(PVS, "", pv("pv-shared", zone="b"))
        env.store.create(PVCS, NS, pvc("shared", "pv-shared"))
        env.store.create(PVS, "", pv("pv-own"))
        env.store.create(PVCS, NS, pvc("own", "pv-own"))
        await eventually(lambda: "default/own" in env.app.scheduler.cache.volumes.api_claims, 10, "the claims")
        a = await run_stage(env, "run-a", 1, 2, claims=("shared",))
        b = await run_stage(env, "run-b", 1, 2, claims=("shared",))
        holder = a["run-a-s1t0"]
        assert holder.startswith("node-b") and set(a.values()) | set(b.values()) == {holder}, (a, b)
        # a task with two workspaces joins both groups: its own claim's run follows the shared claim's node
        both = await run_stage(env, "run-c", 1, 1, claims=("shared", "own"))
        assert set(both.values()) == {holder}
        own = await run_stage(env, "run-d", 1, 1, claims=("own",))
        assert set(own.values()) == {holder}
        # a task of a run without a claim is not held anywhere
        free = await run_stage(env, "run-a", 2, 3)
        assert len(set(free.values())) > 1, free


# ---------------------------------------------------------------------------- restart and profiles

async def test_a_restart_mid_run_keeps_the_run_on_its_node(tmp_path):
    kc = tmp_path / "kubeconfig"
    cfg = colocation()
    nodes = [make_node(f"node-{i}") for i in range(4)]
    async with SimCluster(nodes=0, agent=AgentConfig(ready_delay=0.05, tick=0.01), kubeconfig=kc) as cluster:
        for n in nodes:
            cluster.store.create(NODES, "", n)
        async with contextlib.AsyncExitStack() as stack:
            client = await stack.enter_async_context(await from_kubeconfig(str(kc), qps=0, clock=Clock()))
            env = Env(cluster, None, client)  # type: ignore[arg-type]
            record_binds(env)
            async with App(cfg, kubeconfig=str(kc)) as app:
                env.app = app
                held = set((await run_stage(env, "run-1", 1, 2)).values())
                await succeed(env, "run-1-s1t0", "run-1-s1t1")
            (node,) = held
            # while no scheduler runs, the run's node fills up: a fresh choice (LeastAllocated) would avoid it
            env.create_pod(make_pod("filler", cpu="3", node_name=node))
            async with App(cfg, kubeconfig=str(kc)) as app:
                env.app = app
                stage2 = await run_stage(env, "run-1", 2, 2)
                assert set(stage2.values()) == {node}, (node, stage2)


async def test_two_profiles_one_with_node_colocation_and_one_without(tmp_path):
    with_coloc = colocation().profiles[0]
    cfg = config(profiles=[
        {"schedulerName": SCHED,
         "plugins": {"multiPoint": {"enabled": [{"name": "NodeColocation"}]}},
         "pluginConfig": [{"name": "NodeColocation", "args": {"mode": "pipelineruns"}}]},
        {"schedulerName": "tandem-plain"}])
    assert "NodeColocation" in with_coloc.plugins["filter"]
    assert "NodeColocation" not in cfg.profiles[1].plugins["filter"]
    nodes = [make_node(f"node-{i}") for i in range(4)]
    async with running(tmp_path, nodes, cfg) as env:
        mine = await run_stage(env, "run-1", 1, 4, cpu="500m")
        plain = {}
        for i in range(4):
            env.create_pod(task("run-2", f"t{i}", cpu="500m", schedulerName="tandem-plain"))
            plain.update(await bound(env, f"run-2-t{i}"))
        assert len(set(mine.values())) == 1, mine
        assert len(set(plain.values())) > 1, plain   # LeastAllocated spreads what no plugin co-locates
