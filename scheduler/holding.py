"""Held capacity, the scheduler's side: when a unit holds, what users see, and when a hold ends.

CapacityReservation (plugins/capacity_reservation.py) decides who may hold and what; the account is
``cache.nominations.held`` (state/reservations.py). This mixin of :class:`~scheduler.scheduler.Scheduler`:

* **holds** in the attempt that leaves a unit without a node (:meth:`Holding._hold_pod` from the cycle's
  report, :meth:`Holding._hold_gang` from the group cycle), never in a periodic pass. A unit that holds
  keeps its nodes at later attempts; it plans again only when marked stale (a higher-priority pod or
  another scheduler's took the room) or when its members changed.
* **shows** a hold once it turns a pod away (:meth:`Holding._settle_holds`, after every cycle): the unit's
  members get ``status.nominatedNodeName`` and an Event with reason ``Reserved``, sent again as the numbers
  change. Their PodScheduled condition and FailedScheduling message stay upstream's.
* **ends** one when its unit is placed whole, deleted or changed, when a held node goes, or after
  ``maxHoldSeconds`` (a clock timer; the unit then goes to the back of its priority). The pods it turned
  away go back to the active queue, and the members' nominations are cleared.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from scheduler.framework.runtime import Framework
from scheduler.consolidation.planner import Unit
from scheduler.observe import exponential_buckets
from scheduler.model import NATIVE_KEY_PREFIX, Pod
from scheduler.queue import QueuedPodInfo
from scheduler.state.reservations import ENDED, EXPIRED, FULFILLED, REPLANNED, Reservation

if TYPE_CHECKING:
    from scheduler.consolidation import Rebalancer
    from scheduler.framework.clock import Clock
    from scheduler.state.cache import Cache

log = logging.getLogger("tandem.scheduler")

PLUGIN = "CapacityReservation"


def hold_note(r: Reservation, wall: float) -> str:
    """The Reserved event's note: ``reserved 4 node(s) for pod group ns/big: waiting for 3 running pod(s) to
    end, expected in 40s``."""
    start, count, unknown = r.expected()
    head = f"reserved {len(r.nodes)} node(s) for {r.what}"
    if not count:
        return f"{head}: the room is free"
    if unknown:
        return (f"{head}: waiting for {count} running pod(s) to end, expected start unknown: {unknown} of them "
                f"have no activeDeadlineSeconds")
    return f"{head}: waiting for {count} running pod(s) to end, expected in {max(0, math.ceil(start - wall))}s"


@dataclass(slots=True)
class HoldPlan:
    """A plan made elsewhere (Consolidation's defragment): uid -> node, node -> [(awaited uid, end)]."""

    nodes: dict[str, str]
    awaited: dict[str, list[tuple[str, float]]]


class HoldMetrics:
    """Held capacity's metrics, in the scheduler's registry beside upstream's."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.held_capacity = Gauge(
            "tandem_reservation_held_capacity", "Capacity held for head-of-line units (the requests of their members "
            "not placed yet), by resource, in canonical units (millicores, bytes, count).", ["resource"], registry=r)
        self.reservations = Counter(
            "tandem_reservations", "Reservations of capacity for head-of-line units, by what happened: started, "
            "fulfilled, expired, replanned, ended (deleted, changed, nodes gone, no longer eligible, displaced).",
            ["result", "profile"], registry=r)
        self.backfilled_pods = Counter(
            "tandem_reservation_backfilled_pods", "Pods placed on held capacity because they end before the "
            "held unit's expected start.", registry=r)
        self.head_of_line_wait = Histogram(
            "tandem_reservation_wait_duration_seconds", "How long a held unit waited, from the start of its hold "
            "to its last member's placement (or the hold's end).", ["result"],
            buckets=exponential_buckets(0.5, 2, 14), registry=r)


class Holding:
    """The hold step of :class:`~scheduler.scheduler.Scheduler` (its ``__init__`` sets the state)."""

    cache: Cache
    clock: Clock
    pods: dict[str, Pod]
    metrics: Any
    hold_metrics: HoldMetrics | None
    events: Any
    frameworks: dict[str, Framework]
    _back_of_line: dict[str, float]
    _held_resources: set[str]
    _held_published: int
    rebalancer: Rebalancer

    if TYPE_CHECKING:
        def _set_nomination(self, pod: Pod, node: str) -> None: ...

        def _activate(self, uids: list[str]) -> None: ...

    # ------------------------------------------------------------------ holding

    def _hold_pod(self, fw: Framework, qi: QueuedPodInfo) -> None:
        pod = qi.pod
        self._hold(fw, pod.uid, f"pod {pod.key}", [pod], pod.priority, pod.created, qi.initial_attempt)

    def _hold_gang(self, fw: Framework, key: str, members: list[QueuedPodInfo], domain_key: str = "") -> None:
        pods = [m.pod for m in members if self.pods.get(m.uid) is not None and not self.cache.where(m.uid)]
        if not pods:
            return
        pg = self.cache.gangs.group(key)
        priority = max(p.priority for p in pods)
        if pg is not None and pg.priority is not None:
            priority = pg.priority
        created = pg.created if pg is not None and pg.created else min(p.created for p in pods)
        name = key.removeprefix(NATIVE_KEY_PREFIX)
        seen = min((m.initial_attempt for m in members if m.initial_attempt), default=0.0)
        self._hold(fw, key, f"pod group {name}", pods, priority, created, seen, domain_key)

    def _hold(self, fw: Framework, key: str, what: str, pods: list[Pod], priority: int, created: float,
              seen: float, domain_key: str = "") -> None:
        if self.rebalancer:   # Consolidation's defragment serves the same head of the line (consolidation/)
            rank = (-priority, self._back_of_line.get(key, created), seen, key)
            self.rebalancer.blocked(fw, Unit(key, what, [p.uid for p in pods], priority, rank, domain_key,
                                             created, seen))
        plugin = fw.plugins.get(PLUGIN)
        if plugin is None:
            return
        try:
            self._hold_unit(fw, plugin, key, what, pods, priority, created, seen, domain_key)
        except Exception:  # a bug in holding must not cost the unit its report (already sent) or the loop
            log.exception("holding capacity for %s failed", what)

    def _hold_defragmented(self, fw: Framework, unit: Unit, plan: Any) -> None:
        """A defragment plan opens room for ``unit``: with CapacityReservation, the unit holds that room (its
        planned nodes, waiting for the pods the plan moves off them), so nothing else takes it meanwhile."""
        plugin = fw.plugins.get(PLUGIN)
        pods = [p for p in (self.pods.get(uid) for uid in unit.uids)
                if p is not None and not p.node_name and not self.cache.where(p.uid)]
        if plugin is None or not pods:
            return
        wall = self.clock.wall()
        awaited: dict[str, list[tuple[str, float]]] = {}
        for pod, source, _ in plan.moves:
            if source in plan.members.values():
                awaited.setdefault(source, []).append((pod.uid, wall))
        hold = HoldPlan(dict(plan.members), awaited)
        try:
            self._hold_unit(fw, plugin, unit.key, unit.what, pods, unit.priority, unit.created, unit.seen,
                            unit.domain_key, hold)
        except Exception:
            log.exception("holding defragmented capacity for %s failed", unit.what)

    def _unhold(self, key: str) -> None:
        """A defragment plan for unit ``key`` failed part-way: its hold plans again at its next attempt."""
        r = self.cache.nominations.held.by_key.get(key)
        if r is not None:
            r.stale = True
            self._activate(sorted(r.pending))

    def _hold_unit(self, fw: Framework, plugin: Any, key: str, what: str, pods: list[Pod], priority: int,
                   created: float, seen: float, domain_key: str, given: Any = None) -> None:
        held = self.cache.nominations.held
        args = plugin.args
        old = held.by_key.get(key)
        uids = {p.uid for p in pods}
        if given is None and old is not None and not old.stale and old.pending == uids and old.priority == priority:
            if old.shown:   # it keeps its nodes; the attempt's report may have cleared the nomination
                for pod in pods:
                    self._set_nomination(pod, old.members[pod.uid])
            return
        pods = sorted(pods, key=lambda p: (-p.requests.get("cpu", 0), -p.requests.get("memory", 0), p.uid))
        rank = (-priority, self._back_of_line.get(key, created), seen, key)
        mine = [r for r in held.of_profile(fw.name) if r.key != key]
        displaced: list[Reservation] = []
        if len(mine) >= args.max_held_units:
            if not mine:
                return   # maxHeldUnits: 0
            worst = max(mine, key=lambda r: r.rank)
            if not rank < worst.rank:
                return   # behind every holder: it waits its turn (it may become the head when one ends)
            displaced = [worst]
        plan = given or plugin.plan(fw, pods, domain_key, frozenset({key, *(d.key for d in displaced)}))
        if plan is None:
            if old is not None:
                self._end_hold(old, ENDED)   # no longer eligible (what blocks it is no longer only capacity)
            return
        for d in displaced:
            self._end_hold(d, ENDED)
        wall = self.clock.wall()
        placed = self.cache.pods
        awaited = {node: {uid: (dict(placed[uid].pod.requests), end) for uid, end in on if uid in placed}
                   for node, on in plan.awaited.items()}
        r = Reservation(key=key, what=what, profile=fw.name, priority=priority, rank=rank,
                        started=old.started if old is not None else self.clock(), members=dict(plan.nodes),
                        requests={p.uid: dict(p.requests) for p in pods}, pending=set(uids), awaited=awaited)
        for p in pods:
            if p.host_ports:
                r.ports.setdefault(plan.nodes[p.uid], []).append(p)
        for node in r.nodes:   # what stays on each held node once the awaited pods end
            r.base[node] = {"pods": 0}
            for other in self.cache.pods_on(node):
                if other.uid not in awaited.get(node, {}):
                    r.add_base(node, other, 1)
        held.hold(r)
        if old is None:
            self.clock.call_later(args.max_hold_seconds, self._expire_hold, r.key, r.started)
        if self.hold_metrics is not None:
            self.hold_metrics.reservations.labels(REPLANNED if old is not None else "started", fw.name).inc()
        if r.shown:
            self._show(r, wall, force=True)
        log.info("%s for %s (%s)", "re-planned capacity" if old is not None else "holding capacity", what,
                 hold_note(r, wall))

    # ------------------------------------------------------------------ after every cycle

    def _settle_holds(self) -> None:
        """Show the holds that turned a pod away, end the ones placed whole, look at the ones a placement may
        have spoiled. Called after every cycle; nothing to do (three list checks) without reservations."""
        held = self.cache.nominations.held
        if held.placed_whole:
            done, held.placed_whole = held.placed_whole, []
            for r in done:
                if held.by_key.get(r.key) is r and not r.pending:
                    self._end_hold(r, FULFILLED)
        if held.room_free:
            free, held.room_free = held.room_free, []
            for r in {id(r): r for r in free}.values():
                if held.by_key.get(r.key) is r and r.pending:
                    self._activate(sorted(r.pending))   # not after their backoff: the held room is theirs now
        if held.replans:
            spoiled, held.replans = held.replans, []
            for r in {id(r): r for r in spoiled}.values():
                if held.by_key.get(r.key) is r and not r.stale and not held.still_fits(r, self.cache.nodes):
                    r.stale = True   # the room went to a higher priority (or another scheduler): plan again
                    self._activate(sorted(r.pending))
        if held.to_show:
            show, held.to_show = held.to_show, []
            wall = self.clock.wall()
            for r in {id(r): r for r in show}.values():
                if held.by_key.get(r.key) is r:
                    self._show(r, wall)
        if self.hold_metrics is not None:
            if held.backfilled:
                self.hold_metrics.backfilled_pods.inc(held.backfilled)
                held.backfilled = 0
            self._publish_held()

    def _publish_held(self) -> None:
        held = self.cache.nominations.held
        if held.version == self._held_published:
            return
        self._held_published = held.version
        gauge = self.hold_metrics.held_capacity
        amounts = self.cache.nominations.held.held_requests()
        for name in set(self._held_resources) - set(amounts):
            gauge.labels(name).set(0)
        for name, v in amounts.items():
            gauge.labels(name).set(v)
        self._held_resources = set(amounts)

    def _show(self, r: Reservation, wall: float, force: bool = False) -> None:
        """Nominate the members to their planned nodes and send the Reserved event, the first time the hold
        turned a pod away; after that, again only when the numbers in it changed."""
        note = hold_note(r, wall)
        if r.shown and note == r.note and not force:
            return
        first = not r.shown
        r.shown, r.note = True, note
        fw = self.frameworks.get(r.profile)
        for uid in sorted(r.pending):
            pod = self.pods.get(uid)
            if pod is None:
                continue
            if first or force:
                self._set_nomination(pod, r.members[uid])
            if self.events is not None and fw is not None:
                self.events.record(pod, "Normal", "Reserved", "Scheduling", note, fw.name)

    # ------------------------------------------------------------------ ends

    def _end_hold(self, r: Reservation, result: str) -> None:
        held = self.cache.nominations.held
        if held.by_key.get(r.key) is not r:
            return
        held.drop(r)
        if self.hold_metrics is not None:
            self.hold_metrics.reservations.labels(result, r.profile).inc()
            self.hold_metrics.head_of_line_wait.labels(result).observe(max(0.0, self.clock() - r.started))
        if r.shown:
            for uid in r.pending:
                pod = self.pods.get(uid)
                if pod is not None and not pod.node_name and self.cache.nominations.get(uid) == "":
                    self._set_nomination(pod, "")
        if result == FULFILLED:
            self._back_of_line.pop(r.key, None)
        if r.turned_away:
            self._activate(sorted(uid for uid in r.turned_away if uid in self.pods))
        log.info("capacity held for %s: %s", r.what, result)

    def _expire_hold(self, key: str, started: float) -> None:
        """maxHoldSeconds passed: the unit goes to the back of its priority, and the next eligible unit holds."""
        r = self.cache.nominations.held.by_key.get(key)
        if r is None or r.started != started:
            return
        self._back_of_line[key] = self.clock.wall()
        self._end_hold(r, EXPIRED)

    def _held_pod_changed(self, old: Pod | None, pod: Pod | None) -> None:
        """A pending member of a held unit was deleted or changed: the unit is not what was planned for."""
        held = self.cache.nominations.held
        uid = (pod or old).uid if (pod or old) is not None else ""
        r = held.member_of.get(uid)
        if r is None or uid not in r.pending:
            return
        if pod is None or pod.deleting:
            self._end_hold(r, ENDED)
            self._back_of_line.pop(r.key, None)
        elif old is not None and not pod.node_name and old.raw.get("spec") != pod.raw.get("spec"):
            self._end_hold(r, ENDED)

    def _held_node_gone(self, name: str) -> None:
        r = self.cache.nominations.held.on_node.get(name)
        if r is not None:
            self._end_hold(r, ENDED)
            self._activate(sorted(r.pending))
