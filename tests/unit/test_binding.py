"""scheduler/binding.py: the binding cycle and what a failure in it leaves behind.

A real :class:`Scheduler` with the default profile schedules one pod onto one
node; the API client is a fake whose bind waits until the test lets it go
and then succeeds or raises, so a test can look at the queue while the bind
is under way and after it failed.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import pytest

from scheduler.config import parse_config
from scheduler.framework.clock import Clock
from scheduler.queue import QueuedPodInfo
from scheduler.scheduler import Scheduler
from tests.support.inprocess import FakeEvents

SCHED = "tandem-scheduler"


class SlowAPI:
    """Binds wait for ``release``; then they raise ``fail_with`` (if set) or succeed."""

    def __init__(self, fail_with: Exception | None = None) -> None:
        self.release = asyncio.Event()
        self.fail_with = fail_with
        self.binds: list[str] = []
        self.conditions: list[tuple[str, str]] = []   # (pod name, PodScheduled reason)

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        self.binds.append(name)
        await self.release.wait()
        if self.fail_with is not None:
            raise self.fail_with

    async def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self.conditions.append((name, patch["status"]["conditions"][0]["reason"]))


def scheduler(api: SlowAPI, events: FakeEvents | None = None) -> Scheduler:
    cfg = parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                        "podInitialBackoffSeconds": 1, "podMaxBackoffSeconds": 10}, "<test>")
    s = Scheduler(cfg, api, events, clock=Clock())
    s.on_node_add(node("n1"))
    return s


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": name},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def pod(name: str, labels: dict[str, str] | None = None, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels or {}}
    if deleting:
        meta["deletionTimestamp"] = "2024-05-01T10:00:00Z"
    return {"metadata": meta,
            "spec": {"schedulerName": SCHED,
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]},
            "status": {"phase": "Pending"}}


async def until(cond: Callable[[], Any], what: str) -> None:
    """Let the binding task run until ``cond`` holds (bounded: these tasks need a few loop turns)."""
    for _ in range(200):
        if cond():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"timed out waiting for {what}")


async def scheduled_and_binding(s: Scheduler, api: SlowAPI, name: str = "p") -> QueuedPodInfo:
    """Pop the pod, run its cycle, and wait until its bind is under way."""
    qi = await asyncio.wait_for(s.queue.pop(), 1)
    assert qi is not None and qi.pod.name == name
    s.schedule_next(qi)
    await until(lambda: name in api.binds, "the bind to start")
    return qi


async def test_the_queue_keeps_no_events_for_a_pod_that_is_binding() -> None:
    # upstream calls Done once Permit allowed the pod: a slow bind must not keep the queue recording
    # every cluster event for a pod that can no longer come back unschedulable
    api = SlowAPI()
    s = scheduler(api)
    s.on_pod_add(pod("p"))
    await scheduled_and_binding(s, api)
    assert "uid-p" not in s.queue
    s.on_node_add(node("n2"))
    s.on_pod_add({**pod("other"), "spec": {**pod("other")["spec"], "nodeName": "n2"}})
    assert s.queue._events == [], "no pod is in flight, so no event is kept"
    api.release.set()
    await until(lambda: s.scheduled == 1, "the bind to finish")
    assert "uid-p" not in s.queue and s.cache.where("uid-p") == "n1"


async def test_a_bind_that_fails_past_permit_puts_the_pod_in_backoff_and_reports_it() -> None:
    api = SlowAPI(fail_with=RuntimeError("connection reset"))
    events = FakeEvents()
    s = scheduler(api, events)
    s.on_pod_add(pod("p"))
    qi = await scheduled_and_binding(s, api)
    api.release.set()
    await until(lambda: "uid-p" in s.queue, "the pod to be requeued")
    assert s.queue.where["uid-p"] == "backoff"
    assert s.queue.backoff_expiry(qi) == pytest.approx(qi.last_failure + 1), "the first retry waits 1 s"
    assert s.cache.where("uid-p") is None, "its room was given back"
    assert events.recorded == [("p", "FailedScheduling",
                                'running Bind plugin "DefaultBinder": RuntimeError: connection reset')]
    await until(lambda: api.conditions, "the PodScheduled condition")
    assert api.conditions == [("p", "SchedulerError")]
    assert s.scheduled == 0


async def test_a_pod_requeued_after_a_failed_bind_carries_its_latest_update() -> None:
    # past Permit the queue no longer follows the pod's updates; the requeued pod must not be the
    # record the cycle saw, or its next attempt would schedule a pod that no longer exists
    api = SlowAPI(fail_with=RuntimeError("connection reset"))
    s = scheduler(api)
    s.on_pod_add(pod("p"))
    await scheduled_and_binding(s, api)
    s.on_pod_update(pod("p"), pod("p", labels={"tier": "web"}))
    api.release.set()
    await until(lambda: "uid-p" in s.queue, "the pod to be requeued")
    assert s.queue.infos["uid-p"].pod.labels == {"tier": "web"}


async def test_a_pod_deleted_while_it_binds_is_not_requeued_or_reported() -> None:
    api = SlowAPI(fail_with=RuntimeError("pod not found"))
    events = FakeEvents()
    s = scheduler(api, events)
    s.on_pod_add(pod("p"))
    await scheduled_and_binding(s, api)
    s.on_pod_delete(pod("p"))
    api.release.set()
    await until(lambda: not s._tasks, "the binding task to end")
    assert "uid-p" not in s.queue and s.cache.where("uid-p") is None
    assert events.recorded == [] and api.conditions == []


async def test_a_pod_going_away_while_it_binds_is_not_brought_back_by_a_failed_bind() -> None:
    # a deletionTimestamp is not yet a delete: the pod is still known, but the delete handler already
    # dropped it from the queue, and a failed bind must not put it back there
    api = SlowAPI(fail_with=RuntimeError("pod is being deleted"))
    s = scheduler(api)
    s.on_pod_add(pod("p"))
    await scheduled_and_binding(s, api)
    s.on_pod_update(pod("p"), pod("p", deleting=True))
    api.release.set()
    await until(lambda: not s._tasks, "the binding task to end")
    assert "uid-p" not in s.queue and s.cache.where("uid-p") is None
