"""The status of upstream's scheduling.k8s.io/v1alpha2 PodGroups: the PodGroupScheduled condition and events.

Part of the PodGroup status controller (scheduler/podgroups.py, whose docstring says what each API gets),
split out by concern (with the pure helpers both APIs' status share, which scheduler.podgroups
re-exports): kube-scheduler 1.36 writes one condition on a native PodGroup, PodGroupScheduled,
and this mixin writes the same, from the members the gang index holds; the controller's budget, debounce
and writer are shared. Like the controller, it never blocks the scheduling loop and never touches pods.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable

import numpy as np

from scheduler.model import POD_GROUP_SCHEDULED, Pod, PodGroup, parse_time


# ---------------------------------------------------------------------------- helpers both APIs' status share

@dataclass(frozen=True, slots=True)
class GangCounts:
    """What the members of one PodGroup are doing (members being deleted left out)."""

    members: int = 0
    scheduled: int = 0            # have a node (any phase)
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    attempted: bool = False       # some member has a node or was popped for a scheduling cycle


def count_members(members: Iterable[Pod], attempted: Callable[[Pod], bool] = lambda p: False) -> GangCounts:
    n = scheduled = running = succeeded = failed = 0
    tried = False
    for p in members:
        n += 1
        if p.node_name:
            scheduled += 1
            tried = True
        elif not tried and attempted(p):
            tried = True
        if p.phase == "Running":
            running += 1
        elif p.phase == "Succeeded":
            succeeded += 1
        elif p.phase == "Failed":
            failed += 1
    return GangCounts(n, scheduled, running, succeeded, failed, tried)


def pod_condition(pod: Pod, type_: str) -> dict[str, Any] | None:
    for c in (pod.raw.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == type_:
            return c
    return None


def waiting_message(members: Iterable[Pod]) -> str:
    """The newest PodScheduled=False message of a member without a node ("" if none has one).

    Newest by lastTransitionTime, then by name, so the text is stable between equal attempts.
    """
    best: tuple[float, str] | None = None
    msg = ""
    for p in members:
        if p.node_name:
            continue
        c = pod_condition(p, "PodScheduled")
        if c is None or c.get("status") != "False" or not c.get("message"):
            continue
        rank = (parse_time(c.get("lastTransitionTime")), p.name)
        # newest first; among equals the first name wins (max over (time, -name) without negating strings)
        if best is None or rank[0] > best[0] or (rank[0] == best[0] and rank[1] < best[1]):
            best, msg = rank, str(c["message"])
    return msg


def unschedulable_note(scheduled: int, min_member: int, waiting: str) -> str:
    need = max(min_member, 1)
    return f"{scheduled}/{need} members have a node; waiting for {need - scheduled}: {waiting}"


def scheduled_note(scheduled: int, min_member: int) -> str:
    return f"{scheduled}/{max(min_member, 1)} members have a node; the gang is complete"


def rfc3339(epoch: float) -> str:
    """metav1.Time: whole seconds, UTC."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))



# ---------------------------------------------------------------------------- the native API

class NativeStatus:
    """PodGroupController's handling of native PodGroups (its state is the controller's)."""

    if TYPE_CHECKING:
        scheduler: Any
        events: Any
        clock: Any
        _native_sent: dict[str, tuple[str, str, str]]
        _whole: set[str]
        _notes: dict[str, str]
        _last_write: dict[str, float]
        _writing: set[str]
        _tasks: set[asyncio.Task[None]]

        def members(self, key: str) -> list[Pod]: ...

        async def _write(self, key: str, patch: dict[str, Any], rv: str = "") -> None: ...

    def _sync_native(self, key: str, pg: PodGroup, now: float) -> bool:
        """The PodGroupScheduled condition of a scheduling.k8s.io/v1alpha2 PodGroup, and its events."""
        members = self.members(key)
        if not members or not any(p.scheduler_name in self.scheduler.frameworks for p in members):
            return False   # no member yet, or another scheduler's gang
        counts = count_members(members)
        conds = [c for c in pg.status.get("conditions") or () if isinstance(c, dict)]
        mine = next((c for c in conds if c.get("type") == POD_GROUP_SCHEDULED), None)
        shown = (str(mine.get("status")), str(mine.get("reason") or ""), str(mine.get("message") or "")) \
            if mine is not None else None
        sent = self._native_sent.get(key)
        if sent is not None:
            if sent == shown:
                del self._native_sent[key]   # the informer caught up with our write
            else:
                shown = sent
        want = self._native_want(pg, members, counts)
        self._report_native(key, pg, counts, want, shown is not None and shown[0] == "True")
        if want is None or want == shown or (shown is not None and shown[0] == "True"):
            return False   # as is; True is final (upstream never sets it back to False)
        status, reason, message = want
        cond: dict[str, Any] = {"type": POD_GROUP_SCHEDULED, "status": status, "reason": reason, "message": message,
                                "lastTransitionTime": (mine.get("lastTransitionTime") if mine is not None
                                                       and mine.get("status") == status else None)
                                or rfc3339(self.clock.wall())}
        if pg.generation:   # the 1.36 server sets none on PodGroups
            cond["observedGeneration"] = pg.generation
        self._native_sent[key] = want
        self._last_write[key] = now
        self._writing.add(key)
        # a merge patch replaces the whole list: made on the version whose other conditions it keeps
        task = asyncio.ensure_future(self._write(key, {"conditions": [c for c in conds if c is not mine] + [cond]},
                                                 pg.resource_version))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
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

