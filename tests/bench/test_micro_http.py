"""bench/micro_http.py measures every path on a simulated cluster it starts itself."""

from __future__ import annotations

from bench.micro_http import run


async def test_every_path_and_call_is_measured_against_a_simulated_cluster() -> None:
    rows = await run(None, 30, 4)
    assert [(path, call) for path, call, _, _ in rows] == [
        ("aiohttp", "GET pod"), ("APIClient via aiohttp", "GET pod"), ("APIClient", "GET pod"),
        ("aiohttp", "POST event"), ("APIClient via aiohttp", "POST event"), ("APIClient", "POST event")]
    for path, call, cpu_us, rate in rows:
        assert cpu_us > 0 and rate > 0, (path, call)
