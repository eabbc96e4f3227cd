"""What a PodGroup's members are doing, in the words both PodGroup APIs' status and events use.

The PodGroup status controller (scheduler/podgroups.py for scheduler-plugins'
CRD, scheduler/podgroups_native.py for upstream's scheduling.k8s.io/v1alpha2)
counts a group's members and tells where the gang stands the same way for
both APIs: :func:`count_members` (the CRD's counts and phase, the native
group's quorum), :func:`waiting_message` (the newest reason a member waits)
and the notes of the PodGroup's Unschedulable and Scheduled events. Pure
functions of the member records: they read no cache, write nothing, and
never block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from scheduler.framework.podgroupconditions import find_condition
from scheduler.model import Pod, parse_time


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
    return find_condition(pod.raw.get("status") or {}, type_)


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
