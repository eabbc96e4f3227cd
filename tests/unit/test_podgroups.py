"""scheduler/podgroups.py: PodGroup phase and counts from the members, debounced status writes, events.

The pure part (phase table, counts, owners, the waiting message) is tested
on records; the controller runs against a real :class:`Scheduler` fed
through its informer handlers (so the ``group_listeners`` hook is tested
too), a fake API client that records patches, and a fake clock.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from scheduler.apiclient import Conflict
from scheduler.config import parse_config
from scheduler.framework.clock import FakeClock
from scheduler.model import OwnerRef, Pod, parse_pod
from scheduler.podgroups import (
    FAILED, FINISHED, PENDING, PRE_SCHEDULING, RUNNING, SCHEDULED, SCHEDULING, GangCounts, PodGroupController,
    compute_phase, count_members, occupied_by, scheduled_note, status_path, unschedulable_note, waiting_message,
)
from scheduler.scheduler import Scheduler

SCHED = "tandem-scheduler"
NS = "default"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


# ---------------------------------------------------------------------------- the phase table


def c(members: int = 0, scheduled: int = 0, running: int = 0, succeeded: int = 0, failed: int = 0,
      attempted: bool = False) -> GangCounts:
    return GangCounts(members, scheduled, running, succeeded, failed, attempted or scheduled > 0)


PHASES = [
    pytest.param("", 3, c(), False, PENDING, id="a new group without members is Pending"),
    pytest.param("", 3, c(members=2), False, PENDING, id="fewer members than minMember is Pending"),
    pytest.param("", 3, c(members=2, attempted=True), False, PENDING,
                 id="fewer members than minMember is Pending even when one was tried"),
    pytest.param("", 3, c(members=3), False, PRE_SCHEDULING, id="minMember members none tried is PreScheduling"),
    pytest.param(PENDING, 3, c(members=3, attempted=True), False, SCHEDULING,
                 id="a tried member makes it Scheduling"),
    pytest.param(PRE_SCHEDULING, 3, c(members=4, scheduled=2), False, SCHEDULING,
                 id="some members with a node is Scheduling"),
    pytest.param(SCHEDULING, 3, c(members=3, scheduled=3), False, SCHEDULED,
                 id="minMember members with a node is Scheduled"),
    pytest.param(SCHEDULED, 3, c(members=3, scheduled=3, running=2), False, SCHEDULED,
                 id="Scheduled until minMember run"),
    pytest.param(SCHEDULED, 3, c(members=3, scheduled=3, running=3), False, RUNNING,
                 id="minMember running is Running"),
    pytest.param(SCHEDULING, 3, c(members=3, scheduled=3, running=1, succeeded=2), False, RUNNING,
                 id="succeeded members count toward Running"),
    pytest.param(RUNNING, 3, c(members=3, scheduled=3, succeeded=3), False, FINISHED,
                 id="minMember succeeded is Finished"),
    pytest.param(RUNNING, 3, c(members=3, scheduled=3, running=2, failed=1), False, FAILED,
                 id="a failed member with the rest running is Failed, as upstream"),
    pytest.param(SCHEDULING, 3, c(members=3, scheduled=1, failed=1), False, SCHEDULING,
                 id="a failed member without enough others is not Failed yet"),
    pytest.param(FINISHED, 3, c(), False, FINISHED, id="Finished is final"),
    pytest.param(FAILED, 3, c(members=3, scheduled=3, running=3), False, FAILED, id="Failed is final"),
    pytest.param(RUNNING, 3, c(members=3, scheduled=3, running=3), True, FAILED,
                 id="the requeuing limit makes it Failed whatever the pods do"),
    pytest.param(RUNNING, 3, c(), False, PENDING, id="all members gone is Pending again"),
    pytest.param("", 0, c(members=1), False, PRE_SCHEDULING, id="minMember 0 needs one member"),
    pytest.param("", 0, c(members=1, scheduled=1, running=1), False, RUNNING, id="minMember 0 runs with one"),
]


@pytest.mark.parametrize(("prev", "min_member", "counts", "limit", "want"), PHASES)
def test_phase(prev: str, min_member: int, counts: GangCounts, limit: bool, want: str) -> None:
    assert compute_phase(prev, min_member, counts, limit) == want


def rec(name: str, node: str = "", phase: str = "Pending", owners: tuple[OwnerRef, ...] = (),
        conditions: list[dict[str, Any]] | None = None) -> Pod:
    return Pod(uid=name, namespace=NS, name=name, node_name=node, phase=phase, owners=owners,
               raw={"status": {"conditions": conditions or []}})


def test_counts_take_nodes_and_phases_from_the_members() -> None:
    members = [rec("a", "n1", "Running"), rec("b", "n1", "Succeeded"), rec("c", "n2", "Failed"),
               rec("d", "n2", "Pending"), rec("e"), rec("f")]
    got = count_members(members, attempted=lambda p: p.name == "f")
    assert got == GangCounts(members=6, scheduled=4, running=1, succeeded=1, failed=1, attempted=True)
    assert not count_members([rec("e")]).attempted


def test_occupied_by_lists_each_owner_once_sorted_as_namespace_slash_name() -> None:
    job = OwnerRef("Job", "train", "u1", True)
    other = OwnerRef("JobSet", "big", "u2", False)
    members = [rec("a", owners=(job,)), rec("b", owners=(job, other)), rec("c")]
    assert occupied_by(members) == "default/big,default/train"
    assert occupied_by([rec("a")]) == ""


def unsched(message: str, when: str = "2024-05-01T10:00:00Z") -> list[dict[str, Any]]:
    return [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
             "lastTransitionTime": when}]


def test_waiting_message_is_the_newest_unschedulable_member_message() -> None:
    members = [
        rec("a", conditions=unsched("old", "2024-05-01T10:00:00Z")),
        rec("c", conditions=unsched("newest-c", "2024-05-01T10:00:05Z")),
        rec("b", conditions=unsched("newest-b", "2024-05-01T10:00:05Z")),
        rec("d", node="n1", conditions=unsched("bound members do not wait", "2024-05-01T11:00:00Z")),
        rec("e", conditions=[{"type": "PodScheduled", "status": "True", "message": "x"}]),
    ]
    assert waiting_message(members) == "newest-b"
    assert waiting_message([rec("e")]) == ""


def test_event_notes_say_where_the_gang_stands() -> None:
    assert (unschedulable_note(5, 8, "0/20 nodes are available: 3 Insufficient cpu.")
            == "5/8 members have a node; waiting for 3: 0/20 nodes are available: 3 Insufficient cpu.")
    assert scheduled_note(8, 8) == "8/8 members have a node; the gang is complete"


# ---------------------------------------------------------------------------- the controller


class FakeClient:
    def __init__(self) -> None:
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.fail_with: Exception | None = None

    async def patch(self, path: str, body: Any, content_type: str = "", **kw: Any) -> dict[str, Any]:
        if self.fail_with is not None:
            raise self.fail_with
        self.patches.append((path, body))
        return {}


class FakeEvents:
    def __init__(self) -> None:
        self.recorded: list[tuple[dict[str, str], str, str, str, str]] = []

    def record(self, regarding: Any, type_: str, reason: str, action: str, note: str, controller: Any = None,
               **kw: Any) -> None:
        self.recorded.append((regarding, type_, reason, action, note))

    def notes(self, reason: str) -> list[str]:
        return [r[4] for r in self.recorded if r[2] == reason]


class Env:
    def __init__(self) -> None:
        cfg = parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"},
                           "<test>")
        self.client = FakeClient()
        self.clock = FakeClock(wall_start=1_714_557_600.0)   # 2024-05-01T10:00:00Z
        self.sched = Scheduler(cfg, self.client, clock=self.clock)
        self.events = FakeEvents()
        self.ctl = PodGroupController(self.sched, self.client, self.events, interval=0.5)
        self.sched.group_listeners.append(self.ctl.on_pod_change)
        self.objs: dict[str, dict[str, Any]] = {}
        self.sched.on_node_add({"metadata": {"name": "n1", "uid": "n1"},
                                "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "110"}}})

    def group(self, name: str = "g", min_member: int = 3, status: dict[str, Any] | None = None,
              annotations: dict[str, str] | None = None, rv: str = "1") -> dict[str, Any]:
        obj = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
               "metadata": {"name": name, "namespace": NS, "uid": f"pg-{name}", "resourceVersion": rv,
                            "annotations": annotations or {}},
               "spec": {"minMember": min_member}, "status": status or {}}
        key = f"{NS}/{name}"
        if key in self.sched.cache.gangs.groups:
            self.sched.on_pod_group_update(self.sched.cache.gangs.group(key).raw, obj)
        else:
            self.sched.on_pod_group_add(obj)
        return obj

    def pod(self, name: str, group: str = "g", node: str = "", phase: str = "Pending", scheduler: str = SCHED,
            conditions: list[dict[str, Any]] | None = None, owner: str = "") -> None:
        obj: dict[str, Any] = {
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "labels": {GROUP_LABEL: group}},
            "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": phase, "conditions": conditions or []}}
        if node:
            obj["spec"]["nodeName"] = node
        if owner:
            obj["metadata"]["ownerReferences"] = [{"kind": "Job", "name": owner, "uid": "j", "controller": True,
                                                   "apiVersion": "batch/v1"}]
        old = self.objs.get(name)
        self.objs[name] = obj
        if old is None:
            self.sched.on_pod_add(obj)
        else:
            self.sched.on_pod_update(old, obj)

    def delete(self, name: str) -> None:
        self.sched.on_pod_delete(self.objs.pop(name))

    def status(self, name: str = "g") -> dict[str, Any]:
        """What the API would have: every patch this test's client sent, merged."""
        out: dict[str, Any] = {}
        for path, body in self.client.patches:
            if path == status_path(f"{NS}/{name}"):
                out.update(body["status"])
        return out

    def observe(self, name: str = "g") -> None:
        """The informer delivers the PodGroup as the API has it after our patches."""
        key = f"{NS}/{name}"
        old = self.sched.cache.gangs.group(key).raw
        new = {**old, "status": {**(old.get("status") or {}), **self.status(name)}}
        self.sched.on_pod_group_update(old, new)

    async def sync(self) -> float | None:
        wait = self.ctl.sync()
        await self.ctl.flush()
        return wait


async def test_status_follows_the_members_through_the_phases() -> None:
    env = Env()
    env.group(min_member=3)
    await env.sync()
    assert env.status() == {"phase": PENDING}, "absent counts mean 0 (omitempty): only the phase is new"
    for i in range(3):
        env.pod(f"p{i}", owner="train")
    env.clock.advance(1)
    await env.sync()
    assert env.status()["phase"] == PRE_SCHEDULING
    assert env.status()["occupiedBy"] == "default/train"
    assert "scheduleStartTime" not in env.status()
    for i in range(3):
        env.pod(f"p{i}", node="n1", owner="train")
    env.clock.advance(1)
    await env.sync()
    assert env.status()["phase"] == SCHEDULED and env.status()["scheduled"] == 3
    # bound by someone else, never attempted here: the start is when it was first seen scheduled (2 s in)
    assert env.status()["scheduleStartTime"] == "2024-05-01T10:00:02Z"
    for i in range(3):
        env.pod(f"p{i}", node="n1", phase="Running", owner="train")
    env.clock.advance(1)
    await env.sync()
    assert env.status()["phase"] == RUNNING and env.status()["running"] == 3
    for i in range(3):
        env.pod(f"p{i}", node="n1", phase="Succeeded", owner="train")
    env.clock.advance(1)
    await env.sync()
    assert env.status() == {"phase": FINISHED, "scheduled": 3, "running": 0, "succeeded": 3,
                                 "occupiedBy": "default/train", "scheduleStartTime": "2024-05-01T10:00:02Z"}, \
        "the start time is written once, even while the informer has not shown it yet"


async def test_writes_are_debounced_per_group_and_only_sent_when_something_changed() -> None:
    env = Env()
    env.group("a", min_member=2)
    env.group("b", min_member=2)
    assert await env.sync() is None
    assert len(env.client.patches) == 2, "a quiet group's first change is written at once"
    env.observe("a")
    env.observe("b")

    env.pod("a0", group="a")
    env.pod("a1", group="a")
    env.pod("b0", group="b")
    env.clock.advance(0.2)
    wait = await env.sync()
    assert len(env.client.patches) == 2, "within the interval nothing more is written"
    assert wait == pytest.approx(0.3)
    env.pod("a0", group="a", node="n1")
    env.clock.advance(0.3)
    assert await env.sync() is None
    assert len(env.client.patches) == 3, "the changes of the interval are folded into one write of group a"
    assert env.client.patches[2] == (status_path("default/a"),
                                     {"status": {"phase": SCHEDULING, "scheduled": 1,
                                                 "scheduleStartTime": "2024-05-01T10:00:00Z"}})
    env.observe("a")

    env.clock.advance(5)
    env.pod("a1", group="a", conditions=[{"type": "Initialized", "status": "True"}])  # nothing the status shows
    env.group("a", min_member=2, status=env.sched.cache.gangs.group("default/a").status)  # our own write echoed
    await env.sync()
    assert [p for p, _ in env.client.patches[3:] if p == status_path("default/a")] == [], \
        "nothing changed: nothing is written"


async def test_a_change_before_the_informer_shows_our_write_is_not_written_twice() -> None:
    env = Env()
    env.group(min_member=1)
    await env.sync()
    env.clock.advance(1)
    env.pod("p0")                       # the informer has not delivered our first write yet
    await env.sync()
    assert [b["status"] for _, b in env.client.patches] == [
        {"phase": PENDING},
        {"phase": PRE_SCHEDULING},
    ]


async def test_failed_writes_are_retried_with_backoff() -> None:
    env = Env()
    env.group(min_member=1)
    env.client.fail_with = RuntimeError("boom")
    await env.sync()
    assert list(env.ctl.dirty) == ["default/g"]
    env.client.fail_with = None
    env.clock.advance(0.6)
    assert await env.sync() == pytest.approx(0.4), "the retry waits twice the interval"
    env.clock.advance(0.4)
    await env.sync()
    assert env.status()["phase"] == PENDING and not env.ctl.dirty


async def test_groups_of_another_scheduler_are_left_alone() -> None:
    env = Env()
    env.group(min_member=1)
    env.pod("p0", scheduler="scheduler-plugins-scheduler")
    await env.sync()
    assert env.client.patches == []


async def test_the_requeuing_limit_condition_keeps_the_phase_failed() -> None:
    env = Env()
    env.group(min_member=1, status={"phase": PENDING, "conditions": [
        {"type": "PodsReady", "status": "False", "reason": "RequeuingLimitExceeded", "message": "x"}]})
    env.pod("p0", node="n1", phase="Running")
    await env.sync()
    assert env.status()["phase"] == FAILED
    assert "conditions" not in env.status(), "conditions belong to GangReadiness"


async def test_events_say_where_the_gang_stands_and_when_it_is_complete() -> None:
    env = Env()
    env.group(min_member=3)
    msg = "0/20 nodes are available: 3 Insufficient cpu."
    env.pod("p0", node="n1")
    env.pod("p1", conditions=unsched(msg))
    env.pod("p2", conditions=unsched(msg))
    await env.sync()
    (ref, type_, reason, action, note), = env.events.recorded
    assert (type_, reason, action) == ("Warning", "Unschedulable", "Scheduling")
    assert note == f"1/3 members have a node; waiting for 2: {msg}"
    assert ref["kind"] == "PodGroup" and ref["name"] == "g" and ref["uid"] == "pg-g"
    assert ref["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    env.observe()

    env.clock.advance(1)
    env.pod("p2", conditions=unsched(msg, "2024-05-01T10:00:01Z"))   # tried again, same answer
    await env.sync()
    assert len(env.events.recorded) == 1, "the same standing is not reported twice"

    env.clock.advance(1)
    env.pod("p1", node="n1")
    await env.sync()
    assert env.events.notes("Unschedulable")[-1] == f"2/3 members have a node; waiting for 1: {msg}"
    env.observe()

    env.clock.advance(1)
    env.pod("p2", node="n1")
    await env.sync()
    assert env.events.notes("Scheduled") == ["3/3 members have a node; the gang is complete"]
    env.observe()
    env.clock.advance(1)
    env.pod("p2", node="n1", phase="Running")
    await env.sync()
    assert env.events.notes("Scheduled") == ["3/3 members have a node; the gang is complete"], "once"


async def test_a_deleted_podgroup_is_forgotten_and_members_being_deleted_do_not_count() -> None:
    env = Env()
    env.group(min_member=2)
    env.pod("p0", node="n1")
    env.pod("p1", node="n1")
    await env.sync()
    assert env.status()["scheduled"] == 2
    env.observe()
    obj = dict(env.objs["p1"])
    obj["metadata"] = {**obj["metadata"], "deletionTimestamp": "2024-05-01T10:00:00Z"}
    env.sched.on_pod_update(env.objs["p1"], obj)
    env.objs["p1"] = obj
    env.clock.advance(1)
    await env.sync()
    assert env.status()["scheduled"] == 1 and env.status()["phase"] == PENDING, "one member left of two"
    env.sched.on_pod_group_delete(env.sched.cache.gangs.group("default/g").raw)
    n = len(env.client.patches)
    env.clock.advance(1)
    await env.sync()
    assert len(env.client.patches) == n and not env.ctl.dirty


async def settle() -> None:
    """Let every task that can run, run (the fake client does no I/O: a few turns of the loop are enough)."""
    for _ in range(20):
        await asyncio.sleep(0)


async def test_run_writes_changes_as_they_come() -> None:
    env = Env()
    task = asyncio.create_task(env.ctl.run())
    try:
        env.group(min_member=1)
        await settle()
        assert env.status()["phase"] == PENDING, "a change wakes the controller at once"
        env.observe()
        env.pod("p0", node="n1")
        env.pod("p0", node="n1", phase="Running")
        await settle()
        assert len(env.client.patches) == 1, "the group was written less than an interval ago: it waits"
        env.clock.advance(0.5)
        await settle()
        assert env.status()["phase"] == RUNNING, "the interval's end wakes it, on the same clock"
        assert len(env.client.patches) == 2
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


@pytest.mark.parametrize("start", [0.0, 30.0, 1e9], ids=["clock at zero", "clock at 30 s (fresh boot)", "clock at 1e9 s"])
async def test_the_write_budget_does_not_depend_on_the_clocks_value(start: float) -> None:
    env = Env()
    env.clock.set(start)
    env.ctl = PodGroupController(env.sched, env.client, env.events, interval=0.5, qps=10, burst=3)
    env.sched.group_listeners[:] = [env.ctl.on_pod_change]
    for name in "abcd":
        env.group(name, min_member=1)
    assert await env.sync() == pytest.approx(0.1)
    assert len(env.client.patches) == 3, "the burst, whatever the clock reads"


def test_parse_pod_sees_the_group_label() -> None:
    # the hook fires for pods that join by label or by the kube-batch annotation
    p = parse_pod({"metadata": {"name": "x", "namespace": NS, "annotations": {"scheduling.k8s.io/group-name": "g"}}})
    assert p.pod_group == "g"


async def test_only_a_few_writes_are_under_way_at_once_and_the_rest_wait_their_turn() -> None:
    env = Env()
    env.ctl.max_in_flight = 2
    gate = asyncio.Event()
    sent = env.client.patch

    async def slow_patch(path: str, body: Any, content_type: str = "", **kw: Any) -> dict[str, Any]:
        await gate.wait()
        return await sent(path, body)

    env.client.patch = slow_patch  # type: ignore[method-assign]
    for name in "abcde":
        env.group(name, min_member=1)
    env.ctl.sync()
    await asyncio.sleep(0)
    assert len(env.ctl._writing) == 2 and len(env.ctl.dirty) == 3
    gate.set()
    await env.ctl.flush()
    while env.ctl.dirty:
        env.ctl.sync()
        await env.ctl.flush()
    assert sorted(p for p, _ in env.client.patches) == sorted(status_path(f"default/{n}") for n in "abcde")


async def test_status_writes_are_budgeted_oldest_first_and_a_waiting_group_is_written_once() -> None:
    env = Env()
    env.ctl = PodGroupController(env.sched, env.client, env.events, interval=0.5, qps=10, burst=3)
    env.sched.group_listeners[:] = [env.ctl.on_pod_change]
    for name in "abcdef":
        env.group(name, min_member=1)
    wait = env.ctl.sync()
    await env.ctl.flush()
    written = [p.rsplit("/", 2)[-2] for p, _ in env.client.patches]
    assert written == ["a", "b", "c"], "the burst is spent on the oldest changes"
    assert wait == pytest.approx(0.1), "the next token comes after 1/qps"
    # d changes twice more while it waits: it keeps its place and is written once, with both folded in
    env.pod("d1", group="d")
    env.pod("d2", group="d")
    assert list(env.ctl.dirty) == ["default/d", "default/e", "default/f"]
    env.clock.advance(0.1)
    env.ctl.sync()
    await env.ctl.flush()
    assert [p.rsplit("/", 2)[-2] for p, _ in env.client.patches[3:]] == ["d"]
    assert env.client.patches[3][1]["status"]["phase"] == PRE_SCHEDULING
    env.clock.advance(0.2)
    env.ctl.sync()
    await env.ctl.flush()
    assert [p.rsplit("/", 2)[-2] for p, _ in env.client.patches[4:]] == ["e", "f"]
    assert not env.ctl.dirty
    # an unchanged group costs no token: recomputing it writes nothing
    env.ctl.on_pod_change("default/a")
    env.clock.advance(1.0)
    env.ctl.sync()
    assert len(env.client.patches) == 6 and env.ctl.bucket.tokens() == pytest.approx(3.0)


@pytest.mark.parametrize("qps, burst", [(0, 10), (-1, 10), (5, 0)])
def test_a_status_budget_that_could_never_write_is_refused(qps: float, burst: int) -> None:
    env = Env()
    with pytest.raises(ValueError, match="qps > 0 and burst >= 1"):
        PodGroupController(env.sched, env.client, qps=qps, burst=burst)


async def test_a_member_binding_after_permit_counts_as_attempted() -> None:
    # past Permit the queue is done with a pod (as upstream) while its bind runs: the cache still has it assumed
    env = Env()
    env.group(min_member=2)
    env.pod("p0")
    env.pod("p1")
    for uid in ("uid-p0", "uid-p1"):
        env.sched.queue.delete(uid)   # popped and done, as a pod whose bind is under way
        env.sched.cache.assume(env.sched.pods[uid], "n1")
    await env.sync()
    assert env.status()["phase"] == SCHEDULING, "assumed members were attempted: not PreScheduling"
    assert env.status()["scheduleStartTime"] == "2024-05-01T10:00:00Z"


# ---------------------------------------------------------------------------- the NotReadyForScheduling condition


def not_ready(env: Env, name: str = "g") -> list[dict[str, Any]]:
    """The PodGroupScheduled conditions the API would have."""
    return [c for c in env.status(name).get("conditions") or () if c["type"] == "PodGroupScheduled"]


def condition_writes(env: Env) -> list[dict[str, Any]]:
    return [b for _, b in env.client.patches if "conditions" in b["status"]]


async def test_a_group_short_of_members_says_so_once_that_has_lasted_and_follows_the_numbers() -> None:
    env = Env()
    env.group(min_member=2147483647)
    env.pod("p0")
    env.pod("p1")
    await env.sync()
    env.observe()
    env.clock.advance(4.9)
    await env.sync()
    assert condition_writes(env) == [], "not before the hold has lasted 5 s, as on the pods"
    env.clock.advance(0.1)   # the controller's own timer marks the group dirty
    await env.sync()
    (body,) = condition_writes(env)
    assert body["metadata"] == {"resourceVersion": "1"}, "written on the version whose conditions it keeps"
    assert body["status"]["conditions"] == [{
        "type": "PodGroupScheduled", "status": "False", "reason": "NotReadyForScheduling",
        "message": "PodGroup default/g: 2 of 2147483647 members exist; waiting for more",
        "lastTransitionTime": "2024-05-01T10:00:05Z"}]
    env.observe()

    env.clock.advance(1)
    env.pod("p2")
    await env.sync()
    assert [c["message"] for c in not_ready(env)] == [
        "PodGroup default/g: 3 of 2147483647 members exist; waiting for more"]
    assert not_ready(env)[0]["lastTransitionTime"] == "2024-05-01T10:00:05Z", "still False since then"
    assert len(condition_writes(env)) == 2
    env.observe()
    env.clock.advance(1)
    env.pod("p2", conditions=[{"type": "Initialized", "status": "True"}])   # the numbers stay: nothing written
    await env.sync()
    assert len(condition_writes(env)) == 2


async def test_the_condition_goes_when_the_gang_is_whole_and_other_conditions_stay() -> None:
    env = Env()
    pods_ready = {"type": "PodsReady", "status": "False", "reason": "WaitForStart", "message": "x",
                  "lastTransitionTime": "2024-05-01T09:00:00Z"}
    env.group(min_member=2, status={"conditions": [pods_ready]})
    env.pod("p0")
    await env.sync()
    env.observe()
    env.clock.advance(5)
    await env.sync()
    env.observe()
    assert env.status()["conditions"][0] == pods_ready and len(env.status()["conditions"]) == 2
    env.clock.advance(1)
    env.pod("p1")
    await env.sync()
    assert condition_writes(env)[-1]["status"]["conditions"] == [pods_ready]


async def test_a_gang_whose_pods_come_together_costs_no_condition_write() -> None:
    env = Env()
    env.group(min_member=3)
    for i in range(3):
        env.pod(f"p{i}")
        env.clock.advance(0.5)
        await env.sync()
    env.clock.advance(30)
    await env.sync()
    assert condition_writes(env) == []


@pytest.mark.parametrize("members", [
    pytest.param([], id="no members at all"),
    pytest.param([("p0", "n1")], id="its only member has a node"),
])
async def test_a_group_without_a_member_of_ours_waiting_shows_nothing(members: list[tuple[str, str]]) -> None:
    env = Env()
    env.group(min_member=3)
    for name, node in members:
        env.pod(name, node=node)
    env.clock.advance(10)
    await env.sync()
    env.clock.advance(10)
    await env.sync()
    assert condition_writes(env) == []


async def test_a_condition_write_refused_for_a_stale_version_is_made_again_without_backoff() -> None:
    env = Env()
    env.group(min_member=2)
    env.pod("p0")
    await env.sync()
    env.observe()
    env.clock.advance(5)
    env.client.fail_with = Conflict(409, "Conflict", "the object has been modified")
    await env.sync()
    assert list(env.ctl.dirty) == ["default/g"] and not env.ctl._failures
    env.client.fail_with = None
    env.clock.advance(0.5)
    await env.sync()
    assert [c["reason"] for c in not_ready(env)] == ["NotReadyForScheduling"]


# ---------------------------------------------------------------------------- the rule of the conditions list


PODS_READY = {"type": "PodsReady", "status": "False", "reason": "WaitForStart", "message": "x",
              "lastTransitionTime": "2024-05-01T09:00:00Z"}


async def reported_short_group() -> Env:
    """A gang of 2 with one member, 5 s on: its NotReadyForScheduling condition written (on version 1)."""
    env = Env()
    env.group(min_member=2)
    env.pod("p0")
    await env.sync()
    env.clock.advance(5)
    await env.sync()
    return env


async def test_a_not_ready_condition_another_writer_erased_is_written_again() -> None:
    """Our write is trusted only until the informer shows a newer version than the one it was made on: a list
    written by someone else on an older version (before the rule) dropped it, and it is written again."""
    env = await reported_short_group()
    (first,) = condition_writes(env)
    assert first["metadata"] == {"resourceVersion": "1"}
    env.group(min_member=2, status={"phase": PENDING, "conditions": [PODS_READY]}, rv="3")
    env.clock.advance(1)
    await env.sync()
    second = condition_writes(env)[-1]
    assert second["metadata"] == {"resourceVersion": "3"}, "made on the newer version"
    kept, ours = second["status"]["conditions"]
    assert kept == PODS_READY, "the other writer's condition is kept"
    assert ours == {**first["status"]["conditions"][0], "lastTransitionTime": "2024-05-01T10:00:06Z"}, \
        "ours written again (a transition now: the API lost it, as upstream's SetStatusCondition would see it)"


async def test_a_field_another_writer_set_back_is_written_again() -> None:
    env = Env()
    env.group(min_member=1)
    env.pod("p0", node="n1")
    await env.sync()
    assert env.status()["phase"] == SCHEDULED
    env.group(min_member=1, status={**env.status(), "phase": PENDING}, rv="4")   # a newer version, our phase gone
    env.clock.advance(1)
    await env.sync()
    assert env.client.patches[-1][1] == {"status": {"phase": SCHEDULED}}, "fields need no version"


async def test_a_write_the_informer_shows_in_a_newer_version_is_not_written_again() -> None:
    env = await reported_short_group()
    n = len(env.client.patches)
    env.group(min_member=2, status=env.status(), rv="2")   # the informer brings our own write
    env.clock.advance(1)
    await env.sync()
    assert len(env.client.patches) == n
