"""Gang preemption: a member of a gang that fits nowhere preempts for every missing member at once, or for none.

Upstream's pkg/scheduler/framework/preemption/podgrouppreemption.go. The
members without a node are planned one after another, each dry run (the
evaluator's, preemption.py) seeing the victims and members planned before it
through the handle's what-if methods (lift, assume; taken back with forget,
restore once the plan is made). The plan is committed only if the gang
reaches its quorum: the executor (``preempt_group`` in scheduler/executor.py)
then evicts for the whole plan, and the group cycle (scheduler/schedule_one.py)
only holds the members it has not tried yet while that runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import PostFilterResult
from scheduler.framework.preemption.preemption import (
    NOT_ELIGIBLE_NEVER, NOT_ELIGIBLE_TERMINATING, DryRunError, Evaluator,
)
from scheduler.framework.status import Code, Status

if TYPE_CHECKING:
    from scheduler.model import Pod

_OK = Status()


def preempt_for_gang(evaluator: Evaluator, pod: Pod, key: str, sync: bool, state: CycleState | None = None,
                     diagnosis: Any = None) -> tuple[PostFilterResult | None, Status]:
    """A gang member fits nowhere: plan a node for every member of the gang without one, preempting where
    needed, each plan seeing the victims and members planned before it; commit only if the gang reaches
    its quorum, else evict nothing. The members planned are nominated and held until the evictions end.

    When the gang cannot be whole even so and ``pod`` (whose ``state`` and ``diagnosis`` they are) has no
    victim anywhere, it says so in upstream's words for a pod (``preemption: 0/N nodes are available: N No
    preemption victims found for incoming pod.``)."""
    fw = evaluator.handle.framework
    gangs = evaluator.handle.gangs
    pg = gangs.group(key)
    if pg is None:
        return None, Status(Code.UNSCHEDULABLE)
    placed = gangs.placed_members(key)
    need = pg.quorum - len(placed)
    if need <= 0:
        return None, Status(Code.UNSCHEDULABLE)   # whole already: a member beyond the quorum preempts nobody
    pods = evaluator.handle.pods
    members = [pods.get(u) for u in gangs.member_uids(key) if u not in placed]
    members = [m for m in members if m is not None and not m.node_name and not m.deleting
               and m.scheduler_name == pod.scheduler_name]
    if any(m.preemption_policy == "Never" for m in members):
        return None, Status(Code.UNSCHEDULABLE, "preemption: " + NOT_ELIGIBLE_NEVER)
    ev = evaluator.handle.preemption
    if any(ev is not None and ev.is_preempting(m.uid) for m in members):
        return None, Status(Code.UNSCHEDULABLE)   # its evictions are still under way
    if any(evaluator.victim_terminating(m) for m in members):
        # as PodEligibleToPreemptOthers for one pod: the gang's victims are still going; it keeps its room
        return None, Status(Code.UNSCHEDULABLE, "preemption: " + NOT_ELIGIBLE_TERMINATING)
    members.sort(key=lambda m: (m.uid != pod.uid, -m.requests.get("cpu", 0), -m.requests.get("memory", 0),
                                m.name))
    evaluator.errors = []
    try:
        plan = plan_gang(evaluator, members)
    except DryRunError as e:
        return None, e.status
    planned = len(plan)
    if planned < need and evaluator.errors:
        return None, Status(Code.ERROR, "preemption: " + evaluator.errors[0].message())   # as for a single pod
    if planned < need or not any(vs for _, _, vs in plan):
        # evict nothing: the gang would not be whole, or need not. When it would not be whole, the nominations
        # from an earlier preemption go (upstream clears a pod's when no candidate is left): they would hold
        # room the gang cannot use. When it fits without evicting, its members' nominations are part of why
        # (a sibling's room, freed by a preemption that ended): they stay, and only this pod's goes
        if ev is not None and planned < need:
            ev.withdraw(members)
        why = ""
        # a member no node can be helped for (every rejection unresolvable: a device claim, say, which the dry
        # runs do not model) says so as a pod would, even if the plan placed it without evicting
        hopeless = diagnosis is not None and not len(evaluator.potential_rows(diagnosis))
        if (planned < need or hopeless) and state is not None and diagnosis is not None:
            evaluator.errors = []
            saved = evaluator.rng.getstate()
            cands, fit_error = evaluator.find_candidates(state, pod, diagnosis)
            evaluator.rng.setstate(saved)
            why = "" if cands or evaluator.errors else "preemption: " + fit_error
        return PostFilterResult(nominated_node=""), Status(Code.UNSCHEDULABLE, *([why] if why else []))
    if ev is not None:
        ev.preempt_group(fw, plan, sync=sync)
    mine = next((n for m, n, _ in plan if m.uid == pod.uid), "")
    return PostFilterResult(nominated_node=mine), _OK


def plan_gang(evaluator: Evaluator, members: list[Pod]) -> list[tuple[Pod, str, list[Pod]]]:
    """A node for each of ``members`` in turn (its victims lifted and it assumed there for the next ones' dry
    runs), then every what-if taken back: the cache is as it was. A member that fits nowhere even so has none."""
    fw = evaluator.handle.framework
    handle = evaluator.handle
    nodes = handle.nodes
    plan: list[tuple[Pod, str, list[Pod]]] = []
    lifted: list[Any] = []
    assumed: list[Pod] = []
    try:
        for m in members:
            s = CycleState()
            rows, st, diag = fw.run_pre_filter(s, m)
            if st.code == Code.ERROR:
                raise DryRunError(st)
            if not st.is_success():
                continue
            feasible, st = fw.run_filter_with_nominated(s, m, rows, diag)
            if st.code == Code.ERROR:
                raise DryRunError(st)
            diag.num_all_nodes = len(nodes)
            victims: list[Pod] = []
            if len(feasible):
                total, st = fw.run_score(s, m, feasible)
                row = int(feasible[int(np.argmax(total))]) if st.is_success() else int(feasible[0])
                node = nodes.names[row]
            else:
                cands, _ = evaluator.find_candidates(s, m, diag)
                if not cands:
                    continue   # this member would not fit even so: nothing is evicted for it
                best = evaluator.select(cands)
                node, victims = best.node, best.victims
                for v in victims:
                    st_v = handle.lift(v.uid)
                    if st_v is not None:
                        lifted.append(st_v)
            handle.assume(m, node)
            assumed.append(m)
            plan.append((m, node, victims))
    finally:
        for m in assumed:
            handle.forget(m)
        for st_v in reversed(lifted):
            handle.restore(st_v)
    return plan
