"""The process's API clients: binds and events each have their own, as kube-scheduler's do."""

from __future__ import annotations

from bench.simcluster import SimCluster
from bench.simcluster.agent import AgentConfig
from bench.simcluster.resources import lookup
from scheduler.app import App
from scheduler.config import parse_config
from tests.integration.test_scheduler import eventually, make_node, make_pod

PODS = lookup("", "v1", "pods")
NODES = lookup("", "v1", "nodes")


async def test_events_are_written_through_their_own_client_and_rate_limit(tmp_path) -> None:
    kc = tmp_path / "kubeconfig"
    cfg = parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                        "clientConnection": {"qps": 200, "burst": 300}}, "<test>")
    async with SimCluster(nodes=0, agent=AgentConfig(ready_delay=0.05, tick=0.01), kubeconfig=kc) as cluster:
        cluster.store.create(NODES, "", make_node("node-0", cpu="8"))
        async with App(cfg, kubeconfig=str(kc)) as app:
            assert app.event_client is not app.client
            assert app.event_client.bucket is not app.client.bucket, "events must not spend the binds' tokens"
            assert (app.event_client.bucket.qps, app.event_client.bucket.burst) == (200, 300)
            for i in range(5):
                cluster.store.create(PODS, "default", make_pod(f"p{i}", cpu="100m"))
            await eventually(lambda: app.event_client.counts["create", "201"] >= 5, 10,
                             "a Scheduled event per pod, written by the events client")
            assert app.client.counts["create", "201"] == 5, "the scheduler's client made the 5 binds and no event"
