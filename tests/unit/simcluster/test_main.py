"""``python -m bench.simcluster``'s flags as they reach AgentConfig and VolumeConfig (the running process: tests/simcluster/test_cli.py)."""

from __future__ import annotations

import pytest

from bench.simcluster.__main__ import parser, volume_config
from bench.simcluster.agent import AgentConfig
from bench.simcluster.volumes import VolumeConfig


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
    ([], VolumeConfig()),
    (["--csi-attach-limit", "16"], VolumeConfig(attach_limit=16)),
    (["--no-volume-controllers"], None),
], ids=["on, with no attach limit, without flags", "an attach limit for every CSINode", "switched off"])
def test_volume_controller_flags(argv, want):
    assert volume_config(parser().parse_args(argv)) == want
