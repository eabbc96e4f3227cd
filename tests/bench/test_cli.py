"""``tandem-bench`` end to end, as a user runs it: a subprocess on the simulated cluster."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 240

needs_runner = pytest.mark.skipif(importlib.util.find_spec("bench.runner") is None,
                                  reason="bench/runner.py is not there yet")


def bench(*args: str, timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def only_json(out: Path) -> dict:
    (path,) = out.glob("*.json")
    assert path.with_suffix(".png").stat().st_size > 0
    return json.loads(path.read_text())


def throughput_item(doc: dict) -> dict:
    (item,) = [it for it in doc["dataItems"] if it["labels"]["Metric"] == "SchedulingThroughput"]
    return item


@needs_runner
def test_run_starts_tandem_and_writes_the_report(tmp_path):
    r = bench("run", "SchedulingBasic/Smoke", "--start-scheduler", "default", "--output", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "SchedulingBasic/Smoke on tandem-scheduler" in r.stdout
    assert "20/20 measured pods bound" in r.stdout
    doc = only_json(tmp_path)
    item = throughput_item(doc)
    assert item["unit"] == "pods/s" and item["labels"]["Name"] == "SchedulingBasic/Smoke"
    meta = doc["metadata"]
    assert meta["scheduler"]["config"] == "default" and meta["workload"]["params"]["measurePods"] == 20
    (run,) = doc["runs"]
    assert run["rss_peak_bytes"] > 0 and run["cpu_seconds"] is not None
    # the window's opening scrape races the first binds (more of them on a loaded machine), so some of the
    # 20 measured attempts may fall before it; none of the setup's may fall inside
    assert 0 < run["attempt_latency"]["scheduled"]["count"] <= 20


@needs_runner
def test_run_with_the_baseline_binder(tmp_path):
    r = bench("run", "SchedulingBasic/Smoke", "--baseline", "--output", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "on baseline-binder" in r.stdout
    doc = only_json(tmp_path)
    assert throughput_item(doc)["labels"]["Scheduler"] == "baseline-binder"
    assert doc["runs"][0]["bound_pods"] == 20


@needs_runner
def test_compare_prints_the_ratio(tmp_path):
    r = bench("compare", "default", "baseline", "SchedulingBasic/Smoke", "--runs", "1", "--output", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "ratio B/A = " in r.stdout
    doc = only_json(tmp_path)
    assert [run["scheduler"] for run in doc["runs"]] == ["tandem-scheduler", "baseline-binder"]
    assert doc["metadata"]["comparison"]["ratios"]


def test_an_unknown_workload_exits_2_and_lists_the_names(tmp_path):
    r = bench("run", "NoSuchTest/Smoke", "--baseline", "--output", str(tmp_path), timeout=60)
    assert r.returncode == 2
    assert "SchedulingBasic/Smoke" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("args, message", [
    pytest.param(["run", "SchedulingBasic/Smoke", "--baseline", "--param", "oops"], "key=value", id="a param without ="),
    pytest.param(["run", "SchedulingBasic/Smoke", "--start-scheduler", "no/such/config.yaml"], "no such file",
                 id="a scheduler config that does not exist"),
    pytest.param(["run", "SchedulingBasic/Smoke"], "nothing serves 'tandem-scheduler'",
                 id="an external scheduler on the private simulated cluster"),
    pytest.param(["compare", "default", "name:kube-scheduler", "SchedulingBasic/Smoke"], "nothing serves",
                 id="compare with an external scheduler and no kubeconfig"),
    pytest.param(["run", "SchedulingBasic/Smoke", "--baseline", "--workloads-dir", "/nonexistent"],
                 "no workload files", id="a workloads dir without workloads"),
    pytest.param(["run", "SchedulingBasic/Smoke", "--baseline", "--pid", "0"], "--pid 0: no such process",
                 id="a pid that names no process"),
    pytest.param(["run", "SchedulingBasic/Smoke", "--baseline", "--pause-while-creating"],
                 "needs a scheduler process to stop", id="pausing with nothing to stop"),
])
def test_usage_errors_exit_2_with_one_line(tmp_path, args, message):
    r = bench(*args, "--output", str(tmp_path), timeout=60)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("extra, message", [
    pytest.param([], "--start-kube-scheduler needs --kubeconfig", id="kube-scheduler without a real server"),
    pytest.param(["--kubeconfig", "{kc}"], "/no/kube-scheduler: no such executable", id="a binary that is not there"),
    pytest.param(["--kubeconfig", "{kc}", "--scheduler-name", "x"], "leave out --scheduler-name",
                 id="kube-scheduler under another name"),
])
def test_kube_scheduler_usage_errors_exit_2_with_one_line(tmp_path, extra, message):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    args = [a.format(kc=kubeconfig) for a in extra]
    r = bench("run", "SchedulingWithResourceClaimTemplate/Smoke", "--start-kube-scheduler", "/no/kube-scheduler",
              *args, "--output", str(tmp_path / "out"), timeout=60)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_kube_schedulers_own_flags_go_to_it_but_not_the_ones_tandem_bench_sets(tmp_path):
    from bench.__main__ import UsageError, kube_scheduler_spec

    binary = tmp_path / "kube-scheduler"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    spec = kube_scheduler_spec(f"{binary} --feature-gates=A=true -v=0")
    assert (spec.kind, spec.name, spec.label) == ("kube-scheduler", "default-scheduler", "kube-scheduler")
    assert spec.command == (str(binary), "--feature-gates=A=true", "-v=0")
    with pytest.raises(UsageError, match="--secure-port is tandem-bench's to set"):
        kube_scheduler_spec(f"{binary} --secure-port=10259")


@needs_runner
def test_run_samples_and_pauses_a_process_given_by_pid(tmp_path):
    import psutil

    child = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.01)"])
    try:
        r = bench("run", "SchedulingBasic/Smoke", "--baseline", "--pid", str(child.pid), "--pause-while-creating",
                  "--output", str(tmp_path))
        assert r.returncode == 0, r.stderr
        assert "  CPU per pod  " in r.stdout and "(resume to last bind; " in r.stdout
        doc = only_json(tmp_path)
        assert doc["metadata"]["pids"] == [child.pid]
        (run,) = doc["runs"]
        assert run["rss_peak_bytes"] > 0 and run["cpu_seconds"] is not None
        assert run["cpu_window"] == "resume to last bind" and run["cpu_per_pod_seconds"] is not None
        assert psutil.Process(child.pid).status() != psutil.STATUS_STOPPED     # resumed, and left running
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("kubeconfig, flag, pids, want", [
    pytest.param("K", None, [42], True, id="a real server and a scheduler process: paused by default"),
    pytest.param(None, None, [42], False, id="the simulated cluster: not by default"),
    pytest.param(None, True, [42], True, id="asked for on the simulated cluster"),
    pytest.param("K", False, [42], False, id="declined on a real server"),
    pytest.param("K", True, [], False, id="no process to stop: never"),
])
def test_pausing_is_the_default_against_a_kubeconfig_with_a_process_to_stop(kubeconfig, flag, pids, want):
    import argparse

    from bench.__main__ import pausing

    assert pausing(argparse.Namespace(kubeconfig=kubeconfig, pause_while_creating=flag), pids) is want


def test_argparse_usage_errors_exit_2():
    r = bench("run", timeout=60)
    assert r.returncode == 2 and "usage: tandem-bench run" in r.stderr


def test_a_missing_kubeconfig_is_a_usage_error(tmp_path):
    r = bench("run", "SchedulingBasic/Smoke", "--kubeconfig", str(tmp_path / "nope"), "--output", str(tmp_path),
              timeout=60)
    assert r.returncode == 2 and "no such file" in r.stderr


@needs_runner
def test_a_run_that_cannot_reach_its_cluster_exits_1_and_says_why(tmp_path):
    from bench.simcluster import write_kubeconfig

    kubeconfig = write_kubeconfig(tmp_path / "down.kubeconfig", "http://127.0.0.1:9")   # nothing listens there
    r = bench("run", "SchedulingBasic/Smoke", "--kubeconfig", str(kubeconfig), "--scheduler-name", "someone",
              "--output", str(tmp_path / "out"), timeout=120)
    assert r.returncode == 1, r.stderr
    assert "run failed" in r.stderr and "SchedulingBasic/Smoke on someone" in r.stderr
    assert not (tmp_path / "out").exists()


@needs_runner
def test_run_with_measure_ceiling_reports_the_fraction(tmp_path):
    r = bench("run", "SchedulingBasic/Smoke", "--start-scheduler", "default", "--measure-ceiling",
              "--output", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "ceiling      baseline binder" in r.stdout and "% of it" in r.stdout
    ceiling = only_json(tmp_path)["metadata"]["ceiling"]
    assert ceiling["scheduler"] == "baseline-binder" and 0 < ceiling["fraction"]


class FakeProc:
    """A Popen that exits ``exits_after`` seconds from now (never when None)."""

    def __init__(self, exits_after: float | None):
        self.deadline = None if exits_after is None else time.monotonic() + exits_after
        self.returncode = None

    def poll(self):
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.returncode = -9
        return self.returncode


async def test_a_scheduler_that_dies_ends_the_run_at_once():
    from bench.__main__ import SchedulerExited, _unless_it_dies

    cancelled = []

    async def forever():
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    with pytest.raises(SchedulerExited, match="exited with code -9"):
        await asyncio.wait_for(_unless_it_dies(FakeProc(0.1), forever(), every=0.02), 5)
    assert cancelled == [True]


async def test_a_run_with_a_living_scheduler_returns_its_result():
    from bench.__main__ import _unless_it_dies

    async def work():
        await asyncio.sleep(0.05)
        return "done"

    assert await _unless_it_dies(FakeProc(None), work(), every=0.01) == "done"
    assert await _unless_it_dies(None, work()) == "done"
