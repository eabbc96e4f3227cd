"""Holds the schedulers still while a measured op creates its pods, so that their CPU per pod is scheduling alone.

Creating 30,000 pods on a real kube-apiserver takes seconds on the same
cores the scheduler runs on, and a scheduler that schedules while they
arrive spends CPU on the API server's pace (a watch event, a queue wake-up
and a small cycle per pod) that it would not spend on pods that are
already there. So, as issue 30 asks, every scheduler process under test is
stopped (SIGSTOP, children included) before a measured createPods op sends
its first create, and resumed (SIGCONT) once every create has returned;
its CPU per pod is counted from the resume to the last measured bind
(bench/metrics.py's ``cpu_window``).

The hazard, which the numbers include: a stopped scheduler reads none of
its watches, and kube-apiserver's watch cache terminates a watcher whose
buffer stays full ("Forcing watcher close due to unresponsiveness"), so the
scheduler may find its pod watch closed when it resumes and re-list the
pods, which is counted in its CPU (tandem's GETs in the summary's
requests line then include the second list).

:class:`SchedulerPause` is what the runner is given (bench/runner.py's
``Pause``): ``hold`` before the creates, ``release`` after them, in a
``finally``. Used as a context manager around the whole run it also
resumes on the way out whatever it left stopped, so a failed run never
leaves a scheduler (least of all one given by ``--pid``, which tandem-bench
does not stop) frozen. This module never kills or starts anything.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from typing import Awaitable, Callable, Sequence

import psutil

from bench.metrics import ProcessSampler, process_trees
from bench.record import Recorder

log = logging.getLogger("tandem.bench.pause")


class SchedulerPause:
    """Stops and resumes the process trees of ``pids`` around a measured op's creates.

    ``recorder`` gets the times (when stopped, when resumed); ``sampler``,
    when given, takes a sample at both edges, so that the CPU counted from
    the resume is read exactly there and not interpolated. ``before`` is
    awaited before stopping: the window scraper's opening scrape of
    ``/metrics`` must be answered by a running scheduler.
    """

    def __init__(self, pids: Sequence[int], recorder: Recorder, sampler: ProcessSampler | None = None,
                 before: Callable[[], Awaitable[None]] | None = None) -> None:
        self.roots = [psutil.Process(pid) for pid in pids]
        self.recorder = recorder
        self.sampler = sampler
        self.before = before
        self.stopped: list[psutil.Process] = []    # what hold stopped and release has not resumed yet

    async def hold(self) -> None:
        """SIGSTOP every process of the trees, parents first (a stopped parent starts no new child)."""
        if self.before is not None:
            await self.before()
        if self.stopped:
            return                                  # already held: one hold, one release
        if self.sampler is not None:
            self.sampler.sample()
        t = time.time()
        self.stopped = [p for p in process_trees(self.roots) if _signal(p, signal.SIGSTOP)]
        if self.stopped:
            self.recorder.paused(t)

    def release(self) -> None:
        """SIGCONT what :meth:`hold` stopped; the resume time is taken before the first signal."""
        if not self.stopped:
            return
        if self.sampler is not None:
            self.sampler.sample()                   # stopped processes spend nothing: their CPU at the resume
        self.recorder.resumed(time.time())
        stopped, self.stopped = self.stopped, []
        for p in stopped:
            _signal(p, signal.SIGCONT)

    def __enter__(self) -> "SchedulerPause":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _signal(p: psutil.Process, sig: signal.Signals) -> bool:
    """Send ``sig`` to ``p`` unless it is gone or its pid now names another process; True when sent."""
    with contextlib.suppress(psutil.Error, ProcessLookupError):
        if p.is_running():                          # the pid still names the process we saw (create time)
            os.kill(p.pid, sig)
            return True
    log.info("not sending %s to pid %d: it has exited", sig.name, p.pid)
    return False
