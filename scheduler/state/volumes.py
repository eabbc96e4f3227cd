"""PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSIDrivers and CSIStorageCapacities, kept from
their informers for the volume plugins; VolumeBinding's assume cache; and the PV index its Filter reads.

Three things live here, all owned by the cache (scheduler/state/cache.py) and read by the plugins through
``handle.volumes``:

* **The API view** (``api_claims``, ``api_volumes``; and ``classes``, ``drivers``, ``capacities``, which have
  no other): what the API server last said, as the informers delivered it (upstream's GetAPIPV/GetAPIPVC and
  the listers). PreBind's wait for the PV controller reads only this (it waits for the API, not for its own
  assumptions), and so do the informer handlers (the old side of an update).
* **The assumed view** (:meth:`assumed_claim`, :meth:`assumed_claim_by_key`, :meth:`assumed_volume`; upstream's
  AssumeCache, assume_cache.go, and its GetPV/GetPVC): the API view with the scheduler's own assumptions laid
  over it. Reserve assumes a volume bound to a claim (its claimRef set) or a claim given a node to provision
  on; the assumed view answers the assumed object while it stands, so two pods in back-to-back cycles never
  take one volume. Unreserve restores it. An informer event newer than the version an assumption was made
  on replaces it, as upstream (the API has moved on: the write landed, or someone else's did); an event not
  newer is kept in the API view but never undoes the assumption (a resync must not). The plugins read this
  view in the cycle: VolumeBinding must see the volumes the last cycles took; the other volume plugins read
  it too, so that every plugin of a cycle sees one cluster (upstream's read its listers, the API view: the
  same answer, as an assumed claim differs from the API's only in its selected-node, and an assumed volume
  only in its claimRef and bound-by-controller, which none of them reads).
* **The PV index**, for VolumeBinding's Filter without a Python loop over nodes or volumes per cycle:
  volumes by class in numpy columns (capacity, access modes, volume mode, phase, claimRef, affinity group),
  ranked by capacity; each distinct ``spec.nodeAffinity`` evaluated once into an affinity group: a single
  node row for a volume pinned by ``kubernetes.io/hostname`` (a local volume), a node mask otherwise, kept
  current from node events (:meth:`node_changed`), never recomputed per cycle. :meth:`best_static` answers,
  for one claim and a set of node rows, the smallest matching volume usable from each (FindMatchingVolume).

Nothing here writes to the API, and readers never mutate the dicts: writes go through the methods that say so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework.nodeaffinity import IN, IntLabels, SelectorTerm, compile_selector, raw_term, term_mask
from scheduler.model import (
    VOLUME_AVAILABLE, CSIDriver, CSIStorageCapacity, LabelSelector, Node, PersistentVolume, PersistentVolumeClaim,
    StorageClass,
)
from scheduler.state.capacities import Capacities

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

HOSTNAME = "kubernetes.io/hostname"
_ACCESS_BITS = {"ReadWriteOnce": 1, "ReadOnlyMany": 2, "ReadWriteMany": 4, "ReadWriteOncePod": 8}
_BIG = np.iinfo(np.int64).max
SELECTOR_MASKS = 1024   # claims' selector masks kept (per class and selector) before they are all dropped
# group_row values besides a row: the group admits no node, or several (read its mask)
NO_ROW, MASK_ROW = -1, -2


def access_bits(modes: tuple[str, ...]) -> int:
    """The access modes as bits; every mode the API does not know shares one bit (validation refuses them)."""
    bits = 0
    for m in modes:
        bits |= _ACCESS_BITS.get(m, 1 << 8)
    return bits


def newer(a: str, b: str) -> bool:
    """Is resourceVersion ``a`` newer than ``b``? (etcd's versions are integers; anything else: different is newer)"""
    if a.isdigit() and b.isdigit():
        return int(a) > int(b)
    return a != b


@dataclass(eq=False, slots=True)
class _Group:
    """One distinct ``spec.nodeAffinity.required`` of the volumes: where they can be used from.

    ``hostname``: the term names one hostname (a local volume), so only nodes with that hostname label can
    match; their rows are kept in ``rows``. Otherwise ``mask`` (bool[nodes.cap]) says which rows match."""

    terms: tuple[tuple[SelectorTerm, bool], ...] | None     # None: no affinity, every node
    hostname: str | None
    rows: set[int] = field(default_factory=set)
    mask: np.ndarray | None = None
    users: int = 0
    key: Any = None                                          # its key in Volumes._group_ids

    def admits(self, labels: dict[str, str]) -> bool:
        """volume.CheckNodeAffinity on one node's labels (matchFields see a node without a name)."""
        if self.terms is None:
            return True
        return any(fields_hold and all(r.matches_labels(labels) for r in t.labels) for t, fields_hold in self.terms)


class _Table:
    """The volumes of one class, as columns indexed by slot (a slot is reused after its volume goes)."""

    __slots__ = ("names", "slot", "free", "n", "capacity", "access", "mode", "vac", "available", "deleting",
                 "claimed", "group", "labels", "_rank", "_order", "version")

    def __init__(self, cap: int = 64) -> None:
        self.names: list[str | None] = []
        self.slot: dict[str, int] = {}
        self.free: list[int] = []
        self.n = 0
        self.capacity = np.zeros(cap, dtype=np.int64)
        self.access = np.zeros(cap, dtype=np.int32)
        self.mode = np.zeros(cap, dtype=np.int32)
        self.vac = np.zeros(cap, dtype=np.int32)
        self.available = np.zeros(cap, dtype=bool)
        self.deleting = np.zeros(cap, dtype=bool)     # also set on free slots: a free slot is never eligible
        self.claimed = np.zeros(cap, dtype=np.int64)  # interned claimRef ("ns/name"), 0: none
        self.group = np.zeros(cap, dtype=np.int64)
        self.labels: list[Any] = []
        self._rank: np.ndarray | None = None          # slot -> position by (capacity, slot); None: to compute
        self._order: np.ndarray | None = None         # position -> slot
        # bumped when a volume comes, goes or changes its labels (claims' selector masks are cached by it)
        self.version = 0

    def _grow(self) -> None:
        for name in ("capacity", "access", "mode", "vac", "available", "deleting", "claimed", "group"):
            a = getattr(self, name)
            b = np.zeros(len(a) * 2, dtype=a.dtype)
            b[: len(a)] = a
            setattr(self, name, b)

    def put(self, slot: int | None, name: str) -> int:
        if slot is None:
            if self.free:
                slot = self.free.pop()
                self.names[slot] = name
            else:
                if self.n == len(self.capacity):
                    self._grow()
                slot = self.n
                self.n += 1
                self.names.append(name)
                self.labels.append(None)
            self.slot[name] = slot
            self._rank = None
        return slot

    def drop(self, name: str) -> None:
        slot = self.slot.pop(name)
        self.names[slot] = None
        self.labels[slot] = None
        self.deleting[slot] = True
        self.available[slot] = False
        self.free.append(slot)
        self._rank = None
        self.version += 1

    def ranks(self) -> tuple[np.ndarray, np.ndarray]:
        """(rank int64[n], order int64[n]): volumes by capacity, smallest first (ties: the older slot)."""
        if self._rank is None:
            n = self.n
            order = np.lexsort((np.arange(n), self.capacity[:n])).astype(np.int64)
            rank = np.empty(n, dtype=np.int64)
            rank[order] = np.arange(n)
            self._rank, self._order = rank, order
        return self._rank, self._order  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class Match:
    """A claim's candidates per node row, from :meth:`Volumes.best_static`: ``slot`` int64[k] (-1: none)."""

    table: _Table | None
    slot: np.ndarray

    def name(self, i: int) -> str | None:
        s = int(self.slot[i])
        return None if s < 0 or self.table is None else self.table.names[s]


class Volumes:
    """The volume objects from their informers, the assume cache over PVs and PVCs, and the PV index."""

    def __init__(self, nodes: "NodeTable | None" = None) -> None:
        # the API view of claims ("ns/name") and volumes (name); the assumed view is assumed_claim/assumed_volume
        self.api_claims: dict[str, PersistentVolumeClaim] = {}
        self.api_volumes: dict[str, PersistentVolume] = {}
        self.classes: dict[str, StorageClass] = {}
        self.drivers: dict[str, CSIDriver] = {}
        # CSIStorageCapacity objects ("ns/name"), and the per-class index VolumeBinding's capacity check reads
        self.capacity_index = Capacities(nodes, self.selector_rows)
        self.capacities: Mapping[str, CSIStorageCapacity] = self.capacity_index.objects
        self._nodes = nodes
        self._ints = IntLabels()
        # the assumptions, laid over the API view: name/key -> the assumed object (its resourceVersion: the
        # version it was made on)
        self._pv_assumptions: dict[str, PersistentVolume] = {}
        self._pvc_assumptions: dict[str, PersistentVolumeClaim] = {}
        # the index
        self._tables: dict[str, _Table] = {}
        self._slot_of: dict[str, tuple[str, int]] = {}          # volume name -> (class, slot)
        self._groups: list[_Group | None] = []
        self._group_ids: dict[Any, int] = {}
        self._free_groups: list[int] = []
        self._group_row = np.zeros(0, dtype=np.int64)           # group id -> row, NO_ROW or MASK_ROW
        self._by_hostname: dict[str, set[int]] = {}
        self._masked: set[int] = set()                           # groups without a hostname
        # claimRefs interned for the tables' ``claimed`` columns, counted by the slots naming them
        self._claim_ids: dict[str, int] = {}
        self._claim_keys: dict[int, str] = {}
        self._claim_uses: dict[int, int] = {}
        self._next_claim_id = 1
        self._modes: dict[str, int] = {}
        self._selector_masks: dict[tuple[int, LabelSelector], tuple[int, np.ndarray]] = {}
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}

    # ------------------------------------------------------------------ reads (the assumed view)

    def assumed_claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        """The claim as the scheduler assumes it: an assumption while one stands, else the API's."""
        return self.assumed_claim_by_key(f"{namespace}/{name}")

    def assumed_claim_by_key(self, key: str) -> PersistentVolumeClaim | None:
        """:meth:`assumed_claim` of "<namespace>/<name>" (a pod's ``claim_keys``)."""
        return self._pvc_assumptions.get(key) or self.api_claims.get(key)

    def assumed_volume(self, name: str) -> PersistentVolume | None:
        """The volume as the scheduler assumes it: an assumption while one stands, else the API's."""
        return self._pv_assumptions.get(name) or self.api_volumes.get(name)

    # ------------------------------------------------------------------ informer events (mutate)

    def set_pv(self, pv: PersistentVolume) -> None:
        """Mutates: a PersistentVolume added or updated; an event newer than an assumption replaces it."""
        self.api_volumes[pv.name] = pv
        assumed = self._pv_assumptions.get(pv.name)
        if assumed is not None:
            if not newer(pv.resource_version, assumed.resource_version):
                self._notify("pv/" + pv.name)
                return
            del self._pv_assumptions[pv.name]
        self._index(pv)
        self._notify("pv/" + pv.name)

    def delete_pv(self, name: str) -> None:
        """Mutates: a PersistentVolume deleted (and any assumption about it)."""
        self.api_volumes.pop(name, None)
        self._pv_assumptions.pop(name, None)
        self._unindex(name)
        self._notify("pv/" + name)

    def set_pvc(self, pvc: PersistentVolumeClaim) -> None:
        """Mutates: a claim added or updated; an event newer than an assumption replaces it."""
        self.api_claims[pvc.key] = pvc
        assumed = self._pvc_assumptions.get(pvc.key)
        if assumed is not None and newer(pvc.resource_version, assumed.resource_version):
            del self._pvc_assumptions[pvc.key]
        self._notify("pvc/" + pvc.key)

    def delete_pvc(self, key: str) -> None:
        self.api_claims.pop(key, None)
        self._pvc_assumptions.pop(key, None)
        self._notify("pvc/" + key)

    # ------------------------------------------------------------------ the assume cache (mutate)

    def assume_pv(self, pv: PersistentVolume) -> None:
        """Mutates: Reserve's PV with its claimRef set, standing until restored or replaced by a newer event.

        Upstream's Assume refuses an object older than the one it holds; Reserve builds it from
        :meth:`assumed_volume`, so it never is."""
        self._pv_assumptions[pv.name] = pv
        self._index(pv)

    def restore_pv(self, name: str) -> None:
        """Mutates: drop the assumption about a volume; the API's object stands again."""
        if self._pv_assumptions.pop(name, None) is not None:
            api = self.api_volumes.get(name)
            if api is None:
                self._unindex(name)
            else:
                self._index(api)

    def assume_pvc(self, pvc: PersistentVolumeClaim) -> None:
        """Mutates: a claim Reserve gave a node to provision on (its selected-node annotation set)."""
        self._pvc_assumptions[pvc.key] = pvc

    def restore_pvc(self, key: str) -> None:
        self._pvc_assumptions.pop(key, None)

    # ------------------------------------------------------------------ waiting for the API (PreBind)

    def _notify(self, key: str) -> None:
        waiters = self._waiters.pop(key, None)
        for w in waiters or ():
            if not w.done():
                w.set_result(None)

    def changed(self, keys: list[str]) -> "asyncio.Future[None]":
        """A future resolved at the next event of any of ``keys`` ("pv/<name>", "pvc/<ns>/<name>"): PreBind's
        wait re-checks then, not on a poll, and an event wakes only the waits that name its object."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for key in keys:
            self._waiters.setdefault(key, []).append(fut)
        return fut

    def forget_waiter(self, keys: list[str], fut: "asyncio.Future[None]") -> None:
        """Drop a wait that ended otherwise (a timer), so the lists only hold live waits."""
        for key in keys:
            ws = self._waiters.get(key)
            if ws is not None:
                try:
                    ws.remove(fut)
                except ValueError:
                    pass
                if not ws:
                    del self._waiters[key]

    # ------------------------------------------------------------------ the index

    def _mode(self, mode: str) -> int:
        mid = self._modes.get(mode)
        if mid is None:
            mid = self._modes[mode] = len(self._modes) + 1
        return mid

    def _claim_id(self, key: str) -> int:
        """The id of claimRef ``key`` in the tables' ``claimed`` columns, for one more slot naming it."""
        cid = self._claim_ids.get(key)
        if cid is None:
            cid = self._claim_ids[key] = self._next_claim_id
            self._next_claim_id += 1
            self._claim_keys[cid] = key
        self._claim_uses[cid] = self._claim_uses.get(cid, 0) + 1
        return cid

    def _release_claim_id(self, cid: int) -> None:
        """A slot no longer names claim id ``cid`` (0: none): the id goes with the last one."""
        if not cid:
            return
        n = self._claim_uses.get(cid, 0) - 1
        if n > 0:
            self._claim_uses[cid] = n
            return
        self._claim_uses.pop(cid, None)
        key = self._claim_keys.pop(cid, None)
        if key is not None:
            self._claim_ids.pop(key, None)

    def _index(self, pv: PersistentVolume) -> None:
        at = self._slot_of.get(pv.name)
        if at is not None and at[0] != pv.storage_class:
            self._unindex(pv.name)
            at = None
        t = self._tables.get(pv.storage_class)
        if t is None:
            t = self._tables[pv.storage_class] = _Table()
        slot = t.put(None if at is None else at[1], pv.name)
        self._slot_of[pv.name] = (pv.storage_class, slot)
        if at is not None and t.capacity[slot] != pv.capacity:
            t._rank = None
        t.capacity[slot] = pv.capacity
        t.access[slot] = access_bits(pv.access_modes)
        t.mode[slot] = self._mode(pv.volume_mode)
        t.vac[slot] = self._mode("vac:" + pv.attributes_class)
        t.available[slot] = pv.phase == VOLUME_AVAILABLE
        t.deleting[slot] = pv.deleting
        ref = pv.claim_ref
        old_claim = int(t.claimed[slot]) if at is not None else 0
        t.claimed[slot] = 0 if ref is None else self._claim_id(f"{ref.namespace}/{ref.name}")
        self._release_claim_id(old_claim)
        gid = self._group_of(pv.node_affinity_terms)
        old = int(t.group[slot]) if at is not None else -1
        if old != gid:
            self._groups[gid].users += 1  # type: ignore[union-attr]
            if old >= 0:
                self._release_group(old)
            t.group[slot] = gid
        if at is None or t.labels[slot] != pv.labels:
            t.version += 1   # (a binding, assumed or real, leaves the selector masks as they are)
        t.labels[slot] = pv.labels

    def _unindex(self, name: str) -> None:
        at = self._slot_of.pop(name, None)
        if at is None:
            return
        t = self._tables[at[0]]
        self._release_group(int(t.group[at[1]]))
        self._release_claim_id(int(t.claimed[at[1]]))
        t.claimed[at[1]] = 0
        t.drop(name)

    # ------------------------------------------------------------------ affinity groups

    def _group_of(self, raw_terms: Any) -> int:
        key = None if raw_terms is None else _freeze(raw_terms)
        gid = self._group_ids.get(key)
        if gid is not None:
            return gid
        terms = None
        hostname = None
        if raw_terms is not None:
            terms = tuple((SelectorTerm(t.labels, ()), all((r.values[0] == "") == (r.op == IN) for r in t.fields))
                          for t in compile_selector((raw_term(t) for t in raw_terms), "spec.nodeAffinity.required"))
            if len(terms) == 1 and terms[0][1]:
                hosts = [r for r in terms[0][0].labels if r.key == HOSTNAME and r.op == IN and len(r.values) == 1]
                if hosts:
                    hostname = hosts[0].values[0]
        g = _Group(terms, hostname, key=key)
        if self._free_groups:
            gid = self._free_groups.pop()
            self._groups[gid] = g
        else:
            gid = len(self._groups)
            self._groups.append(g)
            if gid == len(self._group_row):
                grown = np.full(max(64, 2 * gid), NO_ROW, dtype=np.int64)
                grown[:gid] = self._group_row
                self._group_row = grown
        self._group_ids[key] = gid
        if hostname is not None:
            self._by_hostname.setdefault(hostname, set()).add(gid)
        else:
            self._masked.add(gid)
        self._evaluate(gid)
        return gid

    def _release_group(self, gid: int) -> None:
        g = self._groups[gid]
        if g is None:
            return
        g.users -= 1
        if g.users > 0:
            return
        self._groups[gid] = None
        self._group_ids.pop(g.key, None)
        if g.hostname is not None:
            s = self._by_hostname.get(g.hostname)
            if s is not None:
                s.discard(gid)
                if not s:
                    del self._by_hostname[g.hostname]
        else:
            self._masked.discard(gid)
        self._group_row[gid] = NO_ROW
        self._free_groups.append(gid)

    def _evaluate(self, gid: int) -> None:
        """A new group: which nodes it admits, over the whole node table (once, vectorized)."""
        g = self._groups[gid]
        nodes = self._nodes
        assert g is not None
        if nodes is None:
            self._group_row[gid] = NO_ROW
            return
        rows = nodes.rows()
        if g.hostname is not None:
            col = nodes.label(HOSTNAME)
            vid = nodes.label_id(HOSTNAME, g.hostname)
            cand = rows[col[rows] == vid] if col is not None and vid else rows[:0]
            g.rows = {r for r in cand.tolist() if g.admits(nodes.nodes[r].labels)}  # type: ignore[union-attr]
        else:
            mask = np.zeros(nodes.cap, dtype=bool)
            if g.terms is None:
                mask[rows] = True
            else:
                m = np.zeros(len(rows), dtype=bool)
                for t, fields_hold in g.terms:
                    if fields_hold:
                        m |= term_mask(t, nodes, rows, self._ints)
                mask[rows] = m
            g.mask = mask
        self._settle(gid)

    def _settle(self, gid: int) -> None:
        g = self._groups[gid]
        assert g is not None
        if g.hostname is not None:
            self._group_row[gid] = next(iter(g.rows)) if len(g.rows) == 1 else (NO_ROW if not g.rows else MASK_ROW)
        else:
            self._group_row[gid] = MASK_ROW

    def set_capacity(self, cap: CSIStorageCapacity) -> None:
        """Mutates: a CSIStorageCapacity added or updated."""
        self.capacity_index.set(cap)

    def delete_capacity(self, key: str) -> None:
        """Mutates: a CSIStorageCapacity deleted."""
        self.capacity_index.delete(key)

    def node_changed(self, row: int, old: Node | None, new: Node | None) -> None:
        """Mutates: the node on ``row`` was added, relabelled or removed: the groups that may admit it are
        evaluated on that one node (those naming its old or new hostname, and the few without a hostname), and
        so are the CSIStorageCapacity objects' topologies."""
        self.capacity_index.node_changed(row, new.labels if new is not None else None)
        labels = new.labels if new is not None else {}
        for node in (old, new):
            host = node.labels.get(HOSTNAME) if node is not None else None
            for gid in self._by_hostname.get(host, ()) if host is not None else ():
                g = self._groups[gid]
                assert g is not None
                if new is not None and g.hostname == labels.get(HOSTNAME) and g.admits(labels):
                    g.rows.add(row)
                else:
                    g.rows.discard(row)
                self._settle(gid)
        for gid in self._masked:
            g = self._groups[gid]
            assert g is not None and g.mask is not None
            if row >= len(g.mask):
                grown = np.zeros(max(row + 1, 2 * len(g.mask)), dtype=bool)
                grown[: len(g.mask)] = g.mask
                g.mask = grown
            g.mask[row] = new is not None and g.admits(labels)

    def admits(self, pv_name: str, rows: np.ndarray) -> np.ndarray:
        """bool[k]: can volume ``pv_name`` be used from each of ``rows`` (its node affinity)?"""
        at = self._slot_of.get(pv_name)
        if at is None:
            return np.zeros(len(rows), dtype=bool)
        return self._group_admits(int(self._tables[at[0]].group[at[1]]), rows)

    def _group_admits(self, gid: int, rows: np.ndarray) -> np.ndarray:
        r = int(self._group_row[gid])
        if r >= 0:
            return rows == r
        if r == NO_ROW:
            return np.zeros(len(rows), dtype=bool)
        g = self._groups[gid]
        assert g is not None
        if g.mask is None:
            return np.isin(rows, np.fromiter(g.rows, dtype=np.int64))
        ok = rows < len(g.mask)
        out = np.zeros(len(rows), dtype=bool)
        out[ok] = g.mask[rows[ok]]
        return out

    # ------------------------------------------------------------------ FindMatchingVolume, per node row

    def best_static(self, claim: PersistentVolumeClaim, rows: np.ndarray, taken: list[Match]) -> Match:
        """For each of ``rows``, the volume FindMatchingVolume picks for ``claim`` there (slot -1: none).

        The candidates are the claim's class's volumes that are not excluded (``taken``: what the pod's
        earlier claims picked on each row), not bound to another claim, at least as large as the request,
        of the claim's volume mode and attributes class and not being deleted. A volume whose claimRef
        already names the claim wins where its node affinity admits the node, and leaves the claim
        unmatched elsewhere. Otherwise the smallest Available one whose labels the claim's selector selects,
        whose access modes include the claim's and whose node affinity admits the node. Arrays over the
        class's volumes and the rows; Python loops only over affinity groups that are not single nodes.
        """
        k = len(rows)
        none = np.full(k, -1, dtype=np.int64)
        t = self._tables.get(claim.storage_class)
        if t is None or t.n == 0:
            return Match(None, none)
        n = t.n
        prior = [m.slot for m in taken if m.table is t]
        ok = ~t.deleting[:n] & (t.capacity[:n] >= claim.request) & (t.mode[:n] == self._mode(claim.volume_mode)) \
            & (t.vac[:n] == self._mode("vac:" + claim.attributes_class))
        cid = self._claim_ids.get(claim.key, -1)
        rank, order = t.ranks()
        pre = np.flatnonzero(ok & (t.claimed[:n] == cid))
        if len(pre):
            pre = np.array([s for s in pre.tolist() if self._bound_to(t.names[s], claim)], dtype=np.int64)
        if len(pre):
            # IsVolumeBoundToClaim: the first one wins where its affinity admits the node, and nowhere else
            s = int(pre[np.argmin(rank[pre])])
            hit = self._group_admits(int(t.group[s]), rows)
            for p in prior:
                hit &= p != s
            return Match(t, np.where(hit, s, -1))
        free = ok & t.available[:n] & (t.claimed[:n] == 0)
        want = access_bits(claim.access_modes)
        free &= (t.access[:n] & want) == want
        if claim.selector is not None:
            free &= self._selector_mask(t, claim.selector)
        slots = np.flatnonzero(free)
        if not len(slots):
            return Match(t, none)
        grp = t.group[slots]
        grow = self._group_row[grp]
        best = np.full(k, _BIG, dtype=np.int64)
        pinned = grow >= 0
        if pinned.any():
            ps = slots[pinned]
            prow = grow[pinned]
            if prior:   # a single-node volume an earlier claim took is taken on its only node
                keep = ~np.isin(ps, np.concatenate(prior))
                ps, prow = ps[keep], prow[keep]
            inv = np.full(int(max(rows.max(initial=-1), prow.max(initial=-1))) + 1, -1, dtype=np.int64)
            inv[rows] = np.arange(k)
            pos = inv[prow]
            on = pos >= 0
            np.minimum.at(best, pos[on], rank[ps[on]])
        spread = grow == MASK_ROW
        if spread.any():
            ms = slots[spread]
            mg = grp[spread]
            for gid in np.unique(mg).tolist():
                cand = ms[mg == gid]
                cand = cand[np.argsort(rank[cand], kind="stable")][: len(prior) + 1]
                admitted = self._group_admits(gid, rows)
                got = np.full(k, _BIG, dtype=np.int64)
                for s in cand.tolist():
                    sel = admitted & (got == _BIG)
                    for p in prior:
                        sel &= p != s
                    got[sel] = rank[s]
                np.minimum(best, got, out=best)
        found = best != _BIG
        slot = np.full(k, -1, dtype=np.int64)
        slot[found] = order[best[found]]
        return Match(t, slot)

    def _bound_to(self, name: str | None, claim: PersistentVolumeClaim) -> bool:
        pv = self.assumed_volume(name) if name is not None else None
        return pv is not None and pv.claim_ref is not None and pv.claim_ref.names(claim)

    def _selector_mask(self, t: _Table, selector: LabelSelector) -> np.ndarray:
        """bool[n]: the volumes whose labels ``selector`` selects (cached until the class's volumes change)."""
        key = (id(t), selector)
        hit = self._selector_masks.get(key)
        if hit is not None and hit[0] == t.version and len(hit[1]) == t.n:
            return hit[1]
        m = np.array([lab is not None and selector.matches(lab) if name is not None else False
                      for name, lab in zip(t.names, t.labels)], dtype=bool)
        if len(self._selector_masks) >= SELECTOR_MASKS:
            self._selector_masks.clear()   # selectors no claim uses any more go too
        self._selector_masks[key] = (t.version, m)
        return m

    def selector_rows(self, selector: LabelSelector, nodes: "NodeTable", rows: np.ndarray) -> np.ndarray:
        """bool[k]: the rows whose labels a label selector (a CSIStorageCapacity's nodeTopology) selects."""
        m = np.ones(len(rows), dtype=bool)
        if selector.nothing:
            return ~m
        for r in selector.reqs:
            col = nodes.label(r.key)
            ids = col[rows] if col is not None else np.zeros(len(rows), dtype=np.int32)
            if r.op in ("In", "NotIn"):
                want = np.array([nodes.label_id(r.key, v) for v in r.values if nodes.label_id(r.key, v)],
                                dtype=np.int64)
                hit = np.isin(ids, want)
                m &= hit if r.op == "In" else ~hit
            elif r.op == "Exists":
                m &= ids != 0
            else:
                m &= ids == 0
        return m


def _freeze(v: Any) -> Any:
    """A hashable copy of JSON (the key of an affinity group)."""
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    return v

