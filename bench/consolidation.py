"""What a run of a Consolidation workload measured: the plans, the evictions, what they changed, and the others.

Two sources, both over the collecting window:

* the scheduler's ``/metrics``, scraped when the window opens and when it closes (:func:`parse_scrape`, the
  difference of the two :class:`Scrape` values): evictions by result (``tandem_pods_evicted_total``), moves
  planned, executed and aborted, bounce-backs, nodes emptied, the plan's duration per strategy and the time
  from an eviction to its replacement's bind. Also the probe's fine attempt histogram per profile
  (bench/probe.py), from which the stream's attempt p99 is read: the workloads' stream of other pods names
  its own profile, so its attempts are counted apart;
* the runner's watch (:class:`~bench.record.Recorder`): when each ReplicaSet pod's deletion began (an
  eviction), the nodes that had a pod at the window's start and end, how each ReplicaSet's pods were spread
  over the zones at the end, and the created-to-bound latency of the measured pods by namespace.

This module never talks to a cluster; it reads a scrape's text and a recorder.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from bench.metrics import Histogram, histogram_quantiles, parse_prometheus_histogram, summarize
from bench.probe import FINE_ATTEMPT_METRIC
from bench.record import Recorder

EVICTED = "tandem_pods_evicted"
MOVES = "tandem_consolidation_moves"
BOUNCE_BACKS = "tandem_consolidation_bounce_backs"
NODES_EMPTIED = "tandem_consolidation_nodes_emptied"
PLAN_DURATION = "tandem_consolidation_plan_duration_seconds"
REPLACEMENT_BOUND = "tandem_consolidation_replacement_bound_duration_seconds"
STRATEGIES = ("defragment", "compact", "spread")
FAMILIES = frozenset({EVICTED, MOVES, BOUNCE_BACKS, NODES_EMPTIED, PLAN_DURATION, REPLACEMENT_BOUND})


@dataclass(frozen=True)
class Scrape:
    """Consolidation's counters and histograms, and the fine attempt histograms, from one /metrics text.

    ``counters`` keys: ``evicted/success``, ``evicted/error``, ``moves/planned``, ``moves/executed``,
    ``moves/aborted``, ``bounce_backs``, ``nodes_emptied``. ``plans`` is per strategy, ``attempts`` per
    (result, profile). ``families`` names the Consolidation metrics the scheduler exposes, observed or not
    (none: it runs no Consolidation).
    """

    counters: dict[str, float] = field(default_factory=dict)
    plans: dict[str, Histogram] = field(default_factory=dict)
    replacement_bound: Histogram = Histogram()
    attempts: dict[tuple[str, str], Histogram] = field(default_factory=dict)
    families: frozenset[str] = frozenset()

    def __sub__(self, before: "Scrape") -> "Scrape":
        return Scrape({k: v - before.counters.get(k, 0.0) for k, v in self.counters.items()},
                      {k: h - before.plans.get(k, Histogram()) for k, h in self.plans.items()},
                      self.replacement_bound - before.replacement_bound,
                      {k: h - before.attempts.get(k, Histogram()) for k, h in self.attempts.items()},
                      self.families)

    def __add__(self, other: "Scrape") -> "Scrape":
        def merged(a: dict[Any, Histogram], b: dict[Any, Histogram]) -> dict[Any, Histogram]:
            return {k: a.get(k, Histogram()) + b.get(k, Histogram()) for k in {*a, *b}}

        counters = {k: self.counters.get(k, 0.0) + other.counters.get(k, 0.0) for k in {*self.counters, *other.counters}}
        return Scrape(counters, merged(self.plans, other.plans), self.replacement_bound + other.replacement_bound,
                      merged(self.attempts, other.attempts), self.families | other.families)


def parse_scrape(text: str) -> Scrape:
    counters: dict[str, float] = {}
    attempt_keys: set[tuple[str, str]] = set()
    families: set[str] = set()
    for family in text_string_to_metric_families(text):
        if family.name in FAMILIES:
            families.add(family.name)
        for s in family.samples:
            if s.name == f"{EVICTED}_total":
                key = f"evicted/{s.labels.get('result', '')}"
            elif s.name == f"{MOVES}_total":
                key = f"moves/{s.labels.get('result', '')}"
            elif s.name == f"{BOUNCE_BACKS}_total":
                key = "bounce_backs"
            elif s.name == f"{NODES_EMPTIED}_total":
                key = "nodes_emptied"
            else:
                if s.name == f"{FINE_ATTEMPT_METRIC}_count":
                    attempt_keys.add((s.labels.get("result", ""), s.labels.get("profile", "")))
                continue
            counters[key] = counters.get(key, 0.0) + float(s.value)
    plans = {st: parse_prometheus_histogram(text, PLAN_DURATION, {"strategy": st}) for st in STRATEGIES}
    attempts = {(r, p): parse_prometheus_histogram(text, FINE_ATTEMPT_METRIC, {"result": r, "profile": p})
                for r, p in attempt_keys}
    return Scrape(counters, {st: h for st, h in plans.items() if h.count},
                  parse_prometheus_histogram(text, REPLACEMENT_BOUND), attempts, frozenset(families))


def highest_bound(h: Histogram) -> float:
    """The upper bound of the highest bucket holding an observation: what a histogram says of the maximum."""
    for le, cumulative in h.buckets:
        if cumulative >= h.count > 0:
            return le
    return math.nan


# ---------------------------------------------------------------------------- the watch's side


def evictions_seen(rec: Recorder, start: float, end: float) -> list[float]:
    """When each controller-made pod's deletion began within [start, end], sorted (the runner deletes none)."""
    return sorted(p.deleting for p in rec.pods.values() if p.owner and p.deleting is not None
                  and start <= p.deleting <= end)


def nodes_in_use(rec: Recorder, t: float) -> int:
    """Nodes where some pod the run knows was bound and not being deleted at ``t``."""
    return len({p.node for p in rec.pods.values() if p.alive_at(t)})


def zone_skews(rec: Recorder, t: float) -> dict[str, int]:
    """Per owner, max minus min of its live pods per zone of the run's nodes at ``t`` (every zone counts)."""
    zones = sorted(set(rec.node_zones.values()))
    per: dict[str, dict[str, int]] = {}
    for p in rec.pods.values():
        if p.owner and p.alive_at(t) and p.node in rec.node_zones:
            counts = per.setdefault(p.owner, dict.fromkeys(zones, 0))
            counts[rec.node_zones[p.node]] += 1
    return {o: max(c.values()) - min(c.values()) for o, c in per.items()}


def e2e_by_namespace(rec: Recorder) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for key, p in rec.pods.items():
        if p.measured and p.bound is not None:
            out.setdefault(key.partition("/")[0], []).append(p.bound - p.created)
    return out


# ---------------------------------------------------------------------------- one run's results


@dataclass
class Moves:
    """Consolidation over the collecting window, and the attempts and latency of the other pods."""

    window: tuple[float, float]
    scrape: Scrape | None                  # None: the scheduler's /metrics was not read
    evictions: list[float]                 # when each eviction was seen (the watch)
    nodes_before: int
    nodes_after: int
    skews: dict[str, int]                  # owner -> zone skew at the end (zones known), else empty
    zones: int
    e2e: dict[str, list[float]]            # namespace -> created-to-bound seconds of its measured pods

    @property
    def seconds(self) -> float:
        return max(0.0, self.window[1] - self.window[0])

    def counter(self, key: str) -> float:
        return self.scrape.counters.get(key, 0.0) if self.scrape is not None else 0.0

    def evictions_per_second(self) -> tuple[float | None, int]:
        """(the mean over the window, the most in one second of it counted from its start), from the watch.
        A plan's moves of different owners start together, so the peak is a plan's width."""
        n = len(self.evictions)
        whole = n / self.seconds if self.seconds else None
        per: dict[int, int] = {}
        for t in self.evictions:
            k = int(t - self.window[0])
            per[k] = per.get(k, 0) + 1
        return whole, max(per.values(), default=0)

    def as_dict(self) -> dict[str, Any]:
        whole, peak = self.evictions_per_second()
        out: dict[str, Any] = {
            "window_seconds": self.seconds, "evictions_seen": len(self.evictions),
            "evictions_per_second": whole, "evictions_peak_in_one_second": peak,
            "nodes_in_use": [self.nodes_before, self.nodes_after],
            "zone_skew": ({"owners": len(self.skews), "within_1": sum(1 for s in self.skews.values() if s <= 1),
                           "max": max(self.skews.values(), default=0), "zones": self.zones} if self.skews else None),
            "e2e_seconds_by_namespace": {ns: summarize(v) for ns, v in self.e2e.items()},
        }
        s = self.scrape
        if s is not None:
            out["counters"] = dict(s.counters)
            out["plans"] = {st: _hist_dict(h) for st, h in s.plans.items()}
            out["replacement_bound"] = _hist_dict(s.replacement_bound)
            out["attempts"] = {f"{r}/{p}": _hist_dict(h) for (r, p), h in s.attempts.items()}
            out["consolidation_enabled"] = bool(s.families)
        return out


def moves(rec: Recorder, scrape: Scrape | None) -> Moves | None:
    """The run's :class:`Moves`, over its first collecting window's start to its last one's end; None when the
    run adopted no controller's pods and the scheduler has no fine attempts nor Consolidation."""
    adopted = any(p.owner for p in rec.pods.values())
    if not adopted and (scrape is None or not (scrape.families or scrape.attempts)):
        return None
    if not rec.windows:
        return None
    start = rec.windows[0][0]
    end = rec.windows[-1][1] or max((p.bound or 0.0 for p in rec.pods.values()), default=start)
    zones = len(set(rec.node_zones.values()))
    return Moves((start, end), scrape, evictions_seen(rec, start, end), nodes_in_use(rec, start),
                 nodes_in_use(rec, end), zone_skews(rec, end) if zones > 1 else {}, zones, e2e_by_namespace(rec))


def _hist_dict(h: Histogram) -> dict[str, Any]:
    if not h.count:
        return {"count": 0}
    p50, p99 = histogram_quantiles(h, (0.5, 0.99))
    return {"count": h.count, "sum_seconds": h.sum, "mean_seconds": _finite(h.average), "p50_seconds": _finite(p50),
            "p99_seconds": _finite(p99), "max_bound_seconds": _finite(highest_bound(h))}


def _finite(x: float) -> float | None:
    return None if math.isnan(x) or math.isinf(x) else x
