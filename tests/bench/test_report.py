"""bench/report.py: the JSON document, the PNG plot and the summary text."""

from __future__ import annotations

import json
import math

import pytest

from bench.metrics import ATTEMPT_METRIC, COLLECTING, RESUMED, THROUGHPUT_METRIC, Histogram, RunMetrics
from bench.report import (
    build_document, machine_info, report_stem, safe_name, summary_text, timestamp, write_report,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(scheduler: str = "tandem-scheduler", rate: float = 100.0, n: int = 9) -> RunMetrics:
    attempt = Histogram(((0.001, 10.0), (0.002, 90.0), (0.004, 100.0), (math.inf, 100.0)), 0.18, 100.0)
    return RunMetrics(
        workload="SchedulingBasic/500Nodes", scheduler=scheduler, throughput=[rate] * n,
        series=[(float(i + 1), rate) for i in range(n + 1)], e2e=[0.05 * (i + 1) for i in range(10)],
        attempt={"scheduled": attempt, "unschedulable": Histogram()}, measured=1000, bound=1000,
        window_seconds=10.4, rss_peak=150 * 1024 * 1024, cpu_seconds=9.5, overall=rate * 0.98)


def metadata() -> dict:
    return {"command": "tandem-bench run SchedulingBasic/500Nodes --start-scheduler default",
            "date": "2025-01-31T14:05:02+00:00", "machine": machine_info(),
            "workload": {"name": "SchedulingBasic/500Nodes", "params": {"initNodes": 500}},
            "scheduler": {"label": "tandem-scheduler", "name": "tandem-scheduler", "config": "default"},
            "ceiling": None}


def test_write_report_writes_json_with_data_items_and_metadata(tmp_path):
    stem = report_stem("SchedulingBasic/500Nodes", "tandem-scheduler", "20250131T140502Z")
    json_path, png_path = write_report(tmp_path / "out", [run()], metadata(), stem, title="t")
    assert json_path == tmp_path / "out" / "SchedulingBasic_500Nodes-tandem-scheduler-20250131T140502Z.json"
    doc = json.loads(json_path.read_text())
    assert doc["version"] == "v1"
    metrics = [it["labels"]["Metric"] for it in doc["dataItems"]]
    assert metrics == [THROUGHPUT_METRIC, ATTEMPT_METRIC, "PodCreateToBindLatency"]
    assert doc["dataItems"][0]["data"]["Average"] == 100.0
    meta = doc["metadata"]
    for key in ("command", "date", "machine", "workload", "scheduler", "ceiling"):
        assert key in meta
    assert {"cores", "memory_bytes", "python"} <= set(meta["machine"])
    assert meta["workload"]["params"] == {"initNodes": 500}
    (r,) = doc["runs"]
    assert r["throughput"]["Perc99"] == 100.0
    assert r["rss_peak_bytes"] == 150 * 1024 * 1024 and r["cpu_seconds"] == 9.5
    assert r["attempt_latency"]["scheduled"]["p50_seconds"] == pytest.approx(0.001 + 0.001 * 40 / 80)
    assert "unschedulable" not in r["attempt_latency"]            # no attempts, no entry
    assert len(r["throughput_series"]) == 10


def test_write_report_writes_a_non_empty_png(tmp_path):
    _, png_path = write_report(tmp_path, [run()], metadata(), "x", title="SchedulingBasic/500Nodes",
                               ceiling=400.0)
    data = png_path.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 5000


def test_a_comparison_plots_every_run_and_labels_items_per_run(tmp_path):
    runs = [run("A", 100), run("B", 150), run("A", 110), run("B", 140)]
    labels = [{"Run": str(i // 2 + 1), "Side": "AB"[i % 2]} for i in range(4)]
    json_path, png_path = write_report(tmp_path, runs, metadata(), "cmp", title="t", run_labels=labels)
    doc = json.loads(json_path.read_text())
    assert len(doc["runs"]) == 4
    keys = {(it["labels"]["Scheduler"], it["labels"]["Run"]) for it in doc["dataItems"]}
    assert keys == {("A", "1"), ("B", "1"), ("A", "2"), ("B", "2")}
    assert png_path.read_bytes().startswith(PNG_MAGIC)


def test_a_run_without_samples_or_series_still_writes_valid_files(tmp_path):
    empty = RunMetrics("W/x", "s")
    json_path, png_path = write_report(tmp_path, [empty], {}, "empty", title="t")
    doc = json.loads(json_path.read_text())          # strict JSON: no NaN anywhere
    assert doc["dataItems"][0]["data"] == {}
    assert png_path.stat().st_size > 0


def test_summary_fits_one_screen_and_says_everything():
    text = summary_text(run(), config="default", ceiling=run("baseline-binder", 400.0))
    lines = text.splitlines()
    assert len(lines) <= 12 and max(map(len, lines)) <= 120
    assert "avg 100.0" in text and "p50 100.0" in text and "p90 100.0" in text and "p99 100.0" in text
    assert "attempt" in text and "p50 1.50 ms" in text and "p99 3.80 ms" in text
    assert "e2e" in text and "p50 250 ms" in text and "p99 500 ms" in text
    assert "RSS peak 150.0 MiB" in text and "CPU 9.5 s" in text
    assert "25.0 %" in text


@pytest.mark.parametrize("basis, note", [
    pytest.param(RESUMED, "(created to bound; the pause included)", id="paused while creating"),
    pytest.param(COLLECTING, "(created to bound)", id="not paused"),
])
def test_summary_and_json_give_cpu_per_pod_beside_the_rate_and_say_which_window(tmp_path, basis, note):
    m = run()
    m.cpu_window_seconds, m.cpu_basis, m.window_rate = 1.5, basis, 125.0
    lines = summary_text(m).splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith("  throughput"))
    assert lines[i + 1] == (f"  CPU per pod  1.50 ms ({basis}; 1.50 s of CPU), 125.0 pods/s over the same 8.00 s")
    assert any(line.startswith("  e2e") and line.endswith(note) for line in lines)
    json_path, _ = write_report(tmp_path, [m], metadata(), "cpu", title="t")
    (r,) = json.loads(json_path.read_text())["runs"]
    assert (r["cpu_per_pod_seconds"], r["cpu_window"], r["window_rate"]) == (0.0015, basis, 125.0)
    assert r["rss_peak_bytes"] == 150 * 1024 * 1024


def test_summary_and_json_give_the_schedulers_api_requests_and_dropped_events(tmp_path):
    m = run()
    m.requests, m.events_dropped = {"PATCH": 435.0, "POST": 14302.0, "GET": 9.0}, 0.0
    assert "requests     POST 14,302  PATCH 435  GET 9  (whole run; events dropped 0)" in summary_text(m)
    json_path, _ = write_report(tmp_path, [m], metadata(), "req", title="t")
    (r,) = json.loads(json_path.read_text())["runs"]
    assert r["api_requests"] == {"PATCH": 435.0, "POST": 14302.0, "GET": 9.0} and r["events_dropped"] == 0.0
    assert "requests" not in summary_text(run()), "no line when the scheduler exports no request counts"


def test_summary_of_an_unsampled_external_run_says_what_is_missing():
    m = RunMetrics("W/x", "default-scheduler", measured=10, bound=10, overall=55.0)
    text = summary_text(m)
    assert "overall 55.0 pods/s" in text
    assert "attempt      -" in text
    assert "not a local process" in text


def test_build_document_keeps_the_perf_dash_keys_first():
    doc = build_document([run()], metadata())
    assert list(doc)[:2] == ["version", "dataItems"]


@pytest.mark.parametrize("text, want", [
    ("SchedulingBasic/500Nodes", "SchedulingBasic_500Nodes"),
    ("tandem-scheduler:gang", "tandem-scheduler_gang"),
    ("a b (A)", "a_b_A"),
    ("///", "unnamed"),
])
def test_safe_name(text, want):
    assert safe_name(text) == want


def test_timestamp_is_compact_utc():
    import datetime as dt

    assert timestamp(dt.datetime(2025, 1, 31, 14, 5, 2, tzinfo=dt.timezone.utc)) == "20250131T140502Z"
