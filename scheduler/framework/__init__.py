"""The scheduling framework: extension points, Status, CycleState, registry, runtime."""

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interface import (
    MAX_NODE_SCORE, MIN_NODE_SCORE, ActionType, ClusterEvent, ClusterEventWithHint, FilterResult,
    PostFilterResult, PreFilterResult, QueueingHint, Rejection, Resource,
)
from scheduler.framework.registry import ConfigError, parse_args, register
from scheduler.framework.status import Code, Status

__all__ = [
    "MAX_NODE_SCORE", "MIN_NODE_SCORE", "ActionType", "ClusterEvent", "ClusterEventWithHint", "Code",
    "ConfigError", "CycleState", "FilterResult", "Handle", "PostFilterResult", "PreFilterResult",
    "QueueingHint", "Rejection", "Resource", "Status", "parse_args", "register",
]
