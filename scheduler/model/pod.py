"""Slotted pod and node records, parsed straight from API JSON.

The informers hand raw dicts (orjson) to :func:`parse_pod` and
:func:`parse_node`; the generated client models are never built. Records
are frozen: mutable scheduling state lives in the cache and the queue.

Parsing never raises on a malformed object. What the scheduler cannot
understand (an unparseable quantity, an unknown toleration operator) is
recorded in ``invalid`` with the field path, and the scheduler reports it on
the pod (FailedScheduling) instead of crashing or dropping the pod.

Units: cpu in millicores, every other resource in its base unit (bytes,
count), as integers rounded up, as the scheduler's framework.Resource does.
"""

from __future__ import annotations

import calendar
import math
import functools
import re
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Collection, Mapping

import orjson

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

# upstream's defaults for scoring containers that request nothing (schedutil.DefaultMilliCPURequest / DefaultMemoryRequest)
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1      # maxSkew, minDomains and weights are int32 in the API

POD_GROUP_API_VERSION = "scheduling.x-k8s.io/v1alpha1"   # scheduler-plugins' PodGroup CRD
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
POD_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
DISRUPTION_MODE_ANNOTATION = "scheduling.tandem.dev/disruption-mode"   # for PodGroup CRDs without the field
# PodGroup disruption modes, as upstream's scheduling.k8s.io/v1alpha2 PodGroup spells them: "Pod" (members
# one by one) and "PodGroup" (the gang whole). tandem first called the former "Single"; that spelling is
# still accepted on input, and DISRUPTION_SINGLE is kept as the same value for its importers.
DISRUPTION_POD = "Pod"
DISRUPTION_SINGLE = DISRUPTION_POD
DISRUPTION_POD_GROUP = "PodGroup"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"   # DisruptionTarget's reason when a scheduler preempts a pod
# PodGroup status.conditions (tandem's addition to scheduler-plugins' schema): GangReadiness writes the PodsReady
# condition, and the PodGroup status controller keeps the phase Failed once its reason says the requeuing limit
# was hit (Kueue's names for both)
POD_GROUP_PODS_READY = "PodsReady"
POD_GROUP_REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded"
# why a pod, or a PodGroup, waits before any scheduling cycle (KEP-5501's PodScheduled reason, for a PreEnqueue
# rejection); on a PodGroup it is the reason of a False PodGroupScheduled condition (the Workload API's type)
NOT_READY_FOR_SCHEDULING = "NotReadyForScheduling"
POD_GROUP_SCHEDULED = "PodGroupScheduled"


class QuantityError(ValueError):
    pass


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": 1, "k": 10**3,
            "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QTY_RE = re.compile(r"([+-]?)([0-9]+|(?=\.[0-9]))(?:\.([0-9]*))?([a-zA-Z]{0,2})")  # ".5" is valid, "." is not
_QTY_EXP_RE = re.compile(r"([+-]?[0-9]+(?:\.[0-9]*)?|[+-]?\.[0-9]+)[eE]([+-]?[0-9]+)")
_qty_cache: dict[str, Fraction | int] = {}


def parse_quantity(value: Any) -> Fraction | int:
    """A Kubernetes quantity ("100m", "2Gi", "1.5", "1e3", or a JSON number) as an exact number."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must be strings or numbers, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):  # json.loads accepts NaN and Infinity
            raise QuantityError(f"quantities must be finite numbers, got {value!r}")
        return Fraction(value).limit_denominator(10**9)
    if not isinstance(value, str):
        raise QuantityError(f"quantities must be strings or numbers, got {type(value).__name__}")
    hit = _qty_cache.get(value)
    if hit is not None:
        return hit
    s = value.strip()
    m = _QTY_RE.fullmatch(s)
    if m:
        sign, whole, frac, suffix = m.groups()
        if suffix in _BINARY:
            mult: Fraction | int = _BINARY[suffix]
        elif suffix in _DECIMAL:
            mult = _DECIMAL[suffix]
        else:
            raise QuantityError(f"unable to parse quantity's suffix in {value!r}")
        num: Fraction | int = int(whole or 0)
        if frac:
            num = num + Fraction(int(frac), 10 ** len(frac))
        out = num * mult
    else:
        m = _QTY_EXP_RE.fullmatch(s)
        if not m:
            raise QuantityError(f"quantities must match the regular expression "
                                f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$', got {value!r}")
        exp = int(m.group(2))
        if abs(exp) > 30:
            raise QuantityError(f"quantity {value!r} is out of range")
        out = Fraction(m.group(1)) * Fraction(10) ** exp
        sign = ""  # the mantissa carries its own sign (negating again turned "-1e3" into 1000)
    if sign == "-":
        out = -out
    if isinstance(out, Fraction) and out.denominator == 1:
        out = int(out)
    if len(_qty_cache) < 4096:
        _qty_cache[value] = out
    return out


def _ceil(x: Fraction | int) -> int:
    if isinstance(x, int):
        return x
    return -((-x.numerator) // x.denominator)


_canonical_cache: dict[tuple[str, str], int] = {}


def canonical(resource: str, value: Any) -> int:
    """A quantity in the scheduler's unit for ``resource``: millicores for cpu, base units otherwise.

    String quantities are memoized per (resource, text): a burst of pods repeats a handful of values,
    and the exact Fraction arithmetic below is most of the cost of parsing a pod.
    """
    if isinstance(value, str):
        hit = _canonical_cache.get((resource, value))
        if hit is not None:
            return hit
        out = _canonical(resource, value)
        if len(_canonical_cache) < 4096:
            _canonical_cache[resource, value] = out
        return out
    return _canonical(resource, value)


def _canonical(resource: str, value: Any) -> int:
    q = parse_quantity(value)
    if q < 0:
        raise QuantityError(f"must be greater than or equal to 0, got {value!r}")
    out = _ceil(q * 1000) if resource == CPU else _ceil(q)
    if out > INT64_MAX:  # the node table is int64 (upstream's framework.Resource too)
        raise QuantityError(f"quantity {value!r} is too large")
    return out


def parse_time(ts: Any) -> float:
    """RFC 3339 timestamp -> epoch seconds; 0.0 when missing or malformed."""
    if not isinstance(ts, str) or len(ts) < 19:
        return 0.0
    return _parse_time(ts[:19])


@functools.lru_cache(maxsize=4096)
def _parse_time(ts: str) -> float:
    # strptime is slow and a burst of pods shares a handful of creation seconds
    try:
        return float(calendar.timegm(time.strptime(ts, "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return 0.0


# ---------------------------------------------------------------------------- records

@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"      # Equal | Exists
    value: str = ""
    effect: str = ""             # "" matches every effect
    toleration_seconds: int | None = None

    def tolerates(self, taint: "Taint") -> bool:
        """Toleration.ToleratesTaint: an empty key with Exists matches every taint, an empty effect every effect."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"   # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True, slots=True)
class HostPort:
    ip: str
    protocol: str
    port: int


@dataclass(frozen=True, slots=True)
class OwnerRef:
    kind: str
    name: str
    uid: str
    controller: bool
    api_version: str = ""         # "v1", "apps/v1": kind alone does not say which API the owner is in


# ---------------------------------------------------------------------------- label selectors and pod terms

SELECTOR_IN, SELECTOR_NOT_IN, SELECTOR_EXISTS, SELECTOR_DOES_NOT_EXIST = "In", "NotIn", "Exists", "DoesNotExist"


@dataclass(frozen=True, slots=True)
class Requirement:
    """One labels.Requirement of a metav1.LabelSelector (matchLabels entries are ``In`` with one value)."""

    key: str
    op: str                      # In | NotIn | Exists | DoesNotExist
    values: frozenset[str] = frozenset()

    def matches(self, labels: dict[str, str]) -> bool:
        op = self.op
        if op == SELECTOR_IN:
            v = labels.get(self.key)
            return v is not None and v in self.values
        if op == SELECTOR_NOT_IN:
            v = labels.get(self.key)
            return v is None or v not in self.values
        if op == SELECTOR_EXISTS:
            return self.key in labels
        return self.key not in labels


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelectorAsSelector, compiled: the requirements ANDed, in a canonical order (hashable, so
    equal selectors share count columns). ``nothing``: a nil selector, which matches no object; no
    requirements and not ``nothing`` is ``{}``, which matches every object (labels.Everything)."""

    reqs: tuple[Requirement, ...] = ()
    nothing: bool = False

    @property
    def empty(self) -> bool:
        """labels.Selector.Empty(): matches everything (PodTopologySpread counts nothing with it)."""
        return not self.nothing and not self.reqs

    def matches(self, labels: dict[str, str]) -> bool:
        if self.nothing:
            return False
        for r in self.reqs:
            if not r.matches(labels):
                return False
        return True

    def with_requirements(self, more: "list[Requirement]") -> "LabelSelector":
        """The selector ANDed with ``more`` (matchLabelKeys merging); a nil selector stays nil."""
        if self.nothing or not more:
            return self
        return LabelSelector(tuple(sorted(set(self.reqs) | set(more), key=_req_order)))


def _req_order(r: Requirement) -> tuple[str, str, tuple[str, ...]]:
    return (r.key, r.op, tuple(sorted(r.values)))


NOTHING = LabelSelector(nothing=True)
EVERYTHING = LabelSelector()
_LABEL_SELECTOR_OPS = (SELECTOR_IN, SELECTOR_NOT_IN, SELECTOR_EXISTS, SELECTOR_DOES_NOT_EXIST)


def parse_label_selector(raw: Any, path: str, probs: "_Problems | None" = None) -> LabelSelector:
    """A metav1.LabelSelector from API JSON. None is nil (matches nothing). A problem (an unknown operator,
    In/NotIn without values, Exists/DoesNotExist with values) is recorded in ``probs`` naming the field, and
    the selector then matches nothing, as upstream's parse error never lets it match."""
    if raw is None:
        return NOTHING
    probs = probs if probs is not None else _Problems()
    if not isinstance(raw, dict):
        probs.add(path, "must be an object")
        return NOTHING
    reqs: list[Requirement] = []
    ml = raw.get("matchLabels")
    if ml is not None:
        if not isinstance(ml, dict):
            probs.add(f"{path}.matchLabels", "must be a map of strings")
            return NOTHING
        for k, v in ml.items():
            if not isinstance(v, str):
                probs.add(f"{path}.matchLabels[{k}]", "must be a string")
                return NOTHING
            reqs.append(Requirement(str(k), SELECTOR_IN, frozenset((v,))))
    exprs = raw.get("matchExpressions")
    if exprs is not None and not isinstance(exprs, list):
        probs.add(f"{path}.matchExpressions", "must be a list")
        return NOTHING
    for i, e in enumerate(exprs or ()):
        p = f"{path}.matchExpressions[{i}]"
        e = _d(e)
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        if not isinstance(key, str) or not key:
            probs.add(f"{p}.key", "must be a non-empty string")
            return NOTHING
        if op not in _LABEL_SELECTOR_OPS:
            probs.add(f"{p}.operator", f'Unsupported value: "{op}": supported values: "In", "NotIn", "Exists", '
                                       f'"DoesNotExist"')
            return NOTHING
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            probs.add(f"{p}.values", "must be a list of strings")
            return NOTHING
        if op in (SELECTOR_IN, SELECTOR_NOT_IN) and not values:
            probs.add(f"{p}.values", "for 'in', 'notin' operators, values set can't be empty")
            return NOTHING
        if op in (SELECTOR_EXISTS, SELECTOR_DOES_NOT_EXIST) and values:
            probs.add(f"{p}.values", "values set must be empty for exists and does not exist")
            return NOTHING
        reqs.append(Requirement(key, op, frozenset(values)))
    return LabelSelector(tuple(sorted(set(reqs), key=_req_order)))


@dataclass(frozen=True, slots=True)
class PodSelection:
    """Which pods a pod affinity term (or a spread constraint) selects: the label selector, in the
    namespaces named or selected (upstream's AffinityTerm without its topology key). Hashable: the
    cache keeps one count column per distinct selection."""

    selector: LabelSelector
    namespaces: frozenset[str] = frozenset()
    ns_selector: LabelSelector = NOTHING       # nil: selects no namespace by labels

    def matches(self, namespace: str, labels: dict[str, str], ns_labels: dict[str, str]) -> bool:
        """AffinityTerm.Matches: the namespace is named or its labels are selected, then the labels."""
        if namespace not in self.namespaces and not self.ns_selector.matches(ns_labels):
            return False
        return self.selector.matches(labels)

    @property
    def by_namespace_labels(self) -> bool:
        return not self.ns_selector.nothing


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A PodAffinityTerm (with its weight, for preferred terms), parsed for its pod."""

    selection: PodSelection
    topology_key: str
    weight: int = 0


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """spec.affinity.podAffinity and podAntiAffinity, parsed (upstream's PodInfo terms)."""

    required: tuple[AffinityTerm, ...] = ()
    required_anti: tuple[AffinityTerm, ...] = ()
    preferred: tuple[AffinityTerm, ...] = ()
    preferred_anti: tuple[AffinityTerm, ...] = ()


DO_NOT_SCHEDULE, SCHEDULE_ANYWAY = "DoNotSchedule", "ScheduleAnyway"
POLICY_HONOR, POLICY_IGNORE = "Honor", "Ignore"


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A topologySpreadConstraint, parsed; ``selector`` has matchLabelKeys merged in."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str                 # DoNotSchedule | ScheduleAnyway
    selector: LabelSelector
    min_domains: int = 1                    # nil is 1
    node_affinity_policy: str = POLICY_HONOR
    node_taints_policy: str = POLICY_IGNORE
    match_label_keys: tuple[str, ...] = ()



@dataclass(frozen=True, slots=True)
class Pod:
    uid: str
    namespace: str
    name: str
    resource_version: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    scheduler_name: str = "default-scheduler"
    node_name: str = ""
    nominated_node_name: str = ""
    priority: int = 0
    priority_class_name: str = ""
    preemption_policy: str = "PreemptLowerPriority"
    created: float = 0.0
    start_time: float = 0.0       # status.startTime, epoch seconds (0: not started; preemption takes it as now)
    phase: str = "Pending"
    deleting: bool = False
    requests: dict[str, int] = field(default_factory=dict)   # PodRequests, canonical units
    nonzero_cpu: int = 0          # millicores, with DEFAULT_MILLI_CPU_REQUEST for containers asking nothing
    nonzero_memory: int = 0       # bytes, with DEFAULT_MEMORY_REQUEST likewise
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: dict[str, Any] | None = None     # spec.affinity as in the API
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    images: tuple[str, ...] = ()
    scheduling_gates: tuple[str, ...] = ()
    pod_affinity: PodAffinity | None = None     # podAffinity / podAntiAffinity, parsed (None: neither)
    topology_spread: tuple[SpreadConstraint, ...] = ()
    owners: tuple[OwnerRef, ...] = ()
    # the PersistentVolumeClaims its volumes use, in volume order: persistentVolumeClaim.claimName, and for a
    # generic ephemeral volume the claim its controller creates, "<pod>-<volume>" (ephemeral_pvcs lists those)
    pvcs: tuple[str, ...] = ()
    ephemeral_pvcs: tuple[str, ...] = ()
    resource_claims: tuple[str, ...] = ()   # spec.resourceClaims[].name: dynamic resource allocation's claims
    # (volume name, source) of its inline volumes VolumeRestrictions would check for disk conflicts
    # (gcePersistentDisk, awsElasticBlockStore, rbd, iscsi)
    conflict_disks: tuple[tuple[str, str], ...] = ()
    pod_group: str = ""
    # spec.schedulingGroup.podGroupName: the scheduling.k8s.io/v1alpha2 PodGroup the pod belongs to
    # (None: no spec.schedulingGroup; "" when it names none); tandem refuses such pods for now
    scheduling_group: str | None = None
    invalid: str = ""             # why the scheduler cannot use this pod ("" = fine)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def assigned(self) -> bool:
        return bool(self.node_name)


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    uid: str = ""
    resource_version: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    allocatable: dict[str, int] = field(default_factory=dict)   # canonical units
    images: tuple[tuple[tuple[str, ...], int], ...] = ()         # (names, sizeBytes)
    ready: bool = True
    declared_features: frozenset[str] = frozenset()   # status.declaredFeatures (NodeDeclaredFeatures)
    invalid: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class PodGroup:
    """A PodGroup, parsed once when the informer delivers it.

    Today scheduler-plugins' ``scheduling.x-k8s.io/v1alpha1`` CRD; the
    record is what every gang consumer reads (Coscheduling, GangReadiness,
    the status controller), so a second PodGroup API maps onto the same
    fields. ``min_member`` is clamped once, here: a missing, negative or
    non-integer ``spec.minMember`` is 0 ("no gang constraint"), and
    :attr:`quorum` is the members that make the gang whole (at least one).
    ``status`` and ``raw`` are the API's, for the status writers.
    """

    namespace: str
    name: str
    uid: str = ""
    api_version: str = POD_GROUP_API_VERSION
    resource_version: str = ""
    generation: int = 0
    created: float = 0.0                     # metadata.creationTimestamp, epoch seconds (0: unset)
    annotations: dict[str, str] = field(default_factory=dict)
    min_member: int = 0                      # spec.minMember, >= 0
    min_resources: Any = None                # spec.minResources as written (None: unset; Coscheduling checks it)
    schedule_timeout_seconds: int = 0        # spec.scheduleTimeoutSeconds (0: unset, use the plugin's default)
    # how preemption may take the gang's members: "PodGroup" (all of them or none; spec.disruptionMode or the
    # annotation DISRUPTION_MODE_ANNOTATION) or "Pod" (one by one, upstream's default; "Single" is read as it)
    disruption_mode: str = DISRUPTION_POD
    priority: int | None = None              # spec.priority: the gang's priority (None: each member's own)
    spec: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    status: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def quorum(self) -> int:
        """Members that make the gang whole: minMember, and one when minMember is 0."""
        return max(self.min_member, 1)

    @property
    def reference(self) -> dict[str, str]:
        """An ObjectReference for events on this PodGroup (list items may lack kind and apiVersion)."""
        ref = {"kind": "PodGroup", "apiVersion": self.api_version, "namespace": self.namespace,
               "name": self.name, "uid": self.uid, "resourceVersion": self.resource_version}
        return {k: v for k, v in ref.items() if v}


def gang_members_present(uids: Collection[str], pods: Mapping[str, "Pod"], need: int) -> int:
    """How many of a gang's pods count toward its quorum before any member is scheduled.

    ``uids`` are the pods naming the group, ``pods`` the latest records by uid. Fewer pods than ``need``
    cannot make a quorum whatever their state, so their number is the answer in O(1) (a gang's members
    arriving one by one are counted on every arrival). Otherwise the pods that could run are counted, up
    to ``need``: not finished, not being deleted, not behind scheduling gates (a gated pod cannot be
    placed until its gates go, and the update that removes them counts it then). Coscheduling's
    PreEnqueue holds by this count and the PodGroup status controller reports it, so both say the same.
    """
    if len(uids) < need:
        return len(uids)
    n = 0
    for uid in uids:
        if could_run(pods.get(uid)):
            n += 1
            if n >= need:
                break
    return n


def could_run(p: "Pod | None") -> bool:
    """A gang member that counts toward its quorum: not finished, not being deleted, not behind scheduling gates."""
    return p is not None and not p.deleting and not p.terminal and not p.scheduling_gates


def gang_waiting_message(key: str, present: int, need: int) -> str:
    """What a gang held for want of members says, on its pods and on its PodGroup."""
    return f"PodGroup {key}: {present} of {need} members exist; waiting for more"


# ---------------------------------------------------------------------------- parsing

class _Problems:
    """Collects the first problem found; parsing goes on with a safe value."""

    __slots__ = ("first",)

    def __init__(self) -> None:
        self.first = ""

    def add(self, path: str, msg: str) -> None:
        if not self.first:
            self.first = f"{path}: {msg}"


def _s(v: Any, path: str, probs: _Problems, default: str = "") -> str:
    """A string field; anything else is recorded and replaced (a list as a node name would be unhashable)."""
    if v is None or v == "":
        return default
    if isinstance(v, str):
        return v
    probs.add(path, f"must be a string, got {type(v).__name__}")
    return default


def _d(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _l(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _str_map(v: Any, path: str, probs: _Problems) -> dict[str, str]:
    if v is None:
        return {}
    if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
        probs.add(path, "must be a map of strings")
        return {k: str(x) for k, x in v.items()} if isinstance(v, dict) else {}
    return v


def _resource_list(v: Any, path: str, probs: _Problems) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, q in _d(v).items():
        try:
            out[name] = canonical(name, q)
        except QuantityError as exc:
            probs.add(f"{path}[{name}]", str(exc))
    return out


def _add(into: dict[str, int], more: dict[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], more: dict[str, int]) -> None:
    # maxResourceList: a resource missing from ``into`` is taken even at 0 (an explicit 0 is not missing)
    for k, v in more.items():
        if k not in into or v > into[k]:
            into[k] = v


def _with_nonzero(reqs: dict[str, int]) -> dict[str, int]:
    # only a missing request gets the default; an explicit 0 stays 0 (GetNonzeroRequestForResource)
    out = dict(reqs)
    if CPU not in out:
        out[CPU] = DEFAULT_MILLI_CPU_REQUEST
    if MEMORY not in out:
        out[MEMORY] = DEFAULT_MEMORY_REQUEST
    return out


def pod_requests(spec: dict[str, Any], probs: _Problems,
                 status: dict[str, Any] | None = None) -> tuple[dict[str, int], int, int]:
    """PodRequests as upstream's resourcehelper computes it: containers, sidecars, init containers, overhead.

    Returns (requests, nonzero cpu, nonzero memory); the nonzero variant
    counts DEFAULT_* for containers that request no cpu or memory.

    With ``status`` (the pod's), in-place resize is accounted for as 1.36's
    scheduler does (UseStatusResources, on with InPlacePodVerticalScaling;
    pod level with InPlacePodLevelResourcesVerticalScaling, beta and on): a
    container, or sidecar, whose status carries ``resources`` is charged the
    largest of its spec requests, ``resources.requests`` and
    ``allocatedResources`` (determineEffectiveRequests), without the spec
    when the pod's PodResizePending condition says Infeasible. A resize down
    in progress so keeps the node charged for what the container still holds.
    """
    reqs: dict[str, int] = {}
    nz: dict[str, int] = {}
    actual = _ResizeState(status, probs) if status else None
    for i, c in enumerate(_l(spec.get("containers"))):
        c = _d(c)
        r = _resource_list(_d(c.get("resources")).get("requests"), f"spec.containers[{i}].resources.requests", probs)
        if actual is not None:
            r = actual.effective(c.get("name"), r)
        _add(reqs, r)
        _add(nz, _with_nonzero(r))
    sidecars: dict[str, int] = {}
    sidecars_nz: dict[str, int] = {}
    init_max: dict[str, int] = {}
    init_max_nz: dict[str, int] = {}
    for i, c in enumerate(_l(spec.get("initContainers"))):
        c = _d(c)
        r = _resource_list(_d(c.get("resources")).get("requests"), f"spec.initContainers[{i}].resources.requests", probs)
        if c.get("restartPolicy") == "Always":
            # a sidecar runs alongside the app containers and every later init container; only sidecars
            # are resized in place (a finished init container holds nothing)
            if actual is not None:
                r = actual.effective(c.get("name"), r)
            rnz = _with_nonzero(r)
            _add(reqs, r)
            _add(nz, rnz)
            _add(sidecars, r)
            _add(sidecars_nz, rnz)
            _max(init_max, sidecars)
            _max(init_max_nz, sidecars_nz)
        else:
            total = dict(r)
            _add(total, sidecars)
            total_nz = _with_nonzero(r)
            _add(total_nz, sidecars_nz)
            _max(init_max, total)
            _max(init_max_nz, total_nz)
    _max(reqs, init_max)
    _max(nz, init_max_nz)
    pod_level = _resource_list(_d(_d(spec.get("resources")).get("requests")), "spec.resources.requests", probs)
    if actual is not None and (CPU in pod_level or MEMORY in pod_level):
        pod_level = actual.effective_pod_level(pod_level)
    for k in (CPU, MEMORY):
        if k in pod_level:  # pod-level resources (KEP-2837) replace the containers' sum for cpu and memory
            reqs[k] = pod_level[k]
    overhead = _resource_list(spec.get("overhead"), "spec.overhead", probs)
    _add(reqs, overhead)
    _add(nz, overhead)
    if CPU in pod_level or MEMORY in pod_level:
        # upstream getNonMissingContainerRequests: with pod-level requests, a default is added only for
        # a resource the whole pod (pod level, containers, overhead) does not request at all
        for k in (CPU, MEMORY):
            if k in reqs:
                nz[k] = reqs[k]
    # sums of huge quantities saturate rather than overflow the int64 node table
    if any(v > INT64_MAX for v in reqs.values()) or any(v > INT64_MAX for v in nz.values()):
        reqs = {k: min(v, INT64_MAX) for k, v in reqs.items()}
        nz = {k: min(v, INT64_MAX) for k, v in nz.items()}
    return reqs, nz.get(CPU, 0), nz.get(MEMORY, 0)


POD_RESIZE_PENDING = "PodResizePending"     # the pod condition the kubelet sets while it cannot resize yet
RESIZE_INFEASIBLE = "Infeasible"            # ... whose reason says the node can never fit the resize


class _ResizeState:
    """What a pod's status says its containers hold (in-place pod resize, KEP-1287), for pod_requests."""

    __slots__ = ("status", "probs", "by_name", "infeasible")

    def __init__(self, status: dict[str, Any], probs: _Problems) -> None:
        self.status = status
        self.probs = probs
        # a status is found by container name, init container statuses last (as upstream's map is filled)
        self.by_name: dict[str, tuple[str, dict[str, Any]]] = {}
        for kind in ("containerStatuses", "initContainerStatuses"):
            for i, cs in enumerate(_l(status.get(kind))):
                cs = _d(cs)
                if isinstance(cs.get("name"), str):
                    self.by_name[cs["name"]] = (f"status.{kind}[{i}]", cs)
        # IsPodResizeInfeasible: the first PodResizePending condition decides
        self.infeasible = False
        for c in map(_d, _l(status.get("conditions"))):
            if c.get("type") == POD_RESIZE_PENDING:
                self.infeasible = c.get("reason") == RESIZE_INFEASIBLE
                break

    def _effective(self, spec: dict[str, int], resources: Any, allocated: Any, path: str,
                   allocated_path: str) -> dict[str, int]:
        """determineEffectiveRequests: max(spec, actuated, allocated), spec left out when Infeasible."""
        out = {} if self.infeasible else dict(spec)
        _max(out, _resource_list(_d(resources).get("requests"), f"{path}.requests", self.probs))
        _max(out, _resource_list(allocated, allocated_path, self.probs))
        return out

    def effective(self, name: Any, spec: dict[str, int]) -> dict[str, int]:
        """A container's requests: its spec unless its status carries ``resources`` (upstream: cs.Resources != nil)."""
        hit = self.by_name.get(name) if isinstance(name, str) else None
        if hit is None or hit[1].get("resources") is None:
            return spec
        path, cs = hit
        return self._effective(spec, cs["resources"], cs.get("allocatedResources"), f"{path}.resources",
                               f"{path}.allocatedResources")

    def effective_pod_level(self, spec: dict[str, int]) -> dict[str, int]:
        """Pod-level requests once status.resources is set; a resource the effective list lacks is 0, as upstream."""
        if self.status.get("resources") is None:
            return spec
        eff = self._effective(spec, self.status["resources"], self.status.get("allocatedResources"),
                              "status.resources", "status.allocatedResources")
        return {k: eff.get(k, 0) for k in spec}


_TOLERATION_OPS = ("Equal", "Exists", "")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _tolerations(v: Any, probs: _Problems) -> tuple[Toleration, ...]:
    out = []
    for i, t in enumerate(_l(v)):
        t = _d(t)
        op = t.get("operator") or "Equal"
        effect = t.get("effect") or ""
        if op not in _TOLERATION_OPS:
            probs.add(f"spec.tolerations[{i}].operator", f'Unsupported value: "{op}": supported values: "Equal", "Exists"')
            continue
        if effect and effect not in _EFFECTS:
            probs.add(f"spec.tolerations[{i}].effect", f'Unsupported value: "{effect}"')
            continue
        secs = t.get("tolerationSeconds")
        out.append(Toleration(str(t.get("key") or ""), op, str(t.get("value") or ""), effect,
                              secs if isinstance(secs, int) else None))
    return tuple(out)


_SELECTOR_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _check_affinity(aff: Any, probs: _Problems) -> dict[str, Any] | None:
    """Keep spec.affinity as it is, after checking the operators the plugins will meet."""
    if aff is None:
        return None
    if not isinstance(aff, dict):
        probs.add("spec.affinity", "must be an object")
        return None
    na = _d(aff.get("nodeAffinity"))
    req = _d(na.get("requiredDuringSchedulingIgnoredDuringExecution"))
    terms = [(f"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]", t)
             for i, t in enumerate(_l(req.get("nodeSelectorTerms")))]
    for i, p in enumerate(_l(na.get("preferredDuringSchedulingIgnoredDuringExecution"))):
        terms.append((f"spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference",
                      _d(p).get("preference")))
    for path, term in terms:
        for kind in ("matchExpressions", "matchFields"):
            for j, e in enumerate(_l(_d(term).get(kind))):
                op = _d(e).get("operator")
                if op not in _SELECTOR_OPS:
                    probs.add(f"{path}.{kind}[{j}].operator", f'"{op}" is not a valid node selector operator')
    return aff


def _label_key_reqs(keys: Any, labels: dict[str, str], op: str, path: str,
                    probs: _Problems) -> list[Requirement]:
    """matchLabelKeys (In) / mismatchLabelKeys (NotIn): the pod's own value of each key it carries."""
    if keys is None:
        return []
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        probs.add(path, "must be a list of strings")
        return []
    return [Requirement(k, op, frozenset((labels[k],))) for k in keys if k in labels]


def _affinity_term(raw: Any, path: str, namespace: str, labels: dict[str, str], probs: _Problems,
                   weight: int = 0) -> AffinityTerm:
    t = _d(raw)
    selector = parse_label_selector(t.get("labelSelector"), f"{path}.labelSelector", probs)
    # the API server merges these into labelSelector at creation (KEP-3633); merging again is idempotent
    # and covers servers that do not
    selector = selector.with_requirements(
        _label_key_reqs(t.get("matchLabelKeys"), labels, SELECTOR_IN, f"{path}.matchLabelKeys", probs)
        + _label_key_reqs(t.get("mismatchLabelKeys"), labels, SELECTOR_NOT_IN, f"{path}.mismatchLabelKeys", probs))
    names = t.get("namespaces")
    if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
        probs.add(f"{path}.namespaces", "must be a list of strings")
        names = []
    raw_ns_sel = t.get("namespaceSelector")
    ns_selector = parse_label_selector(raw_ns_sel, f"{path}.namespaceSelector", probs)
    # getNamespacesFromPodAffinityTerm: neither namespaces nor namespaceSelector means the pod's own namespace
    namespaces = frozenset(names or ()) if names or raw_ns_sel is not None else frozenset((namespace,))
    key = t.get("topologyKey")
    if not isinstance(key, str) or not key:
        probs.add(f"{path}.topologyKey", "Required value: can not be empty")
        key = ""
    return AffinityTerm(PodSelection(selector, namespaces, ns_selector), key, weight)


def _pod_affinity(aff: Any, namespace: str, labels: dict[str, str], probs: _Problems) -> PodAffinity | None:
    aff = _d(aff)
    out: dict[str, list[AffinityTerm]] = {"required": [], "required_anti": [], "preferred": [], "preferred_anti": []}
    found = False
    for kind, field_ in (("podAffinity", ""), ("podAntiAffinity", "_anti")):
        block = aff.get(kind)
        if block is None:
            continue
        found = True
        block = _d(block)
        base = f"spec.affinity.{kind}"
        p = f"{base}.requiredDuringSchedulingIgnoredDuringExecution"
        for i, t in enumerate(_l(block.get("requiredDuringSchedulingIgnoredDuringExecution"))):
            out["required" + field_].append(_affinity_term(t, f"{p}[{i}]", namespace, labels, probs))
        p = f"{base}.preferredDuringSchedulingIgnoredDuringExecution"
        for i, wt in enumerate(_l(block.get("preferredDuringSchedulingIgnoredDuringExecution"))):
            wt = _d(wt)
            w = wt.get("weight")
            if not isinstance(w, int) or isinstance(w, bool) or not 1 <= w <= 100:
                probs.add(f"{p}[{i}].weight", f"Invalid value: {w!r}: must be in the range 1-100")
                continue
            out["preferred" + field_].append(
                _affinity_term(wt.get("podAffinityTerm"), f"{p}[{i}].podAffinityTerm", namespace, labels, probs, w))
    if not found:
        return None
    return PodAffinity(tuple(out["required"]), tuple(out["required_anti"]), tuple(out["preferred"]),
                       tuple(out["preferred_anti"]))


def _spread_constraints(raw: Any, labels: dict[str, str], probs: _Problems) -> tuple[SpreadConstraint, ...]:
    out = []
    for i, c in enumerate(_l(raw)):
        c = _d(c)
        p = f"spec.topologySpreadConstraints[{i}]"
        skew = c.get("maxSkew")
        if not isinstance(skew, int) or isinstance(skew, bool) or not 0 < skew <= INT32_MAX:
            probs.add(f"{p}.maxSkew", f"Invalid value: {skew!r}: must be greater than zero (and fit int32)")
            continue
        key = c.get("topologyKey")
        if not isinstance(key, str) or not key:
            probs.add(f"{p}.topologyKey", "Required value: can not be empty")
            continue
        when = c.get("whenUnsatisfiable")
        if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            probs.add(f"{p}.whenUnsatisfiable", f'Unsupported value: "{when}": supported values: '
                                                f'"DoNotSchedule", "ScheduleAnyway"')
            continue
        min_domains = c.get("minDomains")
        if min_domains is None:
            min_domains = 1
        elif not isinstance(min_domains, int) or isinstance(min_domains, bool) or not 0 < min_domains <= INT32_MAX:
            probs.add(f"{p}.minDomains", f"Invalid value: {min_domains!r}: must be greater than zero (and fit int32)")
            continue
        policies = []
        for name in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            v = c.get(name)
            if v is not None and v not in (POLICY_HONOR, POLICY_IGNORE):
                probs.add(f"{p}.{name}", f'Unsupported value: "{v}": supported values: "Honor", "Ignore"')
            policies.append(v)
        mlk = c.get("matchLabelKeys")
        keys = tuple(mlk) if isinstance(mlk, list) and all(isinstance(k, str) for k in mlk) else ()
        if mlk is not None and not keys and mlk != []:
            probs.add(f"{p}.matchLabelKeys", "must be a list of strings")
        selector = parse_label_selector(c.get("labelSelector"), f"{p}.labelSelector", probs)
        # matchLabelKeys: the pod's own values, ANDed into the selector (the scheduler's merge, as upstream's;
        # idempotent where the API server merged them already)
        selector = selector.with_requirements(
            [Requirement(k, SELECTOR_IN, frozenset((labels[k],))) for k in keys if k in labels])
        out.append(SpreadConstraint(
            max_skew=skew, topology_key=key, when_unsatisfiable=when, selector=selector, min_domains=min_domains,
            node_affinity_policy=policies[0] if policies[0] in (POLICY_HONOR, POLICY_IGNORE) else POLICY_HONOR,
            node_taints_policy=policies[1] if policies[1] in (POLICY_HONOR, POLICY_IGNORE) else POLICY_IGNORE,
            match_label_keys=keys))
    return tuple(out)


_terms_cache: dict[tuple[Any, ...], tuple[Any, str]] = {}


def _memo(kind: str, raw: Any, namespace: str, labels: dict[str, str], probs: _Problems,
          parse: Callable[[_Problems], Any]) -> Any:
    """``parse(probs)`` of a pod's affinity or spread terms (``raw``, their JSON), memoized: a workload's pods
    repeat the same terms, and building their selectors is most of the cost of parsing such a pod. The key
    is the JSON, the namespace (the default for affinity terms) and, when matchLabelKeys or
    mismatchLabelKeys make the result depend on them, the pod's labels."""
    try:
        text = orjson.dumps(raw)
    except TypeError:     # what JSON cannot hold (an integer beyond 64 bits) is keyed by its repr
        text = repr(raw).encode()
    key: tuple[Any, ...] = (kind, namespace, text)
    if b"abelKeys" in text:
        key += (tuple(sorted(labels.items())),)
    hit = _terms_cache.get(key)
    if hit is None:
        mine = _Problems()
        hit = (parse(mine), mine.first)
        if len(_terms_cache) < 4096:
            _terms_cache[key] = hit
    if hit[1] and not probs.first:
        probs.first = hit[1]
    return hit[0]


# the inline volume sources VolumeRestrictions checks for disk conflicts (needsRestrictionsCheck)
CONFLICT_DISK_SOURCES = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")


def pvc_volume_claims(pod: Pod) -> list[str]:
    """The claims of the pod's persistentVolumeClaim volumes, in order, without generic ephemeral volumes'
    (what VolumeZone and VolumeRestrictions read, and upstream's NodeInfo counts as a pod's claims)."""
    ephemeral = set(pod.ephemeral_pvcs)
    return [n for n in pod.pvcs if n not in ephemeral] if ephemeral else list(pod.pvcs)


def uses_pvc_volume_claim(pod: Pod, claim: Any) -> bool:
    """Is ``claim`` (a PersistentVolumeClaim) the claim of one of the pod's persistentVolumeClaim volumes?"""
    return isinstance(claim, PersistentVolumeClaim) and claim.namespace == pod.namespace \
        and claim.name in pvc_volume_claims(pod)


def parse_pod(obj: dict[str, Any]) -> Pod:
    meta = _d(obj.get("metadata"))
    spec = _d(obj.get("spec"))
    status = _d(obj.get("status"))
    probs = _Problems()
    labels = _str_map(meta.get("labels"), "metadata.labels", probs)
    annotations = _str_map(meta.get("annotations"), "metadata.annotations", probs)
    reqs, nz_cpu, nz_mem = pod_requests(spec, probs, status)
    ports = []
    images = []
    for kind in ("initContainers", "containers"):
        for ci, c in enumerate(_l(spec.get(kind))):
            c = _d(c)
            if isinstance(c.get("image"), str):
                images.append(c["image"])
            # GetHostPorts: sidecars (init containers with restartPolicy Always) run all the pod's life and
            # hold their host ports as app containers do (listed first, as upstream lists them); other init
            # containers are done before the app starts
            if kind == "containers" or c.get("restartPolicy") == "Always":
                for j, p in enumerate(_l(c.get("ports"))):
                    p = _d(p)
                    hp = p.get("hostPort")
                    if isinstance(hp, int) and not isinstance(hp, bool) and hp > 0:
                        path = f"spec.{kind}[{ci}].ports[{j}]"
                        # HostPortInfo's sanitize: an empty hostIP binds all addresses, an empty protocol is TCP
                        ports.append(HostPort(_s(p.get("hostIP"), f"{path}.hostIP", probs, "0.0.0.0"),
                                              _s(p.get("protocol"), f"{path}.protocol", probs, "TCP"), hp))
    owners = tuple(OwnerRef(str(o.get("kind", "")), str(o.get("name", "")), str(o.get("uid", "")),
                            bool(o.get("controller")), str(o.get("apiVersion", "")))
                   for o in map(_d, _l(meta.get("ownerReferences"))))
    pvcs: list[str] = []
    ephemeral: list[str] = []
    disks: list[tuple[str, str]] = []
    for v in map(_d, _l(spec.get("volumes"))):
        disks.extend((str(v.get("name", "")), src) for src in CONFLICT_DISK_SOURCES if v.get(src) is not None)
        if v.get("persistentVolumeClaim"):
            pvcs.append(str(_d(v.get("persistentVolumeClaim")).get("claimName", "")))
        elif v.get("ephemeral"):
            # ephemeral.VolumeClaimName: the pod's name, a dash, the volume's name
            ephemeral.append(f"{meta.get('name', '')}-{v.get('name', '')}")
            pvcs.append(ephemeral[-1])
    priority = spec.get("priority")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        probs.add("spec.priority", f"must be an integer, got {priority!r}")
        priority = 0
    pc_name = spec.get("priorityClassName") or ""
    if priority is None:
        priority = 0
    namespace = str(meta.get("namespace", ""))
    aff = _d(spec.get("affinity"))
    pod_affinity = None
    if aff.get("podAffinity") is not None or aff.get("podAntiAffinity") is not None:
        raw_aff = (aff.get("podAffinity"), aff.get("podAntiAffinity"))
        pod_affinity = _memo("affinity", raw_aff, namespace, labels, probs,
                             lambda pr: _pod_affinity(aff, namespace, labels, pr))
    raw_spread = spec.get("topologySpreadConstraints")
    spread: tuple[SpreadConstraint, ...] = ()
    if raw_spread:
        spread = _memo("spread", raw_spread, namespace, labels, probs,
                       lambda pr: _spread_constraints(raw_spread, labels, pr))
    return Pod(
        uid=str(meta.get("uid", "")),
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        labels=labels,
        annotations=annotations,
        scheduler_name=_s(spec.get("schedulerName"), "spec.schedulerName", probs, "default-scheduler"),
        node_name=_s(spec.get("nodeName"), "spec.nodeName", probs),
        nominated_node_name=_s(status.get("nominatedNodeName"), "status.nominatedNodeName", probs),
        priority=priority,
        priority_class_name=pc_name if isinstance(pc_name, str) else "",
        preemption_policy=_s(spec.get("preemptionPolicy"), "spec.preemptionPolicy", probs, "PreemptLowerPriority"),
        created=parse_time(meta.get("creationTimestamp")),
        start_time=parse_time(status.get("startTime")),
        phase=_s(status.get("phase"), "status.phase", probs, "Pending"),
        deleting=bool(meta.get("deletionTimestamp")),
        requests=reqs,
        nonzero_cpu=nz_cpu,
        nonzero_memory=nz_mem,
        node_selector=_str_map(spec.get("nodeSelector"), "spec.nodeSelector", probs),
        affinity=_check_affinity(spec.get("affinity"), probs),
        tolerations=_tolerations(spec.get("tolerations"), probs),
        host_ports=tuple(ports),
        images=tuple(images),
        scheduling_gates=tuple(str(_d(g).get("name", "")) for g in _l(spec.get("schedulingGates"))),
        pod_affinity=pod_affinity,
        topology_spread=spread,
        owners=owners,
        pvcs=tuple(pvcs),
        ephemeral_pvcs=tuple(ephemeral),
        resource_claims=tuple(str(_d(c).get("name", "")) for c in _l(spec.get("resourceClaims"))),
        conflict_disks=tuple(disks),
        pod_group=labels.get(POD_GROUP_LABEL) or annotations.get(POD_GROUP_ANNOTATION) or "",
        scheduling_group=None if spec.get("schedulingGroup") is None else _s(
            _d(spec["schedulingGroup"]).get("podGroupName"), "spec.schedulingGroup.podGroupName", probs),
        invalid=probs.first,
        raw=obj,
    )


def parse_node(obj: dict[str, Any]) -> Node:
    meta = _d(obj.get("metadata"))
    spec = _d(obj.get("spec"))
    status = _d(obj.get("status"))
    probs = _Problems()
    alloc_raw, alloc_path = status.get("allocatable"), "status.allocatable"
    if not alloc_raw:
        alloc_raw, alloc_path = status.get("capacity"), "status.capacity"
    allocatable = _resource_list(alloc_raw, alloc_path, probs)
    taints = []
    for i, t in enumerate(_l(spec.get("taints"))):
        t = _d(t)
        effect = t.get("effect") or ""
        if effect not in _EFFECTS:
            probs.add(f"spec.taints[{i}].effect", f'Unsupported value: "{effect}"')
            continue
        taints.append(Taint(str(t.get("key") or ""), str(t.get("value") or ""), effect))
    images = []
    for img in map(_d, _l(status.get("images"))):
        size = img.get("sizeBytes")
        images.append((tuple(n for n in _l(img.get("names")) if isinstance(n, str)),
                       size if isinstance(size, int) else 0))
    ready = True
    for c in map(_d, _l(status.get("conditions"))):
        if c.get("type") == "Ready":
            ready = c.get("status") == "True"
    return Node(
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        labels=_str_map(meta.get("labels"), "metadata.labels", probs),
        annotations=_str_map(meta.get("annotations"), "metadata.annotations", probs),
        unschedulable=bool(spec.get("unschedulable")),
        taints=tuple(taints),
        allocatable=allocatable,
        images=tuple(images),
        ready=ready,
        declared_features=frozenset(f for f in _l(status.get("declaredFeatures")) if isinstance(f, str)),
        invalid=probs.first,
        raw=obj,
    )


def parse_pod_group(obj: dict[str, Any]) -> PodGroup:
    """A PodGroup record from the API's JSON (a watch event's object or a list item)."""
    meta = _d(obj.get("metadata"))
    spec = _d(obj.get("spec"))
    ann = meta.get("annotations")
    return PodGroup(
        namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        api_version=str(obj.get("apiVersion") or POD_GROUP_API_VERSION),
        resource_version=str(meta.get("resourceVersion") or ""),
        generation=_int(meta.get("generation")),
        created=parse_time(meta.get("creationTimestamp")),
        annotations={str(k): str(v) for k, v in ann.items()} if isinstance(ann, dict) else {},
        min_member=max(0, _int(spec.get("minMember"))),
        min_resources=spec.get("minResources"),
        schedule_timeout_seconds=max(0, _int(spec.get("scheduleTimeoutSeconds"))),
        disruption_mode=_disruption_mode(spec, ann),
        priority=spec.get("priority") if isinstance(spec.get("priority"), int)
        and not isinstance(spec.get("priority"), bool) else None,
        spec=spec, status=_d(obj.get("status")), raw=obj)


# ---------------------------------------------------------------------------- volumes (VolumeBinding)

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"          # the PV controller finished binding a claim
ANN_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"    # the beta field, still read first upstream
BINDING_IMMEDIATE = "Immediate"
BINDING_WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    """A PersistentVolumeClaim, as far as scheduling looks at it."""

    namespace: str
    name: str
    uid: str = ""
    volume_name: str = ""           # spec.volumeName ("" unbound)
    storage_class: str = ""         # the beta annotation, else spec.storageClassName (volume.GetPersistentVolumeClaimClass)
    phase: str = "Pending"          # status.phase: Pending, Bound, Lost
    bind_completed: bool = False    # the PV controller's bind-completed annotation
    deleting: bool = False
    controller_uid: str = ""        # the uid of its controlling owner (a generic ephemeral volume's pod)
    access_modes: tuple[str, ...] = ()   # spec.accessModes

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def bound(self) -> bool:
        """isPVCFullyBound: a volume named and the binding completed (a claim only pre-bound is not)."""
        return bool(self.volume_name) and self.bind_completed


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    uid: str = ""
    resource_version: str = ""
    # spec.nodeAffinity.required.nodeSelectorTerms as written; None: the volume can be used from any node
    node_affinity_terms: Any = None
    phase: str = ""
    # its zone and region labels (VolumeZone's getPVTopologies): (label key, the zones it lists), in
    # PV_TOPOLOGY_LABELS order; a value that is not a "__"-separated list of non-empty zones is left out
    topologies: tuple[tuple[str, frozenset[str]], ...] = ()


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    binding_mode: str = BINDING_IMMEDIATE     # volumeBindingMode (the API defaults it to Immediate)


def parse_pvc(obj: dict[str, Any]) -> PersistentVolumeClaim:
    meta, spec, status = _d(obj.get("metadata")), _d(obj.get("spec")), _d(obj.get("status"))
    ann = _d(meta.get("annotations"))
    cls = ann.get(ANN_STORAGE_CLASS) if ANN_STORAGE_CLASS in ann else spec.get("storageClassName")
    controller = next((o for o in map(_d, _l(meta.get("ownerReferences"))) if o.get("controller") is True), {})
    return PersistentVolumeClaim(
        namespace=str(meta.get("namespace", "")), name=str(meta.get("name", "")), uid=str(meta.get("uid", "")),
        volume_name=spec.get("volumeName") if isinstance(spec.get("volumeName"), str) else "",
        storage_class=cls if isinstance(cls, str) else "",
        phase=status.get("phase") if isinstance(status.get("phase"), str) else "Pending",
        bind_completed=ANN_BIND_COMPLETED in ann, deleting=bool(meta.get("deletionTimestamp")),
        controller_uid=str(controller.get("uid", "")),
        access_modes=tuple(m for m in _l(spec.get("accessModes")) if isinstance(m, str)))


# upstream's topologyLabels in VolumeZone, in its order: the deprecated beta labels, then the GA ones
PV_TOPOLOGY_LABELS = ("failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
                      "topology.kubernetes.io/zone", "topology.kubernetes.io/region")
# volumehelpers.LabelZonesToSet's delimiter (cloudvolume.LabelMultiZoneDelimiter)
MULTI_ZONE_DELIMITER = "__"


def parse_pv(obj: dict[str, Any]) -> PersistentVolume:
    meta, spec, status = _d(obj.get("metadata")), _d(obj.get("spec")), _d(obj.get("status"))
    required = _d(spec.get("nodeAffinity")).get("required")
    terms = _d(required).get("nodeSelectorTerms") if required is not None else None
    labels = _d(meta.get("labels"))
    topologies = []
    for key in PV_TOPOLOGY_LABELS:
        value = labels.get(key)
        if isinstance(value, str):
            zones = _label_zones(value)
            if zones:
                topologies.append((key, zones))
    return PersistentVolume(
        name=str(meta.get("name", "")), uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        node_affinity_terms=(tuple(_l(terms)) if required is not None else None),
        phase=status.get("phase") if isinstance(status.get("phase"), str) else "",
        topologies=tuple(topologies))


def _label_zones(value: str) -> frozenset[str]:
    """LabelZonesToSet: the trimmed "__"-separated zones; empty (upstream: an error) if one of them is empty."""
    zones = [z.strip() for z in value.split(MULTI_ZONE_DELIMITER)]
    return frozenset() if any(not z for z in zones) else frozenset(zones)


def parse_storage_class(obj: dict[str, Any]) -> StorageClass:
    mode = obj.get("volumeBindingMode")
    return StorageClass(name=str(_d(obj.get("metadata")).get("name", "")),
                        binding_mode=mode if isinstance(mode, str) and mode else BINDING_IMMEDIATE)


def marked_preempted(p: Pod) -> bool:
    """Does the pod carry DisruptionTarget=True with reason PreemptionByScheduler (a scheduler preempted it)?"""
    for c in (p.raw.get("status") or {}).get("conditions") or ():
        if c.get("type") == "DisruptionTarget" and c.get("status") == "True" \
                and c.get("reason") == PREEMPTION_BY_SCHEDULER:
            return True
    return False


def _disruption_mode(spec: dict[str, Any], ann: Any) -> str:
    """PodGroup when the field or the annotation says so (case-insensitively), else Pod ("Pod", tandem's older
    "Single", or unset: members are disrupted one by one)."""
    raw = spec.get("disruptionMode")
    if not isinstance(raw, str) and isinstance(ann, dict):
        raw = ann.get(DISRUPTION_MODE_ANNOTATION)
    return DISRUPTION_POD_GROUP if isinstance(raw, str) and raw.lower() == "podgroup" else DISRUPTION_POD


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    """A policy/v1 PodDisruptionBudget as preemption reads it: whom it covers and how many may go now."""

    namespace: str
    name: str
    selector: LabelSelector                  # spec.selector (nil matches nothing; {} every pod of the namespace)
    disruptions_allowed: int                 # status.disruptionsAllowed
    disrupted_pods: frozenset[str]           # status.disruptedPods: pod names already being evicted

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse_pdb(obj: dict[str, Any]) -> PodDisruptionBudget:
    meta = _d(obj.get("metadata"))
    spec = _d(obj.get("spec"))
    status = _d(obj.get("status"))
    disrupted = status.get("disruptedPods")
    return PodDisruptionBudget(
        namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
        selector=parse_label_selector(spec.get("selector"), "spec.selector"),
        disruptions_allowed=_int(status.get("disruptionsAllowed")),
        disrupted_pods=frozenset(str(k) for k in disrupted) if isinstance(disrupted, dict) else frozenset())


def _int(v: Any) -> int:
    """An integer field as the API would have it; anything else (a string, a bool, null) is 0."""
    return v if isinstance(v, int) and not isinstance(v, bool) else 0
