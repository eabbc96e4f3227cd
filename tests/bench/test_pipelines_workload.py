"""bench/workloads/pipelines.yaml at its Smoke size: both ways of co-locating a PipelineRun's pods finish.

PipelineRuns runs against tandem with config/pipelines.yaml (NodeColocation), PipelineRunsAffinityAssistant
against tandem's default profile (placeholders and required pod affinity), each on a freshly started simulated
cluster, as ``tandem-bench run`` starts them. Both must put every run's task pods on one node; the placeholder
way costs two more API writes per run (the placeholder's create and delete). Nothing here is a measurement.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.pipelines import RUN_LABEL, stages
from bench.record import Recorder
from bench.runner import run_workload
from bench.target import open_target, start_scheduler
from bench.workload import CreatePipelineRuns, find_workload

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ROOT / "bench" / "workloads"


@pytest.mark.parametrize("name, config", [
    pytest.param("PipelineRuns/Smoke", str(ROOT / "config" / "pipelines.yaml"), id="NodeColocation"),
    pytest.param("PipelineRunsAffinityAssistant/Smoke", None, id="affinity assistant, default profile"),
])
async def test_every_run_ends_on_one_node_and_placeholders_cost_writes(name, config, tmp_path):
    workload = find_workload(WORKLOADS, name)
    (op,) = [o for o in workload.ops if isinstance(o, CreatePipelineRuns)]
    tasks = sum(len(s) for i in range(op.count) for s in stages(op, i))
    recorder = Recorder()
    async with open_target(None, tmp_path) as target:
        async with start_scheduler(config, target.kubeconfig, tmp_path):
            await run_workload(workload, target, "tandem-scheduler", recorder, timeout=60)
        pods = (await target.client.list(f"/api/v1/namespaces/{op.namespace}/pods",
                                         {"labelSelector": RUN_LABEL}))["items"]
    nodes: dict[str, set[str]] = {}
    for p in pods:
        assert p["status"]["phase"] == "Succeeded"
        nodes.setdefault(p["metadata"]["labels"][RUN_LABEL], set()).add(p["spec"]["nodeName"])
    assert len(nodes) == op.count and all(len(n) == 1 for n in nodes.values()), nodes
    assert len(recorder.measured()) == tasks
    extra = 2 * op.count if op.affinity_assistant else 0   # a placeholder's create and delete per run
    assert recorder.writes == {"create": tasks + extra // 2, "status": tasks,
                               **({"delete": op.count} if op.affinity_assistant else {})}
