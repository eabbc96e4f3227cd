"""PodGroup ``status.conditions``: the one rule every writer of the list follows, and GangReadiness' writer.

A PodGroup's conditions are one list that several writers share, each owning
one condition type and never changing another's:

=====================  ===========================================================  ==============================
condition type         what it says                                                 written by
=====================  ===========================================================  ==============================
``PodGroupScheduled``  CRD: False/NotReadyForScheduling while short of members;     the PodGroup status controller
                       native: kube-scheduler 1.36's Scheduled, Unschedulable,      (scheduler/podgroups.py,
                       SchedulerError                                               scheduler/podgroups_native.py)
``PodsReady``          Kueue's waitForPodsReady round                               GangReadiness
                                                                                    (:class:`ConditionWriter`)
``DisruptionTarget``   a native group preempted whole                               the preemption executor
                                                                                    (scheduler/executor.py)
=====================  ===========================================================  ==============================

Both PodGroup APIs take their status as a JSON merge patch (the CRD serves no
strategic merge patch), and a merge patch replaces a list whole: a writer
that sends its own condition with the others as it last saw them erases
whatever another writer added in between, and nothing would ever put it
back. So every writer of the list follows one rule:

1. **One version.** A write of the list is a merge patch made on one
   version of the object: it carries ``metadata.resourceVersion``, the
   version of the informer's copy whose other conditions it keeps as they
   are (:func:`conditions_patch`).
2. **409 means read again.** The API server refuses such a patch with 409
   Conflict when the object changed since. The writer then waits for the
   informer to bring the newer version, computes its list again from that
   copy, and writes again (a bounded number of times).
3. **Own writes are trusted only until a newer version.** A writer
   remembers what it wrote (so it does not write it twice while the
   informer is behind) only until the informer shows a version other than
   the one the write was based on (:class:`Sent`); from then on the
   informer's copy is the truth, so a condition that someone erased is
   written again.

Fields beside the list (the CRD's phase and counts, GangReadiness'
``requeueState``) are merged per field by a merge patch and need no version.

This module lives in the framework because GangReadiness, a plugin, may
import only the framework and the model (tests/unit/test_boundaries.py);
the status controller imports it too, so both writers share one rule.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from scheduler.framework.groupchanges import GroupChanges
from scheduler.model import PodGroup, pod_group_path

if TYPE_CHECKING:
    from scheduler.framework.handle import Handle

log = logging.getLogger("tandem.plugins.gang_readiness")   # the writer's: GangReadiness is its one user

CONFLICT_RETRIES = 5            # writes made again after a 409, in a row, before the writer gives up
CONFLICT_WAIT_SECONDS = 10.0    # how long a refused writer waits for the informer's newer version

T = TypeVar("T")
Spawn = Callable[[Coroutine[Any, Any, Any], str], "asyncio.Task[Any]"]


def rfc3339(epoch: float) -> str:
    """metav1.Time: whole seconds, UTC."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def find_condition(status: Mapping[str, Any], type_: str) -> dict[str, Any] | None:
    """The condition of type ``type_`` in a status (a PodGroup's or a pod's), or None."""
    for c in status.get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == type_:
            return c
    return None


def new_condition(pg: PodGroup, type_: str, status: str, reason: str, message: str,
                  old: Mapping[str, Any] | None, now: float) -> dict[str, Any]:
    """A condition for ``pg``: its lastTransitionTime is ``old``'s while the status stays, else wall time ``now``."""
    since = old.get("lastTransitionTime") if old is not None and old.get("status") == status else None
    cond: dict[str, Any] = {"type": type_, "status": status, "reason": reason, "message": message,
                            "lastTransitionTime": since or rfc3339(now)}
    if pg.generation:   # the API sets it from 1; 0 means the object carries none (the 1.36 native PodGroup)
        cond["observedGeneration"] = pg.generation
    return cond


def conditions_patch(pg: PodGroup, type_: str, cond: dict[str, Any] | None,
                     fields: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The merge patch that makes ``cond`` the group's ``type_`` condition (None: removes it), by rule 1.

    Every other condition stays as the informer's copy ``pg`` has it, and the patch carries that copy's
    resourceVersion, so the API server refuses it (409) if the list changed since. ``fields``: other status
    fields written with it.
    """
    others = [c for c in pg.status.get("conditions") or () if isinstance(c, dict) and c.get("type") != type_]
    body: dict[str, Any] = {"status": {**(fields or {}), "conditions": others + ([cond] if cond is not None else [])}}
    if pg.resource_version:
        body["metadata"] = {"resourceVersion": pg.resource_version}
    return body


class Sent(Generic[T]):
    """What one writer wrote per PodGroup, kept until the informer shows a newer version (rule 3).

    :meth:`remember` takes the resourceVersion of the informer's copy the write was based on; :meth:`recall`
    answers only while the informer still shows that version, and forgets the write the moment it shows
    another: that copy came after the write, so it holds the write or whatever replaced it.
    """

    __slots__ = ("_by_key",)

    def __init__(self) -> None:
        self._by_key: dict[str, tuple[str, T]] = {}

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def remember(self, key: str, based_on: str, value: T) -> None:
        self._by_key[key] = (based_on, value)

    def recall(self, key: str, pg: PodGroup) -> T | None:
        """The value written for ``key`` that the informer's copy ``pg`` may not show yet, or None."""
        got = self._by_key.get(key)
        if got is None:
            return None
        if got[0] != pg.resource_version:
            del self._by_key[key]
            return None
        return got[1]

    def forget(self, key: str) -> None:
        self._by_key.pop(key, None)


class ConditionWriter:
    """Writes one condition type, and the status fields that go with it, on PodGroups by the rule.

    GangReadiness' PodsReady writer: :meth:`set` says what the group should show, and one task per group
    writes the newest of that (a state set while a write is under way is written next, with the fields of
    both). A write is :func:`conditions_patch` on the informer's copy; a 409 waits for the informer's newer
    version (:class:`GroupChanges`, which the plugin's GroupEvents feed) and writes again, at most
    :data:`CONFLICT_RETRIES` times in a row; other errors (the client already retried them) are logged and
    the state waits for the next :meth:`set`. ``annotations``: status fields that a native PodGroup, whose
    status holds only conditions (the 1.36 server drops the rest), keeps in an annotation instead, as
    JSON; the CRD gets them in its status.
    """

    def __init__(self, handle: Handle, type_: str, spawn: Spawn, changes: GroupChanges,
                 annotations: Mapping[str, str] | None = None) -> None:
        self.handle = handle
        self.type = type_
        self.annotations = dict(annotations or {})
        self._spawn = spawn
        self._changes = changes
        self._want: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}   # key -> (condition, fields) to write
        self._sent: Sent[dict[str, Any]] = Sent()                         # key -> the condition written last
        self._writers: set[str] = set()

    def current(self, key: str, pg: PodGroup) -> dict[str, Any] | None:
        """The group's condition as it stands: to be written, written and not shown yet, or the informer's."""
        want = self._want.get(key)
        if want is not None:
            return want[0]
        shown = find_condition(pg.status, self.type)
        sent = self._sent.recall(key, pg)
        if sent is None or sent == shown:
            self._sent.forget(key)
            return shown
        return sent

    def set(self, key: str, pg: PodGroup, status: str, reason: str, message: str,
            fields: Mapping[str, Any] | None = None) -> None:
        """The group should show this condition (and ``fields``); the write runs as a task."""
        cond = new_condition(pg, self.type, status, reason, message, self.current(key, pg), self.handle.clock.wall())
        merged = dict(self._want.get(key, (None, {}))[1])
        merged.update(fields or {})
        self._want[key] = (cond, merged)
        if key not in self._writers:
            self._writers.add(key)
            self._spawn(self._write(key), f"status of PodGroup {key}")

    def forget(self, key: str) -> None:
        """The group is gone (or no longer ours): drop what was to be written and what was written."""
        self._want.pop(key, None)
        self._sent.forget(key)

    async def _write(self, key: str) -> None:
        client = self.handle.client
        conflicts = 0
        annotated: dict[str, str] = {}
        try:
            while (want := self._want.get(key)) is not None:
                pg = self.handle.gangs.group(key)
                if pg is None:
                    self._want.pop(key, None)
                    return
                cond, fields = want
                notes = {self.annotations[f]: json.dumps(v, separators=(",", ":"))
                         for f, v in fields.items() if pg.native and f in self.annotations}
                body = conditions_patch(pg, self.type, cond, None if pg.native else fields)
                try:
                    if notes and notes != annotated:   # an annotation is merged by key: no version needed
                        await client.patch(pod_group_path(key), {"metadata": {"annotations": notes}})
                        annotated = notes
                    await client.patch(f"{pod_group_path(key)}/status", body)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - already retried by the client
                    if getattr(exc, "status", None) == 409 and conflicts < CONFLICT_RETRIES:
                        conflicts += 1
                        log.debug("PodGroup %s changed under its %s write; writing it again on the newer "
                                  "version", key, self.type)
                        await self._newer_than(key, pg.resource_version)
                        continue
                    log.warning("PodGroup %s: cannot write its %s condition: %s", key, self.type, exc)
                    return
                conflicts = 0
                self._sent.remember(key, pg.resource_version, cond)
                if self._want.get(key) is want:
                    del self._want[key]
        finally:
            self._writers.discard(key)

    async def _newer_than(self, key: str, version: str) -> None:
        """Until the informer's copy of group ``key`` is not ``version`` (or it is gone), at most
        CONFLICT_WAIT_SECONDS: then the write is made again on whatever the informer has."""
        clock = self.handle.clock
        deadline = clock() + CONFLICT_WAIT_SECONDS
        while (pg := self.handle.gangs.group(key)) is not None and pg.resource_version == version:
            left = deadline - clock()
            if left <= 0:
                return
            await self._changes.wait(key, left)
