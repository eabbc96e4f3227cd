"""tandem-scheduler as a user runs it: bad configs refused in one line, a real process that schedules and stops."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import aiohttp
import orjson
import pytest

from bench.simcluster import SimCluster
from scheduler.__main__ import main

REPO = Path(__file__).resolve().parents[2]

HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


@pytest.mark.parametrize("body, field", [
    pytest.param("profiles:\n- schedulerName: a\n  pluginz: {}\n", "pluginz", id="an unknown field is named"),
    pytest.param("profiles:\n- schedulerName: a\n  plugins:\n    score:\n      enabled:\n      - name: NoSuchPlugin\n",
                 "NoSuchPlugin", id="an unknown plugin is named"),
    pytest.param("profiles:\n- schedulerName: a\n  plugins:\n    score:\n      enabled:\n"
                 "      - name: NodeResourcesFit\n        weight: 1000\n", "weight", id="a weight out of range is named"),
    pytest.param("profiles:\n- schedulerName: a\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n"
                 "      scoringStrategy:\n        type: Sideways\n", "scoringStrategy", id="bad plugin args are named"),
    pytest.param("percentageOfNodesToScore: 140\n", "percentageOfNodesToScore", id="a value out of range is named"),
])
def test_a_bad_config_is_one_line_naming_the_field_and_exit_code_1(tmp_path, capsys, body, field) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(HEADER + body)
    assert main(["--config", str(cfg)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert field in err, err


def test_a_missing_config_file_is_exit_code_1(tmp_path, capsys) -> None:
    assert main(["--config", str(tmp_path / "nope.yaml")]) == 1
    assert "nope.yaml" in capsys.readouterr().err


@pytest.mark.parametrize("flag, value", [("--podgroup-status-qps", "0"), ("--podgroup-status-burst", "0")])
def test_a_podgroup_status_budget_that_could_never_write_is_a_usage_error(capsys, flag, value) -> None:
    with pytest.raises(SystemExit) as exc:
        main([flag, value])
    assert exc.value.code == 2
    assert flag in capsys.readouterr().err


async def test_the_process_schedules_a_pod_and_stops_cleanly_on_sigterm(tmp_path) -> None:
    kubeconfig = tmp_path / "sim.kubeconfig"
    async with SimCluster(nodes=2, kubeconfig=kubeconfig) as cluster:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "scheduler", "--kubeconfig", str(kubeconfig), "--port", "0",
            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        try:
            pod = {"metadata": {"name": "p"}, "spec": {"schedulerName": "tandem-scheduler",
                                                        "containers": [{"name": "c", "image": "x"}]}}
            async with aiohttp.ClientSession() as s:
                async with s.post(f"{cluster.url}/api/v1/namespaces/default/pods", data=orjson.dumps(pod)) as r:
                    assert r.status == 201
                node = ""
                for _ in range(200):
                    async with s.get(f"{cluster.url}/api/v1/namespaces/default/pods/p") as r:
                        node = orjson.loads(await r.read())["spec"].get("nodeName", "")
                    if node:
                        break
                    await asyncio.sleep(0.05)
            assert node.startswith("node-")
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), 10) == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
