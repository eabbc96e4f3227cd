"""SchedulingGates: hold pods that carry ``spec.schedulingGates`` out of the active queue.

A gated pod is never attempted: PreEnqueue rejects it as
UnschedulableAndUnresolvable with upstream's message, and the queue keeps
it with the gated pods (``scheduler_pending_pods{queue="gated"}``). The
API server only lets gates be removed, never added after creation, so the
one event that can release the pod is an update of the pod itself that
removes its last gate; the queue re-runs PreEnqueue then.
"""

from __future__ import annotations

from typing import Any

from scheduler.framework import (
    ActionType, ClusterEvent, ClusterEventWithHint, Code, QueueingHint, Resource, Status, register,
)
from scheduler.model import Pod

_OK = Status()


@register
class SchedulingGates:
    NAME = "SchedulingGates"
    EXTENSION_POINTS = frozenset({"PreEnqueue", "EnqueueExtensions"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None:
        pass

    def pre_enqueue(self, pod: Pod) -> Status:
        if not pod.scheduling_gates:
            return _OK
        # fmt.Sprintf("%v", []string{...}) renders as "[a b]"
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                      f"waiting for scheduling gates: [{' '.join(pod.scheduling_gates)}]")

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(
            ClusterEvent(Resource.POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED),
            _gates_eliminated,
        )]


def _gates_eliminated(pod: Pod, old: Any, new: Any) -> int:
    # The queue emits this event only for the pod's own update that removed its gates.
    return QueueingHint.QUEUE
