"""The device allocator for structured parameters: which devices of one node serve a pod's claims.

The Python counterpart of k8s.io/dynamic-resource-allocation/structured's Allocator, for one node at a time:
claims in the pod's order, their requests in order, a ``firstAvailable`` request's subrequests in order (the
first that can be served wins), each request's devices in pool order (driver, then pool name), slice order,
device order. A choice that leaves a later request or a constraint unservable is taken back and the next one
tried, so the search is complete: it finds an allocation exactly when one exists (tests/unit/dra/ checks that
against brute force). ``budget`` bounds the steps, as upstream bounds Filter's time: past it the node is
answered ``timed out trying to allocate devices``.

What it knows of a device is a :class:`Candidate`. Whether a device may serve a request (its class's and the
request's CEL selectors, its taints against the request's tolerations) is the ``match`` callable's: the device
index (scheduler/state/devices.py) caches those answers per device. Devices in use by other claims are
``in_use``; a request with ``adminAccess`` may take them too, and takes nothing from others.

It never reads or writes the API, the clock or the cache: the same inputs give the same answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from scheduler.model.dra import ALL, DeviceID, ExactRequest, ResourceClaim, ResourceSlice, Device

TIMED_OUT = "timed out trying to allocate devices"
DEFAULT_BUDGET = 200_000   # device tries per node and attempt


@dataclass(frozen=True, slots=True)
class Candidate:
    """A device usable from the node being allocated on."""

    id: DeviceID
    device: Device
    slice: ResourceSlice
    incomplete: bool = False     # its pool has not all its slices yet (allocationMode All refuses that)

    @property
    def node_local(self) -> bool:
        return bool(self.slice.node_name)


@dataclass(frozen=True, slots=True)
class Result:
    """One device of an allocation (a DeviceRequestAllocationResult)."""

    request: str                 # the request's name, or "request/subrequest"
    id: DeviceID
    admin_access: bool
    tolerations: tuple[Any, ...]
    candidate: Candidate
    sub_index: int               # which firstAvailable subrequest served it (-1: an ``exactly`` request)


class AllocationError(Exception):
    """Something wrong with a claim or a class (a CEL runtime error): upstream aborts the pod's attempt."""


class TimedOut(Exception):
    pass


Match = Callable[[ExactRequest, Candidate], bool]


@dataclass(slots=True)
class _Slot:
    claim: int
    name: str
    alternatives: list[tuple[str, ExactRequest, int]]   # (result name, request, subrequest index or -1)


def allocate(claims: Sequence[ResourceClaim], candidates: Sequence[Candidate], in_use: Callable[[DeviceID], bool],
             match: Match, budget: int = DEFAULT_BUDGET) -> list[list[Result]] | None:
    """The allocation of every claim on this node (one list of results per claim), or None if there is none.
    Raises :class:`AllocationError` for a broken claim or class, :class:`TimedOut` past ``budget``."""
    slots = []
    for ci, c in enumerate(claims):
        for r in c.requests:
            if r.exactly is not None:
                alts = [(r.name, r.exactly, -1)]
            else:
                alts = [(f"{r.name}/{s}", sub, j) for j, (s, sub) in enumerate(r.first_available)]
            slots.append(_Slot(ci, r.name, alts))
    search = _Search(claims, candidates, in_use, match, budget)
    if not search.run(slots, 0):
        return None
    out: list[list[Result]] = [[] for _ in claims]
    for ci, res in search.chosen:
        out[ci].extend(res)
    return out


class _Search:
    def __init__(self, claims: Sequence[ResourceClaim], candidates: Sequence[Candidate],
                 in_use: Callable[[DeviceID], bool], match: Match, budget: int) -> None:
        self.claims = claims
        self.candidates = candidates
        self.in_use = in_use
        self.match = match
        self.budget = budget
        self.used: set[DeviceID] = set()
        self.chosen: list[tuple[int, list[Result]]] = []
        # per claim, per constraint: the attribute value the devices chosen so far agreed on
        self.pinned: dict[tuple[int, int], Any] = {}

    def _eligible(self, req: ExactRequest) -> list[Candidate]:
        return [c for c in self.candidates if self.match(req, c)]

    def run(self, slots: list[_Slot], i: int) -> bool:
        if i == len(slots):
            return True
        slot = slots[i]
        for name, req, sub in slot.alternatives:
            eligible = self._eligible(req)
            if req.mode == ALL:
                if not eligible or any(c.incomplete for c in eligible):
                    continue
                if not req.admin_access and any(self.in_use(c.id) or c.id in self.used for c in eligible):
                    continue
                if self._take(slot, name, req, sub, eligible, slots, i):
                    return True
                continue
            free = [c for c in eligible if c.id not in self.used and (req.admin_access or not self.in_use(c.id))]
            if len(free) < req.count:
                continue
            if self._pick(slot, name, req, sub, free, 0, [], slots, i):
                return True
        return False

    def _pick(self, slot: _Slot, name: str, req: ExactRequest, sub: int, free: list[Candidate], start: int,
              picked: list[Candidate], slots: list[_Slot], i: int) -> bool:
        """Choose the request's devices as a combination (in candidate order), checking constraints per pick."""
        if len(picked) == req.count:
            return self._take(slot, name, req, sub, picked, slots, i)
        need = req.count - len(picked)
        for k in range(start, len(free) - need + 1):
            self.budget -= 1
            if self.budget < 0:
                raise TimedOut(TIMED_OUT)
            c = free[k]
            undo = self._constrain(slot, c)
            if undo is None:
                continue
            picked.append(c)
            self.used.add(c.id)
            if self._pick(slot, name, req, sub, free, k + 1, picked, slots, i):
                return True
            picked.pop()
            self.used.discard(c.id)
            self._unconstrain(undo)
        return False

    def _take(self, slot: _Slot, name: str, req: ExactRequest, sub: int, devices: list[Candidate],
              slots: list[_Slot], i: int) -> bool:
        fresh = [c for c in devices if c.id not in self.used]
        undos = []
        if req.mode == ALL:   # _pick checked these one by one; All takes them in one go
            for c in devices:
                undo = self._constrain(slot, c)
                if undo is None:
                    for u in reversed(undos):
                        self._unconstrain(u)
                    return False
                undos.append(undo)
            self.used.update(c.id for c in fresh)
        results = [Result(name, c.id, req.admin_access, _tolerated(req, c), c, sub) for c in devices]
        self.chosen.append((slot.claim, results))
        if self.run(slots, i + 1):
            return True
        self.chosen.pop()
        if req.mode == ALL:
            for c in fresh:
                self.used.discard(c.id)
            for u in reversed(undos):
                self._unconstrain(u)
        return False

    def _constrain(self, slot: _Slot, c: Candidate) -> list[tuple[tuple[int, int], bool]] | None:
        """Check and record the claim's matchAttribute constraints that cover this request for device ``c``:
        None if one fails; else what to undo."""
        undo = []
        for k, con in enumerate(self.claims[slot.claim].constraints):
            if con.requests and slot.name not in con.requests:
                continue
            value = c.device.attribute(c.id[0], con.match_attribute)
            key = (slot.claim, k)
            have = self.pinned.get(key)
            if value is None or (have is not None and have != value):
                for u, fresh in reversed(undo):
                    if fresh:
                        del self.pinned[u]
                return None
            if have is None:
                self.pinned[key] = value
                undo.append((key, True))
            else:
                undo.append((key, False))
        return undo

    def _unconstrain(self, undo: list[tuple[tuple[int, int], bool]]) -> None:
        for key, fresh in undo:
            if fresh:
                self.pinned.pop(key, None)


def _tolerated(req: ExactRequest, c: Candidate) -> tuple[Any, ...]:
    """The request's tolerations that tolerate one of the device's taints (they go into the result)."""
    if not c.device.taints:
        return ()
    return tuple(t for t in req.tolerations if any(t.tolerates(x) for x in c.device.taints))


def node_selector(results: Sequence[Result], node: str) -> dict[str, Any] | None:
    """The allocation's nodeSelector: pinned to ``node`` when a device is the node's own; else the network
    slices' selectors combined (one term each: their requirements ANDed); None if every device is on all nodes."""
    if any(r.candidate.node_local for r in results):
        return {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    exprs: list[Any] = []
    fields: list[Any] = []
    for r in results:
        sel = r.candidate.slice.node_selector
        if sel is None:
            continue
        term = (sel.get("nodeSelectorTerms") or [{}])[0]
        exprs.extend(x for x in term.get("matchExpressions") or () if x not in exprs)
        fields.extend(x for x in term.get("matchFields") or () if x not in fields)
    if not exprs and not fields:
        return None
    term: dict[str, Any] = {}
    if exprs:
        term["matchExpressions"] = exprs
    if fields:
        term["matchFields"] = fields
    return {"nodeSelectorTerms": [term]}
