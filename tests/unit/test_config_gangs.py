"""scheduler/config.py and 1.36's gang plugins: configurations written for kube-scheduler's native gangs load.

kube-scheduler 1.36 with GenericWorkload, GangScheduling and TopologyAwareWorkloadScheduling on adds
GangScheduling, TopologyPlacementGenerator and PodGroupPodsCount (weight 1) to its default multiPoint
set and writes empty placementGenerate / placementScore points (``--write-config-to``; the test that
runs the binary is below, skipped without it).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.config import API_VERSION, KIND, load_config, parse_config
from scheduler.framework.registry import ConfigError

GATES = "GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true"


def one(profile: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, "profiles": [{"schedulerName": "s", **profile}]}


UPSTREAM_GANG_PLUGINS = {"multiPoint": {"enabled": [{"name": "GangScheduling", "weight": 0},
                                                    {"name": "TopologyPlacementGenerator", "weight": 0},
                                                    {"name": "PodGroupPodsCount", "weight": 1}]},
                         "placementGenerate": {}, "placementScore": {}}


def test_the_default_profile_schedules_gangs_with_gang_scheduling_and_keeps_priority_sort() -> None:
    p = load_config(None).profiles[0]
    assert p.plugins["permit"] == ["GangScheduling"]
    assert p.plugins["preEnqueue"] == ["SchedulingGates", "DynamicResources", "DefaultPreemption", "GangScheduling"]
    assert p.plugins["postFilter"][-2:] == ["DefaultPreemption", "GangScheduling"], "preemption is asked first"
    assert p.plugins["queueSort"] == ["PrioritySort"]


@pytest.mark.parametrize("plugins", [
    pytest.param({"multiPoint": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "PrioritySort"}]}},
                 id="multiPoint, as config/gang.yaml and scheduler-plugins' docs write it"),
    pytest.param({"queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
                  "preEnqueue": {"enabled": [{"name": "Coscheduling"}]},
                  "preFilter": {"enabled": [{"name": "Coscheduling"}]},
                  "postFilter": {"enabled": [{"name": "Coscheduling"}]},
                  "permit": {"enabled": [{"name": "Coscheduling"}]},
                  "reserve": {"enabled": [{"name": "Coscheduling"}]}},
                 id="point by point, as scheduler-plugins' older examples write it"),
])
def test_a_profile_that_enables_coscheduling_gets_it_in_place_of_gang_scheduling(plugins: dict[str, Any]) -> None:
    p = parse_config(one({"plugins": plugins})).profiles[0]
    assert p.plugins["permit"] == ["Coscheduling"]
    assert "GangScheduling" not in {n for names in p.plugins.values() for n in names}
    assert p.plugins["queueSort"] == ["Coscheduling"]


def test_a_profile_that_names_gang_scheduling_again_merges_it_in_place() -> None:
    default = load_config(None).profiles[0]
    p = parse_config(one({"plugins": UPSTREAM_GANG_PLUGINS})).profiles[0]
    assert p.plugins == default.plugins, "the same plugins at the same points, in the same order"
    assert [n for n, _ in p.plugin_sets["multiPoint"].enabled].count("GangScheduling") == 1


def test_a_profile_can_disable_gang_scheduling() -> None:
    p = parse_config(one({"plugins": {"multiPoint": {"disabled": [{"name": "GangScheduling"}]}}})).profiles[0]
    assert not {n for names in p.plugins.values() for n in names} & {"GangScheduling", "Coscheduling"}


def test_upstreams_gang_plugins_load_and_gang_scheduling_is_the_gang_mechanism() -> None:
    p = parse_config(one({"plugins": UPSTREAM_GANG_PLUGINS})).profiles[0]
    assert p.plugins["permit"] == ["GangScheduling"] and "GangScheduling" in p.plugins["preEnqueue"]
    assert p.plugins["queueSort"] == ["PrioritySort"], "GangScheduling has no queue sort, as upstream's"
    everywhere = {n for names in p.plugins.values() for n in names}
    assert not everywhere & {"TopologyPlacementGenerator", "PodGroupPodsCount"}, "accepted, and no extension point"


@pytest.mark.parametrize("plugins, error", [
    pytest.param({"placementGenerate": {"enabled": [{"name": "NodeAffinity"}]}},
                 "profiles[0].plugins.placementGenerate.enabled[0].name: plugin 'NodeAffinity' does not implement "
                 "placementGenerate", id="only upstream's generator at placementGenerate"),
    pytest.param({"placementScore": {"enabled": [{"name": "Nope"}]}},
                 "profiles[0].plugins.placementScore.enabled[0].name: unknown plugin 'Nope'",
                 id="an unknown plugin at placementScore"),
    pytest.param({"multiPoint": {"enabled": [{"name": "GangScheduling"}, {"name": "Coscheduling"}]},
                  "queueSort": {"disabled": [{"name": "*"}], "enabled": [{"name": "PrioritySort"}]}},
                 "profiles[0].plugins: one gang plugin per profile, got GangScheduling, Coscheduling",
                 id="two gang plugins in one profile"),
])
def test_gang_plugin_configuration_errors(plugins: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(one({"plugins": plugins}))
    assert str(exc.value) == f"<config>: {error}" or str(exc.value).startswith(f"<config>: {error}"), str(exc.value)


def test_the_config_kube_scheduler_writes_with_the_gang_gates_loads(tmp_path: Path) -> None:
    binary = Path(os.environ.get("KUBEBUILDER_ASSETS", "")) / "kube-scheduler"
    if not os.environ.get("KUBEBUILDER_ASSETS") or not binary.is_file():
        pytest.skip("KUBEBUILDER_ASSETS has no kube-scheduler binary (../shared/realk8s/up.sh --assets prints one)")
    cfg, out = tmp_path / "in.yaml", tmp_path / "out.yaml"
    cfg.write_text(f"apiVersion: {API_VERSION}\nkind: {KIND}\nleaderElection: {{leaderElect: false}}\n")
    # --secure-port=0: no port is bound (another process may hold 10259)
    subprocess.run([str(binary), f"--config={cfg}", "--master=https://127.0.0.1:1", "--secure-port=0",
                    f"--feature-gates={GATES}", f"--write-config-to={out}"], check=True, capture_output=True, timeout=60)
    written = yaml.safe_load(out.read_text())
    (profile,) = written["profiles"]
    names = [e["name"] for e in profile["plugins"]["multiPoint"]["enabled"]]
    assert names[-3:] == ["GangScheduling", "TopologyPlacementGenerator", "PodGroupPodsCount"]
    # its gang entries as written (weights included) and its placement points; the rest of its default set
    # is tandem's default set already (tests/unit/test_config.py), but for plugins tandem lacks (NodeVolumeLimits)
    plugins = {"multiPoint": {"enabled": profile["plugins"]["multiPoint"]["enabled"][-3:]},
               **{k: profile["plugins"][k] for k in ("placementGenerate", "placementScore")}}
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump(one({"plugins": plugins})))
    p = load_config(str(mine)).profiles[0]
    assert p.plugins["permit"] == ["GangScheduling"]
    assert p.plugins == load_config(None).profiles[0].plugins, "tandem's default is kube-scheduler's with the gates"
