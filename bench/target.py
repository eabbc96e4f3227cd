"""Where a benchmark runs: the cluster (simulated or real) and, optionally, a tandem process.

Two async context managers, each starting what it needs on entry and
stopping it on exit, with exactly one ``yield`` (aiohttp's cleanup_ctx
habit):

* :func:`open_target` gives a :class:`Target`: with a kubeconfig, that
  cluster; without, ``python -m bench.simcluster`` in its own process (no
  node agent, as scheduler_perf runs without kubelets, unless the workload
  needs the controllers that run with it: ``agent``), so that the
  benchmark client, the API server and the scheduler never share a core's
  event loop.
* :func:`start_scheduler` runs ``python -m scheduler`` (or ``python -m
  bench.probe``, the same scheduler with finer attempt buckets) against the
  target and waits until its /readyz answers 200.
* :func:`start_kube_scheduler` runs a kube-scheduler binary against the
  target, so that tandem-bench samples its CPU and memory as it does
  tandem's (a kube-scheduler that runs elsewhere is only a name to it).

Both write their processes' output to files in ``workdir`` and, when a
process dies early, raise with the tail of that file: a benchmark that
cannot start must say why. Neither ever kills anything it did not start.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator, Callable, Sequence

import aiohttp

from scheduler.apiclient import APIClient, from_kubeconfig
from scheduler.framework.clock import Clock

REPO_ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT = 60.0        # seconds for a process to come up
KUBE_SCHEDULER_NAME = "default-scheduler"   # the schedulerName of kube-scheduler's default profile
KUBE_SCHEDULER_QPS = 5000   # scheduler_perf's client limits (qps and burst), as config/benchmark.yaml gives tandem
_KUBE_SCHEDULER_STARTED = re.compile(r'"Starting Kubernetes Scheduler"')   # its first log line (klog, -v=0)
STOP_TIMEOUT = 10.0         # seconds between SIGTERM and SIGKILL
_LISTENING = re.compile(r"listening on (https?://\S+)")


class TargetError(RuntimeError):
    """The simulated cluster or the scheduler could not be started, or died."""


@dataclass
class Target:
    kubeconfig: Path
    client: APIClient               # the benchmark's own client: no client-side rate limit
    sim_process: subprocess.Popen | None
    url: str


@dataclass
class SchedulerProcess:
    proc: subprocess.Popen
    pid: int
    metrics_url: str                # http://127.0.0.1:PORT/metrics
    log_path: Path


def tail(path: Path, lines: int = 30) -> str:
    """The last lines of a log file (empty when there is none)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _env() -> dict[str, str]:
    """The child's environment: this checkout importable even when it is not installed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _fresh_log(workdir: Path, stem: str) -> Path:
    """``stem.log``, or ``stem.1.log``, ... when an earlier run in this workdir left one."""
    path = workdir / f"{stem}.log"
    n = 1
    while path.exists():
        path = workdir / f"{stem}.{n}.log"
        n += 1
    return path


async def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM, wait, then SIGKILL: the process drains on the first signal (uvicorn's habit)."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while proc.poll() is None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
        await asyncio.to_thread(proc.wait)


def free_port() -> int:
    """A port nobody listens on right now (the child binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _start_sim(workdir: Path, kubeconfig: Path, sim_args: Sequence[str],
                     agent: bool = False) -> tuple[subprocess.Popen, str, Path]:
    log_path = _fresh_log(workdir, "sim")
    cmd = [sys.executable, "-m", "bench.simcluster", "--port", "0", *(() if agent else ("--no-agent",)),
           "--kubeconfig-out", str(kubeconfig), "--watch-window", "200000", *sim_args]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_env())
    try:
        m = await _logged(proc, log_path, _LISTENING, "the simulated cluster", ("listened", "listen"),
                          also=kubeconfig.exists)
        return proc, m.group(1), log_path
    except BaseException:
        await _stop(proc)
        raise


async def _logged(proc: subprocess.Popen, log_path: Path, pattern: re.Pattern[str], who: str,
                  verb: tuple[str, str], also: Callable[[], bool] = lambda: True) -> re.Match[str]:
    """The first match of ``pattern`` in the process's log (once ``also()`` holds too), polled for up to
    START_TIMEOUT; TargetError with the end of the log when the process exits first or time runs out.
    ``verb``: what the match means, past and plain ("listened", "listen")."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        m = pattern.search(log_path.read_text(errors="replace"))
        if m and also():
            return m
        if proc.poll() is not None:
            raise TargetError(f"{who} exited with code {proc.returncode} before it {verb[0]}; "
                              f"the end of {log_path}:\n{tail(log_path)}")
        if time.monotonic() > deadline:
            raise TargetError(f"{who} did not {verb[1]} within {START_TIMEOUT:.0f}s; "
                              f"the end of {log_path}:\n{tail(log_path)}")
        await asyncio.sleep(0.05)


@asynccontextmanager
async def open_target(kubeconfig: Path | None, workdir: Path, sim_args: Sequence[str] = (),
                      agent: bool = False) -> AsyncIterator[Target]:
    """The cluster to benchmark on; without a kubeconfig, a simulated cluster started for the block.

    ``sim_args`` go to ``python -m bench.simcluster`` (``--fault ...``,
    ``--watch-drop-interval 30``). ``agent`` runs the simulated cluster with
    its node agent and controllers (pods turn Running and Ready, ReplicaSets
    make pods, evictions ask the disruption budgets); without it pods stay
    Pending once bound. The yielded client has no client-side rate limit:
    the benchmark measures the scheduler, not its own throttle.
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    proc: subprocess.Popen | None = None
    url = ""
    if kubeconfig is None:
        kubeconfig = workdir / "sim.kubeconfig"
        if kubeconfig.exists():
            kubeconfig.unlink()  # the sim's line and file must both be new
        proc, url, _ = await _start_sim(workdir, kubeconfig, sim_args, agent)
    try:
        # the bench process's one clock; the target's client carries it to whoever else needs one
        client = await from_kubeconfig(str(kubeconfig), qps=0, clock=Clock())
        try:
            yield Target(kubeconfig=Path(kubeconfig), client=client, sim_process=proc,
                         url=url or client.host)
        finally:
            await client.close()
    finally:
        if proc is not None:
            await _stop(proc)


async def _wait_ready(proc: subprocess.Popen, url: str, log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    async with aiohttp.ClientSession() as session:
        while True:
            if proc.poll() is not None:
                raise TargetError(f"tandem-scheduler exited with code {proc.returncode} before it was "
                                  f"ready; the end of {log_path}:\n{tail(log_path)}")
            try:
                async with session.get(url, timeout=aiohttp.ClientTimeout(total=2)) as resp:
                    if resp.status == 200:
                        return
            except (aiohttp.ClientError, OSError):
                pass  # not listening yet: the health server starts after the informers sync
            if time.monotonic() > deadline:
                raise TargetError(f"tandem-scheduler was not ready within {START_TIMEOUT:.0f}s ({url}); "
                                  f"the end of {log_path}:\n{tail(log_path)}")
            await asyncio.sleep(0.1)


@asynccontextmanager
async def start_scheduler(config: Path | None, kubeconfig: Path, workdir: Path,
                          metrics_port: int = 0, probe: bool = False) -> AsyncIterator[SchedulerProcess]:
    """``python -m scheduler --kubeconfig K [--config F] --port P --insecure-serving`` for the block.

    Ready once /readyz answers 200 (informers synced). ``metrics_port`` 0
    picks a free port. ``probe`` starts ``python -m bench.probe`` instead:
    the same scheduler, its attempts also counted in fine buckets. On exit the process gets SIGTERM (it drains binds in
    flight), then SIGKILL. A scheduler that dies before it is ready, or
    while the block runs, raises :class:`TargetError` with the tail of its
    log (unless the block is already raising).
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    port = metrics_port or free_port()
    log_path = _fresh_log(workdir, "scheduler")
    # plain HTTP on loopback: the benchmark scrapes /metrics without a token
    cmd = [sys.executable, "-m", "bench.probe" if probe else "scheduler", "--kubeconfig", str(kubeconfig),
           "--port", str(port),
           "--bind-address", "127.0.0.1", "--insecure-serving"]
    if config is not None:
        cmd += ["--config", str(config)]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_env())
    base = f"http://127.0.0.1:{port}"
    try:
        await _wait_ready(proc, f"{base}/readyz", log_path)
        yield SchedulerProcess(proc=proc, pid=proc.pid, metrics_url=f"{base}/metrics", log_path=log_path)
        if proc.poll() is not None:
            raise TargetError(f"tandem-scheduler exited with code {proc.returncode} during the run; "
                              f"the end of {log_path}:\n{tail(log_path)}")
    finally:
        await _stop(proc)


@asynccontextmanager
async def start_kube_scheduler(command: Sequence[str], kubeconfig: Path,
                               workdir: Path) -> AsyncIterator[SchedulerProcess]:
    """kube-scheduler for the block: ``command`` is the binary and any flags of one's own (feature gates).

    It gets a KubeSchedulerConfiguration written to ``workdir``: the
    target's kubeconfig, scheduler_perf's client limits (qps and burst
    :data:`KUBE_SCHEDULER_QPS`, as tandem's benchmark profile has them), no
    leader election, and the default profile as ``default-scheduler``; and
    ``--secure-port=0``, so it serves nothing: no /metrics (attempt
    latencies and request counts are not reported) and no /readyz. It is
    taken as started once it logs "Starting Kubernetes Scheduler"; its
    informers sync while the workload creates its nodes, and pods created
    before then are in its first list. The returned ``metrics_url`` is empty.
    On exit: SIGTERM, then SIGKILL. A kube-scheduler that exits early raises
    :class:`TargetError` with the end of its log.
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "kube-scheduler.yaml"
    config.write_text(json.dumps({      # JSON is YAML
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(Path(kubeconfig).resolve()), "qps": KUBE_SCHEDULER_QPS,
                             "burst": KUBE_SCHEDULER_QPS},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": KUBE_SCHEDULER_NAME}]}, indent=1))
    log_path = _fresh_log(workdir, "kube-scheduler")
    cmd = [*command, f"--config={config}", "--secure-port=0"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        await _logged(proc, log_path, _KUBE_SCHEDULER_STARTED, "kube-scheduler", ("started", "start"))
        yield SchedulerProcess(proc=proc, pid=proc.pid, metrics_url="", log_path=log_path)
        if proc.poll() is not None:
            raise TargetError(f"kube-scheduler exited with code {proc.returncode} during the run; "
                              f"the end of {log_path}:\n{tail(log_path)}")
    finally:
        await _stop(proc)
