"""NodeUnschedulable: keep pods off cordoned nodes (``spec.unschedulable``).

A pod that tolerates the ``node.kubernetes.io/unschedulable:NoSchedule``
taint also tolerates ``spec.unschedulable`` (DaemonSet pods do), as
upstream. The verdict is one look at the table's unschedulable column.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework import (
    ActionType, ClusterEvent, ClusterEventWithHint, Code, CycleState, FilterResult, QueueingHint, Resource, register,
)
from scheduler.model import Node, Pod, Taint

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

ERR_REASON = "node(s) were unschedulable"
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
_UNSCHEDULABLE_TAINT = Taint(TAINT_NODE_UNSCHEDULABLE, "", "NoSchedule")


def tolerates_unschedulable(pod: Pod) -> bool:
    return any(t.tolerates(_UNSCHEDULABLE_TAINT) for t in pod.tolerations)


@register
class NodeUnschedulable:
    NAME = "NodeUnschedulable"
    EXTENSION_POINTS = frozenset({"EnqueueExtensions", "Filter"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None:
        pass

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # spec.unschedulable changes arrive as UpdateNodeTaint, as upstream classifies them.
        return [
            ClusterEventWithHint(ClusterEvent(Resource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                                 _after_node_change),
            ClusterEventWithHint(ClusterEvent(Resource.POD, ActionType.UPDATE_POD_TOLERATION),
                                 _after_pod_toleration_change),
        ]

    def filter(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> FilterResult:
        if tolerates_unschedulable(pod):
            return FilterResult.all_pass(len(rows))
        ok = ~nodes.unschedulable[rows]
        return FilterResult.from_mask(ok, ERR_REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


def _after_node_change(pod: Pod, old: Node | None, new: Node | None) -> int:
    if new is None:
        return QueueingHint.QUEUE
    # a node added schedulable, or one that went from unschedulable to schedulable
    if not new.unschedulable and (old is None or old.unschedulable):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _after_pod_toleration_change(pod: Pod, old: Pod | None, new: Pod | None) -> int:
    # Tolerations can only be added, so only the pod's own update that tolerates the taint helps.
    if new is not None and new.uid == pod.uid and tolerates_unschedulable(new):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP
