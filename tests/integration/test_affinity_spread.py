"""Inter-pod affinity and topology spreading end to end on the simulated cluster.

Each test runs the whole scheduler (the default profile, which has
InterPodAffinity and PodTopologySpread as kube-scheduler's has) against a
fresh simulated cluster and checks what a user sees: where pods land, and
the PodScheduled=False message of the ones left pending, in upstream's words.
Waits are bounded polls of the API (never fixed sleeps for something that
must happen); "stays pending" is checked only after every pod of the test
has been seen by the scheduler (its condition is written).
"""

from __future__ import annotations

import collections
from typing import Any

from bench.simcluster.resources import lookup
from tests.integration.test_scheduler import (
    NS, PODS, bound, config, eventually, make_node, make_pod, running, scheduled_condition, unschedulable,
)

NAMESPACES = lookup("", "v1", "namespaces")
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def anti(labels: dict[str, str], key: str = HOST, **term: Any) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **term}]}}


def near(labels: dict[str, str], key: str = HOST, **term: Any) -> dict[str, Any]:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **term}]}}


def spread(labels: dict[str, str], key: str = ZONE, skew: int = 1, when: str = "DoNotSchedule",
           **more: Any) -> list[dict[str, Any]]:
    return [{"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
             "labelSelector": {"matchLabels": labels}, **more}]


def zoned(name: str, zone: str, **kw: Any) -> dict[str, Any]:
    labels = {ZONE: zone, **kw.pop("labels", {})}
    return make_node(name, labels=labels, **kw)


def per_node(placed: dict[str, str]) -> collections.Counter[str]:
    return collections.Counter(placed.values())


def bound_now(env: Any, names: list[str]) -> dict[str, str]:
    return {n: env.node_of(n) for n in names if env.node_of(n)}


async def env_settled(env: Any, names: list[str], bound_count: int, timeout: float = 15.0) -> None:
    """Until ``bound_count`` of ``names`` are bound and every other one carries PodScheduled=False."""
    def done() -> bool:
        placed = [n for n in names if env.node_of(n)]
        waiting = [n for n in names if not env.node_of(n)
                   and scheduled_condition(env.pod(n)).get("status") == "False"]
        return len(placed) == bound_count and len(placed) + len(waiting) == len(names)

    await eventually(done, timeout, f"{bound_count} of {len(names)} pods bound and the rest reported")


# ---------------------------------------------------------------------------- InterPodAffinity


async def test_hostname_anti_affinity_puts_one_replica_per_node_and_the_rest_wait(tmp_path):
    nodes = [make_node(f"node-{i}") for i in range(5)]
    async with running(tmp_path, nodes) as env:
        names = [f"web-{i}" for i in range(8)]
        for n in names:
            env.create_pod(make_pod(n, labels={"app": "web"}, affinity=anti({"app": "web"})))
        await env_settled(env, names, bound_count=5)
        placed = bound_now(env, names)
        assert sorted(per_node(placed).values()) == [1] * 5
        for n in set(names) - set(placed):
            c = await unschedulable(env, n)
            # upstream's whole sentence: the replicas have equal priority, so DefaultPreemption finds no victims
            assert c["message"] == ("0/5 nodes are available: 5 node(s) didn't match pod anti-affinity rules. "
                                    "no new claims to deallocate, preemption: "
                                    "0/5 nodes are available: 5 No preemption victims found for "
                                    "incoming pod.")


async def test_zone_anti_affinity_allows_one_replica_per_zone(tmp_path):
    nodes = [zoned(f"{z}-{i}", z) for z in "abc" for i in range(2)]
    async with running(tmp_path, nodes) as env:
        names = [f"db-{i}" for i in range(5)]
        for n in names:
            env.create_pod(make_pod(n, labels={"app": "db"}, affinity=anti({"app": "db"}, ZONE)))
        await env_settled(env, names, bound_count=3)
        zones = sorted(env.node_of(n)[0] for n in names if env.node_of(n))
        assert zones == ["a", "b", "c"]


async def test_pods_follow_an_existing_pod_they_have_affinity_to(tmp_path):
    nodes = [make_node(f"node-{i}") for i in range(4)]
    async with running(tmp_path, nodes) as env:
        env.create_pod(make_pod("cache", labels={"app": "cache"}, node_name="node-2"))
        names = [f"app-{i}" for i in range(4)]
        for n in names:
            env.create_pod(make_pod(n, labels={"app": "client"}, affinity=near({"app": "cache"})))
        placed = await bound(env, *names)
        assert set(placed.values()) == {"node-2"}


async def test_the_first_pod_of_a_self_affine_set_goes_anywhere_and_the_rest_follow_it(tmp_path):
    nodes = [make_node(f"node-{i}") for i in range(4)]
    async with running(tmp_path, nodes) as env:
        env.create_pod(make_pod("first", labels={"app": "band"}, affinity=near({"app": "band"})))
        (first_node,) = (await bound(env, "first")).values()
        names = [f"member-{i}" for i in range(3)]
        for n in names:
            env.create_pod(make_pod(n, labels={"app": "band"}, affinity=near({"app": "band"})))
        placed = await bound(env, *names)
        assert set(placed.values()) == {first_node}
        # a pod whose affinity does not match itself has no first-pod exception
        env.create_pod(make_pod("orphan", labels={"app": "solo"}, affinity=near({"app": "nobody"})))
        c = await unschedulable(env, "orphan")
        assert c["message"] == ("0/4 nodes are available: 4 node(s) didn't match pod affinity rules. "
                                "no new claims to deallocate, preemption: "
                                "0/4 nodes are available: 4 Preemption is not helpful for scheduling.")


async def test_existing_pods_anti_affinity_keeps_others_away(tmp_path):
    nodes = [make_node(f"node-{i}") for i in range(3)]
    async with running(tmp_path, nodes) as env:
        env.create_pod(make_pod("loner", labels={"app": "loner"}, affinity=anti({"app": "web"})))
        (loner_node,) = (await bound(env, "loner")).values()
        names = [f"web-{i}" for i in range(6)]
        for n in names:
            env.create_pod(make_pod(n, labels={"app": "web"}))
        placed = await bound(env, *names)
        assert loner_node not in placed.values()


async def test_namespace_selector_reaches_pods_in_selected_namespaces_only(tmp_path):
    nodes = [make_node(f"node-{i}") for i in range(3)]
    async with running(tmp_path, nodes) as env:
        for ns, team in (("team-a", "a"), ("team-b", "b")):
            env.store.create(NAMESPACES, "", {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": ns, "labels": {"team": team}}})
        db = make_pod("db", labels={"app": "db"}, node_name="node-1")
        db["metadata"]["namespace"] = "team-a"
        env.store.create(PODS, "team-a", db)
        env.create_pod(make_pod("by-team", labels={"app": "x"},
                                affinity=near({"app": "db"}, namespaceSelector={"matchLabels": {"team": "a"}})))
        env.create_pod(make_pod("all-namespaces", labels={"app": "x"},
                                affinity=near({"app": "db"}, namespaceSelector={})))
        env.create_pod(make_pod("wrong-team", labels={"app": "x"},
                                affinity=near({"app": "db"}, namespaceSelector={"matchLabels": {"team": "b"}})))
        env.create_pod(make_pod("own-namespace", labels={"app": "x"}, affinity=near({"app": "db"})))
        placed = await bound(env, "by-team", "all-namespaces")
        assert set(placed.values()) == {"node-1"}
        for n in ("wrong-team", "own-namespace"):
            c = await unschedulable(env, n)
            assert c["message"] == ("0/3 nodes are available: 3 node(s) didn't match pod affinity rules. "
                                    "no new claims to deallocate, preemption: "
                                    "0/3 nodes are available: 3 Preemption is not helpful for scheduling."), n


async def test_tektons_affinity_assistant_tasks_follow_the_placeholder_and_wait_when_its_node_is_full(tmp_path):
    nodes = [make_node(f"node-{i}", cpu="2") for i in range(3)]
    assistant = {"app.kubernetes.io/component": "affinity-assistant",
                 "app.kubernetes.io/instance": "affinity-assistant-4f1c"}
    async with running(tmp_path, nodes) as env:
        env.create_pod(make_pod("affinity-assistant-4f1c-0", cpu="100m", labels=assistant))
        (home,) = (await bound(env, "affinity-assistant-4f1c-0")).values()
        tasks = [f"run-task-{i}" for i in range(4)]     # 3 x 600m fit next to the placeholder, the fourth does not
        for n in tasks:
            env.create_pod(make_pod(n, cpu="600m", labels={"tekton.dev/pipelineRun": "run"},
                                    affinity=near(assistant)))
        await env_settled(env, tasks, bound_count=3)
        assert set(bound_now(env, tasks).values()) == {home}
        (waiting,) = [n for n in tasks if not env.node_of(n)]
        c = await unschedulable(env, waiting)
        assert c["message"] == ("0/3 nodes are available: 1 Insufficient cpu, "
                                "2 node(s) didn't match pod affinity rules. "
                                "no new claims to deallocate, preemption: 0/3 nodes are available: "
                                "1 No preemption victims found for incoming pod, "
                                "2 Preemption is not helpful for scheduling."), c["message"]


# ---------------------------------------------------------------------------- PodTopologySpread


async def test_zone_spread_with_a_full_small_zone_stops_the_others_at_max_skew(tmp_path):
    nodes = [zoned("a-0", "a", cpu="1"), zoned("b-0", "b"), zoned("b-1", "b"), zoned("c-0", "c"), zoned("c-1", "c")]
    async with running(tmp_path, nodes) as env:
        names = [f"web-{i}" for i in range(8)]
        for n in names:
            env.create_pod(make_pod(n, cpu="600m", labels={"app": "web"}, topologySpreadConstraints=spread({"app": "web"})))
        await env_settled(env, names, bound_count=5)
        zones = collections.Counter(env.node_of(n)[0] for n in names if env.node_of(n))
        assert zones == {"a": 1, "b": 2, "c": 2}
        (c,) = [await unschedulable(env, n) for n in names if not env.node_of(n)][:1]
        assert c["message"] == ("0/5 nodes are available: 1 Insufficient cpu, "
                                "4 node(s) didn't match pod topology spread constraints. "
                                "no new claims to deallocate, preemption: 0/5 nodes "
                                "are available: 5 No preemption victims found for incoming pod."), c["message"]


async def test_min_domains_treats_the_global_minimum_as_zero_until_enough_zones_exist(tmp_path):
    nodes = [zoned(f"{z}-{i}", z) for z in "ab" for i in range(2)]
    async with running(tmp_path, nodes) as env:
        names = [f"web-{i}" for i in range(4)]
        for n in names:
            env.create_pod(make_pod(n, labels={"app": "web"},
                                    topologySpreadConstraints=spread({"app": "web"}, minDomains=3)))
        await env_settled(env, names, bound_count=2)
        assert sorted(env.node_of(n)[0] for n in names if env.node_of(n)) == ["a", "b"]


async def test_node_affinity_policy_honor_counts_only_nodes_the_pod_may_use(tmp_path):
    nodes = [zoned(f"{z}-0", z) for z in "abc"]
    allowed = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a", "b"]}]}]}}}
    async with running(tmp_path, nodes) as env:
        honor = [f"honor-{i}" for i in range(4)]
        for n in honor:     # zone c is not theirs: it does not hold the minimum at 0
            env.create_pod(make_pod(n, labels={"app": "honor"}, affinity=allowed,
                                    topologySpreadConstraints=spread({"app": "honor"})))
        placed = await bound(env, *honor)
        assert collections.Counter(v[0] for v in placed.values()) == {"a": 2, "b": 2}
        ignore = [f"ignore-{i}" for i in range(4)]
        for n in ignore:    # zone c counts, empty: a and b stop at one each
            env.create_pod(make_pod(n, labels={"app": "ignore"}, affinity=allowed,
                                    topologySpreadConstraints=spread({"app": "ignore"}, nodeAffinityPolicy="Ignore")))
        await env_settled(env, ignore, bound_count=2)


async def test_node_taints_policy_honor_leaves_out_nodes_the_pod_does_not_tolerate(tmp_path):
    taint = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    nodes = [zoned("a-0", "a"), zoned("b-0", "b"), zoned("c-0", "c", taints=taint)]
    async with running(tmp_path, nodes) as env:
        honor = [f"honor-{i}" for i in range(4)]
        for n in honor:
            env.create_pod(make_pod(n, labels={"app": "honor"},
                                    topologySpreadConstraints=spread({"app": "honor"}, nodeTaintsPolicy="Honor")))
        placed = await bound(env, *honor)
        assert collections.Counter(v[0] for v in placed.values()) == {"a": 2, "b": 2}
        ignore = [f"ignore-{i}" for i in range(4)]
        for n in ignore:    # the default, Ignore: the tainted zone counts, empty
            env.create_pod(make_pod(n, labels={"app": "ignore"}, topologySpreadConstraints=spread({"app": "ignore"})))
        await env_settled(env, ignore, bound_count=2)


async def test_match_label_keys_spreads_each_revision_of_a_rolling_update_on_its_own(tmp_path):
    nodes = [make_node(f"node-{i}") for i in range(3)]
    async with running(tmp_path, nodes) as env:
        for i in range(2):   # the old revision happens to sit on node-0
            env.create_pod(make_pod(f"web-v1-{i}", labels={"app": "web", "pod-template-hash": "v1"}, node_name="node-0"))
        names = [f"web-v2-{i}" for i in range(3)]
        for n in names:
            env.create_pod(make_pod(n, labels={"app": "web", "pod-template-hash": "v2"},
                                    topologySpreadConstraints=spread({"app": "web"}, HOST,
                                                                     matchLabelKeys=["pod-template-hash"])))
        placed = await bound(env, *names)
        assert sorted(placed.values()) == ["node-0", "node-1", "node-2"]


async def test_schedule_anyway_never_blocks_a_pod(tmp_path):
    nodes = [zoned("a-0", "a"), zoned("b-0", "b", cpu="100m"), zoned("c-0", "c", cpu="100m")]
    async with running(tmp_path, nodes) as env:
        names = [f"web-{i}" for i in range(5)]
        for n in names:
            env.create_pod(make_pod(n, cpu="200m", labels={"app": "web"},
                                    topologySpreadConstraints=spread({"app": "web"}, when="ScheduleAnyway")))
        placed = await bound(env, *names)
        assert set(placed.values()) == {"a-0"}


async def test_system_default_spreading_spreads_a_services_pods_even_when_the_profile_packs(tmp_path):
    services = lookup("", "v1", "services")
    packing = config(profiles=[{"schedulerName": "tandem-scheduler", "pluginConfig": [
        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}]}])
    nodes = [make_node(f"node-{i}") for i in range(4)]
    async with running(tmp_path, nodes, packing) as env:
        env.store.create(services, NS, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                                        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
        names = [f"web-{i}" for i in range(8)]
        for n in names:
            env.create_pod(make_pod(n, labels={"app": "web"}))
        placed = await bound(env, *names)
        assert sorted(per_node(placed).values()) == [2, 2, 2, 2]
        # the control: pods no Service selects are packed, as the profile asks
        batch = [f"batch-{i}" for i in range(4)]
        for n in batch:
            env.create_pod(make_pod(n, labels={"app": "batch"}))
        assert len(set((await bound(env, *batch)).values())) == 1
