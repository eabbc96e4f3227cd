"""bench/baseline.py: the no-logic binder, against the simulated cluster in this process."""

from __future__ import annotations

import asyncio
import collections
import time

import pytest

from bench.baseline import BaselineBinder
from bench.simcluster import SimCluster
from scheduler.apiclient import from_kubeconfig
from scheduler.framework.clock import Clock

NAME = "baseline-binder"


@pytest.fixture
async def cluster(tmp_path):
    kubeconfig = tmp_path / "sim.kubeconfig"
    async with SimCluster(nodes=0, kubeconfig=str(kubeconfig)):
        client = await from_kubeconfig(str(kubeconfig), qps=0, clock=Clock())
        try:
            yield client
        finally:
            await client.close()


async def add_node(client, name):
    await client.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})


async def add_pod(client, name, scheduler=NAME, gated=False):
    spec = {"schedulerName": scheduler, "containers": [{"name": "c", "image": "pause"}]}
    if gated:
        spec["schedulingGates"] = [{"name": "example.com/wait"}]
    return await client.create("/api/v1/namespaces/default/pods",
                               {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})


async def node_of(client, name):
    return (await client.get(f"/api/v1/namespaces/default/pods/{name}"))["spec"].get("nodeName")


async def wait_for(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_binds_its_pods_round_robin_over_the_nodes(cluster):
    for i in range(3):
        await add_node(cluster, f"n{i}")
    async with BaselineBinder(cluster, NAME) as binder:
        await asyncio.gather(*(add_pod(cluster, f"p{i}") for i in range(30)))
        await wait_for(lambda: binder.bound == 30)
        nodes = collections.Counter([await node_of(cluster, f"p{i}") for i in range(30)])
    assert nodes == {"n0": 10, "n1": 10, "n2": 10}
    assert binder.failures == 0


async def test_leaves_other_schedulers_pods_alone(cluster):
    await add_node(cluster, "n0")
    async with BaselineBinder(cluster, NAME) as binder:
        await add_pod(cluster, "theirs", scheduler="tandem-scheduler")
        await add_pod(cluster, "mine")
        await wait_for(lambda: binder.bound == 1)
        await asyncio.sleep(0.2)
        assert await node_of(cluster, "theirs") is None
        assert await node_of(cluster, "mine") == "n0"


async def test_a_pod_that_comes_before_any_node_waits_for_the_first_node(cluster):
    async with BaselineBinder(cluster, NAME) as binder:
        await add_pod(cluster, "early")
        await asyncio.sleep(0.2)
        assert binder.bound == 0
        await add_node(cluster, "late-node")
        await wait_for(lambda: binder.bound == 1)
    assert await node_of(cluster, "early") == "late-node"


async def test_a_gated_pod_is_bound_only_once_its_gates_are_removed(cluster):
    await add_node(cluster, "n0")
    async with BaselineBinder(cluster, NAME) as binder:
        await add_pod(cluster, "gated", gated=True)
        await asyncio.sleep(0.3)
        assert binder.bound == 0 and binder.conflicts == 0
        await cluster.patch("/api/v1/namespaces/default/pods/gated", {"spec": {"schedulingGates": None}})
        await wait_for(lambda: binder.bound == 1)
    assert await node_of(cluster, "gated") == "n0"


async def test_pods_already_pending_when_it_starts_are_bound(cluster):
    await add_node(cluster, "n0")
    await add_pod(cluster, "waiting")
    async with BaselineBinder(cluster, NAME) as binder:
        await wait_for(lambda: binder.bound == 1)
    assert await node_of(cluster, "waiting") == "n0"
