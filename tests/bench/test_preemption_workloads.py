"""bench/workloads/preemption.yaml run against a toy preemptor, on a simulated cluster in this process.

tandem's own Smoke runs of these workloads are in test_runner.py; this
shows, independently of tandem, that the preemption workloads can finish
when a scheduler does preempt, that the API server takes their
PriorityClasses and templates, and what the runner makes of the pods that
preemption deletes: victims vanish while the measured pods wait for them,
leave every wait settled, and are never measured.

The toy binds first fit by cpu. A pod that fits nowhere deletes every pod of
lower priority on the node where that takes the fewest deletes (a victim
whose PodGroup says ``disruption-mode: PodGroup`` takes its whole gang with
it), and nothing more is preempted until every deleted pod is gone. It is
nothing like tandem's preemption, and nothing here is a measurement.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from bench.record import Recorder
from bench.runner import run_workload
from bench.workload import POD_GROUP_API_VERSION, POD_GROUP_LABEL, CreatePodGroups, CreatePods, find_workload
from scheduler.apiclient import Conflict, NotFound

WORKLOADS = Path(__file__).resolve().parents[2] / "bench" / "workloads"
SCHEDULER = "toy-preemptor"
DISRUPTION_MODE = "scheduling.tandem.dev/disruption-mode"


def milli(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def cpu(pod: dict[str, Any]) -> int:
    return sum(milli(((c.get("resources") or {}).get("requests") or {}).get("cpu", "0"))
               for c in pod["spec"]["containers"])


def key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def gang_of(pod: dict[str, Any]) -> str | None:
    group = (pod["metadata"].get("labels") or {}).get(POD_GROUP_LABEL)
    return f"{pod['metadata']['namespace']}/{group}" if group else None


class ToyPreemptor:
    """Binds the pods of ``SCHEDULER``, preempting as the module docstring says, while the block runs."""

    def __init__(self, client) -> None:
        self.client = client
        self.evicted: dict[str, dict[str, Any]] = {}     # key -> the victim as it was when deleted
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> "ToyPreemptor":
        self.task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task

    async def _run(self) -> None:
        while True:
            await self._step()
            await asyncio.sleep(0.02)

    async def _step(self) -> None:
        pods = (await self.client.list("/api/v1/pods"))["items"]
        capacity = {n["metadata"]["name"]: milli(n["status"]["capacity"]["cpu"])
                    for n in (await self.client.list("/api/v1/nodes"))["items"]}
        groups = (await self.client.list(f"/apis/{POD_GROUP_API_VERSION}/podgroups"))["items"]
        whole = {key(g) for g in groups if (g["metadata"].get("annotations") or {}).get(DISRUPTION_MODE) == "PodGroup"}
        on: dict[str, list[dict[str, Any]]] = {n: [] for n in capacity}
        for p in pods:
            if p["spec"].get("nodeName") in on:
                on[p["spec"]["nodeName"]].append(p)
        free = {n: cap - sum(cpu(p) for p in on[n]) for n, cap in capacity.items()}
        waiting = any(p["metadata"].get("deletionTimestamp") for p in pods)   # victims still going
        pending = [p for p in pods if p["spec"].get("schedulerName") == SCHEDULER and not p["spec"].get("nodeName")
                   and not p["metadata"].get("deletionTimestamp")]
        for pod in sorted(pending, key=lambda p: -p["spec"].get("priority", 0)):
            need = cpu(pod)
            node = next((n for n in capacity if free[n] >= need), None)
            if node is not None:
                meta = pod["metadata"]
                with contextlib.suppress(Conflict, NotFound):
                    await self.client.bind(meta["namespace"], meta["name"], meta["uid"], node)
                    free[node] -= need
                continue
            if waiting:
                continue
            victims = self._victims(pod, on, free, pods, whole)
            for v in victims:
                with contextlib.suppress(NotFound, Conflict):
                    await self.client.delete_pod(v["metadata"]["namespace"], v["metadata"]["name"],
                                                 v["metadata"]["uid"])   # the pod's own grace period
                    self.evicted[key(v)] = v
            waiting = bool(victims)

    @staticmethod
    def _victims(pod, on, free, pods, whole) -> list[dict[str, Any]]:
        """The fewest pods to delete so that ``pod`` fits a node; [] when no node can make room."""
        priority = pod["spec"].get("priority", 0)
        best: list[dict[str, Any]] | None = None
        for node, there in on.items():
            lower = [v for v in there if v["spec"].get("priority", 0) < priority]
            if free[node] + sum(cpu(v) for v in lower) < cpu(pod):
                continue
            chosen = {key(v): v for v in lower}
            for gang in {gang_of(v) for v in lower} & whole:
                chosen.update({key(m): m for m in pods if m["spec"].get("nodeName") and gang_of(m) == gang})
            if best is None or len(chosen) < len(best):
                best = list(chosen.values())
        return best or []


@pytest.fixture
def target(sim):
    return sim[1]


def measured_ops(workload):
    return [op for op in workload.ops if isinstance(op, (CreatePods, CreatePodGroups)) and op.collect_metrics]


async def run_with_toy(target, name: str) -> tuple[Any, Recorder, ToyPreemptor, list[dict[str, Any]]]:
    workload = find_workload(WORKLOADS, name)
    recorder = Recorder()
    async with ToyPreemptor(target.client) as toy:
        await run_workload(workload, target, SCHEDULER, recorder, timeout=30)
    pods = (await target.client.list("/api/v1/pods"))["items"]
    return workload, recorder, toy, pods


@pytest.mark.parametrize("name", ["PreemptionBasic/Smoke", "PreemptionAsync/Smoke",
                                  "PreemptionAsyncSlowDeletion/Smoke", "GangPreemption/Smoke"])
async def test_every_measured_pod_binds_and_pods_have_the_priority_of_their_class(target, name):
    workload, recorder, toy, pods = await run_with_toy(target, name)
    measured = recorder.measured()
    assert len(measured) == sum(op.count * getattr(op, "pods_per_group", 1) for op in measured_ops(workload))
    assert all(p.bound is not None and p.node for p in measured)
    classes = {"bench-low-priority": 0, "bench-high-priority": 10000}
    for pod in [*pods, *toy.evicted.values()]:
        name_ = pod["spec"].get("priorityClassName")
        assert pod["spec"]["priority"] == classes.get(name_, 0), key(pod)   # pod-default: no class, 0


async def test_preemption_basic_preemptors_bind_only_once_every_low_priority_pod_of_their_node_is_gone(target):
    workload, recorder, toy, pods = await run_with_toy(target, "PreemptionBasic/Smoke")
    low, high = [op for op in workload.ops if isinstance(op, CreatePods)]
    # 3970m fits only an emptied node: every preemptor evicted its node's four pods
    assert len(toy.evicted) == 4 * high.count
    assert all(k.startswith(f"{low.namespace}/") for k in toy.evicted)
    assert not [k for k in map(key, pods) if k in toy.evicted]   # they are gone, not terminating
    assert {p.node for p in recorder.measured()} == {v["spec"]["nodeName"] for v in toy.evicted.values()}


async def test_gang_preemption_evicts_victim_gangs_whole_and_binds_the_preemptor_gang(target):
    workload, recorder, toy, pods = await run_with_toy(target, "GangPreemption/Smoke")
    victim_gangs, preemptors = [op for op in workload.ops if isinstance(op, CreatePodGroups)]
    evicted_members = [v for v in toy.evicted.values() if v["metadata"]["namespace"] == victim_gangs.namespace]
    gangs = {v["metadata"]["labels"][POD_GROUP_LABEL] for v in evicted_members}
    assert gangs and len(evicted_members) == len(gangs) * victim_gangs.pods_per_group
    assert not [p for p in pods if (p["metadata"].get("labels") or {}).get(POD_GROUP_LABEL) in gangs]
    assert any(v["metadata"]["namespace"] != victim_gangs.namespace for v in toy.evicted.values())  # single pods too
    assert len({p.group for p in recorder.measured()}) == preemptors.count


async def test_victims_that_take_a_second_to_go_are_finished_by_the_runner_and_then_the_preemptor_binds(target,
                                                                                                       tmp_path):
    # PreemptionBasic on one node with PreemptionAsyncSlowDeletion's victims: the preemptor is measured, so the
    # run waits for it, and it can bind only after the runner has finished its victims' graceful deletes
    templates = WORKLOADS / "templates"
    path = tmp_path / "slow.yaml"
    path.write_text(f"""\
- name: SlowVictims
  workloadTemplate:
  - {{opcode: createAny, templatePath: {templates}/priorityclass-low.yaml}}
  - {{opcode: createAny, templatePath: {templates}/priorityclass-high.yaml}}
  - {{opcode: createNodes, count: 1}}
  - {{opcode: createPods, count: 4, podTemplatePath: {templates}/pod-low-priority-slow-deletion.yaml}}
  - {{opcode: createPods, count: 1, podTemplatePath: {templates}/pod-high-priority.yaml, collectMetrics: true}}
  workloads:
  - name: W
""")
    workload = find_workload(path, "SlowVictims/W")
    recorder = Recorder()
    async with ToyPreemptor(target.client) as toy:
        await run_workload(workload, target, SCHEDULER, recorder, timeout=30)
    (preemptor,) = recorder.measured()
    assert len(toy.evicted) == 4
    assert all(v["spec"]["terminationGracePeriodSeconds"] == 1 for v in toy.evicted.values())
    assert preemptor.bound - preemptor.created >= 0.9   # the victims' second, less the toy's first poll
    pods = (await target.client.list("/api/v1/pods"))["items"]
    assert [key(p) for p in pods] == [k for k, p in recorder.pods.items() if p.measured]   # victims: gone
