"""bench/runner.py and bench/target.py against real processes: the simulated cluster and tandem.

Every workload in bench/workloads runs at its Smoke scale with a freshly
started simulated cluster (its own process, no node agent) and tandem with
its default configuration, and must finish with a created and a bound time
for every measured pod. A workload that needs what tandem or the simulated
cluster does not have yet (InterPodAffinity, PodTopologySpread, Services) is
skipped there, and says which; the affinity workloads also run with the
baseline binder on a simulated cluster in this process, so that their ops and
templates are checked against the API server whatever the scheduler has.
The preemption workloads' Smoke runs are expected to fail until tandem
preempts (issue 11); test_preemption_workloads.py runs them against a toy
preemptor meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
import time
from pathlib import Path

import pytest

from bench.baseline import BASELINE_SCHEDULER_NAME, BaselineBinder
from bench.record import Recorder
from bench.runner import TERMINATION_SECONDS, RunError, run_workload
from bench.simcluster import errors as sim_errors
from bench.target import KUBE_SCHEDULER_QPS, TargetError, open_target, start_kube_scheduler, start_scheduler
from bench.pipelines import stages
from bench.workload import (POD_GROUP_LABEL, ZONE_LABEL, CreatePipelineRuns, CreatePodGroups, CreatePods, DeletePods,
                            find_workload, load_workloads)

WORKLOADS = Path(__file__).resolve().parents[2] / "bench" / "workloads"
# the native gangs' Smoke runs need the native API served and a gang profile: test_native_gang_workloads.py;
# GangStarvation's measures more than its pods: test_starvation_workload.py; the Consolidation workloads need
# the simulated cluster's controllers and a profile with the plugin: test_consolidation_workloads.py; the DRA
# workloads need a server with resource.k8s.io and the resourceclaim controller: test_dra_workloads.py
SMOKE = sorted(w.full_name for f in WORKLOADS.glob("*.yaml") for w in load_workloads(f)
               if w.name == "Smoke" and not {"native-gang", "starvation", "consolidation", "dra"} & set(w.labels))
AFFINITY_SMOKE = [w.full_name for w in load_workloads(WORKLOADS / "affinity.yaml") if w.name == "Smoke"]
PREEMPTION_SMOKE = [w.full_name for w in load_workloads(WORKLOADS / "preemption.yaml") if w.name == "Smoke"]
SCHEDULER = "tandem-scheduler"


def expected_measured(workload) -> int:
    n = 0
    for op in workload.ops:
        if isinstance(op, CreatePods) and op.collect_metrics:
            n += op.count
        elif isinstance(op, CreatePodGroups) and op.collect_metrics:
            n += op.count * op.pods_per_group
        elif isinstance(op, CreatePipelineRuns) and op.collect_metrics:
            n += sum(len(tasks) for i in range(op.count) for tasks in stages(op, i))
    return n


def test_every_test_case_has_a_smoke_workload():
    assert len(SMOKE) == 28 and len(AFFINITY_SMOKE) == 7 and len(PREEMPTION_SMOKE) == 4


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


async def test_daemonset_pods_all_land_on_the_one_node_their_affinity_names_as_upstreams(tmp_path):
    workload = find_workload(WORKLOADS, "SchedulingDaemonset/Smoke")
    recorder = Recorder()
    async with open_target(None, tmp_path) as target:
        async with start_scheduler(None, target.kubeconfig, tmp_path):
            await run_workload(workload, target, SCHEDULER, recorder, timeout=30)
        nodes = (await target.client.list("/api/v1/nodes"))["items"]
    measured = recorder.measured()
    assert len(measured) == 10 and {p.node for p in measured} == {"scheduler-perf-node"}
    assert len(nodes) == 6 and "scheduler-perf-node" in {n["metadata"]["name"] for n in nodes}


class CountingPause:
    """A Pause that notes how many measured pods had been created when it was held and when released."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.events: list[tuple[str, int]] = []

    async def hold(self) -> None:
        self.events.append(("hold", len(self.recorder.measured())))

    def release(self) -> None:
        self.events.append(("release", len(self.recorder.measured())))


async def test_the_pause_is_held_only_while_the_measured_op_creates_its_pods(sim):
    _, target = sim
    workload = find_workload(WORKLOADS, "SchedulingBasic/Smoke")       # 10 init pods, then 20 measured
    recorder = Recorder()
    pause = CountingPause(recorder)
    async with BaselineBinder(target.client):
        await run_workload(workload, target, BASELINE_SCHEDULER_NAME, recorder, timeout=30, pause=pause)
    assert pause.events == [("hold", 0), ("release", 20)]
    assert all(p.bound is not None for p in recorder.measured())


async def test_the_pause_is_held_while_a_measured_create_pod_groups_op_creates_its_members(sim):
    _, target = sim
    workload = find_workload(WORKLOADS, "GangBasic/Smoke")
    recorder = Recorder()
    pause = CountingPause(recorder)
    async with BaselineBinder(target.client):
        await run_workload(workload, target, BASELINE_SCHEDULER_NAME, recorder, timeout=30, pause=pause)
    n = len(recorder.measured())
    assert n > 0 and pause.events == [("hold", 0), ("release", n)]


async def test_the_pause_is_released_when_a_create_fails(sim, tmp_path):
    _, target = sim
    workload = ops_workload(tmp_path, "Bad", """\
    - opcode: createPods
      count: 2
      collectMetrics: true
      podTemplate: {apiVersion: v1, kind: Pod, metadata: {generateName: p-}, spec: {containers: []}}
    """)
    recorder = Recorder()
    pause = CountingPause(recorder)
    with pytest.raises(RunError, match=r"op 0 \(createPods\): \(422 Invalid\)"):
        await run_workload(workload, target, "nobody", recorder, timeout=5, pause=pause)
    assert [what for what, _ in pause.events] == ["hold", "release"]


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


def fake_kube_scheduler(tmp_path: Path, body: str) -> Path:
    binary = tmp_path / "kube-scheduler"
    binary.write_text(f"#!/bin/sh\n{body}\n")
    binary.chmod(0o755)
    return binary


async def test_kube_scheduler_gets_its_default_profile_at_scheduler_perfs_limits_and_is_stopped_after(tmp_path):
    binary = fake_kube_scheduler(tmp_path, 'echo "$@" > "$(dirname "$0")/args"\n'
                                           'echo \'I1129 server.go:183] "Starting Kubernetes Scheduler"\'\nexec sleep 60')
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text("{}")
    async with start_kube_scheduler([str(binary), "--feature-gates=A=true"], kubeconfig, tmp_path) as ks:
        assert ks.proc.poll() is None and ks.metrics_url == ""
    assert ks.proc.poll() is not None                 # stopped with the block
    config = json.loads((tmp_path / "kube-scheduler.yaml").read_text())
    assert config["clientConnection"] == {"kubeconfig": str(kubeconfig.resolve()), "qps": KUBE_SCHEDULER_QPS,
                                          "burst": KUBE_SCHEDULER_QPS}
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["profiles"] == [{"schedulerName": "default-scheduler"}]
    assert (tmp_path / "args").read_text().split() == ["--feature-gates=A=true",
                                                       f"--config={tmp_path / 'kube-scheduler.yaml'}",
                                                       "--secure-port=0"]


async def test_a_kube_scheduler_that_cannot_start_raises_with_the_end_of_its_log(tmp_path):
    binary = fake_kube_scheduler(tmp_path, 'echo "E1129 run.go:72] \\"command failed\\" err=\\"bad flag\\""; exit 1')
    with pytest.raises(TargetError, match=r"(?s)kube-scheduler exited with code 1 before it started.*bad flag"):
        async with start_kube_scheduler([str(binary)], tmp_path / "kc", tmp_path):
            pass


# ---------------------------------------------------------------------------- in this process, no scheduler process
# (the sim fixture is in conftest.py)


def ops_workload(tmp_path: Path, test: str, ops: str):
    """The one workload W of a test case made of ``ops`` (a YAML list of ops, indented as you like)."""
    body = textwrap.indent(textwrap.dedent(ops), "  ")
    (workload,) = load_workloads(write(tmp_path, f"- name: {test}\n  workloadTemplate:\n{body}  workloads:\n"
                                                 f"  - name: W\n"))
    return workload


@pytest.mark.parametrize("name", AFFINITY_SMOKE)
async def test_affinity_smoke_workloads_run_against_the_api_server_with_the_baseline_binder(name, sim):
    cluster, target = sim
    workload = find_workload(WORKLOADS, name)
    recorder = Recorder()
    async with BaselineBinder(target.client):
        await run_workload(workload, target, BASELINE_SCHEDULER_NAME, recorder, timeout=30)
    measured = recorder.measured()
    assert len(measured) == expected_measured(workload) and all(p.node for p in measured)
    pods = (await target.client.list("/api/v1/pods"))["items"]
    templates = {(op.namespace, op.template["metadata"]["generateName"]): op.template for op in workload.ops
                 if isinstance(op, CreatePods)}
    for pod in pods:  # every pod as its template wrote it: the server accepted the affinity and spread terms
        meta = pod["metadata"]
        tmpl = next(t for (ns, prefix), t in templates.items()
                    if ns == meta["namespace"] and meta["name"].startswith(prefix))
        assert pod["spec"].get("affinity") == tmpl["spec"].get("affinity")
        assert pod["spec"].get("topologySpreadConstraints") == tmpl["spec"].get("topologySpreadConstraints")


async def test_create_nodes_labels_nodes_round_robin_or_uniquely_besides_their_hostname(sim, tmp_path):
    _, target = sim
    workload = ops_workload(tmp_path, "Labels", """\
    - opcode: createNodes
      count: 4
      labelNodePrepareStrategy: {labelKey: topology.kubernetes.io/zone, labelValues: [moon-1, moon-2, moon-3]}
    - opcode: createNodes
      count: 3
      uniqueNodeLabelStrategy: {labelKey: example.com/unique}
    """)
    await run_workload(workload, target, "nobody", Recorder())
    nodes = [n["metadata"]["labels"] for n in (await target.client.list("/api/v1/nodes"))["items"]]
    zoned = [labels for labels in nodes if ZONE_LABEL in labels]
    unique = [labels["example.com/unique"] for labels in nodes if "example.com/unique" in labels]
    assert sorted(labels[ZONE_LABEL] for labels in zoned) == ["moon-1", "moon-1", "moon-2", "moon-3"]
    assert len(unique) == len(set(unique)) == 3
    assert len({labels["kubernetes.io/hostname"] for labels in nodes}) == 7


async def test_create_any_creates_namespaced_and_cluster_scoped_objects_found_by_discovery(sim, tmp_path):
    _, target = sim
    workload = ops_workload(tmp_path, "Any", """\
    - opcode: createAny
      namespace: budgets
      count: 2
      template: {apiVersion: policy/v1, kind: PodDisruptionBudget, metadata: {generateName: pdb-, labels: {a: b}},
                 spec: {minAvailable: 1, selector: {matchLabels: {app: x}}}}
    - opcode: createAny
      template: {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {generateName: high-}, value: 1000}
    """)
    await run_workload(workload, target, "nobody", Recorder())
    pdbs = (await target.client.list("/apis/policy/v1/namespaces/budgets/poddisruptionbudgets"))["items"]
    assert len(pdbs) == 2 and all(p["metadata"]["name"].startswith("pdb-") and p["metadata"]["labels"] == {"a": "b"}
                                  for p in pdbs)
    classes = (await target.client.list("/apis/scheduling.k8s.io/v1/priorityclasses"))["items"]
    assert [c["value"] for c in classes if c["metadata"]["name"].startswith("high-")] == [1000]


PRIORITY_CLASS = """\
- opcode: createAny
  template: {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: bench-high}, value: 1000}
- opcode: createPods
  count: 2
  skipWaitToCompletion: true
  podTemplate: {apiVersion: v1, kind: Pod, metadata: {generateName: p-},
                spec: {priorityClassName: bench-high, containers: [{name: c, image: pause}]}}
"""


async def test_create_any_of_one_named_object_keeps_its_name_so_that_pods_can_name_their_priority_class(sim, tmp_path):
    _, target = sim
    workload = ops_workload(tmp_path, "Any", PRIORITY_CLASS)
    await run_workload(workload, target, "nobody", Recorder())
    await run_workload(workload, target, "nobody", Recorder())   # a second run reuses the class
    pc = await target.client.get("/apis/scheduling.k8s.io/v1/priorityclasses/bench-high")
    assert pc["value"] == 1000
    pods = (await target.client.list("/api/v1/pods"))["items"]
    assert len(pods) == 4 and {p["spec"]["priority"] for p in pods} == {1000}


async def test_create_any_of_a_named_object_that_exists_with_other_fields_fails_naming_the_field(sim, tmp_path):
    _, target = sim
    await target.client.create("/apis/scheduling.k8s.io/v1/priorityclasses",
                               {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                "metadata": {"name": "bench-high"}, "value": 7})
    workload = ops_workload(tmp_path, "Any", PRIORITY_CLASS)
    with pytest.raises(RunError, match=r"Any/W op 0 \(createAny\): PriorityClass bench-high exists already and "
                                       r"differs from the template at value \(wanted 1000, found 7\)"):
        await run_workload(workload, target, "nobody", Recorder())


@pytest.mark.parametrize("template,namespace,message", [
    ("{apiVersion: v1, kind: Frobnicator}", "ns",
     r"Any/W op 0 \(createAny\): the server does not serve kind Frobnicator in v1 \(GET /api/v1 does not list it\)"),
    ("{apiVersion: example.com/v1, kind: Widget}", "ns",
     r"Any/W op 0 \(createAny\): the server does not serve example.com/v1 \(404 for GET /apis/example.com/v1\)"),
    ("{apiVersion: policy/v1, kind: PodDisruptionBudget}", "",
     r"Any/W op 0 \(createAny\): PodDisruptionBudget is namespaced: the op needs a namespace"),
    ("{apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, value: 1}", "ns",
     r"Any/W op 0 \(createAny\): namespace ns set, but PriorityClass is cluster-scoped"),
], ids=["a kind the server does not list", "a group version the server does not serve",
        "a namespaced kind without a namespace", "a cluster-scoped kind with a namespace"])
async def test_create_any_of_what_the_server_does_not_serve_fails_naming_it(sim, tmp_path, template, namespace,
                                                                           message):
    _, target = sim
    ns = f"\n  namespace: {namespace}" if namespace else ""
    workload = ops_workload(tmp_path, "Any", f"- opcode: createAny{ns}\n  template: {template}\n")
    with pytest.raises(RunError, match=message):
        await run_workload(workload, target, "nobody", Recorder())


async def test_create_any_answered_404_says_the_server_does_not_serve_the_kind(sim, tmp_path):
    cluster, target = sim

    def refuse(verb, resource, namespace, name):
        if verb == "create" and resource == "priorityclasses.scheduling.k8s.io":
            raise sim_errors.APIError(404, "NotFound", "the server could not find the requested resource")

    cluster.store.admit(refuse)
    workload = ops_workload(tmp_path, "Any", """\
    - opcode: createAny
      template: {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, value: 1}
    """)
    with pytest.raises(RunError, match=r"Any/W op 0 \(createAny\): the server answered 404 for PriorityClass "
                                       r"\(scheduling.k8s.io/v1\) at POST /apis/scheduling.k8s.io/v1/priorityclasses: "
                                       r"it does not serve priorityclasses"):
        await run_workload(workload, target, "nobody", Recorder())


async def test_a_barrier_counts_pods_deleted_before_they_bind_as_done(sim, tmp_path):
    _, target = sim
    workload = ops_workload(tmp_path, "Deleted", """\
    - opcode: createNodes
      count: 1
    - opcode: createPods
      count: 3
      namespace: doomed
      skipWaitToCompletion: true
      podTemplate: {apiVersion: v1, kind: Pod, metadata: {generateName: p-}, spec: {containers: [{name: c, image: x}]}}
    - opcode: deletePods
      namespace: doomed
    - opcode: barrier
      timeout: 5s
    """)
    recorder = Recorder()
    await run_workload(workload, target, "nobody", recorder)   # nobody binds: only the deletes settle the barrier
    assert len(recorder.pods) == 3 and not recorder.measured()
    assert all(p.bound is None for p in recorder.pods.values())


def graceful_pod(name: str, grace: int, termination_seconds: str | None = None) -> str:
    """A pod template as one line of JSON (YAML takes it as is)."""
    meta: dict = {"generateName": f"{name}-"}
    if termination_seconds is not None:
        meta["annotations"] = {TERMINATION_SECONDS: termination_seconds}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                       "spec": {"terminationGracePeriodSeconds": grace, "containers": [{"name": "c", "image": "x"}]}})


async def test_the_runner_finishes_graceful_deletes_of_pods_annotated_termination_seconds_as_the_agent_would(
        sim, tmp_path):
    _, target = sim
    workload = ops_workload(tmp_path, "Slow", f"""\
    - opcode: createNodes
      count: 1
    - opcode: createPods
      count: 1
      podTemplate: {graceful_pod("quick", 5, "0.3")}
    - opcode: createPods
      count: 1
      podTemplate: {graceful_pod("capped", 1, "30")}
    - opcode: createPods
      count: 1
      podTemplate: {graceful_pod("plain", 5)}
    - opcode: sleep
      duration: 3s
    """)
    async with BaselineBinder(target.client):
        run = asyncio.create_task(run_workload(workload, target, BASELINE_SCHEDULER_NAME, Recorder()))
        try:
            async with asyncio.timeout(10):
                while len(pods := (await target.client.list("/api/v1/pods"))["items"]) < 3 or \
                        not all(p["spec"].get("nodeName") for p in pods):
                    await asyncio.sleep(0.02)
                deleted = time.monotonic()
                for p in pods:   # as a scheduler preempting does: with the pod's own grace period
                    await target.client.delete_pod(p["metadata"]["namespace"], p["metadata"]["name"])
                gone_after: dict[str, float] = {}
                while len(gone_after) < 2:
                    left = {p["metadata"]["name"].split("-")[0] for p in
                            (await target.client.list("/api/v1/pods"))["items"]}
                    for name in {"quick", "capped"} - left - set(gone_after):
                        gone_after[name] = time.monotonic() - deleted
                    await asyncio.sleep(0.02)
        finally:
            await run
    assert 0.25 <= gone_after["quick"] < gone_after["capped"]   # after its annotation's 0.3 s
    assert 0.9 <= gone_after["capped"] < 3                       # after its grace period's 1 s, not 30
    (plain,) = (await target.client.list("/api/v1/pods"))["items"]
    assert plain["metadata"]["deletionTimestamp"]                # not annotated: left to the cluster


REPLICA_SETS = """\
- opcode: createAny
  namespace: apps
  count: 3
  skipWaitToCompletion: {skip}
  timeout: 0.5
  template:
    apiVersion: apps/v1
    kind: ReplicaSet
    metadata: {{generateName: web-, labels: {{index: "{{{{.Index}}}}"}}}}
    spec:
      replicas: 2
      selector: {{matchLabels: {{app: "web-{{{{.Index}}}}"}}}}
      template:
        metadata: {{labels: {{app: "web-{{{{.Index}}}}"}}}}
        spec: {{containers: [{{name: c, image: pause}}]}}
"""


async def test_create_any_gives_each_object_its_index_and_the_pod_template_the_runs_scheduler(sim, tmp_path):
    _, target = sim
    await run_workload(ops_workload(tmp_path, "RS", REPLICA_SETS.format(skip="true")), target, "nobody", Recorder())
    sets = (await target.client.list("/apis/apps/v1/namespaces/apps/replicasets"))["items"]
    by_index = {rs["metadata"]["labels"]["index"]: rs["spec"] for rs in sets}
    assert sorted(by_index) == ["0", "1", "2"]
    for i, spec in by_index.items():
        assert spec["selector"] == {"matchLabels": {"app": f"web-{i}"}}
        assert spec["template"]["metadata"]["labels"] == {"app": f"web-{i}"}
        assert spec["template"]["spec"]["schedulerName"] == "nobody"


async def test_create_any_of_replica_sets_waits_for_their_pods_and_says_when_no_controller_makes_them(sim, tmp_path):
    _, target = sim   # in this process, without its agent: no ReplicaSet controller
    with pytest.raises(RunError) as err:
        await run_workload(ops_workload(tmp_path, "RS", REPLICA_SETS.format(skip="false")), target, "nobody",
                           Recorder())
    assert "op 0 (createAny): timed out after 0.5s waiting for the 2 pods of each ReplicaSet to be scheduled " \
           "(does the cluster run the ReplicaSet controller?): 3 of 3 ReplicaSets still pending (e.g. ReplicaSet apps/web-" \
           in str(err.value)


async def test_create_pods_per_second_paces_the_creates(sim, tmp_path):
    _, target = sim
    workload = ops_workload(tmp_path, "Paced", """\
    - opcode: createPods
      count: 5
      createPodsPerSecond: 20
      skipWaitToCompletion: true
      podTemplate: {apiVersion: v1, kind: Pod, metadata: {generateName: p-}, spec: {containers: [{name: c, image: pause}]}}
    """)
    recorder = Recorder()
    await run_workload(workload, target, "nobody", recorder)
    created = sorted(p.created for p in recorder.pods.values())
    assert len(created) == 5 and created[-1] - created[0] >= 4 / 20 - 0.01


def test_the_watch_adopts_a_controllers_pods_and_tells_an_owners_wait_when_enough_of_them_are_bound():
    from bench.runner import _Pods

    recorder = Recorder()
    pods = _Pods(recorder)
    pods.adopting.add("apps")
    waiter = pods.wait_for_owners({"ReplicaSet apps/web": 2})

    def event(name: str, node: str = "", deleting: bool = False, kind: str = "MODIFIED", ns: str = "apps") -> dict:
        meta = {"namespace": ns, "name": name, "ownerReferences": [
            {"kind": "ReplicaSet", "name": "web", "controller": True}]}
        if deleting:
            meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        return {"type": kind, "object": {"metadata": meta, "spec": {"nodeName": node, "containers": [
            {"resources": {"requests": {"cpu": "500m"}}}]}}}

    pods.on_event(event("web-a", kind="ADDED"))
    pods.on_event(event("web-a", node="n1"))
    pods.on_event(event("web-b", node="n2", kind="ADDED"))
    pods.on_event(event("other", node="n3", ns="elsewhere"))   # not a namespace the run made controllers in
    assert waiter.event.is_set() and pods.live_by_owner == {"ReplicaSet apps/web": 2}
    pods.on_event(event("web-a", node="n1", deleting=True))    # evicted
    pods.on_event(event("web-a", node="n1", kind="DELETED"))
    assert pods.live_by_owner == {"ReplicaSet apps/web": 1}
    a, b = recorder.pods["apps/web-a"], recorder.pods["apps/web-b"]
    assert (a.owner, a.node, a.cpu, a.measured) == ("ReplicaSet apps/web", "n1", 500, False)
    assert a.deleting is not None and a.gone is not None and a.deleting <= a.gone and b.deleting is None
    assert "elsewhere/other" not in recorder.pods


STEADY = """\
- opcode: createNodes
  count: 2
- opcode: createPods
  namespace: steady
  count: 3
  steadyState: true
  duration: 1s
  collectMetrics: true
  podTemplate: {apiVersion: v1, kind: Pod, metadata: {generateName: p-}, spec: {containers: [{name: c, image: pause}]}}
"""


async def test_a_steady_state_keeps_its_count_in_flight_deleting_each_bound_batch_until_its_duration_is_over(
        sim, tmp_path):
    _, target = sim
    recorder = Recorder()
    async with BaselineBinder(target.client):
        t0 = time.time()
        await run_workload(ops_workload(tmp_path, "Steady", STEADY), target, BASELINE_SCHEDULER_NAME, recorder)
        took = time.time() - t0
    pods = sorted(recorder.pods.values(), key=lambda p: p.created)
    batches = [pods[i:i + 3] for i in range(0, len(pods), 3)]
    assert len(batches) >= 3 and all(len(b) == 3 for b in batches), len(pods)
    for before, after in zip(batches, batches[1:]):   # the next batch only once every pod of this one was bound
        assert max(p.bound for p in before) <= min(p.created for p in after)
    assert all(p.gone is not None for b in batches[:-1] for p in b)   # every batch deleted but the last
    left = (await target.client.list("/api/v1/namespaces/steady/pods"))["items"]
    assert len(left) <= 3 and 1.0 <= took < 5.0
    (window,) = recorder.windows
    assert window[1] - window[0] == pytest.approx(1.0, abs=0.3) and all(p.measured for p in pods)


async def test_a_steady_state_that_schedules_nothing_fails_as_upstreams_does(sim, tmp_path):
    _, target = sim
    with pytest.raises(RunError, match=r"op 1 \(createPods\): no pod at all was scheduled in the steady state's 1s"):
        await run_workload(ops_workload(tmp_path, "Steady", STEADY), target, "nobody", Recorder())


async def test_create_any_keeps_names_with_an_index_as_upstreams_test_claim_index_so_a_second_run_reuses_them(
        sim, tmp_path):
    _, target = sim
    workload = ops_workload(tmp_path, "Indexed", """\
    - opcode: createAny
      namespace: budgets
      count: 3
      template: {apiVersion: policy/v1, kind: PodDisruptionBudget, metadata: {name: "pdb-{{.Index}}"},
                 spec: {minAvailable: 1, selector: {matchLabels: {app: x}}}}
    """)
    await run_workload(workload, target, "nobody", Recorder())
    await run_workload(workload, target, "nobody", Recorder())
    pdbs = (await target.client.list("/apis/policy/v1/namespaces/budgets/poddisruptionbudgets"))["items"]
    assert sorted(p["metadata"]["name"] for p in pdbs) == ["pdb-0", "pdb-1", "pdb-2"]
