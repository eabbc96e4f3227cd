"""Held capacity on both servers: the simulated cluster and a real kube-apiserver 1.36.

What is tested is what a user sees of CapacityReservation (plugins/capacity_reservation.py) with tandem's
built-in configuration, where the plugin is in the default profile: a whole-node pod and a whole-node gang
bind within three small-pod lifetimes while a stream of small pods of the same priority keeps coming (and
keeps binding on room the unit does not need), where without a hold the stream would take every freed cpu
first; the held unit's members show ``status.nominatedNodeName`` and a ``Reserved`` event, and a pod the hold
turns away says so in upstream's ``0/N nodes are available`` words; a short pod backfills held room, a pod
without a deadline and one whose deadline ends after the unit's expected start do not; with an awaited pod
without a deadline nothing backfills; a pod too big for every node and one no node matches hold nothing;
a higher-priority pod that never preempts is not held back. tests/unit/test_capacity_reservation.py has the
same cases in process on a fake clock; here they run against the API, on the real clock.

How: tandem runs in process (``App``, as in tests/integration/test_gangs_native.py, whose namespace-per-test
harness and :class:`Cluster` this module uses, and whose ``server`` fixture it copies). Every case starts from 4-cpu nodes full
of 1-cpu "filler" pods, bound by name (no scheduler), whose deadlines end first on node n0. There is no
kubelet on the real server, so the test plays it on both servers (:class:`Kubelet`): a bound pod is marked
Running with a startTime through pods/status, and a running pod is deleted (``gracePeriodSeconds: 0``) once
``startTime + activeDeadlineSeconds`` has passed, which is when the scheduler expects it to end; on the
simulated cluster the node agent may mark it Running first, or fail it with DeadlineExceeded, which the test
then deletes. startTime has whole seconds, so a pod lives up to a second less than its deadline; the lifetimes
here (1 to 4 s) leave each case at least a second between the events it tells apart. The real clock is read
only through bounded waits for conditions (``eventually``); the kubelet and the small-pod stream poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import time
from pathlib import Path
from typing import AsyncIterator, Callable

import pytest
import pytest_asyncio

from bench.simcluster.agent import AgentConfig
from scheduler.apiclient import NotFound
from scheduler.model.fields import parse_time
from tests.integration.test_gangs_native import Cluster, native_member, running
from tests.integration.test_preemption import HIGH_NEVER
from tests.integration.test_scheduler import eventually, make_node, make_pod
from tests.support import envtest, servers
from tests.support.servers import Server

pytestmark = pytest.mark.asyncio(loop_scope="module")

LIFE = 2            # the streamed small pods' activeDeadlineSeconds
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
                await self.end(name)   # the simulated cluster's agent failed it at its deadline
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
async def full_cluster(server: Server, nodes: int = 4, spare: int = 0, endless: int = 0,
                       n0: tuple[int, ...] = (1, 1, 2, 2), others: int = 3) -> AsyncIterator[Cluster]:
    """``nodes`` 4-cpu nodes, each full of four 1-cpu fillers (n0's live ``n0`` s, the others' ``others`` s; the
    first ``endless`` of each node's have no deadline), ``spare`` empty 2-cpu nodes (room no whole-node unit
    can use), tandem, and the kubelet; entered once every filler has run."""
    tag = f"{server.kind}{next(_ids)}"
    made = [make_node(f"{tag}-n{i}", cpu="4" if i < nodes else "2") for i in range(nodes + spare)]
    async with running(server, made) as c:
        for i in range(nodes):
            for k in range(4):
                body = make_pod(f"fill-{i}-{k}", cpu="1", memory="64Mi", scheduler="default-scheduler",
                                node_name=f"{tag}-n{i}")
                if k >= endless:
                    body["spec"]["activeDeadlineSeconds"] = n0[k] if i == 0 else others
                await c.create_pod(body)
        task = asyncio.ensure_future(Kubelet(c).run())
        ran: set[str] = set()

        def fillers_running() -> bool:   # (the first to end may be gone already)
            ran.update(p["metadata"]["name"] for p in list(c.pods.store.values())
                       if (p.get("status") or {}).get("startTime"))
            return len(ran) >= 4 * nodes

        try:
            await eventually(fillers_running, 10, "the fillers running")
            yield c
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def on(c: Cluster, name: str, node: int) -> bool:
    """Is pod ``name`` bound to the test's node ``n<node>``?"""
    return c.node_of(name).endswith(f"-n{node}")


def noting_nominations(c: Cluster, seen: dict[str, str], names: list[str],
                       done: Callable[[], object] | None = None) -> Callable[[], object]:
    """A wait condition, ``done()`` (by default: all of ``names`` bound), that notes the status.nominatedNodeName
    of each of ``names`` in ``seen`` while it is pending (a bind clears it on the real server)."""

    def cond() -> object:
        for n in names:
            nominated = ((c.pod(n) or {}).get("status") or {}).get("nominatedNodeName")
            if nominated and not c.node_of(n):
                seen[n] = nominated
        return done() if done is not None else all(c.node_of(n) for n in names)

    return cond


async def notes(c: Cluster, reason: str) -> list[str]:
    """The notes of the namespace's events with ``reason``, about any object."""
    items = (await c.client.list(f"/apis/events.k8s.io/v1/namespaces/{c.ns}/events"))["items"]
    return [e.get("note", "") for e in items if e.get("reason") == reason]


def turned_away(what: str) -> re.Pattern[str]:
    """A FailedScheduling message that names the hold for ``what`` ("pod ns/big"), in upstream's FitError words."""
    return re.compile(rf"^0/\d+ nodes are available: (.+, )?\d+ node\(s\) had capacity reserved for "
                      rf"{re.escape(what)}[,.]")


@contextlib.asynccontextmanager
async def small_stream(c: Cluster) -> AsyncIterator[set[str]]:
    """1-cpu pods that live ``LIFE`` s, created so that four are always waiting, for the block; it gets the set
    of those seen bound so far (the kubelet deletes them when they end)."""
    made: list[str] = []
    bound: set[str] = set()

    async def stream() -> None:
        while True:
            bound.update(x for x in made if c.node_of(x))
            waiting = [x for x in made if x not in bound]
            for _ in range(4 - len(waiting)):
                name = f"small-{len(made)}"
                await c.create_pod(make_pod(name, cpu="1", memory="64Mi", activeDeadlineSeconds=LIFE))
                made.append(name)
            await asyncio.sleep(0.1)

    task = asyncio.ensure_future(stream())
    try:
        yield bound
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def blocked(c: Cluster, name: str) -> None:
    await eventually(lambda: "Insufficient cpu" in c.message(name), 10, f"{name} blocked by capacity")


REMAINING = r"waiting for \d+ running pod\(s\) to end, expected in \d+s"


# ---------------------------------------------------------------------------- the big unit binds


async def test_a_whole_node_pod_binds_within_three_small_lifetimes_while_small_pods_keep_binding(server):
    async with full_cluster(server, spare=1) as c:
        t0 = time.monotonic()
        await c.create_pod(make_pod("big", cpu="4", memory="64Mi"))
        nominated: dict[str, str] = {}
        whole = noting_nominations(c, nominated, ["big"])
        async with small_stream(c) as bound:
            await eventually(whole, 3 * LIFE, "the big pod bound within three small-pod lifetimes")
        waited = time.monotonic() - t0
        assert on(c, "big", 0), "the big pod went where its room freed first"
        assert nominated == {"big": c.node_of("big")}, "the held pod was nominated to the node it held"
        assert len(bound) >= 2, "small pods kept binding meanwhile (on the 2-cpu node)"
        what = f"pod {c.ns}/big"
        said = await c.events("big", "Reserved")
        assert any(re.fullmatch(f"reserved 1 node\\(s\\) for {re.escape(what)}: {REMAINING}", n) for n in said), said
        away = [n for n in await notes(c, "FailedScheduling") if turned_away(what).search(n)]
        assert away, f"no small pod was turned away from the held node (the big pod bound after {waited:.1f}s)"


async def test_a_gang_of_four_whole_nodes_binds_whole_within_three_small_lifetimes(server):
    async with full_cluster(server, spare=1) as c:
        t0 = time.monotonic()
        await c.create_native_group("big", 4)
        gang = [f"big-{i}" for i in range(4)]
        for n in gang:
            await c.create_pod(native_member(n, "big", cpu="4"))
        nominated: dict[str, str] = {}
        whole = noting_nominations(c, nominated, gang)
        async with small_stream(c) as bound:
            await eventually(whole, 3 * LIFE, "the gang bound whole within three small-pod lifetimes")
        waited = time.monotonic() - t0
        assert {int(c.node_of(n)[-1]) for n in gang} == {0, 1, 2, 3}, "one member a whole node"
        assert c.first_bind_placed == {"big": 4}, "the first bind came after every member had a node"
        assert sorted(nominated) == gang and len(set(nominated.values())) == 4, (
            f"every held member was nominated, each to a node of its own: {nominated}")
        assert len(bound) >= 2, "small pods kept binding meanwhile (on the 2-cpu node)"
        what = f"pod group {c.ns}/big"
        for n in gang:
            said = await c.events(n, "Reserved")
            assert any(re.fullmatch(f"reserved 4 node\\(s\\) for {re.escape(what)}: {REMAINING}", x) for x in said), (
                n, said)
        away = [n for n in await notes(c, "FailedScheduling") if turned_away(what).search(n)]
        assert away, f"no small pod was turned away from a held node (the gang bound after {waited:.1f}s)"


# ---------------------------------------------------------------------------- backfill


async def test_a_short_pod_backfills_held_room_and_an_endless_or_late_one_does_not(server):
    # the big pod holds n0, where its room is whole after 3 s; two of n0's cpus free after 1 s; the other
    # nodes stay full for 4 s
    async with full_cluster(server, n0=(1, 1, 3, 3), others=4) as c:
        await c.create_pod(make_pod("big", cpu="4", memory="64Mi"))
        await blocked(c, "big")
        await c.create_pod(make_pod("endless", cpu="1", memory="64Mi"))
        await c.create_pod(make_pod("late", cpu="1", memory="64Mi", activeDeadlineSeconds=4))   # ends after 3 s
        await c.create_pod(make_pod("short", cpu="1", memory="64Mi", activeDeadlineSeconds=1))  # before
        held = turned_away(f"pod {c.ns}/big")
        for name in ("endless", "late"):
            await eventually(lambda name=name: held.search(c.message(name)), 10, f"{name} turned away by the hold")
        await eventually(lambda: c.node_of("short"), 10, "the short pod bound")
        assert on(c, "short", 0), "the short pod backfilled the held node"
        await eventually(lambda: c.node_of("big"), 10, "the big pod bound, undelayed by the backfill")
        where = {n: c.node_of(n) for n in ("big", "short", "endless", "late")}
        assert on(c, "big", 0), where
        assert not on(c, "endless", 0) and not on(c, "late", 0), where


async def test_with_one_awaited_pod_without_a_deadline_nothing_backfills(server):
    # one node: the big pod holds it, waiting for an endless filler among others that end after 1 and 2 s
    async with full_cluster(server, nodes=1, endless=1) as c:
        await c.create_pod(make_pod("big", cpu="4", memory="64Mi"))
        await blocked(c, "big")
        await c.create_pod(make_pod("short", cpu="1", memory="64Mi", activeDeadlineSeconds=1))
        want = (f"0/1 nodes are available: 1 node(s) had capacity reserved for pod {c.ns}/big. no new claims to "
                "deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")
        await eventually(lambda: c.message("short") == want, 10, "the short pod turned away (once room freed)")
        said = await eventually(lambda: c.events("big", "Reserved"), 10, "the Reserved event")
        assert any(re.fullmatch(f"reserved 1 node\\(s\\) for pod {re.escape(c.ns)}/big: waiting for \\d running "
                                "pod\\(s\\) to end, expected start unknown: 1 of them have no activeDeadlineSeconds",
                                n) for n in said), said
        assert not c.node_of("short")


# ---------------------------------------------------------------------------- who holds, and for whom


async def test_a_pod_too_big_for_any_node_and_one_no_node_matches_hold_nothing(server):
    async with full_cluster(server) as c:
        await c.create_pod(make_pod("huge", cpu="64", memory="64Mi"))
        await c.create_pod(make_pod("lost", cpu="4", memory="64Mi", node_selector={"no": "such-node"}))
        await eventually(lambda: c.message("huge") and c.message("lost"), 10, "both reported")
        await c.create_pod(make_pod("small", cpu="1", memory="64Mi"))
        nominated: dict[str, str] = {}
        await eventually(noting_nominations(c, nominated, ["huge", "lost"], lambda: c.node_of("small")), 10,
                         "the small pod bound as room frees")
        assert on(c, "small", 0), "the small pod took the room that freed first, held for nobody"
        assert not nominated, nominated
        assert not (await c.events("huge", "Reserved")) and not (await c.events("lost", "Reserved"))
        assert not any("capacity reserved" in n for n in await notes(c, "FailedScheduling"))


async def test_a_higher_priority_pod_that_never_preempts_binds_on_held_room(server):
    # n0 (held for the big pod) frees two cpus after 1 s and is whole after 3 s; the others after 4 s
    async with full_cluster(server, n0=(1, 1, 3, 3), others=4) as c:
        await c.ensure_priority_classes()
        await c.create_pod(make_pod("big", cpu="4", memory="64Mi"))
        await blocked(c, "big")
        await c.create_pod(make_pod("plain", cpu="1", memory="64Mi"))   # of the big pod's priority
        await eventually(lambda: turned_away(f"pod {c.ns}/big").search(c.message("plain")), 10,
                         "a pod of equal priority turned away by the hold")
        await c.create_pod(make_pod("vip", cpu="1", memory="64Mi", priorityClassName=HIGH_NEVER))
        await eventually(lambda: c.node_of("vip"), 10, "the higher-priority pod bound")
        assert on(c, "vip", 0), "the higher-priority pod took held room (before any other room freed)"
