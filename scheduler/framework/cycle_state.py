"""CycleState: per-pod scratch space shared by a cycle's plugins.

A plugin writes what it precomputed in PreFilter/PreScore under its own
key and reads it back in Filter/Score. Entries that preemption's what-if
runs may modify implement ``clone()``; :meth:`CycleState.clone` clones
them rather than sharing them (upstream's StateData.Clone).
"""

from __future__ import annotations

from typing import Any, Protocol


class StateData(Protocol):
    def clone(self) -> "StateData": ...


class CycleState:
    __slots__ = ("_data", "skip_filter", "skip_score")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter: set[str] = set()   # plugins whose PreFilter returned Skip
        self.skip_score: set[str] = set()    # plugins whose PreScore returned Skip

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def read(self, key: str) -> Any:
        """The value under ``key``; KeyError if a plugin reads what its PreFilter never wrote."""
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def clone(self) -> "CycleState":
        c = CycleState()
        c._data = {k: (v.clone() if hasattr(v, "clone") else v) for k, v in self._data.items()}
        c.skip_filter = set(self.skip_filter)
        c.skip_score = set(self.skip_score)
        return c
