"""DefaultPreemption: upstream's PostFilter that evicts lower-priority pods for a pod that fits nowhere.

What it decides, in the scheduling cycle (upstream's preemption.Evaluator):

* **Eligibility** (PodEligibleToPreemptOthers): never with ``preemptionPolicy:
  Never``; not again while a pod of lower priority terminates by preemption
  on the pod's nominated node (unless that node became unresolvable).
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

The dry run is vectorized over the placed-pods table (``cache.pod_table``):
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
member that fits nowhere preempts for every missing member of its gang at
once, or for none (:meth:`DefaultPreemption.preempt_for_gang`, below); the
executor (``preempt_group`` in scheduler/preemption.py) evicts for the whole
plan, and the group cycle (scheduler/schedule_one.py) only holds the members
it has not tried yet while that runs.

The evictions are not done here: ``handle.preemption`` (scheduler/preemption.py)
runs them off the cycle; until that ends, PreEnqueue holds the preemptor.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler.framework import Code, ConfigError, CycleState, Status, register
from scheduler.framework.interface import PostFilterResult
from scheduler.model import DISRUPTION_POD_GROUP, Pod, marked_preempted

NAME = "DefaultPreemption"
OFFSET = 1 << 31                       # upstream adds MaxInt32 + 1 to each priority in the sum
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
WAITING = "waiting for the preemption for this pod to be finished"

_OK = Status()


@dataclass(frozen=True, slots=True)
class DefaultPreemptionArgs:
    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100
    # tandem: False makes the scheduling loop wait for the evictions (kube-scheduler before async preemption)
    async_preemption: bool = True

    def validate(self, path: str) -> None:
        """ValidateDefaultPreemptionArgs."""
        p, a = self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute
        if not 0 <= p <= 100:
            raise ConfigError(f"{path}.minCandidateNodesPercentage: Invalid value: {p}: not in valid range [0, 100]")
        if a < 0:
            raise ConfigError(f"{path}.minCandidateNodesAbsolute: Invalid value: {a}: not in valid range [0, inf)")
        if p == 0 and a == 0:
            raise ConfigError(f"{path}.minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same "
                              f"time as minCandidateNodesAbsolute")


class Candidate:
    """A node where preemption makes the pod fit, and what it costs. ``victims`` (every pod to evict, whole
    gangs' members on other nodes too, most important first) is built when first read: the dry run keys
    hundreds of candidates and evicts on one."""

    __slots__ = ("row", "node", "pdb_violations", "gangs", "high", "total", "start", "nvictims", "_victims",
                 "_make")

    def __init__(self, row: int, node: str, victims: list[Pod] | None = None, pdb_violations: int = 0,
                 gangs: int = 0, high: int = 0, total: int = 0, start: float = 0.0, nvictims: int | None = None,
                 make: Callable[[], list[Pod]] | None = None) -> None:
        self.row = row
        self.node = node
        self.pdb_violations = pdb_violations
        self.gangs = gangs                 # distinct gangs losing a member
        self.high = high                   # highest victim priority
        self.total = total                 # sum of (priority + 2^31)
        self.start = start                 # earliest start among the highest-priority victims (inf: not started)
        self._victims = victims
        self._make = make
        self.nvictims = len(victims) if victims is not None else (nvictims or 0)

    @property
    def victims(self) -> list[Pod]:
        if self._victims is None:
            self._victims = self._make() if self._make is not None else []
        return self._victims

    def key(self) -> tuple:
        # smaller is better; upstream's order, with fewest gangs broken after PDB violations
        return (self.pdb_violations, self.gangs, self.high, self.total, self.nvictims, -self.start)

    def __repr__(self) -> str:
        return (f"Candidate({self.node!r}, victims={[v.name for v in self.victims]}, "
                f"pdb_violations={self.pdb_violations}, key={self.key()})")


class Candidates:
    """Candidates as columns, in dry-run order (what upstream's two candidate lists hold, kept as
    :meth:`keep` takes them). Reading one (iteration) makes a :class:`Candidate`; :meth:`best` picks
    without making any but the winner."""

    COLUMNS = ("row", "pdb_violations", "gangs", "high", "total", "nvictims", "start")

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.cols: dict[str, list[np.ndarray]] = {c: [] for c in self.COLUMNS}
        self.makers: list[Callable[[int], list[Pod]]] = []   # per part: row -> victims
        self.part: list[np.ndarray] = []
        self.kept = [0, 0]                                   # (not violating, violating) so far
        self._made: list[Candidate] | None = None
        self._cat: dict[str, np.ndarray] | None = None

    def __len__(self) -> int:
        return self.kept[0] + self.kept[1]

    def keep(self, cols: dict[str, np.ndarray], victims: Callable[[int], list[Pod]], want: int) -> None:
        """Add a batch (columns in dry-run order) as upstream's two lists take them: each (PDB-violating,
        not) holds at most ``want``."""
        v = cols["pdb_violations"] > 0
        ok = ((~v & (np.cumsum(~v) <= want - self.kept[0])) | (v & (np.cumsum(v) <= want - self.kept[1])))
        if not ok.any():
            return
        for c in self.COLUMNS:
            self.cols[c].append(cols[c][ok])
        self.part.append(np.full(int(ok.sum()), len(self.makers), dtype=np.int64))
        self.makers.append(victims)
        self.kept[0] += int((ok & ~v).sum())
        self.kept[1] += int((ok & v).sum())
        self._made = self._cat = None

    def _columns(self) -> dict[str, np.ndarray]:
        if self._cat is None:
            self._cat = {c: (p[0] if len(p) == 1 else np.concatenate(p)) for c, p in self.cols.items()}
            self._cat["part"] = self.part[0] if len(self.part) == 1 else np.concatenate(self.part)
        return self._cat

    def _make(self, i: int) -> Candidate:
        c = self._columns()
        row = int(c["row"][i])
        return Candidate(row, self.names[row], None, int(c["pdb_violations"][i]), int(c["gangs"][i]),
                         int(c["high"][i]), int(c["total"][i]), float(c["start"][i]), nvictims=int(c["nvictims"][i]),
                         make=functools.partial(self.makers[int(c["part"][i])], row))

    def __iter__(self) -> Iterator[Candidate]:
        if self._made is None:
            self._made = [self._make(i) for i in range(len(self))]
        return iter(self._made)

    def best(self) -> Candidate:
        """pickOneNodeForPreemption over the columns: the first with the smallest key (Candidate.key)."""
        return self._make(_first_smallest(self._columns()))


def _first_smallest(c: dict[str, np.ndarray]) -> int:
    """Index of the first candidate with the smallest Candidate.key, over key columns."""
    keys = (np.arange(len(c["start"])), -c["start"], c["nvictims"], c["total"], c["high"], c["gangs"],
            c["pdb_violations"])
    return int(np.lexsort(keys)[0])


@dataclass(slots=True)
class _Units:
    """Potential victims on a set of rows, grouped into units (one pod, or a PodGroup-mode gang's members
    on one node), with each row's units ranked in reprieve order: PDB-violating first, then by importance.
    Members are kept CSR-style: unit ``i``'s slots are ``slots[ptr[i]:ptr[i + 1]]``."""

    row: np.ndarray                    # int64[u]
    rank: np.ndarray                   # int64[u]: position in its row's reprieve order
    req: np.ndarray                    # int64[u, R]: summed requests on the row
    slots: np.ndarray                  # int64[members]: the units' slots, unit by unit
    ptr: np.ndarray                    # int64[u + 1]
    gang: np.ndarray                   # int64[u]: whole-gang id (-1: a single pod)
    violating: np.ndarray              # int64[u]: PDB-violating pods in the unit
    prio: np.ndarray                   # int64[u]: the unit's priority (a whole gang's: its highest member's)
    start: np.ndarray                  # float64[u]: earliest start among its members

    def members(self, i: int) -> list[int]:
        return self.slots[self.ptr[i]: self.ptr[i + 1]].tolist()


def num_candidates(n: int, percentage: int, absolute: int) -> int:
    """calculateNumCandidates."""
    k = n * percentage // 100
    if k < absolute:
        k = absolute
    return min(k, n)


def _start(p: Pod) -> float:
    return p.start_time if p.start_time > 0 else math.inf


def terminating_by_preemption(p: Pod) -> bool:
    """podTerminatingByPreemption: deleting, with DisruptionTarget=True for PreemptionByScheduler."""
    return p.deleting and marked_preempted(p)


@register
class DefaultPreemption:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"PreEnqueue", "PostFilter"})
    Args = DefaultPreemptionArgs

    def __init__(self, args: DefaultPreemptionArgs | None, handle: Any) -> None:
        self.handle = handle
        self.args = args if args is not None else DefaultPreemptionArgs()
        self.rng = random.Random(getattr(handle, "seed", None))
        self._errors: list[Status] = []    # Error statuses of the current dry run's nodes
        self._memo: tuple[np.ndarray, np.ndarray] | None = None   # _gang_arrays, for one dry run
        self._totals: tuple[np.ndarray, ...] | None = None           # _gang_totals, for one dry run

    # ------------------------------------------------------------------ PreEnqueue

    def pre_enqueue(self, pod: Pod) -> Status:
        ev = self.handle.preemption
        if ev is not None and ev.is_preempting(pod.uid):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, WAITING)
        return _OK

    # ------------------------------------------------------------------ PostFilter

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Any) -> tuple[PostFilterResult | None, Status]:
        ev = self.handle.preemption
        if ev is not None:
            ev.attempted()
        fw = self.handle.framework
        key = fw.gang.gang_key(pod) if fw is not None and fw.gang is not None else None
        if key:
            return self.preempt_for_gang(pod, key)
        ok, msg = self.eligible(pod, diagnosis)
        if not ok:
            return None, Status(Code.UNSCHEDULABLE, "preemption: " + msg)
        self._errors: list[Status] = []
        cands, fit_error = self.find_candidates(state, pod, diagnosis)
        if not cands and self._errors:
            return None, Status(Code.ERROR, "preemption: " + self._errors[0].message())
        if not cands:
            result = PostFilterResult(nominated_node="")   # clears a nomination it may have had
            return result, Status(Code.UNSCHEDULABLE, "preemption: " + fit_error)
        best = self.select(cands)
        if ev is not None:
            ev.preempt(fw, pod, best.node, best.victims, sync=not self.args.async_preemption)
        return PostFilterResult(nominated_node=best.node), _OK

    # ------------------------------------------------------------------ gangs

    def preempt_for_gang(self, pod: Pod, key: str) -> tuple[PostFilterResult | None, Status]:
        """A gang member fits nowhere: plan a node for every member of the gang without one, preempting where
        needed, each plan seeing the victims and members planned before it; commit only if the gang reaches
        its quorum, else evict nothing. The members planned are nominated and held until the evictions end."""
        fw = self.handle.framework
        gangs = self.handle.gangs
        pg = gangs.group(key)
        if pg is None:
            return None, Status(Code.UNSCHEDULABLE)
        placed = gangs.placed_members(key)
        need = pg.quorum - len(placed)
        if need <= 0:
            return None, Status(Code.UNSCHEDULABLE)   # whole already: a member beyond the quorum preempts nobody
        pods = self.handle.pods
        members = [pods.get(u) for u in gangs.member_uids(key) if u not in placed]
        members = [m for m in members if m is not None and not m.node_name and not m.deleting
                   and m.scheduler_name == pod.scheduler_name]
        if any(m.preemption_policy == "Never" for m in members):
            return None, Status(Code.UNSCHEDULABLE, "preemption: " + NOT_ELIGIBLE_NEVER)
        ev = self.handle.preemption
        if any(ev is not None and ev.is_preempting(m.uid) for m in members):
            return None, Status(Code.UNSCHEDULABLE)   # its evictions are still under way
        if any(self._victim_terminating(m) for m in members):
            # as PodEligibleToPreemptOthers for one pod: the gang's victims are still going; it keeps its room
            return None, Status(Code.UNSCHEDULABLE, "preemption: " + NOT_ELIGIBLE_TERMINATING)
        members.sort(key=lambda m: (m.uid != pod.uid, -m.requests.get("cpu", 0), -m.requests.get("memory", 0),
                                    m.name))
        self._errors = []
        try:
            plan = self._plan_gang(members)
        except _DryRunError as e:
            return None, e.status
        planned = len(plan)
        if planned < need and self._errors:
            return None, Status(Code.ERROR, "preemption: " + self._errors[0].message())   # as for a single pod
        if planned < need or not any(vs for _, _, vs in plan):
            # evict nothing: the gang would not be whole, or need not. Nominations from an earlier preemption
            # go (upstream clears a pod's when no candidate is left): they would hold room the gang cannot use
            if ev is not None:
                ev.withdraw(members)
            return PostFilterResult(nominated_node=""), Status(Code.UNSCHEDULABLE)
        if ev is not None:
            ev.preempt_group(fw, plan, sync=not self.args.async_preemption)
        mine = next((n for m, n, _ in plan if m.uid == pod.uid), "")
        return PostFilterResult(nominated_node=mine), _OK

    def _plan_gang(self, members: list[Pod]) -> list[tuple[Pod, str, list[Pod]]]:
        fw = self.handle.framework
        cache = self.handle.cache
        nodes = self.handle.nodes
        plan: list[tuple[Pod, str, list[Pod]]] = []
        lifted: list[Any] = []
        assumed: list[Pod] = []
        try:
            for m in members:
                s = CycleState()
                rows, st, diag = fw.run_pre_filter(s, m)
                if st.code == Code.ERROR:
                    raise _DryRunError(st)
                if not st.is_success():
                    continue
                feasible, st = fw.run_filter_with_nominated(s, m, rows, diag)
                if st.code == Code.ERROR:
                    raise _DryRunError(st)
                diag.num_all_nodes = len(nodes)
                victims: list[Pod] = []
                if len(feasible):
                    total, st = fw.run_score(s, m, feasible)
                    row = int(feasible[int(np.argmax(total))]) if st.is_success() else int(feasible[0])
                    node = nodes.names[row]
                else:
                    cands, _ = self.find_candidates(s, m, diag)
                    if not cands:
                        continue   # this member would not fit even so: nothing is evicted for it
                    best = self.select(cands)
                    node, victims = best.node, best.victims
                    for v in victims:
                        st_v = cache.lift(v.uid)
                        if st_v is not None:
                            lifted.append(st_v)
                cache.assume(m, node)
                assumed.append(m)
                plan.append((m, node, victims))
        finally:
            for m in assumed:
                cache.forget(m)
            for st_v in reversed(lifted):
                cache.restore(st_v)
        return plan

    def _victim_terminating(self, pod: Pod) -> bool:
        """A pod of lower priority terminates by preemption on the node ``pod`` is nominated to."""
        node = self.handle.cache.nominations.get(pod.uid) or pod.nominated_node_name
        if not node:
            return False
        prio = self.priority_of(pod)
        return any(self.priority_of(p) < prio and terminating_by_preemption(p) for p in self.handle.cache.pods_on(node))

    def priority_of(self, p: Pod) -> int:
        """A pod's priority for preemption: its PodGroup's when that sets one."""
        if p.pod_group:
            pg = self.handle.gangs.group(f"{p.namespace}/{p.pod_group}")
            if pg is not None and pg.priority is not None:
                return pg.priority
        return p.priority

    def eligible(self, pod: Pod, diagnosis: Any) -> tuple[bool, str]:
        """PodEligibleToPreemptOthers."""
        if pod.preemption_policy == "Never":
            return False, NOT_ELIGIBLE_NEVER
        node = self.handle.cache.nominations.get(pod.uid) or pod.nominated_node_name
        if node:
            row = self.handle.nodes.row(node)
            unresolvable = diagnosis.unresolvable_rows if diagnosis is not None else None
            if row is not None and unresolvable is not None and bool((unresolvable == row).any()):
                return True, ""
            if self._victim_terminating(pod):
                return False, NOT_ELIGIBLE_TERMINATING
        return True, ""

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
        want = num_candidates(len(potential), self.args.min_candidate_nodes_percentage,
                              self.args.min_candidate_nodes_absolute)
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
        return cands[_first_smallest(cols)]

    # ------------------------------------------------------------------ the dry run

    def _victim_slots(self, pod: Pod, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Slots of the placed pods on ``rows`` that ``pod`` may preempt, their rows and priorities."""
        pt = self.handle.cache.pod_table
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
        pt = self.handle.cache.pod_table
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
        pt = self.handle.cache.pod_table
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
            raise _DryRunError(st)
        if reasons is not None:
            for r, n in diag.reasons.items():
                reasons[r] = reasons.get(r, 0) + n
        return passed

    def _dry_run_batched(self, state: CycleState, pod: Pod, order: np.ndarray, slots: np.ndarray,
                         vrows: np.ndarray, want: int, reasons: dict[str, int]) -> Candidates:
        nodes = self.handle.nodes
        pt = self.handle.cache.pod_table
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
            except _DryRunError as e:
                if e.status.code == Code.ERROR:   # as the per-node path: an Error, not one more FitError reason
                    self._errors.append(e.status)
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
                except _DryRunError as e:
                    self._errors.append(e.status)   # the batch's nodes end with it; candidates found so far stand
                    break
                if found is not None:
                    out.keep(*found, want)
                if out.kept[0] > 0 and len(out) >= want:
                    break
            return out
        finally:
            nodes.requested = saved

    def _units(self, pod: Pod, rows: np.ndarray, slots: np.ndarray, vrows: np.ndarray) -> _Units:
        """The potential victims on ``rows`` as units in reprieve order (see :class:`_Units`), without a Python
        loop over them unless PDBs or whole gangs ask for one."""
        pt = self.handle.cache.pod_table
        req_all = pt.columns()
        sel = np.isin(vrows, rows)
        s_slots, s_rows = slots[sel], vrows[sel]
        if len(s_slots) == 0:
            z = np.zeros(0, dtype=np.int64)
            return _Units(z, z, np.zeros((0, req_all.shape[1]), dtype=np.int64), z, np.zeros(1, dtype=np.int64),
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
        return _Units(u_row, rank, u_req, s_slots, ptr, u_gang, viol, u_prio, u_start)

    def _pdb_violations(self, u_row: np.ndarray, slots: np.ndarray, ptr: np.ndarray, u_gang: np.ndarray,
                        importance: np.ndarray) -> np.ndarray:
        """filterPodsWithPDBViolation per row: walking a row's units most important first, each pod covered by a
        PDB takes one of its allowed disruptions; a pod is violating once one of its PDBs has none left.
        Per unit, the number of violating pods (a whole gang's members on other nodes count too)."""
        out = np.zeros(len(u_row), dtype=np.int64)
        pdbs = list(self.handle.pdbs.values()) if self.handle.pdbs else []
        if not pdbs:
            return out
        cache = self.handle.cache
        pt = cache.pod_table
        pods = cache.pods
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

    def _candidates(self, batch: np.ndarray, u: _Units,
                    victim: np.ndarray) -> tuple[dict[str, np.ndarray], Callable[[int], list[Pod]]] | None:
        """A candidate per row of ``batch`` with victims, as columns of per-row sums over its victim units, and
        how to list a row's victims (done only for the candidate that is read)."""
        vi = np.flatnonzero(victim)
        if len(vi) == 0:
            return None
        pt = self.handle.cache.pod_table
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
        pt = self.handle.cache.pod_table
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
        cache = self.handle.cache
        key = self.handle.cache.pod_table.gang_keys[g]
        return [st.pod for st in (cache.pods.get(uid) for uid in list(self.handle.gangs.placed_members(key)))
                if st is not None]

    def _victims(self, u: _Units, units: np.ndarray) -> list[Pod]:
        """The pods of ``units`` (whole gangs: every placed member), most important first."""
        cache = self.handle.cache
        pt = cache.pod_table
        pods: list[Pod] = []
        seen: set[str] = set()
        for i in units[np.argsort(u.slots[u.ptr[units]], kind="stable")].tolist():   # ties keep slot order
            if u.gang[i] >= 0:
                members = self._gang_victims(int(u.gang[i]))
            else:
                members = [cache.pods[uid].pod for uid in (pt.uids[m] for m in u.members(i)) if uid is not None]
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
        cache = self.handle.cache
        pt = cache.pod_table
        slots, vrows, _ = self._victim_slots(pod, order)
        out = Candidates(nodes.names)
        for row in order.tolist():
            u = self._units(pod, np.array([row], dtype=np.int64), slots, vrows)
            s = state.clone()
            off: set[int] = set()          # units whose members are off the node table now (restored at the end)

            def take(i: int) -> None:
                off.add(i)
                for m in u.members(i):
                    p = cache.pods[pt.uids[m]].pod
                    nodes.charge(row, p, -1)
                    _ok(fw.run_remove_pod(s, pod, p, row))

            def give(i: int) -> None:
                off.discard(i)
                for m in u.members(i):
                    p = cache.pods[pt.uids[m]].pod
                    nodes.charge(row, p, 1)
                    _ok(fw.run_add_pod(s, pod, p, row))

            victim = np.zeros(len(u.row), dtype=bool)
            one = np.array([row], dtype=np.int64)
            try:
                for i in range(len(u.row)):
                    take(i)
                # a whole gang's members elsewhere leave their domains too (their nodes' rows are not filtered)
                for r, p in self._elsewhere(u, row):
                    _ok(fw.run_remove_pod(s, pod, p, r))
                fits = len(self._filter(s, pod, one, reasons)) > 0
                if fits:
                    for i in np.argsort(u.rank, kind="stable").tolist():
                        give(i)
                        if len(self._filter(s, pod, one, None)):
                            continue
                        take(i)
                        victim[i] = True
            except _DryRunError as e:
                if e.status.code == Code.ERROR:
                    self._errors.append(e.status)
                else:
                    reasons[e.status.message()] = reasons.get(e.status.message(), 0) + 1
                fits = False
            finally:
                for i in off:
                    for m in u.members(i):
                        nodes.charge(row, cache.pods[pt.uids[m]].pod, 1)
            if not fits:
                continue
            found = self._candidates(np.array([row], dtype=np.int64), u, victim)
            if found is not None:
                out.keep(*found, want)
            if out.kept[0] > 0 and len(out) >= want:
                break
        return out

    def _elsewhere(self, u: _Units, row: int) -> list[tuple[int, Pod]]:
        cache = self.handle.cache
        pt = cache.pod_table
        out = []
        for g in set(u.gang[u.gang >= 0].tolist()):
            for uid, node in self.handle.gangs.placed_members(pt.gang_keys[g]).items():
                r = self.handle.nodes.row(node)
                st = cache.pods.get(uid)
                if r is not None and r != row and st is not None:
                    out.append((r, st.pod))
        return out


def _ok(st: Status) -> None:
    """An AddPod/RemovePod failure ends the node's dry run (upstream returns its status)."""
    if not st.is_success():
        raise _DryRunError(st)


class _DryRunError(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status
