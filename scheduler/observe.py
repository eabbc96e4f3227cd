"""What the scheduler tells the outside world: metrics, health endpoints, events.

* :class:`Metrics` holds kube-scheduler's metrics under their upstream
  names, labels and buckets (``pkg/scheduler/metrics/metrics.go``), in a
  dedicated ``CollectorRegistry`` so that tests and embedded schedulers
  never share series through the global one.
* :func:`serve_health` serves /healthz, /livez, /readyz and /metrics with
  aiohttp, as one async context manager: started on entry, stopped on exit;
  over TLS and behind authentication and authorization when given them
  (:mod:`scheduler.secureserving`).
* the events (:class:`EventRecorder` and kube-scheduler's reasons and actions) live in
  :mod:`scheduler.events` and are re-exported here.

This module never decides anything about scheduling, and nothing in it may
slow the scheduling cycle down: metric updates are O(1) and events are
queued.
"""

from __future__ import annotations

import collections
import logging
import ssl
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable

import prometheus_client
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.exposition import choose_encoder

from scheduler.events import (
    BACKLOG_CONCURRENCY, BINDING, FAILED_SCHEDULING, MAX_NOTE_BYTES, NORMAL, PREEMPTED, PREEMPTING, QUEUE_CAPACITY,
    SCHEDULED_REASON, SCHEDULING, SERIES_FINISH_SECONDS, SERIES_REFRESH_SECONDS, WARNING, WRITE_CONCURRENCY,
    EventRecorder, ProfileRecorder, object_reference,
)

log = logging.getLogger("tandem.observe")

__all__ = [  # the events were this module's: their names stay importable from here
    "BACKLOG_CONCURRENCY", "BINDING", "FAILED_SCHEDULING", "MAX_NOTE_BYTES", "NORMAL", "PREEMPTED", "PREEMPTING",
    "QUEUE_CAPACITY", "SCHEDULED_REASON", "SCHEDULING", "SERIES_FINISH_SECONDS", "SERIES_REFRESH_SECONDS", "WARNING",
    "WRITE_CONCURRENCY", "EventRecorder", "ProfileRecorder", "object_reference",
    "Metrics", "HealthServer", "serve_health", "exponential_buckets",
    "SCHEDULED", "UNSCHEDULABLE", "ERROR", "ACTIVE_Q", "BACKOFF_Q", "UNSCHEDULABLE_Q", "GATED_Q", "EXTENSION_POINT_LABELS",
]

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
