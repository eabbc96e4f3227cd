"""The group cycle: a gang's queued members scheduled back to back, and a topology gang's domains tried in turn.

When a gang member is popped, :meth:`GroupCycle.schedule_next` takes its pending siblings out of the queue
and runs their cycles back to back, with no other pod's cycle in between and no ``await``: only the gang in
its group cycle can hold partial reservations, so gangs never deadlock.

* A gang without a topology key (:meth:`GroupCycle._group_cycle`): each member's full cycle in turn
  (scheduling_one.py), largest first; each waits at Permit until the quorum has nodes, and a member that
  fits nowhere may end the gang's attempt (the gang plugin's ``gang_failed``).
* A gang whose members must share one domain of a node label (:meth:`GroupCycle._topology_cycle`), as
  kube-scheduler 1.36's pod-group cycle tries the placements TopologyPlacementGenerator offers:

  1. the survey: per group of members that schedule alike (:func:`signature`), the first one's PreFilter
     and Filter over every node (without the filters that depend on where its siblings go, which the
     tries evaluate). A member PreFilter rejects, or that no node takes, fits in no domain: it keeps its
     own status, message and rejecting plugins (so its own queueing hints requeue the gang), and if the
     gang cannot be whole without it, the gang's attempt ends there;
  2. the domains, ranked by array work (framework/placement.py): an upper bound of the members each can
     take, best first, those that already failed for this gang skipped;
  3. the tries: in each candidate domain, every member's real cycle up to Reserve (``_place``), each
     seeing the ones placed before it; the first domain where the gang can be whole is committed
     (Permit, binding tasks) and the others are taken back unreported (``_take_back``). A domain that
     failed is remembered for the gang (the gang index's ``failed_domains``) until a cluster event
     could change it: the queue forgets it when it requeues a member for an event.

  At most :data:`MAX_DOMAIN_TRIES` domains are tried in one attempt; when candidates are left, the
  members back off and the next attempt goes on with them. A gang no domain fits places nothing; its
  pods say so with tandem's numbers, its members waiting at Permit are rejected, and it waits for the
  cluster to change. Preemption does not run for a topology gang's members.

Failures are contained here, as upstream's handleSchedulingFailure does: an exception in the Gang hooks
or in the group cycle rejects the whole gang together with reason SchedulerError (``_reject_gang``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import orjson

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.placement import copies_per_node, rank_domains, topology_message
from scheduler.framework.runtime import Framework
from scheduler.framework.status import Code, Status
from scheduler.model import Pod, PodGroup
from scheduler.queue import QueuedPodInfo
from scheduler.schedule_one import ERROR, FILTER, GONE, PRE_FILTER, RAISED, Attempt, ScheduleOne, _plugin_raised
from scheduler.state.reservations import CAPACITY_FILTERS

log = logging.getLogger("tandem.scheduler")

# the filters whose verdict on a node depends on where the pod's siblings go (its own labels against the
# pods placed): the survey leaves them out, so its bound is never lower than what the tries can find
SIBLING_SENSITIVE = frozenset({"InterPodAffinity", "PodTopologySpread", "NodeColocation"})

# the domains one attempt of a topology gang tries; the next attempt (after the members' backoff) goes on
# with the candidates left, since those tried are remembered
MAX_DOMAIN_TRIES = 32

# spec fields that differ between pods of one template and no Filter reads (StatefulSets and Indexed Jobs
# name each pod's host)
_PER_POD_SPEC = frozenset({"hostname", "subdomain"})


def signature(pod: Pod) -> bytes:
    """Members with the same signature get the same PreFilter and Filter verdicts on every node, before their
    siblings are placed: the same namespace, requests and spec (claims and volumes included), but for the
    fields that name the pod itself. The filters that read its labels are left out of the survey
    (:data:`SIBLING_SENSITIVE`), so the labels a template's pods differ in (a Job's completion index) are not
    part of it."""
    spec = pod.raw.get("spec") if isinstance(pod.raw, dict) else None
    same = {k: v for k, v in spec.items() if k not in _PER_POD_SPEC} if isinstance(spec, dict) else None
    return orjson.dumps([pod.namespace, pod.requests, pod.node_selector, pod.affinity, pod.tolerations,
                         pod.host_ports, pod.pvcs, pod.ephemeral_pvcs, pod.resource_claims, pod.priority, same],
                        option=orjson.OPT_SORT_KEYS)


def _largest_first(m: QueuedPodInfo) -> tuple:
    # first-fit decreasing: a small member placed first must not take the only node a big one fits on
    pod = m.pod
    return (-pod.priority, -pod.requests.get("cpu", 0), -pod.requests.get("memory", 0), m.timestamp)


@dataclass(slots=True)
class _Try:
    """One domain's try (:meth:`GroupCycle._try_domain`)."""

    whole: bool = False                                   # the gang can be whole here: commit it
    placed: list[Attempt] = field(default_factory=list)   # members holding a node in the domain
    failed: list[Attempt] = field(default_factory=list)   # members no node of the domain took
    error: Attempt | None = None                          # a member's error ended the try


class GroupCycle(ScheduleOne):
    """The group cycle of :class:`~scheduler.scheduler.Scheduler` (state set by its ``__init__``)."""

    if TYPE_CHECKING:
        # what the group cycle calls of the binding mixin (binding.py), which defines them
        def _hold_gang_bind(self, key: str) -> None: ...

        def _end_gang_bind_hold(self, fw: Framework, key: str) -> None: ...

        def _hold_gang(self, fw: Framework, key: str, members: list[QueuedPodInfo], domain_key: str = "") -> None: ...

        def _settle_holds(self) -> None: ...

    # ------------------------------------------------------------------ the entry point

    def schedule_next(self, qi: QueuedPodInfo) -> None:
        """Schedule a popped pod: alone, or with the rest of its gang in one uninterrupted group cycle.

        Every exception is contained here, as upstream's handleSchedulingFailure contains an error:
        a cycle's own (schedule_one), the Gang hooks', and the group cycle's. Each pod involved ends
        queued with reason SchedulerError, waiting at Permit, binding, or bound; never in flight.
        """
        if self.cache.nominations.held:
            self._settle_holds()   # what the events since the last cycle did to the holds, before Filter reads them
        try:
            self._schedule_next(qi)
        finally:
            if self.cache.nominations.held or self._held_resources:
                self._settle_holds()

    def _schedule_next(self, qi: QueuedPodInfo) -> None:
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
        self._in_group = True
        try:
            members += self.queue.take_group(key, qi.profile)
            pg = self.cache.gangs.group(key)
            if pg is not None and pg.topology_key:
                self._topology_cycle(fw, key, pg, members)
            elif pg is not None and pg.native:
                self._native_cycle(fw, key, members)
            else:
                self._group_cycle(fw, key, members)
        except Exception as exc:  # a bug in the group cycle itself: the gang is rejected as a whole
            log.exception("the group cycle of PodGroup %s failed", key)
            self._reject_gang(fw, key, members, f"PodGroup {key} gets rejected due to an error: "
                                                f"{Status.from_error(exc).message()}", "")
        finally:
            fw.placement = None
            self._in_group = False

    # ------------------------------------------------------------------ a gang without a topology key

    def _group_cycle(self, fw: Framework, key: str, members: list[QueuedPodInfo]) -> None:
        """The members' cycles back to back, largest first; a member's verdict may end the gang's attempt."""
        gang = fw.gang
        members.sort(key=_largest_first)
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
            self._fail_rest(fw, members[i + 1:], msg, {gang.NAME})
            if failed.code == Code.UNSCHEDULABLE and failed.plugin != gang.NAME:
                self._hold_gang(fw, key, members)
            return

    # ------------------------------------------------------------------ a native gang without a topology key

    def _native_cycle(self, fw: Framework, key: str, members: list[QueuedPodInfo]) -> None:
        """A native gang's members, every one tried with the ones placed before it, as kube-scheduler 1.36's pod
        group cycle evaluates them: committed together if the gang can be whole, else taken back, each member
        saying what it found (the ones that fit wait for the gang, the others why they fit nowhere).

        The first member that fit nowhere runs PostFilter (gang preemption plans for the whole gang); the
        others that fit nowhere carry what it said, without planning again.
        """
        gang = fw.gang
        assert gang is not None
        members.sort(key=_largest_first)
        t = self._try_all(fw, key, members)
        if self._ended(fw, key, members, t, post_filter=True):   # a member beyond the quorum: as any pod
            return
        with gang.trying(key):   # a try taken back: its Unreserve does not speak for the gang (reject_gang does)
            self._take_back(fw, t.placed)
        first, *rest = t.failed
        st = self._report(fw, first)
        if self.preemption.is_preempting(first.qi.uid):
            # its PostFilter planned room for the whole gang and started the evictions: every member waits with
            # it (planned members are nominated and held at PreEnqueue)
            msg = st.message() if st is not None else ""
            others = [a.qi for a in rest] + [a.qi for a in t.placed]
            for m in others:
                self._fail(fw, m, Status(Code.UNSCHEDULABLE, msg, plugin="DefaultPreemption"), reason="Unschedulable",
                           message=msg)
            return
        said = first.diag.post_filter_msg if first.diag is not None else ""
        for a in rest:
            if a.diag is not None:
                a.diag.post_filter_msg = said
            self._report(fw, a, post_filter=False)
        msg = gang.reject_gang(first.qi.pod, st.message() if st is not None else "")
        self._fail_rest(fw, [a.qi for a in t.placed], msg, {gang.NAME})
        if st is not None and st.code == Code.UNSCHEDULABLE and first.stage == FILTER:
            self._hold_gang(fw, key, members)   # preemption did not help: the gang may hold capacity

    def _try_all(self, fw: Framework, key: str, members: list[QueuedPodInfo]) -> _Try:
        """Every member's cycle up to Reserve, each seeing those placed before it; ``whole``: the gang can be."""
        gang = fw.gang
        assert gang is not None
        t = _Try()
        with gang.trying(key):
            for m in members:
                a = self._place(fw, m, time.perf_counter(), trial=True)
                if a.node:
                    t.placed.append(a)
                elif a.stage == GONE:
                    self.queue.done(m.uid)
                elif a.stage in (ERROR, RAISED):
                    self._take_back(fw, t.placed)
                    t.error = a
                    return t
                else:
                    t.failed.append(a)
        t.whole = not t.failed or gang.can_be_whole(key, {a.qi.uid for a in t.failed})
        return t

    def _ended(self, fw: Framework, key: str, members: list[QueuedPodInfo], t: _Try, post_filter: bool) -> bool:
        """Did try ``t`` end the gang's attempt? A member's error rejects the gang; a gang that can be whole is
        committed, its members that found no node reported on their own (PostFilter as ``post_filter`` says)."""
        if t.error is not None:
            self._member_error(fw, key, members, t.error)
            return True
        if not t.whole:
            return False
        self._commit_together(fw, key, t.placed)
        for a in t.failed:
            self._report(fw, a, post_filter=post_filter)
        return True

    def _commit_together(self, fw: Framework, key: str, placed: list[Attempt]) -> None:
        """Permit and binding tasks for members placed in one group cycle: they bind together, as one round."""
        self._hold_gang_bind(key)
        try:
            for a in placed:
                self._commit(fw, a)
        finally:
            self._end_gang_bind_hold(fw, key)

    def _fail_rest(self, fw: Framework, rest: list[QueuedPodInfo], msg: str, plugins: set[str],
                   retry: bool = False) -> None:
        """Members whose gang cannot be whole now: requeued with the gang's reason, its plugin as rejector."""
        gang = fw.gang
        assert gang is not None
        for m in rest:
            m.unschedulable_plugins = set(plugins)
            self._fail(fw, m, Status(Code.UNSCHEDULABLE, msg, plugin=gang.NAME), reason="Unschedulable", message=msg,
                       retry=retry)

    def _reject_gang(self, fw: Framework, key: str, members: list[QueuedPodInfo], msg: str, plugin: str) -> None:
        """A group cycle ended in an error: reject the whole gang together, as SchedulerError.

        The gang's members waiting at Permit (from this cycle or an earlier one) are rejected with Error:
        each one's room is released once (``on_reject`` -> ``_release``: Unreserve, forget) and its
        binding task reports it and requeues it with backoff. One a plugin rejected moments ago (a
        sibling's Unreserve, before this) reports the error too (``Framework.reject_waiting``). Every other
        member still in flight (not tried yet, or whose cycle stopped short) is reported and requeued with
        backoff here. Members Permit already allowed are binding, and members already requeued stay where
        they are.
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

    # ------------------------------------------------------------------ a gang in one domain of a node label

    def _topology_cycle(self, fw: Framework, key: str, pg: PodGroup, members: list[QueuedPodInfo]) -> None:
        """Try the domains of the PodGroup's topology key, best first, until the members fit one (the module
        docstring says how)."""
        gang = fw.gang
        assert gang is not None
        members.sort(key=_largest_first)
        groups, misfits, error = self._survey(fw, members)
        if error is not None:
            self._member_error(fw, key, members, error)
            return
        unplaceable = {a.qi.uid for a in misfits}
        tries = [m for m in members if m.uid not in unplaceable and self.queue.where.get(m.uid) == "inflight"]
        if misfits and not gang.can_be_whole(key, unplaceable):
            # members that fit in no domain leave the gang short: they say why, their siblings say the gang's
            why = self._report_misfits(fw, misfits)
            self._fail_rest(fw, tries, gang.reject_gang(misfits[0].qi.pod, why), {gang.NAME})
            if all(a.stage == FILTER for a in misfits):
                # no node takes them now: capacity may be what blocks them (the plan says), in one domain
                self._hold_gang(fw, key, members, pg.topology_key)
            return
        nodes = self.cache.nodes
        gangs = self.cache.gangs
        placed = gangs.placed_members(key)
        ranking = rank_domains(nodes, pg.topology_key, groups, pg.quorum - len(placed),
                               self._required_domain(pg.topology_key, placed), gangs.failed_domains(key).keys(),
                               limit=MAX_DOMAIN_TRIES)
        failed = gangs.failed_domains(key)
        took, rejectors = 0, set().union(*failed.values())
        for domain in ranking.candidates:
            fw.placement = ranking.mask(nodes, domain)
            t = self._try_domain(fw, key, tries, unplaceable)
            if self._ended(fw, key, members, t, post_filter=False):
                self._report_misfits(fw, misfits)
                return
            took = max(took, len(t.placed))
            said = frozenset().union(*(a.diag.unschedulable_plugins for a in t.failed if a.diag is not None))
            rejectors |= said
            gangs.domain_failed(key, domain, said)
        fw.placement = None
        msg = f"pod group is unschedulable: {topology_message(ranking, max(took, ranking.most))}"
        gang.give_up(key, msg)
        self._report_misfits(fw, misfits)
        # the plugins that turned members away in the domains tried register the events that may change them
        self._fail_rest(fw, tries, msg, {gang.NAME} | rejectors, retry=ranking.more > 0)
        if not misfits and ranking.more == 0 and rejectors & CAPACITY_FILTERS:
            self._hold_gang(fw, key, tries, pg.topology_key)   # no domain has the room now: one may be held

    def _survey(self, fw: Framework, members: list[QueuedPodInfo]
                ) -> tuple[list[tuple[np.ndarray, np.ndarray, int]], list[Attempt], Attempt | None]:
        """Each group of alike members' verdict over every node: (per group, its feasible rows, their copies
        and its size), the members that fit in no domain, and a member's error (which ends the cycle)."""
        alike: dict[bytes, list[QueuedPodInfo]] = {}
        misfits: list[Attempt] = []
        for m in members:
            a = Attempt(m, time.perf_counter())
            if self._unusable(fw, m, a):
                if a.stage == GONE:
                    self.queue.done(m.uid)
                else:
                    misfits.append(a)
                continue
            alike.setdefault(signature(m.pod), []).append(m)
        groups: list[tuple[np.ndarray, np.ndarray, int]] = []
        nodes = self.cache.nodes
        skip = SIBLING_SENSITIVE & fw.plugins.keys()
        for same in alike.values():
            pod = same[0].pod
            state = CycleState()
            state.skip_filter.update(skip)
            rows, st, diag = fw.run_pre_filter(state, pod)
            if st.is_success():
                rows, st = fw.run_filter_with_nominated(state, pod, rows, diag)
            if st.code == Code.ERROR:
                return [], [], Attempt(same[0], time.perf_counter(), state, stage=ERROR, status=st, diag=diag)
            if not st.is_success():
                diag.num_all_nodes = len(nodes)
                misfits += [Attempt(m, time.perf_counter(), state, stage=PRE_FILTER, status=st, diag=diag)
                            for m in same]
            elif not len(rows):
                misfits += [Attempt(m, time.perf_counter(), stage=FILTER) for m in same]   # its message: _report_misfits
            else:
                groups.append((rows, copies_per_node(nodes, rows, pod.requests), len(same)))
        return groups, misfits, None

    def _try_domain(self, fw: Framework, key: str, tries: list[QueuedPodInfo], unplaceable: Collection[str]) -> _Try:
        """The members' cycles up to Reserve in the domain ``fw.placement`` holds, each seeing those placed before
        it. Taken back as soon as the gang cannot be whole there (its plugin says, counting ``unplaceable``)."""
        gang = fw.gang
        assert gang is not None
        t = _Try()
        out = set(unplaceable)
        with gang.trying(key):   # Unreserve of a try taken back neither rejects the waiting siblings nor backs off
            for m in tries:
                a = self._place(fw, m, time.perf_counter(), trial=True)
                if a.node:
                    t.placed.append(a)
                    continue
                if a.stage in (ERROR, RAISED):
                    self._take_back(fw, t.placed)
                    t.error = a
                    return t
                t.failed.append(a)
                out.add(m.uid)
                if not gang.can_be_whole(key, out):
                    self._take_back(fw, t.placed)
                    return t
        t.whole = True
        return t

    def _report_misfits(self, fw: Framework, misfits: list[Attempt]) -> str:
        """Members that fit in no domain say why, each its own; returns the first one's message.

        PreFilter's verdict is the survey's. A member no node took runs a cycle over every node first: the
        survey left out filters its message must count. That cycle cannot place it (the survey's filters are
        a subset of its own); should it ever, the node is given back and the member waits all the same.
        """
        fw.placement = None
        first = ""
        for a in misfits:
            if a.stage == FILTER and a.diag is None:
                a = self._place(fw, a.qi, a.t0)
            if a.node:
                self._take_back(fw, [a])
                st: Status | None = Status(Code.UNSCHEDULABLE, "pod group is unschedulable")
                self._fail(fw, a.qi, st, reason="Unschedulable", message=st.message())
            else:
                st = self._report(fw, a, post_filter=False)
            if st is not None and not first:
                first = st.message()
        return first

    def _member_error(self, fw: Framework, key: str, members: list[QueuedPodInfo], a: Attempt) -> None:
        """A member's cycle ended in an error: it says so, and the whole gang is rejected together."""
        self._report(fw, a, post_filter=False)
        st = a.status
        assert st is not None
        self._reject_gang(fw, key, members, f"PodGroup {key} gets rejected due to Pod {a.qi.pod.name} failed with an "
                                            f"error: {st.message()}", st.plugin)

    def _required_domain(self, tkey: str, placed: dict[str, str]) -> str | None:
        """The domain members already on a node fix (None: none is placed; "": they span none, or two)."""
        if not placed:
            return None
        nodes = self.cache.nodes
        ids = nodes.label(tkey)
        seen: set[int] = set()
        for node in placed.values():   # the gang's members, never the nodes
            row = nodes.row(node)
            seen.add(int(ids[row]) if ids is not None and row is not None else 0)
        if len(seen) != 1:
            return ""
        return nodes.label_values(tkey)[seen.pop()]
