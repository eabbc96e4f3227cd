"""The helpers every record's parser shares: the first problem found, typed reads of JSON fields, timestamps.

A parser never raises on a malformed object: it records the first problem
(the field's path and what is wrong) in :class:`_Problems` and goes on with
a safe value; the record carries it in ``invalid``.
"""

from __future__ import annotations

import calendar
import functools
import time
from typing import Any

class _Problems:
    """Collects the first problem found; parsing goes on with a safe value."""

    __slots__ = ("first",)

    def __init__(self) -> None:
        self.first = ""

    def add(self, path: str, msg: str) -> None:
        if not self.first:
            self.first = f"{path}: {msg}"


def _s(v: Any, path: str, probs: _Problems, default: str = "") -> str:
    """A string field; anything else is recorded and replaced (a list as a node name would be unhashable)."""
    if v is None or v == "":
        return default
    if isinstance(v, str):
        return v
    probs.add(path, f"must be a string, got {type(v).__name__}")
    return default


def _d(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _l(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _str_map(v: Any, path: str, probs: _Problems) -> dict[str, str]:
    if v is None:
        return {}
    if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
        probs.add(path, "must be a map of strings")
        return {k: str(x) for k, x in v.items()} if isinstance(v, dict) else {}
    return v


def parse_time(ts: Any) -> float:
    """RFC 3339 timestamp -> epoch seconds; 0.0 when missing or malformed."""
    if not isinstance(ts, str) or len(ts) < 19:
        return 0.0
    return _parse_time(ts[:19])


@functools.lru_cache(maxsize=4096)
def _parse_time(ts: str) -> float:
    # strptime is slow and a burst of pods shares a handful of creation seconds
    try:
        return float(calendar.timegm(time.strptime(ts, "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return 0.0


def _int(v: Any) -> int:
    """An integer field as the API would have it; anything else (a string, a bool, null) is 0."""
    return v if isinstance(v, int) and not isinstance(v, bool) else 0
