"""Consolidation on both servers: the simulated cluster and a real kube-apiserver 1.36 with its real ReplicaSet
and disruption controllers.

What is tested is what a user of a profile that enables Consolidation sees: a gang that needs whole nodes binds
once the scheduler moved the fewest ReplicaSet pods off two nodes (through the Eviction API, one at a time under
a PodDisruptionBudget, each replacement steered to its planned node and never back where its predecessor ran);
low nodes emptied into the fullest (a prefer-no-eviction pod stays); a zone that joins gets its share of a
zone-spread ReplicaSet with two evictions; nothing is evicted for a pod no move can help; a dry run evicts
nothing and says what it would do. tests/unit/test_consolidation.py has the same cases in process.

How: tandem runs in process (``App``, with tandem's default profile plus Consolidation, ``intervalSeconds: 1``,
``minPodAgeSeconds: 0``), as in tests/integration/test_gangs_native.py. There is no kubelet on the real server,
so the test plays it on both (:class:`Kubelet`): a bound pod is made Running and Ready, a terminating pod is
deleted at once. The real clock is read only through bounded waits (``eventually``, ``stays``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import time
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio

from bench.simcluster.agent import AgentConfig
from scheduler.apiclient import Conflict, NotFound, from_kubeconfig
from scheduler.app import App
from scheduler.config import SchedulerConfig, parse_config
from scheduler.framework.clock import Clock
from tests.integration.test_gangs_native import Cluster as GangCluster
from tests.integration.test_gangs_native import native_member
from tests.integration.test_scheduler import eventually, make_node, make_pod, stays
from tests.support import envtest, servers
from tests.support.servers import Server

pytestmark = pytest.mark.asyncio(loop_scope="module")

ZONE = "topology.kubernetes.io/zone"
PREFER_NO_EVICTION = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
_ids = itertools.count()

real = servers.real_apiserver_fixture(native_gangs=True,
                                      controllers=("replicaset-controller", "disruption-controller",
                                                   "statefulset-controller"))


@pytest_asyncio.fixture(params=["sim", "real"], loop_scope="module")
async def server(request: pytest.FixtureRequest, tmp_path: Path,
                 real: envtest.RealAPIServer | None) -> AsyncIterator[Server]:
    async with servers.serving(request.param, tmp_path, real, native_gangs=True,
                               agent=AgentConfig(ready_delay=0.05, tick=0.01)) as s:
        yield s


def consolidation_config(**args: Any) -> SchedulerConfig:
    prof = {"schedulerName": "tandem-scheduler",
            "plugins": {"multiPoint": {"enabled": [{"name": "Consolidation"}]}},
            "pluginConfig": [{"name": "Consolidation",
                              "args": {"intervalSeconds": 1, "minPodAgeSeconds": 0, "cooldownSeconds": 1, **args}}]}
    cfg = parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                        "profiles": [prof]})
    return dataclasses.replace(cfg, pod_initial_backoff_seconds=0.1, pod_max_backoff_seconds=1,
                               client_qps=2000, client_burst=4000,
                               leader_election=dataclasses.replace(cfg.leader_election, leader_elect=False))


def replica_set(name: str, replicas: int, cpu: str, annotations: dict[str, str] | None = None,
                **spec: Any) -> dict[str, Any]:
    pod = make_pod(name, cpu=cpu, memory="64Mi", labels={"app": name}, terminationGracePeriodSeconds=0, **spec)
    meta: dict[str, Any] = {"labels": {"app": name}}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": meta, "spec": pod["spec"]}}}


def stateful_set(name: str, replicas: int, cpu: str) -> dict[str, Any]:
    """A StatefulSet (pods web-0, web-1, ... started in parallel), as ``replica_set`` makes a ReplicaSet."""
    rs = replica_set(name, replicas, cpu)
    rs.update(kind="StatefulSet")
    rs["spec"].update(serviceName=name, podManagementPolicy="Parallel")
    return rs


def _ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


class Cluster(GangCluster):
    """The test's view (test_gangs_native's), with ReplicaSets, and the most pods of ``watched`` (a ReplicaSet of
    ``replicas``) unavailable at once, as its informer saw them (``worst``)."""

    watched: str = ""
    replicas: int = 0
    worst: int = 0
    uids: dict[str, set[str]]   # pod name -> the uids seen under it (a StatefulSet's pod comes back under its name)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.uids = {}

    def on_pod_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        super().on_pod_update(old, new)
        meta = new["metadata"]
        self.uids.setdefault(meta["name"], set()).add(meta["uid"])
        if self.watched:
            self.worst = max(self.worst, self.replicas - self.available(self.watched))

    def of(self, app: str) -> list[dict[str, Any]]:
        return [p for p in list(self.pods.store.values()) if (p["metadata"].get("labels") or {}).get("app") == app]

    def live(self, app: str) -> list[dict[str, Any]]:
        return [p for p in self.of(app) if not p["metadata"].get("deletionTimestamp")]

    def available(self, app: str) -> int:
        return sum(1 for p in self.live(app) if p["spec"].get("nodeName") and _ready(p))

    def placement(self, app: str) -> dict[str, str]:
        return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in self.live(app)}

    async def clean_up(self) -> None:
        for kind in ("replicasets", "statefulsets"):
            path = f"/apis/apps/v1/namespaces/{self.ns}/{kind}"
            for owner in (await self.client.list(path))["items"]:
                with contextlib.suppress(NotFound):
                    await self.client.delete(f"{path}/{owner['metadata']['name']}",
                                             {"propagationPolicy": "Background"})
        await super().clean_up()


class Kubelet:
    """What the kubelets would do for the test's namespace: a bound pod runs and is Ready; a terminating pod
    goes at once (its grace period is 0). The simulated cluster's agent may do either first."""

    def __init__(self, c: Cluster) -> None:
        self.c = c

    async def run(self) -> None:
        while True:
            for pod in list(self.c.pods.store.values()):
                meta, spec = pod["metadata"], pod["spec"]
                name = meta["name"]
                with contextlib.suppress(NotFound, Conflict):
                    if meta.get("deletionTimestamp"):
                        await self.c.delete_pod(name)
                    elif spec.get("nodeName") and not _ready(pod):
                        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                        await self.c.client.patch_pod_status(self.c.ns, name, {"status": {
                            "phase": "Running", "startTime": now,
                            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}})
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def running(server: Server, nodes: list[dict[str, Any]], config: SchedulerConfig) -> AsyncIterator[Cluster]:
    """A fresh namespace, ``nodes``, the kubelet, and tandem with ``config``, for the block."""
    ns = f"consolidation-{next(_ids)}-{server.kind}"
    clock = Clock()
    async with await from_kubeconfig(str(server.kubeconfig), qps=0, clock=clock) as client:
        await client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        c = Cluster(client, ns, clock)
        kubelet = None
        try:
            async with c.pods, c.groups:
                await eventually(lambda: c.pods.synced.is_set() and c.groups.synced.is_set(), 10, "informers")
                for n in nodes:
                    await c.add_node(n)
                kubelet = asyncio.ensure_future(Kubelet(c).run())
                async with App(config, kubeconfig=str(server.kubeconfig)) as app:
                    c.app = app
                    yield c
                c.app = None
        finally:
            if kubelet is not None:
                kubelet.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await kubelet
            await c.clean_up()


async def notes(c: Cluster, reason: str) -> dict[str, str]:
    """Pod name -> the note of the namespace's last event with ``reason`` about it."""
    items = (await c.client.list(f"/apis/events.k8s.io/v1/namespaces/{c.ns}/events"))["items"]
    return {e["regarding"]["name"]: e.get("note", "") for e in items if e.get("reason") == reason}


async def settled(c: Cluster, app: str, replicas: int) -> dict[str, str]:
    """Wait until ``app`` has ``replicas`` bound, Ready pods and nothing terminating; their placement."""
    await eventually(lambda: c.available(app) == replicas and len(c.of(app)) == replicas, 30,
                     f"{replicas} pods of {app} bound and Ready")
    return c.placement(app)


def bounce_backs(c: Cluster) -> float:
    """tandem's count of replacements bound elsewhere than their planned node."""
    assert c.app is not None and c.app.scheduler is not None
    m = c.app.scheduler.rebalancer.metrics
    assert m is not None
    return sum(s.value for metric in m.bounce_backs.collect() for s in metric.samples if s.name.endswith("_total"))


def sources(evicted: dict[str, str]) -> set[str]:
    """The nodes the evicted pods left, from the events' notes ("moving the pod from node X to node Y ...")."""
    return {n.split("from node ", 1)[1].split(" ", 1)[0] for n in evicted.values()}


async def test_defragment_opens_two_whole_nodes_for_a_gang_under_a_budget(server):
    tag = f"d{next(_ids)}{server.kind}"
    async with running(server, [make_node(f"{tag}-n{i}", cpu="4") for i in range(4)],
                       consolidation_config()) as c:
        await c.create_pod(make_pod("bare", cpu=None, memory=None))   # no controller: never moved
        await eventually(lambda: c.node_of("bare"), 10, "the bare pod bound")
        await c.create("replicasets", replica_set("web", 8, "1"), "/apis/apps/v1")
        first = await settled(c, "web", 8)
        assert sorted(list(first.values()).count(n) for n in set(first.values())) == [2, 2, 2, 2], first
        await c.create("poddisruptionbudgets", {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                                "metadata": {"name": "web"},
                                                "spec": {"maxUnavailable": 1,
                                                         "selector": {"matchLabels": {"app": "web"}}}},
                       "/apis/policy/v1")
        c.watched, c.replicas = "web", 8
        await c.create_native_group("g", 2)
        for n in ("g-0", "g-1"):
            await c.create_pod(native_member(n, "g", cpu="4"))
        await eventually(lambda: len(c.bound("g-0", "g-1")) == 2, 60, "the gang bound whole")
        assert c.node_of("g-0") != c.node_of("g-1")
        placement = await settled(c, "web", 8)
        evicted = await notes(c, "Defragment")
        assert 1 <= len(evicted) <= 4, evicted
        assert "bare" not in evicted and c.node_of("bare")
        assert all("to open room for pod group" in n for n in evicted.values()), evicted
        left = sources(evicted)
        assert {c.node_of("g-0"), c.node_of("g-1")} <= left, (left, c.bound("g-0", "g-1"))   # the nodes emptied
        new = {name: node for name, node in placement.items() if name not in first}
        assert len(new) == len(evicted)
        assert not set(new.values()) & left, (new, left)   # no replacement where a moved pod ran
        assert c.worst <= 1, f"{c.worst} of the ReplicaSet's pods unavailable at once"
        assert bounce_backs(c) == 0


async def test_defragment_opens_one_rack_for_a_gang_that_must_run_in_one(server):
    tag = f"t{next(_ids)}{server.kind}"
    rack = f"{tag}.example.com/rack"
    racks = {f"{tag}-n0": "r1", f"{tag}-n1": "r1", f"{tag}-n2": "r2", f"{tag}-n3": "r2"}
    async with running(server, [make_node(n, cpu="4", labels={rack: r}) for n, r in racks.items()],
                       consolidation_config()) as c:
        await c.create("replicasets", replica_set("web", 8, "1"), "/apis/apps/v1")
        first = await settled(c, "web", 8)
        assert sorted(list(first.values()).count(n) for n in set(first.values())) == [2, 2, 2, 2], first
        await c.create_native_group("g", 2, topology=rack)
        for n in ("g-0", "g-1"):
            await c.create_pod(native_member(n, "g", cpu="4"))
        await eventually(lambda: len(c.bound("g-0", "g-1")) == 2, 60, "the gang bound whole")
        assert racks[c.node_of("g-0")] == racks[c.node_of("g-1")] and c.node_of("g-0") != c.node_of("g-1")
        placement = await settled(c, "web", 8)
        evicted = await notes(c, "Defragment")
        assert len(evicted) == 4, evicted   # the two nodes of one rack emptied, their pods in the other rack
        assert sources(evicted) == {c.node_of("g-0"), c.node_of("g-1")}
        new = {name: node for name, node in placement.items() if name not in first}
        assert len(new) == 4 and not set(new.values()) & sources(evicted), new
        assert bounce_backs(c) == 0


async def test_compact_empties_low_nodes_into_the_fullest_and_keeps_prefer_no_eviction(server):
    tag = f"c{next(_ids)}{server.kind}"
    async with running(server, [make_node(f"{tag}-n{i}", cpu="4") for i in range(4)],
                       consolidation_config(defragment=False, compact={"enabled": True})) as c:
        await c.create("replicasets", replica_set("keep", 1, "100m", {PREFER_NO_EVICTION: "true"}), "/apis/apps/v1")
        kept = await settled(c, "keep", 1)
        await c.create("replicasets", replica_set("web", 4, "500m"), "/apis/apps/v1")

        def packed() -> bool:
            nodes = {n for n in c.placement("web").values() if n}
            return c.available("web") == 4 and len(c.of("web")) == 4 and len(nodes) <= 2

        await eventually(packed, 60, "the web pods on at most 2 nodes")
        used = set(c.placement("web").values()) | set(c.placement("keep").values())
        assert len(set(c.nodes) - used) >= 2
        assert c.placement("keep") == kept
        evicted = await notes(c, "Compact")
        assert evicted and all(name.startswith("web-") for name in evicted)
        assert all("to empty node(s)" in n for n in evicted.values())
        assert bounce_backs(c) == 0


async def test_compact_moves_a_stateful_sets_pods_which_come_back_under_their_names(server):
    """A StatefulSet recreates an evicted pod under the same name once the old one is gone (a new uid): the
    replacement is steered to the planned node all the same. Only the real server runs a StatefulSet
    controller."""
    if server.kind == "sim":
        pytest.skip("the simulated cluster runs no StatefulSet controller; the real kube-controller-manager does")
    tag = f"ss{next(_ids)}{server.kind}"
    async with running(server, [make_node(f"{tag}-n{i}", cpu="4") for i in range(4)],
                       consolidation_config(defragment=False, compact={"enabled": True})) as c:
        await c.create("statefulsets", stateful_set("db", 4, "500m"), "/apis/apps/v1")

        def packed() -> bool:
            nodes = {n for n in c.placement("db").values() if n}
            return c.available("db") == 4 and len(c.of("db")) == 4 and len(nodes) <= 2

        await eventually(packed, 60, "the StatefulSet's pods on at most 2 nodes")
        assert sorted(c.placement("db")) == [f"db-{i}" for i in range(4)]
        evicted = await notes(c, "Compact")
        assert evicted and set(evicted) <= set(c.placement("db")), evicted
        moved = {name for name, ids in c.uids.items() if len(ids) > 1}
        assert moved == set(evicted), (moved, evicted)   # each evicted pod came back under its name, a new uid
        assert not set(c.placement("db")[n] for n in moved) & sources(evicted)
        assert bounce_backs(c) == 0


async def test_a_new_zone_gets_its_share_of_a_zone_spread_replica_set_with_two_evictions(server):
    tag = f"s{next(_ids)}{server.kind}"
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}]
    async with running(server, [make_node(f"{tag}-a", labels={ZONE: f"{tag}-A"}),
                                make_node(f"{tag}-b", labels={ZONE: f"{tag}-B"})],
                       consolidation_config(defragment=False, spread={"enabled": True})) as c:
        await c.create("replicasets", replica_set("web", 6, "100m", topologySpreadConstraints=spread),
                       "/apis/apps/v1")
        first = await settled(c, "web", 6)
        assert sorted(first.values()) == [f"{tag}-a"] * 3 + [f"{tag}-b"] * 3
        await c.add_node(make_node(f"{tag}-c", labels={ZONE: f"{tag}-C"}))

        def even() -> bool:
            nodes = sorted(n for n in c.placement("web").values() if n)
            return c.available("web") == 6 and len(c.of("web")) == 6 and \
                nodes == [f"{tag}-a"] * 2 + [f"{tag}-b"] * 2 + [f"{tag}-c"] * 2

        await eventually(even, 60, "the web pods 2+2+2 over three zones")
        evicted = await notes(c, "Respread")
        assert len(evicted) == 2, evicted
        new = {n: node for n, node in c.placement("web").items() if n not in first}
        assert set(new.values()) == {f"{tag}-c"}
        assert bounce_backs(c) == 0


async def test_a_pod_no_move_can_help_causes_no_eviction(server):
    tag = f"n{next(_ids)}{server.kind}"
    async with running(server, [make_node(f"{tag}-n{i}", cpu="4") for i in range(3)],
                       consolidation_config()) as c:
        await c.create("replicasets", replica_set("web", 3, "1"), "/apis/apps/v1")
        first = await settled(c, "web", 3)
        await c.create_pod(make_pod("huge", cpu="8"))   # 8 cpu on 4-cpu nodes: no move can help
        await eventually(lambda: "Insufficient cpu" in str(((c.pod("huge") or {}).get("status") or {}).get("conditions")),
                         10, "the huge pod reported unschedulable")
        await stays(lambda: c.placement("web") == first and not c.node_of("huge"), 3, "nothing moved")
        assert not await notes(c, "Defragment")


async def test_a_dry_run_evicts_nothing_and_says_what_it_would_do(server):
    tag = f"r{next(_ids)}{server.kind}"
    async with running(server, [make_node(f"{tag}-n{i}", cpu="4") for i in range(3)],
                       consolidation_config(dryRun=True, compact={"enabled": True})) as c:
        await c.create("replicasets", replica_set("web", 3, "500m"), "/apis/apps/v1")
        first = await settled(c, "web", 3)
        assert len(set(first.values())) == 3

        async def told() -> dict[str, str]:
            return await notes(c, "Compact")

        said = await eventually(told, 30, "the dry run's events")
        await stays(lambda: c.placement("web") == first, 3, "nothing moved")
        assert all(n.startswith("dry run: compact would move the pod from node ") and f"to node {tag}-" in n
                   for n in said.values()), said
