"""Consolidation: rebalancing done by the scheduler: defragment, compact, respread (tandem's own plugin).

Enabled per profile, never by default (it evicts)::

    plugins: {multiPoint: {enabled: [{name: Consolidation}]}}

The planning, the evictions and the steering are the scheduler's (scheduler/consolidation/): it plans on the
profile's own Filters, moves only pods whose every replacement has a new node, evicts through the Eviction API
(PodDisruptionBudgets hold) and nominates each replacement to its planned node. This module holds the args and
the one rule a cycle enforces: within a move's TTL, a pod of the moved pod's owner never goes back to the node
that pod left (``node(s) were left by a pod of ReplicaSet ns/web moved away``).

What moves (``movable`` in scheduler/consolidation/planner.py): running pods of this profile, controlled by a
ReplicaSet or a StatefulSet, not annotated ``descheduler.alpha.kubernetes.io/prefer-no-eviction``, not in a
gang, older than ``minPodAgeSeconds``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scheduler.framework import ConfigError, CycleState, FilterResult, Rejection, Status, register
from scheduler.framework.status import Code
from scheduler.model import Pod

NAME = "Consolidation"

_OK = Status()
_SKIP = Status(Code.SKIP)
_STEER = "Consolidation/steer"   # CycleState key: the source nodes this pod may not go back to, and its owner


def _default_thresholds() -> dict[str, float]:
    return {"cpu": 20.0, "memory": 20.0, "pods": 20.0}


@dataclass(frozen=True, slots=True)
class CompactArgs:
    enabled: bool = False
    # HighNodeUtilization's thresholds: a node whose usage (requests / allocatable, percent) is under every
    # one of these is emptied when all its pods fit elsewhere
    thresholds: dict[str, float] = field(default_factory=_default_thresholds)


@dataclass(frozen=True, slots=True)
class SpreadArgs:
    enabled: bool = False


@dataclass(frozen=True, slots=True)
class ConsolidationArgs:
    defragment: bool = True
    compact: CompactArgs = field(default_factory=CompactArgs)
    spread: SpreadArgs = field(default_factory=SpreadArgs)
    interval_seconds: float = 30.0
    min_pod_age_seconds: float = 60.0
    max_moves_per_node: int = 2
    max_moves_per_workload: int = 1
    cooldown_seconds: float = 30.0
    dry_run: bool = False

    def validate(self, path: str) -> None:
        errs = []
        if not self.interval_seconds > 0:
            errs.append(f"{path}.intervalSeconds: must be > 0, got {self.interval_seconds}")
        for name in ("min_pod_age_seconds", "cooldown_seconds"):
            v = getattr(self, name)
            if v < 0:
                errs.append(f"{path}.{_camel(name)}: must be >= 0, got {v}")
        for name in ("max_moves_per_node", "max_moves_per_workload"):
            v = getattr(self, name)
            if v < 1:
                errs.append(f"{path}.{_camel(name)}: must be >= 1, got {v}")
        for r, v in self.compact.thresholds.items():
            if not 0 <= v <= 100:
                errs.append(f"{path}.compact.thresholds.{r}: must be a percentage in [0, 100], got {v}")
        if self.compact.enabled and not self.compact.thresholds:
            errs.append(f"{path}.compact.thresholds: must name at least one resource when compact is enabled")
        if errs:
            raise ConfigError("; ".join(errs))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.title() for w in rest)


def left_by(owner: str) -> str:
    """The Filter's reason: ``node(s) were left by a pod of ReplicaSet ns/web moved away``."""
    return f"node(s) were left by a pod of {owner} moved away"


@register
class Consolidation:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"PreFilter", "Filter"})
    Args = ConsolidationArgs

    def __init__(self, args: ConsolidationArgs | None, handle: Any) -> None:
        self.args = args or ConsolidationArgs()
        self.handle = handle

    def pre_filter(self, state: CycleState, pod: Pod, nodes: Any) -> tuple[None, Status]:
        """Skip (no Filter call) unless a move of the pod's owner keeps it off some node now."""
        moves = self.handle.moves
        if not moves.avoid:
            return None, _SKIP
        for o in pod.owners:
            if o.controller:
                avoid = moves.avoided(o.uid, self.handle.clock())
                if avoid:
                    state.write(_STEER, (avoid, f"{o.kind} {pod.namespace}/{o.name}"))
                    return None, _OK
        return None, _SKIP

    def filter(self, state: CycleState, pod: Pod, nodes: Any, rows: np.ndarray) -> FilterResult:
        k = len(rows)
        got = state.read(_STEER)
        if got is None:
            return FilterResult.all_pass(k)
        avoid, owner = got
        bad = np.zeros(k, dtype=bool)
        for name in avoid:
            row = nodes.row(name)
            if row is None:
                continue
            i = int(np.searchsorted(rows, row))
            if i < k and rows[i] == row:
                bad[i] = True
        if not bad.any():
            return FilterResult.all_pass(k)
        return FilterResult(~bad, [Rejection(left_by(owner), bad)])
