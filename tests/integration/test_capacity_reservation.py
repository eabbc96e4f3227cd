"""Held capacity on both servers: the simulated cluster and a real kube-apiserver 1.36.

tandem runs in process with its built-in configuration (CapacityReservation in the default profile), as in
tests/integration/test_gangs_native.py, whose namespace-per-test harness this module uses. The test plays
the kubelet on both servers (:class:`Kubelet`): a pod bound to a node is marked Running with a startTime
(on the simulated cluster its node agent may do it first), and a running pod is deleted once its
``activeDeadlineSeconds`` have passed (on the simulated cluster the agent may fail it first, reason
DeadlineExceeded). Pods live 1-2 s, so each case takes a few seconds.

The nodes are full of 1-cpu "filler" pods, bound by name (no scheduler), whose deadlines end first on n0.
The cases are the issue's: a whole-node gang and a whole-node pod each bind within three small-pod
lifetimes while a stream of 1-cpu pods keeps coming, and small pods keep binding meanwhile; the held unit
shows the nomination and a Reserved event; a short pod backfills held room, an endless one and a long one
do not; with a blocker without a deadline nothing backfills; a 64-cpu pod and a pod no node matches hold
nothing; a higher-priority pod that never preempts binds on held room.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio

from bench.simcluster.agent import AgentConfig
from scheduler.apiclient import NotFound
from scheduler.model.fields import parse_time
from tests.integration.test_gangs_native import Cluster, native_member, running
from tests.integration.test_scheduler import eventually, make_node, make_pod
from tests.support import envtest, servers
from tests.support.servers import Server

pytestmark = pytest.mark.asyncio(loop_scope="module")

LIFE = 2            # the small pods' activeDeadlineSeconds
_ids = itertools.count()

real = servers.real_apiserver_fixture(native_gangs=True)


@pytest_asyncio.fixture(params=["sim", "real"], loop_scope="module")
async def server(request: pytest.FixtureRequest, tmp_path: Path,
                 real: envtest.RealAPIServer | None) -> AsyncIterator[Server]:
    async with servers.serving(request.param, tmp_path, real, native_gangs=True,
                               agent=AgentConfig(ready_delay=0.05, tick=0.01)) as s:
        yield s


def _rfc3339(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class Kubelet:
    """What the kubelets would do, for the test's namespace: start bound pods, end them at their deadline."""

    def __init__(self, c: Cluster) -> None:
        self.c = c
        self.started: set[str] = set()
        self.ended: set[str] = set()

    async def run(self) -> None:
        while True:
            await self.step()
            await asyncio.sleep(0.05)

    async def step(self) -> None:
        c = self.c
        now = time.time()
        for pod in list(c.pods.store.values()):
            meta, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
            name = meta["name"]
            if not spec.get("nodeName") or meta.get("deletionTimestamp") or name in self.ended:
                continue
            if status.get("phase") in ("Succeeded", "Failed"):
                await self.end(name)
                continue
            start = parse_time(status.get("startTime"))
            if not start:
                if name not in self.started:
                    self.started.add(name)
                    with contextlib.suppress(NotFound):
                        await c.client.patch_pod_status(c.ns, name, {"status": {
                            "phase": "Running", "startTime": _rfc3339(now)}})
                continue
            deadline = spec.get("activeDeadlineSeconds")
            if deadline and start + deadline <= now:
                await self.end(name)

    async def end(self, name: str) -> None:
        self.ended.add(name)
        await self.c.delete_pod(name)


@contextlib.asynccontextmanager
async def full_cluster(server: Server, blockers_without_deadline: int = 0, spare: int = 0,
                       n0: tuple[int, ...] = (1, 1, 2, 2), others: int = 3) -> AsyncIterator[tuple[Cluster, Kubelet]]:
    """Four 4-cpu nodes full of 1-cpu fillers (n0's end after ``n0`` s, the others' after ``others`` s; the
    first
    ``blockers_without_deadline`` of each node's have none), ``spare`` empty 2-cpu nodes (room no whole-node unit
    can use), tandem, and the kubelet."""
    tag = f"{server.kind}{next(_ids)}"
    nodes = [make_node(f"{tag}-n{i}", cpu="4" if i < 4 else "2") for i in range(4 + spare)]
    async with running(server, nodes) as c:
        for i in range(4):
            for k in range(4):
                life = None if k < blockers_without_deadline else (n0[k] if i == 0 else others)
                body = make_pod(f"fill-{i}-{k}", cpu="1", memory="64Mi", scheduler="default-scheduler",
                                node_name=f"{tag}-n{i}")
                if life is not None:
                    body["spec"]["activeDeadlineSeconds"] = life
                await c.create_pod(body)
        kubelet = Kubelet(c)
        task = asyncio.ensure_future(kubelet.run())

        seen: set[str] = set()

        def fillers_running() -> bool:   # (the first to end may be gone already)
            seen.update(p["metadata"]["name"] for p in list(c.pods.store.values())
                        if (p.get("status") or {}).get("startTime"))
            return len(seen) >= 16

        await eventually(fillers_running, 10, "the fillers running")
        try:
            yield c, kubelet
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def node_of(c: Cluster, name: str) -> str:
    p = c.pod(name)
    return (p or {}).get("spec", {}).get("nodeName") or ""


def message(c: Cluster, name: str) -> str:
    p = c.pod(name) or {}
    for cond in (p.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "PodScheduled":
            return cond.get("message") or ""
    return ""


async def notes(c: Cluster, reason: str, name: str = "") -> list[str]:
    """The notes of the namespace's events with ``reason`` (about pod ``name``, or any)."""
    items = (await c.client.list(f"/apis/events.k8s.io/v1/namespaces/{c.ns}/events"))["items"]
    return [e.get("note", "") for e in items if e.get("reason") == reason
            and (not name or (e.get("regarding") or {}).get("name") == name)]


async def reserved_notes(c: Cluster, name: str) -> list[str]:
    return await notes(c, "Reserved", name)


async def small_stream(c: Cluster, until: Any, out: list[str], bound: set[str], deadline: int = LIFE) -> None:
    """1-cpu pods, each living ``deadline`` s, keeping four waiting, until ``until()``; ``bound``: those seen
    bound (the kubelet deletes them when they end)."""
    n = 0
    while not until():
        bound.update(x for x in out if node_of(c, x))
        waiting = [x for x in out if x not in bound]
        while len(waiting) < 4:
            n += 1
            name = f"small-{n}"
            body = make_pod(name, cpu="1", memory="64Mi")
            body["spec"]["activeDeadlineSeconds"] = deadline
            await c.create_pod(body)
            out.append(name)
            waiting.append(name)
        await asyncio.sleep(0.1)


# ---------------------------------------------------------------------------- the big unit binds


async def test_a_whole_node_pod_binds_within_three_small_lifetimes_while_small_pods_keep_binding(server):
    async with full_cluster(server, spare=1) as (c, _):
        t0 = time.monotonic()
        await c.create_pod(make_pod("big", cpu="4", memory="64Mi"))
        smalls: list[str] = []
        bound: set[str] = set()
        stream = asyncio.ensure_future(small_stream(c, lambda: bool(node_of(c, "big")), smalls, bound))
        try:
            await eventually(lambda: node_of(c, "big"), 3 * LIFE + 4, "the big pod bound")
        finally:
            await stream
        assert time.monotonic() - t0 <= 3 * LIFE + 4
        assert node_of(c, "big").endswith("-n0"), "the big pod went where its room frees first"
        assert len(bound) >= 2, "small pods kept binding meanwhile (on the 2-cpu node)"
        said = await reserved_notes(c, "big")
        assert said and said[0].startswith(f"reserved 1 node(s) for pod {c.ns}/big: waiting for "), said
        turned = [n for n in await notes(c, "FailedScheduling") if f"had capacity reserved for pod {c.ns}/big" in n]
        assert turned, "no small pod was turned away from the held node"


async def test_a_gang_of_four_whole_nodes_binds_whole_within_three_small_lifetimes(server):
    async with full_cluster(server, spare=1) as (c, _):
        await c.create_native_group("big", 4)
        gang = [f"big-{i}" for i in range(4)]
        t0 = time.monotonic()
        for n in gang:
            await c.create_pod(native_member(n, "big", cpu="4"))
        smalls: list[str] = []
        bound: set[str] = set()
        nominated: set[str] = set()

        def whole() -> bool:
            for n in gang:
                p = c.pod(n) or {}
                if (p.get("status") or {}).get("nominatedNodeName"):
                    nominated.add(n)
            return all(node_of(c, n) for n in gang)

        stream = asyncio.ensure_future(small_stream(c, whole, smalls, bound))
        try:
            await eventually(whole, 3 * LIFE + 6, "the gang bound whole")
        finally:
            await stream
        assert time.monotonic() - t0 <= 3 * LIFE + 6
        assert len({node_of(c, n) for n in gang}) == 4
        assert len(bound) >= 2, "small pods kept binding meanwhile (on the 2-cpu node)"
        assert nominated, "the held members carried status.nominatedNodeName"
        said = await reserved_notes(c, "big-0")
        assert said and said[0].startswith(f"reserved 4 node(s) for pod group {c.ns}/big: "), said


# ---------------------------------------------------------------------------- backfill


async def test_a_short_pod_backfills_held_room_and_an_endless_or_long_one_does_not(server):
    async with full_cluster(server, n0=(1, 1, 3, 3), others=4) as (c, _):
        # the big pod holds n0, where its room is whole after 3 s; two of n0's cpus free after 1 s
        await c.create_pod(make_pod("big", cpu="4", memory="64Mi"))
        await eventually(lambda: "Insufficient cpu" in message(c, "big"), 10, "the big pod blocked")
        for name, life in (("endless", None), ("long", 600), ("short", 1)):
            body = make_pod(name, cpu="1", memory="64Mi")
            if life:
                body["spec"]["activeDeadlineSeconds"] = life
            await c.create_pod(body)
        await eventually(lambda: node_of(c, "short"), 10, "the short pod bound")
        assert node_of(c, "short").endswith("-n0"), "the short pod backfilled the held node"
        reason = f"had capacity reserved for pod {c.ns}/big"
        turned = [n for n in await notes(c, "FailedScheduling") if reason in n]
        assert turned, "the endless and the long pod were not turned away by the hold"
        assert not node_of(c, "endless").endswith("-n0") and not node_of(c, "long").endswith("-n0")
        await eventually(lambda: node_of(c, "big"), 10, "the big pod bound, undelayed by the backfill")
        assert node_of(c, "big").endswith("-n0")


async def test_with_one_blocker_without_a_deadline_nothing_backfills(server):
    async with full_cluster(server, blockers_without_deadline=1) as (c, _):
        await c.create_pod(make_pod("big", cpu="4", memory="64Mi"))
        await eventually(lambda: "Insufficient cpu" in message(c, "big"), 10, "the big pod blocked")
        body = make_pod("short", cpu="1", memory="64Mi", activeDeadlineSeconds=1)
        await c.create_pod(body)
        await eventually(lambda: f"had capacity reserved for pod {c.ns}/big" in message(c, "short"), 10,
                         "the short pod turned away")
        said = await eventually(lambda: reserved_notes(c, "big"), 10, "the Reserved event")
        assert "expected start unknown: 1 of them have no activeDeadlineSeconds" in said[-1], said


# ---------------------------------------------------------------------------- who holds


async def test_a_pod_too_big_for_any_node_and_one_no_node_matches_hold_nothing(server):
    async with full_cluster(server) as (c, _):
        await c.create_pod(make_pod("huge", cpu="64", memory="64Mi"))
        await c.create_pod(make_pod("lost", cpu="4", memory="64Mi", node_selector={"no": "such-node"}))
        await eventually(lambda: message(c, "huge") and message(c, "lost"), 10, "both reported")
        await c.create_pod(make_pod("small", cpu="1", memory="64Mi"))
        await eventually(lambda: node_of(c, "small"), 10, "the small pod bound as room frees")
        assert "reserved" not in message(c, "small")


async def test_a_higher_priority_pod_that_never_preempts_binds_on_held_room(server):
    async with full_cluster(server) as (c, _):
        await c.ensure_priority_classes()
        await c.create_pod(make_pod("big", cpu="4", memory="64Mi"))
        await eventually(lambda: "Insufficient cpu" in message(c, "big"), 10, "the big pod blocked")
        await c.create_pod(make_pod("vip", cpu="1", memory="64Mi", priorityClassName="high-never"))
        await eventually(lambda: node_of(c, "vip"), 10, "the vip bound")
        assert "reserved" not in message(c, "vip")
