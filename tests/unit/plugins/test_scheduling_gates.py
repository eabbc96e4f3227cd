"""plugins/scheduling_gates.py: gated pods wait outside the active queue."""

from __future__ import annotations

import pytest

from plugins.scheduling_gates import SchedulingGates
from scheduler.framework import ActionType, ClusterEvent, Code, QueueingHint, Resource
from scheduler.framework.interface import EnqueueExtensions, PreEnqueuePlugin
from scheduler.model import Pod


def pod(*gates: str) -> Pod:
    return Pod(uid="u", namespace="ns", name="p", scheduling_gates=gates)


@pytest.mark.parametrize("gates, code, message", [
    pytest.param((), Code.SUCCESS, "", id="a pod without gates is enqueued"),
    pytest.param(("example.com/quota",), Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                 "waiting for scheduling gates: [example.com/quota]", id="one gate holds the pod"),
    pytest.param(("a", "b"), Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "waiting for scheduling gates: [a b]",
                 id="several gates are listed as Go prints a slice"),
])
def test_pre_enqueue(gates: tuple[str, ...], code: Code, message: str) -> None:
    st = SchedulingGates(None, None).pre_enqueue(pod(*gates))
    assert st.code == code
    assert st.message() == message


def test_the_pod_losing_its_gates_requeues_it() -> None:
    plugin = SchedulingGates(None, None)
    (registered,) = plugin.events_to_register()
    happened = ClusterEvent(Resource.UNSCHEDULED_POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)
    assert registered.event.matches(happened)
    assert not registered.event.matches(ClusterEvent(Resource.NODE, ActionType.ADD))
    assert not registered.event.matches(ClusterEvent(Resource.POD, ActionType.UPDATE_POD_LABEL))
    assert registered.hint(pod(), pod("a"), pod()) == QueueingHint.QUEUE


def test_implements_pre_enqueue_and_enqueue_extensions() -> None:
    plugin = SchedulingGates(None, None)
    assert isinstance(plugin, PreEnqueuePlugin) and isinstance(plugin, EnqueueExtensions)
