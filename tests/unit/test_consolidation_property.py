"""Consolidation over random clusters and plans, in process (tests/unit/test_consolidation.py's harness).

Random nodes (sizes, zones), ReplicaSets (sizes, zone spread or not) placed where they fit, bare pods and
prefer-no-eviction pods among them, a budget of one unavailable pod per ReplicaSet (the fake API answers 429
while a ReplicaSet has a pod terminating or not Ready, as the disruption controller's status would), and any
mix of the three strategies, with or without a gang waiting for whole nodes (in one zone, or anywhere). After a
minute of the fake clock:

* every evicted pod's replacement is bound, and none on the node its predecessor left (no bounce-back);
* only ReplicaSet pods without prefer-no-eviction were evicted, and only through the Eviction API (no pod
  was deleted by the scheduler), so the budget, which the fake API enforces as the real one does, held;
* no node holds more than its allocatable cpu;
* a gang that must run in one zone, if bound, is bound in one zone.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.inprocess import NS
from tests.unit.test_consolidation import ZONE, Cluster, config, finish, no_bounce_back, run_for, started

MILLI = {"250m": 250, "500m": 500, "1": 1000, "2": 2000}


@st.composite
def clusters(draw: Any) -> dict[str, Any]:
    nodes = [(f"n{i}", draw(st.sampled_from([2, 4, 8])), draw(st.sampled_from("ABC")))
             for i in range(draw(st.integers(2, 6)))]
    sets = [(f"rs{j}", draw(st.integers(1, 6)), draw(st.sampled_from(list(MILLI))), draw(st.booleans()))
            for j in range(draw(st.integers(1, 3)))]
    return {"nodes": nodes, "sets": sets, "bare": draw(st.integers(0, 2)), "keep": draw(st.booleans()),
            "seed": draw(st.integers(0, 2 ** 16)), "defragment": draw(st.booleans()),
            "compact": draw(st.booleans()), "spread": draw(st.booleans()), "gang": draw(st.integers(0, 2)),
            "gang_in_one_zone": draw(st.booleans())}


def _budgeted(c: Cluster) -> None:
    """The fake API's evictions answer 429 while the pod's ReplicaSet has a pod terminating or not Ready."""
    evict = c._evict
    c.violations = []   # type: ignore[attr-defined]

    def guarded(name: str) -> dict[str, Any]:
        obj = c.env.api.objects[c.path(name)]
        owner = (obj["metadata"].get("ownerReferences") or [{}])[0].get("name")
        if owner in c.sets:
            for o in list(c.env.api.objects.values()):
                if (o.get("kind") == "Pod" and o["metadata"]["name"] != name
                        and (o["metadata"].get("ownerReferences") or [{}])[0].get("name") == owner):
                    ready = any(x.get("type") == "Ready" and x.get("status") == "True"
                                for x in (o.get("status") or {}).get("conditions") or ())
                    if o["metadata"].get("deletionTimestamp") or not ready:
                        c.refuse = 1
                        break
        return evict(name)

    c._evict = guarded   # type: ignore[method-assign]


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_every_executed_plan_ends_bound_elsewhere_within_budgets(spec: dict[str, Any]) -> None:
    asyncio.run(_check(spec))


async def _check(spec: dict[str, Any]) -> None:
    args: dict[str, Any] = {"defragment": spec["defragment"],
                            "compact": {"enabled": spec["compact"], "thresholds": {"cpu": 50, "memory": 50, "pods": 50}},
                            "spread": {"enabled": spec["spread"]}}
    env, c, task = await started(config(args))
    _budgeted(c)
    deleted: list[str] = []

    async def delete_pod(namespace: str, name: str, *_: Any, **__: Any) -> None:
        deleted.append(name)

    env.api.delete_pod = delete_pod   # type: ignore[attr-defined]
    try:
        free: dict[str, int] = {}
        alloc: dict[str, int] = {}
        for name, cpu, zone in spec["nodes"]:
            env.node(name, cpu=str(cpu), zone=zone)
            free[name] = alloc[name] = cpu * 1000
        names = [n for n, _, _ in spec["nodes"]]
        k = spec["seed"]

        def place(milli: int) -> str:
            nonlocal k
            for i in range(len(names)):
                node = names[(k + i) % len(names)]
                if free[node] >= milli:
                    k = k * 31 + 7
                    free[node] -= milli
                    return node
            return ""

        for rs, count, cpu, spread in spec["sets"]:
            c.replica_set(rs, cpu=cpu, spread=[{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                                "labelSelector": {"matchLabels": {"app": rs}}}] if spread else None)
            for i in range(count):
                node = place(MILLI[cpu])
                if node:
                    keep = spec["keep"] and i == 0
                    c.running(rs, node, annotations={"descheduler.alpha.kubernetes.io/prefer-no-eviction": "true"}
                              if keep else None)
        for b in range(spec["bare"]):
            node = place(1000)
            if node:
                c.running(f"bare{b}", node)
        if spec["gang"]:
            biggest = max(cpu for _, cpu, _ in spec["nodes"])
            env.native_group("g", spec["gang"], topology=ZONE if spec["gang_in_one_zone"] else "")
            for i in range(spec["gang"]):
                env.pod(f"g-{i}", group="g", cpu=str(biggest))
        await run_for(env, 60, step=1.0)
        objects = env.api.objects
        for new, old in c.created.items():
            assert c.history.get(new), f"the replacement {new} of {old} was never bound"
            assert c.history[new][0] != c.history[old][0], f"{new} went back to {c.history[old][0]}"
        for name in c.evictions:
            assert name.rsplit("-", 1)[0] in c.sets, f"{name} is no ReplicaSet's pod"
        no_bounce_back(env)
        gang = env.bound(*(f"g-{i}" for i in range(spec["gang"])))
        if spec["gang_in_one_zone"] and gang:
            zones = {n: z for n, _, z in spec["nodes"]}
            assert len({zones[n] for n in gang.values()}) == 1, gang
        used: dict[str, int] = {}
        for path, o in objects.items():
            node = o.get("spec", {}).get("nodeName") if "/pods/" in path else None
            if node and not o["metadata"].get("deletionTimestamp"):
                cpu = o["spec"]["containers"][0]["resources"]["requests"]["cpu"]
                used[node] = used.get(node, 0) + (int(cpu[:-1]) if cpu.endswith("m") else int(cpu) * 1000)
        assert all(used[n] <= alloc[n] for n in used), (used, alloc)
        kept = [o["metadata"]["name"] for o in objects.values()
                if "descheduler.alpha.kubernetes.io/prefer-no-eviction" in (o["metadata"].get("annotations") or {})]
        assert not set(kept) & set(c.evictions)
        assert deleted == [], "pods deleted around the Eviction API"
        assert all(p.startswith(f"/api/v1/namespaces/{NS}/") for p in objects if "/pods/" in p)
    finally:
        await finish(env, task)


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 6), st.booleans(), st.booleans()), min_size=1, max_size=5),
       st.integers(1, 3))
def test_a_respread_plan_is_the_same_when_only_touched_violators_are_checked_again(
        sets: list[tuple[int, int, bool, bool]], new_nodes: int) -> None:
    """Planner.spread checks a violator again after a move only if the move touches it
    (``planner.touches``); checking every violator after every move gives the same plan."""
    asyncio.run(_same_plan(sets, new_nodes))


async def _same_plan(sets: list[tuple[int, int, bool, bool]], new_nodes: int) -> None:
    from unittest import mock

    from scheduler.consolidation import planner as planning
    env, c, task = await started(config({"defragment": False, "spread": {"enabled": True}}))
    try:
        env.node("a0", cpu="8", zone="A")
        env.node("b0", cpu="8", zone="B")
        for j, (in_a, in_b, shared, anti) in enumerate(sets):
            app = "shared" if shared else f"rs{j}"   # two sets may count each other's pods
            spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                       "labelSelector": {"matchLabels": {"app": app}}}]
            c.replica_set(f"rs{j}", cpu="100m", labels={"app": app, "set": f"rs{j}"}, spread=spread)
            if anti:
                c.sets[f"rs{j}"]["spec"]["affinity"] = {"podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"topologyKey": "kubernetes.io/hostname",
                         "labelSelector": {"matchLabels": {"set": f"rs{j}"}}}]}}
            for _ in range(in_a):
                c.running(f"rs{j}", "a0")
            for _ in range(in_b):
                c.running(f"rs{j}", "b0")
        for i in range(new_nodes):
            env.node(f"c{i}", cpu="8", zone="C")
        fw = env.s.frameworks[env.profile]
        args = env.s.rebalancer.profiles[env.profile][1]
        planner = planning.Planner(fw, env.s.cache, args, env.clock.wall())
        violators = planner.violated(planner.spread_candidates(list(env.s.cache.pods.values())))
        fast = planner.spread(violators)
        with mock.patch.object(planning, "touches", lambda moved, pod: True):
            every = planner.spread(violators)
        assert (fast is None) == (every is None)
        if fast is not None and every is not None:
            assert [(p.name, s, t) for p, s, t in fast.moves] == [(p.name, s, t) for p, s, t in every.moves]
    finally:
        await finish(env, task)
