"""Per-node counts of placed pods, for inter-pod affinity and topology spreading, kept incrementally.

InterPodAffinity and PodTopologySpread ask the same question in every
cycle: how many placed pods (bound or assumed, of any scheduler) that match
a selector are in each topology domain? kube-scheduler answers it by
walking every pod on every node in PreFilter. tandem keeps the answer:

* **Selection columns.** For each distinct :class:`~scheduler.model.PodSelection`
  conjunction a cycle asks about (a pending pod's affinity terms, all of
  which one existing pod must match; one anti-affinity term; one spread
  constraint's selector in the pod's namespace), :meth:`PodCounts.column`
  returns an int32 column over the node table's rows: the number of placed
  pods on that node matching every part. The first request walks the placed
  pods of the namespaces the selection can count, once; after that every pod that is assumed, bound, forgotten or
  deleted is evaluated against the registered selections (not against other
  pods) and its row's count moves by one. Columns no cycle asked for lately
  are dropped (least recently used) when there are too many.
* **Held terms.** The placed pods' own terms, grouped by (selection,
  topology key): for required anti-affinity and required affinity a column
  of the number of holders per node, for preferred terms a column of summed
  weights (affinity positive, anti-affinity negative). A cycle evaluates the
  incoming pod against each distinct held term, not against each holder.
* **Domains.** :func:`domain_counts` turns a column into counts per value of
  a topology key: one ``bincount`` over that key's interned label column.
  Rows of nodes without the key (and placeholder rows of deleted nodes, whose
  labels are cleared) fall into bin 0, "no domain", which callers ignore.

So a cycle costs a few numpy passes over the node columns per distinct term
and never walks the existing pods. Namespace labels (for namespaceSelector)
come from the Namespace informer; a change of a namespace's labels rebuilds
the columns that select namespaces by label.

Everything here runs on the event loop, synchronously, between or inside
cycles; nothing here may await. The cache calls :meth:`PodCounts.place` and
:meth:`PodCounts.unplace` exactly as it charges and discharges a pod.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from scheduler.framework.nodetable import NodeTable
from scheduler.framework.topology import PREFERRED, REQUIRED_AFFINITY, REQUIRED_ANTI, Selections, pod_matches
from scheduler.model import AffinityTerm, Pod, PodSelection

# how many selection columns to keep; past this the least recently used half goes
MAX_COLUMNS = 1024



@dataclass(slots=True, eq=False)
class _Column:
    parts: Selections
    skip_deleting: bool
    counts: np.ndarray          # int32[cap]
    used: int                   # the use stamp of the last cycle that asked for it

    def counts_pod(self, pod: Pod, ns_labels: dict[str, str]) -> bool:
        if self.skip_deleting and pod.deleting:
            return False
        return pod_matches(self.parts, pod, ns_labels)


@dataclass(slots=True, eq=False)
class HeldTerm:
    """Placed pods' terms of one kind with one selection and topology key: holders (or weights) per node."""

    kind: str                   # REQUIRED_ANTI | REQUIRED_AFFINITY | PREFERRED
    selection: PodSelection
    topology_key: str
    counts: np.ndarray          # int32[cap] holders per node; int64[cap] summed weights for PREFERRED
    holders: int                # placed pods holding it (the entry goes when none does)


class PodCounts:
    """The incremental counts; owned by :class:`scheduler.state.cache.Cache` (``cache.counts``)."""

    def __init__(self, nodes: "NodeTable") -> None:
        self._nodes = nodes
        self.cap = nodes.cap
        self.namespaces: dict[str, dict[str, str]] = {}    # namespace -> labels (the Namespace informer's)
        self._columns: dict[tuple[Selections, bool], _Column] = {}
        # columns by the namespaces they can count: a pod event looks at those of its namespace only
        self._by_ns: dict[str, list[_Column]] = {}
        self._any_ns: list[_Column] = []                   # columns selecting namespaces by label
        # namespace -> uid -> (pod, row) of the placed pods: a new column walks only the namespaces it can count
        self._placed_in: dict[str, dict[str, tuple[Pod, int]]] = {}
        self._stamp = 0
        self.held: dict[tuple[str, PodSelection, str], HeldTerm] = {}
        # (kind, selection, key) -> HeldTerm, by kind, for the cycle's loop over distinct held terms
        self._held_by_kind: dict[str, dict[tuple[str, PodSelection, str], HeldTerm]] = {
            REQUIRED_ANTI: {}, REQUIRED_AFFINITY: {}, PREFERRED: {}}

    # ------------------------------------------------------------------ reading (cycles)

    def ns_labels(self, namespace: str) -> dict[str, str]:
        """The labels of ``namespace``; {} when the informer has not shown it (upstream's nil snapshot)."""
        return self.namespaces.get(namespace, _NO_LABELS)

    def column(self, parts: Selections, skip_deleting: bool = False) -> np.ndarray:
        """int32[cap]: placed pods per node matching every one of ``parts`` (read-only; live until the next
        cache change). ``skip_deleting`` leaves out pods being deleted (PodTopologySpread does, #87621)."""
        self._sync_capacity()
        self._stamp += 1
        key = (parts, skip_deleting)
        col = self._columns.get(key)
        if col is None:
            col = self._register(parts, skip_deleting)
        col.used = self._stamp
        return col.counts

    def held_terms(self, kind: str) -> Iterable[HeldTerm]:
        """The distinct terms placed pods hold, of ``kind`` (their columns sized to the node table)."""
        self._sync_capacity()
        return self._held_by_kind[kind].values()

    # ------------------------------------------------------------------ upkeep (the cache)

    def place(self, pod: Pod, row: int) -> None:
        """``pod`` now counts on ``row`` (assumed or bound)."""
        self._count(pod, row, 1)

    def unplace(self, pod: Pod, row: int) -> None:
        self._count(pod, row, -1)

    def changes_counts(self, old: Pod, new: Pod) -> bool:
        """Would replacing ``old`` by ``new`` in place change any count (labels, namespace, deletion, terms)?"""
        return (old.labels != new.labels or old.namespace != new.namespace or old.deleting != new.deleting
                or old.pod_affinity != new.pod_affinity)

    def set_namespace(self, name: str, labels: dict[str, str]) -> None:
        old = self.namespaces.get(name)
        self.namespaces[name] = labels
        if old is not None and old != labels and self._any_ns:
            for col in list(self._any_ns):    # columns selecting namespaces by label may count differently now
                self._rebuild(col)

    def remove_namespace(self, name: str) -> None:
        if self.namespaces.pop(name, None) is not None and self._any_ns:
            for col in list(self._any_ns):
                self._rebuild(col)

    # ------------------------------------------------------------------ internals

    def _sync_capacity(self) -> None:
        cap = self._nodes.cap
        if cap == self.cap:
            return
        for col in self._columns.values():
            col.counts = _grown(col.counts, cap)
        for h in self.held.values():
            h.counts = _grown(h.counts, cap)
        self.cap = cap

    def _count(self, pod: Pod, row: int, sign: int) -> None:
        self._sync_capacity()
        in_ns = self._placed_in.get(pod.namespace)
        if sign > 0:
            if in_ns is None:
                in_ns = self._placed_in[pod.namespace] = {}
            in_ns[pod.uid] = (pod, row)
        elif in_ns is not None:
            in_ns.pop(pod.uid, None)
            if not in_ns:
                del self._placed_in[pod.namespace]
        ns_labels = self.namespaces.get(pod.namespace, _NO_LABELS)
        for col in self._by_ns.get(pod.namespace, ()):
            if col.counts_pod(pod, ns_labels):
                col.counts[row] += sign
        for col in self._any_ns:
            if col.counts_pod(pod, ns_labels):
                col.counts[row] += sign
        aff = pod.pod_affinity
        if aff is not None:
            for t in aff.required_anti:
                self._hold(REQUIRED_ANTI, t, row, sign, 1)
            for t in aff.required:
                self._hold(REQUIRED_AFFINITY, t, row, sign, 1)
            for t in aff.preferred:
                self._hold(PREFERRED, t, row, sign, t.weight)
            for t in aff.preferred_anti:
                self._hold(PREFERRED, t, row, sign, -t.weight)

    def _hold(self, kind: str, t: AffinityTerm, row: int, sign: int, amount: int) -> None:
        key = (kind, t.selection, t.topology_key)
        h = self.held.get(key)
        if h is None:
            if sign < 0:
                return   # never held (the pod was placed before its terms were known): nothing to take back
            dtype = np.int64 if kind == PREFERRED else np.int32
            h = self.held[key] = HeldTerm(kind, t.selection, t.topology_key, np.zeros(self.cap, dtype=dtype), 0)
            self._held_by_kind[kind][key] = h
        h.counts[row] += sign * amount
        h.holders += sign
        if h.holders <= 0:
            del self.held[key]
            del self._held_by_kind[kind][key]

    def _register(self, parts: Selections, skip_deleting: bool) -> _Column:
        if len(self._columns) >= MAX_COLUMNS:
            self._evict()
        col = _Column(parts, skip_deleting, np.zeros(self.cap, dtype=np.int32), self._stamp)
        self._columns[(parts, skip_deleting)] = col
        if any(p.by_namespace_labels for p in parts):
            self._any_ns.append(col)
        else:
            # a pod must be in every part's namespaces to match them all
            names = frozenset.intersection(*(p.namespaces for p in parts)) if parts else frozenset()
            for ns in names:
                self._by_ns.setdefault(ns, []).append(col)
        self._fill(col)
        return col

    def _fill(self, col: _Column) -> None:
        """Count the placed pods into a new or rebuilt column: one walk over the placed pods of the namespaces
        it can count (all of them for a column that selects namespaces by label), once per selection."""
        counts = col.counts
        counts[:] = 0
        parts = col.parts
        if not parts:
            return
        if any(p.by_namespace_labels for p in parts):
            spaces = list(self._placed_in)
        else:
            spaces = frozenset.intersection(*(p.namespaces for p in parts))
        for ns in spaces:
            placed = self._placed_in.get(ns)
            if not placed:
                continue
            ns_labels = self.namespaces.get(ns, _NO_LABELS)
            for pod, row in placed.values():
                if col.counts_pod(pod, ns_labels):
                    counts[row] += 1

    def _rebuild(self, col: _Column) -> None:
        self._fill(col)

    def _evict(self) -> None:
        """Drop the least recently used half of the columns (pending pods' shapes come and go)."""
        by_age = sorted(self._columns.items(), key=lambda kv: kv[1].used)
        for key, col in by_age[: len(by_age) // 2]:
            del self._columns[key]
            if col in self._any_ns:
                self._any_ns.remove(col)
            else:
                for cols in self._by_ns.values():
                    if col in cols:
                        cols.remove(col)
        self._by_ns = {ns: cols for ns, cols in self._by_ns.items() if cols}


def _grown(a: np.ndarray, cap: int) -> np.ndarray:
    b = np.zeros(cap, dtype=a.dtype)
    b[: len(a)] = a
    return b


_NO_LABELS: dict[str, str] = {}
