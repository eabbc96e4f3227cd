"""DefaultPreemption: upstream's PostFilter that evicts lower-priority pods for a pod that fits nowhere.

The plugin (upstream's plugins/defaultpreemption/default_preemption.go):
its args, PreEnqueue, PostFilter, eligibility and the messages. What it
decides in the scheduling cycle is the evaluator's, which it is
(scheduler/framework/preemption/: candidates, dry runs, PDBs, selection, and
gang preemption), given the plugin's args:

* **Eligibility** (PodEligibleToPreemptOthers): never with ``preemptionPolicy:
  Never``; not again while a pod of lower priority terminates by preemption
  on the pod's nominated node (unless that node became unresolvable).
* **Candidates, victims, the node**: see scheduler/framework/preemption/preemption.py.
* **Gangs**: a gang member that fits nowhere preempts for every missing
  member of its gang at once, or for none
  (scheduler/framework/preemption/podgrouppreemption.py).

The evictions are not done here: ``handle.preemption`` (scheduler/executor.py)
runs them off the cycle; until that ends, PreEnqueue holds the preemptor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scheduler.framework import Code, ConfigError, CycleState, Status, register
from scheduler.framework.interface import PostFilterResult
from scheduler.framework.preemption import (
    NO_VICTIMS, NOT_ELIGIBLE_NEVER, NOT_ELIGIBLE_TERMINATING, NOT_HELPFUL, OFFSET, Candidate, Candidates, Evaluator,
    num_candidates, preempt_for_gang, terminating_by_preemption,
)
from scheduler.model import Pod

if TYPE_CHECKING:
    from scheduler.framework.handle import Handle

__all__ = [
    "NAME", "NOT_ELIGIBLE_NEVER", "NOT_ELIGIBLE_TERMINATING", "NOT_HELPFUL", "NO_VICTIMS", "OFFSET", "WAITING",
    "Candidate", "Candidates", "DefaultPreemption", "DefaultPreemptionArgs", "num_candidates",
    "terminating_by_preemption",
]

NAME = "DefaultPreemption"
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



@register
class DefaultPreemption(Evaluator):
    NAME = NAME
    EXTENSION_POINTS = frozenset({"PreEnqueue", "PostFilter"})
    Args = DefaultPreemptionArgs

    def __init__(self, args: DefaultPreemptionArgs | None, handle: Handle) -> None:
        self.args = args if args is not None else DefaultPreemptionArgs()
        super().__init__(handle, self.args.min_candidate_nodes_percentage, self.args.min_candidate_nodes_absolute)

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
            return preempt_for_gang(self, pod, key, sync=not self.args.async_preemption, state=state,
                                    diagnosis=diagnosis)
        ok, msg = self.eligible(pod, diagnosis)
        if not ok:
            return None, Status(Code.UNSCHEDULABLE, "preemption: " + msg)
        self.errors = []
        cands, fit_error = self.find_candidates(state, pod, diagnosis)
        if not cands and self.errors:
            return None, Status(Code.ERROR, "preemption: " + self.errors[0].message())
        if not cands:
            result = PostFilterResult(nominated_node="")   # clears a nomination it may have had
            return result, Status(Code.UNSCHEDULABLE, "preemption: " + fit_error)
        best = self.select(cands)
        if ev is not None:
            ev.preempt(fw, pod, best.node, best.victims, sync=not self.args.async_preemption)
        return PostFilterResult(nominated_node=best.node), _OK

    # ------------------------------------------------------------------ eligibility

    def eligible(self, pod: Pod, diagnosis: Any) -> tuple[bool, str]:
        """PodEligibleToPreemptOthers."""
        if pod.preemption_policy == "Never":
            return False, NOT_ELIGIBLE_NEVER
        node = self.handle.nominations.get(pod.uid) or pod.nominated_node_name
        if node:
            row = self.handle.nodes.row(node)
            unresolvable = diagnosis.unresolvable_rows if diagnosis is not None else None
            if row is not None and unresolvable is not None and bool((unresolvable == row).any()):
                return True, ""
            if self.victim_terminating(pod):
                return False, NOT_ELIGIBLE_TERMINATING
        return True, ""
