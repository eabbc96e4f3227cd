"""``python -m bench.simcluster``'s flags as they reach AgentConfig (the running process: tests/simcluster/test_cli.py)."""

from __future__ import annotations

import pytest

from bench.simcluster.__main__ import parser
from bench.simcluster.agent import AgentConfig


@pytest.mark.parametrize("argv,want", [
    ([], AgentConfig().termination_delay),
    (["--termination-delay", "1.5"], 1.5),
    (["--termination-delay", "0"], 0.0),
    (["--termination-delay", "grace"], None),
], ids=["the agent's default without the flag", "seconds", "zero: at once", "grace: the whole grace period"])
def test_termination_delay_flag(argv, want):
    assert parser().parse_args(argv).termination_delay == want


@pytest.mark.parametrize("value", ["soon", "-1", "nan"],
                         ids=["not a number", "negative", "not a number either"])
def test_termination_delay_flag_refuses_what_is_not_a_duration(value, capsys):
    with pytest.raises(SystemExit) as exc:
        parser().parse_args(["--termination-delay", value])
    assert exc.value.code == 2
    assert "--termination-delay" in capsys.readouterr().err


@pytest.mark.parametrize("argv,want", [
    ([], False),
    (["--runtime-config", "scheduling.k8s.io/v1alpha2=true"], True),
    (["--runtime-config", "scheduling.k8s.io/v1alpha2"], True),
    (["--runtime-config", "scheduling.k8s.io/v1alpha2=false"], False),
], ids=["off without the flag, as a real server", "on", "on: a bare group/version means true", "off"])
def test_runtime_config_enables_the_native_gang_api(argv, want):
    assert parser().parse_args(argv).runtime_config is want


def test_runtime_config_refuses_what_is_not_simulated(capsys):
    with pytest.raises(SystemExit) as exc:
        parser().parse_args(["--runtime-config", "resource.k8s.io/v1beta1=true"])
    assert exc.value.code == 2
    assert "only scheduling.k8s.io/v1alpha2=true|false is simulated" in capsys.readouterr().err
