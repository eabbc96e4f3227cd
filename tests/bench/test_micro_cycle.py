"""bench/micro_cycle.py at a tiny size: each shape schedules every measured pod, and --prebind-waiting leaves
its pods waiting in PreBind while the measured ones are scheduled (the run asserts it)."""

from __future__ import annotations

import asyncio

import pytest

from bench import micro_cycle


@pytest.mark.parametrize("shape", ["default", "csi-pv", "wffc"])
def test_each_shape_times_one_cycle_per_pod(shape: str) -> None:
    d = asyncio.run(micro_cycle.measure(20, 40, None, shape))
    assert len(d) == 40 - 40 // 10, "one duration per measured pod, the first tenth dropped"
    assert (d > 0).all()


def test_pods_waiting_in_prebind_stay_there_while_others_are_measured() -> None:
    d = asyncio.run(micro_cycle.measure(20, 40, None, "default", prebind_waiting=10))
    assert len(d) == 36
