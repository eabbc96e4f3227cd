"""The cyclic collector's pauses, measured per generation.

CPython's cyclic collector stops the event loop while it walks every object
of the generations it collects. The scheduler's heap is mostly the informers'
pods and nodes: orjson dicts and lists that live until an update replaces
them and that reference counting frees on its own. Pods created during a run
are young, so each generation-1 collection walks every one that arrived since
the last one, and each generation-2 collection walks all that arrived since
the startup heap was frozen (``scheduler/__main__.py``).

* :class:`PauseRecorder` is a ``gc.callbacks`` hook that times each
  collection (``time.perf_counter`` between its start and stop phases) into
  ``tandem_gc_pause_seconds{generation}`` and keeps the longest in
  ``tandem_gc_pause_max_seconds{generation}``. Its stop phase is a few list
  lookups and one histogram observation: it must never allocate containers
  (that would count toward the next collection) or do I/O.
* :func:`installed` hooks it onto the process for the block and logs the
  longest pauses at exit (INFO).

What this must never do: run in a process that did not ask for it; it is
installed by the ``tandem-scheduler`` entry point only, never on import.
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


@contextmanager
def installed(metrics: Metrics) -> Iterator[PauseRecorder]:
    """Time every collection into ``metrics`` for the block; the longest pauses are logged at its end."""
    recorder = PauseRecorder(metrics)
    gc.callbacks.append(recorder)
    try:
        yield recorder
    finally:
        gc.callbacks.remove(recorder)
        log.info("cyclic collector: %s", recorder.summary())
