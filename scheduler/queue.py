"""The scheduling queue: activeQ, backoffQ and unschedulable pods, as kube-scheduler's PriorityQueue.

* **activeQ** is a heap ordered by the QueueSort plugin's key; ``pop``
  awaits until it has a pod.
* **backoffQ** holds pods that failed, until ``initial * 2^(attempts-1)``
  (capped at max) has passed since their last attempt.
* **unschedulable** holds pods rejected by plugins; a cluster event moves
  one out only if a plugin that rejected it registered for that event (and
  its queueing hint says Queue), to backoffQ while its backoff lasts; a Queue
  from a plugin that returned Pending skips backoff. A pod no plugin rejected
  moves on any event. Pods left there longer than 5 minutes are flushed back
  (podMaxInUnschedulablePodsDuration).
* **gated** pods failed PreEnqueue (scheduling gates, a gang not yet
  complete); they are retried when they are updated or an event that the
  gating plugin registered for arrives.

A pod popped for a cycle is "in flight" until :meth:`done`; the events that
arrive meanwhile are recorded, and if the pod comes back unschedulable
those events are replayed against it, so an event that raced with a cycle
is never lost; :meth:`activate` on an in-flight pod is recorded the same
way. Every pod the queue knows is in exactly one of: activeQ, backoffQ,
unschedulable, gated, in flight. A pod leaves "in flight" only through
:meth:`requeue_failed` (back to a queue), :meth:`done` (Permit allowed it, or
it was deleted or bound) or :meth:`delete`; the scheduler calls one of them
for every pod it popped or took with :meth:`take_group`, on every path out
of a cycle, a plugin's exception included (scheduler/schedule_one.py), so
the in-flight set empties and the recorded events are trimmed.

A QueueSort plugin whose key raises for a pod does not keep the pod out:
it is queued by PrioritySort's key (:func:`fallback_sort_key`) and the
scheduler is told (``sort_failed``), which reports it on the pod.
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
import itertools
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from scheduler.framework.clock import Clock
from scheduler.framework.interface import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from scheduler.framework.status import Status
from scheduler.state.gangs import GangIndex

if TYPE_CHECKING:
    from scheduler.model import Pod

log = logging.getLogger("tandem.queue")

UNSCHEDULABLE_TIMEOUT = ClusterEvent(Resource.WILDCARD, ActionType.ALL, "UnschedulableTimeout")
FORCE_ACTIVATE = ClusterEvent(Resource.WILDCARD, ActionType.ALL, "ForceActivate")

# upstream's queueingStrategy, weakest first
QUEUE_SKIP, QUEUE_AFTER_BACKOFF, QUEUE_IMMEDIATELY = 0, 1, 2


@dataclass(slots=True)
class QueuedPodInfo:
    pod: "Pod"
    profile: str                          # schedulerName: which framework schedules it
    timestamp: float                      # when it last entered activeQ/backoffQ (queue sort uses it)
    initial_attempt: float = 0.0          # first time it was popped (for the SLI metric)
    attempts: int = 0
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    gated_by: str = ""
    last_failure: float = 0.0             # when the last attempt failed (backoff counts from here)
    in_flight_from: int = 0               # sequence number of the first event recorded after pop
    released: bool = False                # its reservation was already given back (a rejected waiting pod)

    @property
    def uid(self) -> str:
        return self.pod.uid


class SchedulingQueue:
    def __init__(self, sort_key: Callable[[QueuedPodInfo], tuple],
                 pre_enqueue: Callable[[QueuedPodInfo], Status],
                 hints: dict[str, dict[str, list[ClusterEventWithHint]]],
                 initial_backoff: float = 1.0, max_backoff: float = 10.0,
                 max_unschedulable: float = 300.0, *, clock: Clock,
                 flush_interval: float = 30.0, gangs: GangIndex | None = None,
                 sort_failed: Callable[[QueuedPodInfo, Exception], None] | None = None) -> None:
        """``hints``: profile -> plugin -> the events it registered (EnqueueExtensions).

        ``clock`` is the scheduler's one clock (required: there is no other): backoff expiries, the
        leftover flush and pop's wait for them all read and fire from it. ``gangs`` is the cache's
        gang index, which :meth:`take_group` reads to find a gang's members. ``sort_failed`` is told
        when ``sort_key`` (the QueueSort plugin) raised for a pod; the pod is queued all the same, by
        PrioritySort's key (:func:`fallback_sort_key`).
        """
        self.sort_key = sort_key
        self.sort_failed = sort_failed
        self.pre_enqueue = pre_enqueue
        self.hints = hints
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_unschedulable = max_unschedulable
        # the leftover flush runs from pop's own wait, so an idle scheduler with only parked pods still
        # retries them after max_unschedulable (upstream: flushUnschedulablePodsLeftover every 30 s)
        self.flush_interval = flush_interval
        self._next_flush = clock() + flush_interval
        self.clock = clock
        self._active: list[tuple[tuple, int, str]] = []
        self._active_tokens: dict[str, int] = {}      # uid -> token of its live heap entry
        self._backoff: list[tuple[float, int, str]] = []
        self._backoff_tokens: dict[str, int] = {}
        self.infos: dict[str, QueuedPodInfo] = {}      # every pod the queue holds, by uid
        self.where: dict[str, str] = {}                # uid -> "active" | "backoff" | "unschedulable" | "gated" | "inflight"
        self._inflight: dict[str, int] = {}            # uid -> event seq when popped; insertion order = seq order
        self._parked: set[str] = set()                 # unschedulable or gated: what events may move
        # parked pods by (profile, rejecting plugin), so an event visits only pods it can help
        # (thousands of gated pods must not be rescanned on every bind)
        self._parked_by: dict[tuple[str, str], set[str]] = {}
        self._parked_any: set[str] = set()             # parked with no plugin to blame: any event may help
        self._parked_keys: dict[str, tuple[tuple[str, str], ...]] = {}
        self._event_plugins: dict[tuple[str, int], frozenset[tuple[str, str]]] = {}
        self.gangs = gangs if gangs is not None else GangIndex()
        self._counter = itertools.count()
        self._wakeup = asyncio.Event()
        self._events: list[tuple[int, ClusterEvent, Any, Any]] = []   # recorded while pods are in flight
        self._event_seq = 0
        self._closed = False

    # ------------------------------------------------------------------ sizes

    def counts(self) -> dict[str, int]:
        out = {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}
        for w in self.where.values():
            if w in out:
                out[w] += 1
        return out

    def __contains__(self, uid: str) -> bool:
        return uid in self.infos

    # ------------------------------------------------------------------ internals

    def _set_where(self, uid: str, where: str | None) -> None:
        old = self.where.get(uid)
        if old == "inflight":
            self._inflight.pop(uid, None)
        elif old in ("unschedulable", "gated"):
            self._parked.discard(uid)
            self._unindex(uid)
        if where is None:
            self.where.pop(uid, None)
            return
        self.where[uid] = where
        if where == "inflight":
            self._inflight[uid] = self._event_seq
        elif where in ("unschedulable", "gated"):
            self._parked.add(uid)
            self._index(uid)

    def _index(self, uid: str) -> None:
        qi = self.infos[uid]
        plugins = qi.unschedulable_plugins | qi.pending_plugins
        if not plugins:
            self._parked_any.add(uid)
            self._parked_keys[uid] = ()
            return
        keys = tuple((qi.profile, name) for name in plugins)
        for key in keys:
            self._parked_by.setdefault(key, set()).add(uid)
        self._parked_keys[uid] = keys

    def _unindex(self, uid: str) -> None:
        self._parked_any.discard(uid)
        for key in self._parked_keys.pop(uid, ()):
            members = self._parked_by.get(key)
            if members is not None:
                members.discard(uid)
                if not members:
                    del self._parked_by[key]

    def _candidates(self, event: ClusterEvent) -> set[str]:
        """Parked pods that a plugin registered for ``event`` rejected, plus those nobody rejected."""
        if event.resource == Resource.WILDCARD:
            return set(self._parked)
        ck = (event.resource, event.action)
        interested = self._event_plugins.get(ck)
        if interested is None:
            interested = frozenset((profile, name) for profile, plugins in self.hints.items()
                                   for name, cehs in plugins.items()
                                   if any(ceh.event.matches(event) for ceh in cehs))
            self._event_plugins[ck] = interested
        out = set(self._parked_any)
        for key in interested:
            members = self._parked_by.get(key)
            if members:
                out |= members
        return out

    def _push_active(self, qi: QueuedPodInfo) -> None:
        try:
            key = self.sort_key(qi)
        except Exception as exc:  # a QueueSort plugin's bug: the pod is still queued, and says why
            key = fallback_sort_key(qi)
            if self.sort_failed is not None:
                self.sort_failed(qi, exc)
            else:
                log.exception("the queue sort key of %s failed; ordering it by priority", qi.pod.key)
        token = next(self._counter)
        self._active_tokens[qi.uid] = token
        self._backoff_tokens.pop(qi.uid, None)
        heapq.heappush(self._active, (key, token, qi.uid))
        self._set_where(qi.uid, "active")
        self._wakeup.set()

    def _push_backoff(self, qi: QueuedPodInfo) -> None:
        token = next(self._counter)
        self._backoff_tokens[qi.uid] = token
        self._active_tokens.pop(qi.uid, None)
        heapq.heappush(self._backoff, (self.backoff_expiry(qi), token, qi.uid))
        self._set_where(qi.uid, "backoff")
        self._wakeup.set()

    def _park(self, qi: QueuedPodInfo, where: str) -> None:
        self._active_tokens.pop(qi.uid, None)
        self._backoff_tokens.pop(qi.uid, None)
        self._set_where(qi.uid, where)
        qi.timestamp = self.clock()

    def backoff_expiry(self, qi: QueuedPodInfo) -> float:
        if qi.attempts == 0:
            return qi.last_failure
        d = self.initial_backoff * (2 ** min(qi.attempts - 1, 30))
        return qi.last_failure + min(d, self.max_backoff)

    def _enqueue(self, qi: QueuedPodInfo) -> None:
        """Active, or gated when a PreEnqueue plugin says no."""
        st = self.pre_enqueue(qi)
        if not st.is_success():
            qi.gated_by = st.plugin
            qi.unschedulable_plugins = {st.plugin} if st.plugin else set()
            self._park(qi, "gated")
            return
        qi.gated_by = ""
        qi.timestamp = self.clock()
        if qi.attempts and self.backoff_expiry(qi) > self.clock():
            self._push_backoff(qi)
        else:
            self._push_active(qi)

    # ------------------------------------------------------------------ pod events

    def add(self, pod: "Pod", profile: str) -> None:
        """A new unscheduled pod of one of our profiles."""
        if pod.uid in self.infos:
            self.update(pod)
            return
        qi = QueuedPodInfo(pod, profile, self.clock())
        self.infos[pod.uid] = qi
        self._enqueue(qi)

    def update(self, pod: "Pod") -> None:
        qi = self.infos.get(pod.uid)
        if qi is None:
            return
        old = qi.pod
        qi.pod = pod
        where = self.where.get(pod.uid)
        if where == "active":
            self._push_active(qi)  # re-sort: priority may have changed
        elif where in ("unschedulable", "gated"):
            if where == "gated" or _may_help(old, pod):
                # an update that might make it schedulable (upstream: isPodUpdated + hints)
                self._enqueue(qi)
        # backoff: stays; in flight: the recorded event is replayed at done()
        self.record(ClusterEvent(Resource.UNSCHEDULED_POD, ActionType.UPDATE, "UnscheduledPodUpdate"), old, pod)

    def delete(self, uid: str) -> None:
        self.infos.pop(uid, None)
        self._set_where(uid, None)
        self._active_tokens.pop(uid, None)
        self._backoff_tokens.pop(uid, None)

    # ------------------------------------------------------------------ the cycle side

    async def pop(self) -> QueuedPodInfo | None:
        """The next pod to schedule; None once the queue is closed."""
        while not self._closed:
            now = self.clock()
            if now >= self._next_flush:
                self._next_flush = now + self.flush_interval
                self.flush_unschedulable_leftover()
            self._flush_backoff(now)
            while self._active:
                _, token, uid = heapq.heappop(self._active)
                if self._active_tokens.get(uid) != token:
                    continue  # stale entry (moved or re-sorted)
                del self._active_tokens[uid]
                qi = self.infos[uid]
                self._set_where(uid, "inflight")
                # only events recorded from now on were missed by this attempt
                qi.in_flight_from = self._event_seq + 1
                # the plugins that rejected the last attempt are cleared for the next (upstream activeQueue.pop)
                qi.unschedulable_plugins = set()
                qi.pending_plugins = set()
                qi.released = False
                qi.gated_by = ""
                qi.attempts += 1
                if not qi.initial_attempt:
                    qi.initial_attempt = now
                return qi
            self._wakeup.clear()
            deadlines = [self._backoff[0][0]] if self._backoff else []
            if self._parked:
                deadlines.append(self._next_flush)
            timeout = max(0.0, min(deadlines) - now) if deadlines else None
            # the deadlines are on the clock, so the wait is too: a timer of the same clock wakes it
            await self.clock.wait(self._wakeup, timeout)
        return None

    def _flush_backoff(self, now: float) -> None:
        while self._backoff and self._backoff[0][0] <= now:
            _, token, uid = heapq.heappop(self._backoff)
            if self._backoff_tokens.get(uid) != token:
                continue
            del self._backoff_tokens[uid]
            self._push_active(self.infos[uid])

    def take_group(self, key: str, profile: str) -> list[QueuedPodInfo]:
        """Take the pending members of gang ``key`` out of activeQ, backoffQ and unschedulable, as pop would.

        Gated members stay (they have not passed PreEnqueue); members in flight are already taken.
        """
        out = []
        now = self.clock()
        for uid in list(self.gangs.member_uids(key)):
            qi = self.infos.get(uid)
            if qi is None or qi.profile != profile or self.where.get(uid) not in ("active", "backoff", "unschedulable"):
                continue
            self._active_tokens.pop(uid, None)
            self._backoff_tokens.pop(uid, None)
            self._set_where(uid, "inflight")
            qi.in_flight_from = self._event_seq + 1
            qi.attempts += 1
            qi.unschedulable_plugins = set()
            qi.pending_plugins = set()
            qi.released = False
            if not qi.initial_attempt:
                qi.initial_attempt = now
            out.append(qi)
        return out

    def flush_unschedulable_leftover(self) -> int:
        """Move pods unschedulable for longer than max_unschedulable back (run periodically)."""
        now = self.clock()
        moved = 0
        for uid in list(self._parked):
            if self.where[uid] == "unschedulable" and now - self.infos[uid].timestamp > self.max_unschedulable:
                self._requeue(self.infos[uid], UNSCHEDULABLE_TIMEOUT)
                moved += 1
        return moved

    def done(self, uid: str) -> None:
        """The pod needs the queue no more: Permit allowed it (a failed bind comes back through
        :meth:`requeue_after_done`), or it was deleted or bound meanwhile."""
        if self.where.get(uid) == "inflight":
            self.delete(uid)
        self._trim_events()

    def requeue_failed(self, qi: QueuedPodInfo, unschedulable: bool) -> None:
        """A failed attempt: back to backoff or unschedulable, unless an event since pop says try again."""
        if qi.uid not in self.infos or self.where.get(qi.uid) != "inflight":
            return  # deleted (or bound) while in flight
        qi.last_failure = self.clock()
        if not unschedulable:
            self._push_backoff(qi)  # an error: retry after backoff
        else:
            strategy = QUEUE_SKIP
            for seq, ev, old, new in self._events:
                if seq >= qi.in_flight_from:
                    strategy = max(strategy, self._strategy(qi, ev, old, new))
                    if strategy == QUEUE_IMMEDIATELY:
                        break
            if strategy != QUEUE_SKIP and qi.pod.gang:
                self.gangs.forget_failed_domains(qi.pod.gang)   # an event during its attempt may have changed them
            if strategy == QUEUE_IMMEDIATELY:
                self._push_active(qi)
            elif strategy == QUEUE_AFTER_BACKOFF:
                self._push_backoff(qi)
            else:
                self._park(qi, "unschedulable")
        self._trim_events()

    def requeue_after_done(self, qi: QueuedPodInfo) -> None:
        """A pod that failed after :meth:`done` (in PreBind or Bind): back to backoffQ, unless the queue has it.

        Past Permit no plugin rejected it, so no recorded event is consulted: upstream's
        AddUnschedulableIfNotPresent sends a pod without rejecting plugins to backoff.
        """
        if qi.uid in self.infos:
            return  # an informer update queued it again meanwhile
        self.infos[qi.uid] = qi
        qi.last_failure = self.clock()
        self._push_backoff(qi)

    def gate(self, uid: str, plugin: str) -> None:
        """Park a queued pod as gated by ``plugin`` (its PreEnqueue now says no): only :meth:`activate` or an
        update of the pod moves it, and PreEnqueue is asked again then."""
        qi = self.infos.get(uid)
        where = self.where.get(uid)
        if qi is None or where in (None, "inflight", "gated"):
            return
        qi.gated_by = plugin
        qi.unschedulable_plugins = {plugin}
        qi.pending_plugins = set()
        self._park(qi, "gated")

    def activate(self, uids: list[str]) -> None:
        """Move these pods to activeQ now (upstream's Activate, used by gang plugins)."""
        for uid in uids:
            qi = self.infos.get(uid)
            if qi is not None and self.where.get(uid) in ("unschedulable", "backoff", "gated"):
                if self.where[uid] == "gated":
                    self._enqueue(qi)
                else:
                    self._push_active(qi)
            elif qi is not None and self.where.get(uid) == "inflight":
                # it comes back through requeue_failed: make that requeue it rather than park it
                self.record(FORCE_ACTIVATE, None, qi.pod)

    # ------------------------------------------------------------------ cluster events

    def record(self, event: ClusterEvent, old: Any, new: Any) -> None:
        if self._inflight:
            self._event_seq += 1
            self._events.append((self._event_seq, event, old, new))

    def _trim_events(self) -> None:
        if not self._inflight:
            self._events.clear()
            return
        low = next(iter(self._inflight.values()))  # popped first = lowest seq
        if self._events and self._events[0][0] < low:
            cut = bisect.bisect_left(self._events, low, key=lambda e: e[0])
            del self._events[:cut]

    def on_event(self, event: ClusterEvent, old: Any = None, new: Any = None, only: set[str] | None = None) -> int:
        """A cluster event: move the unschedulable and gated pods it may help. Returns how many moved.
        ``only``: the pods it can concern at all (an object of theirs changed), when the caller knows them."""
        self.record(event, old, new)
        moved = 0
        candidates = self._candidates(event)
        if only is not None:
            candidates &= only
        for uid in candidates:
            qi = self.infos[uid]
            strategy = self._strategy(qi, event, old, new)
            if strategy != QUEUE_SKIP:
                self._requeue(qi, event, strategy)
                moved += 1
        return moved

    def _requeue(self, qi: QueuedPodInfo, event: ClusterEvent, strategy: int = 1) -> None:
        if qi.pod.gang:
            # what a topology gang's last attempt learnt (the domains it did not fit in) may be stale now
            self.gangs.forget_failed_domains(qi.pod.gang)
        if self.where.get(qi.uid) == "gated":
            self._enqueue(qi)
        elif strategy != QUEUE_IMMEDIATELY and qi.attempts and self.backoff_expiry(qi) > self.clock():
            self._push_backoff(qi)
        else:
            self._push_active(qi)

    def _strategy(self, qi: QueuedPodInfo, event: ClusterEvent, old: Any, new: Any) -> int:
        """upstream's isPodWorthRequeuing: skip, after backoff, or (a Pending plugin says Queue) immediately."""
        if _own_gang_release(qi, event, old):
            return QUEUE_SKIP
        plugins = qi.unschedulable_plugins | qi.pending_plugins
        if not plugins:
            return QUEUE_AFTER_BACKOFF  # rejected with no plugin to blame: any event may help
        if event.resource == Resource.WILDCARD:
            if new is not None and getattr(new, "uid", None) != qi.uid:
                return QUEUE_SKIP  # a wildcard event aimed at another pod (ForceActivate)
            return QUEUE_AFTER_BACKOFF
        registered = self.hints.get(qi.profile, {})
        strategy = QUEUE_SKIP
        for name in plugins:
            for ceh in registered.get(name, ()):
                if not ceh.event.matches(event):
                    continue
                if ceh.hint is None:
                    hint = QueueingHint.QUEUE
                else:
                    try:
                        hint = ceh.hint(qi.pod, old, new)
                    except Exception:
                        log.exception("queueing hint of %s failed; queueing the pod", name)
                        hint = QueueingHint.QUEUE
                if hint != QueueingHint.QUEUE:
                    continue
                if name in qi.pending_plugins:
                    return QUEUE_IMMEDIATELY  # Queue from a Pending plugin skips backoff
                strategy = QUEUE_AFTER_BACKOFF
                if not qi.pending_plugins:
                    return strategy
        return strategy

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()


def fallback_sort_key(qi: QueuedPodInfo) -> tuple[int, float]:
    """PrioritySort's key, for a pod whose QueueSort key raised: higher priority first, then queue time.

    It must compare with the plugin's keys in one heap: both QueueSort plugins here begin their keys
    with (-priority, a time), so the pod keeps its priority band. Within the band it lands where
    PrioritySort would place it when PrioritySort is the profile's plugin; Coscheduling's second element
    is the pod's creation time (epoch seconds), so there a fallback pod goes first among its equals.
    """
    return (-qi.pod.priority, qi.timestamp)


def _own_gang_release(qi: QueuedPodInfo, event: ClusterEvent, old: Any) -> bool:
    """Room freed by the pod's own gang giving up its reservations cannot help that gang.

    Upstream never requeues an assumed pod for its own release; a gang releases all its members at
    once, so each member would otherwise be requeued by its siblings' releases and a gang that cannot
    fit would retry itself at every backoff step, forever, with nothing changed in the cluster.
    """
    pod = qi.pod
    return (bool(pod.gang) and event.resource == Resource.ASSIGNED_POD and event.action == ActionType.DELETE
            and getattr(old, "gang", "") == pod.gang)


def _may_help(old: "Pod", new: "Pod") -> bool:
    """Did an update change anything scheduling looks at (upstream's isPodUpdated, minus status)?"""
    return (old.requests != new.requests or old.node_selector != new.node_selector or old.affinity != new.affinity
            or old.tolerations != new.tolerations or old.labels != new.labels
            or old.scheduling_gates != new.scheduling_gates or old.priority != new.priority
            or old.topology_spread != new.topology_spread)
