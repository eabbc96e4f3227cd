"""scheduler/__main__.py's process tuning: collector thresholds and the frozen startup heap."""

from __future__ import annotations

import gc

from scheduler.__main__ import GC_THRESHOLDS, freeze_startup_heap, tune_gc


CPYTHON_DEFAULT = (700, 10, 10)


def test_tune_gc_raises_the_young_generation_threshold() -> None:
    before = gc.get_threshold()   # not always CPython's: tests that call main() in-process have tuned it
    try:
        gc.set_threshold(*CPYTHON_DEFAULT)
        tune_gc()
        assert gc.get_threshold() == GC_THRESHOLDS
        assert GC_THRESHOLDS[0] > CPYTHON_DEFAULT[0], "fewer collections than CPython's default"
    finally:
        gc.set_threshold(*before)


def test_the_frozen_startup_heap_is_hidden_from_the_collector_but_still_freed_by_refcount() -> None:
    import weakref

    class Cached:
        pass

    obj = Cached()
    ref = weakref.ref(obj)
    try:
        freeze_startup_heap()
        assert gc.get_freeze_count() > 0
        assert not any(o is obj for o in gc.get_objects()), "the collector no longer walks it"
        del obj
        assert ref() is None, "an update that replaces a cached object still frees the old one"
    finally:
        gc.unfreeze()
