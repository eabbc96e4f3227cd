"""bench/metrics.py: throughput sampling, percentiles, histogram quantiles, DataItems, on synthetic data."""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
import time

import pytest

from bench.metrics import (
    ATTEMPT_METRIC, COLLECTING, E2E_METRIC, NOT_APPLICABLE, RESUMED, THROUGHPUT_METRIC, CpuWindow, Histogram,
    ProcessSampler, RunMetrics, WindowScraper, EdgeRecorder, collect, comparable_throughputs, cpu_window, data_items,
    e2e_latencies, histogram_quantiles, parse_prometheus_histogram, summarize, throughput_samples, throughput_series,
)
from bench.record import Recorder

T0 = 1_700_000_000.0      # a realistic time.time(): the float precision the code really sees


def steady(rate: float, seconds: float, start: float = T0, offset: float = 0.0) -> list[float]:
    """Bound times of a stream of ``rate`` pods/s, each in the middle of its 1/rate slot."""
    step = 1.0 / rate
    n = int(round(rate * seconds))
    return [start + offset + (i + 0.5) * step for i in range(n)]


# ---------------------------------------------------------------------------- throughput_samples


@pytest.mark.parametrize("bound, start, end, want", [
    pytest.param(steady(100, 10), T0, T0 + 10, [100.0] * 9,
                 id="a steady 100 pods/s stream gives samples of 100 with the first one skipped"),
    pytest.param(steady(100, 10), T0, T0 + 10.5, [100.0] * 9,
                 id="the partial interval after the last tick is dropped"),
    pytest.param(steady(100, 10.5), T0, T0 + 10.5, [100.0] * 9,
                 id="pods bound in the partial last interval are not counted"),
    pytest.param([], T0, T0 + 10, [], id="no pods give no samples"),
    pytest.param(steady(100, 10), T0, T0, [], id="an empty window gives no samples"),
    pytest.param(steady(100, 10), T0 + 5, T0, [], id="a window ending before it starts gives no samples"),
    pytest.param(steady(100, 0.9), T0, T0 + 0.9, [], id="a window shorter than one interval gives no samples"),
    pytest.param(steady(100, 1.5), T0, T0 + 1.5, [], id="one full interval is only the skipped first sample"),
    pytest.param(steady(50, 3, offset=2), T0, T0 + 5, [50.0, 50.0],
                 id="ticks before the first bound pod produce nothing, not zeros"),
    pytest.param([T0 + 0.5, T0 + 1.5, T0 + 4.5], T0, T0 + 6, [1.0] + [1.0 / 3] * 3,
                 id="idle intervals are merged into the next busy one and recorded once per interval"),
    pytest.param([T0 + 0.5, T0 + 1.5, T0 + 2.5], T0, T0 + 8, [1.0, 1.0],
                 id="idle intervals at the end that no binding closes are dropped"),
    pytest.param([T0 + 1.0, T0 + 2.0, T0 + 3.0], T0, T0 + 3, [1.0, 1.0],
                 id="a pod bound exactly on a tick belongs to the interval the tick closes"),
    pytest.param([T0 - 5.0] * 7 + steady(10, 4), T0, T0 + 4, [10.0] * 3,
                 id="pods bound before the window only raise the baseline"),
    pytest.param(list(reversed(steady(20, 5))), T0, T0 + 5, [20.0] * 4, id="unsorted input is fine"),
])
def test_throughput_samples(bound, start, end, want):
    assert throughput_samples(bound, start, end) == pytest.approx(want)


def test_throughput_samples_with_a_longer_interval_reports_pods_per_second():
    assert throughput_samples(steady(100, 10), T0, T0 + 10, interval=2.0) == pytest.approx([100.0] * 4)


def test_throughput_samples_rejects_a_non_positive_interval():
    with pytest.raises(ValueError):
        throughput_samples([T0], T0, T0 + 1, interval=0)


def test_throughput_series_keeps_every_interval_and_scales_the_partial_last_one():
    series = throughput_series([T0 + 0.5, T0 + 0.6, T0 + 2.2], T0, T0 + 2.5)
    assert [t for t, _ in series] == pytest.approx([1.0, 2.0, 2.5])
    assert [r for _, r in series] == pytest.approx([2.0, 0.0, 2.0])
    assert throughput_series([], T0, T0) == []


# ---------------------------------------------------------------------------- summarize


@pytest.mark.parametrize("values, want", [
    pytest.param(list(range(1, 101)), {"Average": 50.5, "Perc50": 50, "Perc90": 90, "Perc95": 95, "Perc99": 99},
                 id="1..100 gives the nearest ranks themselves"),
    pytest.param([100.0] * 9, {"Average": 100.0, "Perc50": 100.0, "Perc90": 100.0, "Perc95": 100.0,
                               "Perc99": 100.0}, id="a constant stream"),
    pytest.param([5, 1, 3], {"Average": 3.0, "Perc50": 3, "Perc90": 5, "Perc95": 5, "Perc99": 5},
                 id="three values: ceil(1.5)=2nd, ceil(2.7)=3rd"),
    pytest.param([7.0], {"Average": 7.0, "Perc50": 7.0, "Perc90": 7.0, "Perc95": 7.0, "Perc99": 7.0},
                 id="one value is every percentile"),
    pytest.param(list(range(1, 11)), {"Average": 5.5, "Perc50": 5, "Perc90": 9, "Perc95": 10, "Perc99": 10},
                 id="ten values: no interpolation between ranks"),
    pytest.param([], {}, id="no values give no data"),
])
def test_summarize_uses_nearest_rank(values, want):
    assert summarize(values) == pytest.approx(want)


# ---------------------------------------------------------------------------- e2e


def test_e2e_latencies_are_created_to_bound_of_measured_bound_pods_only():
    rec = Recorder()
    rec.created("ns/warmup", T0, measured=False)
    rec.bound("ns/warmup", T0 + 9, "n1")
    rec.start_collecting(T0 + 1)
    rec.created("ns/a", T0 + 1)
    rec.created("ns/b", T0 + 2)
    rec.created("ns/never", T0 + 3)
    rec.bound("ns/a", T0 + 1.25, "n1")
    rec.bound("ns/b", T0 + 3.5, "n2")
    rec.bound("ns/b", T0 + 7.0, "n3")          # a later event does not move the first bind
    assert sorted(e2e_latencies(rec)) == pytest.approx([0.25, 1.5])


# ---------------------------------------------------------------------------- prometheus histograms

# Four observations in each of (0, 1], (1, 2], (2, 4], (4, 8] for profile "a", plus a second profile and
# other results and metrics that must not leak in. Labels carry commas and escaped quotes on purpose.
EXPOSITION = r'''# HELP scheduler_scheduling_attempt_duration_seconds Scheduling attempt latency in seconds
# TYPE scheduler_scheduling_attempt_duration_seconds histogram
scheduler_scheduling_attempt_duration_seconds_bucket{le="1.0",profile="a",result="scheduled"} 4.0
scheduler_scheduling_attempt_duration_seconds_bucket{le="2.0",profile="a",result="scheduled"} 8.0
scheduler_scheduling_attempt_duration_seconds_bucket{le="4.0",profile="a",result="scheduled"} 12.0
scheduler_scheduling_attempt_duration_seconds_bucket{le="8.0",profile="a",result="scheduled"} 16.0
scheduler_scheduling_attempt_duration_seconds_bucket{le="+Inf",profile="a",result="scheduled"} 16.0
scheduler_scheduling_attempt_duration_seconds_sum{profile="a",result="scheduled"} 44.0
scheduler_scheduling_attempt_duration_seconds_count{profile="a",result="scheduled"} 16.0
scheduler_scheduling_attempt_duration_seconds_bucket{le="1.0",profile="b, \"x\"",result="scheduled"} 0.0
scheduler_scheduling_attempt_duration_seconds_bucket{le="2.0",profile="b, \"x\"",result="scheduled"} 0.0
scheduler_scheduling_attempt_duration_seconds_bucket{le="4.0",profile="b, \"x\"",result="scheduled"} 0.0
scheduler_scheduling_attempt_duration_seconds_bucket{le="8.0",profile="b, \"x\"",result="scheduled"} 4.0
scheduler_scheduling_attempt_duration_seconds_bucket{le="+Inf",profile="b, \"x\"",result="scheduled"} 4.0
scheduler_scheduling_attempt_duration_seconds_sum{profile="b, \"x\"",result="scheduled"} 20.0
scheduler_scheduling_attempt_duration_seconds_count{profile="b, \"x\"",result="scheduled"} 4.0
scheduler_scheduling_attempt_duration_seconds_bucket{le="1.0",profile="a",result="unschedulable"} 1.0
scheduler_scheduling_attempt_duration_seconds_bucket{le="2.0",profile="a",result="unschedulable"} 2.0
scheduler_scheduling_attempt_duration_seconds_bucket{le="4.0",profile="a",result="unschedulable"} 2.0
scheduler_scheduling_attempt_duration_seconds_bucket{le="8.0",profile="a",result="unschedulable"} 2.0
scheduler_scheduling_attempt_duration_seconds_bucket{le="+Inf",profile="a",result="unschedulable"} 3.0
scheduler_scheduling_attempt_duration_seconds_sum{profile="a",result="unschedulable"} 12.5
scheduler_scheduling_attempt_duration_seconds_count{profile="a",result="unschedulable"} 3.0
# HELP scheduler_scheduling_algorithm_duration_seconds Scheduling algorithm latency in seconds
# TYPE scheduler_scheduling_algorithm_duration_seconds histogram
scheduler_scheduling_algorithm_duration_seconds_bucket{le="1.0"} 100.0
scheduler_scheduling_algorithm_duration_seconds_bucket{le="+Inf"} 100.0
scheduler_scheduling_algorithm_duration_seconds_sum 1.0
scheduler_scheduling_algorithm_duration_seconds_count 100.0
'''


def test_parse_prometheus_histogram_filters_by_labels_and_sums_the_rest():
    one = parse_prometheus_histogram(EXPOSITION, ATTEMPT_METRIC, {"result": "scheduled", "profile": "a"})
    assert one.buckets == ((1.0, 4.0), (2.0, 8.0), (4.0, 12.0), (8.0, 16.0), (math.inf, 16.0))
    assert (one.sum, one.count) == (44.0, 16.0)
    both = parse_prometheus_histogram(EXPOSITION, ATTEMPT_METRIC, {"result": "scheduled"})
    assert both.buckets == ((1.0, 4.0), (2.0, 8.0), (4.0, 12.0), (8.0, 20.0), (math.inf, 20.0))
    assert (both.sum, both.count) == (64.0, 20.0)
    everything = parse_prometheus_histogram(EXPOSITION, ATTEMPT_METRIC)
    assert everything.count == 23.0


def test_parse_prometheus_histogram_of_an_absent_metric_is_empty():
    h = parse_prometheus_histogram(EXPOSITION, "no_such_metric_seconds")
    assert h == Histogram()
    assert math.isnan(h.average)
    assert all(math.isnan(q) for q in histogram_quantiles(h))


def test_parse_prometheus_histogram_works_without_type_lines():
    text = "\n".join(line for line in EXPOSITION.splitlines() if not line.startswith("#")) + "\n"
    assert parse_prometheus_histogram(text, ATTEMPT_METRIC, {"result": "scheduled", "profile": "a"}).count == 16.0


@pytest.mark.parametrize("q, want", [
    pytest.param(0.5, 2.0, id="p50 is the top of the second bucket (rank 8 of 16)"),
    pytest.param(0.9, 6.4, id="p90 interpolates inside (4, 8]: 4 + 4 * 2.4/4"),
    pytest.param(0.99, 7.84, id="p99 interpolates inside (4, 8]: 4 + 4 * 3.84/4"),
    pytest.param(0.125, 0.5, id="the lowest bucket starts at 0"),
    pytest.param(0.0, 0.0, id="q=0 is the lower edge"),
    pytest.param(-0.1, -math.inf, id="q<0 is -Inf as in PromQL"),
    pytest.param(1.5, math.inf, id="q>1 is +Inf as in PromQL"),
])
def test_histogram_quantiles_interpolate_like_histogram_quantile(q, want):
    h = parse_prometheus_histogram(EXPOSITION, ATTEMPT_METRIC, {"result": "scheduled", "profile": "a"})
    assert histogram_quantiles(h, [q]) == [pytest.approx(want)]


def test_histogram_quantile_in_the_inf_bucket_is_the_highest_finite_bound():
    h = parse_prometheus_histogram(EXPOSITION, ATTEMPT_METRIC, {"result": "unschedulable"})
    assert histogram_quantiles(h, [0.99]) == [8.0]
    assert histogram_quantiles(h, [0.5]) == [pytest.approx(1.5)]   # rank 1.5 in (1, 2]: 1 + 0.5/1


def test_histogram_quantiles_accept_plain_pairs_and_fix_non_monotonic_counts():
    pairs = [(math.inf, 10.0), (1.0, 5.0), (2.0, 4.0)]            # unsorted, and 2.0 dips below 1.0
    assert histogram_quantiles(pairs, [0.5]) == [pytest.approx(1.0)]


def test_histogram_quantiles_without_an_inf_bucket_are_nan():
    assert math.isnan(histogram_quantiles([(1.0, 3.0), (2.0, 4.0)], [0.5])[0])


def test_histogram_difference_is_what_happened_between_scrapes():
    before = Histogram(((1.0, 2.0), (math.inf, 3.0)), 4.0, 3.0)
    after = Histogram(((1.0, 5.0), (2.0, 1.0), (math.inf, 9.0)), 10.0, 9.0)
    d = after - before
    assert d == Histogram(((1.0, 3.0), (2.0, 1.0), (math.inf, 6.0)), 6.0, 6.0)
    assert (d + d).count == 12.0


# ---------------------------------------------------------------------------- collect and data_items


def _recorder(rate: float = 100, seconds: float = 10, tail: float = 0.5) -> Recorder:
    rec = Recorder(scheduler_name="tandem-scheduler")
    rec.created("setup/p", T0 - 1, measured=False)
    rec.start_collecting(T0)
    for i, b in enumerate(steady(rate, seconds)):
        rec.created(f"ns/p{i}", b - 0.2)
        rec.bound(f"ns/p{i}", b, "n")
    rec.stop_collecting(T0 + seconds + tail)
    return rec


def test_collect_turns_a_recorder_into_run_metrics():
    m = collect(_recorder(), "SchedulingBasic/Tiny", "tandem-scheduler")
    assert m.throughput == pytest.approx([100.0] * 9)
    assert (m.measured, m.bound) == (1000, 1000)
    assert m.window_seconds == pytest.approx(10.5)
    assert m.e2e == pytest.approx([0.2] * 1000)
    assert len(m.series) == 11 and m.series[-1][0] == pytest.approx(10.5)
    assert m.overall == pytest.approx(1000 / 9.995)
    assert m.throughput_avg() == pytest.approx(100.0)
    assert (m.rss_peak, m.cpu_seconds) == (None, None)


def test_collect_ends_an_open_window_at_the_last_bind():
    rec = _recorder()
    rec.windows[-1] = (T0, None)
    assert collect(rec, "W/x", "s").window_seconds == pytest.approx(9.995)


def test_a_run_too_short_for_samples_falls_back_to_the_overall_rate():
    m = collect(_recorder(rate=200, seconds=1, tail=0), "W/x", "s")
    assert m.throughput == []
    assert m.throughput_avg() == pytest.approx(200 / 0.9975)
    assert m.throughput_avg(sampled=True) is None


# ---------------------------------------------------------------------------- CPU per pod


@pytest.mark.parametrize("windows, pauses, last_bound, want", [
    pytest.param([(100.0, 130.0)], [], 120.0, CpuWindow(100.0, 120.0, 20.0, COLLECTING),
                 id="never paused: from the collecting start to the last bind"),
    pytest.param([(100.0, 130.0)], [(100.1, 104.0)], 120.0, CpuWindow(104.0, 120.0, 16.0, RESUMED),
                 id="paused while creating: from the resume to the last bind"),
    pytest.param([(100.0, 130.0)], [(100.1, 104.0), (110.0, 113.0)], 120.0, CpuWindow(104.0, 120.0, 13.0, RESUMED),
                 id="a later pause inside the window: from the first resume, its stopped seconds not run"),
    pytest.param([(100.0, 130.0)], [(100.1, 104.0)], 103.0, None,
                 id="nothing bound after the resume: no window"),
    pytest.param([(100.0, 130.0)], [], None, None, id="nothing bound: no window"),
    pytest.param([], [], 120.0, None, id="no collecting window and no pause: no window"),
])
def test_cpu_window_runs_from_the_resume_when_paused_else_from_the_collecting_start(windows, pauses, last_bound,
                                                                                     want):
    assert cpu_window(windows, pauses, last_bound) == want


class FakeSampler:
    """A ProcessSampler's readings without a process: 2 ms of CPU per second of wall time, flat while stopped."""

    def __init__(self, stopped: tuple[float, float]) -> None:
        self.stopped = stopped
        self.rss_peak = 200 << 20
        self.cpu_seconds = 9.0
        self.asked: list[tuple[float, float]] = []

    def _cpu(self, t: float) -> float:
        s, r = self.stopped
        return 0.002 * (min(t, s) - T0) + 0.002 * max(0.0, t - r)

    def cpu_between(self, start: float, end: float) -> float | None:
        self.asked.append((start, end))
        return self._cpu(end) - self._cpu(start)


def test_cpu_per_pod_of_a_paused_run_is_the_cpu_from_the_resume_to_the_last_bind_per_pod_bound():
    rec = Recorder()
    rec.start_collecting(T0)
    rec.paused(T0 + 0.1)
    for i in range(100):
        rec.created(f"ns/p{i}", T0 + 0.1 + i * 0.01)
    rec.resumed(T0 + 2.0)
    for i in range(100):                       # 100 binds over the 4 s after the resume
        rec.bound(f"ns/p{i}", T0 + 2.0 + (i + 1) * 0.04, "n")
    rec.stop_collecting(T0 + 6.5)
    sampler = FakeSampler(stopped=(T0 + 0.1, T0 + 2.0))
    m = collect(rec, "W/x", "s", sampler=sampler)
    assert sampler.asked == [(T0 + 2.0, pytest.approx(T0 + 6.0))]
    assert m.cpu_basis == RESUMED
    assert m.cpu_window_seconds == pytest.approx(0.008)
    assert m.cpu_per_pod == pytest.approx(0.008 / 100)
    assert m.window_rate == pytest.approx(100 / 4.0)
    assert (m.rss_peak, m.cpu_seconds) == (200 << 20, 9.0)


def test_cpu_per_pod_of_a_run_never_paused_counts_from_the_collecting_start():
    sampler = FakeSampler(stopped=(T0 + 100, T0 + 100))
    m = collect(_recorder(), "W/x", "s", sampler=sampler)
    assert sampler.asked == [(T0, pytest.approx(T0 + 9.995))]
    assert m.cpu_basis == COLLECTING
    assert m.window_rate == pytest.approx(1000 / 9.995)
    assert m.cpu_per_pod == pytest.approx(0.002 * 9.995 / 1000)


def test_a_run_without_a_sampled_process_still_has_the_rate_over_the_window_but_no_cpu_per_pod():
    m = collect(_recorder(), "W/x", "s")
    assert m.cpu_basis == COLLECTING and m.window_rate is not None
    assert m.cpu_window_seconds is None and m.cpu_per_pod is None


def test_comparable_throughputs_never_mix_bases():
    long = collect(_recorder(), "W/x", "a")
    short = collect(_recorder(rate=200, seconds=1, tail=0), "W/x", "b")
    values, basis = comparable_throughputs([long, long])
    assert values == pytest.approx([100.0, 100.0]) and "SchedulingThroughput" in basis
    values, basis = comparable_throughputs([long, short])
    assert values == pytest.approx([long.overall, short.overall]) and "overall" in basis


def test_data_items_have_perf_dash_shape():
    attempt = {"scheduled": parse_prometheus_histogram(EXPOSITION, ATTEMPT_METRIC, {"result": "scheduled",
                                                                                   "profile": "a"}),
               "error": Histogram()}
    doc = data_items("SchedulingBasic/5000Nodes", "tandem-scheduler", throughput=[100.0] * 9 + [50.0],
                     e2e=[0.1, 0.2, 0.3, 0.4], attempt=attempt)
    assert doc["version"] == "v1"
    assert [set(it) for it in doc["dataItems"]] == [{"data", "unit", "labels"}] * 3
    tp, att, e2e = doc["dataItems"]
    assert tp["unit"] == "pods/s"
    assert tp["labels"] == {"Metric": THROUGHPUT_METRIC, "Name": "SchedulingBasic/5000Nodes",
                            "Scheduler": "tandem-scheduler", "result": NOT_APPLICABLE}
    assert tp["data"] == pytest.approx({"Average": 95.0, "Perc50": 100.0, "Perc90": 100.0, "Perc95": 100.0,
                                        "Perc99": 100.0})
    assert att["unit"] == "ms"
    assert att["labels"]["Metric"] == ATTEMPT_METRIC and att["labels"]["result"] == "scheduled"
    assert att["data"] == pytest.approx({"Perc50": 2000.0, "Perc90": 6400.0, "Perc95": 7200.0, "Perc99": 7840.0,
                                         "Average": 2750.0})
    assert e2e["unit"] == "ms" and e2e["labels"]["Metric"] == E2E_METRIC
    assert e2e["data"] == pytest.approx({"Average": 250.0, "Perc50": 200.0, "Perc90": 400.0, "Perc95": 400.0,
                                         "Perc99": 400.0})
    # every item has every label (perf-dash hides items missing one)
    assert len({frozenset(it["labels"]) for it in doc["dataItems"]}) == 1


def test_data_items_without_samples_still_name_the_throughput_metric():
    doc = data_items("W/x", "s", labels={"Run": "1"})
    assert doc["dataItems"] == [{"data": {}, "unit": "pods/s",
                                 "labels": {"Metric": THROUGHPUT_METRIC, "Name": "W/x", "Scheduler": "s",
                                            "Run": "1"}}]


def test_run_metrics_data_items_use_the_run():
    m = RunMetrics("W/x", "s", throughput=[3.0, 1.0, 2.0])
    assert m.data_items()["dataItems"][0]["data"]["Perc50"] == 2.0


# ---------------------------------------------------------------------------- process sampler and scraper


async def test_process_sampler_sees_rss_and_cpu_of_a_busy_child():
    code = "import time\nx = b'x' * (64 << 20)\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\ntime.sleep(5)"
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        await asyncio.sleep(0.05)
        sampler = ProcessSampler(proc.pid, interval=0.1)
        sampler.start()
        await asyncio.sleep(1.0)
        await sampler.stop()
        assert sampler.rss_peak > 60 << 20
        assert sampler.cpu_seconds is not None and 0.3 < sampler.cpu_seconds < 2.0
        assert len(sampler.samples) >= 5
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("start, end, want", [
    pytest.param(10.0, 12.0, 3.0, id="two samples apart: the difference"),
    pytest.param(10.5, 11.5, 1.5, id="between samples: interpolated on both sides"),
    pytest.param(9.0, 12.0, None, id="a window that began before the first sample: unknown"),
    pytest.param(11.0, 13.0, None, id="a window that ended after the last sample: unknown"),
])
def test_process_sampler_tells_the_cpu_spent_in_a_window(start, end, want):
    sampler = ProcessSampler.__new__(ProcessSampler)
    sampler.samples = [(10.0, 1, 5.0), (11.0, 1, 6.0), (12.0, 1, 8.0)]   # (wall time, rss, cpu so far)
    got = sampler.cpu_between(start, end)
    assert got == (pytest.approx(want) if want is not None else None)


async def test_process_sampler_of_several_processes_sums_their_trees_each_process_once():
    code = "import time\nx = b'x' * (32 << 20)\ntime.sleep(30)"
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(2)]
    try:
        sampler = ProcessSampler([procs[0].pid, procs[1].pid, procs[0].pid])   # one named twice: counted once
        assert [p.pid for p in sampler.tree()] == [procs[0].pid, procs[1].pid]
        one = ProcessSampler(procs[0].pid)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:     # until both have touched their 32 MiB
            assert sampler.sample() and one.sample()
            if sampler.samples[-1][1] > 64 << 20:
                break
            await asyncio.sleep(0.05)
        assert sampler.samples[-1][1] > 64 << 20 > one.samples[-1][1] > 32 << 20
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


async def test_process_sampler_stops_quietly_when_the_process_exits():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    sampler = ProcessSampler(proc.pid, interval=0.05)
    sampler.start()
    proc.wait()
    await asyncio.sleep(0.2)
    await sampler.stop()
    assert sampler._task is None          # ended without raising


ONE_MORE = EXPOSITION.replace('le="+Inf",profile="a",result="scheduled"} 16.0',
                              'le="+Inf",profile="a",result="scheduled"} 20.0')


@pytest.mark.parametrize("recorder_class", [EdgeRecorder, Recorder], ids=["edge-driven", "polled"])
async def test_window_scraper_reports_what_the_window_observed(metrics_server, recorder_class):
    url, set_text = metrics_server
    set_text(EXPOSITION)
    rec = recorder_class()
    scraper = WindowScraper(rec, url, poll=0.01, close_delay=0.01)
    await scraper.start()
    set_text(ONE_MORE.replace("} 20.0", "} 17.0"))         # before the window: not counted
    await asyncio.sleep(0.05)
    rec.start_collecting(T0)
    await asyncio.sleep(0.1)
    set_text(ONE_MORE)                                     # three more attempts land in +Inf while collecting
    rec.stop_collecting(T0 + 1)
    await asyncio.sleep(0.1)
    set_text(ONE_MORE.replace("} 20.0", "} 99.0"))         # after the window: not counted
    hists = await scraper.stop()
    assert scraper.error is None and scraper.windows == 1
    assert hists["scheduled"].buckets[-1] == (math.inf, 3.0)
    assert hists["scheduled"].buckets[0] == (1.0, 0.0)


async def test_window_scraper_with_edges_catches_a_window_shorter_than_a_poll(metrics_server):
    url, set_text = metrics_server
    set_text(EXPOSITION)
    rec = EdgeRecorder()
    scraper = WindowScraper(rec, url, poll=10.0, close_delay=0.05)
    await scraper.start()
    rec.start_collecting(T0)
    await asyncio.sleep(0.1)
    set_text(ONE_MORE)
    rec.stop_collecting(T0 + 0.1)
    hists = await scraper.stop()
    assert hists["scheduled"].buckets[-1] == (math.inf, 4.0)
    assert scraper.windows == 1


async def test_window_scraper_without_windows_counts_the_whole_run(metrics_server):
    url, set_text = metrics_server
    set_text(EXPOSITION)
    scraper = WindowScraper(EdgeRecorder(), url)
    await scraper.start()
    set_text(ONE_MORE)
    hists = await scraper.stop()
    assert hists["scheduled"].buckets[-1] == (math.inf, 4.0)


async def test_window_scraper_closes_a_window_still_open_at_stop(metrics_server):
    url, set_text = metrics_server
    set_text(EXPOSITION)
    rec = EdgeRecorder()
    scraper = WindowScraper(rec, url, close_delay=0.0)
    await scraper.start()
    rec.start_collecting(T0)
    await asyncio.sleep(0.05)
    set_text(ONE_MORE)
    hists = await scraper.stop()
    assert hists["scheduled"].buckets[-1] == (math.inf, 4.0)
    assert rec.listeners == []


async def test_window_scraper_notes_an_unreachable_endpoint():
    rec = Recorder()
    scraper = WindowScraper(rec, "http://127.0.0.1:9/metrics", poll=0.01)
    await scraper.start()
    assert await scraper.stop() == {}
    assert scraper.error and "127.0.0.1:9" in scraper.error


@pytest.fixture
async def metrics_server():
    from aiohttp import web

    state = {"text": ""}

    async def handler(_request):
        return web.Response(text=state["text"], content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}/metrics", lambda t: state.update(text=t)
    finally:
        await runner.cleanup()



def test_gang_latency_runs_from_the_last_member_created_to_the_last_member_bound() -> None:
    from bench.metrics import gang_latencies
    from bench.record import Recorder

    r = Recorder()
    r.start_collecting(0.0)
    for i, (created, bound) in enumerate([(1.0, 4.0), (2.0, 3.0), (3.0, 5.5)]):
        r.created(f"ns/a-{i}", created, group="ns/a")
        r.bound(f"ns/a-{i}", bound, "n")
    r.created("ns/b-0", 1.0, group="ns/b")       # gang b never completes: left out
    r.bound("ns/b-0", 2.0, "n")
    r.created("ns/b-1", 1.0, group="ns/b")
    r.created("ns/solo", 1.0)                     # not a gang member
    r.bound("ns/solo", 9.0, "n")
    assert gang_latencies(r) == [2.5]


def test_api_requests_sum_codes_and_hosts_per_method_and_read_dropped_events() -> None:
    from bench.metrics import api_requests

    text = """# TYPE rest_client_requests_total counter
rest_client_requests_total{code="201",host="a:6443",method="POST"} 7000
rest_client_requests_total{code="409",host="a:6443",method="POST"} 3
rest_client_requests_total{code="200",host="a:6443",method="PATCH"} 435
rest_client_requests_total{code="200",host="b:6443",method="GET"} 9
# TYPE tandem_event_recorder_dropped_events_total counter
tandem_event_recorder_dropped_events_total 12
"""
    assert api_requests(text) == ({"POST": 7003.0, "PATCH": 435.0, "GET": 9.0}, 12.0)


def test_api_requests_of_a_scheduler_without_those_metrics_are_empty() -> None:
    from bench.metrics import api_requests

    assert api_requests("# TYPE scheduler_pending_pods gauge\nscheduler_pending_pods{queue=\"active\"} 0\n") == (
        {}, None)


def test_gc_pauses_read_collections_and_the_longest_per_generation() -> None:
    from bench.metrics import gc_pauses
    text = "\n".join([
        "# TYPE tandem_gc_pause_seconds histogram",
        'tandem_gc_pause_seconds_bucket{generation="0",le="0.005"} 40.0',
        'tandem_gc_pause_seconds_bucket{generation="0",le="+Inf"} 42.0',
        'tandem_gc_pause_seconds_count{generation="0"} 42.0',
        'tandem_gc_pause_seconds_sum{generation="0"} 0.2',
        'tandem_gc_pause_seconds_bucket{generation="2",le="+Inf"} 1.0',
        'tandem_gc_pause_seconds_count{generation="2"} 1.0',
        'tandem_gc_pause_seconds_sum{generation="2"} 0.04',
        "# TYPE tandem_gc_pause_max_seconds gauge",
        'tandem_gc_pause_max_seconds{generation="0"} 0.012',
        'tandem_gc_pause_max_seconds{generation="1"} 0.0',
        'tandem_gc_pause_max_seconds{generation="2"} 0.04',
        ""])
    assert gc_pauses(text) == {"0": (42.0, 0.012), "1": (0.0, 0.0), "2": (1.0, 0.04)}
    assert gc_pauses("# TYPE scheduler_pending_pods gauge\nscheduler_pending_pods 0\n") == {}
