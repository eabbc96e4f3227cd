"""``python -m bench.simcluster`` as a user runs it: a real process, stopped by SIGTERM.

The CLI is the stand-in's own, so these tests do not use the dual-target
fixture. Every process started here is stopped (SIGTERM, then SIGKILL) by
the test that started it, whatever happens inside the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import sys
import time
from pathlib import Path
from typing import AsyncIterator

import aiohttp
import pytest
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

pytestmark = pytest.mark.asyncio(loop_scope="session")

REPO = Path(__file__).resolve().parents[2]
URL_LINE = re.compile(r"simcluster listening on (http://127\.0\.0\.1:\d+) with (\d+) nodes")


async def start(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.simcluster", *args, cwd=REPO,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


@contextlib.asynccontextmanager
async def running(*args: str) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """The CLI started with ``args``, its URL once it printed it; killed on the way out if still alive."""
    proc = await start(*args)
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 20)
        m = URL_LINE.search(line.decode())
        assert m, (line, await proc.stderr.read())
        yield proc, m.group(1)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 5)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()


async def stop(proc: asyncio.subprocess.Process) -> tuple[int, float]:
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = await asyncio.wait_for(proc.wait(), 10)
    return code, time.monotonic() - t0


async def test_cli_serves_nodes_writes_a_working_kubeconfig_and_stops_on_sigterm(tmp_path):
    kubeconfig = tmp_path / "sim.kubeconfig"
    async with running("--port", "0", "--nodes", "5", "--zones", "2", "--kubeconfig-out", str(kubeconfig)) as (proc, url):
        assert (await proc.stdout.readline()).decode().strip() == f"kubeconfig written to {kubeconfig}"
        api = await k8s_config.new_client_from_config(config_file=str(kubeconfig))
        async with api:
            assert api.configuration.host == url
            nodes = (await k8s.CoreV1Api(api).list_node()).items
        assert len(nodes) == 5
        zones = sorted(n.metadata.labels["topology.kubernetes.io/zone"] for n in nodes)
        assert zones == ["zone-0", "zone-0", "zone-0", "zone-1", "zone-1"]
        assert all(n.metadata.labels["kubernetes.io/hostname"] == n.metadata.name for n in nodes)
        code, took = await stop(proc)
    assert code == 0
    assert took < 5


async def test_sigterm_stops_the_cli_while_a_watch_is_open(tmp_path):
    async with running("--port", "0") as (proc, url):
        async with aiohttp.ClientSession() as s:
            resp = await s.get(f"{url}/api/v1/pods", params={"watch": "true", "timeoutSeconds": "300"})
            assert resp.status == 200
            code, took = await stop(proc)
            resp.release()
    assert code == 0
    assert took < 5  # a long watch does not hold shutdown up


async def test_cli_applies_fault_flags(tmp_path):
    async with running("--port", "0", "--fault", "list:nodes:error_rate=1,error_code=503",
                       "--watch-drop-interval", "7") as (proc, url):
        async with aiohttp.ClientSession() as s:
            async with s.get(f"{url}/api/v1/nodes") as r:
                assert r.status == 503
            async with s.get(f"{url}/simcluster/faults") as r:
                got = await r.json()
        assert got["watch_drop_interval"] == 7.0
        assert [(x["verb"], x["resource"], x["error_rate"], x["error_code"]) for x in got["rules"]] == \
            [("list", "nodes", 1.0, 503)]
        code, _ = await stop(proc)
    assert code == 0


@pytest.mark.parametrize("fault,message", [
    ("create:pods", "create:pods"),
    ("create:pods:error_rate=2", "error_rate"),
    ("create:pods:error_rate=lots", "error_rate"),
    ("create:pods:error_code=418", "error_code"),
    ("delete:podz:error_rate=1", "resource"),
], ids=["a fault without settings", "a rate above 1", "a rate that is not a number",
        "an unsupported error code", "an unknown resource"])
async def test_bad_fault_flag_exits_non_zero_naming_it(fault, message):
    proc = await start("--port", "0", "--fault", fault)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 20)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode != 0
    assert b"listening" not in out
    assert message in err.decode()
    assert "Traceback" not in err.decode()
