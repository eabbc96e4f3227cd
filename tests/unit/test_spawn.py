"""The scheduler's own tasks (``Scheduler._spawn``): a coroutine, or a task made already (the preemption
executor makes its task first, to wait on it in the synchronous mode), is run, tracked until it ends, and its
failure logged. A preemption's PostFilter must not fail on handing its task over."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from tests.support.inprocess import NS, InProcess


async def test_a_coroutine_or_a_task_is_run_and_tracked_until_it_ends() -> None:
    env = InProcess()
    done: list[str] = []

    async def work(what: str) -> None:
        done.append(what)

    task = asyncio.ensure_future(work("task"))
    env.s._spawn(task, "a task")
    env.s._spawn(work("coroutine"), "a coroutine")
    assert task in env.s._tasks and len(env.s._tasks) == 2
    await env.settle()
    assert sorted(done) == ["coroutine", "task"] and not env.s._tasks


def _running(env: InProcess, name: str, node: str, priority: int) -> None:
    obj = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "resourceVersion": env.api.rv(),
                        "creationTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"schedulerName": env.profile, "nodeName": node, "priority": priority,
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]},
           "status": {"phase": "Running"}}
    env.api.objects[f"/api/v1/namespaces/{NS}/pods/{name}"] = obj
    env.s.on_pod_add(obj)


async def test_a_preempting_pods_post_filter_hands_its_eviction_task_over_without_failing(
        caplog: pytest.LogCaptureFixture) -> None:
    env = InProcess()
    deleted: list[str] = []

    async def delete_pod(namespace: str, name: str, *_: Any, **__: Any) -> None:
        deleted.append(name)
        env.s.on_pod_delete(env.api.objects.pop(f"/api/v1/namespaces/{NS}/pods/{name}"))

    env.api.delete_pod = delete_pod   # type: ignore[attr-defined]
    env.node("n0", cpu="1")
    _running(env, "low", "n0", 0)
    high = env.pod("high", cpu="1")
    high["spec"]["priority"] = 100
    env.s.on_pod_update(high, high)
    caplog.set_level(logging.ERROR)
    env.start()
    try:
        for _ in range(10):
            await env.advance(1.0)
        assert deleted == ["low"]
        assert env.bound("high") == {"high": "n0"}
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]
    finally:
        await env.stop()
