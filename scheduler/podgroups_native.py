"""The status of upstream's scheduling.k8s.io/v1alpha2 PodGroups: the PodGroupScheduled condition and events.

Part of the PodGroup status controller (scheduler/podgroups.py, whose docstring says what each API gets),
split out by concern: kube-scheduler 1.36 writes one condition on a native PodGroup, PodGroupScheduled,
and this mixin writes the same, from the members the gang index holds. The controller's budget, debounce
and writer are shared, and so are the member counts and event notes of both APIs
(scheduler/podgroups_members.py).

The condition shares the group's ``status.conditions`` with GangReadiness' PodsReady (and the preemption
executor's DisruptionTarget), so it is written by the rule of scheduler/framework/podgroupconditions.py:
this mixin owns PodGroupScheduled and no other type; each write is a merge patch on the resourceVersion
of the informer's copy whose other conditions it keeps (409: written again on the newer version); and the
condition last written is trusted only until the informer shows a newer version than the one the write was
based on, so a PodGroupScheduled that someone erased is written again. Like the controller, it never blocks
the scheduling loop and never touches pods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework.podgroupconditions import Sent, conditions_patch, find_condition, new_condition
from scheduler.model import POD_GROUP_SCHEDULED, Pod, PodGroup
from scheduler.podgroups_members import (
    GangCounts, count_members, pod_condition, scheduled_note, unschedulable_note, waiting_message,
)


class NativeStatus:
    """PodGroupController's handling of native PodGroups (its state is the controller's)."""

    if TYPE_CHECKING:
        scheduler: Any
        events: Any
        clock: Any
        _native_sent: Sent[tuple[str, str, str]]
        _whole: set[str]
        _notes: dict[str, str]

        def members(self, key: str) -> list[Pod]: ...

        def _start_write(self, key: str, body: dict[str, Any], now: float) -> None: ...

    def _sync_native(self, key: str, pg: PodGroup, now: float) -> bool:
        """The PodGroupScheduled condition of a scheduling.k8s.io/v1alpha2 PodGroup, and its events."""
        members = self.members(key)
        if not members or not any(p.scheduler_name in self.scheduler.frameworks for p in members):
            return False   # no member yet, or another scheduler's gang
        counts = count_members(members)
        mine = find_condition(pg.status, POD_GROUP_SCHEDULED)
        shown = (str(mine.get("status")), str(mine.get("reason") or ""), str(mine.get("message") or "")) \
            if mine is not None else None
        sent = self._native_sent.recall(key, pg)   # (forgotten once the informer has a newer version)
        if sent is not None:
            if sent == shown:
                self._native_sent.forget(key)   # the informer caught up with our write
            else:
                shown = sent
        want = self._native_want(pg, members, counts)
        self._report_native(key, pg, counts, want, shown is not None and shown[0] == "True")
        if want is None or want == shown or (shown is not None and shown[0] == "True"):
            return False   # as is; True is final (upstream never sets it back to False)
        # (the 1.36 server sets no generation on PodGroups: the condition then carries no observedGeneration)
        cond = new_condition(pg, POD_GROUP_SCHEDULED, *want, mine, self.clock.wall())
        self._native_sent.remember(key, pg.resource_version, want)
        self._start_write(key, conditions_patch(pg, POD_GROUP_SCHEDULED, cond), now)
        return True

    def _native_want(self, pg: PodGroup, members: list[Pod], counts: GangCounts) -> tuple[str, str, str] | None:
        """(status, reason, message) the group should show, or None: nothing to say (yet)."""
        if counts.scheduled >= pg.quorum:
            return ("True", "Scheduled", "")
        reason = ""
        error = ""
        for p in members:
            if p.node_name or p.scheduler_name not in self.scheduler.frameworks:
                continue
            c = pod_condition(p, "PodScheduled")
            if c is None or c.get("status") != "False":
                continue
            if c.get("reason") == "SchedulerError":
                reason, error = "SchedulerError", str(c.get("message") or "")
                break
            if c.get("reason") == "Unschedulable":
                reason = "Unschedulable"
        if reason == "SchedulerError":
            return ("False", "SchedulerError", error)
        if reason == "Unschedulable":
            return ("False", "Unschedulable", f"0/{self._placements(pg)} placements are available, "
                                              f"first placement status: pod group is unschedulable")
        return None

    def _placements(self, pg: PodGroup) -> int:
        """Upstream's placement count: the domains of the group's topology key among the nodes, or 1."""
        if not pg.topology_key:
            return 1
        nodes = self.scheduler.cache.nodes
        ids = nodes.label(pg.topology_key)
        if ids is None:
            return 0
        present = np.bincount(ids[nodes.rows()], minlength=len(nodes.label_values(pg.topology_key)))
        return int(np.count_nonzero(present[1:]))

    def _report_native(self, key: str, pg: PodGroup, counts: GangCounts, want: tuple[str, str, str] | None,
                       was_whole: bool) -> None:
        """Events on a native PodGroup, as on the CRD's: Normal Scheduled once whole (not again after a restart:
        ``was_whole``, its condition is True already), Warning Unschedulable with the newest member's reason
        whenever that text changes."""
        if self.events is None:
            return
        need = pg.quorum
        if counts.scheduled >= need:
            self._notes.pop(key, None)
            if key not in self._whole and not was_whole:
                self.events.record(pg.reference, "Normal", "Scheduled", "Scheduling",
                                   scheduled_note(counts.scheduled, pg.min_member))
            self._whole.add(key)
            return
        self._whole.discard(key)
        waiting = waiting_message(self.members(key)) if want is not None else ""
        if not waiting:
            return
        note = unschedulable_note(counts.scheduled, pg.min_member, waiting)
        if self._notes.get(key) != note:
            self._notes[key] = note
            self.events.record(pg.reference, "Warning", "Unschedulable", "Scheduling", note)

