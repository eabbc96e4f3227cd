"""The node agent: the stand-in's kubelets and pod garbage collector.

All of it is the stand-in's own (a bare kube-apiserver has no kubelets),
so every test here runs on the simulated cluster only. What it must look
like from the API is what a real cluster shows: status written through
pods/status (Running, Ready, containerStatuses, hostIP, podIP), graceful
deletes finished by a grace-0 delete once the termination delay (never
more than the grace period) has passed, and pods on vanished nodes failed
with a DisruptionTarget condition (reason DeletionByPodGC) the way
pkg/controller/podgc marks them.

The ``target`` fixture's agent uses ready_delay=0.1 s and
termination_delay=0.1 s; tests that need another AgentConfig build their
own SimCluster. The activeDeadlineSeconds tests step an agent by hand over
a store on a fake clock (``SteppedAgent``), so when a pod fails is exact.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, AsyncIterator, Callable

import aiohttp
import orjson
import pytest

from bench.simcluster import SimCluster
from bench.simcluster.agent import (DEADLINE_REASON, FAIL, NEVER_READY, NODES, PODS, RUN_SECONDS, TERMINATION_SECONDS,
                                    AgentConfig, NodeAgent)
from bench.simcluster.store import Store
from bench.simcluster.tables import parse_time
from tests.simcluster.conftest import Target, node_body, pod_body
from tests.support.waiting import eventually

pytestmark = pytest.mark.asyncio(loop_scope="session")

ONLY_SIM = "the node agent is the stand-in's kubelet; a bare kube-apiserver has none"


def pods_path(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/pods"


def condition(pod: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in (pod.get("status") or {}).get("conditions", []) if c["type"] == ctype), None)


async def wait_for(target: Target, name: str, pred: Callable[[dict[str, Any] | None], bool],
                   timeout: float = 3.0) -> dict[str, Any] | None:
    """Poll the pod until ``pred`` holds (``None`` is passed once it is gone)."""
    deadline = time.monotonic() + timeout
    while True:
        r = await target.req("GET", f"{pods_path(target.ns)}/{name}")
        pod = r.body if r.status == 200 else None
        if pred(pod):
            return pod
        assert time.monotonic() < deadline, f"pod {name} never got there; last seen: {pod}"
        await asyncio.sleep(0.02)


async def bound_pod(target: Target, name: str, node: str, annotations: dict[str, str] | None = None,
                    **spec: Any) -> None:
    body = pod_body(name, **spec)
    if annotations:
        body["metadata"]["annotations"] = annotations
    r = await target.req("POST", pods_path(target.ns), body)
    assert r.status == 201, r.body
    r = await target.req("POST", f"{pods_path(target.ns)}/{name}/binding",
                         {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}})
    assert r.status == 201, r.body


def phase_is(*phases: str) -> Callable[[dict[str, Any] | None], bool]:
    return lambda pod: pod is not None and pod["status"].get("phase") in phases


async def test_bound_pod_becomes_running_and_ready(target):
    target.only_sim(ONLY_SIM)
    [node] = await target.make_nodes(1)
    await bound_pod(target, "p", node)
    pod = await wait_for(target, "p", phase_is("Running"))
    status = pod["status"]
    for ctype in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
        assert condition(pod, ctype)["status"] == "True", ctype
    assert status["hostIP"] and status["hostIPs"] == [{"ip": status["hostIP"]}]
    assert status["podIP"] and status["podIPs"] == [{"ip": status["podIP"]}]
    assert status["startTime"]
    [cs] = status["containerStatuses"]
    assert (cs["name"], cs["ready"], cs["started"], cs["restartCount"]) == ("app", True, True, 0)
    assert "running" in cs["state"]
    assert status["qosClass"] == "Burstable"  # status writes keep what the API server set


AGENT_CASES = [
    ({FAIL: "true"}, {}, "Failed", "False",
     "the fail annotation makes a pod fail instead of starting"),
    ({NEVER_READY: "true"}, {}, "Running", "False",
     "the never-ready annotation runs a pod that never turns Ready"),
    ({RUN_SECONDS: "0.2"}, {"restartPolicy": "Never"}, "Succeeded", "False",
     "run-seconds completes a restartPolicy Never pod"),
    ({RUN_SECONDS: "0.2"}, {"restartPolicy": "OnFailure"}, "Succeeded", "False",
     "run-seconds completes a restartPolicy OnFailure pod"),
]


@pytest.mark.parametrize("annotations,spec,phase,ready", [c[:4] for c in AGENT_CASES], ids=[c[4] for c in AGENT_CASES])
async def test_annotations_steer_the_pod_lifecycle(target, annotations, spec, phase, ready):
    target.only_sim(ONLY_SIM)
    [node] = await target.make_nodes(1)
    await bound_pod(target, "p", node, annotations, **spec)
    pod = await wait_for(target, "p", phase_is(phase))
    assert condition(pod, "Ready")["status"] == ready
    [cs] = pod["status"]["containerStatuses"]
    if phase in ("Succeeded", "Failed"):
        terminated = cs["state"]["terminated"]
        assert terminated["exitCode"] == (0 if phase == "Succeeded" else 1)
        assert terminated["reason"] == ("Completed" if phase == "Succeeded" else "Error")
        assert condition(pod, "Ready")["reason"] == "PodCompleted"
    else:
        assert cs["ready"] is False and "running" in cs["state"]


async def test_restart_policy_always_keeps_running_past_run_seconds(target):
    target.only_sim(ONLY_SIM)
    [node] = await target.make_nodes(1)
    await bound_pod(target, "p", node, {RUN_SECONDS: "0.1"}, restartPolicy="Always")
    await wait_for(target, "p", phase_is("Running"))
    await asyncio.sleep(0.4)
    r = await target.req("GET", f"{pods_path(target.ns)}/p")
    assert r.body["status"]["phase"] == "Running"


async def test_graceful_delete_completes_after_the_termination_delay(target):
    target.only_sim(ONLY_SIM)
    [node] = await target.make_nodes(1)
    await bound_pod(target, "p", node)
    await wait_for(target, "p", phase_is("Running"))
    r = await target.req("DELETE", f"{pods_path(target.ns)}/p")
    assert r.status == 200, r.body  # the DELETE handler answers 200 while the deletion is pending
    assert r.body["metadata"]["deletionTimestamp"]
    assert r.body["metadata"]["deletionGracePeriodSeconds"] == 30
    started = time.monotonic()
    await wait_for(target, "p", lambda pod: pod is None)
    assert time.monotonic() - started < 2  # termination_delay (0.1 s), not the 30 s grace period


def stored(target: Target, name: str) -> dict[str, Any] | None:
    """The pod as the stand-in's store holds it right now (simulated cluster only)."""
    return target.sim.store.get_obj(PODS, target.ns, name)


TERMINATION_CASES = [
    ("1", 2, 1.0, 1.9, "the termination-seconds annotation replaces the agent's delay"),
    ("30", 1, 1.0, 1.9, "the annotation never holds a pod beyond its grace period"),
    ("soon", 30, 0.1, 1.0, "an annotation that is not a number leaves the agent's delay"),
]


@pytest.mark.parametrize("seconds,grace,at_least,below", [c[:4] for c in TERMINATION_CASES],
                         ids=[c[4] for c in TERMINATION_CASES])
async def test_termination_seconds_annotation(target, seconds, grace, at_least, below):
    target.only_sim(ONLY_SIM)
    [node] = await target.make_nodes(1)
    await bound_pod(target, "p", node, {TERMINATION_SECONDS: seconds}, terminationGracePeriodSeconds=grace)
    await eventually(lambda: (stored(target, "p") or {}).get("status", {}).get("phase") == "Running", "Running")
    started = time.monotonic()
    r = await target.req("DELETE", f"{pods_path(target.ns)}/p")
    assert r.status == 200 and r.body["metadata"]["deletionGracePeriodSeconds"] == grace, r.body
    assert stored(target, "p")["metadata"]["deletionTimestamp"]  # terminating: still there
    await eventually(lambda: stored(target, "p") is None, "the kubelet's final delete", timeout=below + 5)
    assert at_least <= time.monotonic() - started < below


async def test_a_pod_replaced_under_the_same_name_starts(target):
    target.only_sim(ONLY_SIM)
    [node] = await target.make_nodes(1)
    await bound_pod(target, "p", node)
    r = await target.req("DELETE", f"{pods_path(target.ns)}/p", params={"gracePeriodSeconds": "0"})
    assert r.status == 200, r.body
    await bound_pod(target, "p", node)  # what the agent planned for the first one must not touch this one
    await eventually(lambda: (stored(target, "p") or {}).get("status", {}).get("phase") == "Running",
                     "the second pod Running")


async def test_pods_on_a_deleted_node_fail_with_disruption_target(target):
    target.only_sim(ONLY_SIM)
    [node, other] = await target.make_nodes(2)
    await bound_pod(target, "doomed", node)
    await bound_pod(target, "safe", other)
    await wait_for(target, "doomed", phase_is("Running"))
    r = await target.req("DELETE", f"/api/v1/nodes/{node}")
    assert r.status == 200, r.body
    pod = await wait_for(target, "doomed", phase_is("Failed"))
    dt = condition(pod, "DisruptionTarget")
    assert (dt["status"], dt["reason"]) == ("True", "DeletionByPodGC")
    assert node in dt["message"]
    assert condition(pod, "Ready")["status"] == "False"
    r = await target.req("GET", f"{pods_path(target.ns)}/safe")
    assert r.body["status"]["phase"] == "Running"


async def test_pod_bound_to_a_node_that_does_not_exist_fails(target):
    target.only_sim(ONLY_SIM)
    await bound_pod(target, "lost", "no-such-node")
    pod = await wait_for(target, "lost", phase_is("Failed"))
    dt = condition(pod, "DisruptionTarget")
    assert (dt["status"], dt["reason"]) == ("True", "DeletionByPodGC")


async def test_unbound_pods_are_left_alone(target):
    target.only_sim(ONLY_SIM)
    await target.make_nodes(1)
    r = await target.req("POST", pods_path(target.ns), pod_body("pending"))
    assert r.status == 201, r.body
    created_rv = r.body["metadata"]["resourceVersion"]
    await asyncio.sleep(0.3)
    r = await target.req("GET", f"{pods_path(target.ns)}/pending")
    assert r.body["status"]["phase"] == "Pending"
    assert r.body["metadata"]["resourceVersion"] == created_rv  # not written at all


async def _cluster_pod(c: SimCluster, s: aiohttp.ClientSession, name: str, **spec: Any) -> None:
    base = f"{c.url}/api/v1/namespaces/default/pods"
    async with s.post(base, data=orjson.dumps(pod_body(name, **spec))) as r:
        assert r.status == 201, await r.text()
    async with s.post(f"{base}/{name}/binding", data=orjson.dumps(
            {"metadata": {"name": name}, "target": {"kind": "Node", "name": "node-0"}})) as r:
        assert r.status == 201, await r.text()


async def _cluster_phase(c: SimCluster, s: aiohttp.ClientSession, name: str, want: str,
                         timeout: float = 3.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        async with s.get(f"{c.url}/api/v1/namespaces/default/pods/{name}") as r:
            pod = await r.json()
        if pod["status"].get("phase") == want:
            return pod
        assert time.monotonic() < deadline, pod["status"]
        await asyncio.sleep(0.02)


CONFIG_CASES = [
    (AgentConfig(ready_delay=0.05, run_time=0.2, tick=0.01), {"restartPolicy": "Never"}, "Succeeded",
     "run_time completes pods that do not restart"),
    (AgentConfig(ready_delay=0.05, fail_rate=1.0, tick=0.01), {}, "Failed",
     "fail_rate 1 fails every pod"),
]


@pytest.mark.parametrize("config,spec,phase", [c[:3] for c in CONFIG_CASES], ids=[c[3] for c in CONFIG_CASES])
async def test_agent_config_applies_to_every_pod(target, config, spec, phase):
    target.only_sim(ONLY_SIM)
    async with SimCluster(nodes=1, agent=config) as c, aiohttp.ClientSession() as s:
        await _cluster_pod(c, s, "p", **spec)
        await _cluster_phase(c, s, "p", phase)


async def test_ready_delay_is_honoured(target):
    target.only_sim(ONLY_SIM)
    async with SimCluster(nodes=1, agent=AgentConfig(ready_delay=0.5, tick=0.01)) as c, \
            aiohttp.ClientSession() as s:
        started = time.monotonic()
        await _cluster_pod(c, s, "p")
        await asyncio.sleep(0.2)
        async with s.get(f"{c.url}/api/v1/namespaces/default/pods/p") as r:
            assert (await r.json())["status"]["phase"] == "Pending"
        await _cluster_phase(c, s, "p", "Running")
        assert time.monotonic() - started >= 0.5


async def test_no_agent_leaves_bound_pods_pending(target):
    target.only_sim(ONLY_SIM)
    async with SimCluster(nodes=1, agent=None) as c, aiohttp.ClientSession() as s:
        await _cluster_pod(c, s, "p")
        await asyncio.sleep(0.2)
        async with s.get(f"{c.url}/api/v1/namespaces/default/pods/p") as r:
            pod = await r.json()
        assert pod["status"]["phase"] == "Pending" and pod["spec"]["nodeName"] == "node-0"


@contextlib.asynccontextmanager
async def _running_pod(config: AgentConfig) -> AsyncIterator[tuple[SimCluster, aiohttp.ClientSession]]:
    """A cluster of one node with this agent, and pod ``p`` Running there."""
    async with SimCluster(nodes=1, agent=config) as c, aiohttp.ClientSession() as s:
        await _cluster_pod(c, s, "p")
        await _cluster_phase(c, s, "p", "Running")
        yield c, s


async def _delete_and_time(c: SimCluster, s: aiohttp.ClientSession, name: str, grace: int) -> float:
    """Seconds from a DELETE with this grace period until the pod is gone from the store."""
    started = time.monotonic()
    async with s.delete(f"{c.url}/api/v1/namespaces/default/pods/{name}",
                        params={"gracePeriodSeconds": str(grace)}) as r:
        assert r.status == 200, await r.text()
    assert c.store.get_obj(PODS, "default", name)["metadata"]["deletionTimestamp"]
    await eventually(lambda: c.store.get_obj(PODS, "default", name) is None, f"{name} gone", timeout=grace + 5)
    return time.monotonic() - started


FULL_GRACE = AgentConfig(ready_delay=0.05, termination_delay=None, tick=0.01)


async def test_termination_delay_none_waits_the_whole_grace_period(target):
    target.only_sim(ONLY_SIM)
    async with _running_pod(FULL_GRACE) as (c, s):
        assert 1.0 <= await _delete_and_time(c, s, "p", grace=1) < 3


async def test_a_delete_that_shortens_the_grace_period_shortens_the_wait(target):
    target.only_sim(ONLY_SIM)
    async with _running_pod(FULL_GRACE) as (c, s):
        async with s.delete(f"{c.url}/api/v1/namespaces/default/pods/p", params={"gracePeriodSeconds": "30"}) as r:
            assert r.status == 200, await r.text()
        assert 1.0 <= await _delete_and_time(c, s, "p", grace=1) < 3  # not the 30 s of the first delete


# ---------------------------------------------------------------------------- activeDeadlineSeconds
#
# When a pod ends is a matter of the store's clock, so these run the agent over a store of their own
# on a clock only the test moves: no server, no machine time, nothing awaited (they are coroutines
# only because this module's tests all run on the session loop). The one test on the running
# cluster shows the wiring (the loop, the status written over the API), not the timing.


async def test_a_running_pod_fails_with_deadline_exceeded_on_the_running_cluster(target):
    target.only_sim(ONLY_SIM)
    [node] = await target.make_nodes(1)
    await bound_pod(target, "p", node, activeDeadlineSeconds=1, restartPolicy="Never")
    await wait_for(target, "p", phase_is("Running"))
    pod = await wait_for(target, "p", phase_is("Failed", "Succeeded"), timeout=4.0)
    assert (pod["status"]["phase"], pod["status"]["reason"]) == ("Failed", DEADLINE_REASON)


NS = "default"
# a quarter past a second: startTime is stamped in whole seconds, and the deadline counts from it,
# not from the moment the agent saw the pod running
T0 = 1_700_000_000.25


class Clock:
    """The store's clock; only the test moves it."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class SteppedAgent:
    """A node agent over a store of its own with one node, stepped by hand on a fake clock."""

    def __init__(self, config: AgentConfig = AgentConfig(ready_delay=1.0)) -> None:
        self.config = config
        self.clock = Clock(T0)
        self.store = Store(clock=self.clock)
        self.store.create(NODES, "", node_body("node-0"))
        self.restart()

    def restart(self) -> None:
        """A fresh agent over the same store, as after a kubelet restart: it knows only what is stored."""
        self.agent = NodeAgent(self.store, self.config)
        self._cursors = self.agent._resync()

    def at(self, when: float) -> None:
        """Move the clock to ``when`` and run one tick of the agent (StoreLoop._run's body: take in, then act)."""
        assert when >= self.clock.now
        self.clock.now = when
        self.agent._step(self._cursors)

    def pod(self, name: str = "p") -> dict[str, Any]:
        return self.store.get_obj(PODS, NS, name)

    def phase(self, name: str = "p") -> str:
        return self.pod(name)["status"]["phase"]

    def run(self, name: str = "p", annotations: dict[str, str] | None = None, **spec: Any) -> float:
        """Create and bind the pod, and tick until the agent has it Running; returns its status.startTime."""
        body = pod_body(name, **spec)
        body["metadata"]["annotations"] = annotations or {}
        self.store.create(PODS, NS, body)
        self.store.bind(NS, name, {"metadata": {"name": name}, "target": {"kind": "Node", "name": "node-0"}})
        self.at(self.clock.now)                             # it sees the pod bound
        self.at(self.clock.now + self.config.ready_delay)   # starts it
        self.at(self.clock.now)                             # and takes in its Running status, planning its end
        assert self.phase(name) == "Running"
        return parse_time(self.pod(name)["status"]["startTime"])


def assert_deadline_exceeded(pod: dict[str, Any]) -> None:
    """Failed as the kubelet fails a pod past its activeDeadlineSeconds: the reason, its words, containers ended."""
    status = pod["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "DeadlineExceeded")
    assert status["message"] == "Pod was active on the node longer than the specified deadline"
    [cs] = status["containerStatuses"]
    assert "terminated" in cs["state"] and cs["ready"] is False, cs
    assert condition(pod, "Ready")["status"] == condition(pod, "ContainersReady")["status"] == "False"


@pytest.mark.parametrize("restart_policy", ["Never", "OnFailure", "Always"])
async def test_a_running_pod_fails_with_deadline_exceeded_at_start_time_plus_its_deadline(restart_policy):
    k = SteppedAgent()
    start = k.run(activeDeadlineSeconds=30, restartPolicy=restart_policy)
    k.at(start + 30 - 0.01)
    assert k.phase() == "Running", "failed before startTime + activeDeadlineSeconds"
    k.at(start + 30)
    assert_deadline_exceeded(k.pod())


async def test_a_pod_without_a_deadline_keeps_running():
    k = SteppedAgent()
    start = k.run(restartPolicy="Never")
    for days in range(1, 8):
        k.at(start + days * 86_400)
    assert k.phase() == "Running"


async def test_lowering_the_deadline_of_a_running_pod_ends_it_earlier():
    k = SteppedAgent()
    start = k.run(activeDeadlineSeconds=3600, restartPolicy="Never")
    k.at(start + 5)
    pod = k.pod()
    pod["spec"]["activeDeadlineSeconds"] = 60   # the API lets it only go down
    k.store.update(PODS, NS, "p", pod)
    k.at(start + 60 - 0.01)
    assert k.phase() == "Running"
    k.at(start + 60)
    assert_deadline_exceeded(k.pod())


async def test_a_deadline_lowered_below_the_time_the_pod_has_run_ends_it_at_once():
    k = SteppedAgent()
    start = k.run(activeDeadlineSeconds=3600, restartPolicy="Never")
    k.at(start + 120)
    assert k.phase() == "Running"
    pod = k.pod()
    pod["spec"]["activeDeadlineSeconds"] = 60
    k.store.update(PODS, NS, "p", pod)
    k.at(start + 120 + k.config.tick)
    assert_deadline_exceeded(k.pod())


RUN_CASES = [
    ("5", 10, "Succeeded", "a run shorter than the deadline Succeeds, and the deadline leaves it so"),
    ("20", 10, "Failed", "a run longer than the deadline is cut short by it"),
]


@pytest.mark.parametrize("run_seconds,deadline,phase", [c[:3] for c in RUN_CASES], ids=[c[3] for c in RUN_CASES])
async def test_whichever_of_run_time_and_deadline_comes_first_ends_the_pod(run_seconds, deadline, phase):
    k = SteppedAgent()
    start = k.run(annotations={RUN_SECONDS: run_seconds}, activeDeadlineSeconds=deadline, restartPolicy="Never")
    k.at(start + min(float(run_seconds), deadline) + 1)
    assert k.phase() == phase
    ended = k.pod()
    k.at(start + deadline + 60)
    assert k.pod() == ended, "the finished pod was written again"
    if phase == "Succeeded":
        assert "reason" not in ended["status"]
    else:
        assert_deadline_exceeded(ended)


async def test_a_pod_another_writer_ended_before_its_deadline_is_left_alone(caplog):
    caplog.set_level(logging.WARNING, logger="simcluster.agent")
    k = SteppedAgent()
    start = k.run(activeDeadlineSeconds=30, restartPolicy="Never")
    k.at(start + 10)
    pod = k.pod()
    pod["status"]["phase"] = "Succeeded"   # as a test playing the kubelet writes it
    k.store.update(PODS, NS, "p", pod, "status")
    ended = k.pod()
    k.at(start + 30)
    assert k.pod() == ended, "the deadline wrote over a pod that had already Succeeded"
    assert not caplog.records, "the agent tried to (the store refuses a terminal phase's change)"


async def test_a_pod_past_its_deadline_when_the_agent_restarts_fails_at_once():
    k = SteppedAgent()
    start = k.run(activeDeadlineSeconds=30, restartPolicy="Never")
    k.clock.now = start + 300   # the agent was down
    k.restart()
    k.at(k.clock.now)
    assert_deadline_exceeded(k.pod())


async def test_a_pod_replaced_under_its_name_runs_to_its_own_deadline():
    k = SteppedAgent()
    first = k.run(activeDeadlineSeconds=30, restartPolicy="Never")
    k.at(first + 10)
    k.store.delete(PODS, NS, "p", grace=0)
    second = k.run(activeDeadlineSeconds=30, restartPolicy="Never")
    k.at(first + 30)
    assert k.phase() == "Running", "failed at the first pod's deadline"
    k.at(second + 30)
    assert_deadline_exceeded(k.pod())
