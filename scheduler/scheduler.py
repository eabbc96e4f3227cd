"""The scheduler: informers feed the cache and the queue; one loop runs cycles; tasks bind.

This module is the wiring (upstream's pkg/scheduler/scheduler.go): one
:class:`Scheduler` holds the cache, the queue, one framework and handle per
profile, and the indexes the plugins share; it starts the scheduling loop
(:meth:`Scheduler.run`) and drains it (:meth:`Scheduler.stop`). Its behaviour
comes from mixins, one per upstream file:

* :class:`~scheduler.eventhandlers.EventHandlers` (eventhandlers.py):
  informer events -> cache and queue;
* :class:`~scheduler.schedule_one.ScheduleOne` (schedule_one.py): the
  scheduling cycle, synchronous; and :class:`~scheduler.groupcycle.GroupCycle`
  (groupcycle.py, upstream's schedule_one_podgroup.go and algorithm_podgroup.go),
  which builds on it: a gang's members back to back, a topology gang's domains
  tried in turn;
* :class:`~scheduler.binding.Binding` (binding.py): the binding cycle (a gang's
  members bind together, once every member's PreBind succeeded) and failure
  handling.

Mixins rather than functions taking the scheduler keep the cycle's attribute
and method lookups what they were on one class (nothing extra per pod). All
state is created here, in ``__init__``; the mixins only declare what they use.

Nothing is lost: a pod is always in the queue, in a cycle, waiting on
Permit, binding, or bound. A failure anywhere after assume runs Unreserve,
forgets the assumed pod and requeues it (``_release`` and ``_fail``), and a
plugin's exception is one more such failure: the cycle contains it
(schedule_one.py), the binding task contains its own (binding.py), a
QueueSort key that raises still queues the pod (queue.py), and :meth:`run`
keeps popping whatever escapes. What users see is what kube-scheduler writes: Scheduled /
FailedScheduling events (events.k8s.io/v1, reportingController = the
profile's schedulerName), the PodScheduled=False condition with reason
Unschedulable or SchedulerError, and the "0/N nodes are available: ..." message.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any, Awaitable, Callable

from scheduler.binding import Binding, GangBind
from scheduler.config import SchedulerConfig
from scheduler.consolidation import Rebalancer
from scheduler.eventhandlers import EventHandlers
from scheduler.framework.clock import Clock
from scheduler.framework.handle import Handle
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Status
from scheduler.model import Pod, PodDisruptionBudget
from scheduler.executor import Preemption
from scheduler.preenqueue import PreEnqueueReports
from scheduler.queue import QueuedPodInfo, SchedulingQueue
from scheduler.groupcycle import GroupCycle
from scheduler.holding import Holding, HoldMetrics
from scheduler.state.cache import Cache
from scheduler.state.spreadselectors import SpreadSelectors

log = logging.getLogger("tandem.scheduler")


class Scheduler(EventHandlers, GroupCycle, Holding, Binding):
    def __init__(self, config: SchedulerConfig, client: Any, events: Any = None, metrics: Any = None,
                 seed: int | None = None, *, clock: Clock) -> None:
        self.config = config
        self.clock = clock   # the one clock (framework/clock.py): required, so there is no second one
        self.client = client
        self.events = events
        self.metrics = metrics
        self.cache = Cache()                  # nodes, pods on nodes, and the one gang index (cache.gangs)
        self.cache.nominations.held.wall = clock.wall   # held capacity: backfill reads the wall clock (holding.py)
        self._back_of_line: dict[str, float] = {}       # unit key -> when its hold expired (its new age)
        self._held_resources: set[str] = set()          # resources the held-capacity gauge shows
        self._held_published = -1                       # the account's version the gauge shows
        self.hold_metrics = HoldMetrics(metrics.registry) if metrics is not None else None
        self._in_group = False                          # a group cycle is under way (groupcycle.py)
        self.pods: dict[str, Pod] = {}        # every pod the informer knows, by uid (latest record)
        # Services' and controllers' selectors, from their informers (app.py), for PodTopologySpread
        self.spread_selectors = SpreadSelectors()
        # PodDisruptionBudgets by "ns/name", from their informer (app.py)
        self.pdbs: dict[str, PodDisruptionBudget] = {}
        # the eviction executor: preemption's API calls, off the cycle (executor.py); the queue does not exist
        # yet (it needs the frameworks' sort key and hints), so it and the handles reach it through methods
        self.preemption = Preemption(self.cache, client, metrics, self.clock, self._spawn, self._activate,
                                     self._set_nomination, self._gate)
        # every handle is built complete here, from the pieces shared across profiles (framework/handle.py)
        self.frameworks: dict[str, Framework] = {}
        for profile in config.profiles:
            recorder = events.for_profile(profile.scheduler_name) if events is not None else None
            handle = Handle(self.cache, client, profile.scheduler_name, recorder, clock=self.clock, pods=self.pods,
                            activate=self._activate, spread_selectors=self.spread_selectors,
                            preemption=self.preemption, pdbs=self.pdbs, seed=seed)
            self.frameworks[profile.scheduler_name] = Framework(profile, handle, metrics)
        # the rebalancer of the profiles that enable Consolidation (scheduler/consolidation/; empty otherwise)
        self.rebalancer = Rebalancer(self.frameworks, self.cache, self.pods, client, events, self.clock, metrics,
                                     self._spawn, self._hold_defragmented, self._unhold)
        first = next(iter(self.frameworks.values()))
        hints = {name: {} for name in self.frameworks}
        for name, fw in self.frameworks.items():
            for plugin, ceh in fw.events_to_register():
                hints[name].setdefault(plugin, []).append(ceh)
        self.queue = SchedulingQueue(first.sort_key, self._pre_enqueue, hints,
                                     config.pod_initial_backoff_seconds, config.pod_max_backoff_seconds,
                                     clock=self.clock, gangs=self.cache.gangs,
                                     sort_failed=self._sort_key_failed)
        # called with "ns/podgroup" when a member pod or the PodGroup itself changes (the PodGroup status
        # controller marks the group dirty; a call must be O(1) and must not raise)
        self.group_listeners: list[Callable[[str], None]] = []
        self.rng = random.Random(seed)
        self.next_start = 0
        # PriorityClass names, when an informer follows them (None: not followed, nothing is checked)
        self.priority_classes: set[str] | None = None
        self._conditions: dict[str, tuple[str, str]] = {}   # uid -> PodScheduled=False (reason, message) we set last
        self._nominations: dict[str, str] = {}              # uid -> status.nominatedNodeName to write ("" = clear)
        self._condition_writers: set[str] = set()           # uids with a condition write under way
        self._sort_failures: dict[str, str] = {}            # uid -> the QueueSort failure already reported
        # gangs bind together: uid -> the round of binds it is in, gang key -> its round still open (binding.py)
        self._gang_binds: dict[str, GangBind] = {}
        self._open_gang_binds: dict[str, GangBind] = {}
        # why a pod held at PreEnqueue waits, on the pod once the hold lasts (preenqueue.py, binding.py)
        self.reports = PreEnqueueReports(self.clock, self._held_at_pre_enqueue, self._pre_enqueue_again,
                                         self._publish_not_ready)
        self.group_listeners.append(self.reports.group_changed)
        # and the plugins that declare GroupEvents (GangReadiness acts on these, not on a sweep)
        for fw in self.frameworks.values():
            self.group_listeners.extend(p.group_changed for p in fw.plugins.values()
                                        if "GroupEvents" in p.EXTENSION_POINTS)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None   # the loop _spawn makes tasks on, found once
        self._stopping = False
        self.cycle_durations: list[float] = []  # seconds, for benchmarks (bounded)
        self.scheduled = 0

    # ------------------------------------------------------------------ queue glue

    def _pre_enqueue(self, qi: QueuedPodInfo) -> Status:
        st = self.frameworks[qi.profile].pre_enqueue(qi.pod)
        reports = self.reports
        if not st.is_success():
            pod = qi.pod
            reports.rejected(qi.uid, qi.profile, st.plugin, st.message(),
                             pod.gang)
        elif qi.uid in reports:   # O(1) for the pods that were never held
            reports.passed(qi.uid)
            self._retract_not_ready(qi.uid)
        return st

    def _activate(self, uids: list[str]) -> None:
        """Move ``uids`` to activeQ now (the plugins' ``handle.activate`` and the executor's)."""
        self.queue.activate(uids)

    def _gate(self, uid: str, plugin: str) -> None:
        """Hold a queued pod at PreEnqueue (the executor's, for a gang member preempting in the queue)."""
        self.queue.gate(uid, plugin)

    def _held_at_pre_enqueue(self, uid: str) -> bool:
        pod = self.pods.get(uid)
        return (pod is not None and not pod.node_name and not pod.deleting
                and self.queue.where.get(uid) == "gated")

    def _pre_enqueue_again(self, uid: str) -> None:
        # the queue's own way to re-run PreEnqueue for a gated pod: it stays gated or goes to activeQ
        if self.queue.where.get(uid) == "gated":
            self.queue.activate([uid])

    def _spawn(self, coro: Awaitable[Any], what: str) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():   # asyncio.get_running_loop() is a getpid() system call: once
            loop = self._loop = asyncio.get_running_loop()
        # a task made already (the preemption executor makes its own, to wait on it when synchronous) is kept
        task = coro if isinstance(coro, asyncio.Future) else loop.create_task(coro)  # type: ignore[arg-type]
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("%s failed: %r", what, t.exception())

        task.add_done_callback(done)

    # ------------------------------------------------------------------ run

    async def run(self) -> None:
        """Pop and schedule until stopped. Yields to the loop between cycles."""
        while not self._stopping:
            try:
                qi = await self.queue.pop()
            except Exception:  # a bug in the queue (QueueSort keys are contained inside it): pop again
                log.exception("popping the next pod failed")
                await asyncio.sleep(0)
                continue
            if qi is None:
                break
            try:
                # contains every exception of the cycle, the group cycle and the gang hooks itself
                self.schedule_next(qi)
            except Exception:  # a bug in that containment: the popped pod goes back, the scheduler goes on
                log.exception("scheduling cycle for %s failed", qi.pod.key)
                self._requeue_if_stranded(qi)
            if self.preemption.sync_waits:   # asyncPreemption: false: the evictions run in the loop
                await self.preemption.wait_sync()
            await asyncio.sleep(0)  # let informers and binding tasks run between cycles

    def halt(self) -> None:
        """Stop popping now: once this returns no scheduling cycle starts (a lost lease calls it directly)."""
        self._stopping = True
        self.queue.close()
        self.reports.stop()
        # pods held at Permit (a gang waiting for its quorum) would keep the drain waiting for their whole
        # hold, up to 15 minutes; they are not bound, so the next instance schedules them again
        for fw in self.frameworks.values():
            for wp in fw.iterate_waiting_pods():
                wp.reject("", "the scheduler is shutting down")

    async def stop(self, drain_timeout: float = 10.0) -> None:
        """Stop popping; let in-flight binds finish (bounded)."""
        self.halt()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=drain_timeout)
