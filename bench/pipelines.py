"""The createPipelineRuns op: Tekton PipelineRuns as the pods Tekton's controller makes, stage by stage.

A run is pods labelled ``tekton.dev/pipelineRun: <run>`` (and ``tekton.dev/pipelineTask``), created one
stage at a time: the next stage once every pod of the previous one is bound and has Succeeded. The op plays
both Tekton's controller (creating stages) and the kubelet (marking a bound task pod Succeeded through
pods/status, as the benchmark's simulated cluster runs no node agent), so a staged workload's rate is set
partly by this driver; the scheduler's own attempt latencies are reported besides.

With ``affinityAssistant: true`` every run is made the way Tekton's affinity assistant makes it
(``coschedule: pipelineruns`` with the assistant on): a placeholder pod per run
(``app.kubernetes.io/component: affinity-assistant``, as the StatefulSet's pod), created with the first
stage, and required pod affinity (topologyKey ``kubernetes.io/hostname``) from every task pod to it; the
placeholder is deleted when the run ends, as Tekton deletes the StatefulSet. The placeholders are not
measured; their writes are counted (``Recorder.writes``) with the tasks'.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from bench.workload import CreatePipelineRuns

if TYPE_CHECKING:
    from bench.runner import _Run

RUN_LABEL = "tekton.dev/pipelineRun"
TASK_LABEL = "tekton.dev/pipelineTask"
AA_COMPONENT = "app.kubernetes.io/component"
AA_INSTANCE = "app.kubernetes.io/instance"
PLACEHOLDER_REQUESTS = {"cpu": "10m", "memory": "16Mi"}   # Tekton's assistant asks for almost nothing


def stages(op: CreatePipelineRuns, i: int) -> list[list[int]]:
    """The task indices of run ``i``, stage by stage."""
    n = op.min_tasks + i % (op.max_tasks - op.min_tasks + 1)
    k = op.tasks_per_stage
    return [list(range(s, min(s + k, n))) for s in range(0, n, k)]


def _affinity_to(instance: str) -> dict[str, Any]:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {AA_COMPONENT: "affinity-assistant", AA_INSTANCE: instance}},
         "topologyKey": "kubernetes.io/hostname"}]}}


async def create_pipeline_runs(run: "_Run", op: CreatePipelineRuns) -> None:
    ns = op.namespace
    await run._namespace(ns)
    recorder = run.recorder
    started = op.collect_metrics and not recorder.collecting
    if started:
        recorder.start_collecting(time.time())
    measured = op.collect_metrics or run._in_window(ns, {})
    spec = dict(op.template.get("spec") or {})
    spec.setdefault("restartPolicy", "Never")
    base = dict((op.template.get("metadata") or {}).get("labels") or {})
    path = f"/api/v1/namespaces/{ns}/pods"
    total = sum(len(t) for i in range(op.count) for t in stages(op, i))
    done = 0
    writes = recorder.writes

    def pod(name: str, labels: dict[str, str], pod_spec: dict[str, Any]) -> dict[str, Any]:
        pod_spec = {**pod_spec, "schedulerName": pod_spec.get("schedulerName", run.scheduler_name)}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels},
                "spec": pod_spec}

    async def one(i: int) -> None:
        nonlocal done
        name = f"pr-{run.run_id}-{i}"
        task_spec = spec
        placeholder = ""
        if op.affinity_assistant:
            instance = f"aa-{name}"
            placeholder = f"{ns}/{instance}-0"
            ph_spec = {**spec, "containers": [{"name": "affinity-assistant", "image": "registry.k8s.io/pause:3.10",
                                               "resources": {"requests": PLACEHOLDER_REQUESTS}}]}
            run.pods.add(placeholder, ns, {}, counted=False)
            recorder.created(placeholder, time.time(), False)
            await run._create(path, pod(f"{instance}-0", {AA_COMPONENT: "affinity-assistant", AA_INSTANCE: instance},
                                        ph_spec))
            writes["create"] = writes.get("create", 0) + 1
            task_spec = {**spec, "affinity": _affinity_to(instance)}
        for s, tasks in enumerate(stages(op, i)):
            keys = []
            for t in tasks:
                key = f"{ns}/{name}-t{t}"
                labels = {**base, RUN_LABEL: name, TASK_LABEL: f"t{t}"}
                run.pods.add(key, ns, labels)
                recorder.created(key, time.time(), measured)
                await run._create(path, pod(f"{name}-t{t}", labels, task_spec))
                writes["create"] = writes.get("create", 0) + 1
                run.pods.pods[key].created = True
                keys.append(key)
            await run._wait(op, run.pods.wait_for(keys), op.timeout, f"stage {s} of PipelineRun {ns}/{name}")
            for key in keys:   # the kubelet: the task's containers exit 0
                await run.client.patch_pod_status(ns, key.partition("/")[2], {"status": {"phase": "Succeeded"}})
                writes["status"] = writes.get("status", 0) + 1
            done += len(keys)
            run.progress(op.label, done, total)
        if placeholder:   # the run is over: Tekton deletes the assistant's StatefulSet, and so its pod
            await run._delete_pod(placeholder)
            writes["delete"] = writes.get("delete", 0) + 1

    run.progress(op.label, 0, total)
    try:
        await asyncio.gather(*(one(i) for i in range(op.count)))
    finally:
        if started:
            recorder.stop_collecting(time.time())
