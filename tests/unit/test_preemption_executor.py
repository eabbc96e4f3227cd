"""scheduler/executor.py: the eviction executor, with a fake API client (no server, no cycle)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from scheduler.apiclient import APIError, Conflict, NotFound
from scheduler.framework.clock import FakeClock
from scheduler.model import Pod, parse_pod, parse_pod_group
from scheduler.executor import EVICTING, Preemption
from scheduler.state.cache import Cache


def pod(name: str, prio: int = 0, node: str = "") -> Pod:
    return parse_pod({"metadata": {"name": name, "namespace": "ns", "uid": name},
                      "spec": {"nodeName": node, "priority": prio, "schedulerName": "tandem-scheduler",
                               "containers": [{"name": "c"}]},
                      "status": {"phase": "Running" if node else "Pending"}})


class Client:
    """Every call waits until the test releases it; ``fail`` maps a victim's name to the error its delete raises."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.release = asyncio.Event()
        self.fail: dict[str, Exception] = {}
        self.in_flight = 0
        self.most = 0

    async def _call(self, verb: str, name: str) -> None:
        self.calls.append((verb, name))
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await self.release.wait()
        finally:
            self.in_flight -= 1
        if verb == "delete" and name in self.fail:
            raise self.fail[name]

    async def patch_pod_status(self, ns: str, name: str, body: dict[str, Any]) -> None:
        await self._call("patch", name)

    async def delete_pod(self, ns: str, name: str, uid: str = "") -> None:
        await self._call("delete", name)


class Env:
    def __init__(self) -> None:
        self.cache = Cache()
        self.client = Client()
        self.tasks: list[asyncio.Future[Any]] = []
        self.activated: list[str] = []
        self.written: list[tuple[str, str]] = []
        self.ex = Preemption(self.cache, self.client, None, FakeClock(),
                             spawn=lambda fut, name: self.tasks.append(fut),
                             activate=self.activated.extend,
                             write_nomination=lambda p, node: self.written.append((p.name, node)))


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def test_a_burst_of_preemptions_evicts_in_turns_first_come_first_served() -> None:
    env = Env()
    n = EVICTING + 3
    for i in range(n):
        env.ex.preempt(None, pod(f"p{i}", 10), f"node{i}", [pod(f"v{i}", 0, f"node{i}")])
    await settle()
    # the first EVICTING preemptions make their calls; the last three wait their turn
    assert {name for _, name in env.client.calls} == {f"v{i}" for i in range(EVICTING)}
    assert all(env.ex.is_preempting(f"p{i}") for i in range(n))
    env.client.release.set()
    await asyncio.gather(*env.tasks)
    assert env.client.most <= EVICTING
    assert [name for verb, name in env.client.calls if verb == "delete"] == [f"v{i}" for i in range(n)]
    assert env.activated == [f"p{i}" for i in range(n)]
    assert not any(env.ex.is_preempting(f"p{i}") for i in range(n))
    assert [env.cache.nominations.get(f"p{i}") for i in range(n)] == [f"node{i}" for i in range(n)]


@pytest.mark.parametrize("error, kept", [
    pytest.param(NotFound(404, "NotFound", 'pods "v1" not found'), True, id="a victim already gone: success"),
    pytest.param(APIError(500, "InternalError", "boom"), False, id="a failed delete: the nomination is taken back"),
])
async def test_an_eviction_failure_reverts_the_nomination(error: Exception, kept: bool) -> None:
    env = Env()
    env.client.fail["v1"] = error
    env.client.release.set()
    env.ex.preempt(None, pod("p", 10), "node1", [pod("v1", 0, "node1"), pod("v2", 0, "node1")])
    await asyncio.gather(*env.tasks)
    assert env.cache.nominations.get("p") == ("node1" if kept else "")
    assert env.written == ([("p", "node1")] if kept else [("p", "node1"), ("p", "")])
    assert env.activated == ["p"] and not env.ex.is_preempting("p")


async def test_lower_priority_nominations_on_the_node_are_taken_away() -> None:
    env = Env()
    low, same = pod("low", 5), pod("same", 10)
    env.cache.nominations.set(low, "node1")
    env.cache.nominations.set(same, "node1")
    env.client.release.set()
    env.ex.preempt(None, pod("p", 10), "node1", [pod("v", 0, "node1")])
    await asyncio.gather(*env.tasks)
    assert env.cache.nominations.get("low") == "" and ("low", "") in env.written
    assert env.cache.nominations.get("same") == "node1"


# ---------------------------------------------------------------------------- DisruptionTarget on a PodGroup


class StatusClient:
    """PodGroup status patches refused with 409 while the object is not at the version they name."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self.patches: list[dict[str, Any]] = []
        self.versions: list[str] = []   # the informer's version after each refusal, as it would bring it

    async def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.patches.append(body)
        if self.versions:
            # someone wrote in between: the API refuses, and the informer brings that newer copy
            rv = self.versions.pop(0)
            pg = self.cache.gangs.group("ns/batch")
            assert pg is not None
            status = {"conditions": [{"type": "PodsReady", "status": "False", "reason": "WaitForStart"}]}
            self.cache.gangs.set_group(parse_pod_group({**pg.raw, "metadata": {**pg.raw["metadata"],
                                                                               "resourceVersion": rv},
                                                        "status": status}))
            raise Conflict(409, "Conflict", "the object has been modified")
        return {}


async def test_a_pod_group_preempted_whole_is_marked_on_its_version_and_keeps_the_others_conditions() -> None:
    cache = Cache()
    cache.gangs.set_group(parse_pod_group({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "batch", "namespace": "ns", "resourceVersion": "7",
                     "annotations": {"scheduling.tandem.dev/disruption-mode": "PodGroup"}},
        "spec": {"minMember": 2},
        "status": {"conditions": [{"type": "PodGroupScheduled", "status": "True", "reason": "Scheduled"}]}}))
    client = StatusClient(cache)
    client.versions = ["8"]   # GangReadiness writes PodsReady between the executor's read and its write
    clock = FakeClock()
    ex = Preemption(cache, client, None, clock, spawn=lambda fut, name: None, activate=lambda uids: None,
                    write_nomination=lambda p, node: None)
    victim = parse_pod({"metadata": {"name": "v", "namespace": "ns", "uid": "v",
                                     "labels": {"scheduling.x-k8s.io/pod-group": "batch"}},
                        "spec": {"nodeName": "n0", "containers": [{"name": "c"}]}})
    task = asyncio.ensure_future(ex._mark_gangs([(victim, pod("p", 10), "n0")]))
    await settle()
    clock.advance(1)
    await task
    first, second = client.patches
    assert first["metadata"] == {"resourceVersion": "7"}
    assert [c["type"] for c in first["status"]["conditions"]] == ["PodGroupScheduled", "DisruptionTarget"]
    assert second["metadata"] == {"resourceVersion": "8"}, "made again on the newer version"
    assert [c["type"] for c in second["status"]["conditions"]] == ["PodsReady", "DisruptionTarget"], \
        "the condition another writer added in between is kept"
