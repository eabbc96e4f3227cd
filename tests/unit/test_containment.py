"""Failure containment: an exception anywhere in a cycle loses no pod and does not stop the loop.

A fault-injecting plugin (TestFaults, at Filter, Score, Reserve, Permit and PreBind)
and faults wrapped around the Coscheduling plugin's Gang and QueueSort
methods, the cache's ``assume`` and the queue's ``done`` raise at one chosen
call. The scheduler runs its real loop on a fake clock against a fake API.
After the faulty attempt every pod must be bound, or queued and explained (a
FailedScheduling event, PodScheduled=False); the queue's in-flight set must be
empty; no pod may be both assumed in the cache and queued; and the loop must
still be alive and schedule what comes next. In a group cycle the whole gang
is rejected together: every member ends in backoff with reason SchedulerError.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from scheduler.config import parse_config
from scheduler.framework import CycleState, FilterResult, Status, register
from scheduler.framework.clock import FakeClock
from scheduler.model import Pod, parse_pod
from scheduler.observe import Metrics
from scheduler.queue import QueuedPodInfo, fallback_sort_key
from scheduler.scheduler import Scheduler

SCHED = "tandem-scheduler"
GANG_CONFIG = Path(__file__).resolve().parents[2] / "config" / "gang.yaml"
QUEUED = ("active", "backoff", "unschedulable", "gated")


class InjectedFault(Exception):
    pass


class Faults:
    """Which call raises: point -> the 0-based index, among that point's calls, of the call that raises."""

    def __init__(self) -> None:
        self.plan: dict[str, int] = {}
        self.calls: dict[str, int] = {}
        self.raised: list[str] = []

    def arm(self, point: str, index: int = 0) -> None:
        self.plan[point] = index
        self.calls[point] = 0

    def hit(self, point: str, what: str = "") -> None:
        if point not in self.plan:
            return
        n = self.calls[point]
        self.calls[point] = n + 1
        if n == self.plan[point]:
            self.raised.append(f"{point} {what}")
            raise InjectedFault(f"injected at {point}")

    def wrap(self, obj: Any, method: str, point: str) -> None:
        """Put a faulty wrapper around ``obj.method`` (an instance attribute shadows the class's method)."""
        real = getattr(obj, method)

        def faulty(*args: Any, **kw: Any) -> Any:
            self.hit(point)
            return real(*args, **kw)

        setattr(obj, method, faulty)


@register
class TestFaults:
    __test__ = False   # a plugin, not a test class
    NAME = "TestFaults"
    EXTENSION_POINTS = frozenset({"Filter", "Score", "Reserve", "Permit", "PreBind"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None:
        self.faults: Any = Faults()   # anything with hit(point, what): tests/integration/test_fault_property.py

    def filter(self, state: CycleState, pod: Pod, nodes: Any, rows: np.ndarray) -> FilterResult:
        self.faults.hit("Filter", pod.name)
        return FilterResult.all_pass(len(rows))

    def score(self, state: CycleState, pod: Pod, nodes: Any, rows: np.ndarray) -> np.ndarray:
        self.faults.hit("Score", pod.name)
        return np.zeros(len(rows), dtype=np.int64)

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        self.faults.hit("Reserve", pod.name)
        return Status()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        pass

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        self.faults.hit("Permit", pod.name)
        return Status(), 0.0

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        self.faults.hit("PreBind", pod.name)
        return Status()


class FakeAPI:
    def __init__(self) -> None:
        self.binds: list[tuple[str, str]] = []          # (pod name, node)
        self.conditions: dict[str, dict[str, Any]] = {}  # pod name -> last PodScheduled written

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        self.binds.append((name, node))

    async def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        for c in patch["status"].get("conditions") or ():
            self.conditions[name] = c


class FakeEvents:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str]] = []   # (pod, reason, note)

    def for_profile(self, scheduler_name: str) -> FakeEvents:
        return self

    def record(self, regarding: Any, type_: str, reason: str, action: str, note: str, controller: Any = None,
               **kw: Any) -> None:
        self.recorded.append((regarding.name, reason, note))


class Env:
    def __init__(self) -> None:
        doc = yaml.safe_load(GANG_CONFIG.read_text())
        # TestFaults first: its Permit runs before Coscheduling's, which would let the waiting siblings go
        doc["profiles"][0]["plugins"]["multiPoint"]["enabled"].insert(0, {"name": "TestFaults"})
        self.clock = FakeClock()
        self.api, self.events, self.metrics = FakeAPI(), FakeEvents(), Metrics()
        self.s = Scheduler(parse_config(doc, str(GANG_CONFIG)), self.api, self.events, self.metrics,
                           clock=self.clock)
        fw = self.s.frameworks[SCHED]
        self.faults: Faults = fw.plugins["TestFaults"].faults
        self.coscheduling = fw.plugins["Coscheduling"]
        for i in range(2):
            self.s.on_node_add({"metadata": {"name": f"n{i}", "uid": f"n{i}"},
                                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
        self.names: list[str] = []
        self.task: asyncio.Task[None] | None = None

    def gang(self, name: str = "g", size: int = 3, cpu: str = "1", big: int = -1) -> None:
        self.s.on_pod_group_add({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default", "uid": f"pg-{name}", "resourceVersion": "1"},
            "spec": {"minMember": size}})
        for i in range(size):
            self.pod(f"{name}-{i}", group=name, cpu="100" if i == big else cpu)

    def pod(self, name: str, group: str = "", cpu: str = "1") -> None:
        meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
        if group:
            meta["labels"] = {"scheduling.x-k8s.io/pod-group": group}
        self.names.append(name)
        self.s.on_pod_add({"metadata": meta, "spec": {
            "schedulerName": SCHED,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Pending"}})

    def start(self) -> None:
        self.task = asyncio.create_task(self.s.run())

    async def settle(self) -> None:
        for _ in range(50):
            await asyncio.sleep(0)

    async def stop(self) -> None:
        self.s.halt()
        assert self.task is not None
        await asyncio.wait_for(self.task, 1)

    def errors(self) -> float:
        """scheduler_schedule_attempts_total{result="error"}."""
        return self.metrics.registry.get_sample_value("scheduler_schedule_attempts_total",
                                                      {"result": "error", "profile": SCHED}) or 0.0

    def where(self, name: str) -> str | None:
        return self.s.queue.where.get(f"uid-{name}")

    def bound(self) -> list[str]:
        return [name for name, _ in self.api.binds]

    def failed_events(self, name: str) -> list[str]:
        return [note for pod, reason, note in self.events.recorded if pod == name and reason == "FailedScheduling"]

    def assert_nothing_lost(self) -> None:
        """Each pod bound once, or queued and explained; nothing in flight; nothing both assumed and queued."""
        queue, cache = self.s.queue, self.s.cache
        assert not queue._inflight, f"still in flight: {queue._inflight}"
        assert not queue._events, "events kept with nothing in flight"
        bound = self.bound()
        assert len(bound) == len(set(bound)), f"bound twice: {bound}"
        for name in self.names:
            uid = f"uid-{name}"
            where = queue.where.get(uid)
            assert not (where is not None and cache.is_assumed(uid)), f"{name} is assumed and queued ({where})"
            if name in bound:
                continue
            assert where in QUEUED, f"{name} is lost: not bound, not queued ({where})"
            assert not cache.is_assumed(uid), f"{name} holds room while queued"
            assert self.failed_events(name), f"{name} is queued with no FailedScheduling event"
        for fw in self.s.frameworks.values():
            assert not fw.waiting, f"still waiting at Permit: {list(fw.waiting)}"
        assert self.task is not None and not self.task.done(), "the scheduling loop died"

    async def assert_loop_goes_on(self) -> None:
        """Faults off: a later healthy pod is bound, and every pod left is bound after its backoff."""
        self.faults.plan.clear()
        self.pod("later")
        await self.settle()
        assert "later" in self.bound()
        for _ in range(6):
            self.clock.advance(11)   # past podMaxBackoffSeconds
            await self.settle()
        assert sorted(self.bound()) == sorted(self.names)


def explained_as_error(env: Env, name: str, words: str | None = None) -> None:
    """The pod has a FailedScheduling event (saying ``words``) and PodScheduled=False, reason SchedulerError."""
    notes = env.failed_events(name)
    assert notes, f"{name} has no FailedScheduling event"
    assert env.api.conditions[name]["reason"] == "SchedulerError", env.api.conditions.get(name)
    if words is not None:
        assert any(words in n for n in notes), notes


# ---------------------------------------------------------------------------- a member's plugin raises


@pytest.mark.parametrize("point", ["Filter", "Score", "Reserve", "Permit"])
@pytest.mark.parametrize("index", [0, 1, 2], ids=["first member", "middle member", "last member"])
async def test_a_member_whose_plugin_raises_rejects_the_whole_gang_to_backoff(point: str, index: int) -> None:
    env = Env()
    env.gang(size=3)
    env.faults.arm(point, index)
    env.start()
    await env.settle()
    assert env.faults.raised, "the fault never fired"
    env.assert_nothing_lost()
    assert env.bound() == []
    for name in env.names:
        assert env.where(name) == "backoff", f"{name} is {env.where(name)}, not in backoff"
        explained_as_error(env, name, f"InjectedFault: injected at {point}")
    assert env.errors() >= 3
    await env.assert_loop_goes_on()
    await env.stop()


# ---------------------------------------------------------------------------- code outside the plugins raises


@pytest.mark.parametrize("index", [0, 1, 2], ids=["first member", "middle member", "last member"])
async def test_cache_assume_raising_in_a_group_cycle_rejects_the_gang_and_releases_the_waiting(index: int) -> None:
    env = Env()
    env.gang(size=3)
    env.faults.wrap(env.s.cache, "assume", "assume")
    env.faults.arm("assume", index)
    env.start()
    await env.settle()
    assert env.faults.raised
    env.assert_nothing_lost()
    assert env.bound() == []
    assert not env.s.cache.pods, "a rejected member still holds its node"
    for name in env.names:
        assert env.where(name) == "backoff"
        explained_as_error(env, name)
    await env.assert_loop_goes_on()
    await env.stop()


async def test_cache_assume_raising_for_a_single_pod() -> None:
    env = Env()
    env.pod("solo")
    env.faults.wrap(env.s.cache, "assume", "assume")
    env.faults.arm("assume")
    env.start()
    await env.settle()
    env.assert_nothing_lost()
    assert env.where("solo") == "backoff"
    explained_as_error(env, "solo")
    assert "InjectedFault" in env.failed_events("solo")[0]
    await env.assert_loop_goes_on()
    await env.stop()


async def test_an_exception_in_the_binding_task_requeues_the_pod() -> None:
    env = Env()
    env.pod("solo")
    env.faults.wrap(env.s.queue, "done", "done")   # the binding task's first step past Permit
    env.faults.arm("done")
    env.start()
    await env.settle()
    assert env.faults.raised
    env.assert_nothing_lost()
    assert env.where("solo") == "backoff"
    explained_as_error(env, "solo")
    await env.assert_loop_goes_on()
    await env.stop()


# ---------------------------------------------------------------------------- the Gang hooks raise


async def test_gang_key_raising_fails_only_that_pod_with_the_plugin_named() -> None:
    env = Env()
    env.gang(size=3)
    env.faults.wrap(env.coscheduling, "gang_key", "gang_key")
    env.faults.arm("gang_key")   # armed after the adds: the first call is the group cycle's
    env.start()
    await env.settle()
    assert env.faults.raised
    env.assert_nothing_lost()
    failed = [n for n in env.names if env.failed_events(n)]
    assert len(failed) == 1
    assert 'running Gang plugin "Coscheduling"' in env.failed_events(failed[0])[0]
    await env.assert_loop_goes_on()
    await env.stop()


async def test_gang_failed_raising_rejects_the_whole_gang() -> None:
    env = Env()
    env.gang(size=3, big=0)   # g-0 fits nowhere: the group cycle asks gang_failed about it
    env.faults.wrap(env.coscheduling, "gang_failed", "gang_failed")
    env.faults.arm("gang_failed")
    env.start()
    await env.settle()
    assert env.faults.raised
    env.assert_nothing_lost()
    assert env.bound() == []
    for name in ("g-1", "g-2"):   # not tried yet when the hook raised
        assert env.where(name) == "backoff"
        explained_as_error(env, name, 'running Gang plugin "Coscheduling"')
    assert env.failed_events("g-0")
    await env.stop()


# ---------------------------------------------------------------------------- QueueSort raises


async def test_a_sort_key_raising_at_add_still_queues_the_pod_by_priority_and_says_why() -> None:
    env = Env()
    env.faults.wrap(env.coscheduling, "sort_key", "sort_key")
    env.faults.arm("sort_key")
    env.pod("solo")   # the add raised before containment: it escaped the informer's handler
    assert env.faults.raised
    assert env.where("solo") == "active"
    notes = env.failed_events("solo")
    assert notes and 'running QueueSort plugin "Coscheduling"' in notes[0]
    assert env.errors() == 1
    env.start()
    await env.settle()
    assert env.api.conditions["solo"]["reason"] == "SchedulerError"
    assert env.bound() == ["solo"]
    env.assert_nothing_lost()
    await env.assert_loop_goes_on()
    await env.stop()


async def test_a_sort_key_raising_when_pop_moves_a_pod_out_of_backoff_does_not_stop_the_loop() -> None:
    env = Env()
    env.pod("solo")
    env.faults.arm("Filter")   # the first attempt fails: the pod goes to backoff
    env.start()
    await env.settle()
    assert env.where("solo") == "backoff"
    env.faults.wrap(env.coscheduling, "sort_key", "sort_key")
    env.faults.arm("sort_key")
    env.clock.advance(2)        # pop moves it to activeQ: its key raises there
    await env.settle()
    assert env.faults.raised == ["Filter solo", "sort_key "]
    env.assert_nothing_lost()
    assert env.bound() == ["solo"]
    assert any('running QueueSort plugin "Coscheduling"' in n for n in env.failed_events("solo"))
    await env.assert_loop_goes_on()
    await env.stop()


def test_the_fallback_order_is_priority_sorts() -> None:
    def qi(name: str, priority: int, ts: float) -> QueuedPodInfo:
        return QueuedPodInfo(parse_pod({"metadata": {"name": name, "uid": name},
                                        "spec": {"priority": priority, "containers": []}}), SCHED, ts)

    infos = [qi("late-low", 0, 2.0), qi("high", 10, 5.0), qi("early-low", 0, 1.0)]
    assert [i.pod.name for i in sorted(infos, key=fallback_sort_key)] == ["high", "early-low", "late-low"]


# ---------------------------------------------------------------------------- a PostFilter plugin raises


@register
class TestPostFilterFault:
    __test__ = False   # a plugin, not a test class
    NAME = "TestPostFilterFault"
    EXTENSION_POINTS = frozenset({"PostFilter"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None:
        pass

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Any) -> Any:
        raise InjectedFault("injected at PostFilter")


async def test_a_postfilter_that_raises_leaves_the_pod_unschedulable_with_the_error_after_the_reasons() -> None:
    """As upstream's schedulingAlgorithm: the PostFilter error is logged and added to the FitError, and the pod is
    Unschedulable (it waits for a cluster event), not a SchedulerError sent to backoff."""
    from tests.support.inprocess import InProcess
    cfg = parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                        "profiles": [{"schedulerName": SCHED, "plugins": {"multiPoint": {
                            "enabled": [{"name": "TestPostFilterFault"}]}}}]}, "<test>")
    env = InProcess(cfg)
    env.node("n0", cpu="1")
    env.pod("big", cpu="2")
    env.start()
    await env.settle()
    c = env.condition("big")
    assert c["reason"] == "Unschedulable", c
    # upstream prints the PostFilter plugin's error as it is, no wrapper (tandem names the exception's type)
    assert c["message"] == "0/1 nodes are available: 1 Insufficient cpu. InjectedFault: injected at PostFilter", c
    assert env.where("big") == "unschedulable"
    await env.stop()


async def test_a_postfilter_that_raises_in_a_group_cycle_rejects_the_gang_whole() -> None:
    """The member says what upstream says of a PostFilter error (Unschedulable, the error after the reasons); the
    error is no verdict on its gang, which is rejected whole: no sibling is left waiting at Permit."""
    from tests.support.inprocess import InProcess
    doc = yaml.safe_load(GANG_CONFIG.read_text())
    doc["profiles"][0]["plugins"]["multiPoint"]["enabled"].insert(0, {"name": "TestPostFilterFault"})
    env = InProcess(parse_config(doc, str(GANG_CONFIG)))
    env.node("n0", cpu="1")
    env.s.on_pod_group_add({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                            "metadata": {"name": "g", "namespace": "default", "uid": "pg-g", "resourceVersion": "1"},
                            "spec": {"minMember": 2}})
    env.pod("small", labels={"scheduling.x-k8s.io/pod-group": "g"}, cpu="500m")
    env.pod("big", labels={"scheduling.x-k8s.io/pod-group": "g"}, cpu="2")
    env.start()
    await env.settle()
    assert env.condition("big")["message"] == ("0/1 nodes are available: 1 Insufficient cpu. "
                                               "InjectedFault: injected at PostFilter")
    assert env.condition("small")["reason"] == "SchedulerError"
    assert not env.api.binds and not env.s.cache.pods and not env.s.frameworks[SCHED].waiting
    assert env.where("small") == "backoff"
    await env.stop()
