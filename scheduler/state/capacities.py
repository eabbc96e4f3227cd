"""CSIStorageCapacity objects, indexed per StorageClass for VolumeBinding's capacity check.

Upstream's hasEnoughCapacity (volumebinding/binder.go) walks, for every node
and every claim to provision, all the CSIStorageCapacity objects: one of the
claim's class whose ``nodeTopology`` selects the node, with a
``maximumVolumeSize`` (else ``capacity``) at least the claim's request, is
room. Drivers that publish capacity per node (TopoLVM, OpenEBS LocalPV-LVM,
most local-storage drivers) publish one object per node, so that walk is
nodes x objects.

Here, per class, ``best[row]`` is the largest limit of the class's objects
that select the node on ``row`` (-1: none), so the check for a claim is one
compare over the rows: ``best[rows] >= request``. The index is built when a
class is first asked about and then kept per event: an object added, changed
or deleted re-derives ``best`` on the rows it selected and selects (each
row's covering objects are kept, so that is O(those rows)); a node added,
relabelled or removed is matched against the class's objects on its one row.
Objects without a limit or a topology select nothing (upstream: a nil
topology is no node, a nil size is no room) and are kept out of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scheduler.model import CSIStorageCapacity, LabelSelector

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

NONE = -1   # best where no object of the class selects the row


class _Class:
    """One StorageClass's objects that can give room: key -> (limit, topology); and, once built, the rows each
    selects, the objects selecting each row, and ``best``."""

    __slots__ = ("caps", "built", "rows", "cover", "best")

    def __init__(self) -> None:
        self.caps: dict[str, tuple[int, LabelSelector]] = {}
        self.built = False
        self.rows: dict[str, set[int]] = {}
        self.cover: dict[int, dict[str, int]] = {}
        self.best = np.zeros(0, dtype=np.int64)

    def build(self, cap: int, select: "Select") -> None:
        self.rows, self.cover = {}, {}
        self.best = np.full(cap, NONE, dtype=np.int64)
        for key, (limit, topology) in self.caps.items():
            self._cover(key, limit, select(topology))
        self.built = True

    def _cover(self, key: str, limit: int, rows: np.ndarray) -> None:
        self.rows[key] = set(rows.tolist())
        for r in self.rows[key]:
            self.cover.setdefault(r, {})[key] = limit
        if len(rows):
            np.maximum.at(self.best, rows, limit)

    def _uncover(self, key: str) -> set[int]:
        rows = self.rows.pop(key, set())
        for r in rows:
            c = self.cover.get(r)
            if c is not None:
                c.pop(key, None)
                if not c:
                    del self.cover[r]
        return rows

    def _settle(self, rows: set[int]) -> None:
        for r in rows:
            c = self.cover.get(r)
            self.best[r] = max(c.values()) if c else NONE

    def put(self, key: str, limit: int, topology: LabelSelector, select: "Select") -> None:
        self.caps[key] = (limit, topology)
        if self.built:
            old = self._uncover(key)
            self._cover(key, limit, select(topology))
            self._settle(old | self.rows[key])

    def drop(self, key: str) -> None:
        if self.caps.pop(key, None) is not None and self.built:
            self._settle(self._uncover(key))

    def node_changed(self, row: int, labels: dict[str, str] | None) -> None:
        if not self.built:
            return
        if row >= len(self.best):   # a row the node table grew by since the build
            grown = np.full(max(row + 1, 2 * len(self.best)), NONE, dtype=np.int64)
            grown[: len(self.best)] = self.best
            self.best = grown
        for key, (limit, topology) in self.caps.items():
            rows = self.rows[key]
            if labels is not None and topology.matches(labels):
                rows.add(row)
                self.cover.setdefault(row, {})[key] = limit
            elif row in rows:
                rows.discard(row)
                c = self.cover.get(row)
                if c is not None:
                    c.pop(key, None)
                    if not c:
                        del self.cover[row]
        self._settle({row})


class Capacities:
    """The informers' CSIStorageCapacity objects (``objects``, by "ns/name") and the per-class index."""

    def __init__(self, nodes: "NodeTable | None", rows_of: "RowsOf") -> None:
        # rows_of(topology, nodes, rows) -> bool[k]: which of ``rows`` a topology selects (Volumes.selector_rows)
        self.objects: dict[str, CSIStorageCapacity] = {}
        self._nodes = nodes
        self._rows_of = rows_of
        self._classes: dict[str, _Class] = {}

    def set(self, cap: CSIStorageCapacity) -> None:
        """Mutates: an object added or updated."""
        old = self.objects.get(cap.key)
        self.objects[cap.key] = cap
        if old is not None and old.storage_class != cap.storage_class:
            self._of(old.storage_class).drop(cap.key)
        c = self._of(cap.storage_class)
        if cap.limit is None or cap.node_topology is None:
            c.drop(cap.key)
        else:
            c.put(cap.key, cap.limit, cap.node_topology, self._select())

    def delete(self, key: str) -> None:
        """Mutates: an object deleted."""
        old = self.objects.pop(key, None)
        if old is not None:
            self._of(old.storage_class).drop(key)

    def node_changed(self, row: int, labels: dict[str, str] | None) -> None:
        """Mutates: the node on ``row`` was added or relabelled (its labels), or removed (None)."""
        for c in self._classes.values():
            c.node_changed(row, labels)

    def room(self, storage_class: str, request: int, rows: np.ndarray) -> np.ndarray:
        """bool[k]: the rows some object of the class selects with a limit of at least ``request``."""
        c = self._classes.get(storage_class)
        if c is None or not c.caps:
            return np.zeros(len(rows), dtype=bool)
        if not c.built:
            assert self._nodes is not None
            c.build(self._nodes.cap, self._select())
        # every row with a node is in ``best``: it was there at the build, or node_changed grew it
        return c.best[rows] >= request

    def _of(self, storage_class: str) -> _Class:
        c = self._classes.get(storage_class)
        if c is None:
            c = self._classes[storage_class] = _Class()
        return c

    def _select(self) -> "Select":
        nodes, rows_of = self._nodes, self._rows_of
        assert nodes is not None

        def select(topology: LabelSelector) -> np.ndarray:
            rows = nodes.rows()
            return rows[rows_of(topology, nodes, rows)]
        return select


if TYPE_CHECKING:
    from collections.abc import Callable

    RowsOf = Callable[[LabelSelector, "NodeTable", np.ndarray], np.ndarray]
    Select = Callable[[LabelSelector], np.ndarray]   # the rows with a node that a topology selects
