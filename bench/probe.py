"""``python -m bench.probe [tandem-scheduler flags]``: tandem-scheduler, its scheduling attempts also counted finely.

kube-scheduler's ``scheduler_scheduling_attempt_duration_seconds`` has buckets from 1 ms, doubling. tandem's
attempts take 0.2 to 0.6 ms, so nearly all of them fall in the first bucket. Every quantile below it is then
an interpolation ("under 1 ms"), and a target like "the attempt's p99 stays within 10%" cannot be checked.
This launcher runs the same scheduler (its own ``main``, the same flags) and adds one histogram,
``tandem_bench_scheduling_attempt_duration_seconds{result,profile}``. Its buckets are 2^(1/16) apart (4.4%),
from 10 us to 1.3 s. Each attempt costs one ``log2`` and one array increment: it does not scan the bounds.

The seam is the one class the App builds its metrics from. It is replaced, for this process only, by a subclass
whose ``observe_attempt`` also counts into the fine histogram. Everything else the scheduler does is left as
it is. tandem-bench starts this instead of ``python -m scheduler`` when given ``--fine-attempts``
(bench/target.py). Quantiles over a window come from the difference of two scrapes, as for upstream's
histogram (bench/metrics.py, WindowScraper).
"""

from __future__ import annotations

import math
import sys
from typing import Iterator

import numpy as np
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from scheduler.observe import Metrics

FINE_ATTEMPT_METRIC = "tandem_bench_scheduling_attempt_duration_seconds"
LOWEST = 1e-5            # the first bucket's upper bound, seconds
STEPS_PER_DOUBLING = 16  # buckets 2^(1/16) = 4.4% apart
DOUBLINGS = 17           # up to LOWEST * 2^17 = 1.31 s; slower attempts count in +Inf


def fine_bounds() -> np.ndarray:
    """The finite upper bounds, seconds (``STEPS_PER_DOUBLING * DOUBLINGS + 1`` of them)."""
    return LOWEST * 2.0 ** (np.arange(STEPS_PER_DOUBLING * DOUBLINGS + 1) / STEPS_PER_DOUBLING)


class FineAttempts(Collector):
    """Attempt durations per (result, profile), counted in :func:`fine_bounds` buckets; a Prometheus collector."""

    def __init__(self) -> None:
        self.bounds = fine_bounds()
        self.counts: dict[tuple[str, str], np.ndarray] = {}     # per bucket, not cumulative; the last is +Inf
        self.sums: dict[tuple[str, str], float] = {}

    def observe(self, result: str, profile: str, seconds: float) -> None:
        key = (result, profile)
        counts = self.counts.get(key)
        if counts is None:
            counts = self.counts[key] = np.zeros(len(self.bounds) + 1, dtype=np.int64)
            self.sums[key] = 0.0
        # the first bound at or above ``seconds`` (a Prometheus bucket counts observations <= le)
        i = 0 if seconds <= LOWEST else math.ceil(math.log2(seconds / LOWEST) * STEPS_PER_DOUBLING)
        counts[min(i, len(self.bounds))] += 1
        self.sums[key] += seconds

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(FINE_ATTEMPT_METRIC, "Scheduling attempt latency in seconds, in buckets "
                                       "4.4% apart (tandem-bench's probe)", labels=["result", "profile"])
        les = [repr(float(b)) for b in self.bounds] + ["+Inf"]
        for (result, profile), counts in sorted(self.counts.items()):
            cumulative = np.cumsum(counts)
            family.add_metric([result, profile], list(zip(les, cumulative.tolist())), self.sums[(result, profile)])
        yield family


class ProbeMetrics(Metrics):
    """The scheduler's metrics, plus :class:`FineAttempts` fed by every attempt."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        self.fine_attempts = FineAttempts()
        self.registry.register(self.fine_attempts)

    def observe_attempt(self, result: str, profile: str, seconds: float) -> None:
        super().observe_attempt(result, profile, seconds)
        self.fine_attempts.observe(result, profile, seconds)


def main(argv: list[str] | None = None) -> int:
    import scheduler.app
    from scheduler.__main__ import main as scheduler_main

    scheduler.app.Metrics = ProbeMetrics   # type: ignore[misc]  # the App's one Metrics, for this process only
    return scheduler_main(argv)


if __name__ == "__main__":
    sys.exit(main())
