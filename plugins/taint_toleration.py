"""TaintToleration: keep pods off nodes whose taints they do not tolerate.

Filter rejects a node with a NoSchedule or NoExecute taint the pod does not
tolerate, UnschedulableAndUnresolvable, with kube-scheduler 1.36's reason,
which names no taint: "node(s) had untolerated taint(s)" (older releases
named the node's first such taint, "{key: value}"; 1.36.2, seen side by
side on a real control plane, does not).
Score counts the PreferNoSchedule taints the pod does not tolerate, and
NormalizeScore reverses it: fewer intolerable taints score higher.

Matching is core/v1 Toleration.ToleratesTaint: an empty effect matches every
effect, an empty key matches every key, Exists matches any value and Equal
(or no operator) compares values.

The table holds the cluster's distinct taints as columns, so a pod's
tolerations are matched once per distinct taint (memoized per toleration
set) and the per-node work is a gather over ``taints[rows, cols]``; the
column helpers live in :mod:`scheduler.framework.taints`, which
PodTopologySpread shares for ``nodeTaintsPolicy: Honor``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework import (
    MAX_NODE_SCORE, ActionType, ClusterEvent, ClusterEventWithHint, Code, CycleState, FilterResult, QueueingHint, Rejection,
    Resource, Status, register,
)
from scheduler.framework.taints import (
    PREFER_NO_SCHEDULE, TaintColumns, any_of, count_of, find_untolerated,
)
from scheduler.model import Node, Pod, Toleration

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

NAME = "TaintToleration"
PRE_SCORE_KEY = "PreScore" + NAME

_OK = Status()
_MISSING = object()


ERR_REASON_UNTOLERATED = "node(s) had untolerated taint(s)"


@register
class TaintToleration:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"EnqueueExtensions", "Filter", "PreScore", "Score", "NormalizeScore"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None:
        self.handle = handle
        self._cols = TaintColumns()

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
        cols = self._cols.untolerated_hard(pod.tolerations, taint_list)
        if len(cols) == 0:
            return FilterResult.all_pass(k)
        bad = any_of(nodes.taints, rows, cols)
        if not bad.any():
            return FilterResult.all_pass(k)
        return FilterResult(~bad, [Rejection(ERR_REASON_UNTOLERATED, bad, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)])

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
