"""KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) -> profiles.

tandem reads the same configuration file as kube-scheduler, and a file
kube-scheduler accepts means the same here for the fields tandem uses:
profiles, their plugins (multiPoint and per extension point, enabled and
disabled, weights), pluginConfig, percentageOfNodesToScore, the backoffs,
parallelism, clientConnection and leaderElection. The steps mirror
upstream's, in the same order:

1. strict decoding: an unknown field anywhere is an error naming its path;
2. defaulting (``v1/defaults.go``): one profile when there is none, the
   default plugin set merged into each profile as multiPoint plugins
   (``mergePluginSet``), backoffs, parallelism, QPS/burst, leader election;
3. validation (``validation/validation.go``) and the checks upstream makes
   when it builds a framework (``runtime.NewFramework``): unknown plugins,
   a plugin enabled at a point it does not implement, duplicates, exactly one
   queue sort plugin and the same one in every profile, at least one binder,
   score weights;
4. multiPoint expansion (``expandMultiPointPlugins``): a multiPoint plugin
   is enabled at every extension point its class implements, unless that
   point disables it (or "*"); a plugin also listed at the point itself is an
   override and keeps that position.

Where tandem differs, on purpose:

* The default profile is named "tandem-scheduler" (tandem is a secondary
  scheduler), and so is the default leader-election lease, so that tandem
  never competes for kube-scheduler's own "kube-scheduler" lease.
* tandem implements every plugin of kube-scheduler 1.36's default set. One it
  did not (none today) would be left out of the default set: disabling it would
  be fine; enabling it, or configuring its args, an error.
* The default set is upstream's with its gang gates on (GenericWorkload,
  GangScheduling, TopologyAwareWorkloadScheduling): 1.36's gang plugins
  (GangScheduling, TopologyPlacementGenerator, PodGroupPodsCount) are
  appended, as kube-scheduler appends them. GangScheduling is tandem's gang
  mechanism under upstream's name; the other two name work tandem's group
  cycle does anyway, so they implement no extension point
  (plugins/topology_placement_generator.py). The placementGenerate /
  placementScore points are accepted for them. A profile runs at most one gang
  plugin: one that enables Coscheduling (scheduler-plugins' name for the same
  mechanism, with its queue sort) gets it in place of the default set's
  GangScheduling, and one that enables both by name is an error.
* Scheduler extenders are not supported: a non-empty ``extenders`` is an
  error rather than silently ignored.
* Explicit score weights must be 1..100 (0 means "unset" and becomes 1, as
  upstream); upstream only guards against int64 overflow.
* The backoffs may be fractional seconds (upstream: integers), which keeps
  tests fast.

Every problem is a :class:`ConfigError` with one line: the file, the field
path as upstream spells it (``profiles[0].plugins.score.enabled[1].weight``)
and what is wrong. This module never touches the cluster.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from scheduler.framework.interface import CONFIG_POINTS
from scheduler.framework.registry import REGISTRY, ConfigError, load_builtin_plugins, parse_args

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "tandem-scheduler"
MAX_WEIGHT = 100

# v1 getDefaultPlugins(): the MultiPoint list, in order, with score weights, after applyFeatureGates, as
# kube-scheduler 1.36.2 --write-config-to writes it for a profile with no plugins set.
# (EBSLimits, GCEPDLimits and AzureDiskLimits were folded into NodeVolumeLimits.)
UPSTREAM_DEFAULT_PLUGINS: tuple[tuple[str, int | None], ...] = (
    ("SchedulingGates", None),
    ("PrioritySort", None),
    ("NodeUnschedulable", None),
    ("NodeName", None),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", None),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", None),
    ("NodeVolumeLimits", None),
    ("VolumeBinding", None),
    ("VolumeZone", None),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    # applyFeatureGates: DynamicResourceAllocation (GA, on by default) puts it just before DefaultPreemption,
    # with weight 2 for its Score (tandem's scores nothing yet: it refuses every pod with claims)
    ("DynamicResources", 2),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", None),
    # applyFeatureGates: NodeDeclaredFeatures (beta, on by default in 1.36) appends it
    ("NodeDeclaredFeatures", None),
)

# What kube-scheduler 1.36.2 appends to that list with the gates GenericWorkload, GangScheduling and
# TopologyAwareWorkloadScheduling on (--write-config-to): its gang plugins. tandem's default set is upstream's
# with these gates on, so native gangs (and scheduler-plugins' CRD gangs) are scheduled whole by default.
UPSTREAM_GANG_PLUGINS: tuple[tuple[str, int | None], ...] = (
    ("GangScheduling", None),
    ("TopologyPlacementGenerator", None),
    ("PodGroupPodsCount", 1),
)
# tandem's own default plugins, appended after upstream's: CapacityReservation holds capacity for the head of
# each profile's line (plugins/capacity_reservation.py); a profile disables it by name
TANDEM_DEFAULT_PLUGINS: tuple[tuple[str, int | None], ...] = (
    ("CapacityReservation", None),
)
DEFAULT_PLUGINS = UPSTREAM_DEFAULT_PLUGINS + UPSTREAM_GANG_PLUGINS + TANDEM_DEFAULT_PLUGINS

# the gang plugins: a profile runs at most one, and one that enables Coscheduling gets it in place of the
# default set's GangScheduling (the same mechanism with scheduler-plugins' queue sort)
GANG_SCHEDULING, COSCHEDULING = "GangScheduling", "Coscheduling"

# Plugins removed from the v1 API: naming one is an error there too.
_REMOVED_PLUGINS = ("AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits")

POINTS: tuple[str, ...] = tuple(CONFIG_POINTS)   # preEnqueue, queueSort, ..., postBind
MULTI_POINT = "multiPoint"


# ---------------------------------------------------------------------------- records

@dataclass(frozen=True, slots=True)
class PluginSet:
    """One extension point's ``enabled`` (name, weight or None) and ``disabled`` names, after defaulting."""

    enabled: tuple[tuple[str, int | None], ...] = ()
    disabled: tuple[str, ...] = ()


@dataclass(frozen=True)
class Profile:
    scheduler_name: str
    plugins: dict[str, list[str]]          # extension point -> plugin names in call order (every point present)
    weights: dict[str, int]                # score plugin -> weight
    plugin_args: dict[str, Any]            # every enabled plugin and every pluginConfig entry -> parsed Args (or None)
    percentage_of_nodes_to_score: int | None = None   # None: use the configuration's
    # the configuration after defaulting and before multiPoint expansion (what upstream's v1 defaulting yields)
    plugin_sets: dict[str, PluginSet] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LeaderElection:
    """componentbaseconfig LeaderElectionConfiguration with its recommended defaults (durations in seconds)."""

    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_lock: str = "leases"
    resource_name: str = DEFAULT_SCHEDULER_NAME   # upstream: "kube-scheduler" (see the module docstring)
    resource_namespace: str = "kube-system"


@dataclass(frozen=True)
class SchedulerConfig:
    profiles: tuple[Profile, ...]
    percentage_of_nodes_to_score: int | None = None   # None or 0: adaptive (upstream's default, 0)
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0
    parallelism: int = 16
    client_qps: float = 50.0
    client_burst: int = 100
    client_kubeconfig: str = ""
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    source: str = ""

    def profile(self, scheduler_name: str) -> Profile | None:
        for p in self.profiles:
            if p.scheduler_name == scheduler_name:
                return p
        return None


# ---------------------------------------------------------------------------- entry points

def load_config(path: str | None) -> SchedulerConfig:
    """Read a KubeSchedulerConfiguration file (YAML or JSON); None gives the defaults."""
    if path is None:
        return parse_config({"apiVersion": API_VERSION, "kind": KIND}, "<defaults>")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return parse_config(_decode(text, path), path)


def parse_config(doc: Any, source: str = "<config>") -> SchedulerConfig:
    """Default, validate and expand a decoded KubeSchedulerConfiguration."""
    load_builtin_plugins()
    try:
        return _parse(doc, source)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


# ---------------------------------------------------------------------------- decoding

class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys, as upstream's strict decoding does."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate field {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _decode(text: str, path: str) -> Any:
    if path.endswith(".json"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    else:
        try:
            doc = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ConfigError(f"{path}: invalid YAML: {problem}{where}") from None
    if doc is None:
        raise ConfigError(f"{path}: the file is empty; expected a {KIND}")
    return doc


# ---------------------------------------------------------------------------- field readers

def _kind(v: Any) -> str:
    if v is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number"}.get(type(v), type(v).__name__)


def _object(raw: Any, path: str, known: tuple[str, ...]) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path or '.'}: expected an object, got {_kind(raw)}")
    for key in raw:
        if key not in known:
            raise ConfigError(f"{_join(path, key)}: unknown field")
    return raw


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _list(raw: Any, path: str) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(f"{path}: expected a list, got {_kind(raw)}")
    return raw


def _int(raw: Any, path: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ConfigError(f"{path}: expected an integer, got {_kind(raw)} ({raw!r})")
    return raw


def _number(raw: Any, path: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
        raise ConfigError(f"{path}: expected a number, got {_kind(raw)} ({raw!r})")
    return float(raw)


def _str(raw: Any, path: str) -> str:
    if not isinstance(raw, str):
        raise ConfigError(f"{path}: expected a string, got {_kind(raw)}")
    return raw


def _bool(raw: Any, path: str) -> bool:
    if not isinstance(raw, bool):
        raise ConfigError(f"{path}: expected true or false, got {_kind(raw)}")
    return raw


_DURATION_RE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration(raw: Any, path: str) -> float:
    """A metav1.Duration ("15s", "1m30s", "250ms") in seconds."""
    s = _str(raw, path)
    body = s[1:] if s[:1] in "+-" else s
    if body == "0":
        return 0.0
    total, pos = 0.0, 0
    for m in _DURATION_RE.finditer(body):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if not body or pos != len(body):
        raise ConfigError(f'{path}: invalid duration "{s}" (use Go syntax such as "15s" or "1m30s")')
    return -total if s.startswith("-") else total


def _percentage(raw: Any, path: str) -> int | None:
    if raw is None:
        return None
    v = _int(raw, path)
    if not 0 <= v <= 100:
        raise ConfigError(f"{path}: {v} is not in the valid range [0-100]")
    return v


# ---------------------------------------------------------------------------- the configuration

_TOP_FIELDS = ("apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "enableProfiling",
               "enableContentionProfiling", "percentageOfNodesToScore", "podInitialBackoffSeconds",
               "podMaxBackoffSeconds", "profiles", "extenders", "delayCacheUntilActive")
_LEADER_FIELDS = ("leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceLock",
                  "resourceName", "resourceNamespace")
_CLIENT_FIELDS = ("kubeconfig", "acceptContentTypes", "contentType", "qps", "burst")


def _parse(doc: Any, source: str) -> SchedulerConfig:
    if not isinstance(doc, dict):
        raise ConfigError(f"expected a {KIND} object, got {_kind(doc)}")
    api_version = doc.get("apiVersion")
    if api_version != API_VERSION:
        if api_version is None:
            raise ConfigError(f"apiVersion: required (must be {API_VERSION})")
        raise ConfigError(f"apiVersion: {api_version!r} is not supported (must be {API_VERSION})")
    if doc.get("kind") is None:
        raise ConfigError(f"kind: required (must be {KIND})")
    if doc.get("kind") != KIND:
        raise ConfigError(f"kind: {doc.get('kind')!r} is not supported (must be {KIND})")
    _object(doc, "", _TOP_FIELDS)

    for key in ("enableProfiling", "enableContentionProfiling", "delayCacheUntilActive"):
        if doc.get(key) is not None:
            _bool(doc[key], key)             # accepted and ignored: tandem has no pprof, caches start at once
    if _list(doc.get("extenders"), "extenders"):
        raise ConfigError("extenders: scheduler extenders are not supported by tandem; write a plugin instead")

    parallelism = 16 if doc.get("parallelism") is None else _int(doc["parallelism"], "parallelism")
    if parallelism <= 0:
        raise ConfigError(f"parallelism: {parallelism} should be an integer value greater than zero")
    percentage = _percentage(doc.get("percentageOfNodesToScore"), "percentageOfNodesToScore")

    initial = 1.0 if doc.get("podInitialBackoffSeconds") is None else \
        _number(doc["podInitialBackoffSeconds"], "podInitialBackoffSeconds")
    maximum = 10.0 if doc.get("podMaxBackoffSeconds") is None else \
        _number(doc["podMaxBackoffSeconds"], "podMaxBackoffSeconds")
    if initial <= 0:
        raise ConfigError(f"podInitialBackoffSeconds: {initial:g} must be greater than 0")
    if maximum < initial:
        raise ConfigError(f"podMaxBackoffSeconds: {maximum:g} must be greater than or equal to "
                          f"podInitialBackoffSeconds ({initial:g})")

    client = _object(doc.get("clientConnection"), "clientConnection", _CLIENT_FIELDS)
    for key in ("kubeconfig", "acceptContentTypes", "contentType"):
        if client.get(key) is not None:
            _str(client[key], f"clientConnection.{key}")
    qps = 0.0 if client.get("qps") is None else _number(client["qps"], "clientConnection.qps")
    burst = 0 if client.get("burst") is None else _int(client["burst"], "clientConnection.burst")
    if burst < 0:
        raise ConfigError(f"clientConnection.burst: {burst} must be non-negative")

    profiles = _profiles(doc.get("profiles"))
    config = SchedulerConfig(
        profiles=profiles,
        percentage_of_nodes_to_score=percentage,
        pod_initial_backoff_seconds=initial,
        pod_max_backoff_seconds=maximum,
        parallelism=parallelism,
        client_qps=qps or 50.0,           # 0 means unset: the scheduler's own defaults, 50 and 100
        client_burst=burst or 100,
        client_kubeconfig=client.get("kubeconfig") or "",
        leader_election=_leader_election(doc.get("leaderElection")),
        source=source,
    )
    return config


def with_leader_election(config: SchedulerConfig, **changes: Any) -> SchedulerConfig:
    """``config`` with some ``leader_election`` fields replaced, validated again.

    kube-scheduler's ``ApplyLeaderElectionTo``: the ``--leader-elect*`` flags given on the command line
    override the file's ``leaderElection``, the others leave it as it is.
    """
    le = replace(config.leader_election, **changes)
    _check_leader_election(le, "leaderElection")
    return replace(config, leader_election=le)


def parse_duration(text: str, what: str) -> float:
    """A Go duration ("15s", "1m30s", "250ms") in seconds; a ConfigError naming ``what`` when it is not one."""
    return _duration(text, what)


def _leader_election(raw: Any) -> LeaderElection:
    path = "leaderElection"
    le = _object(raw, path, _LEADER_FIELDS)
    d = LeaderElection()

    def opt(key: str, read: Any, default: Any) -> Any:
        return default if le.get(key) is None else read(le[key], f"{path}.{key}")

    out = LeaderElection(
        leader_elect=opt("leaderElect", _bool, d.leader_elect),
        lease_duration=opt("leaseDuration", _duration, d.lease_duration),
        renew_deadline=opt("renewDeadline", _duration, d.renew_deadline),
        retry_period=opt("retryPeriod", _duration, d.retry_period),
        # an empty string means unset, as upstream's defaulting treats it
        resource_lock=opt("resourceLock", _str, "") or d.resource_lock,
        resource_name=opt("resourceName", _str, "") or d.resource_name,
        resource_namespace=opt("resourceNamespace", _str, "") or d.resource_namespace,
    )
    _check_leader_election(out, path)
    return out


def _check_leader_election(out: LeaderElection, path: str) -> None:
    """componentbase's ValidateLeaderElectionConfiguration, and what client-go's NewLeaderElector refuses."""
    if not out.leader_elect:
        return
    for key, value in (("leaseDuration", out.lease_duration), ("renewDeadline", out.renew_deadline),
                       ("retryPeriod", out.retry_period)):
        if value <= 0:
            raise ConfigError(f"{path}.{key}: must be greater than zero")
    if out.lease_duration <= out.renew_deadline:
        raise ConfigError(f"{path}.leaseDuration: must be greater than renewDeadline")
    # client-go's NewLeaderElector refuses this at start (kube-scheduler then exits): renewals retry every
    # retryPeriod, jittered by up to 1.2, and the deadline must leave room for a retry
    if out.renew_deadline <= 1.2 * out.retry_period:
        raise ConfigError(f"{path}.renewDeadline: must be greater than retryPeriod*1.2 "
                          f"({1.2 * out.retry_period:g}s)")
    if out.resource_lock != "leases":
        raise ConfigError(f'{path}.resourceLock: {out.resource_lock!r}: resourceLock value must be "leases"')


# ---------------------------------------------------------------------------- profiles

_PROFILE_FIELDS = ("schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig")
# kube-scheduler 1.36's placement points (a gang's candidate domains and their scores): tandem's group cycle
# chooses the domain itself, so only the upstream plugins that implement them are accepted there, and ignored
_PLACEMENT_POINTS = {"placementGenerate": ("TopologyPlacementGenerator",), "placementScore": ("PodGroupPodsCount",)}
_PLUGINS_FIELDS = POINTS + (MULTI_POINT, *_PLACEMENT_POINTS)


@dataclass(slots=True)
class _Entry:
    """A plugin named in an enabled list: where it came from (None: the default set) and its weight."""

    name: str
    weight: int | None
    path: str | None


@dataclass(slots=True)
class _Set:
    enabled: list[_Entry]
    disabled: set[str]


def _profiles(raw: Any) -> tuple[Profile, ...]:
    items = _list(raw, "profiles") or [{}]
    profiles: list[Profile] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        path = f"profiles[{i}]"
        doc = _object(item, path, _PROFILE_FIELDS)
        raw_name = doc.get("schedulerName")
        if raw_name is None and len(items) == 1:
            name = DEFAULT_SCHEDULER_NAME      # upstream defaults a lone profile to "default-scheduler"
        else:
            name = "" if raw_name is None else _str(raw_name, f"{path}.schedulerName")
            if not name:
                raise ConfigError(f"{path}.schedulerName: Required value")
        if name in seen:
            raise ConfigError(f"{path}.schedulerName: duplicate value {name!r} "
                              f"(also profiles[{seen[name]}].schedulerName)")
        seen[name] = i
        profiles.append(_profile(doc, name, path))
    _check_common_queue_sort(profiles)
    return tuple(profiles)


def _profile(doc: dict[str, Any], name: str, path: str) -> Profile:
    percentage = _percentage(doc.get("percentageOfNodesToScore"), f"{path}.percentageOfNodesToScore")
    plugin_args = _plugin_config(doc.get("pluginConfig"), f"{path}.pluginConfig")

    custom = _object(doc.get("plugins"), f"{path}.plugins", _PLUGINS_FIELDS)
    custom_sets = {point: _plugin_set(custom.get(point), f"{path}.plugins.{point}") for point in (*POINTS, MULTI_POINT)}
    named = {e.name for enabled, _ in custom_sets.values() for e in enabled}
    defaults = [(n, w) for n, w in DEFAULT_PLUGINS if n in REGISTRY]
    if COSCHEDULING in named and GANG_SCHEDULING not in named:
        defaults = [(n, w) for n, w in defaults if n != GANG_SCHEDULING]   # Coscheduling takes its place
    default_multi = _Set([_Entry(n, w, None) for n, w in defaults], set())
    sets = {point: _merge(_Set([], set()), custom_sets[point]) for point in POINTS}
    multi = _merge(default_multi, custom_sets[MULTI_POINT])

    # pluginsNeeded: every enabled name must be a registered plugin.
    for s in (*sets.values(), multi):
        for e in s.enabled:
            if e.name not in REGISTRY:
                raise ConfigError(f"{e.path}.name: unknown plugin {e.name!r}{_unknown_hint(e.name)}")

    for point, accepted in _PLACEMENT_POINTS.items():
        for e in _plugin_set(custom.get(point), f"{path}.plugins.{point}")[0]:
            if e.name not in REGISTRY:
                raise ConfigError(f"{e.path}.name: unknown plugin {e.name!r}{_unknown_hint(e.name)}")
            if e.name not in accepted:
                raise ConfigError(f"{e.path}.name: plugin {e.name!r} does not implement {point}")

    plugins: dict[str, list[str]] = {}
    for point in POINTS:
        plugins[point] = _expand(point, sets[point], multi, f"{path}.plugins")
    gangs = [n for n in plugins["permit"] if "Gang" in REGISTRY[n].EXTENSION_POINTS]
    if len(gangs) > 1:
        raise ConfigError(f"{path}.plugins: one gang plugin per profile, got {', '.join(gangs)} (GangScheduling is "
                          f"upstream's name for Coscheduling's mechanism; disable one)")

    if len(plugins["queueSort"]) != 1:
        got = ", ".join(plugins["queueSort"]) or "none"
        hint = "; disable the ones you do not want" if got != "none" else ""
        raise ConfigError(f"{path}.plugins.queueSort: exactly one queue sort plugin must be enabled, got {got}{hint}")
    if not plugins["bind"]:
        raise ConfigError(f"{path}.plugins.bind: at least one bind plugin is needed")

    weights = _score_weights(plugins["score"], sets["score"], multi)

    for names in plugins.values():
        for n in names:
            if n not in plugin_args:
                cls = REGISTRY[n]
                plugin_args[n] = parse_args(getattr(cls, "Args", None), None, f"{path}.pluginConfig[{n}].args")
    plugin_sets = {point: PluginSet(tuple((e.name, e.weight) for e in s.enabled), tuple(sorted(s.disabled)))
                   for point, s in ((MULTI_POINT, multi), *sets.items())}
    return Profile(scheduler_name=name, plugins=plugins, weights=weights, plugin_args=plugin_args,
                   percentage_of_nodes_to_score=percentage, plugin_sets=plugin_sets)


def _unknown_hint(name: str) -> str:
    if name in _REMOVED_PLUGINS:
        return f" (removed in {API_VERSION}; use NodeVolumeLimits)"
    if any(name == n for n, _ in UPSTREAM_DEFAULT_PLUGINS):
        return " (a kube-scheduler plugin tandem does not implement yet)"
    return ""


def _plugin_set(raw: Any, path: str) -> tuple[list[_Entry], set[str]]:
    doc = _object(raw, path, ("enabled", "disabled"))
    enabled = []
    for j, item in enumerate(_list(doc.get("enabled"), f"{path}.enabled")):
        p = f"{path}.enabled[{j}]"
        plugin = _object(item, p, ("name", "weight"))
        name = _plugin_name(plugin, p)
        weight = None
        if plugin.get("weight") is not None:
            weight = _int(plugin["weight"], f"{p}.weight")
            if not 0 <= weight <= MAX_WEIGHT:
                raise ConfigError(f"{p}.weight: {weight} is out of range: weights must be 1..{MAX_WEIGHT} "
                                  f"(0 means the default, 1)")
        enabled.append(_Entry(name, weight, p))
    disabled = set()
    for j, item in enumerate(_list(doc.get("disabled"), f"{path}.disabled")):
        p = f"{path}.disabled[{j}]"
        disabled.add(_plugin_name(_object(item, p, ("name", "weight")), p))
    return enabled, disabled


def _plugin_name(plugin: dict[str, Any], path: str) -> str:
    if plugin.get("name") is None:
        raise ConfigError(f"{path}.name: Required value")
    name = _str(plugin["name"], f"{path}.name")
    if not name:
        raise ConfigError(f"{path}.name: Required value")
    return name


def _merge(default: _Set, custom: tuple[list[_Entry], set[str]]) -> _Set:
    """mergePluginSet: defaults minus disabled ("*": all), reconfigured in place, then the rest of custom."""
    enabled_custom, disabled = custom
    by_name = {e.name: idx for idx, e in enumerate(enabled_custom)}   # the last one wins, as upstream's map
    replaced: set[int] = set()
    out: list[_Entry] = []
    if "*" not in disabled:
        for e in default.enabled:
            if e.name in disabled:
                continue
            idx = by_name.get(e.name)
            if idx is not None:
                e = enabled_custom[idx]
                replaced.add(idx)
            out.append(e)
    out.extend(e for idx, e in enumerate(enabled_custom) if idx not in replaced)
    return _Set(out, disabled | default.disabled)


def _expand(point: str, own: _Set, multi: _Set, path: str) -> list[str]:
    """The plugins called at ``point``: its own list, merged with the multiPoint plugins that implement it."""
    declared = CONFIG_POINTS[point]
    seen: dict[str, str] = {}
    for e in own.enabled:
        if declared not in REGISTRY[e.name].EXTENSION_POINTS:
            raise ConfigError(f"{e.path}.name: plugin {e.name!r} does not implement {point}")
        if e.name in seen:
            raise ConfigError(f"{e.path}.name: plugin {e.name!r} is already enabled at {point} ({seen[e.name]})")
        seen[e.name] = e.path or point
    own_names = [e.name for e in own.enabled]
    if "*" in own.disabled:
        return own_names                     # "*" at a point also turns off multiPoint expansion there
    overrides: set[str] = set()
    from_multi: list[str] = []
    for e in multi.enabled:
        if declared not in REGISTRY[e.name].EXTENSION_POINTS or e.name in own.disabled:
            continue
        if e.name in seen:
            overrides.add(e.name)            # configured at the point itself: that entry wins
            continue
        if e.name in from_multi:
            raise ConfigError(f"{e.path or path + '.multiPoint'}.name: plugin {e.name!r} is already enabled "
                              f"through multiPoint")
        from_multi.append(e.name)
    # upstream's order: overrides (in the point's order), multiPoint-only plugins, then the point's other plugins
    return ([n for n in own_names if n in overrides] + from_multi
            + [n for n in own_names if n not in overrides])


def _score_weights(score_plugins: list[str], score: _Set, multi: _Set) -> dict[str, int]:
    """getScoreWeights: a score-point entry's weight wins over the multiPoint one; unset or 0 means 1."""
    weights: dict[str, int] = {}
    wanted = set(score_plugins)
    for e in (*score.enabled, *multi.enabled):
        if e.name in wanted and e.name not in weights:
            weights[e.name] = e.weight or 1
    return weights


def _plugin_config(raw: Any, path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    where: dict[str, int] = {}
    for j, item in enumerate(_list(raw, path)):
        p = f"{path}[{j}]"
        entry = _object(item, p, ("name", "args"))
        name = _plugin_name(entry, p)
        if name in where:
            raise ConfigError(f"{p}.name: duplicate config for plugin {name!r} (first at {path}[{where[name]}])")
        where[name] = j
        cls = REGISTRY.get(name)
        if cls is None:
            raise ConfigError(f"{p}.name: unknown plugin {name!r}{_unknown_hint(name)}")
        args = entry.get("args")
        if isinstance(args, dict) and args.get("kind") is not None and args["kind"] != f"{name}Args":
            raise ConfigError(f"{p}.args.kind: {args['kind']!r} does not match plugin {name} "
                              f"(expected {name}Args)")
        out[name] = parse_args(getattr(cls, "Args", None), args, f"{p}.args")
    return out


def _check_common_queue_sort(profiles: list[Profile]) -> None:
    """Every profile shares one queue, so they must agree on how it is sorted (validateCommonQueueSort)."""
    first = profiles[0]
    name = first.plugins["queueSort"][0]
    for i, p in enumerate(profiles[1:], start=1):
        other = p.plugins["queueSort"][0]
        if other != name:
            raise ConfigError(f"profiles[{i}].plugins.queueSort: must be the same for all profiles "
                              f"(profiles[0] uses {name}, this one {other})")
        if p.plugin_args.get(name) != first.plugin_args.get(name):
            raise ConfigError(f"profiles[{i}].pluginConfig: the args of queue sort plugin {name} "
                              f"must be the same for all profiles")
