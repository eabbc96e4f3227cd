"""bench/results_table.py: the results table and the Consolidation table, read from the JSON tandem-bench writes."""

from __future__ import annotations

import json

import pytest
from prometheus_client import generate_latest

from bench.consolidation import moves, parse_scrape
from bench.metrics import RunMetrics
from bench.probe import ProbeMetrics
from bench.report import build_document
from bench.metrics import COLLECTING, RESUMED
from bench.results_table import consolidation_table, table
from scheduler.consolidation.rebalancer import ConsolidationMetrics
from tests.bench.test_consolidation import replica_set_cluster


def run_document(config: str, with_consolidation: bool) -> dict:
    m = ProbeMetrics(gc_callbacks=False)
    before = parse_scrape(generate_latest(m.registry).decode())
    if with_consolidation:
        c = ConsolidationMetrics(m.registry)
        c.pods_evicted.labels("success", "spread", "apps", "a", "p").inc()
        c.plan_duration.labels("spread").observe(0.012)
    for _ in range(100):
        m.observe_attempt("scheduled", "tandem-stream", 4e-4)
    run = RunMetrics("ConsolidationSpread/5000Nodes", "tandem-scheduler", cpu_seconds=12.5)
    run.moves = moves(replica_set_cluster(), parse_scrape(generate_latest(m.registry).decode()) - before)
    meta = {"workload": {"name": run.workload}, "scheduler": {"config": f"config/benchmark-consolidation-{config}.yaml"},
            "date": "2026-11-29T03:20:05+00:00"}
    return json.loads(json.dumps(build_document([run], meta)))


def test_each_run_is_a_row_with_the_streams_attempts_the_evictions_and_the_plans(tmp_path):
    # 100 attempts of 0.4 ms read 0.41 from the fine buckets (linear within one 4.4% bucket)
    (tmp_path / "a.json").write_text(json.dumps(run_document("spread", True)))
    (tmp_path / "b.json").write_text(json.dumps(run_document("off", False)))
    header, rule, on, off = consolidation_table(tmp_path).splitlines()
    assert header.count("|") == rule.count("|") == on.count("|") == off.count("|")
    assert on.startswith("| ConsolidationSpread/5000Nodes | spread | 03:20 | 0.41 / 0.41 | 0.00 / 0.00 | 1 (0): 0.1/s, "
                         "peak 1 | spread 1: 12.00 / 12.00 / <= 16.00 | ")
    assert on.endswith("| 0 | 2 -> 3 | 1/1 | - | 12.5 |")
    assert off.startswith("| ConsolidationSpread/5000Nodes | off | 03:20 | 0.41 / 0.41 |") and "| - | - | - |" in off


def basic_document(scheduler: str, kind: str, cpu_window_seconds: float | None, basis: str | None,
                   date: str) -> dict:
    run = RunMetrics("SchedulingBasic/500Nodes", scheduler, throughput=[400.0, 400.0], measured=1000, bound=1000,
                     rss_peak=150 << 20, cpu_window_seconds=cpu_window_seconds, cpu_basis=basis)
    meta = {"workload": {"name": run.workload}, "scheduler": {"label": scheduler, "kind": kind, "config": None},
            "date": date, "command": "tandem-bench run ..."}
    return json.loads(json.dumps(build_document([run], meta)))


@pytest.mark.parametrize("cpu, basis, cell", [
    pytest.param(1.5, RESUMED, "1.50 ms", id="paused while creating: counted from the resume"),
    pytest.param(1.5, COLLECTING, "1.50 ms†", id="not paused: marked as counted from the collecting start"),
    pytest.param(None, None, "-", id="no process sampled"),
])
def test_the_table_gives_cpu_per_pod_beside_pods_per_second_and_the_rss_peak(tmp_path, cpu, basis, cell):
    (tmp_path / "a.json").write_text(json.dumps(basic_document("tandem-scheduler", "tandem", cpu, basis,
                                                               "2026-11-29T03:20:05+00:00")))
    lines = table(tmp_path).splitlines()
    header, rule, row = lines[:3]
    assert header.split(" | ")[3:5] == ["pods/s avg", "CPU per pod"] and "| RSS peak |" in header
    assert header.count("|") == rule.count("|") == row.count("|")
    assert row.split(" | ")[3:5] == ["400", cell] and "| 150 MiB |" in row
    assert ("† CPU counted from the collecting start" in lines[-1]) == cell.endswith("†")


def test_a_run_recorded_before_cpu_per_pod_existed_reads_it_from_the_cpu_while_collecting(tmp_path):
    doc = basic_document("kube-scheduler", "kube-scheduler", 2.0, COLLECTING, "2026-11-29T03:20:05+00:00")
    for key in ("cpu_per_pod_seconds", "cpu_window", "window_rate"):
        del doc["runs"][0][key]
    (tmp_path / "old.json").write_text(json.dumps(doc))
    row = table(tmp_path).splitlines()[2]
    assert row.split(" | ")[4] == "2.00 ms†"
