"""DynamicResources: a pod's ResourceClaims are allocated devices on the node it goes to (resource.k8s.io/v1).

Upstream's plugin (pkg/scheduler/framework/plugins/dynamicresources, 1.36) with structured parameters, over
tandem's device index (scheduler/state/devices.py, ``handle.devices``) and allocator (scheduler/dra/).

* **PreEnqueue**: every claim the pod names exists, and a template's claim has been generated and named in
  ``status.resourceClaimStatuses`` (kube-controller-manager's resourceclaim controller does both).
* **PreFilter** resolves the claims (missing, being deleted, generated for another pod: refused with
  upstream's words), refuses a claim with a field tandem does not evaluate by name, and sorts them:
  allocated (each must match the node through its allocation's nodeSelector), in flight for another pod
  (``resource claim ns/x is in the process of being allocated``: it waits for that write), or to allocate
  (every request's DeviceClass must exist).
* **Filter**: ``resourceclaim not available on the node`` where an allocated claim's nodeSelector does not
  admit the node; ``cannot allocate all claims`` where the claims to allocate cannot all be served from
  the node's free devices. A pod whose requests share one shape and have no constraints is answered for
  every node at once from the index's per-node counts; other pods use the counts to rule nodes out and the
  allocator searches the rest, one node at a time.
* **Score** (only with ``firstAvailable``): nodes where earlier subrequests are served score higher.
* **Reserve** allocates on the chosen node and marks the claims in flight, so the devices are taken for
  every later cycle before anything is written; gang members held at Permit hold their devices in memory
  only. **Unreserve** puts them back, and removes the pod from a claim's ``reservedFor`` if PreBind had
  added it (a strategic merge patch, as upstream).
* **PreBind** writes what kube-scheduler writes: the finalizer, then ``status.allocation`` with the pod
  in ``status.reservedFor``, each conditional on the version read (merge patches with ``resourceVersion``,
  where upstream updates), re-reading and retrying on a conflict; a claim already
  allocated only gets the pod added to ``reservedFor``. Before it writes an allocation it looks once more
  at every allocated claim the informer shows: a device another scheduler took meanwhile fails the bind.
* **PostFilter**: a pod that fits nowhere because an allocated, unused claim pins it elsewhere gets that
  claim deallocated (``deallocation of ResourceClaim completed``), else ``still not schedulable``; a pod
  without claims gets ``no new claims to deallocate``.

A profile that disables DynamicResources keeps upstream's meaning: claims are not evaluated.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework import (
    ActionType, ClusterEvent, ClusterEventWithHint, Code, CycleState, FilterResult, QueueingHint, Rejection,
    Resource, Status, register,
)
from scheduler.framework.podgroupconditions import rfc3339
from scheduler.framework.nodeaffinity import IntLabels, compile_selector, raw_term, terms_mask
from scheduler.model import Pod
from scheduler.model.dra import (
    ALL, FINALIZER, RESERVED_FOR_MAX, ExactRequest, ResourceClaim, parse_resource_claim, pod_claims,
)

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

log = logging.getLogger("tandem.plugins.dynamicresources")

NAME = "DynamicResources"
STATE_KEY = "PreFilter" + NAME

NOT_AVAILABLE = "resourceclaim not available on the node"
CANNOT_ALLOCATE = "cannot allocate all claims"
IN_USE = "resourceclaim in use"
NO_NEW_CLAIMS = "no new claims to deallocate"
STILL_NOT_SCHEDULABLE = "still not schedulable"
DEALLOCATED = "deallocation of ResourceClaim completed"
CLAIMS_PATH = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}"
CONFLICT_RETRIES = 5      # retry.DefaultRetry's steps
JSON_PATCH = "application/json-patch+json"
# kube-apiserver keeps an opaque config's parameters as the bytes it was sent, but re-encodes them compactly for
# any JSON write: a claim created with non-compact JSON there (a Python client's json.dumps) refuses every JSON
# update, and only a protobuf client (kube-scheduler) can add the finalizer
IMMUTABLE_HINT = (" (the claim's opaque config parameters were sent as non-compact JSON, which kube-apiserver keeps"
                  " byte for byte and no JSON client can write back; create the claim or its template with compact"
                  " JSON, as kubectl and client-go do)")

_SKIP = Status(Code.SKIP)
_OK = Status()
_UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
_NOTHING_TO_DEALLOCATE = Status(Code.UNSCHEDULABLE, NO_NEW_CLAIMS)


@dataclass(slots=True)
class _State:
    """PreFilter's sorting of the pod's claims and what the later points add to it (one cycle's)."""

    claims: list[ResourceClaim]                           # in spec order (entries without a claim left out)
    pinned: list[tuple[int, Any]]                         # allocated claims: (index, compiled nodeSelector or None)
    to_allocate: list[ResourceClaim]
    simple: tuple[ExactRequest, int] | None               # one shape, no constraints: (request, devices needed)
    grouped: tuple[ExactRequest, int, str] | None          # one claim, one shape, one matchAttribute over it all
    scored: bool                                          # a firstAvailable request with several choices
    found: dict[int, list[Any]] = field(default_factory=dict)   # row -> allocation Filter found there
    unavailable: set[int] = field(default_factory=set)    # indexes of allocated claims some node rejected
    waits: set[str] = field(default_factory=set)          # claims a gang sibling is allocating: PreBind waits
    reserved: dict[str, ResourceClaim] = field(default_factory=dict)   # uid -> claim with Reserve's allocation
    written: dict[str, ResourceClaim] = field(default_factory=dict)    # uid -> claim as PreBind left it

    def clone(self) -> "_State":
        return self   # as upstream's stateData.Clone: read-only after PreFilter but for Reserve's own fields


@register
class DynamicResources:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"PreEnqueue", "EnqueueExtensions", "PreFilter", "Filter", "PostFilter",
                                  "PreScore", "Score", "Reserve", "PreBind"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None:
        self.handle = handle
        self._ints = IntLabels()
        self._tasks: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------------ queueing

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # allocation is tracked in claims: a claim created, deallocated, or freed may make room
            ClusterEventWithHint(ClusterEvent(Resource.RESOURCE_CLAIM, ActionType.ADD | ActionType.UPDATE),
                                 self._claim_changed),
            # devices appear (a driver publishes, a node's slice grows) or change their attributes or taints
            ClusterEventWithHint(ClusterEvent(Resource.RESOURCE_SLICE, ActionType.ADD | ActionType.UPDATE)),
            ClusterEventWithHint(ClusterEvent(Resource.DEVICE_CLASS, ActionType.ADD | ActionType.UPDATE)),
            # a node a claim's allocation or a network slice's selector admits joins or gets the labels
            ClusterEventWithHint(ClusterEvent(Resource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL
                                              | ActionType.UPDATE_NODE_TAINT)),
            # the pod's own status names its generated claims (resourceClaimStatuses)
            ClusterEventWithHint(ClusterEvent(Resource.POD, ActionType.UPDATE), _own_claims_named),
        ]

    def _claim_changed(self, pod: Pod, old: Any, new: Any) -> int:
        """isSchedulableAfterClaimChange: a claim of the pod's, or any claim whose devices went free."""
        if not pod.resource_claims:
            return QueueingHint.SKIP
        c = new if isinstance(new, ResourceClaim) else old
        if not isinstance(c, ResourceClaim):
            return QueueingHint.QUEUE
        if c.owner_pod == pod.uid or pod.uid in self.handle.devices.naming.get(c.key, ()):
            return QueueingHint.QUEUE
        if isinstance(old, ResourceClaim) and old.allocation is not None and (
                not isinstance(new, ResourceClaim) or new.allocation is None):
            return QueueingHint.QUEUE   # deallocated: its devices are free
        return QueueingHint.SKIP

    # ------------------------------------------------------------------ PreEnqueue

    def pre_enqueue(self, pod: Pod) -> Status:
        if not pod.resource_claims:
            return _OK
        st, _ = self._resolve(pod)
        return st

    def _resolve(self, pod: Pod) -> tuple[Status, list[ResourceClaim]]:
        """foreachPodResourceClaim: each entry's claim, which must exist, not be going, and (generated) be
        the pod's own."""
        devices = self.handle.devices
        out = []
        for pc in pod_claims(pod.raw):
            if pc.error:
                return Status(_UNRESOLVABLE, pc.error), []
            if pc.claim is None:
                continue
            c = devices.claim(pod.namespace, pc.claim)
            if c is None:
                return Status(_UNRESOLVABLE, f'resourceclaim.resource.k8s.io "{pc.claim}" not found'), []
            if c.deleting:
                return Status(_UNRESOLVABLE, f'resourceclaim "{c.name}" is being deleted'), []
            if pc.generated and c.owner_pod != pod.uid:
                return Status(_UNRESOLVABLE, f"ResourceClaim {c.key} was not created for pod {pod.key} "
                                             "(pod is not owner)"), []
            out.append(c)
        return _OK, out

    # ------------------------------------------------------------------ PreFilter

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeTable) -> tuple[None, Status]:
        if not pod.resource_claims:
            return None, _SKIP
        st, claims = self._resolve(pod)
        if not st.is_success():
            return None, st
        if not claims:
            return None, _SKIP
        devices = self.handle.devices
        pinned: list[tuple[int, Any]] = []
        waits: set[str] = set()
        to_allocate: list[ResourceClaim] = []
        for i, c in enumerate(claims):
            if c.unsupported:
                return None, Status(_UNRESOLVABLE, f'resourceclaim "{c.name}": {c.unsupported}')
            if c.allocation is not None:
                if not c.reserved_for_pod(pod.uid) and len(c.reserved_for) >= RESERVED_FOR_MAX:
                    return None, Status(_UNRESOLVABLE, IN_USE)
                pinned.append((i, _terms(c.allocation.get("nodeSelector"))))
                continue
            if c.uid in devices.in_flight:
                gang = devices.in_flight_gang.get(c.uid)
                if not gang or gang != _gang_of(pod):
                    return None, Status(_UNRESOLVABLE, f"resource claim {c.key} is in the process of being allocated")
                # a gang sibling is allocating it: the allocation it made is this pod's too (it is written for
                # both after Permit, when the sibling's PreBind has written it)
                alloc = devices.in_flight[c.uid].allocation or {}
                pinned.append((i, _terms(alloc.get("nodeSelector"))))
                waits.add(c.uid)
                continue
            for r in c.requests:
                subs = [(r.name, r.exactly)] if r.exactly is not None else [
                    (f"{r.name}/{s}", sub) for s, sub in r.first_available]
                for name, sub in subs:
                    if not sub.class_name:
                        return None, Status(Code.ERROR, f"request {name}: unsupported request type")
                    if sub.class_name not in devices.classes:
                        return None, Status(_UNRESOLVABLE,
                                            f"request {name}: device class {sub.class_name} does not exist")
            to_allocate.append(c)
        state.write(STATE_KEY, _State(claims, pinned, to_allocate, _simple(to_allocate), _grouped(to_allocate), any(
            len(r.first_available) > 1 for c in to_allocate for r in c.requests), waits=waits))
        return None, _OK

    # ------------------------------------------------------------------ Filter

    def filter(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> FilterResult:
        s: _State | None = state.get(STATE_KEY)
        if s is None:
            return FilterResult.all_pass(len(rows))
        k = len(rows)
        ok = np.ones(k, dtype=bool)
        rejections = []
        for i, terms in s.pinned:
            if terms is None:
                continue
            m = terms_mask(terms, nodes, rows, self._ints)
            if not m.all():
                s.unavailable.add(i)
                rejections.append(Rejection(NOT_AVAILABLE, ok & ~m, _UNRESOLVABLE))
                ok &= m
        if s.to_allocate and ok.any():
            try:
                fits = self._allocatable(s, nodes, rows, ok)
            except Exception as exc:  # noqa: BLE001 - a CEL failure: upstream aborts the attempt with it
                return FilterResult(np.zeros(k, dtype=bool), error=Status(Code.ERROR, _claim_error(s, exc)))
            bad = ok & ~fits
            if bad.any():
                rejections.append(Rejection(CANNOT_ALLOCATE, bad, _UNRESOLVABLE))
                ok &= fits
        return FilterResult(ok, rejections)

    def _allocatable(self, s: _State, nodes: NodeTable, rows: np.ndarray, live: np.ndarray) -> np.ndarray:
        """bool[k]: the rows where every claim to allocate can be served. Counts first (one compare per request
        shape); the allocator only where the counts cannot answer alone."""
        devices = self.handle.devices
        need: dict[tuple[Any, ...], int] = {}
        network = False
        for c in s.to_allocate:
            for r in c.requests:
                if r.exactly is None:
                    for _, sub in r.first_available:
                        col = devices.column(sub)
                        if col.error is not None:
                            raise col.error
                        network |= col.network
                    continue
                col = devices.column(r.exactly)
                if col.error is not None:
                    raise col.error
                network |= col.network
                need[r.exactly.key] = need.get(r.exactly.key, 0) + (1 if r.exactly.mode == ALL else r.exactly.count)
        fits = live.copy()
        if not network:
            for key, n in need.items():
                col = devices.columns[key]
                admin = key[3]   # admin access takes devices in use too
                fits &= (col.total if admin else col.free)[rows] >= n
                if not admin and any(r.exactly is not None and r.exactly.key == key and r.exactly.mode == ALL
                                     for c in s.to_allocate for r in c.requests):
                    fits &= col.free[rows] == col.total[rows]
        if s.simple is not None and not network:
            return fits
        if s.grouped is not None and not network:
            # every device on one value of the attribute: some value must have them all free on the node
            req, n, attribute = s.grouped
            best = np.zeros(len(rows), dtype=np.int32)
            for col in devices.free_by_attribute(req, attribute).values():
                np.maximum(best, col[rows], out=best)
            return fits & (best >= n)
        for j in np.flatnonzero(fits).tolist():   # only rows the counts left: constraints need a search
            row = int(rows[j])
            found = devices.allocate(s.to_allocate, nodes.names[row])
            if found is None:
                fits[j] = False
            else:
                s.found[row] = found
        return fits

    # ------------------------------------------------------------------ Score

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> Status:
        s: _State | None = state.get(STATE_KEY)
        return _OK if s is not None and s.scored else _SKIP

    def score(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> np.ndarray:
        """Per node, for each firstAvailable request, how early the subrequest served stands in its list;
        normalized to 0..100 (the best node 100)."""
        s: _State = state.read(STATE_KEY)
        raw = np.zeros(len(rows), dtype=np.int64)
        for j, row in enumerate(rows.tolist()):
            found = s.found.get(row)
            if found is None:
                continue
            for c, results in zip(s.to_allocate, found):
                width = {r.name: len(r.first_available) for r in c.requests if r.first_available}
                seen = set()
                for res in results:
                    base = res.request.split("/", 1)[0]
                    if res.sub_index >= 0 and base not in seen:
                        seen.add(base)
                        raw[j] += width[base] - res.sub_index
        top = raw.max() if len(raw) else 0
        return raw * 100 // top if top > 0 else raw

    # ------------------------------------------------------------------ Reserve / Unreserve

    def reserve(self, state: CycleState, pod: Pod, node: str) -> Status:
        s: _State | None = state.get(STATE_KEY)
        if s is None or not s.to_allocate:
            return _OK
        devices = self.handle.devices
        row = self.handle.nodes.row(node)
        found = s.found.get(row) if row is not None else None
        if found is None:
            try:
                found = devices.allocate(s.to_allocate, node)
            except Exception as exc:  # noqa: BLE001
                return Status(Code.ERROR, _claim_error(s, exc))
            if found is None:
                return Status(Code.ERROR, f"claims were not allocated for node {node}")
        when = rfc3339(self.handle.clock.wall())
        for c, results in zip(s.to_allocate, found):
            allocated = devices.with_allocation(c, results, node, when)
            s.reserved[c.uid] = allocated
            devices.start_allocation(allocated, _gang_of(pod))
        return _OK

    def unreserve(self, state: CycleState, pod: Pod, node: str) -> None:
        s: _State | None = state.get(STATE_KEY)
        if s is None:
            return
        devices = self.handle.devices
        for uid in list(s.reserved):
            devices.end_allocation(uid)
        s.reserved.clear()
        for c in s.written.values():
            if c.reserved_for_pod(pod.uid):
                self._spawn(self._unreserve_claim(c, pod), f"removing pod {pod.key} from claim {c.key}")
        s.written.clear()

    async def _unreserve_claim(self, c: ResourceClaim, pod: Pod) -> None:
        patch = {"metadata": {"uid": c.uid}, "status": {"reservedFor": [{"$patch": "delete", "uid": pod.uid}]}}
        got = await self.handle.client.patch(CLAIMS_PATH.format(ns=c.namespace, name=c.name) + "/status", patch,
                                             "application/strategic-merge-patch+json")
        self.handle.devices.assume(parse_resource_claim(got))

    # ------------------------------------------------------------------ PreBind

    async def pre_bind(self, state: CycleState, pod: Pod, node: str) -> Status:
        s: _State | None = state.get(STATE_KEY)
        if s is None:
            return _OK
        devices = self.handle.devices
        for c in s.claims:
            mine = s.reserved.get(c.uid)
            if c.uid in s.waits:
                await devices.written(c.uid)   # the sibling that allocated it writes it first
                fresh = devices.claim(c.namespace, c.name)
                if fresh is None or fresh.uid != c.uid or fresh.allocation is None:
                    return Status(Code.ERROR, f"claim {c.key} was not allocated by the pod group's member")
                c = fresh
            if mine is None and c.reserved_for_pod(pod.uid):
                continue
            try:
                written = await self._bind_claim(c, mine, pod)
                s.written[c.uid] = written
                devices.assume(written)   # before it leaves the in-flight map: its devices stay taken
            except Exception as exc:  # noqa: BLE001 - the API said no: the binding cycle unreserves and retries
                return Status(Code.ERROR, str(exc), error=exc)
            finally:
                if mine is not None:
                    devices.end_allocation(c.uid)
                    s.reserved.pop(c.uid, None)
        return _OK

    async def _bind_claim(self, c: ResourceClaim, mine: ResourceClaim | None, pod: Pod) -> ResourceClaim:
        """bindClaim: (the finalizer, the allocation and) the pod in reservedFor, each write conditional on the
        version read, retried on a conflict with a fresh read. JSON patches that set ``resourceVersion`` (an
        optimistic lock as an update's) and touch nothing else: a whole object sent
        back, or a merge patch, re-encodes the opaque config ``parameters``, which the server compares byte for
        byte with what it stored (``spec: field is immutable``)."""
        client = self.handle.client
        path = CLAIMS_PATH.format(ns=c.namespace, name=c.name)
        if mine is not None:
            taken = self.handle.devices.taken_by_others(c.uid, mine.devices())
            if taken:
                d, other = taken[0]
                raise _BindError(f"claim {c.key}: device {'/'.join(d)} is already allocated to claim {other} "
                                 "(another scheduler allocated it meanwhile)")
        cur = c
        for attempt in range(CONFLICT_RETRIES):
            if attempt:
                cur = parse_resource_claim(await client.get(path))
            if cur.deleting:
                raise _BindError(f"claim {c.key} got deleted in the meantime")
            status: dict[str, Any] = {}
            if mine is not None:
                if cur.allocation is not None:
                    raise _BindError(f"claim {c.key} got allocated elsewhere in the meantime")
                if FINALIZER not in cur.finalizers:
                    try:
                        got = await client.patch(path, [_test_version(cur), {
                            "op": "add", "path": "/metadata/finalizers", "value": [*cur.finalizers, FINALIZER]}],
                            JSON_PATCH)
                    except Exception as exc:  # noqa: BLE001
                        if _conflict(exc) and attempt + 1 < CONFLICT_RETRIES:
                            continue
                        why = _text(exc)
                        if "field is immutable" in why:
                            why += IMMUTABLE_HINT
                        raise _BindError(f"add finalizer to claim {c.key}: {why}") from exc
                    cur = parse_resource_claim(got)
                status["allocation"] = mine.allocation
            reserved = list((cur.raw.get("status") or {}).get("reservedFor") or [])
            if not cur.reserved_for_pod(pod.uid):
                reserved.append({"resource": "pods", "name": pod.name, "uid": pod.uid})
            status["reservedFor"] = reserved
            try:
                got = await client.patch(path + "/status", [_test_version(cur)] + [
                    {"op": "add", "path": f"/status/{k}", "value": v} for k, v in status.items()], JSON_PATCH)
            except Exception as exc:  # noqa: BLE001
                if _conflict(exc) and attempt + 1 < CONFLICT_RETRIES:
                    continue
                what = "add allocation and reservation to" if mine is not None else "add reservation to"
                raise _BindError(f"{what} claim {c.key}: {_text(exc)}") from exc
            return parse_resource_claim(got)
        raise _BindError(f"claim {c.key}: conflicts on every try")

    # ------------------------------------------------------------------ PostFilter

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Any) -> tuple[None, Status]:
        s: _State | None = state.get(STATE_KEY)
        if s is None or not s.claims:
            return None, _NOTHING_TO_DEALLOCATE
        for i in sorted(s.unavailable):
            c = s.claims[i]
            if not c.reserved_for or (len(c.reserved_for) == 1 and c.reserved_for[0][2] == pod.uid):
                self._spawn(self._deallocate(c), f"deallocating claim {c.key}")
                return None, Status(Code.UNSCHEDULABLE, DEALLOCATED)
        return None, Status(Code.UNSCHEDULABLE, STILL_NOT_SCHEDULABLE)

    async def _deallocate(self, c: ResourceClaim) -> None:
        got = await self.handle.client.patch(
            CLAIMS_PATH.format(ns=c.namespace, name=c.name) + "/status",
            [_test_version(c)] + [{"op": "remove", "path": f"/status/{k}"} for k in ("allocation", "reservedFor")
                                  if k in (c.raw.get("status") or {})], JSON_PATCH)
        self.handle.devices.assume(parse_resource_claim(got))

    def _spawn(self, coro: Any, what: str) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.warning("%s failed: %s", what, t.exception())
        task.add_done_callback(done)


class _BindError(Exception):
    pass


def _test_version(c: ResourceClaim) -> dict[str, Any]:
    """The JSON patch operation that makes it conditional on the version read: a patch that sets
    ``resourceVersion`` is a precondition, and a claim changed since is 409 Conflict, as for an update."""
    return {"op": "replace", "path": "/metadata/resourceVersion", "value": c.resource_version}


def _conflict(exc: Exception) -> bool:
    return getattr(exc, "status", None) == 409


def _text(exc: Exception) -> str:
    return getattr(exc, "message", "") or str(exc)


def _simple(claims: list[ResourceClaim]) -> tuple[ExactRequest, int] | None:
    """One request shape over all claims, counted, without constraints or choices: the counts answer alone."""
    shape = None
    n = 0
    for c in claims:
        if c.constraints:
            return None
        for r in c.requests:
            e = r.exactly
            if e is None or e.mode == ALL or e.admin_access:
                return None
            if shape is not None and e.key != shape.key:
                return None
            shape = e
            n += e.count
    return (shape, n) if shape is not None else None


def _grouped(claims: list[ResourceClaim]) -> tuple[ExactRequest, int, str] | None:
    """One claim whose requests share one shape (counted) and one matchAttribute over all of them: a node
    serves it exactly when some value of the attribute has that many free matching devices there."""
    if len(claims) != 1 or len(claims[0].constraints) != 1:
        return None
    c = claims[0]
    con = c.constraints[0]
    names = {r.name for r in c.requests}
    if con.requests and set(con.requests) != names:
        return None
    one = _simple(claims[:1] if not c.constraints else [replace(c, constraints=())])
    return (one[0], one[1], con.match_attribute) if one is not None else None


def _claim_error(s: _State, exc: Exception) -> str:
    """A request selector's failure names the claim whose request it is (``claim ns/x: selector #0: CEL runtime
    error: ...``); a class selector's names the class (the index's message)."""
    if getattr(exc, "where", None) == "request":
        key = getattr(exc, "key", ())
        for c in s.to_allocate:
            for r in c.requests:
                shapes = [r.exactly] if r.exactly is not None else [sub for _, sub in r.first_available]
                if any(e.key == key for e in shapes):
                    return f"claim {c.key}: selector #{exc.index}: {exc.kind}: {exc.text}"  # type: ignore[attr-defined]
    return str(exc)


def _terms(sel: Any) -> Any:
    """An allocation's nodeSelector, compiled (None: every node)."""
    if not isinstance(sel, dict):
        return None
    return compile_selector((raw_term(t) for t in sel.get("nodeSelectorTerms") or ()),
                            "status.allocation.nodeSelector.nodeSelectorTerms")


def _gang_of(pod: Pod) -> str:
    """The pod's gang (either PodGroup API), "" for a pod alone."""
    if pod.pod_group:
        return f"{pod.namespace}/{pod.pod_group}"
    if pod.scheduling_group:
        return f"native:{pod.namespace}/{pod.scheduling_group}"
    return ""


def _own_claims_named(pod: Pod, old: Any, new: Any) -> int:
    """The pod's own update that names its generated claims (upstream: UpdatePodGeneratedResourceClaim)."""
    if not isinstance(new, Pod) or new.uid != pod.uid or not new.resource_claims:
        return QueueingHint.SKIP
    before = (old.raw.get("status") or {}).get("resourceClaimStatuses") if isinstance(old, Pod) else None
    after = (new.raw.get("status") or {}).get("resourceClaimStatuses")
    return QueueingHint.QUEUE if before != after else QueueingHint.SKIP
