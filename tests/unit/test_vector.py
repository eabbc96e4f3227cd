"""scheduler/framework/vector.py's ShapeCache: what plugins derive per pod shape is reused only while it is right."""

from __future__ import annotations

from collections.abc import Callable

from scheduler.framework.vector import ShapeCache


def test_a_shape_cache_entry_is_reused_only_for_the_same_index_at_the_same_length() -> None:
    built: list[str] = []

    def build(tag: str) -> Callable[[], str]:
        def go() -> str:
            built.append(tag)
            return tag
        return go

    cache = ShapeCache()
    index = {"pods": 0, "cpu": 1, "memory": 2}
    assert cache.get(index, (100, 500), build("a")) == "a"
    assert cache.get(index, (100, 500), build("b")) == "a", "the same shape on the same columns: reused"
    assert cache.get(index, (200, 500), build("c")) == "c", "another shape: built"
    index["nvidia.com/gpu"] = 3   # a column added: what was derived may have missed it
    assert cache.get(index, (100, 500), build("d")) == "d"
    other = {"pods": 0, "memory": 1, "cpu": 2}   # another table, the same length, other column numbers
    assert cache.get(other, (100, 500), build("e")) == "e"
    assert built == ["a", "c", "d", "e"]


def test_a_shape_cache_forgets_everything_at_its_limit() -> None:
    cache = ShapeCache(limit=2)
    index = {"cpu": 0}
    for shape in range(3):
        cache.get(index, (shape,), lambda: shape)
    calls = []
    cache.get(index, (0,), lambda: calls.append(1))
    assert calls == [1], "cleared when full, so rebuilt"
