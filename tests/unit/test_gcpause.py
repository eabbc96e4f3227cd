"""scheduler/gcpause.py: the collector's pauses timed per generation."""

from __future__ import annotations

import gc
import itertools

import pytest
from prometheus_client import CollectorRegistry

from scheduler.gcpause import PauseRecorder, installed
from scheduler.observe import Metrics


def sample(m: Metrics, name: str, generation: int) -> float | None:
    return m.registry.get_sample_value(name, {"generation": str(generation)})


@pytest.mark.parametrize("generation", [0, 1, 2], ids=lambda g: f"a generation-{g} collection")
def test_a_collection_is_recorded_under_its_generation(generation: int) -> None:
    m = Metrics(CollectorRegistry())
    enabled = gc.isenabled()
    gc.disable()   # no automatic collection inside the block: only the one asked for
    try:
        with installed(m):
            gc.collect(generation)
    finally:
        if enabled:
            gc.enable()
    assert sample(m, "tandem_gc_pause_seconds_count", generation) == 1
    assert sample(m, "tandem_gc_pause_max_seconds", generation) > 0
    for other in {0, 1, 2} - {generation}:
        assert sample(m, "tandem_gc_pause_seconds_count", other) == 0
        assert sample(m, "tandem_gc_pause_max_seconds", other) == 0


def test_the_max_gauge_keeps_the_longest_pause_not_the_last() -> None:
    m = Metrics(CollectorRegistry())
    ticks = itertools.chain([0.0, 0.120, 1.0, 1.030, 2.0, 2.250, 3.0, 3.010])   # perf_counter at start, stop, ...
    recorder = PauseRecorder(m, timer=lambda: next(ticks))
    for _ in range(4):
        recorder("start", {"generation": 1})
        recorder("stop", {"generation": 1, "collected": 0, "uncollectable": 0})
    assert sample(m, "tandem_gc_pause_max_seconds", 1) == pytest.approx(0.250)
    assert sample(m, "tandem_gc_pause_seconds_count", 1) == 4
    assert sample(m, "tandem_gc_pause_seconds_sum", 1) == pytest.approx(0.410)
    assert sample(m, "tandem_gc_pause_seconds_bucket", 1) is None   # buckets carry le
    assert m.registry.get_sample_value("tandem_gc_pause_seconds_bucket", {"generation": "1", "le": "0.032"}) == 2
    assert recorder.counts == [0, 4, 0] and recorder.longest[1] == pytest.approx(0.250)


def test_the_hook_is_removed_when_the_block_ends() -> None:
    before = list(gc.callbacks)
    with installed(Metrics(CollectorRegistry())) as recorder:
        assert recorder in gc.callbacks
    assert gc.callbacks == before


def test_importing_the_scheduler_hooks_nothing_into_the_collector() -> None:
    """Only the tandem-scheduler entry point installs the hook; an embedding process (a test) gets none."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "import gc, scheduler.app, scheduler.gcpause, scheduler.__main__; "
                          "print(len(gc.callbacks))"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"
