"""What the scheduler tells the outside world: metrics, health endpoints, events.

* :class:`Metrics` holds kube-scheduler's metrics under their upstream
  names, labels and buckets (``pkg/scheduler/metrics/metrics.go``), in a
  dedicated ``CollectorRegistry`` so that tests and embedded schedulers
  never share series through the global one.
* :func:`serve_health` serves /healthz, /livez, /readyz and /metrics with
  aiohttp, as one async context manager: started on entry, stopped on exit;
  over TLS and behind authentication and authorization when given them
  (:mod:`scheduler.secureserving`).
* :class:`EventRecorder` builds ``events.k8s.io/v1`` Events the way
  client-go's ``tools/events`` recorder does for kube-scheduler and hands
  them to the API client from one background task. Recording never blocks
  and never raises into the scheduling cycle: the queue is bounded and
  drops its oldest entry when full (counted). Isomorphic events (same type,
  action, reason, reporter, regarding and related object; the note is not
  part of the key, as upstream) within :data:`SERIES_FINISH_SECONDS` of
  the last one become a series: the second one patches ``series.count``
  onto the first object, later ones only bump the count locally, which is
  written when the series ends or every :data:`SERIES_REFRESH_SECONDS`.
  Every time an event carries (``eventTime``, the name upstream derives
  from it, ``series.lastObservedTime``) is the injected clock's ``wall()``,
  the same time the PodScheduled condition is stamped with.

This module never decides anything about scheduling, and nothing in it may
slow the scheduling cycle down: metric updates are O(1) and events are
queued.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import socket
import ssl
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable

import prometheus_client
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.exposition import choose_encoder

from scheduler.framework.clock import Clock
from scheduler.model import Node, Pod

log = logging.getLogger("tandem.observe")

# ---------------------------------------------------------------------------- metrics

# schedule_attempts_total{result}
SCHEDULED = "scheduled"
UNSCHEDULABLE = "unschedulable"
ERROR = "error"

# pending_pods{queue} and queue_incoming_pods_total{queue}
ACTIVE_Q = "active"
BACKOFF_Q = "backoff"
UNSCHEDULABLE_Q = "unschedulable"
GATED_Q = "gated"

# framework_extension_point_duration_seconds{extension_point}: upstream spells them in CamelCase
EXTENSION_POINT_LABELS = {
    "preEnqueue": "PreEnqueue", "queueSort": "QueueSort", "preFilter": "PreFilter", "filter": "Filter",
    "postFilter": "PostFilter", "preScore": "PreScore", "score": "Score", "normalizeScore": "ScoreExtensionNormalize",
    "reserve": "Reserve", "unreserve": "Unreserve", "permit": "Permit", "preBind": "PreBind", "bind": "Bind",
    "postBind": "PostBind",
}


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """prometheus.ExponentialBuckets."""
    return tuple(start * factor ** i for i in range(count))


class Metrics:
    """kube-scheduler's metrics, one registry per scheduler process (or per test)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        # Upstream exposes no "_created" series; prometheus_client adds them unless told not to (a process-wide switch).
        prometheus_client.disable_created_metrics()
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts", "Number of attempts to schedule pods, by the result. 'unschedulable' "
            "means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"], registry=r)
        self.scheduling_attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"], buckets=exponential_buckets(0.001, 2, 15), registry=r)
        self.scheduling_algorithm_duration = Histogram(
            "scheduler_scheduling_algorithm_duration_seconds", "Scheduling algorithm latency in seconds",
            buckets=exponential_buckets(0.001, 2, 15), registry=r)
        self.pending_pods = Gauge(
            "scheduler_pending_pods", "Number of pending pods, by the queue type. 'active' means number of pods in "
            "activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in "
            "unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number of "
            "unschedulable pods that the scheduler never attempted to schedule because they are gated.",
            ["queue"], registry=r)
        self.pod_scheduling_sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds", "E2e latency for a pod being scheduled, from the time "
            "the pod enters the scheduling queue and might involve multiple scheduling attempts.",
            ["attempts"], buckets=exponential_buckets(0.01, 2, 20), registry=r)
        self.pod_scheduling_attempts = Histogram(
            "scheduler_pod_scheduling_attempts", "Number of attempts to successfully schedule a pod.",
            buckets=exponential_buckets(1, 2, 5), registry=r)
        self.framework_extension_point_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"], buckets=exponential_buckets(0.0001, 2, 12), registry=r)
        self.plugin_execution_duration = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"], buckets=exponential_buckets(0.00001, 1.5, 20), registry=r)
        self.plugin_evaluation = Counter(
            "scheduler_plugin_evaluation", "Number of attempts to schedule pods by each plugin and the extension "
            "point (available only in PreFilter and Filter.).",
            ["plugin", "extension_point", "profile"], registry=r)
        self.queue_incoming_pods = Counter(
            "scheduler_queue_incoming_pods", "Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"], registry=r)
        self.unschedulable_pods = Gauge(
            "scheduler_unschedulable_pods", "The number of unschedulable pods broken down by plugin name. A pod will "
            "increment the gauge for all plugins that caused it to not schedule and so this metric have meaning "
            "only when broken down by plugin.", ["plugin", "profile"], registry=r)
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts", "Total preemption attempts in the cluster till now", registry=r)
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims", "Number of selected preemption victims",
            buckets=exponential_buckets(1, 2, 7), registry=r)
        self.preemption_goroutines_duration = Histogram(
            "scheduler_preemption_goroutines_duration_seconds",
            "Duration in seconds for running goroutines for the preemption.",
            ["result"], buckets=exponential_buckets(0.01, 2, 20), registry=r)
        self.preemption_goroutines_execution = Counter(
            "scheduler_preemption_goroutines_execution", "Number of preemption goroutines in preemption's executions.",
            ["result"], registry=r)
        self.permit_wait_duration = Histogram(
            "scheduler_permit_wait_duration_seconds", "Duration of waiting on permit.",
            ["result"], buckets=exponential_buckets(0.001, 2, 15), registry=r)
        self.cache_size = Gauge(
            # upstream's name really does say "scheduler" twice (subsystem + name)
            "scheduler_scheduler_cache_size", "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            ["type"], registry=r)
        self.events_dropped = Counter(
            "tandem_event_recorder_dropped_events", "Events dropped because the recorder's queue was full.",
            registry=r)
        # client-go's leader election metric (leaderelection/metrics.go), set by scheduler/leader.py
        self.leader_election_master_status = Gauge(
            "leader_election_master_status", "Gauge of if the reporting system is master of the relevant lease, "
            "0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make "
            "sure to group by name.", ["name"], registry=r)
        for q in (ACTIVE_Q, BACKOFF_Q, UNSCHEDULABLE_Q, GATED_Q):
            self.pending_pods.labels(q).set(0)
        self._rest_clients: _RestClientCollector | None = None   # rest_client_requests_total, see bind_client

    # -- shorthands for the scheduler core; each is a couple of dict lookups and an add

    def observe_attempt(self, result: str, profile: str, seconds: float) -> None:
        """One scheduling attempt ended (``result``: scheduled, unschedulable or error)."""
        self.schedule_attempts.labels(result, profile).inc()
        self.scheduling_attempt_duration.labels(result, profile).observe(seconds)

    def pod_scheduled(self, attempts: int, sli_seconds: float) -> None:
        """A pod was bound after ``attempts`` attempts, ``sli_seconds`` after its first attempt."""
        # upstream caps the label to keep the series count small (getAttemptsLabel)
        self.pod_scheduling_sli_duration.labels("15+" if attempts >= 15 else str(attempts)).observe(sli_seconds)
        self.pod_scheduling_attempts.observe(attempts)

    def observe_scheduled(self, qi: Any, profile: str, now: float) -> None:
        """``pod_scheduled`` from a QueuedPodInfo (``attempts``, ``initial_attempt``), ``now`` on the same clock."""
        start = getattr(qi, "initial_attempt", 0.0) or now
        self.pod_scheduled(max(1, int(getattr(qi, "attempts", 1))), max(0.0, now - start))

    def observe_failure(self, reason: str, profile: str, qi: Any = None) -> None:
        """A pod failed: "SchedulerError" counts as an attempt with result error.

        Unschedulable outcomes are counted by :meth:`observe_attempt` with the
        cycle's duration; counting them here too would count them twice.
        """
        if reason == "SchedulerError":
            self.schedule_attempts.labels(ERROR, profile).inc()

    def bind_queue(self, queue: Any) -> None:
        """Read ``scheduler_pending_pods`` from ``queue.counts()`` at scrape time instead of pushing it."""
        for q in (ACTIVE_Q, BACKOFF_Q, UNSCHEDULABLE_Q, GATED_Q):
            self.pending_pods.labels(q).set_function(lambda q=q: queue.counts().get(q, 0))

    def set_pending(self, active: int, backoff: int, unschedulable: int, gated: int) -> None:
        self.pending_pods.labels(ACTIVE_Q).set(active)
        self.pending_pods.labels(BACKOFF_Q).set(backoff)
        self.pending_pods.labels(UNSCHEDULABLE_Q).set(unschedulable)
        self.pending_pods.labels(GATED_Q).set(gated)

    def extension_point(self, point: str, status: str, profile: str, seconds: float) -> None:
        """``point`` as in CONFIG_POINTS ("preFilter") or upstream's label ("PreFilter"); ``status`` a Code label."""
        self.framework_extension_point_duration.labels(
            EXTENSION_POINT_LABELS.get(point, point), status, profile).observe(seconds)

    def plugin(self, plugin: str, point: str, status: str, seconds: float) -> None:
        self.plugin_execution_duration.labels(plugin, EXTENSION_POINT_LABELS.get(point, point), status).observe(seconds)

    def incoming(self, queue: str, event: str) -> None:
        self.queue_incoming_pods.labels(queue, event).inc()

    def preemption(self, victims: int) -> None:
        self.preemption_attempts.inc()
        self.preemption_victims.observe(victims)

    def bind_client(self, client: Any) -> None:
        """Export client-go's ``rest_client_requests_total{code,host,method}`` from ``client.counts``.

        Read at scrape time (a custom collector), so a request costs the
        client one Counter increment and nothing here. ``client.counts`` maps
        ``(verb, code)`` to attempts; verbs become HTTP methods as client-go
        labels them. Several clients (kube-scheduler's, like tandem's, has
        one for events) add up per (code, host, method).
        """
        if self._rest_clients is None:
            self._rest_clients = _RestClientCollector()
            self.registry.register(self._rest_clients)
        self._rest_clients.clients.append(client)

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """The registry in the text format the ``Accept`` header asks for: (body, content type)."""
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type


# the HTTP method of each APIClient verb, for rest_client_requests_total{method}
_VERB_METHODS = {"get": "GET", "list": "GET", "watch": "GET", "create": "POST", "update": "PUT",
                 "patch": "PATCH", "delete": "DELETE"}


class _RestClientCollector:
    def __init__(self) -> None:
        self.clients: list[Any] = []

    def describe(self) -> list[CounterMetricFamily]:
        return [self._family()]

    def _family(self) -> CounterMetricFamily:
        return CounterMetricFamily("rest_client_requests", "Number of HTTP requests, partitioned by status code, "
                                   "method, and host.", labels=["code", "host", "method"])

    def collect(self) -> list[CounterMetricFamily]:
        fam = self._family()
        totals: collections.Counter[tuple[str, str, str]] = collections.Counter()
        for client in self.clients:
            host = str(getattr(client, "host", "")).split("://", 1)[-1]
            for (verb, code), n in list(client.counts.items()):
                totals[code, host, _VERB_METHODS.get(verb, verb.upper())] += n
        for labels, n in sorted(totals.items()):
            fam.add_metric(list(labels), n)
        return [fam]


# ---------------------------------------------------------------------------- health server

@dataclass(frozen=True, slots=True)
class HealthServer:
    host: str
    port: int                                 # the bound port (useful when asked for port 0)
    scheme: str = "http"                      # "https" on the secure port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


@asynccontextmanager
async def serve_health(host: str, port: int, metrics: Metrics, ready: Callable[[], bool],
                       healthy: Callable[[], bool] | None = None, *, ssl_context: ssl.SSLContext | None = None,
                       middlewares: Iterable[Any] = ()) -> AsyncIterator[HealthServer]:
    """Serve /healthz, /livez, /readyz and /metrics until the block exits.

    /readyz answers 503 until ``ready()`` is true (informers synced, and
    leader if leader election is on); /healthz and /livez answer 500 when
    ``healthy()`` is false (upstream uses this for a lease it failed to
    renew). Port 0 picks a free port; the yielded :class:`HealthServer`
    says which. ``ssl_context`` serves HTTPS; ``middlewares`` run before
    every handler (secureserving's guard decides who may read what).
    """

    Handler = Callable[[web.Request], Awaitable[web.Response]]

    def check(fn: Callable[[], bool] | None, name: str, failed_code: int) -> Handler:
        async def handler(request: web.Request) -> web.Response:
            try:
                ok = True if fn is None else bool(fn())
            except Exception:  # noqa: BLE001 - a broken probe must answer, not crash the server
                log.exception("%s check raised", name)
                ok = False
            if ok:
                return web.Response(text="ok")
            return web.Response(status=failed_code, text=f"[-]{name} failed\n{name.split('/')[-1]} check failed")
        return handler

    async def metrics_handler(request: web.Request) -> web.Response:
        body, content_type = metrics.exposition(request.headers.get("Accept", ""))
        return web.Response(body=body, headers={"Content-Type": content_type})

    app = web.Application(middlewares=list(middlewares))
    app.router.add_get("/healthz", check(healthy, "healthz", 500))
    app.router.add_get("/livez", check(healthy, "livez", 500))
    app.router.add_get("/readyz", check(ready, "readyz", 503))
    app.router.add_get("/metrics", metrics_handler)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
        await site.start()
        bound = runner.addresses[0]
        yield HealthServer(host, int(bound[1]), "https" if ssl_context is not None else "http")
    finally:
        await runner.cleanup()


# ---------------------------------------------------------------------------- events

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
    event: dict[str, Any]
    last_observed: float          # monotonic
    count: int = 1                # > 1: the event is a series
    dirty: bool = False           # the count changed since it was last written
    last_written: float = 0.0     # monotonic


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
                 capacity: int = QUEUE_CAPACITY, metrics: Metrics | None = None,
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
                if len(self._writes) >= self._concurrency:
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
        """Write in a task, at most ``concurrency`` at once; writes of one series stay in order."""
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
            # the cache keeps its own copy: the sink may hold on to what it was given
            self._cache[key] = _Cached(dict(event), now, last_written=now)
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
            event["reportingInstance"], tuple(sorted(event["regarding"].items())),
            tuple(sorted(event.get("related", {}).items())))
