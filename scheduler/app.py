"""The scheduler process as one async context manager: client, informers, loop, metrics.

    async with App(config, kubeconfig="sim.kubeconfig") as app:
        ...   # app.scheduler schedules until the block exits

Startup and cleanup are in one place (as aiohttp's cleanup_ctx): the API
client, the node, priority class, PodGroup, Service, controller
(ReplicationController, ReplicaSet, StatefulSet), namespace, PVC, PV,
StorageClass and pod informers, the event recorder, the health/metrics server, plugins'
background tasks, the PodGroup status controller and the scheduling loop
start in order and stop in reverse; shutdown stops popping pods, then drains
in-flight binds.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from contextlib import AsyncExitStack
from typing import Any

from scheduler.apiclient import APIClient, NotFound, from_kubeconfig
from scheduler.config import SchedulerConfig
from scheduler.framework.clock import Clock
from scheduler.informers import Informer
from scheduler.model import POD_GROUP_API_VERSION
from scheduler.observe import EventRecorder, Metrics, serve_health
from scheduler.podgroups import STATUS_BURST, STATUS_QPS, PodGroupController
from scheduler.scheduler import Scheduler
from scheduler.spreadselectors import (REPLICA_SET, REPLICATION_CONTROLLER, SERVICE, STATEFUL_SET,
                                       SpreadSelectors)

log = logging.getLogger("tandem.app")

PODGROUPS_GROUP_VERSION = POD_GROUP_API_VERSION


class App:
    def __init__(self, config: SchedulerConfig, kubeconfig: str | None = None,
                 health_host: str = "127.0.0.1", health_port: int | None = None, client: Any = None,
                 podgroup_status_qps: float = STATUS_QPS, podgroup_status_burst: int = STATUS_BURST,
                 clock: Clock | None = None) -> None:
        self.config = config
        # the process's one clock: the scheduler, its plugins, the status controller and the API clients
        # read time and arm timers on it
        self.clock: Clock = clock if clock is not None else Clock()
        self.kubeconfig = kubeconfig
        self.health_host = health_host
        self.health_port = health_port      # None: no health/metrics server
        self.client = client
        self.event_client: Any = None        # the events' own client (the scheduler's when one was passed in)
        self.podgroup_status_qps = podgroup_status_qps
        self.podgroup_status_burst = podgroup_status_burst
        self.metrics = Metrics()
        self.scheduler: Scheduler | None = None
        self._stack = AsyncExitStack()
        self._loop_task: asyncio.Task[None] | None = None
        self.informers: list[Informer] = []
        self.pod_group_controller: PodGroupController | None = None   # PodGroup status, when the CRD is served

    async def __aenter__(self) -> "App":
        try:
            await self._start()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def _start(self) -> None:
        stack = self._stack
        if self.client is None:
            self.client = await from_kubeconfig(self.kubeconfig, qps=self.config.client_qps,
                                                burst=self.config.client_burst, clock=self.clock)
            stack.push_async_callback(self.client.close)
            # events get a client of their own, as kube-scheduler's eventClient: same limits, a separate
            # token bucket, so that recording events never halves the rate binds may use
            # (from the kubeconfig already read)
            self.event_client = APIClient(self.client.config, qps=self.config.client_qps,
                                          burst=self.config.client_burst, clock=self.clock)
            stack.push_async_callback(self.event_client.close)
        else:
            self.event_client = self.client
        for client in {id(c): c for c in (self.client, self.event_client)}.values():
            if hasattr(client, "counts"):
                self.metrics.bind_client(client)
        name = self.config.profiles[0].scheduler_name
        events = EventRecorder(self.event_client.create_event, name,
                               patch=getattr(self.event_client, "patch_event", None), metrics=self.metrics,
                               clock=self.clock)
        events.start()
        stack.push_async_callback(events.stop)
        sched = self.scheduler = Scheduler(self.config, self.client, events, self.metrics, clock=self.clock)
        self.metrics.bind_queue(sched.queue)

        clock = self.clock
        nodes = Informer(self.client, "/api/v1/nodes", name="nodes", clock=clock,
                         on_add=sched.on_node_add, on_update=sched.on_node_update, on_delete=sched.on_node_delete)
        pods = Informer(self.client, "/api/v1/pods", name="pods", clock=clock,
                        on_add=sched.on_pod_add, on_update=sched.on_pod_update, on_delete=sched.on_pod_delete)
        # priority classes only to tell a pod naming a missing class (see Scheduler._pod_problem)
        sched.priority_classes = set()
        classes = Informer(self.client, "/apis/scheduling.k8s.io/v1/priorityclasses", name="priorityclasses",
                           clock=clock,
                           on_add=sched.on_priority_class_add, on_update=sched.on_priority_class_update,
                           on_delete=sched.on_priority_class_delete)
        self.informers = [nodes, classes]
        if await self._serves(PODGROUPS_GROUP_VERSION):
            self.informers.append(Informer(
                self.client, f"/apis/{PODGROUPS_GROUP_VERSION}/podgroups", name="podgroups", clock=clock,
                on_add=sched.on_pod_group_add, on_update=sched.on_pod_group_update,
                on_delete=sched.on_pod_group_delete))
            # listening before the informers start: their initial lists mark every group dirty
            self.pod_group_controller = PodGroupController(sched, self.client, events, qps=self.podgroup_status_qps,
                                                          burst=self.podgroup_status_burst)
            sched.group_listeners.append(self.pod_group_controller.on_pod_change)
        else:
            log.warning("the API server does not serve %s: PodGroup gangs are off (apply manifests/crds)",
                        PODGROUPS_GROUP_VERSION)
        # the Services' and controllers' selectors PodTopologySpread's system default constraints spread a
        # pod by (upstream helper.DefaultSelector), and the namespaces' labels InterPodAffinity's
        # namespaceSelector matches
        spread = sched.spread_selectors
        for inf in (
            Informer(self.client, "/api/v1/services", name="services", clock=clock, **_handlers(spread, SERVICE)),
            Informer(self.client, "/api/v1/replicationcontrollers", name="replicationcontrollers", clock=clock,
                     **_handlers(spread, REPLICATION_CONTROLLER)),
            Informer(self.client, "/apis/apps/v1/replicasets", name="replicasets", clock=clock,
                     **_handlers(spread, REPLICA_SET)),
            Informer(self.client, "/apis/apps/v1/statefulsets", name="statefulsets", clock=clock,
                     **_handlers(spread, STATEFUL_SET)),
            Informer(self.client, "/api/v1/namespaces", name="namespaces", clock=clock,
                     on_add=sched.on_namespace_add, on_update=sched.on_namespace_update,
                     on_delete=sched.on_namespace_delete),
            # preemption prefers victims whose eviction violates no PodDisruptionBudget
            Informer(self.client, "/apis/policy/v1/poddisruptionbudgets", name="poddisruptionbudgets", clock=clock,
                     on_add=sched.on_pdb_add, on_update=sched.on_pdb_update, on_delete=sched.on_pdb_delete),
            # VolumeBinding: the claims pods use, their volumes, and the classes that say how they bind
            Informer(self.client, "/api/v1/persistentvolumeclaims", name="persistentvolumeclaims", clock=clock,
                     on_add=sched.on_pvc_add, on_update=sched.on_pvc_update, on_delete=sched.on_pvc_delete),
            Informer(self.client, "/api/v1/persistentvolumes", name="persistentvolumes", clock=clock,
                     on_add=sched.on_pv_add, on_update=sched.on_pv_update, on_delete=sched.on_pv_delete),
            Informer(self.client, "/apis/storage.k8s.io/v1/storageclasses", name="storageclasses", clock=clock,
                     on_add=sched.on_storage_class_add, on_update=sched.on_storage_class_update,
                     on_delete=sched.on_storage_class_delete),
        ):
            if await self._lists(inf.path):
                self.informers.append(inf)
        # everything else first and synced, so the first pods see the whole cluster, their priority
        # classes and PodGroups (no spurious "PodGroup not found" after a restart); then pods
        for inf in self.informers:
            inf.start()
            stack.push_async_callback(inf.stop)
        for inf in self.informers:
            await inf.synced.wait()
        self.informers.append(pods)
        pods.start()
        stack.push_async_callback(pods.stop)
        await pods.synced.wait()
        if self.health_port is not None:
            await stack.enter_async_context(
                serve_health(self.health_host, self.health_port, self.metrics, ready=lambda: True))
        for fw in sched.frameworks.values():
            for plugin in fw.background_plugins:
                task = asyncio.create_task(plugin.run(), name=f"plugin-{plugin.NAME}")
                stack.push_async_callback(_cancel, task)
        if self.pod_group_controller is not None:
            task = asyncio.create_task(self.pod_group_controller.run(), name="podgroup-status")
            stack.push_async_callback(_cancel, task)
        self._loop_task = asyncio.create_task(sched.run(), name="tandem-scheduling-loop")
        stack.push_async_callback(self._stop_loop)
        log.info("scheduling for %s", ", ".join(p.scheduler_name for p in self.config.profiles))

    async def _serves(self, group_version: str) -> bool:
        """Is ``group_version`` (e.g. a CRD's) served? Discovery answers 404 when it is not."""
        try:
            await self.client.get(f"/apis/{group_version}")
            return True
        except NotFound:
            return False

    async def _lists(self, path: str) -> bool:
        """Does the server list ``path``? An informer of a collection it does not serve would retry forever."""
        try:
            await self.client.list(path, {"limit": 1})
            return True
        except NotFound:
            log.warning("the API server does not serve %s: tandem goes on without it", path)
            return False

    async def _stop_loop(self) -> None:
        assert self.scheduler is not None and self._loop_task is not None
        await self.scheduler.stop()
        try:
            await asyncio.wait_for(self._loop_task, timeout=5)
        except asyncio.TimeoutError:
            self._loop_task.cancel()
        if self._loop_task.done() and not self._loop_task.cancelled() and self._loop_task.exception():
            log.error("scheduling loop ended with %r", self._loop_task.exception())

    async def wait(self) -> None:
        """Until the scheduling loop ends (it ends only on stop or a bug)."""
        if self._loop_task is not None:
            await self._loop_task


def _handlers(spread: SpreadSelectors, kind: str) -> dict[str, Any]:
    """An informer's add, update and delete handlers feeding ``spread`` the objects of ``kind``."""
    return {"on_add": functools.partial(spread.on_add, kind), "on_update": functools.partial(spread.on_update, kind),
            "on_delete": functools.partial(spread.on_delete, kind)}


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    except Exception:
        log.exception("%s ended with an error", task.get_name())
