"""NodeName: a pod that names its node (``spec.nodeName``) fits only that node.

Pods with nodeName set are bound already and normally never reach a
scheduler; the plugin stays faithful to upstream for the rare pod that
does. The check is one comparison of the row column against the named
node's row, never a walk over nodes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework import (
    ActionType, ClusterEvent, ClusterEventWithHint, Code, CycleState, FilterResult, Resource, register,
)
from scheduler.model import Pod

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

ERR_REASON = "node(s) didn't match the requested node name"


@register
class NodeName:
    NAME = "NodeName"
    EXTENSION_POINTS = frozenset({"EnqueueExtensions", "Filter"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None:
        pass

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Only a new node can be the named one; no hint needed (upstream, with queueing hints on).
        return [ClusterEventWithHint(ClusterEvent(Resource.NODE, ActionType.ADD))]

    def filter(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> FilterResult:
        if not pod.node_name:
            return FilterResult.all_pass(len(rows))
        row = nodes.row(pod.node_name)
        ok = rows == (-1 if row is None else row)
        return FilterResult.from_mask(ok, ERR_REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
