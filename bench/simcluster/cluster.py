"""A whole simulated cluster in one object: API server, nodes, node agent, controllers, kubeconfig.

Used three ways, all through :class:`SimCluster`:

* ``async with SimCluster(nodes=100) as c:`` inside tests and the benchmark;
* ``python -m bench.simcluster`` (the CLI) in its own process;
* ``make run``'s demo (``bench/demo.py``).

The server binds loopback only. Port 0 picks a free port; ``c.url`` says
which.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from bench.simcluster.agent import AgentConfig, NodeAgent
from bench.simcluster.auth import ADMIN_TOKEN
from bench.simcluster.disruption import DisruptionController
from bench.simcluster.faults import Faults
from bench.simcluster.jobs import JobController, PodGroupProtection
from bench.simcluster.replicasets import ReplicaSetController
from bench.simcluster.resourceclaims import ResourceClaimController
from bench.simcluster.resources import NATIVE_GANGS, lookup
from bench.simcluster.server import APIServer
from bench.simcluster.store import Store
from bench.simcluster.volumes import (
    PersistentVolumeController, TestProvisioner, VolumeConfig, register_driver, register_node,
)

NODES = lookup("", "v1", "nodes")

# scheduler_perf's default node (test/integration/scheduler_perf/templates/node-default.yaml)
DEFAULT_NODE_TEMPLATE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"generateName": "node-", "labels": {"kubernetes.io/os": "linux",
                                                      "kubernetes.io/arch": "amd64"}},
    "spec": {},
    "status": {
        "capacity": {"pods": "110", "cpu": "4", "memory": "32Gi", "ephemeral-storage": "100Gi"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "kubelet is posting ready status"}],
        "phase": "Running",
    },
}


def node_object(template: dict[str, Any], index: int, zones: int, region: str = "region-1") -> dict[str, Any]:
    """The ``index``-th node from a template: a stable name and the well-known topology labels."""
    node = copy.deepcopy(template)
    meta = node.setdefault("metadata", {})
    name = meta.pop("name", None) or f"{meta.pop('generateName', 'node-')}{index}"
    meta.pop("generateName", None)
    meta["name"] = name
    labels = meta.setdefault("labels", {})
    labels.setdefault("kubernetes.io/hostname", name)
    if zones > 0:
        labels.setdefault("topology.kubernetes.io/zone", f"zone-{index % zones}")
        labels.setdefault("topology.kubernetes.io/region", region)
    return node


def write_kubeconfig(path: str | os.PathLike[str], server: str, name: str = "tandem-sim") -> Path:
    """A kubeconfig any client (kubernetes-asyncio, kubectl) can use.

    The simulated server takes any token from its callers; a TokenReview of this one says
    ``simcluster-admin`` in ``system:masters`` (see :mod:`bench.simcluster.auth`).
    """
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "users": [{"name": name, "user": {"token": ADMIN_TOKEN}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}],
        "current-context": name,
        "preferences": {},
    }
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return p


@dataclass
class SimCluster:
    """API server + nodes + node agent + controllers. An async context manager.

    The controllers (disruption: PodDisruptionBudget status; ReplicaSet; Job; podgroup-protection
    with ``native_gangs``; resourceclaim: Dynamic Resource Allocation's claims of pods) run with the node
    agent: ``agent=None`` leaves a bare API server, as scheduler_perf's, with none of them.
    The volume controllers (the PV controller, the test provisioner and its CSINodes;
    :mod:`bench.simcluster.volumes`) have their own switch: ``volumes=None`` leaves them out.
    """

    nodes: int = 0
    zones: int = 3
    port: int = 0
    host: str = "127.0.0.1"
    node_template: dict[str, Any] = field(default_factory=lambda: copy.deepcopy(DEFAULT_NODE_TEMPLATE))
    agent: AgentConfig | None = field(default_factory=AgentConfig)  # None: no kubelet stand-in, no controllers
    faults: Faults = field(default_factory=Faults)
    volumes: VolumeConfig | None = field(default_factory=VolumeConfig)  # None: no volume controllers
    watch_window: int = 20_000
    bookmark_interval: float = 60.0
    kubeconfig: str | os.PathLike[str] | None = None
    # serve upstream's native gang API, as --runtime-config=scheduling.k8s.io/v1alpha2=true with its
    # gates; the Job controller then gives qualifying Jobs their Workload and PodGroup (WorkloadWithJob)
    native_gangs: bool = False

    def __post_init__(self) -> None:
        self.store = Store(window=self.watch_window)
        self.server = APIServer(self.store, self.faults, bookmark_interval=self.bookmark_interval,
                                runtime_config=frozenset({NATIVE_GANGS}) if self.native_gangs else frozenset())
        self.node_agent: NodeAgent | None = None
        self.disruption_controller: DisruptionController | None = None
        self.replicaset_controller: ReplicaSetController | None = None
        self.job_controller: JobController | None = None
        self.podgroup_protection: PodGroupProtection | None = None
        self.resourceclaim_controller: ResourceClaimController | None = None
        self.pv_controller: PersistentVolumeController | None = None
        self.provisioner: TestProvisioner | None = None
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> "SimCluster":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        self._runner = web.AppRunner(self.server.app(), access_log=None, handle_signals=False,
                                     shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024, reuse_address=True)
        await site.start()
        sock = site._server.sockets[0]  # type: ignore[union-attr]
        self.port = sock.getsockname()[1]
        self.url = f"http://{self.host}:{self.port}"
        if self.volumes is not None:
            register_driver(self.store)  # before anything a caller writes, as a cluster's drivers are
        self.add_nodes(self.nodes)
        if self.agent is not None:
            self.node_agent = NodeAgent(self.store, self.agent)
            self.node_agent.start()
            self.disruption_controller = DisruptionController(self.store, tick=self.agent.tick)
            self.disruption_controller.start()
            self.replicaset_controller = ReplicaSetController(self.store, tick=self.agent.tick)
            self.replicaset_controller.start()
            self.job_controller = JobController(self.store, self.native_gangs, tick=self.agent.tick)
            self.job_controller.start()
            self.resourceclaim_controller = ResourceClaimController(self.store, tick=self.agent.tick)
            self.resourceclaim_controller.start()
            if self.native_gangs:
                self.podgroup_protection = PodGroupProtection(self.store, tick=self.agent.tick)
                self.podgroup_protection.start()
        if self.volumes is not None:
            self.pv_controller = PersistentVolumeController(self.store, tick=self.volumes.tick)
            self.pv_controller.start()
            self.provisioner = TestProvisioner(self.store, self.volumes)
            self.provisioner.start()
        if self.kubeconfig:
            write_kubeconfig(self.kubeconfig, self.url)

    async def stop(self) -> None:
        if self.node_agent is not None:
            await self.node_agent.stop()
            self.node_agent = None
        for name in ("disruption_controller", "replicaset_controller", "job_controller", "podgroup_protection",
                     "resourceclaim_controller"):
            controller = getattr(self, name)
            if controller is not None:
                await controller.stop()
                setattr(self, name, None)
        for loop in (self.pv_controller, self.provisioner):
            if loop is not None:
                await loop.stop()
        self.pv_controller = self.provisioner = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def add_nodes(self, count: int, template: dict[str, Any] | None = None, start: int | None = None) -> list[str]:
        """Create ``count`` nodes from the template (the cluster's by default); returns their names."""
        tmpl = template or self.node_template
        first = len(self.store.table(NODES).objects) if start is None else start
        names = []
        for i in range(first, first + count):
            entry = self.store.create(NODES, "", node_object(tmpl, i, self.zones))
            names.append(entry.key[1])
            if self.volumes is not None:  # its kubelet registers the driver (the provisioner does for API nodes)
                register_node(self.store, entry.key[1], self.volumes.attach_limit)
        return names

    def write_kubeconfig(self, path: str | os.PathLike[str]) -> Path:
        return write_kubeconfig(path, self.url)
