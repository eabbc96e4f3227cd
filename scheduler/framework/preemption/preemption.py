"""Preemption's evaluator: candidates, dry runs, PodDisruptionBudgets and selection (upstream's Evaluator).

What it decides, in the scheduling cycle, for a PostFilter plugin
(DefaultPreemption, plugins/default_preemption.py, is one evaluator with
its args; upstream's pkg/scheduler/framework/preemption/preemption.go):

* **Candidates**: only nodes whose Filter failure was Unschedulable; from a
  random offset, as many as ``max(minCandidateNodesPercentage% of them,
  minCandidateNodesAbsolute)``, more while none is free of PDB violations.
* **Victims per node** (SelectVictimsOnNode): remove every pod of strictly
  lower priority, run the filters (with nominated pods); if the pod still
  does not fit, the node is no candidate. Otherwise reprieve pods highest
  priority first (earlier start first among equals), PDB-violating ones
  before the others, keeping each that still fits.
* **The node** (pickOneNodeForPreemption): fewest PDB violations; tandem
  adds fewest gangs broken next; then the lowest highest-priority victim,
  the smallest sum of victim priorities (each offset by 2^31), the fewest
  victims, the latest start among the highest-priority victims.

The dry run is vectorized over the placed-pods table (``handle.pod_table``):
one pass removes every candidate's victims at once and filters all
candidate rows, then reprieve runs in rounds, the i-th most important pod of
every candidate node added back together and filtered together. That is
exact because the filters that read pods (NodeResourcesFit, NodePorts) judge
a node by its own pods only. When a plugin whose state spans nodes is in play
(InterPodAffinity, PodTopologySpread: their PreFilterExtensions), or the
pod asks for host ports, each candidate node is dry-run alone on a clone of
the cycle state, through AddPod/RemovePod, as upstream does.

Gangs: a pod of a PodGroup whose ``disruptionMode`` is PodGroup is a victim
only together with every member of its gang (a unit, reprieved as one), and
a member's priority is the PodGroup's ``priority`` when it sets one. A gang
member that fits nowhere preempts for its whole gang
(podgrouppreemption.py). The evictions are not done here: the executor
(``handle.preemption``, scheduler/executor.py) runs them off the cycle.
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.preemption.candidates import (
    OFFSET, Candidate, Candidates, Units, first_smallest, num_candidates,
)
from scheduler.framework.status import Code, Status
from scheduler.model import DISRUPTION_POD_GROUP, Pod, marked_preempted

if TYPE_CHECKING:
    from collections.abc import Callable

    from scheduler.framework.handle import Handle

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."


def _start(p: Pod) -> float:
    return p.start_time if p.start_time > 0 else math.inf


def terminating_by_preemption(p: Pod) -> bool:
    """podTerminatingByPreemption: deleting, with DisruptionTarget=True for PreemptionByScheduler."""
    return p.deleting and marked_preempted(p)



class Evaluator:
    """Finds the candidates for a pod that fits nowhere and picks one; evicts nothing. A PostFilter plugin
    is one (DefaultPreemption subclasses it with its args); one dry run at a time, in the scheduling cycle."""

    def __init__(self, handle: Handle, min_candidate_nodes_percentage: int, min_candidate_nodes_absolute: int) -> None:
        self.handle = handle
        self.min_candidate_nodes_percentage = min_candidate_nodes_percentage
        self.min_candidate_nodes_absolute = min_candidate_nodes_absolute
        self.rng = random.Random(getattr(handle, "seed", None))   # tests build some without a handle
        self.errors: list[Status] = []     # Error statuses of the current dry run's nodes
        self._memo: tuple[np.ndarray, np.ndarray] | None = None   # _gang_arrays, for one dry run
        self._totals: tuple[np.ndarray, ...] | None = None           # _gang_totals, for one dry run

    def victim_terminating(self, pod: Pod) -> bool:
        """A pod of lower priority terminates by preemption on the node ``pod`` is nominated to."""
        node = self.handle.nominations.get(pod.uid) or pod.nominated_node_name
        if not node:
            return False
        prio = self.priority_of(pod)
        return any(self.priority_of(p) < prio and terminating_by_preemption(p) for p in self.handle.pods_on(node))

    def priority_of(self, p: Pod) -> int:
        """A pod's priority for preemption: its PodGroup's when that sets one."""
        if p.gang:
            pg = self.handle.gangs.group(p.gang)
            if pg is not None and pg.priority is not None:
                return pg.priority
        return p.priority


    # ------------------------------------------------------------------ candidates

    def potential_rows(self, diagnosis: Any) -> np.ndarray:
        """Rows whose failure was Unschedulable (nodesWherePreemptionMightHelp)."""
        rejected = diagnosis.rejected_rows if diagnosis is not None else None
        if rejected is None or len(rejected) == 0:
            return np.zeros(0, dtype=np.int64)
        nodes = self.handle.nodes
        on = np.zeros(nodes.cap, dtype=bool)
        on[rejected] = True
        unresolvable = diagnosis.unresolvable_rows
        if unresolvable is not None and len(unresolvable):
            on[unresolvable] = False
        on &= nodes.valid[: nodes.cap]
        return np.flatnonzero(on)

    def find_candidates(self, state: CycleState, pod: Pod, diagnosis: Any) -> tuple[Candidates | list[Candidate], str]:
        """The candidates, or none and the FitError message saying why (upstream's wording)."""
        nodes = self.handle.nodes
        n_all = len(nodes)
        potential = self.potential_rows(diagnosis)
        if len(potential) == 0:
            return [], f"0/{n_all} nodes are available: {n_all} {NOT_HELPFUL}."
        self._memo = self._totals = None
        want = num_candidates(len(potential), self.min_candidate_nodes_percentage,
                              self.min_candidate_nodes_absolute)
        offset = self.rng.randrange(len(potential))
        order = np.roll(potential, -offset)
        reasons: dict[str, int] = {}
        cands = self.dry_run(state, pod, order, want, reasons)
        if cands:
            return cands, ""
        # upstream's absent nodes: those not dry-run (a node may have given several reasons, so count nodes)
        absent = n_all - len(potential)
        if absent > 0:
            reasons[NOT_HELPFUL] = reasons.get(NOT_HELPFUL, 0) + absent
        parts = sorted(f"{n} {r}" for r, n in reasons.items())
        return [], f"0/{n_all} nodes are available: " + ", ".join(parts) + "."

    def select(self, cands: Candidates | list[Candidate]) -> Candidate:
        """pickOneNodeForPreemption: the first candidate with the smallest key."""
        if isinstance(cands, Candidates):
            return cands.best()
        cols = {c: np.array([getattr(x, c) for x in cands]) for c in Candidates.COLUMNS if c != "row"}
        return cands[first_smallest(cols)]

    # ------------------------------------------------------------------ the dry run

    def _victim_slots(self, pod: Pod, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Slots of the placed pods on ``rows`` that ``pod`` may preempt, their rows and priorities."""
        pt = self.handle.pod_table
        n = pt.n
        on = np.zeros(self.handle.nodes.cap + 1, dtype=bool)
        on[rows] = True
        slot_rows = pt.row[:n]
        m = on[slot_rows]            # free slots have row -1: the extra last entry, always False
        prio = self._effective_at(np.arange(n))
        mine = self.priority_of(pod)
        m &= prio < mine
        if pt.gang_keys:
            # a gang evicted only whole is no victim while one of its placed members (any node) outranks the pod
            g = pt.gang[:n]
            placed = slot_rows >= 0
            strong = g[placed & (g >= 0) & (prio >= mine)]
            strong = strong[self._gang_arrays()[1][strong]]
            if len(strong):
                m &= ~np.isin(g, strong)
        slots = np.flatnonzero(m)
        return slots, slot_rows[slots], prio[slots]

    def _effective_at(self, slots: np.ndarray) -> np.ndarray:
        """Priority of each of ``slots``, with PodGroup priorities applied where set."""
        pt = self.handle.pod_table
        prio = pt.prio[slots]
        if pt.gang_keys:
            g = pt.gang[slots]
            sel = np.flatnonzero(g >= 0)
            if len(sel):
                over = self._gang_arrays()[0][g[sel]]
                has = over != np.iinfo(np.int64).min
                prio[sel[has]] = over[has]
        return prio

    def _gang_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """Per gang id: its PodGroup's priority (int64 min: unset) and whether it is evicted whole; built once
        per dry run (``_memo``), as PodGroups do not change within a cycle."""
        pt = self.handle.pod_table
        if self._memo is not None and len(self._memo[0]) == len(pt.gang_keys):
            return self._memo
        groups = self.handle.gangs.groups
        gp = np.full(len(pt.gang_keys), np.iinfo(np.int64).min, dtype=np.int64)
        whole = np.zeros(len(pt.gang_keys), dtype=bool)
        for key, gid in pt.gang_ids.items():
            pg = groups.get(key)
            if pg is None:
                continue
            if pg.priority is not None:
                gp[gid] = pg.priority
            if pg.disruption_mode == DISRUPTION_POD_GROUP:
                whole[gid] = True
        self._memo = (gp, whole)
        return gp, whole

    def dry_run(self, state: CycleState, pod: Pod, order: np.ndarray, want: int,
                reasons: dict[str, int]) -> Candidates:
        """DryRunPreemption over ``order`` (potential rows from the random offset): candidates, and per failing
        node its reason counted into ``reasons``."""
        fw = self.handle.framework
        slots, vrows, _ = self._victim_slots(pod, order)
        cap = self.handle.nodes.cap
        has = np.bincount(vrows, minlength=cap) > 0 if len(vrows) else np.zeros(cap, dtype=bool)
        with_victims = order[has[order]]
        none = len(order) - len(with_victims)
        if none:
            reasons[NO_VICTIMS] = reasons.get(NO_VICTIMS, 0) + none
        if len(with_victims) == 0:
            return Candidates(self.handle.nodes.names)
        if fw.extended(state) or pod.host_ports:
            return self._dry_run_each(state, pod, with_victims, want, reasons)
        return self._dry_run_batched(state, pod, with_victims, slots, vrows, want, reasons)

    def _filter(self, state: CycleState, pod: Pod, rows: np.ndarray, reasons: dict[str, int] | None) -> np.ndarray:
        """The rows of ``rows`` where ``pod`` passes every filter now (with nominated pods)."""
        from scheduler.framework.runtime import Diagnosis   # the framework's own record; no plugin import cycle
        fw = self.handle.framework
        diag = Diagnosis()
        passed, st = fw.run_filter_with_nominated(state, pod, np.sort(rows), diag)
        if not st.is_success():
            raise DryRunError(st)
        if reasons is not None:
            for r, n in diag.reasons.items():
                reasons[r] = reasons.get(r, 0) + n
        return passed

    def _dry_run_batched(self, state: CycleState, pod: Pod, order: np.ndarray, slots: np.ndarray,
                         vrows: np.ndarray, want: int, reasons: dict[str, int]) -> Candidates:
        nodes = self.handle.nodes
        pt = self.handle.pod_table
        req = pt.columns()
        width = nodes.requested.shape[1]
        below = np.zeros((nodes.cap, width), dtype=np.int64)
        vreq = req[slots, :width]
        for c in range(width):
            if vreq[:, c].any():
                below[:, c] = np.bincount(vrows, weights=vreq[:, c], minlength=nodes.cap).astype(np.int64)
        saved = nodes.requested
        nodes.requested = saved - below
        try:
            try:
                fits = self._filter(state, pod, order, reasons)
            except DryRunError as e:
                if e.status.code == Code.ERROR:   # as the per-node path: an Error, not one more FitError reason
                    self.errors.append(e.status)
                else:
                    reasons[e.status.message()] = reasons.get(e.status.message(), 0) + len(order)
                return []
            fits_in_order = order[np.isin(order, fits)]
            out = Candidates(nodes.names)
            start = 0
            while start < len(fits_in_order):
                batch = fits_in_order[start: start + max(want - len(out), 1)]
                start += len(batch)
                try:
                    found = self._reprieve_batched(state, pod, batch, slots, vrows)
                except DryRunError as e:
                    self.errors.append(e.status)   # the batch's nodes end with it; candidates found so far stand
                    break
                if found is not None:
                    out.keep(*found, want)
                if out.kept[0] > 0 and len(out) >= want:
                    break
            return out
        finally:
            nodes.requested = saved

    def _units(self, pod: Pod, rows: np.ndarray, slots: np.ndarray, vrows: np.ndarray) -> Units:
        """The potential victims on ``rows`` as units in reprieve order (see :class:`Units`), without a Python
        loop over them unless PDBs or whole gangs ask for one."""
        pt = self.handle.pod_table
        req_all = pt.columns()
        sel = np.isin(vrows, rows)
        s_slots, s_rows = slots[sel], vrows[sel]
        if len(s_slots) == 0:
            z = np.zeros(0, dtype=np.int64)
            return Units(z, z, np.zeros((0, req_all.shape[1]), dtype=np.int64), z, np.zeros(1, dtype=np.int64),
                          z, z, z, np.zeros(0))
        eff = self._effective_at(s_slots)
        key = -1 - s_slots                 # a unit per pod, or per (node, whole gang)
        if pt.gang_keys:
            g = pt.gang[s_slots]
            gw = g >= 0
            gw[gw] = self._gang_arrays()[1][g[gw]]
            key = np.where(gw, g, key)
        order = np.lexsort((key, s_rows))  # stable: a unit's members keep ascending slots
        s_slots, s_rows, key, eff = s_slots[order], s_rows[order], key[order], eff[order]
        n = len(s_slots)
        brk = np.ones(n, dtype=bool)
        brk[1:] = (s_rows[1:] != s_rows[:-1]) | (key[1:] != key[:-1])
        first = np.flatnonzero(brk)
        ptr = np.append(first, n)
        u_row = s_rows[first]
        u_prio = np.maximum.reduceat(eff, first)        # a whole gang is as important as its most important member
        u_start = np.minimum.reduceat(pt.start[s_slots], first)
        u_req = np.add.reduceat(req_all[s_slots], first, axis=0)
        u_gang = np.where(key[first] >= 0, key[first], -1)
        u_first = s_slots[first]                          # ties keep slot order
        importance = np.lexsort((u_first, u_start, -u_prio, u_row))
        viol = self._pdb_violations(u_row, s_slots, ptr, u_gang, importance)
        ranked = np.lexsort((u_first, u_start, -u_prio, -(viol > 0).astype(np.int64), u_row))
        r_sorted = u_row[ranked]
        rank = np.empty(len(u_row), dtype=np.int64)
        rank[ranked] = np.arange(len(u_row)) - np.searchsorted(r_sorted, r_sorted, side="left")
        return Units(u_row, rank, u_req, s_slots, ptr, u_gang, viol, u_prio, u_start)

    def _pdb_violations(self, u_row: np.ndarray, slots: np.ndarray, ptr: np.ndarray, u_gang: np.ndarray,
                        importance: np.ndarray) -> np.ndarray:
        """filterPodsWithPDBViolation per row: walking a row's units most important first, each pod covered by a
        PDB takes one of its allowed disruptions; a pod is violating once one of its PDBs has none left.
        Per unit, the number of violating pods (a whole gang's members on other nodes count too)."""
        out = np.zeros(len(u_row), dtype=np.int64)
        pdbs = list(self.handle.pdbs.values()) if self.handle.pdbs else []
        if not pdbs:
            return out
        handle = self.handle
        pt = handle.pod_table
        pods = handle.placed
        rows = u_row.tolist()
        p_row: list[int] = []              # one entry per (pod, PDB covering it), in walking order
        p_pdb: list[int] = []
        p_pod: list[int] = []
        pod_unit: list[int] = []
        for i in importance.tolist():
            g = int(u_gang[i])
            uids = (list(self.handle.gangs.placed_members(pt.gang_keys[g])) if g >= 0
                    else [pt.uids[s] for s in slots[ptr[i]: ptr[i + 1]].tolist()])
            for uid in uids:
                st = pods.get(uid)
                if st is None or not st.pod.labels:
                    continue               # upstream: a pod with no labels matches no PDB
                p = st.pod
                k = len(pod_unit)
                for j, b in enumerate(pdbs):
                    # upstream: a nil or empty selector matches nothing here (the disruption controller reads {}
                    # as all); a pod already being disrupted is counted in the PDB's status
                    if (b.namespace != p.namespace or b.selector.empty or p.name in b.disrupted_pods
                            or not b.selector.matches(p.labels)):
                        continue
                    p_row.append(rows[i])
                    p_pdb.append(j)
                    p_pod.append(k)
                if len(p_pod) and p_pod[-1] == k:
                    pod_unit.append(i)
        if not p_row:
            return out
        allowed = np.array([b.disruptions_allowed for b in pdbs], dtype=np.int64)
        pdb = np.array(p_pdb, dtype=np.int64)
        grp = np.array(p_row, dtype=np.int64) * len(pdbs) + pdb
        o = np.argsort(grp, kind="stable")
        gs = grp[o]
        taken = np.arange(len(gs)) - np.searchsorted(gs, gs, side="left")   # disruptions taken before this one
        over = np.zeros(len(pod_unit), dtype=bool)
        over[np.array(p_pod, dtype=np.int64)[o][taken >= allowed[pdb[o]]]] = True
        np.add.at(out, np.array(pod_unit, dtype=np.int64)[over], 1)
        return out

    def _reprieve_batched(self, state: CycleState, pod: Pod, batch: np.ndarray, slots: np.ndarray,
                          vrows: np.ndarray) -> tuple[dict[str, np.ndarray], Callable[[int], list[Pod]]] | None:
        nodes = self.handle.nodes
        u = self._units(pod, batch, slots, vrows)
        width = nodes.requested.shape[1]
        victim = np.zeros(len(u.row), dtype=bool)
        rounds = int(u.rank.max()) + 1 if len(u.rank) else 0
        for j in range(rounds):
            idx = np.flatnonzero(u.rank == j)
            rows = u.row[idx]
            nodes.requested[rows] += u.req[idx, :width]
            passed = self._filter(state, pod, rows, None)
            failed = ~np.isin(rows, passed)
            if failed.any():
                back = idx[failed]
                nodes.requested[u.row[back]] -= u.req[back, :width]
                victim[back] = True
        # put every reprieved unit back out: the caller's table has all victims removed
        reprieved = np.flatnonzero(~victim)
        if len(reprieved):
            np.subtract.at(nodes.requested, u.row[reprieved], u.req[reprieved, :width])
        return self._candidates(batch, u, victim)

    def _candidates(self, batch: np.ndarray, u: Units,
                    victim: np.ndarray) -> tuple[dict[str, np.ndarray], Callable[[int], list[Pod]]] | None:
        """A candidate per row of ``batch`` with victims, as columns of per-row sums over its victim units, and
        how to list a row's victims (done only for the candidate that is read)."""
        vi = np.flatnonzero(victim)
        if len(vi) == 0:
            return None
        pt = self.handle.pod_table
        r = u.row[vi]
        count = (u.ptr[vi + 1] - u.ptr[vi]).astype(np.int64)
        high_v = u.prio[vi].copy()
        total_v = high_v + OFFSET
        start_v = u.start[vi].copy()
        lost = np.where(u.gang[vi] >= 0, u.gang[vi], pt.gang[u.slots[u.ptr[vi]]])   # the gang losing a member
        whole = np.flatnonzero(u.gang[vi] >= 0)
        if len(whole):
            # a whole gang goes everywhere: its members on other nodes are victims of this candidate too
            g_count, g_total, g_high, g_start = self._gang_totals()
            g = u.gang[vi[whole]]
            count[whole], total_v[whole], high_v[whole], start_v[whole] = g_count[g], g_total[g], g_high[g], g_start[g]
        cap = max(int(batch.max()), int(r.max())) + 1
        viol = np.bincount(r, weights=u.violating[vi], minlength=cap).astype(np.int64)
        nvic = np.bincount(r, weights=count, minlength=cap).astype(np.int64)
        total = np.zeros(cap, dtype=np.int64)
        np.add.at(total, r, total_v)
        high = np.full(cap, np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(high, r, high_v)
        at_high = high_v == high[r]
        start = np.full(cap, math.inf)
        np.minimum.at(start, r[at_high], start_v[at_high])
        has = lost >= 0
        pairs = np.unique(r[has] * (len(pt.gang_keys) + 1) + lost[has])
        gangs = np.bincount(pairs // (len(pt.gang_keys) + 1), minlength=cap)
        by_row = np.argsort(r, kind="stable")
        r_sorted = r[by_row]
        rows = batch[nvic[batch] > 0]   # upstream: "expected at least one victim pod on node" (cannot be 0)

        def victims(row: int) -> list[Pod]:
            lo, hi = np.searchsorted(r_sorted, [row, row + 1])
            return self._victims(u, vi[by_row[lo:hi]])

        return {"row": rows, "pdb_violations": viol[rows], "gangs": gangs[rows], "high": high[rows],
                "total": total[rows], "nvictims": nvic[rows], "start": start[rows]}, victims

    def _gang_totals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per gang id, over its placed members (every node): how many, the sum of (priority + 2^31), the
        highest priority, and the earliest start among the members of that priority. Once per dry run."""
        pt = self.handle.pod_table
        if self._totals is not None and len(self._totals[0]) == len(pt.gang_keys):
            return self._totals
        n, ng = pt.n, len(pt.gang_keys)
        placed = np.flatnonzero((pt.row[:n] >= 0) & (pt.gang[:n] >= 0))
        g = pt.gang[placed]
        prio = self._effective_at(placed)
        count = np.bincount(g, minlength=ng).astype(np.int64)
        total = np.zeros(ng, dtype=np.int64)
        np.add.at(total, g, prio + OFFSET)
        high = np.full(ng, np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(high, g, prio)
        top = prio == high[g]
        start = np.full(ng, math.inf)
        np.minimum.at(start, g[top], pt.start[placed][top])
        self._totals = (count, total, high, start)
        return self._totals

    def _gang_victims(self, g: int) -> list[Pod]:
        handle = self.handle
        key = self.handle.pod_table.gang_keys[g]
        return [st.pod for st in (handle.placed.get(uid) for uid in list(self.handle.gangs.placed_members(key)))
                if st is not None]

    def _victims(self, u: Units, units: np.ndarray) -> list[Pod]:
        """The pods of ``units`` (whole gangs: every placed member), most important first."""
        handle = self.handle
        pt = handle.pod_table
        pods: list[Pod] = []
        seen: set[str] = set()
        for i in units[np.argsort(u.slots[u.ptr[units]], kind="stable")].tolist():   # ties keep slot order
            if u.gang[i] >= 0:
                members = self._gang_victims(int(u.gang[i]))
            else:
                members = [handle.placed[uid].pod for uid in (pt.uids[m] for m in u.members(i)) if uid is not None]
            for p in members:
                if p.uid not in seen:
                    seen.add(p.uid)
                    pods.append(p)
        pods.sort(key=lambda p: (-self.priority_of(p), _start(p)))
        return pods

    def _dry_run_each(self, state: CycleState, pod: Pod, order: np.ndarray, want: int,
                      reasons: dict[str, int]) -> Candidates:
        """One node at a time on a clone of the cycle state, through AddPod/RemovePod (SelectVictimsOnNode)."""
        fw = self.handle.framework
        nodes = self.handle.nodes
        handle = self.handle
        pt = handle.pod_table
        slots, vrows, _ = self._victim_slots(pod, order)
        out = Candidates(nodes.names)
        for row in order.tolist():
            u = self._units(pod, np.array([row], dtype=np.int64), slots, vrows)
            s = state.clone()
            off: set[int] = set()          # units whose members are off the node table now (restored at the end)

            def take(i: int) -> None:
                off.add(i)
                for m in u.members(i):
                    p = handle.placed[pt.uids[m]].pod
                    nodes.charge(row, p, -1)
                    ok(fw.run_remove_pod(s, pod, p, row))

            def give(i: int) -> None:
                off.discard(i)
                for m in u.members(i):
                    p = handle.placed[pt.uids[m]].pod
                    nodes.charge(row, p, 1)
                    ok(fw.run_add_pod(s, pod, p, row))

            victim = np.zeros(len(u.row), dtype=bool)
            one = np.array([row], dtype=np.int64)
            try:
                for i in range(len(u.row)):
                    take(i)
                # a whole gang's members elsewhere leave their domains too (their nodes' rows are not filtered)
                for r, p in self._elsewhere(u, row):
                    ok(fw.run_remove_pod(s, pod, p, r))
                fits = len(self._filter(s, pod, one, reasons)) > 0
                if fits:
                    for i in np.argsort(u.rank, kind="stable").tolist():
                        give(i)
                        if len(self._filter(s, pod, one, None)):
                            continue
                        take(i)
                        victim[i] = True
            except DryRunError as e:
                if e.status.code == Code.ERROR:
                    self.errors.append(e.status)
                else:
                    reasons[e.status.message()] = reasons.get(e.status.message(), 0) + 1
                fits = False
            finally:
                for i in off:
                    for m in u.members(i):
                        nodes.charge(row, handle.placed[pt.uids[m]].pod, 1)
            if not fits:
                continue
            found = self._candidates(np.array([row], dtype=np.int64), u, victim)
            if found is not None:
                out.keep(*found, want)
            if out.kept[0] > 0 and len(out) >= want:
                break
        return out

    def _elsewhere(self, u: Units, row: int) -> list[tuple[int, Pod]]:
        handle = self.handle
        pt = handle.pod_table
        out = []
        for g in set(u.gang[u.gang >= 0].tolist()):
            for uid, node in self.handle.gangs.placed_members(pt.gang_keys[g]).items():
                r = self.handle.nodes.row(node)
                st = handle.placed.get(uid)
                if r is not None and r != row and st is not None:
                    out.append((r, st.pod))
        return out




def ok(st: Status) -> None:
    """An AddPod/RemovePod failure ends the node's dry run (upstream returns its status)."""
    if not st.is_success():
        raise DryRunError(st)


class DryRunError(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status

