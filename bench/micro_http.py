"""CPU per API request on the client side: aiohttp against tandem's keep-alive transport.

    python -m bench.micro_http [--kubeconfig PATH] [--requests 4000] [--concurrency 32]

Starts a simulated cluster (in its own process) unless a kubeconfig is
given, then sends the same calls the scheduler makes per pod: GET of one
pod and POST of an Event. Each path is timed with ``time.process_time()``
in this process only, so the number is what one request costs the
scheduler's core, not the server's. Paths:

* ``aiohttp``: a bare ``aiohttp.ClientSession``, the floor of aiohttp;
* ``APIClient via aiohttp``: tandem's client with the transport off (as when a proxy is set);
* ``APIClient``: tandem's client as it runs (scheduler/transport.py).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Awaitable, Callable

import aiohttp
import orjson

from bench.target import open_target
from scheduler.apiclient import APIClient, from_kubeconfig

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "micro-http", "namespace": "default"},
       "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}


def event(i: int) -> dict:
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": f"micro-http.{i:x}", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "micro",
            "reportingInstance": "micro-1", "action": "Binding", "reason": "Scheduled",
            "regarding": {"kind": "Pod", "namespace": "default", "name": "micro-http"},
            "note": "Successfully assigned default/micro-http to node-1", "type": "Normal"}


async def timed(n: int, concurrency: int, call: Callable[[int], Awaitable[object]]) -> tuple[float, float]:
    """(CPU microseconds per call, calls per wall second) for ``n`` calls, ``concurrency`` at once."""
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            await call(i)

    await asyncio.gather(*(one(-1 - i) for i in range(min(200, n))))   # warm the connections
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return 1e6 * (time.process_time() - cpu) / n, n / (time.perf_counter() - wall)


async def run(kubeconfig: Path | None, n: int, concurrency: int) -> list[tuple[str, str, float, float]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="micro-http-") as tmp:
        async with open_target(kubeconfig, Path(tmp)) as target:
            try:
                await target.client.create("/api/v1/namespaces/default/pods", POD)
            except Exception:  # noqa: BLE001 - already there from an earlier run on the same cluster
                pass
            pod_path = "/api/v1/namespaces/default/pods/micro-http"
            events_path = "/apis/events.k8s.io/v1/namespaces/default/events"
            lean = await from_kubeconfig(str(target.kubeconfig), qps=0, clock=target.client.clock)
            via_session = await from_kubeconfig(str(target.kubeconfig), qps=0, clock=target.client.clock)
            via_session.transport = None
            headers = {"Accept": "application/json", "Content-Type": "application/json"}
            token = await lean.config.get_api_key_with_prefix("BearerToken", alias="authorization")
            if token:
                headers["Authorization"] = token
            session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=APIClient._ssl_context(lean.config)))
            seq = iter(range(10**9))
            try:
                async def bare_get(i: int) -> None:
                    async with session.get(lean.host + pod_path, headers=headers) as r:
                        orjson.loads(await r.read())

                async def bare_post(i: int) -> None:
                    async with session.post(lean.host + events_path, data=orjson.dumps(event(next(seq))),
                                            headers=headers) as r:
                        orjson.loads(await r.read())

                cases: list[tuple[str, str, Callable[[int], Awaitable[object]]]] = [
                    ("aiohttp", "GET pod", bare_get),
                    ("APIClient via aiohttp", "GET pod", lambda i: via_session.get(pod_path)),
                    ("APIClient", "GET pod", lambda i: lean.get(pod_path)),
                    ("aiohttp", "POST event", bare_post),
                    ("APIClient via aiohttp", "POST event",
                     lambda i: via_session.create(events_path, event(next(seq)))),
                    ("APIClient", "POST event", lambda i: lean.create(events_path, event(next(seq)))),
                ]
                for path, call_name, call in cases:
                    cpu, rate = await timed(n, concurrency, call)
                    rows.append((path, call_name, cpu, rate))
            finally:
                await session.close()
                await lean.close()
                await via_session.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.micro_http", description=__doc__.split("\n\n")[0])
    p.add_argument("--kubeconfig", type=Path, help="a cluster to measure against (default: a simulated one)")
    p.add_argument("--requests", type=int, default=4000, help="calls per path (default %(default)s)")
    p.add_argument("--concurrency", type=int, default=32, help="calls under way at once (default %(default)s)")
    args = p.parse_args(argv)
    try:
        import uvloop
        rows = uvloop.run(run(args.kubeconfig, args.requests, args.concurrency))
    except ImportError:
        rows = asyncio.run(run(args.kubeconfig, args.requests, args.concurrency))
    print(f"{'path':<24}{'call':<12}{'CPU us/call':>12}{'calls/s':>10}")
    for path, call, cpu, rate in rows:
        print(f"{path:<24}{call:<12}{cpu:>12.0f}{rate:>10.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
