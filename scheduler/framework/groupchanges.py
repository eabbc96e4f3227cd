"""Waiting for a gang's next change: one-shot notices per gang key, bounded by the clock.

The informer handlers tell a plugin that declares the GroupEvents extension
point when a gang changed: a member pod, or the PodGroup itself, was added,
updated or deleted (``Scheduler.group_listeners``; interface.GroupEventsPlugin).
A task of that plugin that must see the informer's next copy of a gang (a
status write refused with 409 Conflict waits for the newer PodGroup; a bare
pod's recreation waits for the old pod to go) waits here instead of polling:
:meth:`GroupChanges.wait` returns at the next :meth:`GroupChanges.notify`
for its key, or when its timeout on the one clock runs out, whichever comes
first. A waiter may be woken early (a timeout of another waiter of the same
key wakes it too); it checks its own condition again either way.

Nothing here outlives its waiters: a notice goes to whoever waits at that
moment and is not kept, so keys of deleted gangs leave nothing behind.
"""

from __future__ import annotations

import asyncio

from scheduler.framework.clock import Clock


class GroupChanges:
    """Per gang key, the event the tasks waiting for that gang's next change wait on."""

    __slots__ = ("clock", "_events")

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._events: dict[str, asyncio.Event] = {}

    def __len__(self) -> int:
        """Gangs some task waits for (tests: nothing is kept for a gang nobody waits for)."""
        return len(self._events)

    def notify(self, key: str) -> None:
        """Gang ``key`` changed: wake whoever waits for it. O(1)."""
        event = self._events.pop(key, None)
        if event is not None:
            event.set()

    async def wait(self, key: str, timeout: float | None) -> None:
        """Until gang ``key`` changes or ``timeout`` seconds of the clock pass (None: no limit)."""
        event = self._events.get(key)
        if event is None:
            event = self._events[key] = asyncio.Event()
        try:
            await self.clock.wait(event, timeout)
        finally:
            # a timeout sets the event too (Clock.wait): a set event is spent, the next waiter needs a new one
            if event.is_set() and self._events.get(key) is event:
                del self._events[key]
