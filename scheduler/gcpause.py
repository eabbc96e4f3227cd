"""The cyclic collector's pauses: measured per generation, and kept short by freezing what survives.

CPython's cyclic collector stops the event loop while it walks every object
of the generations it collects. The scheduler's heap is mostly the informers'
pods and nodes: orjson dicts and lists that live until an update replaces
them and that reference counting frees on its own. Pods created during a run
are young, so each generation-1 collection walked every one that arrived
since the last one (twenty generation-0 batches of 50,000): at 50,000 pods,
three a run of 360-430 ms of CPU each, 0.4 to 1.9 s of wall time on a busy
machine (bench/RESULTS.md, "Issue 30").

* :class:`PauseRecorder` is a ``gc.callbacks`` hook that times each
  collection (``time.perf_counter`` between its start and stop phases) into
  ``tandem_gc_pause_seconds{generation}`` and keeps the longest in
  ``tandem_gc_pause_max_seconds{generation}``. Its stop phase is a few list
  lookups and one histogram observation: it must never allocate containers
  (that would count toward the next collection) or do I/O. It registers
  both metrics on the registry it is given (the App's, next to
  :class:`scheduler.observe.Metrics`), so that they exist only in a process
  whose collections are timed: an embedded App has no such series.
* :class:`FreezeSurvivors` is the fix: at the end of every collection it
  calls ``gc.freeze()``. Since the previous collection froze everything,
  the older generations are empty when a collection starts, so a collection
  walks only the objects allocated since the last one (at most
  :data:`THRESHOLDS`' first number, net) and treats only frozen objects as
  outside roots: it finds all the cyclic garbage among them, as a full
  collection would. What survives was reachable a moment ago, and is
  frozen. Every object is walked once, in its first collection, instead of
  once in generation 0 and again in generation 1. ``gc.freeze`` also zeroes
  every generation's count (CPython 3.11), so the automatic collections are
  all of generation 0 from then on: generation 1 and 2 run only when asked
  for (``gc.collect()``). Reference counting still frees a frozen pod when
  its update replaces it.
* :func:`installed` hooks both onto the process for the block, the recorder
  first (the pause is timed without the freeze, a constant-time list splice).

What this must never do: freeze anything that no collection has just walked
(cyclic garbage would then leak for good), or run in a process that did not
ask for it; it is installed by the ``tandem-scheduler`` entry point only,
never on import.

Its price: a cycle that was alive at a collection and becomes garbage later
(an asyncio task that ends with an exception, its traceback) is never
collected. With a collection every half second or so, only what is in flight
at those moments is at risk. Over 50,000-pod runs, unfreezing at the end and
collecting everything found as much garbage as without freezing (4,253 to
4,312 objects, against 4,248 to 4,307), and the RSS peak was the same
(bench/RESULTS.md, "Issue 30").
"""

from __future__ import annotations

import gc
import logging
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from prometheus_client import CollectorRegistry, Gauge, Histogram

from scheduler.observe import exponential_buckets

log = logging.getLogger("tandem.gcpause")

GENERATIONS = 3
# tandem_gc_pause_seconds: 0.5 ms to 1 s, 2^(1/2) apart (rounded to the microsecond, for readable le labels)
PAUSE_BUCKETS = tuple(round(b, 6) for b in exponential_buckets(0.0005, 2 ** 0.5, 23))


class PauseRecorder:
    """Times every cyclic collection into the metrics; a ``gc.callbacks`` entry (call it with phase and info)."""

    __slots__ = ("_timer", "_observe", "_max_gauges", "longest", "counts", "_started")

    def __init__(self, registry: CollectorRegistry, timer: Callable[[], float] = time.perf_counter) -> None:
        self._timer = timer                  # a duration measured, not a time scheduled: not the Clock
        pauses = Histogram(
            "tandem_gc_pause_seconds", "Time the cyclic garbage collector stopped the process, per collection, by "
            "the generation collected.", ["generation"], buckets=PAUSE_BUCKETS, registry=registry)
        longest = Gauge(
            "tandem_gc_pause_max_seconds", "The longest cyclic garbage collection since the process started, by "
            "the generation collected.", ["generation"], registry=registry)
        # the labelled children looked up once: the callback runs inside the collection it times
        self._observe = [pauses.labels(str(g)).observe for g in range(GENERATIONS)]
        self._max_gauges = [longest.labels(str(g)) for g in range(GENERATIONS)]
        for gauge in self._max_gauges:
            gauge.set(0.0)
        self.longest = [0.0] * GENERATIONS   # seconds, per generation, since start
        self.counts = [0] * GENERATIONS      # collections, per generation
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = self._timer()
            return
        seconds = self._timer() - self._started
        g = info["generation"]
        self.counts[g] += 1
        self._observe[g](seconds)
        if seconds > self.longest[g]:
            self.longest[g] = seconds
            self._max_gauges[g].set(seconds)

    def summary(self) -> str:
        """One line for the log: collections and the longest pause per generation."""
        return ", ".join(f"gen{g} {self.counts[g]} collections, longest {self.longest[g] * 1000:.1f} ms"
                         for g in range(GENERATIONS))


class FreezeSurvivors:
    """Freezes the heap at the end of every collection; a ``gc.callbacks`` entry.

    ``freezes`` counts the freezes, for tests and the exit log line.
    """

    __slots__ = ("freezes",)

    def __init__(self) -> None:
        self.freezes = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "stop":
            gc.freeze()
            self.freezes += 1


# A collection once 20,000 tracked containers more are alive than at the last one: with the older
# generations frozen empty, that number bounds every pause, at about 1 us an object on a busy machine
# (50,000 pods: 4-6 ms of CPU at the median, 27 at the most; with tune_gc's 50,000, 15 and 35). The older
# thresholds are tune_gc's: their counts are zeroed by every freeze, so they never come due.
THRESHOLDS = (20_000, 20, 100)


@contextmanager
def installed(registry: CollectorRegistry, freeze: bool = True) -> Iterator[PauseRecorder]:
    """Time every collection into ``registry`` for the block, and with ``freeze`` freeze what survives each.

    Freezing sets :data:`THRESHOLDS`; the thresholds found are restored at the end, and the longest pauses logged.
    """
    recorder = PauseRecorder(registry)
    freezer = FreezeSurvivors() if freeze else None
    hooks: list[Any] = [recorder] if freezer is None else [recorder, freezer]
    thresholds = gc.get_threshold()
    gc.callbacks.extend(hooks)
    if freezer is not None:
        gc.set_threshold(*THRESHOLDS)
    try:
        yield recorder
    finally:
        for hook in hooks:
            gc.callbacks.remove(hook)
        gc.set_threshold(*thresholds)
        log.info("cyclic collector: %s; %d freezes, %d objects frozen", recorder.summary(),
                 0 if freezer is None else freezer.freezes, gc.get_freeze_count())
