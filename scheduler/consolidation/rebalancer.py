"""The rebalancer: plans (planner.py), evictions through the Eviction API, and the steering of replacements.

One :class:`Rebalancer` per scheduler serves every profile that enables Consolidation. Its task (started
with the scheduling loop, while this instance leads) plans each profile every ``intervalSeconds``, and sooner
when a head-of-line unit is blocked by capacity alone (:meth:`Rebalancer.blocked`). A profile runs one plan
at a time. A plan's moves start in order as the limits allow (``maxMovesPerNode`` evictions in flight per
source node, ``maxMovesPerWorkload`` per owner) and the pace allows (:data:`MOVE_BURST` at once, then
:data:`MOVES_PER_SECOND`); a move is in flight from its eviction until its replacement is bound and Ready.
Each move, just before its eviction:

* checks that the pod is still where it was planned and that its target still takes it (else the fullest
  node that does, never its source), and promises the target's room to the replacement (a nomination of a
  stand-in pod: pods of equal or lower priority cannot take it meanwhile);
* POSTs ``pods/eviction`` (policy/v1), so PodDisruptionBudgets hold: a 429 takes the promise back and tries
  again later (backoff up to ``intervalSeconds``, at most :data:`MAX_TRIES` times), any other error aborts
  the move;
* on success records an Event on the pod (reason ``Defragment``, ``Compact`` or ``Respread``, the planned
  node in its note) and starts steering: the owner's next pending pod is nominated to the target at the start
  of its cycle (:meth:`Rebalancer.steer`), and Consolidation's Filter keeps the owner's pods off the source.

``dryRun`` plans the same way and evicts nothing: each pod a plan would move gets one Event saying so.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import Counter as Tally
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Histogram

from scheduler.apiclient import NO_RETRY, APIError, Conflict, NotFound, TooManyRequests
from scheduler.consolidation.planner import (COMPACT, DEFRAGMENT, MAX_SPREAD_CHECKS, SPREAD, Plan, Planner, Unit,
                                             WhatIf, replacement)
from scheduler.model import Pod
from scheduler.observe import exponential_buckets
from scheduler.state.moves import disruption_ignored
from scheduler.state.moves import ABORTED, DONE, EVICTED, EVICTING, IN_FLIGHT, PLACED, STEER_TTL_SECONDS, Move

if TYPE_CHECKING:
    from scheduler.framework.clock import Clock
    from scheduler.framework.runtime import Framework
    from scheduler.state.cache import Cache

log = logging.getLogger("tandem.consolidation")

PLUGIN = "Consolidation"
MAX_TRIES = 10              # evictions of one move refused (429) before the move is given up
FIRST_RETRY_SECONDS = 1.0   # the first wait after a 429 (doubled each time, at most intervalSeconds)
SPREAD_CHUNK = 16           # pods spread checks between yields to the loop
SCAN_CHUNK = 4096           # pods read for spread's candidates between yields to the loop
# A plan's evictions start at most MOVE_BURST at once and MOVES_PER_SECOND after that (a token bucket on the
# scheduler's clock), besides the per-node and per-owner limits: each move brings its eviction, its Event,
# its replacement's cycle and bind and some five pod updates (1.5 to 3 ms of the loop at 5,000 nodes), and 32
# at once held other pods' binds up by 100 ms and more (bench/RESULTS.md, issue 28).
MOVE_BURST = 4
MOVES_PER_SECOND = 40.0
REASONS = {DEFRAGMENT: "Defragment", COMPACT: "Compact", SPREAD: "Respread"}


class ConsolidationMetrics:
    def __init__(self, r: CollectorRegistry) -> None:
        # descheduler's descheduler_pods_evicted, under tandem's prefix
        self.pods_evicted = Counter(
            "tandem_pods_evicted", "Pods evicted by the rebalancer (result: success or error), by strategy.",
            ["result", "strategy", "namespace", "node", "profile"], registry=r)
        self.moves = Counter(
            "tandem_consolidation_moves", "Moves planned, executed (evicted) and aborted, by strategy.",
            ["strategy", "result", "profile"], registry=r)
        self.bounce_backs = Counter(
            "tandem_consolidation_bounce_backs", "Replacements of moved pods that were bound elsewhere than their "
            "planned node.", ["strategy", "profile"], registry=r)
        self.replacement_bound = Histogram(
            "tandem_consolidation_replacement_bound_duration_seconds", "From a move's eviction to its replacement's "
            "binding.", ["strategy"], buckets=exponential_buckets(0.05, 2, 14), registry=r)
        self.nodes_emptied = Counter(
            "tandem_consolidation_nodes_emptied", "Nodes compaction emptied.", ["profile"], registry=r)
        self.plan_duration = Histogram(
            "tandem_consolidation_plan_duration_seconds", "Time to plan, by strategy (with or without a plan).",
            ["strategy"], buckets=exponential_buckets(0.0005, 2, 16), registry=r)


@dataclass(eq=False)
class Running:
    """A plan being executed."""

    profile: str
    plan: Plan
    moves: list[Move]
    done: asyncio.Event = field(default_factory=asyncio.Event)


class Rebalancer:
    def __init__(self, frameworks: dict[str, "Framework"], cache: "Cache", pods: dict[str, Pod], client: Any,
                 events: Any, clock: "Clock", metrics: Any,
                 spawn: Callable[[Any, str], None], hold: Callable[["Framework", Unit, Plan], None],
                 unhold: Callable[[str], None]) -> None:
        self.profiles: dict[str, tuple["Framework", Any]] = {
            name: (fw, fw.plugins[PLUGIN].args) for name, fw in frameworks.items() if PLUGIN in fw.plugins}
        self.cache = cache
        self.moves = cache.moves
        self.pods = pods
        self.client = client
        self.events = events
        self.clock = clock
        self.metrics = ConsolidationMetrics(metrics.registry) if metrics is not None and self.profiles else None
        self.spawn = spawn
        self.hold = hold          # give a defragmented unit its room (CapacityReservation's hold), if held
        self.unhold = unhold      # a defragment plan failed: its unit plans again
        self.units: dict[str, dict[str, Unit]] = {name: {} for name in self.profiles}
        self.running: dict[str, Running] = {}
        self.cooldown: dict[str, float] = {}        # owner uid -> clock time its next plan may start
        self.in_flight_node: Tally[str] = Tally()
        self.in_flight_owner: Tally[str] = Tally()
        self.reported: set[tuple[str, str, str]] = set()   # dry run: (strategy, pod uid, target) told
        self.tried: dict[str, float] = {}           # unit key -> when defragment last found no plan
        self.due: dict[str, float] = {}
        self.wake = asyncio.Event()

    def __bool__(self) -> bool:
        return bool(self.profiles)

    # ------------------------------------------------------------------ hooks the scheduler calls

    def blocked(self, fw: "Framework", unit: Unit) -> None:
        """A head-of-line candidate that only capacity may block (holding.py's hold step)."""
        units = self.units.get(fw.name)
        if units is None or not self.profiles[fw.name][1].defragment:
            return
        fresh = unit.key not in units
        units[unit.key] = unit
        if fresh and fw.name not in self.running:
            self.wake.set()

    def steer(self, pod: Pod) -> None:
        """At the start of a pod's cycle: if it is the replacement a move waits for, nominate it to the move's
        target (the scheduler tries a nominated node first), taking over the stand-in's promise."""
        moves = self.moves
        if pod.uid in moves.replacements:
            return
        for o in pod.owners:
            if o.controller:
                m = moves.next_for(o.uid)
                if m is None:
                    return
                moves.replaced(m, pod)
                nominations = self.cache.nominations
                nominations.clear(_stand_in_uid(m))
                nominations.set(pod, m.target)
                return

    def replacement_changed(self, pod: Pod | None, uid: str) -> None:
        """A replacement was bound, became Ready, or went away."""
        m = self.moves.replacements.get(uid)
        if m is None:
            return
        if pod is None or pod.deleting:
            self._finish(m, DONE)
            return
        if pod.node_name and m.state == PLACED and not m.bound:
            m.bound = True
            if self.metrics is not None:
                self.metrics.replacement_bound.labels(m.strategy).observe(max(0.0, self.clock() - m.evicted_at))
                if pod.node_name != m.target:
                    self.metrics.bounce_backs.labels(m.strategy, _profile(m)).inc()
            if pod.node_name != m.target:
                log.warning("bounce-back: %s replaced %s on %s, not on the planned %s", pod.key, m.pod.key,
                            pod.node_name, m.target)
        if pod.node_name and _ready(pod):
            m.ready = True
            if m.answered:   # else its eviction's answer, still on its way, ends it
                self._finish(m, DONE)

    def on_job(self, obj: dict[str, Any] | None, old: dict[str, Any] | None = None) -> None:
        """The Job informer: which Jobs' pods may move (their podFailurePolicy ignores DisruptionTarget)."""
        if obj is None:
            uid = ((old or {}).get("metadata") or {}).get("uid", "")
            self.moves.jobs.pop(uid, None)
            return
        uid = (obj.get("metadata") or {}).get("uid", "")
        if uid:
            self.moves.jobs[uid] = disruption_ignored(obj)

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Plan every profile every intervalSeconds (sooner when a unit is blocked), while leading."""
        if not self.profiles:
            return
        now = self.clock()
        for name, (_, args) in self.profiles.items():
            self.due[name] = now + args.interval_seconds
        while True:
            for name in self.profiles:
                try:
                    await self.plan_profile(name)
                except asyncio.CancelledError:
                    raise
                except Exception:  # a planner bug must not stop the loop (the next interval tries again)
                    log.exception("planning consolidation for profile %s failed", name)
            # until the next profile is due (one running a plan waits for it to end: its end wakes the loop)
            due = [at for name, at in self.due.items() if name not in self.running]
            await self.clock.wait(self.wake, max(0.05, min(due) - self.clock()) if due else None)
            self.wake.clear()

    async def plan_profile(self, name: str) -> Plan | None:
        """One planning pass of a profile: defragment when a unit waits, else (when due) compact, then spread.
        Each plan is made in one go (no cycle runs meanwhile); spread's checks of which pods violate their
        constraints yield to the loop between pods."""
        if name in self.running:
            return None
        fw, args = self.profiles[name]
        now = self.clock()
        due = now >= self.due.get(name, 0.0)
        plan = self._defragment(name, fw, args, now, due)
        if plan is None and due:
            self.due[name] = now + args.interval_seconds
            if args.compact.enabled:
                plan = self._timed(COMPACT, lambda: self._planner(fw, args).compact())
            if plan is None and args.spread.enabled:
                plan = await self._spread(fw, args)
                if name in self.running:
                    return None
        if plan is not None:
            self._start(name, fw, args, plan)
        return plan

    def _planner(self, fw: "Framework", args: Any) -> Planner:
        now = self.clock()
        blocked = {o for o, until in self.cooldown.items() if until > now}
        blocked.update(o for o, n in self.in_flight_owner.items() if n > 0)
        return Planner(fw, self.cache, args, self.clock.wall(), blocked)

    def _timed(self, strategy: str, fn: Callable[[], Plan | None]) -> Plan | None:
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            if self.metrics is not None:
                self.metrics.plan_duration.labels(strategy).observe(time.perf_counter() - t0)

    def _defragment(self, name: str, fw: "Framework", args: Any, now: float, due: bool) -> Plan | None:
        units = self.units[name]
        if not args.defragment or not units:
            return None
        live: list[tuple[Unit, list[Pod]]] = []
        for key, unit in list(units.items()):
            pending = self._pending(unit)
            if not pending:
                del units[key]
                self.tried.pop(key, None)
                continue
            live.append((unit, pending))
        if not live:
            return None
        unit, pending = min(live, key=lambda up: up[0].rank)
        last = self.tried.get(unit.key)
        if last is not None and not due and now - last < args.interval_seconds:
            return None   # it found no plan lately: the next interval tries again
        plan = self._timed(DEFRAGMENT, lambda: self._planner(fw, args).defragment(unit, pending))
        if plan is None:
            self.tried[unit.key] = now
        else:
            self.tried.pop(unit.key, None)
        return plan

    async def _spread(self, fw: "Framework", args: Any) -> Plan | None:
        spent = 0.0
        t0 = time.perf_counter()

        async def pause() -> None:   # the loop free between chunks (cycles run); the pass's time counts only ours
            nonlocal spent, t0
            spent += time.perf_counter() - t0
            await asyncio.sleep(0)
            t0 = time.perf_counter()

        planner = self._planner(fw, args)
        states = list(self.cache.pods.values())   # read in chunks (a pod gone meanwhile is not lifted: not planned)
        candidates: list[Pod] = []
        for i in range(0, len(states), SCAN_CHUNK):
            candidates.extend(planner.spread_candidates(states[i:i + SCAN_CHUNK],
                                                        MAX_SPREAD_CHECKS - len(candidates)))
            if len(candidates) >= MAX_SPREAD_CHECKS:
                break
            await pause()
        violators: list[Pod] = []
        for i in range(0, len(candidates), SPREAD_CHUNK):
            violators.extend(planner.violated(candidates[i:i + SPREAD_CHUNK]))
            await pause()
        plan = planner.spread(violators) if violators else None
        spent += time.perf_counter() - t0
        if self.metrics is not None:
            self.metrics.plan_duration.labels(SPREAD).observe(spent)
        return plan

    # ------------------------------------------------------------------ executing a plan

    def _start(self, name: str, fw: "Framework", args: Any, plan: Plan) -> None:
        if args.dry_run:
            self._report_dry_run(fw, plan)
            return
        if self.metrics is not None:
            self.metrics.moves.labels(plan.strategy, "planned", name).inc(len(plan.moves))
        log.info("%s plan for profile %s: %s", plan.strategy, name,
                 "; ".join(f"{p.key} {s} -> {t}" for p, s, t in plan.moves))
        moves = []
        for pod, source, target in plan.moves:
            c = next(o for o in pod.owners if o.controller)
            m = Move(pod=pod, owner_uid=c.uid, owner=f"{c.kind} {pod.namespace}/{c.name}", source=source,
                     target=target, strategy=plan.strategy, why=plan.why, profile=name)
            self.moves.moving[pod.uid] = m
            moves.append(m)
        run = Running(name, plan, moves)
        self.running[name] = run
        if plan.unit is not None:
            self.hold(fw, plan.unit, plan)
        self.spawn(self._execute(fw, args, run), f"{plan.strategy} plan for profile {name}")

    def _pending(self, unit: Unit) -> list[Pod]:
        """The members of ``unit`` that still wait for a node."""
        return [p for p in (self.pods.get(uid) for uid in unit.uids)
                if p is not None and not p.node_name and not p.deleting and self.cache.where(p.uid) is None]

    def _report_dry_run(self, fw: "Framework", plan: Plan) -> None:
        for pod, source, target in plan.moves:
            key = (plan.strategy, pod.uid, target)
            if key in self.reported:
                continue
            self.reported.add(key)
            if self.metrics is not None:
                self.metrics.moves.labels(plan.strategy, "planned", fw.name).inc()
            if self.events is not None:
                self.events.record(pod, "Normal", REASONS[plan.strategy], "DryRun",
                                   f"dry run: {plan.strategy} would move the pod from node {source} to node "
                                   f"{target} {plan.why}", fw.name)
        if len(self.reported) > 100_000:
            self.reported.clear()

    async def _execute(self, fw: "Framework", args: Any, run: Running) -> None:
        pending = list(run.moves)
        tasks: set[asyncio.Task[None]] = set()
        tokens, filled = float(MOVE_BURST), self.clock()
        try:
            while pending or any(m.state in IN_FLIGHT for m in run.moves):
                unit = run.plan.unit
                pointless = unit is not None and (any(x.state == ABORTED for x in run.moves)
                                                  or not self._pending(unit))
                now = self.clock()
                tokens, filled = min(float(MOVE_BURST), tokens + (now - filled) * MOVES_PER_SECOND), now
                paced = False
                for m in list(pending):
                    if pointless:
                        # the unit would not get its room, or has a node already: the rest is pointless
                        pending.remove(m)
                        self._finish(m, ABORTED)
                        continue
                    if (self.in_flight_owner[m.owner_uid] >= args.max_moves_per_workload
                            or self.in_flight_node[m.source] >= args.max_moves_per_node):
                        continue
                    if tokens < 1.0:
                        paced = True   # the next one may start once a token is due
                        break
                    tokens -= 1.0
                    pending.remove(m)
                    m.state = EVICTING
                    self.in_flight_owner[m.owner_uid] += 1
                    self.in_flight_node[m.source] += 1
                    t = asyncio.ensure_future(self._move(fw, args, run, m))
                    tasks.add(t)
                    t.add_done_callback(tasks.discard)
                run.done.clear()
                await self.clock.wait(run.done, (1.0 - tokens) / MOVES_PER_SECOND if paced else 1.0)
        finally:
            for t in tasks:
                t.cancel()
            self._plan_ended(fw, args, run)

    def _plan_ended(self, fw: "Framework", args: Any, run: Running) -> None:
        if self.running.get(run.profile) is run:
            del self.running[run.profile]
        until = self.clock() + args.cooldown_seconds
        for m in run.moves:
            self.cooldown[m.owner_uid] = until
            if m.state not in (DONE, ABORTED):
                self._finish(m, ABORTED)
        plan = run.plan
        if plan.unit is not None and any(m.state == ABORTED for m in run.moves):
            self.unhold(plan.unit.key)
        if plan.emptied and self.metrics is not None:
            for node in plan.emptied:
                if not any(True for _ in self.cache.pods_on(node)):
                    self.metrics.nodes_emptied.labels(run.profile).inc()
        now = self.clock()
        for o in [o for o, until in self.cooldown.items() if until <= now]:
            del self.cooldown[o]
        self.wake.set()

    async def _move(self, fw: "Framework", args: Any, run: Running, m: Move) -> None:
        delay = FIRST_RETRY_SECONDS
        evicted = False
        try:
            while True:
                if not self._check(fw, args, run, m):
                    self._finish(m, ABORTED)
                    return
                stand_in = dataclasses.replace(replacement(m.pod), uid=_stand_in_uid(m))
                self.cache.nominations.set(stand_in, m.target)
                self.moves.expect(m, self.clock())
                try:
                    await self.client.create(f"/api/v1/namespaces/{m.pod.namespace}/pods/{m.pod.name}/eviction",
                                             {"apiVersion": "policy/v1", "kind": "Eviction",
                                              "metadata": {"name": m.pod.name, "namespace": m.pod.namespace},
                                              "deleteOptions": {"preconditions": {"uid": m.pod.uid}}},
                                             retry=NO_RETRY)
                except TooManyRequests as exc:
                    self.cache.nominations.clear(stand_in.uid)
                    self.moves.refused(m)
                    self._evicted_metric(m, "error")
                    m.tries += 1
                    if m.tries >= MAX_TRIES:
                        log.info("giving up moving %s: %s", m.pod.key, exc)
                        self._finish(m, ABORTED)
                        return
                    log.debug("moving %s: %s; again in %.1fs", m.pod.key, exc, delay)
                    await self.clock.sleep(delay)
                    delay = min(delay * 2, args.interval_seconds)
                    continue
                except (NotFound, Conflict):
                    self.cache.nominations.clear(stand_in.uid)
                    self.moves.refused(m)
                    self._finish(m, ABORTED)   # gone, or another pod of its name: nothing to move
                    return
                except APIError as exc:
                    self.cache.nominations.clear(stand_in.uid)
                    self.moves.refused(m)
                    self._evicted_metric(m, "error")
                    log.warning("evicting %s failed: %s", m.pod.key, exc)
                    self._finish(m, ABORTED)
                    return
                break
            evicted = True
            self.moves.evicted(m, self.clock())
            if m.ready:
                self._finish(m, DONE)   # its replacement was Ready before the answer came
            self._evicted_metric(m, "success")
            if self.metrics is not None:
                self.metrics.moves.labels(m.strategy, "executed", run.profile).inc()
            if self.events is not None:
                self.events.record(m.pod, "Normal", REASONS[m.strategy], "Evicting",
                                   f"moving the pod from node {m.source} to node {m.target} {m.why}", fw.name)
            self.clock.call_later(STEER_TTL_SECONDS + 1.0, self._expire, m)
        except asyncio.CancelledError:
            if not evicted:
                self.cache.nominations.clear(_stand_in_uid(m))
                self.moves.refused(m)
                self._finish(m, ABORTED)
            raise
        except Exception:  # a bug: the move ends (its limits free), the plan goes on
            log.exception("moving %s failed", m.pod.key)
            if not evicted:
                self.cache.nominations.clear(_stand_in_uid(m))
                self.moves.refused(m)
                self._finish(m, ABORTED)

    def _check(self, fw: "Framework", args: Any, run: Running, m: Move) -> bool:
        """Still worth evicting? The pod is where it was planned, and a node other than its source takes its
        replacement (the planned one, else the fullest): ``m.target`` is set to it."""
        pod = self.pods.get(m.pod.uid)
        if pod is None or pod.deleting or pod.node_name != m.source or self.cache.where(pod.uid) != m.source:
            return False
        planner = Planner(fw, self.cache, args, self.clock.wall())
        w = WhatIf(self.cache)
        try:
            if not w.lift(pod.uid):
                return False
            q = replacement(pod)
            row = self.cache.nodes.row(m.target)
            if row is not None and len(planner.feasible(q, rows=_one(row))):
                return True
            exclude = None
            if run.plan.members:
                exclude = np.zeros(self.cache.nodes.cap, dtype=bool)
                for node in run.plan.members.values():
                    r = self.cache.nodes.row(node)
                    if r is not None:
                        exclude[r] = True
            target = planner._target(w, pod, m.source, exclude)
            if not target:
                return False
            m.target = target
            return True
        finally:
            w.undo()

    def _evicted_metric(self, m: Move, result: str) -> None:
        if self.metrics is not None:
            self.metrics.pods_evicted.labels(result, m.strategy, m.pod.namespace, m.source, _profile(m)).inc()

    def _expire(self, m: Move) -> None:
        self.moves.prune(self.clock())
        if m.state in (EVICTED, PLACED):
            if m.state == EVICTED:
                log.info("no replacement came for %s within %ss", m.pod.key, STEER_TTL_SECONDS)
            self._finish(m, DONE)

    def _finish(self, m: Move, state: str) -> None:
        was = m.state
        if was in (DONE, ABORTED):
            return
        if was in IN_FLIGHT:
            self.in_flight_owner[m.owner_uid] -= 1
            self.in_flight_node[m.source] -= 1
            if self.in_flight_owner[m.owner_uid] <= 0:
                del self.in_flight_owner[m.owner_uid]
            if self.in_flight_node[m.source] <= 0:
                del self.in_flight_node[m.source]
        if was == EVICTED or was == EVICTING:
            self.cache.nominations.clear(_stand_in_uid(m))
        self.moves.end(m, state)
        if state == ABORTED and self.metrics is not None:
            self.metrics.moves.labels(m.strategy, "aborted", _profile(m)).inc()
        profile = _profile(m)
        run = self.running.get(profile)
        if run is not None:
            run.done.set()


def _stand_in_uid(m: Move) -> str:
    return f"consolidation/{m.pod.uid}"


def _profile(m: Move) -> str:
    return m.profile


def _ready(pod: Pod) -> bool:
    for c in (pod.raw.get("status") or {}).get("conditions") or ():
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def _one(row: int) -> np.ndarray:
    return np.array([row], dtype=np.int64)
