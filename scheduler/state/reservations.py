"""Held capacity: the room reserved for a profile's head-of-line unit, in the account nominations keep.

A :class:`Reservation` is what CapacityReservation (plugins/capacity_reservation.py) planned for a blocked
unit (a gang, or a single pod) that only capacity blocks: for each planned node, the members that will go
there (their requests are the *need*), the running pods the unit waits for there (the *awaited*: their
requests free up when they end), and the requests of every other pod on the node (the *base*: what stays
when the awaited pods have gone). A pod of equal or lower priority may go on such a node only if

    base + need + its requests <= allocatable              (per resource column, pods count included)

that is, if the unit still fits once the awaited pods have ended; capacity the unit does not need stays
usable. The sums move with the cluster, in O(resources) per event, only on reserved nodes
(:meth:`Reservations.placed`): an awaited pod that ends leaves the awaited, any other pod placed or gone
moves the base, a member placed leaves the need (and joins the base on its planned node), a pod that
backfilled joins the awaited (it ends before the unit's expected start). The base is the account's own, not
the node table's, so a what-if that takes pods off the table (preemption's dry run) cannot make held room
look free to a pod the hold applies to. The expected start is the latest ``startTime + activeDeadlineSeconds`` of the awaited pods, unknown
while one of them has no deadline.

Reservations sit in :class:`~scheduler.state.nominations.Nominations` (``nominations.held``): preemption's
nominations and reservations are one account of room promised to pods not bound yet. Nothing here is
persisted: a restart plans again from the queue and the cluster.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from scheduler.framework.nodetable import R_PODS, NodeTable
from scheduler.model import Pod

# the filters whose failures are capacity: pods that end free what they count (CapacityReservation's own
# Filter included: room held for another unit frees when that unit is placed)
CAPACITY_FILTERS = frozenset({"NodeResourcesFit", "NodePorts", "NodeVolumeLimits", "DynamicResources",
                              "CapacityReservation"})

# why a reservation ended, or was planned again (the metrics' result label)
FULFILLED, EXPIRED, ENDED, REPLANNED = "fulfilled", "expired", "ended", "replanned"


def pod_end(pod: Pod, now_wall: float) -> float:
    """When a running pod ends at the latest: ``startTime + activeDeadlineSeconds`` (a pod not started yet
    starts now); +inf without a deadline."""
    if pod.active_deadline <= 0:
        return math.inf
    start = pod.start_time if pod.start_time > 0 else now_wall
    return start + pod.active_deadline


@dataclass(eq=False)
class Reservation:
    """Room held for one unit on its planned nodes (module docstring)."""

    key: str                          # the unit: its gang key, or the pod's uid
    what: str                         # "pod group ns/big" or "pod ns/x", as messages name it
    profile: str
    priority: int
    rank: tuple                       # its place in the profile's line: (-priority, age, first seen)
    started: float                    # clock time the hold began (maxHoldSeconds counts from here)
    members: dict[str, str]           # uid -> its planned node
    requests: dict[str, dict[str, int]]   # uid -> its requests (the need while it is not placed)
    pending: set[str]                 # members not placed yet: their requests are the need
    awaited: dict[str, dict[str, tuple[dict[str, int], float]]]   # node -> uid -> (requests, end)
    shown: bool = False               # the hold has turned a pod away: members nominated, Reserved event sent
    note: str = ""                    # the last Reserved note sent
    stale: bool = False               # the plan no longer holds: the unit plans again at its next attempt
    turned_away: set[str] = field(default_factory=set)   # pods the hold turned away (requeued when it ends)
    _expected: tuple[float, int, int] | None = None      # expected()'s answer until the awaited pods change
    ports: dict[str, list[Pod]] = field(default_factory=dict)   # node -> members with host ports planned there
    base: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> requests of its pods not awaited

    def awaited_changed(self) -> None:
        self._expected = None

    @property
    def nodes(self) -> list[str]:
        return sorted(set(self.members.values()))

    def expected(self) -> tuple[float, int, int]:
        """(expected start as wall time, +inf when unknown; awaited pods still running; those without a
        deadline). Kept until the awaited pods change: every Filter of a pod with a deadline asks."""
        if self._expected is not None:
            return self._expected
        latest, count, unknown = 0.0, 0, 0
        for on in self.awaited.values():
            for _, end in on.values():
                count += 1
                if math.isinf(end):
                    unknown += 1
                latest = max(latest, end)
        self._expected = (latest, count, unknown)
        return self._expected

    def backfills(self, pod: Pod, now_wall: float) -> bool:
        """May ``pod`` (of equal or lower priority) use this held room? Only if it ends before the unit's expected
        start: its activeDeadlineSeconds from now ends no later than the awaited pods' latest end, all known."""
        if pod.active_deadline <= 0:
            return False
        start, _, unknown = self.expected()
        return not unknown and now_wall + pod.active_deadline <= start

    def need_on(self, node: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for uid in self.pending:
            if self.members.get(uid) == node:
                for r, v in self.requests[uid].items():
                    out[r] = out.get(r, 0) + v
                out["pods"] = out.get("pods", 0) + 1
        return out

    def add_base(self, node: str, pod: Pod, sign: int) -> None:
        amounts = self.base.setdefault(node, {})
        for r, v in pod.requests.items():
            amounts[r] = amounts.get(r, 0) + sign * v
        amounts["pods"] = amounts.get("pods", 0) + sign


@dataclass(slots=True)
class HeldTable:
    """One reservation's nodes' rows, and what is in use on each once the awaited pods have ended."""

    reservation: Reservation
    rows: np.ndarray                  # int64[k] (valid rows only)
    charge: np.ndarray                # int64[k, R]: base + need


class Reservations:
    """Every reservation, by unit; the node -> reservation index the cache's pod events consult."""

    def __init__(self) -> None:
        self.by_key: dict[str, Reservation] = {}
        self.on_node: dict[str, Reservation] = {}      # a node is held for one unit at a time
        self.member_of: dict[str, Reservation] = {}    # member uid -> its reservation
        self.version = 0
        self._tables: dict[str, HeldTable] = {}
        self._basis: tuple[int, int, int] | None = None
        self.backfilled = 0                            # pods placed on held room that ends before the start
        self.replans: list[Reservation] = []           # ones a pod placed on their room may spoil (checked after the cycle)
        self.wall: Callable[[], float] | None = None   # the scheduler's clock.wall (None: nothing backfills)
        self.paused = False                            # a what-if moves pods (lift/restore): not a change here
        self.ignored: frozenset[str] = frozenset()     # holds a plan being checked replaces or displaces
        self.to_show: list[Reservation] = []           # ones that turned a pod away in this cycle (Filter)
        self.placed_whole: list[Reservation] = []      # ones whose every member holds a node now
        self.room_free: list[Reservation] = []         # ones whose awaited pods have all ended

    def __bool__(self) -> bool:
        return bool(self.by_key)

    def __len__(self) -> int:
        return len(self.by_key)

    def of_profile(self, profile: str) -> list[Reservation]:
        return [r for r in self.by_key.values() if r.profile == profile]

    # ------------------------------------------------------------------ holding and ending

    def hold(self, r: Reservation) -> None:
        old = self.by_key.get(r.key)
        if old is not None:
            r.shown, r.note, r.turned_away = old.shown, old.note, old.turned_away | r.turned_away
            self.drop(old)
        self.by_key[r.key] = r
        for uid, node in r.members.items():
            self.member_of[uid] = r
            self.on_node[node] = r
        for node in r.awaited:
            self.on_node[node] = r
        self._changed()

    def drop(self, r: Reservation) -> None:
        if self.by_key.get(r.key) is not r:
            return
        del self.by_key[r.key]
        for uid in r.members:
            if self.member_of.get(uid) is r:
                del self.member_of[uid]
        for node in set(r.members.values()) | set(r.awaited):
            if self.on_node.get(node) is r:
                del self.on_node[node]
        self._changed()

    def node_of(self, uid: str) -> str:
        r = self.member_of.get(uid)
        return r.members.get(uid, "") if r is not None else ""

    def _changed(self) -> None:
        self.version += 1
        self._tables.clear()

    # ------------------------------------------------------------------ the cache's pod events

    def placed(self, pod: Pod, node: str, sign: int) -> None:
        """A pod was charged to (1) or discharged from (-1) ``node`` (module docstring). O(1) unless ``node`` is
        held or the pod is a member."""
        if self.paused:
            return
        r = self.member_of.get(pod.uid)
        if r is not None:
            if sign > 0:
                r.pending.discard(pod.uid)
                if not r.pending:
                    self.placed_whole.append(r)
            elif pod.uid not in r.pending:
                r.pending.add(pod.uid)   # a member given back (unreserved, its bind failed): needed again
            if node in r.base:
                r.add_base(node, pod, sign)
            self._changed()
            return
        r = self.on_node.get(node)
        if r is None:
            return
        on = r.awaited.get(node)
        if sign < 0:
            if on is not None and on.pop(pod.uid, None) is not None:
                r.awaited_changed()
                if not any(r.awaited.values()):
                    self.room_free.append(r)   # every pod it waited for has ended: its members go now
            else:
                r.add_base(node, pod, -1)
            self._changed()
            return
        wall = self.wall() if self.wall is not None else 0.0
        if pod.priority <= r.priority and self.wall is not None and r.backfills(pod, wall):
            r.awaited.setdefault(node, {})[pod.uid] = (dict(pod.requests), pod_end(pod, wall))
            r.awaited_changed()
            self.backfilled += 1
        else:
            r.add_base(node, pod, 1)
            self.replans.append(r)   # it may have taken room the unit needs (a higher priority, another scheduler)
        self._changed()

    def started(self, pod: Pod, node: str) -> None:
        """A placed pod's startTime or deadline changed: an awaited pod's end moves with it."""
        r = self.on_node.get(node)
        if r is not None and self.wall is not None:
            on = r.awaited.get(node)
            if on is not None and pod.uid in on:
                on[pod.uid] = (on[pod.uid][0], pod_end(pod, self.wall()))
                r.awaited_changed()

    # ------------------------------------------------------------------ what a cycle charges

    def table(self, r: Reservation, nodes: NodeTable) -> HeldTable:
        """Per held row, what is in use there once the awaited pods have ended: base + need (cached until the
        account or the node table's rows move)."""
        basis = (id(nodes), nodes.layout, len(nodes.resources))
        if basis != self._basis:
            self._basis = basis
            self._tables.clear()
        t = self._tables.get(r.key)
        if t is not None:
            return t
        index = nodes.resource_index
        rows, charges = [], []
        for node in r.nodes:
            row = nodes.row(node)
            if row is None or not nodes.valid[row]:
                continue
            vec = np.zeros(len(nodes.resources), dtype=np.int64)
            for amounts in (r.need_on(node), r.base.get(node, {})):
                for name, v in amounts.items():
                    col = R_PODS if name == "pods" else index.get(name)
                    if col is not None:
                        vec[col] += v
            rows.append(row)
            charges.append(vec)
        t = self._tables[r.key] = HeldTable(
            r, np.array(rows, dtype=np.int64),
            np.array(charges, dtype=np.int64).reshape(len(rows), len(nodes.resources)))
        return t

    def still_fits(self, r: Reservation, nodes: NodeTable) -> bool:
        """Does the unit still fit on its nodes once the awaited pods end (room a higher-priority pod, or another
        scheduler's, may have taken)?"""
        t = self.table(r, nodes)
        if not len(t.rows):
            return True
        width = min(t.charge.shape[1], nodes.alloc.shape[1])
        return bool((t.charge[:, :width] <= nodes.alloc[t.rows, :width]).all())

    def held_requests(self) -> dict[str, int]:
        """Held capacity by resource: the pending members' requests, summed (the metric)."""
        out: dict[str, int] = {}
        for r in self.by_key.values():
            for uid in r.pending:
                for name, v in r.requests[uid].items():
                    out[name] = out.get(name, 0) + v
        return out
