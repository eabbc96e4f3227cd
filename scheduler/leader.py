"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's does it for kube-scheduler.

Several replicas of tandem may run. One holds the Lease
``leaderElection.resourceNamespace/resourceName`` and schedules; the others
keep their informers warm and wait. :class:`LeaderElector` is client-go's
``tools/leaderelection`` with its ``LeaseLock``
(``tryAcquireOrRenew``), on tandem's one clock:

* The record is the Lease's spec: ``holderIdentity``,
  ``leaseDurationSeconds``, ``acquireTime``, ``renewTime``,
  ``leaseTransitions``. The identity is ``<hostname>_<uuid>``, as
  kube-scheduler's.
* Expiry is judged by local observation time: a replica remembers when, on
  its own clock, it last saw the record change, and treats the lease as
  expired ``leaseDurationSeconds`` after that. The timestamps in the record
  are written, never compared: two machines' clocks may disagree by any
  amount; only their rates must roughly agree.
* A lease whose ``holderIdentity`` is empty (released) may be taken at once.
* Writes are optimistic: an update carries the ``resourceVersion`` last
  read, so of two replicas that both saw the lease expire, one gets 409 and
  has simply lost that attempt. Taking the lease from another holder (or
  from nobody) adds one to ``leaseTransitions``; renewing keeps it and
  ``acquireTime``.
* The holder renews every ``retryPeriod``, first by writing on top of what
  it wrote last (no read), then, if that fails, by reading and updating.
  If it has not renewed for ``renewDeadline`` it gives leadership up, and
  tandem exits as kube-scheduler does. ``renewDeadline < leaseDuration``:
  the holder stops before any other replica can see the lease expire.
* :meth:`LeaderElector.release` (a graceful stop; client-go's
  ``ReleaseOnCancel``, which kube-scheduler sets) writes the record with
  ``holderIdentity: ""`` and ``leaseDurationSeconds: 1``, keeping
  ``leaseTransitions``, so a follower takes over at its next retry.

Where tandem differs, on purpose:

* ``renewDeadline`` counts from the start of the last successful renewal;
  client-go counts it from the start of the round that fails, up to one
  ``retryPeriod`` later. So the holder gives up at most ``renewDeadline``
  after its last write reached the server, and :meth:`is_leader` can say so
  from the clock alone.
* :meth:`LeaderElector.is_leader` is that deadline: it turns False
  ``renewDeadline`` after the last renewal was sent even if the elector's
  own task has not run since (an event loop stalled by a huge relist must
  not let a bind through on a lease that may be someone else's by now).
* Seeing another holder while renewing ends leadership at once (client-go
  polls on until its deadline).
* Followers retry every ``retryPeriod`` less up to 10% jitter; client-go
  waits between one and 2.2 times ``retryPeriod``. With two replicas there
  is no herd to spread, and a released lease is taken within one
  ``retryPeriod``: a rolling update hands over in about that long. A
  follower also wakes when the lease it saw would expire, so a holder that
  died is replaced within ``leaseDuration + retryPeriod`` of its last
  renewal (client-go's followers poll only every 1 to 2.2 ``retryPeriod``).

:class:`LeaderOnlyWrites` is the scheduler's API client as only the
holder may use it: reads pass, every write first asks :meth:`is_leader`
and raises :class:`NotLeader` when the answer is no. It is the one place
that stops a replica which lost the lease from binding, patching, deleting
or recording anything more.

This module never decides anything about scheduling, and never reads the
wall clock for a deadline (``clock.wall()`` only stamps the record).
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any, Awaitable, Callable, TypeVar

from scheduler.apiclient import APIError, NotFound
from scheduler.config import LeaderElection
from scheduler.framework.clock import Clock

log = logging.getLogger("tandem.leaderelection")

_T = TypeVar("_T")

# client-go's JitterFactor: renewDeadline must leave room for more than one jittered retry
JITTER_FACTOR = 1.2
# followers wait retryPeriod * (1 - FOLLOWER_JITTER * random) between attempts (see the module docstring)
FOLLOWER_JITTER = 0.1
# a follower wakes this long after the moment a lease it saw expires (timers may fire a hair early)
EXPIRY_MARGIN = 0.001
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


def default_identity() -> str:
    """``<hostname>_<uuid>``, as kube-scheduler's: unique even for two processes on one host."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def micro_time(epoch: float) -> str:
    """A metav1.MicroTime: RFC 3339 with microseconds, in UTC."""
    seconds = int(epoch)
    micros = min(999_999, int(round((epoch - seconds) * 1_000_000)))
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{micros:06d}Z"


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """client-go's LeaderElectionRecord: the five fields of a Lease's spec that leader election uses."""

    holder: str = ""
    duration: int = 0                 # leaseDurationSeconds
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0

    @classmethod
    def from_spec(cls, spec: Any) -> "LeaseRecord":
        spec = spec if isinstance(spec, dict) else {}
        return cls(str(spec.get("holderIdentity") or ""), _int(spec.get("leaseDurationSeconds")),
                   spec.get("acquireTime"), spec.get("renewTime"), _int(spec.get("leaseTransitions")))

    def to_spec(self) -> dict[str, Any]:
        return {"holderIdentity": self.holder, "leaseDurationSeconds": self.duration,
                "acquireTime": self.acquire_time, "renewTime": self.renew_time,
                "leaseTransitions": self.transitions}


class NotLeader(APIError):
    """A write refused before it was sent: this replica does not hold the lease (any more)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "NotLeader", message)


class _Expired(Exception):
    """An attempt ran out of the time it had."""


class LeaderElector:
    """Acquire the lease, renew it, release it; see the module docstring.

    ``client`` needs ``get``, ``create`` and ``update`` (an
    :class:`scheduler.apiclient.APIClient`; kube-scheduler gives leader
    election a client of its own, so that binds never hold a renewal up in
    the rate limiter). ``on_started_leading`` is called when the lease is
    acquired, ``on_stopped_leading`` once when it is lost (not when
    :meth:`run` is cancelled: a graceful stop is the caller's doing). Both
    are synchronous and run on the elector's task.
    """

    def __init__(self, client: Any, config: LeaderElection, *, identity: str | None = None,
                 clock: Clock, metrics: Any = None,
                 on_started_leading: Callable[[], None] | None = None,
                 on_stopped_leading: Callable[[], None] | None = None,
                 rng: random.Random | None = None) -> None:
        if config.lease_duration <= config.renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if config.renew_deadline <= JITTER_FACTOR * config.retry_period:
            raise ValueError("renewDeadline must be greater than retryPeriod*JitterFactor")
        if config.retry_period <= 0:
            raise ValueError("retryPeriod must be greater than zero")
        self.client = client
        self.config = config
        self.identity = identity if identity is not None else default_identity()
        self.clock: Clock = clock
        self.metrics = metrics
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.rng = rng if rng is not None else random.Random()
        self.name = config.resource_name
        self.namespace = config.resource_namespace
        self.describe = f"{self.namespace}/{self.name}"
        self._collection = LEASES.format(namespace=self.namespace)
        self._path = f"{self._collection}/{self.name}"
        # what the lease records as its duration: whole seconds, as client-go truncates
        self._duration_seconds = max(1, int(config.lease_duration))
        self._lease: dict[str, Any] | None = None   # the Lease last read or written (its resourceVersion)
        self._record: LeaseRecord | None = None     # its spec, as last observed
        self._observed_at = float("-inf")           # clock() when the record was last seen to change
        self._reported_holder = ""
        self._leading = False
        self._renewed_at = float("-inf")            # clock() when the last successful write was sent
        self.lost_reason = ""                       # why leadership ended ("" while it has not)
        self._set_metric(False)

    # ------------------------------------------------------------------ what others ask

    def is_leader(self) -> bool:
        """Does this replica hold the lease, and has it renewed it within renewDeadline? O(1)."""
        return self._leading and self.clock() < self._renewed_at + self.config.renew_deadline

    @property
    def leader(self) -> str:
        """The holder last observed ("" for none or released)."""
        return self._record.holder if self._record is not None else ""

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Acquire the lease, then renew it until that fails; returns once leadership is lost.

        Cancel it to stop (then :meth:`release`, if the lease should go to another replica now).
        """
        log.info("this replica's identity is %s", self.identity)
        log.info("attempting to acquire leader lease %s...", self.describe)
        while not await self._attempt(self.config.renew_deadline):
            log.debug("failed to acquire lease %s", self.describe)
            wait = self.config.retry_period * (1.0 - FOLLOWER_JITTER * self.rng.random())
            if self._record is not None and self._valid():
                # and no later than the moment the lease we saw would expire
                wait = min(wait, self._observed_at + self._record.duration - self.clock() + EXPIRY_MARGIN)
            await self.clock.sleep(wait)
        self._leading = True
        self._set_metric(True)
        log.info("successfully acquired lease %s", self.describe)
        if self.on_started_leading is not None:
            self.on_started_leading()
        reason = await self._renew()
        self._leading = False
        self.lost_reason = reason
        self._set_metric(False)
        log.error("failed to renew lease %s: %s", self.describe, reason)
        if self.on_stopped_leading is not None:
            self.on_stopped_leading()

    async def _renew(self) -> str:
        """Renew every retryPeriod; returns why it could not (the deadline passed, or another holder)."""
        deadline = self.config.renew_deadline
        while True:
            await self.clock.sleep(self.config.retry_period)
            while True:
                left = self._renewed_at + deadline - self.clock()
                if left <= 0:
                    return f"not renewed within renewDeadline ({deadline:g}s)"
                if await self._attempt(left):
                    log.debug("successfully renewed lease %s", self.describe)
                    break
                if self.leader != self.identity:
                    return f"the lease is held by {self.leader or 'nobody'}"
                await self.clock.sleep(min(self.config.retry_period,
                                           max(0.0, self._renewed_at + deadline - self.clock())))

    async def release(self) -> bool:
        """Give the lease up now, if this replica leads (client-go's ReleaseOnCancel). True when written.

        Call it only when nothing guarded by the lease is running any more: from here on
        :meth:`is_leader` is False, and another replica may take the lease within a retryPeriod.
        """
        if not self._leading or self._record is None or self._record.holder != self.identity:
            return False
        self._leading = False            # writes stop before the release can be seen
        self._set_metric(False)
        now = micro_time(self.clock.wall())
        record = LeaseRecord("", 1, now, now, self._record.transitions)
        try:
            await self._bounded(self._update(record), self.config.renew_deadline)
        except (APIError, _Expired) as exc:
            log.error("failed to release lease %s: %s", self.describe, str(exc) or "no answer in time")
            return False
        log.info("released lease %s", self.describe)
        return True

    # ------------------------------------------------------------------ one attempt

    async def _attempt(self, within: float) -> bool:
        """One tryAcquireOrRenew, given ``within`` seconds; on success the gate's clock restarts."""
        started = self.clock()
        try:
            ok = await self._bounded(self._try_acquire_or_renew(), within)
        except _Expired:
            log.warning("lease %s: no answer within %.2gs", self.describe, within)
            return False
        if ok:
            self._renewed_at = started   # the write was sent no earlier than this: the conservative start
        self._report_transition()
        return ok

    async def _try_acquire_or_renew(self) -> bool:
        now = micro_time(self.clock.wall())
        mine = LeaseRecord(self.identity, self._duration_seconds, now, now, 0)
        old = self._record
        # 1. the holder writes on top of what it wrote last, without reading it first
        if self._leading and self._lease is not None and old is not None and self._valid():
            try:
                await self._update(replace(mine, acquire_time=old.acquire_time, transitions=old.transitions))
                return True
            except APIError as exc:
                log.info("failed to update lease %s optimistically: %s; falling back to a read", self.describe, exc)
        # 2. read it, or create it
        try:
            lease = await self.client.get(self._path)
        except NotFound:
            try:
                self._lease = await self.client.create(self._collection, {
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace}, "spec": mine.to_spec()})
            except APIError as exc:
                log.warning("error initially creating lease %s: %s", self.describe, exc)
                return False
            self._observe(mine)
            return True
        except APIError as exc:
            log.warning("error retrieving lease %s: %s", self.describe, exc)
            return False
        self._lease = lease
        record = LeaseRecord.from_spec(lease.get("spec"))
        if record != self._record:
            self._observe(record)
        # 3. someone else's and not expired (by our clock): wait
        if record.holder and record.holder != self.identity and self._valid():
            log.debug("lease %s is held by %s and has not yet expired", self.describe, record.holder)
            return False
        # 4. ours to renew, or to take over
        if record.holder == self.identity:
            want = replace(mine, acquire_time=record.acquire_time, transitions=record.transitions)
        else:
            want = replace(mine, transitions=record.transitions + 1)
        try:
            await self._update(want)
        except APIError as exc:          # 409: another replica wrote first
            log.warning("failed to update lease %s: %s", self.describe, exc)
            return False
        return True

    async def _update(self, record: LeaseRecord) -> None:
        """PUT the lease last seen with ``record`` as its spec: optimistic, on its resourceVersion."""
        assert self._lease is not None
        body = {**self._lease, "spec": {**(self._lease.get("spec") or {}), **record.to_spec()}}
        self._lease = await self.client.update(self._path, body)
        self._observe(record)

    def _observe(self, record: LeaseRecord) -> None:
        self._record = record
        self._observed_at = self.clock()

    def _valid(self) -> bool:
        """Has the observed record not yet expired, judged by when we saw it change?"""
        return self._record is not None and self.clock() < self._observed_at + self._record.duration

    def _report_transition(self) -> None:
        holder = self.leader
        if holder != self._reported_holder:
            self._reported_holder = holder
            if holder and holder != self.identity:
                log.info("lease %s is held by %s", self.describe, holder)

    def _set_metric(self, leading: bool) -> None:
        if self.metrics is not None:
            self.metrics.leader_election_master_status.labels(self.name).set(1 if leading else 0)

    async def _bounded(self, aw: Awaitable[_T], seconds: float) -> _T:
        """``aw`` cut off after ``seconds`` of the clock (raises :class:`_Expired`), as client-go's context timeout."""
        task = asyncio.ensure_future(aw)
        expired = False

        def expire() -> None:
            nonlocal expired
            expired = True
            task.cancel()

        timer = self.clock.call_later(seconds, expire)
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if expired and (current is None or not current.cancelling()):
                raise _Expired() from None
            raise
        finally:
            timer.cancel()


def _gated(method: str, what: str) -> Callable[..., Awaitable[Any]]:
    """The wrapped client's ``method``, sent only after :meth:`LeaderOnlyWrites._check` allowed it."""

    async def write(self: "LeaderOnlyWrites", *args: Any, **kwargs: Any) -> Any:
        self._check(what)
        return await getattr(self._client, method)(*args, **kwargs)

    write.__name__ = write.__qualname__ = method
    return write


class LeaderOnlyWrites:
    """An API client whose writes go through only while ``is_leader()`` says so; reads always pass.

    Wraps the scheduler's client (binds, status patches, deletes, PodGroup
    status) and the events' client. The check is made when a write is
    issued: a write under way when the lease is lost (waiting for a token, or
    retried by the client) finishes, as in-flight binds do in kube-scheduler.
    Anything not listed here is the wrapped client's (reads, counters).
    """

    READS = frozenset({"get", "list", "watch"})
    WRITES = frozenset({"create", "update", "patch", "delete", "bind", "patch_pod_status", "create_event",
                        "patch_event", "delete_pod"})

    def __init__(self, client: Any, is_leader: Callable[[], bool], describe: str = "") -> None:
        self._client = client
        self._is_leader = is_leader
        self._describe = describe
        self.refused = 0          # writes refused (tests, logs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def _check(self, verb: str) -> None:
        if not self._is_leader():
            self.refused += 1
            raise NotLeader(f"{verb} refused: this replica does not hold the lease {self._describe}")

    create = _gated("create", "create")
    update = _gated("update", "update")
    patch = _gated("patch", "patch")
    delete = _gated("delete", "delete")
    bind = _gated("bind", "bind")
    patch_pod_status = _gated("patch_pod_status", "patch pods/status")
    create_event = _gated("create_event", "create event")
    patch_event = _gated("patch_event", "patch event")
    delete_pod = _gated("delete_pod", "delete pod")


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0
