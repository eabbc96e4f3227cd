"""NodeResourcesFit: does the pod fit a node's free resources, and how full would the node be?

Filter mirrors upstream's fitsRequest. A node fails with "Too many pods"
when its pod count + 1 exceeds its allocatable pods, and with
"Insufficient <resource>" for every resource the pod requests (> 0) beyond
what is free (allocatable - requested); a node short of several gets
several reasons. A pod that requests nothing is only checked for the pod
count. Extended resources listed in ``ignoredResources``, or whose prefix
(before "/") is in ``ignoredResourceGroups``, are not checked. A node on
which some request exceeds the *whole* allocatable gets its reasons with
code UnschedulableAndUnresolvable (preemption cannot help there), as
upstream marks InsufficientResource.Unresolvable. A pod requesting an
extended resource no node has fails everywhere with "Insufficient <name>".

Score is the configured scoring strategy over ``scoringStrategy.resources``
(resource_allocation.go): for cpu and memory the requested amount is the
node's *non-zero* requested (containers asking nothing count 100m / 200Mi)
plus the pod's non-zero request; every other resource uses plain requests.
A resource the node has no allocatable of is left out of that node's
weighted average; an extended resource the pod does not request is left
out everywhere. The three strategies give upstream's integer score:

* LeastAllocated: sum_i w_i * ((alloc - req) * 100 // alloc) // sum_i w_i
  (0 for a resource over-committed);
* MostAllocated: sum_i w_i * (min(req, alloc) * 100 // alloc) // sum_i w_i;
* RequestedToCapacityRatio: the shape's broken-linear function of the
  utilization min(req, alloc) * 100 // alloc (scores scaled by 10, Go's
  truncating division), averaged over the resources that score > 0 and
  rounded half away from zero.

The hot path is columns, never a Python loop over nodes. The columns a
call needs are gathered with one ``take`` on the flattened table (index
``col + row * R``) into a (columns x rows) matrix, so each resource's
values are contiguous and the number of numpy calls does not grow with the
number of resources. Every (columns x rows) intermediate lives in a
:class:`Scratch` buffer the plugin reuses: at 15,000 nodes such
temporaries are big enough that glibc returns them to the OS when freed
and the next call page-faults them back, which cost 2-3x the arithmetic.
Only small bool masks and the returned scores are allocated per call.

``x * 100 // alloc`` is computed as a float division, which is exact here:
with alloc < 2**46 both operands are exact doubles, the true quotient
q <= 100 is either an integer (then IEEE division returns it exactly) or at
least 1/alloc > 2**-46 below the next integer, more than half an ulp of any
double below 128 (2**-47), so truncating the rounded quotient gives
floor(q). A larger allocatable falls back to integer division. Sums of
these small integers stay exact in float64.

This module must never mutate the node table; CycleState entries are
immutable and shared on clone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework import (
    MAX_NODE_SCORE, ActionType, ClusterEvent, ClusterEventWithHint, Code, ConfigError, CycleState,
    FilterResult, QueueingHint, Rejection, Resource, Status, register,
)
from scheduler.framework.vector import Scratch, ShapeCache, flat_index, take
from scheduler.model import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Node, Pod

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

NAME = "NodeResourcesFit"
PRE_FILTER_KEY = "PreFilter" + NAME
PRE_SCORE_KEY = "PreScore" + NAME

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
SCORING_STRATEGY_TYPES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)

MAX_CUSTOM_PRIORITY_SCORE = 10     # config.MaxCustomPriorityScore: shape scores are 0..10
MAX_UTILIZATION = 100
MAX_RESOURCE_WEIGHT = 100

TOO_MANY_PODS = "Too many pods"

_OK = Status()
_FLOAT_EXACT_ALLOC = 1 << 46       # below this, float floor(x * 100 / alloc) is exact (module doc)


# ---------------------------------------------------------------------------- resource names

def is_extended_resource(name: str) -> bool:
    """v1helper.IsExtendedResourceName: domain-prefixed, not *kubernetes.io/, not requests.*."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def is_scalar_resource(name: str) -> bool:
    """schedutil.IsScalarResourceName: extended, hugepages-*, attachable-volumes-*, or *kubernetes.io/*."""
    return (is_extended_resource(name) or name.startswith("hugepages-")
            or name.startswith("attachable-volumes-") or "kubernetes.io/" in name)


def _checked(name: str) -> bool:
    """Resources fitsRequest compares (framework.Resource keeps only these from a ResourceList)."""
    return name in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar_resource(name)


def _reason(name: str) -> str:
    return f"Insufficient {name}"


# ---------------------------------------------------------------------------- args

_NAME_PART_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME_PART_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                  "with an alphanumeric character (regex used for validation is "
                  "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


def qualified_name_errors(value: str) -> list[str]:
    """apimachinery's IsQualifiedName (ValidateLabelName): an optional DNS subdomain prefix and '/', then a name."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
        errs: list[str] = []
    elif len(parts) == 2:
        prefix, name = parts
        errs = []
        if not prefix:
            errs.append("prefix part must be non-empty")
        elif len(prefix) > 253:
            errs.append("prefix part must be no more than 253 characters")
        elif not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix):
            errs.append("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                        "characters, '-' or '.', and must start and end with an alphanumeric character")
    else:
        return ["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start "
                "and end with an alphanumeric character, with an optional DNS subdomain prefix and '/' "
                "(e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    elif not _NAME_PART_RE.fullmatch(name):
        errs.append(_NAME_PART_MSG)
    return errs


def _invalid(path: str, value: Any, msg: str) -> str:
    shown = f'"{value}"' if isinstance(value, str) else value
    return f"{path}: Invalid value: {shown}: {msg}"


@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """config.ResourceSpec: a resource and its weight in the score."""

    name: str = ""
    weight: int = 1

    def __post_init__(self) -> None:
        # v1 defaulting: Go cannot tell an unset weight from 0, so 0 means the default 1
        if self.weight == 0:
            object.__setattr__(self, "weight", 1)


DEFAULT_RESOURCES = (ResourceSpec(CPU, 1), ResourceSpec(MEMORY, 1))


@dataclass(frozen=True, slots=True)
class UtilizationShapePoint:
    utilization: int = 0     # 0..100
    score: int = 0           # 0..MAX_CUSTOM_PRIORITY_SCORE


@dataclass(frozen=True, slots=True)
class RequestedToCapacityRatioParam:
    shape: tuple[UtilizationShapePoint, ...] = ()


@dataclass(frozen=True, slots=True)
class ScoringStrategy:
    # No default type when the strategy is given: upstream defaults only an absent scoringStrategy,
    # so `scoringStrategy: {resources: [...]}` is rejected for its empty type there too.
    type: str = ""
    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "resources", tuple(self.resources) or DEFAULT_RESOURCES)


@dataclass(frozen=True, slots=True)
class NodeResourcesFitArgs:
    """NodeResourcesFitArgs (kubescheduler.config.k8s.io/v1) with its v1 defaults."""

    ignored_resources: tuple[str, ...] = ()
    ignored_resource_groups: tuple[str, ...] = ()
    scoring_strategy: ScoringStrategy = field(default_factory=lambda: ScoringStrategy(LEAST_ALLOCATED))

    def validate(self, path: str) -> None:
        """ValidateNodeResourcesFitArgs; every problem is reported, in one line."""
        errs: list[str] = []
        for i, res in enumerate(self.ignored_resources):
            errs += [_invalid(f"{path}.ignoredResources[{i}]", res, m) for m in qualified_name_errors(res)]
        for i, group in enumerate(self.ignored_resource_groups):
            p = f"{path}.ignoredResourceGroups[{i}]"
            if "/" in group:
                errs.append(_invalid(p, group, "resource group name can't contain '/'"))
            errs += [_invalid(p, group, m) for m in qualified_name_errors(group)]
        s = self.scoring_strategy
        sp = f"{path}.scoringStrategy"
        if s.type not in SCORING_STRATEGY_TYPES:
            errs.append(f'{sp}.type: Unsupported value: "{s.type}": supported values: '
                        + ", ".join(f'"{t}"' for t in SCORING_STRATEGY_TYPES))
        for i, r in enumerate(s.resources):
            if not 0 < r.weight <= MAX_RESOURCE_WEIGHT:
                errs.append(_invalid(f"{sp}.resources[{i}].weight", r.weight,
                                     f"resource weight of {r.name} not in valid range (0, {MAX_RESOURCE_WEIGHT}]"))
        rp = f"{sp}.requestedToCapacityRatio"
        if s.requested_to_capacity_ratio is not None:
            errs += _shape_errors(s.requested_to_capacity_ratio.shape, f"{rp}.shape")
        elif s.type == REQUESTED_TO_CAPACITY_RATIO:
            # upstream dereferences the missing param and panics; say what is missing instead
            errs.append(f"{rp}.shape: Required value: at least one point must be specified")
        if errs:
            raise ConfigError("; ".join(errs))


def _shape_errors(shape: tuple[UtilizationShapePoint, ...], path: str) -> list[str]:
    """validateFunctionShape."""
    if not shape:
        return [f"{path}: Required value: at least one point must be specified"]
    errs = []
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            errs.append(_invalid(f"{path}[{i}].utilization", shape[i].utilization,
                                 "values must be sorted in increasing order"))
            break
    for i, pt in enumerate(shape):
        if not 0 <= pt.utilization <= MAX_UTILIZATION:
            errs.append(_invalid(f"{path}[{i}].utilization", pt.utilization,
                                 f"not in valid range [0, {MAX_UTILIZATION}]"))
        if not 0 <= pt.score <= MAX_CUSTOM_PRIORITY_SCORE:
            errs.append(_invalid(f"{path}[{i}].score", pt.score,
                                 f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"))
    return errs


# ---------------------------------------------------------------------------- cycle state

@dataclass(frozen=True, slots=True)
class _FitRequest:
    """What Filter compares: the pods column first (amount 1), then each requested resource.

    ``cols``/``amounts`` int64[c] index the node table's resource columns;
    ``reasons`` has one entry per column; ``missing`` names requested
    resources no node has (no column), which every node lacks.
    """

    cols: np.ndarray
    amounts: np.ndarray
    reasons: tuple[str, ...]
    missing: tuple[str, ...]

    def clone(self) -> "_FitRequest":
        return self   # immutable


@dataclass(frozen=True, slots=True)
class _ScoreRequest:
    """The scoring strategy's resources for this pod on this table, m of them (int64[m] each).

    ``cols``: allocatable columns; the node's requested amount comes from
    ``table.nonzero[:, nz_cols]`` for the terms ``nz_terms`` (cpu, memory)
    and from ``table.requested[:, rq_cols]`` for ``rq_terms``;
    ``pod_requests`` (int64[m, 1]) is added to it; ``weights`` weigh the average.
    """

    cols: np.ndarray
    nz_terms: np.ndarray
    nz_cols: np.ndarray
    rq_terms: np.ndarray
    rq_cols: np.ndarray
    pod_requests: np.ndarray
    weights: Weights

    def clone(self) -> "_ScoreRequest":
        return self


# ---------------------------------------------------------------------------- vectorized kernels

@dataclass(frozen=True, slots=True)
class Weights:
    """Resource weights of one score call: ``column`` float64[m, 1] (None when all are 1) and their ``total``."""

    column: np.ndarray | None
    total: float

    @classmethod
    def of(cls, weights: list[int]) -> "Weights":
        if all(w == 1 for w in weights):
            return cls(None, float(len(weights)))
        return cls(np.array(weights, dtype=np.float64)[:, None], float(sum(weights)))

    def sum_rows(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        """sum_i w_i * x[i]: x float64[m, k] (consumed) -> out float64[k]."""
        if self.column is not None:
            x *= self.column
        return np.add.reduce(x, axis=0, out=out)


def _cap_facts(cap: np.ndarray) -> tuple[bool, bool]:
    """(every node has some of every resource, every allocatable is small enough for exact float division)."""
    return bool(cap.min(initial=1) > 0), bool(cap.max(initial=0) < _FLOAT_EXACT_ALLOC)


def percent_floor(part: np.ndarray, cap: np.ndarray, exact: bool, out: np.ndarray) -> np.ndarray:
    """floor(part * 100 / cap) as float: part int64[m, k] (consumed), cap int64[m, k] >= 1 -> out float64[m, k].

    Exact for 0 <= part <= cap; a negative part gives a value <= 0 (callers clip). ``exact``: float
    division floors exactly (every cap < 2**46, see the module doc), else integer division.
    """
    part *= 100
    if not exact:
        np.copyto(out, part // cap)   # a node past 64 Ti of something: integer division (allocates)
        return out
    np.divide(part, cap, out=out)
    return np.trunc(out, out=out)


def _present_weight(cap: np.ndarray, everywhere: bool, w: Weights, scratch: Scratch) -> float | np.ndarray:
    """Weight of the resources each node has (cap > 0): int64[m, k] -> a number when every node has all."""
    if everywhere:
        return w.total
    present = np.greater(cap, 0, out=scratch.get("present", cap.shape, np.float64), casting="unsafe")
    return w.sum_rows(present, scratch.get("wsum", (cap.shape[1],), np.float64))


def _safe(cap: np.ndarray, everywhere: bool, scratch: Scratch) -> np.ndarray:
    """cap with 0 read as 1 (those nodes lack the resource and are masked): int64[m, k]."""
    return cap if everywhere else np.maximum(cap, 1, out=scratch.get("safe", cap.shape, np.int64))


def least_allocated(cap: np.ndarray, used: np.ndarray, w: Weights, scratch: Scratch) -> np.ndarray:
    """leastResourceScorer: cap int64[m, k] allocatable, used int64[m, k] requested (consumed) -> int64[k] in 0..100.

    An over-committed resource scores 0; a node without a resource (cap 0) leaves it out of its average.
    """
    m, k = cap.shape
    everywhere, exact = _cap_facts(cap)
    free = np.subtract(cap, used, out=used)                       # cap 0: -used <= 0, clipped to 0
    s = percent_floor(free, _safe(cap, everywhere, scratch), exact, scratch.get("score", (m, k), np.float64))
    np.maximum(s, 0, out=s)
    num = w.sum_rows(s, scratch.get("num", (k,), np.float64))
    return _floor_div(num, _present_weight(cap, everywhere, w, scratch))


def most_allocated(cap: np.ndarray, used: np.ndarray, w: Weights, scratch: Scratch) -> np.ndarray:
    """mostResourceScorer: requested is capped at allocatable (non-zero defaults may overshoot it)."""
    m, k = cap.shape
    everywhere, exact = _cap_facts(cap)
    part = np.minimum(used, cap, out=used)                         # cap 0 scores 0
    s = percent_floor(part, _safe(cap, everywhere, scratch), exact, scratch.get("score", (m, k), np.float64))
    num = w.sum_rows(s, scratch.get("num", (k,), np.float64))
    return _floor_div(num, _present_weight(cap, everywhere, w, scratch))


def requested_to_capacity_ratio(cap: np.ndarray, used: np.ndarray, w: Weights, lut: np.ndarray,
                                scratch: Scratch) -> np.ndarray:
    """RequestedToCapacityRatio: ``lut`` float64[101] is the shape's score per utilization 0..100.

    Only resources scoring > 0 count in the average, which is rounded half away from zero
    (math.Round of nodeScore / weightSum).
    """
    m, k = cap.shape
    everywhere, exact = _cap_facts(cap)
    part = np.minimum(used, cap, out=used)                         # over-committed reads as 100%
    util = percent_floor(part, _safe(cap, everywhere, scratch), exact, scratch.get("util", (m, k), np.float64))
    index = scratch.get("lut_index", (m, k), np.int64)
    np.copyto(index, util, casting="unsafe")
    s = np.take(lut, index, out=scratch.get("score", (m, k), np.float64), mode="clip")
    if not everywhere:
        s *= cap > 0
    scored = np.greater(s, 0, out=scratch.get("present", (m, k), np.float64), casting="unsafe")
    wsum = w.sum_rows(scored, scratch.get("wsum", (k,), np.float64))
    num = w.sum_rows(s, scratch.get("num", (k,), np.float64))
    # round(num / wsum) for non-negative integers: floor((2 num + wsum) / (2 wsum)); float is exact at these sizes
    num *= 2
    num += wsum
    wsum *= 2
    return _floor_div(num, wsum)


def _floor_div(num: np.ndarray, wsum: float | np.ndarray) -> np.ndarray:
    """num // wsum, 0 where wsum == 0 (num is 0 there too): float64[k] (consumed), float or float64[k] -> int64[k].

    Both hold small integers, so the float quotient floors exactly.
    """
    if isinstance(wsum, float):
        num /= max(wsum, 1.0)
    else:
        num /= np.maximum(wsum, 1, out=wsum)
    return num.astype(np.int64)


def _go_div(a: int, b: int) -> int:
    """Go's integer division: truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def broken_linear_lut(shape: tuple[UtilizationShapePoint, ...]) -> np.ndarray:
    """helper.BuildBrokenLinearFunction over utilization 0..100, scores scaled to 0..MAX_NODE_SCORE -> int64[101]."""
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    pts = [(p.utilization, p.score * scale) for p in shape]
    out = []
    for p in range(MAX_UTILIZATION + 1):  # 101 utilization values, once per plugin instance
        for i, (u, s) in enumerate(pts):
            if p <= u:
                if i == 0:
                    out.append(s)
                else:
                    u0, s0 = pts[i - 1]
                    out.append(s0 + _go_div((s - s0) * (p - u0), u - u0))
                break
        else:
            out.append(pts[-1][1])
    return np.array(out, dtype=np.int64)


# ---------------------------------------------------------------------------- plugin

@register
class NodeResourcesFit:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"EnqueueExtensions", "PreFilter", "Filter", "PreScore", "Score"})
    Args = NodeResourcesFitArgs

    def __init__(self, args: NodeResourcesFitArgs | None, handle: Any) -> None:
        args = args if args is not None else NodeResourcesFitArgs()
        self.args = args
        self.handle = handle
        self.ignored_resources = frozenset(args.ignored_resources)
        self.ignored_groups = frozenset(args.ignored_resource_groups)
        strategy = args.scoring_strategy
        self.strategy = strategy.type
        self.resources = strategy.resources
        self._lut: np.ndarray | None = None        # float64[101] for RequestedToCapacityRatio
        self._scratch = Scratch()
        self._score_requests = ShapeCache()
        self._fit_requests = ShapeCache()
        if strategy.type == REQUESTED_TO_CAPACITY_RATIO:
            if strategy.requested_to_capacity_ratio is None or not strategy.requested_to_capacity_ratio.shape:
                raise ConfigError(f"{NAME}: scoringStrategy.requestedToCapacityRatio.shape: Required value")
            self._lut = broken_linear_lut(strategy.requested_to_capacity_ratio.shape).astype(np.float64)
        elif strategy.type not in SCORING_STRATEGY_TYPES:
            raise ConfigError(f"{NAME}: scoring strategy {strategy.type} is not supported")

    # ------------------------------------------------------------------ queueing

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # With queueing hints (on by default upstream) only these can free room or add a fitting node;
        # UpdatePodScaleDown because in-place pod resize (InPlacePodVerticalScaling) is on by default.
        return [
            ClusterEventWithHint(ClusterEvent(Resource.POD, ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN),
                                 self.schedulable_after_pod_event),
            ClusterEventWithHint(ClusterEvent(Resource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE),
                                 self.schedulable_after_node_change),
        ]

    def schedulable_after_pod_event(self, pod: Pod, old: Pod | None, new: Pod | None) -> int:
        """isSchedulableAfterPodEvent: a deleted pod that held (or was nominated to) a node, or a scale-down."""
        if new is None:
            if old is None or (not old.node_name and not old.nominated_node_name):
                return QueueingHint.SKIP
            return QueueingHint.QUEUE
        if old is None:
            return QueueingHint.SKIP
        if new.uid == pod.uid:
            return QueueingHint.QUEUE   # the pod itself was scaled down
        if not new.node_name:
            return QueueingHint.SKIP    # an unscheduled pod frees nothing
        for name, amount in pod.requests.items():
            if amount > 0 and _checked(name) and old.requests.get(name, 0) > new.requests.get(name, 0):
                return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def schedulable_after_node_change(self, pod: Pod, old: Node | None, new: Node | None) -> int:
        """isSchedulableAfterNodeChange: the pod fits the (empty) node, and it is new or grew in what the pod asks."""
        if new is None or not self._fits_empty(pod, new):
            return QueueingHint.SKIP
        if old is None:
            return QueueingHint.QUEUE
        if new.allocatable.get(PODS, 0) > old.allocatable.get(PODS, 0):
            return QueueingHint.QUEUE
        for name, amount in pod.requests.items():
            if amount > 0 and self._counts(name) and new.allocatable.get(name, 0) > old.allocatable.get(name, 0):
                return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def _fits_empty(self, pod: Pod, node: Node) -> bool:
        # Upstream's hint ignores ignoredResources (it calls Fits with nil sets); honoring them here
        # requeues a pod asking for an ignored resource when a node arrives instead of never.
        if node.allocatable.get(PODS, 0) < 1:
            return False
        return all(amount <= node.allocatable.get(name, 0)
                   for name, amount in pod.requests.items() if amount > 0 and self._counts(name))

    def _counts(self, name: str) -> bool:
        """Does Filter compare this requested resource?"""
        if not _checked(name):
            return False
        if is_extended_resource(name):
            if name in self.ignored_resources:
                return False
            if self.ignored_groups and name.split("/", 1)[0] in self.ignored_groups:
                return False
        return True

    # ------------------------------------------------------------------ filtering

    def pre_filter(self, state: CycleState, pod: Pod, nodes: "NodeTable") -> tuple[None, Status]:
        state.write(PRE_FILTER_KEY, self.fit_request(pod, nodes))
        return None, _OK

    def fit_request(self, pod: Pod, nodes: "NodeTable") -> _FitRequest:
        """The pod's request vector over the table's resource columns (computePodResourceRequest).

        Kept per shape (the pod's requests, and the table's columns, which only grow), as score_request."""
        return self._fit_requests.get(nodes.resource_index, tuple(pod.requests.items()),
                                      lambda: self._build_fit_request(pod, nodes))

    def _build_fit_request(self, pod: Pod, nodes: "NodeTable") -> _FitRequest:
        index = nodes.resource_index
        cols = [index[PODS]]
        amounts = [1]
        reasons = [TOO_MANY_PODS]
        missing = []
        # upstream order: cpu, memory, ephemeral-storage, then scalar resources (a map there; sorted here)
        fixed = [n for n in (CPU, MEMORY, EPHEMERAL_STORAGE) if n in pod.requests]
        for name in fixed + sorted(n for n in pod.requests if n not in (CPU, MEMORY, EPHEMERAL_STORAGE)):
            amount = pod.requests[name]
            if amount <= 0 or not self._counts(name):
                continue
            col = index.get(name)
            if col is None:
                missing.append(name)
            else:
                cols.append(col)
                amounts.append(amount)
                reasons.append(_reason(name))
        out = _FitRequest(np.array(cols, dtype=np.int64), np.array(amounts, dtype=np.int64),
                          tuple(reasons), tuple(missing))
        out.cols.flags.writeable = out.amounts.flags.writeable = False   # shared by the pods of a shape
        return out

    def filter(self, state: CycleState, pod: Pod, nodes: "NodeTable", rows: np.ndarray) -> FilterResult:
        req: _FitRequest = state.read(PRE_FILTER_KEY)
        k, c = len(rows), len(req.cols)
        sc = self._scratch
        index = flat_index(req.cols, rows, nodes.alloc.shape[1], sc)   # alloc and requested share R
        alloc = take(nodes.alloc, index, sc.get("alloc", (c, k), np.int64))
        free = take(nodes.requested, index, sc.get("free", (c, k), np.int64))
        np.subtract(alloc, free, out=free)
        short = np.less(free, req.amounts[:, None], out=sc.get("short", (c, k), bool))
        failed = short.any(axis=0)
        if not req.missing and not failed.any():
            return FilterResult.all_pass(k)
        if req.missing:
            # no node has the resource: allocatable 0 < request everywhere, which preemption cannot change
            unresolvable = np.ones(k, dtype=bool)
            failed[:] = True
        else:
            # request > the node's whole allocatable (the pods column, first, excluded as upstream)
            unresolvable = (alloc[1:] < req.amounts[1:, None]).any(axis=0)
        rejections: list[Rejection] = []
        for reason, mask in zip(req.reasons, short):   # the pod's resources, not nodes
            _add_rejections(rejections, reason, mask, unresolvable)
        everywhere = np.ones(k, dtype=bool)
        for name in req.missing:
            rejections.append(Rejection(_reason(name), everywhere, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
        return FilterResult(~failed, rejections)

    # ------------------------------------------------------------------ scoring

    def pre_score(self, state: CycleState, pod: Pod, nodes: "NodeTable", rows: np.ndarray) -> Status:
        state.write(PRE_SCORE_KEY, self.score_request(pod, nodes))
        return _OK

    def score_request(self, pod: Pod, nodes: "NodeTable") -> _ScoreRequest:
        """Per configured resource: its columns, where the node's requested amount comes from, the pod's share.

        Kept per shape (what the pod asks of the scored resources, and the table's columns, which only
        grow); a shared request is read, never written."""
        reqs = pod.requests
        shape = (pod.nonzero_cpu, pod.nonzero_memory, *[reqs.get(spec.name, 0) for spec in self.resources])
        return self._score_requests.get(nodes.resource_index, shape, lambda: self._build_score_request(pod, nodes))

    def _build_score_request(self, pod: Pod, nodes: "NodeTable") -> _ScoreRequest:
        cols, nz_terms, nz_cols, rq_terms, rq_cols, amounts, weights = [], [], [], [], [], [], []
        index = nodes.resource_index
        for spec in self.resources:
            name = spec.name
            if name in (CPU, MEMORY):
                nz_terms.append(len(cols))
                nz_cols.append(0 if name == CPU else 1)
                amounts.append(pod.nonzero_cpu if name == CPU else pod.nonzero_memory)
                cols.append(index[name])
            elif name == EPHEMERAL_STORAGE or is_scalar_resource(name):
                amount = pod.requests.get(name, 0)
                col = index.get(name)
                # an extended resource the pod does not ask for is bypassed (resource_allocation.go)
                if col is None or (amount == 0 and name != EPHEMERAL_STORAGE):
                    continue
                rq_terms.append(len(cols))
                rq_cols.append(col)
                amounts.append(amount)
                cols.append(col)
            else:
                continue   # pods, unknown names: no allocatable in NodeInfo, never scored
            weights.append(spec.weight)

        def arr(x: list[int]) -> np.ndarray:
            a = np.array(x, dtype=np.int64)
            a.flags.writeable = False   # shared by the pods of a shape
            return a

        return _ScoreRequest(arr(cols), arr(nz_terms), arr(nz_cols), arr(rq_terms), arr(rq_cols),
                             arr(amounts)[:, None], Weights.of(weights))

    def score(self, state: CycleState, pod: Pod, nodes: "NodeTable", rows: np.ndarray) -> np.ndarray:
        req: _ScoreRequest | None = state.get(PRE_SCORE_KEY)
        if req is None:
            req = self.score_request(pod, nodes)
        k = len(rows)
        if len(req.cols) == 0 or k == 0:
            return np.zeros(k, dtype=np.int64)
        m = len(req.cols)
        sc = self._scratch
        cap = take(nodes.alloc, flat_index(req.cols, rows, nodes.alloc.shape[1], sc), sc.get("cap", (m, k), np.int64))
        used = sc.get("used", (m, k), np.int64)
        if len(req.rq_terms) == 0:       # the usual cpu + memory: one gather
            take(nodes.nonzero, flat_index(req.nz_cols, rows, nodes.nonzero.shape[1], sc), used)
        elif len(req.nz_terms) == 0:
            take(nodes.requested, flat_index(req.rq_cols, rows, nodes.requested.shape[1], sc), used)
        else:
            used[req.nz_terms] = take(nodes.nonzero, flat_index(req.nz_cols, rows, nodes.nonzero.shape[1], sc),
                                        sc.get("part", (len(req.nz_cols), k), np.int64))
            used[req.rq_terms] = take(nodes.requested, flat_index(req.rq_cols, rows, nodes.requested.shape[1], sc),
                                        sc.get("part", (len(req.rq_cols), k), np.int64))
        used += req.pod_requests
        if self._lut is not None:
            return requested_to_capacity_ratio(cap, used, req.weights, self._lut, sc)
        if self.strategy == MOST_ALLOCATED:
            return most_allocated(cap, used, req.weights, sc)
        return least_allocated(cap, used, req.weights, sc)


def _add_rejections(out: list[Rejection], reason: str, mask: np.ndarray, unresolvable: np.ndarray) -> None:
    """One reason's rows, split by node-level code: upstream gives a node UnschedulableAndUnresolvable
    for all its reasons when any request exceeds that node's whole allocatable."""
    if not mask.any():
        return
    hard = mask & unresolvable
    if not hard.any():
        out.append(Rejection(reason, mask.copy()))   # ``mask`` is a scratch view
        return
    soft = mask & ~unresolvable
    if soft.any():
        out.append(Rejection(reason, soft))
    out.append(Rejection(reason, hard, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
