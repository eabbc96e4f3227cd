"""GangReadiness' eviction round: mark, delete, and create bare pods again, off the scheduling cycle.

GangReadiness (plugins/gang_readiness.py) decides that a gang that did not
become Ready in time is evicted, and which of its pods go; this module does
the API work of that decision, as tasks:

* a member with a controller (Job, JobSet, ReplicaSet, ...) gets the
  condition ``DisruptionTarget`` (reason PodsReadyTimeout, so a Job's
  podFailurePolicy can ignore the failure) and a Warning PodsReadyTimeout
  event, and is deleted with a uid precondition; its controller creates it
  again;
* bare pods (no controller owner) have nobody to create them again, and
  tandem never loses a pod: their record is written onto the PodGroup first
  (scheduler/framework/recreation.py), then they are marked and deleted the
  same way, and each is created again once its old pod is gone; the entry
  goes then. A restarted process, or the other replica, resumes the
  recreations the record holds (:meth:`GangEviction.resume`).

A recreation waits for the old pod's deletion as an event (the pod is a
member of its gang: the gang's GroupEvents wake it, :class:`GroupChanges`),
with timers on the clock as the bound: the end of the old pod's grace period
plus ``RECREATE_MARGIN_SECONDS`` (then it is reported, and still waited for),
and a slow look every ``SLOW_POLL_SECONDS`` after that (a pod whose deletion
the informer missed, a finalizer, a node that is down).

It must never delete a pod whose uid changed (a successor of the same name),
nor create a pod whose old one is still there.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from scheduler.framework.groupchanges import GroupChanges
from scheduler.framework.podgroupconditions import Spawn, rfc3339
from scheduler.framework.recreation import Records, grace_left, look, recreation, seen
from scheduler.framework.runtime import go_duration
from scheduler.model import Pod, PodGroup, split_gang_key

if TYPE_CHECKING:
    from scheduler.framework.handle import Handle

log = logging.getLogger("tandem.plugins.gang_readiness")   # the plugin's: one logger for one feature

PODS_READY_TIMEOUT = "PodsReadyTimeout"   # the reason of the DisruptionTarget condition and of the events
RECREATE_MARGIN_SECONDS = 30.0  # past the old pod's grace period before its slowness is reported
SLOW_POLL_SECONDS = 5.0         # how often an overdue recreation looks again without an event (a dict lookup)
RETRY_MAX_SECONDS = 60.0        # the longest wait between two failed creates or reads


class GangEviction:
    """The evictions and recreations under way, and the record of bare pods to create again (:attr:`records`).

    ``spawn`` starts a task the plugin owns (it logs its failure, and waits for it at shutdown); ``changes``
    wakes a recreation when its gang changed.
    """

    def __init__(self, handle: Handle, spawn: Spawn, changes: GroupChanges) -> None:
        self.handle = handle
        self._spawn = spawn
        self._changes = changes
        # bare pods to create again (the PodGroup's RECREATE_ANNOTATION, as this process knows it)
        self.records = Records(handle)
        self._recreating: dict[tuple[str, str], asyncio.Task[Any]] = {}   # (key, pod name) -> its task
        self.evicted = 0                      # pods deleted (metrics, tests)
        self.recreated = 0                    # bare pods created again

    # ------------------------------------------------------------------ the round

    def plan(self, key: str, pg: PodGroup, bare: list[Pod]) -> list[Pod]:
        """The bare pods of ``bare`` whose record fits on the PodGroup (see Records.plan), in order."""
        return self.records.plan(key, pg, bare)

    def evict(self, key: str, owned: list[Pod], bare: list[Pod], why: str) -> None:
        """Start evicting a gang: ``owned`` pods are deleted, ``bare`` ones (planned) recorded, deleted and created
        again. ``why`` is the message of their condition and events."""
        for p in owned:
            self._spawn(self._evict_pod(key, p, why), f"evicting {p.key}")
        if bare:
            self._track(key, [p.name for p in bare], self._spawn(self._evict_bare(key, bare, why),
                                                                  f"evicting the bare pods of PodGroup {key}"))

    def resume(self, key: str, pg: PodGroup) -> None:
        """Read the group's pending recreations the first time it is seen; run those that no task runs."""
        self.records.load(key, pg)
        records = self.records.entries.get(key)
        if not records:
            return
        for name, entry in list(records.items()):
            if (key, name) not in self._recreating:
                log.info("PodGroup %s: resuming the recreation of evicted bare pod %s", key, name)
                self._track(key, [name], self._spawn(self._recreate(key, name, entry),
                                                     f"recreating {split_gang_key(key)[1]}/{name}"))

    def deleted(self, key: str) -> None:
        """The PodGroup is gone, and its record with it (recreations under way in this process go on)."""
        self.records.deleted(key)

    def stopped(self) -> None:
        """Shutdown: forget what was read and written (the next leader reads the records afresh)."""
        self.records.clear()

    # ------------------------------------------------------------------ API work (tasks)

    def _track(self, key: str, names: list[str], task: asyncio.Task[Any]) -> None:
        """``task`` recreates these pods of group ``key``: :meth:`resume` must not start another one for them."""
        for name in names:
            self._recreating[(key, name)] = task

        def done(t: asyncio.Task[Any]) -> None:
            for name in names:
                if self._recreating.get((key, name)) is t:
                    del self._recreating[(key, name)]

        task.add_done_callback(done)

    async def _evict_pod(self, key: str, pod: Pod, why: str, entry: dict[str, Any] | None = None) -> None:
        """Mark ``pod`` a disruption target and delete it; then create it again from ``entry`` (bare pods)."""
        client = self.handle.client
        if self.handle.events is not None:
            self.handle.events.eventf(pod, None, "Warning", PODS_READY_TIMEOUT, "Evicting", why)
        try:
            await client.patch_pod_status(pod.namespace, pod.name, {"status": {"conditions": [{
                "type": "DisruptionTarget", "status": "True", "reason": PODS_READY_TIMEOUT, "message": why,
                "lastTransitionTime": rfc3339(self.handle.clock.wall())}]}})
        except Exception as exc:  # noqa: BLE001 - the delete is what matters
            log.debug("cannot mark %s as a disruption target: %s", pod.key, exc)
        try:
            await client.delete_pod(pod.namespace, pod.name, uid=pod.uid)
            self.evicted += 1
        except Exception as exc:  # noqa: BLE001
            status = getattr(exc, "status", None)
            if status == 409:
                # the uid precondition failed: that name is a successor now, not ours to touch
                if entry is not None:
                    await self.records.drop(key, pod.name)
                return
            if status != 404:
                # whether it went after all is for the recreation to find out: a pod still there and not
                # being deleted drops its entry, a pod gone is created again
                log.error("cannot evict %s: %s", pod.key, exc)
        if entry is not None:
            await self._recreate(key, pod.name, entry)

    async def _evict_bare(self, key: str, pods: list[Pod], why: str) -> None:
        """Record how to create the bare pods again, then evict them; never the other way round."""
        if not await self.records.save(key):
            records = self.records.entries.get(key) or {}
            for p in pods:
                records.pop(p.name, None)
            msg = (f"{len(pods)} bare pod(s) were not evicted: the record to create them again could not be "
                   f"written to the PodGroup")
            log.error("PodGroup %s: %s", key, msg)
            self._group_event(key, "Warning", PODS_READY_TIMEOUT, "Evicting", msg)
            return
        records = self.records.entries.get(key) or {}
        await asyncio.gather(*(self._evict_pod(key, p, why, records.get(p.name) or
                                               {"uid": p.uid, "pod": recreation(p.raw)}) for p in pods))

    async def _recreate(self, key: str, name: str, entry: dict[str, Any]) -> None:
        """Create bare pod ``name`` again once its old pod is gone, then drop its entry. Idempotent."""
        ns = split_gang_key(key)[1]
        path = f"/api/v1/namespaces/{ns}/pods"
        uid, body = str(entry.get("uid", "")), entry.get("pod") or {}
        clock = self.handle.clock
        due: float | None = None        # clock() by when a terminating old pod should be gone, plus the margin
        overdue = False
        retry = 0.5
        ask = False
        while True:
            state, raw = seen(self.handle.pods, self.handle.gangs.member_uids(key), name, uid)
            if ask or state == "ask":
                state, raw = await look(self.handle.client, path, name, uid)
                ask = False
            if state == "alive":
                log.info("pod %s/%s is not being deleted: it was not evicted, nothing to create", ns, name)
                break
            if state == "replaced":
                break   # a pod of that name with another uid: created by us before, or by its owner
            if state == "unknown":
                await clock.sleep(retry)
                retry = min(retry * 2, RETRY_MAX_SECONDS)
                continue
            if state == "terminating":
                if due is None:
                    due = clock() + grace_left(raw, clock.wall()) + RECREATE_MARGIN_SECONDS
                if not overdue and clock() >= due:
                    overdue = True
                    msg = (f"evicted bare pod {ns}/{name} is still terminating {go_duration(RECREATE_MARGIN_SECONDS)} "
                           f"after its grace period; it is created again once it is gone")
                    log.warning("PodGroup %s: %s", key, msg)
                    self._group_event(key, "Warning", PODS_READY_TIMEOUT, "Recreating", msg)
                # its deletion is an event of its gang; the timer reports it overdue, or looks again then
                await self._changes.wait(key, SLOW_POLL_SECONDS if overdue else due - clock())
                continue
            try:   # gone: the name is free
                await self.handle.client.create(path, body)
                self.recreated += 1
                log.info("PodGroup %s: created evicted bare pod %s/%s again", key, ns, name)
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                status = getattr(exc, "status", None)
                if status == 409:
                    ask = True   # AlreadyExists: the old pod still terminating, or the new one already there
                    await clock.sleep(0)
                    continue
                if status in (400, 404, 422):
                    msg = f"evicted bare pod {ns}/{name} cannot be created again: {exc}"
                    log.error("PodGroup %s: %s", key, msg)
                    self._group_event(key, "Warning", "FailedCreate", "Recreating", msg)
                    break
                log.warning("PodGroup %s: creating evicted bare pod %s/%s again failed, retrying: %s",
                            key, ns, name, exc)
                await clock.sleep(retry)
                retry = min(retry * 2, RETRY_MAX_SECONDS)
        await self.records.drop(key, name)

    def _group_event(self, key: str, type_: str, reason: str, action: str, note: str) -> None:
        pg = self.handle.gangs.group(key)
        if pg is not None and self.handle.events is not None:
            self.handle.events.eventf(pg.reference, None, type_, reason, action, note)
