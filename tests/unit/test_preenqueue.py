"""scheduler/preenqueue.py: why a pod held at PreEnqueue waits, on the pod, delayed, deduplicated, budgeted.

The reporter is tested on its own (callbacks that record, a fake clock),
then wired: a real :class:`Scheduler` with config/gang.yaml's profile holds
gang members at Coscheduling's PreEnqueue, and the pod gets PodScheduled=False
with reason NotReadyForScheduling and an event, through the scheduler's one
status writer.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.config import parse_config
from scheduler.framework.clock import FakeClock
from scheduler.preenqueue import PreEnqueueReports
from scheduler.scheduler import Scheduler

GANG_CONFIG = Path(__file__).resolve().parents[2] / "config" / "gang.yaml"
COSCHEDULING = "Coscheduling"


class Env:
    """The reporter with a PreEnqueue that answers ``answers[uid]`` (plugin, message) or passes."""

    def __init__(self, qps: float = 20.0, burst: int = 100) -> None:
        self.clock = FakeClock()
        self.answers: dict[str, tuple[str, str]] = {}
        self.published: list[tuple[str, str]] = []   # (uid, message)
        self.write_times: list[float] = []           # since the start, each
        start = self.clock()

        def publish(uid: str, profile: str, msg: str) -> None:
            self.published.append((uid, msg))
            self.write_times.append(self.clock() - start)

        self.r = PreEnqueueReports(self.clock, self.answers.__contains__, self.pre_enqueue, publish,
                                   delay=5.0, qps=qps, burst=burst)

    def pre_enqueue(self, uid: str) -> None:
        answer = self.answers.get(uid)
        if answer is None:
            self.r.passed(uid)
        else:
            self.r.rejected(uid, "tandem-scheduler", answer[0], answer[1], "ns/g")

    def reject(self, uid: str, message: str, plugin: str = COSCHEDULING) -> None:
        self.answers[uid] = (plugin, message)
        self.pre_enqueue(uid)

    def passed(self, uid: str) -> None:
        self.answers.pop(uid, None)
        self.pre_enqueue(uid)


def test_a_hold_is_shown_only_once_it_has_lasted_the_delay() -> None:
    env = Env()
    env.reject("a", "PodGroup ns/g: 1 of 3 members exist; waiting for more")
    env.clock.advance(4.9)
    assert env.published == []
    env.clock.advance(0.1)
    assert env.published == [("a", "PodGroup ns/g: 1 of 3 members exist; waiting for more")]


def test_re_evaluations_with_the_same_numbers_write_nothing_more() -> None:
    env = Env()
    for _ in range(3):
        env.reject("a", "m1")
    env.clock.advance(5)
    for _ in range(3):
        env.reject("a", "m1")
    env.clock.advance(60)
    assert env.published == [("a", "m1")]


def test_numbers_that_change_while_a_write_waits_are_written_once_with_the_newest() -> None:
    env = Env()
    env.reject("a", "1 of 5")
    env.clock.advance(2)
    env.reject("a", "2 of 5")
    env.clock.advance(2)
    env.reject("a", "3 of 5")
    env.clock.advance(1)   # five seconds after the hold began
    assert env.published == [("a", "3 of 5")]


def test_numbers_that_change_after_a_write_are_written_again_a_delay_later() -> None:
    env = Env()
    env.reject("a", "1 of 5")
    env.clock.advance(5)
    env.reject("a", "2 of 5")
    env.clock.advance(4.9)
    assert env.published == [("a", "1 of 5")]
    env.clock.advance(0.1)
    assert env.published == [("a", "1 of 5"), ("a", "2 of 5")]
    env.reject("a", "1 of 5")   # a member went away again
    env.reject("a", "2 of 5")   # and came back before anything was written: the pod shows that already
    env.clock.advance(10)
    assert env.published == [("a", "1 of 5"), ("a", "2 of 5")]


def test_the_turn_publishes_what_pre_enqueue_answers_then() -> None:
    env = Env()
    env.reject("a", "1 of 5")
    env.answers["a"] = (COSCHEDULING, "4 of 5")   # siblings came; "a" was not asked again
    env.clock.advance(5)
    assert env.published == [("a", "4 of 5")]


def test_a_change_of_the_group_gives_its_shown_members_a_new_turn_once_per_delay() -> None:
    env = Env()
    env.reject("a", "1 of 5")
    env.reject("b", "2 of 5")
    env.clock.advance(5)
    assert env.published == [("a", "1 of 5"), ("b", "2 of 5")]
    env.answers["a"] = env.answers["b"] = (COSCHEDULING, "3 of 5")
    for _ in range(3):
        env.r.group_changed("ns/g")        # a third member, and its status writes echoed: one turn
    env.r.group_changed("ns/other")        # no member of ours shows anything there
    env.clock.advance(4.9)
    assert len(env.published) == 2
    env.clock.advance(0.1)
    assert env.published[2:] == [("a", "3 of 5"), ("b", "3 of 5")]
    env.r.group_changed("ns/g")            # the same numbers at the next turn: nothing written
    env.clock.advance(10)
    assert len(env.published) == 4


def test_a_message_new_at_every_look_costs_a_handful_of_writes_not_one_per_delay() -> None:
    # the write's own echo re-evaluates the pod: a countdown in the message would otherwise loop
    env = Env()
    looks = iter(range(10**6))

    def pre_enqueue(uid: str) -> None:
        env.r.rejected(uid, "tandem-scheduler", COSCHEDULING, f"look {next(looks)}", "ns/g")

    env.r.refresh = pre_enqueue
    env.answers["a"] = (COSCHEDULING, "")
    pre_enqueue("a")
    for _ in range(600):
        env.clock.advance(1)
        pre_enqueue("a")          # an event, or the echo of the last write
        env.r.group_changed("ns/g")
    times = [round(t) for t in env.write_times]
    assert times[:4] == [5, 10, 20, 40], times
    assert len(times) <= 8, times


@pytest.mark.parametrize("leaves", [
    pytest.param(lambda env: env.passed("a"), id="passing PreEnqueue"),
    pytest.param(lambda env: env.answers.pop("a"), id="no longer being held when the turn comes (bound, deleted)"),
    pytest.param(lambda env: env.r.forget("a"), id="the pod being forgotten"),
])
def test_a_pod_that_stops_waiting_before_its_turn_gets_no_write(leaves: Any) -> None:
    env = Env()
    env.reject("a", "m")
    env.clock.advance(3)
    leaves(env)
    env.clock.advance(10)
    assert env.published == []


def test_a_new_hold_after_passing_is_news_again() -> None:
    env = Env()
    env.reject("a", "m")
    env.clock.advance(5)
    env.passed("a")
    env.reject("a", "m")
    env.clock.advance(5)
    assert env.published == [("a", "m"), ("a", "m")]


@pytest.mark.parametrize("plugin", ["SchedulingGates", "DefaultPreemption"])
def test_holds_said_elsewhere_are_not_reported(plugin: str) -> None:
    env = Env()
    env.reject("a", "m1")
    env.clock.advance(1)
    env.reject("a", "waiting for scheduling gates: [x]", plugin)   # the report waiting for COSCHEDULING is stale
    env.clock.advance(10)
    assert env.published == []


def test_a_thousand_held_members_are_written_within_the_budget_oldest_first() -> None:
    env = Env(qps=10, burst=100)
    for i in range(1000):
        env.reject(f"p{i:04}", "PodGroup ns/g: 1000 of 2147483647 members exist; waiting for more")
    env.clock.advance(5)
    assert len(env.published) == 100, "the burst, at once"
    env.clock.advance(1.01)
    assert len(env.published) == 110, "then qps a second"
    assert [uid for uid, _ in env.published] == [f"p{i:04}" for i in range(110)]
    for i in range(1000):   # every arrival re-evaluates the held members: same numbers, nothing more
        env.reject(f"p{i:04}", "PodGroup ns/g: 1000 of 2147483647 members exist; waiting for more")
    env.clock.advance(100)
    assert len(env.published) == 1000
    assert len({uid for uid, _ in env.published}) == 1000, "each member once"


def test_without_a_running_loop_nothing_is_armed_and_nothing_fails() -> None:
    from scheduler.framework.clock import Clock
    held: set[str] = {"a"}
    r = PreEnqueueReports(Clock(), held.__contains__, lambda uid: None, lambda *a: None)
    r.rejected("a", "p", COSCHEDULING, "m")   # the real clock needs a loop for timers: no error
    assert "a" in r


# ---------------------------------------------------------------------------- wired into the scheduler


class FakeAPI:
    def __init__(self) -> None:
        self.status_patches: list[tuple[str, dict[str, Any]]] = []

    async def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self.status_patches.append((name, patch["status"]))


class FakeEvents:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str, str]] = []   # (pod, type, reason, note)

    def for_profile(self, scheduler_name: str) -> FakeEvents:
        return self

    def record(self, regarding: Any, type_: str, reason: str, action: str, note: str, controller: Any = None,
               **kw: Any) -> None:
        self.recorded.append((regarding.name, type_, reason, note))


def gang_scheduler(api: FakeAPI, events: FakeEvents, clock: FakeClock) -> Scheduler:
    return Scheduler(parse_config(yaml.safe_load(GANG_CONFIG.read_text()), str(GANG_CONFIG)), api, events,
                     clock=clock)


def member(name: str, group: str = "g", conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                         "labels": {"scheduling.x-k8s.io/pod-group": group}},
            "spec": {"schedulerName": "tandem-scheduler",
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]},
            "status": {"phase": "Pending", "conditions": conditions or []}}


def pod_group(name: str, min_member: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default", "uid": f"pg-{name}", "resourceVersion": "1"},
            "spec": {"minMember": min_member}}


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_held_gang_members_get_the_numbers_on_the_pod_once_and_again_when_they_change() -> None:
    api, events, clock = FakeAPI(), FakeEvents(), FakeClock()
    s = gang_scheduler(api, events, clock)
    s.on_pod_group_add(pod_group("g", 2147483647))
    s.on_pod_add(member("a"))
    s.on_pod_add(member("b"))
    assert s.queue.where["uid-a"] == s.queue.where["uid-b"] == "gated"
    clock.advance(5)
    await settle()
    msg = "PodGroup default/g: 2 of 2147483647 members exist; waiting for more"
    assert sorted(api.status_patches, key=lambda p: p[0]) == [
        (n, {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "NotReadyForScheduling",
                             "message": msg, "lastProbeTime": None, "lastTransitionTime": "2026-01-01T00:00:05Z"}]})
        for n in ("a", "b")]
    assert sorted(events.recorded) == [(n, "Warning", "NotReadyForScheduling", msg) for n in ("a", "b")]

    # the informer echoes the writes: re-evaluating the held pods writes nothing
    for n in ("a", "b"):
        s.on_pod_update(member(n), member(n, conditions=[{"type": "PodScheduled", "status": "False",
                                                         "reason": "NotReadyForScheduling", "message": msg}]))
    clock.advance(30)
    await settle()
    assert len(api.status_patches) == 2 and len(events.recorded) == 2

    s.on_pod_add(member("c"))   # a third member: every held member's numbers change
    clock.advance(5)
    await settle()
    three = "PodGroup default/g: 3 of 2147483647 members exist; waiting for more"
    assert sorted((n, st["conditions"][0]["message"]) for n, st in api.status_patches[2:]) == [
        ("a", three), ("b", three), ("c", three)]


async def test_a_gang_completed_before_the_delay_costs_no_write_and_a_written_reason_is_superseded() -> None:
    api, events, clock = FakeAPI(), FakeEvents(), FakeClock()
    s = gang_scheduler(api, events, clock)
    s.on_pod_group_add(pod_group("g", 2))
    s.on_pod_add(member("a"))
    clock.advance(1)
    s.on_pod_add(member("b"))   # completes the gang: "a" passes PreEnqueue
    assert s.queue.where["uid-a"] == "active"
    clock.advance(10)
    await settle()
    assert api.status_patches == [] and events.recorded == []

    s.on_pod_group_add(pod_group("h", 2))
    s.on_pod_add(member("x", "h"))
    clock.advance(5)
    await settle()
    assert [n for n, _ in api.status_patches] == ["x"]
    s.on_pod_add(member("y", "h"))
    assert s.queue.where["uid-x"] == "active" and "uid-x" not in s.reports
    assert "uid-x" not in s._conditions, "nothing of ours waits to be written over the next cycle's answer"


async def test_a_pod_already_showing_the_reason_after_a_restart_gets_no_second_write_or_event() -> None:
    api, events, clock = FakeAPI(), FakeEvents(), FakeClock()
    s = gang_scheduler(api, events, clock)
    s.on_pod_group_add(pod_group("g", 3))
    msg = "PodGroup default/g: 1 of 3 members exist; waiting for more"
    s.on_pod_add(member("a", conditions=[{"type": "PodScheduled", "status": "False",
                                          "reason": "NotReadyForScheduling", "message": msg}]))
    clock.advance(5)
    await settle()
    assert api.status_patches == [] and events.recorded == []


async def test_a_missing_pod_group_is_reported_with_its_name() -> None:
    api, events, clock = FakeAPI(), FakeEvents(), FakeClock()
    s = gang_scheduler(api, events, clock)
    s.on_pod_add(member("a", "ghost"))
    clock.advance(5)
    await settle()
    assert events.recorded == [("a", "Warning", "NotReadyForScheduling", "PodGroup default/ghost not found")]


def test_a_claim_the_resourceclaim_controller_has_not_created_yet_is_not_reported() -> None:
    """Its controller reports its own failures (FailedResourceClaimCreation); a missing named claim is ours to say."""
    env = Env()
    env.reject("a", 'pod "ns/a": ResourceClaim not created yet', plugin="DynamicResources")
    env.reject("b", 'resourceclaim.resource.k8s.io "x" not found', plugin="DynamicResources")
    env.clock.advance(10)
    assert env.published == [("b", 'resourceclaim.resource.k8s.io "x" not found')]
