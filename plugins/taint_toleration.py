"""TaintToleration: keep pods off nodes whose taints they do not tolerate.

Filter rejects a node with a NoSchedule or NoExecute taint the pod does not
tolerate, with upstream's reason naming the node's *first* such taint in
``spec.taints`` order ("node(s) had untolerated taint {key: value}"), so
nodes with different offending taints are counted under different reasons.
Score counts the PreferNoSchedule taints the pod does not tolerate, and
NormalizeScore reverses it: fewer intolerable taints score higher.

Matching is core/v1 Toleration.ToleratesTaint: an empty effect matches every
effect, an empty key matches every key, Exists matches any value and Equal
(or no operator) compares values.

The table holds the cluster's distinct taints as columns, so a pod's
tolerations are matched once per distinct taint (memoized per toleration
set) and the per-node work is a gather over ``taints[rows, cols]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from scheduler.framework import (
    MAX_NODE_SCORE, ActionType, ClusterEvent, ClusterEventWithHint, Code, CycleState, FilterResult, QueueingHint, Rejection,
    Resource, Status, register,
)
from scheduler.model import Node, Pod, Taint, Toleration

if TYPE_CHECKING:
    from scheduler.framework.interface import NodeTable

NAME = "TaintToleration"
PRE_SCORE_KEY = "PreScore" + NAME
NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "PreferNoSchedule", "NoExecute"

_OK = Status()
_MISSING = object()
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


def untolerated_reason(taint: Taint) -> str:
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


class _TaintColumns:
    """Per-table facts about the distinct taint columns, extended as taints appear (the list only grows).

    * ``tolerated(tolerations)``: bool[T], memoized per toleration set (most
      pods of a workload share one);
    * ``hard``/``prefer``: bool[T], effect NoSchedule|NoExecute / PreferNoSchedule.
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


def first_untolerated(taints: np.ndarray, rank: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Rows that carry any of ``cols``, and for each the column of its first such taint in spec order.

    ``taints`` bool[cap, T], ``rank`` int16[cap, T] (1 + position, 0 = absent),
    ``rows`` int64[k], ``cols`` int64[U] -> (bad bool[k], first int64[nbad] indexing ``cols``).
    """
    bad = any_of(taints, rows, cols)
    nbad = int(np.count_nonzero(bad))
    if nbad == 0 or len(cols) == 1:
        return bad, np.zeros(nbad, dtype=np.int64)
    bad_rows = rows[bad]
    if len(cols) > _PER_COLUMN_MAX:
        r = rank[np.ix_(bad_rows, cols)].astype(np.int32)
        r[r == 0] = np.iinfo(np.int32).max
        return bad, r.argmin(axis=1)
    best = np.full(nbad, np.iinfo(np.int16).max, dtype=np.int16)
    first = np.zeros(nbad, dtype=np.int64)
    for j, c in enumerate(cols.tolist()):
        v = rank[:, c].take(bad_rows)
        better = (v != 0) & (v < best)  # a node lists each taint once, so there are no ties
        best[better] = v[better]
        first[better] = j
    return bad, first


@register
class TaintToleration:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"EnqueueExtensions", "Filter", "PreScore", "Score", "NormalizeScore"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None:
        self.handle = handle
        self._cols = _TaintColumns()

    # ------------------------------------------------------------------ queueing

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(Resource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                                 _after_node_change),
            ClusterEventWithHint(ClusterEvent(Resource.POD, ActionType.UPDATE_POD_TOLERATION),
                                 _after_pod_toleration_change),
        ]

    # ------------------------------------------------------------------ filtering

    def filter(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> FilterResult:
        k = len(rows)
        taint_list = nodes.taint_list
        if not taint_list or k == 0:
            return FilterResult.all_pass(k)
        untolerated = self._cols.hard(taint_list) & ~self._cols.tolerated(pod.tolerations, taint_list)
        cols = np.flatnonzero(untolerated)
        if len(cols) == 0:
            return FilterResult.all_pass(k)
        bad, first = first_untolerated(nodes.taints, nodes.taint_rank, rows, cols)
        if not bad.any():
            return FilterResult.all_pass(k)
        bad_idx = np.flatnonzero(bad)
        by_reason: dict[str, np.ndarray] = {}
        for u in np.unique(first).tolist():  # distinct offending taints, not nodes
            reason = untolerated_reason(taint_list[int(cols[u])])
            mask = by_reason.get(reason)
            if mask is None:  # taints differing only in effect read the same
                mask = by_reason[reason] = np.zeros(k, dtype=bool)
            mask[bad_idx[first == u]] = True
        return FilterResult(~bad, [Rejection(reason, mask, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
                                   for reason, mask in by_reason.items()])

    # ------------------------------------------------------------------ scoring

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> Status:
        state.write(PRE_SCORE_KEY, _prefer_tolerations(pod))
        return _OK

    def score(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> np.ndarray:
        tolerations = state.get(PRE_SCORE_KEY, _MISSING)
        if tolerations is _MISSING:
            tolerations = _prefer_tolerations(pod)
        taint_list = nodes.taint_list
        if not taint_list:
            return np.zeros(len(rows), dtype=np.int64)
        cols = np.flatnonzero(self._cols.prefer(taint_list) & ~self._cols.tolerated(tolerations, taint_list))
        if len(cols) == 0:
            return np.zeros(len(rows), dtype=np.int64)
        return count_of(nodes.taints, rows, cols)

    def normalize(self, state: CycleState, pod: Pod, scores: np.ndarray) -> None:
        # helper.DefaultNormalizeScore(MaxNodeScore, reverse=true)
        top = int(scores.max()) if len(scores) else 0
        if top <= 0:
            scores[:] = MAX_NODE_SCORE
            return
        scores *= MAX_NODE_SCORE
        scores //= top
        np.subtract(MAX_NODE_SCORE, scores, out=scores)


def _prefer_tolerations(pod: Pod) -> tuple[Toleration, ...]:
    """getAllTolerationPreferNoSchedule: an empty effect covers PreferNoSchedule too."""
    return tuple(t for t in pod.tolerations if not t.effect or t.effect == PREFER_NO_SCHEDULE)


def _after_node_change(pod: Pod, old: Node | None, new: Node | None) -> int:
    if new is None:
        return QueueingHint.QUEUE
    was_untolerated = old is None or find_untolerated(old.taints, pod.tolerations) is not None
    if was_untolerated and find_untolerated(new.taints, pod.tolerations) is None:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _after_pod_toleration_change(pod: Pod, old: Pod | None, new: Pod | None) -> int:
    # Only the unschedulable pod's own new toleration can change this plugin's verdict.
    return QueueingHint.QUEUE if new is not None and new.uid == pod.uid else QueueingHint.SKIP
