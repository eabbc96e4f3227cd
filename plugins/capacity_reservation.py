"""CapacityReservation: capacity held for the head of the line, and backfill around it (tandem's own plugin).

kube-scheduler places what fits now, so a gang that needs whole nodes, or one big pod, can wait forever
behind a stream of small pods of the same priority: each bit of freed room goes to the next small pod. This
plugin holds room for the profile's head-of-line unit instead, as the Coscheduling design asks ("the
resource cannot be allocated to other job") and with Slurm's deadline backfill:

* **Who holds**: after an attempt leaves a unit (a gang, or a pod alone) without a node and preemption did
  not help (no victims, ``preemptionPolicy: Never``, or no preemption in the profile), the scheduler asks
  :meth:`CapacityReservation.hold`. Up to ``maxHeldUnits`` units of a profile hold, the highest priority
  first, then the oldest (a gang's PodGroup's creationTimestamp, a pod's own; ties by when tandem first saw
  it); a unit that ranks ahead of a holder takes its place.
* **Eligible**: only capacity blocks it: with the capacity filters left out (NodeResourcesFit, NodePorts,
  NodeVolumeLimits, DynamicResources, and this one), every member passes PreFilter and some nodes' Filter,
  and on some of those it would fit once pods running there end. A pod too big for any node, or one a
  selector, a taint or a missing claim blocks, holds nothing and the next unit may hold.
* **What is held** (:func:`plan`): for each member in turn (largest first), the node where it can start
  soonest: the pods there that must end, earliest-ending first, decide; the node whose last of them ends
  first wins, then the one with fewest. A topology gang plans in each domain of its key and keeps the best.
  The plan is checked member by member with every Filter, the awaited pods lifted off their nodes.
* **Filter**: a pod of equal or lower priority, not of the unit, may go on a held node only if the unit
  still fits there once the pods it waits for have ended (base + need + the pod within allocatable:
  state/reservations.py), unless it *backfills*:
  its activeDeadlineSeconds from now ends before the unit's expected start (the latest end of those pods,
  unknown while one has no deadline). Turned away, it reads ``N node(s) had capacity reserved for pod group
  ns/big`` in upstream's FitError.
* **Ends**: when the unit binds, is deleted or changes, when its nodes go, or after ``maxHoldSeconds``
  (then it goes to the back of its priority). A higher-priority pod is never held back; if it takes the
  room, or a backfilled pod would delay the unit, the unit plans again at its next attempt.

What users see (nominatedNodeName, the ``Reserved`` event, metrics) is the scheduler's
(scheduler/holding.py); this module decides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework import (
    ActionType, ClusterEvent, ClusterEventWithHint, Code, ConfigError, CycleState, FilterResult, Rejection, Resource,
    Status, register,
)
from scheduler.framework.nodetable import R_PODS
from scheduler.model import Pod

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

NAME = "CapacityReservation"

# the filters whose failures are capacity: pods that end free what they count (the scheduler's list too)
CAPACITY_FILTERS = frozenset({"NodeResourcesFit", "NodePorts", "NodeVolumeLimits", "DynamicResources", NAME})

# the domains of a topology gang's key one plan compares
MAX_PLAN_DOMAINS = 32

# the nodes where a pod's host port is in use whose pods one plan walks
MAX_PORT_ROWS = 512


_OK = Status()
_SKIP = Status(Code.SKIP)


def reason_for(what: str) -> str:
    return f"node(s) had capacity reserved for {what}"


@dataclass(frozen=True, slots=True)
class CapacityReservationArgs:
    max_hold_seconds: float = 900.0
    max_held_units: int = 1

    def validate(self, path: str) -> None:
        errs = []
        if not self.max_hold_seconds > 0:
            errs.append(f"{path}.maxHoldSeconds: must be > 0, got {self.max_hold_seconds}")
        if self.max_held_units < 0:
            errs.append(f"{path}.maxHeldUnits: must be >= 0, got {self.max_held_units}")
        if errs:
            raise ConfigError("; ".join(errs))


@dataclass(slots=True)
class Plan:
    """Where each member goes and what it waits for: (uid -> node), node -> [(awaited pod uid, end)]."""

    nodes: dict[str, str]
    awaited: dict[str, list[tuple[str, float]]]


def pod_vector(pod: Pod, nodes: "NodeTable") -> np.ndarray:
    vec = np.zeros(len(nodes.resources), dtype=np.int64)
    index = nodes.resource_index
    for r, v in pod.requests.items():
        col = index.get(r)
        if col is None:
            return None   # a resource no node has: it fits nowhere, however long it waits
        vec[col] = v
    vec[R_PODS] = 1
    return vec


@register
class CapacityReservation:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"EnqueueExtensions", "PreFilter", "Filter"})
    Args = CapacityReservationArgs

    def __init__(self, args: CapacityReservationArgs | None, handle: Any) -> None:
        self.args = args or CapacityReservationArgs()
        self.handle = handle

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # held room frees when a pod on a held node goes, or when the hold ends (the scheduler requeues the
        # pods it turned away then)
        return [
            ClusterEventWithHint(ClusterEvent(Resource.ASSIGNED_POD, ActionType.DELETE)),
            ClusterEventWithHint(ClusterEvent(Resource.NODE, ActionType.ADD)),
        ]

    # ------------------------------------------------------------------ PreFilter, Filter

    def pre_filter(self, state: CycleState, pod: Pod, nodes: "NodeTable") -> tuple[None, Status]:
        """Skip (no Filter call) while nothing is held, or when every hold exempts the pod."""
        held = self.handle.nominations.held
        if not held or all(self.exempt(r, pod) for r in held.by_key.values()):
            return None, _SKIP
        return None, _OK

    def exempt(self, r: Any, pod: Pod) -> bool:
        """Is ``pod`` free of reservation ``r``'s charge: a member, a higher priority, or a backfill?"""
        if pod.uid in r.members or (pod.gang and pod.gang == r.key) or pod.priority > r.priority:
            return True
        if r.key in self.handle.nominations.held.ignored:
            return True   # a plan that replaces or displaces it is being checked
        return r.backfills(pod, self.handle.clock.wall())

    def filter(self, state: CycleState, pod: Pod, nodes: "NodeTable", rows: np.ndarray) -> FilterResult:
        held = self.handle.nominations.held
        k = len(rows)
        if not held:
            return FilterResult.all_pass(k)
        passed = np.ones(k, dtype=bool)
        rejections: list[Rejection] = []
        vec = None
        for r in list(held.by_key.values()):
            if self.exempt(r, pod):
                continue
            t = held.table(r, nodes)
            if not len(t.rows):
                continue
            at = np.searchsorted(rows, t.rows)
            at[at >= k] = 0
            hit = rows[at] == t.rows if k else np.zeros(0, dtype=bool)
            if not hit.any():
                continue
            if vec is None:
                vec = pod_vector(pod, nodes)
                if vec is None:
                    return FilterResult.all_pass(k)   # NodeResourcesFit refuses it everywhere, in its words
            width = len(vec)
            sel, idx = t.rows[hit], at[hit]
            used = t.charge[hit, :width] + vec   # in use once the awaited pods end, and this pod
            bad = (used > nodes.alloc[sel, :width]).any(axis=1)
            if pod.host_ports and r.ports:
                # a member waits for a host port there: the pod may not take it either
                for j, row in enumerate(sel):
                    want = r.ports.get(nodes.names[int(row)])
                    if want is not None and any(_ports_clash(pod, m) for m in want):
                        bad[j] = True
            if not bad.any():
                continue
            mask = np.zeros(k, dtype=bool)
            mask[idx[bad]] = True
            passed &= ~mask
            rejections.append(Rejection(reason_for(r.what), mask))
            r.turned_away.add(pod.uid)
            if not r.shown:
                held.to_show.append(r)
        return FilterResult(passed, rejections)

    # ------------------------------------------------------------------ planning (the scheduler's hold step)

    def plan(self, fw: Any, pods: list[Pod], domain_key: str = "", skip: frozenset[str] = frozenset()) -> Plan | None:
        """Where the unit ``pods`` (largest first) can start soonest, or None when it is not eligible.

        ``domain_key``: a topology gang's key (every member in one domain of it). ``skip``: the reservations
        (by unit key) to plan as if they were not there (the one this plan replaces or displaces).
        """
        handle = self.handle
        nodes = handle.nodes
        held = handle.nominations.held
        other_rows = np.zeros(nodes.cap, dtype=bool)
        for r in held.by_key.values():
            if r.key not in skip:
                for node in r.nodes:
                    row = nodes.row(node)
                    if row is not None:
                        other_rows[row] = True
        members: list[tuple[Pod, CycleState, np.ndarray, np.ndarray]] = []
        from scheduler.framework.runtime import Diagnosis   # the framework's own record (no import cycle)
        for pod in pods:
            vec = pod_vector(pod, nodes)
            if vec is None:
                return None
            state = CycleState()
            rows, st, _ = fw.run_pre_filter(state, pod)
            if not st.is_success():
                return None   # PreFilter: the same verdict on every node, which no pod's end changes
            skipped = set(state.skip_filter)
            state.skip_filter.update(CAPACITY_FILTERS)
            rows, st = fw.run_filter_with_nominated(state, pod, rows, Diagnosis())
            state.skip_filter.intersection_update(skipped)
            if not st.is_success():
                return None
            rows = rows[~other_rows[rows]]
            if not len(rows):
                return None
            fits_empty = (nodes.alloc[rows, : len(vec)] >= vec).all(axis=1)
            rows = rows[fits_empty]
            if not len(rows):
                return None   # too big for every node it may use, even empty
            members.append((pod, state, rows, vec))
        saved, held.ignored = held.ignored, skip
        try:
            if domain_key:
                return self._plan_domains(fw, members, domain_key)
            return self._plan_in(fw, members, None)
        finally:
            held.ignored = saved

    def _plan_domains(self, fw: Any, members: list, domain_key: str) -> Plan | None:
        nodes = self.handle.nodes
        ids = nodes.label(domain_key)
        if ids is None:
            return None
        common = members[0][2]
        for _, _, rows, _ in members[1:]:
            common = np.intersect1d(common, rows)
        domains = np.unique(ids[common])
        domains = domains[domains > 0][:MAX_PLAN_DOMAINS]
        best: tuple[tuple, Plan] | None = None
        for d in domains:
            inside = ids == d
            found = self._plan_in(fw, members, inside)
            if found is None:
                continue
            score = _score(found)
            if best is None or score < best[0]:
                best = (score, found)
        return None if best is None else best[1]

    def _plan_in(self, fw: Any, members: list, inside: np.ndarray | None) -> Plan | None:
        """The greedy plan with array work (module docstring), then its check with every Filter."""
        handle = self.handle
        nodes, pt = handle.nodes, handle.pod_table
        width = len(nodes.resources)
        now = handle.clock.wall()
        allowed = np.zeros(nodes.cap + 1, dtype=bool)
        for _, _, rows, _ in members:
            allowed[rows[inside[rows]] if inside is not None else rows] = True
        n = pt.n
        slot_rows = pt.row[:n]
        slots = np.flatnonzero(allowed[slot_rows])
        srow = slot_rows[slots]
        start = pt.start[slots]
        ends = np.where(np.isfinite(start), start, now) + pt.deadline[slots]
        ends[pt.deleting[slots]] = now
        order = np.lexsort((ends, srow))
        slots, srow, ends = slots[order], srow[order], ends[order]
        req = pt.columns()[slots, :width]
        csum = np.cumsum(req, axis=0)
        first = np.searchsorted(srow, srow, side="left")   # each slot's row's first slot
        before = np.where((first > 0)[:, None], csum[np.maximum(first - 1, 0)], 0)
        within = csum - before                             # cumulative requests within each row, earliest end first
        pos = np.arange(len(slots)) - first                # a slot's position in its row
        extra = np.zeros((nodes.cap, width), dtype=np.int64)   # room already promised on each row
        promised = handle.nominations.plan(members[0][0], nodes)   # nominated pods of equal or higher priority
        if promised is not None:
            cols = min(width, promised.delta.shape[1])
            extra[promised.rows, :cols] += promised.delta[:, :cols]
        taken = np.zeros(nodes.cap, dtype=np.int64)        # awaited pods per row so far
        plan = Plan({}, {})
        for pod, _, rows, vec in members:
            rows = rows[inside[rows]] if inside is not None else rows
            if not len(rows):
                return None
            deficit = np.maximum(nodes.requested[rows, :width] + extra[rows] + vec - nodes.alloc[rows, :width], 0)
            need = np.zeros((nodes.cap, width), dtype=np.int64)
            need[rows] = deficit
            covered = (within >= need[srow]).all(axis=1)
            # rows with no deficit start now; the others at the first slot that covers it
            count = np.full(nodes.cap, -1, dtype=np.int64)
            end = np.full(nodes.cap, np.inf)
            free_now = ~deficit.any(axis=1)
            count[rows[free_now]] = 0
            end[rows[free_now]] = -np.inf
            hit = np.flatnonzero(covered)
            if len(hit):
                hrows = srow[hit]
                firsts = np.unique(hrows, return_index=True)
                r_ids, at = firsts[0], hit[firsts[1]]
                unset = count[r_ids] < 0
                count[r_ids[unset]] = pos[at[unset]] + 1
                end[r_ids[unset]] = ends[at[unset]]
            if pod.host_ports:
                self._wait_for_ports(pod, rows, slots, srow, ends, pos, count, end)
            count[rows] = np.maximum(count[rows], np.where(count[rows] >= 0, taken[rows], -1))
            ok = rows[count[rows] >= 0]
            if not len(ok):
                return None   # no node frees enough, whatever ends
            best = ok[np.lexsort((count[ok], end[ok]))[0]]
            row = int(best)
            extra[row] += vec
            taken[row] = max(taken[row], int(count[row]))
            plan.nodes[pod.uid] = nodes.names[row]
        for row in np.flatnonzero(taken):
            sel = np.flatnonzero(srow == row)[: taken[row]]
            plan.awaited[nodes.names[int(row)]] = [(pt.uids[int(slots[i])], float(ends[i])) for i in sel]
        if not plan.awaited:
            # it fits now as far as running pods go: what blocked it is no pod's end (room promised to a
            # nominated pod, say), so holding would only keep it and others waiting for nothing
            return None
        return plan if self._holds(fw, members, plan) else None

    def _wait_for_ports(self, pod: Pod, rows: np.ndarray, slots: np.ndarray, srow: np.ndarray, ends: np.ndarray,
                        pos: np.ndarray, count: np.ndarray, end: np.ndarray) -> None:
        """A pod with host ports also waits for the pods that use them on each node: every pod up to the last
        of those (in end order) counts. Only the nodes where a wanted port is in use are walked, at most
        :data:`MAX_PORT_ROWS` of them (the rest are left out of the plan)."""
        handle = self.handle
        nodes, pt = handle.nodes, handle.pod_table
        busy = np.zeros(nodes.cap, dtype=bool)
        for hp in pod.host_ports:
            col = nodes.port_use(hp.protocol, hp.port)
            if col is not None:
                busy[: len(col)] |= col[: nodes.cap] > 0
        clash_rows = rows[busy[rows]]
        if not len(clash_rows):
            return
        count[clash_rows[MAX_PORT_ROWS:]] = -1
        at = np.full(pt.cap, -1, dtype=np.int64)
        at[slots] = np.arange(len(slots))
        for row in clash_rows[:MAX_PORT_ROWS]:
            if count[row] < 0:
                continue
            last = -1
            for other in handle.pods_on(nodes.names[int(row)]):
                if other.host_ports and _ports_clash(pod, other):
                    slot = pt.slot.get(other.uid)
                    if slot is not None and at[slot] >= 0:
                        last = max(last, int(at[slot]))
            if last >= 0:
                count[row] = max(int(count[row]), int(pos[last]) + 1)
                end[row] = max(float(end[row]), float(ends[last]))

    def _holds(self, fw: Any, members: list, plan: Plan) -> bool:
        """The plan checked with every Filter of every member: the awaited pods lifted off their nodes, the
        members assumed in turn. Nothing changes for good (the cache is put back)."""
        from scheduler.framework.runtime import Diagnosis
        handle = self.handle
        nodes = handle.nodes
        lifted = []
        assumed = []
        held = handle.nominations.held
        paused, held.paused = held.paused, True
        try:
            for on in plan.awaited.values():
                for uid, _ in on:
                    st = handle.lift(uid)
                    if st is not None:
                        lifted.append(st)
            for pod, state, _, _ in members:
                node = plan.nodes[pod.uid]
                row = nodes.row(node)
                passed, st = fw.run_filter_with_nominated(state, pod, np.array([row], dtype=np.int64), Diagnosis())
                if not st.is_success() or not len(passed):
                    return False
                handle.assume(pod, node)
                assumed.append(pod)
            return True
        finally:
            for pod in reversed(assumed):
                handle.forget(pod)
            for st in reversed(lifted):
                handle.restore(st)
            held.paused = paused


def _ports_clash(pod: Pod, other: Pod) -> bool:
    """HostPortInfo.CheckConflict between two pods' host ports: same protocol and port, and the same IP or
    0.0.0.0 on either side."""
    for a in pod.host_ports:
        for b in other.host_ports:
            if a.protocol == b.protocol and a.port == b.port and (a.ip == b.ip or "0.0.0.0" in (a.ip, b.ip)):
                return True
    return False


def _score(plan: Plan) -> tuple:
    """A plan's start (its awaited pods' latest end), then how many it waits for."""
    latest, count = -math.inf, 0
    for on in plan.awaited.values():
        for _, end in on:
            latest = max(latest, end)
            count += 1
    return latest, count
