"""The eviction executor: what preemption does off the scheduling cycle (KEP-4832, asynchronous preemption).

DefaultPreemption (plugins/default_preemption.py, with the evaluator in
scheduler/framework/preemption/) picks a node and its victims inside the
cycle and calls :meth:`Preemption.preempt`, which, still synchronously:

* nominates the preemptor to the node in the cache (``cache.nominations``:
  from the next cycle on its requests count there for pods of equal or
  lower priority; the API's ``status.nominatedNodeName`` is written with the
  pod's PodScheduled condition, by the scheduler's status writer);
* takes the nomination away from lower-priority pods nominated to that node;
* marks the preemptor as preempting: DefaultPreemption's PreEnqueue holds it
  until the evictions end;

and starts one task that, per victim, concurrently: rejects it in memory
when it waits at Permit, else patches ``DisruptionTarget=True`` (reason
PreemptionByScheduler) on it, deletes it (its own grace period, a uid
precondition so a successor of the same name is never hit) and records the
``Preempted`` event. A gang whose disruption mode is PodGroup goes whole (the
evaluator took every member); its PodGroup then gets ``DisruptionTarget=True``
(reason PreemptionByScheduler) in its status.conditions, as upstream marks a
pod group preempted whole. When the task ends the preemptor is activated; it binds
once its victims are gone (terminating pods still hold their room in the
cache). A failed eviction takes the nomination back and requeues the pod.
At most ``EVICTING`` tasks make their API calls at once; the others wait
their turn in the order they started.

With ``asyncPreemption: false`` the scheduling loop waits for the task
before its next cycle (kube-scheduler before 1.33), for comparison.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Callable

from scheduler.apiclient import Conflict, NotFound
from scheduler.framework.clock import Clock
from scheduler.framework.podgroupconditions import CONFLICT_RETRIES, conditions_patch, find_condition, new_condition
from scheduler.model import DISRUPTION_POD_GROUP, PREEMPTION_BY_SCHEDULER, Pod, marked_preempted, pod_group_path
from scheduler.podgroups import rfc3339

CONFLICT_BACKOFF_SECONDS = 0.2   # the first wait for the informer's newer copy after a 409 (doubled each time)

if TYPE_CHECKING:
    from scheduler.state.cache import Cache
    from scheduler.framework.runtime import Framework, WaitingPod

log = logging.getLogger("tandem.preemption")

PLUGIN = "DefaultPreemption"
# preemptions whose API calls run at once; the rest wait their turn in order, so that under a burst the
# first preemptors get their victims evicted (and bind) first, instead of every preemptor finishing last
# because all their calls share the client and the API server together
EVICTING = 32


class Preemption:
    def __init__(self, cache: "Cache", client: Any, metrics: Any, clock: Clock,
                 spawn: Callable[[Any, str], Any], activate: Callable[[list[str]], None],
                 write_nomination: Callable[[Pod, str], None],
                 gate: Callable[[str, str], None] = lambda uid, plugin: None) -> None:
        self.cache = cache
        self.client = client
        self.metrics = metrics
        self.clock = clock
        self.spawn = spawn
        self.activate = activate
        self.write_nomination = write_nomination
        self.gate = gate                                  # hold a queued pod at PreEnqueue (queue.gate)
        self.preempting: set[str] = set()                 # preemptors whose evictions are under way
        self.sync_waits: list[asyncio.Future[Any]] = []   # tasks the loop awaits (synchronous mode)
        self.turns = asyncio.Semaphore(EVICTING)          # FIFO: see EVICTING

    def is_preempting(self, uid: str) -> bool:
        return uid in self.preempting

    def attempted(self) -> None:
        if self.metrics is not None:
            self.metrics.preemption_attempts.inc()

    # ------------------------------------------------------------------ in the cycle

    def preempt(self, fw: "Framework | None", pod: Pod, node: str, victims: list[Pod], sync: bool = False) -> None:
        """Nominate ``pod`` to ``node`` and evict ``victims`` off the cycle. Synchronous; never raises."""
        self.preempt_group(fw, [(pod, node, victims)], sync)

    def preempt_group(self, fw: "Framework | None", plan: list[tuple[Pod, str, list[Pod]]], sync: bool = False) -> None:
        """Nominate each pod of ``plan`` to its node and evict all their victims in one task (a gang preempts
        for all its missing members at once). The pods are held at PreEnqueue until the task ends."""
        victims: dict[str, tuple[Pod, Pod, str]] = {}
        for pod, node, vs in plan:
            for v in vs:
                victims.setdefault(v.uid, (v, pod, node))
        if self.metrics is not None:
            self.metrics.preemption_victims.observe(len(victims))
        nominations = self.cache.nominations
        uids = {pod.uid for pod, _, _ in plan}
        for pod, node, _ in plan:
            nominations.set(pod, node)
            self.write_nomination(pod, node)
            for other in nominations.on(node):
                if other.uid not in uids and other.priority < pod.priority:
                    nominations.clear(other.uid)
                    self.write_nomination(other, "")
            self.preempting.add(pod.uid)
            self.gate(pod.uid, PLUGIN)   # a member waiting in the queue: held too (one in a cycle is held at _fail)
        fut = asyncio.ensure_future(self._run(fw, [(p, n) for p, n, _ in plan], list(victims.values())))
        self.spawn(fut, f"preemption for {plan[0][0].key}" + (f" and {len(plan) - 1} more" if len(plan) > 1 else ""))
        if sync:
            self.sync_waits.append(fut)

    def withdraw(self, pods: list[Pod]) -> None:
        """Take back the nominations of ``pods`` (cache and status): preemption found no room for them, so the
        room they held (against pods of equal or lower priority) must go."""
        for pod in pods:
            if self.cache.nominations.clear(pod.uid) or pod.nominated_node_name:
                self.write_nomination(pod, "")

    async def wait_sync(self) -> None:
        """The synchronous mode: until the evictions started by the last cycle are done."""
        while self.sync_waits:
            waits, self.sync_waits = self.sync_waits, []
            await asyncio.wait(waits)

    # ------------------------------------------------------------------ off the cycle

    async def _run(self, fw: "Framework | None", pods: list[tuple[Pod, str]],
                   victims: list[tuple[Pod, Pod, str]]) -> None:
        t0 = time.perf_counter()
        result = "success"
        try:
            api: list[tuple[Pod, Pod, str]] = []
            for v, pod, node in victims:
                wp = _waiting(fw, v.uid)
                if wp is not None:
                    wp.reject(PLUGIN, "preempted")   # its room is released now, synchronously
                    self._event(fw, pod, v, node)
                else:
                    api.append((v, pod, node))
            if api:
                async with self.turns:
                    outcomes = await asyncio.gather(*(self._evict(fw, pod, v, node) for v, pod, node in api),
                                                    return_exceptions=True)
                errors = [o for o in outcomes if isinstance(o, BaseException)]
                if errors:
                    raise errors[0]
                await self._mark_gangs(api)
        except asyncio.CancelledError:
            result = "error"
            raise
        except Exception as exc:  # noqa: BLE001 - the preemptors go back to the queue, nominated nowhere
            result = "error"
            log.warning("preemption for %s failed: %s", ", ".join(f"{p.key} on {n}" for p, n in pods), exc)
            for pod, node in pods:
                if self.cache.nominations.get(pod.uid) == node:
                    self.cache.nominations.clear(pod.uid)
                self.write_nomination(pod, "")
        finally:
            for pod, _ in pods:
                self.preempting.discard(pod.uid)
            self.activate([pod.uid for pod, _ in pods])
            if self.metrics is not None:
                self.metrics.preemption_goroutines_duration.labels(result).observe(time.perf_counter() - t0)
                self.metrics.preemption_goroutines_execution.labels(result).inc()

    async def _evict(self, fw: "Framework | None", pod: Pod, victim: Pod, node: str) -> None:
        scheduler_name = pod.scheduler_name
        try:
            if not marked_preempted(victim):
                cond = {"type": "DisruptionTarget", "status": "True", "reason": PREEMPTION_BY_SCHEDULER,
                        "message": f"{scheduler_name}: preempting to accommodate a higher priority pod",
                        "lastTransitionTime": rfc3339(self.clock.wall())}
                await self.client.patch_pod_status(victim.namespace, victim.name, {"status": {"conditions": [cond]}})
            await self.client.delete_pod(victim.namespace, victim.name, uid=victim.uid)
        except (NotFound, Conflict):
            return   # already gone (or a new pod with its name: never ours to delete)
        self._event(fw, pod, victim, node)

    async def _mark_gangs(self, victims: list[tuple[Pod, Pod, str]]) -> None:
        """DisruptionTarget=True on the PodGroups evicted whole, by the rule of a PodGroup's conditions
        (scheduler/framework/podgroupconditions.py): the other conditions as the informer has them, on that
        version; a 409 (another writer in between) reads the informer's newer copy and writes again."""
        done: set[str] = set()
        for v, pod, _ in victims:
            key = v.gang
            pg = self.cache.gangs.group(key) if key and key not in done else None
            if pg is None or pg.disruption_mode != DISRUPTION_POD_GROUP:
                continue
            done.add(key)
            message = f"{pod.scheduler_name}: preempting to accommodate a higher priority pod"
            for attempt in range(CONFLICT_RETRIES + 1):
                pg = self.cache.gangs.group(key)
                if pg is None:
                    break   # deleted meanwhile
                old = find_condition(pg.status, "DisruptionTarget")
                if old is not None and old.get("status") == "True":
                    break
                cond = new_condition(pg, "DisruptionTarget", "True", PREEMPTION_BY_SCHEDULER, message, old,
                                     self.clock.wall())
                try:
                    await self.client.patch(f"{pod_group_path(key)}/status", conditions_patch(pg, "DisruptionTarget",
                                                                                              cond))
                    break
                except asyncio.CancelledError:
                    raise
                except Conflict:
                    # the informer brings the newer version in a moment: the next try is made on it
                    await self.clock.sleep(CONFLICT_BACKOFF_SECONDS * 2 ** attempt)
                except Exception as exc:  # noqa: BLE001 - reporting only: the eviction itself is done
                    log.warning("PodGroup %s: cannot write its DisruptionTarget condition: %s", key, exc)
                    break
            else:
                log.warning("PodGroup %s: its DisruptionTarget condition kept meeting newer versions; not written", key)

    def _event(self, fw: "Framework | None", pod: Pod, victim: Pod, node: str) -> None:
        events = fw.handle.events if fw is not None else None
        if events is not None:
            events.eventf(victim, pod, "Normal", "Preempted", "Preempting", f"Preempted by pod {pod.uid} on node {node}")


def _waiting(fw: "Framework | None", uid: str) -> "WaitingPod | None":
    if fw is None:
        return None
    return fw.get_waiting_pod(uid)

