"""Load test of the simulated cluster: is it a fast enough stand-in for kube-apiserver?

    python -m bench.simcluster.loadtest --nodes 5000 --pods 50000 --concurrency 64

Starts ``python -m bench.simcluster`` in its own process (no node agent, as
scheduler_perf runs without kubelets), then from this process, over HTTP:

1. opens one watch on pods from the current resourceVersion;
2. creates ``--pods`` pods with ``--concurrency`` requests in flight, timed;
3. binds every pod to a node through pods/binding, round robin, timed;
4. reads the server's RSS (5,000 nodes + 50,000 pods must stay within 1 GiB);
5. checks the watch got exactly one ADDED and one MODIFIED per pod, in
   strictly increasing resourceVersion order (2 x pods events: none lost or
   reordered).

The client sends pre-serialized bodies over keep-alive connections so that
it measures the server, not the client. Prints a summary and writes JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import psutil


@dataclass
class WatchCheck:
    events: int = 0
    added: int = 0
    modified: int = 0
    other: int = 0
    out_of_order: int = 0
    last_rv: int = 0
    seen_added: set[str] = field(default_factory=set)
    seen_bound: set[str] = field(default_factory=set)


async def watch_pods(session: aiohttp.ClientSession, url: str, rv: str, check: WatchCheck,
                     ready: asyncio.Event, expect: int) -> None:
    params = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": "600"}
    async with session.get(f"{url}/api/v1/pods", params=params, timeout=aiohttp.ClientTimeout(total=None)) as resp:
        resp.raise_for_status()
        ready.set()
        buf = b""
        async for chunk in resp.content.iter_any():
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                ev = orjson.loads(line)
                if ev["type"] == "BOOKMARK":
                    continue
                meta = ev["object"]["metadata"]
                rv_i = int(meta["resourceVersion"])
                if rv_i <= check.last_rv:
                    check.out_of_order += 1
                check.last_rv = rv_i
                check.events += 1
                if ev["type"] == "ADDED":
                    check.added += 1
                    check.seen_added.add(meta["name"])
                elif ev["type"] == "MODIFIED" and ev["object"]["spec"].get("nodeName"):
                    check.modified += 1
                    check.seen_bound.add(meta["name"])
                else:
                    check.other += 1
                if check.events >= expect:
                    return


def pod_body(name: str) -> bytes:
    return orjson.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "bench", "labels": {"app": "loadtest", "shard": name[-1]}},
        "spec": {"schedulerName": "tandem-scheduler", "containers": [{
            "name": "pause", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]},
    })


async def run_phase(session: aiohttp.ClientSession, concurrency: int, jobs: list[tuple[str, bytes]],
                    expect: int) -> tuple[float, int, list[float]]:
    """POST every (url, body) with ``concurrency`` in flight. Returns (seconds, failures, latencies)."""
    it = iter(jobs)
    failures = 0
    latencies: list[float] = []
    headers = {"Content-Type": "application/json"}

    async def worker() -> None:
        nonlocal failures
        for url, body in it:
            t = time.perf_counter()
            async with session.post(url, data=body, headers=headers) as resp:
                await resp.read()
                if resp.status != expect:
                    failures += 1
            latencies.append(time.perf_counter() - t)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - t0, failures, latencies


def pct(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.simcluster", "--port", "0", "--nodes", str(args.nodes),
           "--no-agent", "--watch-window", str(max(20_000, 3 * args.pods))]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        m = re.search(r"listening on (http://\S+)", line)
        if not m:
            raise SystemExit(f"simcluster did not start: {line!r}")
        url = m.group(1)
        server = psutil.Process(proc.pid)
        rss_nodes = server.memory_info().rss
        connector = aiohttp.TCPConnector(limit=args.concurrency + 4)
        async with aiohttp.ClientSession(connector=connector) as session:
            async with session.post(f"{url}/api/v1/namespaces",
                                    data=orjson.dumps({"metadata": {"name": "bench"}})) as r:
                assert r.status == 201, await r.text()
            async with session.get(f"{url}/api/v1/nodes") as r:
                node_list = orjson.loads(await r.read())
            nodes = [n["metadata"]["name"] for n in node_list["items"]]
            rv = node_list["metadata"]["resourceVersion"]

            check = WatchCheck()
            ready = asyncio.Event()
            watch_task = asyncio.create_task(watch_pods(session, url, rv, check, ready, 2 * args.pods))
            await ready.wait()

            names = [f"pod-{i:06d}" for i in range(args.pods)]
            create_url = f"{url}/api/v1/namespaces/bench/pods"
            cpu0 = server.cpu_times()
            create_s, create_fail, create_lat = await run_phase(
                session, args.concurrency, [(create_url, pod_body(n)) for n in names], 201)
            cpu1 = server.cpu_times()
            binds = [(f"{url}/api/v1/namespaces/bench/pods/{n}/binding",
                      orjson.dumps({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": n},
                                    "target": {"kind": "Node", "name": nodes[i % len(nodes)]}}))
                     for i, n in enumerate(names)]
            bind_s, bind_fail, bind_lat = await run_phase(session, args.concurrency, binds, 201)
            cpu2 = server.cpu_times()
            rss = server.memory_info().rss
            try:
                await asyncio.wait_for(watch_task, timeout=60)
            except asyncio.TimeoutError:
                watch_task.cancel()
    finally:
        proc.terminate()
        proc.wait(timeout=10)

    lost = (args.pods - len(check.seen_added)) + (args.pods - len(check.seen_bound))
    return {
        "command": " ".join(["python -m bench.simcluster.loadtest"] + sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "nodes": args.nodes, "pods": args.pods, "concurrency": args.concurrency,
        "creates_per_s": round(args.pods / create_s), "create_failures": create_fail,
        "create_p50_ms": round(pct(create_lat, 50) * 1e3, 2), "create_p99_ms": round(pct(create_lat, 99) * 1e3, 2),
        "binds_per_s": round(args.pods / bind_s), "bind_failures": bind_fail,
        "bind_p50_ms": round(pct(bind_lat, 50) * 1e3, 2), "bind_p99_ms": round(pct(bind_lat, 99) * 1e3, 2),
        "server_cpu_s_create": round((cpu1.user + cpu1.system) - (cpu0.user + cpu0.system), 2),
        "server_cpu_s_bind": round((cpu2.user + cpu2.system) - (cpu1.user + cpu1.system), 2),
        "server_rss_mib_nodes_only": round(rss_nodes / 2**20),
        "server_rss_mib": round(rss / 2**20),
        "watch_events": check.events, "watch_expected": 2 * args.pods,
        "watch_lost": lost, "watch_out_of_order": check.out_of_order, "watch_unexpected": check.other,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.simcluster.loadtest")
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--pods", type=int, default=50_000)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--output", type=Path, default=Path("bench/out/simcluster-loadtest.json"))
    args = p.parse_args(argv)
    try:
        import uvloop
        result = uvloop.run(main_async(args))
    except ImportError:
        result = asyncio.run(main_async(args))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    print(f"simulated cluster load test: {result['nodes']} nodes, {result['pods']} pods, "
          f"{result['concurrency']} requests in flight")
    print(f"  creates  {result['creates_per_s']:>6}/s  p50 {result['create_p50_ms']} ms  p99 {result['create_p99_ms']} ms"
          f"  failures {result['create_failures']}")
    print(f"  binds    {result['binds_per_s']:>6}/s  p50 {result['bind_p50_ms']} ms  p99 {result['bind_p99_ms']} ms"
          f"  failures {result['bind_failures']}")
    print(f"  server RSS {result['server_rss_mib']} MiB (nodes only: {result['server_rss_mib_nodes_only']} MiB)")
    print(f"  watch    {result['watch_events']}/{result['watch_expected']} events, lost {result['watch_lost']}, "
          f"out of order {result['watch_out_of_order']}")
    print(f"  written to {args.output}")
    ok = (result["watch_lost"] == 0 and result["watch_out_of_order"] == 0
          and result["create_failures"] == 0 and result["bind_failures"] == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
