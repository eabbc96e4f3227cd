"""The scheduling cycle (upstream's pkg/scheduler/schedule_one.go, up to the binding cycle).

:meth:`ScheduleOne.schedule_one` runs one pod through PreFilter, Filter,
PostFilter, Score, the pick of a node, assume, Reserve and Permit; a pod that
leaves the cycle gets a binding task (binding.py), a pod that fails is
requeued and reported (``_report``, ``_fail`` in binding.py). The cycle is
in two halves that the group cycle (groupcycle.py) also runs apart:
:meth:`ScheduleOne._place` (up to Reserve: the pod holds a node, reported
nowhere) and :meth:`ScheduleOne._commit` (Permit and the binding task), with
:meth:`ScheduleOne._report` for a pod that found no node. A topology gang's
members are placed in a domain and, if the gang does not fit there, taken
back (:meth:`ScheduleOne._take_back`) before any of them is reported.

Failures are contained here, as upstream's handleSchedulingFailure does: a
plugin's exception is a Status(ERROR) (framework/runtime.py), and an
exception anywhere else in a cycle is caught, logged once with its
traceback, and becomes reason SchedulerError: what the pod held is released
(Unreserve, forget), and the pod goes back to the queue with backoff.

Nothing here may await or otherwise yield to the event loop: the cache cannot
change under a cycle, so no snapshot is taken, and only the gang in its group
cycle can hold partial reservations, so gangs never deadlock. This is the hot
path (about 0.37 ms a pod at 5,000 nodes): per-pod work stays on numpy
columns, with no Python loop over nodes and no extra indirection per pod.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import random
import time
from typing import TYPE_CHECKING, Any, Awaitable

import numpy as np

from scheduler.config import SchedulerConfig
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interface import ActionType, ClusterEvent, Resource
from scheduler.framework.runtime import Diagnosis, Framework
from scheduler.framework.status import Code, Status
from scheduler.model import Pod, group_conflict
from scheduler.queue import QueuedPodInfo, SchedulingQueue
from scheduler.state.reservations import CAPACITY_FILTERS, ENDED, Reservation
from scheduler.state.cache import Cache

if TYPE_CHECKING:
    from scheduler.consolidation import Rebalancer
    from scheduler.executor import Preemption

log = logging.getLogger("tandem.scheduler")

# kube-scheduler's sampling constants (schedule_one.go)
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
BASE_PERCENTAGE_OF_NODES_TO_SCORE = 50

# where an attempt ended without a node (Attempt.stage)
GONE = "gone"                 # deleted, bound elsewhere or going away: nothing to schedule
INVALID = "invalid"           # the scheduler cannot use the pod (a parse problem, an unknown priority class)
UNSUPPORTED = "unsupported"   # a field this profile does not evaluate
DRA = "DynamicResources"
PRE_FILTER = "prefilter"      # a PreFilter plugin rejected it: the same on every node, in every domain
FILTER = "filter"             # no node passed Filter (or PreFilter left none in the gang's domain)
RESERVE = "reserve"           # a Reserve plugin refused the node it had
ERROR = "error"               # a plugin's error (Status ERROR), at PreFilter, Filter or Score
RAISED = "raised"             # an exception outside the plugins' calls


def num_feasible_nodes_to_find(num_all_nodes: int, percentage: int) -> int:
    """How many feasible nodes upstream looks for before it stops filtering (0 or 100 = adaptive/all rules)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage >= 100:
        return num_all_nodes
    if percentage <= 0:
        percentage = BASE_PERCENTAGE_OF_NODES_TO_SCORE - num_all_nodes // 125
        percentage = max(percentage, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    n = num_all_nodes * percentage // 100
    return max(n, MIN_FEASIBLE_NODES_TO_FIND)


def _plugin_raised(plugin: str, point: str, exc: Exception) -> str:
    """Log a plugin's exception once, with its traceback; the SchedulerError message the pods get."""
    log.error("plugin %s failed at %s", plugin, point, exc_info=exc)
    return f'running {point} plugin "{plugin}": {Status.from_error(exc).message()}'


@dataclasses.dataclass(slots=True)
class Attempt:
    """One pod's cycle up to Reserve (:meth:`ScheduleOne._place`): the node it holds, or why it has none."""

    qi: QueuedPodInfo
    t0: float                          # perf_counter() when the cycle began (the attempt's duration metric)
    state: CycleState | None = None
    node: str = ""                     # assumed and reserved there ("" when it has no node)
    stage: str = ""                    # where it failed (GONE, PRE_FILTER, ...); "" when it holds a node
    status: Status | None = None       # why it failed
    diag: Diagnosis | None = None      # PreFilter's and Filter's verdicts, for the message and the hints
    message: str = ""                  # the report's message where it is not the status's or the diagnosis's
    field: str = ""                    # UNSUPPORTED: the field it uses


class ScheduleOne:
    """The scheduling cycle of :class:`~scheduler.scheduler.Scheduler`, whose ``__init__`` sets this state."""

    config: SchedulerConfig
    cache: Cache
    queue: SchedulingQueue
    frameworks: dict[str, Framework]
    pods: dict[str, Pod]
    priority_classes: set[str] | None
    metrics: Any
    preemption: Preemption
    rebalancer: "Rebalancer"
    rng: random.Random
    next_start: int
    _in_group: bool                    # a group cycle is under way: its gang holds capacity as one unit
    cycle_durations: list[float]

    if TYPE_CHECKING:
        # what the cycle calls of the binding mixin (binding.py) and of the Scheduler (scheduler.py), which
        # define them; declared for the reader and the type checker only (no runtime attribute, no MRO effect)
        async def _binding_cycle(self, fw: Framework, state: CycleState, qi: QueuedPodInfo, node: str) -> None: ...

        def _fail(self, fw: Framework, qi: QueuedPodInfo, st: Status, reason: str, message: str,
                  done: bool = False, nominated: str | None = None, retry: bool = False) -> None: ...

        def _bind_together(self, fw: Framework, pod: Pod, wait: bool) -> None: ...

        def _released_from_gang_bind(self, uid: str) -> None: ...

        def _spawn(self, coro: Awaitable[Any], what: str) -> None: ...

        def _hold_pod(self, fw: Framework, qi: QueuedPodInfo) -> None: ...

        def _end_hold(self, r: Reservation, result: str) -> None: ...

    # ------------------------------------------------------------------ the scheduling cycle

    def schedule_one(self, qi: QueuedPodInfo) -> Status | None:
        """One scheduling cycle. Synchronous: the cache cannot change under it.

        Returns None when the pod left the cycle for binding (or needs no scheduling any more), else
        the status it failed with (it is already requeued and reported).
        """
        fw = self.frameworks[qi.profile]
        a = self._place(fw, qi, time.perf_counter())
        if a.node:
            return self._commit(fw, a)
        try:
            return self._report(fw, a)
        except Exception as exc:  # a bug in the reporting itself: contained here
            return self._cycle_raised(fw, qi, None, None, exc)

    def _place(self, fw: Framework, qi: QueuedPodInfo, t0: float, trial: bool = False) -> Attempt:
        """The cycle up to Reserve: PreFilter, Filter, Score, the pick of a node, assume, Reserve.

        Reports nothing and never raises: the :class:`Attempt` holds the node (assumed and reserved) or
        where and why the pod found none. ``trial``: a topology gang's try of one domain, which may be taken
        back (:meth:`_take_back`): the pod's nomination stays until its gang commits.
        """
        pod = qi.pod
        a = Attempt(qi, t0)
        try:
            if self._unusable(fw, qi, a):
                return a
            if self.cache.moves.awaiting:
                self.rebalancer.steer(pod)   # a moved pod's replacement: nominated to its planned node
            state = a.state = CycleState()
            rows, st, diag = fw.run_pre_filter(state, pod)
            a.diag = diag
            feasible = rows
            nominated = None
            if st.is_success():
                if self.cache.nominations or pod.nominated_node_name:
                    nominated = self._on_nominated_node(fw, state, pod, rows)
                if nominated is not None:
                    feasible = nominated
                else:
                    feasible, st = fw.run_filter_with_nominated(state, pod, rows, diag)
                stage = FILTER
            else:
                stage = PRE_FILTER
            if st.code == Code.ERROR:
                a.stage, a.status = ERROR, st
                return a
            diag.num_all_nodes = len(self.cache.nodes)
            if len(feasible) == 0:
                a.stage, a.status = stage, st
                return a
            if nominated is None:
                feasible = self._sample(fw, feasible)
            if len(feasible) == 1:
                row = int(feasible[0])
            else:
                total, st = fw.run_score(state, pod, feasible)
                if not st.is_success():
                    a.stage, a.status = ERROR, st
                    return a
                best = np.flatnonzero(total == total.max())
                row = int(feasible[best[self.rng.randrange(len(best))]] if len(best) > 1 else feasible[best[0]])
            node = a.node = self.cache.nodes.names[row]
            self.cache.assume(pod, node)   # node set first: an assume that fails half-way is released below
            if self.cache.nominations and not trial:
                self.cache.nominations.clear(pod.uid)   # it has a node now (upstream: DeleteNominatedPodIfExists)
            qi.released = False
            st = fw.run_reserve(state, pod, node)
            if not st.is_success():
                self._release(fw, state, qi, node, quiet=trial)
                a.node, a.stage, a.status = "", RESERVE, st
            return a
        except Exception as exc:  # a bug outside the plugins' calls (which return Status(ERROR)): contained here
            log.exception("scheduling cycle of %s failed", pod.key)
            if a.node and a.state is not None and self.cache.is_assumed(pod.uid):
                self._release(fw, a.state, qi, a.node, quiet=trial)
            a.node, a.stage = "", RAISED
            a.message = f"scheduling cycle failed: {Status.from_error(exc).message()}"
            a.status = Status(Code.ERROR, a.message, error=exc)
            return a

    def _unusable(self, fw: Framework, qi: QueuedPodInfo, a: Attempt) -> bool:
        """Is there no cycle to run for the pod? Then ``a`` says why: gone, invalid, or using a field the
        profile does not evaluate."""
        pod = qi.pod
        latest = self.pods.get(pod.uid)
        if latest is None or latest.node_name or latest.deleting:
            a.stage = GONE   # deleted, bound elsewhere, or going away (skipPodSchedule)
            return True
        problem = self._pod_problem(pod)
        if problem:
            a.stage, a.message = INVALID, f"pod {pod.key} is invalid: {problem}"
            a.status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"pod is invalid: {problem}")
            return True
        field_, why = unsupported(pod, fw.gang is not None)
        if why:
            a.stage, a.field = UNSUPPORTED, field_
            a.status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, why)
            return True
        return False

    def _commit(self, fw: Framework, a: Attempt) -> Status | None:
        """The cycle from Permit on, for a pod :meth:`_place` gave a node: Permit, then its binding task."""
        qi, state, node = a.qi, a.state, a.node
        assert state is not None
        pod = qi.pod
        try:
            if self.cache.nominations:
                self.cache.nominations.clear(pod.uid)   # a topology gang's member keeps it until here
            st = fw.run_permit(state, pod, node)
            if not st.is_success() and not st.is_wait():
                self._release(fw, state, qi, node)
                if st.plugin:
                    qi.unschedulable_plugins = {st.plugin}
                self._fail(fw, qi, st, reason="SchedulerError" if st.code == Code.ERROR else "Unschedulable",
                           message=st.message())
                return st
            wait = st.is_wait()
            if wait:
                wp = fw.get_waiting_pod(pod.uid)
                if wp is not None:
                    wp.on_reject = functools.partial(self._release, fw, state, qi, node)
            if pod.gang and fw.gang is not None:
                # a gang's members bind together once past Permit (a pod its gang plugin schedules alone passes
                # Permit at once, and binds alone: a round of one)
                self._bind_together(fw, pod, wait)
            self._record_cycle(a.t0, "scheduled", fw)
            self._spawn(self._binding_cycle(fw, state, qi, node), f"binding {pod.key}")
            return None
        except Exception as exc:  # a bug outside the plugins' calls (which return Status(ERROR)): contained here
            return self._cycle_raised(fw, qi, state, node, exc)

    def _report(self, fw: Framework, a: Attempt, post_filter: bool = True) -> Status | None:
        """Requeue and report a pod :meth:`_place` found no node for; None if it needs no scheduling any more.

        ``post_filter``: run PostFilter (preemption) for a pod no node passed. A topology gang's members
        do not: their domain was tried whole, and preemption plans for one domain only in a gang's cycle.
        """
        qi, st = a.qi, a.status
        stage = a.stage
        if stage == GONE:
            self.queue.done(qi.uid)
            return None
        assert st is not None
        if stage == UNSUPPORTED:
            return self._refuse_unsupported(fw, qi, a.field, st, a.t0)
        if stage in (INVALID, ERROR, RAISED):
            self._fail(fw, qi, st, reason="SchedulerError", message=a.message or st.message())
            return st
        if stage == RESERVE:
            self._fail(fw, qi, st, reason="SchedulerError" if st.code == Code.ERROR else "Unschedulable",
                       message=st.message())
            return st
        diag = a.diag
        assert diag is not None and a.state is not None
        nominate = None
        errored = False
        # upstream runs PostFilter after any rejection; tandem after DynamicResources' PreFilter too (its
        # messages, `... no new claims to deallocate, preemption: ...`), not after other PreFilters' (see
        # tests/integration/test_messages_kube_scheduler.py, REFUSED_AT_PRE_FILTER)
        after_dra = stage == PRE_FILTER and DRA in diag.unschedulable_plugins
        if post_filter and (st.code != Code.UNSCHEDULABLE_AND_UNRESOLVABLE or after_dra) and fw.post_filter_plugins:
            result, pst = fw.run_post_filter(a.state, qi.pod, diag)
            if pst.code == Code.ERROR:
                # upstream logs it and reports the pod Unschedulable, the error after the nodes' reasons
                log.error("PostFilter of %s failed: %s", qi.pod.key, pst.message())
                errored = True
            if pst.reasons and not pst.is_success():
                diag.post_filter_msg = pst.message()
            if result is not None:
                nominate = result.nominated_node   # "" clears the pod's nomination
        qi.unschedulable_plugins = set(diag.unschedulable_plugins)   # a gang's alike members may share one diag
        code = st.code if st.is_rejected() else Code.UNSCHEDULABLE
        st = Status(code, diag.message())
        self._fail(fw, qi, st, reason="Unschedulable", message=diag.message(), nominated=nominate)
        self._record_cycle(a.t0, "unschedulable", fw)
        held = self.cache.nominations.held
        if nominate and held.member_of and qi.uid in held.member_of:
            self._end_hold(held.member_of[qi.uid], ENDED)   # preemption helps it now: its hold goes
        elif (code == Code.UNSCHEDULABLE and stage == FILTER and not errored and not nominate and not self._in_group
                and diag.unschedulable_plugins & CAPACITY_FILTERS and not self.preemption.is_preempting(qi.uid)):
            # preemption did not help: the pod may hold capacity as the head of its profile's line (holding.py)
            self._hold_pod(fw, qi)
        # a PostFilter error is no verdict on a gang: its group cycle rejects the gang whole (groupcycle.py)
        return Status(Code.ERROR, diag.message()) if errored else st

    def _take_back(self, fw: Framework, attempts: list[Attempt]) -> None:
        """Undo :meth:`_place` for pods that hold a node (a topology gang's domain that did not fit it):
        Unreserve and forget each, last first. They were never reported and stay in the cycle."""
        for a in reversed(attempts):
            if a.node and a.state is not None:
                self._release(fw, a.state, a.qi, a.node, quiet=True)
                a.qi.released = False   # still in the cycle: the next try assumes it again
                a.node = ""

    def _requeue_if_stranded(self, qi: QueuedPodInfo) -> None:
        """The last resort of the loop: a popped pod that an escaped exception left in flight, unassumed and
        not waiting, goes to backoff (a pod waiting at Permit or binding has a task that reports it)."""
        if self.queue.where.get(qi.uid) == "inflight" and not qi.released and not self.cache.is_assumed(qi.uid):
            self.queue.requeue_failed(qi, unschedulable=False)

    def _cycle_raised(self, fw: Framework, qi: QueuedPodInfo, state: CycleState | None, node: str | None,
                      exc: Exception) -> Status:
        """An exception escaped the cycle: give back what the pod holds and requeue it as SchedulerError.

        The binding task is the cycle's last step, so none exists for this pod: a Permit wait it started
        has nobody to await it, and is dropped here. Logged once, with the traceback.
        """
        pod = qi.pod
        log.exception("scheduling cycle of %s failed", pod.key)
        wp = fw.waiting.pop(pod.uid, None)
        if wp is not None:
            wp.cancel_timers()
        if node is not None and state is not None and self.cache.is_assumed(pod.uid):
            self._release(fw, state, qi, node)
        msg = f"scheduling cycle failed: {Status.from_error(exc).message()}"
        st = Status(Code.ERROR, msg, error=exc)
        self._fail(fw, qi, st, reason="SchedulerError", message=msg)
        return st

    def _on_nominated_node(self, fw: Framework, state: CycleState, pod: Pod, rows: np.ndarray) -> np.ndarray | None:
        """evaluateNominatedNode: a pod nominated by preemption tries that node first; its row if the pod fits."""
        node = self.cache.nominations.get(pod.uid) or pod.nominated_node_name
        if not node:
            return None
        nodes = self.cache.nodes
        row = nodes.row(node)
        if row is None or not nodes.valid[row]:
            return None
        i = int(np.searchsorted(rows, row))
        if i >= len(rows) or rows[i] != row:
            return None   # PreFilter ruled it out
        passed, st = fw.run_filter_with_nominated(state, pod, rows[i:i + 1], Diagnosis())
        return passed if st.is_success() and len(passed) else None

    def _release(self, fw: Framework, state: CycleState, qi: QueuedPodInfo, node: str, quiet: bool = False) -> None:
        """Give back what an assumed pod holds: Unreserve, forget, and tell the queue the room is free. Once.

        ``quiet``: a topology gang's try taken back inside its group cycle; the room was never anyone
        else's to miss, so no pod is requeued for it. A pod that binds with its gang (binding.py) fails
        its gang's binds once released.
        """
        if qi.released:
            return
        qi.released = True
        pod = qi.pod
        fw.run_unreserve(state, pod, node)
        self.cache.forget(pod)
        if quiet:
            return
        self._released_from_gang_bind(qi.uid)
        # pods it blocked may fit now. The event carries the pod as assumed, on its node (upstream passes
        # assumedPod): hints such as NodeResourcesFit's ignore the delete of a pod that held no node.
        assumed = dataclasses.replace(pod, node_name=node)
        self.queue.on_event(ClusterEvent(Resource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"), assumed, None)

    def _sample(self, fw: Framework, feasible: np.ndarray) -> np.ndarray:
        """percentageOfNodesToScore: keep the nodes upstream would have found, in its round-robin order."""
        pct = fw.profile.percentage_of_nodes_to_score
        if pct is None:
            pct = self.config.percentage_of_nodes_to_score
        if pct is None:
            pct = 0  # upstream's adaptive default: measured cheaper than scoring everything (README)
        if pct >= 100:
            return feasible
        total = len(self.cache.nodes)
        k = num_feasible_nodes_to_find(total, pct)
        if len(feasible) <= k:
            self.next_start = (self.next_start + total) % max(total, 1)
            return feasible
        start = self.next_start % max(self.cache.nodes.n, 1)
        cut = int(np.searchsorted(feasible, start))
        rotated = np.concatenate([feasible[cut:], feasible[:cut]])
        chosen = rotated[:k]
        self.next_start = int(chosen[-1]) + 1
        return np.sort(chosen)

    def _record_cycle(self, t0: float, result: str, fw: Framework) -> None:
        d = time.perf_counter() - t0
        if len(self.cycle_durations) < 1_000_000:
            self.cycle_durations.append(d)
        if self.metrics is not None:
            self.metrics.observe_attempt(result, fw.name, d)

    # ------------------------------------------------------------------ pods the cycle cannot use

    def _refuse_unsupported(self, fw: Framework, qi: QueuedPodInfo, field_: str, why: Status, t0: float) -> Status:
        """Refuse a pod that uses a field this profile does not evaluate (see :func:`unsupported`).

        Unschedulable, UnschedulableAndUnresolvable, in upstream's FitError words (``0/N nodes are
        available: <why>.``), so the pod's condition and FailedScheduling event name the field. The field
        is immutable, so no cluster event can change the answer: the pod is parked with the field as its
        rejector, which no plugin registers events for, and waits for an update of its own or the
        periodic flush rather than being retried at every node or pod event.
        """
        qi.unschedulable_plugins = {field_}
        msg = Diagnosis(num_all_nodes=len(self.cache.nodes), pre_filter_msg=why.message()).message()
        self._fail(fw, qi, why, reason="Unschedulable", message=msg)
        self._record_cycle(t0, "unschedulable", fw)
        return why

    def _pod_problem(self, pod: Pod) -> str:
        """Why the scheduler cannot use this pod ("" = fine): a parse problem, or a priority it cannot know.

        The API server resolves priorityClassName into spec.priority at admission (and refuses a
        class that does not exist), so a pod naming a missing class without spec.priority got past
        admission somehow; its priority is unknown and guessing 0 could let it preempt or be preempted
        wrongly. It waits, reported, until the class exists.
        """
        if pod.invalid:
            return pod.invalid
        pc = pod.priority_class_name
        if (pc and self.priority_classes is not None and pc not in self.priority_classes
                and (pod.raw.get("spec") or {}).get("priority") is None):
            return (f'spec.priorityClassName: Not found: "{pc}": no PriorityClass with name {pc} was found '
                    f"and spec.priority is not set")
        return ""


def unsupported(pod: Pod, gangs: bool = True) -> tuple[str, str]:
    """(field, why) for a field of the pod this profile cannot honour, or ("", "").

    ``spec.schedulingGroup`` (1.36's native gangs) is evaluated by the profile's gang plugin
    (Coscheduling, or GangScheduling as upstream names it): a profile without one cannot keep a gang
    whole, and a member placed alone would break it, so the pod is refused naming the field. A pod that
    names a native group and a scheduler-plugins group both, or an empty podGroupName, is refused in
    every profile (model.group_conflict). Fields that only some plugins read (resource claims, volumes,
    node declared features) are refused, or evaluated, by those plugins, and a profile that disables
    one opts out of its field as in upstream.
    """
    if pod.scheduling_group is None:
        return "", ""
    conflict = group_conflict(pod)
    if conflict:
        return "spec.schedulingGroup", conflict
    if not gangs:
        return "spec.schedulingGroup", (f'pod uses spec.schedulingGroup (podGroupName "{pod.scheduling_group}"): '
                                        f"this profile has no gang plugin to keep its pod group whole "
                                        f"(enable GangScheduling or Coscheduling)")
    return "", ""
