"""The Consolidation workloads (bench/workloads/consolidation.yaml) at their Smoke scale, each with its strategy's
configuration, on the simulated cluster with its controllers and node agent, tandem started through the probe.

Each run must evict through the scheduler (its counter and the watch both see it), bind every replacement where
it was planned (no bounce-back), reach what its strategy is for (nodes emptied, each ReplicaSet balanced over
the zones, the gang bound), and report the Consolidation metrics by name and the stream's attempts under its
own profile. Each takes a few seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.consolidation import FAMILIES, moves, parse_scrape
from bench.metrics import EdgeRecorder, WindowScraper, gang_latencies
from bench.report import moves_lines
from bench.runner import run_workload
from bench.target import open_target, start_scheduler
from bench.workload import NATIVE_POD_GROUP_API_VERSION, find_workload, uses_controllers
from tests.bench.test_runner import SCHEDULER, WORKLOADS

CONFIG = Path(__file__).resolve().parents[2] / "config"
STREAM = ("scheduled", "tandem-stream")


async def run_smoke(strategy: str, tmp_path: Path, config: str = ""):
    """Consolidation<Strategy>/Smoke with ``config`` (default: the strategy's), as tandem-bench runs it."""
    workload = find_workload(WORKLOADS, f"Consolidation{strategy.title()}/Smoke")
    assert uses_controllers(workload)
    recorder = EdgeRecorder()
    async with open_target(None, tmp_path, [f"--runtime-config={NATIVE_POD_GROUP_API_VERSION}=true"],
                           agent=True) as target:
        async with start_scheduler(CONFIG / f"benchmark-consolidation-{config or strategy}.yaml", target.kubeconfig,
                                   tmp_path, probe=True) as sp:
            scraper = WindowScraper(recorder, sp.metrics_url, extra=parse_scrape)
            await scraper.start()
            try:
                await run_workload(workload, target, SCHEDULER, recorder, timeout=60)
            finally:
                await scraper.stop()
    assert scraper.error is None
    mv = moves(recorder, scraper.extra)
    assert mv is not None and mv.scrape is not None
    return workload, recorder, mv


def check_moved_without_bounce_back(mv, strategy: str) -> None:
    summary = "\n".join(moves_lines(mv))   # in every message: what the run saw
    assert mv.scrape.families == FAMILIES, f"every Consolidation metric exposed by name\n{summary}"
    assert mv.counter("evicted/success") > 0 and mv.evictions, f"evicted, as the scheduler and the watch saw it\n{summary}"
    assert mv.counter("moves/executed") == mv.counter("evicted/success"), summary
    assert mv.counter("bounce_backs") == 0, summary
    assert strategy in mv.scrape.plans and mv.scrape.plans[strategy].count > 0, summary
    assert mv.scrape.replacement_bound.count > 0, summary
    # the stream's 40 attempts under its own profile; the window's opening scrape may race the first one or two
    # (bench/metrics.py, WindowScraper)
    assert 38 <= mv.scrape.attempts[STREAM].count <= 40, summary
    assert len(mv.e2e["stream"]) == 40, summary
    assert "bounce-backs 0" in summary and "profile tandem-stream" in summary and f"plans        {strategy}:" in summary


async def test_consolidation_compact_smoke_empties_nodes_onto_fuller_ones(tmp_path):
    _, _, mv = await run_smoke("compact", tmp_path)
    check_moved_without_bounce_back(mv, "compact")
    assert mv.nodes_after < mv.nodes_before == 10, "\n".join(moves_lines(mv))
    assert mv.counter("nodes_emptied") > 0


async def test_consolidation_spread_smoke_balances_every_replica_set_over_the_zone_that_joined(tmp_path):
    _, _, mv = await run_smoke("spread", tmp_path)
    check_moved_without_bounce_back(mv, "spread")
    assert mv.zones == 3 and len(mv.skews) == 2
    assert all(skew <= 1 for skew in mv.skews.values()), mv.skews
    assert len(mv.evictions) == 4, "two moves a ReplicaSet: 3 + 3 becomes 2 + 2 + 2"


async def test_consolidation_defragment_smoke_opens_whole_nodes_for_the_gang(tmp_path):
    _, recorder, mv = await run_smoke("defragment", tmp_path)
    check_moved_without_bounce_back(mv, "defragment")
    assert len(gang_latencies(recorder)) == 1, "the gang bound whole"
    assert len(mv.evictions) == 2, "one pod moved off a node for each of the gang's two members"


@pytest.mark.parametrize("strategy", ["compact"])
async def test_without_consolidation_nothing_moves_and_the_stream_is_still_counted_apart(strategy, tmp_path):
    _, _, mv = await run_smoke(strategy, tmp_path, config="off")
    assert not mv.scrape.families and not mv.evictions
    assert mv.nodes_before == mv.nodes_after == 10
    assert 38 <= mv.scrape.attempts[STREAM].count <= 40
    assert "evictions" not in "\n".join(moves_lines(mv))
