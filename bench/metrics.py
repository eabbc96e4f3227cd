"""The numbers a benchmark run reports, computed as scheduler_perf computes them.

Inputs are what a run observed: the :class:`~bench.record.Recorder` (per
pod: created, bound; the collecting windows), the scheduler's ``/metrics``
text scraped at the edges of those windows, and the scheduler process's
RSS and CPU time sampled while it ran. Outputs are plain floats and the
perf-dash ``DataItems`` document that Kubernetes' scheduler_perf writes, so
results from tandem-bench can be read by the same tools:

* **SchedulingThroughput** (pods/s): the number of measured pods bound per
  1 s interval of the collecting window; the first sample is skipped and
  idle intervals are merged into the next busy one, as scheduler_perf's
  ``throughputCollector`` does (:func:`throughput_samples`). Average and
  nearest-rank Perc50/90/95/99 (:func:`summarize`).
* **scheduler_scheduling_attempt_duration_seconds** (ms): quantiles of the
  scheduler's own histogram, interpolated within buckets as Prometheus's
  ``histogram_quantile`` does (:func:`histogram_quantiles`). scheduler_perf
  resets the histogram when collecting starts; a scheduler in another
  process cannot be reset, so the histogram is scraped when a window opens
  and when it closes and the difference is used (:class:`WindowScraper`).
* **PodCreateToBindLatency** (ms): per measured pod, from just before the
  runner sends its create request to the first watch event that shows it
  bound (:func:`e2e_latencies`). It includes the API server's and the
  watch's delays and the time the pod waited in the scheduler's queue, as
  a user would see them.
* Scheduler **RSS peak** and **CPU seconds** (:class:`ProcessSampler`), and
  **CPU per pod**: the scheduler's CPU seconds over :func:`cpu_window`
  divided by the measured pods bound. When the scheduler was paused while
  the measured pods were created (bench/pause.py) the window runs from the
  resume to the last measured bind, else from the first collecting start;
  the rate over that same window is reported beside it.

This module never talks to the API server and never prints; its only I/O
is the scrape of a scheduler's /metrics and reading /proc through psutil.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

import aiohttp
import numpy as np
import psutil
from prometheus_client.parser import text_string_to_metric_families

from bench.record import Recorder

log = logging.getLogger("tandem.bench.metrics")

THROUGHPUT_INTERVAL = 1.0            # scheduler_perf's throughputSampleInterval
PERCENTILES = (50, 90, 95, 99)
QUANTILES = (0.5, 0.9, 0.95, 0.99)

ATTEMPT_METRIC = "scheduler_scheduling_attempt_duration_seconds"
ATTEMPT_RESULTS = ("scheduled", "unschedulable", "error")   # upstream collects one item per result
THROUGHPUT_METRIC = "SchedulingThroughput"
E2E_METRIC = "PodCreateToBindLatency"
NOT_APPLICABLE = "not applicable"    # what scheduler_perf fills in for labels an item does not have


# ---------------------------------------------------------------------------- throughput


def throughput_samples(bound_times: Sequence[float], start: float, end: float,
                       interval: float = THROUGHPUT_INTERVAL) -> list[float]:
    """Pods bound per ``interval`` over the window [start, end], as scheduler_perf samples them.

    A sampler "ticks" at ``start + k * interval`` (k = 1, 2, ...) for every
    tick that is not after ``end``, and counts the pods bound at or before
    the tick (a pod bound exactly on a tick belongs to the interval that
    tick closes). From those counts, following ``throughputCollector.run``:

    * Ticks before the first bound pod produce nothing: a run that takes
      3 s to create its first pod does not report three zeros.
    * The first tick that sees a bound pod only sets the baseline (the
      first sample is skipped: creating pods and sampling start
      independently, so it is an outlier).
    * An interval in which no pod was bound is not recorded as 0: it is
      merged with the following intervals until one sees a new pod, and
      that throughput (pods / merged duration) is recorded once per merged
      interval, so percentiles still weigh time correctly.
    * The partial interval after the last tick, and idle intervals at the
      end that no later binding closes, are dropped (upstream's collector
      stops when the window ends; the tick that would close them never
      comes).
    * Pods bound before ``start`` count in the baseline, never in a sample.

    So a steady stream of 100 pods/s over 10.5 s gives nine samples of 100.
    Empty input, or a window shorter than one interval, gives ``[]``.
    ``bound_times`` need not be sorted. Times are seconds (``time.time()``).
    """
    if interval <= 0:
        raise ValueError(f"interval must be positive, not {interval}")
    if not len(bound_times) or end <= start:
        return []
    # a tiny tolerance so that (end - start) / interval == 10.0 in exact arithmetic is 10 ticks, not 9
    n_ticks = int(math.floor((end - start) / interval + 1e-9))
    if n_ticks <= 0:
        return []
    times = np.sort(np.asarray(bound_times, dtype=np.float64))
    ticks = start + interval * np.arange(1, n_ticks + 1, dtype=np.float64)
    counts = np.searchsorted(times, ticks, side="right")
    samples: list[float] = []
    last: int | None = None          # count at the last recorded (or baseline) tick
    skipped = 0
    for c in counts.tolist():
        if c == 0:
            continue
        if last is None:
            last = c                 # the first sample: baseline only
            continue
        new = c - last
        if new == 0:
            skipped += 1
            continue
        rate = new / (interval * (skipped + 1))
        samples.extend([rate] * (skipped + 1))
        last = c
        skipped = 0
    return samples


def throughput_series(bound_times: Sequence[float], start: float, end: float,
                      interval: float = THROUGHPUT_INTERVAL) -> list[tuple[float, float]]:
    """Every interval of the window as ``(seconds since start at the interval's end, pods/s)``.

    For the plot: unlike :func:`throughput_samples` nothing is skipped or
    merged (idle intervals are 0); the partial last interval is scaled to
    a rate over its own length. Empty when the window is empty.
    """
    if interval <= 0:
        raise ValueError(f"interval must be positive, not {interval}")
    if end <= start:
        return []
    times = np.sort(np.asarray(bound_times, dtype=np.float64))
    edges = list(start + interval * np.arange(0, int(math.floor((end - start) / interval + 1e-9)) + 1))
    if edges[-1] < end - 1e-9:
        edges.append(end)
    counts = np.searchsorted(times, np.asarray(edges), side="right")
    out = []
    for i in range(1, len(edges)):
        width = edges[i] - edges[i - 1]
        out.append((float(edges[i] - start), float((counts[i] - counts[i - 1]) / width)))
    return out


# ---------------------------------------------------------------------------- percentiles


def summarize(values: Iterable[float]) -> dict[str, float]:
    """Average and nearest-rank Perc50/90/95/99, as scheduler_perf's collectors compute them.

    Nearest rank: the p-th percentile of n sorted values is the
    ``ceil(n * p / 100)``-th smallest (1-based), with no interpolation, so
    every reported percentile is a value that was observed. Empty input
    gives ``{}`` (upstream reports no data rather than zeros).
    """
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        return {}
    out = {"Average": math.fsum(xs) / n}
    for p in PERCENTILES:
        out[f"Perc{p}"] = xs[-(-n * p // 100) - 1]     # ceil(n*p/100) in exact integer arithmetic
    return out


def e2e_latencies(recorder: Recorder) -> list[float]:
    """Created-to-bound seconds of every measured pod that was bound (unbound pods have no latency)."""
    return [p.bound - p.created for p in recorder.measured() if p.bound is not None]


# ---------------------------------------------------------------------------- prometheus histograms


@dataclass(frozen=True, slots=True)
class Histogram:
    """A Prometheus histogram: ``buckets`` are ``(upper bound, cumulative count)`` sorted by bound.

    ``sum`` and ``count`` are the ``_sum`` and ``_count`` series. Several
    series (other label values) aggregated into one add up bucket by bucket.
    """

    buckets: tuple[tuple[float, float], ...] = ()
    sum: float = 0.0
    count: float = 0.0

    def __sub__(self, before: "Histogram") -> "Histogram":
        """What was observed between two scrapes (``after - before``), per bucket."""
        prev = dict(before.buckets)
        return Histogram(tuple((le, c - prev.get(le, 0.0)) for le, c in self.buckets),
                         self.sum - before.sum, self.count - before.count)

    def __add__(self, other: "Histogram") -> "Histogram":
        merged: dict[float, float] = dict(self.buckets)
        for le, c in other.buckets:
            merged[le] = merged.get(le, 0.0) + c
        return Histogram(tuple(sorted(merged.items())), self.sum + other.sum, self.count + other.count)

    @property
    def average(self) -> float:
        return self.sum / self.count if self.count else math.nan


def parse_prometheus_histogram(text: str, name: str, labels: Mapping[str, str] | None = None) -> Histogram:
    """The histogram ``name`` from a text exposition, its series matching ``labels`` summed.

    ``labels`` is a subset match (``{"result": "scheduled"}`` takes every
    profile's series with that result and adds them up, as upstream's
    ``GetHistogramVecFromGatherer`` aggregates a filtered vector). A
    histogram that is absent gives an empty :class:`Histogram`. Works with
    or without ``# TYPE`` lines.
    """
    want = dict(labels or {})
    bucket_name, sum_name, count_name = f"{name}_bucket", f"{name}_sum", f"{name}_count"
    buckets: dict[float, float] = {}
    total = count = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name not in (bucket_name, sum_name, count_name):
                continue
            if any(s.labels.get(k) != v for k, v in want.items()):
                continue
            if s.name == bucket_name:
                le = float(s.labels["le"])          # "+Inf" parses as inf
                buckets[le] = buckets.get(le, 0.0) + float(s.value)
            elif s.name == sum_name:
                total += float(s.value)
            else:
                count += float(s.value)
    return Histogram(tuple(sorted(buckets.items())), total, count)


def histogram_quantiles(hist: Histogram | Sequence[tuple[float, float]],
                        qs: Sequence[float] = QUANTILES) -> list[float]:
    """Quantiles of a bucketed histogram, as Prometheus's ``histogram_quantile`` computes them.

    The rank ``q * total`` is located in the first bucket whose cumulative
    count reaches it, and the value is interpolated linearly between that
    bucket's lower and upper bounds (the lowest bucket starts at 0). A rank
    that falls in the +Inf bucket answers the highest finite bound. NaN
    when there are no observations or no +Inf bucket (the histogram is
    incomplete); q < 0 is -Inf and q > 1 is +Inf, as in PromQL. Counts that
    decrease from one bucket to the next (scrape races) are made monotonic
    first, as Prometheus does.
    """
    pairs = hist.buckets if isinstance(hist, Histogram) else tuple(hist)
    buckets = sorted((float(le), float(c)) for le, c in pairs)
    # monotonic cumulative counts
    fixed: list[tuple[float, float]] = []
    high = 0.0
    for le, c in buckets:
        high = max(high, c)
        fixed.append((le, high))
    return [_quantile(q, fixed) for q in qs]


def _quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    if len(buckets) < 2 or not math.isinf(buckets[-1][0]):
        return math.nan
    observations = buckets[-1][1]
    if observations <= 0:
        return math.nan
    rank = q * observations
    b = next((i for i in range(len(buckets) - 1) if buckets[i][1] >= rank), len(buckets) - 1)
    if b == len(buckets) - 1:
        return buckets[-2][0]                      # in the +Inf bucket: the highest finite bound
    if b == 0 and buckets[0][0] <= 0:
        return buckets[0][0]
    lower, below = (0.0, 0.0) if b == 0 else buckets[b - 1]
    upper, cumulative = buckets[b]
    in_bucket = cumulative - below
    if in_bucket <= 0:
        return lower                               # q == 0 with an empty first bucket
    return lower + (upper - lower) * (rank - below) / in_bucket


def attempt_histograms(text: str, results: Sequence[str] = ATTEMPT_RESULTS) -> dict[str, Histogram]:
    """``scheduler_scheduling_attempt_duration_seconds`` per ``result`` label, all profiles summed."""
    return {r: parse_prometheus_histogram(text, ATTEMPT_METRIC, {"result": r}) for r in results}


REQUESTS_METRIC = "rest_client_requests"        # client-go's, kube-scheduler and tandem both export it
EVENTS_DROPPED_METRIC = "tandem_event_recorder_dropped_events"


def api_requests(text: str) -> tuple[dict[str, float], float | None]:
    """(requests by HTTP method over the scheduler's life, events it dropped or None) from a /metrics text.

    ``rest_client_requests_total{code,host,method}`` summed over code and
    host; an exposition without it gives ``{}``.
    """
    by_method: dict[str, float] = {}
    dropped: float | None = None
    for family in text_string_to_metric_families(text):
        if family.name == REQUESTS_METRIC:
            for s in family.samples:
                if s.name == f"{REQUESTS_METRIC}_total":
                    method = s.labels.get("method", "")
                    by_method[method] = by_method.get(method, 0.0) + float(s.value)
        elif family.name == EVENTS_DROPPED_METRIC:
            dropped = sum(float(s.value) for s in family.samples if s.name.endswith("_total"))
    return by_method, dropped


GC_PAUSE_METRIC = "tandem_gc_pause_seconds"          # scheduler/gcpause.py's
GC_PAUSE_MAX_METRIC = "tandem_gc_pause_max_seconds"


def gc_pauses(text: str) -> dict[str, tuple[float, float]]:
    """tandem's cyclic-collector pauses over its life, per generation: (collections, longest in seconds); {} for
    a scheduler without them."""
    counts: dict[str, float] = {}
    longest: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == GC_PAUSE_METRIC:
            for s in family.samples:
                if s.name == f"{GC_PAUSE_METRIC}_count":
                    counts[s.labels.get("generation", "")] = float(s.value)
        elif family.name == GC_PAUSE_MAX_METRIC:
            for s in family.samples:
                longest[s.labels.get("generation", "")] = float(s.value)
    return {g: (counts.get(g, 0.0), longest.get(g, 0.0)) for g in sorted(counts.keys() | longest.keys())}


async def scrape(metrics_url: str, timeout: float = 10.0) -> str:
    """GET a Prometheus text exposition (no ``Accept`` header: the classic text format)."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
        async with session.get(metrics_url) as resp:
            resp.raise_for_status()
            return await resp.text()


@dataclass
class EdgeRecorder(Recorder):
    """A :class:`Recorder` that tells ``listeners`` at once when a collecting window opens or closes.

    Listeners are called synchronously as ``listener(opening, t)`` from
    ``start_collecting`` / ``stop_collecting`` and must only schedule work.
    """

    listeners: list[Callable[[bool, float], None]] = field(default_factory=list, repr=False)

    def start_collecting(self, t: float) -> None:
        was = self.collecting
        super().start_collecting(t)
        if not was:
            for listener in self.listeners:
                listener(True, t)

    def stop_collecting(self, t: float) -> None:
        was = self.collecting
        super().stop_collecting(t)
        if was:
            for listener in self.listeners:
                listener(False, t)


class WindowScraper:
    """Scrapes a scheduler's attempt histograms when each collecting window opens and closes.

    scheduler_perf resets its in-process histograms when it starts
    collecting; a scheduler in another process cannot be reset, so the
    difference between a scrape when a window opens and one when it closes
    is what the window observed. Several windows add up. Nothing is scraped
    in between, so the measurement does not perturb what it measures.

    With an :class:`EdgeRecorder` the edges trigger the scrapes at once;
    with a plain :class:`Recorder` its state is polled every ``poll``
    seconds (a window shorter than that may be missed). The opening scrape
    races the window's first pods: on a busy scheduler a few of their
    attempts may land before it and go uncounted (a handful out of
    thousands; the quantiles do not notice). The closing scrape waits
    ``close_delay`` seconds: the scheduler observes an attempt's duration
    just after its bind returns, about when the runner's watch sees the pod
    bound, and the last attempts must not be lost to that race. When no
    window ever opened, the whole time between :meth:`start` and
    :meth:`stop` counts. A failed scrape is logged, leaves :attr:`error`
    set and drops that window.

    ``extra`` parses more from the same texts (bench/consolidation.py's
    ``parse_scrape``): its values must subtract and add, and :attr:`extra`
    holds their sum over the windows, as :attr:`histograms` does.
    """

    def __init__(self, recorder: Recorder, metrics_url: str, *, poll: float = 0.05,
                 close_delay: float = 0.2, extra: Callable[[str], Any] | None = None) -> None:
        self.recorder = recorder
        self.metrics_url = metrics_url
        self.poll = poll
        self.close_delay = close_delay
        self.parse_extra = extra
        self.histograms: dict[str, Histogram] = {}
        self.extra: Any = None
        self.error: str | None = None
        self.windows = 0                     # windows measured
        self._first: tuple[dict[str, Histogram], Any] | None = None
        self._edges: asyncio.Queue[bool] = asyncio.Queue()
        self._is_open = False
        self._worker: asyncio.Task[None] | None = None
        self._poller: asyncio.Task[None] | None = None

    async def _snapshot(self) -> tuple[dict[str, Histogram], Any] | None:
        try:
            text = await scrape(self.metrics_url)
            return attempt_histograms(text), (self.parse_extra(text) if self.parse_extra is not None else None)
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError, ValueError) as exc:
            self.error = f"scraping {self.metrics_url}: {type(exc).__name__}: {exc}"
            log.info("%s", self.error)      # the summary reports it; a dead scheduler says more elsewhere
            return None

    def _add(self, after: tuple[dict[str, Histogram], Any] | None,
             before: tuple[dict[str, Histogram], Any] | None) -> None:
        if after is None or before is None:
            return
        self.windows += 1
        for r, h in after[0].items():
            delta = h - before[0].get(r, Histogram())
            self.histograms[r] = self.histograms[r] + delta if r in self.histograms else delta
        if after[1] is not None and before[1] is not None:
            delta = after[1] - before[1]
            self.extra = delta if self.extra is None else self.extra + delta

    def _edge(self, opening: bool, _t: float = 0.0) -> None:
        if opening != self._is_open:
            self._is_open = opening
            self._edges.put_nowait(opening)

    async def start(self) -> None:
        self._first = await self._snapshot()
        self._worker = asyncio.create_task(self._scrape_edges(), name="window-scraper")
        if isinstance(self.recorder, EdgeRecorder):
            self.recorder.listeners.append(self._edge)
            if self.recorder.collecting:
                self._edge(True)
        else:
            self._poller = asyncio.create_task(self._poll(), name="window-scraper-poll")

    async def _poll(self) -> None:
        seen = 0
        while True:
            rec = self.recorder
            if len(rec.windows) > seen and not self._is_open:
                seen = len(rec.windows)
                self._edge(True)
            if self._is_open and not rec.collecting:
                self._edge(False)
            await asyncio.sleep(self.poll)

    async def _scrape_edges(self) -> None:
        before: tuple[dict[str, Histogram], Any] | None = None
        while True:
            opening = await self._edges.get()
            try:
                if opening:
                    before = await self._snapshot()
                else:
                    await asyncio.sleep(self.close_delay)
                    self._add(await self._snapshot(), before)
                    before = None
            finally:
                self._edges.task_done()

    async def settled(self) -> None:
        """Until every window edge seen so far has been scraped: a scheduler about to be paused (bench/pause.py)
        must have answered the opening scrape first."""
        await self._edges.join()

    async def stop(self) -> dict[str, Histogram]:
        """Close a window still open (or count the whole run when none opened); the summed histograms."""
        if isinstance(self.recorder, EdgeRecorder) and self._edge in self.recorder.listeners:
            self.recorder.listeners.remove(self._edge)
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
            self._poller = None
        self._edge(False)
        if self._worker is not None:
            await self._edges.join()
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None
        if self.windows == 0 and not self.recorder.windows and self._first is not None:
            self._add(await self._snapshot(), self._first)
        return self.histograms


# ---------------------------------------------------------------------------- process resources


class ProcessSampler:
    """RSS and CPU seconds of local processes (and their children) every ``interval`` seconds.

    ``pids``: one process or several (a started scheduler and those given
    with ``--pid``); every sample sums their trees, each process counted
    once. :attr:`rss_peak` is the largest RSS seen (bytes, summed);
    :attr:`cpu_seconds` is the user+system CPU time spent between
    :meth:`start` and :meth:`stop` (both take a sample, so a run shorter
    than one interval is still measured; so can a caller, with
    :meth:`sample`, at a moment that matters). When every process has
    exited the sampling ends quietly. Runs as a task on the caller's loop:
    sampling costs a few /proc reads.
    """

    def __init__(self, pids: int | Sequence[int], interval: float = 0.5) -> None:
        self.pids = (pids,) if isinstance(pids, int) else tuple(pids)
        self.interval = interval
        self.rss_peak = 0
        self.samples: list[tuple[float, int, float]] = []   # (time.time(), rss bytes, cpu seconds so far)
        self._procs = [psutil.Process(pid) for pid in self.pids]
        self._cpu0: float | None = None
        self._task: asyncio.Task[None] | None = None

    def tree(self) -> list[psutil.Process]:
        """The processes and all their descendants now, each once, parents before their children."""
        return process_trees(self._procs)

    def sample(self) -> bool:
        """Take one sample now; False when every process is gone."""
        rss = 0
        cpu = 0.0
        alive = False
        for p in self.tree():
            try:
                with p.oneshot():
                    rss += p.memory_info().rss
                    t = p.cpu_times()
                    cpu += t.user + t.system
                alive = True
            except psutil.Error:
                continue
        if not alive:
            return False
        self.rss_peak = max(self.rss_peak, rss)
        self.samples.append((time.time(), rss, cpu))
        if self._cpu0 is None:
            self._cpu0 = cpu
        return True

    @property
    def cpu_seconds(self) -> float | None:
        if self._cpu0 is None or not self.samples:
            return None
        return max(s[2] for s in self.samples) - self._cpu0

    def cpu_at(self, t: float) -> float | None:
        """The CPU seconds used by wall time ``t`` (time.time()), linear between the two samples around it;
        None outside the samples."""
        samples = self.samples
        if not samples or t < samples[0][0] or t > samples[-1][0]:
            return None
        i = bisect.bisect_left([s[0] for s in samples], t)
        if samples[i][0] == t or i == 0:
            return samples[i][2]
        (t0, _, c0), (t1, _, c1) = samples[i - 1], samples[i]
        return c0 + (c1 - c0) * (t - t0) / (t1 - t0)

    def cpu_between(self, start: float, end: float) -> float | None:
        """CPU seconds used from wall time ``start`` to ``end`` (interpolated), or None if not both sampled."""
        a, b = self.cpu_at(start), self.cpu_at(end)
        return None if a is None or b is None else max(0.0, b - a)

    def start(self) -> None:
        self.sample()
        self._task = asyncio.create_task(self._run(), name=f"process-sampler:{','.join(map(str, self.pids))}")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            if not self.sample():
                return

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.sample()


def process_trees(roots: Sequence[psutil.Process]) -> list[psutil.Process]:
    """``roots`` and their descendants as they are now, each process once, every parent before its children."""
    seen: set[int] = set()
    out: list[psutil.Process] = []
    for root in roots:
        family = [root]
        with contextlib.suppress(psutil.Error):
            family.extend(root.children(recursive=True))
        for p in family:
            if p.pid not in seen:
                seen.add(p.pid)
                out.append(p)
    return out


class CpuSamples(Protocol):
    """What :func:`collect` reads of a :class:`ProcessSampler` (a test gives a fake)."""

    @property
    def rss_peak(self) -> int: ...

    @property
    def cpu_seconds(self) -> float | None: ...

    def cpu_between(self, start: float, end: float) -> float | None: ...


# ---------------------------------------------------------------------------- CPU per pod

RESUMED = "resume to last bind"
COLLECTING = "collecting start to last bind"


@dataclass(frozen=True, slots=True)
class CpuWindow:
    """The span CPU per pod is counted over: ``start`` to ``end`` (the last measured bind), wall seconds.

    ``running`` is how much of it the scheduler was not stopped (pauses of
    later measured ops inside it are left out); ``basis`` names the start:
    :data:`RESUMED` or :data:`COLLECTING`.
    """

    start: float
    end: float
    running: float
    basis: str


def cpu_window(windows: Sequence[tuple[float, float | None]], pauses: Sequence[tuple[float, float | None]],
               last_bound: float | None) -> CpuWindow | None:
    """Where CPU per pod is counted, from a run's collecting windows, its pauses and its last measured bind.

    With pauses (the scheduler stopped while a measured op created its
    pods) the window starts at the first resume: the pods were all there
    then, and what the scheduler spent while they were being created (a
    cost of the API server's pace, not of scheduling) is not counted.
    Without, it starts when collecting first started, as before pausing
    existed. Either way it ends at the last measured bind. None when
    nothing was bound after the start.
    """
    if last_bound is None:
        return None
    resumes = [r for _, r in pauses if r is not None]
    if resumes:
        start, basis = min(resumes), RESUMED
    elif windows:
        start, basis = windows[0][0], COLLECTING
    else:
        return None
    if last_bound <= start:
        return None
    stopped = sum(max(0.0, min(r if r is not None else last_bound, last_bound) - max(s, start))
                  for s, r in pauses)
    return CpuWindow(start, last_bound, max(0.0, last_bound - start - stopped), basis)


# ---------------------------------------------------------------------------- one run's results


@dataclass
class RunMetrics:
    """Everything one run measured, ready for DataItems, the summary and the plot."""

    workload: str                                   # full name, e.g. SchedulingBasic/5000Nodes
    scheduler: str                                  # the label runs are reported under
    throughput: list[float] = field(default_factory=list)              # samples, pods/s
    series: list[tuple[float, float]] = field(default_factory=list)    # (s since collecting began, pods/s)
    e2e: list[float] = field(default_factory=list)                     # seconds
    attempt: dict[str, Histogram] = field(default_factory=dict)        # by result, over the windows
    measured: int = 0                               # pods created while collecting
    bound: int = 0                                  # of those, bound
    window_seconds: float = 0.0                     # time spent collecting
    rss_peak: int | None = None                     # bytes, every sampled process summed
    cpu_seconds: float | None = None                # whole run
    # the scheduler's CPU seconds over cpu_window (resume, or first collecting start, to the last bind): per
    # measured pod, the figure that carries to a bigger control plane
    cpu_window_seconds: float | None = None
    cpu_basis: str | None = None                    # RESUMED or COLLECTING: where that window starts
    window_rate: float | None = None                # bound / the seconds the scheduler ran in that window
    overall: float | None = None                    # bound / (last bind - first collecting start); unsampled
    gangs: list[float] = field(default_factory=list)  # per complete gang: last member created -> last bound, s
    # the cluster's cpu in use (bound pods' requests over the run's nodes' allocatable) while gangs waited:
    # from the first gang member's creation to the last gang's bind
    gang_wait_utilization: float | None = None
    requests: dict[str, float] = field(default_factory=dict)  # the scheduler's API requests by method, whole run
    events_dropped: float | None = None             # events its recorder dropped, whole run (tandem only)
    gc_pauses: dict[str, tuple[float, float]] = field(default_factory=dict)  # generation -> (collections, longest s)
    moves: Any = None                               # bench.consolidation.Moves, for a Consolidation workload

    @property
    def cpu_per_pod(self) -> float | None:
        """The scheduler's CPU seconds over the CPU window per measured pod bound."""
        return self.cpu_window_seconds / self.bound if self.cpu_window_seconds is not None and self.bound else None

    def throughput_avg(self, sampled: bool | None = None) -> float | None:
        """The headline throughput: SchedulingThroughput's Average, else the overall rate.

        ``sampled=None`` uses the samples when there are any (a run shorter
        than about two intervals has none); ``False`` forces the overall
        rate, so that runs of different lengths can be compared on one basis.
        """
        if (sampled is None or sampled) and self.throughput:
            return math.fsum(self.throughput) / len(self.throughput)
        return None if sampled else self.overall

    def data_items(self, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
        return data_items(self.workload, self.scheduler, throughput=self.throughput, e2e=self.e2e,
                          attempt=self.attempt, labels=labels)


def gang_latencies(recorder: Recorder) -> list[float]:
    """Per measured gang whose members were all bound: last member created -> last member bound (seconds).

    The gang's own promise: once its last member exists, how long until all of it has a node.
    """
    created: dict[str, float] = {}
    bound: dict[str, float] = {}
    unbound: set[str] = set()
    for p in recorder.measured():
        if not p.group:
            continue
        created[p.group] = max(created.get(p.group, p.created), p.created)
        if p.bound is None:
            unbound.add(p.group)
        else:
            bound[p.group] = max(bound.get(p.group, p.bound), p.bound)
    return [max(0.0, bound[g] - created[g]) for g in created if g in bound and g not in unbound]


def utilization_during_gang_wait(recorder: Recorder) -> float | None:
    """Mean share of the run's allocatable cpu that bound pods requested, from the first measured gang member's
    creation to the last measured gang member's bind; None without gangs or node capacity."""
    members = [p for p in recorder.measured() if p.group]
    if not members or recorder.node_cpu <= 0:
        return None
    start = min(p.created for p in members)
    end = max((p.bound for p in members if p.bound is not None), default=None)
    if end is None or end <= start:
        return None
    used = 0.0
    for p in recorder.pods.values():
        if p.bound is None or not p.cpu:
            continue
        lo, hi = max(p.bound, start), min(p.gone if p.gone is not None else end, end)
        if hi > lo:
            used += (hi - lo) * p.cpu
    return used / (recorder.node_cpu * (end - start))


def collect(recorder: Recorder, workload: str, scheduler: str, *, attempt: Mapping[str, Histogram] | None = None,
            sampler: CpuSamples | None = None, now: float | None = None,
            interval: float = THROUGHPUT_INTERVAL) -> RunMetrics:
    """Turn a run's raw observations into :class:`RunMetrics`.

    Throughput samples are taken per collecting window (a window still open
    ends at the last bind, or ``now``) and concatenated, as scheduler_perf
    runs one throughput collector per window. Without any window, every pod
    counts and the window is first create to last bind. The scheduler's CPU
    is read over :func:`cpu_window`.
    """
    measured = recorder.measured()
    bound_times = [p.bound for p in measured if p.bound is not None]
    last_bound = max(bound_times, default=None)
    windows = list(recorder.windows)
    if not windows and measured:
        windows = [(min(p.created for p in measured), last_bound)]
    fallback_end = last_bound if last_bound is not None else (now if now is not None else time.time())
    samples: list[float] = []
    series: list[tuple[float, float]] = []
    seconds = 0.0
    origin = windows[0][0] if windows else 0.0
    for start, end in windows:
        end = end if end is not None else max(fallback_end, start)
        seconds += max(0.0, end - start)
        samples.extend(throughput_samples(bound_times, start, end, interval))
        offset = start - origin
        series.extend((offset + t, r) for t, r in throughput_series(bound_times, start, end, interval))
    m = RunMetrics(workload=workload, scheduler=scheduler, throughput=samples, series=series,
                   e2e=e2e_latencies(recorder), attempt=dict(attempt or {}), measured=len(measured),
                   bound=len(bound_times), window_seconds=seconds, gangs=gang_latencies(recorder),
                   gang_wait_utilization=utilization_during_gang_wait(recorder))
    if bound_times and windows and last_bound is not None and last_bound > windows[0][0]:
        m.overall = len(bound_times) / (last_bound - windows[0][0])
    window = cpu_window(windows, recorder.pauses, last_bound)
    if window is not None:
        m.cpu_basis = window.basis
        m.window_rate = len(bound_times) / window.running if window.running > 0 else None
    if sampler is not None:
        m.rss_peak = sampler.rss_peak or None
        m.cpu_seconds = sampler.cpu_seconds
        if window is not None:
            m.cpu_window_seconds = sampler.cpu_between(window.start, window.end)
    return m


# ---------------------------------------------------------------------------- perf-dash DataItems


def data_items(workload: str, scheduler: str, *, throughput: Sequence[float] = (),
               e2e: Sequence[float] | None = None, attempt: Mapping[str, Histogram] | None = None,
               labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """perf-dash's ``DataItems``: ``{"version": "v1", "dataItems": [{"data", "unit", "labels"}, ...]}``.

    One SchedulingThroughput item (pods/s; ``data`` is empty when there was
    no sample), one attempt-latency item per ``result`` that saw attempts
    (ms, from the histogram), one create-to-bind item (ms) when ``e2e`` has
    values. Every item carries ``Metric``, ``Name`` (the workload) and
    ``Scheduler`` plus ``labels``; as scheduler_perf does, a label that only
    some items have is filled in as "not applicable" on the others, since
    perf-dash only shows items that have every label.
    """
    base = {"Name": workload, "Scheduler": scheduler, **(labels or {})}
    items: list[dict[str, Any]] = [
        {"data": summarize(throughput), "unit": "pods/s", "labels": {**base, "Metric": THROUGHPUT_METRIC}},
    ]
    for result, hist in (attempt or {}).items():
        if hist.count <= 0:
            continue                 # upstream skips a vector with no samples
        q = histogram_quantiles(hist, QUANTILES)
        if any(math.isnan(v) for v in q):
            continue                 # no +Inf bucket: an incomplete histogram has no quantiles
        data = {f"Perc{p}": v * 1000.0 for p, v in zip(PERCENTILES, q)}
        data["Average"] = hist.average * 1000.0
        items.append({"data": data, "unit": "ms",
                      "labels": {**base, "Metric": ATTEMPT_METRIC, "result": result}})
    if e2e:
        items.append({"data": {k: v * 1000.0 for k, v in summarize(e2e).items()}, "unit": "ms",
                      "labels": {**base, "Metric": E2E_METRIC}})
    every = set().union(*(it["labels"] for it in items))
    for it in items:
        for key in every - it["labels"].keys():
            it["labels"][key] = NOT_APPLICABLE
    return {"version": "v1", "dataItems": items}


def comparable_throughputs(runs: Sequence[RunMetrics]) -> tuple[list[float | None], str]:
    """One headline throughput per run, all on the same basis, and the basis' name.

    SchedulingThroughput's Average when every run has samples; otherwise
    (a tiny workload binds everything within a couple of seconds) the
    overall rate for all of them, so a ratio never mixes the two.
    """
    if runs and all(r.throughput for r in runs):
        return [r.throughput_avg(sampled=True) for r in runs], "SchedulingThroughput Average"
    return [r.throughput_avg(sampled=False) for r in runs], "overall (bound / collecting time)"
