"""Events as kube-scheduler writes them: ``events.k8s.io/v1``, built and series-counted as client-go's
``tools/events`` recorder does, and written from one background task.

:class:`EventRecorder` hands events to the API client from that task. Recording never blocks and never
raises into the scheduling cycle: the queue is bounded and drops its oldest entry when full (counted).
Isomorphic events (same type, action, reason, reporter, regarding and related object; the note is not part
of the key, as upstream) within :data:`SERIES_FINISH_SECONDS` of the last one become a series: the second
one patches ``series.count`` onto the first object, later ones only bump the count locally, which is written
when the series ends or every :data:`SERIES_REFRESH_SECONDS`. Every time an event carries (``eventTime``, the
name upstream derives from it, ``series.lastObservedTime``) is the injected clock's ``wall()``, the same time
the PodScheduled condition is stamped with.

Split from :mod:`scheduler.observe` (which re-exports these names) when that module outgrew one idea.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import socket
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import orjson

from scheduler.framework.clock import Clock
from scheduler.model import Node, Pod

log = logging.getLogger("tandem.observe")

NORMAL = "Normal"
WARNING = "Warning"

# kube-scheduler's (reason, action) pairs
SCHEDULED_REASON = "Scheduled"          # action BINDING, note "Successfully assigned ns/pod to node"
FAILED_SCHEDULING = "FailedScheduling"  # action SCHEDULING, note the fit error
PREEMPTED = "Preempted"                 # action PREEMPTING, on the victim, related = preemptor
SCHEDULING = "Scheduling"
BINDING = "Binding"
PREEMPTING = "Preempting"

MAX_NOTE_BYTES = 1024               # events.k8s.io validation: note is at most 1 KiB
QUEUE_CAPACITY = 10_000             # ten times client-go's maxQueuedEvents: a gang of 1,000 binds at once, and
                                    # with 1,000 its Scheduled events overflowed (GangLarge dropped 1,934 of 3,000)
WRITE_CONCURRENCY = 64              # event writes under way at once. client-go has one sink goroutine, but
                                    # its round trip is cheap; here 1 in flight dropped 70% of the events of a
                                    # 1,000 pods/s burst, 32 dropped 10%, 64 none (GangBasic/5000Nodes)
BACKLOG_CONCURRENCY = 4             # so many times the writes while a quarter of the queue waits: binds run unbounded,
                                    # and at 64 in flight a burst of 30,000 dropped 9,806 events (15,000 nodes, real)
SERIES_FINISH_SECONDS = 6 * 60      # client-go's finishTime: a series ends after this long without a repeat
SERIES_REFRESH_SECONDS = 30 * 60    # client-go's refreshTime: a running series' count is written at least this often

EventCreate = Callable[[dict[str, Any]], Awaitable[Any]]
EventPatch = Callable[[dict[str, Any], dict[str, Any]], Awaitable[Any]]   # (event, strategic-merge patch)


def object_reference(obj: Any) -> dict[str, str]:
    """A core/v1 ObjectReference for a Pod/Node record, a raw API object, or a reference already."""
    if isinstance(obj, Pod):
        ref = {"kind": "Pod", "namespace": obj.namespace, "name": obj.name, "uid": obj.uid,
               "apiVersion": "v1", "resourceVersion": obj.resource_version}
    elif isinstance(obj, Node):
        ref = {"kind": "Node", "name": obj.name, "uid": obj.uid, "apiVersion": "v1",
               "resourceVersion": obj.resource_version}
    elif isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
        meta = obj["metadata"]
        ref = {"kind": obj.get("kind", ""), "namespace": meta.get("namespace", ""), "name": meta.get("name", ""),
               "uid": meta.get("uid", ""), "apiVersion": obj.get("apiVersion", ""),
               "resourceVersion": meta.get("resourceVersion", "")}
    elif isinstance(obj, dict):
        ref = {k: v for k, v in obj.items() if isinstance(v, str)}
    else:
        raise TypeError(f"cannot build an ObjectReference for {type(obj).__name__}")
    return {k: v for k, v in ref.items() if v}        # omitempty, as the Go struct serializes


def _wall_ns(clock: Clock) -> int:
    """``clock.wall()`` in whole nanoseconds, rounded down so its second is the one ``gmtime`` gives.

    The split keeps the fraction exact: a float epoch holds only ~0.2 us, and
    rounding the product could carry into the next second (and name a
    different second than the PodScheduled condition stamped from the same
    wall time).
    """
    wall = clock.wall()
    secs = math.floor(wall)
    return secs * 1_000_000_000 + min(999_999_999, int((wall - secs) * 1e9))


def _micro_time(ns: int) -> str:
    """metav1.MicroTime: RFC 3339 with exactly six fractional digits, UTC."""
    secs, rem = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{rem // 1000:06d}Z"


def _truncate_note(note: str) -> str:
    raw = note.encode()
    if len(raw) <= MAX_NOTE_BYTES:
        return note
    return raw[:MAX_NOTE_BYTES - 3].decode(errors="ignore") + "..."


@dataclass(slots=True)
class _Cached:
    """A cached event: serialized while a singleton (half the memory of its dicts; ~50,000 are kept six minutes
    after a burst), a dict once it repeats (its series is written from it)."""
    saved: bytes | dict[str, Any]
    last_observed: float          # monotonic
    count: int = 1                # > 1: the event is a series
    dirty: bool = False           # the count changed since it was last written
    last_written: float = 0.0     # monotonic

    @property
    def event(self) -> dict[str, Any]:
        if isinstance(self.saved, bytes):
            self.saved = orjson.loads(self.saved)
        return self.saved


class EventRecorder:
    """Builds events like kube-scheduler's recorder and writes them from one task.

    ``create(event)`` and ``patch(event, patch)`` are the API client's
    calls (``patch`` optional: without it repeats are only counted locally
    and each series is created once). The API client retries transient
    failures itself, so a failed write here is logged and forgotten, as
    upstream abandons events after its retries.
    """

    def __init__(self, create: EventCreate, scheduler_name: str = "tandem-scheduler", *,
                 patch: EventPatch | None = None, hostname: str | None = None,
                 capacity: int = QUEUE_CAPACITY, metrics: Any = None,   # observe.Metrics
                 clock: Clock,
                 finish_seconds: float = SERIES_FINISH_SECONDS,
                 refresh_seconds: float = SERIES_REFRESH_SECONDS, concurrency: int = WRITE_CONCURRENCY,
                 hold_seconds: float | None = None) -> None:
        self._create = create
        self._patch = patch
        self.scheduler_name = scheduler_name
        self.hostname = hostname if hostname is not None else socket.gethostname()
        self._capacity = capacity
        self._metrics = metrics
        # the process's one clock: series ages and the sweep's timer (monotonic), and every timestamp an
        # event carries (its eventTime, the name derived from it, series.lastObservedTime) from its wall()
        self._clock: Clock = clock
        self._finish = finish_seconds
        self._refresh = refresh_seconds
        # (series key, event, clock() when recorded), oldest first
        self._queue: collections.deque[tuple[tuple, dict[str, Any], float]] = collections.deque()
        # until start(), keep only what was recorded in the last hold_seconds (None: all, up to capacity):
        # a follower of leader election holds its events back, and writes the recent ones if it comes to lead
        self._hold = hold_seconds
        self._concurrency = max(1, concurrency)
        self._writes: set[asyncio.Task[None]] = set()
        self._last_write: dict[tuple, asyncio.Task[None]] = {}   # series key -> its newest write
        self._room = asyncio.Event()
        self._cache: dict[tuple, _Cached] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._last_ns = 0
        self.dropped = 0              # queue overflow
        self.failed = 0               # writes the API server refused or that failed

    # -- the producer side: synchronous, O(1), never raises

    def for_profile(self, scheduler_name: str) -> "ProfileRecorder":
        """A recorder reporting as ``scheduler_name`` (upstream makes one per profile), sharing this queue."""
        return ProfileRecorder(self, scheduler_name)

    def eventf(self, regarding: Any, related: Any, type_: str, reason: str, action: str, note: str,
               *args: Any, controller: str | None = None) -> None:
        """Record an event (``note % args`` when args are given, like Eventf's Sprintf).

        Call it from the event loop's thread (the scheduling cycle, a binding
        task); it only appends to a queue.
        """
        try:
            event = self.make_event(regarding, related, type_, reason, action, note % args if args else note,
                                    controller=controller)
        except Exception:  # noqa: BLE001 - a bad event must never break the caller
            log.exception("cannot build event %s/%s", reason, action)
            return
        if event is None:
            return
        now = self._clock()
        if self._task is None and self._hold is not None:
            self._expire_held(now)
        if len(self._queue) >= self._capacity:
            self._queue.popleft()
            self.dropped += 1
            if self._metrics is not None:
                self._metrics.events_dropped.inc()
        self._queue.append((_key(event), event, now))
        self._wake.set()

    def _expire_held(self, now: float) -> None:
        """Forget the events held back for longer than hold_seconds (another replica was writing them)."""
        assert self._hold is not None
        horizon = now - self._hold
        while self._queue and self._queue[0][2] < horizon:
            self._queue.popleft()

    def record(self, regarding: Any, type_: str, reason: str, action: str, note: str,
               controller: str | None = None, *, related: Any = None) -> None:
        """``eventf`` without formatting, reporting as ``controller`` (a profile's name) when given."""
        self.eventf(regarding, related, type_, reason, action, note, controller=controller)

    def make_event(self, regarding: Any, related: Any, type_: str, reason: str, action: str, note: str,
                   controller: str | None = None) -> dict[str, Any] | None:
        """The events.k8s.io/v1 Event dict (None for an unsupported type, which upstream drops too)."""
        if type_ not in (NORMAL, WARNING):
            log.error("unsupported event type %r; not reporting %s", type_, reason)
            return None
        # upstream names an event "<regarding>.<eventTime in hex nanoseconds>"; a clock that has not moved
        # (a fake one, or a coarse one) would repeat a name, so a repeat takes the next nanosecond. The
        # eventTime itself stays the clock's.
        ns = _wall_ns(self._clock)
        name_ns = ns if ns > self._last_ns else self._last_ns + 1
        self._last_ns = name_ns
        ref = object_reference(regarding)
        controller = controller or self.scheduler_name
        event: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{ref.get('name', '')}.{name_ns:x}", "namespace": ref.get("namespace") or "default"},
            "eventTime": _micro_time(ns),
            "reportingController": controller,
            "reportingInstance": f"{controller}-{self.hostname}",
            "action": action,
            "reason": reason,
            "regarding": ref,
            "note": _truncate_note(note),
            "type": type_,
        }
        if related is not None:
            event["related"] = object_reference(related)
        return event

    # -- lifecycle

    def start(self) -> None:
        if self._task is None:
            if self._hold is not None:
                self._expire_held(self._clock())
            self._stopping = False
            self._task = asyncio.get_running_loop().create_task(self._run(), name="event-recorder")

    async def stop(self, timeout: float = 5.0) -> None:
        """Write what is queued (and the final counts of running series), then end the task."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping = True
        self._wake.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except asyncio.TimeoutError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            log.warning("event recorder stopped after %.1fs with %d events unwritten", timeout, len(self._queue))
        except asyncio.CancelledError:
            task.cancel()
            raise

    @property
    def pending(self) -> int:
        """Events queued or being written."""
        return len(self._queue) + len(self._writes)

    # -- the consumer side

    async def _run(self) -> None:
        try:
            await self._consume()
        finally:
            for task in list(self._writes):   # cancelled (stop timed out): the writes under way go too
                task.cancel()

    async def _consume(self) -> None:
        next_sweep = self._clock() + self._finish
        while True:
            if not self._queue and not self._stopping:
                self._wake.clear()
                await self._clock.wait(self._wake, max(0.0, next_sweep - self._clock()))
            while self._queue:
                limit = self._concurrency
                if len(self._queue) > self._capacity // 4:
                    limit *= BACKLOG_CONCURRENCY   # falling behind: catch up rather than drop
                if len(self._writes) >= limit:
                    # the queue, not a pile of tasks, absorbs a burst: it is bounded and drops the oldest
                    self._room.clear()
                    await self._room.wait()
                    continue
                key, event, _ = self._queue.popleft()
                try:
                    self._record(key, event)
                except Exception:  # noqa: BLE001 - a bug here must not end event recording
                    log.exception("event recorder failed on %s", event.get("reason"))
            if self._stopping:
                self._sweep(final=True)
                while self._writes:
                    await asyncio.gather(*list(self._writes), return_exceptions=True)
                return
            if self._clock() >= next_sweep:
                self._sweep()
                next_sweep = self._clock() + self._finish

    def _submit(self, key: tuple, event: dict[str, Any], patch: dict[str, Any] | None) -> None:
        """Write in a task, at most ``concurrency`` at once (:data:`BACKLOG_CONCURRENCY` times that while a
        quarter of the queue waits); writes of one series stay in order."""
        before = self._last_write.get(key)

        async def write() -> None:
            if before is not None and not before.done():
                await asyncio.wait((before,))   # a series patch must not overtake the create of its object
            await self._write(event, patch)

        task = asyncio.get_running_loop().create_task(write())
        self._writes.add(task)
        self._last_write[key] = task

        def done(t: asyncio.Task[None]) -> None:
            self._writes.discard(t)
            if self._last_write.get(key) is t:
                del self._last_write[key]
            self._room.set()

        task.add_done_callback(done)

    def _record(self, key: tuple, event: dict[str, Any]) -> None:
        now = self._clock()
        cached = self._cache.get(key)
        if cached is not None and now - cached.last_observed > self._finish:
            self._finish_series(key, cached)
            cached = None
        if cached is None:
            # the cache keeps its own copy (the sink may hold on to what it was given), serialized at its exact size:
            # orjson.dumps leaves ~2 KiB allocated for a 0.5 KiB event
            self._cache[key] = _Cached(bytes(memoryview(orjson.dumps(event))), now, last_written=now)
            self._submit(key, event, None)
            return
        cached.count += 1
        cached.last_observed = now
        # client-go's recordToSink stamps the repeat with its clock's now when the sink takes it
        cached.event["series"] = {"count": cached.count, "lastObservedTime": _micro_time(_wall_ns(self._clock))}
        if cached.count == 2:        # the first repeat turns the event into a series at once, as upstream
            self._write_series(key, cached)
        else:
            cached.dirty = True

    def _sweep(self, final: bool = False) -> None:
        """End quiet series (writing their final count), refresh long ones, forget old singletons."""
        now = self._clock()
        for key, cached in list(self._cache.items()):
            if final or now - cached.last_observed > self._finish:
                self._finish_series(key, cached)
            elif cached.dirty and now - cached.last_written > self._refresh:
                self._write_series(key, cached)

    def _finish_series(self, key: tuple, cached: _Cached) -> None:
        self._cache.pop(key, None)
        if cached.dirty:
            self._write_series(key, cached)

    def _write_series(self, key: tuple, cached: _Cached) -> None:
        cached.dirty = False
        cached.last_written = self._clock()
        series = dict(cached.event["series"])
        self._submit(key, {**cached.event, "series": series}, {"series": series})

    async def _write(self, event: dict[str, Any], patch: dict[str, Any] | None) -> None:
        try:
            if patch is not None and self._patch is not None:
                try:
                    await self._patch(event, patch)
                    return
                except Exception as exc:  # noqa: BLE001
                    if getattr(exc, "status", None) != 404:
                        raise
                    # the first object is gone (TTL, deleted): create it again, series included, as upstream
            elif patch is not None:
                return               # no patch call: the series is counted but not written
            await self._create(event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the API client already retried; give up on this one
            self.failed += 1
            log.warning("cannot write event %s for %s: %s", event.get("reason"),
                        event.get("regarding", {}).get("name"), exc)


class ProfileRecorder:
    """An EventRecorder view that reports as one profile's scheduler name."""

    __slots__ = ("recorder", "scheduler_name")

    def __init__(self, recorder: EventRecorder, scheduler_name: str) -> None:
        self.recorder = recorder
        self.scheduler_name = scheduler_name

    def eventf(self, regarding: Any, related: Any, type_: str, reason: str, action: str, note: str,
               *args: Any) -> None:
        self.recorder.eventf(regarding, related, type_, reason, action, note, *args, controller=self.scheduler_name)


def _key(event: dict[str, Any]) -> tuple:
    """client-go's eventKey: everything that identifies "the same thing happened again" (not the note)."""
    return (event["type"], event["action"], event["reason"], event["reportingController"],
            event["reportingInstance"], *map(event["regarding"].get, _REF_FIELDS),
            *map((event.get("related") or {}).get, _REF_FIELDS))


_REF_FIELDS = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")   # ObjectReference
