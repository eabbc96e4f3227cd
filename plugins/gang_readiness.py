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
PreFilter and EnqueueExtensions).

Events and timers, not a sweep. The plugin looks at a gang when something
about it changed: a member pod or the PodGroup was added, updated or deleted
(its GroupEvents extension point: the informer handlers say which gang), or
one of the gang's deadlines came (a clock timer per gang, at the end of its
PodsReady timeout or of its backoff). Its background task starts by looking
at every PodGroup (so a restarted or newly elected scheduler reads every
round back), and from then on only at the gangs that changed or came due. A
gang's state (its round, its timer, its pending status write, an unreadable
annotation already reported) is dropped when its PodGroup is deleted or no
longer takes part, so none of it grows with the gangs that come and go. An
unreadable ``pods-ready-timeout-seconds`` is logged once per group and value.

Status. The PodsReady condition (and ``requeueState``, ``phase: Failed``) is
written by the rule every writer of a PodGroup's conditions follows
(scheduler/framework/podgroupconditions.py): a merge patch on the
resourceVersion whose other conditions it keeps, and on 409 Conflict it
waits for the informer's newer version and writes again; so it never erases
the status controller's PodGroupScheduled. The eviction round's API work
(marking, deleting, recreating bare pods) is scheduler/framework/gangeviction.py.

What it must never do: block the scheduling cycle (every API call is a task,
and PreEnqueue/PreFilter are dictionary lookups), evict a gang that is not
opted in, or delete a pod whose uid changed (a successor of the same name).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any

from scheduler.framework import (
    ActionType, ClusterEvent, ClusterEventWithHint, Code, ConfigError, QueueingHint, Resource, Status, register,
)
from scheduler.framework.clock import Timer
from scheduler.framework.gangeviction import PODS_READY_TIMEOUT, GangEviction
from scheduler.framework.groupchanges import GroupChanges
from scheduler.framework.podgroupconditions import ConditionWriter, find_condition, rfc3339
from scheduler.framework.recreation import ANNOTATIONS_LIMIT, RECREATE_ANNOTATION, recreation
from scheduler.framework.runtime import go_duration
from scheduler.model import (
    POD_GROUP_PODS_READY, POD_GROUP_REQUEUING_LIMIT_EXCEEDED, Pod, PodGroup, parse_time,
)

log = logging.getLogger("tandem.plugins.gang_readiness")

NAME = "GangReadiness"

OPT_IN_ANNOTATION = "scheduling.tandem.dev/wait-for-pods-ready"
TIMEOUT_ANNOTATION = "scheduling.tandem.dev/pods-ready-timeout-seconds"
# the native PodGroup's status has no requeueState (nor phase: the API drops both, with a warning): the
# requeue state is kept here instead, as the same JSON, so that a restarted scheduler reads it back
REQUEUE_ANNOTATION = "scheduling.tandem.dev/requeue-state"

# the PodsReady condition's reasons (Kueue's; the third, PODS_READY_TIMEOUT, is the eviction round's too)
WAIT_FOR_START = "WaitForStart"
PODS_READY = "PodsReady"
REQUEUING_LIMIT_EXCEEDED = POD_GROUP_REQUEUING_LIMIT_EXCEEDED

SHUTDOWN_GRACE_SECONDS = 5.0    # evictions and recreations under way get this long at shutdown
# a deadline counts as come this much before it (a timer may fire a clock tick early; sums of floats round)
EARLY_SECONDS = 1e-3

_OK = Status()

# what tests and the docs reach through this module besides the plugin: its annotations, the record's format
__all__ = ["ANNOTATIONS_LIMIT", "NAME", "OPT_IN_ANNOTATION", "RECREATE_ANNOTATION", "REQUEUE_ANNOTATION",
           "TIMEOUT_ANNOTATION", "GangReadiness", "GangReadinessArgs", "recreation"]


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
    EXTENSION_POINTS = frozenset({"PreEnqueue", "EnqueueExtensions", "PreFilter", "Background", "GroupEvents"})
    Args = GangReadinessArgs

    def __init__(self, args: GangReadinessArgs | None, handle: Any) -> None:
        self.args = args if args is not None else GangReadinessArgs()
        self.handle = handle
        self.clock = handle.clock             # deadlines, backoffs and their timers
        self.wall = handle.clock.wall         # for the timestamps written to the API
        self._gangs: dict[str, _Gang] = {}
        # gangs with their quorum bound and not yet Ready, oldest first (blockAdmission holds the others)
        self._in_progress: dict[str, None] = {}
        self._timers: dict[str, tuple[float, Timer]] = {}   # key -> (clock() it is due, timer): its next deadline
        self._malformed: dict[str, str] = {}  # key -> the unreadable timeout annotation already logged
        self._dirty: dict[str, None] = {}     # groups that changed or came due, oldest first (an ordered set)
        self._wake: asyncio.Event | None = None   # while run() runs: set when a group is dirty
        self._tasks: set[asyncio.Task[Any]] = set()
        self._changes = GroupChanges(handle.clock)   # wakes writers and recreations waiting for their gang
        # PodsReady (and requeueState, phase) by the rule of a PodGroup's conditions, one writer per group
        self._status = ConditionWriter(handle, POD_GROUP_PODS_READY, self._spawn, self._changes,
                                       annotations={"requeueState": REQUEUE_ANNOTATION})
        self._eviction = GangEviction(handle, self._spawn, self._changes)

    @property
    def evicted(self) -> int:
        """Pods deleted by evictions (metrics, tests)."""
        return self._eviction.evicted

    @property
    def recreated(self) -> int:
        """Bare pods created again."""
        return self._eviction.recreated

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
                    self._malformed.pop(pg.key, None)
                    return t
            except (TypeError, ValueError):
                pass
            if self._malformed.get(pg.key) != raw:   # once per group and value: this is read at every look
                self._malformed[pg.key] = raw
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
        st = _Gang(uid)
        rq = _requeue_state(pg)
        count = rq.get("count")
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            st.evictions = count
        cond = find_condition(pg.status, POD_GROUP_PODS_READY)
        if cond is not None:
            st.failed = cond.get("reason") == REQUEUING_LIMIT_EXCEEDED
            st.ready = cond.get("status") == "True"
        if not st.failed and rq.get("requeueAt"):
            left = parse_time(rq["requeueAt"]) - self.wall()
            if left > 0:
                st.requeue_at = self.clock() + left
                st.requeue_at_text = rfc3339(parse_time(rq["requeueAt"]))
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
        # the plugin activates held gangs when a hold ends; these cover a PodGroup that changes
        # (opted out, deleted, recreated) or a blocking gang whose pods go away
        return [
            ClusterEventWithHint(ClusterEvent(Resource.POD_GROUP, ActionType.ALL), self._hint),
            ClusterEventWithHint(ClusterEvent(Resource.ASSIGNED_POD, ActionType.DELETE), self._hint),
        ]

    def _hint(self, pod: Pod, old: Any, new: Any) -> int:
        return QueueingHint.QUEUE if self.hold(pod) is None else QueueingHint.SKIP

    def group_changed(self, key: str) -> None:
        """GroupEvents: a member pod or the PodGroup ``key`` changed. O(1): :meth:`run` looks at the group."""
        self._changes.notify(key)
        if self._wake is not None:
            self._mark(key)
        elif self.handle.gangs.group(key) is None:
            # not running (a follower, or not started): a deleted group's state goes now, the rest is looked
            # at when run() starts
            self._forget(key)
            self._eviction.deleted(key)

    def _mark(self, key: str) -> None:
        if self._wake is not None:
            self._dirty[key] = None
            self._wake.set()

    # ------------------------------------------------------------------ the background task

    async def run(self) -> None:
        """Until cancelled: look at the gangs that changed (GroupEvents) or came due (timers)."""
        self._wake = wake = asyncio.Event()
        # the first look is at every group: the state of each is read back from it (a restart, a new leader)
        self._dirty.update(dict.fromkeys([*self.handle.gangs.groups, *self._gangs]))
        try:
            while True:
                wake.clear()
                try:
                    self.sync()
                except Exception:  # noqa: BLE001 - a bug here must not end the plugin's work
                    log.exception("GangReadiness failed to look at its gangs")
                await self.clock.wait(wake, None)
        except asyncio.CancelledError:
            # let the work under way finish a moment; what is left of a bare pod's recreation is on its
            # PodGroup, for the next leader (or this process, leading again, which reads it afresh)
            if self._tasks:
                await asyncio.wait(list(self._tasks), timeout=SHUTDOWN_GRACE_SECONDS)
            for task in list(self._tasks):
                task.cancel()
            self._eviction.stopped()
            raise
        finally:
            self._wake = None
            self._dirty.clear()
            for _, timer in self._timers.values():
                timer.cancel()
            self._timers.clear()

    def sync(self) -> None:
        """Look at the gangs that changed or came due: start rounds, see them Ready, evict, end backoffs, forget
        the groups that went, and let the pods whose hold ended go."""
        now = self.clock()
        before = set(self._in_progress)
        release: list[str] = []
        while self._dirty:
            key = next(iter(self._dirty))
            del self._dirty[key]
            try:
                self._look(key, now, release)
            except Exception:  # noqa: BLE001 - a bug with one gang must not stop the others
                log.exception("PodGroup %s: GangReadiness failed to look at it", key)
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

    def _look(self, key: str, now: float, release: list[str]) -> None:
        pg = self.handle.gangs.group(key)
        if pg is None:
            self._eviction.deleted(key)   # its record went with it (tasks under way go on)
            timeout = None
        else:
            self._eviction.resume(key, pg)   # any group: it may have opted out since
            timeout = self.timeout_for(pg)
        if pg is None or timeout is None:
            st = self._forget(key)   # deleted, or opted out: forget it, and let its held pods go
            if st is not None and st.held:
                release.append(key)
            return
        st = self._gang(key, pg)
        if st.requeue_at and now >= st.requeue_at - EARLY_SECONDS:
            st.requeue_at = 0.0
            release.append(key)
        if not st.failed:
            self._check(key, pg, st, timeout, now)
        self._arm(key, st, timeout, now)

    def _forget(self, key: str) -> _Gang | None:
        """Drop what is kept for group ``key``; returns its round, if it had one."""
        st = self._gangs.pop(key, None)
        self._in_progress.pop(key, None)
        self._malformed.pop(key, None)
        self._status.forget(key)
        armed = self._timers.pop(key, None)
        if armed is not None:
            armed[1].cancel()
        return st

    def _arm(self, key: str, st: _Gang, timeout: float, now: float) -> None:
        """One timer per gang, at its next deadline: the end of its PodsReady timeout or of its backoff."""
        due = [t for t in (st.requeue_at or None, None if st.quorum_at is None else st.quorum_at + timeout)
               if t is not None]
        when = min(due) if due else None
        armed = self._timers.get(key)
        if armed is not None:
            if armed[0] == when:
                return
            armed[1].cancel()
            del self._timers[key]
        if when is not None:
            self._timers[key] = (when, self.clock.call_later(when - now, self._due, key, when))

    def _due(self, key: str, when: float) -> None:
        armed = self._timers.get(key)
        if armed is not None and armed[0] == when:
            del self._timers[key]
            self._mark(key)

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
        elif now - st.quorum_at >= timeout - EARLY_SECONDS:
            self._evict(key, pg, st, bound, ready, need, timeout, now)

    def _evict(self, key: str, pg: PodGroup, st: _Gang, bound: list[Pod], ready: int, need: int,
               timeout: float, now: float) -> None:
        st.evictions += 1
        st.quorum_at = None
        self._in_progress.pop(key, None)
        victims = [p for p in bound if not p.terminal]
        owned = [p for p in victims if any(o.controller for o in p.owners)]
        bare = self._eviction.plan(key, pg, [p for p in victims if not any(o.controller for o in p.owners)])
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
            st.requeue_at_text = rfc3339(self.wall() + backoff)
            of = f" of at most {limit}" if limit is not None else ""
            msg = f"{what}; requeue {n}{of} after a backoff of {go_duration(backoff)}"
            self._set_condition(key, pg, "False", PODS_READY_TIMEOUT, msg,
                                {"requeueState": {"count": n, "requeueAt": st.requeue_at_text}})
            self._event(pg, "Warning", PODS_READY_TIMEOUT, "Evicting", msg)
        self._eviction.evict(key, owned, bare, f"PodGroup {key}: {what}")

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

    async def flush(self) -> None:
        """Wait for the API work under way (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _event(self, pg: PodGroup, type_: str, reason: str, action: str, note: str) -> None:
        if self.handle.events is not None:
            self.handle.events.eventf(pg.reference, None, type_, reason, action, note)

    def _set_condition(self, key: str, pg: PodGroup, status: str, reason: str, message: str,
                       extras: dict[str, Any] | None = None) -> None:
        """PodsReady (and ``extras``, other status fields) as the group should show it; written as a task."""
        self._status.set(key, pg, status, reason, message, extras)


# ---------------------------------------------------------------------------- helpers


def _ready_count(pods: list[Pod]) -> int:
    n = 0
    for p in pods:
        if p.phase == "Succeeded":
            n += 1
            continue
        c = find_condition(p.raw.get("status") or {}, "Ready")
        if c is not None and c.get("status") == "True":
            n += 1
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
