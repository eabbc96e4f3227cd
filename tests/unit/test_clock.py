"""scheduler/framework/clock.py: the one clock, its fake for tests, and the token bucket on it.

Nothing here reads the machine's clock: a FakeClock moves only when a test
says so, from whatever value it starts at (a machine booted half a minute
ago has a monotonic clock near 30 s).
"""

from __future__ import annotations

import asyncio

import pytest

from scheduler.framework.clock import Clock, FakeClock, TokenBucket

STARTS = [pytest.param(0.0, id="clock at zero"), pytest.param(30.0, id="clock at 30 s (fresh boot)"),
          pytest.param(1e6, id="clock at 1e6 s")]


# ---------------------------------------------------------------------------- FakeClock


def test_advance_fires_due_timers_in_due_order_each_at_its_own_time() -> None:
    clock = FakeClock(30.0)
    fired: list[tuple[str, float]] = []
    clock.call_later(2.0, lambda: fired.append(("b", clock())))
    clock.call_later(1.0, lambda: fired.append(("a", clock())))
    clock.call_later(5.0, lambda: fired.append(("c", clock())))
    assert clock.advance(2.5) == 2
    assert fired == [("a", 31.0), ("b", 32.0)]
    assert clock() == 32.5 and clock.pending == [35.0]


def test_a_timer_armed_by_a_timer_fires_within_the_same_step() -> None:
    clock = FakeClock(0.0)
    fired: list[float] = []

    def again() -> None:
        fired.append(clock())
        if len(fired) < 3:
            clock.call_later(1.0, again)

    clock.call_later(1.0, again)
    clock.advance(10.0)
    assert fired == [1.0, 2.0, 3.0]


def test_a_cancelled_timer_never_fires() -> None:
    clock = FakeClock()
    fired: list[int] = []
    t = clock.call_later(1.0, fired.append, 1)
    t.cancel()
    assert clock.advance(2.0) == 0 and fired == [] and clock.pending == []


def test_the_clock_never_goes_back_by_advancing() -> None:
    with pytest.raises(ValueError, match="does not go back"):
        FakeClock().advance(-1.0)


def test_wall_time_moves_with_the_clock() -> None:
    clock = FakeClock(5.0, wall_start=1_714_557_600.0)
    clock.advance(90.0)
    assert clock.wall() == 1_714_557_690.0


async def test_sleep_on_the_fake_clock_returns_when_the_clock_gets_there() -> None:
    clock = FakeClock()
    task = asyncio.create_task(clock.sleep(3.0))
    await asyncio.sleep(0)
    clock.advance(2.9)
    await asyncio.sleep(0)
    assert not task.done()
    clock.advance(0.1)
    await asyncio.wait_for(task, 1)
    assert clock.pending == []


async def test_wait_returns_when_the_event_is_set_or_the_timeout_passes() -> None:
    clock = FakeClock()
    event = asyncio.Event()
    task = asyncio.create_task(clock.wait(event, 5.0))
    await asyncio.sleep(0)
    clock.advance(4.0)
    await asyncio.sleep(0)
    assert not task.done()
    clock.advance(1.0)
    await asyncio.wait_for(task, 1)
    event.clear()
    task = asyncio.create_task(clock.wait(event, None))
    await asyncio.sleep(0)
    event.set()
    await asyncio.wait_for(task, 1)
    assert clock.pending == [], "the timeout's timer goes with the wait"


async def test_the_real_clocks_timers_fire_on_the_running_loop() -> None:
    clock = Clock()
    fired = asyncio.Event()
    clock.call_later(0.0, fired.set)
    await asyncio.wait_for(fired.wait(), 5)   # a bound, not a duration: it fires on the next turn of the loop
    cancelled: list[int] = []
    clock.call_later(0.0, cancelled.append, 1).cancel()
    await clock.sleep(0.0)
    assert cancelled == []


# ---------------------------------------------------------------------------- TokenBucket


@pytest.mark.parametrize("start", STARTS)
def test_a_burst_goes_at_once_and_the_next_token_comes_after_one_over_qps(start: float) -> None:
    clock = FakeClock(start)
    bucket = TokenBucket(qps=1, burst=10, clock=clock)
    assert [bucket.reserve() for _ in range(10)] == [0.0] * 10
    assert bucket.tokens() == 0.0
    assert bucket.reserve() == pytest.approx(1.0)
    assert bucket.reserve() == pytest.approx(2.0), "reservations queue up first come, first served"


def test_tokens_refill_over_time_up_to_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=100, burst=2, clock=clock)
    bucket.reserve(), bucket.reserve()
    assert bucket.wait_time() == pytest.approx(0.01)
    clock.advance(0.05)   # 5 tokens' worth, capped at burst
    assert bucket.tokens() == pytest.approx(2.0)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, pytest.approx(0.01)]


@pytest.mark.parametrize("jump", [-1_000.0, -0.5, 1e7], ids=["back 1000 s", "back 0.5 s", "forward 1e7 s"])
def test_a_clock_that_jumps_never_makes_the_count_negative_nor_more_than_burst(jump: float) -> None:
    clock = FakeClock(30.0)
    bucket = TokenBucket(qps=50, burst=100, clock=clock)
    for _ in range(150):
        bucket.reserve()
    owed = bucket.wait_time()
    clock.set(clock() + jump)
    assert 0.0 <= bucket.tokens() <= 100.0
    if jump < 0:
        assert bucket.wait_time() == pytest.approx(owed), "what was owed stays owed, no more"
    else:
        assert bucket.tokens() == 100.0 and bucket.wait_time() == 0.0


async def test_a_cancelled_waiter_gives_its_token_back() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=1, clock=clock)
    await bucket.acquire()
    waiter = asyncio.create_task(bucket.acquire())
    await asyncio.sleep(0)
    assert clock.pending == [pytest.approx(clock() + 0.1)]
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert bucket.reserve() == pytest.approx(0.1), "one token's wait, not two"


async def test_acquire_waits_on_the_buckets_clock() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=2, burst=1, clock=clock)
    await bucket.acquire()
    task = asyncio.create_task(bucket.acquire())
    await asyncio.sleep(0)
    clock.advance(0.4)
    await asyncio.sleep(0)
    assert not task.done()
    clock.advance(0.1)
    await asyncio.wait_for(task, 1)
    assert bucket.waited == pytest.approx(0.5)


def test_zero_or_infinite_qps_means_unlimited() -> None:
    for qps in (0, -1, float("inf")):
        bucket = TokenBucket(qps=qps, burst=1, clock=FakeClock())
        assert bucket.unlimited and [bucket.reserve() for _ in range(1000)] == [0.0] * 1000
    assert not TokenBucket(qps=5, burst=1, clock=FakeClock()).unlimited
