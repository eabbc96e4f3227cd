"""Coscheduling: gangs of pods (PodGroups) are placed all together or not at all.

The semantics are kubernetes-sigs/scheduler-plugins' Coscheduling
(``pkg/coscheduling``), on the same PodGroup CRD
(``scheduling.x-k8s.io/v1alpha1``: spec.minMember, minResources,
scheduleTimeoutSeconds). A pod joins the gang named by its label
``scheduling.x-k8s.io/pod-group`` (or the kube-batch annotation
``scheduling.k8s.io/group-name``); its gang key is "namespace/name".

The same mechanism serves upstream's native gangs (1.36's
``scheduling.k8s.io/v1alpha2`` PodGroup, which kube-scheduler's
GangScheduling plugin schedules): a pod joins with
``spec.schedulingGroup.podGroupName``, its gang key is
"scheduling.k8s.io/namespace/name" (the two APIs never share a gang),
``minCount`` is the quorum and ``basic`` no gang. For such gangs the
messages are upstream's: a member that would fit while its gang cannot be
whole says ``pod group is unschedulable, waiting for minCount pods from a
gang to be scheduled, ...`` (:data:`NATIVE_GANG_WAITING`), the member that
fits nowhere says only why (``0/N nodes are available: ...``), and a pod
whose PodGroup does not exist waits naming it. The plugin is registered a
second time under upstream's name, GangScheduling (without QueueSort, as
upstream's), so a configuration written for kube-scheduler enables it.

* **QueueSort** keeps a gang's members next to each other: higher priority
  first, then the PodGroup's creation time (a pod without a group: its
  own), then the group, then the time the pod entered the queue.
* **PreEnqueue** holds a member out of the active queue while its PodGroup
  does not exist, while fewer than minMember of its pods exist (pods that
  finished, are being deleted or still carry scheduling gates do not count;
  pods already bound do), and while the group backs off after a failure. The member that completes the
  gang moves the held siblings to the active queue (upstream's
  ActivateSiblings). A member held for want of siblings says so with the
  numbers (``PodGroup ns/g: 2 of 3 members exist; waiting for more``, the
  PodGroup status controller's words too); the scheduler writes that on
  the pod when the hold lasts (scheduler/preenqueue.py), so this plugin
  reports nothing itself.
* **PreFilter** repeats the cheap checks and, when the PodGroup sets
  minResources, rejects early (UnschedulableAndUnresolvable) if the
  cluster's free capacity plus what the gang's members already hold cannot
  cover it.
* **Permit** holds an assumed member until minMember members of the gang
  have a node (bound or assumed: members bound before a restart count),
  then allows every waiting sibling at once. The hold lasts the PodGroup's
  scheduleTimeoutSeconds, or ``permitWaitingTimeSeconds``.
* **PostFilter** and the group cycle's ``gang_failed`` (GangPlugin): a
  member that fits nowhere dooms the gang unless quorum is already reached
  or enough untried members remain to reach it. A doomed gang's waiting
  members are rejected, which releases their reservations synchronously
  (the core's ``on_reject``), and the group backs off for
  ``podGroupBackoffSeconds``.
* **Unreserve**: a member that gives its node back after a failure (a bind
  error, a Permit timeout or rejection) rejects its waiting siblings, so no
  partial gang stays held.
* A PodGroup deleted while members wait at Permit: the scheduler's delete
  handler rejects them at once ("PodGroup ns/g was deleted"), which frees
  their room; they are requeued and wait at PreEnqueue ("PodGroup ns/g not
  found") until a PodGroup of that name exists again.

Because tandem schedules a gang's queued members in one uninterrupted
group cycle (scheduler.Scheduler.schedule_next), two gangs never hold
partial reservations at the same time: the gang ordered first completes or
lets go before the next one is tried.

This plugin never binds, never waits (all of it runs inside the
synchronous cycle or on a timer) and never mutates the node table.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler.framework import (
    ActionType, ClusterEvent, ClusterEventWithHint, Code, ConfigError, CycleState, QueueingHint, Resource,
    Status, register,
)
from scheduler.framework.clock import Timer
from scheduler.model import (
    CPU, NATIVE_KEY_PREFIX, PODS, Pod, PodGroup, QuantityError, canonical, could_run, gang_members_present, gang_waiting_message,
    group_conflict, missing_group_message,
)

log = logging.getLogger("tandem.plugins.coscheduling")

NAME = "Coscheduling"
GANG_SCHEDULING = "GangScheduling"   # upstream's name for its native-gang plugin: the same mechanism here

# what kube-scheduler 1.36 says on a native gang's member that would fit while the gang cannot be whole
NATIVE_GANG_WAITING = ("pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, "
                       "one or more plugins asked to wait and no plugin rejected pod")

# the framework's longest Permit hold (runtime.MAX_PERMIT_TIMEOUT, upstream's maxTimeout)
MAX_WAIT_SECONDS = 15 * 60

_OK = Status()
_SKIP = Status(Code.SKIP)
_UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


@dataclass(frozen=True, slots=True)
class CoschedulingArgs:
    """scheduler-plugins' CoschedulingArgs (the fields that still mean something)."""

    # how long members wait at Permit for the rest of their gang when the PodGroup sets no scheduleTimeoutSeconds
    permit_waiting_time_seconds: int = 60
    # how long a gang stays out of scheduling after an attempt failed (0: no group backoff, the pods' own only)
    pod_group_backoff_seconds: int = 0

    def validate(self, path: str) -> None:
        if not 0 < self.permit_waiting_time_seconds <= MAX_WAIT_SECONDS:
            raise ConfigError(f"{path}.permitWaitingTimeSeconds: must be > 0 and at most {MAX_WAIT_SECONDS} "
                              f"(the framework's longest Permit wait), got {self.permit_waiting_time_seconds}")
        if self.pod_group_backoff_seconds < 0:
            raise ConfigError(f"{path}.podGroupBackoffSeconds: must be >= 0, got {self.pod_group_backoff_seconds}")


class _GangMechanism:
    """Everything of Coscheduling but its QueueSort: shared with GangScheduling, upstream's name for it."""

    NAME = NAME
    EXTENSION_POINTS = frozenset({"PreEnqueue", "EnqueueExtensions", "PreFilter", "PostFilter",
                                  "Reserve", "Permit", "Gang"})
    Args = CoschedulingArgs

    def __init__(self, args: CoschedulingArgs | None, handle: Any) -> None:
        self.args = args if args is not None else CoschedulingArgs()
        self.handle = handle
        self._backoff_until: dict[str, float] = {}            # key -> clock() when the group may try again
        self._backoff_timers: dict[str, Timer] = {}           # key -> the timer that ends its backoff
        self._permitted: dict[str, float] = {}                # key -> until when its minResources check holds
        self._misfits: dict[str, set[str]] = {}               # key -> members that fit nowhere since the last verdict
        self._gated: dict[str, set[str]] = {}                 # key -> members we hold for want of siblings
        self._rejecting: set[str] = set()                     # keys whose waiting members are being rejected now
        self._why: dict[str, tuple[str, str]] = {}            # key -> (uid, why it fit nowhere): PostFilter -> gang_failed
        self._activating: str | None = None                   # the key whose held members are being released
        self._trying: set[str] = set()                        # keys whose group cycle tries a topology domain

    # ------------------------------------------------------------------ gang identity

    def gang_key(self, pod: Pod) -> str | None:
        return pod.gang or None

    def _pod_group(self, key: str) -> PodGroup | None:
        return self.handle.gangs.group(key)

    def _live_members(self, key: str) -> int:
        """Pods naming the group that could run: not finished, not going away, not behind scheduling gates."""
        pods = self.handle.pods
        return sum(1 for uid in self.handle.gangs.member_uids(key) if could_run(pods.get(uid)))

    def _wait_time(self, pg: PodGroup) -> float:
        """util.GetWaitTimeDuration: the PodGroup's scheduleTimeoutSeconds when set and positive, else the args'."""
        t = pg.schedule_timeout_seconds
        return float(t) if t > 0 else float(self.args.permit_waiting_time_seconds)

    # ------------------------------------------------------------------ PreEnqueue

    def pre_enqueue(self, pod: Pod) -> Status:
        key = self.gang_key(pod)
        if key is None:
            return _OK
        st = self._unusable(pod, key)
        if st is not None:
            return st
        pg = self._pod_group(key)
        assert pg is not None
        if self._in_backoff(key):
            return Status(_UNRESOLVABLE, f"podGroup {key} failed recently")
        if key == self._activating:
            return _OK   # a held sibling released by the member that completed the gang: counted just now
        need = pg.min_member
        # the pods naming the group bound the live count: most arrivals stop there in O(1)
        have = gang_members_present(self.handle.gangs.member_uids(key), self.handle.pods, need)
        if have < need:
            self._gated.setdefault(key, set()).add(pod.uid)
            # upstream words it "pre-enqueue pod p cannot find enough sibling pods, current pods number: 2,
            # minMember of group: 3"; this text is what the pod and its PodGroup show, so it names the gang
            # and no pod, and is the same for every member
            return Status(_UNRESOLVABLE, gang_waiting_message(key, have, need))
        held = self._gated.pop(key, None)
        if held:
            held.discard(pod.uid)
            if held:
                # this member completes the gang: the siblings held for want of it go to the active queue now
                # (activate runs their PreEnqueue, which must neither recount the group nor recurse)
                self._activating = key
                try:
                    self.handle.activate(list(held))
                finally:
                    self._activating = None
        return _OK

    def _unusable(self, pod: Pod, key: str) -> Status | None:
        """Why no cycle can place the pod before something about its group changes, or None."""
        conflict = group_conflict(pod)
        if conflict:
            return Status(_UNRESOLVABLE, conflict)
        pg = self._pod_group(key)
        if pg is None:
            return Status(_UNRESOLVABLE, missing_group_message(key))
        if pg.problem:
            return Status(_UNRESOLVABLE, f"PodGroup {key}: {pg.problem}")
        return None

    # ------------------------------------------------------------------ PreFilter

    def pre_filter(self, state: CycleState, pod: Pod, nodes: Any) -> tuple[None, Status]:
        key = self.gang_key(pod)
        if key is None:
            return None, _SKIP
        st = self._unusable(pod, key)
        if st is not None:
            return None, st
        pg = self._pod_group(key)
        assert pg is not None
        if self._in_backoff(key):
            return None, Status(_UNRESOLVABLE, f"podGroup {key} failed recently")
        need = pg.min_member
        # PreEnqueue counted the live members exactly; here only the O(1) bound, which sees deletions
        n = len(self.handle.gangs.member_uids(key))
        if n < need:
            return None, Status(_UNRESOLVABLE, f"pre-filter pod {pod.name} cannot find enough sibling pods, "
                                               f"current pods number: {n}, minMember of group: {need}")
        min_resources = pg.min_resources
        if not min_resources:
            return None, _OK
        now = self.handle.clock()
        if self._permitted.get(key, 0.0) > now:
            # passed recently (upstream's permittedPG); assuming the gang's own members cannot change the
            # verdict, since what they take from the free capacity they add to what the gang holds
            return None, _OK
        want, problem = _wanted(key, min_resources, need)
        if problem:
            return None, Status(_UNRESOLVABLE, problem)
        gap = self._resource_gap(key, want, nodes)
        if gap:
            listed = ", ".join(f"{r} {_fmt_quantity(r, v)}" for r, v in gap.items())
            return None, Status(_UNRESOLVABLE, f"PodGroup {key} minResources do not fit the cluster's free "
                                               f"capacity: resource gap: {listed}")
        self._permitted[key] = now + self._wait_time(pg)
        return None, _OK

    def _resource_gap(self, key: str, want: dict[str, int], nodes: Any) -> dict[str, int]:
        """What ``want`` exceeds the free capacity by, per resource (core.CheckClusterResource).

        Free capacity is summed over the node rows (k nodes x m wanted resources): allocatable minus
        requested, where the gang's own bound and assumed members count as free (upstream removes them
        from each node first), and a node over its allocatable contributes nothing rather than a debt.
        """
        names = list(want)
        rows = nodes.rows()
        cols = [nodes.resource_index.get(r) for r in names]
        known = [i for i, c in enumerate(cols) if c is not None]
        free = np.zeros(len(names), dtype=np.int64)
        if known and len(rows):
            idx = np.array([cols[i] for i in known], dtype=np.int64)
            left = nodes.alloc[np.ix_(rows, idx)] - nodes.requested[np.ix_(rows, idx)]    # int64[k, m']
            held_rows, held = self._held(key, [names[i] for i in known], nodes, rows)
            if held_rows:
                np.add.at(left, np.searchsorted(rows, held_rows), held)   # rows() is sorted
            free[known] = np.maximum(left, 0).sum(axis=0)
        return {r: want[r] - int(free[i]) for i, r in enumerate(names) if want[r] > free[i]}

    def _held(self, key: str, names: list[str], nodes: Any, rows: np.ndarray) -> tuple[list[int], np.ndarray]:
        """The node rows of the gang's placed members and what each holds of ``names`` (int64[g, m])."""
        out_rows: list[int] = []
        held: list[list[int]] = []
        for uid, node in self.handle.gangs.placed_members(key).items():
            row = nodes.index.get(node)
            p = self.handle.pods.get(uid)
            if row is None or not nodes.valid[row] or p is None:
                continue   # a member on a node that left holds nothing the cluster can count
            out_rows.append(row)
            held.append([1 if r == PODS else p.requests.get(r, 0) for r in names])
        return out_rows, np.array(held, dtype=np.int64).reshape(len(held), len(names))

    # ------------------------------------------------------------------ PostFilter

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Any) -> tuple[None, Status]:
        key = self.gang_key(pod)
        if key is None:
            return None, Status(Code.UNSCHEDULABLE)
        pg = self._pod_group(key)
        if pg is None:
            return None, Status(Code.UNSCHEDULABLE, "can not find pod group")
        if not self._doomed(key, pg, pod):
            return None, Status(Code.UNSCHEDULABLE)   # quorum reached, or other members may still reach it
        why = diagnosis.message() if hasattr(diagnosis, "message") else ""
        self._why[key] = (pod.uid, why)
        if pg.native:
            # upstream: the member that fits nowhere says only why; its siblings that would fit say they wait
            self._fail_gang(key, NATIVE_GANG_WAITING)
            return None, Status(Code.UNSCHEDULABLE)
        self._fail_gang(key, "optimistic rejection in PostFilter: " + _gang_message(key, pod, why))
        return None, Status(Code.UNSCHEDULABLE, f"PodGroup {key} gets rejected due to Pod {pod.name} "
                                                f"is unschedulable even after PostFilter")

    # ------------------------------------------------------------------ GangPlugin (the group cycle)

    def gang_failed(self, pod: Pod, status: Status) -> str:
        key = self.gang_key(pod)
        if key is None:
            return status.message()
        pg = self._pod_group(key)
        native = pg is not None and pg.native
        said = self._why.pop(key, None)
        if said is not None and said[0] == pod.uid:   # PostFilter already rejected the gang
            return NATIVE_GANG_WAITING if native else _gang_message(key, pod, said[1])
        if self._in_backoff(key):
            return f"podGroup {key} failed recently"
        if pg is not None and not self._doomed(key, pg, pod):
            return ""   # the gang can still be whole: the group cycle goes on with the next member
        msg = NATIVE_GANG_WAITING if native else _gang_message(key, pod, status.message())
        self._fail_gang(key, msg)
        return msg

    def give_up(self, key: str, msg: str) -> None:
        """The gang cannot be whole now for a reason of its own (no topology domain fits it): reject its
        members waiting at Permit with ``msg`` and start its backoff, as a member that fits nowhere does."""
        self._fail_gang(key, msg)

    def reject_gang(self, pod: Pod, why: str) -> str:
        """``pod`` fits in no domain of its topology gang, which cannot be whole without it: fail the gang as
        :meth:`gang_failed` does for a doomed gang; the message its siblings get."""
        key = self.gang_key(pod) or ""
        pg = self._pod_group(key)
        msg = NATIVE_GANG_WAITING if pg is not None and pg.native else _gang_message(key, pod, why)
        self._fail_gang(key, msg)
        return msg

    def forget(self, key: str) -> None:
        """The gang is gone (its PodGroup and its pods): drop what is kept for it, its backoff timer included."""
        self._backoff_until.pop(key, None)
        timer = self._backoff_timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._permitted.pop(key, None)
        self._misfits.pop(key, None)
        self._gated.pop(key, None)
        self._why.pop(key, None)

    @contextlib.contextmanager
    def trying(self, key: str) -> Iterator[None]:
        self._trying.add(key)
        try:
            yield
        finally:
            self._trying.discard(key)

    def can_be_whole(self, key: str, unplaceable: Collection[str]) -> bool:
        """Can the gang still reach quorum if the members ``unplaceable`` get no node?

        Yes when quorum is already reached (upstream's PostFilter lets such a gang be), or while the
        members not known to get no node still number minMember or more (members may differ, and a gang
        may have more pods than minMember).
        """
        pg = self._pod_group(key)
        if pg is None:
            return False
        need = pg.min_member
        placed = self.handle.gangs.placed_members(key)
        if len(placed) >= need:
            return True
        uids = self.handle.gangs.member_uids(key)
        out = sum(1 for uid in unplaceable if uid in uids and uid not in placed)
        return self._live_members(key) - out >= need

    def _doomed(self, key: str, pg: PodGroup, pod: Pod) -> bool:
        """Can the gang no longer reach quorum, now that ``pod`` fit nowhere (with the members that fit
        nowhere before it since the last verdict)?"""
        misfits = self._misfits.setdefault(key, set())
        misfits.add(pod.uid)
        return not self.can_be_whole(key, misfits)

    def _fail_gang(self, key: str, msg: str) -> None:
        log.debug("gang %s cannot be whole now: %s", key, msg)
        self._misfits.pop(key, None)
        self._permitted.pop(key, None)
        self._start_backoff(key)
        self._reject_waiting(key, msg)

    def _reject_waiting(self, key: str, msg: str) -> int:
        """Reject the gang's members waiting at Permit; the core releases each one's room as it is rejected."""
        fw = self.handle.framework
        if fw is None or key in self._rejecting:
            return 0
        self._rejecting.add(key)   # their Unreserve runs inside this loop: it must not sweep again
        try:
            n = 0
            for wp in fw.iterate_waiting_pods():
                if self.gang_key(wp.pod) == key:
                    wp.reject(self.NAME, msg)
                    n += 1
            return n
        finally:
            self._rejecting.discard(key)

    # ------------------------------------------------------------------ backoff

    def _in_backoff(self, key: str) -> bool:
        until = self._backoff_until.get(key)
        if until is None:
            return False
        if until > self.handle.clock():
            return True
        del self._backoff_until[key]
        return False

    def _start_backoff(self, key: str) -> None:
        secs = self.args.pod_group_backoff_seconds
        if secs <= 0 or self._in_backoff(key):
            return
        clock = self.handle.clock
        self._backoff_until[key] = clock() + secs
        old = self._backoff_timers.pop(key, None)
        if old is not None:
            old.cancel()
        # the members wait parked or gated, and no cluster event need come: wake them when the window ends
        self._backoff_timers[key] = clock.call_later(secs, self._end_backoff, key)

    def _end_backoff(self, key: str) -> None:
        self._backoff_timers.pop(key, None)
        self._backoff_until.pop(key, None)
        uids = self.handle.gangs.member_uids(key)
        if uids:
            self.handle.activate(list(uids))

    # ------------------------------------------------------------------ Reserve / Permit

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return _OK

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        key = self.gang_key(pod)
        if key is None or key in self._rejecting or key in self._trying:
            return
        self._permitted.pop(key, None)
        self._misfits.pop(key, None)
        pg = self._pod_group(key)
        if pg is None:
            # the PodGroup was deleted: its delete handler rejects every waiting member with that reason
            # (eventhandlers), and no member waits once it is gone (Permit refuses them): nothing to sweep
            return
        cause = ""
        fw = self.handle.framework
        wp = fw.get_waiting_pod(pod.uid) if fw is not None else None
        if wp is not None and wp.future.done() and not wp.future.cancelled():
            cause = wp.future.result().message()
        msg = f"rejection in Unreserve: Pod {pod.name} of PodGroup {key} " + (f"gave up its node: {cause}"
                                                                                if cause else "gave up its node")
        rejected = self._reject_waiting(key, msg)
        # a gang that had not reached quorum failed its attempt (a timeout, a rejection): it backs off
        if rejected or len(self.handle.gangs.placed_members(key)) < pg.min_member:
            self._start_backoff(key)

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        key = self.gang_key(pod)
        if key is None:
            return _OK, 0.0
        pg = self._pod_group(key)
        if pg is None:
            return Status(Code.UNSCHEDULABLE, missing_group_message(key)), 0.0
        # bound and assumed members, this one included: members bound before a restart count
        if len(self.handle.gangs.placed_members(key)) < pg.min_member:
            return Status(Code.WAIT), self._wait_time(pg)
        self._misfits.pop(key, None)
        log.debug("gang %s has quorum at %s: releasing its waiting members", key, pod.key)
        fw = self.handle.framework
        if fw is not None:
            for wp in fw.iterate_waiting_pods():
                if self.gang_key(wp.pod) == key:
                    wp.allow(self.NAME)
        return _OK, 0.0

    # ------------------------------------------------------------------ EnqueueExtensions

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # a new member may complete the gang (a pod bound elsewhere, or found at startup)
            ClusterEventWithHint(ClusterEvent(Resource.POD, ActionType.ADD), _same_group),
            ClusterEventWithHint(ClusterEvent(Resource.POD_GROUP, ActionType.ADD | ActionType.UPDATE),
                                 _own_pod_group),
            ClusterEventWithHint(ClusterEvent(Resource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE)),
            ClusterEventWithHint(ClusterEvent(Resource.ASSIGNED_POD, ActionType.DELETE), _frees_room_for_others),
        ]


@register
class Coscheduling(_GangMechanism):
    """scheduler-plugins' Coscheduling, with its QueueSort (see the module docstring)."""

    NAME = NAME
    EXTENSION_POINTS = _GangMechanism.EXTENSION_POINTS | {"QueueSort"}

    # ------------------------------------------------------------------ QueueSort

    def sort_key(self, info: Any) -> tuple:
        """scheduler-plugins' Less as a key: priority, then group (or pod) creation, then group, then queue time."""
        pod = info.pod
        key = self.gang_key(pod)
        created = pod.created
        if key is not None:
            pg = self._pod_group(key)
            if pg is not None:
                created = pg.created   # parsed once, when the informer delivered the PodGroup
        return (-pod.priority, created, key or "", info.timestamp)



@register
class GangScheduling(_GangMechanism):
    """Upstream's GangScheduling (1.36, the GangScheduling gate): tandem's gang mechanism under that name.

    A kube-scheduler configuration that enables GangScheduling (its default set with the gates on does,
    through multiPoint) gets the same all-or-nothing group cycle for both PodGroup APIs. No QueueSort:
    upstream's has none, and a profile has exactly one queue sort (PrioritySort); the group cycle takes a
    gang's queued members together whatever order the queue keeps. A profile enables one gang plugin,
    Coscheduling or GangScheduling, not both (scheduler/config.py says so).
    """

    NAME = GANG_SCHEDULING

    def gang_key(self, pod: Pod) -> str | None:
        """Native groups always; scheduler-plugins' CRD groups only where the server serves the CRD.

        GangScheduling is in the default profile: where the CRD is not installed, no PodGroup of it can ever
        exist, and the label means what it means to kube-scheduler, nothing (the pod is scheduled alone).
        Coscheduling, which a profile enables on purpose, holds such a pod naming the missing PodGroup.
        """
        key = pod.gang
        if not key:
            return None
        if not self.handle.gangs.crd_served and not key.startswith(NATIVE_KEY_PREFIX):
            return None
        return key


# ---------------------------------------------------------------------------- queueing hints

def _same_group(pod: Pod, old: Any, new: Any) -> int:
    if isinstance(new, Pod) and new.gang and new.gang == pod.gang:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _own_pod_group(pod: Pod, old: Any, new: Any) -> int:
    if isinstance(new, PodGroup) and new.key == pod.gang:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _frees_room_for_others(pod: Pod, old: Any, new: Any) -> int:
    """A pod left its node. The gang's own members giving back their room (a rejected attempt) frees nothing
    the gang did not have; retrying on it would only make the gang take the room again before anyone else."""
    if isinstance(old, Pod) and old.gang and old.gang == pod.gang:
        return QueueingHint.SKIP
    return QueueingHint.QUEUE


# ---------------------------------------------------------------------------- helpers

def _gang_message(key: str, pod: Pod, why: str) -> str:
    return f"PodGroup {key} gets rejected due to Pod {pod.name} is unschedulable: {why}".rstrip(": ")


def _wanted(key: str, min_resources: Any, min_member: int) -> tuple[dict[str, int], str]:
    """spec.minResources in canonical units, plus ``pods: minMember`` as upstream adds; or a problem."""
    if not isinstance(min_resources, dict):
        return {}, f"PodGroup {key}: spec.minResources: must be a map of resource names to quantities"
    want: dict[str, int] = {}
    for name, q in min_resources.items():
        try:
            want[name] = canonical(name, q)
        except QuantityError as exc:
            return {}, f"PodGroup {key}: spec.minResources[{name}]: {exc}"
    want[PODS] = max(want.get(PODS, 0), min_member)
    return {r: v for r, v in want.items() if v > 0}, ""


_BINARY = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def _fmt_quantity(resource: str, v: int) -> str:
    """A canonical amount back as a quantity a user would write ("4", "500m", "3Gi")."""
    if resource == CPU:
        return str(v // 1000) if v % 1000 == 0 else f"{v}m"
    for suffix, unit in _BINARY:
        if v >= unit and v % unit == 0:
            return f"{v // unit}{suffix}"
    return str(v)
