"""bench/micro_preemption.py measures what it says: every timed cycle is a preemption that nominates its pod."""

from __future__ import annotations

from bench.micro_preemption import measure


async def test_every_preemptor_is_nominated_to_a_node_of_its_own() -> None:
    durations, nominated = await measure(nodes=20, pods=12)
    assert nominated == 12            # 12 distinct nodes: each preempted where no earlier nomination holds room
    assert len(durations) == 12 - 12 // 10 and (durations > 0).all()
