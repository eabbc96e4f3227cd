"""bench/probe.py: tandem-scheduler's attempts also counted in buckets 4.4% apart, per result and profile."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client import generate_latest

from bench.metrics import attempt_histograms, histogram_quantiles, parse_prometheus_histogram
from bench.probe import FINE_ATTEMPT_METRIC, ProbeMetrics, fine_bounds


def test_the_buckets_are_4_4_percent_apart_from_10_us_to_1_3_s():
    b = fine_bounds()
    assert b[0] == pytest.approx(1e-5) and b[-1] == pytest.approx(1.31072)
    assert np.allclose(b[1:] / b[:-1], 2 ** (1 / 16))


def test_quantiles_of_the_fine_histogram_are_within_a_bucket_of_the_exact_ones_where_upstreams_say_under_1_ms():
    rng = np.random.default_rng(7)
    seconds = rng.lognormal(np.log(3e-4), 0.4, 20_000)
    m = ProbeMetrics()
    for s in seconds:
        m.observe_attempt("scheduled", "tandem-stream", float(s))
    text = generate_latest(m.registry).decode()
    fine = parse_prometheus_histogram(text, FINE_ATTEMPT_METRIC, {"result": "scheduled", "profile": "tandem-stream"})
    assert fine.count == 20_000 and fine.sum == pytest.approx(seconds.sum())
    for q, got in zip((0.5, 0.9, 0.99), histogram_quantiles(fine, (0.5, 0.9, 0.99))):
        assert got == pytest.approx(np.quantile(seconds, q), rel=0.045)
    # upstream's histogram still counts every attempt, in its own buckets
    assert attempt_histograms(text)["scheduled"].count == 20_000


def test_an_attempt_above_the_last_bound_counts_in_inf_and_one_at_a_bound_in_that_bucket():
    m = ProbeMetrics()
    m.observe_attempt("unschedulable", "p", 5.0)
    m.observe_attempt("unschedulable", "p", 1e-5)
    h = parse_prometheus_histogram(generate_latest(m.registry).decode(), FINE_ATTEMPT_METRIC, {"profile": "p"})
    assert h.buckets[0] == (pytest.approx(1e-5), 1.0) and h.buckets[-2][1] == 1.0 and h.buckets[-1][1] == 2.0
