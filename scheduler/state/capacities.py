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
relabelled or removed is matched, on its one row, against the objects that
can select it or did. Objects without a limit or a topology select nothing
(upstream: a nil topology is no node, a nil size is no room) and are kept
out of it.

Which objects can select a node is an inverted label index (issue 30: at
5,000 nodes, each node event matched all 5,000 objects of a per-node driver,
0.8 ms a node, 25M selector matches as the nodes joined). Every node a
topology selects carries one of the values of each of its ``In``
requirements (a ``matchLabels`` entry is one), so an object is filed under
the (key, value) pairs of one of them, its anchor, and a node event tests
only the objects its own labels name. Topologies with no ``In`` (only
NotIn, Exists, DoesNotExist, or ``{}``, which selects every node) are few
and tested on every event. The same anchor finds an object's rows on the
node table's label column instead of evaluating the whole topology on
every row, and the build does that for all objects with one sort.

Never a loop over the class's objects per node event, nor over the rows per
claim: the claim check is the compare above, nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scheduler.model import CSIStorageCapacity, LabelSelector
from scheduler.model.selectors import SELECTOR_IN, Requirement

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

NONE = -1   # best where no object of the class selects the row


def _anchor(topology: LabelSelector) -> Requirement | None:
    """The requirement a node event looks an object up by: an ``In`` (a matchLabels entry is one) that every
    node the topology selects must meet, so a node carrying none of its (key, value) pairs is not selected.
    The one with the fewest values, so the object is filed under as few pairs as it can be. None where the
    topology has no ``In`` (only NotIn, Exists or DoesNotExist; ``{}``, which selects every node; nil)."""
    if topology.nothing:
        return None
    best = None
    for r in topology.reqs:
        if r.op == SELECTOR_IN and (best is None or len(r.values) < len(best.values)):
            best = r
    return best


class _Class:
    """One StorageClass's objects that can give room: key -> (limit, topology); and, once built, the rows each
    selects, the objects selecting each row, and ``best``.

    ``by_label`` files each object under its anchor's (key, value) pairs (:func:`_anchor`), and ``loose``
    holds those without one; a node event then tests only the objects its own labels name, the loose ones
    and those covering its row (which may stop selecting it). A per-node driver's 5,000 objects, each with
    ``matchLabels: {hostname: <node>}``, are one candidate per node event, not 5,000 selector matches."""

    __slots__ = ("caps", "by_label", "loose", "built", "rows", "cover", "best")

    def __init__(self) -> None:
        self.caps: dict[str, tuple[int, LabelSelector]] = {}
        self.by_label: dict[tuple[str, str], set[str]] = {}
        self.loose: set[str] = set()
        self.built = False
        self.rows: dict[str, set[int]] = {}
        self.cover: dict[int, dict[str, int]] = {}
        self.best = np.zeros(0, dtype=np.int64)

    def build(self, cap: int, select: "Select", nodes: "NodeTable") -> None:
        """Mutates: ``rows``, ``cover`` and ``best`` for every object. Anchored objects find their rows through
        one sort of the anchor key's column and one binary search for all their values (then their other
        requirements on those few rows); the loose ones through ``select``, a pass over every row each."""
        self.rows, self.cover = {}, {}
        by_key: dict[str, list[str]] = {}
        for key, (limit, topology) in self.caps.items():
            anchor = _anchor(topology)
            if anchor is None:
                self._cover(key, limit, select(topology))
            else:
                by_key.setdefault(anchor.key, []).append(key)
        valid = nodes.rows()
        for label_key, keys in by_key.items():
            col = nodes.label(label_key)
            ids = col[valid] if col is not None else np.zeros(len(valid), dtype=np.int32)
            order = np.argsort(ids, kind="stable")
            sorted_ids, sorted_rows = ids[order], valid[order]
            owners, vids = [], []
            for key in keys:
                anchor = _anchor(self.caps[key][1])
                assert anchor is not None
                for v in anchor.values:
                    vid = nodes.label_id(label_key, v)
                    if vid:   # 0: no node carries the value
                        owners.append(key)
                        vids.append(vid)
            found: dict[str, list[int]] = {key: [] for key in keys}
            los = np.searchsorted(sorted_ids, vids, side="left").tolist()
            his = np.searchsorted(sorted_ids, vids, side="right").tolist()
            for key, lo, hi in zip(owners, los, his):
                found[key] += sorted_rows[lo:hi].tolist()
            for key in keys:
                limit, topology = self.caps[key]
                self._cover(key, limit, _matching(topology, found[key], nodes))
        self.best = np.full(cap, NONE, dtype=np.int64)
        self._settle(set(self.cover))
        self.built = True

    def _cover(self, key: str, limit: int, rows: list[int]) -> None:
        """Mutates: the object selects ``rows``; ``best`` is the caller's to settle on them."""
        self.rows[key] = set(rows)
        for r in rows:
            self.cover.setdefault(r, {})[key] = limit

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

    def _file(self, key: str, topology: LabelSelector) -> None:
        if topology.nothing:
            return   # selects no node, ever: no event needs to test it
        anchor = _anchor(topology)
        if anchor is None:
            self.loose.add(key)
            return
        for v in anchor.values:
            self.by_label.setdefault((anchor.key, v), set()).add(key)

    def _unfile(self, key: str, topology: LabelSelector) -> None:
        if topology.nothing:
            return
        anchor = _anchor(topology)
        if anchor is None:
            self.loose.discard(key)
            return
        for v in anchor.values:
            keys = self.by_label.get((anchor.key, v))
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self.by_label[(anchor.key, v)]

    def put(self, key: str, limit: int, topology: LabelSelector, select: "Select") -> None:
        old = self.caps.get(key)
        if old is not None:
            self._unfile(key, old[1])
        self.caps[key] = (limit, topology)
        self._file(key, topology)
        if self.built:
            old_rows = self._uncover(key)
            self._cover(key, limit, select(topology))
            self._settle(old_rows | self.rows[key])

    def drop(self, key: str) -> None:
        old = self.caps.pop(key, None)
        if old is not None:
            self._unfile(key, old[1])
            if self.built:
                self._settle(self._uncover(key))

    def candidates(self, row: int, labels: dict[str, str] | None) -> set[str]:
        """The objects a node event on ``row`` must test: those its labels name by an anchor, the loose ones,
        and those that selected the row (the only ones that can stop selecting it). Any other object's anchor
        is not among the labels, so it neither selects the node nor did."""
        out = set(self.cover.get(row, ()))
        if labels is not None:
            out |= self.loose
            by_label = self.by_label
            for pair in labels.items():
                keys = by_label.get(pair)
                if keys:
                    out |= keys
        return out

    def node_changed(self, row: int, labels: dict[str, str] | None) -> None:
        if not self.built:
            return
        if row >= len(self.best):   # a row the node table grew by since the build
            grown = np.full(max(row + 1, 2 * len(self.best)), NONE, dtype=np.int64)
            grown[: len(self.best)] = self.best
            self.best = grown
        for key in self.candidates(row, labels):
            limit, topology = self.caps[key]
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


def _matching(topology: LabelSelector, rows: list[int], nodes: "NodeTable") -> list[int]:
    """The ``rows`` (a few: those carrying one of the anchor's values) whose node the topology selects. A
    topology that is its anchor alone (``matchLabels`` with one key) selects them all."""
    if len(topology.reqs) == 1:
        return rows
    keep = []
    for r in rows:
        node = nodes.node(r)
        if node is not None and topology.matches(node.labels):
            keep.append(r)
    return keep


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
            c.build(self._nodes.cap, self._select(), self._nodes)
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

        def select(topology: LabelSelector) -> list[int]:
            rows = nodes.rows()
            anchor = _anchor(topology)
            if anchor is None:
                return rows[rows_of(topology, nodes, rows)].tolist()
            # the anchor's values on one column, then the whole topology on those few rows
            col = nodes.label(anchor.key)
            ids = [i for i in (nodes.label_id(anchor.key, v) for v in anchor.values) if i]
            if col is None or not ids:
                return []
            hit = col[rows] == ids[0] if len(ids) == 1 else np.isin(col[rows], ids)
            return _matching(topology, rows[hit].tolist(), nodes)
        return select


if TYPE_CHECKING:
    from collections.abc import Callable

    RowsOf = Callable[[LabelSelector, "NodeTable", np.ndarray], np.ndarray]
    Select = Callable[[LabelSelector], list[int]]   # the rows with a node that a topology selects
