"""Preemption for PostFilter plugins, as upstream's pkg/scheduler/framework/preemption.

* :mod:`.preemption`: the evaluator (candidates, dry runs, PodDisruptionBudgets, selection);
* :mod:`.candidates`: a candidate node and its victims, and many as columns;
* :mod:`.podgrouppreemption`: a gang member preempts for its whole gang, or not at all.

The executor, which evicts off the scheduling cycle, is the scheduler's (scheduler/executor.py), reached
through ``handle.preemption``. Plugins may import this package (it is part of ``scheduler.framework``).
"""

from scheduler.framework.preemption.candidates import OFFSET, Candidate, Candidates, num_candidates
from scheduler.framework.preemption.podgrouppreemption import plan_gang, preempt_for_gang
from scheduler.framework.preemption.preemption import (
    NO_VICTIMS, NOT_ELIGIBLE_NEVER, NOT_ELIGIBLE_TERMINATING, NOT_HELPFUL, Evaluator, terminating_by_preemption,
)

__all__ = [
    "NOT_ELIGIBLE_NEVER", "NOT_ELIGIBLE_TERMINATING", "NOT_HELPFUL", "NO_VICTIMS", "OFFSET", "Candidate",
    "Candidates", "Evaluator", "num_candidates", "plan_gang", "preempt_for_gang", "terminating_by_preemption",
]
