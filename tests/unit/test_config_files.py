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
from scheduler.framework.clock import FakeClock

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
    assert {f.name for f in FILES} >= {"default.yaml", "binpack.yaml", "two-profiles.yaml", "gang.yaml",
                                       "spread.yaml"}


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
                                       "PodTopologySpread": 2, "InterPodAffinity": 2, "NodeResourcesBalancedAllocation": 1,
                                       "ImageLocality": 1, "DynamicResources": 2}
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


def test_pipelines_file_is_the_default_profile_with_node_colocation_first_at_filter_and_post_filter() -> None:
    pipes, default = _load("pipelines.yaml"), load_config(None)
    (p,), (d,) = pipes.profiles, default.profiles
    assert p.plugins["filter"][0] == "NodeColocation" and p.plugins["postFilter"][0] == "NodeColocation"
    assert "NodeColocation" in p.plugins["preFilter"]
    for point, names in d.plugins.items():
        assert [n for n in p.plugins[point] if n != "NodeColocation"] == names, point
    assert p.weights == d.weights
    args = p.plugin_args["NodeColocation"]
    assert (args.mode, args.run_label) == ("pipelineruns", "tekton.dev/pipelineRun")
    bench = load_config(str(CONFIG / "benchmark-pipelines.yaml")).profiles[0]   # the same profile, for tandem-bench
    assert (bench.plugins, bench.weights, bench.plugin_args["NodeColocation"]) == (p.plugins, p.weights, args)


def test_gang_file_is_the_default_profile_with_coscheduling_instead_of_priority_sort() -> None:
    gang, default = _load("gang.yaml"), load_config(None)
    (g,), (d,) = gang.profiles, default.profiles
    assert g.scheduler_name == "tandem-scheduler"
    assert g.plugins["queueSort"] == ["Coscheduling"]              # a profile has exactly one queue sort
    for point in ("preEnqueue", "preFilter", "postFilter", "reserve", "permit"):
        assert "Coscheduling" in g.plugins[point], point
    # everything else is the default profile, in the default order
    for point, names in d.plugins.items():
        assert [n for n in g.plugins[point] if n != "Coscheduling"] == \
            [n for n in names if n not in ("PrioritySort", "GangScheduling")], point
    assert "GangScheduling" not in {n for names in g.plugins.values() for n in names}, "Coscheduling takes its place"
    assert g.weights == d.weights
    args = g.plugin_args["Coscheduling"]
    assert (args.permit_waiting_time_seconds, args.pod_group_backoff_seconds) == (60, 0)   # upstream's defaults
    assert (gang.client_qps, gang.client_burst) == (_load("default.yaml").client_qps, _load("default.yaml").client_burst)


def test_spread_file_spreads_every_workload_hard_over_zones_and_nodes_and_packs_within() -> None:
    cfg, default = _load("spread.yaml"), load_config(None)
    (p,) = cfg.profiles
    assert p.scheduler_name == "tandem-scheduler"
    assert _strategy(cfg, "tandem-scheduler") == "MostAllocated"
    assert "NodeResourcesBalancedAllocation" not in p.plugins["score"]
    assert p.weights["NodeResourcesFit"] > max(w for n, w in p.weights.items() if n != "NodeResourcesFit")
    assert p.plugins["filter"] == default.profiles[0].plugins["filter"]   # every default filter, PodTopologySpread too
    args = p.plugin_args["PodTopologySpread"]
    assert args.defaulting_type == "List"
    assert [(c.topology_key, c.max_skew, c.when_unsatisfiable, c.node_taints_policy)
            for c in args.default_constraints] == [
        ("topology.kubernetes.io/zone", 1, "DoNotSchedule", "Honor"),
        ("kubernetes.io/hostname", 1, "DoNotSchedule", "Honor")]


def test_spread_file_puts_the_next_replica_on_the_fullest_node_without_one_past_a_cordoned_zone() -> None:
    """What its comments promise, on a cluster: three zones hold a replica each, on a1, b1 and c1, so the fourth
    may go to any zone but only to a node without one (a2, c2), and packing picks c2, the fuller. The cordoned
    zone-d (tainted, no replica) drops out of the count; counted, it would hold the minimum at 0 and leave no
    zone for the replica (nodeTaintsPolicy: Honor)."""
    from dataclasses import dataclass

    from scheduler.state.cache import Cache
    from scheduler.framework import CycleState, Handle
    from scheduler.framework.runtime import Framework
    from scheduler.model import parse_node, parse_pod

    @dataclass
    class Selectors:   # handle.spread_selectors: the Service selecting app=web
        version: int = 1

        def default_selector(self, namespace: str, labels: dict[str, str], owners: object) -> object:
            return ({"app": "web"}, []) if labels.get("app") == "web" else None

    def node(name: str, zone: str, taints: list[dict[str, str]] | None = None) -> object:
        return parse_node({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                                  "topology.kubernetes.io/zone": zone}},
                           "spec": {"taints": taints or []},
                           "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})

    def pod(name: str, node_name: str = "", app: str = "web", cpu: str = "500m") -> object:
        requests = {"cpu": cpu, "memory": "1Gi"}
        spec = {"containers": [{"name": "c", "image": "i", "resources": {"requests": requests}}]}
        if node_name:
            spec["nodeName"] = node_name
        return parse_pod({"metadata": {"name": name, "namespace": "default", "uid": name, "labels": {"app": app}},
                          "spec": spec})

    cache = Cache()
    cordoned = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    for name, zone, taints in (("a1", "zone-a", None), ("a2", "zone-a", None), ("b1", "zone-b", None),
                               ("c1", "zone-c", None), ("c2", "zone-c", None), ("d1", "zone-d", cordoned)):
        cache.add_node(node(name, zone, taints))
    for p in (pod("web-1", "a1"), pod("web-2", "b1"), pod("web-3", "c1"), pod("batch", "c2", app="batch", cpu="2")):
        cache.add_pod(p)
    handle = Handle(cache, clock=FakeClock(), spread_selectors=Selectors())  # type: ignore[arg-type]
    fw = Framework(_load("spread.yaml").profiles[0], handle)
    incoming, state = pod("web-4"), CycleState()
    rows, st, diag = fw.run_pre_filter(state, incoming)
    feasible, st = fw.run_filter(state, incoming, rows, diag)
    assert cache.nodes.names_of(feasible) == ["a2", "c2"]
    total, st = fw.run_score(state, incoming, feasible)
    assert cache.nodes.names_of(feasible)[int(total.argmax())] == "c2"


def test_native_gang_file_is_the_default_profile_with_gang_scheduling_and_priority_sort() -> None:
    native, default = _load("gang-native.yaml"), load_config(None)
    (g,), (d,) = native.profiles, default.profiles
    assert g.plugins["queueSort"] == ["PrioritySort"], "upstream's GangScheduling has no queue sort"
    for point in ("preEnqueue", "preFilter", "postFilter", "reserve", "permit"):
        assert "GangScheduling" in g.plugins[point], point
    assert g.plugins == d.plugins, "the default profile has upstream's gang plugins already: the file names them again"
    assert g.weights == d.weights, "PodGroupPodsCount's weight is for a point tandem has not"


def test_consolidation_file_is_the_default_profile_with_consolidation_dry_run_first() -> None:
    cfg, default = _load("consolidation.yaml"), load_config(None)
    (p,), (d,) = cfg.profiles, default.profiles
    for point in ("preFilter", "filter"):
        assert p.plugins[point] == [*d.plugins[point], "Consolidation"], point
    args = p.plugin_args["Consolidation"]
    assert args.defragment and args.compact.enabled and args.spread.enabled
    assert args.dry_run, "a file to copy starts by reporting, not evicting"
    assert args.compact.thresholds == {"cpu": 20, "memory": 20, "pods": 20}
