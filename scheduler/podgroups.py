"""PodGroup status: phase, member counts and events, kept current from pod events.

Each PodGroup API gets its own status. scheduler-plugins' CRD gets the
phase and counts below. Upstream's ``scheduling.k8s.io/v1alpha2`` PodGroup
gets what kube-scheduler 1.36 writes (:meth:`PodGroupController._sync_native`):
one condition, ``PodGroupScheduled``, True with reason ``Scheduled`` and an
empty message once quorum members have a node (never back to False: a
quorum or basic group stays True with a pod still pending), False with
reason ``Unschedulable`` and the message ``0/<n> placements are available,
first placement status: pod group is unschedulable`` (n: the domains of its
topology key, or 1) while its members were tried and fit nowhere, or
reason ``SchedulerError`` with the member's message when an error stopped
them. A native group short of pods gets no condition (upstream holds such
pods without a word; the pods themselves say why, scheduler/preenqueue.py).

scheduler-plugins runs a separate controller for this (its
``pkg/controllers/podgroup_controller.go``); tandem keeps it in the
scheduler process, where the informers already hold every pod and PodGroup,
so no extra list or watch is needed. :class:`PodGroupController` writes:

* ``status.scheduled`` (members with a node), ``running``, ``succeeded``,
  ``failed`` (members in those pod phases), counted over the members that
  are not being deleted;
* ``status.scheduleStartTime``: when a member was first attempted (popped
  for a scheduling cycle), written once;
* ``status.occupiedBy``: the owners of the members, ``namespace/ownerName``
  sorted and joined with ",", as upstream's ``fillOccupiedObj``;
* ``status.phase``, by :func:`compute_phase`, in this order:

  ========================  ==================================================
  phase                     when
  ========================  ==================================================
  Failed                    GangReadiness gave up on the gang (its PodsReady
                            condition says RequeuingLimitExceeded)
  (kept)                    the phase already is Finished or Failed: final, as
                            upstream's reconciler stops there
  Pending                   no members
  Finished                  succeeded >= minMember
  Failed                    some member failed and failed + running +
                            succeeded >= minMember (upstream's rule)
  Running                   running + succeeded >= minMember
  Scheduled                 scheduled >= minMember
  Pending                   fewer members than minMember exist
  Scheduling                some member has a node or was attempted
  PreScheduling             minMember members exist, none attempted yet
  ========================  ==================================================

  Upstream moves between these edge by edge and depends on the scheduler to
  bump ``scheduled`` (which it stopped doing: scheduler-plugins#446, #578, so
  groups stay in Scheduling for good). Here the phase is recomputed from the
  members every time, so it cannot get stuck.

A group whose pods are fewer than minMember (counted as Coscheduling's
PreEnqueue counts them) while a member of ours waits without a node shows
it, once that has lasted ``report_delay`` (5 s, as its held pods do): the
condition ``PodGroupScheduled=False``, reason ``NotReadyForScheduling``,
message ``PodGroup ns/g: 2 of 3 members exist; waiting for more`` (the
Workload API's PodGroup condition type, KEP-5501's reason, the words its
pods show). It follows the numbers, and goes when the group is no longer
short.

One list, one rule. ``status.conditions`` is shared: this controller owns
PodGroupScheduled (on both APIs), GangReadiness owns PodsReady, the
preemption executor writes DisruptionTarget on a native group evicted whole.
A merge patch replaces the whole list, so every writer follows the rule of
scheduler/framework/podgroupconditions.py: a write that carries conditions
is made on the resourceVersion of the informer's copy whose other conditions
it keeps (:func:`~scheduler.framework.podgroupconditions.conditions_patch`),
and a 409 is written again, one interval later, from the informer's newer
version. What the controller wrote (fields and conditions) is trusted, so
that it is not written twice while the informer is behind, only until the
informer shows a version other than the one the write was based on
(:class:`~scheduler.framework.podgroupconditions.Sent`): from then on the
informer's copy is the truth, so a condition or field that another writer
erased or changed is written again.

Events on the PodGroup say where the gang stands: Warning ``Unschedulable``
("5/8 members have a node; waiting for 3: 0/20 nodes are available: 3
Insufficient cpu.", the part after the colon being the newest
PodScheduled=False message of a member without a node) whenever that text
changes, and Normal ``Scheduled`` when the gang gets its minMember-th node.

Cost and debounce. The scheduler calls :meth:`PodGroupController.on_pod_change`
from its informer handlers for every pod that names a group and for every
PodGroup event (``Scheduler.group_listeners``): O(1), it only marks the group
dirty. That is cheaper than diffing the gang index's members periodically, which would
walk every member of every group on every pass even when nothing changed.
:meth:`PodGroupController.run` recomputes dirty groups and writes a group's
status at most once per ``interval`` (0.5 s): the first change of a quiet
group is written at once, later ones are folded into one write at the end
of the interval. A write is a JSON merge patch of only the fields that
differ from what the API (or our own last write, until the informer shows
it) says, on the ``podgroups/status`` subresource.

Status is reporting, not scheduling, so its writes are budgeted: at most
``qps`` writes a second (burst ``burst``; 50 and 100 by default, ten times
scheduler-plugins' controller, whose ``--qps``/``--burst`` default to 5
and 10) and ``MAX_IN_FLIGHT`` under way at once. A write is an HTTP
request and comes back as a watch event, both paid by the process that
binds; without a budget a burst of 2,000 small gangs cost two status
writes per gang, as many requests as a third of the binds. Dirty groups
wait their turn oldest first, and a group that changes again while it
waits is still written once, with everything folded in; so a quiet
cluster sees every change at once and a burst sees the newest state of
each group a little later. Groups whose members all belong to another
scheduler are left alone.

This module never blocks the scheduling loop: recomputing is synchronous
and bounded by the group's members, API writes run as tasks, and their
errors are logged and retried with backoff. Of ``status.conditions`` it
writes only its own PodGroupScheduled, and it never touches pods. What it
keeps per group (the write budget's times, retries, notes, its last writes,
timers) goes when the PodGroup is deleted, at once, even in a replica that
is not leading: it never grows with the groups that come and go.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
from typing import Any, Iterable

from scheduler.framework.clock import Clock, TokenBucket
from scheduler.framework.podgroupconditions import Sent, conditions_patch, find_condition, new_condition, rfc3339
from scheduler.model import (
    NOT_READY_FOR_SCHEDULING, POD_GROUP_PODS_READY, POD_GROUP_REQUEUING_LIMIT_EXCEEDED,
    POD_GROUP_SCHEDULED, Pod, PodGroup, gang_members_present, gang_waiting_message, parse_time, pod_group_path,
)
from scheduler.podgroups_members import (  # the helpers both APIs' status share, importable from here as before
    GangCounts, count_members, pod_condition, scheduled_note, unschedulable_note, waiting_message,
)
from scheduler.podgroups_native import NativeStatus
from scheduler.preenqueue import REPORT_DELAY

__all__ = ["GangCounts", "PodGroupController", "compute_phase", "count_members", "occupied_by", "pod_condition",
           "requeuing_limit_exceeded", "rfc3339", "scheduled_note", "status_path", "unschedulable_note",
           "waiting_message"]

log = logging.getLogger("tandem.podgroups")


# scheduler-plugins' PodGroupPhase values
PENDING = "Pending"
PRE_SCHEDULING = "PreScheduling"
SCHEDULING = "Scheduling"
SCHEDULED = "Scheduled"
RUNNING = "Running"
FINISHED = "Finished"
FAILED = "Failed"
FINAL_PHASES = (FINISHED, FAILED)

STATUS_INTERVAL = 0.5          # seconds between two status writes of one group
STATUS_QPS = 50.0              # status writes a second, over all groups (scheduler-plugins' controller: 5)
STATUS_BURST = 100
MAX_IN_FLIGHT = 16             # status writes under way at once: binds share the client's QPS budget
MAX_RETRY_FACTOR = 64          # a failing group is retried at most every interval * this

# status fields this controller owns, and the value an absent field means (the Go struct's omitempty)
_OWNED: dict[str, Any] = {"phase": "", "scheduled": 0, "running": 0, "succeeded": 0, "failed": 0,
                          "occupiedBy": "", "scheduleStartTime": ""}


# ---------------------------------------------------------------------------- the pure part


def compute_phase(prev: str, min_member: int, c: GangCounts, requeuing_limit_exceeded: bool = False) -> str:
    """The PodGroup's phase from its members (see the module docstring for the table)."""
    if requeuing_limit_exceeded:
        return FAILED
    if prev in FINAL_PHASES:
        return prev
    if c.members == 0:
        return PENDING
    need = max(min_member, 1)   # minMember 0 means "no gang constraint": one member is a quorum
    if c.succeeded >= need:
        return FINISHED
    if c.failed and c.failed + c.running + c.succeeded >= need:
        return FAILED
    if c.running + c.succeeded >= need:
        return RUNNING
    if c.scheduled >= need:
        return SCHEDULED
    if c.members < need:
        return PENDING
    if c.scheduled or c.attempted:
        return SCHEDULING
    return PRE_SCHEDULING


def occupied_by(members: Iterable[Pod]) -> str:
    """Upstream's occupiedBy: "namespace/ownerName" of the members' owners, sorted, comma-joined."""
    refs = {f"{p.namespace}/{o.name}" for p in members for o in p.owners if o.name}
    return ",".join(sorted(refs))


def requeuing_limit_exceeded(status: dict[str, Any]) -> bool:
    """Has GangReadiness failed this group for good (its PodsReady condition says so)?"""
    c = find_condition(status, POD_GROUP_PODS_READY)
    return c is not None and c.get("reason") == POD_GROUP_REQUEUING_LIMIT_EXCEEDED


def status_path(key: str) -> str:
    """The status subresource of the PodGroup whose gang key is ``key`` (either API)."""
    return f"{pod_group_path(key)}/status"


# ---------------------------------------------------------------------------- the controller


class PodGroupController(NativeStatus):
    """Keeps every PodGroup's status current; see the module docstring.

    ``scheduler`` is the :class:`scheduler.scheduler.Scheduler` (its
    pods, gang index (``cache.gangs``), queue and profile names are read, never
    written), ``client`` the API client (``patch``), ``events`` the
    :class:`scheduler.observe.EventRecorder` (or None).
    """

    def __init__(self, scheduler: Any, client: Any, events: Any = None, *, interval: float = STATUS_INTERVAL,
                 max_in_flight: int = MAX_IN_FLIGHT, qps: float = STATUS_QPS, burst: int = STATUS_BURST,
                 clock: Clock | None = None) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"PodGroup status writes need qps > 0 and burst >= 1, got qps={qps} burst={burst}")
        self.scheduler = scheduler
        self.client = client
        self.events = events
        self.interval = interval
        self.max_in_flight = max_in_flight
        # the scheduler's clock: the queue's attempt times are on it, and the write budget and retry
        # delays run on it (its wall() stamps the API's timestamps)
        self.clock: Clock = clock if clock is not None else scheduler.clock
        self.qps = qps
        self.burst = burst
        self.bucket = TokenBucket(qps, burst, self.clock)
        self.dirty: dict[str, None] = {}              # an ordered set: oldest change first
        self._last_write: dict[str, float] = {}       # key -> clock() when its last write started
        self._failures: dict[str, int] = {}           # key -> writes that failed in a row
        # what was written and the informer may not show yet, until it shows a newer version (the rule):
        # the fields, the NotReadyForScheduling message ("" = removed), the native condition
        self._sent: Sent[dict[str, Any]] = Sent()
        self._cond_sent: Sent[str] = Sent()
        self._native_sent: Sent[tuple[str, str, str]] = Sent()
        self._writing: set[str] = set()
        self._notes: dict[str, str] = {}              # key -> the last Unschedulable note recorded
        # the NotReadyForScheduling condition: since when each group has been short of members (clock()),
        # and the timers that look again once that has lasted report_delay
        self.report_delay = REPORT_DELAY
        self._short_since: dict[str, float] = {}
        self._recheck: dict[str, Any] = {}
        self._whole: set[str] = set()                 # native groups whose Scheduled event was recorded
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake: asyncio.Event | None = None
        self.writes = 0                               # status patches that succeeded

    # ------------------------------------------------------------------ the producer side (informer handlers)

    def on_pod_change(self, key: str) -> None:
        """A member pod or the PodGroup ``key`` (the gang key: "ns/name", or "scheduling.k8s.io/ns/name" for a
        native group) changed. O(1); called from informer handlers."""
        if self.scheduler.cache.gangs.group(key) is None:
            # deleted (or its pods came first): nothing to write, and what was kept for it goes now, whether
            # or not this replica leads (a follower's run() never looks at it)
            self.dirty.pop(key, None)
            self._forget(key)
            return
        if key not in self.dirty:
            self.dirty[key] = None
            if self._wake is not None:
                self._wake.set()

    # ------------------------------------------------------------------ computing

    def _attempted(self, pod: Pod) -> bool:
        qi = self.scheduler.queue.infos.get(pod.uid)
        if qi is not None and qi.attempts > 0:
            return True
        # past Permit the queue is done with a pod while it binds: assumed means attempted
        return self.scheduler.cache.is_assumed(pod.uid) or pod_condition(pod, "PodScheduled") is not None

    def _start_time(self, members: list[Pod]) -> float:
        """Wall-clock time of the first attempt: the queue remembers it (monotonic), the API's conditions too."""
        now = self.clock.wall()
        queue = self.scheduler.queue
        mono_now = self.clock()
        first = now
        for p in members:
            qi = queue.infos.get(p.uid)
            if qi is not None and qi.initial_attempt:
                first = min(first, now - max(0.0, mono_now - qi.initial_attempt))
            c = pod_condition(p, "PodScheduled")
            t = parse_time(c.get("lastTransitionTime")) if c is not None else 0.0
            if t:
                first = min(first, t)
        return first

    def members(self, key: str) -> list[Pod]:
        pods = self.scheduler.pods
        out = []
        for uid in self.scheduler.cache.gangs.member_uids(key):
            p = pods.get(uid)
            if p is not None and not p.deleting:
                out.append(p)
        return out

    def desired(self, key: str, prev_phase: str | None = None) -> tuple[dict[str, Any], GangCounts, int] | None:
        """The owned status fields group ``key`` should have, its counts and minMember; None: not ours.

        ``prev_phase``: the phase the group has now (default: the informer's copy).
        """
        pg = self.scheduler.cache.gangs.group(key)
        if pg is None:
            return None
        members = self.members(key)
        ours = self.scheduler.frameworks
        if members and not any(p.scheduler_name in ours for p in members):
            return None   # another scheduler's gang (scheduler-plugins reads the same CRD)
        status = pg.status
        min_member = pg.min_member
        counts = count_members(members, self._attempted)
        want: dict[str, Any] = {
            "phase": compute_phase(str(status.get("phase") or "") if prev_phase is None else prev_phase,
                                   min_member, counts,
                                   requeuing_limit_exceeded(status)),
            "scheduled": counts.scheduled, "running": counts.running,
            "succeeded": counts.succeeded, "failed": counts.failed,
        }
        occ = occupied_by(members)
        if occ:
            want["occupiedBy"] = occ
        if counts.attempted and not status.get("scheduleStartTime"):
            want["scheduleStartTime"] = rfc3339(self._start_time(members))
        return want, counts, min_member

    def _known(self, key: str, pg: PodGroup) -> dict[str, Any]:
        """What the API has, as far as we know: the informer's copy, overlaid with our writes it does not show yet."""
        status = pg.status
        known = {k: status.get(k, default) for k, default in _OWNED.items()}
        sent = self._sent.recall(key, pg)   # (forgotten once the informer has a newer version)
        if sent:
            if all(known.get(k) == v for k, v in sent.items()):
                self._sent.forget(key)   # the informer caught up: from now on its copy is the truth
            else:
                known.update(sent)
        return known

    # ------------------------------------------------------------------ the consumer side

    def sync(self) -> float | None:
        """Handle the dirty groups that are due. Returns seconds until the next one is due (None: none waits)."""
        now = self.clock()
        bucket = self.bucket
        wait: float | None = None
        # a bounded look at the oldest: the rest of a long backlog waits for tokens anyway, and copying
        # all of it on every wake would make a burst quadratic
        look = int(bucket.tokens()) + self.max_in_flight + self.burst
        for key in list(itertools.islice(self.dirty, look)):
            if len(self._writing) >= self.max_in_flight:
                break      # a finishing writer wakes us
            refill = bucket.wait_time()
            if refill > 0.0:
                return refill if wait is None else min(wait, refill)
            if key in self._writing:
                continue   # its writer wakes us when done
            due = self._last_write.get(key, -math.inf) + self.interval * min(2 ** self._failures.get(key, 0),
                                                                              MAX_RETRY_FACTOR)
            if due > now:
                wait = due - now if wait is None else min(wait, due - now)
                continue
            del self.dirty[key]
            try:
                if self._sync_group(key, now):
                    bucket.reserve()
            except Exception:  # noqa: BLE001 - one odd object must not stop the others' status
                log.exception("PodGroup %s: computing its status failed", key)
        return wait

    def _sync_group(self, key: str, now: float) -> bool:
        """Recompute group ``key``, record its events, start its status write. Did it start one?"""
        pg = self.scheduler.cache.gangs.group(key)
        if pg is None:
            self._forget(key)
            return False
        if pg.native:
            return self._sync_native(key, pg, now)
        known = self._known(key, pg)
        got = self.desired(key, str(known["phase"] or ""))
        if got is None:
            return False
        want, counts, min_member = got
        if known.get("scheduleStartTime"):
            # set once: a write the informer has not shown yet must not be recomputed (later) and sent again
            want.pop("scheduleStartTime", None)
        patch = {k: v for k, v in want.items() if known.get(k) != v}
        self._report(key, pg, want, counts, min_member, known)
        # with the condition, the whole write is made on the version whose other conditions it keeps
        body = self._conditions_patch(key, pg, self._waiting(key, pg, now), patch)
        if body is None:
            if not patch:
                return False
            body = {"status": patch}   # fields only: merged per field, no version needed
        if patch:
            self._sent.remember(key, pg.resource_version, {**(self._sent.recall(key, pg) or {}), **patch})
        self._start_write(key, body, now)
        return True

    def _start_write(self, key: str, body: dict[str, Any], now: float) -> None:
        """Send ``body`` to group ``key``'s status subresource, as a task; the group is written until it ends."""
        self._last_write[key] = now
        self._writing.add(key)
        task = asyncio.ensure_future(self._write(key, body))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _report(self, key: str, pg: PodGroup, want: dict[str, Any], counts: GangCounts, min_member: int,
                known: dict[str, Any]) -> None:
        if self.events is None:
            return
        need = max(min_member, 1)
        phase = want["phase"]
        if counts.scheduled >= need > _int(known.get("scheduled")) and phase not in FINAL_PHASES:
            self.events.record(pg.reference, "Normal", "Scheduled", "Scheduling",
                               scheduled_note(counts.scheduled, min_member))
        if counts.scheduled >= need or phase in FINAL_PHASES:
            self._notes.pop(key, None)   # complete: the next incomplete round reports afresh
            return
        waiting = waiting_message(self.members(key))
        if not waiting:
            return
        note = unschedulable_note(counts.scheduled, min_member, waiting)
        if self._notes.get(key) != note:
            self._notes[key] = note
            self.events.record(pg.reference, "Warning", "Unschedulable", "Scheduling", note)

    async def _write(self, key: str, body: dict[str, Any]) -> None:
        try:
            await self.client.patch(status_path(key), body)
            self.writes += 1
            self._failures.pop(key, None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the client already retried what is worth retrying
            for sent in (self._sent, self._cond_sent, self._native_sent):
                sent.forget(key)
            status = getattr(exc, "status", None)
            if status == 404:
                log.debug("PodGroup %s is gone; not writing its status", key)
            elif status == 409 and "metadata" in body:
                log.debug("PodGroup %s changed under its status write; writing it again", key)
                self.dirty[key] = None   # the informer brings the newer version; one interval later
            else:
                self._failures[key] = self._failures.get(key, 0) + 1
                log.warning("PodGroup %s: cannot write its status: %s", key, exc)
                self.dirty[key] = None
        finally:
            self._writing.discard(key)
            if self.dirty and self._wake is not None:
                self._wake.set()

    def _forget(self, key: str) -> None:
        for d in (self._last_write, self._failures, self._notes, self._short_since):
            d.pop(key, None)
        for sent in (self._sent, self._cond_sent, self._native_sent):
            sent.forget(key)
        self._whole.discard(key)
        timer = self._recheck.pop(key, None)
        if timer is not None:
            timer.cancel()

    # ------------------------------------------------------------------ the NotReadyForScheduling condition

    def _waiting(self, key: str, pg: PodGroup, now: float) -> str | None:
        """The message group ``key`` should show for want of members: "" for none, None for "not yet known".

        A group is short when fewer pods than minMember count toward its quorum (counted as Coscheduling's
        PreEnqueue counts them, so the group and its held pods say the same) and some member of ours waits
        without a node. It shows that only once it has lasted ``report_delay``, as its pods do: a gang whose
        pods are created together, or a moment after its PodGroup, costs no write. Until then whatever the
        group shows stays (None).
        """
        need = pg.min_member
        sched = self.scheduler
        uids = sched.cache.gangs.member_uids(key)
        have = gang_members_present(uids, sched.pods, need)
        if have < need:
            ours = sched.frameworks
            pods = sched.pods
            waits = any((p := pods.get(uid)) is not None and not p.node_name and not p.deleting
                        and p.scheduler_name in ours for uid in uids)
        else:
            waits = False
        if not waits:
            self._short_since.pop(key, None)
            timer = self._recheck.pop(key, None)
            if timer is not None:
                timer.cancel()
            return ""
        since = self._short_since.setdefault(key, now)
        left = since + self.report_delay - now
        if left > 0:
            if key not in self._recheck:
                self._recheck[key] = self.clock.call_later(left, self._recheck_due, key)
            return None
        return gang_waiting_message(key, have, need)

    def _recheck_due(self, key: str) -> None:
        self._recheck.pop(key, None)
        self.on_pod_change(key)

    def _conditions_patch(self, key: str, pg: PodGroup, message: str | None,
                          fields: dict[str, Any]) -> dict[str, Any] | None:
        """The write (with ``fields``) that makes the group show ``message`` ("" = not ours to show), or None: as is.

        The condition is PodGroupScheduled=False with reason NotReadyForScheduling (the Workload API's
        PodGroup condition type, KEP-5501's reason); the other conditions are kept as the informer has them.
        """
        if message is None:
            return None
        mine = find_condition(pg.status, POD_GROUP_SCHEDULED)
        ours = (mine is not None and mine.get("status") == "False"
                and mine.get("reason") == NOT_READY_FOR_SCHEDULING)
        shown = str(mine.get("message") or "") if ours and mine is not None else ""
        sent = self._cond_sent.recall(key, pg)   # (forgotten once the informer has a newer version)
        if sent is not None:
            if sent == shown:
                self._cond_sent.forget(key)   # the informer caught up with our write
            else:
                shown = sent                  # written, not seen yet: do not write it again
        if message == shown:
            return None
        self._cond_sent.remember(key, pg.resource_version, message)
        if not message:
            return conditions_patch(pg, POD_GROUP_SCHEDULED, None, fields)
        return conditions_patch(pg, POD_GROUP_SCHEDULED, new_condition(
            pg, POD_GROUP_SCHEDULED, "False", NOT_READY_FOR_SCHEDULING, message, mine, self.clock.wall()), fields)

    async def flush(self) -> None:
        """Wait for the status writes under way (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def run(self) -> None:
        """Until cancelled: sync dirty groups when they change and are due."""
        self._wake = asyncio.Event()
        try:
            while True:
                self._wake.clear()
                try:
                    wait = self.sync()
                except Exception:  # noqa: BLE001 - keep the controller alive
                    log.exception("PodGroup status sync failed")
                    wait = self.interval
                await self.clock.wait(self._wake, wait)
        finally:
            for task in list(self._tasks):
                task.cancel()


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0
