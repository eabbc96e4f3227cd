"""Small numpy helpers shared by vectorized plugins.

Per-call temporaries of a few hundred KB are returned to the OS after each
call and page-faulted back on the next, which costs several times the
arithmetic at 15,000 nodes; :class:`Scratch` keeps work buffers across
calls instead. ``np.take`` on a flattened table is several times faster
than fancy-indexing a 2-D array with row indices.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


class Scratch:
    """Work buffers reused across calls (the scheduling cycle is single-threaded).

    ``get`` returns a view of a buffer that only grows; the next call may
    overwrite it, so nothing a plugin method returns may be a scratch view.
    """

    __slots__ = ("_bufs",)

    def __init__(self) -> None:
        self._bufs: dict[str, np.ndarray] = {}

    def get(self, name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        n = math.prod(shape)
        buf = self._bufs.get(name)
        if buf is None or buf.size < n or buf.dtype != dtype:
            grown = n if buf is None else max(n, 2 * buf.size)
            buf = self._bufs[name] = np.empty(grown, dtype=dtype)
        return buf[:n].reshape(shape)


class ShapeCache:
    """What a plugin derives from a pod's shape (its requests) and a node table's resource columns, kept per
    shape: the pods of one template ask alike, and each derivation builds a few small arrays.

    A table's ``resource_index`` only grows (a column, once given, keeps its number), so an entry is valid for
    the same index object at the same length. The index is held by the entry, so its ``id`` is not reused
    while cached. Entries are shared: what they hold must be read, never written.
    """

    __slots__ = ("_entries", "limit")

    def __init__(self, limit: int = 1024) -> None:
        self._entries: dict[tuple, tuple[dict[str, int], Any]] = {}
        self.limit = limit

    def get(self, index: dict[str, int], shape: tuple, build: Any) -> Any:
        key = (id(index), len(index), shape)
        hit = self._entries.get(key)
        if hit is not None and hit[0] is index:
            return hit[1]
        if len(self._entries) >= self.limit:
            self._entries.clear()
        value = build()
        self._entries[key] = (index, value)
        return value


def flat_index(cols: np.ndarray, rows: np.ndarray, width: int, scratch: Scratch) -> np.ndarray:
    """Indices into a flattened [cap, width] table: cols int64[c], rows int64[k] -> int64[c, k] (scratch)."""
    off = np.multiply(rows, width, out=scratch.get("offsets", (len(rows),), np.int64))
    return np.add(off, cols[:, None], out=scratch.get("index", (len(cols), len(rows)), np.int64))


def take(table: np.ndarray, index: np.ndarray, out: np.ndarray) -> np.ndarray:
    """table int64[cap, R] (C-contiguous), index int64[c, k] from flat_index -> out int64[c, k]."""
    return np.take(table.reshape(-1), index, out=out, mode="clip")   # "raise" would buffer; rows are valid
