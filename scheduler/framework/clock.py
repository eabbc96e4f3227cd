"""The one clock: what time it is, and timers that fire on that same time.

Every deadline, backoff, token bucket and timer in tandem reads and fires
from one injected :class:`Clock` (``Handle.clock``), as kube-scheduler's
queue takes a ``clock.WithTicker`` (``WithClock`` in scheduling_queue.go).
Two clocks for one deadline (a fake ``now`` compared with timers armed on
the event loop) is how a test passes on one machine and fails on a machine
booted a minute ago; so nothing here mixes them.

* :class:`Clock` is the real one: ``time.monotonic`` for now, the running
  event loop's ``call_later`` for timers, ``time.time`` for the wall-clock
  timestamps written to the API.
* :class:`FakeClock` is for tests: time moves only when :meth:`FakeClock.advance`
  says so, and advancing fires every timer that came due, in order. It needs
  no event loop for timers; :meth:`Clock.sleep` on it needs one.
* :class:`TokenBucket` is client-go's token bucket rate limiter on a clock:
  O(1) reservations, FIFO, never a negative count, and a clock that jumps
  (forward or back) costs at most one refill, never a debt.

A clock is callable (``clock()`` is ``clock.now()``) because the scheduling
cycle reads it per pod and a bound method call is the cheapest read.

Not on this clock, on purpose: timeouts that bound real I/O (a socket
exchange in ``transport.py``, the drains at shutdown), which a fake clock
could never make happen sooner, and durations measured for metrics
(``time.perf_counter``), which measure work rather than schedule it.

Every constructor that needs time takes the clock as a required argument;
only the process's entry point (``scheduler/app.py``) builds a real one.
``tests/unit/test_one_clock.py`` holds ``scheduler/`` and ``plugins/`` to that.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Any, Callable, Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


def io_timer(delay: float, fn: Callable[..., Any], *args: Any) -> asyncio.TimerHandle:
    """A timer that bounds real I/O, on the event loop's own time (as ``asyncio.timeout``), not on any clock:
    see the module docstring. The transport times the answer of an exchange with it."""
    return asyncio.get_running_loop().call_later(max(0.0, delay), fn, *args)


class Clock:
    """Monotonic seconds, wall seconds, and timers on the running event loop."""

    __slots__ = ()

    def __call__(self) -> float:
        return time.monotonic()

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        """Seconds since the epoch, for timestamps written to the API only (never for deadlines)."""
        return time.time()

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> Timer:
        """Call ``fn(*args)`` once ``delay`` seconds of this clock have passed. Needs a running loop."""
        return asyncio.get_running_loop().call_later(max(0.0, delay), fn, *args)

    async def sleep(self, delay: float) -> None:
        await asyncio.sleep(max(0.0, delay))

    async def wait(self, event: asyncio.Event, timeout: float | None) -> None:
        """Until ``event`` is set or ``timeout`` seconds of this clock pass (None: no limit).

        A timeout sets the event, so the caller re-checks its own condition either way.
        """
        if event.is_set():
            return
        timer = None if timeout is None else self.call_later(timeout, event.set)
        try:
            await event.wait()
        finally:
            if timer is not None:
                timer.cancel()


class _FakeTimer:
    __slots__ = ("due", "fn", "args", "cancelled", "fired")

    def __init__(self, due: float, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.due, self.fn, self.args = due, fn, args
        self.cancelled = False
        self.fired = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock(Clock):
    """A clock for tests: ``advance`` moves time and fires what came due; nothing else moves it.

    ``start`` is deliberately arbitrary: code must never depend on the clock's
    absolute value, only on differences. ``wall_start`` is the epoch time at ``start``.
    """

    __slots__ = ("_now", "_wall0", "_start", "_timers", "_seq")

    def __init__(self, start: float = 1_000.0, wall_start: float = 1_767_225_600.0) -> None:
        self._now = float(start)
        self._start = float(start)
        self._wall0 = float(wall_start)
        self._timers: list[tuple[float, int, _FakeTimer]] = []
        self._seq = itertools.count()

    def __call__(self) -> float:
        return self._now

    def now(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._wall0 + (self._now - self._start)

    def call_later(self, delay: float, fn: Callable[..., Any], *args: Any) -> _FakeTimer:
        t = _FakeTimer(self._now + max(0.0, delay), fn, args)
        heapq.heappush(self._timers, (t.due, next(self._seq), t))
        return t

    async def sleep(self, delay: float) -> None:
        if delay <= 0:
            await asyncio.sleep(0)
            return
        fut = asyncio.get_running_loop().create_future()
        timer = self.call_later(delay, _resolve, fut)
        try:
            await fut
        finally:
            timer.cancel()

    def advance(self, seconds: float) -> int:
        """Move time forward by ``seconds``, firing due timers in due order (each at its own time).

        Timers that the fired ones arm are fired too if they fall due within
        the step. Returns how many fired.
        """
        if seconds < 0:
            raise ValueError(f"a monotonic clock does not go back (advance({seconds}))")
        target = self._now + seconds
        fired = 0
        while self._timers and self._timers[0][0] <= target:
            due, _, t = heapq.heappop(self._timers)
            if t.cancelled:
                continue
            self._now = max(self._now, due)
            t.fired = True
            t.fn(*t.args)
            fired += 1
        self._now = target
        return fired

    def set(self, now: float) -> None:
        """Jump to ``now`` without firing anything (a clock stepped by the OS, or a test of that)."""
        self._now = float(now)

    @property
    def pending(self) -> list[float]:
        """When the live timers are due, soonest first."""
        return sorted(due for due, _, t in self._timers if not t.cancelled)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class TokenBucket:
    """client-go's ``flowcontrol.NewTokenBucketRateLimiter`` on a clock: ``qps`` tokens a second, ``burst`` at most.

    Kept as a theoretical arrival time (GCRA, the same arithmetic as
    golang.org/x/time/rate's reservations): ``_tat`` is when the bucket would
    be full again if nobody else took a token. A reservation moves it by one
    token's time and tells the caller how long to wait; so waiters are served
    first come first served in O(1), and the count of tokens, ``burst - (tat
    - now) * qps``, is never below zero. A clock that jumps back moves the
    schedule with it; one that jumps forward refills to ``burst``, no more.
    ``qps <= 0`` or infinite means no limit.
    """

    __slots__ = ("qps", "burst", "clock", "_tat", "_last", "waited")

    def __init__(self, qps: float, burst: int, clock: Clock) -> None:
        self.qps = qps
        self.burst = max(1, int(burst))
        self.clock = clock
        self._last = self.clock()
        self._tat = self._last        # full
        self.waited = 0.0             # seconds callers were told to wait, in total (metrics)

    @property
    def unlimited(self) -> bool:
        return self.qps <= 0 or self.qps == float("inf")

    def _now(self) -> float:
        now = self.clock()
        if now < self._last:          # the clock stepped back: keep what was owed, in the new time
            self._tat -= self._last - now
        self._last = now
        if self._tat < now:
            self._tat = now           # a full bucket holds burst tokens, not more
        return now

    def tokens(self) -> float:
        """Tokens available now, in [0, burst]."""
        if self.unlimited:
            return float(self.burst)
        now = self._now()
        return max(0.0, self.burst - (self._tat - now) * self.qps)

    def wait_time(self) -> float:
        """Seconds until one token is available (0: now). Takes nothing."""
        if self.unlimited:
            return 0.0
        now = self._now()
        missing = 1.0 - (self.burst - (self._tat - now) * self.qps)
        # a millionth of a token is float noise (0.1 + 0.2), not a reason to sleep
        return missing / self.qps if missing > 1e-6 else 0.0

    def reserve(self) -> float:
        """Take a token; the seconds the caller must wait before using it (0: now)."""
        if self.unlimited:
            return 0.0
        wait = self.wait_time()       # refreshes _tat against now
        self._tat += 1.0 / self.qps
        return wait

    def cancel(self) -> None:
        """Give back a reservation not used (rate.Reservation.Cancel)."""
        if not self.unlimited:
            self._tat = max(self._last, self._tat - 1.0 / self.qps)

    async def acquire(self) -> None:
        """Wait for a token on this bucket's clock. Cancelling the wait gives the token back."""
        wait = self.reserve()
        if wait <= 0.0:
            return
        self.waited += wait
        try:
            await self.clock.sleep(wait)
        except asyncio.CancelledError:
            self.cancel()
            raise
