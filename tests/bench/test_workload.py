"""bench/workload.py: the workload files parse, params substitute, and every mistake names file and op."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from bench.pipelines import stages
from bench.workload import (POD_GROUP_LABEL, ZONE_LABEL, AllocResourceClaims, Barrier, CheckResourceClaims, Churn,
                            CreateAny, CreateNodes, CreatePipelineRuns, CreatePodGroups, CreatePods,
                            CreateResourceDriver, DeletePods, Sleep, StartCollectingMetrics,
                            StopCollectingMetrics, WorkloadError, find_workload,
                            load_workloads, parse_duration, uses_controllers)

WORKLOADS = Path(__file__).resolve().parents[2] / "bench" / "workloads"
TEST_CASES = ("SchedulingBasic", "SchedulingDaemonset", "SchedulingNodeAffinity", "SchedulingWithTaints",
              "MixedSchedulingBasePod", "Unschedulable", "SchedulingWithMixedChurn", "SchedulingWhileGated", "GangBasic",
              "GangLarge", "GangContention")
SCALES = ("Smoke", "500Nodes", "5000Nodes", "15000Nodes")
# affinity.yaml: scheduler_perf's affinity and topology_spreading test cases, up to 5,000 nodes
AFFINITY_TEST_CASES = ("SchedulingPodAntiAffinity", "SchedulingPodAffinity", "SchedulingPreferredPodAffinity",
                       "SchedulingPreferredPodAntiAffinity", "TopologySpreading", "PreferredTopologySpreading",
                       "SchedulingDefaultTopologySpreading")
AFFINITY_SCALES = ("Smoke", "500Nodes", "5000Nodes")
# preemption.yaml: scheduler_perf's default_preemption test cases and ours, up to 5,000 nodes
PREEMPTION_TEST_CASES = ("PreemptionBasic", "PreemptionAsync", "PreemptionAsyncSlowDeletion", "GangPreemption")
PREEMPTION_SCALES = AFFINITY_SCALES
HOSTNAME = "kubernetes.io/hostname"


def all_workloads():
    return [w for f in sorted(WORKLOADS.glob("*.yaml")) for w in load_workloads(f)]


def nodes_of(w) -> int:
    return sum(op.count for op in w.ops if isinstance(op, CreateNodes))


def measured_pods(w) -> int:
    """Pods of collectMetrics ops, and every pod created between startCollectingMetrics and stopCollectingMetrics."""
    n = 0
    window = False
    for op in w.ops:
        if isinstance(op, (StartCollectingMetrics, StopCollectingMetrics)):
            window = isinstance(op, StartCollectingMetrics)
        if isinstance(op, CreatePods) and (op.collect_metrics or window):
            n += op.count
        if isinstance(op, CreatePodGroups) and (op.collect_metrics or window):
            n += op.count * op.pods_per_group
        if isinstance(op, CreatePipelineRuns) and op.collect_metrics:
            n += sum(len(tasks) for i in range(op.count) for tasks in stages(op, i))
    return n


# ---------------------------------------------------------------------------- the shipped files


def test_every_workload_file_loads_with_every_test_case_at_every_scale():
    names = {w.full_name for w in all_workloads()}
    missing = [f"{t}/{s}" for t in TEST_CASES for s in SCALES if f"{t}/{s}" not in names]
    assert not missing


def test_affinity_file_has_every_test_case_at_smoke_500_and_5000_nodes():
    names = [w.full_name for w in load_workloads(WORKLOADS / "affinity.yaml")]
    assert names == [f"{t}/{s}" for t in AFFINITY_TEST_CASES for s in AFFINITY_SCALES]


@pytest.mark.parametrize("scale,nodes", [("500Nodes", 500), ("5000Nodes", 5000), ("15000Nodes", 15000)])
def test_every_scale_param_set_creates_that_many_nodes(scale, nodes):
    for w in all_workloads():
        if w.name == scale:
            # upstream's SchedulingDaemonset adds its one named node to initNodes others
            extra = 1 if w.test == "SchedulingDaemonset" else 0
            assert nodes_of(w) == nodes + extra, w.full_name


def test_every_workload_measures_pods_and_is_labelled_as_upstream():
    for w in all_workloads():
        assert measured_pods(w) > 0, w.full_name
        if w.name == "Smoke":
            assert {"integration-test", "short"} <= set(w.labels), w.full_name
            assert nodes_of(w) <= 10 and measured_pods(w) <= 50, w.full_name
        else:
            assert "performance" in w.labels, w.full_name
            assert "integration-test" not in w.labels, w.full_name


def test_scheduling_basic_5000_nodes_measures_10000_pods_after_1000_init_pods_as_upstream():
    w = find_workload(WORKLOADS, "SchedulingBasic/5000Nodes")
    create = [op for op in w.ops if isinstance(op, CreatePods)]
    assert [(op.count, op.collect_metrics) for op in create] == [(1000, False), (10000, True)]
    assert nodes_of(w) == 5000


def test_templates_are_scheduler_perf_defaults():
    w = find_workload(WORKLOADS, "SchedulingBasic/5000Nodes")
    node = w.ops[0].template
    assert node["status"]["capacity"] == {"pods": "110", "cpu": "4", "memory": "32Gi"}
    requests = w.ops[1].template["spec"]["containers"][0]["resources"]["requests"]
    assert requests == {"cpu": "100m", "memory": "500Mi"}
    assert "schedulerName" not in w.ops[1].template["spec"]  # filled from the run's --scheduler-name


@pytest.mark.parametrize("scale,nodes,pods", [
    ("Smoke", 5, 10), ("500Nodes", 500, 1000), ("5000Nodes", 5000, 10000), ("15000Nodes", 15000, 30000),
])
def test_daemonset_pods_all_require_the_one_named_node_by_its_name_field_as_upstreams(scale, nodes, pods):
    w = find_workload(WORKLOADS, f"SchedulingDaemonset/{scale}")
    named, others, measured = w.ops
    assert isinstance(named, CreateNodes) and named.count == 1
    assert named.template["metadata"]["name"] == "scheduler-perf-node"
    assert named.template["status"]["capacity"]["pods"] == "90000"
    assert isinstance(others, CreateNodes) and others.count == nodes
    assert isinstance(measured, CreatePods) and measured.collect_metrics and measured.count == pods
    spec = measured.template["spec"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["scheduler-perf-node"]}]}]
    assert "resources" not in spec["containers"][0]


@pytest.mark.parametrize("name,gangs,size,nodes", [
    ("GangBasic/5000Nodes", 2000, 3, 5000),
    ("GangLarge/5000Nodes", 3, 1000, 5000),
])
def test_gang_workloads_have_the_sizes_of_the_issue(name, gangs, size, nodes):
    w = find_workload(WORKLOADS, name)
    (op,) = [op for op in w.ops if isinstance(op, CreatePodGroups)]
    assert (op.count, op.pods_per_group, op.min_member, nodes_of(w)) == (gangs, size, size, nodes)
    assert op.group_template["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert op.group_template["kind"] == "PodGroup"


@pytest.mark.parametrize("scale", SCALES)
def test_gang_contention_demands_more_than_the_cluster_holds_and_frees_it_as_pods_finish(scale):
    w = find_workload(WORKLOADS, f"GangContention/{scale}")
    (op,) = [op for op in w.ops if isinstance(op, CreatePodGroups)]
    cpu = int(op.pod_template["spec"]["containers"][0]["resources"]["requests"]["cpu"])
    node_cpu = int(w.ops[0].template["status"]["capacity"]["cpu"])
    assert op.count * op.pods_per_group * cpu > nodes_of(w) * node_cpu
    (deleter,) = [o for o in w.ops if isinstance(o, DeletePods)]
    assert deleter.when_bound and deleter.namespace == op.namespace and deleter.index < op.index


def existing_before_measured(w) -> int:
    """Pods created before the first measured op: the cluster the measured pods land in."""
    n = 0
    for op in w.ops:
        if getattr(op, "collect_metrics", False):
            return n
        if isinstance(op, CreatePods):
            n += op.count
    return n


@pytest.mark.parametrize("test", AFFINITY_TEST_CASES)
def test_affinity_5000_nodes_runs_on_5000_existing_pods_and_measures_seconds_of_scheduling(test):
    w = find_workload(WORKLOADS, f"{test}/5000Nodes")
    assert existing_before_measured(w) >= 5000
    assert 3000 <= measured_pods(w) <= 20000  # 5-20 s at 600-1,000 pods/s, give or take


def selects(term: dict, namespace: str, pod: dict) -> bool:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    wanted = term["labelSelector"]["matchLabels"]
    return namespace in term["namespaces"] and all(labels.get(k) == v for k, v in wanted.items())


@pytest.mark.parametrize("scale", AFFINITY_SCALES)
def test_required_anti_affine_pods_fit_one_per_node_and_plain_pods_do_not_count(scale):
    w = find_workload(WORKLOADS, f"SchedulingPodAntiAffinity/{scale}")
    pods = [op for op in w.ops if isinstance(op, CreatePods)]
    (term,) = pods[-1].template["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == HOSTNAME
    green = sum(op.count for op in pods if selects(term, op.namespace, op.template))
    plain = [op for op in pods if not selects(term, op.namespace, op.template)]
    assert green <= nodes_of(w)
    assert plain and all("affinity" not in op.template["spec"] for op in plain)
    if scale == "5000Nodes":
        assert [op.count for op in pods if selects(term, op.namespace, op.template)] == [1000, 3500]


@pytest.mark.parametrize("test,zones", [
    ("SchedulingPodAntiAffinity", ()), ("SchedulingPodAffinity", ("zone1",)), ("SchedulingPreferredPodAffinity", ()),
    ("SchedulingPreferredPodAntiAffinity", ()), ("TopologySpreading", ("moon-1", "moon-2", "moon-3")),
    ("PreferredTopologySpreading", ("moon-1", "moon-2", "moon-3")),
    ("SchedulingDefaultTopologySpreading", ("moon-1", "moon-2", "moon-3")),
])
def test_affinity_nodes_carry_upstreams_zone_labels(test, zones):
    (op,) = [op for op in find_workload(WORKLOADS, f"{test}/Smoke").ops if isinstance(op, CreateNodes)]
    assert (op.label_key, op.label_values) == ((ZONE_LABEL, zones) if zones else ("", ()))
    assert op.template["status"]["capacity"] == {"pods": "110", "cpu": "4", "memory": "32Gi"}


def test_default_topology_spreading_pods_are_selected_by_the_service_in_their_namespace():
    w = find_workload(WORKLOADS, "SchedulingDefaultTopologySpreading/5000Nodes")
    (service,) = [op for op in w.ops if isinstance(op, CreateAny)]
    (measured,) = [op for op in w.ops if isinstance(op, CreatePods) and op.collect_metrics]
    assert (service.template["apiVersion"], service.template["kind"], service.count) == ("v1", "Service", 1)
    assert service.namespace == measured.namespace
    assert service.template["spec"]["selector"].items() <= measured.template["metadata"]["labels"].items()
    assert not measured.template["spec"].get("topologySpreadConstraints")


def test_unschedulable_barrier_waits_only_for_pods_that_can_schedule():
    w = find_workload(WORKLOADS, "Unschedulable/Smoke")
    (barrier,) = [op for op in w.ops if isinstance(op, Barrier)]
    unschedulable = {op.namespace for op in w.ops if isinstance(op, CreatePods) and op.skip_wait
                     and op.template["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "9"}
    assert barrier.namespaces and not unschedulable & set(barrier.namespaces)


def preemption_workloads():
    return [pytest.param(w, id=w.full_name) for w in load_workloads(WORKLOADS / "preemption.yaml")]


def cpu_milli(template: dict) -> int:
    total = 0
    for c in template["spec"]["containers"]:
        q = c["resources"]["requests"]["cpu"]
        total += int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)
    return total


def pod_ops(w) -> list[tuple[object, dict]]:
    """(op, pod template) of every op that creates pods, churn included."""
    out: list[tuple[object, dict]] = []
    for op in w.ops:
        if isinstance(op, CreatePods):
            out.append((op, op.template))
        elif isinstance(op, CreatePodGroups):
            out.append((op, op.pod_template))
        elif isinstance(op, Churn):
            out += [(op, t) for t in op.templates if t["kind"] == "Pod"]
    return out


def test_preemption_file_has_every_test_case_at_smoke_500_and_5000_nodes():
    names = [w.full_name for w in load_workloads(WORKLOADS / "preemption.yaml")]
    assert names == [f"{t}/{s}" for t in PREEMPTION_TEST_CASES for s in PREEMPTION_SCALES]


@pytest.mark.parametrize("w", preemption_workloads())
def test_preemption_pods_get_their_priority_from_a_class_the_workload_creates_first(w):
    classes = {op.template["metadata"]["name"]: op.template["value"] for op in w.ops if isinstance(op, CreateAny)
               and op.template["kind"] == "PriorityClass"}
    assert classes == {"bench-low-priority": 0, "bench-high-priority": 10000}
    first_pods = min(op.index for op, _ in pod_ops(w))
    assert all(op.index < first_pods and op.count == 1 for op in w.ops if isinstance(op, CreateAny))
    for _, template in pod_ops(w):
        # a real API server refuses spec.priority that its class (or the lack of one) does not give
        assert "priority" not in template["spec"]
        assert template["spec"].get("priorityClassName", "bench-low-priority") in classes


@pytest.mark.parametrize("w", preemption_workloads())
def test_low_priority_pods_fill_every_node_so_that_preemptors_fit_only_after_evicting(w):
    (nodes,) = [op for op in w.ops if isinstance(op, CreateNodes)]
    node_cpu = int(nodes.template["status"]["capacity"]["cpu"]) * 1000
    low = [(op, t) for op, t in pod_ops(w) if t["spec"].get("priorityClassName") == "bench-low-priority"]
    high = [(op, t) for op, t in pod_ops(w) if t["spec"].get("priorityClassName") == "bench-high-priority"]
    low_pods = sum(op.count * getattr(op, "pods_per_group", 1) for op, _ in low)
    (per_pod,) = {cpu_milli(t) for _, t in low}
    assert low_pods == 4 * nodes_of(w) and 4 * per_pod <= node_cpu < 5 * per_pod   # four on every node
    free = node_cpu - 4 * per_pod
    for op, t in high:
        assert free < cpu_milli(t) <= node_cpu   # fits an emptied node, and no node without preempting
        if not isinstance(op, Churn):
            assert op.collect_metrics and measured_pods(w) <= nodes_of(w)   # one node each
    if w.test.startswith("PreemptionAsync"):
        (measured,) = [op for op in w.ops if getattr(op, "collect_metrics", False)]
        assert "priorityClassName" not in measured.template["spec"]
        assert measured.count * cpu_milli(measured.template) <= nodes_of(w) * free   # they fit without preempting


def test_slow_deletion_victims_differ_from_upstreams_only_in_taking_a_second_to_go():
    (quick,) = [t for _, t in pod_ops(find_workload(WORKLOADS, "PreemptionAsync/Smoke"))
                if t["spec"].get("priorityClassName") == "bench-low-priority"]
    (slow,) = [t for _, t in pod_ops(find_workload(WORKLOADS, "PreemptionAsyncSlowDeletion/Smoke"))
               if t["spec"].get("priorityClassName") == "bench-low-priority"]
    assert (quick["spec"]["terminationGracePeriodSeconds"], slow["spec"]["terminationGracePeriodSeconds"]) == (0, 1)
    assert slow["metadata"]["annotations"] == {"simcluster.tandem.dev/termination-seconds": "1"}
    assert {**slow["spec"], "terminationGracePeriodSeconds": 0} == quick["spec"]


@pytest.mark.parametrize("scale", PREEMPTION_SCALES)
def test_gang_preemption_victim_gangs_are_evicted_whole_and_preemptors_are_gangs_of_8(scale):
    w = find_workload(WORKLOADS, f"GangPreemption/{scale}")
    victims, preemptors = [op for op in w.ops if isinstance(op, CreatePodGroups)]
    (singles,) = [op for op in w.ops if isinstance(op, CreatePods)]
    mode = "scheduling.tandem.dev/disruption-mode"
    assert victims.group_template["metadata"]["annotations"] == {mode: "PodGroup"} and not victims.collect_metrics
    assert mode not in (preemptors.group_template["metadata"].get("annotations") or {})
    assert (preemptors.pods_per_group, preemptors.min_member, preemptors.collect_metrics) == (8, 8, True)
    assert victims.min_member == victims.pods_per_group and singles.count > 0
    assert len({victims.namespace, singles.namespace, preemptors.namespace}) == 3


# ---------------------------------------------------------------------------- params


def write(tmp_path: Path, text: str, name: str = "w.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


BASIC = """\
- name: T
  defaultPodTemplatePath: pod.yaml
  workloadTemplate:
  - opcode: createNodes
    countParam: $nodes
    zones: $zones
  - opcode: createPods
    countParam: $pods
    collectMetrics: true
  - opcode: sleep
    duration: 1m30s
  workloads:
  - name: Small
    labels: [short]
    params: {nodes: 3, zones: 2, pods: 10}
  - name: Big
    params: {nodes: 300, zones: 3, pods: 1000}
"""
POD = "apiVersion: v1\nkind: Pod\nmetadata: {generateName: p-}\nspec: {containers: [{name: c, image: i}]}\n"


@pytest.fixture
def basic(tmp_path: Path) -> Path:
    (tmp_path / "pod.yaml").write_text(POD)
    return write(tmp_path, BASIC)


def test_params_are_substituted_in_count_params_and_other_fields(basic):
    small, big = load_workloads(basic)
    assert small.full_name == "T/Small" and small.labels == ("short",)
    assert (small.ops[0].count, small.ops[0].zones, small.ops[1].count) == (3, 2, 10)
    assert (big.ops[0].count, big.ops[0].zones, big.ops[1].count) == (300, 3, 1000)
    assert small.ops[1].namespace == "namespace-1"  # upstream's per-op default
    assert isinstance(small.ops[2], Sleep) and small.ops[2].duration == 90.0
    assert small.source == basic


def test_overrides_replace_params_and_parse_integers(basic):
    small = find_workload(basic, "T/Small", {"pods": "7"})
    assert small.ops[1].count == 7 and small.params["pods"] == 7


def test_a_test_case_name_with_overrides_is_a_custom_param_set(basic):
    w = find_workload([basic], "T", {"nodes": "1", "zones": "0", "pods": "2"})
    assert w.full_name == "T/custom" and (w.ops[0].count, w.ops[1].count) == (1, 2)


def test_a_test_case_name_alone_names_its_workloads(basic):
    with pytest.raises(WorkloadError, match=r"T/Small, T/Big"):
        find_workload(basic, "T")


def test_an_unknown_workload_lists_the_available_ones(basic):
    with pytest.raises(WorkloadError, match=r"no workload 'T/Huge'.*T/Small, T/Big"):
        find_workload(basic, "T/Huge")
    with pytest.raises(WorkloadError, match=r"no workload 'Nope/Small'; available: T/Small, T/Big"):
        find_workload(basic, "Nope/Small")


def test_find_workload_searches_folders():
    assert find_workload(WORKLOADS, "GangLarge/Smoke").test == "GangLarge"


@pytest.mark.parametrize("text,seconds", [("30s", 30), ("1m30s", 90), ("500ms", 0.5), ("1h", 3600), (2, 2.0)])
def test_durations_read_as_go_writes_them(text, seconds):
    assert parse_duration(text) == seconds


def test_inline_templates_and_gang_fields(tmp_path):
    path = write(tmp_path, """\
    - name: G
      workloadTemplate:
      - opcode: createNodes
        count: 2
        nodeTemplate: {apiVersion: v1, kind: Node, metadata: {generateName: n-}, status: {capacity: {cpu: "8"}}}
        labels: {pool: a}
        taints: [{key: k, value: v, effect: NoSchedule}]
        capacity: {nvidia.com/gpu: "8"}
      - opcode: createPodGroups
        count: 2
        podsPerGroup: 4
        minMember: 3
        podTemplate: {apiVersion: v1, kind: Pod, spec: {containers: [{name: c, image: i}]}}
        collectMetrics: true
      - opcode: churn
        mode: recreate
        number: 1
        templates: [{apiVersion: v1, kind: Node, metadata: {generateName: c-}}]
      - opcode: barrier
        namespaces: [namespace-1]
        labelSelector: {app: x}
        timeout: 5s
      workloads:
      - name: W
    """)
    (w,) = load_workloads(path)
    nodes, groups, churn, barrier = w.ops
    assert nodes.labels == {"pool": "a"} and nodes.taints == ({"key": "k", "value": "v", "effect": "NoSchedule"},)
    assert nodes.capacity == {"nvidia.com/gpu": "8"}
    assert (groups.count, groups.pods_per_group, groups.min_member) == (2, 4, 3)
    assert groups.group_template["kind"] == "PodGroup"
    assert isinstance(churn, Churn) and churn.mode == "recreate" and churn.interval == 0.5
    assert (barrier.namespaces, barrier.label_selector, barrier.timeout) == (("namespace-1",), {"app": "x"}, 5.0)
    assert POD_GROUP_LABEL == "scheduling.x-k8s.io/pod-group"


def test_node_label_strategies_and_create_any(tmp_path):
    (tmp_path / "svc.yaml").write_text("apiVersion: v1\nkind: Service\nmetadata: {generateName: s-}\n")
    path = write(tmp_path, """\
    - name: S
      workloadTemplate:
      - opcode: createNodes
        count: 3
        labelNodePrepareStrategy: {labelKey: topology.kubernetes.io/zone, labelValues: [a, $zone]}
      - opcode: createNodes
        count: 2
        uniqueNodeLabelStrategy: {labelKey: example.com/id}
      - opcode: createAny
        templatePath: svc.yaml
        namespace: ns
      - opcode: createAny
        countParam: $classes
        template: {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, value: 5}
      workloads:
      - name: W
        params: {zone: b, classes: 3}
    """)
    (w,) = load_workloads(path)
    labelled, unique, service, classes = w.ops
    assert (labelled.label_key, labelled.label_values, labelled.unique_label_key) == (ZONE_LABEL, ("a", "b"), "")
    assert (unique.label_key, unique.label_values, unique.unique_label_key) == ("", (), "example.com/id")
    assert (service.template["kind"], service.namespace, service.count) == ("Service", "ns", 1)  # upstream's count
    assert (classes.template["kind"], classes.namespace, classes.count) == ("PriorityClass", "", 3)
    assert not uses_controllers(w)


def test_paced_pods_and_replica_sets_that_make_the_workload_need_controllers(tmp_path):
    path = write(tmp_path, """\
    - name: R
      workloadTemplate:
      - opcode: createAny
        namespace: apps
        count: 2
        timeout: 30s
        template: {apiVersion: apps/v1, kind: ReplicaSet, metadata: {generateName: "web-{{.Index}}-"},
                   spec: {replicas: $replicas, template: {spec: {containers: [{name: c, image: pause}]}}}}
      - opcode: createPods
        count: 10
        createPodsPerSecond: $rate
        podTemplate: {apiVersion: v1, kind: Pod, spec: {containers: [{name: c, image: pause}]}}
      workloads:
      - name: W
        params: {replicas: 3, rate: 2.5}
    """)
    (w,) = load_workloads(path)
    sets, paced = w.ops
    assert (sets.replicas, sets.timeout, sets.skip_wait) == (3, 30.0, False)
    assert sets.template["metadata"]["generateName"] == "web-{{.Index}}-"   # expanded per object by the runner
    assert paced.per_second == 2.5
    assert uses_controllers(w)


# ---------------------------------------------------------------------------- errors name file and op


HEADER = """\
- name: T
  defaultPodTemplatePath: pod.yaml
  workloadTemplate:
  - opcode: createNodes
    count: 1
"""


@pytest.mark.parametrize("ops,params,message", [
    ("  - opcode: createPodz\n    count: 1\n", {}, "T op 1 (createPodz): unknown opcode 'createPodz'"),
    ("  - opcode: createPods\n    countParam: $measurePods\n", {}, "T/W op 1 (createPods): missing param $measurePods"),
    ("  - opcode: createPods\n    count: lots\n", {}, "T op 1 (createPods): field count: expected an integer, "
                                                    "got 'lots' (str)"),
    ("  - opcode: createPods\n    countParam: $n\n", {"n": "many"}, "T/W op 1 (createPods): param $n: expected an "
                                                                    "integer, got 'many' (str)"),
    ("  - opcode: createPods\n    count: 1\n    collectMetrics: $c\n", {"c": 3},
     "T/W op 1 (createPods): field collectMetrics: expected true or false, got 3 (int) (from param $c)"),
    ("  - opcode: createPods\n    count: 1\n    podTemplatPath: x.yaml\n", {},
     "T op 1 (createPods): unknown field 'podTemplatPath'"),
    ("  - opcode: createPods\n    count: 1\n    podTemplatePath: missing.yaml\n", {},
     "T op 1 (createPods): field podTemplatePath: cannot read missing.yaml"),
    ("  - opcode: createPods\n    count: 1\n    collectMetrics: true\n    skipWaitToCompletion: true\n", {},
     "T op 1 (createPods): collectMetrics and skipWaitToCompletion cannot both be true"),
    ("  - opcode: churn\n    mode: recreate\n    templatePaths: [pod.yaml]\n", {},
     "T/W op 1 (churn): field number: cannot be 0 when mode is recreate"),
    ("  - opcode: createPodGroups\n    count: 1\n    podsPerGroup: 2\n    minMember: 3\n", {},
     "T/W op 1 (createPodGroups): field minMember: 3 is more than podsPerGroup 2"),
    ("  - opcode: barrier\n    stageRequirement: Bound\n", {},
     "T/W op 1 (barrier): field stageRequirement: expected Scheduled or Attempted"),
    ("  - opcode: sleep\n    duration: soon\n", {}, "T op 1 (sleep): field duration: expected a duration"),
    ("  - opcode: createNodes\n    count: 1\n    taints: [{key: k, effect: Never}]\n", {},
     "T op 1 (createNodes): field taints[0].effect: expected one of NoSchedule"),
    ("  - opcode: createNodes\n    count: 1\n    labelNodePrepareStrategy: {labelKey: k, labelValues: [a]}\n"
     "    uniqueNodeLabelStrategy: {labelKey: u}\n", {},
     "T op 1 (createNodes): fields labelNodePrepareStrategy and uniqueNodeLabelStrategy: give one, not both"),
    ("  - opcode: createNodes\n    count: 1\n    labelNodePrepareStrategy: {labelKey: k, labelValues: []}\n", {},
     "T/W op 1 (createNodes): field labelNodePrepareStrategy: field labelValues: needs at least one value"),
    ("  - opcode: createNodes\n    count: 1\n    uniqueNodeLabelStrategy: {labelKey: k, labelValues: [a]}\n", {},
     "T op 1 (createNodes): field uniqueNodeLabelStrategy: unknown field 'labelValues' (known: labelKey)"),
    ("  - opcode: createAny\n    namespace: ns\n", {}, "T op 1 (createAny): missing field templatePath (or template)"),
    ("  - opcode: createAny\n    template: {apiVersion: v1, metadata: {name: x}}\n", {},
     "T op 1 (createAny): the template has no kind"),
    ("  - opcode: createPods\n    count: 1\n    persistentVolumeTemplate: {kind: PersistentVolume, spec: {}}\n", {},
     "T op 1 (createPods): persistentVolumeTemplatePath needs persistentVolumeClaimTemplatePath (as upstream)"),
    ("  - opcode: createPods\n    count: 1\n    persistentVolumeClaimTemplate: {kind: PersistentVolume}\n", {},
     "T op 1 (createPods): field persistentVolumeClaimTemplate: expected a PersistentVolumeClaim object"),
    ("  - opcode: createPods\n    count: 1\n    createPodsPerSecond: -1\n", {},
     "T op 1 (createPods): field createPodsPerSecond: must not be negative, got -1"),
    ("  - opcode: createNodes\n    count: 1\n    persistentVolumesPerNode: 2\n", {},
     "T/W op 1 (createNodes): persistentVolumesPerNode and persistentVolumeTemplatePath (or "
     "persistentVolumeTemplate) go together"),
    ("  - opcode: createNodes\n    count: 1\n    storageCapacitiesPerNode: 1\n", {},
     "T/W op 1 (createNodes): storageCapacitiesPerNode needs storageCapacityTemplatePath (or "
     "storageCapacityTemplate)"),
    ("  - opcode: createNodes\n    count: 1\n    storageCapacityTemplate: {kind: PersistentVolume}\n", {},
     "T op 1 (createNodes): field storageCapacityTemplate: expected a CSIStorageCapacity object"),
    ("  - opcode: createResourceDriver\n    nodes: n-*\n    maxClaimsPerNode: 2\n", {},
     "T op 1 (createResourceDriver): missing field driverName"),
    ("  - opcode: createResourceDriver\n    driverName: d\n    nodes: n-*\n", {},
     "T op 1 (createResourceDriver): missing field maxClaimsPerNode (or maxClaimsPerNodeParam)"),
    ("  - opcode: createResourceDriver\n    driverName: d\n    nodes: n-*\n    maxClaimsPerNodeParam: $m\n",
     {"m": 0}, "T/W op 1 (createResourceDriver): maxClaimsPerNode: must be at least 1, got 0"),
    ("  - opcode: createPods\n    count: 10\n    steadyState: true\n", {},
     "T/W op 1 (createPods): steadyState needs a duration above 0 (duration or durationParam), as upstream"),
    ("  - opcode: createPods\n    count: 10\n    steadyState: true\n    duration: 1s\n    skipWaitToCompletion: true\n",
     {}, "T op 1 (createPods): skipWaitToCompletion and steadyState cannot both be true (as upstream)"),
    ("  - opcode: createPods\n    count: 10\n    duration: 1s\n", {},
     "T op 1 (createPods): field duration: only meaningful with steadyState: true"),
    ("  - opcode: createPods\n    count: 10\n    steadyState: true\n    durationParam: $d\n", {"d": "soon"},
     "T/W op 1 (createPods): param $d: expected a duration"),
    ("  - opcode: createPods\n    count: 10\n    steadyState: true\n    duration: 1s\n    createPodsPerSecond: 5\n",
     {}, "T/W op 1 (createPods): steadyState does not go with createPodsPerSecond or volume templates"),
    ("  - opcode: checkResourceClaims\n    namespace: test\n", {},
     "T op 1 (checkResourceClaims): unknown field 'namespace' (known: namespaces, timeout)"),
], ids=[
    "an unknown opcode", "a missing param", "a count that is not a number", "a param of the wrong type",
    "a flag from a param that is not a bool", "an unknown field", "a template file that does not exist",
    "collectMetrics with skipWaitToCompletion", "recreate churn without a number", "a gang smaller than minMember",
    "an unknown barrier stage", "a duration that does not parse", "a taint with an unknown effect",
    "two node label strategies", "a label strategy without values", "a unique label strategy with values",
    "createAny without a template", "createAny of a template without a kind",
    "pods with volumes but no claims", "a claim template of another kind", "a negative pace",
    "volumes per node without a template", "capacities per node without a template",
    "a capacity template of another kind", "a resource driver without a name",
    "a resource driver without devices per node", "a resource driver with no devices",
    "a steady state without a duration", "a steady state that does not wait", "a duration without a steady state",
    "a steady state whose duration does not parse", "a paced steady state",
    "a claim check of one namespace, misspelt",
])
def test_every_error_names_the_file_the_test_case_and_the_op(tmp_path, ops, params, message):
    (tmp_path / "pod.yaml").write_text(POD)
    path = write(tmp_path, HEADER + ops + f"  workloads:\n  - name: W\n    params: {params!r}\n")
    with pytest.raises(WorkloadError) as info:
        load_workloads(path)
    assert str(info.value).startswith(f"{path}: "), str(info.value)
    assert message in str(info.value)


def test_the_message_of_a_missing_param_reads_as_documented(tmp_path):
    (tmp_path / "pod.yaml").write_text(POD)
    path = write(tmp_path, """\
    - name: SchedulingBasic
      defaultPodTemplatePath: pod.yaml
      workloadTemplate:
      - opcode: createNodes
        countParam: $initNodes
      - opcode: createPods
        countParam: $initPods
      - opcode: createPods
        countParam: $measurePods
      workloads:
      - name: 5000Nodes
        params: {initNodes: 5000, initPods: 1000}
    """)
    with pytest.raises(WorkloadError) as info:
        load_workloads(path)
    assert str(info.value) == f"{path}: SchedulingBasic/5000Nodes op 2 (createPods): missing param $measurePods"


@pytest.mark.parametrize("text,message", [
    ("name: T\n", "expected a list of test cases"),
    ("- name: T\n  workloadTemplate: []\n  workloads: []\n", "T: missing field workloadTemplate"),
    ("- name: T\n  threshold: 3\n", "T: unknown field 'threshold'"),
    ("- name: T\n  workloadTemplate: [{opcode: sleep, duration: 1s}]\n  workloads: [{name: W, params: {}, x: 1}]\n",
     "T/W: unknown field 'x'"),
    ("- name: T\n  workloadTemplate: [{count: 1}]\n  workloads: [{name: W}]\n", "T: op 0: missing field opcode"),
    ("- [oops\n", "not valid YAML"),
], ids=["a file that is not a list", "a test case without ops", "an unknown test case field",
        "an unknown workload field", "an op without an opcode", "broken YAML"])
def test_structural_errors_name_the_file_and_the_test_case(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(WorkloadError) as info:
        load_workloads(path)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value), str(info.value)


def test_relative_paths_are_shown_as_typed(tmp_path, monkeypatch):
    (tmp_path / "pod.yaml").write_text(POD)
    write(tmp_path, HEADER + "  - opcode: createPodz\n  workloads: [{name: W}]\n", "bad.yaml")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(WorkloadError, match=re.escape("bad.yaml: T op 1 (createPodz)")):
        load_workloads(Path("bad.yaml"))


def test_create_pipeline_runs_reads_its_fields_and_splits_runs_into_stages(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text(textwrap.dedent("""
        - name: Runs
          workloadTemplate:
          - opcode: createPipelineRuns
            countParam: $runs
            minTasks: 2
            maxTasks: 5
            tasksPerStage: 2
            affinityAssistant: true
            podTemplate: {apiVersion: v1, kind: Pod, spec: {containers: [{name: c, image: pause}]}}
            collectMetrics: true
          workloads:
          - name: Few
            params: {runs: 4}
    """))
    (w,) = load_workloads(path)
    (op,) = w.ops
    assert isinstance(op, CreatePipelineRuns) and op.affinity_assistant and op.namespace == "namespace-0"
    assert [stages(op, i) for i in range(op.count)] == [[[0, 1]], [[0, 1], [2]], [[0, 1], [2, 3]],
                                                         [[0, 1], [2, 3], [4]]]
    path.write_text(path.read_text().replace("minTasks: 2", "minTasks: 6"))
    with pytest.raises(WorkloadError, match=r"op 0 \(createPipelineRuns\): field minTasks: 6 is more than maxTasks 5"):
        load_workloads(path)


def test_upstreams_dra_ops_read_their_fields_and_steady_state_its_duration(tmp_path):
    (tmp_path / "pod.yaml").write_text(POD)
    path = write(tmp_path, """\
    - name: D
      defaultPodTemplatePath: pod.yaml
      workloadTemplate:
      - opcode: createResourceDriver
        driverName: test-driver.cdi.k8s.io
        nodes: scheduler-perf-dra-*
        maxClaimsPerNodeParam: $maxClaimsPerNode
      - opcode: createResourceDriver
        driverName: d
        nodes: "*"
        maxClaimsPerNode: 9
        devicesPerNumaNode: 3
      - opcode: allocResourceClaims
        namespace: init
      - opcode: allocResourceClaims
      - opcode: createPods
        namespace: test
        count: 10
        steadyState: true
        durationParam: $duration
        collectMetrics: true
      - opcode: checkResourceClaims
      - opcode: checkResourceClaims
        namespaces: [test]
        timeout: 30s
      workloads:
      - name: W
        params: {maxClaimsPerNode: 10, duration: 10s}
    """)
    (w,) = load_workloads(path)
    assert w.ops[0] == CreateResourceDriver(0, driver_name="test-driver.cdi.k8s.io", nodes="scheduler-perf-dra-*",
                                            max_claims_per_node=10)
    assert (w.ops[1].max_claims_per_node, w.ops[1].devices_per_numa_node) == (9, 3)
    assert w.ops[2] == AllocResourceClaims(2, namespace="init") and w.ops[3] == AllocResourceClaims(3)
    steady = w.ops[4]
    assert isinstance(steady, CreatePods) and (steady.count, steady.steady_state, steady.duration) == (10, True, 10.0)
    assert w.ops[5] == CheckResourceClaims(5) and w.ops[6] == CheckResourceClaims(6, ("test",), 30.0)
    assert find_workload(path, "D/W", {"duration": "2s"}).ops[4].duration == 2.0
