"""The scheduler end to end on the simulated cluster: what users and kubelets see.

Each test starts its own :class:`SimCluster` (API server plus node agent)
and runs the whole scheduler process against it through :class:`App`, as
``tandem-scheduler --kubeconfig`` would. Tests create objects the way a
user would (through the store, with the API server's admission), then poll
the API until the expected state shows up, with a timeout: never a fixed
sleep for something that is expected to happen. The few fixed waits are for
things that must *not* happen, and they start only after a control pod
created alongside has been scheduled, so a slow machine cannot make them
pass by accident.

What is checked is what kube-scheduler promises: pods bound through
pods/binding and then started by the agent, ``Scheduled`` and
``FailedScheduling`` events (events.k8s.io/v1, reportingController = the
profile's schedulerName), the ``PodScheduled=False`` condition with the
upstream "0/N nodes are available: ..." message, event-driven requeueing,
and, under injected faults, that no pod is lost, bound twice or squeezed
onto a node without room.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from bench.simcluster import SimCluster
from bench.simcluster import errors as sim_errors
from bench.simcluster.agent import AgentConfig
from bench.simcluster.faults import FaultRule, Faults
from bench.simcluster.resources import lookup
from bench.simcluster.store import DELETED, MATCH_ALL, Dropped
from scheduler.apiclient import APIClient, RetryPolicy, from_kubeconfig
from scheduler.app import App
from scheduler.config import SchedulerConfig, parse_config
from scheduler.framework.clock import Clock

PODS = lookup("", "v1", "pods")
NODES = lookup("", "v1", "nodes")
PRIORITY_CLASSES = lookup("scheduling.k8s.io", "v1", "priorityclasses")

SCHED = "tandem-scheduler"
NS = "default"
MERGE = "application/merge-patch+json"

BASE_CONFIG: dict[str, Any] = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    # fractional backoffs (a tandem extension) keep retries inside a test's time budget
    "podInitialBackoffSeconds": 0.1,
    "podMaxBackoffSeconds": 1,
    # the default 50 QPS would make the client's token bucket, not the scheduler, the thing under test
    "clientConnection": {"qps": 2000, "burst": 4000},
}


def config(**extra: Any) -> SchedulerConfig:
    return parse_config({**BASE_CONFIG, **extra}, "<test>")


# ---------------------------------------------------------------------------- objects


def make_pod(name: str, cpu: str | None = "100m", memory: str | None = "64Mi", *, scheduler: str = SCHED,
             node_selector: dict[str, str] | None = None, affinity: dict[str, Any] | None = None,
             tolerations: list[dict[str, Any]] | None = None, gates: list[str] | None = None,
             node_name: str | None = None, labels: dict[str, str] | None = None,
             **spec: Any) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    body: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels or {"app": name}},
        "spec": {"schedulerName": scheduler,
                 "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": requests}}],
                 **spec},
    }
    if node_selector:
        body["spec"]["nodeSelector"] = node_selector
    if affinity:
        body["spec"]["affinity"] = affinity
    if tolerations:
        body["spec"]["tolerations"] = tolerations
    if gates:
        body["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    if node_name:
        body["spec"]["nodeName"] = node_name
    return body


def make_node(name: str, cpu: str = "4", memory: str = "8Gi", pods: str = "110", *,
              labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    capacity = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "100Gi"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints} if taints else {},
        "status": {"capacity": capacity, "allocatable": capacity,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                   "phase": "Running"},
    }


def required_affinity(*expressions: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": list(expressions)}]}}}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        e["values"] = list(values)
    return e


# ---------------------------------------------------------------------------- the environment


@dataclass
class Env:
    """A running simulated cluster, the scheduler against it, and a client for the test's own reads."""

    cluster: SimCluster
    app: App
    client: APIClient
    binds: list[tuple[str, str]] = field(default_factory=list)           # (pod name, node) of every bind that succeeded
    bind_conflicts: list[tuple[str, str]] = field(default_factory=list)  # (pod name, message) of binds answered 409

    @property
    def store(self) -> Any:
        return self.cluster.store

    def create_pod(self, body: dict[str, Any], admit: bool = True) -> dict[str, Any]:
        return self.store.create(PODS, NS, body, admit=admit).obj()

    def create_node(self, body: dict[str, Any]) -> None:
        self.store.create(NODES, "", body)

    def pod(self, name: str) -> dict[str, Any] | None:
        return self.store.get_obj(PODS, NS, name)

    def node_of(self, name: str) -> str:
        obj = self.pod(name)
        return "" if obj is None else (obj.get("spec") or {}).get("nodeName") or ""

    def pods(self) -> list[dict[str, Any]]:
        return [e.obj() for e in self.store.table(PODS).objects.values()]

    def patch_pod(self, name: str, patch: dict[str, Any]) -> None:
        self.store.patch(PODS, NS, name, MERGE, json.dumps(patch).encode())

    def patch_node(self, name: str, patch: dict[str, Any]) -> None:
        self.store.patch(NODES, "", name, MERGE, json.dumps(patch).encode())

    async def events(self, regarding: str | None = None) -> list[dict[str, Any]]:
        """events.k8s.io/v1 Events in the namespace, as a client of the API reads them."""
        items = (await self.client.list(f"/apis/events.k8s.io/v1/namespaces/{NS}/events"))["items"]
        if regarding is not None:
            items = [e for e in items if (e.get("regarding") or {}).get("name") == regarding]
        return items

    async def events_by_reason(self, regarding: str, reason: str) -> list[dict[str, Any]]:
        return [e for e in await self.events(regarding) if e.get("reason") == reason]


def scheduled_condition(pod: dict[str, Any] | None) -> dict[str, Any]:
    for c in ((pod or {}).get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled":
            return c
    return {}


def phase(pod: dict[str, Any] | None) -> str:
    return ((pod or {}).get("status") or {}).get("phase") or ""


async def eventually(cond: Callable[[], Any], timeout: float = 10.0, what: str = "condition",
                     interval: float = 0.02) -> Any:
    """Poll ``cond`` (sync or async) until it returns something truthy; return that."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {what}")
        await asyncio.sleep(interval)


async def stays(cond: Callable[[], bool], seconds: float, what: str) -> None:
    """Assert ``cond`` holds for the whole of ``seconds`` (for things that must not happen)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert cond(), what
        await asyncio.sleep(0.02)


def record_binds(env: Env) -> None:
    """Log every bind that succeeds and every 409 a bind gets, as the store's write observer sees them."""

    def on_write(verb: str, resource: str, ns: str, name: str, result: Any) -> None:
        if resource != "pods/binding":
            return
        if isinstance(result, sim_errors.APIError):
            if result.code == 409:
                env.bind_conflicts.append((name, result.message))
        else:
            env.binds.append((name, result.fields["spec.nodeName"]))

    env.store.observe(on_write)


@contextlib.asynccontextmanager
async def running(tmp_path: Path, nodes: list[dict[str, Any]] = (), cfg: SchedulerConfig | None = None, *,
                  faults: Faults | None = None, agent: AgentConfig | None = AgentConfig(ready_delay=0.05, tick=0.01),
                  retry: RetryPolicy | None = None, **cluster_kw: Any) -> AsyncIterator[Env]:
    """A SimCluster with ``nodes``, the scheduler running against it, and a reading client.

    ``retry``: the scheduler's client retry policy (default: the client's own, as in production).
    """
    kc = tmp_path / "kubeconfig"
    async with SimCluster(nodes=0, agent=agent, faults=faults or Faults(), kubeconfig=kc, **cluster_kw) as cluster:
        for n in nodes:
            cluster.store.create(NODES, "", n)
        cfg = cfg or config()
        async with contextlib.AsyncExitStack() as stack:
            client = await stack.enter_async_context(await from_kubeconfig(str(kc), qps=0, clock=Clock()))
            sched_client = None
            if retry is not None:
                sched_client = await stack.enter_async_context(await from_kubeconfig(
                    str(kc), qps=cfg.client_qps, burst=cfg.client_burst, retry=retry, clock=Clock()))
            env = Env(cluster, None, client)  # type: ignore[arg-type]
            record_binds(env)
            async with App(cfg, kubeconfig=str(kc), client=sched_client) as app:
                env.app = app
                yield env
                # the process must still be alive at the end of every test
                assert app._loop_task is not None and not app._loop_task.done(), "the scheduling loop ended"


async def bound(env: Env, *names: str, timeout: float = 10.0) -> dict[str, str]:
    """Wait until every named pod has a node; returns pod -> node."""
    await eventually(lambda: all(env.node_of(n) for n in names), timeout, f"{', '.join(names)} to be bound")
    return {n: env.node_of(n) for n in names}


async def unschedulable(env: Env, name: str, timeout: float = 10.0) -> dict[str, Any]:
    """Wait for PodScheduled=False on the pod and for its FailedScheduling event; returns the condition."""
    def cond() -> dict[str, Any]:
        c = scheduled_condition(env.pod(name))
        return c if c.get("status") == "False" and c.get("message") else {}

    c = await eventually(cond, timeout, f"PodScheduled=False on {name}")
    await eventually(lambda: env.events_by_reason(name, "FailedScheduling"), timeout,
                     f"a FailedScheduling event for {name}")
    return c


# ---------------------------------------------------------------------------- end to end


async def test_pods_are_bound_reported_and_started_and_misfits_stay_pending(tmp_path):
    nodes = [make_node(f"node-{i}", cpu="2") for i in range(3)]
    async with running(tmp_path, nodes) as env:
        names = [f"web-{i}" for i in range(5)]
        for n in names:
            env.create_pod(make_pod(n, cpu="500m"))
        env.create_pod(make_pod("huge", cpu="64"))

        placed = await bound(env, *names)
        assert set(placed.values()) <= {"node-0", "node-1", "node-2"}
        await eventually(lambda: all(phase(env.pod(n)) == "Running" for n in names), 10, "the agent to start them")
        for n in names:
            assert scheduled_condition(env.pod(n))["status"] == "True"
            ev = await eventually(lambda n=n: env.events_by_reason(n, "Scheduled"), 10, f"Scheduled event of {n}")
            assert len(ev) == 1
            e = ev[0]
            assert e["apiVersion"] == "events.k8s.io/v1"
            assert e["type"] == "Normal"
            assert e["action"] == "Binding"
            assert e["reportingController"] == SCHED
            assert e["note"] == f"Successfully assigned {NS}/{n} to {placed[n]}"
            assert e["regarding"]["kind"] == "Pod" and e["regarding"]["uid"] == env.pod(n)["metadata"]["uid"]

        c = await unschedulable(env, "huge")
        assert c["reason"] == "Unschedulable"
        # upstream's FitError text; DefaultPreemption, once enabled, appends its own sentence
        assert c["message"].startswith("0/3 nodes are available: 3 Insufficient cpu."), c["message"]
        assert not env.node_of("huge") and phase(env.pod("huge")) == "Pending"
        (failed,) = (await env.events_by_reason("huge", "FailedScheduling"))[:1]
        assert failed["type"] == "Warning"
        assert failed["action"] == "Scheduling"
        assert failed["reportingController"] == SCHED
        assert failed["note"] == c["message"]
        assert not await env.events_by_reason("huge", "Scheduled")
        assert sorted(p for p, _ in env.binds) == sorted(names)


async def test_placement_respects_taints_node_selectors_and_required_affinity(tmp_path):
    gpu_taint = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    nodes = [
        make_node("gpu", labels={"accel": "gpu", "disk": "hdd"}, taints=[gpu_taint]),
        make_node("ssd", labels={"disk": "ssd", "zone": "a"}),
        make_node("plain", labels={"zone": "b"}),
    ]
    tolerate_gpu = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    async with running(tmp_path, nodes) as env:
        env.create_pod(make_pod("trainer", node_selector={"accel": "gpu"}, tolerations=tolerate_gpu))
        env.create_pod(make_pod("intruder", node_selector={"accel": "gpu"}))
        env.create_pod(make_pod("db", affinity=required_affinity(expr("disk", "In", "ssd"))))
        env.create_pod(make_pod("not-a", affinity=required_affinity(expr("zone", "NotIn", "a"),
                                                                      expr("zone", "Exists"))))
        env.create_pod(make_pod("no-disk", affinity=required_affinity(expr("disk", "DoesNotExist"))))
        env.create_pod(make_pod("tolerant-anywhere", tolerations=[{"operator": "Exists"}],
                                affinity=required_affinity(expr("accel", "Exists"))))
        spread = [f"any-{i}" for i in range(8)]
        for n in spread:
            env.create_pod(make_pod(n))

        placed = await bound(env, "trainer", "db", "not-a", "no-disk", "tolerant-anywhere", *spread)
        assert placed["trainer"] == "gpu"
        assert placed["db"] == "ssd"
        assert placed["not-a"] == "plain"
        assert placed["no-disk"] == "plain"
        assert placed["tolerant-anywhere"] == "gpu"
        assert all(placed[n] in ("ssd", "plain") for n in spread), placed  # nobody else tolerates the taint

        c = await unschedulable(env, "intruder")
        assert c["reason"] == "Unschedulable"
        assert c["message"] == ("0/3 nodes are available: 1 node(s) had untolerated taint(s), "
                                "2 node(s) didn't match Pod's node affinity/selector. "
                                "no new claims to deallocate, preemption: 0/3 nodes are "
                                "available: 3 Preemption is not helpful for scheduling."), c["message"]
        assert not env.node_of("intruder")


async def test_a_pending_pod_is_scheduled_as_soon_as_a_node_that_fits_appears(tmp_path):
    async with running(tmp_path, [make_node("small", cpu="1")]) as env:
        env.create_pod(make_pod("big", cpu="3"))
        env.create_pod(make_pod("picky", node_selector={"pool": "batch"}))
        await unschedulable(env, "big")
        await unschedulable(env, "picky")
        # a new node: far sooner than the 5-minute unschedulable flush, and sooner than any backoff cap
        t0 = time.monotonic()
        env.create_node(make_node("large", cpu="4"))
        assert (await bound(env, "big", timeout=3))["big"] == "large"
        assert time.monotonic() - t0 < 3
        # a label on an existing node is an event too (NodeUpdate with UpdateNodeLabel)
        t0 = time.monotonic()
        env.patch_node("small", {"metadata": {"labels": {"pool": "batch"}}})
        assert (await bound(env, "picky", timeout=3))["picky"] == "small"
        assert time.monotonic() - t0 < 3
        # and a pod that goes away frees room for one waiting behind it (AssignedPodDelete)
        env.create_pod(make_pod("filler", cpu="900m", node_selector={"kubernetes.io/hostname": "small"}))
        env.create_pod(make_pod("waiter", cpu="900m", node_selector={"kubernetes.io/hostname": "small"}))
        first = await eventually(lambda: [n for n in ("filler", "waiter") if env.node_of(n)], 5, "one of two to bind")
        assert len(first) == 1
        other = "waiter" if first == ["filler"] else "filler"
        await unschedulable(env, other)
        t0 = time.monotonic()
        env.store.delete(PODS, NS, first[0], grace=0)
        await bound(env, other, timeout=3)
        assert time.monotonic() - t0 < 3


async def test_a_bind_that_fails_gives_its_room_back_to_the_pods_waiting_for_it(tmp_path):
    # every bind takes 0.6 s on the server: long enough to act while one is in flight
    faults = Faults(rules=[FaultRule(verb="create", resource="pods/binding", latency=0.6)])
    async with running(tmp_path, [make_node("only", cpu="1")], faults=faults) as env:
        first = env.create_pod(make_pod("first", cpu="1"))
        sched = env.app.scheduler
        await eventually(lambda: sched.cache.is_assumed(first["metadata"]["uid"]), 5, "first to be assumed")
        env.create_pod(make_pod("second", cpu="1"))
        c = await unschedulable(env, "second")  # the assumed pod holds the only cpu
        assert "1 Insufficient cpu" in c["message"], c["message"]
        # the first pod goes away while its bind is on the wire: the bind fails (404), the
        # assumed room is released, and that release must wake the pod that waits for it
        t0 = time.monotonic()
        env.store.delete(PODS, NS, "first", grace=0)
        assert (await bound(env, "second", timeout=4))["second"] == "only"
        assert time.monotonic() - t0 < 4
        assert [p for p, _ in env.binds] == ["second"]


TWO_PROFILES = {
    "profiles": [
        {"schedulerName": SCHED},
        {"schedulerName": "tandem-packer",
         "plugins": {"multiPoint": {"disabled": [{"name": "NodeResourcesBalancedAllocation"},
                                                 {"name": "ImageLocality"}]},
                     "score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]}},
         "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}]},
    ],
}


async def test_two_profiles_in_one_process_each_schedule_only_their_own_pods(tmp_path):
    cfg = config(**TWO_PROFILES)
    assert [p.scheduler_name for p in cfg.profiles] == [SCHED, "tandem-packer"]
    nodes = [make_node(f"node-{i}", cpu="4", memory="16Gi") for i in range(4)]
    async with running(tmp_path, nodes, cfg) as env:
        packed = [f"pack-{i}" for i in range(4)]
        for n in packed:
            env.create_pod(make_pod(n, cpu="1", memory="1Gi", scheduler="tandem-packer"))
        env.create_pod(make_pod("orphan", scheduler="no-such-scheduler"))
        placed = await bound(env, *packed)
        # MostAllocated: once a node has the first pod, it scores highest for the next
        assert len(set(placed.values())) == 1, placed
        full = placed[packed[0]]

        spread = [f"spread-{i}" for i in range(3)]
        for n in spread:
            env.create_pod(make_pod(n, cpu="1", memory="1Gi"))
        spread_at = await bound(env, *spread)
        # LeastAllocated (the default profile): one pod per empty node; the full node fits none
        assert len(set(spread_at.values())) == 3 and full not in spread_at.values(), spread_at

        for names, controller in ((packed, "tandem-packer"), (spread, SCHED)):
            for n in names:
                ev = await eventually(lambda n=n: env.events_by_reason(n, "Scheduled"), 10, f"event of {n}")
                assert [e["reportingController"] for e in ev] == [controller]
                assert ev[0]["reportingInstance"].startswith(controller + "-")
        assert not env.node_of("orphan")
        assert not await env.events("orphan")


async def test_pods_of_other_schedulers_are_untouched_but_their_bound_pods_take_room(tmp_path):
    nodes = [make_node("busy", cpu="2"), make_node("free", cpu="2")]
    async with running(tmp_path, nodes) as env:
        for i in range(2):  # the default scheduler (or a user) filled "busy"
            env.create_pod(make_pod(f"theirs-bound-{i}", cpu="1", scheduler="default-scheduler",
                                    node_name="busy"))
        env.create_pod(make_pod("theirs-pending", scheduler="default-scheduler"))
        env.create_pod(make_pod("theirs-too", scheduler="default-scheduler", cpu="64"))
        untouched = {n: env.pod(n)["metadata"]["resourceVersion"] for n in ("theirs-pending", "theirs-too")}
        await eventually(lambda: all(phase(env.pod(f"theirs-bound-{i}")) == "Running" for i in range(2)), 10,
                         "the foreign pods to run")

        ours = [f"ours-{i}" for i in range(3)]
        for n in ours:
            env.create_pod(make_pod(n, cpu="800m"))
        # two fit on "free" (1.6 of 2 cpu); none may go to "busy", whose 2 cpu the foreign pods hold
        def two_bound() -> list[str] | None:
            done = [n for n in ours if env.node_of(n)]
            return done if len(done) == 2 else None

        placed = await eventually(two_bound, 10, "two of ours to bind")
        assert all(env.node_of(n) == "free" for n in placed)
        (left,) = set(ours) - set(placed)
        c = await unschedulable(env, left)
        assert c["message"].startswith("0/2 nodes are available: 2 Insufficient cpu."), c["message"]

        await stays(lambda: all(env.pod(n)["metadata"]["resourceVersion"] == rv for n, rv in untouched.items()),
                    0.5, "a pod of another scheduler was written to")
        for n in untouched:
            assert not env.node_of(n)
            assert not scheduled_condition(env.pod(n))  # no status patch ever reached it
            assert not await env.events(n)
        for i in range(2):
            assert not await env.events(f"theirs-bound-{i}")
            assert env.node_of(f"theirs-bound-{i}") == "busy"
        assert {p for p, _ in env.binds} == set(placed)


async def test_a_gated_pod_waits_until_its_gates_are_removed(tmp_path):
    async with running(tmp_path, [make_node("node-0")]) as env:
        env.create_pod(make_pod("gated", gates=["example.com/quota", "example.com/approval"]))
        env.create_pod(make_pod("control"))
        await bound(env, "control")
        await stays(lambda: not env.node_of("gated"), 0.5, "a gated pod was bound")
        assert not await env.events_by_reason("gated", "Scheduled")
        # one gate off: still gated
        env.store.patch(PODS, NS, "gated", "application/json-patch+json",
                        json.dumps([{"op": "remove", "path": "/spec/schedulingGates/0"}]).encode())
        await stays(lambda: not env.node_of("gated"), 0.3, "a pod with one gate left was bound")
        t0 = time.monotonic()
        env.patch_pod("gated", {"spec": {"schedulingGates": None}})
        assert (await bound(env, "gated", timeout=3))["gated"] == "node-0"
        assert time.monotonic() - t0 < 3
        await eventually(lambda: env.events_by_reason("gated", "Scheduled"), 5, "Scheduled event of gated")


async def test_pods_being_deleted_are_skipped_and_bound_pods_are_never_rebound(tmp_path):
    async with running(tmp_path, [make_node("node-0"), make_node("node-1")]) as env:
        # created already bound (by a user, or by another scheduler before a restart): ours by name, but done
        env.create_pod(make_pod("prebound", node_name="node-1"))
        # unschedulable for now; then deleted while a finalizer holds it, then a node that fits appears
        for n in ("doomed", "survivor"):
            body = make_pod(n, node_selector={"pool": "late"})
            body["metadata"]["finalizers"] = ["example.com/hold"]
            env.create_pod(body)
        await unschedulable(env, "doomed")
        await unschedulable(env, "survivor")
        env.store.delete(PODS, NS, "doomed")
        assert env.pod("doomed")["metadata"].get("deletionTimestamp")
        env.create_node(make_node("late", labels={"pool": "late"}))
        assert (await bound(env, "survivor", timeout=5))["survivor"] == "late"
        await stays(lambda: not env.node_of("doomed"), 0.5, "a pod being deleted was bound")
        assert env.node_of("prebound") == "node-1"
        await eventually(lambda: phase(env.pod("prebound")) == "Running", 5, "the prebound pod to run")
        assert not await env.events("prebound")
        assert [p for p, _ in env.binds] == ["survivor"]
        assert not env.bind_conflicts
        # the finalizer goes, the delete completes: the scheduler keeps nothing of the pod
        doomed_uid = env.pod("doomed")["metadata"]["uid"]
        env.patch_pod("doomed", {"metadata": {"finalizers": None}})
        sched = env.app.scheduler
        await eventually(lambda: env.pod("doomed") is None and doomed_uid not in sched.pods, 5,
                         "the scheduler to see the delete")
        assert doomed_uid not in sched.queue and not sched.cache.where(doomed_uid)


async def test_malformed_pods_are_reported_and_do_not_stop_the_others(tmp_path):
    async with running(tmp_path, [make_node("node-0"), make_node("node-1")]) as env:
        def planted(name: str, **kw: Any) -> dict[str, Any]:
            body = make_pod(name, **kw)
            return env.create_pod(body, admit=False)  # what a real API server would refuse

        planted("bad-quantity", cpu="lots")
        planted("bad-operator", affinity=required_affinity(expr("disk", "Near", "ssd")))
        planted("bad-priority", priorityClassName="no-such-class")
        good = [f"good-{i}" for i in range(4)]
        for n in good:
            env.create_pod(make_pod(n))

        await bound(env, *good)
        expect = {
            "bad-quantity": "spec.containers[0].resources.requests[cpu]",
            "bad-operator": ("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                             ".nodeSelectorTerms[0].matchExpressions[0].operator"),
            "bad-priority": "spec.priorityClassName",
        }
        for name, path in expect.items():
            c = await unschedulable(env, name)
            assert path in c["message"], (name, c["message"])
            (ev,) = (await env.events_by_reason(name, "FailedScheduling"))[:1]
            assert ev["type"] == "Warning" and path in ev["note"], ev["note"]
            assert not env.node_of(name)
        assert "lots" in scheduled_condition(env.pod("bad-quantity"))["message"]
        assert '"Near"' in scheduled_condition(env.pod("bad-operator"))["message"]
        assert "no-such-class" in scheduled_condition(env.pod("bad-priority"))["message"]

        # the process goes on: a pod created now is scheduled as usual
        env.create_pod(make_pod("after"))
        await bound(env, "after")
        # and a priority class that appears makes the third pod schedulable
        env.store.create(PRIORITY_CLASSES, "", {"metadata": {"name": "no-such-class"}, "value": 10})
        await bound(env, "bad-priority", timeout=5)
        assert {p for p, _ in env.binds} == {*good, "after", "bad-priority"}


# ---------------------------------------------------------------------------- resilience


def quantity(v: str) -> int:
    """The test's own reading of the simple quantities it writes: cpu in millicores, memory in bytes."""
    units = {"m": 1, "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30}
    for suffix, mult in units.items():
        if v.endswith(suffix):
            return int(v[: -len(suffix)]) * mult
    return int(v)


def cpu_m(v: str) -> int:
    return quantity(v) if v.endswith("m") else int(v) * 1000


def requests_of(pod: dict[str, Any]) -> dict[str, int]:
    out = {"cpu": 0, "memory": 0, "pods": 1}
    for c in pod["spec"]["containers"]:
        r = (c.get("resources") or {}).get("requests") or {}
        out["cpu"] += cpu_m(r["cpu"]) if "cpu" in r else 0
        out["memory"] += quantity(r["memory"]) if "memory" in r else 0
    return out


def allocatable_of(node: dict[str, Any]) -> dict[str, int]:
    a = node["status"]["allocatable"]
    return {"cpu": cpu_m(a["cpu"]), "memory": quantity(a["memory"]), "pods": int(a["pods"])}


def free_room(env: Env) -> dict[str, dict[str, int]]:
    """Per node: allocatable minus the requests of the live pods bound to it."""
    room = {e.key[1]: allocatable_of(e.obj()) for e in env.store.table(NODES).objects.values()}
    for p in env.pods():
        node = p["spec"].get("nodeName")
        if node and phase(p) not in ("Succeeded", "Failed"):
            for k, v in requests_of(p).items():
                room[node][k] -= v
    return room


class NodeNameWatch:
    """Follows pods straight from the store; flags any pod whose nodeName changes once set."""

    def __init__(self, env: Env) -> None:
        self.store = env.store
        self.node: dict[str, str] = {}
        self.violations: list[str] = []
        self._watcher = self.store.watcher(PODS, "", MATCH_ALL, str(self.store.rv), send_initial=False)
        self._task = asyncio.get_running_loop().create_task(self._run())

    def _see(self, uid: str, name: str, node: str) -> None:
        before = self.node.get(uid, "")
        if before and node != before:
            self.violations.append(f"{name}: nodeName {before!r} -> {node!r}")
        if node:
            self.node[uid] = node

    def _drain(self) -> None:
        while True:
            try:
                batch = self._watcher.poll()
            except Dropped:  # compacted under us: look at every pod, then follow again
                self._watcher = self.store.watcher(PODS, "", MATCH_ALL, str(self.store.rv), send_initial=False)
                for e in list(self.store.table(PODS).objects.values()):
                    self._see(e.uid, e.key[1], e.fields["spec.nodeName"])
                continue
            if not batch:
                return
            for type_, e in batch:
                if type_ != DELETED:
                    self._see(e.uid, e.key[1], e.fields["spec.nodeName"])

    async def _run(self) -> None:
        while True:
            self._drain()
            await asyncio.sleep(0.005)

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._drain()


async def test_under_faults_every_pod_is_bound_once_and_no_node_is_overcommitted(tmp_path):
    rng = random.Random(20240611)
    faults = Faults(rules=[
        FaultRule(verb="create", resource="pods/binding", error_rate=0.3, error_code=500),
        FaultRule(verb="create", resource="pods/binding", throttle_rate=0.2, retry_after=0),
        FaultRule(verb="patch", resource="pods/status", error_rate=0.2, error_code=503),
        FaultRule(verb="create", resource="events.events.k8s.io", throttle_rate=0.2, retry_after=0),
    ], watch_drop_interval=0.4, seed=7)
    n_nodes, n_pods = 30, 300
    # 30 nodes x (4 cpu, 4Gi, 10 pods); 300 pods asking 120 cpu and 120 Gi on average: nodes fill up in
    # every dimension and fragmentation leaves a few pods legitimately pending
    nodes = [make_node(f"node-{i:02d}", cpu="4", memory="4Gi", pods="10") for i in range(n_nodes)]
    shapes = [("100m", "128Mi"), ("250m", "512Mi"), ("500m", "256Mi"), ("750m", "640Mi"), ("400m", "512Mi")]
    # fewer, quicker retries than production: about one bind in eight fails for good, so the
    # forget-and-requeue path runs dozens of times per run, not once or twice
    retry = RetryPolicy(attempts=3, base=0.02, cap=0.1)
    async with running(tmp_path, nodes, faults=faults, retry=retry) as env:
        watch = NodeNameWatch(env)
        stop_chaos = asyncio.Event()

        async def compactor() -> None:
            # forget history now and then: every informer's next watch from its resourceVersion gets 410
            while not stop_chaos.is_set():
                await asyncio.sleep(0.3)
                env.store.compact()

        chaos = asyncio.get_running_loop().create_task(compactor())
        names = []
        t0 = time.monotonic()
        for batch in range(6):
            for i in range(n_pods // 6):
                name = f"p-{batch}-{i:02d}"
                cpu, mem = shapes[rng.randrange(len(shapes))]
                env.create_pod(make_pod(name, cpu=cpu, memory=mem))
                names.append(name)
            # compacted before any watcher could read the batch: the pod informer's watch is cut and
            # its resourceVersion is gone, so these 50 pods reach the scheduler only through a relist
            env.store.compact()
            await asyncio.sleep(0.15)

        waiting: list[str] = []

        def unheld(p: dict[str, Any], fits: list[str]) -> list[str]:
            """``fits`` but the nodes held for an older pending pod (CapacityReservation; it is nominated there),
            when the pod says a hold turned it away."""
            if "had capacity reserved for" not in (scheduled_condition(p).get("message") or ""):
                return fits
            held = {(q.get("status") or {}).get("nominatedNodeName") for q in map(env.pod, names)
                    if q is not None and not q["spec"].get("nodeName")}
            return [node for node in fits if node not in held]

        def settled() -> bool:
            room = free_room(env)
            waiting.clear()
            for n in names:
                p = env.pod(n)
                if p["spec"].get("nodeName"):
                    continue
                want = requests_of(p)
                fits = unheld(p, [node for node, r in room.items() if all(r[k] >= want[k] for k in want)])
                if fits:  # fits somewhere: not legitimately pending (yet)
                    waiting.append(f"{n} {want} fits on {fits[:3]}; {scheduled_condition(p)}")
                elif scheduled_condition(p).get("reason") != "Unschedulable":
                    waiting.append(f"{n} has no Unschedulable condition: {scheduled_condition(p)}")
            return not waiting

        try:
            await eventually(settled, 30, "every pod to be bound or to fit nowhere", interval=0.2)
        except AssertionError as exc:
            where = {uid: w for uid, w in env.app.scheduler.queue.where.items()}
            detail = [f"{w} (queue: {where.get(env.pod(w.split()[0])['metadata']['uid'])})" for w in waiting[:5]]
            raise AssertionError(f"{exc}: {len(waiting)} pods, e.g. {detail}") from None
        elapsed = time.monotonic() - t0
        stop_chaos.set()
        await chaos
        await asyncio.sleep(0.3)  # binds in flight when the check passed land now, if any
        await watch.stop()

        pods = {n: env.pod(n) for n in names}
        assert all(p is not None for p in pods.values()), "a pod vanished"
        bound_pods = [n for n, p in pods.items() if p["spec"].get("nodeName")]
        pending = [n for n in names if n not in bound_pods]
        # nothing lost: the pending ones fit nowhere (checked again, after the dust settled)
        room = free_room(env)
        for n in pending:
            want = requests_of(pods[n])
            fits = unheld(pods[n], [node for node, r in room.items() if all(r[k] >= want[k] for k in want)])
            assert not fits, f"{n} fits {fits} but is pending"
        # nothing twice: one successful binding per pod, no conflicting second attempt, no nodeName ever moved
        per_pod = collections.Counter(p for p, _ in env.binds)
        assert {p for p, c in per_pod.items() if c > 1} == set(), "a pod was bound twice"
        assert set(per_pod) == set(bound_pods)
        assert env.bind_conflicts == [], env.bind_conflicts[:5]
        assert watch.violations == [], watch.violations[:5]
        for n in bound_pods:
            assert dict(env.binds)[n] == pods[n]["spec"]["nodeName"]
        # no node over-committed in any resource
        for node, r in room.items():
            assert all(v >= 0 for v in r.values()), f"{node} over-committed: {r}"
        # the run really went through the faults it was meant to
        lists = {inf.name: inf.lists for inf in env.app.informers}
        assert lists["pods"] >= 4, f"the pod informer did not relist after 410s: {lists}"
        assert env.app.client.retries, "no request was ever retried"
        assert len(bound_pods) >= 0.8 * n_pods, (len(bound_pods), len(pending))
        failed_binds = sum(1 for e in await env.events() if e["reason"] == "FailedScheduling"
                           and "running Bind plugin" in e["note"])
        assert failed_binds, "no bind ever failed for good: the requeue path was not exercised"
        print(f"\nresilience: {len(bound_pods)} bound, {len(pending)} pending in {elapsed:.1f}s; "
              f"{failed_binds} pods had a bind fail for good; "
              f"informer lists {lists}, "
              f"client retries {dict(env.app.client.retries)}")
