"""bench/results_table.py's Consolidation table: one row per run, read from the JSON tandem-bench writes."""

from __future__ import annotations

import json

from prometheus_client import generate_latest

from bench.consolidation import moves, parse_scrape
from bench.metrics import RunMetrics
from bench.probe import ProbeMetrics
from bench.report import build_document
from bench.results_table import consolidation_table
from scheduler.consolidation.rebalancer import ConsolidationMetrics
from tests.bench.test_consolidation import replica_set_cluster


def run_document(config: str, with_consolidation: bool) -> dict:
    m = ProbeMetrics()
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
