"""Why a pod waits before any scheduling cycle: PreEnqueue rejections on the pod (KEP-5501).

A pod a PreEnqueue plugin holds (a gang member whose siblings do not exist
yet, a member of a PodGroup that is missing or backing off) never reaches a
scheduling cycle, so no FailedScheduling event and no PodScheduled condition
would ever say why it is Pending. Upstream's answer, KEP-5501 ("Reflect
PreEnqueue rejections in Pod status", feature gate
SchedulerPreEnqueuePodStatus), is followed here:

* the plugin's Status message is the text; the pod gets PodScheduled=False
  with reason ``NotReadyForScheduling`` and that message, and a Warning event
  with the same reason and note;
* only after the rejection has lasted ``delay`` seconds (the KEP's hardcoded
  5 s), so a gang whose members are created together, or a PodGroup created
  a moment after its pods, costs no write at all;
* only when the message differs from the one last published for the pod, so
  re-evaluating a held pod writes nothing while its numbers stay the same;
* with the message the pod would get now: when its turn comes the pod's
  PreEnqueue runs again (through the queue, as any event that moves a gated
  pod does) and that answer is published, or nothing if it passes now;
* again when its gang changes: a held gang member is not re-evaluated when a
  sibling arrives (the member that completes the gang activates the others,
  upstream's ActivateSiblings), so a change of a group with shown members
  (a member added or gone, the PodGroup edited) gives those members a new
  turn, at most once per ``delay`` per group;
* never for SchedulingGates (kube-apiserver already sets reason
  SchedulingGated with its own message) nor DefaultPreemption (a preemptor
  held while its victims go already says Unschedulable, with its nominated
  node, and waits seconds), nor for DynamicResources' hold of a pod whose
  template's claim is not created yet (the resourceclaim controller's work,
  which reports its own failures as FailedResourceClaimCreation events).

When the pod passes PreEnqueue, a report still waiting is dropped. A written
condition is not cleared by an extra write: the pod goes straight to a cycle,
whose failure overwrites it (reason Unschedulable) and whose bind sets
PodScheduled=True.

Writes are budgeted over all pods (``qps``/``burst``, a token bucket on the
scheduler's clock), earliest turn first: a gang of 1,000 held members whose
count changes is written progressively, each member with its newest numbers,
and never more than once per ``delay`` per pod; a pod whose message keeps
changing waits twice as long before each further write (up to 64 times
``delay``), so even a message that is new at every look, whose write's own
echo re-evaluates the pod, costs a handful of writes, not one per ``delay``.
The condition goes through the scheduler's one status writer per pod
(binding.py), so it can never land after, and overwrite, a later
PodScheduled write of the same pod.

Everything here is synchronous. The calls from PreEnqueue and the group
listener are O(1); the turns run in a timer on the scheduler's clock, off
the PreEnqueue path. Nothing awaits, and nothing here calls the API (the
callbacks spawn the writes).
"""

from __future__ import annotations

import heapq
import itertools
import logging
from dataclasses import dataclass
from typing import Callable

from scheduler.framework.clock import Clock, Timer, TokenBucket

log = logging.getLogger("tandem.scheduler")

REPORT_DELAY = 5.0      # seconds a PreEnqueue rejection lasts before the pod shows it (KEP-5501)
REPORT_QPS = 20.0       # reports a second over all pods: a status patch and an event each
REPORT_BURST = 100
MAX_SPACING_DOUBLINGS = 6   # a pod's reports in one hold are at most 64 * delay apart

# PreEnqueue plugins whose holds are said elsewhere (see the module docstring)
UNREPORTED = frozenset({"SchedulingGates", "DefaultPreemption"})
# holds of one plugin that are said elsewhere, by the end of the message: a pod whose template's claim the
# resourceclaim controller has not created yet (it reports its own failures, FailedResourceClaimCreation;
# under load its backlog is seconds long, and a report per pod would add two writes to each)
UNREPORTED_ENDINGS = {"DynamicResources": ("ResourceClaim not created yet",)}

_POD, _GROUP = 0, 1


@dataclass(slots=True)
class _Held:
    """A pod some PreEnqueue plugin holds, as far as its report goes."""

    profile: str
    group: str                   # "ns/podgroup", or ""
    shown: str = ""              # the message we published for it ("" none)
    due: float | None = None     # when its next turn is (None: no turn waits)
    published: int = 0           # reports written in this hold
    last: float = 0.0            # clock() of the latest


class PreEnqueueReports:
    """Reports of held pods, delayed, deduplicated and budgeted; see the module docstring.

    ``held(uid)``: is the pod still held at PreEnqueue (and unbound, not going away)?
    ``refresh(uid)``: run the pod's PreEnqueue again (it calls back :meth:`rejected` or :meth:`passed`).
    ``publish(uid, profile, message)``: write the condition and record the event.
    """

    def __init__(self, clock: Clock, held: Callable[[str], bool], refresh: Callable[[str], None],
                 publish: Callable[[str, str, str], None], *, delay: float | None = None,
                 qps: float = REPORT_QPS, burst: int = REPORT_BURST) -> None:
        self.clock = clock
        self.held = held
        self.refresh = refresh
        self.publish = publish
        self.delay = REPORT_DELAY if delay is None else delay
        self.bucket = TokenBucket(qps, burst, clock)
        self._held: dict[str, _Held] = {}
        self._shown_by_group: dict[str, dict[str, None]] = {}   # group -> its members showing a message of ours
        self._group_due: dict[str, float] = {}             # group -> when its shown members get a turn
        self._turns: list[tuple[float, int, int, str]] = []   # (due, seq, _POD | _GROUP, uid | group)
        self._seq = itertools.count()
        self._timer: Timer | None = None
        self._timer_due = 0.0
        self._refreshing = ""                              # the uid whose PreEnqueue runs again now
        self._fresh: tuple[str, str] | None = None         # what it answered: (plugin, message)
        self.published = 0

    def __contains__(self, uid: str) -> bool:
        return uid in self._held

    # ------------------------------------------------------------------ from PreEnqueue and informers (O(1))

    def rejected(self, uid: str, profile: str, plugin: str, message: str, group: str = "") -> None:
        """A PreEnqueue plugin held the pod with this message."""
        if uid == self._refreshing:
            self._fresh = (plugin, message)
            return
        e = self._held.get(uid)
        if plugin in UNREPORTED or not message or message.endswith(UNREPORTED_ENDINGS.get(plugin, ())):
            if e is not None:
                e.due = None   # nothing to say for now: a waiting turn would publish a stale reason
            return
        if e is None:
            e = self._held[uid] = _Held(profile, group)
        if message == e.shown:
            e.due = None       # back to what the pod shows
        elif e.due is None:
            e.due = max(self.clock() + self.delay, self._spaced(e))
            self._push(e.due, _POD, uid)

    def passed(self, uid: str) -> None:
        """The pod passed PreEnqueue: a turn still waiting is stale, and the next hold is news."""
        e = self._held.pop(uid, None)
        if e is not None and e.shown:
            members = self._shown_by_group.get(e.group)
            if members is not None:
                members.pop(uid, None)
                if not members:
                    del self._shown_by_group[e.group]

    def forget(self, uid: str) -> None:
        """The pod is gone or bound."""
        self.passed(uid)

    def _spaced(self, e: _Held) -> float:
        """The earliest a further report of ``e`` may be written: ``delay`` after the first, then doubling."""
        if not e.published:
            return 0.0
        return e.last + self.delay * 2 ** min(e.published - 1, MAX_SPACING_DOUBLINGS)

    def group_changed(self, key: str) -> None:
        """A member of group ``key`` or its PodGroup changed: its members' numbers may have."""
        if key in self._shown_by_group and key not in self._group_due:
            due = self._group_due[key] = self.clock() + self.delay
            self._push(due, _GROUP, key)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # ------------------------------------------------------------------ the turns (a timer)

    def _push(self, due: float, kind: int, key: str) -> None:
        heapq.heappush(self._turns, (due, next(self._seq), kind, key))
        self._arm(due)

    def _arm(self, due: float) -> None:
        if self._timer is not None and self._timer_due <= due:
            return
        if self._timer is not None:
            self._timer.cancel()
        try:
            self._timer = self.clock.call_later(due - self.clock(), self._fire)
        except RuntimeError:   # no running loop (a synchronous test): the next turn pushed arms it
            self._timer = None
            return
        self._timer_due = due

    def _fire(self) -> None:
        """Run the turns that are due, earliest first, as far as the budget goes; re-arm for the rest."""
        self._timer = None
        now = self.clock()
        turns = self._turns
        while turns and turns[0][0] <= now:
            due, _, kind, key = turns[0]
            if kind == _GROUP:
                heapq.heappop(turns)
                if self._group_due.get(key) == due:
                    del self._group_due[key]
                    for uid in self._shown_by_group.get(key, ()):
                        e = self._held[uid]
                        if e.due is None:
                            e.due = max(now, self._spaced(e))
                            heapq.heappush(turns, (e.due, next(self._seq), _POD, uid))
                continue
            e = self._held.get(key)
            if e is None or e.due != due:
                heapq.heappop(turns)   # passed, or its turn was called off
                continue
            wait = self.bucket.wait_time()
            if wait > 0.0:
                self._arm(now + wait)
                return
            heapq.heappop(turns)
            e.due = None
            message = self._current(key) if self.held(key) else ""
            if not message or message == e.shown or self._held.get(key) is not e:
                continue
            self.bucket.reserve()
            if not e.shown and e.group:
                self._shown_by_group.setdefault(e.group, {})[key] = None
            e.shown = message
            e.published += 1
            e.last = now
            self.published += 1
            try:
                self.publish(key, e.profile, message)
            except Exception:  # noqa: BLE001 - one pod's report must not stop the others'
                log.exception("reporting why pod %s waits failed", key)
        if turns:
            self._arm(turns[0][0])

    def _current(self, uid: str) -> str:
        """The pod's PreEnqueue answer now: its message, or "" when it passes or is not ours to report."""
        self._refreshing, self._fresh = uid, None
        try:
            self.refresh(uid)
        finally:
            self._refreshing = ""
        fresh, self._fresh = self._fresh, None
        if fresh is None or fresh[0] in UNREPORTED:
            return ""
        return fresh[1]
