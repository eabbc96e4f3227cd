"""DefaultPreemption (plugins/default_preemption.py): upstream's cases as tables, and tandem's additions.

The tables translate kubernetes/kubernetes ``pkg/scheduler/framework/plugins/defaultpreemption/
default_preemption_test.go`` (TestPostFilter, TestDryRunPreemption, TestSelectBestCandidate,
TestPodEligibleToPreemptOthers, TestPreempt, TestPreEnqueue), ``framework/preemption/preemption_test.go``
(TestNodesWherePreemptionMightHelp) and ``apis/config/validation/validation_pluginargs_test.go``
(TestValidateDefaultPreemptionArgs): the same nodes, pods (priorities, requests, start times), PDBs and
preemptor, and the same profile (upstream's tests register NodeResourcesFit alone, or with InterPodAffinity or
PodTopologySpread). Upstream's pods in namespace "" are in "default" here, and its start times 0..6 ns apart are
seconds apart (the API keeps seconds). Where upstream hands PostFilter a made-up NodeToStatus (or DryRunPreemption
every node), a row says the same in ``statuses``; elsewhere the Diagnosis is the one PreFilter and Filter give.

Left out, as tandem has no such thing: extenders, the IsEligiblePod / MoreImportantPod hooks (TestCustomSelection,
TestCustomOrdering), NumFilterCalled (the batched dry run filters many nodes per call) and the workload-aware
cases (a gang member preempts in tandem's group cycle, not here).

Tandem's additions: a PodGroup with ``disruptionMode: PodGroup`` is a victim only whole (every placed member, on
any node), its ``priority`` overrides its members', and among otherwise equal nodes the one breaking fewer gangs
wins. The dry run has two paths, batched over the placed-pods table (resources only) and per node through
AddPod/RemovePod (taken when the preemptor asks for host ports or a PreFilter with AddPod/RemovePod is in play);
they must agree, and neither may leave a trace in the node table.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from plugins.default_preemption import (
    NO_VICTIMS, NOT_ELIGIBLE_NEVER, NOT_ELIGIBLE_TERMINATING, NOT_HELPFUL, OFFSET, WAITING, Candidate,
    DefaultPreemption, DefaultPreemptionArgs, num_candidates,
)
from scheduler.config import parse_config
from scheduler.framework import Code, ConfigError, CycleState, FilterResult, Handle, Status, parse_args, register
from scheduler.framework.clock import FakeClock
from scheduler.framework.interface import PostFilterResult
from scheduler.framework.runtime import Diagnosis, Framework
from scheduler.model import (
    DISRUPTION_POD_GROUP, DISRUPTION_SINGLE, POD_GROUP_API_VERSION, POD_GROUP_LABEL, Pod, PodDisruptionBudget,
    PodGroup, parse_node, parse_pdb, parse_pod, parse_pod_group,
)
from scheduler.state.cache import Cache

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
MAX_INT32 = 2**31 - 1

SMALL = {"cpu": "100m", "memory": "100"}
MEDIUM = {"cpu": "200m", "memory": "200"}
LARGE = {"cpu": "300m", "memory": "300"}
VERY_LARGE = {"cpu": "500m", "memory": "500"}
ONE_POD = {"pods": "1"}
NODE_RES = {"cpu": "200m", "memory": "400"}

U, UU = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE
EVERY = "every node Unschedulable"       # what upstream's DryRunPreemption tests hand it: all nodes
ERR_REASON_FAKE = "Nodes failed the fake plugin"          # upstream tf.ErrReasonFake
VIOLATING_PDB_KEY = "test.kubernetes.io/is-violating-pdb"  # upstream LabelKeyIsViolatingPDB


# ---------------------------------------------------------------------------- upstream's fake plugins

class _Fake:
    __test__ = False    # the names start with "Test"; these are plugins, not test classes
    Args = None
    EXTENSION_POINTS = frozenset({"Filter"})

    def __init__(self, args: Any, handle: Any) -> None:
        self.handle = handle


@register
class TestFalseFilter(_Fake):
    """tf.NewFalseFilterPlugin: every node fails."""

    NAME = "TestFalseFilter"

    def filter(self, state: CycleState, pod: Pod, nodes: Any, rows: np.ndarray) -> FilterResult:
        return FilterResult.reject_all(len(rows), ERR_REASON_FAKE)


@register
class TestTrueFilter(_Fake):
    """tf.NewTrueFilterPlugin: every node passes."""

    NAME = "TestTrueFilter"

    def filter(self, state: CycleState, pod: Pod, nodes: Any, rows: np.ndarray) -> FilterResult:
        return FilterResult.all_pass(len(rows))


@register
class TestMatchFilter(_Fake):
    """tf.NewMatchFilterPlugin: a node passes when it has the pod's name."""

    NAME = "TestMatchFilter"

    def filter(self, state: CycleState, pod: Pod, nodes: Any, rows: np.ndarray) -> FilterResult:
        ok = np.array([n == pod.name for n in nodes.names_of(rows)], dtype=bool)
        return FilterResult.from_mask(ok, ERR_REASON_FAKE)


@register
class TestInjectedFailure(_Fake):
    """tf.FakeFilterPlugin with fakeFilterRC Unschedulable for every node (upstream registers it first)."""

    NAME = "TestInjectedFailure"

    def filter(self, state: CycleState, pod: Pod, nodes: Any, rows: np.ndarray) -> FilterResult:
        return FilterResult.reject_all(len(rows), f"injecting failure for pod {pod.name}")


@register
class TestFailsAfter(_Fake):
    """Passes every node for its first ``budget`` calls, then fails with an Error (a plugin's internal error)."""

    NAME = "TestFailsAfter"
    budget = 1_000_000

    def filter(self, state: CycleState, pod: Pod, nodes: Any, rows: np.ndarray) -> FilterResult:
        if self.budget <= 0:
            return FilterResult(np.zeros(len(rows), dtype=bool), error=Status(Code.ERROR, "injected error"))
        self.budget -= 1
        return FilterResult.all_pass(len(rows))


@register
class TestPreemptionExtensions(_Fake):
    """upstream's TestPlugin ("test-plugin"): a PreFilter with AddPod/RemovePod that fail on nodes labelled
    error=true. Anywhere else it is a no-op, which puts the dry run on its per-node path."""

    NAME = "TestPreemptionExtensions"
    EXTENSION_POINTS = frozenset({"PreFilter", "PreFilterExtensions"})

    def pre_filter(self, state: CycleState, pod: Pod, nodes: Any) -> tuple[None, Status]:
        return None, Status()

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, row: int) -> Status:
        return self._fail(row, f"failed to add pod: {pod.name}")

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, row: int) -> Status:
        return self._fail(row, f"failed to remove pod: {pod.name}")

    def _fail(self, row: int, msg: str) -> Status:
        node = self.handle.nodes.node(row)
        return Status(Code.ERROR, msg) if node.labels.get("error") == "true" else Status()


# ---------------------------------------------------------------------------- building clusters

def at(k: int) -> str:
    """upstream's epochTime<k>, k seconds into a day (0 would read as "not started")."""
    return f"2024-01-01T00:00:{k:02d}Z"


def node(spec: str, capacity: dict[str, str] = VERY_LARGE, **labels: str) -> dict[str, Any]:
    """st.MakeNode().Capacity(capacity): 32 pods unless ``capacity`` says otherwise. A name "node-a/zone1" labels
    hostname=node-a and zone=zone1, as upstream's tests split it."""
    parts = spec.split("/")
    all_labels = dict(zip(("hostname", "zone", "region"), parts)) | labels
    return {"metadata": {"name": parts[0], "uid": parts[0], "labels": all_labels},
            "status": {"allocatable": {"pods": "32", **capacity}}}


def pod(name: str, prio: int | None = None, req: dict[str, str] | None = None, node: str = "",
        labels: dict[str, str] | None = None, start: int | None = None, policy: str = "", nominated: str = "",
        ports: tuple[int, ...] = (), group: str = "", terminating: bool = False, preempted: bool = False,
        **spec: Any) -> Pod:
    """st.MakePod(): ``start`` is epochTime<start>; ``preempted`` adds DisruptionTarget=True by
    PreemptionByScheduler; ``group`` names the pod's PodGroup; more spec fields as keywords."""
    container: dict[str, Any] = {"name": "c", "image": "pause", "resources": {"requests": dict(req or {})}}
    if ports:
        container["ports"] = [{"containerPort": p, "hostPort": p} for p in ports]
    body: dict[str, Any] = {"schedulerName": "tandem-scheduler", "containers": [container], **spec}
    if prio is not None:
        body["priority"] = prio
    if node:
        body["nodeName"] = node
    if policy:
        body["preemptionPolicy"] = policy
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": name,
                            "labels": dict(labels or {}) | ({POD_GROUP_LABEL: group} if group else {})}
    if terminating or preempted:
        meta["deletionTimestamp"] = at(59)
    status: dict[str, Any] = {"phase": "Running" if node else "Pending"}
    if start is not None:
        status["startTime"] = at(start)
    if nominated:
        status["nominatedNodeName"] = nominated
    if preempted:
        status["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]
    p = parse_pod({"metadata": meta, "spec": body, "status": status})
    assert not p.invalid, p.invalid
    return p


def changed(p: Pod, preempted: bool = False, ports: tuple[int, ...] = ()) -> Pod:
    """``p`` terminating with DisruptionTarget by PreemptionByScheduler (a victim on its way out), or asking for
    host ``ports`` too."""
    raw = copy.deepcopy(p.raw)
    if preempted:
        raw["metadata"]["deletionTimestamp"] = at(59)
        raw["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                        "reason": "PreemptionByScheduler"}]
    if ports:
        raw["spec"]["containers"][0]["ports"] = [{"containerPort": n, "hostPort": n} for n in ports]
    return parse_pod(raw)


def pdb(name: str, allowed: int, match: dict[str, str] | None = None, disrupted: tuple[str, ...] = (),
        selector: Any = None) -> PodDisruptionBudget:
    """A PDB over ``match`` (or a raw ``selector``) with status.disruptionsAllowed and disruptedPods."""
    sel = selector if selector is not None else {"matchLabels": match or {}}
    return parse_pdb({"metadata": {"name": name, "namespace": "default"}, "spec": {"selector": sel},
                      "status": {"disruptionsAllowed": allowed, "disruptedPods": {n: at(1) for n in disrupted}}})


def pod_group(name: str, mode: str = DISRUPTION_POD_GROUP, priority: int | None = None,
              min_member: int = 2) -> PodGroup:
    spec: dict[str, Any] = {"minMember": min_member, "disruptionMode": mode}
    if priority is not None:
        spec["priority"] = priority
    return parse_pod_group({"apiVersion": POD_GROUP_API_VERSION, "kind": "PodGroup",
                            "metadata": {"name": name, "namespace": "default", "uid": name}, "spec": spec})


def plugins(*names: str) -> list[str]:
    """A profile of ``names`` (Filter order) with what every profile needs, as upstream's tf.NewFramework."""
    return ["PrioritySort", *names, "DefaultPreemption", "DefaultBinder"]


FIT = plugins("NodeResourcesFit")
FIT_PORTS = plugins("NodePorts", "NodeResourcesFit")
FIT_EACH = plugins("NodePorts", "NodeResourcesFit", "TestPreemptionExtensions")   # forces the per-node dry run


class FakePreemption:
    """``handle.preemption``: records what DefaultPreemption asks of the eviction executor (scheduler/executor.py)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, list[str], bool]] = []   # (preemptor, node, victims, sync)
        self.attempts = 0
        self.preempting: set[str] = set()
        self.withdrawn: list[str] = []

    def attempted(self) -> None:
        self.attempts += 1

    def is_preempting(self, uid: str) -> bool:
        return uid in self.preempting

    def preempt(self, fw: Any, pod: Pod, node: str, victims: list[Pod], sync: bool = False,
                nominate: bool = True) -> None:
        self.calls.append((pod.name, node, [v.name for v in victims], sync))
        self.preempting.add(pod.uid)

    def withdraw(self, pods: list[Pod]) -> None:
        self.withdrawn.extend(p.name for p in pods)


class Offsets:
    """The plugin's rng, answering upstream's offsets (getOffsetRand seeded with 4) one cycle after another."""

    def __init__(self, *offsets: int) -> None:
        self.offsets = list(offsets)

    def randrange(self, n: int) -> int:
        offset = self.offsets.pop(0)
        assert 0 <= offset < n
        return offset


@dataclass
class Env:
    cache: Cache
    fw: Framework
    pl: DefaultPreemption
    ev: FakePreemption


def cluster(nodes: list[dict[str, Any]], pods: Any = (), pdbs: Any = (), groups: Any = (),
            profile: list[str] | None = FIT, args: dict[str, Any] | None = None, seed: int = 4,
            nominated: Any = ()) -> Env:
    """A cache with ``nodes`` and the placed ``pods``, and a framework of ``profile`` (None: tandem's default
    profile) whose handle has a FakePreemption, ``pdbs`` and ``seed``; ``nominated``: (pod, node) pairs."""
    cache = Cache()
    cache.set_namespace("default", {})
    for n in nodes:
        cache.add_node(parse_node(n))
    for g in groups:
        cache.gangs.set_group(g)
    for p in pods:
        cache.gangs.update_membership(None, p)
        cache.add_pod(p)
    for p, where in nominated:
        cache.nominations.set(p, where)
    prof: dict[str, Any] = {"schedulerName": "tandem-scheduler"}
    if profile is not None:
        prof["plugins"] = {"multiPoint": {"disabled": [{"name": "*"}], "enabled": [{"name": n} for n in profile]}}
    if args is not None:
        prof["pluginConfig"] = [{"name": "DefaultPreemption", "args": args}]
    (config,) = parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                              "profiles": [prof]}).profiles
    handle = Handle(cache, scheduler_name="tandem-scheduler", clock=FakeClock(), pods={},
                    preemption=FakePreemption(), pdbs={b.key: b for b in pdbs}, seed=seed)
    fw = Framework(config, handle)
    return Env(cache, fw, fw.plugins["DefaultPreemption"], handle.preemption)


def diagnose(env: Env, p: Pod, statuses: Any = None) -> tuple[CycleState, Diagnosis]:
    """PreFilter for ``p``, and the Diagnosis PostFilter gets: Filter's, or one made of ``statuses`` (node name ->
    Unschedulable / UnschedulableAndUnresolvable, absent: not rejected by Filter; EVERY: all Unschedulable)."""
    state = CycleState()
    rows, st, diag = env.fw.run_pre_filter(state, p)
    assert st.is_success(), st
    nodes = env.cache.nodes
    if statuses is None:
        feasible, st = env.fw.run_filter_with_nominated(state, p, rows, diag)
        assert st.is_success() and len(feasible) == 0, f"{p.name} fits on {nodes.names_of(feasible)}"
    else:
        if statuses == EVERY:
            statuses = {name: U for name in nodes.names_of(nodes.rows())}
        diag = Diagnosis()
        diag.rejected_rows = np.array([nodes.row(n) for n in statuses], dtype=np.int64)
        unresolvable = [nodes.row(n) for n, code in statuses.items() if code == UU]
        diag.unresolvable_rows = np.array(unresolvable, dtype=np.int64) if unresolvable else None
    diag.num_all_nodes = len(nodes)
    return state, diag


def post_filter(env: Env, p: Pod, statuses: Any = None) -> tuple[PostFilterResult | None, Status]:
    state, diag = diagnose(env, p, statuses)
    return env.pl.post_filter(state, p, diag)


def dry_run(env: Env, p: Pod, statuses: Any = EVERY) -> tuple[dict[str, tuple[list[str], int]], str]:
    """The candidates (node -> victims' names, PDB violations) and, when there are none, the FitError message."""
    state, diag = diagnose(env, p, statuses)
    cands, msg = env.pl.find_candidates(state, p, diag)
    for c in cands:
        assert_importance_order(c.victims, env)
        assert_key_matches_victims(c, env)
    return {c.node: ([v.name for v in c.victims], c.pdb_violations) for c in cands}, msg


def assert_key_matches_victims(c: Candidate, env: Env) -> None:
    """The node-choice key, summed over columns, is what the victim list says (whole gangs: every member)."""
    prios = [env.pl.priority_of(v) for v in c.victims]
    high = max(prios)
    start = min((v.start_time or float("inf")) for v, q in zip(c.victims, prios) if q == high)
    gangs = {v.pod_group for v in c.victims if v.pod_group}
    assert (c.nvictims, c.total, c.high, c.start, c.gangs) == (
        len(c.victims), sum(prios) + OFFSET * len(prios), high, start, len(gangs)), c


def assert_importance_order(victims: list[Pod], env: Env) -> None:
    """Victims come highest priority first, the earlier started first among equals (upstream's MoreImportantPod)."""
    keys = [(-env.pl.priority_of(v), v.start_time or float("inf")) for v in victims]
    assert keys == sorted(keys), [v.name for v in victims]


def same_victims(got: dict[str, tuple[list[str], int]], want: dict[str, tuple[list[str], int]]) -> bool:
    """Equal up to the order of victims that tie on priority and start (upstream sorts those by name to compare)."""
    return ({n: (sorted(v), k) for n, (v, k) in got.items()} == {n: (sorted(v), k) for n, (v, k) in want.items()})


def table(cache: Cache) -> tuple[Any, ...]:
    """What a dry run may touch, as bytes: the node table's requests, nonzero requests and host-port columns."""
    nodes = cache.nodes
    return (nodes.requested.shape, nodes.requested.tobytes(), nodes.nonzero.tobytes(),
            sorted((k, v.tobytes()) for k, v in nodes._ports.items()),
            sorted((k, v.tobytes()) for k, v in nodes._ip_ports.items()))


def spy_paths(env: Env) -> list[str]:
    """Record which dry-run path each find_candidates takes ("batched" or "each")."""
    taken: list[str] = []
    for path, attr in (("batched", "_dry_run_batched"), ("each", "_dry_run_each")):
        real = getattr(env.pl, attr)

        def spy(*a: Any, _real: Any = real, _path: str = path) -> Any:
            taken.append(_path)
            return _real(*a)

        setattr(env.pl, attr, spy)
    return taken


# ---------------------------------------------------------------------------- TestPostFilter

def cleared(msg: str) -> tuple[PostFilterResult, Status]:
    return PostFilterResult(nominated_node=""), Status(U, "preemption: " + msg)


def nominated(node_name: str) -> tuple[PostFilterResult, Status]:
    return PostFilterResult(nominated_node=node_name), Status()


TWO_ONE_POD = [node("node1", ONE_POD), node("node2", ONE_POD)]
BOTH_U = {"node1": U, "node2": U}


@pytest.mark.parametrize("nodes, pods, pdbs, preemptor, statuses, want", [
    pytest.param([node("node1", ONE_POD)], [pod("p1", node="node1")], [], pod("p", HIGH), {"node1": U},
                 nominated("node1"), id="pod with higher priority can be made schedulable"),
    pytest.param([node("node1", ONE_POD)], [pod("p1", node="node1")], [], pod("p"), {"node1": U},
                 cleared(f"0/1 nodes are available: 1 {NO_VICTIMS}."),
                 id="pod with tied priority is still unschedulable"),
    pytest.param([node("node1", ONE_POD)], [pod("p1", node="node1")], [], pod("p", HIGH), {"node1": UU},
                 cleared(f"0/1 nodes are available: 1 {NOT_HELPFUL}."),
                 id="preemption should respect filteredNodesStatuses"),
    pytest.param([node("node1", ONE_POD)], [pod("p1", node="node1")], [], pod("p", HIGH), {},
                 cleared(f"0/1 nodes are available: 1 {NOT_HELPFUL}."),
                 id="preemption should respect absent NodeToStatusReader entry meaning UnschedulableAndUnresolvable"),
    pytest.param(TWO_ONE_POD, [pod("p1", HIGH, node="node1"), pod("p2", LOW, node="node2")], [], pod("p", MID),
                 BOTH_U, nominated("node2"), id="pod can be made schedulable on one node"),
    pytest.param(TWO_ONE_POD,
                 [pod("p1", HIGH, node="node1", labels={VIOLATING_PDB_KEY: "non-violating"}),
                  pod("p2", LOW, node="node1", labels={VIOLATING_PDB_KEY: "violating"}),
                  pod("p3", MID, node="node2", labels={VIOLATING_PDB_KEY: "violating"})],
                 [pdb("violating-pdb", 0, {VIOLATING_PDB_KEY: "violating"}),
                  pdb("non-violating-pdb", MAX_INT32, {VIOLATING_PDB_KEY: "non-violating"})],
                 pod("p", VERY_HIGH), BOTH_U, nominated("node2"),
                 id="pod can be made schedulable on minHighestPriority node"),
    pytest.param([node("node1", NODE_RES), node("node2", NODE_RES)],
                 [pod("p1", node="node1"), pod("p2", node="node2")], [], pod("p", HIGH, LARGE), BOTH_U,
                 cleared("0/2 nodes are available: 2 Insufficient cpu."),
                 id="no candidate nodes found, no enough resource after removing low priority pods"),
    pytest.param([node("node1", ONE_POD), node("node2", NODE_RES), node("node3", ONE_POD)],
                 [pod("p1", HIGH, node="node1"), pod("p2", node="node2"), pod("p3", HIGH, node="node3")], [],
                 pod("p", HIGH, LARGE), {"node1": U, "node2": U, "node3": U},
                 cleared(f"0/3 nodes are available: 1 Insufficient cpu, 2 {NO_VICTIMS}."),
                 id="no candidate nodes found with mixed reasons, no lower priority pod and no enough CPU resource"),
    pytest.param([node(f"node{i}", NODE_RES) for i in range(1, 5)],
                 [pod("p1", node="node1"), pod("p2", node="node2")], [], pod("p", HIGH, LARGE),
                 {"node1": U, "node2": U, "node4": UU},
                 cleared(f"0/4 nodes are available: 2 Insufficient cpu, 2 {NOT_HELPFUL}."),
                 id="no candidate nodes found with mixed reason, 2 UnschedulableAndUnresolvable nodes and 2 nodes "
                    "don't have enough CPU resource"),
])
def test_post_filter(nodes: list[Any], pods: list[Pod], pdbs: list[Any], preemptor: Pod, statuses: Any,
                     want: tuple[PostFilterResult | None, Status]) -> None:
    env = cluster(nodes, pods, pdbs)
    result, status = post_filter(env, preemptor, statuses)
    assert (result, status) == want
    assert env.ev.attempts == 1
    assert [(c[0], c[1]) for c in env.ev.calls] == ([(preemptor.name, want[0].nominated_node)]
                                                    if status.is_success() else [])


@pytest.mark.parametrize("nodes, pods, want", [
    pytest.param([node("node1", LARGE, error="true")], [pod("p1", node="node1")],
                 (None, Status(Code.ERROR, 'preemption: running RemovePod on PreFilter plugin '
                                           '"TestPreemptionExtensions": failed to remove pod: p')),
                 id="only one node but failed with TestPlugin"),
    pytest.param([node("node1", LARGE, error="true"), node("node2", LARGE)],
                 [pod("p1", node="node1"), pod("p2", MID, MEDIUM, "node2")], nominated("node2"),
                 id="one failed with TestPlugin and the other pass"),
])
def test_post_filter_when_remove_pod_fails(nodes: list[Any], pods: list[Pod],
                                           want: tuple[PostFilterResult | None, Status]) -> None:
    """upstream's TestPlugin fails AddPod/RemovePod on nodes labelled error=true: an Error when no node is left."""
    env = cluster(nodes, pods, profile=plugins("NodeResourcesFit", "TestPreemptionExtensions"))
    statuses = {n["metadata"]["name"]: U for n in nodes}
    assert post_filter(env, pod("p", HIGH, LARGE), statuses) == want


def test_every_node_outside_the_dry_run_is_not_helpful_once() -> None:
    """The FitError counts nodes: node1 fails the dry run with two reasons, node2 (its label does not match) is
    "Preemption is not helpful for scheduling", as upstream's absent nodes."""
    env = cluster([node("node1", disk="ssd"), node("node2", disk="hdd")],
                  [pod("h", HIGH, LARGE, "node1"), pod("l", LOW, SMALL, "node1")], profile=None)
    result, status = post_filter(env, pod("p", HIGH, LARGE, nodeSelector={"disk": "ssd"}))
    assert (result, status) == cleared(
        f"0/2 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 {NOT_HELPFUL}.")


# ---------------------------------------------------------------------------- TestPreempt

SPREAD_FOO = {"labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]},
              "whenUnsatisfiable": "DoNotSchedule", "maxSkew": 1}
ZONE_AND_HOST = [SPREAD_FOO | {"topologyKey": "zone"}, SPREAD_FOO | {"topologyKey": "hostname"}]
THREE = [node("node1"), node("node2"), node("node3")]
BASIC = [pod("p1.1", LOW, SMALL, "node1"), pod("p1.2", LOW, SMALL, "node1"), pod("p2.1", HIGH, LARGE, "node2"),
         pod("p3.1", MID, MEDIUM, "node3")]


@pytest.mark.parametrize("nodes, pods, profile, preemptor, want_node, want_victims, want_status", [
    pytest.param(THREE, BASIC, FIT, pod("p", HIGH, VERY_LARGE, policy="PreemptLowerPriority"), "node1",
                 ["p1.1", "p1.2"], "", id="basic preemption logic"),
    pytest.param([node("node-a/zone1"), node("node-b/zone1"), node("node-x/zone2")],
                 [pod("p-a1", HIGH, node="node-a", labels={"foo": ""}),
                  pod("p-a2", HIGH, node="node-a", labels={"foo": ""}),
                  pod("p-b1", LOW, node="node-b", labels={"foo": ""}),
                  pod("p-x1", HIGH, node="node-x", labels={"foo": ""}),
                  pod("p-x2", HIGH, node="node-x", labels={"foo": ""})],
                 plugins("PodTopologySpread"),
                 pod("p", HIGH, labels={"foo": ""}, topologySpreadConstraints=ZONE_AND_HOST), "node-b", ["p-b1"], "",
                 id="preemption for topology spread constraints"),
    pytest.param(THREE, BASIC, FIT, pod("p", HIGH, VERY_LARGE, policy="Never"), None, None,
                 "preemption: " + NOT_ELIGIBLE_NEVER, id="no preempting in pod"),
    pytest.param(THREE, BASIC, FIT, pod("p", HIGH, VERY_LARGE), "node1", ["p1.1", "p1.2"], "",
                 id="PreemptionPolicy is nil"),
])
@pytest.mark.parametrize("async_preemption", [True, False])
def test_preempt(nodes: list[Any], pods: list[Pod], profile: list[str], preemptor: Pod, want_node: str | None,
                 want_victims: list[str] | None, want_status: str, async_preemption: bool) -> None:
    env = cluster(nodes, pods, profile=profile, args={"asyncPreemption": async_preemption})
    result, status = post_filter(env, preemptor, EVERY)
    assert status.message() == want_status
    if want_node is None:
        assert result is None and env.ev.calls == []
        return
    assert status.is_success() and result == PostFilterResult(want_node)
    ((who, where, victims, sync),) = env.ev.calls
    assert (who, where, sorted(victims), sync) == (preemptor.name, want_node, want_victims, not async_preemption)
    # the victims terminate (DisruptionTarget, deletionTimestamp) and the pod is nominated to the node: preempting
    # again, it waits for them instead of taking more (upstream calls Preempt a second time)
    for v in pods:
        if v.name in victims:
            env.cache.update_pod(changed(v, preempted=True))
    env.cache.nominations.set(preemptor, want_node)
    result, status = post_filter(env, preemptor, EVERY)
    assert (result, status) == (None, Status(U, "preemption: " + NOT_ELIGIBLE_TERMINATING))
    assert len(env.ev.calls) == 1


# ---------------------------------------------------------------------------- TestDryRunPreemption

TWO = [node("node1"), node("node2")]
P1_P2_MID = [pod("p1", MID, node="node1"), pod("p2", MID, node="node2")]
P1_P2_MID_LARGE = [pod("p1", MID, LARGE, "node1"), pod("p2", MID, LARGE, "node2")]
APP_FOO = {"app": "foo"}
SAME_PDB_PODS = [pod("p1.1", MID, MEDIUM, "node1", APP_FOO), pod("p1.2", MID, MEDIUM, "node1", APP_FOO)]


@pytest.mark.parametrize("profile, nodes, preemptor, pods, pdbs, want, want_msg", [
    pytest.param(plugins("TestFalseFilter"), TWO, pod("p", HIGH), P1_P2_MID, [], {},
                 f"0/2 nodes are available: 2 {ERR_REASON_FAKE}.", id="a pod that does not fit on any node"),
    pytest.param(plugins("TestInjectedFailure", "TestTrueFilter"), TWO, pod("p", HIGH), P1_P2_MID, [], {},
                 "0/2 nodes are available: 2 injecting failure for pod p.", id="a pod that fits with no preemption"),
    pytest.param(plugins("TestInjectedFailure", "TestMatchFilter"), TWO, pod("node1", HIGH), P1_P2_MID, [], {},
                 "0/2 nodes are available: 2 injecting failure for pod node1.",
                 id="a pod that fits on one node with no preemption"),
    pytest.param(FIT, TWO, pod("p", HIGH, LARGE), P1_P2_MID_LARGE, [],
                 {"node1": (["p1"], 0), "node2": (["p2"], 0)}, "",
                 id="a pod that fits on both nodes when lower priority pods are preempted"),
    pytest.param(FIT, TWO, pod("p", LOW, LARGE), P1_P2_MID_LARGE, [], {},
                 f"0/2 nodes are available: 2 {NO_VICTIMS}.",
                 id="a pod that would fit on the nodes, but other pods running are higher priority, "
                    "no preemption would happen"),
    pytest.param(FIT, TWO, pod("p", HIGH, LARGE),
                 [pod("p1.1", LOW, SMALL, "node1"), pod("p1.2", MID, LARGE, "node1"), pod("p2", MID, LARGE, "node2")],
                 [], {"node1": (["p1.2"], 0), "node2": (["p2"], 0)}, "",
                 id="medium priority pod is preempted, but lower priority one stays as it is small"),
    pytest.param(FIT, TWO, pod("p", HIGH, LARGE),
                 [pod("p1.1", MID, SMALL, "node1"), pod("p1.2", LOW, SMALL, "node1"),
                  pod("p1.3", MID, MEDIUM, "node1"), pod("p1.4", HIGH, SMALL, "node1"),
                  pod("p2", HIGH, LARGE, "node2")],
                 [], {"node1": (["p1.3", "p1.2"], 0)}, "", id="mixed priority pods are preempted"),
    pytest.param(FIT, TWO, pod("p", HIGH, LARGE),
                 [pod("p1.1", LOW, SMALL, "node1", start=5), pod("p1.2", LOW, SMALL, "node1", start=4),
                  pod("p1.3", MID, MEDIUM, "node1", start=3), pod("p1.4", HIGH, SMALL, "node1", start=2),
                  pod("p2", HIGH, LARGE, "node2", start=1)],
                 [], {"node1": (["p1.3", "p1.1"], 0)}, "",
                 id="mixed priority pods are preempted, pick later StartTime one when priorities are equal"),
    pytest.param(plugins("NodeResourcesFit", "InterPodAffinity"), TWO, pod("p", HIGH, SMALL, labels={"foo": ""}),
                 [pod("p1.1", LOW, SMALL, "node1", {"foo": ""}, affinity={"podAntiAffinity": {
                     "requiredDuringSchedulingIgnoredDuringExecution": [{
                         "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]},
                         "topologyKey": "hostname"}]}}),
                  pod("p1.2", MID, SMALL, "node1"), pod("p1.3", HIGH, SMALL, "node1"),
                  pod("p2", HIGH, SMALL, "node2")],
                 [], {"node1": (["p1.1"], 0)}, "", id="pod with anti-affinity is preempted"),
    pytest.param(plugins("PodTopologySpread"), [node("node-a/zone1"), node("node-b/zone1"), node("node-x/zone2")],
                 pod("p", HIGH, labels={"foo": ""}, topologySpreadConstraints=ZONE_AND_HOST),
                 [pod("pod-a1", MID, node="node-a", labels={"foo": ""}),
                  pod("pod-a2", LOW, node="node-a", labels={"foo": ""}),
                  pod("pod-b1", LOW, node="node-b", labels={"foo": ""}),
                  pod("pod-x1", HIGH, node="node-x", labels={"foo": ""}),
                  pod("pod-x2", HIGH, node="node-x", labels={"foo": ""})],
                 [], {"node-a": (["pod-a2"], 0), "node-b": (["pod-b1"], 0)}, "",
                 id="preemption to resolve pod topology spread filter failure"),
    pytest.param(plugins("TestInjectedFailure", "NodeResourcesFit"), TWO, pod("p", HIGH, LARGE), P1_P2_MID_LARGE,
                 [], {}, "0/2 nodes are available: 2 injecting failure for pod p.",
                 id="get Unschedulable in the preemption phase when the filter plugins filtering the nodes"),
    pytest.param(FIT, [node("node1")], pod("p", HIGH, VERY_LARGE), SAME_PDB_PODS, [pdb("pdb", 1, APP_FOO)],
                 {"node1": (["p1.1", "p1.2"], 1)}, "", id="preemption with violation of same pdb"),
    pytest.param(FIT, [node("node1")], pod("p", HIGH, VERY_LARGE), SAME_PDB_PODS,
                 [pdb("pdb", 1, APP_FOO, disrupted=("p2",))], {"node1": (["p1.1", "p1.2"], 1)}, "",
                 id="preemption with violation of the pdb with pod whose eviction was processed, the victim doesn't "
                    "belong to DisruptedPods"),
    pytest.param(FIT, [node("node1")], pod("p", HIGH, VERY_LARGE), SAME_PDB_PODS,
                 [pdb("pdb", 1, APP_FOO, disrupted=("p1.2",))], {"node1": (["p1.1", "p1.2"], 0)}, "",
                 id="preemption with violation of the pdb with pod whose eviction was processed, the victim belongs "
                    "to DisruptedPods"),
    pytest.param(FIT, [node("node1")], pod("p", HIGH, VERY_LARGE),
                 SAME_PDB_PODS + [pod("p1.3", MID, MEDIUM, "node1", APP_FOO)],
                 [pdb("pdb", 1, APP_FOO, disrupted=("p1.3",))], {"node1": (["p1.1", "p1.2", "p1.3"], 1)}, "",
                 id="preemption with violation of the pdb with pod whose eviction was processed, the victim which "
                    "belongs to DisruptedPods is treated as 'nonViolating'"),
    pytest.param(FIT, [node("node1")], pod("p", HIGH, VERY_LARGE), SAME_PDB_PODS, [pdb("everything", 0, selector={})],
                 {"node1": (["p1.1", "p1.2"], 0)}, "",
                 id="a PDB with an empty selector matches nothing, as in upstream's filterPodsWithPDBViolation"),
    pytest.param(FIT, [node("node1")], pod("p", HIGH, VERY_LARGE),
                 [pod("p1.1", MID, MEDIUM, "node1"), pod("p1.2", MID, MEDIUM, "node1")],
                 [pdb("no-foo", 0, selector={"matchExpressions": [{"key": "foo", "operator": "DoesNotExist"}]})],
                 {"node1": (["p1.1", "p1.2"], 0)}, "",
                 id="a pod without labels matches no PDB"),
])
def test_dry_run_preemption(profile: list[str], nodes: list[Any], preemptor: Pod, pods: list[Pod], pdbs: list[Any],
                            want: dict[str, tuple[list[str], int]], want_msg: str) -> None:
    env = cluster(nodes, pods, pdbs, profile=profile)
    before = table(env.cache)
    taken = spy_paths(env)
    got, msg = dry_run(env, preemptor)
    assert same_victims(got, want), got
    assert msg == want_msg
    assert table(env.cache) == before
    if {"InterPodAffinity", "PodTopologySpread"} & set(profile):
        assert taken == ["each"]     # their AddPod/RemovePod take each node on its own


FIVE = [node(f"node{i}") for i in range(1, 6)]


def five_pods(prio: dict[int, int] | None = None, foo: tuple[int, ...] = ()) -> list[Pod]:
    """p<i> on node<i>, largeRes, midPriority unless ``prio`` says otherwise; app=foo on the nodes in ``foo``."""
    return [pod(f"p{i}", (prio or {}).get(i, MID), LARGE, f"node{i}", APP_FOO if i in foo else None)
            for i in range(1, 6)]


@pytest.mark.parametrize("args, pods, pdbs, preemptors, offsets, want", [
    pytest.param({"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 1}, five_pods(), [], ["p"], [4],
                 [{"node5": (["p5"], 0), "node1": (["p1"], 0)}],
                 id="all nodes are possible candidates, but DefaultPreemptionArgs limits to 2: offset 4 takes "
                    "node5, node1"),
    pytest.param({"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 1},
                 five_pods({2: VERY_HIGH, 5: VERY_HIGH}), [], ["p"], [4],
                 [{"node1": (["p1"], 0), "node3": (["p3"], 0)}],
                 id="some nodes are not possible candidates, DefaultPreemptionArgs limits to 2: node5 (no), node1, "
                    "node2 (no), node3"),
    pytest.param({"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 1}, five_pods(), [],
                 ["tp1", "tp2", "tp3"], [4, 1, 3],
                 [{"node5": (["p5"], 0), "node1": (["p1"], 0)}, {"node2": (["p2"], 0), "node3": (["p3"], 0)},
                  {"node4": (["p4"], 0), "node5": (["p5"], 0)}],
                 id="preemption offset across multiple scheduling cycles and wrap around"),
    pytest.param({"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 2}, five_pods(foo=(1, 2, 5)),
                 [pdb("foo", 0, APP_FOO)], ["p"], [4],
                 [{"node5": (["p5"], 1), "node1": (["p1"], 1), "node3": (["p3"], 0)}],
                 id="preemption looks past numCandidates until a non-PDB violating node is found: node5, node1 "
                    "(PDB), node2 (PDB, the violating list is full), node3"),
])
def test_dry_run_preemption_stops_at_num_candidates_from_the_offset(
        args: dict[str, int], pods: list[Pod], pdbs: list[Any], preemptors: list[str], offsets: list[int],
        want: list[dict[str, tuple[list[str], int]]]) -> None:
    env = cluster(FIVE, pods, pdbs, args=args)
    env.pl.rng = Offsets(*offsets)
    for name, cycle in zip(preemptors, want):
        got, _ = dry_run(env, pod(name, HIGH, LARGE))
        assert got == cycle


def test_the_offset_comes_from_the_seeded_rng() -> None:
    """handle.seed seeds the plugin's random offset (GetOffsetAndNumCandidates), so a seeded scheduler repeats."""
    env = cluster(FIVE, five_pods(), args={"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 1},
                  seed=7)
    rng = random.Random(7)
    for name in ("tp1", "tp2", "tp3"):
        offset = rng.randrange(5)
        got, _ = dry_run(env, pod(name, HIGH, LARGE))
        assert list(got) == [f"node{(offset + k) % 5 + 1}" for k in range(2)]


# ---------------------------------------------------------------------------- TestSelectBestCandidate

@pytest.mark.parametrize("node_names, preemptor, pods, want", [
    pytest.param(["node1", "node2"], pod("p", HIGH, LARGE),
                 [pod("p1", MID, LARGE, "node1", start=0), pod("p2", MID, LARGE, "node2", start=0)],
                 ["node1", "node2"], id="a pod that fits on both nodes when lower priority pods are preempted"),
    pytest.param(["node1", "node2", "node3"], pod("p", HIGH, VERY_LARGE),
                 [pod("p1.1", MID, MEDIUM, "node1", start=0), pod("p1.2", MID, LARGE, "node1", start=0),
                  pod("p2.1", MID, MEDIUM, "node2", start=0), pod("p2.2", LOW, MEDIUM, "node2", start=0),
                  pod("p3.1", LOW, MEDIUM, "node3", start=0), pod("p3.2", LOW, MEDIUM, "node3", start=0)],
                 ["node3"], id="node with min highest priority pod is picked"),
    pytest.param(["node1", "node2", "node3"], pod("p", HIGH, VERY_LARGE),
                 [pod("p1.1", MID, MEDIUM, "node1", start=0), pod("p1.2", MID, LARGE, "node1", start=0),
                  pod("p2.1", MID, LARGE, "node2", start=0), pod("p2.2", LOW, MEDIUM, "node2", start=0),
                  pod("p3.1", MID, MEDIUM, "node3", start=0), pod("p3.2", MID, MEDIUM, "node3", start=0)],
                 ["node2"], id="when highest priorities are the same, minimum sum of priorities is picked"),
    pytest.param(["node1", "node2", "node3"], pod("p", HIGH, VERY_LARGE),
                 [pod("p1.1", MID, SMALL, "node1", start=0), pod("p1.2", NEG, SMALL, "node1", start=0),
                  pod("p1.3", MID, SMALL, "node1", start=0), pod("p1.4", NEG, SMALL, "node1", start=0),
                  pod("p2.1", MID, LARGE, "node2", start=0), pod("p2.2", NEG, MEDIUM, "node2", start=0),
                  pod("p3.1", MID, MEDIUM, "node3", start=0), pod("p3.2", NEG, SMALL, "node3", start=0),
                  pod("p3.3", LOW, SMALL, "node3", start=0)],
                 ["node2"], id="when highest priority and sum are the same, minimum number of pods is picked"),
    pytest.param(["node1", "node2", "node3"], pod("p", HIGH, VERY_LARGE),
                 [pod("p1.1", MID, SMALL, "node1", start=0), pod("p1.2", NEG, SMALL, "node1", start=0),
                  pod("p1.3", NEG, SMALL, "node1", start=0),
                  pod("p2.1", MID, LARGE, "node2", start=0), pod("p2.2", NEG, MEDIUM, "node2", start=0),
                  pod("p3.1", MID, MEDIUM, "node3", start=0), pod("p3.2", NEG, SMALL, "node3", start=0),
                  pod("p3.3", LOW, SMALL, "node3", start=0)],
                 ["node2"], id="sum of adjusted priorities is considered"),
    pytest.param(["node1", "node2", "node3", "node4"], pod("p", VERY_HIGH, VERY_LARGE),
                 [pod("p1.1", MID, SMALL, "node1", start=0), pod("p1.2", LOW, SMALL, "node1", start=0),
                  pod("p1.3", LOW, SMALL, "node1", start=0),
                  pod("p2.1", HIGH, LARGE, "node2", start=0),
                  pod("p3.1", MID, MEDIUM, "node3", start=0), pod("p3.2", LOW, SMALL, "node3", start=0),
                  pod("p3.3", LOW, SMALL, "node3", start=0), pod("p3.4", LOW, MEDIUM, "node3", start=0),
                  pod("p4.1", MID, MEDIUM, "node4", start=0), pod("p4.2", MID, SMALL, "node4", start=0),
                  pod("p4.3", MID, SMALL, "node4", start=0), pod("p4.4", NEG, SMALL, "node4", start=0)],
                 ["node1"], id="non-overlapping lowest high priority, sum priorities, and number of pods"),
    pytest.param(["node1", "node2", "node3"], pod("p", HIGH, VERY_LARGE),
                 [pod("p1.1", MID, MEDIUM, "node1", start=2), pod("p1.2", MID, MEDIUM, "node1", start=2),
                  pod("p2.1", MID, MEDIUM, "node2", start=3), pod("p2.2", MID, MEDIUM, "node2", start=3),
                  pod("p3.1", MID, MEDIUM, "node3", start=1), pod("p3.2", MID, MEDIUM, "node3", start=1)],
                 ["node2"], id="same priority, same number of victims, different start time for each node's pod"),
    pytest.param(["node1", "node2", "node3"], pod("p", HIGH, VERY_LARGE),
                 [pod("p1.1", MID, MEDIUM, "node1", start=4), pod("p1.2", MID, MEDIUM, "node1", start=2),
                  pod("p2.1", MID, MEDIUM, "node2", start=5), pod("p2.2", MID, MEDIUM, "node2", start=1),
                  pod("p3.1", MID, MEDIUM, "node3", start=3), pod("p3.2", MID, MEDIUM, "node3", start=6)],
                 ["node3"], id="same priority, same number of victims, different start time for all pods"),
    pytest.param(["node1", "node2", "node3"], pod("p", HIGH, VERY_LARGE),
                 [pod("p1.1", LOW, MEDIUM, "node1", start=4), pod("p1.2", MID, MEDIUM, "node1", start=2),
                  pod("p2.1", MID, MEDIUM, "node2", start=6), pod("p2.2", LOW, MEDIUM, "node2", start=1),
                  pod("p3.1", LOW, MEDIUM, "node3", start=3), pod("p3.2", MID, MEDIUM, "node3", start=5)],
                 ["node2"], id="different priority, same number of victims, different start time for all pods"),
])
def test_select_best_candidate(node_names: list[str], preemptor: Pod, pods: list[Pod], want: list[str]) -> None:
    env = cluster([node(n) for n in node_names], pods)
    result, status = post_filter(env, preemptor)     # every node fails Filter on resources, as upstream's
    assert status.is_success() and result is not None and result.nominated_node in want
    ((_, where, victims, _),) = env.ev.calls
    assert where == result.nominated_node
    assert sorted(victims) == sorted(p.name for p in pods if p.node_name == where)   # each node needs them all


def test_the_sum_of_priorities_offsets_each_by_2_to_the_31() -> None:
    """pickOneNodeForPreemption adds MaxInt32+1 to every victim's priority: three victims of -100, 100 and -100 sum
    to more than two of 100 and -100, though their raw sums say otherwise."""
    env = cluster([node("node1"), node("node2")],
                  [pod("a1", MID, SMALL, "node1"), pod("a2", NEG, SMALL, "node1"), pod("a3", NEG, SMALL, "node1"),
                   pod("b1", MID, LARGE, "node2"), pod("b2", NEG, MEDIUM, "node2")])
    state, diag = diagnose(env, pod("p", HIGH, VERY_LARGE))
    cands, _ = env.pl.find_candidates(state, pod("p", HIGH, VERY_LARGE), diag)
    by_node = {c.node: c for c in cands}
    assert by_node["node1"].total == 3 * OFFSET - 100 and by_node["node2"].total == 2 * OFFSET
    assert env.pl.select(cands).node == "node2"


@pytest.mark.parametrize("a, b, winner", [
    pytest.param(dict(pdb_violations=1), dict(pdb_violations=0, high=VERY_HIGH, total=9 * OFFSET), "b",
                 id="fewest PDB violations first, whatever the victims cost"),
    pytest.param(dict(high=MID), dict(high=LOW, total=9 * OFFSET), "b", id="then the lowest highest priority"),
    pytest.param(dict(total=3 * OFFSET), dict(total=2 * OFFSET, victims=3), "b",
                 id="then the smallest sum of offset priorities"),
    pytest.param(dict(victims=2), dict(victims=1, start=1.0), "b", id="then the fewest victims"),
    pytest.param(dict(start=2.0), dict(start=3.0), "b", id="then the latest start of the highest-priority victims"),
    pytest.param(dict(start=2.0), dict(start=float("inf")), "b", id="a victim not started yet counts as latest"),
    pytest.param(dict(), dict(), "a", id="a tie keeps the first candidate"),
    pytest.param(dict(gangs=2), dict(gangs=1), "b", id="tandem: fewer gangs broken among otherwise equal nodes"),
    pytest.param(dict(pdb_violations=1, gangs=0), dict(pdb_violations=0, gangs=1), "b",
                 id="tandem: PDB violations still come before gangs"),
])
def test_pick_one_node_for_preemption(a: dict[str, Any], b: dict[str, Any], winner: str) -> None:
    def cand(row: int, name: str, victims: int = 1, **kw: Any) -> Candidate:
        fields = {"pdb_violations": 0, "gangs": 0, "high": LOW, "total": victims * OFFSET, "start": 0.0} | kw
        return Candidate(row, name, [pod(f"{name}-{i}") for i in range(victims)], **fields)

    cands = [cand(0, "a", **a), cand(1, "b", **b)]
    assert DefaultPreemption(None, None).select(cands).node == winner


# ---------------------------------------------------------------------------- TestPodEligibleToPreemptOthers

@pytest.mark.parametrize("preemptor, pods, nominated_unresolvable, in_nominations, want", [
    pytest.param(pod("p_with_nominated_node", HIGH, nominated="node1"),
                 [pod("p1", LOW, node="node1", terminating=True)], True, False, (True, ""),
                 id="Pod with nominated node"),
    pytest.param(pod("p_without_nominated_node", HIGH), [], False, False, (True, ""),
                 id="Pod without nominated node"),
    pytest.param(pod("p_with_preempt_never_policy", HIGH, policy="Never"), [], False, False,
                 (False, NOT_ELIGIBLE_NEVER), id="Pod with 'PreemptNever' preemption policy"),
    pytest.param(pod("p_with_nominated_node", HIGH, nominated="node1"),
                 [pod("p1", LOW, node="node1", preempted=True)], False, False, (False, NOT_ELIGIBLE_TERMINATING),
                 id="preemption victim pod terminating, as indicated by the dedicated DisruptionTarget condition"),
    pytest.param(pod("p_with_nominated_node", HIGH, nominated="node1"),
                 [pod("p1", LOW, node="node1", terminating=True)], False, False, (True, ""),
                 id="non-victim Pods terminating"),
    pytest.param(pod("p", HIGH), [pod("p1", LOW, node="node1", preempted=True)], False, True,
                 (False, NOT_ELIGIBLE_TERMINATING),
                 id="tandem: a nomination the scheduler holds, not yet in the pod's status, counts the same"),
    pytest.param(pod("p", HIGH, nominated="node1"), [pod("p1", LOW, node="node1", preempted=True)], True, False,
                 (True, ""), id="a victim terminating on a nominated node that became unresolvable holds nothing"),
    pytest.param(pod("p", HIGH, nominated="node1"), [pod("p1", HIGH, node="node1", preempted=True)], False, False,
                 (True, ""), id="a terminating victim of equal priority is not the pod's own"),
])
def test_pod_eligible_to_preempt_others(preemptor: Pod, pods: list[Pod], nominated_unresolvable: bool,
                                        in_nominations: bool, want: tuple[bool, str]) -> None:
    env = cluster([node("node1")], pods, nominated=[(preemptor, "node1")] if in_nominations else ())
    diag = Diagnosis(num_all_nodes=1)
    if nominated_unresolvable:   # e.g. tainttoleration.ErrReasonNotMatch on the nominated node
        diag.unresolvable_rows = np.array([env.cache.nodes.row("node1")], dtype=np.int64)
    assert env.pl.eligible(preemptor, diag) == want


# ---------------------------------------------------------------------------- TestNodesWherePreemptionMightHelp

@pytest.mark.parametrize("statuses, want", [
    pytest.param({"node1": UU, "node2": UU, "node3": UU, "node4": UU}, [], id="No node should be attempted"),
    pytest.param({"node1": U, "node2": UU, "node3": UU}, ["node1"],
                 id="ErrReasonAntiAffinityRulesNotMatch should be tried as it indicates that the pod is unschedulable "
                    "due to inter-pod anti-affinity"),
    pytest.param({"node1": UU, "node2": U}, ["node2"],
                 id="ErrReasonAffinityRulesNotMatch should not be tried, but ErrReasonAntiAffinityRulesNotMatch "
                    "should be tried"),
    pytest.param({"node1": UU, "node2": U}, ["node2"], id="Mix of failed predicates works fine"),
    pytest.param({"node1": UU}, [], id="Node condition errors should be considered unresolvable"),
    pytest.param({"node1": UU, "node2": UU, "node3": UU}, [],
                 id="ErrVolume... errors should not be tried as it indicates that the pod is unschedulable due to no "
                    "matching volumes for pod on node"),
    pytest.param({"node1": U, "node2": UU, "node3": U}, ["node1", "node3"],
                 id="ErrReasonConstraintsNotMatch should be tried as it indicates that the pod is unschedulable due "
                    "to topology spread constraints"),
    pytest.param({"node2": UU, "node3": U, "node4": UU}, ["node3"],
                 id="UnschedulableAndUnresolvable status should be skipped but Unschedulable should be tried"),
])
def test_nodes_where_preemption_might_help(statuses: dict[str, Code], want: list[str]) -> None:
    """Only nodes Filter found Unschedulable; a node absent from the statuses is UnschedulableAndUnresolvable, as in
    upstream's NodeToStatus since 1.31 (the older table expected absent nodes to be tried)."""
    env = cluster([node(f"node{i}") for i in range(1, 5)])
    _, diag = diagnose(env, pod("p", HIGH), statuses)
    assert env.cache.nodes.names_of(env.pl.potential_rows(diag)) == want


def test_the_codes_filter_gives_pick_the_nodes_worth_a_dry_run() -> None:
    """The same from a real Filter: an untolerated taint, an unschedulable node and a node selector are
    UnschedulableAndUnresolvable; too little room and anti-affinity are Unschedulable."""
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "hostname"}]}}
    nodes = [node("tainted", disk="ssd"), node("cordoned", disk="ssd"), node("full", disk="ssd"),
             node("neighbour", disk="ssd"), node("hdd", disk="hdd")]
    nodes[0]["spec"] = {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}
    nodes[1]["spec"] = {"unschedulable": True}
    env = cluster(nodes, [pod("big", LOW, VERY_LARGE, "full"), pod("web", LOW, SMALL, "neighbour", {"app": "web"})],
                  profile=None)
    preemptor = pod("p", HIGH, SMALL, nodeSelector={"disk": "ssd"}, affinity=anti)
    _, diag = diagnose(env, preemptor)
    assert env.cache.nodes.names_of(np.sort(env.pl.potential_rows(diag))) == ["full", "neighbour"]


# ---------------------------------------------------------------------------- TestPreEnqueue

def test_pre_enqueue_holds_the_preemptor_until_its_evictions_end() -> None:
    env = cluster([node("node1", ONE_POD)], [pod("p1", node="node1")])
    p, other = pod("p", HIGH), pod("p_other", HIGH)
    assert env.pl.pre_enqueue(p).is_success()
    result, status = post_filter(env, p)
    assert status.is_success() and result == PostFilterResult("node1")
    assert env.pl.pre_enqueue(p) == Status(UU, WAITING)
    assert env.fw.pre_enqueue(p).plugin == "DefaultPreemption"
    assert env.pl.pre_enqueue(other).is_success()
    env.ev.preempting.clear()    # the evictions ended
    assert env.pl.pre_enqueue(p).is_success()


def test_without_an_eviction_executor_nothing_is_held() -> None:
    handle = Handle(Cache(), clock=FakeClock())
    assert DefaultPreemption(None, handle).pre_enqueue(pod("p", HIGH)).is_success()


# ---------------------------------------------------------------------------- args

@pytest.mark.parametrize("nodes, percentage, absolute, want", [
    pytest.param(5, 10, 100, 5, id="the defaults on a small cluster: every node (absolute 100, capped by nodes)"),
    pytest.param(1000, 10, 100, 100, id="the defaults at 1,000 nodes: 10% is the absolute minimum"),
    pytest.param(5000, 10, 100, 500, id="the defaults at 5,000 nodes: 10%"),
    pytest.param(5, 40, 1, 2, id="40% of 5 nodes is 2"),
    pytest.param(5, 40, 3, 3, id="minCandidateNodesAbsolute raises a smaller percentage"),
    pytest.param(10, 33, 0, 3, id="the percentage rounds down"),
    pytest.param(7, 100, 0, 7, id="100% is every node"),
    pytest.param(3, 0, 10, 3, id="never more than the nodes"),
    pytest.param(0, 10, 100, 0, id="no nodes, no candidates"),
])
def test_num_candidates(nodes: int, percentage: int, absolute: int, want: int) -> None:
    """calculateNumCandidates: numNodes * percentage / 100, at least the absolute minimum, at most numNodes."""
    assert num_candidates(nodes, percentage, absolute) == want


@pytest.mark.parametrize("raw, want", [
    pytest.param({"minCandidateNodesPercentage": 10, "minCandidateNodesAbsolute": 100}, None,
                 id="valid args (default)"),
    pytest.param({"minCandidateNodesPercentage": -1, "minCandidateNodesAbsolute": 100},
                 "args.minCandidateNodesPercentage: Invalid value: -1: not in valid range [0, 100]",
                 id="negative minCandidateNodesPercentage"),
    pytest.param({"minCandidateNodesPercentage": 900, "minCandidateNodesAbsolute": 100},
                 "args.minCandidateNodesPercentage: Invalid value: 900: not in valid range [0, 100]",
                 id="minCandidateNodesPercentage over 100"),
    pytest.param({"minCandidateNodesPercentage": 20, "minCandidateNodesAbsolute": -1},
                 "args.minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)",
                 id="negative minCandidateNodesAbsolute"),
    pytest.param({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
                 "args.minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as "
                 "minCandidateNodesAbsolute", id="all zero"),
    pytest.param({"minCandidateNodesPercentage": -1, "minCandidateNodesAbsolute": -1},
                 "args.minCandidateNodesPercentage: Invalid value: -1: not in valid range [0, 100]",
                 id="both negative: the first of upstream's two errors"),
    pytest.param({"minCandidateNodesPercent": 10}, "args.minCandidateNodesPercent: unknown field",
                 id="an unknown field is an error (strict decoding)"),
])
def test_validate_default_preemption_args(raw: dict[str, Any], want: str | None) -> None:
    if want is None:
        args = parse_args(DefaultPreemptionArgs, raw, "args")
        assert (args.min_candidate_nodes_percentage, args.min_candidate_nodes_absolute) == (10, 100)
        return
    with pytest.raises(ConfigError) as e:
        parse_args(DefaultPreemptionArgs, raw, "args")
    assert str(e.value).startswith(want)


def test_args_default_as_upstream_and_reach_the_plugin_from_the_configuration() -> None:
    assert parse_args(DefaultPreemptionArgs, None, "args") == DefaultPreemptionArgs(10, 100, True)
    env = cluster([node("node1")], args={"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 2,
                                         "asyncPreemption": False})
    assert env.pl.args == DefaultPreemptionArgs(40, 2, False)
    with pytest.raises(ConfigError, match=r"pluginConfig\[0\]\.args\.minCandidateNodesAbsolute: Invalid value: -5"):
        cluster([node("node1")], args={"minCandidateNodesAbsolute": -5})


# ---------------------------------------------------------------------------- nominated pods

@pytest.mark.parametrize("nominated_prio, want, want_msg", [
    pytest.param(VERY_HIGH, {}, "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.",
                 id="a nominated pod of higher priority keeps its room: evicting v is not enough"),
    pytest.param(HIGH, {}, "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.",
                 id="a nominated pod of equal priority keeps its room too"),
    pytest.param(LOW, {"node1": (["v"], 0)}, "", id="a nominated pod of lower priority does not count"),
])
def test_the_dry_run_filters_with_nominated_pods(nominated_prio: int, want: dict[str, Any], want_msg: str) -> None:
    """SelectVictimsOnNode runs the filters with the nominated pods of equal or higher priority on the node."""
    env = cluster([node("node1")], [pod("v", LOW, LARGE, "node1")],
                  nominated=[(pod("n", nominated_prio, MEDIUM), "node1")])
    assert dry_run(env, pod("p", HIGH, {"cpu": "400m", "memory": "400"}), None) == (want, want_msg)


def test_the_preemptors_own_nomination_does_not_count_against_it() -> None:
    p = pod("p", HIGH, {"cpu": "400m", "memory": "400"})
    env = cluster([node("node1")], [pod("v", LOW, LARGE, "node1")], nominated=[(p, "node1")])
    assert dry_run(env, p, None) == ({"node1": (["v"], 0)}, "")


# ---------------------------------------------------------------------------- gangs (tandem)

def gang_cluster(mode: str, priority: int | None = None, member_prio: int = LOW, **kw: Any) -> Env:
    """node1: g-1 (LARGE) and h1 (HIGH, MEDIUM), full; node2: g-2 (SMALL) and h2 (HIGH, 400m), full. The preemptor
    (MID, LARGE) fits on node1 once g-1 goes; on node2 nothing it may take makes room."""
    pods = [pod("g-1", member_prio, LARGE, "node1", group="g", start=1), pod("h1", HIGH, MEDIUM, "node1"),
            pod("g-2", member_prio, SMALL, "node2", group="g", start=2),
            pod("h2", HIGH, {"cpu": "400m", "memory": "400"}, "node2")]
    return cluster(TWO, pods, groups=[pod_group("g", mode, priority)], **kw)


@pytest.mark.parametrize("mode, want_victims", [
    pytest.param(DISRUPTION_POD_GROUP, ["g-1", "g-2"],
                 id="PodGroup: the gang goes whole, its member on node2 too"),
    pytest.param(DISRUPTION_SINGLE, ["g-1"], id="Single: members are victims one by one, as upstream's pods"),
])
def test_a_pod_group_mode_gang_is_a_victim_only_whole(mode: str, want_victims: list[str]) -> None:
    env = gang_cluster(mode)
    result, status = post_filter(env, pod("p", MID, LARGE))
    assert status.is_success() and result == PostFilterResult("node1")
    assert env.ev.calls == [("p", "node1", want_victims, False)]


@pytest.mark.parametrize("mode, want", [
    pytest.param(DISRUPTION_POD_GROUP, {"node1": (["g-1", "g-2"], 0)},
                 id="PodGroup: reprieved as one, the two members do not fit back together"),
    pytest.param(DISRUPTION_SINGLE, {"node1": (["g-2"], 0)},
                 id="Single: g-1 (earlier start) is reprieved, g-2 stays a victim"),
])
def test_a_pod_group_mode_gang_is_reprieved_as_one(mode: str, want: dict[str, Any]) -> None:
    pods = [pod("g-1", LOW, SMALL, "node1", group="g", start=1), pod("g-2", LOW, SMALL, "node1", group="g", start=2),
            pod("h", HIGH, MEDIUM, "node1")]
    env = cluster([node("node1")], pods, groups=[pod_group("g", mode)])
    assert dry_run(env, pod("p", VERY_HIGH, MEDIUM)) == (want, "")


@pytest.mark.parametrize("mode", [DISRUPTION_POD_GROUP, DISRUPTION_SINGLE])
@pytest.mark.parametrize("group_prio, member_prio, want_node", [
    pytest.param(VERY_HIGH, LOW, None, id="a high PodGroup priority shields members of low priority"),
    pytest.param(LOW, VERY_HIGH, "node1", id="a low PodGroup priority exposes members of high priority"),
    pytest.param(None, LOW, "node1", id="without one, the members' own priority counts"),
])
def test_the_pod_group_priority_overrides_its_members(mode: str, group_prio: int | None, member_prio: int,
                                                      want_node: str | None) -> None:
    env = gang_cluster(mode, group_prio, member_prio)
    result, status = post_filter(env, pod("p", MID, LARGE))
    if want_node is None:
        assert (result, status) == cleared(f"0/2 nodes are available: 2 {NO_VICTIMS}.")
    else:
        assert result == PostFilterResult(want_node)


def test_a_pod_group_mode_gangs_members_elsewhere_count_against_pdbs() -> None:
    """A PDB allows one disruption of app=foo; the gang's two members go (g-2 from node2), so one violates it."""
    pods = [pod("g-1", LOW, LARGE, "node1", APP_FOO, group="g"), pod("h1", HIGH, MEDIUM, "node1"),
            pod("g-2", LOW, SMALL, "node2", APP_FOO, group="g"),
            pod("h2", HIGH, {"cpu": "400m", "memory": "400"}, "node2")]
    env = cluster(TWO, pods, groups=[pod_group("g")], pdbs=[pdb("foo", 1, APP_FOO)])
    assert dry_run(env, pod("p", MID, LARGE)) == ({"node1": (["g-1", "g-2"], 1)}, "")


def test_a_member_that_outranks_the_preemptor_shields_its_whole_gang() -> None:
    """g-2 has the preemptor's priority: the gang, evicted only whole, is no victim, though g-1 alone would do."""
    pods = [pod("g-1", LOW, LARGE, "node1", group="g"), pod("h", HIGH, MEDIUM, "node1"),
            pod("g-2", MID, SMALL, "node2", group="g")]
    env = cluster([node("node1"), node("node2", SMALL)], pods, groups=[pod_group("g")])
    assert dry_run(env, pod("p", MID, LARGE)) == ({}, f"0/2 nodes are available: 2 {NO_VICTIMS}.")
    env = cluster([node("node1"), node("node2", SMALL)], pods, groups=[pod_group("g", DISRUPTION_SINGLE)])
    assert dry_run(env, pod("p", MID, LARGE)) == ({"node1": (["g-1"], 0)}, "")


def test_a_pod_group_mode_gangs_victims_keep_their_own_priorities() -> None:
    """Whole gangs on both nodes; node1's has a member of priority MID (and one of NEG, placed first), node2's only
    LOW members: node2's highest victim is lower, so node2 wins, and node1's victims list MID first."""
    pods = [pod("g-1", NEG, SMALL, "node1", group="g"), pod("g-2", MID, LARGE, "node1", group="g"),
            pod("h-1", LOW, SMALL, "node2", group="h"), pod("h-2", LOW, LARGE, "node2", group="h")]
    env = cluster(TWO, pods, groups=[pod_group("g"), pod_group("h")])
    assert dry_run(env, pod("p", HIGH, VERY_LARGE)) == (
        {"node1": (["g-2", "g-1"], 0), "node2": (["h-1", "h-2"], 0)}, "")
    result, _ = post_filter(env, pod("p", HIGH, VERY_LARGE))
    assert result == PostFilterResult("node2")


def test_among_otherwise_equal_nodes_the_one_breaking_fewer_gangs_wins() -> None:
    """node1's victims are members of two gangs, node2's of one; priorities, counts and start times tie, so upstream
    would keep the first (node1)."""
    pods = [pod("a-1", LOW, MEDIUM, "node1", group="a"), pod("b-1", LOW, MEDIUM, "node1", group="b"),
            pod("c-1", LOW, MEDIUM, "node2", group="c"), pod("c-2", LOW, MEDIUM, "node2", group="c")]
    groups = [pod_group(g, DISRUPTION_SINGLE) for g in "abc"]
    env = cluster(TWO, pods, groups=groups)
    result, _ = post_filter(env, pod("p", HIGH, VERY_LARGE))
    assert result == PostFilterResult("node2")
    assert env.ev.calls == [("p", "node2", ["c-1", "c-2"], False)]
    # a PDB over node2's victims outranks the gangs
    env = cluster(TWO, pods, groups=groups, pdbs=[pdb("c", 0, {POD_GROUP_LABEL: "c"})])
    result, _ = post_filter(env, pod("p", HIGH, VERY_LARGE))
    assert result == PostFilterResult("node1")


# ---------------------------------------------------------------------------- the two dry-run paths

AGREEMENT = [
    pytest.param(TWO, P1_P2_MID_LARGE, [], [], pod("p", HIGH, LARGE), id="fits on both nodes"),
    pytest.param(TWO, [pod("p1.1", LOW, SMALL, "node1"), pod("p1.2", MID, LARGE, "node1"),
                       pod("p2", MID, LARGE, "node2")], [], [], pod("p", HIGH, LARGE),
                 id="medium priority pod is preempted, lower priority one stays"),
    pytest.param(TWO, [pod("p1.1", LOW, SMALL, "node1", start=5), pod("p1.2", LOW, SMALL, "node1", start=4),
                       pod("p1.3", MID, MEDIUM, "node1", start=3), pod("p1.4", HIGH, SMALL, "node1", start=2),
                       pod("p2", HIGH, LARGE, "node2", start=1)], [], [], pod("p", HIGH, LARGE),
                 id="mixed priorities and start times"),
    pytest.param([node("node1")], SAME_PDB_PODS + [pod("p1.3", MID, MEDIUM, "node1", APP_FOO)],
                 [pdb("pdb", 1, APP_FOO, disrupted=("p1.3",))], [], pod("p", HIGH, VERY_LARGE),
                 id="PDB violations and disrupted pods"),
    pytest.param(FIVE, five_pods({2: VERY_HIGH}, foo=(1, 5)), [pdb("foo", 0, APP_FOO)], [], pod("p", HIGH, LARGE),
                 id="five nodes, PDBs and a node without victims"),
    pytest.param(TWO, [pod("g-1", LOW, LARGE, "node1", group="g"), pod("h1", HIGH, MEDIUM, "node1"),
                       pod("g-2", LOW, SMALL, "node2", group="g"), pod("x", LOW, LARGE, "node2")],
                 [], [pod_group("g")], pod("p", MID, LARGE), id="a PodGroup-mode gang across both nodes"),
    pytest.param([node("node1")], [pod("g-1", LOW, SMALL, "node1", group="g", start=1),
                                   pod("g-2", LOW, SMALL, "node1", group="g", start=2),
                                   pod("h", HIGH, MEDIUM, "node1")],
                 [], [pod_group("g")], pod("p", VERY_HIGH, MEDIUM), id="a PodGroup-mode gang reprieved as one"),
]


@pytest.mark.parametrize("nodes, pods, pdbs, groups, preemptor", AGREEMENT)
def test_the_batched_and_the_per_node_dry_runs_agree(nodes: list[Any], pods: list[Pod], pdbs: list[Any],
                                                     groups: list[Any], preemptor: Pod) -> None:
    """The same resource-only scenario three ways: batched; per node because the preemptor asks for a host port;
    per node because a PreFilter with AddPod/RemovePod is in play. Same candidates, same victims in the same order,
    and the node table as it was, byte for byte."""
    with_port = changed(preemptor, ports=(8080,))
    runs = []
    for profile, p, path in ((FIT_PORTS, preemptor, "batched"), (FIT_PORTS, with_port, "each"),
                             (FIT_EACH, preemptor, "each")):
        env = cluster(nodes, pods, pdbs, groups, profile=profile)
        before = table(env.cache)
        taken = spy_paths(env)
        got, msg = dry_run(env, p)
        assert taken == [path]
        assert table(env.cache) == before
        runs.append((got, msg))
    assert runs[0][0], "the scenario has candidates"
    assert runs[0] == runs[1] == runs[2]


def test_a_victim_holding_the_host_port_is_evicted_and_the_port_columns_come_back() -> None:
    """NodePorts: the preemptor wants host port 8080, which a low-priority pod holds on node1 (node2's holder
    outranks it). The per-node dry run takes that pod off and back on; the port columns end as they began."""
    pods = [pod("holder-1", LOW, SMALL, "node1", ports=(8080,)), pod("other-1", LOW, SMALL, "node1"),
            pod("holder-2", VERY_HIGH, SMALL, "node2", ports=(8080,))]
    env = cluster(TWO, pods, profile=FIT_PORTS)
    before = table(env.cache)
    taken = spy_paths(env)
    preemptor = pod("p", HIGH, SMALL, ports=(8080,))
    assert dry_run(env, preemptor, None) == ({"node1": (["holder-1"], 0)}, "")
    assert taken == ["each"] and table(env.cache) == before
    result, status = post_filter(env, preemptor)
    assert result == PostFilterResult("node1") and env.ev.calls == [("p", "node1", ["holder-1"], False)]
    assert table(env.cache) == before


def test_the_node_table_is_unchanged_after_preemption_in_the_default_profile() -> None:
    """Spread, anti-affinity, ports, PDBs and a gang together, through PostFilter in tandem's default profile."""
    spread = [SPREAD_FOO | {"topologyKey": "zone"}]
    pods = [pod("a1", LOW, MEDIUM, "node-a", {"foo": ""}, ports=(80,)), pod("a2", MID, MEDIUM, "node-a", APP_FOO),
            pod("b1", LOW, LARGE, "node-b", {"foo": ""}, group="g"), pod("b2", HIGH, SMALL, "node-b"),
            pod("x1", LOW, LARGE, "node-x", group="g"), pod("x2", LOW, MEDIUM, "node-x", {"foo": ""})]
    env = cluster([node("node-a/zone1"), node("node-b/zone1"), node("node-x/zone2")], pods,
                  [pdb("foo", 0, APP_FOO)], [pod_group("g")], profile=None)
    before = table(env.cache)
    result, status = post_filter(env, pod("p", HIGH, LARGE, labels={"foo": ""}, ports=(80,),
                                          topologySpreadConstraints=spread))
    assert status.is_success(), status
    assert table(env.cache) == before


# the framework's words for the Filter's error (RunFilterPlugins), under DefaultPreemption's "preemption: "
FILTER_ERROR = 'preemption: running "TestFailsAfter" filter plugin: injected error'


@pytest.mark.parametrize("budget, want", [
    pytest.param(0, (None, Status(Code.ERROR, FILTER_ERROR)), id="an error on the first filter"),
    pytest.param(1, (None, Status(Code.ERROR, FILTER_ERROR)),
                 id="an error as node1's b is added back: an Error, as no node is left"),
    pytest.param(2, nominated("node1"), id="an error on node2 only: node1 is still chosen, the error forgotten"),
    pytest.param(4, nominated("node1"), id="no error"),
])
@pytest.mark.parametrize("ports", [(), (8080,)], ids=["batched", "per node"])
def test_an_error_in_the_dry_run_leaves_the_node_table_as_it_was(
        ports: tuple[int, ...], budget: int, want: tuple[PostFilterResult | None, Status]) -> None:
    """A Filter plugin fails with an Error after ``budget`` calls, at any step of either dry run. With no candidate
    left, upstream's PostFilter returns the Error; with one, it preempts there."""
    pods = [pod("a", LOW, MEDIUM, "node1", ports=(80,)), pod("b", MID, MEDIUM, "node1"), pod("c", LOW, LARGE, "node2")]
    env = cluster(TWO, pods, profile=plugins("NodePorts", "NodeResourcesFit", "TestFailsAfter"))
    p = pod("p", HIGH, LARGE, ports=ports)
    state, diag = diagnose(env, p, EVERY)
    env.fw.plugins["TestFailsAfter"].budget = budget
    before = table(env.cache)
    assert env.fw.run_post_filter(state, p, diag) == want
    assert table(env.cache) == before


# ---------------------------------------------------------------------------- a property: the paths agree

@st.composite
def scenarios(draw: Any) -> tuple[list[Any], list[Pod], list[Any], list[Any], Pod, int]:
    n_nodes = draw(st.integers(1, 4))
    nodes = [node(f"node{i}", {"cpu": f"{draw(st.sampled_from([400, 500, 800]))}m", "memory": "1000",
                               "pods": str(draw(st.sampled_from([3, 32])))}) for i in range(n_nodes)]
    prios = st.sampled_from([NEG, LOW, MID, HIGH])
    modes = draw(st.sampled_from([(), (DISRUPTION_POD_GROUP,), (DISRUPTION_SINGLE,)]))
    group_prio = draw(st.sampled_from([None, LOW, HIGH]))
    pods = []
    for i in range(draw(st.integers(0, 9))):
        pods.append(pod(f"v{i}", draw(prios), {"cpu": f"{draw(st.sampled_from([100, 200, 300]))}m"},
                        f"node{draw(st.integers(0, n_nodes - 1))}",
                        APP_FOO if draw(st.booleans()) else None, start=draw(st.sampled_from([None, 1, 2, 3])),
                        group="g" if modes and draw(st.booleans()) else ""))
    pdbs = [pdb("foo", draw(st.integers(0, 2)), APP_FOO)] if draw(st.booleans()) else []
    groups = [pod_group("g", modes[0], group_prio)] if modes else []
    preemptor = pod("p", draw(st.sampled_from([LOW, MID, HIGH, VERY_HIGH])),
                    {"cpu": f"{draw(st.sampled_from([200, 300, 500, 700]))}m"})
    absolute = draw(st.sampled_from([1, 2, 100]))
    return nodes, pods, pdbs, groups, preemptor, absolute


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_property_the_batched_and_the_per_node_dry_runs_agree(scenario: Any) -> None:
    nodes, pods, pdbs, groups, preemptor, absolute = scenario
    note(f"nodes {[(n['metadata']['name'], n['status']['allocatable']) for n in nodes]}")
    note(f"pods {[(p.name, p.node_name, p.priority, p.requests, p.start_time, p.pod_group, p.labels) for p in pods]}")
    note(f"pdbs {[(b.name, b.disruptions_allowed) for b in pdbs]}, "
         f"groups {[(g.disruption_mode, g.priority) for g in groups]}")
    note(f"preemptor {preemptor.priority} {preemptor.requests}, minCandidateNodesAbsolute {absolute}")
    args = {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": absolute}
    runs = []
    for profile in (FIT, FIT_EACH):
        env = cluster(nodes, pods, pdbs, groups, profile=profile, args=args, seed=1)
        before = table(env.cache)
        runs.append(dry_run(env, preemptor))
        assert table(env.cache) == before
    assert runs[0] == runs[1]


# ---------------------------------------------------------------------------- a gang preempting (tandem's own)


def gang_env(placed: list[Pod], members: list[Pod], min_member: int) -> Env:
    """One node (cpu 1) with ``placed``, Coscheduling on, and the pending ``members`` of gang "g" nominated to it."""
    env = cluster([node("node1", {"cpu": "1", "memory": "1Gi"})], placed, groups=[pod_group("g", min_member=min_member)],
                  profile=["Coscheduling", "NodeResourcesFit", "DefaultPreemption", "DefaultBinder"])
    for m in members:
        env.cache.gangs.update_membership(None, m)
        env.fw.handle.pods[m.uid] = m
        env.cache.nominations.set(m, "node1")
    return env


def test_a_gang_that_cannot_be_whole_gives_up_its_members_nominations() -> None:
    """A higher-priority pod took the node the gang had preempted for: two members of 1 cpu no longer fit one
    node of 1 cpu even with every lower pod gone, so nothing is evicted and both nominations go (else they would
    hold room against pods of equal or lower priority for good)."""
    members = [pod(f"g-{i}", MID, {"cpu": "1"}, group="g") for i in (1, 2)]
    env = gang_env([pod("low", LOW, {"cpu": "500m"}, "node1")], members, 2)
    result, status = post_filter(env, members[0])
    assert (result, status.code) == (PostFilterResult(""), Code.UNSCHEDULABLE)
    assert env.ev.calls == [] and sorted(env.ev.withdrawn) == ["g-1", "g-2"]


def test_a_gang_whose_victims_still_terminate_keeps_its_nominations() -> None:
    """As PodEligibleToPreemptOthers for one pod: a lower-priority pod preempted earlier is still terminating on a
    member's nominated node, so the gang neither preempts again nor lets its room go."""
    members = [pod(f"g-{i}", MID, {"cpu": "500m"}, group="g") for i in (1, 2)]
    env = gang_env([pod("victim", LOW, {"cpu": "1"}, "node1", preempted=True)], members, 2)
    result, status = post_filter(env, members[0])
    assert result is None and status.message() == "preemption: " + NOT_ELIGIBLE_TERMINATING
    assert env.ev.calls == [] and env.ev.withdrawn == []
    assert env.cache.nominations.get("g-1") == "node1"
