"""scheduler/queue.py: activeQ, backoffQ, unschedulable and gated pods, as upstream's PriorityQueue.

Time is a FakeClock the tests move; pop() waits on a timer of that same
clock, so advancing it is what wakes a pop that waits out a backoff.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from scheduler.framework.clock import Clock as RealClock
from scheduler.framework.clock import FakeClock as Clock
from scheduler.framework import ActionType, ClusterEvent, ClusterEventWithHint, Code, QueueingHint, Resource, Status
from scheduler.model import Pod
from scheduler.queue import UNSCHEDULABLE_TIMEOUT, QueuedPodInfo, SchedulingQueue

PROFILE = "test"
A = ActionType


def pod(uid: str, priority: int = 0, gates: tuple[str, ...] = (), labels: dict[str, str] | None = None) -> Pod:
    return Pod(uid=uid, namespace="ns", name=uid, priority=priority, scheduling_gates=gates, labels=labels or {})


def ev(resource: str, action: int, label: str = "") -> ClusterEvent:
    return ClusterEvent(resource, action, label or f"{resource}{action}")


NODE_ADD = ev(Resource.NODE, A.ADD, "NodeAdd")
NODE_DELETE = ev(Resource.NODE, A.DELETE, "NodeDelete")

# plugin -> the events it registered (EnqueueExtensions), no hints unless a test adds them
HINTS: dict[str, list[ClusterEventWithHint]] = {
    "TestNodePlugin": [ClusterEventWithHint(ev(Resource.NODE, A.ADD | A.UPDATE_NODE_LABEL))],
    "TestPodPlugin": [ClusterEventWithHint(ev(Resource.POD, A.DELETE | A.UPDATE))],
    "TestAssignedPlugin": [ClusterEventWithHint(ev(Resource.ASSIGNED_POD, A.ADD))],
    "TestGate": [ClusterEventWithHint(NODE_ADD)],
}


class Gate:
    """A PreEnqueue plugin: gates pods with scheduling gates, unless released by uid."""

    def __init__(self) -> None:
        self.released: set[str] = set()
        self.calls = 0

    def __call__(self, qi: QueuedPodInfo) -> Status:
        self.calls += 1
        if qi.pod.scheduling_gates and qi.uid not in self.released:
            return Status(Code.UNSCHEDULABLE, "waiting for scheduling gates", plugin="TestGate")
        return Status()


def make_queue(clock: Clock | None = None, hints: dict[str, list[ClusterEventWithHint]] | None = None,
               gate: Gate | None = None, initial: float = 1.0, maximum: float = 10.0,
               max_unschedulable: float = 300.0) -> SchedulingQueue:
    return SchedulingQueue(lambda qi: (-qi.pod.priority, qi.timestamp), gate or Gate(),
                           {PROFILE: HINTS if hints is None else hints}, initial_backoff=initial, max_backoff=maximum,
                           max_unschedulable=max_unschedulable, clock=clock or Clock())


async def popped(q: SchedulingQueue) -> QueuedPodInfo:
    qi = await asyncio.wait_for(q.pop(), 1)
    assert qi is not None
    return qi


async def settle() -> None:
    """Let every task that can run, run (nothing here does I/O: a few turns of the loop are enough)."""
    for _ in range(10):
        await asyncio.sleep(0)


async def assert_nothing_to_pop(q: SchedulingQueue) -> None:
    task = asyncio.create_task(q.pop())
    await settle()
    assert not task.done(), f"popped {task.result()}"
    task.cancel()


async def fail(q: SchedulingQueue, uid: str, plugins: tuple[str, ...] = (), unschedulable: bool = True,
               pending: tuple[str, ...] = ()) -> QueuedPodInfo:
    """Pop ``uid`` and hand it back as a failed attempt rejected by ``plugins``."""
    qi = await popped(q)
    assert qi.uid == uid
    qi.unschedulable_plugins = set(plugins)
    qi.pending_plugins = set(pending)
    q.requeue_failed(qi, unschedulable)
    return qi


# ---------------------------------------------------------------------------- activeQ order


@pytest.mark.parametrize("pods, order", [
    pytest.param([("low", 1), ("high", 5)], ["high", "low"], id="a higher priority pops first"),
    pytest.param([("first", 3), ("second", 3), ("third", 3)], ["first", "second", "third"],
                 id="equal priorities pop in arrival order"),
    pytest.param([("a", 1), ("b", 5), ("c", 5), ("d", 3)], ["b", "c", "d", "a"], id="priority then arrival"),
])
async def test_pop_order(pods: list[tuple[str, int]], order: list[str]) -> None:
    clock = Clock()
    q = make_queue(clock)
    for uid, prio in pods:
        q.add(pod(uid, prio), PROFILE)
        clock.advance(1)
    assert [(await popped(q)).uid for _ in pods] == order


async def test_a_priority_update_re_sorts_the_active_queue() -> None:
    clock = Clock()
    q = make_queue(clock)
    for uid, prio in (("a", 1), ("b", 2), ("c", 3)):
        q.add(pod(uid, prio), PROFILE)
        clock.advance(1)
    q.update(pod("a", 10))
    assert [(await popped(q)).uid for _ in range(3)] == ["a", "c", "b"]


async def test_pop_waits_until_a_pod_arrives() -> None:
    q = make_queue()
    task = asyncio.create_task(q.pop())
    await settle()
    assert not task.done()
    q.add(pod("a"), PROFILE)
    qi = await asyncio.wait_for(task, 1)
    assert qi.uid == "a" and qi.attempts == 1 and q.where["a"] == "inflight"


async def test_close_makes_pop_return_none() -> None:
    q = make_queue()
    task = asyncio.create_task(q.pop())
    await asyncio.sleep(0)
    q.close()
    assert await asyncio.wait_for(task, 1) is None
    q.add(pod("a"), PROFILE)
    assert await asyncio.wait_for(q.pop(), 1) is None, "a closed queue hands out nothing"


async def test_adding_a_known_pod_updates_it() -> None:
    q = make_queue()
    q.add(pod("a", 1), PROFILE)
    q.add(pod("a", 7), PROFILE)
    qi = await popped(q)
    assert qi.pod.priority == 7 and len(q.infos) == 1
    await assert_nothing_to_pop(q)


# ---------------------------------------------------------------------------- unschedulable pods and events


@pytest.mark.parametrize("rejector, event, moved", [
    pytest.param("TestNodePlugin", NODE_ADD, True, id="a node add the rejecting plugin registered for moves the pod"),
    pytest.param("TestNodePlugin", ev(Resource.NODE, A.UPDATE_NODE_LABEL), True, id="a registered update bit moves it"),
    pytest.param("TestNodePlugin", ev(Resource.NODE, A.UPDATE_NODE_TAINT), False,
                 id="an update of a kind the plugin did not register leaves it"),
    pytest.param("TestNodePlugin", ev(Resource.NODE, A.UPDATE_NODE_TAINT | A.UPDATE_NODE_LABEL), True,
                 id="an update that includes a registered kind moves it"),
    pytest.param("TestNodePlugin", NODE_DELETE, False, id="an action the plugin did not register leaves it"),
    pytest.param("TestNodePlugin", ev(Resource.ASSIGNED_POD, A.ADD), False,
                 id="an event only another plugin registered for leaves it"),
    pytest.param("TestPodPlugin", ev(Resource.ASSIGNED_POD, A.DELETE), True, id="Pod covers assigned pods"),
    pytest.param("TestPodPlugin", ev(Resource.UNSCHEDULED_POD, A.UPDATE_POD_LABEL), True,
                 id="Pod covers unscheduled pods"),
    pytest.param("TestPodPlugin", ev(Resource.ASSIGNED_POD, A.ADD), False, id="Pod with the wrong action leaves it"),
    pytest.param("TestAssignedPlugin", ev(Resource.ASSIGNED_POD, A.ADD), True, id="AssignedPod matches assigned pods"),
    pytest.param("TestAssignedPlugin", ev(Resource.UNSCHEDULED_POD, A.ADD), False,
                 id="AssignedPod does not cover unscheduled pods"),
    pytest.param("TestNodePlugin", ev(Resource.PV, A.ADD), False, id="an event nobody registered for leaves it"),
    pytest.param("TestNodePlugin", UNSCHEDULABLE_TIMEOUT, True, id="a wildcard event moves every pod"),
])
async def test_events_move_pods_their_rejecting_plugins_registered_for(rejector: str, event: ClusterEvent,
                                                                         moved: bool) -> None:
    q = make_queue()
    q.add(pod("a"), PROFILE)
    await fail(q, "a", plugins=(rejector,))
    assert q.where["a"] == "unschedulable"
    assert q.on_event(event) == int(moved)
    assert q.where["a"] == ("backoff" if moved else "unschedulable"), "a pod that just failed waits out its backoff"


async def test_a_moved_pod_whose_backoff_is_over_goes_straight_to_active() -> None:
    clock = Clock()
    q = make_queue(clock)
    q.add(pod("a"), PROFILE)
    await fail(q, "a", plugins=("TestNodePlugin",))
    clock.advance(1.5)
    q.on_event(NODE_ADD)
    assert q.where["a"] == "active"
    assert (await popped(q)).attempts == 2


@pytest.mark.parametrize("registered, incoming, match", [
    pytest.param(ev(Resource.NODE, A.ALL), ev(Resource.NODE, A.UPDATE_NODE_TAINT), True, id="All covers every action"),
    pytest.param(ev(Resource.NODE, A.UPDATE), ev(Resource.NODE, A.UPDATE_NODE_CONDITION), True,
                 id="Update covers every kind of update"),
    pytest.param(ev(Resource.NODE, A.ADD), ev(Resource.NODE, A.UPDATE), False, id="Add does not cover updates"),
    pytest.param(ev(Resource.POD, A.ADD), ev(Resource.ASSIGNED_POD, A.ADD), True, id="Pod covers AssignedPod"),
    pytest.param(ev(Resource.POD, A.ADD), ev(Resource.UNSCHEDULED_POD, A.ADD), True, id="Pod covers UnscheduledPod"),
    pytest.param(ev(Resource.ASSIGNED_POD, A.ADD), ev(Resource.UNSCHEDULED_POD, A.ADD), False,
                 id="AssignedPod does not cover UnscheduledPod"),
    pytest.param(ev(Resource.NODE, A.ADD), ev(Resource.PV, A.ADD), False, id="different resources do not match"),
    pytest.param(ev(Resource.WILDCARD, A.ALL), ev(Resource.PVC, A.DELETE), True, id="the wildcard matches anything"),
])
def test_cluster_event_matches(registered: ClusterEvent, incoming: ClusterEvent, match: bool) -> None:
    assert registered.matches(incoming) is match


def _hint_raises(pod: Pod, old: Any, new: Any) -> int:
    raise KeyError("bad object")


@pytest.mark.parametrize("hint, moved", [
    pytest.param(lambda pod, old, new: QueueingHint.QUEUE, True, id="a hint that says Queue moves the pod"),
    pytest.param(lambda pod, old, new: QueueingHint.SKIP, False, id="a hint that says Skip leaves it"),
    pytest.param(_hint_raises, True, id="a hint that raises queues the pod rather than strand it"),
])
async def test_queueing_hints(hint: Callable[[Pod, Any, Any], int], moved: bool) -> None:
    q = make_queue(hints={"TestNodePlugin": [ClusterEventWithHint(NODE_ADD, hint)]})
    q.add(pod("a"), PROFILE)
    await fail(q, "a", plugins=("TestNodePlugin",))
    assert q.on_event(NODE_ADD, None, "new-node") == int(moved)
    assert q.where["a"] == ("backoff" if moved else "unschedulable")


async def test_a_hint_sees_the_pod_and_both_objects() -> None:
    seen: list[tuple[str, Any, Any]] = []
    q = make_queue(hints={"TestNodePlugin": [
        ClusterEventWithHint(NODE_ADD, lambda p, old, new: seen.append((p.uid, old, new)) or QueueingHint.SKIP)]})
    q.add(pod("a"), PROFILE)
    await fail(q, "a", plugins=("TestNodePlugin",))
    q.on_event(NODE_ADD, "old", "new")
    assert seen == [("a", "old", "new")]


async def test_only_the_rejecting_plugins_hints_run() -> None:
    calls: list[str] = []
    q = make_queue(hints={
        "TestNodePlugin": [ClusterEventWithHint(NODE_ADD, lambda p, o, n: calls.append("node") or QueueingHint.SKIP)],
        "TestOther": [ClusterEventWithHint(NODE_ADD, lambda p, o, n: calls.append("other") or QueueingHint.QUEUE)]})
    q.add(pod("a"), PROFILE)
    await fail(q, "a", plugins=("TestNodePlugin",))
    assert q.on_event(NODE_ADD) == 0 and calls == ["node"]


async def test_a_pod_no_plugin_rejected_moves_on_any_event() -> None:
    q = make_queue()
    q.add(pod("a"), PROFILE)
    await fail(q, "a", plugins=())
    assert q.where["a"] == "unschedulable"
    assert q.on_event(ev(Resource.PVC, A.DELETE)) == 1 and q.where["a"] == "backoff"


async def test_a_queue_from_a_pending_plugin_skips_backoff() -> None:
    q = make_queue()
    q.add(pod("a"), PROFILE)
    await fail(q, "a", pending=("TestNodePlugin",))
    assert q.where["a"] == "unschedulable"
    q.on_event(NODE_ADD)
    assert q.where["a"] == "active"


# ---------------------------------------------------------------------------- backoff


async def test_an_error_goes_to_backoff_even_without_events() -> None:
    q = make_queue()
    q.add(pod("a"), PROFILE)
    await fail(q, "a", plugins=("TestNodePlugin",), unschedulable=False)
    assert q.where["a"] == "backoff"
    await assert_nothing_to_pop(q)


async def test_backoff_doubles_from_initial_to_max() -> None:
    clock = Clock()
    q = make_queue(clock, initial=1.0, maximum=10.0)
    q.add(pod("a"), PROFILE)
    waits = []
    for _ in range(6):
        qi = await fail(q, "a", unschedulable=False)
        waits.append(q.backoff_expiry(qi) - clock())
        clock.advance(q.backoff_expiry(qi) - clock())
    assert waits == [1, 2, 4, 8, 10, 10]


async def test_backoff_flushes_into_active_once_it_expires() -> None:
    clock = Clock(0.0)
    q = make_queue(clock, initial=0.04)
    q.add(pod("a"), PROFILE)
    await fail(q, "a", unschedulable=False)
    q.add(pod("b"), PROFILE)
    assert (await popped(q)).uid == "b", "a pod in backoff does not hold up active ones"
    clock.advance(0.02)
    task = asyncio.create_task(q.pop())
    await settle()
    assert not task.done(), "still backing off"
    assert clock.pending[0] == pytest.approx(0.04), "pop waits on a timer of the queue's clock, due at the expiry"
    clock.advance(0.03)
    qi = await asyncio.wait_for(task, 1)
    assert qi.uid == "a" and qi.attempts == 2
    assert clock.pending == [], "the wait's timer is gone once pop returns"


@pytest.mark.parametrize("start", [0.0, 30.0, 1e9], ids=["clock at zero", "clock at 30 s (fresh boot)", "clock at 1e9 s"])
async def test_backoff_waits_the_same_whatever_the_clock_reads(start: float) -> None:
    clock = Clock(start)
    q = make_queue(clock, initial=2.0)
    q.add(pod("a"), PROFILE)
    await fail(q, "a", unschedulable=False)
    task = asyncio.create_task(q.pop())
    clock.advance(1.9)
    await settle()
    assert not task.done()
    clock.advance(0.1)
    assert (await asyncio.wait_for(task, 1)).uid == "a"


# ---------------------------------------------------------------------------- events while a pod is in flight


async def test_an_event_during_the_attempt_sends_the_pod_to_backoff() -> None:
    q = make_queue()
    q.add(pod("a"), PROFILE)
    qi = await popped(q)
    assert q.on_event(NODE_ADD) == 0, "the pod is in flight, not parked"
    qi.unschedulable_plugins = {"TestNodePlugin"}
    q.requeue_failed(qi, unschedulable=True)
    assert q.where["a"] == "backoff"


async def test_an_event_during_the_attempt_that_does_not_help_parks_the_pod() -> None:
    q = make_queue()
    q.add(pod("a"), PROFILE)
    qi = await popped(q)
    q.on_event(NODE_DELETE)
    qi.unschedulable_plugins = {"TestNodePlugin"}
    q.requeue_failed(qi, unschedulable=True)
    assert q.where["a"] == "unschedulable"


async def test_an_event_before_the_pop_is_not_missed_by_that_attempt() -> None:
    q = make_queue()
    q.add(pod("b", 2), PROFILE)
    q.add(pod("a", 1), PROFILE)
    b = await popped(q)
    q.on_event(NODE_ADD)  # while b is in flight; a is still active and will see the new node
    a = await popped(q)
    for qi in (a, b):
        qi.unschedulable_plugins = {"TestNodePlugin"}
        q.requeue_failed(qi, unschedulable=True)
    assert q.where == {"a": "unschedulable", "b": "backoff"}


async def test_an_update_during_the_attempt_is_replayed() -> None:
    q = make_queue()
    q.add(pod("a"), PROFILE)
    qi = await popped(q)
    q.update(pod("a", labels={"app": "x"}))
    qi.unschedulable_plugins = {"TestPodPlugin"}
    q.requeue_failed(qi, unschedulable=True)
    assert q.where["a"] == "backoff" and qi.pod.labels == {"app": "x"}


async def test_activating_an_in_flight_pod_requeues_it_when_it_fails() -> None:
    q = make_queue()
    q.add(pod("a", 2), PROFILE)
    q.add(pod("b", 1), PROFILE)
    a, b = await popped(q), await popped(q)
    q.activate(["a"])
    for qi in (a, b):
        qi.unschedulable_plugins = {"TestNodePlugin"}
        q.requeue_failed(qi, unschedulable=True)
    assert q.where == {"a": "backoff", "b": "unschedulable"}, "the activation was for a only"


async def test_a_pod_deleted_in_flight_is_not_requeued() -> None:
    q = make_queue()
    q.add(pod("a"), PROFILE)
    qi = await popped(q)
    q.delete("a")
    q.requeue_failed(qi, unschedulable=False)
    assert "a" not in q and q.where == {}


async def test_done_forgets_a_bound_pod() -> None:
    q = make_queue()
    q.add(pod("a"), PROFILE)
    await popped(q)
    q.done("a")
    assert "a" not in q and q.counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}


async def test_a_new_attempt_starts_without_the_last_attempts_rejectors() -> None:
    clock = Clock()
    q = make_queue(clock)
    q.add(pod("a"), PROFILE)
    await fail(q, "a", plugins=("TestNodePlugin",), pending=("TestPodPlugin",))
    clock.advance(5)
    q.activate(["a"])
    qi = await popped(q)
    assert qi.unschedulable_plugins == set() and qi.pending_plugins == set()


# ---------------------------------------------------------------------------- activate, update


async def test_activate_moves_parked_and_backing_off_pods_to_active() -> None:
    q = make_queue()
    q.add(pod("a", 2), PROFILE)
    q.add(pod("b", 1), PROFILE)
    await fail(q, "a", plugins=("TestNodePlugin",))
    await fail(q, "b", unschedulable=False)
    assert (q.where["a"], q.where["b"]) == ("unschedulable", "backoff")
    q.activate(["a", "b", "ghost"])
    assert [(await popped(q)).uid for _ in range(2)] == ["a", "b"]


@pytest.mark.parametrize("change, moved", [
    pytest.param({"labels": {"app": "new"}}, True, id="an update scheduling looks at moves the pod"),
    pytest.param({"resource_version": "2"}, False, id="an update of nothing scheduling looks at leaves it"),
])
async def test_updating_an_unschedulable_pod(change: dict[str, Any], moved: bool) -> None:
    q = make_queue()
    q.add(pod("a"), PROFILE)
    await fail(q, "a", plugins=("TestNodePlugin",))
    q.update(dataclasses.replace(q.infos["a"].pod, **change))
    assert q.where["a"] == ("backoff" if moved else "unschedulable")


async def test_updating_a_backing_off_pod_keeps_it_in_backoff() -> None:
    q = make_queue()
    q.add(pod("a"), PROFILE)
    await fail(q, "a", unschedulable=False)
    q.update(pod("a", 100))
    assert q.where["a"] == "backoff" and q.infos["a"].pod.priority == 100


# ---------------------------------------------------------------------------- PreEnqueue gating


async def test_a_gated_pod_is_parked_until_an_update_removes_its_gates() -> None:
    q = make_queue()
    q.add(pod("a", gates=("example.com/wait",)), PROFILE)
    assert q.where["a"] == "gated" and q.infos["a"].gated_by == "TestGate"
    await assert_nothing_to_pop(q)
    q.update(pod("a", gates=("example.com/wait", "another")))
    assert q.where["a"] == "gated"
    q.update(pod("a"))
    assert q.where["a"] == "active" and q.infos["a"].gated_by == ""
    assert (await popped(q)).uid == "a"


async def test_activate_releases_a_gated_pod_its_gate_now_admits() -> None:
    gate = Gate()
    q = make_queue(gate=gate)
    q.add(pod("a", gates=("g",)), PROFILE)
    q.activate(["a"])
    assert q.where["a"] == "gated", "PreEnqueue still says no"
    gate.released.add("a")
    q.activate(["a"])
    assert q.where["a"] == "active"


@pytest.mark.parametrize("released, where", [
    pytest.param(True, "active", id="an event the gating plugin registered for re-runs PreEnqueue"),
    pytest.param(False, "gated", id="a pod its gate still refuses stays gated"),
])
async def test_events_re_run_pre_enqueue_for_gated_pods(released: bool, where: str) -> None:
    gate = Gate()
    q = make_queue(gate=gate)
    q.add(pod("a", gates=("g",)), PROFILE)
    if released:
        gate.released.add("a")
    q.on_event(NODE_DELETE)
    assert q.where["a"] == "gated", "an event the gate did not register for does nothing"
    q.on_event(NODE_ADD)
    assert q.where["a"] == where


# ---------------------------------------------------------------------------- delete, leftovers, counts


async def _in_active(q: SchedulingQueue) -> None:
    q.add(pod("a"), PROFILE)


async def _in_backoff(q: SchedulingQueue) -> None:
    q.add(pod("a"), PROFILE)
    await fail(q, "a", unschedulable=False)


async def _in_unschedulable(q: SchedulingQueue) -> None:
    q.add(pod("a"), PROFILE)
    await fail(q, "a", plugins=("TestNodePlugin",))


async def _in_gated(q: SchedulingQueue) -> None:
    q.add(pod("a", gates=("g",)), PROFILE)


async def _in_flight(q: SchedulingQueue) -> None:
    q.add(pod("a"), PROFILE)
    await popped(q)


@pytest.mark.parametrize("put", [
    pytest.param(_in_active, id="delete removes an active pod"),
    pytest.param(_in_backoff, id="delete removes a backing off pod"),
    pytest.param(_in_unschedulable, id="delete removes an unschedulable pod"),
    pytest.param(_in_gated, id="delete removes a gated pod"),
    pytest.param(_in_flight, id="delete removes an in-flight pod"),
])
async def test_delete_removes_a_pod_from_every_state(put: Callable[[SchedulingQueue], Any]) -> None:
    clock = Clock()
    q = make_queue(clock)
    await put(q)
    q.delete("a")
    assert "a" not in q and "a" not in q.where
    assert q.counts() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}
    clock.advance(1000)
    assert q.on_event(NODE_ADD) == 0 and q.flush_unschedulable_leftover() == 0
    await assert_nothing_to_pop(q)


async def test_unschedulable_leftovers_are_flushed_after_max_unschedulable() -> None:
    clock = Clock()
    q = make_queue(clock, max_unschedulable=300)
    q.add(pod("a"), PROFILE)
    await fail(q, "a", plugins=("TestNodePlugin",))
    q.add(pod("g", gates=("g",)), PROFILE)
    clock.advance(300)
    assert q.flush_unschedulable_leftover() == 0, "exactly the limit is not longer than it"
    clock.advance(0.5)
    assert q.flush_unschedulable_leftover() == 1
    assert q.where == {"a": "active", "g": "gated"}, "gated pods wait for their gate, not for a timer"


async def test_counts() -> None:
    q = make_queue()
    for uid, prio in (("flight", 9), ("backoff", 8), ("unsched", 7), ("active", 0)):
        q.add(pod(uid, prio), PROFILE)
    q.add(pod("gated", gates=("g",)), PROFILE)
    await fail(q, "flight", unschedulable=False)  # "flight" goes to backoff first; popped again below
    await fail(q, "backoff", unschedulable=False)
    await fail(q, "unsched", plugins=("TestNodePlugin",))
    q.activate(["flight"])
    await popped(q)
    assert q.counts() == {"active": 1, "backoff": 1, "unschedulable": 1, "gated": 1}
    assert q.where["flight"] == "inflight" and len(q.infos) == 5


# ---------------------------------------------------------------------------- the invariant


EVENTS = [NODE_ADD, NODE_DELETE, ev(Resource.ASSIGNED_POD, A.DELETE), ev(Resource.PV, A.ADD), UNSCHEDULABLE_TIMEOUT]
PLUGINS = ["TestNodePlugin", "TestPodPlugin", "TestAssignedPlugin"]


class QueueMachine(RuleBasedStateMachine):
    """Random add/update/delete/pop/fail/bind/events/activate/time: every pod stays in exactly one place."""

    @initialize()
    def setup(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.clock = Clock(0.0)
        self.gate = Gate()
        self.q = make_queue(self.clock, gate=self.gate, initial=1.0, maximum=8.0, max_unschedulable=30.0)
        self.known: set[str] = set()
        self.inflight: dict[str, QueuedPodInfo] = {}
        self.stale: list[QueuedPodInfo] = []   # popped, then deleted while in flight
        self.n = 0

    def teardown(self) -> None:
        if hasattr(self, "loop"):
            self.loop.close()

    @rule(priority=st.integers(0, 3), gated=st.booleans())
    def add(self, priority: int, gated: bool) -> None:
        uid = f"p{self.n}"
        self.n += 1
        self.q.add(pod(uid, priority, gates=("g",) if gated else ()), PROFILE)
        self.known.add(uid)

    @precondition(lambda self: self.known)
    @rule(data=st.data(), priority=st.integers(0, 3), ungate=st.booleans(), relabel=st.booleans())
    def update(self, data: st.DataObject, priority: int, ungate: bool, relabel: bool) -> None:
        uid = data.draw(st.sampled_from(sorted(self.known)))
        old = self.q.infos[uid].pod
        self.q.update(dataclasses.replace(old, priority=priority, scheduling_gates=() if ungate else old.scheduling_gates,
                                          labels={"v": str(self.n)} if relabel else old.labels))

    @precondition(lambda self: self.known)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        uid = data.draw(st.sampled_from(sorted(self.known) + ["never-added"]))
        self.q.delete(uid)
        self.known.discard(uid)
        if uid in self.inflight:
            self.stale.append(self.inflight.pop(uid))

    def _pop_is_ready(self) -> bool:
        q, now = self.q, self.clock()
        return any(w == "active" or (w == "backoff" and q.backoff_expiry(q.infos[u]) <= now) for u, w in q.where.items())

    @rule()
    def pop(self) -> None:
        if not self._pop_is_ready():
            return
        qi = self.loop.run_until_complete(asyncio.wait_for(self.q.pop(), 1))
        assert qi is not None and qi.uid in self.known and qi.uid not in self.inflight
        self.inflight[qi.uid] = qi

    @precondition(lambda self: self.inflight)
    @rule(data=st.data(), unschedulable=st.booleans(), plugins=st.sets(st.sampled_from(PLUGINS), max_size=2))
    def fail(self, data: st.DataObject, unschedulable: bool, plugins: set[str]) -> None:
        qi = self.inflight.pop(data.draw(st.sampled_from(sorted(self.inflight))))
        qi.unschedulable_plugins = plugins
        self.q.requeue_failed(qi, unschedulable)

    @precondition(lambda self: self.stale)
    @rule()
    def fail_after_delete(self) -> None:
        qi = self.stale.pop()
        self.q.requeue_failed(qi, True)
        assert qi.uid not in self.q

    @precondition(lambda self: self.inflight)
    @rule(data=st.data())
    def bound(self, data: st.DataObject) -> None:
        uid = data.draw(st.sampled_from(sorted(self.inflight)))
        del self.inflight[uid]
        self.q.done(uid)
        self.known.discard(uid)

    @rule(event=st.sampled_from(EVENTS))
    def event(self, event: ClusterEvent) -> None:
        self.q.on_event(event, None, None)

    @precondition(lambda self: self.known)
    @rule(data=st.data())
    def activate(self, data: st.DataObject) -> None:
        uids = data.draw(st.lists(st.sampled_from(sorted(self.known)), max_size=3))
        self.gate.released.update(data.draw(st.sets(st.sampled_from(sorted(self.known)), max_size=1)))
        self.q.activate(uids)

    @rule(dt=st.sampled_from([0.5, 1.0, 4.0, 31.0]))
    def advance(self, dt: float) -> None:
        self.clock.advance(dt)

    @rule()
    def flush(self) -> None:
        self.q.flush_unschedulable_leftover()

    @invariant()
    def every_pod_is_in_exactly_one_place(self) -> None:
        if not hasattr(self, "q"):
            return
        q = self.q
        assert set(q.infos) == self.known and set(q.where) == self.known
        # the structures behind ``where`` (private on purpose: this is what the invariant is about)
        for uid in self.known:
            places = {
                "active": uid in q._active_tokens,
                "backoff": uid in q._backoff_tokens,
                "unschedulable": uid in q._parked and q.where[uid] == "unschedulable",
                "gated": uid in q._parked and q.where[uid] == "gated",
                "inflight": uid in q._inflight,
            }
            assert [p for p, here in places.items() if here] == [q.where[uid]], (uid, places)
        assert set(q._inflight) == set(self.inflight)
        assert q._parked <= self.known and set(q._active_tokens) | set(q._backoff_tokens) <= self.known
        assert all(w in ("unschedulable", "gated") for u, w in q.where.items() if u in q._parked)
        assert sum(q.counts().values()) + len(self.inflight) == len(self.known)


QueueMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
test_every_pod_is_in_exactly_one_place = QueueMachine.TestCase


async def test_an_event_visits_only_parked_pods_whose_rejecting_plugin_registered_for_it() -> None:
    # thousands of gated or unschedulable pods must not be rescanned on every bind: the queue indexes
    # parked pods by rejecting plugin and an event reaches only the interested ones (and the unblamed)
    q = make_queue()
    for uid, plugins in (("node", ("TestNodePlugin",)), ("assigned", ("TestAssignedPlugin",)), ("nobody", ())):
        q.add(pod(uid), PROFILE)
        await fail(q, uid, plugins)
    assigned_add = ev(Resource.ASSIGNED_POD, A.ADD)
    assert q._candidates(assigned_add) == {"assigned", "nobody"}
    assert q._candidates(ev(Resource.NODE, A.ADD)) == {"node", "nobody"}
    assert q.on_event(assigned_add) == 2
    assert q.counts()["unschedulable"] == 1 and q.where["node"] == "unschedulable"
    q.delete("node")
    assert q._candidates(ev(Resource.NODE, A.ADD)) == set()


async def test_a_gang_member_is_not_requeued_by_its_own_gang_releasing_room() -> None:
    # a gang that cannot fit releases all its members at once; those releases must not requeue the
    # members themselves, or the gang retries at every backoff step with nothing changed
    q = make_queue()
    q.add(dataclasses.replace(pod("a-0"), pod_group="a"), PROFILE)
    q.add(dataclasses.replace(pod("b-0"), pod_group="b"), PROFILE)
    await fail(q, "a-0", ("TestAssignedPlugin",))
    await fail(q, "b-0", ("TestAssignedPlugin",))
    freed = ev(Resource.ASSIGNED_POD, A.DELETE, "AssignedPodDelete")
    sibling = dataclasses.replace(pod("a-1"), pod_group="a", node_name="n1")
    q.hints[PROFILE]["TestAssignedPlugin"] = [ClusterEventWithHint(ev(Resource.ASSIGNED_POD, A.ADD | A.DELETE))]
    q._event_plugins.clear()
    assert q.on_event(freed, sibling, None) == 1  # b-0 moves: a-1's room may help gang b
    assert q.where["a-0"] == "unschedulable" and q.where["b-0"] != "unschedulable"


async def test_an_idle_queue_still_flushes_pods_left_unschedulable_too_long() -> None:
    # nothing active and no cluster event: pop's own wait must bring the parked pod back after
    # max_unschedulable (upstream's periodic flushUnschedulablePodsLeftover), not wait forever
    q = SchedulingQueue(lambda qi: (-qi.pod.priority, qi.timestamp), Gate(), {PROFILE: HINTS},
                        max_unschedulable=0.05, flush_interval=0.05, clock=RealClock())
    q.add(pod("a"), PROFILE)
    qi = await asyncio.wait_for(q.pop(), 1)
    qi.unschedulable_plugins = {"TestNodePlugin"}
    q.requeue_failed(qi, unschedulable=True)
    assert q.where["a"] == "unschedulable"
    again = await asyncio.wait_for(q.pop(), 2)
    assert again.uid == "a"


async def test_a_pod_that_failed_after_done_goes_back_to_backoff_once() -> None:
    # a PreBind or Bind failure comes after done(): requeue_failed would drop the pod, this re-adds it
    clock = Clock()
    q = make_queue(clock)
    member = dataclasses.replace(pod("a"), pod_group="g")
    q.gangs.update_membership(None, member)   # the informer's handler indexes the member
    q.add(member, PROFILE)
    qi = await popped(q)
    q.done("a")
    assert "a" not in q and q.take_group("ns/g", PROFILE) == []
    q.requeue_after_done(qi)
    assert q.where["a"] == "backoff"
    assert q.backoff_expiry(qi) == clock() + 1.0
    q.requeue_after_done(qi)   # already back: nothing changes
    assert q.counts() == {"active": 0, "backoff": 1, "unschedulable": 0, "gated": 0}
    assert [m.uid for m in q.take_group("ns/g", PROFILE)] == ["a"], "its gang finds it again"
    assert qi.attempts == 2
