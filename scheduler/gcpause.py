"""The cyclic collector's pauses: measured per generation, and kept short by freezing what survives.

CPython's cyclic collector stops the event loop while it walks every object
of the generations it collects. The scheduler's heap is mostly the informers'
pods and nodes: orjson dicts and lists that live until an update replaces
them and that reference counting frees on its own. Pods created during a run
are young, so each generation-1 collection walked every one that arrived
since the last one (twenty generation-0 batches of 50,000): 0.5 to 1.3 s at
50,000 pods (bench/RESULTS.md, "Issue 30").

* :class:`PauseRecorder` is a ``gc.callbacks`` hook that times each
  collection (``time.perf_counter`` between its start and stop phases) into
  ``tandem_gc_pause_seconds{generation}`` and keeps the longest in
  ``tandem_gc_pause_max_seconds{generation}``. Its stop phase is a few list
  lookups and one histogram observation: it must never allocate containers
  (that would count toward the next collection) or do I/O.
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
at those moments is at risk. Over a 50,000-pod run, unfreezing at the end and
collecting everything found as much garbage as without freezing (4,253
objects against 4,248), and the RSS peak was the same (bench/RESULTS.md,
"Issue 30").
"""

from __future__ import annotations

import gc
import logging
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from scheduler.observe import Metrics

log = logging.getLogger("tandem.gcpause")

GENERATIONS = 3


class PauseRecorder:
    """Times every cyclic collection into the metrics; a ``gc.callbacks`` entry (call it with phase and info)."""

    __slots__ = ("_timer", "_observe", "_max_gauges", "longest", "counts", "_started")

    def __init__(self, metrics: Metrics, timer: Callable[[], float] = time.perf_counter) -> None:
        self._timer = timer                  # a duration measured, not a time scheduled: not the Clock
        # the labelled children looked up once: the callback runs inside the collection it times
        self._observe = [metrics.gc_pause.labels(str(g)).observe for g in range(GENERATIONS)]
        self._max_gauges = [metrics.gc_pause_max.labels(str(g)) for g in range(GENERATIONS)]
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


# A collection once 20,000 tracked containers more are alive than at the last one (tune_gc's 50,000 made
# 16 ms of CPU at the median, 33 at the most): with the older generations frozen empty, that number bounds
# every pause, at about 1 us an object on a busy machine. The older thresholds are tune_gc's: their counts
# are zeroed by every freeze, so they never come due.
THRESHOLDS = (20_000, 20, 100)


@contextmanager
def installed(metrics: Metrics, freeze: bool = True) -> Iterator[PauseRecorder]:
    """Time every collection into ``metrics`` for the block, and with ``freeze`` freeze what survives each.

    Freezing sets :data:`THRESHOLDS`; the thresholds found are restored at the end, and the longest pauses logged.
    """
    recorder = PauseRecorder(metrics)
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
