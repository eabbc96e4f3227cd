"""Two tandem replicas on the simulated cluster: one Lease, one scheduler at a time.

What kube-scheduler promises with ``leaderElect: true``, checked from the
outside: only the holder of the Lease binds (each replica has its own API
client here, so every bind's origin is known), the follower keeps its
caches warm and writes nothing; a holder that dies is replaced within
``leaseDuration + retryPeriod``; a SIGTERM hands the lease over within two
seconds; a holder whose renewals fail stops binding before its lease could
expire, and exits non-zero. Throughout, no node is over-committed and no
bind conflicts with another.

The first two run the replicas in this process (:class:`App`), the others
as real ``tandem-scheduler`` processes, killed and stopped by signals.
Durations are short (lease 2 s, renew deadline 1.5 s, retry 0.25 s); the
bounds on a handover allow :data:`SLACK` on top for a loaded machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

import aiohttp
import yaml

from bench.simcluster import SimCluster
from bench.simcluster import errors as sim_errors
from bench.simcluster.agent import AgentConfig
from bench.simcluster.faults import FaultRule
from bench.simcluster.resources import lookup
from scheduler.apiclient import APIClient, from_kubeconfig
from scheduler.app import App
from scheduler.config import parse_config
from scheduler.framework.clock import Clock
from tests.integration.test_scheduler import BASE_CONFIG, NS, eventually, make_node, make_pod

REPO = Path(__file__).resolve().parents[2]
PODS = lookup("", "v1", "pods")
LEASES = lookup("coordination.k8s.io", "v1", "leases")
LEASE_NS, LEASE_NAME = "kube-system", "tandem-scheduler"

LEASE, RENEW, RETRY = 2.0, 1.5, 0.25
LEADER_ELECTION = {"leaderElect": True, "leaseDuration": "2s", "renewDeadline": "1500ms", "retryPeriod": "250ms",
                   "resourceName": LEASE_NAME, "resourceNamespace": LEASE_NS}
CONFIG_DOC = {**BASE_CONFIG, "leaderElection": LEADER_ELECTION}
SLACK = 0.75          # seconds a loaded 2-core machine may add to a handover (process and loop scheduling)
NODE_CPU_MILLI, POD_CPU_MILLI = 1000, 250


# ---------------------------------------------------------------------------- what the API server saw


@dataclass
class Audit:
    """Every bind and every lease write the simulated cluster stored, when (this process's monotonic clock)."""

    binds: list[tuple[float, str, str]] = field(default_factory=list)      # (when, pod, node)
    conflicts: list[str] = field(default_factory=list)                     # binds answered 409
    holders: list[tuple[float, str]] = field(default_factory=list)         # (when, holderIdentity) per lease write
    overcommitted: list[str] = field(default_factory=list)

    def holder_changes_after(self, t: float, old: str) -> float | None:
        """When the lease first went to someone other than ``old`` (or nobody) after ``t``."""
        for when, holder in self.holders:
            if when > t and holder not in (old, ""):
                return when
        return None


def audit(cluster: SimCluster) -> Audit:
    a = Audit()
    store = cluster.store

    def on_write(verb: str, resource: str, ns: str, name: str, result: Any) -> None:
        now = time.monotonic()
        if resource == "leases.coordination.k8s.io" and name == LEASE_NAME and not isinstance(
                result, sim_errors.APIError):
            a.holders.append((now, result.obj()["spec"].get("holderIdentity") or ""))
        if resource != "pods/binding":
            return
        if isinstance(result, sim_errors.APIError):
            if result.code == 409:
                a.conflicts.append(f"{name}: {result.message}")
            return
        node = result.fields["spec.nodeName"]
        a.binds.append((now, name, node))
        on_node = sum(1 for e in store.table(PODS).objects.values() if e.fields.get("spec.nodeName") == node)
        if on_node * POD_CPU_MILLI > NODE_CPU_MILLI:
            a.overcommitted.append(f"{node}: {on_node} pods of {POD_CPU_MILLI}m at {now:.3f}")

    store.observe(on_write)
    return a


def lease_holder(cluster: SimCluster) -> str:
    obj = cluster.store.get_obj(LEASES, LEASE_NS, LEASE_NAME)
    return ((obj or {}).get("spec") or {}).get("holderIdentity") or ""


def nodes(cluster: SimCluster, count: int) -> None:
    for i in range(count):
        cluster.store.create(lookup("", "v1", "nodes"), "", make_node(f"node-{i}", cpu="1"))


def create_pods(cluster: SimCluster, prefix: str, count: int) -> list[str]:
    names = [f"{prefix}-{i}" for i in range(count)]
    for n in names:
        cluster.store.create(PODS, NS, make_pod(n, cpu=f"{POD_CPU_MILLI}m", memory="16Mi"))
    return names


def bound(cluster: SimCluster, names: list[str]) -> bool:
    return all(((cluster.store.get_obj(PODS, NS, n) or {}).get("spec") or {}).get("nodeName") for n in names)


# ---------------------------------------------------------------------------- replicas in this process


class Tap:
    """One replica's own API client, recording each bind it sent: (pod, node, sent, answered) on the monotonic clock."""

    def __init__(self, client: APIClient) -> None:
        self.client = client
        self.binds: list[tuple[str, str, float, float]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    async def bind(self, namespace: str, name: str, uid: str | None, node: str) -> None:
        sent = time.monotonic()
        await self.client.bind(namespace, name, uid, node)
        self.binds.append((name, node, sent, time.monotonic()))

    def writes(self) -> int:
        """Requests other than reads this client sent (binds, patches, creates, deletes)."""
        return sum(n for (verb, _), n in self.client.counts.items() if verb not in ("get", "list", "watch"))


@contextlib.asynccontextmanager
async def replica(kubeconfig: Path, identity: str) -> AsyncIterator[tuple[App, Tap]]:
    """An App with a client of its own (and one for its lease, as kube-scheduler's), named ``identity``."""
    cfg = parse_config(CONFIG_DOC, "<test>")
    clock = Clock()        # the replica's one clock: its clients, its elector, its scheduler
    async with await from_kubeconfig(str(kubeconfig), qps=cfg.client_qps, burst=cfg.client_burst, clock=clock) as client, \
            await from_kubeconfig(str(kubeconfig), qps=0, clock=clock) as lease_client:
        tap = Tap(client)
        async with App(cfg, client=tap, lease_client=lease_client, identity=identity, clock=clock) as app:
            yield app, tap


def master_status(app: App) -> float | None:
    return app.metrics.registry.get_sample_value("leader_election_master_status", {"name": LEASE_NAME})


async def test_of_two_replicas_only_the_holder_binds_and_the_follower_stays_warm_and_writes_nothing(tmp_path):
    kc = tmp_path / "kubeconfig"
    async with SimCluster(nodes=0, agent=AgentConfig(ready_delay=0.05, tick=0.01), kubeconfig=kc) as cluster:
        nodes(cluster, 6)
        seen = audit(cluster)
        async with replica(kc, "replica-a") as (a, tap_a), replica(kc, "replica-b") as (b, tap_b):
            await eventually(lambda: a.is_leader() or b.is_leader(), 5, "a leader")
            leader, follower = (a, b) if a.is_leader() else (b, a)
            lead_tap, follow_tap = (tap_a, tap_b) if leader is a else (tap_b, tap_a)
            names = create_pods(cluster, "web", 24)
            await eventually(lambda: bound(cluster, names), 15, "every pod bound")
            # the store shows a bind a moment before the leader's client has its answer and records it
            await eventually(lambda: len(lead_tap.binds) >= len(names), 5, "the leader's client to have every answer")

            assert lease_holder(cluster) == leader.identity
            assert sorted(p for p, *_ in lead_tap.binds) == sorted(names)
            assert follow_tap.binds == [] and follow_tap.writes() == 0, "the follower wrote nothing at all"
            assert not follower.is_leader() and not follower.lost_leadership
            assert (master_status(leader), master_status(follower)) == (1.0, 0.0)
            # the follower's informers are warm: it has seen every pod on its node
            await eventually(lambda: all(follower.scheduler.pods.get(p.uid) is not None
                                         and follower.scheduler.pods[p.uid].node_name
                                         for p in leader.scheduler.pods.values()), 5, "the follower's cache")
        assert seen.overcommitted == [] and seen.conflicts == []
        assert lease_holder(cluster) == "", "the last one out released the lease"


async def test_a_replica_whose_renewals_fail_stops_binding_before_its_lease_could_expire(tmp_path):
    kc = tmp_path / "kubeconfig"
    async with SimCluster(nodes=0, agent=AgentConfig(ready_delay=0.05, tick=0.01), kubeconfig=kc) as cluster:
        nodes(cluster, 20)
        seen = audit(cluster)
        async with replica(kc, "replica-a") as (a, tap_a):
            await eventually(a.is_leader, 5, "replica-a to lead")
            async with replica(kc, "replica-b") as (b, tap_b):
                stop = asyncio.Event()

                async def keep_creating() -> None:     # a steady stream of pods until the lease is lost
                    i = 0
                    while not stop.is_set():
                        create_pods(cluster, f"p{i}", 1)
                        i += 1
                        await asyncio.sleep(0.05)

                creator = asyncio.create_task(keep_creating())
                try:
                    await eventually(lambda: len(tap_a.binds) >= 5, 10, "replica-a binding")
                    # every renewal fails from now on, for both replicas
                    cluster.faults.rules = [FaultRule(verb="update", resource="leases.coordination.k8s.io",
                                                      error_rate=1.0)]
                    await asyncio.wait_for(a.wait(), RENEW + RETRY + 5)
                    stop.set()
                    await creator
                    assert a.lost_leadership and not a.is_leader()
                    last_renewal = max(t for t, h in seen.holders if h == "replica-a")
                    expiry = last_renewal + LEASE
                    assert tap_a.binds and max(done for *_, done in tap_a.binds) < expiry, \
                        "a bind of replica-a's ended after its lease could have expired"
                    assert not b.is_leader() and tap_b.binds == [], "nobody can take a lease it cannot write"
                    sent_before = len(tap_a.binds)
                    cluster.faults.rules = []
                    await eventually(b.is_leader, LEASE + RETRY + 5, "replica-b to take over")
                    assert b.elector.leader == "replica-b" and time.monotonic() >= expiry
                    after = create_pods(cluster, "after", 8)
                    await eventually(lambda: bound(cluster, after), 10, "replica-b binding")
                    assert len(tap_a.binds) == sent_before, "replica-a bound nothing after it lost the lease"
                    assert min(sent for *_, sent, _ in tap_b.binds) > max(done for *_, done in tap_a.binds)
                finally:
                    stop.set()
                    await creator
                await eventually(lambda: bound(cluster, [p["metadata"]["name"] for p in (
                    e.obj() for e in cluster.store.table(PODS).objects.values())]), 15, "every pod bound")
        assert seen.overcommitted == [] and seen.conflicts == []


# ---------------------------------------------------------------------------- replicas as processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Process:
    proc: asyncio.subprocess.Process
    port: int
    lines: list[str] = field(default_factory=list)
    reader: asyncio.Task[None] | None = None

    def said(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    async def get(self, path: str) -> tuple[int, str]:
        async with aiohttp.ClientSession() as s:
            async with s.get(f"http://127.0.0.1:{self.port}{path}") as r:
                return r.status, await r.text()

    async def exit_code(self, timeout: float) -> int:
        code = await asyncio.wait_for(self.proc.wait(), timeout)
        if self.reader is not None:
            await self.reader
        return code


@contextlib.asynccontextmanager
async def processes(tmp_path: Path, kubeconfig: Path, count: int,
                    leader_election: dict[str, Any] = LEADER_ELECTION) -> AsyncIterator[list[Process]]:
    """``count`` tandem-scheduler processes on the cluster, with metrics on a port each; killed at the end."""
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({**CONFIG_DOC, "leaderElection": leader_election}))
    out: list[Process] = []
    try:
        for _ in range(count):
            out.append(await spawn(kubeconfig, cfg))
        yield out
    finally:
        await reap(out)


async def spawn(kubeconfig: Path, config: Path) -> Process:
    """One ``tandem-scheduler`` process (plain HTTP on a port of its own, -v=2), its output collected in ``lines``."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "scheduler", "--kubeconfig", str(kubeconfig), "--config", str(config),
        "--bind-address", "127.0.0.1", "--port", str(port), "--insecure-serving", "-v=2",
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    p = Process(proc, port)

    async def read() -> None:
        assert p.proc.stdout is not None
        async for line in p.proc.stdout:
            p.lines.append(line.decode(errors="replace").rstrip())

    p.reader = asyncio.create_task(read())
    return p


async def reap(procs: list[Process]) -> None:
    """Kill whichever of ``procs`` still runs and wait for every one's output to end."""
    for p in procs:
        if p.proc.returncode is None:
            p.proc.kill()
            await p.proc.wait()
        if p.reader is not None:
            await asyncio.gather(p.reader, return_exceptions=True)


async def leader_of(procs: list[Process], timeout: float = 30.0) -> Process:
    """The process that says it acquired the lease (each says so once it does)."""
    acquired = f"successfully acquired lease {LEASE_NS}/{LEASE_NAME}"
    holders = await eventually(lambda: [p for p in procs if p.said(acquired)], timeout, "a process to take the lease")
    assert len(holders) == 1, [p.lines for p in holders]
    return holders[0]


async def ready(p: Process) -> bool:
    try:
        return (await p.get("/readyz"))[0] == 200
    except aiohttp.ClientError:
        return False


@contextlib.asynccontextmanager
async def holder_and_follower(tmp_path: Path) -> AsyncIterator[tuple[SimCluster, Audit, Process, Process]]:
    """Two tandem-scheduler processes on a cluster of 6 nodes: the one that took the lease has bound 8 pods,
    the other reports ready. Afterwards: no node was over-committed and no bind conflicted."""
    kc = tmp_path / "sim.kubeconfig"
    async with SimCluster(nodes=0, agent=AgentConfig(ready_delay=0.05, tick=0.01), kubeconfig=kc) as cluster:
        nodes(cluster, 6)
        seen = audit(cluster)
        async with processes(tmp_path, kc, 2) as procs:
            holder = await leader_of(procs)
            (follower,) = [p for p in procs if p is not holder]
            await eventually(lambda: ready(follower), 30, "the follower to report ready")
            first = create_pods(cluster, "before", 8)
            await eventually(lambda: bound(cluster, first), 15, "the holder to bind")
            yield cluster, seen, holder, follower
        assert seen.overcommitted == [] and seen.conflicts == []


async def test_killing_the_holder_hands_over_within_lease_duration_plus_retry_period(tmp_path):
    async with holder_and_follower(tmp_path) as (cluster, seen, holder, follower):
        old = lease_holder(cluster)
        killed = time.monotonic()
        holder.proc.send_signal(signal.SIGKILL)
        after = create_pods(cluster, "after", 8)     # waiting for whoever leads next
        took = await eventually(lambda: seen.holder_changes_after(killed, old), LEASE + RETRY + 10,
                                "the follower to take the lease")
        assert took - killed <= LEASE + RETRY + SLACK, f"took over {took - killed:.2f}s after the kill"
        await eventually(lambda: bound(cluster, after), 15, "the new holder to bind")
        assert follower.said(f"successfully acquired lease {LEASE_NS}/{LEASE_NAME}")
        assert follower.proc.returncode is None
        assert all(t >= took for t, name, _ in seen.binds if name.startswith("after"))


async def test_sigterm_releases_the_lease_and_the_follower_takes_over_within_two_seconds(tmp_path):
    async with holder_and_follower(tmp_path) as (cluster, seen, holder, follower):
        status = f'leader_election_master_status{{name="{LEASE_NAME}"}}'
        assert f"{status} 1.0" in (await holder.get("/metrics"))[1]
        assert f"{status} 0.0" in (await follower.get("/metrics"))[1]
        old = lease_holder(cluster)
        stopped = time.monotonic()
        holder.proc.send_signal(signal.SIGTERM)
        took = await eventually(lambda: seen.holder_changes_after(stopped, old), 10, "the follower to take over")
        assert took - stopped <= 2.0, f"handed over {took - stopped:.2f}s after SIGTERM"
        assert await holder.exit_code(10) == 0, "\n".join(holder.lines)
        assert holder.said(f"released lease {LEASE_NS}/{LEASE_NAME}")
        after = create_pods(cluster, "after", 8)
        await eventually(lambda: bound(cluster, after), 15, "the new holder to bind")
        assert f"{status} 1.0" in (await follower.get("/metrics"))[1]


async def test_a_process_that_loses_its_lease_says_so_and_exits_non_zero(tmp_path):
    kc = tmp_path / "sim.kubeconfig"
    async with SimCluster(nodes=0, agent=AgentConfig(ready_delay=0.05, tick=0.01), kubeconfig=kc) as cluster:
        nodes(cluster, 2)
        async with processes(tmp_path, kc, 1) as (only,):
            await leader_of([only])
            cluster.faults.rules = [FaultRule(verb="*", resource="leases.coordination.k8s.io", error_rate=1.0)]
            assert await only.exit_code(RENEW + 10) == 1
            assert only.said("leaderelection lost"), "\n".join(only.lines)
            assert only.said(f"failed to renew lease {LEASE_NS}/{LEASE_NAME}")
