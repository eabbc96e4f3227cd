"""Workload files: scheduler_perf's performance-config.yaml format, parsed into frozen ops.

A workload file is a list of test cases, as upstream's
``test/integration/scheduler_perf/*/performance-config.yaml``::

    - name: SchedulingBasic
      defaultPodTemplatePath: templates/pod-default.yaml
      labels: [performance]
      workloadTemplate:
      - opcode: createNodes
        countParam: $initNodes
      - opcode: createPods
        countParam: $measurePods
        collectMetrics: true
      workloads:
      - name: 5000Nodes
        labels: [performance]
        params: {initNodes: 5000, measurePods: 10000}

Every (test case, workload) pair becomes one :class:`Workload` whose ops
have every ``$param`` substituted and every template loaded, so that the
runner never sees a parameter or a path. ``countParam: $x`` works as
upstream; beyond upstream, any scalar field may be written ``$x``
(``zones: $zones``, ``holdSeconds: $hold``), and so may a scalar of an inline
template (``podTemplate: {spec: {activeDeadlineSeconds: $life}}``). Template paths are relative to
the workload file; templates may also be given inline (``podTemplate:``,
``nodeTemplate:``, ``podGroupTemplate:``, ``namespaceTemplate:``,
``templates:`` for churn).

Opcodes are upstream's createNodes, createNamespaces, createPods, createAny,
churn, deletePods, barrier, sleep, startCollectingMetrics and
stopCollectingMetrics (with upstream's field names, and createNodes' node
label strategies ``labelNodePrepareStrategy`` and ``uniqueNodeLabelStrategy``),
upstream's DRA ops createResourceDriver (a ResourceSlice per matching node,
as the driver publishes it) and allocResourceClaims (claims allocated
without pods, a cluster already in use), and createPods' ``steadyState``
with ``duration``/``durationParam`` (``count`` pods in flight: each batch,
once bound, is deleted and the next one created, until the duration is
over; as upstream), plus tandem's checkResourceClaims (every bound pod's
claims allocated on its node: bench/dra.py), createPodGroups (gangs: a ``scheduling.x-k8s.io/v1alpha1``
PodGroup per gang and its members labelled ``scheduling.x-k8s.io/pod-group``)
and createPipelineRuns (Tekton PipelineRuns' pods, stage by stage; bench/pipelines.py).
createAny creates ``count`` objects of any kind from a template (a Service, a
ReplicaSet), like upstream's; of its text/template expansion only ``{{.Index}}``
(the object's 0-based index) is supported, in any string of the template, so that
each ReplicaSet can select pods of its own. A createAny of objects with
``spec.replicas`` (ReplicaSets, StatefulSets) waits, unless
``skipWaitToCompletion``, until that many pods of each, as their controller makes
them, are bound: the cluster must run the controller (the simulated cluster does
with its node agent, which :func:`uses_controllers` tells tandem-bench to start).
createPods takes ``createPodsPerSecond`` (as upstream's deletePods takes
deletePodsPerSecond): the pods are created at that pace, pod i at i / rate
seconds, whatever the scheduler does meanwhile (a stream, measured open-loop).
createPods takes upstream's ``persistentVolumeTemplatePath`` and
``persistentVolumeClaimTemplatePath`` (or inline ``persistentVolumeTemplate``
/ ``persistentVolumeClaimTemplate``): each pod gets a claim of its own
(``pvc-<pod>``) and, with a volume template, a volume (``pv-<pod>``) bound
to it beforehand, as upstream's SchedulingCSIPVs; with a claim template
alone the claim is left for the scheduler (a WaitForFirstConsumer class: a
StatefulSet's replicas). Extensions to upstream fields: createNodes takes
``zones`` (and ``racksPerZone``: racks inside each zone), ``labels``, ``taints``, ``capacity`` and
``persistentVolumesPerNode`` with a volume template (that many volumes per
node, pinned to it by ``kubernetes.io/hostname`` node affinity, as local
volumes are) and ``storageCapacitiesPerNode`` with a CSIStorageCapacity
template (``storageCapacityTemplatePath`` or ``storageCapacityTemplate``:
that many objects per node, each with ``nodeTopology.matchLabels`` on the
node's ``kubernetes.io/hostname``, as a per-node driver publishes its
capacity); waiting ops take a ``timeout``; deletePods takes
``whenBound`` and ``holdSeconds`` (delete pods as they get bound, playing
finished jobs, so that demand above capacity can drain).

Every mistake is a :class:`WorkloadError` naming the file, the test case (and
workload, once params are involved), the op index and opcode, and the field:
``bench/workloads/basic.yaml: SchedulingBasic/5000Nodes op 2 (createPods):
missing param $measurePods``. This module never talks to a cluster.
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable

import yaml

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
POD_GROUP_API_VERSION = "scheduling.x-k8s.io/v1alpha1"
# upstream's native PodGroup (1.36, alpha): a group template of this apiVersion makes createPodGroups write
# spec.schedulingPolicy.gang.minCount and join each member with spec.schedulingGroup.podGroupName
NATIVE_POD_GROUP_API_VERSION = "scheduling.k8s.io/v1alpha2"


def uses_native_gangs(workload: Any) -> bool:
    """Does the workload create native PodGroups (so a simulated cluster must serve scheduling.k8s.io/v1alpha2)?"""
    return any(getattr(op, "group_template", {}).get("apiVersion") == NATIVE_POD_GROUP_API_VERSION
               for op in workload.ops)
def uses_controllers(workload: Any) -> bool:
    """Does the workload create objects whose controller makes pods (a ReplicaSet), or pods whose resource claims
    a controller makes from templates (the resourceclaim controller), so a simulated cluster must run its
    controllers and node agent?"""
    return any((isinstance(op, CreateAny) and isinstance((op.template.get("spec") or {}).get("template"), dict))
               or (isinstance(op, CreatePods) and any("resourceClaimTemplateName" in c for c in
                                                      (op.template.get("spec") or {}).get("resourceClaims") or ()))
               for op in workload.ops)


ZONE_LABEL = "topology.kubernetes.io/zone"
# createNodes' racksPerZone: racks inside each zone (Kueue's topology docs name a rack label this way)
RACK_LABEL = "cloud.provider.com/topology-rack"

# scheduler_perf's default node (templates/node-default.yaml): used when createNodes names no template
DEFAULT_NODE_TEMPLATE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"generateName": "scheduler-perf-"},
    "spec": {},
    "status": {
        "capacity": {"pods": "110", "cpu": "4", "memory": "32Gi"},
        "conditions": [{"type": "Ready", "status": "True"}],
        "phase": "Running",
    },
}

DEFAULT_POD_GROUP_TEMPLATE: dict[str, Any] = {
    "apiVersion": POD_GROUP_API_VERSION,
    "kind": "PodGroup",
    "metadata": {"generateName": "gang-"},
    "spec": {},
}


class WorkloadError(ValueError):
    """A workload file that cannot be run; the message says where and why."""


# ---------------------------------------------------------------------------- ops


@dataclass(frozen=True, slots=True)
class Op:
    """One step of a workload; ``index`` is its 0-based position in the workloadTemplate."""

    OPCODE: ClassVar[str] = ""
    index: int

    @property
    def opcode(self) -> str:
        return self.OPCODE

    @property
    def label(self) -> str:
        """``op 2 (createPods)``: how errors and progress name this op."""
        return f"op {self.index} ({self.OPCODE})"


@dataclass(frozen=True, slots=True)
class CreateNodes(Op):
    OPCODE: ClassVar[str] = "createNodes"
    count: int = 0
    template: dict[str, Any] = field(default_factory=lambda: copy.deepcopy(DEFAULT_NODE_TEMPLATE))
    zones: int = 0                                  # spread topology.kubernetes.io/zone=zone1..zoneN
    racks_per_zone: int = 0                         # and RACK_LABEL=zone<z>-rack1..rackN inside each zone
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[dict[str, Any], ...] = ()
    capacity: dict[str, str] = field(default_factory=dict)   # overrides status.capacity (and allocatable)
    # upstream's node prepare strategies, at most one: labelNodePrepareStrategy gives node i the label
    # label_key=label_values[i % len]; uniqueNodeLabelStrategy gives every node its own value of label_key
    label_key: str = ""
    label_values: tuple[str, ...] = ()
    unique_label_key: str = ""
    volumes_per_node: int = 0                       # persistentVolumesPerNode: local volumes pinned to each node
    volume_template: dict[str, Any] | None = None   # their PersistentVolume template
    # storageCapacitiesPerNode: CSIStorageCapacity objects whose nodeTopology selects each node by its hostname
    # label, as a per-node driver's controller publishes them (TopoLVM)
    capacities_per_node: int = 0
    capacity_template: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class CreateNamespaces(Op):
    OPCODE: ClassVar[str] = "createNamespaces"
    prefix: str = ""
    count: int = 0
    template: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class CreatePods(Op):
    OPCODE: ClassVar[str] = "createPods"
    count: int = 0
    namespace: str = ""                             # upstream's default: namespace-<op index>
    template: dict[str, Any] = field(default_factory=dict)
    collect_metrics: bool = False
    skip_wait: bool = False                         # skipWaitToCompletion
    timeout: float | None = None                    # seconds; None: the run's default
    volume_template: dict[str, Any] | None = None   # a PersistentVolume per pod, bound to its claim
    claim_template: dict[str, Any] | None = None    # a PersistentVolumeClaim per pod
    per_second: float = 0.0                         # createPodsPerSecond; 0: as fast as the server takes them
    # upstream's steadyState: keep ``count`` pods in flight for ``duration`` seconds; when all of a batch are
    # bound, delete them and create the next batch
    steady_state: bool = False
    duration: float = 0.0


@dataclass(frozen=True, slots=True)
class CreateAny(Op):
    OPCODE: ClassVar[str] = "createAny"
    template: dict[str, Any] = field(default_factory=dict)    # has apiVersion and kind
    namespace: str = ""                             # empty: a cluster-scoped kind (as upstream)
    count: int = 1
    skip_wait: bool = False                         # objects with spec.replicas: do not wait for their pods
    timeout: float | None = None

    @property
    def replicas(self) -> int | None:
        """The pods each object's controller makes (``spec.replicas``), or None for a kind without them."""
        value = (self.template.get("spec") or {}).get("replicas")
        return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class CreateResourceDriver(Op):
    """upstream's createResourceDriver: one ResourceSlice per node of the run whose name matches ``nodes``, as the
    driver's kubelet plugin would publish it (bench/dra.py). ``max_claims_per_node`` is upstream's name for the
    devices of each slice (one per claim of upstream's template)."""

    OPCODE: ClassVar[str] = "createResourceDriver"
    driver_name: str = ""
    nodes: str = ""                                 # a glob over the names of the nodes this run created
    max_claims_per_node: int = 0
    # 0: upstream's attribute dra.example.com/numa = the device's index (every device on a NUMA node of its
    # own); k: index // k (k devices per NUMA node), for claims that ask for devices of one NUMA node
    devices_per_numa_node: int = 0


@dataclass(frozen=True, slots=True)
class AllocResourceClaims(Op):
    """upstream's allocResourceClaims: allocate every unallocated claim of ``namespace`` (all namespaces when
    empty) on a node picked at random, without a pod, as if it were in use already (bench/dra.py)."""

    OPCODE: ClassVar[str] = "allocResourceClaims"
    namespace: str = ""


@dataclass(frozen=True, slots=True)
class CheckResourceClaims(Op):
    """tandem-bench's own: every bound pod (of ``namespaces``; empty: every namespace the run created pods in)
    that has resource claims must have each one allocated on its node and reserved for it, and no device may
    be allocated twice; a run whose scheduler bound pods without their devices fails here (bench/dra.py)."""

    OPCODE: ClassVar[str] = "checkResourceClaims"
    namespaces: tuple[str, ...] = ()
    timeout: float | None = None                    # for the claims' writes to settle


@dataclass(frozen=True, slots=True)
class CreatePodGroups(Op):
    OPCODE: ClassVar[str] = "createPodGroups"
    count: int = 0                                  # gangs
    min_member: int = 1
    pods_per_group: int = 1
    namespace: str = ""
    pod_template: dict[str, Any] = field(default_factory=dict)
    group_template: dict[str, Any] = field(default_factory=lambda: copy.deepcopy(DEFAULT_POD_GROUP_TEMPLATE))
    collect_metrics: bool = False
    skip_wait: bool = False
    timeout: float | None = None


@dataclass(frozen=True, slots=True)
class CreatePipelineRuns(Op):
    """Tekton PipelineRuns as their pods: run i has min_tasks + i % (max_tasks - min_tasks + 1) tasks, in stages
    of tasks_per_stage; a stage's pods are created once the previous stage's pods are bound and marked
    Succeeded (the op plays Tekton's controller and the kubelet). With affinity_assistant, each run is made
    Tekton's affinity-assistant way: a placeholder pod first, and required pod affinity from every task to it."""

    OPCODE: ClassVar[str] = "createPipelineRuns"
    count: int = 0                                  # runs
    min_tasks: int = 2
    max_tasks: int = 6
    tasks_per_stage: int = 2
    namespace: str = ""
    template: dict[str, Any] = field(default_factory=dict)
    affinity_assistant: bool = False
    collect_metrics: bool = False
    timeout: float | None = None


@dataclass(frozen=True, slots=True)
class Churn(Op):
    OPCODE: ClassVar[str] = "churn"
    mode: str = "create"                            # create | recreate
    number: int = 0                                 # create: at most this many (0: unlimited); recreate: cycle length
    interval: float = 0.5                           # seconds (intervalMilliseconds / 1000)
    namespace: str = ""
    templates: tuple[dict[str, Any], ...] = ()      # Node or Pod objects


@dataclass(frozen=True, slots=True)
class DeletePods(Op):
    OPCODE: ClassVar[str] = "deletePods"
    namespace: str = ""
    label_selector: dict[str, str] = field(default_factory=dict)
    per_second: int = 0                             # deletePodsPerSecond; 0: all at once
    skip_wait: bool = False
    when_bound: bool = False                        # delete each matching pod once bound, until the workload ends
    hold: float = 0.0                               # holdSeconds: how long a bound pod lives first
    timeout: float | None = None


@dataclass(frozen=True, slots=True)
class Barrier(Op):
    OPCODE: ClassVar[str] = "barrier"
    namespaces: tuple[str, ...] = ()                # empty: every namespace
    label_selector: dict[str, str] = field(default_factory=dict)
    stage: str = "Scheduled"                        # stageRequirement: Scheduled | Attempted
    timeout: float | None = None


@dataclass(frozen=True, slots=True)
class Sleep(Op):
    OPCODE: ClassVar[str] = "sleep"
    duration: float = 0.0


@dataclass(frozen=True, slots=True)
class StartCollectingMetrics(Op):
    OPCODE: ClassVar[str] = "startCollectingMetrics"
    name: str = ""
    namespaces: tuple[str, ...] = ()                # empty: every namespace
    label_selector: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StopCollectingMetrics(Op):
    OPCODE: ClassVar[str] = "stopCollectingMetrics"


@dataclass(frozen=True, slots=True)
class Workload:
    """One runnable workload: a test case's ops with one param set substituted."""

    test: str
    name: str
    labels: tuple[str, ...]
    params: dict[str, Any]
    ops: tuple[Op, ...]
    source: Path

    @property
    def full_name(self) -> str:
        return f"{self.test}/{self.name}"

    @property
    def collects_metrics(self) -> bool:
        return any(getattr(op, "collect_metrics", False) or isinstance(op, StartCollectingMetrics)
                   for op in self.ops)


# ---------------------------------------------------------------------------- field tables

_COUNT = ("count", "countParam")
_PV = ("persistentVolumeTemplatePath", "persistentVolumeTemplate")
_PVC = ("persistentVolumeClaimTemplatePath", "persistentVolumeClaimTemplate")
_CAPACITY = ("storageCapacityTemplatePath", "storageCapacityTemplate")
_FIELDS: dict[str, frozenset[str]] = {
    "createNodes": frozenset({*_COUNT, "nodeTemplatePath", "nodeTemplate", "zones", "racksPerZone", "labels",
                              "taints", "capacity", "labelNodePrepareStrategy", "uniqueNodeLabelStrategy",
                              "persistentVolumesPerNode", *_PV, "storageCapacitiesPerNode", *_CAPACITY}),
    "createNamespaces": frozenset({*_COUNT, "prefix", "namespaceTemplatePath", "namespaceTemplate"}),
    "createPods": frozenset({*_COUNT, "namespace", "podTemplatePath", "podTemplate", "collectMetrics",
                             "skipWaitToCompletion", "timeout", "createPodsPerSecond", "steadyState", "duration",
                             "durationParam", *_PV, *_PVC}),
    "createAny": frozenset({*_COUNT, "namespace", "templatePath", "template", "skipWaitToCompletion", "timeout"}),
    "createResourceDriver": frozenset({"driverName", "nodes", "maxClaimsPerNode", "maxClaimsPerNodeParam",
                                       "devicesPerNumaNode"}),
    "allocResourceClaims": frozenset({"namespace"}),
    "checkResourceClaims": frozenset({"namespaces", "timeout"}),
    "createPodGroups": frozenset({*_COUNT, "minMember", "podsPerGroup", "namespace", "podTemplatePath",
                                  "podTemplate", "podGroupTemplatePath", "podGroupTemplate", "collectMetrics",
                                  "skipWaitToCompletion", "timeout"}),
    "createPipelineRuns": frozenset({*_COUNT, "minTasks", "maxTasks", "tasksPerStage", "namespace",
                                     "podTemplatePath", "podTemplate", "affinityAssistant", "collectMetrics",
                                     "timeout"}),
    "churn": frozenset({"mode", "number", "intervalMilliseconds", "namespace", "templatePaths", "templates"}),
    "deletePods": frozenset({"namespace", "labelSelector", "deletePodsPerSecond", "skipWaitToCompletion",
                             "whenBound", "holdSeconds", "timeout"}),
    "barrier": frozenset({"namespaces", "labelSelector", "stageRequirement", "timeout"}),
    "sleep": frozenset({"duration", "durationParam"}),
    "startCollectingMetrics": frozenset({"name", "namespaces", "labelSelector"}),
    "stopCollectingMetrics": frozenset(),
}
OPCODES: tuple[str, ...] = tuple(_FIELDS)

_TEST_CASE_FIELDS = frozenset({"name", "workloadTemplate", "workloads", "defaultPodTemplatePath", "labels"})
_WORKLOAD_FIELDS = frozenset({"name", "labels", "params"})
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_DURATION_RE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: Any) -> float:
    """Seconds from a number or a Go duration string (``1m30s``, ``500ms``). Raises ValueError."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration, got {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"a duration cannot be negative: {value!r}")
        return float(value)
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a duration such as 30s or 1m30s, got {value!r}")
    s = value.strip()
    if s == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(s):
        m = _DURATION_RE.match(s, pos)
        if not m:
            raise ValueError(f"expected a duration such as 30s or 1m30s, got {value!r}")
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    return total


def parse_param_value(text: Any) -> Any:
    """A ``--param key=value`` value: int, then float, then true/false, else the string."""
    if not isinstance(text, str):
        return text
    s = text.strip()
    for conv in (int, float):
        try:
            return conv(s)
        except ValueError:
            pass
    if s.lower() in ("true", "false"):
        return s.lower() == "true"
    return s


def _display(path: Path) -> str:
    """The path as the user would type it: relative to the working directory when inside it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)
    return str(path) if rel.startswith("..") else rel


# ---------------------------------------------------------------------------- reading one op


class _Fields:
    """Typed access to one op's fields with ``$param`` substitution and located errors."""

    def __init__(self, raw: dict[str, Any], params: dict[str, Any] | None,
                 fail: Callable[[str], WorkloadError], templates: "_Templates") -> None:
        self.raw = raw
        self.params = params
        self.fail = fail
        self.templates = templates

    def _resolve(self, key: str, value: Any) -> Any:
        if isinstance(value, str) and value.startswith("$"):
            name = value[1:]
            if self.params is None:   # static check only: params come per workload
                return _UNRESOLVED
            if name not in self.params:
                raise self.fail(f"missing param {value} (field {key})" if key not in ("countParam", "durationParam")
                                else f"missing param {value}")
            return self.params[name]
        return value

    def get(self, key: str, default: Any = None) -> Any:
        if key not in self.raw:
            return default
        return self._resolve(key, self.raw[key])

    def _type_error(self, key: str, want: str, value: Any) -> WorkloadError:
        src = self.raw.get(key)
        via = f" (from param {src})" if isinstance(src, str) and src.startswith("$") else ""
        return self.fail(f"field {key}: expected {want}, got {value!r} ({type(value).__name__}){via}")

    def integer(self, key: str, default: int | None = None, minimum: int = 0) -> int:
        value = self.get(key, default)
        if value is _UNRESOLVED:
            return minimum
        if value is None:
            raise self.fail(f"missing field {key}")
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise self._type_error(key, "an integer", value)
        if value < minimum:
            raise self.fail(f"field {key}: must be at least {minimum}, got {value}")
        return value

    def count(self, key: str = "count", param_key: str = "countParam") -> int:
        """``count`` or ``countParam: $name`` (the param wins when both are set, as upstream)."""
        if param_key in self.raw:
            ref = self.raw[param_key]
            if not isinstance(ref, str) or not ref.startswith("$"):
                raise self.fail(f"field {param_key}: expected a $param reference, got {ref!r}")
            value = self._resolve(param_key, ref)
            if value is _UNRESOLVED:
                return 0
            if isinstance(value, bool) or not isinstance(value, int):
                if isinstance(value, float) and value.is_integer():
                    value = int(value)
                else:
                    raise self.fail(f"param {ref}: expected an integer, got {value!r} ({type(value).__name__})")
            if value < 0:
                raise self.fail(f"param {ref}: must be at least 0, got {value}")
            return value
        if key not in self.raw:
            raise self.fail(f"missing field {key} (or {param_key})")
        return self.integer(key)

    def number(self, key: str, default: float) -> float:
        value = self.get(key, default)
        if value is _UNRESOLVED:
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._type_error(key, "a number", value)
        if value < 0:
            raise self.fail(f"field {key}: must not be negative, got {value}")
        return float(value)

    def flag(self, key: str, default: bool = False) -> bool:
        value = self.get(key, default)
        if value is _UNRESOLVED:
            return default
        if not isinstance(value, bool):
            raise self._type_error(key, "true or false", value)
        return value

    def text(self, key: str, default: str | None = None) -> str:
        value = self.get(key, default)
        if value is _UNRESOLVED:
            return "x"
        if value is None:
            raise self.fail(f"missing field {key}")
        if not isinstance(value, str):
            raise self._type_error(key, "a string", value)
        return value

    def duration(self, key: str, default: float | None = None) -> float | None:
        value = self.get(key, default)
        if value is _UNRESOLVED or value is None:
            return default
        try:
            return parse_duration(value)
        except ValueError as exc:
            raise self.fail(f"field {key}: {exc}") from None

    def str_list(self, key: str) -> tuple[str, ...]:
        value = self.get(key, [])
        if value is _UNRESOLVED:
            return ()
        if not isinstance(value, list):
            raise self._type_error(key, "a list of strings", value)
        out = []
        for i, v in enumerate(value):
            v = self._resolve(f"{key}[{i}]", v)
            if v is _UNRESOLVED:
                continue
            if not isinstance(v, str):
                raise self._type_error(f"{key}[{i}]", "a string", v)
            out.append(v)
        return tuple(out)

    def str_map(self, key: str) -> dict[str, str]:
        value = self.get(key, {})
        if value is _UNRESOLVED:
            return {}
        if not isinstance(value, dict):
            raise self._type_error(key, "a map of strings", value)
        out: dict[str, str] = {}
        for k, v in value.items():
            v = self._resolve(f"{key}.{k}", v)
            if v is _UNRESOLVED:
                continue
            if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                raise self._type_error(f"{key}.{k}", "a string", v)
            out[str(k)] = str(v)
        return out

    def template(self, path_key: str, inline_key: str, kinds: tuple[str, ...],
                 default: dict[str, Any] | None = None) -> dict[str, Any] | None:
        if path_key in self.raw and inline_key in self.raw:
            raise self.fail(f"fields {path_key} and {inline_key}: give one, not both")
        if inline_key in self.raw:
            obj = self.raw[inline_key]
            if not isinstance(obj, dict):
                raise self._type_error(inline_key, "an object", obj)
            _check_kind(obj, kinds, inline_key, self.fail)
            return self._substitute(inline_key, copy.deepcopy(obj))
        if path_key in self.raw:
            rel = self.text(path_key)
            return self.templates.load(rel, kinds, path_key, self.fail)
        return copy.deepcopy(default) if default is not None else None


    def _substitute(self, key: str, obj: Any) -> Any:
        """An inline template with each scalar ``$param`` value replaced (a template file is taken as it is)."""
        if isinstance(obj, dict):
            return {k: self._substitute(key, v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self._substitute(key, v) for v in obj]
        resolved = self._resolve(key, obj)
        return None if resolved is _UNRESOLVED else resolved


class _Unresolved:
    """Stands for a ``$param`` during the static pass, before any param set is known."""

    def __repr__(self) -> str:
        return "<param>"


_UNRESOLVED: Any = _Unresolved()


def _check_kind(obj: dict[str, Any], kinds: tuple[str, ...], key: str,
                fail: Callable[[str], WorkloadError]) -> None:
    kind = obj.get("kind")
    if kinds and kind is not None and kind not in kinds:
        raise fail(f"field {key}: expected a {' or '.join(kinds)} object, got kind {kind!r}")
    if kinds and kind is None and len(kinds) > 1:
        raise fail(f"field {key}: the template needs a kind ({' or '.join(kinds)})")


class _Templates:
    """Template files relative to one workload file, each read once."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self._cache: dict[Path, Any] = {}

    def load(self, rel: str, kinds: tuple[str, ...], key: str,
             fail: Callable[[str], WorkloadError]) -> dict[str, Any]:
        path = (self.base / rel).resolve()
        if path not in self._cache:
            try:
                text = path.read_text()
            except OSError as exc:
                raise fail(f"field {key}: cannot read {rel}: {exc.strerror or exc}") from None
            try:
                self._cache[path] = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise fail(f"field {key}: {rel} is not valid YAML: {exc}") from None
        obj = self._cache[path]
        if not isinstance(obj, dict):
            raise fail(f"field {key}: {rel} does not hold an object")
        _check_kind(obj, kinds, f"{key} {rel}", fail)
        return copy.deepcopy(obj)


# ---------------------------------------------------------------------------- building ops


def _taints(f: _Fields) -> tuple[dict[str, Any], ...]:
    value = f.get("taints", [])
    if value is _UNRESOLVED:
        return ()
    if not isinstance(value, list):
        raise f._type_error("taints", "a list of taints", value)
    out = []
    for i, t in enumerate(value):
        if not isinstance(t, dict) or not isinstance(t.get("key"), str) or not t["key"]:
            raise f.fail(f"field taints[{i}]: expected {{key, value?, effect}}, got {t!r}")
        unknown = set(t) - {"key", "value", "effect"}
        if unknown:
            raise f.fail(f"field taints[{i}]: unknown field {sorted(unknown)[0]!r}")
        if t.get("effect") not in _TAINT_EFFECTS:
            raise f.fail(f"field taints[{i}].effect: expected one of {', '.join(_TAINT_EFFECTS)}, "
                         f"got {t.get('effect')!r}")
        taint = {"key": t["key"], "effect": t["effect"]}
        if t.get("value") is not None:
            taint["value"] = str(t["value"])
        out.append(taint)
    return tuple(out)


def _node_strategy(f: _Fields) -> tuple[str, tuple[str, ...], str]:
    """createNodes' ``labelNodePrepareStrategy`` or ``uniqueNodeLabelStrategy``: (key, values, unique key)."""
    given = [k for k in ("labelNodePrepareStrategy", "uniqueNodeLabelStrategy") if k in f.raw]
    if len(given) > 1:
        raise f.fail("fields labelNodePrepareStrategy and uniqueNodeLabelStrategy: give one, not both (as upstream)")
    if not given:
        return "", (), ""
    key = given[0]
    value = f.raw[key]
    if not isinstance(value, dict):
        raise f._type_error(key, "an object", value)
    allowed = {"labelKey", "labelValues"} if key == "labelNodePrepareStrategy" else {"labelKey"}
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise f.fail(f"field {key}: unknown field {unknown[0]!r} (known: {', '.join(sorted(allowed))})")
    sub = _Fields(value, f.params, lambda msg: f.fail(f"field {key}: {msg}"), f.templates)
    label_key = sub.text("labelKey")
    if not label_key:
        raise sub.fail("field labelKey: must not be empty")
    if key == "uniqueNodeLabelStrategy":
        return "", (), label_key
    values = sub.str_list("labelValues")
    if not values and f.params is not None:
        raise sub.fail("field labelValues: needs at least one value")
    return label_key, values, ""


def _duration_or_param(f: _Fields) -> float | None:
    """``duration`` or ``durationParam: $name`` (upstream's sleep and steady-state createPods) in seconds; None when
    the op has neither, 0 for a param not known yet (the static pass)."""
    if "durationParam" in f.raw:
        ref = f.raw["durationParam"]
        if not isinstance(ref, str) or not ref.startswith("$"):
            raise f.fail(f"field durationParam: expected a $param reference, got {ref!r}")
        value = f._resolve("durationParam", ref)
        if value is _UNRESOLVED:
            return 0.0
        try:
            return parse_duration(value)
        except ValueError as exc:
            raise f.fail(f"param {ref}: {exc}") from None
    if "duration" not in f.raw:
        return None
    return f.duration("duration") or 0.0


def _build_op(index: int, raw: dict[str, Any], params: dict[str, Any] | None, default_pod: dict[str, Any] | None,
              fail: Callable[[str], WorkloadError], templates: _Templates) -> Op:
    opcode = raw["opcode"]
    f = _Fields(raw, params, fail, templates)
    default_ns = f"namespace-{index}"  # upstream's per-op namespace

    if opcode == "createNodes":
        tmpl = f.template("nodeTemplatePath", "nodeTemplate", ("Node",), DEFAULT_NODE_TEMPLATE)
        assert tmpl is not None
        label_key, label_values, unique_key = _node_strategy(f)
        per_node = f.integer("persistentVolumesPerNode", 0)
        volume = f.template(*_PV, ("PersistentVolume",))
        if (per_node > 0) != (volume is not None) and params is not None:
            raise fail("persistentVolumesPerNode and persistentVolumeTemplatePath (or persistentVolumeTemplate) "
                       "go together")
        capacities = f.integer("storageCapacitiesPerNode", 0)
        capacity = f.template(*_CAPACITY, ("CSIStorageCapacity",))
        # a template with none per node is allowed: a param turns the objects off in one variant of a test
        if capacities > 0 and capacity is None and params is not None:
            raise fail("storageCapacitiesPerNode needs storageCapacityTemplatePath (or storageCapacityTemplate)")
        zones, racks = f.integer("zones", 0), f.integer("racksPerZone", 0)
        if racks and not zones and params is not None:
            raise fail("racksPerZone needs zones")
        return CreateNodes(index, count=f.count(), template=tmpl, zones=zones, racks_per_zone=racks,
                           labels=f.str_map("labels"), taints=_taints(f), capacity=f.str_map("capacity"),
                           label_key=label_key, label_values=label_values, unique_label_key=unique_key,
                           volumes_per_node=per_node, volume_template=volume, capacities_per_node=capacities,
                           capacity_template=capacity)
    if opcode == "createNamespaces":
        return CreateNamespaces(index, prefix=f.text("prefix"), count=f.count(),
                                template=f.template("namespaceTemplatePath", "namespaceTemplate", ("Namespace",)))
    if opcode == "createPods":
        tmpl = f.template("podTemplatePath", "podTemplate", ("Pod",), default_pod)
        if tmpl is None:
            raise fail("no podTemplatePath or podTemplate, and the test case has no defaultPodTemplatePath")
        volume = f.template(*_PV, ("PersistentVolume",))
        claim = f.template(*_PVC, ("PersistentVolumeClaim",))
        if volume is not None and claim is None:
            raise fail("persistentVolumeTemplatePath needs persistentVolumeClaimTemplatePath (as upstream)")
        duration = _duration_or_param(f)
        op = CreatePods(index, count=f.count(), namespace=f.text("namespace", default_ns), template=tmpl,
                        collect_metrics=f.flag("collectMetrics"), skip_wait=f.flag("skipWaitToCompletion"),
                        timeout=f.duration("timeout"), volume_template=volume, claim_template=claim,
                        per_second=f.number("createPodsPerSecond", 0.0), steady_state=f.flag("steadyState"),
                        duration=duration or 0.0)
        if op.collect_metrics and op.skip_wait:
            raise fail("collectMetrics and skipWaitToCompletion cannot both be true (as upstream)")
        if op.steady_state and op.skip_wait:
            raise fail("skipWaitToCompletion and steadyState cannot both be true (as upstream)")
        if duration is not None and "steadyState" not in raw:
            raise fail("field duration: only meaningful with steadyState: true")
        if params is not None and op.steady_state:
            if op.duration <= 0:
                raise fail("steadyState needs a duration above 0 (duration or durationParam), as upstream")
            if op.count < 1:
                raise fail("steadyState needs a count of at least 1: the pods kept in flight")
            if op.per_second or claim is not None:
                raise fail("steadyState does not go with createPodsPerSecond or volume templates")
        return op
    if opcode == "createAny":
        if "templatePath" not in raw and "template" not in raw:
            raise fail("missing field templatePath (or template)")
        tmpl = f.template("templatePath", "template", ())
        assert tmpl is not None
        for key in ("apiVersion", "kind"):
            if not isinstance(tmpl.get(key), str) or not tmpl[key]:
                raise fail(f"the template has no {key}: createAny needs apiVersion and kind to find the resource")
        count = f.count() if "count" in raw or "countParam" in raw else 1  # upstream's default
        return CreateAny(index, template=tmpl, namespace=f.text("namespace", ""), count=count,
                         skip_wait=f.flag("skipWaitToCompletion"), timeout=f.duration("timeout"))
    if opcode == "createResourceDriver":
        op = CreateResourceDriver(index, driver_name=f.text("driverName"), nodes=f.text("nodes"),
                                  max_claims_per_node=f.count("maxClaimsPerNode", "maxClaimsPerNodeParam"),
                                  devices_per_numa_node=f.integer("devicesPerNumaNode", 0))
        if params is not None:
            for key, value in (("driverName", op.driver_name), ("nodes", op.nodes)):
                if not value:
                    raise fail(f"field {key}: must not be empty (as upstream)")
            if op.max_claims_per_node < 1:
                raise fail(f"maxClaimsPerNode: must be at least 1, got {op.max_claims_per_node}")
        return op
    if opcode == "allocResourceClaims":
        return AllocResourceClaims(index, namespace=f.text("namespace", ""))
    if opcode == "checkResourceClaims":
        return CheckResourceClaims(index, namespaces=f.str_list("namespaces"), timeout=f.duration("timeout"))
    if opcode == "createPodGroups":
        tmpl = f.template("podTemplatePath", "podTemplate", ("Pod",), default_pod)
        if tmpl is None:
            raise fail("no podTemplatePath or podTemplate, and the test case has no defaultPodTemplatePath")
        group = f.template("podGroupTemplatePath", "podGroupTemplate", ("PodGroup",), DEFAULT_POD_GROUP_TEMPLATE)
        assert group is not None
        if "minMember" not in raw and "podsPerGroup" not in raw:
            raise fail("missing field minMember (or podsPerGroup)")
        size = f.integer("podsPerGroup", None, 1) if "podsPerGroup" in raw else None
        min_member = f.integer("minMember", None, 1) if "minMember" in raw else None
        size = size if size is not None else min_member
        min_member = min_member if min_member is not None else size
        assert size is not None and min_member is not None
        if params is not None and min_member > size:
            raise fail(f"field minMember: {min_member} is more than podsPerGroup {size}")
        op = CreatePodGroups(index, count=f.count(), min_member=min_member, pods_per_group=size,
                             namespace=f.text("namespace", default_ns), pod_template=tmpl, group_template=group,
                             collect_metrics=f.flag("collectMetrics"), skip_wait=f.flag("skipWaitToCompletion"),
                             timeout=f.duration("timeout"))
        if op.collect_metrics and op.skip_wait:
            raise fail("collectMetrics and skipWaitToCompletion cannot both be true (as upstream)")
        return op
    if opcode == "createPipelineRuns":
        tmpl = f.template("podTemplatePath", "podTemplate", ("Pod",), default_pod)
        if tmpl is None:
            raise fail("no podTemplatePath or podTemplate, and the test case has no defaultPodTemplatePath")
        lo, hi = f.integer("minTasks", 2, 1), f.integer("maxTasks", 6, 1)
        if params is not None and lo > hi:
            raise fail(f"field minTasks: {lo} is more than maxTasks {hi}")
        return CreatePipelineRuns(index, count=f.count(), min_tasks=lo, max_tasks=hi,
                                  tasks_per_stage=f.integer("tasksPerStage", 2, 1),
                                  namespace=f.text("namespace", default_ns), template=tmpl,
                                  affinity_assistant=f.flag("affinityAssistant"),
                                  collect_metrics=f.flag("collectMetrics"), timeout=f.duration("timeout"))
    if opcode == "churn":
        mode = f.text("mode")
        if mode not in ("create", "recreate") and params is not None:
            raise fail(f"field mode: expected create or recreate, got {mode!r}")
        number = f.integer("number", 0)
        if mode == "recreate" and number == 0 and params is not None:
            raise fail("field number: cannot be 0 when mode is recreate (as upstream)")
        tmpls: list[dict[str, Any]] = []
        for i, rel in enumerate(f.str_list("templatePaths")):
            tmpls.append(templates.load(rel, ("Node", "Pod"), f"templatePaths[{i}]", fail))
        inline = raw.get("templates", [])
        if not isinstance(inline, list):
            raise f._type_error("templates", "a list of objects", inline)
        for i, obj in enumerate(inline):
            if not isinstance(obj, dict):
                raise f._type_error(f"templates[{i}]", "an object", obj)
            _check_kind(obj, ("Node", "Pod"), f"templates[{i}]", fail)
            tmpls.append(copy.deepcopy(obj))
        for i, obj in enumerate(tmpls):
            if obj.get("kind") not in ("Node", "Pod"):
                raise fail(f"template {i}: churn creates Node and Pod objects only, got kind {obj.get('kind')!r}")
        if not tmpls:
            raise fail("missing field templatePaths (or templates): churn needs at least one template")
        return Churn(index, mode=mode, number=number, interval=f.integer("intervalMilliseconds", 500, 1) / 1000.0,
                     namespace=f.text("namespace", default_ns), templates=tuple(tmpls))
    if opcode == "deletePods":
        op = DeletePods(index, namespace=f.text("namespace"), label_selector=f.str_map("labelSelector"),
                        per_second=f.integer("deletePodsPerSecond", 0), skip_wait=f.flag("skipWaitToCompletion"),
                        when_bound=f.flag("whenBound"), hold=f.number("holdSeconds", 0.0),
                        timeout=f.duration("timeout"))
        if "holdSeconds" in raw and not op.when_bound:
            raise fail("field holdSeconds: only meaningful with whenBound: true")
        return op
    if opcode == "barrier":
        stage = f.text("stageRequirement", "Scheduled")
        if stage not in ("Scheduled", "Attempted") and params is not None:
            raise fail(f"field stageRequirement: expected Scheduled or Attempted, got {stage!r}")
        return Barrier(index, namespaces=f.str_list("namespaces"), label_selector=f.str_map("labelSelector"),
                       stage=stage, timeout=f.duration("timeout"))
    if opcode == "sleep":
        d = _duration_or_param(f)
        if d is None:
            raise fail("missing field duration (or durationParam)")
        return Sleep(index, d)
    if opcode == "startCollectingMetrics":
        return StartCollectingMetrics(index, name=f.text("name", ""), namespaces=f.str_list("namespaces"),
                                      label_selector=f.str_map("labelSelector"))
    if opcode == "stopCollectingMetrics":
        return StopCollectingMetrics(index)
    raise AssertionError(opcode)  # _check_ops let only known opcodes through


# ---------------------------------------------------------------------------- test cases


@dataclass(frozen=True, slots=True)
class _WorkloadSpec:
    name: str
    labels: tuple[str, ...]
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class TestCase:
    """A parsed test case: the op template and its named param sets, not yet substituted."""

    __test__: ClassVar[bool] = False  # not a pytest class

    name: str
    labels: tuple[str, ...]
    raw_ops: tuple[dict[str, Any], ...]
    workloads: tuple[_WorkloadSpec, ...]
    default_pod: dict[str, Any] | None
    source: Path
    templates: _Templates

    def workload_names(self) -> list[str]:
        return [f"{self.name}/{w.name}" for w in self.workloads]

    def instantiate(self, name: str, labels: Iterable[str], params: dict[str, Any]) -> Workload:
        where = f"{_display(self.source)}: {self.name}/{name}"
        ops = []
        for i, raw in enumerate(self.raw_ops):
            prefix = f"{where} op {i} ({raw['opcode']})"
            ops.append(_build_op(i, raw, params, self.default_pod,
                                 lambda msg, p=prefix: WorkloadError(f"{p}: {msg}"), self.templates))
        merged = tuple(dict.fromkeys([*self.labels, *labels]))
        return Workload(test=self.name, name=name, labels=merged, params=dict(params), ops=tuple(ops),
                        source=self.source)


def _str_list(value: Any, fail: Callable[[str], WorkloadError], what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise fail(f"{what}: expected a list of strings, got {value!r}")
    return tuple(value)


def parse_file(path: Path) -> list[TestCase]:
    """Read and check a workload file: structure, opcodes and fields; params are checked per workload."""
    path = Path(path)
    shown = _display(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise WorkloadError(f"{shown}: cannot read: {exc.strerror or exc}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise WorkloadError(f"{shown}: not valid YAML: {exc}") from None
    if not isinstance(doc, list):
        raise WorkloadError(f"{shown}: expected a list of test cases, got {type(doc).__name__}")
    templates = _Templates(path.parent)
    cases: list[TestCase] = []
    seen: set[str] = set()
    for ti, tc in enumerate(doc):
        if not isinstance(tc, dict):
            raise WorkloadError(f"{shown}: test case {ti}: expected an object, got {tc!r}")
        name = tc.get("name")
        if not isinstance(name, str) or not name:
            raise WorkloadError(f"{shown}: test case {ti}: missing field name")
        if name in seen:
            raise WorkloadError(f"{shown}: {name}: test case name is not unique")
        seen.add(name)

        def fail(msg: str, where: str = f"{shown}: {name}") -> WorkloadError:
            return WorkloadError(f"{where}: {msg}")

        unknown = sorted(set(tc) - _TEST_CASE_FIELDS)
        if unknown:
            raise fail(f"unknown field {unknown[0]!r} (known: {', '.join(sorted(_TEST_CASE_FIELDS))})")
        raw_ops = tc.get("workloadTemplate")
        if not isinstance(raw_ops, list) or not raw_ops:
            raise fail("missing field workloadTemplate (a list of ops)")
        default_pod = None
        if tc.get("defaultPodTemplatePath") is not None:
            rel = tc["defaultPodTemplatePath"]
            if not isinstance(rel, str):
                raise fail(f"field defaultPodTemplatePath: expected a path, got {rel!r}")
            default_pod = templates.load(rel, ("Pod",), "defaultPodTemplatePath", fail)
        ops: list[dict[str, Any]] = []
        for i, raw in enumerate(raw_ops):
            if not isinstance(raw, dict):
                raise fail(f"op {i}: expected an object, got {raw!r}")
            opcode = raw.get("opcode")
            if opcode is None:
                raise fail(f"op {i}: missing field opcode")
            prefix = f"{shown}: {name} op {i} ({opcode})"
            if opcode not in _FIELDS:
                raise WorkloadError(f"{prefix}: unknown opcode {opcode!r} (known: {', '.join(OPCODES)})")
            unknown = sorted(set(raw) - _FIELDS[opcode] - {"opcode"})
            if unknown:
                known = ", ".join(sorted(_FIELDS[opcode])) or "none"
                raise WorkloadError(f"{prefix}: unknown field {unknown[0]!r} (known: {known})")
            # static pass: types of literal fields and templates, before any param set
            _build_op(i, raw, None, default_pod, lambda msg, p=prefix: WorkloadError(f"{p}: {msg}"), templates)
            ops.append(raw)
        specs: list[_WorkloadSpec] = []
        raw_ws = tc.get("workloads")
        if not isinstance(raw_ws, list) or not raw_ws:
            raise fail("missing field workloads (a list of {name, labels, params})")
        wseen: set[str] = set()
        for wi, w in enumerate(raw_ws):
            if not isinstance(w, dict) or not isinstance(w.get("name"), str) or not w["name"]:
                raise fail(f"workload {wi}: missing field name")
            wname = w["name"]
            if wname in wseen:
                raise fail(f"workload name {wname} is not unique")
            wseen.add(wname)
            unknown = sorted(set(w) - _WORKLOAD_FIELDS)
            if unknown:
                raise fail(f"unknown field {unknown[0]!r} (known: {', '.join(sorted(_WORKLOAD_FIELDS))})",
                           f"{shown}: {name}/{wname}")
            params = w.get("params") or {}
            if not isinstance(params, dict):
                raise fail(f"field params: expected a map, got {params!r}", f"{shown}: {name}/{wname}")
            specs.append(_WorkloadSpec(wname, _str_list(w.get("labels"), fail, f"workload {wname} labels"),
                                       {str(k): v for k, v in params.items()}))
        cases.append(TestCase(name=name, labels=_str_list(tc.get("labels"), fail, "labels"), raw_ops=tuple(ops),
                              workloads=tuple(specs), default_pod=default_pod, source=path, templates=templates))
    return cases


def _parse_overrides(overrides: dict[str, Any] | None) -> dict[str, Any]:
    return {str(k): parse_param_value(v) for k, v in (overrides or {}).items()}


def load_workloads(path: Path, overrides: dict[str, str] | None = None) -> list[Workload]:
    """Every workload of every test case in ``path``, with ``overrides`` (``--param k=v``) over its params."""
    extra = _parse_overrides(overrides)
    return [tc.instantiate(w.name, w.labels, {**w.params, **extra})
            for tc in parse_file(Path(path)) for w in tc.workloads]


def _files(paths: list[Path] | Path) -> list[Path]:
    items = [paths] if isinstance(paths, (str, Path)) else list(paths)
    out: list[Path] = []
    for p in map(Path, items):
        if p.is_dir():
            out.extend(sorted([*p.glob("*.yaml"), *p.glob("*.yml")]))
        else:
            out.append(p)
    return out


def find_workload(paths: list[Path] | Path, name: str, overrides: dict[str, str] | None = None) -> Workload:
    """The workload ``Test/Workload`` from the files (or folders of ``*.yaml``) in ``paths``.

    ``name`` may also be a test case alone: with ``overrides`` that is a
    custom param set made of the overrides only (workload name ``custom``);
    without, the test case's only workload. Only the chosen workload is
    substituted, so overrides meant for it cannot break another.
    """
    extra = _parse_overrides(overrides)
    cases = [tc for f in _files(paths) for tc in parse_file(f)]
    test, _, wname = name.partition("/")
    by_test = {tc.name: tc for tc in cases}
    tc = by_test.get(test)
    if tc is None:
        available = ", ".join(n for c in cases for n in c.workload_names()) or "none"
        raise WorkloadError(f"no workload {name!r}; available: {available}")
    if not wname:
        if extra:
            return tc.instantiate("custom", (), extra)
        if len(tc.workloads) == 1:
            w = tc.workloads[0]
            return tc.instantiate(w.name, w.labels, w.params)
        raise WorkloadError(f"{name!r} is a test case with several workloads; pick one: "
                            f"{', '.join(tc.workload_names())} (or give every param with --param)")
    for w in tc.workloads:
        if w.name == wname:
            return tc.instantiate(w.name, w.labels, {**w.params, **extra})
    raise WorkloadError(f"no workload {name!r} in {_display(tc.source)}; {test} has: "
                        f"{', '.join(tc.workload_names())}")
