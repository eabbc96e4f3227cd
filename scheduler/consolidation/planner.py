"""The rebalancer's planner: which pods to move where, simulated with the profile's own Filters.

Every plan is a what-if on the cache (:class:`WhatIf`): the pods it moves are lifted off their nodes and
their replacements assumed on the planned targets, the profile's Filters run on that state, and everything is
put back before the planner returns (no ``await`` in between, so no cycle sees it; preemption's dry runs work
the same way). A plan is returned only if every pod it moves has a new node, never the one it leaves, given
the plan's other moves, the room nominated to pending pods and the capacity held for the head of the line.

* :meth:`Planner.defragment`: the room a blocked unit (a gang, or a big pod) needs, opened by moving the
  fewest movable pods: per member (largest first) the node where the fewest pods (largest first) must go,
  then a new node for each of those pods (the fullest that passes their Filters: MostAllocated), then every
  member checked with every Filter on its node. A topology gang gets its room inside one domain (the one of
  :data:`MAX_DOMAINS` that needs the fewest moves).
* :meth:`Planner.compact`: nodes whose usage is under every threshold, least used first (the higher row first
  on a tie), emptied when all their pods fit on nodes at least as used (the fullest first): HighNodeUtilization,
  with no second scheduler to reconfigure. It acts when every node is low too.
* :meth:`Planner.spread`: pods whose topology spread constraints or required (anti-)affinity fail where they
  run now (each checked by lifting it and running those two Filters on its node), moved to the node the
  profile's Scores pick among those that pass every Filter, while each move lowers the number of such pods.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.nodetable import R_CPU, R_MEMORY, R_PODS
from scheduler.framework.runtime import Diagnosis
from scheduler.model import DO_NOT_SCHEDULE, Pod
from scheduler.state.moves import controller_of
from scheduler.state.reservations import CAPACITY_FILTERS

if TYPE_CHECKING:
    from scheduler.framework.runtime import Framework
    from scheduler.state.cache import Cache, PodState

PREFER_NO_EVICTION = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
MOVABLE_KINDS = frozenset({"ReplicaSet", "StatefulSet"})
DAEMON_KINDS = frozenset({"DaemonSet"})        # pods that stay on an emptied node (a node agent's)
SPREAD_FILTERS = frozenset({"PodTopologySpread", "InterPodAffinity"})

EMPTY: Mapping[str, bool] = MappingProxyType({})
_CPU_MEMORY = np.array([R_CPU, R_MEMORY], dtype=np.intp)

DEFRAGMENT, COMPACT, SPREAD = "defragment", "compact", "spread"

MAX_MOVES = 64                 # moves in one plan
MAX_NODE_CANDIDATES = 8        # nodes tried per member of a defragmented unit
MAX_DOMAINS = 8                # domains a topology gang's defragment plan tries (the most free cpu first)
MAX_COMPACT_SOURCES = 32       # nodes one compaction pass tries to empty
MAX_PODS_TO_EMPTY = 16         # pods on a node compaction empties
MAX_SPREAD_CHECKS = 256        # pods one respread pass looks at
MAX_SPREAD_VIOLATORS = 32      # violating pods one respread plan moves or checks again after each move


@dataclass
class Unit:
    """A head-of-line unit that only capacity blocks (holding.py's choice), for defragment."""

    key: str                  # gang key, or the pod's uid
    what: str                 # "pod group ns/g", "pod ns/p"
    uids: list[str]
    priority: int
    rank: tuple
    domain_key: str = ""
    created: float = 0.0      # its age (a gang's PodGroup's creationTimestamp), and when tandem first tried it
    seen: float = 0.0


@dataclass
class Plan:
    strategy: str
    moves: list[tuple[Pod, str, str]]                 # (pod, source, target)
    why: str                                          # the end of each event's note
    unit: Unit | None = None                          # defragment: the unit served
    members: dict[str, str] = field(default_factory=dict)   # defragment: member uid -> its node
    emptied: list[str] = field(default_factory=list)  # compact: the nodes it empties
    gain: float = 0.0


def movable(pod: Pod, profile: str, now_wall: float, min_age: float, jobs: Mapping[str, bool] = EMPTY) -> bool:
    """May the rebalancer move ``pod``? Running, of the profile, controlled by a ReplicaSet or StatefulSet (or by a
    Job whose podFailurePolicy ignores DisruptionTarget: ``jobs``), not in a gang, not annotated
    prefer-no-eviction, at least ``min_age`` seconds old."""
    if pod.scheduler_name != profile or pod.deleting or pod.phase != "Running" or pod.gang:
        return False
    if PREFER_NO_EVICTION in pod.annotations:
        return False
    c = controller_of(pod)
    if c is None or (c[0] not in MOVABLE_KINDS and not (c[0] == "Job" and jobs.get(c[2], False))):
        return False
    return min_age <= 0 or now_wall - pod.created >= min_age


def replacement(pod: Pod) -> Pod:
    """The pod as its controller's next one would be: the same spec, not bound."""
    return dataclasses.replace(pod, node_name="", nominated_node_name="", phase="Pending", start_time=0.0)


class WhatIf:
    """Moves simulated on the cache, all taken back by :meth:`undo` (or back to a :meth:`mark`)."""

    def __init__(self, cache: "Cache") -> None:
        self.cache = cache
        self.steps: list[tuple[str, Any]] = []
        held = cache.nominations.held
        self._paused = held.paused
        held.paused = True   # a what-if: the reservations' sums stay as they are

    def lift(self, uid: str) -> bool:
        st = self.cache.lift(uid)
        if st is None:
            return False
        self.steps.append(("lift", st))
        return True

    def assume(self, pod: Pod, node: str) -> None:
        self.cache.assume(pod, node)
        self.steps.append(("assume", pod))

    def mark(self) -> int:
        return len(self.steps)

    def rollback(self, mark: int) -> None:
        while len(self.steps) > mark:
            kind, x = self.steps.pop()
            if kind == "assume":
                self.cache.forget(x)
            else:
                self.cache.restore(x)

    def undo(self) -> None:
        try:
            self.rollback(0)
        finally:
            self.cache.nominations.held.paused = self._paused


class Planner:
    def __init__(self, fw: "Framework", cache: "Cache", args: Any, now_wall: float,
                 blocked: Iterable[str] = ()) -> None:
        self.fw = fw
        self.cache = cache
        self.nodes = cache.nodes
        self.args = args
        self.now = now_wall
        self.blocked = set(blocked)   # owner uids that may not move now (in flight, cooling down)

    # ------------------------------------------------------------------ shared

    def can_move(self, pod: Pod) -> bool:
        if not movable(pod, self.fw.name, self.now, self.args.min_pod_age_seconds, self.cache.moves.jobs):
            return False
        c = controller_of(pod)
        return c is not None and c[2] not in self.blocked and not self.cache.is_assumed(pod.uid)

    def feasible(self, pod: Pod, only: frozenset[str] | None = None, rows: np.ndarray | None = None) -> np.ndarray:
        """The rows where ``pod`` passes PreFilter and Filter now (``only``: just those Filters)."""
        fw = self.fw
        state = CycleState()
        all_rows, st, _ = fw.run_pre_filter(state, pod)
        if not st.is_success():
            return all_rows[:0]
        if rows is not None:
            all_rows = np.intersect1d(all_rows, rows, assume_unique=True)
        if only is not None:
            state.skip_filter.update(p.NAME for p in fw.filter_plugins if p.NAME not in only)
        passed, st = fw.run_filter_with_nominated(state, pod, all_rows, Diagnosis())
        return passed if st.is_success() else passed[:0]

    def usage(self, rows: np.ndarray, cols: list[int]) -> np.ndarray:
        """Requested / allocatable per row, in percent, per column of ``cols``."""
        nodes = self.nodes
        alloc = nodes.alloc.take(rows, axis=0)[:, cols].astype(float)   # take: a third of fancy indexing's time
        req = nodes.requested.take(rows, axis=0)[:, cols].astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.where(alloc > 0, req * 100.0 / np.maximum(alloc, 1), 100.0)
        return u

    def fullest(self, rows: np.ndarray, pod: Pod) -> int:
        """MostAllocated: the row that is fullest (cpu and memory, after the pod), the first on a tie."""
        nodes = self.nodes
        alloc = np.maximum(nodes.alloc.take(rows, axis=0)[:, _CPU_MEMORY].astype(float), 1)
        req = nodes.requested.take(rows, axis=0)[:, _CPU_MEMORY].astype(float)
        req[:, 0] += pod.requests.get("cpu", 0)
        req[:, 1] += pod.requests.get("memory", 0)
        score = (req / alloc).sum(axis=1)
        return int(rows[int(np.argmax(score))])

    def _target(self, w: WhatIf, pod: Pod, source: str, exclude: np.ndarray | None, q: Pod | None = None) -> str:
        """A new node for ``pod`` (lifted already; ``q``, its replacement, if made already): the fullest that
        passes its Filters, never ``source``."""
        if q is None:
            q = replacement(pod)
        rows = self.feasible(q)
        src = self.nodes.row(source)
        rows = rows[rows != src]
        if exclude is not None and len(rows):
            rows = rows[~exclude[rows]]
        if not len(rows):
            return ""
        return self.nodes.names[self.fullest(rows, q)]

    def _held_rows(self, skip: str = "") -> np.ndarray:
        mask = np.zeros(self.nodes.cap, dtype=bool)
        for r in self.cache.nominations.held.by_key.values():
            if r.key == skip:
                continue
            for node in r.nodes:
                row = self.nodes.row(node)
                if row is not None:
                    mask[row] = True
        return mask

    # ------------------------------------------------------------------ defragment

    def defragment(self, unit: Unit, pods: list[Pod]) -> Plan | None:
        """Open room for ``unit`` (its pending ``pods``) by moving the fewest movable pods, or None."""
        if not pods:
            return None
        nodes, cache = self.nodes, self.cache
        width = len(nodes.resources)
        pods = sorted(pods, key=lambda p: (-p.requests.get("cpu", 0), -p.requests.get("memory", 0), p.uid))
        other_held = self._held_rows(skip=unit.key)
        members: list[tuple[Pod, np.ndarray, np.ndarray]] = []
        for pod in pods:
            vec = np.zeros(width, dtype=np.int64)
            for r, v in pod.requests.items():
                col = nodes.resource_index.get(r)
                if col is None:
                    return None   # a resource no node has
                vec[col] = v
            vec[R_PODS] = 1
            state = CycleState()
            rows, st, _ = self.fw.run_pre_filter(state, pod)
            if not st.is_success():
                return None
            state.skip_filter.update(CAPACITY_FILTERS)
            rows, st = self.fw.run_filter_with_nominated(state, pod, rows, Diagnosis())
            if not st.is_success():
                return None
            rows = rows[~other_held[rows]]
            rows = rows[(nodes.alloc[rows, :width] >= vec).all(axis=1)]
            if not len(rows):
                return None   # nothing to gain: no node takes it even empty
            members.append((pod, rows, vec))
        held_now = cache.nominations.held.by_key.get(unit.key)
        prefer = {nodes.row(n) for n in held_now.nodes} if held_now is not None else set()
        if unit.domain_key:
            return self._defragment_domains(unit, members, prefer)
        w = WhatIf(cache)
        try:
            plan = self._defragment(w, unit, members, MovableOn(self), prefer)
        finally:
            w.undo()
        return plan if plan is not None and plan.moves else None

    def _defragment_domains(self, unit: Unit, members: list, prefer: set) -> Plan | None:
        """A topology gang (every member in one domain of ``unit.domain_key``): the plan with the fewest moves
        (then the least cpu moved) inside one domain, trying the :data:`MAX_DOMAINS` domains with the most free
        cpu on the rows every member may use. None when some domain takes the gang as it is (what blocks it is
        not fragmentation), or none can be opened."""
        nodes = self.nodes
        ids = nodes.label(unit.domain_key)
        if ids is None:
            return None
        common = members[0][1]
        for _, rows, _ in members[1:]:
            common = np.intersect1d(common, rows, assume_unique=True)
        common = common[ids[common] > 0]
        if not len(common):
            return None
        free = (nodes.alloc[common, R_CPU] - nodes.requested[common, R_CPU]).clip(min=0)
        room = np.bincount(ids[common], weights=free)
        domains = np.unique(ids[common])
        domains = domains[np.argsort(-room[domains], kind="stable")][:MAX_DOMAINS]
        best: tuple[tuple[int, int], Plan] | None = None
        for d in domains:
            inside = ids == d
            mine = [(pod, rows[inside[rows]], vec) for pod, rows, vec in members]
            if any(not len(rows) for _, rows, _ in mine):
                continue
            w = WhatIf(self.cache)
            try:
                plan = self._defragment(w, unit, mine, MovableOn(self), prefer)
            finally:
                w.undo()
            if plan is None:
                continue
            if not plan.moves:
                return None   # it fits in this domain as it is
            score = (len(plan.moves), sum(p.requests.get("cpu", 0) for p, _, _ in plan.moves))
            if best is None or score < best[0]:
                best = (score, plan)
        return None if best is None else best[1]

    def _defragment(self, w: WhatIf, unit: Unit, members: list, movable_on: "MovableOn",
                    prefer: set) -> Plan | None:
        nodes = self.nodes
        width = len(nodes.resources)
        unit_rows = np.zeros(nodes.cap, dtype=bool)
        chosen: dict[str, str] = {}
        moves: list[tuple[Pod, str, str]] = []
        need = np.zeros((nodes.cap, width), dtype=np.int64)   # members' requests per row so far
        gone: set[str] = set()
        for pod, rows, vec in members:
            alloc = nodes.alloc[rows, :width]
            free = alloc - nodes.requested[rows, :width] - need[rows]
            deficit = np.maximum(vec - free, 0)
            share = (deficit / np.maximum(alloc, 1)).sum(axis=1)   # what must go, as shares of each node
            options: list[tuple[int, int, int, int, list[Pod]]] = []
            for i in np.argsort(share, kind="stable")[: 4 * MAX_NODE_CANDIDATES]:
                row = int(rows[i])
                d = deficit[i]
                if not d.any():
                    options.append((0, 0 if row in prefer else 1, 0, row, []))
                    continue
                take: list[Pod] = []
                covered = np.zeros(width, dtype=np.int64)
                for p in movable_on.get(row):
                    if p.uid in gone:
                        continue
                    take.append(p)
                    for r, v in p.requests.items():
                        col = nodes.resource_index.get(r)
                        if col is not None and col < width:
                            covered[col] += v
                    covered[R_PODS] += 1
                    if (covered >= d).all():
                        break
                else:
                    continue   # the movable pods there do not free enough
                cpu = sum(p.requests.get("cpu", 0) for p in take)
                options.append((len(take), 0 if row in prefer else 1, cpu, row, take))
            options.sort(key=lambda o: o[:4])
            placed = False
            for count, _, _, row, take in options[:MAX_NODE_CANDIDATES]:
                if len(moves) + count > MAX_MOVES:
                    continue
                mark = w.mark()
                name = nodes.names[row]
                unit_rows[row] = True
                ok = all(w.lift(p.uid) for p in take)
                planned: list[tuple[Pod, str, str]] = []
                if ok:
                    for p in take:
                        q = replacement(p)
                        target = self._target(w, p, name, unit_rows, q)
                        if not target:
                            ok = False
                            break
                        w.assume(q, target)
                        planned.append((p, name, target))
                if ok:
                    chosen[pod.uid] = name
                    need[row] += vec
                    moves.extend(planned)
                    gone.update(p.uid for p in take)
                    placed = True
                    break
                w.rollback(mark)
                unit_rows[row] = bool(need[row].any())
            if not placed:
                return None
        if not moves:   # it fits as it is: what blocks it is not fragmentation (the caller plans nothing)
            return Plan(DEFRAGMENT, [], "", unit=unit, members=chosen)
        # every member, with every Filter, on its node, the others placed before it
        for pod, _, _ in members:
            row = nodes.row(chosen[pod.uid])
            if not len(self.feasible(pod, rows=np.array([row], dtype=np.int64))):
                return None
            w.assume(pod, chosen[pod.uid])
        return Plan(DEFRAGMENT, moves, f"to open room for {unit.what}", unit=unit, members=chosen,
                    gain=1.0)

    # ------------------------------------------------------------------ compact

    def compact(self) -> Plan | None:
        """Empty the least-used nodes whose every pod fits on a node at least as used (HighNodeUtilization)."""
        nodes, cache = self.nodes, self.cache
        thresholds = self.args.compact.thresholds
        cols, limits = [], []
        for r, v in thresholds.items():
            col = nodes.resource_index.get(r)
            if col is not None:
                cols.append(col)
                limits.append(float(v))
        if not cols:
            return None
        rows = nodes.rows()
        if not len(rows):
            return None
        u = self.usage(rows, cols)
        under = (u < np.array(limits)).all(axis=1)
        cand = rows[under]
        cand = cand[nodes.requested[cand, R_PODS] > 0]   # a pod on it (the table counts every pod it charged)
        held = self._held_rows()
        cand = cand[~held[cand]]
        if not len(cand):
            return None
        mean = u.mean(axis=1)
        level = np.zeros(nodes.cap)
        level[rows] = mean
        order = np.lexsort((-cand, level[cand]))   # least used first; the higher row first on a tie
        sources = [int(r) for r in cand[order][:MAX_COMPACT_SOURCES]]
        w = WhatIf(cache)
        try:
            return self._compact(w, sources, level)
        finally:
            w.undo()

    def _compact(self, w: WhatIf, sources: list[int], level: np.ndarray) -> Plan | None:
        nodes, cache = self.nodes, self.cache
        closed = np.zeros(nodes.cap, dtype=bool)   # emptied, or to be: never a target
        used = np.zeros(nodes.cap, dtype=bool)     # a target of this plan: never a source after
        emptied: list[str] = []
        moves: list[tuple[Pod, str, str]] = []
        for row in sources:
            if used[row]:
                continue
            name = nodes.names[row]
            pods = [p for p in cache.pods_on(name) if not _daemon(p)]
            if not pods or len(pods) > MAX_PODS_TO_EMPTY or len(moves) + len(pods) > MAX_MOVES:
                continue
            if not all(self.can_move(p) for p in pods):
                continue
            mark = w.mark()
            closed[row] = True
            # targets at least as used as this node was (the lower row on a tie): plans never flap back
            lower = (level < level[row]) | ((level == level[row]) & (np.arange(nodes.cap) >= row))
            ok = all(w.lift(p.uid) for p in pods)
            planned: list[tuple[Pod, str, str]] = []
            if ok:
                for p in sorted(pods, key=lambda p: (-p.requests.get("cpu", 0), p.uid)):
                    q = replacement(p)
                    target = self._target(w, p, name, closed | lower, q)
                    if not target:
                        ok = False
                        break
                    w.assume(q, target)
                    planned.append((p, name, target))
            if not ok:
                w.rollback(mark)
                closed[row] = False
                continue
            for _, _, t in planned:
                used[nodes.row(t)] = True
            emptied.append(name)
            moves.extend(planned)
        if not emptied:
            return None
        return Plan(COMPACT, moves, "to empty node(s) " + ", ".join(emptied), emptied=emptied,
                    gain=float(len(emptied)))

    # ------------------------------------------------------------------ spread

    def violated(self, pods: Iterable[Pod]) -> list[Pod]:
        """The pods whose topology spread constraints or required (anti-)affinity fail on their own node now:
        each lifted, and those two Filters run on its node. A pod that passed them when placed and fails now
        was placed before the cluster changed (a zone came back, a pod arrived)."""
        out = []
        nodes = self.nodes
        for pod in pods:
            row = nodes.row(pod.node_name)
            if row is None:
                continue
            w = WhatIf(self.cache)
            try:
                if not w.lift(pod.uid):
                    continue
                if not len(self.feasible(replacement(pod), SPREAD_FILTERS, np.array([row], dtype=np.int64))):
                    out.append(pod)
            finally:
                w.undo()
        return out

    def spread_candidates(self, states: Iterable["PodState"], limit: int = MAX_SPREAD_CHECKS) -> list[Pod]:
        """The movable pods among ``states`` (the cache's pod states) with hard spread constraints or required
        pod (anti-)affinity, at most ``limit``."""
        out: list[Pod] = []
        if limit <= 0:
            return out
        for st in states:
            p = st.pod
            if st.assumed or not (_hard_spread(p) or _required_affinity(p)):
                continue
            if self.can_move(p):
                out.append(p)
                if len(out) >= limit:
                    break
        return out

    def spread(self, violators: list[Pod]) -> Plan | None:
        """Move violating pods, one at a time, to where the profile would place them now, while each move lowers
        the number of violating pods among ``violators`` and those like them."""
        if not violators:
            return None
        violators = violators[:MAX_SPREAD_VIOLATORS]
        w = WhatIf(self.cache)
        moves: list[tuple[Pod, str, str]] = []
        try:
            remaining = list(violators)
            count = len(remaining)
            while remaining and len(moves) < MAX_MOVES:
                pod = remaining[0]
                mark = w.mark()
                now = self.cache.pods.get(pod.uid)
                if now is None or now.node != pod.node_name or not w.lift(pod.uid):
                    remaining.pop(0)
                    continue
                q = replacement(pod)
                rows = self.feasible(q)
                src = self.nodes.row(pod.node_name)
                rows = rows[rows != src]
                target = ""
                if len(rows):
                    state = CycleState()
                    self.fw.run_pre_filter(state, q)
                    total, st = self.fw.run_score(state, q, rows)
                    if st.is_success():
                        target = self.nodes.names[int(rows[int(np.argmax(total))])]
                if not target:
                    w.rollback(mark)
                    remaining.pop(0)
                    continue
                w.assume(q, target)
                # a violator the move cannot touch still violates: only the others are checked again
                left = [p for p in remaining[1:] if not touches(pod, p) or self._still_violates(w, p)]
                if len(left) >= count:   # no gain: this move does not help
                    w.rollback(mark)
                    remaining.pop(0)
                    continue
                moves.append((pod, pod.node_name, target))
                remaining, count = left, len(left)
        finally:
            w.undo()
        if not moves:
            return None
        return Plan(SPREAD, moves, "to restore its topology spread and pod anti-affinity", gain=float(len(violators) - count))

    def _still_violates(self, w: WhatIf, pod: Pod) -> bool:
        row = self.nodes.row(pod.node_name)
        mark = w.mark()
        try:
            if not w.lift(pod.uid):
                return False
            return not len(self.feasible(replacement(pod), SPREAD_FILTERS, np.array([row], dtype=np.int64)))
        finally:
            w.rollback(mark)


class MovableOn:
    """The movable pods on a row, largest first, read from the cache the first time a plan asks for that row."""

    def __init__(self, planner: Planner) -> None:
        self.planner = planner
        self.rows: dict[int, list[Pod]] = {}

    def get(self, row: int) -> list[Pod]:
        got = self.rows.get(row)
        if got is None:
            p = self.planner
            name = p.nodes.names[row]
            got = sorted((pod for pod in p.cache.pods_on(name) if p.can_move(pod)),
                         key=lambda q: (-q.requests.get("cpu", 0), -q.requests.get("memory", 0), q.uid))
            self.rows[row] = got
        return got


def touches(moved: Pod, pod: Pod) -> bool:
    """Can moving ``moved`` change whether ``pod`` passes PodTopologySpread and InterPodAffinity where it runs?
    Only if ``moved`` is among the pods ``pod``'s hard spread constraints count (its namespace, their
    selectors) or its required (anti-)affinity terms select, or ``moved`` has required anti-affinity (which
    may select ``pod``: the symmetric check). A term that selects namespaces by their labels is taken to
    touch (the namespaces' labels are not at hand here)."""
    a = moved.pod_affinity
    if a is not None and a.required_anti:
        return True
    if moved.namespace == pod.namespace:
        for c in pod.topology_spread:
            if c.when_unsatisfiable == DO_NOT_SCHEDULE and c.selector.matches(moved.labels):
                return True
    a = pod.pod_affinity
    if a is not None:
        for t in a.required + a.required_anti:
            sel = t.selection
            if sel.by_namespace_labels or (moved.namespace in sel.namespaces and sel.selector.matches(moved.labels)):
                return True
    return False


def _daemon(p: Pod) -> bool:
    c = controller_of(p)
    return c is not None and c[0] in DAEMON_KINDS


def _hard_spread(p: Pod) -> bool:
    return any(c.when_unsatisfiable == "DoNotSchedule" for c in p.topology_spread)


def _required_affinity(p: Pod) -> bool:
    a = p.pod_affinity
    return a is not None and bool(a.required_anti or a.required)
