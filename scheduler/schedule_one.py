"""The scheduling cycle and the group cycle (upstream's pkg/scheduler/schedule_one.go, up to the binding cycle).

:meth:`ScheduleOne.schedule_one` runs one pod through PreFilter, Filter,
PostFilter, Score, the pick of a node, assume, Reserve and Permit; a pod that
leaves the cycle gets a binding task (binding.py), a pod that fails is
requeued and reported (``_fail``, binding.py). :meth:`ScheduleOne.schedule_next`
runs a popped gang member together with its pending siblings, back to back:
the group cycle.

Failures are contained here, as upstream's handleSchedulingFailure does: a
plugin's exception is a Status(ERROR) (framework/runtime.py), and an
exception anywhere else in a cycle, in the Gang hooks or in the group cycle
is caught, logged once with its traceback, and becomes reason
SchedulerError for every pod involved: what the pod held is released
(Unreserve, forget), and the pod goes back to the queue with backoff. In a
group cycle an error rejects the whole gang together (``_reject_gang``).

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
from scheduler.framework.placement import DomainChoice, choose_domain, copies_per_node, topology_message
from scheduler.framework.runtime import Diagnosis, Framework
from scheduler.framework.status import Code, Status
from scheduler.model import Pod, PodGroup, group_conflict
from scheduler.queue import QueuedPodInfo, SchedulingQueue
from scheduler.state.cache import Cache

if TYPE_CHECKING:
    from scheduler.executor import Preemption

log = logging.getLogger("tandem.scheduler")

# kube-scheduler's sampling constants (schedule_one.go)
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
BASE_PERCENTAGE_OF_NODES_TO_SCORE = 50


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
    rng: random.Random
    next_start: int
    cycle_durations: list[float]

    if TYPE_CHECKING:
        # what the cycle calls of the binding mixin (binding.py) and of the Scheduler (scheduler.py), which
        # define them; declared for the reader and the type checker only (no runtime attribute, no MRO effect)
        async def _binding_cycle(self, fw: Framework, state: CycleState, qi: QueuedPodInfo, node: str) -> None: ...

        def _fail(self, fw: Framework, qi: QueuedPodInfo, st: Status, reason: str, message: str,
                  done: bool = False, nominated: str | None = None) -> None: ...

        def _spawn(self, coro: Awaitable[Any], what: str) -> None: ...

    # ------------------------------------------------------------------ the scheduling cycle

    def schedule_next(self, qi: QueuedPodInfo) -> None:
        """Schedule a popped pod: alone, or with the rest of its gang in one uninterrupted group cycle.

        Every exception is contained here, as upstream's handleSchedulingFailure contains an error:
        a cycle's own (schedule_one), the Gang hooks', and the group cycle's. Each pod involved ends
        queued with reason SchedulerError, waiting at Permit, binding, or bound; never in flight.
        """
        fw = self.frameworks[qi.profile]
        gang = fw.gang
        if gang is None:
            self.schedule_one(qi)
            return
        try:
            key = gang.gang_key(qi.pod)
        except Exception as exc:  # the Gang hooks bypass Framework._call: contained here
            msg = _plugin_raised(gang.NAME, "Gang", exc)
            self._fail(fw, qi, Status(Code.ERROR, msg, plugin=gang.NAME), reason="SchedulerError", message=msg)
            return
        if not key:
            self.schedule_one(qi)
            return
        members = [qi]
        try:
            members += self.queue.take_group(key, qi.profile)
            pg = self.cache.gangs.group(key)
            if pg is not None and pg.topology_key:
                choice = self._choose_domain(fw, key, pg, members)
                if not choice.fits:
                    self._no_domain(fw, key, members, choice)
                    return
                fw.placement = choice.mask
            self._group_cycle(fw, key, members)
        except Exception as exc:  # a bug in the group cycle itself: the gang is rejected as a whole
            log.exception("the group cycle of PodGroup %s failed", key)
            self._reject_gang(fw, key, members, f"PodGroup {key} gets rejected due to an error: "
                                                f"{Status.from_error(exc).message()}", "")
        finally:
            fw.placement = None

    # ------------------------------------------------------------------ topology-constrained gangs

    def _choose_domain(self, fw: Framework, key: str, pg: PodGroup, members: list[QueuedPodInfo]) -> DomainChoice:
        """The one domain of the PodGroup's topology key its members go into (framework/placement.py).

        Per member shape (same requests), the rows its PreFilter and Filter pass, as its own cycle computes
        them (on a throwaway CycleState), and the copies each row holds. Members already on a node fix the
        domain; placed in two domains (another scheduler's doing), none fits.
        """
        nodes = self.cache.nodes
        tkey = pg.topology_key
        placed = self.cache.gangs.placed_members(key)
        required: str | None = None
        if placed:
            ids = nodes.label(tkey)
            seen: set[int] = set()
            for node in placed.values():   # the gang's members, never the nodes
                row = nodes.row(node)
                seen.add(int(ids[row]) if ids is not None and row is not None else 0)
            values = nodes.label_values(tkey)
            required = values[seen.pop()] if len(seen) == 1 else ""
        shapes: dict[tuple, tuple[Pod, int]] = {}
        for m in members:
            shape = tuple(sorted(m.pod.requests.items()))
            first, count = shapes.get(shape, (m.pod, 0))
            shapes[shape] = (first, count + 1)
        fits: list[tuple[np.ndarray, np.ndarray, int]] = []
        for pod, count in shapes.values():
            state = CycleState()
            rows, st, diag = fw.run_pre_filter(state, pod)
            if st.is_success():
                rows, st = fw.run_filter_with_nominated(state, pod, rows, diag)
            if not st.is_success() or not len(rows):
                continue
            fits.append((rows, copies_per_node(nodes, rows, pod.requests), count))
        need = max(pg.quorum - len(placed), 0)
        return choose_domain(nodes, tkey, fits, need, required)

    def _no_domain(self, fw: Framework, key: str, members: list[QueuedPodInfo], choice: DomainChoice) -> None:
        """No single domain fits the gang: none of it is placed. Its pods say so with tandem's numbers, its
        members waiting at Permit (a partly placed gang's) are rejected, and it waits for the cluster to change."""
        gang = fw.gang   # a profile with a gang plugin: schedule_next asks this only then
        assert gang is not None
        msg = f"pod group is unschedulable: {topology_message(choice)}"
        if hasattr(gang, "give_up"):
            gang.give_up(key, msg)
        for m in members:
            m.unschedulable_plugins = {gang.NAME}
            self._fail(fw, m, Status(Code.UNSCHEDULABLE, msg, plugin=gang.NAME), reason="Unschedulable", message=msg)

    def _group_cycle(self, fw: Framework, key: str, members: list[QueuedPodInfo]) -> None:
        """The members' cycles back to back, largest first; a member's verdict may end the gang's attempt."""
        gang = fw.gang
        # largest first (first-fit decreasing): a small member placed first must not take the only node a
        # big one fits on, since a gang that fails is not retried until the cluster changes
        members.sort(key=lambda m: (-m.pod.priority, -m.pod.requests.get("cpu", 0),
                                    -m.pod.requests.get("memory", 0), m.timestamp))
        for i, member in enumerate(members):
            failed = self.schedule_one(member)
            if failed is None:
                continue
            if failed.code == Code.ERROR:
                # an error is no verdict on the gang: the whole gang is rejected together, every member to
                # backoff with reason SchedulerError (the member itself is already there)
                self._reject_gang(fw, key, members, f"PodGroup {key} gets rejected due to Pod {member.pod.name} "
                                                    f"failed with an error: {failed.message()}", failed.plugin)
                return
            if self.preemption.is_preempting(member.pod.uid):
                # its PostFilter planned room for every missing member and started the evictions: the members
                # not tried yet wait with it (held at PreEnqueue, nominated); those waiting at Permit keep waiting
                msg = failed.message()
                for rest in members[i + 1:]:
                    self._fail(fw, rest, Status(Code.UNSCHEDULABLE, msg, plugin="DefaultPreemption"),
                               reason="Unschedulable", message=msg)
                return
            # one member cannot be placed. If the gang cannot be whole now, the plugin rejects the
            # members waiting at Permit (their room is released synchronously, see _release) and the
            # members not tried yet go back to the queue with the gang's reason.
            try:
                msg = gang.gang_failed(member.pod, failed)
            except Exception as exc:  # the Gang hooks bypass Framework._call: contained here
                self._reject_gang(fw, key, members, _plugin_raised(gang.NAME, "Gang", exc), gang.NAME)
                return
            if not msg:
                continue  # the gang can still be whole (quorum reached, or enough members left to try)
            for rest in members[i + 1:]:
                rest.unschedulable_plugins = {gang.NAME}
                self._fail(fw, rest, Status(Code.UNSCHEDULABLE, msg, plugin=gang.NAME), reason="Unschedulable",
                           message=msg)
            return

    def _reject_gang(self, fw: Framework, key: str, members: list[QueuedPodInfo], msg: str, plugin: str) -> None:
        """A group cycle ended in an error: reject the whole gang together, as SchedulerError.

        The gang's members waiting at Permit (from this cycle or an earlier one) are rejected with Error:
        each one's room is released once (``on_reject`` -> ``_release``: Unreserve, forget) and its
        binding task reports it and requeues it with backoff. One a plugin rejected moments ago (a
        sibling's Unreserve, before this) reports the error too (``Framework.reject_waiting``). Every other member still in flight (not
        tried yet, or whose cycle stopped short) is reported and requeued with backoff here. Members
        Permit already allowed are binding, and members already requeued stay where they are.
        """
        uids = set(self.cache.gangs.member_uids(key))
        uids.update(m.uid for m in members)
        st = Status(Code.ERROR, msg, plugin=plugin)
        fw.reject_waiting(uids, st)
        queue = self.queue
        for uid in uids:
            qi = queue.infos.get(uid)
            # released: a rejected waiting pod, whose binding task reports it (once)
            if (qi is not None and queue.where.get(uid) == "inflight" and not qi.released
                    and not self.cache.is_assumed(uid)):
                self._fail(fw, qi, st, reason="SchedulerError", message=msg)

    def _requeue_if_stranded(self, qi: QueuedPodInfo) -> None:
        """The last resort of the loop: a popped pod that an escaped exception left in flight, unassumed and
        not waiting, goes to backoff (a pod waiting at Permit or binding has a task that reports it)."""
        if self.queue.where.get(qi.uid) == "inflight" and not qi.released and not self.cache.is_assumed(qi.uid):
            self.queue.requeue_failed(qi, unschedulable=False)

    def schedule_one(self, qi: QueuedPodInfo) -> Status | None:
        """One scheduling cycle. Synchronous: the cache cannot change under it.

        Returns None when the pod left the cycle for binding (or needs no scheduling any more), else
        the status it failed with (it is already requeued and reported).
        """
        t0 = time.perf_counter()
        pod = qi.pod
        fw = self.frameworks[qi.profile]
        node: str | None = None   # set once the pod is assumed: the release below needs it
        try:
            latest = self.pods.get(pod.uid)
            if latest is None or latest.node_name or latest.deleting:
                self.queue.done(pod.uid)  # deleted, bound elsewhere, or going away (skipPodSchedule)
                return None
            problem = self._pod_problem(pod)
            if problem:
                st = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"pod is invalid: {problem}")
                self._fail(fw, qi, st, reason="SchedulerError", message=f"pod {pod.key} is invalid: {problem}")
                return st
            st = self._refuse_unsupported(fw, qi, t0)
            if st is not None:
                return st
            state = CycleState()
            rows, st, diag = fw.run_pre_filter(state, pod)
            feasible = rows
            nominated = None
            if st.is_success():
                if self.cache.nominations or pod.nominated_node_name:
                    nominated = self._on_nominated_node(fw, state, pod, rows)
                if nominated is not None:
                    feasible = nominated
                else:
                    feasible, st = fw.run_filter_with_nominated(state, pod, rows, diag)
            if st.code == Code.ERROR:
                self._fail(fw, qi, st, reason="SchedulerError", message=st.message())
                return st
            diag.num_all_nodes = len(self.cache.nodes)
            if len(feasible) == 0:
                nominate = None
                if st.code != Code.UNSCHEDULABLE_AND_UNRESOLVABLE and fw.post_filter_plugins:
                    result, pst = fw.run_post_filter(state, pod, diag)
                    if pst.code == Code.ERROR:
                        self._fail(fw, qi, pst, reason="SchedulerError", message=pst.message())
                        return pst
                    if pst.reasons and not pst.is_success():
                        diag.post_filter_msg = pst.message()
                    if result is not None:
                        nominate = result.nominated_node   # "" clears the pod's nomination
                qi.unschedulable_plugins = diag.unschedulable_plugins
                code = st.code if st.is_rejected() else Code.UNSCHEDULABLE
                st = Status(code, diag.message())
                self._fail(fw, qi, st, reason="Unschedulable", message=diag.message(), nominated=nominate)
                self._record_cycle(t0, "unschedulable", fw)
                return st
            if nominated is None:
                feasible = self._sample(fw, feasible)
            if len(feasible) == 1:
                row = int(feasible[0])
            else:
                total, st = fw.run_score(state, pod, feasible)
                if not st.is_success():
                    self._fail(fw, qi, st, reason="SchedulerError", message=st.message())
                    return st
                best = np.flatnonzero(total == total.max())
                row = int(feasible[best[self.rng.randrange(len(best))]] if len(best) > 1 else feasible[best[0]])
            node = self.cache.nodes.names[row]
            self.cache.assume(pod, node)   # set first: an assume that fails half-way is released by _cycle_raised
            if self.cache.nominations:
                self.cache.nominations.clear(pod.uid)   # it has a node now (upstream: DeleteNominatedPodIfExists)
            qi.released = False
            st = fw.run_reserve(state, pod, node)
            if not st.is_success():
                self._release(fw, state, qi, node)
                self._fail(fw, qi, st, reason="SchedulerError" if st.code == Code.ERROR else "Unschedulable",
                           message=st.message())
                return st
            st = fw.run_permit(state, pod, node)
            if not st.is_success() and not st.is_wait():
                self._release(fw, state, qi, node)
                if st.plugin:
                    qi.unschedulable_plugins = {st.plugin}
                self._fail(fw, qi, st, reason="SchedulerError" if st.code == Code.ERROR else "Unschedulable",
                           message=st.message())
                return st
            if st.is_wait():
                wp = fw.get_waiting_pod(pod.uid)
                if wp is not None:
                    wp.on_reject = functools.partial(self._release, fw, state, qi, node)
            self._record_cycle(t0, "scheduled", fw)
            self._spawn(self._binding_cycle(fw, state, qi, node), f"binding {pod.key}")
            return None
        except Exception as exc:  # a bug outside the plugins' calls (which return Status(ERROR)): contained here
            return self._cycle_raised(fw, qi, state if node is not None else None, node, exc)

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

    def _release(self, fw: Framework, state: CycleState, qi: QueuedPodInfo, node: str) -> None:
        """Give back what an assumed pod holds: Unreserve, forget, and tell the queue the room is free. Once."""
        if qi.released:
            return
        qi.released = True
        pod = qi.pod
        fw.run_unreserve(state, pod, node)
        self.cache.forget(pod)
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

    def _refuse_unsupported(self, fw: Framework, qi: QueuedPodInfo, t0: float) -> Status | None:
        """Refuse a pod that uses a field this profile does not evaluate (see :func:`unsupported`).

        Unschedulable, UnschedulableAndUnresolvable, in upstream's FitError words (``0/N nodes are
        available: <why>.``), so the pod's condition and FailedScheduling event name the field. The field
        is immutable, so no cluster event can change the answer: the pod is parked with the field as its
        rejector, which no plugin registers events for, and waits for an update of its own or the
        periodic flush rather than being retried at every node or pod event.
        """
        field_, why = unsupported(qi.pod, fw.gang is not None)
        if not why:
            return None
        qi.unschedulable_plugins = {field_}
        msg = Diagnosis(num_all_nodes=len(self.cache.nodes), pre_filter_msg=why).message()
        st = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, why)
        self._fail(fw, qi, st, reason="Unschedulable", message=msg)
        self._record_cycle(t0, "unschedulable", fw)
        return st

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
