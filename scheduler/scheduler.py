"""The scheduler: informers feed the cache and the queue; one loop runs cycles; tasks bind.

:meth:`Scheduler.schedule_one` is the scheduling cycle and is synchronous
(no await): PreFilter, Filter, PostFilter, Score, pick, assume, Reserve,
Permit. Nothing can change the cache under it, so no snapshot is taken.
Each pod that leaves the cycle gets a binding task (wait on Permit,
PreBind, Bind, PostBind) that runs concurrently with later cycles. A failure
anywhere after assume runs Unreserve, forgets the assumed pod and requeues
it: a pod is always in the queue, in a cycle, waiting on Permit, binding,
or bound.

What users see is what kube-scheduler writes: Scheduled / FailedScheduling
events (events.k8s.io/v1, reportingController = the profile's
schedulerName), the PodScheduled=False condition with reason Unschedulable
or SchedulerError, and the "0/N nodes are available: ..." message.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import random
import time
from typing import Any, Awaitable, Callable

import numpy as np

from scheduler.cache import Cache
from scheduler.config import SchedulerConfig
from scheduler.framework.clock import Clock
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.interface import ActionType, ClusterEvent, Resource
from scheduler.framework.runtime import Diagnosis, Framework
from scheduler.framework.status import Code, Status
from scheduler.model import Node, Pod, parse_node, parse_pod
from scheduler.queue import QueuedPodInfo, SchedulingQueue

log = logging.getLogger("tandem.scheduler")

PRIORITY_CLASS = "PriorityClass"   # the cluster event resource of scheduling.k8s.io/v1 PriorityClasses

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


class Scheduler:
    def __init__(self, config: SchedulerConfig, client: Any, events: Any = None, metrics: Any = None,
                 seed: int | None = None, clock: Clock | None = None) -> None:
        self.config = config
        self.clock: Clock = clock if clock is not None else Clock()   # the one clock (framework/clock.py)
        self.client = client
        self.events = events
        self.metrics = metrics
        self.cache = Cache()
        self.frameworks: dict[str, Framework] = {}
        for profile in config.profiles:
            recorder = events.for_profile(profile.scheduler_name) if events is not None else None
            handle = Handle(self.cache, client, profile.scheduler_name, recorder, clock=self.clock)
            self.frameworks[profile.scheduler_name] = Framework(profile, handle, metrics)
        first = next(iter(self.frameworks.values()))
        hints = {name: {} for name in self.frameworks}
        for name, fw in self.frameworks.items():
            for plugin, ceh in fw.events_to_register():
                hints[name].setdefault(plugin, []).append(ceh)
        self.queue = SchedulingQueue(first.sort_key, self._pre_enqueue, hints,
                                     config.pod_initial_backoff_seconds, config.pod_max_backoff_seconds,
                                     clock=self.clock)
        self.pods: dict[str, Pod] = {}        # every pod the informer knows, by uid (latest record)
        self.pod_groups: dict[str, dict[str, Any]] = {}   # "ns/name" -> PodGroup
        self.group_pods: dict[str, set[str]] = {}          # "ns/podgroup" -> uids of pods naming it
        # called with "ns/podgroup" when a member pod or the PodGroup itself changes (the PodGroup status
        # controller marks the group dirty; a call must be O(1) and must not raise)
        self.group_listeners: list[Callable[[str], None]] = []
        for fw in self.frameworks.values():
            h = fw.handle
            h.pods, h.pod_groups, h.group_pods = self.pods, self.pod_groups, self.group_pods
            h.activate, h.queued_group_size = self.queue.activate, self.queue.group_size
        self.rng = random.Random(seed)
        self.next_start = 0
        # PriorityClass names, when an informer follows them (None: not followed, nothing is checked)
        self.priority_classes: set[str] | None = None
        self._conditions: dict[str, tuple[str, str]] = {}   # uid -> PodScheduled=False (reason, message) we set last
        self._condition_writers: set[str] = set()           # uids with a condition write under way
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopping = False
        self.cycle_durations: list[float] = []  # seconds, for benchmarks (bounded)
        self.scheduled = 0

    # ------------------------------------------------------------------ queue glue

    def _pre_enqueue(self, qi: QueuedPodInfo) -> Status:
        return self.frameworks[qi.profile].pre_enqueue(qi.pod)

    def _spawn(self, coro: Awaitable[Any], what: str) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("%s failed: %r", what, t.exception())

        task.add_done_callback(done)

    # ------------------------------------------------------------------ informer handlers (pods)

    def _index_group(self, old: Pod | None, pod: Pod | None) -> None:
        if old is not None and old.pod_group and (pod is None or pod.pod_group != old.pod_group):
            key = f"{old.namespace}/{old.pod_group}"
            members = self.group_pods.get(key)
            if members is not None:
                members.discard(old.uid)
                if not members:
                    del self.group_pods[key]
        if pod is not None and pod.pod_group:
            self.group_pods.setdefault(f"{pod.namespace}/{pod.pod_group}", set()).add(pod.uid)

    def _group_changed(self, old: Pod | None, pod: Pod | None) -> None:
        for p in (old, pod):
            if p is not None and p.pod_group:
                key = f"{p.namespace}/{p.pod_group}"
                for fn in self.group_listeners:
                    fn(key)
                if old is not None and pod is not None and old.pod_group == pod.pod_group:
                    return  # same group: once is enough

    def on_pod_add(self, obj: dict[str, Any]) -> None:
        pod = parse_pod(obj)
        old = self.pods.get(pod.uid)
        self._index_group(old, pod)
        self.pods[pod.uid] = pod
        if self.group_listeners:
            self._group_changed(old, pod)
        if pod.node_name:
            self._conditions.pop(pod.uid, None)
            if not pod.terminal:
                self.cache.add_pod(pod)
                self.queue.delete(pod.uid)  # bound by someone: not ours to schedule any more
                self.queue.on_event(ClusterEvent(Resource.ASSIGNED_POD, ActionType.ADD, "AssignedPodAdd"), None, pod)
        elif pod.scheduler_name in self.frameworks and not pod.deleting:
            self.queue.add(pod, pod.scheduler_name)

    def on_pod_update(self, old_obj: dict[str, Any], obj: dict[str, Any]) -> None:
        pod = parse_pod(obj)
        old = self.pods.get(pod.uid)
        self._index_group(old, pod)
        self.pods[pod.uid] = pod
        if self.group_listeners:
            self._group_changed(old, pod)
        if pod.node_name:
            self._conditions.pop(pod.uid, None)
            if pod.terminal:
                # finished pods free their node (the informer's assigned-and-not-terminal filter)
                self.cache.remove_pod(pod)
                self.queue.on_event(ClusterEvent(Resource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"), old, None)
                return
            was_cached = self.cache.where(pod.uid) is not None
            self.cache.update_pod(pod)
            self.queue.delete(pod.uid)
            if old is None or not old.node_name or not was_cached:
                self.queue.on_event(ClusterEvent(Resource.ASSIGNED_POD, ActionType.ADD, "AssignedPodAdd"), old, pod)
            else:
                action = 0
                if old.labels != pod.labels:
                    action |= ActionType.UPDATE_POD_LABEL
                if any(pod.requests.get(k, 0) < v for k, v in old.requests.items()):
                    action |= ActionType.UPDATE_POD_SCALE_DOWN
                if action:
                    self.queue.on_event(ClusterEvent(Resource.ASSIGNED_POD, action, "AssignedPodUpdate"), old, pod)
        elif pod.scheduler_name in self.frameworks:
            if pod.deleting:
                self._forget_unbound(pod)
            elif pod.uid in self.queue:
                self.queue.update(pod)
            elif not self.cache.is_assumed(pod.uid) and pod.uid not in self._waiting_uids():
                self.queue.add(pod, pod.scheduler_name)

    def on_pod_delete(self, obj: dict[str, Any]) -> None:
        pod = parse_pod(obj)
        old = self.pods.pop(pod.uid, pod)
        self._index_group(old, None)
        if self.group_listeners:
            self._group_changed(old, None)
        self._conditions.pop(pod.uid, None)
        self._forget_unbound(pod)
        if self.cache.where(pod.uid) is not None:
            self.cache.remove_pod(pod)
            self.queue.on_event(ClusterEvent(Resource.ASSIGNED_POD, ActionType.DELETE, "AssignedPodDelete"), old, None)

    def _forget_unbound(self, pod: Pod) -> None:
        self.queue.delete(pod.uid)
        for fw in self.frameworks.values():
            wp = fw.get_waiting_pod(pod.uid)
            if wp is not None:
                wp.reject("", "pod was deleted while waiting")

    def _waiting_uids(self) -> set[str]:
        out: set[str] = set()
        for fw in self.frameworks.values():
            out.update(fw.waiting)
        return out

    # ------------------------------------------------------------------ informer handlers (priority classes)

    def on_priority_class_add(self, obj: dict[str, Any]) -> None:
        if self.priority_classes is None:
            self.priority_classes = set()
        self.priority_classes.add(str((obj.get("metadata") or {}).get("name", "")))
        # a pod that named a missing class may be schedulable now
        self.queue.on_event(ClusterEvent(PRIORITY_CLASS, ActionType.ADD, "PriorityClassAdd"), None, obj)

    def on_priority_class_update(self, old_obj: dict[str, Any], obj: dict[str, Any]) -> None:
        pass  # only names matter here

    def on_priority_class_delete(self, obj: dict[str, Any]) -> None:
        if self.priority_classes is not None:
            self.priority_classes.discard(str((obj.get("metadata") or {}).get("name", "")))

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

    # ------------------------------------------------------------------ informer handlers (podgroups)

    def _pod_group_changed(self, key: str) -> None:
        for fn in self.group_listeners:
            fn(key)

    def on_pod_group_add(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        self.pod_groups[key] = obj
        self._pod_group_changed(key)
        self.queue.on_event(ClusterEvent(Resource.POD_GROUP, ActionType.ADD, "PodGroupAdd"), None, obj)

    def on_pod_group_update(self, old_obj: dict[str, Any], obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        self.pod_groups[key] = obj
        self._pod_group_changed(key)
        if (old_obj.get("spec") or {}) != (obj.get("spec") or {}):
            self.queue.on_event(ClusterEvent(Resource.POD_GROUP, ActionType.UPDATE, "PodGroupUpdate"), old_obj, obj)

    def on_pod_group_delete(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        self.pod_groups.pop(key, None)
        self._pod_group_changed(key)
        self.queue.on_event(ClusterEvent(Resource.POD_GROUP, ActionType.DELETE, "PodGroupDelete"), obj, None)

    # ------------------------------------------------------------------ informer handlers (nodes)

    def on_node_add(self, obj: dict[str, Any]) -> None:
        node = parse_node(obj)
        if node.invalid:
            log.warning("node %s: %s; scheduling onto it as far as it parses", node.name, node.invalid)
        self.cache.add_node(node)
        self.queue.on_event(ClusterEvent(Resource.NODE, ActionType.ADD, "NodeAdd"), None, node)

    def on_node_update(self, old_obj: dict[str, Any], obj: dict[str, Any]) -> None:
        node = parse_node(obj)
        old = self.cache.node(node.name)
        self.cache.update_node(node)
        if old is None:
            self.queue.on_event(ClusterEvent(Resource.NODE, ActionType.ADD, "NodeAdd"), None, node)
            return
        action = node_update_action(old, node)
        if action:
            self.queue.on_event(ClusterEvent(Resource.NODE, action, "NodeUpdate"), old, node)

    def on_node_delete(self, obj: dict[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name", ""))
        old = self.cache.node(name)
        self.cache.remove_node(name)
        self.queue.on_event(ClusterEvent(Resource.NODE, ActionType.DELETE, "NodeDelete"), old, None)

    # ------------------------------------------------------------------ the scheduling cycle

    def schedule_next(self, qi: QueuedPodInfo) -> None:
        """Schedule a popped pod: alone, or with the rest of its gang in one uninterrupted group cycle."""
        fw = self.frameworks[qi.profile]
        key = fw.gang.gang_key(qi.pod) if fw.gang is not None else None
        if not key:
            self.schedule_one(qi)
            return
        members = [qi] + self.queue.take_group(key, qi.profile)
        # largest first (first-fit decreasing): a small member placed first must not take the only node a
        # big one fits on, since a gang that fails is not retried until the cluster changes
        members.sort(key=lambda m: (-m.pod.priority, -m.pod.requests.get("cpu", 0),
                                    -m.pod.requests.get("memory", 0), m.timestamp))
        for i, member in enumerate(members):
            failed = self.schedule_one(member)
            if failed is None:
                continue
            # one member cannot be placed. If the gang cannot be whole now, the plugin rejects the
            # members waiting at Permit (their room is released synchronously, see _release) and the
            # members not tried yet go back to the queue with the gang's reason.
            msg = fw.gang.gang_failed(member.pod, failed)
            if not msg:
                continue  # the gang can still be whole (quorum reached, or enough members left to try)
            for rest in members[i + 1:]:
                rest.unschedulable_plugins = {fw.gang.NAME}
                self._fail(fw, rest, Status(Code.UNSCHEDULABLE, msg, plugin=fw.gang.NAME), reason="Unschedulable",
                           message=msg)
            return

    def schedule_one(self, qi: QueuedPodInfo) -> Status | None:
        """One scheduling cycle. Synchronous: the cache cannot change under it.

        Returns None when the pod left the cycle for binding (or needs no scheduling any more), else
        the status it failed with (it is already requeued and reported).
        """
        t0 = time.perf_counter()
        pod = qi.pod
        fw = self.frameworks[qi.profile]
        latest = self.pods.get(pod.uid)
        if latest is None or latest.node_name or latest.deleting:
            self.queue.done(pod.uid)  # deleted, bound elsewhere, or going away (skipPodSchedule)
            return None
        problem = self._pod_problem(pod)
        if problem:
            st = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"pod is invalid: {problem}")
            self._fail(fw, qi, st, reason="SchedulerError", message=f"pod {pod.key} is invalid: {problem}")
            return st
        state = CycleState()
        rows, st, diag = fw.run_pre_filter(state, pod)
        feasible = rows
        if st.is_success():
            feasible, st = fw.run_filter(state, pod, rows, diag)
        if st.code == Code.ERROR:
            self._fail(fw, qi, st, reason="SchedulerError", message=st.message())
            return st
        diag.num_all_nodes = len(self.cache.nodes)
        if len(feasible) == 0:
            if st.code != Code.UNSCHEDULABLE_AND_UNRESOLVABLE and fw.post_filter_plugins:
                result, pst = fw.run_post_filter(state, pod, diag)
                if pst.code == Code.ERROR:
                    self._fail(fw, qi, pst, reason="SchedulerError", message=pst.message())
                    return pst
                if pst.reasons and not pst.is_success():
                    diag.post_filter_msg = pst.message()
            qi.unschedulable_plugins = diag.unschedulable_plugins
            code = st.code if st.is_rejected() else Code.UNSCHEDULABLE
            st = Status(code, diag.message())
            self._fail(fw, qi, st, reason="Unschedulable", message=diag.message())
            self._record_cycle(t0, "unschedulable", fw)
            return st
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
        self.cache.assume(pod, node)
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

    # ------------------------------------------------------------------ the binding cycle

    async def _binding_cycle(self, fw: Framework, state: CycleState, qi: QueuedPodInfo, node: str) -> None:
        pod = qi.pod
        st = await fw.wait_on_permit(pod)
        if st.is_success():
            st = await fw.run_pre_bind(state, pod, node)
        if st.is_success():
            st = await fw.run_bind(state, pod, node)
        if not st.is_success():
            self._release(fw, state, qi, node)  # a no-op when a rejection already released it
            if st.is_rejected() and st.plugin:
                qi.unschedulable_plugins = {st.plugin}
            reason = "Unschedulable" if st.is_rejected() else "SchedulerError"
            msg = st.message() if st.is_rejected() else f"running Bind plugin {st.plugin!r}: {st.message()}"
            self._fail(fw, qi, st, reason=reason, message=msg)
            return
        self.scheduled += 1
        self.queue.done(pod.uid)
        fw.run_post_bind(state, pod, node)
        if self.events is not None:
            self.events.record(pod, "Normal", "Scheduled", "Binding",
                               f"Successfully assigned {pod.namespace}/{pod.name} to {node}", fw.name)
        if self.metrics is not None:
            self.metrics.observe_scheduled(qi, fw.name)

    # ------------------------------------------------------------------ failures

    def _fail(self, fw: Framework, qi: QueuedPodInfo, st: Status, reason: str, message: str) -> None:
        pod = qi.pod
        unschedulable = st.is_rejected() or reason == "Unschedulable"
        if reason == "SchedulerError" and self._pod_problem(pod):
            unschedulable = True  # a malformed pod waits for an update, not for a timer
        if st.code == Code.PENDING and st.plugin:
            qi.pending_plugins = {st.plugin}
        latest = self.pods.get(pod.uid)
        if latest is None or latest.node_name:
            self.queue.done(pod.uid)  # deleted or bound meanwhile: nothing to requeue or report
            return
        self.queue.requeue_failed(qi, unschedulable)
        if self.events is not None:
            self.events.record(pod, "Warning", "FailedScheduling", "Scheduling", message, fw.name)
        if self.metrics is not None:
            self.metrics.observe_failure(reason, fw.name, qi)
        self._set_condition(pod, latest, reason, message)

    def _set_condition(self, pod: Pod, latest: Pod, reason: str, message: str) -> None:
        """PodScheduled=False with this reason and message, written by one task per pod, in order.

        Failures come from the cycle and from binding tasks, and each write may be retried by the
        client: two independent patches could land in either order and leave a stale reason on the
        pod for good. So the wanted condition is kept per pod and one writer sends the newest; the
        informer's copy (which may lag our own writes) is consulted only when nothing was written.
        """
        want = (reason, message)
        last = self._conditions.get(pod.uid)
        if last == want or (last is None and not _condition_changed(latest, reason, message)):
            return
        self._conditions[pod.uid] = want
        if pod.uid not in self._condition_writers:
            self._condition_writers.add(pod.uid)
            self._spawn(self._write_condition(pod), f"status of {pod.key}")

    async def _write_condition(self, pod: Pod) -> None:
        uid = pod.uid
        written: tuple[str, str] | None = None
        try:
            while (want := self._conditions.get(uid)) is not None and want != written:
                patch = {"status": {"conditions": [{
                    "type": "PodScheduled", "status": "False", "reason": want[0], "message": want[1],
                    "lastProbeTime": None, "lastTransitionTime": _now()}]}}
                try:
                    await self.client.patch_pod_status(pod.namespace, pod.name, patch)
                except Exception as exc:  # noqa: BLE001 - gone, or failing after the client's retries
                    log.warning("cannot set PodScheduled on %s: %s", pod.key, exc)
                    if self._conditions.get(uid) == want:
                        del self._conditions[uid]  # unknown state: the next failure compares with the API's copy
                    return
                written = want
        finally:
            self._condition_writers.discard(uid)

    # ------------------------------------------------------------------ run

    async def run(self) -> None:
        """Pop and schedule until stopped. Yields to the loop between cycles."""
        while not self._stopping:
            qi = await self.queue.pop()
            if qi is None:
                break
            try:
                self.schedule_next(qi)
            except Exception:  # a bug in the cycle: the pod goes back, the scheduler goes on
                log.exception("scheduling cycle for %s failed", qi.pod.key)
                self.cache.forget(qi.pod)
                self.queue.requeue_failed(qi, unschedulable=False)
            await asyncio.sleep(0)  # let informers and binding tasks run between cycles

    async def stop(self, drain_timeout: float = 10.0) -> None:
        """Stop popping; let in-flight binds finish (bounded)."""
        self._stopping = True
        self.queue.close()
        # pods held at Permit (a gang waiting for its quorum) would keep the drain waiting for their whole
        # hold, up to 15 minutes; they are not bound, so the next instance schedules them again
        for fw in self.frameworks.values():
            for wp in fw.iterate_waiting_pods():
                wp.reject("", "the scheduler is shutting down")
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=drain_timeout)


def node_update_action(old: Node, new: Node) -> int:
    action = 0
    if old.allocatable != new.allocatable:
        action |= ActionType.UPDATE_NODE_ALLOCATABLE
    if old.labels != new.labels:
        action |= ActionType.UPDATE_NODE_LABEL
    if old.taints != new.taints or old.unschedulable != new.unschedulable:
        action |= ActionType.UPDATE_NODE_TAINT
    if old.ready != new.ready:
        action |= ActionType.UPDATE_NODE_CONDITION
    if old.annotations != new.annotations:
        action |= ActionType.UPDATE_NODE_ANNOTATION
    return action


def _condition_changed(pod: Pod, reason: str, message: str) -> bool:
    for c in (pod.raw.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled":
            return not (c.get("status") == "False" and c.get("reason") == reason and c.get("message") == message)
    return True


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
