"""scheduler/observe.py: upstream-named metrics, the health server, the event recorder."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from scheduler.framework.clock import FakeClock
from scheduler.model import Node, Pod
from scheduler.observe import (
    BACKLOG_CONCURRENCY, BINDING, FAILED_SCHEDULING, MAX_NOTE_BYTES, NORMAL, SCHEDULED, SCHEDULED_REASON, SCHEDULING, WARNING,
    EventRecorder, Metrics, exponential_buckets, object_reference, serve_health,
)
from tests.support.waiting import eventually

POD = Pod(uid="uid-1", namespace="team", name="web-0", resource_version="42")
NODE = Node(name="node-a", uid="node-uid")
T0 = 1_700_000_000.123456               # wall seconds at the fake clock's start: 2023-11-14T22:13:20.123456Z


# ---------------------------------------------------------------------------- metrics

UPSTREAM = {
    # family name (as the parser reports it) -> (type, label names)
    "scheduler_schedule_attempts": ("counter", {"result", "profile"}),
    "scheduler_scheduling_attempt_duration_seconds": ("histogram", {"result", "profile"}),
    "scheduler_scheduling_algorithm_duration_seconds": ("histogram", set()),
    "scheduler_pending_pods": ("gauge", {"queue"}),
    "scheduler_pod_scheduling_sli_duration_seconds": ("histogram", {"attempts"}),
    "scheduler_pod_scheduling_attempts": ("histogram", set()),
    "scheduler_framework_extension_point_duration_seconds": ("histogram", {"extension_point", "status", "profile"}),
    "scheduler_plugin_execution_duration_seconds": ("histogram", {"plugin", "extension_point", "status"}),
    "scheduler_plugin_evaluation": ("counter", {"plugin", "extension_point", "profile"}),
    "scheduler_queue_incoming_pods": ("counter", {"queue", "event"}),
    "scheduler_unschedulable_pods": ("gauge", {"plugin", "profile"}),
    "scheduler_preemption_attempts": ("counter", set()),
    "scheduler_preemption_victims": ("histogram", set()),
    "scheduler_permit_wait_duration_seconds": ("histogram", {"result"}),
    "scheduler_scheduler_cache_size": ("gauge", {"type"}),
}


def exercise(m: Metrics) -> None:
    m.observe_attempt(SCHEDULED, "tandem-scheduler", 0.004)
    m.scheduling_algorithm_duration.observe(0.002)
    m.set_pending(active=3, backoff=2, unschedulable=1, gated=4)
    m.pod_scheduled(attempts=2, sli_seconds=1.5)
    m.extension_point("preFilter", "Success", "tandem-scheduler", 0.0002)
    m.plugin("NodeResourcesFit", "filter", "Success", 0.00003)
    m.plugin_evaluation.labels("NodeResourcesFit", "Filter", "tandem-scheduler").inc()
    m.incoming("active", "PodAdd")
    m.unschedulable_pods.labels("NodeResourcesFit", "tandem-scheduler").inc()
    m.preemption(victims=3)
    m.permit_wait_duration.labels("Success").observe(0.01)
    m.cache_size.labels("nodes").set(10)


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


async def fetch(session: aiohttp.ClientSession, url: str) -> tuple[int, str, str]:
    async with session.get(url) as resp:
        return resp.status, await resp.text(), resp.headers.get("Content-Type", "")


async def test_metrics_endpoint_exports_upstream_names_and_labels() -> None:
    m = Metrics()
    exercise(m)
    async with serve_health("127.0.0.1", 0, m, ready=lambda: True) as server, aiohttp.ClientSession() as s:
        assert server.port > 0
        status, text, content_type = await fetch(s, f"{server.url}/metrics")
    assert status == 200 and content_type.startswith("text/plain")
    got = families(text)
    for name, (kind, labels) in UPSTREAM.items():
        assert got[name].type == kind, name
        for sample in got[name].samples:
            assert set(sample.labels) - {"le"} == labels, (name, sample)
    assert "scheduler_schedule_attempts_total{" in text
    assert "_created" not in text
    pending = {s.labels["queue"]: s.value for s in got["scheduler_pending_pods"].samples}
    assert pending == {"active": 3, "backoff": 2, "unschedulable": 1, "gated": 4}
    ext = [s for s in got["scheduler_framework_extension_point_duration_seconds"].samples
           if s.name.endswith("_count")]
    assert ext[0].labels == {"extension_point": "PreFilter", "status": "Success", "profile": "tandem-scheduler"}
    sli = [s for s in got["scheduler_pod_scheduling_sli_duration_seconds"].samples if s.name.endswith("_count")]
    assert sli[0].labels == {"attempts": "2"}


@pytest.mark.parametrize("name, buckets", [
    pytest.param("scheduler_scheduling_attempt_duration_seconds", exponential_buckets(0.001, 2, 15),
                 id="attempt duration buckets go from 1ms doubling 15 times"),
    pytest.param("scheduler_pod_scheduling_sli_duration_seconds", exponential_buckets(0.01, 2, 20),
                 id="sli buckets go from 10ms doubling 20 times"),
    pytest.param("scheduler_framework_extension_point_duration_seconds", exponential_buckets(0.0001, 2, 12),
                 id="extension point buckets go from 0.1ms doubling 12 times"),
    pytest.param("scheduler_plugin_execution_duration_seconds", exponential_buckets(0.00001, 1.5, 20),
                 id="plugin buckets go from 10us by 1.5 20 times"),
    pytest.param("scheduler_pod_scheduling_attempts", (1, 2, 4, 8, 16), id="attempt count buckets are 1 to 16"),
    pytest.param("scheduler_preemption_victims", (1, 2, 4, 8, 16, 32, 64), id="victim buckets are 1 to 64"),
])
def test_histogram_buckets_are_upstreams(name: str, buckets: tuple[float, ...]) -> None:
    m = Metrics()
    exercise(m)
    body, _ = m.exposition()
    fam = families(body.decode())[name]
    les = []
    for s in fam.samples:
        if s.name.endswith("_bucket") and s.labels["le"] != "+Inf":
            le = float(s.labels["le"])
            if le not in les:
                les.append(le)
    assert les == pytest.approx(list(buckets))


def test_each_metrics_object_has_its_own_registry() -> None:
    a, b = Metrics(), Metrics()
    a.observe_attempt(SCHEDULED, "p", 0.1)
    assert b.schedule_attempts.labels(SCHEDULED, "p")._value.get() == 0


def test_rest_client_requests_are_counted_by_code_host_and_method_at_scrape_time() -> None:
    from collections import Counter as Tally

    class Client:
        host = "https://10.0.0.1:6443"
        counts = Tally({("create", "201"): 3, ("get", "200"): 2, ("list", "200"): 1, ("patch", "409"): 1})

    m = Metrics()
    client = Client()
    m.bind_client(client)
    got = {(s.labels["code"], s.labels["host"], s.labels["method"]): s.value
           for s in families(m.exposition()[0].decode())["rest_client_requests"].samples}
    assert got == {("201", "10.0.0.1:6443", "POST"): 3, ("200", "10.0.0.1:6443", "GET"): 3,
                   ("409", "10.0.0.1:6443", "PATCH"): 1}
    client.counts["create", "201"] += 1   # read afresh on every scrape
    got = {s.labels["method"]: s.value for s in families(m.exposition()[0].decode())["rest_client_requests"].samples
           if s.labels["code"] == "201"}
    assert got == {"POST": 4}


def test_the_scheduler_and_events_clients_add_up_per_code_host_and_method() -> None:
    from collections import Counter as Tally

    class Client:
        def __init__(self, counts: dict) -> None:
            self.host = "https://10.0.0.1:6443"
            self.counts = Tally(counts)

    m = Metrics()
    m.bind_client(Client({("create", "201"): 3, ("get", "200"): 1}))
    m.bind_client(Client({("create", "201"): 5}))           # the events client
    got = {(s.labels["code"], s.labels["method"]): s.value
           for s in families(m.exposition()[0].decode())["rest_client_requests"].samples}
    assert got == {("201", "POST"): 8, ("200", "GET"): 1}


class Queued:
    def __init__(self, attempts: int, initial_attempt: float) -> None:
        self.attempts = attempts
        self.initial_attempt = initial_attempt


class Queue:
    def __init__(self) -> None:
        self.sizes = {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}

    def counts(self) -> dict[str, int]:
        return dict(self.sizes)


def samples(m: Metrics, name: str) -> dict[tuple, float]:
    body, _ = m.exposition()
    fam = families(body.decode())
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for s in fam[name].samples}


def test_pending_pods_are_read_from_a_bound_queue_at_scrape_time() -> None:
    m, q = Metrics(), Queue()
    m.bind_queue(q)
    q.sizes.update(active=5, gated=2)
    got = samples(m, "scheduler_pending_pods")
    assert got[("scheduler_pending_pods", (("queue", "active"),))] == 5
    assert got[("scheduler_pending_pods", (("queue", "gated"),))] == 2


@pytest.mark.parametrize("attempts, label", [
    pytest.param(1, "1", id="the attempts label is the attempt count"),
    pytest.param(15, "15+", id="the attempts label is capped at 15 as upstream"),
])
def test_scheduled_pod_feeds_the_sli_and_attempts_histograms(attempts: int, label: str) -> None:
    m = Metrics()
    m.observe_scheduled(Queued(attempts, initial_attempt=10.0), "p", now=12.5)
    got = samples(m, "scheduler_pod_scheduling_sli_duration_seconds")
    assert got[("scheduler_pod_scheduling_sli_duration_seconds_sum", (("attempts", label),))] == 2.5
    assert samples(m, "scheduler_pod_scheduling_attempts")[("scheduler_pod_scheduling_attempts_sum", ())] == attempts


def test_a_scheduler_error_counts_as_an_error_attempt_and_unschedulable_does_not() -> None:
    m = Metrics()
    m.observe_failure("SchedulerError", "p")
    m.observe_failure("Unschedulable", "p")
    got = samples(m, "scheduler_schedule_attempts")
    assert got == {("scheduler_schedule_attempts_total", (("profile", "p"), ("result", "error"))): 1}


async def test_readyz_is_503_until_ready_then_200() -> None:
    ready = False
    async with serve_health("127.0.0.1", 0, Metrics(), ready=lambda: ready) as server, \
            aiohttp.ClientSession() as s:
        assert (await fetch(s, f"{server.url}/readyz"))[0] == 503
        for path in ("/healthz", "/livez"):
            status, text, _ = await fetch(s, f"{server.url}{path}")
            assert (status, text) == (200, "ok")
        ready = True
        assert (await fetch(s, f"{server.url}/readyz"))[:2] == (200, "ok")


async def test_healthz_fails_when_unhealthy_and_a_raising_probe_counts_as_failed() -> None:
    def broken() -> bool:
        raise RuntimeError("boom")

    async with serve_health("127.0.0.1", 0, Metrics(), ready=broken, healthy=lambda: False) as server, \
            aiohttp.ClientSession() as s:
        assert (await fetch(s, f"{server.url}/healthz"))[0] == 500
        assert (await fetch(s, f"{server.url}/livez"))[0] == 500
        assert (await fetch(s, f"{server.url}/readyz"))[0] == 503


async def test_the_server_is_gone_after_the_block() -> None:
    async with serve_health("127.0.0.1", 0, Metrics(), ready=lambda: True) as server:
        url = f"{server.url}/healthz"
    async with aiohttp.ClientSession() as s:
        with pytest.raises(aiohttp.ClientConnectionError):
            await fetch(s, url)


# ---------------------------------------------------------------------------- events

class Sink:
    """A fake events API: records creates and patches; can fail or block."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.patched: list[tuple[str, dict[str, Any]]] = []
        self.fail_create: Exception | None = None
        self.fail_patch: Exception | None = None
        self.gate: asyncio.Event | None = None

    async def create(self, event: dict[str, Any]) -> dict[str, Any]:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_create is not None:
            raise self.fail_create
        self.created.append(event)
        return event

    async def patch(self, event: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
        if self.fail_patch is not None:
            raise self.fail_patch
        self.patched.append((event["metadata"]["name"], patch))
        return event


class NotFound(Exception):
    status = 404


def Clock() -> FakeClock:
    """The scheduler's one clock: series windows on its monotonic time, every timestamp from its wall()."""
    return FakeClock(100.0, wall_start=T0)


def recorder(sink: Sink, clock: FakeClock | None = None, **kw: Any) -> EventRecorder:
    return EventRecorder(sink.create, "tandem-scheduler", patch=sink.patch, hostname="host-1",
                         clock=clock or Clock(), **kw)


def name_ns(event: dict[str, Any]) -> int:
    """The nanoseconds upstream's recorder puts in an event's name ("<regarding>.<hex ns>")."""
    return int(event["metadata"]["name"].rsplit(".", 1)[1], 16)


def test_a_scheduled_event_looks_like_kube_schedulers() -> None:
    ev = recorder(Sink()).make_event(POD, None, NORMAL, SCHEDULED_REASON, BINDING,
                                     "Successfully assigned team/web-0 to node-a")
    assert ev["metadata"]["name"].startswith("web-0.") and abs(name_ns(ev) - T0 * 1e9) < 1_000, \
        "named after the regarding object and the clock's wall time in nanoseconds"
    assert ev == {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": ev["metadata"]["name"], "namespace": "team"},
        "eventTime": "2023-11-14T22:13:20.123456Z",
        "reportingController": "tandem-scheduler",
        "reportingInstance": "tandem-scheduler-host-1",
        "action": "Binding",
        "reason": "Scheduled",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "team", "name": "web-0", "uid": "uid-1",
                      "resourceVersion": "42"},
        "note": "Successfully assigned team/web-0 to node-a",
        "type": "Normal",
    }


@pytest.mark.parametrize("obj, ref", [
    pytest.param(NODE, {"apiVersion": "v1", "kind": "Node", "name": "node-a", "uid": "node-uid"},
                 id="a node record has no namespace"),
    pytest.param({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                  "metadata": {"name": "g", "namespace": "team", "uid": "g1"}},
                 {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "name": "g", "namespace": "team",
                  "uid": "g1"}, id="a raw API object is referenced by its metadata"),
    pytest.param({"kind": "Pod", "name": "x", "namespace": "n"}, {"kind": "Pod", "name": "x", "namespace": "n"},
                 id="a reference is taken as it is"),
])
def test_object_reference(obj: Any, ref: dict[str, str]) -> None:
    assert object_reference(obj) == ref


def test_an_event_about_a_cluster_scoped_object_goes_to_the_default_namespace() -> None:
    ev = recorder(Sink()).make_event(NODE, None, WARNING, "X", "Y", "z")
    assert ev["metadata"]["namespace"] == "default"


def test_related_object_and_profile_name_are_reported() -> None:
    rec = recorder(Sink())
    ev = rec.make_event(POD, NODE, WARNING, "Preempted", "Preempting", "by someone", controller="gang-scheduler")
    assert ev["related"]["name"] == "node-a"
    assert (ev["reportingController"], ev["reportingInstance"]) == ("gang-scheduler", "gang-scheduler-host-1")


def test_long_notes_are_cut_to_the_api_limit() -> None:
    ev = recorder(Sink()).make_event(POD, None, WARNING, FAILED_SCHEDULING, SCHEDULING, "é" * 2000)
    assert len(ev["note"].encode()) <= MAX_NOTE_BYTES and ev["note"].endswith("...")


def test_an_unknown_event_type_is_dropped() -> None:
    rec = recorder(Sink())
    assert rec.make_event(POD, None, "Error", "X", "Y", "z") is None
    rec.eventf(POD, None, "Error", "X", "Y", "z")
    assert rec.pending == 0


def test_event_names_stay_unique_on_a_clock_that_does_not_move() -> None:
    rec = recorder(Sink())
    a, b, c = (rec.make_event(POD, None, NORMAL, "A", "B", "c") for _ in range(3))
    assert len({e["metadata"]["name"] for e in (a, b, c)}) == 3
    assert name_ns(a) < name_ns(b) < name_ns(c), "a repeat takes the next nanosecond: names still sort by time"
    assert a["eventTime"] == b["eventTime"] == c["eventTime"], "the eventTime is the clock's, not the name's"


async def test_event_time_name_and_series_follow_the_injected_clock() -> None:
    # 2026-01-01T00:00:00Z on a fake clock: far from the machine's clock, so any read of it shows
    sink, clock = Sink(), FakeClock(500.0, wall_start=1_767_225_600.0)
    rec = recorder(sink, clock)
    rec.start()
    rec.eventf(POD, None, WARNING, FAILED_SCHEDULING, SCHEDULING, "first")
    await eventually(lambda: len(sink.created) == 1, "the first event to be written")
    clock.advance(12.5)
    rec.eventf(POD, None, WARNING, FAILED_SCHEDULING, SCHEDULING, "again")   # count 2: patched at once
    await eventually(lambda: len(sink.patched) == 1, "the series to be patched")
    (first,) = sink.created
    assert first["eventTime"] == "2026-01-01T00:00:00.000000Z"
    assert name_ns(first) == 1_767_225_600 * 10**9
    ((_, patch),) = sink.patched
    assert patch["series"] == {"count": 2, "lastObservedTime": "2026-01-01T00:00:12.500000Z"}
    await rec.stop()


async def test_recording_never_blocks_and_drops_the_oldest_when_full() -> None:
    sink = Sink()
    sink.gate = asyncio.Event()                         # the API server hangs
    m = Metrics()
    rec = recorder(sink, capacity=3, metrics=m)
    rec.start()
    rec.eventf(POD, None, WARNING, "R0", SCHEDULING, "n")
    await asyncio.sleep(0)                              # the task takes R0 and blocks in create
    for i in range(1, 6):
        rec.eventf(POD, None, WARNING, f"R{i}", SCHEDULING, "note %d", i)
    assert rec.pending == 4 and rec.dropped == 2         # 3 queued, R0 being written
    assert m.events_dropped._value.get() == 2
    sink.gate.set()
    await rec.stop()
    assert [e["reason"] for e in sink.created] == ["R0", "R3", "R4", "R5"]
    assert sink.created[-1]["note"] == "note 5"


async def test_writes_run_concurrently_up_to_the_limit_and_the_queue_holds_the_rest() -> None:
    sink = Sink()
    sink.gate = asyncio.Event()                         # the API server is slow
    rec = recorder(sink, concurrency=2)
    rec.start()
    for i in range(5):
        rec.eventf(POD, None, NORMAL, f"R{i}", BINDING, "n")
    for _ in range(5):
        await asyncio.sleep(0)
    assert len(rec._writes) == 2 and len(rec._queue) == 3, "two writes under way, three waiting"
    sink.gate.set()
    await rec.stop()
    assert sorted(e["reason"] for e in sink.created) == [f"R{i}" for i in range(5)]


async def test_a_backlog_past_a_quarter_of_the_queue_gets_more_writes_under_way() -> None:
    sink = Sink()
    sink.gate = asyncio.Event()                         # the API server is slow
    rec = recorder(sink, concurrency=2, capacity=20)
    rec.start()
    for i in range(12):
        rec.eventf(POD, None, NORMAL, f"R{i}", BINDING, "n")
    for _ in range(5):
        await asyncio.sleep(0)
    # more than 20 // 4 waiting: up to 2 * BACKLOG_CONCURRENCY under way, until the queue is down to 5
    assert 2 < len(rec._writes) <= 2 * BACKLOG_CONCURRENCY, "catching up instead of dropping"
    assert (len(rec._writes), len(rec._queue)) == (7, 5)
    sink.gate.set()
    await rec.stop()
    assert rec.dropped == 0 and len(sink.created) == 12


async def test_a_series_patch_waits_for_the_create_of_its_first_object() -> None:
    sink = Sink()
    sink.gate = asyncio.Event()
    order: list[str] = []
    create, patch = sink.create, sink.patch

    async def tracked_create(event: dict[str, Any]) -> Any:
        out = await create(event)
        order.append("create")
        return out

    async def tracked_patch(event: dict[str, Any], p: dict[str, Any]) -> Any:
        order.append("patch")
        return await patch(event, p)

    rec = EventRecorder(tracked_create, "tandem-scheduler", patch=tracked_patch, hostname="h", clock=FakeClock())
    rec.start()
    rec.eventf(POD, None, WARNING, FAILED_SCHEDULING, SCHEDULING, "n")
    rec.eventf(POD, None, WARNING, FAILED_SCHEDULING, SCHEDULING, "n")   # count 2: patched at once
    for _ in range(5):
        await asyncio.sleep(0)
    assert order == [], "the patch is held while the create is under way"
    sink.gate.set()
    await rec.stop()
    assert order == ["create", "patch"]


async def test_stop_drains_what_was_queued_before_start() -> None:
    sink = Sink()
    rec = recorder(sink)
    for i in range(10):
        rec.eventf(POD, None, NORMAL, f"R{i}", BINDING, "n")
    rec.start()
    await rec.stop()
    assert len(sink.created) == 10


async def test_a_held_recorder_writes_at_start_only_what_was_recorded_within_the_hold() -> None:
    sink, clock = Sink(), Clock()
    rec = recorder(sink, clock, hold_seconds=2.25)   # a leader-election follower: lease 2 s + retry 0.25 s
    for i in range(3):
        rec.eventf(POD, None, WARNING, f"old{i}", SCHEDULING, "n")
    clock.advance(2.0)
    rec.eventf(POD, None, WARNING, "recent", SCHEDULING, "n")
    clock.advance(1.0)                                  # the first three are now older than the hold
    rec.eventf(POD, None, WARNING, "newest", SCHEDULING, "n")
    assert rec.pending == 2 and rec.dropped == 0, "expired holds are not drops"
    clock.advance(0.5)
    rec.start()                                         # it leads now
    await rec.stop()
    assert [e["reason"] for e in sink.created] == ["recent", "newest"]


async def test_stop_gives_up_on_a_hung_sink_after_its_timeout() -> None:
    sink = Sink()
    sink.gate = asyncio.Event()
    rec = recorder(sink)
    rec.eventf(POD, None, NORMAL, "R", BINDING, "n")
    rec.start()
    await rec.stop(timeout=0.05)
    assert sink.created == []


async def test_repeats_become_a_series_on_the_first_object() -> None:
    sink, clock = Sink(), Clock()
    rec = recorder(sink, clock)
    rec.start()
    for i in range(4):
        clock.advance(1)
        rec.eventf(POD, None, WARNING, FAILED_SCHEDULING, SCHEDULING, f"0/3 nodes are available: attempt {i}")
        await asyncio.sleep(0)
    await rec.stop()
    (first,) = sink.created
    assert first["note"].endswith("attempt 0") and "series" not in first
    name = first["metadata"]["name"]
    # the second occurrence patches count 2 at once; the rest are written when the series ends
    assert [(n, p["series"]["count"]) for n, p in sink.patched] == [(name, 2), (name, 4)]


async def test_a_different_reason_or_pod_is_a_new_event() -> None:
    sink = Sink()
    rec = recorder(sink)
    rec.start()
    rec.eventf(POD, None, WARNING, FAILED_SCHEDULING, SCHEDULING, "n")
    rec.eventf(POD, NODE, NORMAL, SCHEDULED_REASON, BINDING, "n")
    rec.eventf(Pod(uid="uid-2", namespace="team", name="web-1"), None, WARNING, FAILED_SCHEDULING, SCHEDULING, "n")
    await rec.stop()
    assert len(sink.created) == 3 and sink.patched == []


async def test_a_repeat_after_the_series_window_is_a_new_event() -> None:
    sink, clock = Sink(), Clock()
    rec = recorder(sink, clock, finish_seconds=60)
    rec.start()
    rec.eventf(POD, None, WARNING, FAILED_SCHEDULING, SCHEDULING, "n")
    await asyncio.sleep(0)
    clock.advance(61)
    rec.eventf(POD, None, WARNING, FAILED_SCHEDULING, SCHEDULING, "n")
    await rec.stop()
    assert len(sink.created) == 2 and sink.patched == []


async def test_a_series_whose_first_object_is_gone_is_created_again() -> None:
    sink = Sink()
    sink.fail_patch = NotFound("gone")
    rec = recorder(sink)
    rec.start()
    rec.eventf(POD, None, WARNING, FAILED_SCHEDULING, SCHEDULING, "n")
    rec.eventf(POD, None, WARNING, FAILED_SCHEDULING, SCHEDULING, "n")
    await rec.stop()
    assert len(sink.created) == 2
    assert sink.created[1]["series"]["count"] == 2
    assert "series" not in sink.created[0]


async def test_a_failing_sink_is_counted_and_recording_goes_on() -> None:
    sink = Sink()
    sink.fail_create = RuntimeError("500")
    rec = recorder(sink)
    rec.start()
    rec.eventf(POD, None, WARNING, "A", SCHEDULING, "n")
    await eventually(lambda: rec.failed == 1, "the failed create to be counted")
    sink.fail_create = None
    rec.eventf(POD, None, WARNING, "B", SCHEDULING, "n")
    await rec.stop()
    assert rec.failed == 1
    assert [e["reason"] for e in sink.created] == ["B"]


async def test_record_reports_as_the_given_profile() -> None:
    sink = Sink()
    rec = recorder(sink)
    rec.record(POD, WARNING, FAILED_SCHEDULING, SCHEDULING, "0/1 nodes are available: 100% done", "other")
    rec.start()
    await rec.stop()
    (ev,) = sink.created
    assert ev["reportingController"] == "other" and ev["note"].endswith("100% done")


async def test_profile_recorders_share_the_queue_and_report_their_name() -> None:
    sink = Sink()
    rec = recorder(sink)
    rec.for_profile("gang-scheduler").eventf(POD, None, NORMAL, SCHEDULED_REASON, BINDING,
                                             "Successfully assigned %s/%s to %s", "team", "web-0", "node-a")
    rec.start()
    await rec.stop()
    (ev,) = sink.created
    assert ev["reportingController"] == "gang-scheduler"
    assert ev["note"] == "Successfully assigned team/web-0 to node-a"


async def test_a_singleton_is_cached_serialized_and_a_repeat_reads_it_back_for_its_series() -> None:
    sink = Sink()
    rec = recorder(sink)
    rec.start()
    rec.eventf(POD, None, WARNING, FAILED_SCHEDULING, SCHEDULING, "first")
    await eventually(lambda: rec._cache, "the recorder to take the event")
    (cached,) = rec._cache.values()
    assert isinstance(cached.saved, bytes) and len(cached.saved) < 1024, "kept compact while it is one event"
    rec.eventf(POD, None, WARNING, FAILED_SCHEDULING, SCHEDULING, "again")
    await eventually(lambda: cached.count == 2, "the repeat to be counted")
    assert cached.event["series"]["count"] == 2 and cached.event["note"] == "first", "the first object, now a series"
    await rec.stop()
    assert [e["note"] for e in sink.created] == ["first"]
    assert [p["series"]["count"] for _, p in sink.patched] == [2], sink.patched
