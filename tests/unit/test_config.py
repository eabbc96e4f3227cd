"""scheduler/config.py: KubeSchedulerConfiguration v1 -> profiles, as kube-scheduler reads it."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.config import (
    API_VERSION, DEFAULT_PLUGINS, DEFAULT_SCHEDULER_NAME, KIND, TANDEM_DEFAULT_PLUGINS, UPSTREAM_DEFAULT_PLUGINS,
    UPSTREAM_GANG_PLUGINS, LeaderElection, load_config, parse_config, with_leader_election,
)
from scheduler.framework import ConfigError
from scheduler.framework.interface import CONFIG_POINTS, check_extension_points
from scheduler.framework.registry import REGISTRY, load_builtin_plugins

load_builtin_plugins()

# the gates with which kube-scheduler 1.36 adds its gang plugins to the default set
GANG_GATES = "GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true"


# ---------------------------------------------------------------------------- test plugins

@dataclass(frozen=True, slots=True)
class ThresholdArgs:
    threshold: int = 1
    mode: str = "a"

    def validate(self, path: str) -> None:
        if self.threshold < 0:
            raise ConfigError(f"{path}.threshold: must be >= 0, got {self.threshold}")


class ArgsFilter:
    """PreFilter + Filter, with args."""

    NAME = "TestArgsFilter"
    EXTENSION_POINTS = frozenset({"PreFilter", "Filter"})
    Args = ThresholdArgs

    def __init__(self, args: ThresholdArgs, handle: Any) -> None:
        self.args = args

    def pre_filter(self, state, pod, nodes): ...

    def filter(self, state, pod, nodes, rows): ...


class FilterScore:
    NAME = "TestFilterScore"
    EXTENSION_POINTS = frozenset({"Filter", "Score"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None: ...

    def filter(self, state, pod, nodes, rows): ...

    def score(self, state, pod, nodes, rows): ...


class PlainFilter:
    NAME = "TestFilter"
    EXTENSION_POINTS = frozenset({"Filter"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None: ...

    def filter(self, state, pod, nodes, rows): ...


class PlainScore:
    NAME = "TestScore"
    EXTENSION_POINTS = frozenset({"Score"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None: ...

    def score(self, state, pod, nodes, rows): ...


@dataclass(frozen=True, slots=True)
class SortArgs:
    reverse: bool = False


class OtherSort:
    NAME = "TestSort"
    EXTENSION_POINTS = frozenset({"QueueSort"})
    Args = SortArgs

    def __init__(self, args: SortArgs, handle: Any) -> None: ...

    def sort_key(self, info): ...


class OtherBinder:
    NAME = "TestBinder"
    EXTENSION_POINTS = frozenset({"Bind"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None: ...

    async def bind(self, state, pod, node_name): ...


TEST_PLUGINS = (ArgsFilter, FilterScore, PlainFilter, PlainScore, OtherSort, OtherBinder)


@pytest.fixture(autouse=True)
def test_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    for cls in TEST_PLUGINS:
        check_extension_points(cls)   # as register() would
        monkeypatch.setitem(REGISTRY, cls.NAME, cls)


def cfg(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, **fields}


def one(profile: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    return cfg(profiles=[profile or {}], **fields)


# A profile with no default plugins: only what a case enables, plus a queue sort and a binder.
BARE = {"disabled": [{"name": "*"}], "enabled": [{"name": "PrioritySort"}, {"name": "DefaultBinder"}]}


def bare(*enabled: dict[str, Any], **points: Any) -> dict[str, Any]:
    return {"plugins": {"multiPoint": {"disabled": BARE["disabled"], "enabled": BARE["enabled"] + list(enabled)},
                        **points}}


def implements(name: str, point: str) -> bool:
    return CONFIG_POINTS[point] in REGISTRY[name].EXTENSION_POINTS


# ---------------------------------------------------------------------------- defaults

def test_no_file_gives_one_profile_named_tandem_scheduler() -> None:
    c = load_config(None)
    assert [p.scheduler_name for p in c.profiles] == [DEFAULT_SCHEDULER_NAME]
    assert (c.pod_initial_backoff_seconds, c.pod_max_backoff_seconds, c.parallelism) == (1.0, 10.0, 16)
    assert (c.client_qps, c.client_burst) == (50.0, 100)
    assert c.percentage_of_nodes_to_score is None
    assert c.leader_election == LeaderElection(True, 15.0, 10.0, 2.0, "leases", "tandem-scheduler", "kube-system")


def test_default_profile_has_the_upstream_plugins_tandem_registers_in_upstream_order() -> None:
    p = load_config(None).profiles[0]
    registered = [n for n, _ in DEFAULT_PLUGINS if n in REGISTRY]
    for point in CONFIG_POINTS:
        assert p.plugins[point] == [n for n in registered if implements(n, point)], point
    assert p.plugins["queueSort"] == ["PrioritySort"]
    assert p.plugins["preEnqueue"][0] == "SchedulingGates"
    assert p.plugins["bind"] == ["DefaultBinder"]
    assert [n for n, _ in DEFAULT_PLUGINS if n not in REGISTRY] == [], "every upstream default is here"
    assert p.plugins["permit"] == ["GangScheduling"], "gangs of both PodGroup APIs are scheduled by default"
    pre_filter = p.plugins["preFilter"]
    assert pre_filter[pre_filter.index("NodeResourcesFit") + 1:][:4] == ["VolumeRestrictions", "NodeVolumeLimits",
                                                                         "VolumeBinding", "VolumeZone"]
    assert p.plugins["filter"].index("NodeVolumeLimits") == p.plugins["filter"].index("VolumeRestrictions") + 1
    assert p.plugins["filter"].index("VolumeZone") == p.plugins["filter"].index("VolumeBinding") + 1


def test_the_upstream_default_plugins_are_what_kube_scheduler_1_36_writes(tmp_path: Path) -> None:
    """kube-scheduler --write-config-to: its defaulted multiPoint list for a profile that sets no plugins, without
    its gang gates and with them (tandem's default set is the latter, then tandem's own plugins)."""
    assert DEFAULT_PLUGINS == UPSTREAM_DEFAULT_PLUGINS + UPSTREAM_GANG_PLUGINS + TANDEM_DEFAULT_PLUGINS
    binary = Path(os.environ.get("KUBEBUILDER_ASSETS", "")) / "kube-scheduler"
    if not os.environ.get("KUBEBUILDER_ASSETS") or not binary.is_file():
        pytest.skip("KUBEBUILDER_ASSETS has no kube-scheduler binary (../shared/realk8s/up.sh --assets prints one)")
    cfg = tmp_path / "in.yaml"
    cfg.write_text(f"apiVersion: {API_VERSION}\nkind: {KIND}\nleaderElection: {{leaderElect: false}}\n")
    with_gates = UPSTREAM_DEFAULT_PLUGINS + UPSTREAM_GANG_PLUGINS
    for gates, expected in (("", UPSTREAM_DEFAULT_PLUGINS), (GANG_GATES, with_gates)):
        out = tmp_path / f"out{len(gates)}.yaml"
        # --master only satisfies the flag check; writing the configuration contacts no server, and
        # --secure-port=0 binds no port (another process may hold 10259)
        flags = [f"--feature-gates={gates}"] if gates else []
        subprocess.run([str(binary), f"--config={cfg}", "--master=https://127.0.0.1:1", "--secure-port=0", *flags,
                        f"--write-config-to={out}"], check=True, capture_output=True, timeout=60)
        (profile,) = yaml.safe_load(out.read_text())["profiles"]
        written = tuple((e["name"], e.get("weight") or None) for e in profile["plugins"]["multiPoint"]["enabled"])
        assert written == expected, gates


def test_default_profile_score_weights_are_upstreams() -> None:
    p = load_config(None).profiles[0]
    expected = {n: w or 1 for n, w in DEFAULT_PLUGINS if n in REGISTRY and implements(n, "score")}
    assert p.weights == expected
    for name, weight in (("TaintToleration", 3), ("NodeAffinity", 2), ("NodeResourcesFit", 1), ("InterPodAffinity", 2),
                         ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1)):
        if name in p.weights:
            assert p.weights[name] == weight


def test_profile_keeps_the_defaulted_plugin_sets_before_expansion() -> None:
    p = parse_config(one({"plugins": {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "TestScore"}]}}}))
    sets = p.profiles[0].plugin_sets
    assert sets["score"].enabled == (("TestScore", None),) and sets["score"].disabled == ("*",)
    assert sets["multiPoint"].enabled[:2] == (("SchedulingGates", None), ("PrioritySort", None))
    assert sets["filter"].enabled == ()


def test_default_profile_has_args_for_every_enabled_plugin() -> None:
    p = load_config(None).profiles[0]
    enabled = {n for names in p.plugins.values() for n in names}
    assert enabled <= set(p.plugin_args)


# ---------------------------------------------------------------------------- plugin sets

PLUGIN_CASES = [
    pytest.param(
        bare({"name": "TestFilterScore", "weight": 4}),
        {"filter": ["TestFilterScore"], "score": ["TestFilterScore"], "queueSort": ["PrioritySort"],
         "bind": ["DefaultBinder"], "preFilter": []},
        {"TestFilterScore": 4},
        id="a multiPoint plugin is enabled at every extension point it implements, with its weight"),
    pytest.param(
        bare({"name": "TestArgsFilter"}, {"name": "TestFilterScore"},
             filter={"enabled": [{"name": "TestFilter"}, {"name": "TestFilterScore"}]}),
        {"filter": ["TestFilterScore", "TestArgsFilter", "TestFilter"], "preFilter": ["TestArgsFilter"]},
        {"TestFilterScore": 1},
        id="a point's own entry overrides multiPoint and goes first, then multiPoint-only, then the rest"),
    pytest.param(
        bare({"name": "TestFilterScore", "weight": 2}, score={"enabled": [{"name": "TestFilterScore", "weight": 5}]}),
        {"score": ["TestFilterScore"], "filter": ["TestFilterScore"]},
        {"TestFilterScore": 5},
        id="a weight at the score point wins over the multiPoint weight"),
    pytest.param(
        bare({"name": "TestFilterScore"}, score={"disabled": [{"name": "TestFilterScore"}]}),
        {"score": [], "filter": ["TestFilterScore"]},
        {},
        id="a multiPoint plugin disabled at one point stays enabled at the others"),
    pytest.param(
        bare({"name": "TestFilterScore"}, filter={"disabled": [{"name": "*"}], "enabled": [{"name": "TestFilter"}]}),
        {"filter": ["TestFilter"], "score": ["TestFilterScore"]},
        {"TestFilterScore": 1},
        id="disabling star at a point turns off multiPoint expansion there only"),
    pytest.param(
        bare({"name": "TestScore", "weight": 0}),
        {"score": ["TestScore"]},
        {"TestScore": 1},
        id="weight zero means unset and becomes one as upstream"),
    pytest.param(
        {"plugins": {"preEnqueue": {"disabled": [{"name": "SchedulingGates"}]}}},
        {"preEnqueue": ["DynamicResources", "DefaultPreemption", "GangScheduling"], "queueSort": ["PrioritySort"]},
        None,
        id="disabling a default plugin at its only point removes it"),
    pytest.param(
        {"plugins": {"bind": {"disabled": [{"name": "DefaultBinder"}], "enabled": [{"name": "TestBinder"}]}}},
        {"bind": ["TestBinder"]},
        None,
        id="a default binder can be replaced"),
    pytest.param(
        {"plugins": {"bind": {"enabled": [{"name": "TestBinder"}]}}},
        {"bind": ["DefaultBinder", "TestBinder"]},
        None,
        id="a plugin enabled only at a point runs after the multiPoint plugins there"),
    pytest.param(
        {"plugins": {"multiPoint": {"enabled": [{"name": "TestFilterScore", "weight": 7}],
                                    "disabled": [{"name": "NodeVolumeLimits"}, {"name": "PodTopologySpread"}]}}},
        {"score": None},
        {"TestFilterScore": 7},
        id="disabling defaults is accepted and extra multiPoint plugins are appended"),
    pytest.param(
        {"plugins": {"multiPoint": {"enabled": [{"name": "DefaultBinder"}, {"name": "TestBinder"}]}}},
        {"bind": ["DefaultBinder", "TestBinder"]},
        None,
        id="re-enabling a default in multiPoint keeps its default position"),
]


@pytest.mark.parametrize("profile, plugins, weights", PLUGIN_CASES)
def test_plugin_sets(profile: dict[str, Any], plugins: dict[str, list[str] | None],
                     weights: dict[str, int] | None) -> None:
    p = parse_config(one(profile)).profiles[0]
    for point, names in plugins.items():
        if names is not None:
            assert p.plugins[point] == names, point
    if weights is not None:
        for name, w in weights.items():
            assert p.weights[name] == w
        assert set(p.weights) >= set(weights)
        if profile["plugins"].get("multiPoint", {}).get("disabled") == BARE["disabled"]:
            assert p.weights == weights


def test_multi_point_extra_plugin_lands_after_the_defaults() -> None:
    p = parse_config(one({"plugins": {"multiPoint": {"enabled": [{"name": "TestFilterScore", "weight": 7}]}}}))
    prof = p.profiles[0]
    assert prof.plugins["score"][-1] == "TestFilterScore"
    assert prof.plugins["filter"][-1] == "TestFilterScore"


def test_two_profiles_share_defaults_but_not_plugins() -> None:
    c = parse_config(cfg(profiles=[
        {"schedulerName": "a"},
        {"schedulerName": "b", "percentageOfNodesToScore": 30,
         "plugins": {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "TestScore", "weight": 4}]}}},
    ], percentageOfNodesToScore=50))
    a, b = c.profiles
    assert (a.scheduler_name, b.scheduler_name) == ("a", "b")
    assert b.plugins["score"] == ["TestScore"] and b.weights == {"TestScore": 4}
    assert "TestScore" not in a.plugins["score"]
    assert a.plugins["queueSort"] == b.plugins["queueSort"] == ["PrioritySort"]
    assert (c.percentage_of_nodes_to_score, a.percentage_of_nodes_to_score, b.percentage_of_nodes_to_score) == \
        (50, None, 30)
    assert c.profile("b") is b and c.profile("c") is None


def test_plugin_config_args_are_parsed_and_defaulted() -> None:
    c = parse_config(one({
        "plugins": {"filter": {"enabled": [{"name": "TestArgsFilter"}]}},
        "pluginConfig": [{"name": "TestArgsFilter", "args": {"apiVersion": API_VERSION, "kind": "TestArgsFilterArgs",
                                                             "threshold": 7}}],
    }))
    assert c.profiles[0].plugin_args["TestArgsFilter"] == ThresholdArgs(threshold=7, mode="a")


def test_enabled_plugin_without_plugin_config_gets_default_args() -> None:
    p = parse_config(one(bare({"name": "TestArgsFilter"}))).profiles[0]
    assert p.plugin_args["TestArgsFilter"] == ThresholdArgs()


def test_global_fields_are_read() -> None:
    c = parse_config(cfg(
        parallelism=4, percentageOfNodesToScore=0, podInitialBackoffSeconds=0.5, podMaxBackoffSeconds=3,
        clientConnection={"qps": 200, "burst": 400, "kubeconfig": "/etc/kubeconfig", "contentType": "application/json"},
        leaderElection={"leaderElect": True, "leaseDuration": "1m30s", "renewDeadline": "20s",
                        "retryPeriod": "500ms", "resourceName": "lock", "resourceNamespace": "tandem"},
        enableProfiling=False, enableContentionProfiling=False, delayCacheUntilActive=True, extenders=[],
    ))
    assert (c.parallelism, c.percentage_of_nodes_to_score) == (4, 0)
    assert (c.pod_initial_backoff_seconds, c.pod_max_backoff_seconds) == (0.5, 3.0)
    assert (c.client_qps, c.client_burst, c.client_kubeconfig) == (200.0, 400, "/etc/kubeconfig")
    assert c.leader_election == LeaderElection(True, 90.0, 20.0, 0.5, "leases", "lock", "tandem")


def test_leader_election_off_skips_its_validation() -> None:
    c = parse_config(cfg(leaderElection={"leaderElect": False, "leaseDuration": "1s", "renewDeadline": "5s"}))
    assert c.leader_election.leader_elect is False


def test_leader_election_overrides_replace_only_the_fields_given_and_are_validated_again() -> None:
    c = parse_config(cfg(leaderElection={"resourceNamespace": "tandem", "leaseDuration": "20s"}), "sched.yaml")
    o = with_leader_election(c, retry_period=0.5, resource_name="other")
    assert o.leader_election == LeaderElection(True, 20.0, 10.0, 0.5, "leases", "other", "tandem")
    assert o.profiles == c.profiles and c.leader_election.retry_period == 2.0
    assert with_leader_election(c, leader_elect=False).leader_election.leader_elect is False
    with pytest.raises(ConfigError, match="leaderElection.leaseDuration: must be greater than renewDeadline"):
        with_leader_election(c, renew_deadline=30.0)


# ---------------------------------------------------------------------------- errors

ERROR_CASES = [
    pytest.param({"apiVersion": "kubescheduler.config.k8s.io/v1beta3", "kind": KIND},
                 "apiVersion: 'kubescheduler.config.k8s.io/v1beta3' is not supported",
                 id="an older apiVersion is refused"),
    pytest.param({"kind": KIND}, "apiVersion: required", id="a missing apiVersion is refused"),
    pytest.param({"apiVersion": API_VERSION, "kind": "KubeletConfiguration"},
                 "kind: 'KubeletConfiguration' is not supported", id="another kind is refused"),
    pytest.param(cfg(featureGates={"Foo": True}), "featureGates: unknown field",
                 id="featureGates is a flag, not a config field"),
    pytest.param(one({"pluginz": {}}), "profiles[0].pluginz: unknown field", id="an unknown profile field is named"),
    pytest.param(one({"plugins": {"sort": {}}}), "profiles[0].plugins.sort: unknown field",
                 id="an unknown extension point is named"),
    pytest.param(one({"plugins": {"score": {"enabled": [{"name": "TestScore", "wieght": 2}]}}}),
                 "profiles[0].plugins.score.enabled[0].wieght: unknown field", id="a misspelled weight is named"),
    pytest.param(cfg(leaderElection={"leaderElekt": True}), "leaderElection.leaderElekt: unknown field",
                 id="an unknown leaderElection field is named"),
    pytest.param(one({"plugins": {"score": {"enabled": [{"name": "NoSuchPlugin"}]}}}),
                 "profiles[0].plugins.score.enabled[0].name: unknown plugin 'NoSuchPlugin'",
                 id="an unknown plugin is refused"),
    pytest.param(one({"plugins": {"filter": {"enabled": [{"name": "EBSLimits"}]}}}),
                 "unknown plugin 'EBSLimits' (removed in kubescheduler.config.k8s.io/v1",
                 id="a plugin removed from v1 is refused"),
    pytest.param(one({"plugins": {"score": {"enabled": [{"name": "PrioritySort"}]}}}),
                 "profiles[0].plugins.score.enabled[0].name: plugin 'PrioritySort' does not implement score",
                 id="a plugin enabled at a point it does not implement is refused"),
    pytest.param(one({"plugins": {"filter": {"enabled": [{"name": "TestFilter"}, {"name": "TestFilter"}]}}}),
                 "profiles[0].plugins.filter.enabled[1].name: plugin 'TestFilter' is already enabled at filter",
                 id="a plugin enabled twice at a point is refused"),
    pytest.param(one({"plugins": {"multiPoint": {"enabled": [{"name": "TestFilter"}, {"name": "TestFilter"}]}}}),
                 "profiles[0].plugins.multiPoint.enabled[1].name: plugin 'TestFilter' is already enabled",
                 id="a plugin enabled twice through multiPoint is refused"),
    pytest.param(one({"plugins": {"score": {"enabled": [{"name": "TestScore", "weight": 101}]}}}),
                 "profiles[0].plugins.score.enabled[0].weight: 101 is out of range", id="a weight above 100 is refused"),
    pytest.param(one({"plugins": {"multiPoint": {"enabled": [{"name": "TestScore", "weight": -1}]}}}),
                 "profiles[0].plugins.multiPoint.enabled[0].weight: -1 is out of range",
                 id="a negative weight is refused"),
    pytest.param(one({"plugins": {"score": {"enabled": [{"name": "TestScore", "weight": "high"}]}}}),
                 "profiles[0].plugins.score.enabled[0].weight: expected an integer", id="a weight must be an integer"),
    pytest.param(one({"plugins": {"score": {"enabled": [{"weight": 1}]}}}),
                 "profiles[0].plugins.score.enabled[0].name: Required value", id="a plugin needs a name"),
    pytest.param(cfg(profiles=[{"schedulerName": "a"}, {"schedulerName": "a"}]),
                 "profiles[1].schedulerName: duplicate value 'a' (also profiles[0].schedulerName)",
                 id="two profiles with one name are refused"),
    pytest.param(cfg(profiles=[{"schedulerName": "a"}, {}]), "profiles[1].schedulerName: Required value",
                 id="with several profiles each needs a name"),
    pytest.param(one({"schedulerName": ""}), "profiles[0].schedulerName: Required value",
                 id="an empty scheduler name is refused"),
    pytest.param(one({"plugins": {"queueSort": {"enabled": [{"name": "TestSort"}]}}}),
                 "profiles[0].plugins.queueSort: exactly one queue sort plugin must be enabled, got PrioritySort, "
                 "TestSort; disable the ones you do not want", id="two queue sort plugins are refused"),
    pytest.param(one({"plugins": {"queueSort": {"disabled": [{"name": "*"}]}}}),
                 "profiles[0].plugins.queueSort: exactly one queue sort plugin must be enabled, got none",
                 id="no queue sort plugin is refused"),
    pytest.param(cfg(profiles=[{"schedulerName": "a"}, {"schedulerName": "b", "plugins": {"queueSort": {
        "disabled": [{"name": "*"}], "enabled": [{"name": "TestSort"}]}}}]),
        "profiles[1].plugins.queueSort: must be the same for all profiles (profiles[0] uses PrioritySort, "
        "this one TestSort)", id="profiles sorting the shared queue differently are refused"),
    pytest.param(cfg(profiles=[
        {"schedulerName": n, "plugins": {"queueSort": {"disabled": [{"name": "*"}], "enabled": [{"name": "TestSort"}]}},
         "pluginConfig": [{"name": "TestSort", "args": {"reverse": rev}}]} for n, rev in (("a", False), ("b", True))]),
        "profiles[1].pluginConfig: the args of queue sort plugin TestSort must be the same for all profiles",
        id="profiles giving the queue sort plugin different args are refused"),
    pytest.param(one({"plugins": {"bind": {"disabled": [{"name": "*"}]}}}),
                 "profiles[0].plugins.bind: at least one bind plugin is needed", id="a profile without a binder is refused"),
    pytest.param(cfg(percentageOfNodesToScore=101), "percentageOfNodesToScore: 101 is not in the valid range [0-100]",
                 id="percentageOfNodesToScore above 100 is refused"),
    pytest.param(one({"percentageOfNodesToScore": -1}),
                 "profiles[0].percentageOfNodesToScore: -1 is not in the valid range [0-100]",
                 id="a negative profile percentageOfNodesToScore is refused"),
    pytest.param(cfg(podInitialBackoffSeconds=-1), "podInitialBackoffSeconds: -1 must be greater than 0",
                 id="a negative initial backoff is refused"),
    pytest.param(cfg(podInitialBackoffSeconds=0), "podInitialBackoffSeconds: 0 must be greater than 0",
                 id="a zero initial backoff is refused as upstream"),
    pytest.param(cfg(podInitialBackoffSeconds=5, podMaxBackoffSeconds=2),
                 "podMaxBackoffSeconds: 2 must be greater than or equal to podInitialBackoffSeconds (5)",
                 id="a max backoff below the initial one is refused"),
    pytest.param(cfg(parallelism=0), "parallelism: 0 should be an integer value greater than zero",
                 id="parallelism must be positive"),
    pytest.param(cfg(extenders=[{"urlPrefix": "http://x", "filterVerb": "filter"}]),
                 "extenders: scheduler extenders are not supported by tandem", id="extenders are refused"),
    pytest.param(cfg(leaderElection={"resourceLock": "endpoints"}),
                 "leaderElection.resourceLock: 'endpoints': resourceLock value must be \"leases\"",
                 id="a lock other than leases is refused"),
    pytest.param(cfg(leaderElection={"leaseDuration": "15"}), 'leaderElection.leaseDuration: invalid duration "15"',
                 id="a duration needs a unit"),
    pytest.param(cfg(leaderElection={"leaseDuration": "5s"}),
                 "leaderElection.leaseDuration: must be greater than renewDeadline",
                 id="a lease shorter than its renew deadline is refused"),
    pytest.param(cfg(leaderElection={"renewDeadline": "2s", "retryPeriod": "2s"}),
                 "leaderElection.renewDeadline: must be greater than retryPeriod*1.2 (2.4s)",
                 id="a renew deadline without room for a jittered retry is refused, as client-go refuses it"),
    pytest.param(cfg(clientConnection={"burst": -1}), "clientConnection.burst: -1 must be non-negative",
                 id="a negative burst is refused"),
    pytest.param(cfg(profiles={"schedulerName": "a"}), "profiles: expected a list, got an object",
                 id="profiles must be a list"),
    pytest.param(one({"pluginConfig": [{"name": "NoSuchPlugin", "args": {}}]}),
                 "profiles[0].pluginConfig[0].name: unknown plugin 'NoSuchPlugin'",
                 id="pluginConfig for an unknown plugin is refused"),
    pytest.param(one({"pluginConfig": [{"name": "TestArgsFilter"}, {"name": "TestArgsFilter"}]}),
                 "profiles[0].pluginConfig[1].name: duplicate config for plugin 'TestArgsFilter' "
                 "(first at profiles[0].pluginConfig[0])", id="two pluginConfig entries for one plugin are refused"),
    pytest.param(one({"pluginConfig": [{"name": "TestArgsFilter", "args": {"treshold": 2}}]}),
                 "profiles[0].pluginConfig[0].args.treshold: unknown field", id="an unknown args field is named"),
    pytest.param(one({"pluginConfig": [{"name": "TestArgsFilter", "args": {"threshold": "2"}}]}),
                 "profiles[0].pluginConfig[0].args.threshold: expected an integer",
                 id="an args field of the wrong type is named"),
    pytest.param(one({"pluginConfig": [{"name": "TestArgsFilter", "args": {"threshold": -3}}]}),
                 "profiles[0].pluginConfig[0].args.threshold: must be >= 0, got -3",
                 id="the args' own validation runs with the field path"),
    pytest.param(one({"pluginConfig": [{"name": "PrioritySort", "args": {"x": 1}}]}),
                 "profiles[0].pluginConfig[0].args: this plugin takes no args",
                 id="args for a plugin without args are refused"),
    pytest.param(one({"pluginConfig": [{"name": "TestArgsFilter", "args": {"kind": "NodeAffinityArgs"}}]}),
                 "profiles[0].pluginConfig[0].args.kind: 'NodeAffinityArgs' does not match plugin TestArgsFilter",
                 id="args of another plugin's kind are refused"),
    pytest.param([], "expected a KubeSchedulerConfiguration object, got a list", id="a document must be an object"),
]


@pytest.mark.parametrize("doc, message", ERROR_CASES)
def test_invalid_configuration_is_one_line_naming_the_field(doc: Any, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(doc, "sched.yaml")
    text = str(err.value)
    assert text.startswith("sched.yaml: ")
    assert message in text
    assert "\n" not in text


# ---------------------------------------------------------------------------- files

DOC = one({"schedulerName": "tandem-scheduler",
           "plugins": {"multiPoint": {"enabled": [{"name": "TestFilterScore", "weight": 3}]}},
           "pluginConfig": [{"name": "TestArgsFilter", "args": {"threshold": 2}}]},
          podMaxBackoffSeconds=20)


@pytest.mark.parametrize("suffix, dump", [
    pytest.param(".yaml", yaml.safe_dump, id="a YAML file is read"),
    pytest.param(".json", json.dumps, id="a JSON file is read"),
    pytest.param(".conf", json.dumps, id="JSON in a file without a json suffix is read as YAML"),
])
def test_files(tmp_path: Path, suffix: str, dump: Any) -> None:
    f = tmp_path / f"config{suffix}"
    f.write_text(dump(DOC))
    c = load_config(str(f))
    assert c.source == str(f)
    assert c.pod_max_backoff_seconds == 20
    p = c.profiles[0]
    assert p.weights["TestFilterScore"] == 3
    assert p.plugin_args["TestArgsFilter"] == ThresholdArgs(threshold=2)


@pytest.mark.parametrize("name, text, message", [
    pytest.param("c.yaml", "apiVersion: a\napiVersion: b\n", "c.yaml: invalid YAML: duplicate field 'apiVersion' (line 2",
                 id="a duplicate YAML key is refused as strict decoding does"),
    pytest.param("c.yaml", "profiles: [\n", "c.yaml: invalid YAML:", id="broken YAML names the file"),
    pytest.param("c.json", '{"apiVersion": ', "c.json: invalid JSON:", id="broken JSON names the file"),
    pytest.param("c.yaml", "", "c.yaml: the file is empty", id="an empty file is refused"),
])
def test_unreadable_files(tmp_path: Path, name: str, text: str, message: str) -> None:
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(str(f))
    assert str(err.value).startswith(str(tmp_path))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(str(tmp_path / "nope.yaml"))

