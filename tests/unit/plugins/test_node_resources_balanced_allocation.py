"""Tests for plugins/node_resources_balanced_allocation.py, as kube-scheduler's BalancedAllocation.

Expected scores are (1 - std) * 100 truncated, std over the fractions
requested/allocatable (plain requests, capped at 1); each case's comment
works the numbers. A scalar transcription of balancedResourceScorer checks
the vectorized kernel on random tables where nodes lack some resources.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest

from plugins.node_resources_balanced_allocation import (
    NodeResourcesBalancedAllocation, NodeResourcesBalancedAllocationArgs, ResourceSpec,
)
from scheduler.framework import Code, ConfigError, CycleState, Handle, parse_args
from scheduler.framework.clock import FakeClock
from scheduler.framework.interface import EnqueueExtensions, PreScorePlugin, ScorePlugin
from scheduler.framework.registry import REGISTRY
from scheduler.model import parse_node, parse_pod
from scheduler.state.cache import Cache

GPU = "example.com/gpu"


def node(name: str, ext: dict[str, Any] | None = None, **alloc: Any) -> dict[str, Any]:
    res = {k.replace("_", "-"): str(v) for k, v in alloc.items()}
    res.setdefault("pods", "110")
    res.update({k: str(v) for k, v in (ext or {}).items()})
    return {"metadata": {"name": name}, "status": {"allocatable": res}}


_uid = 0


def pod(*requests: dict[str, Any], on: str = "") -> Any:
    """A pod with one container per requests dict."""
    global _uid
    _uid += 1
    containers = [{"name": f"c{i}", "image": "img",
                   "resources": {"requests": {k: str(v) for k, v in r.items()}}} for i, r in enumerate(requests)]
    spec: dict[str, Any] = {"containers": containers}
    if on:
        spec["nodeName"] = on
    return parse_pod({"metadata": {"name": f"p{_uid}", "namespace": "default", "uid": f"p{_uid}"}, "spec": spec})


def cluster(nodes: list[dict[str, Any]], pods: tuple[Any, ...] = ()) -> Cache:
    cache = Cache()
    for n in nodes:
        cache.add_node(parse_node(n))
    for p in pods:
        cache.add_pod(p)
    return cache


def plugin(cache: Cache, resources: list[str] | None = None) -> NodeResourcesBalancedAllocation:
    raw = None if resources is None else {"resources": [{"name": r, "weight": 1} for r in resources]}
    return NodeResourcesBalancedAllocation(parse_args(NodeResourcesBalancedAllocationArgs, raw, "args"),
                                           Handle(cache, clock=FakeClock()))


def run_score(cache: Cache, p: Any, resources: list[str] | None = None) -> dict[str, int]:
    pl = plugin(cache, resources)
    state = CycleState()
    rows = cache.nodes.rows()
    assert pl.pre_score(state, p, cache.nodes, rows).is_success()
    scores = pl.score(state, p, cache.nodes, rows)
    assert scores.dtype == np.int64
    return dict(zip(cache.nodes.names_of(rows), scores.tolist()))


def test_plugin_registers_under_its_upstream_name_as_a_score_plugin_only():
    assert REGISTRY["NodeResourcesBalancedAllocation"] is NodeResourcesBalancedAllocation
    pl = plugin(cluster([]))
    assert isinstance(pl, PreScorePlugin) and isinstance(pl, ScorePlugin)
    assert not isinstance(pl, EnqueueExtensions)   # upstream registers no events: it never rejects


SCORE_CASES = [
    pytest.param(
        # n1: cpu 3000/4000 = .75, memory 5000/10000 = .5: std |.75 - .5| / 2 = .125 -> 87.5 -> 87
        # n2: .5 and .5 -> 100
        [node("n1", cpu=4, memory=10000), node("n2", cpu=6, memory=10000)], (),
        pod({"cpu": "1", "memory": "2000"}, {"cpu": "2", "memory": "3000"}), None,
        {"n1": 87, "n2": 100},
        id="two resources score by half their fractions' difference"),
    pytest.param(
        # existing pods ask cpu only: their memory counts 0 here (not the 200Mi non-zero default)
        # cpu (3000+3000+1000)/10000 = .7, memory 5000/20000 = .25: std .225 -> 77.5 -> 77
        [node("n1", cpu=10, memory=20000)], (pod({"cpu": "3"}, on="n1"), pod({"cpu": "3"}, on="n1")),
        pod({"cpu": "1", "memory": "5000"}), None,
        {"n1": 77},
        id="requests are plain requests not the non-zero defaults"),
    pytest.param(
        # cpu (3000+3000)/4000 = 1.5 is capped at 1, memory .5: std .25 -> 75
        [node("n1", cpu=4, memory=10000)], (pod({"cpu": "3", "memory": "1"}, on="n1"),),
        pod({"cpu": "3", "memory": "4999"}), None,
        {"n1": 75},
        id="a fraction above 1 is capped at 1"),
    pytest.param(
        # the pod asks only for cpu; memory is still a fraction (node's own 10000/20000 = .5)
        # cpu 2000/8000 = .25: std .125 -> 87
        [node("n1", cpu=8, memory=20000)], (pod({"memory": "10000"}, on="n1"),), pod({"cpu": "2"}), None,
        {"n1": 87},
        id="cpu and memory count even when the pod asks for only one of them"),
    pytest.param(
        # fractions cpu .25, memory .5, ephemeral .1: mean .28333, population std .16499 -> 83.5 -> 83
        [node("n1", cpu=4, memory="8Gi", ephemeral_storage="100Gi")], (),
        pod({"cpu": "1", "memory": "4Gi", "ephemeral-storage": "10Gi"}), ["cpu", "memory", "ephemeral-storage"],
        {"n1": 83},
        id="three resources score by the population standard deviation"),
    pytest.param(
        # n1 lacks the GPU: two fractions, cpu .5 memory .25 -> std .125 -> 87
        # n2 has 4 GPUs, 1 requested: .5 .25 .25 -> mean .3333, std .11785 -> 88.2 -> 88
        [node("n1", cpu=2, memory=8000), node("n2", {GPU: 4}, cpu=2, memory=8000)], (),
        pod({"cpu": "1", "memory": "2000", GPU: 1}), ["cpu", "memory", GPU],
        {"n1": 87, "n2": 88},
        id="a node without an extended resource is scored on its other resources"),
    pytest.param(
        # the pod does not ask for the GPU: left out everywhere, cpu .5 memory .25 -> 87 on both
        [node("n1", cpu=2, memory=8000), node("n2", {GPU: 4}, cpu=2, memory=8000)],
        (pod({GPU: 3}, on="n2"),),
        pod({"cpu": "1", "memory": "2000"}), ["cpu", "memory", GPU],
        {"n1": 87, "n2": 87},
        id="an extended resource the pod does not request is left out"),
    pytest.param(
        [node("n1", cpu=4, memory=10000)], (), pod({"cpu": "3", "memory": "1000"}), ["cpu"],
        {"n1": 100},
        id="a single resource cannot be unbalanced"),
    pytest.param(
        [node("n1"), node("n2", cpu=4, memory=10000)], (), pod({"cpu": "1", "memory": "5000"}), None,
        {"n1": 100, "n2": 87},
        id="a node with none of the resources has no fraction to deviate and scores 100"),
    pytest.param(
        # no column exists for the GPU: it is nowhere, so scoring is on cpu and memory alone
        [node("n1", cpu=4, memory=10000)], (), pod({"cpu": "1", "memory": "2500", "vendor.io/fpga": 1}),
        ["cpu", "memory", "vendor.io/fpga"],
        {"n1": 100},
        id="an extended resource no node has leaves the other fractions"),
]


@pytest.mark.parametrize("nodes, existing, incoming, resources, want", SCORE_CASES)
def test_score(nodes, existing, incoming, resources, want):
    assert run_score(cluster(nodes, existing), incoming, resources) == want


def test_a_pod_requesting_none_of_the_resources_is_skipped_at_prescore():
    cache = cluster([node("n1", cpu=4, memory=10000)])
    st = plugin(cache).pre_score(CycleState(), pod({}), cache.nodes, cache.nodes.rows())
    assert st.code == Code.SKIP


def test_a_pod_requesting_only_an_unscored_resource_is_skipped():
    cache = cluster([node("n1", {GPU: 2}, cpu=4, memory=10000)])
    st = plugin(cache).pre_score(CycleState(), pod({GPU: 1}), cache.nodes, cache.nodes.rows())
    assert st.code == Code.SKIP


def test_score_without_prescore_gives_a_best_effort_pod_zero():
    cache = cluster([node("n1", cpu=4, memory=10000), node("n2", cpu=8, memory=10000)])
    scores = plugin(cache).score(CycleState(), pod({}), cache.nodes, cache.nodes.rows())
    assert scores.tolist() == [0, 0]


def test_score_without_prescore_computes_the_request_itself():
    cache = cluster([node("n1", cpu=4, memory=10000)])
    scores = plugin(cache).score(CycleState(), pod({"cpu": "3", "memory": "5000"}), cache.nodes, cache.nodes.rows())
    assert scores.tolist() == [87]


# ---------------------------------------------------------------------------- vectorized == upstream per node

def upstream_balanced(requested: list[int], allocatable: list[int]) -> int:
    """balancedResourceScorer, literally."""
    fractions = []
    total = 0.0
    for req, cap in zip(requested, allocatable):
        if cap == 0:
            continue
        f = min(float(req) / float(cap), 1.0)
        total += f
        fractions.append(f)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = total / len(fractions)
        s = 0.0
        for f in fractions:
            s = s + (f - mean) * (f - mean)
        std = math.sqrt(s / len(fractions))
    return int((1 - std) * 100)


@pytest.mark.parametrize("resources", [
    pytest.param(["cpu", "memory"], id="two resources"),
    pytest.param(["cpu", "memory", "ephemeral-storage", GPU], id="four resources some nodes lack"),
])
def test_vectorized_scores_equal_upstream_per_node(resources):
    rng = random.Random(11)
    nodes, pods = [], []
    for i in range(400):
        alloc = {"cpu": f"{rng.choice([0, rng.randint(1, 64000)])}m",
                 "memory": str(rng.choice([0, rng.randint(1, 2 ** 40)])),
                 "ephemeral-storage": str(rng.choice([0, rng.randint(1, 2 ** 42)])), "pods": "110"}
        if rng.random() < 0.5:
            alloc[GPU] = str(rng.randint(0, 8))
        nodes.append({"metadata": {"name": f"n{i}"}, "status": {"allocatable": alloc}})
        for _ in range(rng.randint(0, 3)):
            reqs = {"cpu": f"{rng.randint(1, 30000)}m", "memory": str(rng.randint(1, 2 ** 39)),
                    "ephemeral-storage": str(rng.randint(1, 2 ** 40))}
            if rng.random() < 0.3:
                reqs[GPU] = str(rng.randint(1, 4))
            pods.append(pod(reqs, on=f"n{i}"))
    cache = cluster(nodes, tuple(pods))
    incoming = pod({"cpu": "1500m", "memory": str(3 * 2 ** 30), "ephemeral-storage": str(2 ** 35), GPU: 1})
    got = run_score(cache, incoming, resources)
    t = cache.nodes
    want = {}
    for name in got:
        r = t.row(name)
        cols = [t.resource_index[n] for n in resources]
        requested = [int(t.requested[r, col]) + incoming.requests[n] for n, col in zip(resources, cols)]
        allocatable = [int(t.alloc[r, col]) for col in cols]
        want[name] = upstream_balanced(requested, allocatable)
    assert got == want


# ---------------------------------------------------------------------------- args

def test_args_default_to_cpu_and_memory():
    args = parse_args(NodeResourcesBalancedAllocationArgs, None, "args")
    assert args.resources == (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


@pytest.mark.parametrize("raw, want", [
    pytest.param({"resources": []}, (ResourceSpec("cpu", 1), ResourceSpec("memory", 1)),
                 id="an empty list gets cpu and memory"),
    pytest.param({"resources": [{"name": "cpu"}, {"name": GPU, "weight": 0}]},
                 (ResourceSpec("cpu", 1), ResourceSpec(GPU, 1)),
                 id="an unset or zero weight defaults to 1"),
])
def test_args_defaulting(raw, want):
    assert parse_args(NodeResourcesBalancedAllocationArgs, raw, "args").resources == want


@pytest.mark.parametrize("raw, message", [
    pytest.param({"resources": [{"name": "cpu", "weight": 2}]},
                 "args.resources[0].weight: Invalid value: 2: must be 1", id="a weight other than 1"),
    pytest.param({"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": "cpu"}]},
                 'args.resources[2].name: Duplicate value: "cpu"', id="a resource listed twice"),
    pytest.param({"resources": [{"name": "cpu", "weight": -1}]},
                 "args.resources[0].weight: Invalid value: -1: must be 1", id="a negative weight"),
    pytest.param({"resource": []}, "args.resource: unknown field", id="an unknown field"),
])
def test_invalid_args_name_the_field(raw, message):
    with pytest.raises(ConfigError) as exc:
        parse_args(NodeResourcesBalancedAllocationArgs, raw, "args")
    assert message in str(exc.value)


def test_no_rows_give_no_scores():
    cache = cluster([node("n1", cpu=4, memory=10000)])
    pl = plugin(cache)
    state = CycleState()
    none = np.zeros(0, dtype=np.int64)
    p = pod({"cpu": "1"})
    assert pl.pre_score(state, p, cache.nodes, none).is_success()
    assert pl.score(state, p, cache.nodes, none).shape == (0,)


def test_scores_do_not_alias_reused_buffers():
    cache = cluster([node("n1", cpu=4, memory=10000), node("n2", cpu=8, memory=10000)])
    pl = plugin(cache)
    rows = cache.nodes.rows()
    s1 = pl.score(CycleState(), pod({"cpu": "3", "memory": "5000"}), cache.nodes, rows)
    before = s1.tolist()
    pl.score(CycleState(), pod({"cpu": "1", "memory": "9000"}), cache.nodes, rows[::-1])
    assert s1.tolist() == before == [87, 93]   # n2: |3000/8000 - .5| / 2 = .0625 -> 93
