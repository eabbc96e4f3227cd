"""Tests for plugins/node_resources_fit.py: NodeResourcesFit as kube-scheduler's.

Expected reasons, codes and integer scores follow upstream's fit.go,
least_allocated.go, most_allocated.go and requested_to_capacity_ratio.go
(worked out by hand in each case's comment); a scalar transcription of the
Go scorers checks the vectorized ones on random tables.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest

from plugins.node_resources_fit import (
    NodeResourcesFit, NodeResourcesFitArgs, RequestedToCapacityRatioParam, ResourceSpec, ScoringStrategy,
    UtilizationShapePoint, broken_linear_lut,
)
from scheduler.framework import (
    ActionType, Code, ConfigError, CycleState, Handle, QueueingHint, Resource, parse_args,
)
from scheduler.framework.clock import FakeClock
from scheduler.framework.interface import EnqueueExtensions, FilterPlugin, PreFilterPlugin, PreScorePlugin, ScorePlugin
from scheduler.framework.registry import REGISTRY
from scheduler.model import parse_node, parse_pod
from scheduler.state.cache import Cache

GPU = "example.com/gpu"
UNSCHED, UNRESOLVABLE = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE


# ---------------------------------------------------------------------------- builders

def node(name: str, **alloc: Any) -> dict[str, Any]:
    """A node whose allocatable is ``alloc`` (keys with _ read as -), 110 pods unless given."""
    res = {k.replace("_", "-"): str(v) for k, v in alloc.items()}
    res.setdefault("pods", "110")
    return {"metadata": {"name": name}, "status": {"allocatable": res}}


def ext_node(name: str, ext: dict[str, Any], **alloc: Any) -> dict[str, Any]:
    n = node(name, **alloc)
    n["status"]["allocatable"].update({k: str(v) for k, v in ext.items()})
    return n


def c(requests: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A container requesting ``requests``."""
    out: dict[str, Any] = {"name": "c", "image": "img"}
    if requests is not None:
        out["resources"] = {"requests": {k: str(v) for k, v in requests.items()}}
    out.update(extra)
    return out


_uid = 0


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = (), overhead: dict[str, Any] | None = None,
        on: str = "", name: str = "") -> Any:
    global _uid
    _uid += 1
    name = name or f"p{_uid}"
    spec: dict[str, Any] = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    if overhead:
        spec["overhead"] = {k: str(v) for k, v in overhead.items()}
    if on:
        spec["nodeName"] = on
    return parse_pod({"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": spec})


def cluster(nodes: list[dict[str, Any]], pods: tuple[Any, ...] = ()) -> Cache:
    cache = Cache()
    for n in nodes:
        cache.add_node(parse_node(n))
    for p in pods:
        cache.add_pod(p)
    return cache


def plugin(cache: Cache, args: dict[str, Any] | None = None) -> NodeResourcesFit:
    return NodeResourcesFit(parse_args(NodeResourcesFitArgs, args or {}, "args"), Handle(cache, clock=FakeClock()))


def run_filter(cache: Cache, p: Any, args: dict[str, Any] | None = None) -> dict[str, list[tuple[str, Code]]]:
    """Reasons (with their code) per rejected node name; passing nodes map to []."""
    pl = plugin(cache, args)
    state = CycleState()
    result, status = pl.pre_filter(state, p, cache.nodes)
    assert result is None and status.is_success()
    rows = cache.nodes.rows()
    res = pl.filter(state, p, cache.nodes, rows)
    names = cache.nodes.names_of(rows)
    out: dict[str, list[tuple[str, Code]]] = {n: [] for n in names}
    for rej in res.rejections:
        for i in np.flatnonzero(rej.mask):
            out[names[i]].append((rej.reason, rej.code))
    for i, n in enumerate(names):
        assert bool(res.passed[i]) == (not out[n]), f"{n}: passed disagrees with its reasons"
    return out


def run_score(cache: Cache, p: Any, args: dict[str, Any] | None = None, pre_score: bool = True) -> dict[str, int]:
    pl = plugin(cache, args)
    state = CycleState()
    rows = cache.nodes.rows()
    if pre_score:
        assert pl.pre_score(state, p, cache.nodes, rows).is_success()
    scores = pl.score(state, p, cache.nodes, rows)
    assert scores.dtype == np.int64
    return dict(zip(cache.nodes.names_of(rows), scores.tolist()))


def strategy(type_: str, *resources: tuple[str, int], shape: list[tuple[int, int]] | None = None) -> dict[str, Any]:
    s: dict[str, Any] = {"type": type_}
    if resources:
        s["resources"] = [{"name": n, "weight": w} for n, w in resources]
    if shape is not None:
        s["requestedToCapacityRatio"] = {"shape": [{"utilization": u, "score": sc} for u, sc in shape]}
    return {"scoringStrategy": s}


# ---------------------------------------------------------------------------- the plugin's shape

def test_plugin_registers_under_its_upstream_name_with_the_extension_points_it_serves():
    assert REGISTRY["NodeResourcesFit"] is NodeResourcesFit
    pl = plugin(cluster([]))
    for proto in (PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
        assert isinstance(pl, proto), proto.__name__


# ---------------------------------------------------------------------------- filter

FILTER_CASES = [
    pytest.param(
        [node("n1", cpu=4, memory="8Gi")], (), pod(c({"cpu": "1", "memory": "1Gi"})), None,
        {"n1": []},
        id="a pod that fits the node's free resources passes"),
    pytest.param(
        [node("n1", cpu=2, memory="8Gi")], (pod(c({"cpu": "1500m"}), on="n1"),), pod(c({"cpu": "1"})), None,
        {"n1": [("Insufficient cpu", UNSCHED)]},
        id="cpu beyond what is free fails with Insufficient cpu"),
    pytest.param(
        [node("n1", cpu=2, memory="1Gi")], (pod(c({"memory": "768Mi"}), on="n1"),), pod(c({"memory": "512Mi"})), None,
        {"n1": [("Insufficient memory", UNSCHED)]},
        id="memory beyond what is free fails with Insufficient memory"),
    pytest.param(
        [node("n1", cpu=2, memory="1Gi", ephemeral_storage="10Gi")], (),
        pod(c({"ephemeral-storage": "11Gi"})), None,
        {"n1": [("Insufficient ephemeral-storage", UNRESOLVABLE)]},
        id="ephemeral storage beyond the whole node fails as unresolvable"),
    pytest.param(
        [node("n1", cpu=1, memory="1Gi"), node("n2", cpu=4, memory="8Gi")],
        (pod(c({"cpu": "500m", "memory": "512Mi"}), on="n1"),),
        pod(c({"cpu": "1", "memory": "1Gi"})), None,
        {"n1": [("Insufficient cpu", UNSCHED), ("Insufficient memory", UNSCHED)], "n2": []},
        id="a node short of cpu and memory gets both reasons and the roomy node passes"),
    pytest.param(
        [node("n1", cpu=4, memory="8Gi", pods=1)], (pod(c(), on="n1"),), pod(c({"cpu": "1"})), None,
        {"n1": [("Too many pods", UNSCHED)]},
        id="a node at its pod limit fails with Too many pods"),
    pytest.param(
        [node("n1", cpu=1, memory="8Gi", pods=1)], (pod(c({"cpu": "1"}), on="n1"),), pod(c({"cpu": "1"})), None,
        {"n1": [("Too many pods", UNSCHED), ("Insufficient cpu", UNSCHED)]},
        id="too many pods and insufficient cpu are both reported"),
    pytest.param(
        [node("n1", cpu=1, memory="8Gi", pods=1)], (pod(c({"cpu": "1"}), on="n1"),), pod(c()), None,
        {"n1": [("Too many pods", UNSCHED)]},
        id="a pod requesting nothing is only checked for the pod count"),
    pytest.param(
        [node("n1", cpu=1, memory="1Gi")], (pod(c({"cpu": "1", "memory": "1Gi"}), on="n1"),), pod(c()), None,
        {"n1": []},
        id="a pod requesting nothing fits a node with no free cpu or memory"),
    pytest.param(
        [node("n1", cpu=2, memory="8Gi", pods=1)], (pod(c(), on="n1"),), pod(c({"cpu": "3"})), None,
        {"n1": [("Too many pods", UNRESOLVABLE), ("Insufficient cpu", UNRESOLVABLE)]},
        id="a request beyond the whole allocatable makes all of that node's reasons unresolvable"),
    pytest.param(
        [ext_node("n1", {GPU: 2}, cpu=4, memory="8Gi"), ext_node("n2", {GPU: 8}, cpu=4, memory="8Gi"),
         node("n3", cpu=4, memory="8Gi")],
        (pod(c({GPU: 1}), on="n1"),), pod(c({GPU: 2})), None,
        {"n1": [(f"Insufficient {GPU}", UNSCHED)], "n2": [], "n3": [(f"Insufficient {GPU}", UNRESOLVABLE)]},
        id="an extended resource is checked like cpu and a node without it cannot host the pod"),
    pytest.param(
        [node("n1", cpu=4, memory="8Gi"), node("n2", cpu=4, memory="8Gi")], (),
        pod(c({"cpu": "1", "vendor.io/fpga": 1})), None,
        {"n1": [("Insufficient vendor.io/fpga", UNRESOLVABLE)], "n2": [("Insufficient vendor.io/fpga", UNRESOLVABLE)]},
        id="an extended resource no node has fails everywhere with Insufficient and its name"),
    pytest.param(
        [node("n1", cpu=4, memory="8Gi")], (), pod(c({"cpu": "1", GPU: 1})), {"ignoredResources": [GPU]},
        {"n1": []},
        id="an extended resource in ignoredResources is not checked"),
    pytest.param(
        [node("n1", cpu=4, memory="8Gi")], (), pod(c({"cpu": "1", GPU: 1, "example.com/tpu": 1})),
        {"ignoredResourceGroups": ["example.com"]},
        {"n1": []},
        id="extended resources of an ignored resource group are not checked"),
    pytest.param(
        [node("n1", cpu=4, memory="8Gi")], (), pod(c({"cpu": "1", "hugepages-2Mi": "2Mi"})),
        {"ignoredResources": ["hugepages-2Mi"]},
        {"n1": [("Insufficient hugepages-2Mi", UNRESOLVABLE)]},
        id="hugepages are not an extended resource so ignoredResources does not skip them"),
    pytest.param(
        [node("n1", cpu=4, memory="8Gi")], (), pod(c({"cpu": "1", "kubernetes.io/widget": 1})),
        {"ignoredResourceGroups": ["kubernetes.io"]},
        {"n1": [("Insufficient kubernetes.io/widget", UNRESOLVABLE)]},
        id="a kubernetes.io prefixed resource is native so its group cannot be ignored"),
    pytest.param(
        [node("n1", cpu=4, memory="8Gi")], (), pod(c({"cpu": "1", GPU: 0})), None,
        {"n1": []},
        id="a zero request for a resource the node lacks is not checked"),
    pytest.param(
        # init 3 cpu > containers 1 + 1: the pod needs max(2, 3) = 3 (computePodResourceRequest)
        [node("n1", cpu="2500m", memory="8Gi"), node("n2", cpu=3, memory="8Gi")], (),
        pod(c({"cpu": "1"}), c({"cpu": "1"}), init=(c({"cpu": "3"}),)), None,
        {"n1": [("Insufficient cpu", UNRESOLVABLE)], "n2": []},
        id="an init container larger than the app containers sets the cpu request"),
    pytest.param(
        # sidecar 1 cpu runs beside the app's 1 cpu: 2 cpu, more than a 1500m node has
        [node("n1", cpu="1500m", memory="8Gi"), node("n2", cpu=2, memory="8Gi")], (),
        pod(c({"cpu": "1"}), init=(c({"cpu": "1"}, restartPolicy="Always"),)), None,
        {"n1": [("Insufficient cpu", UNRESOLVABLE)], "n2": []},
        id="a sidecar init container adds to the app containers"),
    pytest.param(
        [node("n1", cpu=2, memory="1Gi"), node("n2", cpu=2, memory="2Gi")], (),
        pod(c({"memory": "1Gi"}), overhead={"memory": "512Mi"}), None,
        {"n1": [("Insufficient memory", UNRESOLVABLE)], "n2": []},
        id="pod overhead counts toward the request"),
    pytest.param(
        [node("n1", cpu=4, memory="8Gi")],
        (pod(c({"cpu": "1"}), on="n1"), pod(c({"cpu": "1"}), on="n1"), pod(c({"cpu": "1"}), on="n1")),
        pod(c({"cpu": "1"})), None,
        {"n1": []},
        id="a pod taking exactly the last free cpu fits"),
]


@pytest.mark.parametrize("nodes, existing, incoming, args, want", FILTER_CASES)
def test_filter(nodes, existing, incoming, args, want):
    assert run_filter(cluster(nodes, existing), incoming, args) == want


def test_filter_checks_only_the_rows_it_is_given():
    cache = cluster([node("n1", cpu=1, memory="1Gi"), node("n2", cpu=4, memory="8Gi"), node("n3", cpu=1, memory="1Gi")])
    pl = plugin(cache)
    p = pod(c({"cpu": "2"}))
    state = CycleState()
    pl.pre_filter(state, p, cache.nodes)
    rows = np.array([cache.nodes.row("n3"), cache.nodes.row("n2")], dtype=np.int64)
    res = pl.filter(state, p, cache.nodes, rows)
    assert res.passed.tolist() == [False, True]
    assert [(r.reason, r.mask.tolist()) for r in res.rejections] == [("Insufficient cpu", [True, False])]


def test_filter_sees_assumed_pods_and_forgotten_ones():
    cache = cluster([node("n1", cpu=2, memory="8Gi")])
    first = pod(c({"cpu": "1500m"}))
    cache.assume(first, "n1")
    assert run_filter(cache, pod(c({"cpu": "1"}))) == {"n1": [("Insufficient cpu", UNSCHED)]}
    cache.forget(first)
    assert run_filter(cache, pod(c({"cpu": "1"}))) == {"n1": []}


def test_filter_without_prefilter_state_is_a_bug_not_a_rejection():
    cache = cluster([node("n1", cpu=1, memory="1Gi")])
    with pytest.raises(KeyError):
        plugin(cache).filter(CycleState(), pod(c()), cache.nodes, cache.nodes.rows())


def test_filter_state_survives_a_cycle_state_clone():
    cache = cluster([node("n1", cpu=1, memory="1Gi")])
    pl = plugin(cache)
    p = pod(c({"cpu": "2"}))
    state = CycleState()
    pl.pre_filter(state, p, cache.nodes)
    res = pl.filter(state.clone(), p, cache.nodes, cache.nodes.rows())
    assert [r.reason for r in res.rejections] == ["Insufficient cpu"]


# ---------------------------------------------------------------------------- score: LeastAllocated

LEAST = strategy("LeastAllocated")

LEAST_CASES = [
    pytest.param(
        # cpu (4000-3000)*100/4000 = 25, memory (10000-5000)*100/10000 = 50 -> 37; n2: 50, 50 -> 50
        [node("n1", cpu="4", memory="10000"), node("n2", cpu="6", memory="10000")], (),
        pod(c({"cpu": "1", "memory": "2000"}), c({"cpu": "2", "memory": "3000"})), LEAST,
        {"n1": 37, "n2": 50},
        id="least allocated on differently sized empty nodes"),
    pytest.param(
        # n1: cpu 3000+3000 of 10000 -> 40, memory 0+5000 of 20000 -> 75 -> 57
        # n2: cpu 40, memory 5000+5000 of 50000 -> 80 -> 60
        [node("n1", cpu="10", memory="20000"), node("n2", cpu="10", memory="50000")],
        (pod(c({"cpu": "3", "memory": "1"}), on="n1"), pod(c({"cpu": "3", "memory": "5000"}), on="n2")),
        pod(c({"cpu": "1", "memory": "2000"}), c({"cpu": "2", "memory": "2999"})), LEAST,
        {"n1": 57, "n2": 60},
        id="least allocated counts the pods already on each node"),
    pytest.param(
        # the pod asks for nothing: non-zero defaults 100m and 200Mi count for it
        # cpu (4000-100)*100/4000 = 97, memory (2Gi-200Mi)*100/2Gi = 90 -> 93
        [node("n1", cpu="4", memory="2Gi")], (), pod(c()), LEAST,
        {"n1": 93},
        id="least allocated scores a pod asking nothing with the non-zero defaults"),
    pytest.param(
        # existing pod asks nothing: counts 100m / 200Mi on the node; incoming 1 cpu, 200Mi
        # cpu (4000-1100)*100/4000 = 72, memory (2Gi-400Mi)*100/2Gi = 80 -> 76
        [node("n1", cpu="4", memory="2Gi")], (pod(c(), on="n1"),), pod(c({"cpu": "1", "memory": "200Mi"})), LEAST,
        {"n1": 76},
        id="least allocated counts the node's pods asking nothing with the non-zero defaults"),
    pytest.param(
        # cpu over-committed (3000+3000 > 4000) scores 0, memory (4999+1) of 10000 -> 50: 25
        [node("n1", cpu="4", memory="10000")], (pod(c({"cpu": "3", "memory": "4999"}), on="n1"),),
        pod(c({"cpu": "3", "memory": "1"})), LEAST,
        {"n1": 25},
        id="least allocated scores an over-committed resource 0"),
    pytest.param(
        # weights memory 2, cpu 1: (50*2 + 25*1) // 3 = 41; n2 (50*2 + 50) // 3 = 50
        [node("n1", cpu="4", memory="10000"), node("n2", cpu="6", memory="10000")], (),
        pod(c({"cpu": "3", "memory": "5000"})), strategy("LeastAllocated", ("memory", 2), ("cpu", 1)),
        {"n1": 41, "n2": 50},
        id="least allocated weighs resources by their weight"),
    pytest.param(
        # extended resource requested: n1 (4-2)*100/4 = 50, n2 (10-2)*100/10 = 80; cpu, memory 50
        # n1 (50+50+50)//3 = 50, n2 (50+50+80)//3 = 60
        [ext_node("n1", {GPU: 4}, cpu="6", memory="10000"), ext_node("n2", {GPU: 10}, cpu="6", memory="10000")], (),
        pod(c({"cpu": "3", "memory": "5000", GPU: 2})),
        strategy("LeastAllocated", ("cpu", 1), ("memory", 1), (GPU, 1)),
        {"n1": 50, "n2": 60},
        id="least allocated scores an extended resource the pod requests"),
    pytest.param(
        # the pod does not ask for the GPU: it is left out everywhere, 50 and 50 -> 50
        [node("n1", cpu="6", memory="10000"), ext_node("n2", {GPU: 4}, cpu="6", memory="10000")], (),
        pod(c({"cpu": "3", "memory": "5000"})), strategy("LeastAllocated", ("cpu", 1), ("memory", 1), (GPU, 1)),
        {"n1": 50, "n2": 50},
        id="least allocated bypasses an extended resource the pod does not request"),
    pytest.param(
        # n1 lacks the GPU: left out of n1's average (weight 2 too): cpu 50, memory 60 -> 55
        # n2: GPU (4-1)*100/4 = 75: (75*2 + 50 + 60) // 4 = 65
        [node("n1", cpu="6", memory="10000"), ext_node("n2", {GPU: 4}, cpu="6", memory="10000")], (),
        pod(c({"cpu": "3", "memory": "4000", GPU: 1})), strategy("LeastAllocated", (GPU, 2), ("cpu", 1), ("memory", 1)),
        {"n1": 55, "n2": 65},
        id="least allocated leaves a resource out of the average of a node that lacks it"),
    pytest.param(
        [node("n1"), node("n2")], (pod(c({"cpu": "3"}), on="n1"),), pod(c()), LEAST,
        {"n1": 0, "n2": 0},
        id="least allocated scores 0 on nodes with no cpu or memory at all"),
    pytest.param(
        # ephemeral storage uses plain requests: (100Gi - 25Gi)*100/100Gi = 75
        [node("n1", cpu="4", memory="4Gi", ephemeral_storage="100Gi")],
        (pod(c({"ephemeral-storage": "15Gi"}), on="n1"),),
        pod(c({"ephemeral-storage": "10Gi"})), strategy("LeastAllocated", ("ephemeral-storage", 1)),
        {"n1": 75},
        id="least allocated can score ephemeral storage"),
    pytest.param(
        # pods is not a scored resource upstream (no allocatable in NodeInfo's scalar resources)
        [node("n1", cpu="4", memory="4Gi")], (), pod(c({"cpu": "1"})), strategy("LeastAllocated", ("pods", 1)),
        {"n1": 0},
        id="least allocated never scores the pods resource"),
]


@pytest.mark.parametrize("nodes, existing, incoming, args, want", LEAST_CASES)
def test_least_allocated_score(nodes, existing, incoming, args, want):
    assert run_score(cluster(nodes, existing), incoming, args) == want


def test_default_args_score_least_allocated_on_cpu_and_memory():
    cache = cluster([node("n1", cpu="4", memory="10000"), node("n2", cpu="6", memory="10000")])
    assert run_score(cache, pod(c({"cpu": "3", "memory": "5000"}))) == {"n1": 37, "n2": 50}


def test_score_without_prescore_computes_the_pod_request_itself():
    cache = cluster([node("n1", cpu="4", memory="10000"), node("n2", cpu="6", memory="10000")])
    assert run_score(cache, pod(c({"cpu": "3", "memory": "5000"})), pre_score=False) == {"n1": 37, "n2": 50}


# ---------------------------------------------------------------------------- score: MostAllocated

MOST_CASES = [
    pytest.param(
        # n1: cpu 3000*100/4000 = 75, memory 5000*100/10000 = 50 -> 62; n2: 50, 50 -> 50
        [node("n1", cpu="4", memory="10000"), node("n2", cpu="6", memory="10000")], (),
        pod(c({"cpu": "3", "memory": "5000"})), strategy("MostAllocated"),
        {"n1": 62, "n2": 50},
        id="most allocated favours the fuller node"),
    pytest.param(
        # cpu 6000 > 4000 is capped at 4000 -> 100, memory 50 -> 75
        [node("n1", cpu="4", memory="10000")], (pod(c({"cpu": "3", "memory": "1"}), on="n1"),),
        pod(c({"cpu": "3", "memory": "4999"})), strategy("MostAllocated"),
        {"n1": 75},
        id="most allocated caps an over-committed resource at full"),
    pytest.param(
        # weights cpu 3, memory 1: (75*3 + 50) // 4 = 68
        [node("n1", cpu="4", memory="10000")], (), pod(c({"cpu": "3", "memory": "5000"})),
        strategy("MostAllocated", ("cpu", 3), ("memory", 1)),
        {"n1": 68},
        id="most allocated weighs resources by their weight"),
    pytest.param(
        # a pod asking nothing counts 100m and 200Mi: cpu 100*100/1000 = 10, memory 200Mi of 1Gi = 19 -> 14
        [node("n1", cpu="1", memory="1Gi")], (), pod(c()), strategy("MostAllocated"),
        {"n1": 14},
        id="most allocated scores a pod asking nothing with the non-zero defaults"),
]


@pytest.mark.parametrize("nodes, existing, incoming, args, want", MOST_CASES)
def test_most_allocated_score(nodes, existing, incoming, args, want):
    assert run_score(cluster(nodes, existing), incoming, args) == want


# ---------------------------------------------------------------------------- score: RequestedToCapacityRatio

SPREAD = [(0, 10), (100, 0)]        # least-requested-like
PACK = [(0, 0), (100, 10)]          # bin packing

RTCR_CASES = [
    pytest.param(
        # shape scores x10; n1: cpu 75% -> 100-75 = 25, memory 50% -> 50: round(37.5) = 38; n2: 50, 50 -> 50
        [node("n1", cpu="4", memory="10000"), node("n2", cpu="6", memory="10000")], (),
        pod(c({"cpu": "3", "memory": "5000"})), strategy("RequestedToCapacityRatio", shape=SPREAD),
        {"n1": 38, "n2": 50},
        id="requested to capacity ratio rounds the weighted average half up"),
    pytest.param(
        # bin packing on a GPU only: n1 2/8 = 25% -> 25, n2 2/4 = 50% -> 50
        [ext_node("n1", {GPU: 8}, cpu="4", memory="10Gi"), ext_node("n2", {GPU: 4}, cpu="4", memory="10Gi")], (),
        pod(c({GPU: 2})), strategy("RequestedToCapacityRatio", (GPU, 1), shape=PACK),
        {"n1": 25, "n2": 50},
        id="requested to capacity ratio packs an extended resource"),
    pytest.param(
        # n2 already has 2 GPUs taken: (2+2)/4 = 100% -> 100
        [ext_node("n1", {GPU: 8}, cpu="4", memory="10Gi"), ext_node("n2", {GPU: 4}, cpu="4", memory="10Gi")],
        (pod(c({GPU: 2}), on="n2"),),
        pod(c({GPU: 2})), strategy("RequestedToCapacityRatio", (GPU, 1), shape=PACK),
        {"n1": 25, "n2": 100},
        id="requested to capacity ratio counts the node's existing use"),
    pytest.param(
        [ext_node("n1", {GPU: 8}, cpu="4", memory="10Gi")], (), pod(c({"cpu": "1"})),
        strategy("RequestedToCapacityRatio", (GPU, 1), shape=PACK),
        {"n1": 0},
        id="requested to capacity ratio scores 0 when the pod asks for none of the resources"),
    pytest.param(
        # two extended resources weighted 3 and 5: n1 foo 2/8 = 25% -> 25, bar 2/4 -> 50
        # (25*3 + 50*5) / 8 = 40.625 -> 41
        [ext_node("n1", {"intel.com/foo": 8, "intel.com/bar": 4}, cpu="4", memory="10Gi")], (),
        pod(c({"intel.com/foo": 2, "intel.com/bar": 2})),
        strategy("RequestedToCapacityRatio", ("intel.com/foo", 3), ("intel.com/bar", 5), shape=PACK),
        {"n1": 41},
        id="requested to capacity ratio weighs resources by their weight"),
    pytest.param(
        # a resource scoring 0 carries no weight: cpu 0% -> 0 is left out, memory 50% -> 50 -> 50
        [node("n1", cpu="4000", memory="10000")], (), pod(c({"cpu": "1m", "memory": "5000"})),
        strategy("RequestedToCapacityRatio", shape=PACK),
        {"n1": 50},
        id="requested to capacity ratio leaves resources scoring 0 out of the average"),
    pytest.param(
        # falling shape (0,10) (30,0), scores x10: cpu 10% -> 100 + trunc(-1000/30) = 67,
        # memory 20% -> 100 + trunc(-2000/30) = 34: round(50.5) = 51 (flooring would give 66, 33 -> 50)
        [node("n1", cpu="10", memory="10000")], (), pod(c({"cpu": "1", "memory": "2000"})),
        strategy("RequestedToCapacityRatio", shape=[(0, 10), (30, 0)]),
        {"n1": 51},
        id="requested to capacity ratio interpolates with Go's truncating division"),
    pytest.param(
        # over-committed reads as 100% utilization: PACK -> 100 for cpu; memory (1+4999)/10000 = 50%: 75
        [node("n1", cpu="1", memory="10000")], (pod(c({"cpu": "1", "memory": "1"}), on="n1"),),
        pod(c({"cpu": "1", "memory": "4999"})),
        strategy("RequestedToCapacityRatio", shape=PACK),
        {"n1": 75},
        id="requested to capacity ratio reads an over-committed resource as full"),
]


@pytest.mark.parametrize("nodes, existing, incoming, args, want", RTCR_CASES)
def test_requested_to_capacity_ratio_score(nodes, existing, incoming, args, want):
    assert run_score(cluster(nodes, existing), incoming, args) == want


@pytest.mark.parametrize("points, at, want", [
    pytest.param([(10, 1), (90, 9)], [0, 9, 10, 15, 19, 20, 89, 90, 99, 100],
                 [10, 10, 10, 15, 19, 20, 89, 90, 90, 90],
                 id="flat before the first point and after the last, linear between"),
    pytest.param([(0, 2), (40, 10), (100, 0)], [0, 20, 30, 40, 70, 100],
                 [20, 60, 80, 100, 50, 0],
                 id="a rise then a fall"),
    pytest.param([(0, 10), (30, 0)], [0, 10, 20, 29, 30, 100],
                 [100, 67, 34, 4, 0, 0],
                 id="a falling segment truncates toward zero as Go does"),
    pytest.param([(0, 2), (40, 2), (100, 2)], [0, 50, 100], [20, 20, 20],
                 id="a flat shape"),
])
def test_broken_linear_function_scaled_to_max_node_score(points, at, want):
    lut = broken_linear_lut(tuple(UtilizationShapePoint(u, s) for u, s in points))
    assert lut[at].tolist() == want


# ---------------------------------------------------------------------------- vectorized == upstream per node

def _least_ref(req: int, cap: int) -> int:
    return 0 if cap == 0 or req > cap else (cap - req) * 100 // cap


def _most_ref(req: int, cap: int) -> int:
    return 0 if cap == 0 else min(req, cap) * 100 // cap


def _go_round(x: float) -> int:
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def upstream_score(strategy_type: str, requested: list[int], allocatable: list[int], weights: list[int],
                   shape: list[tuple[int, int]] | None = None) -> int:
    """The Go scorers, one node at a time, transcribed literally."""
    node_score = weight_sum = 0
    for req, cap, w in zip(requested, allocatable, weights):
        if cap == 0:
            continue
        if strategy_type == "LeastAllocated":
            node_score += _least_ref(req, cap) * w
            weight_sum += w
        elif strategy_type == "MostAllocated":
            node_score += _most_ref(req, cap) * w
            weight_sum += w
        else:
            util = 100 if req > cap else req * 100 // cap
            s = _broken_linear_ref([(u, sc * 10) for u, sc in shape], util)
            if s > 0:
                node_score += s * w
                weight_sum += w
    if weight_sum == 0:
        return 0
    if strategy_type == "RequestedToCapacityRatio":
        return _go_round(node_score / weight_sum)
    return node_score // weight_sum


def _broken_linear_ref(shape: list[tuple[int, int]], p: int) -> int:
    for i, (u, s) in enumerate(shape):
        if p <= u:
            if i == 0:
                return s
            u0, s0 = shape[i - 1]
            num = (s - s0) * (p - u0)
            q = abs(num) // (u - u0)
            return s0 + (q if num >= 0 else -q)
    return shape[-1][1]


@pytest.mark.parametrize("strategy_type, shape", [
    pytest.param("LeastAllocated", None, id="least allocated"),
    pytest.param("MostAllocated", None, id="most allocated"),
    pytest.param("RequestedToCapacityRatio", [(0, 0), (33, 7), (70, 3), (100, 10)], id="requested to capacity ratio"),
])
@pytest.mark.parametrize("big", [False, True], ids=["ordinary sizes", "allocatable past 2**46 bytes"])
def test_vectorized_scores_equal_upstream_per_node_integer_scores(strategy_type, shape, big):
    rng = random.Random(7)
    mem_top = 2 ** 50 if big else 512 * 2 ** 30
    nodes, pods = [], []
    for i in range(300):
        alloc = {"cpu": f"{rng.randint(0, 64000)}m", "memory": str(rng.choice([0, rng.randint(1, mem_top)])),
                 "pods": "110"}
        if rng.random() < 0.6:
            alloc[GPU] = str(rng.randint(0, 8))
        nodes.append({"metadata": {"name": f"n{i}"}, "status": {"allocatable": alloc}})
        for _ in range(rng.randint(0, 3)):
            reqs = {}
            if rng.random() < 0.8:
                reqs["cpu"] = f"{rng.randint(1, 20000)}m"
            if rng.random() < 0.8:
                reqs["memory"] = str(rng.randint(1, mem_top // 4))
            if rng.random() < 0.3:
                reqs[GPU] = str(rng.randint(1, 4))
            pods.append(pod(c(reqs), on=f"n{i}"))
    cache = cluster(nodes, tuple(pods))
    resources = [("cpu", 3), ("memory", 1), (GPU, 5)]
    args = strategy(strategy_type, *resources, shape=shape)
    incoming = pod(c({"cpu": "700m", "memory": str(mem_top // 64), GPU: "1"}))
    got = run_score(cache, incoming, args)
    t = cache.nodes
    want = {}
    for name in got:
        r = t.row(name)
        gpu_col = t.resource_index[GPU]
        requested = [int(t.nonzero[r, 0]) + incoming.nonzero_cpu, int(t.nonzero[r, 1]) + incoming.nonzero_memory,
                     int(t.requested[r, gpu_col]) + 1]
        allocatable = [int(t.alloc[r, t.resource_index["cpu"]]), int(t.alloc[r, t.resource_index["memory"]]),
                       int(t.alloc[r, gpu_col])]
        want[name] = upstream_score(strategy_type, requested, allocatable, [w for _, w in resources], shape)
    assert got == want


# ---------------------------------------------------------------------------- args

def test_args_default_to_least_allocated_on_cpu_and_memory_weighted_1():
    args = parse_args(NodeResourcesFitArgs, None, "args")
    assert args == NodeResourcesFitArgs()
    assert args.ignored_resources == () and args.ignored_resource_groups == ()
    assert args.scoring_strategy.type == "LeastAllocated"
    assert args.scoring_strategy.resources == (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))
    assert args.scoring_strategy.requested_to_capacity_ratio is None


def test_args_parse_every_field_from_camel_case_config():
    args = parse_args(NodeResourcesFitArgs, {
        "ignoredResources": ["example.com/foo"],
        "ignoredResourceGroups": ["example.org"],
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "resources": [{"name": "cpu", "weight": 2}, {"name": GPU, "weight": 5}],
            "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]},
        },
    }, "args")
    assert args == NodeResourcesFitArgs(
        ("example.com/foo",), ("example.org",),
        ScoringStrategy("RequestedToCapacityRatio", (ResourceSpec("cpu", 2), ResourceSpec(GPU, 5)),
                        RequestedToCapacityRatioParam((UtilizationShapePoint(0, 0), UtilizationShapePoint(100, 10)))))


@pytest.mark.parametrize("raw, want", [
    pytest.param({"scoringStrategy": {"type": "MostAllocated"}},
                 (ResourceSpec("cpu", 1), ResourceSpec("memory", 1)),
                 id="a strategy without resources gets cpu and memory"),
    pytest.param({"scoringStrategy": {"type": "MostAllocated", "resources": []}},
                 (ResourceSpec("cpu", 1), ResourceSpec("memory", 1)),
                 id="an empty resource list gets cpu and memory"),
    pytest.param({"scoringStrategy": {"type": "MostAllocated",
                                      "resources": [{"name": "cpu"}, {"name": "memory", "weight": 0}]}},
                 (ResourceSpec("cpu", 1), ResourceSpec("memory", 1)),
                 id="an unset or zero weight defaults to 1 as Go's zero value does"),
])
def test_args_defaulting(raw, want):
    assert parse_args(NodeResourcesFitArgs, raw, "args").scoring_strategy.resources == want


SS = "args.scoringStrategy"
SHAPE = f"{SS}.requestedToCapacityRatio.shape"


def least(*resources: dict[str, Any]) -> dict[str, Any]:
    return {"scoringStrategy": {"type": "LeastAllocated", "resources": list(resources)}}


def shaped(*points: tuple[int, int], type_: str = "RequestedToCapacityRatio") -> dict[str, Any]:
    shape = [{"utilization": u, "score": sc} for u, sc in points]
    return {"scoringStrategy": {"type": type_, "requestedToCapacityRatio": {"shape": shape}}}


INVALID_ARGS = [
    pytest.param({"ignoredResources": ["example.com/a/b"]},
                 'args.ignoredResources[0]: Invalid value: "example.com/a/b"',
                 id="an ignored resource that is not a qualified name"),
    pytest.param({"ignoredResources": ["-foo"]}, 'args.ignoredResources[0]: Invalid value: "-foo": name part must',
                 id="an ignored resource with a bad name part"),
    pytest.param({"ignoredResourceGroups": ["example.com/sub"]},
                 'args.ignoredResourceGroups[0]: Invalid value: "example.com/sub": '
                 "resource group name can't contain '/'",
                 id="an ignored resource group containing a slash"),
    pytest.param({"ignoredResourceGroups": ["Bad_Group!"]},
                 'args.ignoredResourceGroups[0]: Invalid value: "Bad_Group!": name part must',
                 id="an ignored resource group that is not a valid name"),
    pytest.param({"scoringStrategy": {"type": "Spread"}},
                 f'{SS}.type: Unsupported value: "Spread": supported values: "LeastAllocated", '
                 '"MostAllocated", "RequestedToCapacityRatio"',
                 id="an unknown strategy type"),
    pytest.param({"scoringStrategy": {"resources": [{"name": "cpu", "weight": 1}]}},
                 f'{SS}.type: Unsupported value: ""',
                 id="a strategy without a type as upstream does not default it"),
    pytest.param(least({"name": "cpu", "weight": 101}),
                 f"{SS}.resources[0].weight: Invalid value: 101: resource weight of cpu not in valid range (0, 100]",
                 id="a weight above 100"),
    pytest.param(least({"name": "cpu"}, {"name": "memory", "weight": -1}),
                 f"{SS}.resources[1].weight: Invalid value: -1: resource weight of memory not in valid range (0, 100]",
                 id="a negative weight"),
    pytest.param({"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
                 f"{SHAPE}: Required value: at least one point must be specified",
                 id="requested to capacity ratio without a shape"),
    pytest.param(shaped(), f"{SHAPE}: Required value: at least one point must be specified",
                 id="an empty shape"),
    pytest.param(shaped((50, 1), (50, 2)),
                 f"{SHAPE}[1].utilization: Invalid value: 50: values must be sorted in increasing order",
                 id="shape utilizations not increasing"),
    pytest.param(shaped((-1, 1)), f"{SHAPE}[0].utilization: Invalid value: -1: not in valid range [0, 100]",
                 id="a shape utilization below 0"),
    pytest.param(shaped((101, 1)), f"{SHAPE}[0].utilization: Invalid value: 101: not in valid range [0, 100]",
                 id="a shape utilization above 100"),
    pytest.param(shaped((0, 11)), f"{SHAPE}[0].score: Invalid value: 11: not in valid range [0, 10]",
                 id="a shape score above 10"),
    pytest.param(shaped((0, -1), type_="LeastAllocated"),
                 f"{SHAPE}[0].score: Invalid value: -1: not in valid range [0, 10]",
                 id="a bad shape is rejected even when another strategy is chosen"),
    pytest.param({"scoringStrategy": {"type": "LeastAllocated", "resource": []}},
                 f"{SS}.resource: unknown field",
                 id="an unknown field"),
    pytest.param(least({"name": "cpu", "weight": "2"}), f"{SS}.resources[0].weight: expected an integer",
                 id="a weight that is not an integer"),
]


@pytest.mark.parametrize("raw, message", INVALID_ARGS)
def test_invalid_args_name_the_field(raw, message):
    with pytest.raises(ConfigError) as exc:
        parse_args(NodeResourcesFitArgs, raw, "args")
    assert message in str(exc.value)


def test_every_problem_is_reported_in_one_line():
    with pytest.raises(ConfigError) as exc:
        parse_args(NodeResourcesFitArgs, {"ignoredResourceGroups": ["a/b"], "scoringStrategy": {
            "type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 200}]}}, "args")
    msg = str(exc.value)
    assert "\n" not in msg
    assert "ignoredResourceGroups[0]" in msg and "resources[0].weight" in msg


# ---------------------------------------------------------------------------- queueing hints

def _events(pl: NodeResourcesFit) -> dict[str, Any]:
    return {e.event.resource: e for e in pl.events_to_register()}


def test_registers_pod_delete_or_scale_down_and_node_add_or_allocatable_change():
    ev = _events(plugin(cluster([])))
    assert ev[Resource.POD].event.action == ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN
    assert ev[Resource.NODE].event.action == ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE


PENDING = pod(c({"cpu": "2", GPU: 1}), name="pending")

POD_HINTS = [
    pytest.param(pod(c({"cpu": "1"}), on="n1"), None, QueueingHint.QUEUE, id="a bound pod deleted frees room"),
    pytest.param(pod(c({"cpu": "1"})), None, QueueingHint.SKIP, id="an unscheduled pod deleted frees nothing"),
    pytest.param(pod(c({"cpu": "2"}), on="n1"), pod(c({"cpu": "1"}), on="n1"), QueueingHint.QUEUE,
                 id="a bound pod scaled down in a resource the pod asks for"),
    pytest.param(pod(c({"memory": "2Gi"}), on="n1"), pod(c({"memory": "1Gi"}), on="n1"), QueueingHint.SKIP,
                 id="a bound pod scaled down in a resource the pod does not ask for"),
    pytest.param(pod(c({"cpu": "2"})), pod(c({"cpu": "1"})), QueueingHint.SKIP,
                 id="an unscheduled pod scaled down"),
    pytest.param(pod(c({"cpu": "3", GPU: 1}), name="pending"), PENDING, QueueingHint.QUEUE,
                 id="the pending pod itself scaled down"),
]


@pytest.mark.parametrize("old, new, want", POD_HINTS)
def test_pod_event_hint(old, new, want):
    hint = _events(plugin(cluster([])))[Resource.POD].hint
    assert hint(PENDING, old, new) == want


def _node(name: str = "n1", **alloc: Any) -> Any:
    return parse_node(node(name, **alloc))


NODE_HINTS = [
    pytest.param(None, ext_node("n1", {GPU: 1}, cpu=4, memory="1Gi"), QueueingHint.QUEUE,
                 id="a new node the pod fits"),
    pytest.param(None, node("n1", cpu=4, memory="1Gi"), QueueingHint.SKIP,
                 id="a new node without the extended resource"),
    pytest.param(None, ext_node("n1", {GPU: 1}, cpu=1, memory="1Gi"), QueueingHint.SKIP,
                 id="a new node too small"),
    pytest.param(node("n1", cpu=4, memory="1Gi"), ext_node("n1", {GPU: 1}, cpu=4, memory="1Gi"), QueueingHint.QUEUE,
                 id="a node that gained the extended resource"),
    pytest.param(ext_node("n1", {GPU: 1}, cpu=4, memory="1Gi"), ext_node("n1", {GPU: 1}, cpu=4, memory="2Gi"),
                 QueueingHint.SKIP, id="a node that grew only in a resource the pod does not ask for"),
    pytest.param(ext_node("n1", {GPU: 1}, cpu=4, memory="1Gi", pods=10),
                 ext_node("n1", {GPU: 1}, cpu=4, memory="1Gi", pods=20),
                 QueueingHint.QUEUE, id="a node allowing more pods"),
]


@pytest.mark.parametrize("old, new, want", NODE_HINTS)
def test_node_event_hint(old, new, want):
    hint = _events(plugin(cluster([])))[Resource.NODE].hint
    assert hint(PENDING, old and parse_node(old), parse_node(new)) == want


def test_node_hint_honours_ignored_resources():
    hint = _events(plugin(cluster([]), {"ignoredResources": [GPU]}))[Resource.NODE].hint
    assert hint(PENDING, None, parse_node(node("n1", cpu=4, memory="1Gi"))) == QueueingHint.QUEUE



# ---------------------------------------------------------------------------- edges of the vectorized path

def test_no_rows_give_empty_answers():
    cache = cluster([node("n1", cpu=1, memory="1Gi")])
    pl = plugin(cache)
    p = pod(c({"cpu": "2"}))
    state = CycleState()
    pl.pre_filter(state, p, cache.nodes)
    none = np.zeros(0, dtype=np.int64)
    res = pl.filter(state, p, cache.nodes, none)
    assert res.passed.shape == (0,) and res.rejections == []
    pl.pre_score(state, p, cache.nodes, none)
    assert pl.score(state, p, cache.nodes, none).shape == (0,)


def test_scores_mixing_non_zero_cpu_with_plain_extended_requests():
    # cpu non-zero: (4000 - 100 - 1000) * 100 // 4000 = 72 (the existing pod asks nothing: 100m)
    # GPU plain: (8 - 2 - 1) * 100 // 8 = 62; weights cpu 1, GPU 3: (72 + 186) // 4 = 64
    cache = cluster([ext_node("n1", {GPU: 8}, cpu=4, memory="8Gi")], (pod(c(), on="n1"), pod(c({GPU: 2}), on="n1")))
    got = run_score(cache, pod(c({"cpu": "1", GPU: 1})), strategy("LeastAllocated", ("cpu", 1), (GPU, 3)))
    assert got == {"n1": 64}


def test_filter_is_exact_for_nodes_past_64_tib():
    big = 2 ** 50
    cache = cluster([node("n1", cpu=1, memory=str(big))], (pod(c({"memory": str(big - 10)}), on="n1"),))
    assert run_filter(cache, pod(c({"memory": "10"}))) == {"n1": []}
    assert run_filter(cache, pod(c({"memory": "11"}))) == {"n1": [("Insufficient memory", UNSCHED)]}


def test_results_do_not_alias_reused_buffers():
    cache = cluster([node("n1", cpu=1, memory="1Gi"), node("n2", cpu=4, memory="8Gi")])
    pl = plugin(cache)
    rows = cache.nodes.rows()
    first, second = pod(c({"cpu": "2"})), pod(c({"memory": "2Gi"}))
    s1, s2 = CycleState(), CycleState()
    pl.pre_filter(s1, first, cache.nodes)
    pl.pre_filter(s2, second, cache.nodes)
    r1 = pl.filter(s1, first, cache.nodes, rows)
    masks = [r.mask.tolist() for r in r1.rejections]
    pl.filter(s2, second, cache.nodes, rows[::-1])
    assert [r.mask.tolist() for r in r1.rejections] == masks and r1.passed.tolist() == [False, True]
    pl.pre_score(s1, first, cache.nodes, rows)
    sc1 = pl.score(s1, first, cache.nodes, rows)
    before = sc1.tolist()
    pl.pre_score(s2, second, cache.nodes, rows)
    pl.score(s2, second, cache.nodes, rows[::-1])
    assert sc1.tolist() == before


# ---------------------------------------------------------------------------- in-place pod resize


def resized(spec_cpu: str, status_cpu: str | None, *, on: str = "n1", name: str = "r", infeasible: bool = False,
            allocated_cpu: str | None = None) -> Any:
    """A bound pod of one container "c" asking ``spec_cpu`` whose status reports ``status_cpu`` (a kubelet's
    view during an in-place resize; None: a status without resources); ``infeasible`` marks PodResizePending."""
    cs: dict[str, Any] = {"name": "c"}
    if status_cpu is not None:
        cs["resources"] = {"requests": {"cpu": status_cpu}}
    if allocated_cpu is not None:
        cs["allocatedResources"] = {"cpu": allocated_cpu}
    status: dict[str, Any] = {"phase": "Running", "containerStatuses": [cs]}
    if infeasible:
        status["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
    return parse_pod({"metadata": {"name": name, "namespace": "default", "uid": name},
                      "spec": {"nodeName": on, "containers": [c({"cpu": spec_cpu})]}, "status": status})


RESIZE_FILTER_CASES = [
    pytest.param(resized("1", "3"), pod(c({"cpu": "2"})), [("Insufficient cpu", UNSCHED)],
                 id="a pod whose status holds 3 of 4 cpu leaves no room for 2 though its spec asks 1"),
    pytest.param(resized("1", "3"), pod(c({"cpu": "1"})), [],
                 id="the last cpu beside a pod whose status holds 3 of 4 is free"),
    pytest.param(resized("1", "1", allocated_cpu="3"), pod(c({"cpu": "2"})), [("Insufficient cpu", UNSCHED)],
                 id="cpu allocated to a resize not yet actuated is held"),
    pytest.param(resized("3", "1", infeasible=True), pod(c({"cpu": "2"})), [],
                 id="an infeasible resize up holds only what the status reports"),
    pytest.param(resized("1", None, allocated_cpu="3"), pod(c({"cpu": "2"})), [],
                 id="a status without resources leaves the pod charged its spec"),
]


@pytest.mark.parametrize("existing, incoming, want", RESIZE_FILTER_CASES)
def test_filter_charges_a_resized_pod_what_it_holds(existing, incoming, want):
    assert run_filter(cluster([node("n1", cpu=4, memory="8Gi")], (existing,)), incoming) == {"n1": want}


def test_a_bound_pods_status_update_recharges_its_node_and_a_decrease_is_a_scale_down_hint():
    cache = cluster([node("n1", cpu=4, memory="8Gi")], (resized("1", "3"),))
    waiting = pod(c({"cpu": "2"}), name="waiting")
    assert run_filter(cache, waiting) == {"n1": [("Insufficient cpu", UNSCHED)]}
    done = resized("1", "1")                 # the kubelet finished the resize down
    cache.update_pod(done)
    assert run_filter(cache, waiting) == {"n1": []}
    hint = _events(plugin(cache))[Resource.POD].hint
    assert hint(waiting, resized("1", "3"), done) == QueueingHint.QUEUE
    assert hint(waiting, resized("1", "3"), resized("1", "3", allocated_cpu="2")) == QueueingHint.SKIP, \
        "what the pod holds did not shrink"
