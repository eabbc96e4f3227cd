"""NodeResourcesBalancedAllocation: favour nodes whose resources would be used evenly.

For each configured resource the node's fraction requested/allocatable is
taken after adding the pod (plain requests, not the non-zero defaults:
upstream's BalancedAllocation sets useRequested), capped at 1. The score is
(1 - std) * MaxNodeScore, truncated, where std is the population standard
deviation of the fractions; with exactly two fractions it is |f1 - f2| / 2,
with one or none it is 0 (score 100). A resource the node has no
allocatable of is left out of that node's fractions; an extended resource
the pod does not request is left out everywhere.

PreScore returns Skip for a pod that requests none of the resources
(upstream since v1.32, kubernetes#129138: otherwise best-effort pods pile
onto whichever node happens to look balanced).

The arithmetic is float64 in upstream's order (the same IEEE operations,
so the same truncated integer), vectorized over rows: the fractions are
summed resource by resource, never with numpy's pairwise reduction. The
columns are gathered with one flat-index ``take`` into a (resources x
rows) matrix held, like every large intermediate, in reused scratch
buffers (node_resources_fit.py explains both choices).

Must never mutate the node table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework import MAX_NODE_SCORE, Code, ConfigError, CycleState, Status, register
from scheduler.framework.vector import Scratch, ShapeCache, flat_index, take
from scheduler.model import CPU, EPHEMERAL_STORAGE, MEMORY, Pod

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

NAME = "NodeResourcesBalancedAllocation"
PRE_SCORE_KEY = "PreScore" + NAME

_OK = Status()
_SKIP = Status(Code.SKIP)


def _is_scalar_resource(name: str) -> bool:
    """schedutil.IsScalarResourceName (kept in step with plugins/node_resources_fit.py)."""
    extended = "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")
    return (extended or name.startswith("hugepages-") or name.startswith("attachable-volumes-")
            or "kubernetes.io/" in name)


# ---------------------------------------------------------------------------- args

@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """config.ResourceSpec; BalancedAllocation ignores weights and requires them to be 1."""

    name: str = ""
    weight: int = 1

    def __post_init__(self) -> None:
        if self.weight == 0:   # v1 defaulting: an unset (0) weight means 1
            object.__setattr__(self, "weight", 1)


DEFAULT_RESOURCES = (ResourceSpec(CPU, 1), ResourceSpec(MEMORY, 1))


@dataclass(frozen=True, slots=True)
class NodeResourcesBalancedAllocationArgs:
    """NodeResourcesBalancedAllocationArgs (kubescheduler.config.k8s.io/v1) with its v1 defaults."""

    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES

    def __post_init__(self) -> None:
        object.__setattr__(self, "resources", tuple(self.resources) or DEFAULT_RESOURCES)

    def validate(self, path: str) -> None:
        """ValidateNodeResourcesBalancedAllocationArgs: no duplicate names, every weight 1."""
        errs = []
        seen: set[str] = set()
        for i, r in enumerate(self.resources):
            if r.name in seen:
                errs.append(f'{path}.resources[{i}].name: Duplicate value: "{r.name}"')
            seen.add(r.name)
            if r.weight != 1:
                errs.append(f"{path}.resources[{i}].weight: Invalid value: {r.weight}: must be 1")
        if errs:
            raise ConfigError("; ".join(errs))


# ---------------------------------------------------------------------------- cycle state

@dataclass(frozen=True, slots=True)
class _BalanceRequest:
    """Resource columns to score (int64[m]) and the pod's plain request for each (int64[m, 1])."""

    cols: np.ndarray
    pod_requests: np.ndarray

    def clone(self) -> "_BalanceRequest":
        return self


# ---------------------------------------------------------------------------- vectorized kernels

def gather(table: np.ndarray, cols: np.ndarray, rows: np.ndarray, out: np.ndarray, scratch: Scratch) -> np.ndarray:
    """table int64[cap, R], cols int64[m], rows int64[k] -> out int64[m, k] (one resource per row)."""
    return take(table, flat_index(cols, rows, table.shape[1], scratch), out)


def balanced_score(cap: np.ndarray, used: np.ndarray, scratch: Scratch) -> np.ndarray:
    """balancedResourceScorer over rows: cap/used int64[m, k] allocatable and requested -> int64[k].

    Rows where a resource's allocatable is 0 leave that resource out, so the
    number of fractions n varies per row; each row gets upstream's formula
    for its n.
    """
    fr = scratch.get("fractions", cap.shape, np.float64)
    if cap.min(initial=1) > 0:                 # every node has every resource: one n for all rows
        np.divide(used, cap, out=fr)           # float64(requested) / float64(allocatable)
        np.minimum(fr, 1.0, out=fr)
        return _score_from_std(_std_fixed_n(fr, scratch))
    valid = cap > 0
    np.divide(used, np.maximum(cap, 1), out=fr)
    np.minimum(fr, 1.0, out=fr)
    fr *= valid                                # left out: 0.0 (and masked below)
    return _score_from_std(_std_varying_n(list(fr), list(valid)))


def _std_fixed_n(fr: np.ndarray, scratch: Scratch) -> np.ndarray:
    """Standard deviation when every row has all m fractions: float64[m, k] -> float64[k] (scratch)."""
    m, k = fr.shape
    std = scratch.get("std", (k,), np.float64)
    if m < 2:
        std[:] = 0.0
        return std
    if m == 2:
        np.subtract(fr[0], fr[1], out=std)
        np.abs(std, out=std)
        std /= 2
        return std
    mean = scratch.get("mean", (k,), np.float64)
    np.copyto(mean, fr[0])
    for f in fr[1:]:
        mean += f                              # in upstream's order, not a pairwise sum
    mean /= m
    std[:] = 0.0
    d = scratch.get("dev", (k,), np.float64)
    for f in fr:
        np.subtract(f, mean, out=d)
        d *= d
        std += d
    std /= m
    return np.sqrt(std, out=std)


def _std_varying_n(fr: list[np.ndarray], valid: list[np.ndarray]) -> np.ndarray:
    """Standard deviation over each row's valid fractions (n = 0..m per row): float64[k], bool[k] each -> float64[k].

    Invalid fractions are 0.0 and contribute 0.0 to every sum, which leaves
    upstream's sequential sums unchanged bit for bit.
    """
    k = len(fr[0])
    n = np.zeros(k, dtype=np.int64)
    for v in valid:
        n += v
    std = np.zeros(k)
    two = n == 2
    if two.any():
        hi = np.full(k, -np.inf)
        lo = np.full(k, np.inf)
        for f, v in zip(fr, valid):
            np.maximum(hi, np.where(v, f, -np.inf), out=hi)
            np.minimum(lo, np.where(v, f, np.inf), out=lo)
        std[two] = np.abs(hi[two] - lo[two]) / 2
    many = n > 2
    if many.any():
        total = np.zeros(k)
        for f in fr:
            total += f
        nf = np.maximum(n, 1).astype(np.float64)
        mean = total / nf
        ss = np.zeros(k)
        for f, v in zip(fr, valid):
            d = f - mean
            ss += np.where(v, d * d, 0.0)
        std[many] = np.sqrt(ss[many] / nf[many])
    return std


def _score_from_std(std: np.ndarray) -> np.ndarray:
    """int64((1 - std) * MaxNodeScore): truncation, as Go's conversion. float64[k] (consumed) -> int64[k]."""
    np.subtract(1, std, out=std)
    std *= MAX_NODE_SCORE
    return std.astype(np.int64)


# ---------------------------------------------------------------------------- plugin

@register
class NodeResourcesBalancedAllocation:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"PreScore", "Score"})
    Args = NodeResourcesBalancedAllocationArgs

    def __init__(self, args: NodeResourcesBalancedAllocationArgs | None, handle: Any) -> None:
        self.args = args if args is not None else NodeResourcesBalancedAllocationArgs()
        self.handle = handle
        self.resources = tuple(r.name for r in self.args.resources)
        self._scratch = Scratch()
        self._requests = ShapeCache()   # balance_request per pod shape

    def pod_requests(self, pod: Pod) -> list[int]:
        """calculatePodResourceRequestList with useRequested: plain requests, no non-zero defaults."""
        return [pod.requests.get(name, 0) for name in self.resources]

    def balance_request(self, pod: Pod, nodes: "NodeTable") -> _BalanceRequest | None:
        """The columns to score for this pod, or None for a pod requesting none of the resources."""
        requests = self.pod_requests(pod)
        return self._requests.get(nodes.resource_index, tuple(requests), lambda: self._build(requests, nodes))

    def _build(self, requests: list[int], nodes: "NodeTable") -> _BalanceRequest | None:
        if not any(requests):
            return None
        cols, amounts = [], []
        index = nodes.resource_index
        for name, amount in zip(self.resources, requests):
            if name in (CPU, MEMORY, EPHEMERAL_STORAGE) or (amount != 0 and _is_scalar_resource(name)):
                col = index.get(name)
                if col is not None:   # no column: no node has it, so no node scores it
                    cols.append(col)
                    amounts.append(amount)
            # other names (pods, unknown) have no allocatable in NodeInfo and are never scored
        out = _BalanceRequest(np.array(cols, dtype=np.int64), np.array(amounts, dtype=np.int64)[:, None])
        out.cols.flags.writeable = out.pod_requests.flags.writeable = False   # shared by the pods of a shape
        return out

    def pre_score(self, state: CycleState, pod: Pod, nodes: "NodeTable", rows: np.ndarray) -> Status:
        req = self.balance_request(pod, nodes)
        if req is None:
            return _SKIP
        state.write(PRE_SCORE_KEY, req)
        return _OK

    def score(self, state: CycleState, pod: Pod, nodes: "NodeTable", rows: np.ndarray) -> np.ndarray:
        req: _BalanceRequest | None = state.get(PRE_SCORE_KEY)
        if req is None:
            req = self.balance_request(pod, nodes)
            if req is None:   # best-effort pod scored without PreScore: upstream returns 0
                return np.zeros(len(rows), dtype=np.int64)
        k = len(rows)
        if len(req.cols) == 0 or k == 0:
            return np.full(k, MAX_NODE_SCORE, dtype=np.int64)   # no fractions: std 0
        sc = self._scratch
        shape = (len(req.cols), k)
        used = gather(nodes.requested, req.cols, rows, sc.get("used", shape, np.int64), sc)
        used += req.pod_requests
        cap = gather(nodes.alloc, req.cols, rows, sc.get("cap", shape, np.int64), sc)
        return balanced_score(cap, used, sc)
