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


def test_leader_election_flags_parse_as_kube_schedulers() -> None:
    from scheduler.__main__ import parser

    args = parser().parse_args(["--leader-elect=false", "--leader-elect-lease-duration", "1m30s",
                                "--leader-elect-retry-period=500ms", "--leader-elect-resource-namespace", "tandem"])
    assert (args.leader_elect, args.leader_elect_lease_duration, args.leader_elect_retry_period) == (False, 90.0, 0.5)
    assert args.leader_elect_resource_namespace == "tandem" and args.leader_elect_renew_deadline is None
    assert parser().parse_args(["--leader-elect"]).leader_elect is True
    assert parser().parse_args([]).leader_elect is None, "not given: the file decides"


@pytest.mark.parametrize("argv, code, says", [
    pytest.param(["--leader-elect-renew-deadline", "15"], 2, "--leader-elect-renew-deadline",
                 id="a duration without a unit is a usage error naming the flag"),
    pytest.param(["--leader-elect=maybe"], 2, "--leader-elect", id="a boolean that is not one is a usage error"),
    pytest.param(["--leader-elect-renew-deadline", "20s"], 1,
                 "leaderElection.leaseDuration: must be greater than renewDeadline",
                 id="a flag that makes the configuration invalid is refused as the file would be"),
])
def test_bad_leader_election_flags_are_refused(capsys, argv: list[str], code: int, says: str) -> None:
    if code == 2:
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
    else:
        assert main(argv) == code
    assert says in capsys.readouterr().err


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
