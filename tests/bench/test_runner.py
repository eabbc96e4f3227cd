"""bench/runner.py and bench/target.py against real processes: the simulated cluster and tandem.

Every workload in bench/workloads runs at its Smoke scale with a freshly
started simulated cluster (its own process, no node agent) and tandem with
its default configuration, and must finish with a created and a bound time
for every measured pod.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from bench.record import Recorder
from bench.runner import RunError, run_workload
from bench.target import TargetError, open_target, start_scheduler
from bench.workload import (POD_GROUP_LABEL, CreatePodGroups, CreatePods, DeletePods, find_workload,
                            load_workloads)

WORKLOADS = Path(__file__).resolve().parents[2] / "bench" / "workloads"
SMOKE = sorted(w.full_name for f in WORKLOADS.glob("*.yaml") for w in load_workloads(f) if w.name == "Smoke")
SCHEDULER = "tandem-scheduler"


def expected_measured(workload) -> int:
    n = 0
    for op in workload.ops:
        if isinstance(op, CreatePods) and op.collect_metrics:
            n += op.count
        elif isinstance(op, CreatePodGroups) and op.collect_metrics:
            n += op.count * op.pods_per_group
    return n


def test_every_test_case_has_a_smoke_workload():
    assert len(SMOKE) == 10


@pytest.mark.parametrize("name", SMOKE)
async def test_smoke_workload_finishes_with_every_measured_pod_created_and_bound(name, tmp_path):
    workload = find_workload(WORKLOADS, name)
    recorder = Recorder()
    seen: dict[str, tuple[int, int]] = {}
    async with open_target(None, tmp_path) as target:
        async with start_scheduler(None, target.kubeconfig, tmp_path) as sched:
            assert sched.metrics_url.endswith("/metrics") and sched.log_path.exists()
            started = time.time()
            await run_workload(workload, target, SCHEDULER, recorder,
                               progress=lambda label, done, total: seen.__setitem__(label, (done, total)),
                               timeout=30)
            finished = time.time()
            gangs = [op for op in workload.ops if isinstance(op, CreatePodGroups)]
            if gangs:
                groups = (await target.client.list("/apis/scheduling.x-k8s.io/v1alpha1/podgroups"))["items"]
                assert len(groups) == sum(op.count for op in gangs)
                assert {g["spec"]["minMember"] for g in groups} == {op.min_member for op in gangs}
                members = (await target.client.list("/api/v1/pods", {"labelSelector": POD_GROUP_LABEL}))["items"]
                names = {g["metadata"]["name"] for g in groups}
                assert {p["metadata"]["labels"][POD_GROUP_LABEL] for p in members} <= names

    measured = recorder.measured()
    assert len(measured) == expected_measured(workload)
    assert all(started <= p.created <= p.bound <= finished and p.node for p in measured)
    assert recorder.windows and all(end is not None for _, end in recorder.windows)
    assert recorder.scheduler_name == SCHEDULER
    background = {op.label for op in workload.ops if isinstance(op, DeletePods) and (op.skip_wait or op.when_bound)}
    assert all(done == total for label, (done, total) in seen.items() if label not in background), seen


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "w.yaml"
    path.write_text(textwrap.dedent(text))
    return path


async def test_a_barrier_that_cannot_finish_says_which_op_and_how_many_pods_are_pending(tmp_path):
    path = write(tmp_path, """\
    - name: Stuck
      workloadTemplate:
      - opcode: createNodes
        count: 1
      - opcode: createPods
        count: 3
        skipWaitToCompletion: true
        podTemplate: {apiVersion: v1, kind: Pod, metadata: {generateName: p-},
                      spec: {containers: [{name: c, image: pause}]}}
      - opcode: barrier
        timeout: 0.5s
      workloads:
      - name: NoScheduler
    """)
    (workload,) = load_workloads(path)
    recorder = Recorder()
    async with open_target(None, tmp_path / "run") as target:
        with pytest.raises(RunError, match=r"Stuck/NoScheduler op 2 \(barrier\): timed out after 0.5s .*"
                                           r"3 of 3 pods still pending"):
            await run_workload(workload, target, "nobody", recorder)
        pods = (await target.client.list("/api/v1/namespaces/namespace-1/pods"))["items"]
    assert {p["spec"]["schedulerName"] for p in pods} == {"nobody"}
    assert len(recorder.pods) == 3 and not recorder.measured()


async def test_a_scheduler_that_cannot_start_raises_with_the_end_of_its_log(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nbogus: 1\n")
    async with open_target(None, tmp_path) as target:
        with pytest.raises(TargetError, match=r"(?s)exited with code 1 before it was ready.*bogus"):
            async with start_scheduler(bad, target.kubeconfig, tmp_path):
                pass


async def test_a_simulated_cluster_that_cannot_start_raises_with_the_end_of_its_log(tmp_path):
    with pytest.raises(TargetError, match=r"(?s)exited with code 2 before it listened.*--bogus"):
        async with open_target(None, tmp_path, ["--bogus"]):
            pass
