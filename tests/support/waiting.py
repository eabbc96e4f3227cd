"""Waiting for a condition in a test: poll it, with a bound, never a bare sleep.

A test that sleeps "long enough" for something to happen is slow on a fast
machine and flaky on a loaded one. These wait for the condition itself and
fail with what was awaited once the bound (generous, in seconds) runs out.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable


async def eventually(cond: Callable[[], Any], what: str, timeout: float = 10.0) -> None:
    """Until ``cond()`` is true; an AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.002)


async def settle(turns: int = 20) -> None:
    """Let every task that is ready run (no I/O involved): a few turns of the event loop."""
    for _ in range(turns):
        await asyncio.sleep(0)
