"""PodGroup ``status.conditions``: the one rule every writer of the list follows.

A PodGroup's conditions are one list that several writers share, each owning
one condition type and never changing another's:

=====================  ===========================================================  ==============================
condition type         what it says                                                 written by
=====================  ===========================================================  ==============================
``PodGroupScheduled``  CRD: False/NotReadyForScheduling while short of members;     the PodGroup status controller
                       native: kube-scheduler 1.36's Scheduled, Unschedulable,      (scheduler/podgroups.py,
                       SchedulerError                                               scheduler/podgroups_native.py)
``PodsReady``          Kueue's waitForPodsReady round                               GangReadiness
                                                                                    (plugins/gang_readiness.py)
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

import time
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from scheduler.model import PodGroup

T = TypeVar("T")


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
