"""GangReadiness: a gang is all-or-nothing until its pods are Ready, as Kueue's waitForPodsReady.

Coscheduling makes sure a gang gets minMember nodes at once. That is not
yet a running job: images may not pull, a node may be broken, a device may
never come up, and then the gang holds its room without making progress,
blocking the gangs behind it. Kueue answers this with waitForPodsReady
(KEP-349): once a workload is admitted, it must reach PodsReady within a
timeout, or it is evicted and requeued with exponential backoff. This
plugin does the same for PodGroups.

Which gangs. A PodGroup opts in with the annotation
``scheduling.tandem.dev/wait-for-pods-ready: "true"``, or by naming its own
timeout with ``scheduling.tandem.dev/pods-ready-timeout-seconds: "120"``.
With ``allGangs: true`` every PodGroup takes part unless it says
``wait-for-pods-ready: "false"``. Only the pods of this plugin's profile
count; pods of other schedulers are never touched.

The round. When minMember members of a gang are bound (its quorum; pods
that Succeeded count too), the clock starts and the PodGroup gets the
condition PodsReady=False (reason WaitForStart). If minMember members are
Ready (pod condition Ready=True, or Succeeded) within the timeout, the
condition turns True (reason PodsReady), a Normal PodsReady event is
recorded, and gangs held by ``blockAdmission`` are released
(``handle.activate``). Otherwise, at the timeout:

* the gang is evicted: each bound, unfinished member gets the
  DisruptionTarget condition (so a Job's podFailurePolicy can ignore the
  failure) and is deleted with a uid precondition. Pods with a controller
  (Job, JobSet, ReplicaSet, ...) are recreated by their controller. Bare
  pods (no controller owner) have nobody to recreate them, and tandem never
  loses a pod: it creates each one again itself (see "Bare pods" below).
  Pending members are not deleted; they hold nothing.
* the PodGroup gets PodsReady=False with reason PodsReadyTimeout and a
  message with the counts, ``status.requeueState`` {count, requeueAt}
  (Kueue's field; it survives scheduler restarts; a native v1alpha2
  PodGroup, whose status has no such field, keeps the same JSON in its
  annotation ``scheduling.tandem.dev/requeue-state``) and a Warning
  PodsReadyTimeout event (each evicted pod gets one too).
* the gang is requeued after ``backoffBaseSeconds * 2^(n-1)`` seconds,
  capped at ``backoffMaxSeconds`` (n = evictions so far): until then its
  pods are held at PreEnqueue (and at PreFilter, for members that were
  already queued), and then they are activated.
* after ``backoffLimitCount`` requeues, the next timeout fails the gang for
  good (Kueue's requeuingStrategy.backoffLimitCount; 0 fails it at the
  first timeout): reason RequeuingLimitExceeded, ``status.phase: Failed``,
  a Warning RequeuingLimitExceeded event, and its pods (recreated ones
  included) are never admitted again. Deleting and recreating the PodGroup
  starts over.

Restarts. The eviction count, the end of a backoff and a failure are read
back from the PodGroup (its status, or that annotation), so a restarted scheduler holds and fails
the same gangs. A round that was waiting for Ready when the scheduler
stopped starts its clock again (a gang may get a little longer, never less).

Bare pods. Before it deletes them, the plugin writes what recreating them
needs onto their PodGroup (annotation ``scheduling.tandem.dev/pending-recreations``),
then deletes them, waits for each old pod to be gone and creates it again;
a restarted process or the other replica completes what is left. The record,
its size limit and how an old pod is found are described in
scheduler/framework/recreation.py.

``blockAdmission``: while some gang has its quorum bound but is not yet
Ready, no other participating gang is admitted: their pods wait at
PreEnqueue (message "waiting for PodGroup ns/x to become Ready"), as
Kueue's waitForPodsReady.blockAdmission serializes workload starts. Gangs
already bound in this round, and pods of no gang, are never held.

Plugin args (pluginConfig name GangReadiness), Kueue's waitForPodsReady
fields: ``timeoutSeconds`` (300), ``backoffBaseSeconds`` (60),
``backoffMaxSeconds`` (3600), ``backoffLimitCount`` (unset: unlimited),
``blockAdmission`` (false), ``allGangs`` (false). Durations may be
fractional seconds. Enable it under multiPoint (it implements PreEnqueue,
PreFilter and EnqueueExtensions) and it runs a background task that checks
the gangs every second or at the next deadline, whichever is sooner.

What it must never do: block the scheduling cycle (every API call is a task,
and PreEnqueue/PreFilter are dictionary lookups), evict a gang that is not
opted in, or delete a pod whose uid changed (a successor of the same name).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from scheduler.framework import (
    ActionType, ClusterEvent, ClusterEventWithHint, Code, ConfigError, QueueingHint, Resource, Status, register,
)
from scheduler.framework.recreation import (  # RECREATE_ANNOTATION: the plugin's annotation, named here too
    ANNOTATIONS_LIMIT, RECREATE_ANNOTATION, Records, grace_left, look, recreation, seen,
)
from scheduler.framework.runtime import go_duration
from scheduler.model import (
    POD_GROUP_PODS_READY, POD_GROUP_REQUEUING_LIMIT_EXCEEDED, Pod, PodGroup, parse_time,
    pod_group_path, split_gang_key,
)

log = logging.getLogger("tandem.plugins.gang_readiness")

NAME = "GangReadiness"

OPT_IN_ANNOTATION = "scheduling.tandem.dev/wait-for-pods-ready"
TIMEOUT_ANNOTATION = "scheduling.tandem.dev/pods-ready-timeout-seconds"
# the native PodGroup's status has no requeueState (nor phase: the API drops both, with a warning): the
# requeue state is kept here instead, as the same JSON, so that a restarted scheduler reads it back
REQUEUE_ANNOTATION = "scheduling.tandem.dev/requeue-state"

# the PodsReady condition's reasons (Kueue's)
WAIT_FOR_START = "WaitForStart"
PODS_READY = "PodsReady"
PODS_READY_TIMEOUT = "PodsReadyTimeout"
REQUEUING_LIMIT_EXCEEDED = POD_GROUP_REQUEUING_LIMIT_EXCEEDED

TICK_SECONDS = 1.0
RECREATE_MARGIN_SECONDS = 30.0  # past the old pod's grace period before its slowness is reported
POLL_SECONDS = 0.5              # how often a recreation looks whether the old pod is gone (a dict lookup)
SLOW_POLL_SECONDS = 5.0         # ... once it is overdue (a finalizer, a node that is down)
RETRY_MAX_SECONDS = 60.0        # the longest wait between two failed creates
SHUTDOWN_GRACE_SECONDS = 5.0    # evictions and recreations under way get this long at shutdown

_OK = Status()


@dataclass(frozen=True, slots=True)
class GangReadinessArgs:
    """Kueue's waitForPodsReady settings, per profile."""

    timeout_seconds: float = 300.0
    backoff_base_seconds: float = 60.0
    backoff_max_seconds: float = 3600.0
    backoff_limit_count: int | None = None
    block_admission: bool = False
    all_gangs: bool = False

    def validate(self, path: str) -> None:
        errs = []
        if not self.timeout_seconds > 0:
            errs.append(f"{path}.timeoutSeconds: must be > 0, got {self.timeout_seconds}")
        if not self.backoff_base_seconds >= 0:
            errs.append(f"{path}.backoffBaseSeconds: must be >= 0, got {self.backoff_base_seconds}")
        if not self.backoff_max_seconds >= self.backoff_base_seconds:
            errs.append(f"{path}.backoffMaxSeconds: must be >= backoffBaseSeconds ({self.backoff_base_seconds}), "
                        f"got {self.backoff_max_seconds}")
        if self.backoff_limit_count is not None and self.backoff_limit_count < 0:
            errs.append(f"{path}.backoffLimitCount: must be >= 0 or unset, got {self.backoff_limit_count}")
        if errs:
            raise ConfigError("; ".join(errs))

    def backoff(self, evictions: int) -> float:
        """Seconds a gang waits after its ``evictions``-th eviction: base * 2^(n-1), capped at max."""
        if evictions <= 0:
            return 0.0
        return min(self.backoff_base_seconds * 2.0 ** min(evictions - 1, 62), self.backoff_max_seconds)


@dataclass(slots=True)
class _Gang:
    """One participating gang's round (mutable, owned by the plugin)."""

    uid: str                                  # the PodGroup's uid: a recreated PodGroup starts over
    quorum_at: float | None = None            # clock() when minMember members were first seen bound
    ready: bool = False                       # reached PodsReady in this round
    evictions: int = 0
    requeue_at: float = 0.0                   # clock() when its backoff ends (0: none)
    requeue_at_text: str = ""                 # the same moment as status.requeueState.requeueAt says it
    failed: bool = False                      # requeuing limit exceeded: never admitted again
    held: bool = False                        # some member was held: activate the gang when released


@register
class GangReadiness:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"PreEnqueue", "EnqueueExtensions", "PreFilter", "Background"})
    Args = GangReadinessArgs

    def __init__(self, args: GangReadinessArgs | None, handle: Any) -> None:
        self.args = args if args is not None else GangReadinessArgs()
        self.handle = handle
        self.clock = handle.clock             # deadlines, backoffs and the tick's sleep
        self.wall = handle.clock.wall         # for the timestamps written to the API
        self.tick_seconds = TICK_SECONDS
        self._gangs: dict[str, _Gang] = {}
        # gangs with their quorum bound and not yet Ready, oldest first (blockAdmission holds the others)
        self._in_progress: dict[str, None] = {}
        self._want: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}   # key -> (PodsReady condition, extras)
        self._writers: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        # bare pods to create again (the PodGroup's RECREATE_ANNOTATION, as this process knows it)
        self._records = Records(handle)
        self._recreating: dict[tuple[str, str], asyncio.Task[Any]] = {}   # (key, pod name) -> its task
        self.evicted = 0                      # pods deleted (metrics, tests)
        self.recreated = 0                    # bare pods created again

    # ------------------------------------------------------------------ who takes part

    def timeout_for(self, pg: PodGroup) -> float | None:
        """The gang's PodsReady timeout in seconds, or None when the PodGroup does not take part."""
        ann = pg.annotations
        opt = str(ann.get(OPT_IN_ANNOTATION, "")).strip().lower()
        if opt == "false":
            return None
        raw = ann.get(TIMEOUT_ANNOTATION)
        if raw is not None:
            try:
                t = float(raw)
                if t > 0:
                    return t
            except (TypeError, ValueError):
                pass
            log.warning("PodGroup %s: %s=%r is not a positive number of seconds; using %ss",
                        pg.key, TIMEOUT_ANNOTATION, raw, self.args.timeout_seconds)
            return self.args.timeout_seconds
        if opt == "true" or self.args.all_gangs:
            return self.args.timeout_seconds
        return None

    def _gang(self, key: str, pg: PodGroup) -> _Gang:
        """The gang's state, restored from the PodGroup's status the first time (or after it was recreated)."""
        uid = pg.uid
        st = self._gangs.get(key)
        if st is None or st.uid != uid:
            self._in_progress.pop(key, None)   # a recreated PodGroup's old round blocks no one
            st = self._gangs[key] = self._restore(uid, pg)
        return st

    def _restore(self, uid: str, pg: PodGroup) -> _Gang:
        status = pg.status
        st = _Gang(uid)
        rq = _requeue_state(pg)
        count = rq.get("count")
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            st.evictions = count
        cond = _pods_ready(status)
        if cond is not None:
            st.failed = cond.get("reason") == REQUEUING_LIMIT_EXCEEDED
            st.ready = cond.get("status") == "True"
        if not st.failed and rq.get("requeueAt"):
            left = parse_time(rq["requeueAt"]) - self.wall()
            if left > 0:
                st.requeue_at = self.clock() + left
                st.requeue_at_text = _rfc3339(parse_time(rq["requeueAt"]))
        return st

    def _members(self, key: str) -> list[Pod]:
        pods = self.handle.pods
        name = self.handle.scheduler_name
        out = []
        for uid in self.handle.gangs.member_uids(key):
            p = pods.get(uid)
            if p is not None and not p.deleting and p.scheduler_name == name:
                out.append(p)
        return out

    # ------------------------------------------------------------------ PreEnqueue, PreFilter, events

    def hold(self, pod: Pod) -> Status | None:
        """Why ``pod`` must wait (UnschedulableAndUnresolvable), or None. Dictionary lookups only."""
        key = pod.gang
        if not key:
            return None
        pg = self.handle.gangs.group(key)
        if pg is None or self.timeout_for(pg) is None:
            return None
        st = self._gang(key, pg)
        if st.failed:
            st.held = True
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                          f"PodGroup {key} failed: its members were not Ready within the PodsReady timeout "
                          f"{st.evictions} times (backoffLimitCount {self.args.backoff_limit_count})")
        now = self.clock()
        if st.requeue_at > now:
            st.held = True
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                          f"PodGroup {key} is backing off after a PodsReady timeout "
                          # the moment, not the time left: the held pods show this text (scheduler/preenqueue.py),
                          # and a countdown would be a new message, and a new write, at every look
                          f"(eviction {st.evictions}); requeued at {st.requeue_at_text}")
        if self.args.block_admission and st.quorum_at is None and not st.ready:
            for other in self._in_progress:
                if other != key:
                    st.held = True
                    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                  f"waiting for PodGroup {other} to become Ready (blockAdmission)")
        return None

    def pre_enqueue(self, pod: Pod) -> Status:
        return self.hold(pod) or _OK

    def pre_filter(self, state: Any, pod: Pod, nodes: Any) -> tuple[None, Status]:
        # members already queued when their gang's hold began never meet PreEnqueue again
        return None, self.hold(pod) or _OK

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # the background task activates held gangs when a hold ends; these cover a PodGroup that changes
        # (opted out, deleted, recreated) or a blocking gang whose pods go away
        return [
            ClusterEventWithHint(ClusterEvent(Resource.POD_GROUP, ActionType.ALL), self._hint),
            ClusterEventWithHint(ClusterEvent(Resource.ASSIGNED_POD, ActionType.DELETE), self._hint),
        ]

    def _hint(self, pod: Pod, old: Any, new: Any) -> int:
        return QueueingHint.QUEUE if self.hold(pod) is None else QueueingHint.SKIP

    # ------------------------------------------------------------------ the background task

    async def run(self) -> None:
        """Check the gangs every tick (or at the next deadline) until cancelled."""
        try:
            while True:
                try:
                    self.tick()
                except Exception:  # noqa: BLE001 - a bug here must not end the checks
                    log.exception("GangReadiness tick failed")
                await self.clock.sleep(self._next_wait())
        except asyncio.CancelledError:
            # let the work under way finish a moment; what is left of a bare pod's recreation is on its
            # PodGroup, for the next leader (or this process, leading again, which reads it afresh)
            if self._tasks:
                await asyncio.wait(list(self._tasks), timeout=SHUTDOWN_GRACE_SECONDS)
            for task in list(self._tasks):
                task.cancel()
            self._records.clear()
            raise

    def _next_wait(self) -> float:
        now = self.clock()
        wait = self.tick_seconds
        for key, st in self._gangs.items():
            if st.requeue_at:
                wait = min(wait, st.requeue_at - now)
            if st.quorum_at is not None:
                pg = self.handle.gangs.group(key)
                timeout = self.timeout_for(pg) if pg is not None else None
                if timeout is not None:
                    wait = min(wait, st.quorum_at + timeout - now)
        return max(wait, 0.01)

    def tick(self) -> None:
        """One pass over the participating gangs: start rounds, see them Ready, evict, end backoffs."""
        now = self.clock()
        before = set(self._in_progress)
        release: list[str] = []
        seen: set[str] = set()
        groups = self.handle.gangs.groups
        for key, pg in list(groups.items()):
            self._resume_recreations(key, pg)   # any group: it may have opted out since
            timeout = self.timeout_for(pg)
            if timeout is None:
                continue
            seen.add(key)
            st = self._gang(key, pg)
            if st.requeue_at and now >= st.requeue_at:
                st.requeue_at = 0.0
                release.append(key)
            if st.failed:
                continue
            self._check(key, pg, st, timeout, now)
        for key in [k for k in self._records.read if k not in groups]:
            self._records.deleted(key)   # its entries went with it (tasks under way go on)
        for key in list(self._gangs):
            if key not in seen:   # deleted, or opted out: forget it, and let its held pods go
                st = self._gangs.pop(key)
                self._in_progress.pop(key, None)
                self._want.pop(key, None)
                if st.held:
                    release.append(key)
        if self.args.block_admission and before - set(self._in_progress):
            # a blocking gang became Ready, was evicted or went away: the gangs it held may go now
            release += [k for k, st in self._gangs.items() if st.held]
        for key in dict.fromkeys(release):
            st = self._gangs.get(key)
            if st is not None:
                st.held = False
            uids = [p.uid for p in self._members(key) if not p.node_name]
            if uids:
                self.handle.activate(uids)

    def _check(self, key: str, pg: PodGroup, st: _Gang, timeout: float, now: float) -> None:
        need = pg.quorum
        bound = [p for p in self._members(key) if p.node_name and p.phase != "Failed"]
        if st.ready:
            if not bound:
                st.ready = False   # every member is gone: the next quorum starts a new round
            return
        if st.quorum_at is None:
            if len(bound) < need or st.requeue_at:
                return
            st.quorum_at = now
            self._in_progress[key] = None
            self._set_condition(key, pg, "False", WAIT_FOR_START,
                                f"{_ready_count(bound)}/{need} required members are Ready; waiting up to "
                                f"{go_duration(timeout)}")
        ready = _ready_count(bound)
        if ready >= need:
            st.ready = True
            st.quorum_at = None
            self._in_progress.pop(key, None)
            note = f"{ready}/{need} required members are Ready"
            self._set_condition(key, pg, "True", PODS_READY, note)
            self._event(pg, "Normal", PODS_READY, "Scheduling", note)
        elif now - st.quorum_at >= timeout:
            self._evict(key, pg, st, bound, ready, need, timeout, now)

    def _evict(self, key: str, pg: PodGroup, st: _Gang, bound: list[Pod], ready: int, need: int,
               timeout: float, now: float) -> None:
        st.evictions += 1
        st.quorum_at = None
        self._in_progress.pop(key, None)
        victims = [p for p in bound if not p.terminal]
        owned = [p for p in victims if any(o.controller for o in p.owners)]
        bare = self._records.plan(key, pg, [p for p in victims if not any(o.controller for o in p.owners)])
        kept = len(victims) - len(owned) - len(bare)
        n, limit = st.evictions, self.args.backoff_limit_count
        what = (f"{ready}/{need} required members became Ready within {go_duration(timeout)} of the gang being "
                f"bound; evicted {len(owned) + len(bare)} pod(s)")
        if kept:
            what += (f"; {kept} bare pod(s) not evicted: the record to create them again would make the "
                     f"PodGroup's annotations larger than {ANNOTATIONS_LIMIT // 1024} KiB")
            log.warning("PodGroup %s: %d bare pod(s) not evicted: the record to create them again does not fit "
                        "in its annotations", key, kept)
        if limit is not None and n > limit:
            st.failed = True
            msg = (f"{what}; the gang was requeued {n - 1} time(s), its backoffLimitCount: the PodGroup failed "
                   f"and its pods are not scheduled any more")
            self._set_condition(key, pg, "False", REQUEUING_LIMIT_EXCEEDED, msg,
                                {"phase": "Failed", "requeueState": {"count": n, "requeueAt": None}})
            self._event(pg, "Warning", PODS_READY_TIMEOUT, "Evicting", what)
            self._event(pg, "Warning", REQUEUING_LIMIT_EXCEEDED, "Evicting", msg)
        else:
            backoff = self.args.backoff(n)
            st.requeue_at = now + backoff
            st.requeue_at_text = _rfc3339(self.wall() + backoff)
            of = f" of at most {limit}" if limit is not None else ""
            msg = f"{what}; requeue {n}{of} after a backoff of {go_duration(backoff)}"
            self._set_condition(key, pg, "False", PODS_READY_TIMEOUT, msg,
                                {"requeueState": {"count": n, "requeueAt": st.requeue_at_text}})
            self._event(pg, "Warning", PODS_READY_TIMEOUT, "Evicting", msg)
        why = f"PodGroup {key}: {what}"
        for p in owned:
            self._spawn(self._evict_pod(key, p, why), f"evicting {p.key}")
        if bare:
            self._track(key, [p.name for p in bare], self._spawn(self._evict_bare(key, bare, why),
                                                                  f"evicting the bare pods of PodGroup {key}"))

    # ------------------------------------------------------------------ API work (tasks)

    def _spawn(self, coro: Any, what: str) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("%s failed: %r", what, t.exception())

        task.add_done_callback(done)
        return task

    def _track(self, key: str, names: list[str], task: asyncio.Task[Any]) -> None:
        """``task`` recreates these pods of group ``key``: the tick must not start another one for them."""
        for name in names:
            self._recreating[(key, name)] = task

        def done(t: asyncio.Task[Any]) -> None:
            for name in names:
                if self._recreating.get((key, name)) is t:
                    del self._recreating[(key, name)]

        task.add_done_callback(done)

    async def flush(self) -> None:
        """Wait for the API work under way (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _event(self, pg: PodGroup, type_: str, reason: str, action: str, note: str) -> None:
        if self.handle.events is not None:
            self.handle.events.eventf(pg.reference, None, type_, reason, action, note)

    def _set_condition(self, key: str, pg: PodGroup, status: str, reason: str, message: str,
                       extras: dict[str, Any] | None = None) -> None:
        """Write PodsReady (and ``extras``, other status fields) from one writer per group, newest wins."""
        old = self._want.get(key, (None, {}))[0] or _pods_ready(pg.status)
        since = old.get("lastTransitionTime") if old is not None and old.get("status") == status else None
        cond = {"type": POD_GROUP_PODS_READY, "status": status, "reason": reason, "message": message,
                "lastTransitionTime": since or _rfc3339(self.wall())}
        if pg.generation:   # the API sets it from 1; 0 means the object did not carry one
            cond["observedGeneration"] = pg.generation
        merged = dict(self._want.get(key, (None, {}))[1])
        merged.update(extras or {})
        self._want[key] = (cond, merged)
        if key not in self._writers:
            self._writers.add(key)
            self._spawn(self._write_status(key), f"status of PodGroup {key}")

    async def _write_status(self, key: str) -> None:
        written: tuple[dict[str, Any], dict[str, Any]] | None = None
        try:
            while (want := self._want.get(key)) is not None and want is not written:
                cond, extras = want
                pg = self.handle.gangs.group(key)
                if pg is None:
                    return
                # a merge patch replaces the whole list: keep the other conditions as the API has them
                others = [c for c in pg.status.get("conditions") or ()
                          if isinstance(c, dict) and c.get("type") != POD_GROUP_PODS_READY]
                native = split_gang_key(key)[0]
                try:
                    if native and "requeueState" in extras:
                        await self.handle.client.patch(pod_group_path(key), {"metadata": {"annotations": {
                            REQUEUE_ANNOTATION: json.dumps(extras["requeueState"], separators=(",", ":"))}}})
                    # the native API's status is its conditions (a Failed gang says so in PodsReady's reason)
                    await self.handle.client.patch(f"{pod_group_path(key)}/status", {"status": {
                        "conditions": others + [cond], **({} if native else extras)}})
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - already retried by the client
                    log.warning("PodGroup %s: cannot write its PodsReady condition: %s", key, exc)
                    return
                written = want
        finally:
            self._writers.discard(key)

    async def _evict_pod(self, key: str, pod: Pod, why: str, entry: dict[str, Any] | None = None) -> None:
        """Mark ``pod`` a disruption target and delete it; then create it again from ``entry`` (bare pods)."""
        client = self.handle.client
        if self.handle.events is not None:
            self.handle.events.eventf(pod, None, "Warning", PODS_READY_TIMEOUT, "Evicting", why)
        try:
            await client.patch_pod_status(pod.namespace, pod.name, {"status": {"conditions": [{
                "type": "DisruptionTarget", "status": "True", "reason": PODS_READY_TIMEOUT, "message": why,
                "lastTransitionTime": _rfc3339(self.wall())}]}})
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
                    await self._records.drop(key, pod.name)
                return
            if status != 404:
                # whether it went after all is for the recreation to find out: a pod still there and not
                # being deleted drops its entry, a pod gone is created again
                log.error("cannot evict %s: %s", pod.key, exc)
        if entry is not None:
            await self._recreate(key, pod.name, entry)

    # ------------------------------------------------------------------ bare pods: the durable recreation

    def _resume_recreations(self, key: str, pg: PodGroup) -> None:
        """Read the group's pending recreations the first time it is seen; run those that no task runs."""
        self._records.load(key, pg)
        records = self._records.entries.get(key)
        if not records:
            return
        for name, entry in list(records.items()):
            if (key, name) not in self._recreating:
                log.info("PodGroup %s: resuming the recreation of evicted bare pod %s", key, name)
                self._track(key, [name], self._spawn(self._recreate(key, name, entry),
                                                     f"recreating {split_gang_key(key)[1]}/{name}"))

    async def _evict_bare(self, key: str, pods: list[Pod], why: str) -> None:
        """Record how to create the bare pods again, then evict them; never the other way round."""
        if not await self._records.save(key):
            records = self._records.entries.get(key) or {}
            for p in pods:
                records.pop(p.name, None)
            msg = (f"{len(pods)} bare pod(s) were not evicted: the record to create them again could not be "
                   f"written to the PodGroup")
            log.error("PodGroup %s: %s", key, msg)
            self._group_event(key, "Warning", PODS_READY_TIMEOUT, "Evicting", msg)
            return
        records = self._records.entries.get(key) or {}
        await asyncio.gather(*(self._evict_pod(key, p, why, records.get(p.name) or
                                               {"uid": p.uid, "pod": recreation(p.raw)}) for p in pods))

    def _due(self, raw: dict[str, Any] | None) -> float:
        """clock() by when a terminating pod should be gone (recreation.grace_left), plus a margin."""
        left = grace_left(raw, self.wall())
        return self.clock() + left + RECREATE_MARGIN_SECONDS

    async def _recreate(self, key: str, name: str, entry: dict[str, Any]) -> None:
        """Create bare pod ``name`` again once its old pod is gone, then drop its entry. Idempotent."""
        ns = split_gang_key(key)[1]
        path = f"/api/v1/namespaces/{ns}/pods"
        uid, body = str(entry.get("uid", "")), entry.get("pod") or {}
        clock = self.clock
        due: float | None = None
        overdue = False
        retry = POLL_SECONDS
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
                    due = self._due(raw)
                if not overdue and clock() >= due:
                    overdue = True
                    msg = (f"evicted bare pod {ns}/{name} is still terminating {go_duration(RECREATE_MARGIN_SECONDS)} "
                           f"after its grace period; it is created again once it is gone")
                    log.warning("PodGroup %s: %s", key, msg)
                    self._group_event(key, "Warning", PODS_READY_TIMEOUT, "Recreating", msg)
                await clock.sleep(SLOW_POLL_SECONDS if overdue else POLL_SECONDS)
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
        await self._records.drop(key, name)

    def _group_event(self, key: str, type_: str, reason: str, action: str, note: str) -> None:
        pg = self.handle.gangs.group(key)
        if pg is not None:
            self._event(pg, type_, reason, action, note)


# ---------------------------------------------------------------------------- helpers


def _ready_count(pods: list[Pod]) -> int:
    n = 0
    for p in pods:
        if p.phase == "Succeeded":
            n += 1
            continue
        for c in (p.raw.get("status") or {}).get("conditions") or ():
            if isinstance(c, dict) and c.get("type") == "Ready":
                if c.get("status") == "True":
                    n += 1
                break
    return n


def _requeue_state(pg: PodGroup) -> dict[str, Any]:
    """status.requeueState of a scheduler-plugins PodGroup; REQUEUE_ANNOTATION's JSON on a native one."""
    rq = pg.status.get("requeueState")
    if isinstance(rq, dict):
        return rq
    raw = pg.annotations.get(REQUEUE_ANNOTATION)
    if raw:
        try:
            value = json.loads(raw)
        except ValueError:
            log.warning("PodGroup %s/%s: annotation %s is not JSON; its requeue state starts over",
                        pg.namespace, pg.name, REQUEUE_ANNOTATION)
            return {}
        return value if isinstance(value, dict) else {}
    return {}


def _pods_ready(status: dict[str, Any]) -> dict[str, Any] | None:
    for c in status.get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == POD_GROUP_PODS_READY:
            return c
    return None


def _rfc3339(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
