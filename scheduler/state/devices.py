"""Devices for Dynamic Resource Allocation: DeviceClasses, ResourceSlices, ResourceClaims, and who holds what.

DynamicResources (plugins/dynamic_resources.py) reads this through ``handle.devices``; the event handlers
keep it current. Three views of a claim, as upstream's assume cache and in-flight map:

* **the API view** (``api_claims``): the informer's objects;
* **the assumed view** (:meth:`claim`): a claim this scheduler wrote (PreBind) is assumed at the version
  the API answered until the informer brings that version or a newer one;
* **in flight**: a claim Reserve allocated whose PreBind has not written it yet. Its devices are taken
  (no other claim gets them), and another pod that shares it waits (``is in the process of being
  allocated``), as upstream.

A device is **in use** while some claim's effective allocation (in flight, else assumed, else the API's)
holds it without admin access: ``in_use`` counts the claims per device, so two claims on one device (two
schedulers, see README) never free it early.

**Columns.** For each distinct request shape (class, CEL selectors, tolerations, admin access), the devices
that may serve it are found once (CEL evaluated once per device, cached) and counted per node row:
``free[row]`` (matching and not in use) and ``total[row]``. A claim whose requests share one shape and
have no constraints is answered for every node by one compare, ``free[rows] >= count``; others use the
counts as a necessary condition and the allocator (scheduler/dra/allocator.py) searches only the nodes
that pass. Counts move by one per device that changes hands, and a changed slice or pool moves only its
devices (a pool's devices are those of its newest generation). Devices of slices for all nodes or a node
selector (network-attached) are not in the counts: a shape that has any is searched per node.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from scheduler.dra.allocator import TIMED_OUT, Candidate, Result, TimedOut, allocate, node_selector
from scheduler.model.dra import (
    FINALIZER, DeviceClass, DeviceID, ExactRequest, ResourceClaim, ResourceSlice, parse_resource_claim,
)

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

log = logging.getLogger("tandem.devices")

# the taint effects that keep a device from a request that does not tolerate them
BLOCKING = ("NoSchedule", "NoExecute")


class MatchError(Exception):
    """A CEL selector failed on a device: ``where`` is ``class <name>`` or ``request``, ``index`` the selector."""

    def __init__(self, where: str, index: int, text: str, key: tuple[Any, ...] = (), compile_error: bool = False) -> None:
        self.kind = "CEL compile error" if compile_error else "CEL runtime error"
        super().__init__(f"{where}: selector #{index}: {self.kind}: {text}")
        self.where, self.index, self.text, self.key = where, index, text, key


@dataclass(slots=True)
class Column:
    """One request shape's devices: which match, and per node row how many are free / exist."""

    key: tuple[Any, ...]
    free: np.ndarray
    total: np.ndarray
    network: bool = False                 # a matching device is network-attached: counts are not the answer
    error: MatchError | None = None       # the first CEL failure on any device
    matches: dict[DeviceID, bool] = field(default_factory=dict)
    # per attribute asked for (matchAttribute): value -> free matching devices with that value per row
    by_attribute: dict[str, dict[Any, np.ndarray]] = field(default_factory=dict)

    def move(self, c: Candidate, row: int, delta: int) -> None:
        """A matching device on ``row`` became free (+1) or taken (-1), or came (+1) or went (-1) free."""
        self.free[row] += delta
        for attr, values in self.by_attribute.items():
            v = c.device.attribute(c.id[0], attr)
            if v is not None:
                col = values.get(v)
                if col is None:
                    col = values[v] = np.zeros(len(self.free), dtype=np.int32)
                col[row] += delta


# ---------------------------------------------------------------------------- allocation


def _result_entry(r: Result) -> dict[str, Any]:
    out: dict[str, Any] = {"request": r.request, "driver": r.id[0], "pool": r.id[1], "device": r.id[2]}
    if r.admin_access:
        out["adminAccess"] = True
    if r.tolerations:
        out["tolerations"] = [{k: v for k, v in (("key", t.key), ("operator", t.operator), ("value", t.value),
                                                 ("effect", t.effect)) if v} for t in r.tolerations]
    return out


class Allocation:
    """The allocator over the index (a mixin of :class:`Devices`): one node's search, and the claim it yields."""

    classes: dict[str, DeviceClass]

    if TYPE_CHECKING:
        def candidates(self, node: str) -> list[Candidate]: ...

        def is_in_use(self, d: DeviceID) -> bool: ...

        def matches(self, req: ExactRequest, c: Candidate) -> bool: ...

    def allocate(self, claims: list[ResourceClaim], node: str) -> list[list[Result]] | None:
        """Every claim's devices on ``node``, or None. Raises MatchError (a CEL failure)."""
        cands = self.candidates(node)
        if not cands:
            return None
        try:
            return allocate(claims, cands, self.is_in_use, self.matches)
        except TimedOut:
            log.warning("allocating %d claim(s) on node %s: %s", len(claims), node, TIMED_OUT)
            return None

    def with_allocation(self, claim: ResourceClaim, results: list[Result], node: str, when: str = "") -> ResourceClaim:
        """The claim as PreBind will write it: its results, the classes' and its own config, the nodeSelector."""
        chosen = {r.request for r in results}
        config: list[dict[str, Any]] = []
        for req in claim.requests:
            names = [n for n in chosen if n == req.name or n.startswith(req.name + "/")]
            if not names:
                continue
            sub = req.exactly if req.exactly is not None else next(
                s for n, s in req.first_available if f"{req.name}/{n}" == names[0])
            cls = self.classes.get(sub.class_name)
            for entry in cls.config if cls is not None else ():
                config.append({"source": "FromClass", "requests": [names[0]], **entry})
        for entry in claim.config:
            wanted = entry.get("requests") or []
            if not wanted or any(w in chosen or any(n.startswith(w + "/") for n in chosen) for w in wanted):
                config.append({"source": "FromClaim", **entry})
        devices: dict[str, Any] = {"results": [_result_entry(r) for r in results]}
        if config:
            devices["config"] = config
        alloc: dict[str, Any] = {"devices": devices}
        sel = node_selector(results, node)
        if sel is not None:
            alloc["nodeSelector"] = sel
        if when:
            alloc["allocationTimestamp"] = when   # RFC 3339, as kube-scheduler 1.36 stamps it
        raw = copy.deepcopy(claim.raw)
        raw.setdefault("status", {})["allocation"] = alloc
        meta = raw.setdefault("metadata", {})
        if FINALIZER not in (meta.get("finalizers") or []):
            meta["finalizers"] = list(meta.get("finalizers") or []) + [FINALIZER]
        return parse_resource_claim(raw)


def _older(version: str, than: str) -> bool:
    return version.isdigit() and than.isdigit() and int(version) < int(than)


class Devices(Allocation):
    def __init__(self, nodes: NodeTable, compile_selector: Callable[[str], Any] | None = None,
                 device_view: Callable[[str, dict[str, Any]], Any] | None = None) -> None:
        self.nodes = nodes
        self.classes: dict[str, DeviceClass] = {}
        self.slices: dict[str, ResourceSlice] = {}
        self.api_claims: dict[str, ResourceClaim] = {}
        self._assumed: dict[str, ResourceClaim] = {}
        self.in_flight: dict[str, ResourceClaim] = {}        # claim uid -> the claim with its new allocation
        self.in_flight_gang: dict[str, str] = {}              # claim uid -> the gang of the pod allocating it
        self._written: dict[str, list[asyncio.Future[None]]] = {}   # claim uid -> who waits for its write
        self._holds: dict[str, frozenset[DeviceID]] = {}     # claim uid -> devices it holds now
        self.in_use: dict[DeviceID, int] = {}
        self._keys: dict[str, str] = {}                      # claim uid -> namespace/name
        self._api_holders: dict[DeviceID, set[str]] = {}    # device -> claims the informer shows holding it
        # pods not placed yet that name a claim, by claim key: a claim's event concerns them (and its owner)
        self.naming: dict[str, set[str]] = {}
        self._row_of: dict[str, int] = {}                  # node -> the row its devices are counted on
        self._named_by: dict[str, tuple[str, ...]] = {}
        # pools: (driver, pool) -> slice name -> slice; and the candidates the pool gives now
        self._pools: dict[tuple[str, str], dict[str, ResourceSlice]] = {}
        self._active: dict[tuple[str, str], list[Candidate]] = {}
        self.by_node: dict[str, dict[tuple[str, str], list[Candidate]]] = {}   # node -> pool -> its candidates
        self._network: dict[tuple[str, str], list[Candidate]] = {}            # network-attached, by pool
        self.columns: dict[tuple[Any, ...], Column] = {}
        self._views: dict[DeviceID, Any] = {}
        self._compile = compile_selector
        self._view = device_view
        self.version = 0                                     # bumped on every change of slices or classes

    # ------------------------------------------------------------------ claims

    def claim(self, namespace: str, name: str) -> ResourceClaim | None:
        """The assumed view: what this scheduler wrote, until the informer has it."""
        key = f"{namespace}/{name}"
        return self._assumed.get(key) or self.api_claims.get(key)

    def set_claim(self, c: ResourceClaim) -> ResourceClaim | None:
        old = self.claim(c.namespace, c.name)
        self._hold_api(self.api_claims.get(c.key), c)
        self.api_claims[c.key] = c
        self._keys[c.uid] = c.key
        if old is not None and old.uid != c.uid:   # recreated under the same name
            self._refresh(old.uid)
        a = self._assumed.get(c.key)
        if a is not None and (a.uid != c.uid or not _older(c.resource_version, a.resource_version)):
            del self._assumed[c.key]
        self._refresh(c.uid)
        return old

    def delete_claim(self, c: ResourceClaim) -> None:
        self._hold_api(self.api_claims.pop(c.key, None), None)
        self._assumed.pop(c.key, None)
        self._refresh(c.uid)

    def assume(self, c: ResourceClaim) -> None:
        """PreBind wrote ``c`` (the API's answer): the cycle sees it until the informer does."""
        cur = self.api_claims.get(c.key)
        if cur is None or cur.uid != c.uid or _older(cur.resource_version, c.resource_version):
            self._assumed[c.key] = c
            self._keys[c.uid] = c.key
        self._refresh(c.uid)

    def start_allocation(self, c: ResourceClaim, gang: str = "") -> None:
        """Reserve allocated ``c`` (with its allocation): in flight until PreBind writes it or Unreserve. A
        member of ``gang`` that shares the claim may use the allocation before it is written."""
        self.in_flight[c.uid] = c
        if gang:
            self.in_flight_gang[c.uid] = gang
        self._keys.setdefault(c.uid, c.key)
        self._refresh(c.uid)

    def end_allocation(self, uid: str) -> bool:
        gone = self.in_flight.pop(uid, None) is not None
        self.in_flight_gang.pop(uid, None)
        if gone:
            self._refresh(uid)
        for fut in self._written.pop(uid, ()):
            if not fut.done():
                fut.set_result(None)
        return gone

    def written(self, uid: str) -> asyncio.Future[None]:
        """Done when claim ``uid`` is no longer in flight (written, or given back)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if uid in self.in_flight:
            self._written.setdefault(uid, []).append(fut)
        else:
            fut.set_result(None)
        return fut

    def _effective(self, uid: str) -> ResourceClaim | None:
        c = self.in_flight.get(uid)
        if c is not None:
            return c
        key = self._keys.get(uid)
        if key is None:
            return None
        c = self._assumed.get(key) or self.api_claims.get(key)
        return c if c is not None and c.uid == uid else None

    def _refresh(self, uid: str) -> None:
        """Re-derive the devices claim ``uid`` holds and move the counts by the difference."""
        c = self._effective(uid)
        now = c.devices() if c is not None and c.allocation is not None else frozenset()
        if c is None:
            self._keys.pop(uid, None)
        before = self._holds.get(uid, frozenset())
        if now == before:
            return
        if now:
            self._holds[uid] = now
        else:
            self._holds.pop(uid, None)
        for d in before - now:
            n = self.in_use.get(d, 0) - 1
            if n <= 0:
                self.in_use.pop(d, None)
                self._count(d, +1)
            else:
                self.in_use[d] = n
        for d in now - before:
            n = self.in_use.get(d, 0) + 1
            self.in_use[d] = n
            if n == 1:
                self._count(d, -1)

    def track_pod(self, uid: str, namespace: str, claims: tuple[str, ...]) -> None:
        """A pod not placed yet names these claims (none: it is placed, gone or names none)."""
        keys = tuple(f"{namespace}/{c}" for c in claims)
        old = self._named_by.get(uid, ())
        if old == keys:
            return
        for k in old:
            users = self.naming.get(k)
            if users is not None:
                users.discard(uid)
                if not users:
                    del self.naming[k]
        if keys:
            self._named_by[uid] = keys
            for k in keys:
                self.naming.setdefault(k, set()).add(uid)
        else:
            self._named_by.pop(uid, None)

    def concerned(self, c: ResourceClaim) -> set[str]:
        """The pods a change of claim ``c`` itself concerns: those that name it, and its owner."""
        out = set(self.naming.get(c.key, ()))
        if c.owner_pod:
            out.add(c.owner_pod)
        return out

    def is_in_use(self, d: DeviceID) -> bool:
        return d in self.in_use

    def taken_by_others(self, claim_uid: str, devices: frozenset[DeviceID]) -> list[tuple[DeviceID, str]]:
        """Of ``devices``, those another claim holds in the API's view (another scheduler's, or ours
        written): PreBind's last look before it writes an allocation."""
        out = []
        for d in sorted(devices):
            for uid in sorted(self._api_holders.get(d, ())):
                if uid != claim_uid:
                    out.append((d, self._keys.get(uid, uid)))
        return out

    def _hold_api(self, old: ResourceClaim | None, new: ResourceClaim | None) -> None:
        """Move the informer's holders index from ``old`` to ``new`` (the same claim key)."""
        if old is not None and old.allocation is not None:
            for d in old.devices():
                holders = self._api_holders.get(d)
                if holders is not None:
                    holders.discard(old.uid)
                    if not holders:
                        del self._api_holders[d]
        if new is not None and new.allocation is not None:
            for d in new.devices():
                self._api_holders.setdefault(d, set()).add(new.uid)

    # ------------------------------------------------------------------ classes and slices

    def set_class(self, c: DeviceClass) -> None:
        old = self.classes.get(c.name)
        self.classes[c.name] = c
        if old != c:
            self._drop_columns(lambda key: key[0] == c.name)

    def delete_class(self, name: str) -> None:
        self.classes.pop(name, None)
        self._drop_columns(lambda key: key[0] == name)

    def set_slice(self, s: ResourceSlice) -> None:
        old = self.slices.get(s.name)
        self.slices[s.name] = s
        if old is not None and (old.driver, old.pool) != (s.driver, s.pool):
            self._pools.get((old.driver, old.pool), {}).pop(old.name, None)
            self._pool_changed((old.driver, old.pool))
        self._pools.setdefault((s.driver, s.pool), {})[s.name] = s
        self._pool_changed((s.driver, s.pool))

    def delete_slice(self, name: str) -> None:
        s = self.slices.pop(name, None)
        if s is None:
            return
        pool = self._pools.get((s.driver, s.pool), {})
        pool.pop(name, None)
        if not pool:
            self._pools.pop((s.driver, s.pool), None)
        self._pool_changed((s.driver, s.pool))

    def _row(self, node: str) -> int | None:
        """The row a node's devices are counted on (kept until the node changes, see node_changed)."""
        row = self._row_of.get(node)
        if row is None:
            row = self.nodes.index.get(node)
            if row is not None:
                self._row_of[node] = row
        return row

    def node_changed(self, name: str) -> None:
        """A node was added or removed: its devices' counts move from the row they were on to its row now
        (none when it is gone; a freed row may go to another node). Only its own devices move."""
        old = self._row_of.get(name)
        new = self.nodes.index.get(name)
        if old == new:
            return
        if new is None:
            self._row_of.pop(name, None)
        else:
            self._row_of[name] = new
        pools = self.by_node.get(name)
        if not pools:
            return
        for col in self.columns.values():
            for cands in pools.values():
                for c in cands:
                    if not col.matches.get(c.id):
                        continue
                    free = c.id not in self.in_use
                    for row, delta in ((old, -1), (new, +1)):
                        if row is not None and row < len(col.total):
                            col.total[row] += delta
                            if free:
                                col.move(c, row, delta)

    def _pool_changed(self, key: tuple[str, str]) -> None:
        self.version += 1
        old = self._active.get(key, [])
        slices = self._pools.get(key, {})
        new: list[Candidate] = []
        if slices:
            gen = max(s.generation for s in slices.values())
            current = sorted((s for s in slices.values() if s.generation == gen), key=lambda s: s.name)
            incomplete = len(current) < max(s.slice_count for s in current)
            for s in current:
                if s.unsupported:
                    continue
                for d in s.devices:
                    if not d.unsupported:
                        new.append(Candidate((s.driver, s.pool, d.name), d, s, incomplete))
        self._active[key] = new
        if not new:
            self._active.pop(key, None)
        for c in old:   # the pool's devices leave their nodes' lists, and the new ones join
            if c.slice.node_name:
                pools = self.by_node.get(c.slice.node_name)
                if pools is not None:
                    pools.pop(key, None)
                    if not pools:
                        del self.by_node[c.slice.node_name]
        self._network.pop(key, None)
        for c in new:
            if c.slice.node_name:
                self.by_node.setdefault(c.slice.node_name, {}).setdefault(key, []).append(c)
            else:
                self._network.setdefault(key, []).append(c)
        old_ids = {c.id: c for c in old}
        new_ids = {c.id: c for c in new}
        for d, c in old_ids.items():
            if new_ids.get(d) != c:
                self._views.pop(d, None)
                for col in self.columns.values():
                    self._uncount(col, c)
        for d, c in new_ids.items():
            if old_ids.get(d) != c:
                for col in self.columns.values():
                    self._add(col, c)

    @property
    def network(self) -> list[Candidate]:
        """Network-attached candidates (slices for all nodes or a node selector), in pool order."""
        return [c for key in sorted(self._network) for c in self._network[key]]

    # ------------------------------------------------------------------ matching and counts

    def view(self, c: Candidate) -> Any:
        v = self._views.get(c.id)
        if v is None:
            if self._view is None:
                from scheduler.dra.cel import device_view
                self._view = device_view
            v = self._views[c.id] = self._view(c.id[0], c.device.raw)
        return v

    def matches(self, req: ExactRequest, c: Candidate) -> bool:
        """May device ``c`` serve ``req``: the class exists and its selectors and the request's hold, and
        every NoSchedule/NoExecute taint is tolerated. Cached per request shape. Raises MatchError."""
        col = self.column(req)
        hit = col.matches.get(c.id)
        if hit is None:
            hit = col.matches[c.id] = self._match(req, c)
        return hit

    def _match(self, req: ExactRequest, c: Candidate) -> bool:
        cls = self.classes.get(req.class_name)
        if cls is None:
            return False
        for t in c.device.taints:
            if t.effect in BLOCKING and not any(tol.tolerates(t) for tol in req.tolerations):
                return False
        if not cls.selectors and not req.selectors:
            return True
        if self._compile is None:
            from scheduler.dra.cel import compile_selector   # the CEL library loads when a selector is first seen
            self._compile = compile_selector
        view = self.view(c)
        for where, exprs in ((f"class {cls.name}", cls.selectors), ("request", req.selectors)):
            for i, expr in enumerate(exprs):
                try:
                    ok = self._compile(expr).matches(view)
                except Exception as exc:  # noqa: BLE001 - the CEL library's error, reported as upstream's
                    text = getattr(exc, "message", None) or str(exc)
                    raise MatchError(where, i, text, req.key, bool(getattr(exc, "compile_error", False))) from exc
                if not ok:
                    return False
        return True

    def column(self, req: ExactRequest) -> Column:
        key = req.key
        col = self.columns.get(key)
        if col is None:
            cap = self.nodes.cap
            col = Column(key, np.zeros(cap, dtype=np.int32), np.zeros(cap, dtype=np.int32))
            self.columns[key] = col
            for pools in self.by_node.values():
                for cands in pools.values():
                    for c in cands:
                        self._add(col, c)
            for cands in self._network.values():
                for c in cands:
                    self._add(col, c)
        if len(col.free) < self.nodes.cap:   # the node table grew
            col.free = np.concatenate([col.free, np.zeros(self.nodes.cap - len(col.free), dtype=np.int32)])
            col.total = np.concatenate([col.total, np.zeros(self.nodes.cap - len(col.total), dtype=np.int32)])
            col.by_attribute = {}   # rebuilt at their next use
        return col

    def _req_of(self, key: tuple[Any, ...]) -> ExactRequest:
        return ExactRequest(key[0], key[1], "ExactCount", 1, key[3], key[2])

    def _add(self, col: Column, c: Candidate) -> None:
        try:
            ok = self._match(self._req_of(col.key), c)
        except MatchError as exc:
            if col.error is None:
                col.error = exc
            ok = False
        col.matches[c.id] = ok
        if not ok:
            return
        if not c.slice.node_name:
            col.network = True
            return
        row = self._row(c.slice.node_name)
        if row is None or row >= len(col.total):
            return
        col.total[row] += 1
        if c.id not in self.in_use:
            col.move(c, row, +1)

    def _uncount(self, col: Column, c: Candidate) -> None:
        if not col.matches.pop(c.id, False) or not c.slice.node_name:
            return
        row = self._row(c.slice.node_name)
        if row is None or row >= len(col.total):
            return
        col.total[row] -= 1
        if c.id not in self.in_use:
            col.move(c, row, -1)

    def _count(self, d: DeviceID, delta: int) -> None:
        """Device ``d`` went out of use (+1) or into use (-1): every column it matches moves."""
        c = self._candidate(d)
        row = self._row(c.slice.node_name) if c is not None and c.slice.node_name else None
        if row is None:
            return
        for col in self.columns.values():
            if col.matches.get(d) and row < len(col.free):
                col.move(c, row, delta)  # type: ignore[arg-type]

    def _candidate(self, d: DeviceID) -> Candidate | None:
        for c in self._active.get((d[0], d[1]), ()):
            if c.id == d:
                return c
        return None

    def free_by_attribute(self, req: ExactRequest, attribute: str) -> dict[Any, np.ndarray]:
        """For ``req``'s shape: attribute value -> free matching devices with it, per row (built on first use,
        then kept as devices change hands)."""
        col = self.column(req)
        values = col.by_attribute.get(attribute)
        if values is None or any(len(a) < len(col.free) for a in values.values()):
            values = col.by_attribute[attribute] = {}
            for pools in self.by_node.values():
                for cands in pools.values():
                    for c in cands:
                        if not col.matches.get(c.id) or c.id in self.in_use:
                            continue
                        row = self._row(c.slice.node_name)
                        v = c.device.attribute(c.id[0], attribute)
                        if row is None or v is None or row >= len(col.free):
                            continue
                        arr = values.get(v)
                        if arr is None:
                            arr = values[v] = np.zeros(len(col.free), dtype=np.int32)
                        arr[row] += 1
        return values

    def _drop_columns(self, which: Callable[[tuple[Any, ...]], bool]) -> None:
        self.version += 1
        for key in [k for k in self.columns if which(k)]:
            del self.columns[key]

    def candidates(self, node: str) -> list[Candidate]:
        """The devices usable from ``node``: its own, then the network-attached ones whose slices admit it."""
        pools = self.by_node.get(node)
        own = [c for key in sorted(pools) for c in pools[key]] if pools else []
        if not self._network:
            return own
        return own + [c for c in self.network if self._admits(c.slice, node)]

    def _admits(self, s: ResourceSlice, node: str) -> bool:
        if s.all_nodes:
            return True
        row = self.nodes.index.get(node)
        n = self.nodes.node(row) if row is not None else None
        if n is None or s.node_selector is None:
            return False
        return _selector_matches(s.node_selector, node, n.labels)


def _selector_matches(sel: dict[str, Any], name: str, labels: dict[str, str]) -> bool:
    """A NodeSelector against one node (network slices only: a handful per pod, never per node row)."""
    for term in sel.get("nodeSelectorTerms") or ():
        exprs, fields = term.get("matchExpressions") or (), term.get("matchFields") or ()
        if not exprs and not fields:
            continue
        if all(_req(r, labels.get(r.get("key", ""))) for r in exprs) and all(
                _req(r, name if r.get("key") == "metadata.name" else None) for r in fields):
            return True
    return False


def _req(r: dict[str, Any], value: str | None) -> bool:
    op, values = r.get("operator"), r.get("values") or ()
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            a, b = int(value), int(values[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False

