"""Preemption's candidates: a node where evicting some pods makes the preemptor fit, and what it costs.

A :class:`Candidate` is one such node with its victims and the numbers
upstream's pickOneNodeForPreemption compares; :class:`Candidates` keeps many
as columns, in dry-run order, and picks the best without building the
losers. :class:`Units` is the dry run's view of the potential victims on a
set of rows (a pod, or a PodGroup-mode gang's members on one node, as one
unit). Upstream keeps these in pkg/scheduler/framework/preemption/preemption.go.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from scheduler.model import Pod

OFFSET = 1 << 31                       # upstream adds MaxInt32 + 1 to each priority in the sum


class Candidate:
    """A node where preemption makes the pod fit, and what it costs. ``victims`` (every pod to evict, whole
    gangs' members on other nodes too, most important first) is built when first read: the dry run keys
    hundreds of candidates and evicts on one."""

    __slots__ = ("row", "node", "pdb_violations", "gangs", "high", "total", "start", "nvictims", "_victims",
                 "_make")

    def __init__(self, row: int, node: str, victims: list[Pod] | None = None, pdb_violations: int = 0,
                 gangs: int = 0, high: int = 0, total: int = 0, start: float = 0.0, nvictims: int | None = None,
                 make: Callable[[], list[Pod]] | None = None) -> None:
        self.row = row
        self.node = node
        self.pdb_violations = pdb_violations
        self.gangs = gangs                 # distinct gangs losing a member
        self.high = high                   # highest victim priority
        self.total = total                 # sum of (priority + 2^31)
        self.start = start                 # earliest start among the highest-priority victims (inf: not started)
        self._victims = victims
        self._make = make
        self.nvictims = len(victims) if victims is not None else (nvictims or 0)

    @property
    def victims(self) -> list[Pod]:
        if self._victims is None:
            self._victims = self._make() if self._make is not None else []
        return self._victims

    def key(self) -> tuple:
        # smaller is better; upstream's order, with fewest gangs broken after PDB violations
        return (self.pdb_violations, self.gangs, self.high, self.total, self.nvictims, -self.start)

    def __repr__(self) -> str:
        return (f"Candidate({self.node!r}, victims={[v.name for v in self.victims]}, "
                f"pdb_violations={self.pdb_violations}, key={self.key()})")


class Candidates:
    """Candidates as columns, in dry-run order (what upstream's two candidate lists hold, kept as
    :meth:`keep` takes them). Reading one (iteration) makes a :class:`Candidate`; :meth:`best` picks
    without making any but the winner."""

    COLUMNS = ("row", "pdb_violations", "gangs", "high", "total", "nvictims", "start")

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.cols: dict[str, list[np.ndarray]] = {c: [] for c in self.COLUMNS}
        self.makers: list[Callable[[int], list[Pod]]] = []   # per part: row -> victims
        self.part: list[np.ndarray] = []
        self.kept = [0, 0]                                   # (not violating, violating) so far
        self._made: list[Candidate] | None = None
        self._cat: dict[str, np.ndarray] | None = None

    def __len__(self) -> int:
        return self.kept[0] + self.kept[1]

    def keep(self, cols: dict[str, np.ndarray], victims: Callable[[int], list[Pod]], want: int) -> None:
        """Add a batch (columns in dry-run order) as upstream's two lists take them: each (PDB-violating,
        not) holds at most ``want``."""
        v = cols["pdb_violations"] > 0
        ok = ((~v & (np.cumsum(~v) <= want - self.kept[0])) | (v & (np.cumsum(v) <= want - self.kept[1])))
        if not ok.any():
            return
        for c in self.COLUMNS:
            self.cols[c].append(cols[c][ok])
        self.part.append(np.full(int(ok.sum()), len(self.makers), dtype=np.int64))
        self.makers.append(victims)
        self.kept[0] += int((ok & ~v).sum())
        self.kept[1] += int((ok & v).sum())
        self._made = self._cat = None

    def _columns(self) -> dict[str, np.ndarray]:
        if self._cat is None:
            self._cat = {c: (p[0] if len(p) == 1 else np.concatenate(p)) for c, p in self.cols.items()}
            self._cat["part"] = self.part[0] if len(self.part) == 1 else np.concatenate(self.part)
        return self._cat

    def _make(self, i: int) -> Candidate:
        c = self._columns()
        row = int(c["row"][i])
        return Candidate(row, self.names[row], None, int(c["pdb_violations"][i]), int(c["gangs"][i]),
                         int(c["high"][i]), int(c["total"][i]), float(c["start"][i]), nvictims=int(c["nvictims"][i]),
                         make=functools.partial(self.makers[int(c["part"][i])], row))

    def __iter__(self) -> Iterator[Candidate]:
        if self._made is None:
            self._made = [self._make(i) for i in range(len(self))]
        return iter(self._made)

    def best(self) -> Candidate:
        """pickOneNodeForPreemption over the columns: the first with the smallest key (Candidate.key)."""
        return self._make(first_smallest(self._columns()))


def first_smallest(c: dict[str, np.ndarray]) -> int:
    """Index of the first candidate with the smallest Candidate.key, over key columns."""
    keys = (np.arange(len(c["start"])), -c["start"], c["nvictims"], c["total"], c["high"], c["gangs"],
            c["pdb_violations"])
    return int(np.lexsort(keys)[0])


@dataclass(slots=True)
class Units:
    """Potential victims on a set of rows, grouped into units (one pod, or a PodGroup-mode gang's members
    on one node), with each row's units ranked in reprieve order: PDB-violating first, then by importance.
    Members are kept CSR-style: unit ``i``'s slots are ``slots[ptr[i]:ptr[i + 1]]``."""

    row: np.ndarray                    # int64[u]
    rank: np.ndarray                   # int64[u]: position in its row's reprieve order
    req: np.ndarray                    # int64[u, R]: summed requests on the row
    slots: np.ndarray                  # int64[members]: the units' slots, unit by unit
    ptr: np.ndarray                    # int64[u + 1]
    gang: np.ndarray                   # int64[u]: whole-gang id (-1: a single pod)
    violating: np.ndarray              # int64[u]: PDB-violating pods in the unit
    prio: np.ndarray                   # int64[u]: the unit's priority (a whole gang's: its highest member's)
    start: np.ndarray                  # float64[u]: earliest start among its members

    def members(self, i: int) -> list[int]:
        return self.slots[self.ptr[i]: self.ptr[i + 1]].tolist()


def num_candidates(n: int, percentage: int, absolute: int) -> int:
    """calculateNumCandidates."""
    k = n * percentage // 100
    if k < absolute:
        k = absolute
    return min(k, n)

