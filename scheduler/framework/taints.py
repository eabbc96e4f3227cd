"""Taints and tolerations over the node table's taint columns.

The node table holds the cluster's distinct taints as columns (``taints``
bool[cap, T]), so a pod's
tolerations are matched once per distinct taint (memoized per toleration set
in :class:`TaintColumns`) and the per-node work is a gather over
``taints[rows, cols]``. TaintToleration filters and scores with it;
PodTopologySpread uses :func:`untolerated` for ``nodeTaintsPolicy: Honor``
(upstream's FindMatchingUntoleratedTaint with DoNotScheduleTaintsFilterFunc).

Matching is core/v1 Toleration.ToleratesTaint (``Toleration.tolerates`` on
the record): an empty effect matches every effect, an empty key matches
every key, Exists matches any value and Equal (or no operator) compares
values.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from scheduler.framework.nodetable import NodeTable
from scheduler.model import Taint, Toleration


NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "PreferNoSchedule", "NoExecute"

_MEMO_LIMIT = 1024


def tolerates(t: Toleration, taint: Taint) -> bool:
    """Toleration.ToleratesTaint (the rule lives on the record, shared with NodeUnschedulable)."""
    return t.tolerates(taint)


def find_untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """FindMatchingUntoleratedTaint with DoNotScheduleTaintsFilterFunc, on one node's taints (hints only)."""
    for taint in taints:
        if taint.effect in (NO_SCHEDULE, NO_EXECUTE) and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


class TaintColumns:
    """Per-table facts about the distinct taint columns, extended as taints appear (the list only grows).

    * ``tolerated(tolerations)``: bool[T], memoized per toleration set (most
      pods of a workload share one);
    * ``hard``/``prefer``: bool[T], effect NoSchedule|NoExecute / PreferNoSchedule.

    One per plugin instance; the scheduling cycle is single-threaded.
    """

    __slots__ = ("_list", "_memo", "_hard", "_prefer")

    def __init__(self) -> None:
        self._list: list[Taint] | None = None
        self._memo: dict[tuple[Toleration, ...], np.ndarray] = {}
        self._hard = np.zeros(0, dtype=bool)
        self._prefer = np.zeros(0, dtype=bool)

    def _sync(self, taint_list: list[Taint]) -> None:
        if taint_list is not self._list:
            self._list = taint_list
            self._memo.clear()
            self._hard = np.zeros(0, dtype=bool)
            self._prefer = np.zeros(0, dtype=bool)
        if len(self._hard) != len(taint_list):
            effects = [t.effect for t in taint_list]
            self._hard = np.array([e in (NO_SCHEDULE, NO_EXECUTE) for e in effects], dtype=bool)
            self._prefer = np.array([e == PREFER_NO_SCHEDULE for e in effects], dtype=bool)

    def hard(self, taint_list: list[Taint]) -> np.ndarray:
        self._sync(taint_list)
        return self._hard

    def prefer(self, taint_list: list[Taint]) -> np.ndarray:
        self._sync(taint_list)
        return self._prefer

    def tolerated(self, tolerations: tuple[Toleration, ...], taint_list: list[Taint]) -> np.ndarray:
        self._sync(taint_list)
        n = len(taint_list)
        hit = self._memo.get(tolerations)
        if hit is not None and len(hit) == n:
            return hit
        start = 0 if hit is None else len(hit)
        out = np.zeros(n, dtype=bool)
        if start:
            out[:start] = hit
        for i in range(start, n):  # distinct taints in the cluster, not nodes
            taint = taint_list[i]
            out[i] = any(tolerates(t, taint) for t in tolerations)
        if len(self._memo) >= _MEMO_LIMIT:
            self._memo.clear()
        self._memo[tolerations] = out
        return out

    def untolerated_hard(self, tolerations: tuple[Toleration, ...], taint_list: list[Taint]) -> np.ndarray:
        """int64[U]: the columns of NoSchedule/NoExecute taints none of ``tolerations`` tolerates."""
        return np.flatnonzero(self.hard(taint_list) & ~self.tolerated(tolerations, taint_list))


# Up to this many taint columns, per-column 1-D gathers beat one 2-D np.ix_ gather by ~10x;
# past it (clusters with many distinct taints) the 2-D gather keeps the Python loop bounded.
_PER_COLUMN_MAX = 32


def any_of(taints: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """bool[k]: rows carrying any of the taint columns ``cols`` (``taints`` bool[cap, T])."""
    if len(cols) > _PER_COLUMN_MAX:
        return taints[np.ix_(rows, cols)].any(axis=1)
    out = np.zeros(len(rows), dtype=bool)
    for c in cols.tolist():
        out |= taints[:, c].take(rows)
    return out


def count_of(taints: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """int64[k]: how many of the taint columns ``cols`` each row carries."""
    if len(cols) > _PER_COLUMN_MAX:
        return taints[np.ix_(rows, cols)].sum(axis=1, dtype=np.int64)
    out = np.zeros(len(rows), dtype=np.int64)
    for c in cols.tolist():
        out += taints[:, c].take(rows)
    return out


def untolerated(nodes: NodeTable, rows: np.ndarray, tolerations: tuple[Toleration, ...],
                columns: TaintColumns) -> np.ndarray:
    """bool[k]: rows with a NoSchedule or NoExecute taint none of ``tolerations`` tolerates."""
    taint_list = nodes.taint_list
    if not taint_list:
        return np.zeros(len(rows), dtype=bool)
    cols = columns.untolerated_hard(tolerations, taint_list)
    if len(cols) == 0:
        return np.zeros(len(rows), dtype=bool)
    return any_of(nodes.taints, rows, cols)
