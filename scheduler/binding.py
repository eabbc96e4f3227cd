"""The binding cycle and failure handling (upstream's pkg/scheduler/schedule_one.go from bindingCycle on,
and its handleSchedulingFailure).

Each pod that leaves the scheduling cycle gets one binding task,
:meth:`Binding._binding_cycle`: wait on Permit, PreBind, Bind, PostBind, the
Scheduled event. Binding tasks run concurrently with later cycles, bounded by
the API client's QPS. :meth:`Binding._fail` handles every failure, from the
cycle and from binding alike: requeue, the FailedScheduling event, metrics,
and the PodScheduled=False condition (reason Unschedulable or SchedulerError,
the "0/N nodes are available: ..." message), which one writer task per pod
sends so that two writes can never land out of order.

The queue is told the pod is done as soon as Permit allows it, as upstream
does since kubernetes#130189 (1.33): past Permit no failure can make the pod
unschedulable, so the events the queue records while pods are in flight need
not be kept for it during a slow PreBind or Bind. A PreBind or Bind failure
then puts the pod back in backoffQ whatever the reason, without consulting
queueing hints (upstream's handleSchedulingFailure, whose
AddUnschedulableIfNotPresent sends a pod no plugin rejected to backoff). A
pod held at Permit (a gang waiting for its quorum) stays in flight, as
upstream: a rejection there is Unschedulable and needs the events that raced
with it, so a long hold still keeps the queue recording.

A binding task never touches the cache except through ``_release``
(Unreserve and forget) and never schedules. An exception in it outside the
plugins' calls (which the framework turns into Status(ERROR)) releases and
requeues the pod with reason SchedulerError, unless the pod is bound already. ``_fail`` runs inside scheduling
cycles too, so it stays synchronous: it spawns the condition writer, never
awaits it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Awaitable

from scheduler.framework.clock import Clock
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Code, Status
from scheduler.leader import NotLeader
from scheduler.model import NOT_READY_FOR_SCHEDULING, Pod
from scheduler.queue import QueuedPodInfo, SchedulingQueue

if TYPE_CHECKING:
    from scheduler.state.cache import Cache
    from scheduler.executor import Preemption

log = logging.getLogger("tandem.scheduler")


class GangBind:
    """Members of one gang that passed Permit together: none is bound before every one's PreBind succeeded.

    All-or-nothing does not end at Permit: a member's PreBind can still fail (VolumeBinding's writes, or the
    PV controller slower than bindTimeoutSeconds), and a gang bound without it would run short of its
    quorum. Each member's binding task runs its PreBind, then :meth:`arrive` waits for the others; once all
    have arrived the binds go, concurrently. If one member's PreBind fails, or one gives its node back, the
    round fails: every member is released (Unreserve, forget) and requeued together. What PreBind wrote to
    PersistentVolumes and claims stays, as upstream leaves it. Bind itself is one API call per pod, which
    no scheduler can make atomic: the guarantee holds up to the binds.
    """

    __slots__ = ("key", "members", "pending", "closed", "held", "failure", "_ready")

    def __init__(self, key: str) -> None:
        self.key = key
        self.members: set[str] = set()
        self.pending: set[str] = set()      # members whose PreBind has not succeeded yet
        self.closed = False                 # no member joins any more
        self.held = False                   # the group cycle is still committing members into it
        self.failure = ""                   # why its binds do not go ("" none)
        self._ready: asyncio.Future[str] | None = None

    def join(self, uid: str) -> None:
        self.members.add(uid)
        self.pending.add(uid)

    def leave(self, uid: str) -> None:
        self.members.discard(uid)
        self.pending.discard(uid)

    def close(self) -> None:
        self.closed = True
        self.held = False
        self._settle()

    def fail(self, why: str) -> None:
        if not self.failure:
            self.failure = why
        self._settle()

    async def arrive(self, uid: str) -> str:
        """``uid``'s PreBind succeeded: wait for the rest; "" when all succeeded, else why the gang does not bind.

        A member arrives only once Permit let the round's members go, and the cycle that did so has ended:
        no member joins after that, so the round is closed here if that cycle could not close it.
        """
        self.pending.discard(uid)
        if not self.held:
            self.closed = True
        self._settle()
        if self.closed and (not self.pending or self.failure):
            return self.failure
        if self._ready is None:
            self._ready = asyncio.get_running_loop().create_future()
        return await asyncio.shield(self._ready)

    def _settle(self) -> None:
        if self._ready is not None and not self._ready.done() and self.closed and (self.failure or not self.pending):
            self._ready.set_result(self.failure)


class Binding:
    """The binding cycle of :class:`~scheduler.scheduler.Scheduler`, whose ``__init__`` sets this state."""

    clock: Clock
    client: Any
    events: Any
    metrics: Any
    queue: SchedulingQueue
    pods: dict[str, Pod]
    scheduled: int
    _conditions: dict[str, tuple[str, str]]
    _sort_failures: dict[str, str]
    _nominations: dict[str, str]
    _condition_writers: set[str]
    _gang_binds: dict[str, GangBind]          # uid -> the round its gang binds in
    _open_gang_binds: dict[str, GangBind]     # gang key -> its round still collecting members
    cache: Cache
    preemption: Preemption
    frameworks: dict[str, Framework]

    if TYPE_CHECKING:
        # what binding calls of the scheduling-cycle mixin (schedule_one.py) and of the Scheduler
        # (scheduler.py), which define them; declared for the reader and the type checker only (no runtime
        # attribute, no MRO effect)
        def _release(self, fw: Framework, state: CycleState, qi: QueuedPodInfo, node: str) -> None: ...

        def _pod_problem(self, pod: Pod) -> str: ...

        def _spawn(self, coro: Awaitable[Any], what: str) -> None: ...

    # ------------------------------------------------------------------ the binding cycle

    async def _binding_cycle(self, fw: Framework, state: CycleState, qi: QueuedPodInfo, node: str) -> None:
        pod = qi.pod
        done = bound = False
        pre_bind_failed = False
        gang_failed = ""
        try:
            st = await fw.wait_on_permit(pod)
            if st.is_success():
                # past Permit nothing can make the pod unschedulable: the queue stops keeping events for it
                # now, not after a slow PreBind or Bind (upstream's bindingCycle calls Done here)
                self.queue.done(pod.uid)
                done = True
                st = await fw.run_pre_bind(state, pod, node)
                pre_bind_failed = not st.is_success()
                together = self._gang_binds.get(pod.uid)
                if together is not None:
                    # its gang binds together: no member is bound before every member's PreBind succeeded
                    if pre_bind_failed:
                        together.fail(f"PodGroup {together.key} gets rejected due to Pod {pod.name} failed at "
                                      f'PreBind: running PreBind plugin "{st.plugin}": {st.message()}')
                    else:
                        gang_failed = await together.arrive(pod.uid)
                        if gang_failed:
                            st = Status(Code.ERROR, gang_failed, plugin=fw.gang.NAME if fw.gang else "")
            if st.is_success():
                st = await fw.run_bind(state, pod, node)
            if not st.is_success():
                self._release(fw, state, qi, node)  # a no-op when a rejection already released it
                if st.is_rejected() and st.plugin:
                    qi.unschedulable_plugins = {st.plugin}
                reason = "Unschedulable" if st.is_rejected() else "SchedulerError"
                # an error at Permit (a gang rejected for an error) says so itself; past Permit, name the binder
                msg = (st.message() if st.is_rejected() or not done or gang_failed
                       # RunPreBindPlugins' wrapping, %q and all
                       else f'running PreBind plugin "{st.plugin}": {st.message()}' if pre_bind_failed
                       else f'running Bind plugin "{st.plugin}": {st.message()}')
                self._fail(fw, qi, st, reason=reason, message=msg, done=done)
                return
            bound = True
            self.scheduled += 1
            fw.run_post_bind(state, pod, node)
            if self.events is not None:
                self.events.record(pod, "Normal", "Scheduled", "Binding",
                                   f"Successfully assigned {pod.namespace}/{pod.name} to {node}", fw.name)
            if self.metrics is not None:
                self.metrics.observe_scheduled(qi, fw.name, self.clock())
        except Exception as exc:  # a bug outside the plugins' calls: the pod must not be lost
            log.exception("binding cycle of %s failed", pod.key)
            if bound:
                return   # it is bound: only the reporting after it failed
            self._release(fw, state, qi, node)
            msg = f"binding cycle failed: {Status.from_error(exc).message()}"
            self._fail(fw, qi, Status(Code.ERROR, msg, error=exc), reason="SchedulerError", message=msg, done=done)
        finally:
            self._gang_binds.pop(pod.uid, None)

    # ------------------------------------------------------------------ a gang binds together

    def _bind_together(self, fw: Framework, pod: Pod, wait: bool) -> None:
        """``pod``, a gang member, passed Permit (``wait``: it waits there for its quorum): it binds with the
        members that pass Permit together with it (:class:`GangBind`). The round of a gang collects its
        members from the first that waits; the member whose Permit completes the quorum closes it, unless
        the group cycle holds it open while it commits a topology gang's members one by one."""
        key = pod.gang
        together = self._open_gang_binds.get(key)
        if together is None:
            together = self._open_gang_binds[key] = GangBind(key)
        together.join(pod.uid)
        self._gang_binds[pod.uid] = together
        if not wait and not together.held:
            self._close_gang_bind(key)

    def _hold_gang_bind(self, key: str) -> None:
        """The group cycle commits a topology gang's members one by one: they bind together, as one round."""
        together = self._open_gang_binds.get(key)
        if together is None:
            together = self._open_gang_binds[key] = GangBind(key)
        together.held = True

    def _end_gang_bind_hold(self, fw: Framework, key: str) -> None:
        """The group cycle committed the gang's members: the round closes, unless some wait at Permit for their
        quorum (members not in the queue together), in which case the member that completes it closes it."""
        together = self._open_gang_binds.get(key)
        if together is None:
            return
        together.held = False
        for uid in together.members:
            wp = fw.get_waiting_pod(uid)
            if wp is not None and not wp.future.done():
                return
        self._close_gang_bind(key)

    def _close_gang_bind(self, key: str) -> None:
        """No member joins the gang's round any more: its binds go once every member's PreBind succeeded."""
        together = self._open_gang_binds.pop(key, None)
        if together is None:
            return
        together.close()
        if len(together.members) <= 1:
            for uid in together.members:   # alone: nothing to wait for
                self._gang_binds.pop(uid, None)

    def _released_from_gang_bind(self, uid: str) -> None:
        """A member gave its node back (rejected at Permit, or a failure after it): a closed round fails whole;
        an open one (its gang still waiting for a quorum) only loses it."""
        together = self._gang_binds.pop(uid, None)
        if together is None:
            return
        if together.closed:
            together.fail(f"PodGroup {together.key} gets rejected due to a member that gave its node back")
            return
        together.leave(uid)
        if not together.members and self._open_gang_binds.get(together.key) is together and not together.held:
            del self._open_gang_binds[together.key]

    # ------------------------------------------------------------------ failures

    def _fail(self, fw: Framework, qi: QueuedPodInfo, st: Status, reason: str, message: str,
              done: bool = False, nominated: str | None = None, retry: bool = False) -> None:
        """Requeue and report a failed attempt. ``done``: it failed past Permit, the queue no longer holds it.
        ``nominated``: the node PostFilter nominated it to ("" clears its nomination; None leaves it).
        ``retry``: try it again after its backoff even if no cluster event comes (a topology gang whose
        attempt left domains untried)."""
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
        if done:
            if not latest.deleting:   # going away: the delete handler dropped it, the requeue would revive it
                qi.pod = latest  # the queue stopped following the pod's updates at done()
                self.queue.requeue_after_done(qi)
        else:
            self.queue.requeue_failed(qi, unschedulable and not retry)
            if self.preemption.is_preempting(pod.uid):
                self.queue.gate(pod.uid, "DefaultPreemption")   # held until its victims' evictions end
        if nominated is not None:
            if not nominated:
                self.cache.nominations.clear(pod.uid)
            if nominated != latest.nominated_node_name or self._nominations.get(pod.uid, nominated) != nominated:
                self._nominations[pod.uid] = nominated
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
            if pod.uid in self._nominations:
                self._start_status_writer(pod)
            return
        self._conditions[pod.uid] = want
        self._start_status_writer(pod)

    def _sort_key_failed(self, qi: QueuedPodInfo, exc: Exception) -> None:
        """The QueueSort plugin raised for this pod: the queue ordered it as PrioritySort would; say why.

        Logged with the traceback and counted as an error attempt; the pod gets PodScheduled=False
        (SchedulerError) and a FailedScheduling event once per pod and message, not at every push (the
        key is asked again at each push to activeQ, and the pod's later failures rewrite its condition).
        """
        fw = self.frameworks.get(qi.profile) or next(iter(self.frameworks.values()))
        plugin = fw.queue_sort[0].NAME if fw.queue_sort else "QueueSort"
        msg = (f'running QueueSort plugin "{plugin}": {Status.from_error(exc).message()}; '
               f"queued by priority and arrival time instead")
        latest = self.pods.get(qi.uid)
        if latest is None or self._sort_failures.get(qi.uid) == msg:
            return
        self._sort_failures[qi.uid] = msg
        log.error("plugin %s failed at QueueSort for %s", plugin, qi.pod.key, exc_info=exc)
        if self.events is not None:
            self.events.record(qi.pod, "Warning", "FailedScheduling", "Scheduling", msg, fw.name)
        if self.metrics is not None:
            self.metrics.observe_failure("SchedulerError", fw.name, qi)
        self._set_condition(qi.pod, latest, "SchedulerError", msg)

    # ------------------------------------------------------------------ pods held at PreEnqueue (preenqueue.py)

    def _publish_not_ready(self, uid: str, profile: str, message: str) -> None:
        """PodScheduled=False, reason NotReadyForScheduling, and the event: why a held pod waits (KEP-5501)."""
        pod = self.pods.get(uid)
        if pod is None:
            return
        if uid not in self._conditions and not _condition_changed(pod, NOT_READY_FOR_SCHEDULING, message):
            return   # the pod says so already (written before a restart): no write, no second event
        self._set_condition(pod, pod, NOT_READY_FOR_SCHEDULING, message)
        if self.events is not None:
            self.events.record(pod, "Warning", NOT_READY_FOR_SCHEDULING, "Scheduling", message, profile)

    def _retract_not_ready(self, uid: str) -> None:
        """The pod passed PreEnqueue: a NotReadyForScheduling write not yet sent must not be sent (the cycle
        that follows writes the pod's next PodScheduled, or the bind sets it True)."""
        want = self._conditions.get(uid)
        if want is not None and want[0] == NOT_READY_FOR_SCHEDULING:
            del self._conditions[uid]

    def _set_nomination(self, pod: Pod, node: str) -> None:
        """Write status.nominatedNodeName ("" clears it), in order with the pod's PodScheduled writes."""
        latest = self.pods.get(pod.uid)
        if latest is None or latest.node_name:
            return
        if node == latest.nominated_node_name and pod.uid not in self._nominations:
            return
        self._nominations[pod.uid] = node
        self._start_status_writer(pod)

    def _start_status_writer(self, pod: Pod) -> None:
        if pod.uid not in self._condition_writers:
            self._condition_writers.add(pod.uid)
            self._spawn(self._write_condition(pod), f"status of {pod.key}")

    async def _write_condition(self, pod: Pod) -> None:
        """The one writer of a pod's PodScheduled=False and status.nominatedNodeName: the newest wanted, in order."""
        uid = pod.uid
        written: tuple[tuple[str, str] | None, str | None] = (None, None)
        failures = 0
        try:
            while True:
                want = (self._conditions.get(uid), self._nominations.get(uid))
                if want == written or want == (None, None):
                    break
                status: dict[str, Any] = {}
                if want[0] is not None and want[0] != written[0]:
                    status["conditions"] = [{
                        "type": "PodScheduled", "status": "False", "reason": want[0][0], "message": want[0][1],
                        "lastProbeTime": None, "lastTransitionTime": _rfc3339(self.clock.wall())}]
                if want[1] is not None and want[1] != written[1]:
                    status["nominatedNodeName"] = want[1] or None
                if not status:
                    written = want
                    continue
                try:
                    await self.client.patch_pod_status(pod.namespace, pod.name, {"status": status})
                except Exception as exc:  # noqa: BLE001 - gone, or failing after the client's retries
                    log.warning("cannot write the status of %s: %s", pod.key, exc)
                    failures += 1
                    latest = self.pods.get(uid)
                    # a replica that lost the lease writes nothing more: the next leader reports the pod
                    if (failures < 5 and latest is not None and not latest.node_name and not latest.deleting
                            and not isinstance(exc, NotLeader)):
                        # a pod left unbound must say why: try again, later (the client already retried)
                        await self.clock.sleep(min(0.2 * 2 ** failures, 5.0))
                        continue
                    if self._conditions.get(uid) == want[0]:
                        self._conditions.pop(uid, None)  # unknown state: the next failure compares with the API's copy
                    if self._nominations.get(uid) == want[1]:
                        self._nominations.pop(uid, None)
                    return
                written = want
            if self._nominations.get(uid) == written[1]:
                self._nominations.pop(uid, None)   # written: the informer's copy carries it from now on
        finally:
            self._condition_writers.discard(uid)


def _condition_changed(pod: Pod, reason: str, message: str) -> bool:
    for c in (pod.raw.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled":
            return not (c.get("status") == "False" and c.get("reason") == reason and c.get("message") == message)
    return True


def _rfc3339(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
