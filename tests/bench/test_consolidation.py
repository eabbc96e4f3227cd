"""bench/consolidation.py: a Consolidation run's numbers from the scheduler's /metrics and the runner's watch."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from bench.consolidation import FAMILIES, moves, nodes_in_use, parse_scrape, zone_skews
from bench.probe import ProbeMetrics
from bench.record import Recorder
from bench.report import moves_lines
from scheduler.consolidation.rebalancer import ConsolidationMetrics


def scheduler_metrics() -> tuple[ProbeMetrics, ConsolidationMetrics]:
    m = ProbeMetrics()
    return m, ConsolidationMetrics(m.registry)


def test_a_window_is_the_difference_of_two_scrapes_and_windows_add_up():
    m, c = scheduler_metrics()
    c.pods_evicted.labels("success", "compact", "apps", "n1", "p").inc(3)
    c.plan_duration.labels("compact").observe(0.01)
    before = parse_scrape(generate_latest(m.registry).decode())
    c.pods_evicted.labels("success", "compact", "apps", "n2", "p").inc(2)
    c.pods_evicted.labels("error", "compact", "apps", "n2", "p").inc()
    c.moves.labels("compact", "executed", "p").inc(2)
    c.plan_duration.labels("compact").observe(0.02)
    c.plan_duration.labels("compact").observe(0.04)
    c.replacement_bound.labels("compact").observe(1.0)
    m.observe_attempt("scheduled", "tandem-stream", 3e-4)
    after = parse_scrape(generate_latest(m.registry).decode())
    w = after - before
    assert w.families == FAMILIES
    assert w.counters["evicted/success"] == 2 and w.counters["evicted/error"] == 1 and w.counters["moves/executed"] == 2
    assert w.plans["compact"].count == 2 and w.plans["compact"].sum == pytest.approx(0.06)
    assert w.replacement_bound.count == 1 and w.attempts[("scheduled", "tandem-stream")].count == 1
    assert (w + w).counters["evicted/success"] == 4 and (w + w).plans["compact"].count == 4


def test_a_scheduler_without_consolidation_exposes_none_of_its_metrics():
    m = ProbeMetrics()
    m.observe_attempt("scheduled", "tandem-stream", 3e-4)
    s = parse_scrape(generate_latest(m.registry).decode())
    assert not s.families and not s.counters and not s.plans and s.attempts[("scheduled", "tandem-stream")].count == 1


def replica_set_cluster() -> Recorder:
    """Two zones' nodes a, b and a third zone's c; ReplicaSet x's pods a1 a2 b1, one evicted at 12 and replaced on c;
    a stream pod on b, bound at 11 and gone at 11.5."""
    r = Recorder(node_zones={"a": "zone1", "b": "zone2", "c": "zone3"})
    for key, node, bound in (("apps/a1", "a", 1.0), ("apps/a2", "a", 1.0), ("apps/b1", "b", 1.0),
                             ("apps/c1", "c", 13.0)):
        r.adopted(key, bound - 0.5, "ReplicaSet apps/x")
        r.bound(key, bound, node)
    r.deleting("apps/a2", 12.0)
    r.gone("apps/a2", 12.2)
    r.start_collecting(10.0)
    r.created("stream/s", 11.0)
    r.bound("stream/s", 11.0, "b")
    r.gone("stream/s", 11.5)
    r.stop_collecting(20.0)
    return r


def test_the_watch_gives_the_evictions_the_nodes_in_use_and_each_owners_zone_skew():
    r = replica_set_cluster()
    assert nodes_in_use(r, 10.0) == 2 and nodes_in_use(r, 20.0) == 3
    assert zone_skews(r, 10.0) == {"ReplicaSet apps/x": 2} and zone_skews(r, 20.0) == {"ReplicaSet apps/x": 0}
    mv = moves(r, None)
    assert mv is not None and mv.window == (10.0, 20.0) and mv.evictions == [12.0]
    assert mv.evictions_per_second() == (pytest.approx(0.1), 1)
    assert mv.e2e == {"stream": [0.0]} and mv.zones == 3 and mv.skews == {"ReplicaSet apps/x": 0}
    text = "\n".join(moves_lines(mv))
    assert "in use 2 at the window's start, 3 at its end" in text
    assert "1 of 1 owners have their pods within 1 of each other over 3 zones" in text


def test_a_run_without_controllers_pods_nor_consolidation_metrics_has_no_moves():
    r = Recorder()
    r.start_collecting(0.0)
    r.created("ns/p", 0.0)
    r.bound("ns/p", 0.1, "n")
    r.stop_collecting(1.0)
    assert moves(r, None) is None
