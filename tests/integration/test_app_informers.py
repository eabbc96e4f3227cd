"""The App's informers for Services, controllers and namespaces, on the simulated cluster.

What they feed: the Scheduler's one SpreadSelectors (PodTopologySpread's
system default constraints) and the cache's namespace labels
(InterPodAffinity's namespaceSelector). A server that does not serve one of
these kinds is not an error: the App starts without that informer and says so.
"""

from __future__ import annotations

import logging
from typing import Any

from bench.simcluster import SimCluster
from bench.simcluster.resources import lookup
from scheduler.apiclient import NotFound, from_kubeconfig
from scheduler.app import App
from scheduler.config import parse_config
from scheduler.framework.clock import Clock
from scheduler.model import OwnerRef
from tests.support.waiting import eventually

CONFIG = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
SERVICES = lookup("", "v1", "services")
REPLICA_SETS = lookup("apps", "v1", "replicasets")
NAMESPACES = lookup("", "v1", "namespaces")
OWNED = (OwnerRef("ReplicaSet", "web-1", "u1", True, "apps/v1"),)


async def test_services_replica_sets_and_namespaces_reach_the_scheduler(tmp_path) -> None:
    kc = tmp_path / "kubeconfig"
    async with SimCluster(nodes=0, agent=None, kubeconfig=kc) as cluster:
        store = cluster.store
        store.create(SERVICES, "default", {"metadata": {"name": "web"},
                                           "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
        async with App(parse_config(CONFIG, "<test>"), kubeconfig=str(kc)) as app:
            assert app.scheduler is not None
            spread, cache = app.scheduler.spread_selectors, app.scheduler.cache
            # listed before pods: there at once
            assert spread.default_selector("default", {"app": "web"}, ()) == ({"app": "web"}, [])
            assert cache.namespaces["default"] == {"kubernetes.io/metadata.name": "default"}

            store.create(REPLICA_SETS, "default", {
                "metadata": {"name": "web-1"},
                "spec": {"selector": {"matchLabels": {"app": "web", "pod-template-hash": "1"}},
                         "template": {"metadata": {"labels": {"app": "web", "pod-template-hash": "1"}},
                                      "spec": {"containers": [{"name": "c", "image": "pause"}]}}}})
            store.create(NAMESPACES, "", {"metadata": {"name": "team", "labels": {"env": "prod"}}})
            await eventually(lambda: spread.default_selector("default", {"app": "web"}, OWNED)
                             == ({"app": "web"}, [{"matchLabels": {"app": "web", "pod-template-hash": "1"}}]),
                             "the ReplicaSet's selector")
            await eventually(lambda: cache.namespaces.get("team") == {"env": "prod",
                                                                      "kubernetes.io/metadata.name": "team"},
                             "the new namespace and its labels")

            store.delete(SERVICES, "default", "web")
            store.delete(NAMESPACES, "", "team")
            await eventually(lambda: spread.default_selector("default", {"app": "web"}, ()) is None,
                             "the deleted Service to select no more")
            await eventually(lambda: "team" not in cache.namespaces, "the deleted namespace to go")


class WithoutStatefulSets:
    """The scheduler's client, against a server that does not serve apps/v1 statefulsets."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def list(self, path: str, *args: Any, **kwargs: Any) -> Any:
        if path == "/apis/apps/v1/statefulsets":
            raise NotFound(404, "NotFound", "the server could not find the requested resource")
        return await self._client.list(path, *args, **kwargs)


async def test_a_kind_the_server_does_not_serve_is_left_out_with_a_warning(tmp_path, caplog) -> None:
    kc = tmp_path / "kubeconfig"
    async with SimCluster(nodes=0, agent=None, kubeconfig=kc):
        async with await from_kubeconfig(str(kc), qps=0, clock=Clock()) as client:
            with caplog.at_level(logging.WARNING, logger="tandem.app"):
                async with App(parse_config(CONFIG, "<test>"), client=WithoutStatefulSets(client)) as app:
                    names = {inf.name for inf in app.informers}
                    assert {"services", "replicationcontrollers", "replicasets", "namespaces"} <= names
                    assert "statefulsets" not in names
    assert any("/apis/apps/v1/statefulsets" in r.getMessage() for r in caplog.records), caplog.text
