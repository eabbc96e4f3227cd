"""The ready-made files in config/ load, and still mean what their comments say.

Users copy these files, so they must never rot: each one is loaded with
:func:`scheduler.config.load_config`, exactly as ``tandem-scheduler
--config`` reads it, and checked for the properties it exists for.
``config/default.yaml`` must stay equivalent to the built-in default: when a
new default plugin is implemented, this test fails until the file lists it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.config import SchedulerConfig, load_config

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "config"


def _load(name: str) -> SchedulerConfig:
    return load_config(str(CONFIG / name))


def _strategy(cfg: SchedulerConfig, profile: str) -> str:
    p = cfg.profile(profile)
    assert p is not None, f"no profile {profile}"
    return p.plugin_args["NodeResourcesFit"].scoring_strategy.type


FILES = sorted(CONFIG.glob("*.y*ml"))


def test_the_ready_made_files_are_there() -> None:
    assert {f.name for f in FILES} >= {"default.yaml", "binpack.yaml", "two-profiles.yaml", "gang.yaml"}


@pytest.mark.parametrize("path", [pytest.param(f, id=f.name) for f in FILES])
def test_every_file_in_config_loads(path: Path) -> None:
    load_config(str(path))        # raises ConfigError naming the field if a file went bad, unknown plugins included


def test_default_file_is_the_builtin_default_written_out() -> None:
    written, builtin = _load("default.yaml"), load_config(None)
    assert [p.scheduler_name for p in written.profiles] == ["tandem-scheduler"]
    (w,), (b,) = written.profiles, builtin.profiles
    assert w.plugins == b.plugins                      # the same plugins, at the same points, in the same order
    assert w.weights == b.weights
    assert w.plugin_args == b.plugin_args
    assert w.percentage_of_nodes_to_score == b.percentage_of_nodes_to_score
    for attr in ("percentage_of_nodes_to_score", "pod_initial_backoff_seconds", "pod_max_backoff_seconds",
                 "parallelism", "client_qps", "client_burst", "client_kubeconfig", "leader_election"):
        assert getattr(written, attr) == getattr(builtin, attr), attr


def test_default_file_scores_with_upstream_default_weights() -> None:
    cfg = _load("default.yaml")
    assert cfg.profiles[0].weights == {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1,
                                       "PodTopologySpread": 2, "NodeResourcesBalancedAllocation": 1,
                                       "ImageLocality": 1}
    assert _strategy(cfg, "tandem-scheduler") == "LeastAllocated"


@pytest.mark.parametrize("name, profile", [
    pytest.param("binpack.yaml", "tandem-scheduler", id="binpack.yaml packs for tandem-scheduler"),
    pytest.param("two-profiles.yaml", "tandem-binpack", id="two-profiles.yaml packs for tandem-binpack"),
])
def test_binpack_profiles_score_most_allocated_and_let_it_decide(name: str, profile: str) -> None:
    cfg = _load(name)
    p = cfg.profile(profile)
    assert p is not None
    assert _strategy(cfg, profile) == "MostAllocated"
    assert "NodeResourcesBalancedAllocation" not in p.plugins["score"]
    assert p.weights["NodeResourcesFit"] > max(w for n, w in p.weights.items() if n != "NodeResourcesFit")
    # packing changes scoring only: every filter of the default profile still runs
    assert p.plugins["filter"] == load_config(None).profiles[0].plugins["filter"]
    resources = {r.name: r.weight for r in p.plugin_args["NodeResourcesFit"].scoring_strategy.resources}
    assert resources == {"cpu": 1, "memory": 1, "nvidia.com/gpu": 3}


def test_two_profiles_serve_two_scheduler_names_from_one_queue() -> None:
    cfg = _load("two-profiles.yaml")
    assert [p.scheduler_name for p in cfg.profiles] == ["tandem-scheduler", "tandem-binpack"]
    default, binpack = cfg.profiles
    assert default.plugins == load_config(None).profiles[0].plugins
    assert _strategy(cfg, "tandem-scheduler") == "LeastAllocated"
    assert default.plugins["queueSort"] == binpack.plugins["queueSort"] == ["PrioritySort"]


def test_benchmark_file_is_the_default_profile_at_scheduler_perf_client_limits() -> None:
    bench = load_config(str(CONFIG / "benchmark.yaml"))
    default = load_config(None)
    assert (bench.client_qps, bench.client_burst) == (5000, 5000)
    assert bench.profiles[0].plugins == default.profiles[0].plugins
    assert bench.profiles[0].weights == default.profiles[0].weights


def test_gang_file_is_the_default_profile_with_coscheduling_instead_of_priority_sort() -> None:
    gang, default = _load("gang.yaml"), load_config(None)
    (g,), (d,) = gang.profiles, default.profiles
    assert g.scheduler_name == "tandem-scheduler"
    assert g.plugins["queueSort"] == ["Coscheduling"]              # a profile has exactly one queue sort
    for point in ("preEnqueue", "preFilter", "postFilter", "reserve", "permit"):
        assert "Coscheduling" in g.plugins[point], point
    # everything else is the default profile, in the default order
    for point, names in d.plugins.items():
        assert [n for n in g.plugins[point] if n != "Coscheduling"] == [n for n in names if n != "PrioritySort"], point
    assert g.weights == d.weights
    args = g.plugin_args["Coscheduling"]
    assert (args.permit_waiting_time_seconds, args.pod_group_backoff_seconds) == (60, 0)   # upstream's defaults
    assert (gang.client_qps, gang.client_burst) == (_load("default.yaml").client_qps, _load("default.yaml").client_burst)

