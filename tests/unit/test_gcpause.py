"""scheduler/gcpause.py: the collector's pauses timed per generation."""

from __future__ import annotations

import gc

import pytest
from prometheus_client import CollectorRegistry

from scheduler.gcpause import THRESHOLDS, PauseRecorder, installed


def sample(registry: CollectorRegistry, name: str, generation: int) -> float | None:
    return registry.get_sample_value(name, {"generation": str(generation)})


@pytest.mark.parametrize("generation", [0, 1, 2], ids=lambda g: f"a generation-{g} collection")
def test_a_collection_is_recorded_under_its_generation(generation: int) -> None:
    registry = CollectorRegistry()
    enabled = gc.isenabled()
    gc.disable()   # no automatic collection inside the block: only the one asked for
    try:
        with installed(registry, freeze=False):
            gc.collect(generation)
    finally:
        if enabled:
            gc.enable()
    assert sample(registry, "tandem_gc_pause_seconds_count", generation) == 1
    assert sample(registry, "tandem_gc_pause_max_seconds", generation) > 0
    for other in {0, 1, 2} - {generation}:
        assert sample(registry, "tandem_gc_pause_seconds_count", other) == 0
        assert sample(registry, "tandem_gc_pause_max_seconds", other) == 0


def test_the_max_gauge_keeps_the_longest_pause_not_the_last() -> None:
    registry = CollectorRegistry()
    ticks = iter([0.0, 0.120, 1.0, 1.030, 2.0, 2.250, 3.0, 3.010])   # perf_counter at start, stop, ...
    recorder = PauseRecorder(registry, timer=lambda: next(ticks))
    for _ in range(4):
        recorder("start", {"generation": 1})
        recorder("stop", {"generation": 1, "collected": 0, "uncollectable": 0})
    assert sample(registry, "tandem_gc_pause_max_seconds", 1) == pytest.approx(0.250)
    assert sample(registry, "tandem_gc_pause_seconds_count", 1) == 4
    assert sample(registry, "tandem_gc_pause_seconds_sum", 1) == pytest.approx(0.410)
    assert registry.get_sample_value("tandem_gc_pause_seconds_bucket", {"generation": "1", "le": "0.032"}) == 2
    assert recorder.counts == [0, 4, 0] and recorder.longest[1] == pytest.approx(0.250)


def test_the_hook_is_removed_when_the_block_ends() -> None:
    before = list(gc.callbacks)
    with installed(CollectorRegistry(), freeze=False) as recorder:
        assert recorder in gc.callbacks
    assert gc.callbacks == before


def test_importing_the_scheduler_hooks_nothing_into_the_collector() -> None:
    """Only the tandem-scheduler entry point installs the hook; an embedding process (a test) gets none."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "import gc, scheduler.app, scheduler.gcpause, scheduler.__main__; "
                          "print(len(gc.callbacks))"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"


# ---------------------------------------------------------------------------- freezing what survives


class Node:
    """A container the collector tracks (an instance with a __dict__), to build cycles from."""

    def __init__(self) -> None:
        self.other: object = None


@pytest.fixture
def frozen_heap_restored():
    """Freezing in a test freezes the test process: give it all back to the collector afterwards."""
    enabled = gc.isenabled()
    gc.disable()   # only the collections a test asks for
    try:
        yield
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()


def test_what_survives_a_collection_is_frozen_and_the_older_generations_are_left_empty(frozen_heap_restored) -> None:
    survivor = Node()
    with installed(CollectorRegistry()):
        gc.collect(0)
        assert gc.get_objects(generation=1) == [] and gc.get_objects(generation=2) == [], \
            "the next collection walks only what is younger than this one"
        assert not any(o is survivor for o in gc.get_objects()), "frozen: no collection walks it again"
    assert gc.get_freeze_count() > 0


def test_cyclic_garbage_made_before_a_freeze_is_collected_not_frozen(frozen_heap_restored) -> None:
    import weakref

    a, b = Node(), Node()
    a.other, b.other = b, a
    ref = weakref.ref(a)
    del a, b           # a cycle: reference counting alone never frees it
    with installed(CollectorRegistry()):
        gc.collect(0)  # the cheapest collection still sees all of it: every older generation was frozen empty
    assert ref() is None


def test_a_frozen_object_is_still_freed_by_reference_counting(frozen_heap_restored) -> None:
    import weakref

    cached = Node()
    ref = weakref.ref(cached)
    with installed(CollectorRegistry()):
        gc.collect(0)
        assert not any(o is cached for o in gc.get_objects())
        del cached     # an informer update replaces the cached pod
        assert ref() is None


def test_freezing_sets_its_thresholds_for_the_block_and_restores_the_ones_it_found(frozen_heap_restored) -> None:
    before = gc.get_threshold()
    with installed(CollectorRegistry()):
        assert gc.get_threshold() == THRESHOLDS
    with installed(CollectorRegistry(), freeze=False):
        assert gc.get_threshold() == before
    assert gc.get_threshold() == before
