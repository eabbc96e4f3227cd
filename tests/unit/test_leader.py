"""scheduler/leader.py: Lease leader election on a fake clock, and the gate on the scheduler's writes.

The electors talk to the simulated cluster's store (the same optimistic
concurrency, 404s and 409s its HTTP API answers, which tests/simcluster
hold to a real kube-apiserver) through a thin client per replica that can
fail or hang its calls. Time is a FakeClock that moves only in
:func:`elapse`, which lets every task run between small steps: nothing
here sleeps, and every time asserted is exact.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from typing import Any, Callable

import orjson
import pytest

from bench.simcluster import errors as sim_errors
from bench.simcluster.resources import lookup
from bench.simcluster.store import Store
from scheduler.apiclient import APIClient, Conflict, NotFound, ServerError, error_from_status
from scheduler.config import LeaderElection
from scheduler.framework.clock import FakeClock
from scheduler.leader import LeaderElector, LeaderOnlyWrites, LeaseRecord, NotLeader, default_identity, micro_time
from scheduler.observe import Metrics
from tests.support.waiting import settle

LEASES = lookup("coordination.k8s.io", "v1", "leases")
NS, NAME = "kube-system", "tandem-scheduler"
CONFIG = LeaderElection(True, 15.0, 10.0, 2.0, "leases", NAME, NS)
MICRO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


class StoreClient:
    """One replica's view of the Lease API: get, create, update on the store, each a request that can fail.

    ``fail``: verbs answered 500; ``hang``: verbs that never answer; ``before_update``: run just before
    an update reaches the store (another replica's write winning the race).
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.calls: list[str] = []
        self.fail: set[str] = set()
        self.hang: set[str] = set()
        self.before_update: Callable[[], None] | None = None

    async def _call(self, verb: str, fn: Callable[[], Any]) -> Any:
        self.calls.append(verb)
        await asyncio.sleep(0)            # a request takes at least a turn of the loop
        if verb in self.hang:
            await asyncio.Event().wait()
        if verb in self.fail:
            raise ServerError(500, "InternalError", f"injected fault: {verb} leases")
        try:
            return fn()
        except sim_errors.APIError as exc:
            raise error_from_status(exc.code, exc.status()) from exc

    @staticmethod
    def _where(path: str) -> tuple[str, str]:
        m = re.fullmatch(r"/apis/coordination\.k8s\.io/v1/namespaces/([^/]+)/leases(?:/([^/]+))?", path)
        assert m, path
        return m.group(1), m.group(2) or ""

    async def get(self, path: str) -> dict[str, Any]:
        ns, name = self._where(path)
        return await self._call("get", lambda: self.store.get(LEASES, ns, name).obj())

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        ns, _ = self._where(path)
        return await self._call("create", lambda: self.store.create(LEASES, ns, orjson.loads(orjson.dumps(body))).obj())

    async def update(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        ns, name = self._where(path)

        def write() -> dict[str, Any]:
            if self.before_update is not None:
                hook, self.before_update = self.before_update, None
                hook()
            return self.store.update(LEASES, ns, name, orjson.loads(orjson.dumps(body))).obj()

        return await self._call("update", write)


class NoJitter:
    def random(self) -> float:
        return 0.0


class Replica:
    """An elector, its client, its metrics and what its callbacks saw."""

    def __init__(self, store: Store, clock: FakeClock, name: str, config: LeaderElection = CONFIG) -> None:
        self.client = StoreClient(store)
        self.metrics = Metrics()
        self.started: list[float] = []
        self.stopped: list[float] = []
        self.clock = clock
        self.elector = LeaderElector(self.client, config, identity=f"host_{name}", clock=clock, metrics=self.metrics,
                                     on_started_leading=lambda: self.started.append(clock()),
                                     on_stopped_leading=lambda: self.stopped.append(clock()), rng=NoJitter())
        self.task: asyncio.Task[None] | None = None

    def start(self) -> "Replica":
        self.task = asyncio.get_running_loop().create_task(self.elector.run())
        return self

    async def crash(self) -> None:
        """Gone without a word: no release, no more renewals."""
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)

    @property
    def master_status(self) -> float | None:
        return self.metrics.registry.get_sample_value("leader_election_master_status", {"name": NAME})


def lease(store: Store) -> dict[str, Any]:
    obj = store.get_obj(LEASES, NS, NAME)
    assert obj is not None, "no lease"
    return obj


def spec(store: Store) -> dict[str, Any]:
    return lease(store)["spec"]


def plant(store: Store, holder: str, duration: int, transitions: int, at: str) -> None:
    """A lease some other replica wrote, with ``at`` as its acquire and renew time."""
    store.create(LEASES, NS, {"metadata": {"name": NAME}, "spec": {
        "holderIdentity": holder, "leaseDurationSeconds": duration, "leaseTransitions": transitions,
        "acquireTime": at, "renewTime": at}})


async def elapse(clock: FakeClock, seconds: float, dt: float = 1 / 16,
                 check: Callable[[], None] | None = None) -> None:
    """Move the fake clock ``seconds`` forward in steps of ``dt``, letting every task run after each step."""
    for _ in range(round(seconds / dt)):
        clock.advance(dt)
        await settle()
        if check is not None:
            check()


async def until(clock: FakeClock, cond: Callable[[], bool], limit: float, dt: float = 1 / 16) -> float:
    """Advance until ``cond()``; returns the fake time it took (fails after ``limit`` seconds)."""
    start = clock()
    await settle()
    while not cond():
        assert clock() - start <= limit, f"not within {limit}s of fake time"
        clock.advance(dt)
        await settle()
    return clock() - start


async def leader_and_follower(store: Store, clock: FakeClock) -> tuple[Replica, Replica]:
    """Replica a, which took the missing lease at once, and replica b, started just after it."""
    a = Replica(store, clock, "a").start()
    await settle()
    assert a.elector.is_leader()
    return a, Replica(store, clock, "b").start()


@pytest.fixture
def store() -> Store:
    return Store()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=500.0, wall_start=1_767_225_600.0)


# ---------------------------------------------------------------------------- acquiring and renewing


async def test_a_missing_lease_is_created_and_held(store: Store, clock: FakeClock) -> None:
    a = Replica(store, clock, "a")
    assert a.master_status == 0.0, "the gauge exists, at 0, before the first attempt"
    a.start()
    await settle()
    assert a.elector.is_leader() and a.elector.leader == "host_a"
    assert a.started == [500.0] and a.master_status == 1.0
    s = spec(store)
    assert (s["holderIdentity"], s["leaseDurationSeconds"], s["leaseTransitions"]) == ("host_a", 15, 0)
    assert s["acquireTime"] == s["renewTime"] == "2026-01-01T00:00:00.000000Z"
    assert a.client.calls == ["get", "create"]
    await a.crash()


async def test_the_holder_renews_every_retry_period_without_reading_first(store: Store, clock: FakeClock) -> None:
    a = Replica(store, clock, "a").start()
    await settle()
    acquired = spec(store)["acquireTime"]
    versions = [int(lease(store)["metadata"]["resourceVersion"])]
    for _ in range(3):
        await elapse(clock, 2.0)
        versions.append(int(lease(store)["metadata"]["resourceVersion"]))
    s = spec(store)
    assert versions == sorted(set(versions)), "one write per retryPeriod"
    assert s["renewTime"] == micro_time(clock.wall()) and MICRO.fullmatch(s["renewTime"])
    assert (s["acquireTime"], s["leaseTransitions"], s["holderIdentity"]) == (acquired, 0, "host_a")
    assert a.client.calls == ["get", "create", "update", "update", "update"]
    assert a.started == [500.0] and a.stopped == [] and a.elector.is_leader()
    await a.crash()


async def test_a_follower_never_takes_a_lease_that_is_being_renewed(store: Store, clock: FakeClock) -> None:
    a, b = await leader_and_follower(store, clock)
    await elapse(clock, 60.0, dt=1 / 8, check=lambda: not b.elector.is_leader())
    assert b.started == [] and b.master_status == 0.0 and b.elector.leader == "host_a"
    assert spec(store)["leaseTransitions"] == 0 and spec(store)["holderIdentity"] == "host_a"
    assert set(b.client.calls) == {"get"}, "a follower only reads while the lease is held"
    await a.crash()
    await b.crash()


async def test_a_follower_takes_over_an_abandoned_lease_after_it_expires_with_one_more_transition(
        store: Store, clock: FakeClock) -> None:
    a, b = await leader_and_follower(store, clock)
    await elapse(clock, 5.0)              # a renewed at 502 and 504; b saw each change
    await a.crash()                       # its last renewal was at 504; b saw it by its next read
    last_renewal = 504.0
    await until(clock, lambda: b.elector.is_leader(), limit=30.0)
    # expired leaseDuration after b saw the change, and b wakes up for that moment: within L + R of the renewal
    assert last_renewal + CONFIG.lease_duration <= clock() <= \
        last_renewal + CONFIG.lease_duration + CONFIG.retry_period + 1 / 16, clock()
    s = spec(store)
    assert (s["holderIdentity"], s["leaseTransitions"]) == ("host_b", 1)
    assert s["acquireTime"] == s["renewTime"] == micro_time(clock.wall())
    assert b.started == [clock()] and b.master_status == 1.0
    await b.crash()


async def test_expiry_is_judged_by_when_the_change_was_seen_not_by_the_timestamps_written(
        store: Store, clock: FakeClock) -> None:
    # another holder's record, written by a clock far behind ours: the timestamps say "long expired"
    plant(store, "elsewhere_1", 15, 4, "2001-01-01T00:00:00.000000Z")
    b = Replica(store, clock, "b").start()
    took = await until(clock, lambda: b.elector.is_leader(), limit=30.0)
    # a full leaseDuration of our own clock from the first sight of the record, and not a retry later
    assert 15.0 <= took <= 15.0 + 1 / 16, took
    assert spec(store)["leaseTransitions"] == 5
    await b.crash()


async def test_a_record_that_keeps_changing_keeps_a_follower_out_whatever_its_timestamps(
        store: Store, clock: FakeClock) -> None:
    plant(store, "elsewhere_1", 15, 0, "2001-01-01T00:00:00.000000Z")
    b = Replica(store, clock, "b").start()
    for i in range(6):                    # the holder renews every 10 s (skewed clock: its renewTime goes back)
        await elapse(clock, 10.0, dt=1 / 8)
        cur = lease(store)
        cur["spec"]["renewTime"] = f"2000-12-31T23:59:{50 - i:02d}.000000Z"
        store.update(LEASES, NS, NAME, cur)
    assert not b.elector.is_leader() and b.started == []
    await b.crash()


# ---------------------------------------------------------------------------- letting go


async def test_release_hands_the_lease_over_at_the_followers_next_retry(store: Store, clock: FakeClock) -> None:
    a, b = await leader_and_follower(store, clock)
    await elapse(clock, 3.0)
    a.task.cancel()                       # a graceful stop: the loop ends, then the release
    await asyncio.gather(a.task, return_exceptions=True)
    assert await a.elector.release() is True
    assert not a.elector.is_leader() and a.master_status == 0.0 and a.stopped == []
    s = spec(store)
    # client-go's release: no holder, a one-second lease, the transitions kept
    assert (s["holderIdentity"], s["leaseDurationSeconds"], s["leaseTransitions"]) == ("", 1, 0)
    took = await until(clock, lambda: b.elector.is_leader(), limit=CONFIG.retry_period)
    assert took <= CONFIG.retry_period
    assert (spec(store)["holderIdentity"], spec(store)["leaseTransitions"]) == ("host_b", 1)
    assert await a.elector.release() is False, "released once; nothing more to write"
    await b.crash()


async def test_a_follower_releases_nothing(store: Store, clock: FakeClock) -> None:
    a, b = await leader_and_follower(store, clock)
    await elapse(clock, 1.0)
    before = lease(store)["metadata"]["resourceVersion"]
    await b.crash()
    assert await b.elector.release() is False
    assert lease(store)["metadata"]["resourceVersion"] == before
    await a.crash()


async def test_failed_renewals_end_leadership_before_the_lease_could_expire(store: Store, clock: FakeClock) -> None:
    a, b = await leader_and_follower(store, clock)
    await elapse(clock, 4.0)              # renewed at 502 and 504
    last_renewal = 504.0
    a.client.fail = {"get", "update"}     # the API server answers a with 500s from now on

    def never_two() -> None:
        assert not (a.elector.is_leader() and b.elector.is_leader()), f"two leaders at {clock()}"

    await until(clock, lambda: bool(a.stopped), limit=20.0)
    assert a.stopped == [last_renewal + CONFIG.renew_deadline], "given up renewDeadline after the last renewal"
    assert a.stopped[0] < last_renewal + CONFIG.lease_duration, "before anyone could see the lease expire"
    assert not a.elector.is_leader() and a.master_status == 0.0
    assert a.elector.lost_reason == "not renewed within renewDeadline (10s)"
    await until(clock, lambda: b.elector.is_leader(), limit=10.0)
    assert clock() >= last_renewal + CONFIG.lease_duration
    await elapse(clock, 4.0, check=never_two)
    assert a.task.done() and a.task.exception() is None, "run() returns once leadership is lost"
    await b.crash()


async def test_a_renewal_that_never_answers_is_cut_off_at_the_deadline(store: Store, clock: FakeClock) -> None:
    a = Replica(store, clock, "a").start()
    await settle()
    a.client.hang = {"get", "update"}
    await until(clock, lambda: bool(a.stopped), limit=20.0)
    assert a.stopped == [500.0 + CONFIG.renew_deadline]
    await asyncio.gather(a.task, return_exceptions=True)


async def test_is_leader_is_false_from_the_deadline_even_before_the_elector_runs_again(
        store: Store, clock: FakeClock) -> None:
    a = Replica(store, clock, "a").start()
    await settle()
    clock.advance(CONFIG.renew_deadline - 0.01)   # no task has run since: a stalled event loop
    assert a.elector.is_leader()
    clock.advance(0.01)
    assert not a.elector.is_leader(), "the gate closes on time, not when the renew loop notices"
    await a.crash()


async def test_seeing_another_holder_while_renewing_ends_leadership_at_once(store: Store, clock: FakeClock) -> None:
    a = Replica(store, clock, "a").start()
    await settle()

    def usurp() -> None:                  # someone writes just before a's next renewal lands
        cur = lease(store)
        cur["spec"]["holderIdentity"] = "host_z"
        store.update(LEASES, NS, NAME, cur)

    a.client.before_update = usurp
    await elapse(clock, 2.0)
    assert a.stopped == [502.0] and a.elector.lost_reason == "the lease is held by host_z"
    assert spec(store)["holderIdentity"] == "host_z"


async def test_of_two_replicas_taking_over_at_once_one_gets_a_conflict_and_stays_a_follower(
        store: Store, clock: FakeClock) -> None:
    plant(store, "", 1, 7, "2026-01-01T00:00:00.000000Z")      # released
    b = Replica(store, clock, "b")

    def c_wins() -> None:                 # c read the released lease too and its update lands first
        cur = lease(store)
        cur["spec"].update(holderIdentity="host_c", leaseDurationSeconds=15, leaseTransitions=8)
        store.update(LEASES, NS, NAME, cur)

    b.client.before_update = c_wins
    b.start()
    await settle()
    assert b.client.calls == ["get", "update"] and b.started == [] and not b.elector.is_leader()
    assert (spec(store)["holderIdentity"], spec(store)["leaseTransitions"]) == ("host_c", 8)
    await elapse(clock, 4.0)
    assert not b.elector.is_leader() and b.elector.leader == "host_c", "the winner's lease is respected"
    await b.crash()


# ---------------------------------------------------------------------------- configuration and identity


@pytest.mark.parametrize("lease_duration, renew_deadline, retry_period, message", [
    pytest.param(10.0, 10.0, 2.0, "leaseDuration must be greater than renewDeadline", id="lease not above deadline"),
    pytest.param(15.0, 2.4, 2.0, "renewDeadline must be greater than retryPeriod*JitterFactor",
                 id="deadline without room for a retry"),
])
def test_the_elector_refuses_what_client_go_refuses(lease_duration: float, renew_deadline: float,
                                                    retry_period: float, message: str) -> None:
    cfg = LeaderElection(True, lease_duration, renew_deadline, retry_period, "leases", NAME, NS)
    with pytest.raises(ValueError, match=re.escape(message)):
        LeaderElector(None, cfg, clock=FakeClock())


def test_the_identity_is_hostname_underscore_uuid_and_unique() -> None:
    first, second = default_identity(), default_identity()
    assert re.fullmatch(r"[^_]+_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", first)
    assert first.split("_")[0] == second.split("_")[0] and first != second


def test_a_lease_record_round_trips_through_its_spec() -> None:
    r = LeaseRecord("h_1", 15, "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:01.500000Z", 3)
    assert LeaseRecord.from_spec(r.to_spec()) == r
    assert LeaseRecord.from_spec(None) == LeaseRecord()
    assert micro_time(1_767_225_601.5) == "2026-01-01T00:00:01.500000Z"


# ---------------------------------------------------------------------------- the write gate


class Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.counts = {"x": 1}

    def __getattr__(self, name: str) -> Any:
        async def call(*args: Any, **kwargs: Any) -> str:
            self.calls.append(name)
            return name
        return call


@pytest.mark.parametrize("method, args", [
    pytest.param("bind", ("ns", "p", "uid", "node"), id="a bind"),
    pytest.param("patch_pod_status", ("ns", "p", {}), id="a pod status patch"),
    pytest.param("delete_pod", ("ns", "p"), id="a pod delete"),
    pytest.param("create_event", ({},), id="an event"),
    pytest.param("patch_event", ({}, {}), id="an event series patch"),
    pytest.param("create", ("/api/v1/namespaces/ns/pods", {}), id="a create"),
    pytest.param("update", ("/x", {}), id="an update"),
    pytest.param("patch", ("/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/podgroups/g/status", {}),
                 id="a PodGroup status patch"),
    pytest.param("delete", ("/x",), id="a delete"),
])
async def test_a_write_is_refused_without_the_lease_and_sent_with_it(method: str, args: tuple[Any, ...]) -> None:
    inner, leading = Recorder(), [False]
    gated = LeaderOnlyWrites(inner, lambda: leading[0], "kube-system/tandem-scheduler")
    with pytest.raises(NotLeader, match="does not hold the lease kube-system/tandem-scheduler"):
        await getattr(gated, method)(*args)
    assert inner.calls == [] and gated.refused == 1
    leading[0] = True
    assert await getattr(gated, method)(*args) == method
    assert inner.calls == [method]


async def test_reads_and_everything_else_pass_through_the_gate() -> None:
    inner = Recorder()
    gated = LeaderOnlyWrites(inner, lambda: False)
    assert await gated.get("/api/v1/nodes") == "get"
    assert await gated.list("/api/v1/pods") == "list"
    assert gated.counts == {"x": 1}
    assert gated.refused == 0


def test_every_api_client_call_is_either_a_read_or_a_gated_write() -> None:
    calls = {name for name, fn in inspect.getmembers(APIClient, inspect.isfunction)
             if not name.startswith("_") and (inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn))}
    calls.discard("close")
    assert calls == LeaderOnlyWrites.READS | LeaderOnlyWrites.WRITES, \
        "a new APIClient call must be classified: a write the gate does not know would bypass it"
    for name in LeaderOnlyWrites.WRITES:
        assert name in vars(LeaderOnlyWrites), f"{name} is a write but not gated"


def test_not_leader_is_an_api_error_no_retry_loop_repeats() -> None:
    err = NotLeader("bind refused")
    assert isinstance(err, Exception) and err.reason == "NotLeader" and err.status == 0
    assert not isinstance(err, (Conflict, NotFound, ServerError))
