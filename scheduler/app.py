"""The scheduler process as one async context manager: client, informers, loop, metrics.

    async with App(config, kubeconfig="sim.kubeconfig") as app:
        ...   # app.scheduler schedules until the block exits

Startup and cleanup are in one place (as aiohttp's cleanup_ctx): the API
client, the node, priority class, PodGroup, Service, controller
(ReplicationController, ReplicaSet, StatefulSet), namespace, PVC, PV,
StorageClass, CSINode, VolumeAttachment, CSIDriver, CSIStorageCapacity and pod informers, the
event recorder, the health/metrics server, plugins' background tasks, the PodGroup status controller and
the scheduling loop start in order and stop in reverse; shutdown stops popping pods, then drains
in-flight binds.

With ``leaderElection.leaderElect`` (the default), everything up to the
health server starts in every replica, which then reports ready as a
follower; what writes (the scheduling loop, plugins' background tasks, the
PodGroup status controller) starts only once the Lease is acquired
(scheduler/leader.py), and every write of the scheduler and the events goes
through :class:`~scheduler.leader.LeaderOnlyWrites` (a follower's events,
recorded as PreEnqueue runs on what its informers feed the queue, are held
back, and the recent ones written if it comes to lead). Losing the lease stops
popping at once and ends :meth:`App.wait` with ``lost_leadership`` set, so
the process exits non-zero as kube-scheduler does ("leaderelection lost")
and its Deployment restarts it as a follower. Leaving the block gracefully
drains binds, flushes events, then releases the lease for the next replica.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from contextlib import AsyncExitStack
from typing import Any

from scheduler.apiclient import NO_RETRY, APIClient, NotFound, from_kubeconfig
from scheduler.config import SchedulerConfig
from scheduler.framework.clock import Clock
from scheduler.informers import Informer
from scheduler.leader import LeaderElector, LeaderOnlyWrites
from scheduler.model import NATIVE_POD_GROUP_API_VERSION, POD_GROUP_API_VERSION
from scheduler.observe import EventRecorder, HealthServer, Metrics, serve_health
from scheduler.podgroups import STATUS_BURST, STATUS_QPS, PodGroupController
from scheduler.scheduler import Scheduler
from scheduler.secureserving import REVIEW_BURST, REVIEW_QPS, SecureServing, ServingOptions, secure_serving
from scheduler.state.spreadselectors import (REPLICA_SET, REPLICATION_CONTROLLER, SERVICE, STATEFUL_SET,
                                             SpreadSelectors)

log = logging.getLogger("tandem.app")

PODGROUPS_GROUP_VERSION = POD_GROUP_API_VERSION


class App:
    def __init__(self, config: SchedulerConfig, kubeconfig: str | None = None,
                 health_host: str = "127.0.0.1", health_port: int | None = None, client: Any = None,
                 podgroup_status_qps: float = STATUS_QPS, podgroup_status_burst: int = STATUS_BURST,
                 clock: Clock | None = None, lease_client: Any = None, identity: str | None = None,
                 serving: ServingOptions | None = None) -> None:
        self.config = config
        # the process's one clock: the scheduler, its plugins, the status controller and the API clients
        # read time and arm timers on it
        self.clock: Clock = clock if clock is not None else Clock()
        self.kubeconfig = kubeconfig
        self.health_host = health_host
        self.health_port = health_port      # None: no health/metrics server
        self.serving = serving if serving is not None else ServingOptions()   # HTTPS + delegated auth by default
        self.secure_serving: SecureServing | None = None   # the health server's TLS and guard, once started
        self.health_server: HealthServer | None = None     # where it listens (health_port 0 picks a port)
        self.client = client
        self.event_client: Any = None        # the events' own client (the scheduler's when one was passed in)
        self.podgroup_status_qps = podgroup_status_qps
        self.podgroup_status_burst = podgroup_status_burst
        self.metrics = Metrics()
        self.events: EventRecorder | None = None
        self.scheduler: Scheduler | None = None
        self._stack = AsyncExitStack()
        self._loop_task: asyncio.Task[None] | None = None
        self.informers: list[Informer] = []
        self.pod_group_controller: PodGroupController | None = None   # PodGroup status, when the CRD is served
        # leader election (leaderElection.leaderElect): the Lease's own client (``client`` when one was passed
        # in and this is not), the elector, and whether the lease was lost (the process should exit non-zero)
        self.lease_client = lease_client
        self.identity = identity             # None: hostname_uuid
        self.elector: LeaderElector | None = None
        self.lost_leadership = False
        self._elector_task: asyncio.Task[None] | None = None
        self._leading_tasks: list[asyncio.Task[None]] = []   # plugins' background tasks, PodGroup status
        self._done = asyncio.Event()         # wait() returns: the lease lost, or the scheduling loop ended
        self._closing = False

    async def __aenter__(self) -> "App":
        try:
            await self._start()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._closing = True             # a lease acquired from here on starts nothing
        await self._stack.aclose()

    async def _start(self) -> None:
        stack = self._stack
        own_clients = self.client is None
        if own_clients:
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
        le = self.config.leader_election
        if le.leader_elect and self.lease_client is None:
            if own_clients:
                # kube-scheduler's leader-election client: its own rate limit (binds never hold a renewal up
                # in the bucket), no retries of its own (the elector retries every retryPeriod) and requests
                # cut off at renewDeadline
                self.lease_client = APIClient(self.client.config, qps=self.config.client_qps,
                                              burst=self.config.client_burst, retry=NO_RETRY,
                                              timeout=le.renew_deadline, clock=self.clock)
                stack.push_async_callback(self.lease_client.close)
            else:
                self.lease_client = self.client
        clients = (self.client, self.event_client, self.lease_client)
        for client in {id(c): c for c in clients if c is not None}.values():
            if hasattr(client, "counts"):
                self.metrics.bind_client(client)
        writes, event_writes = self.client, self.event_client
        if le.leader_elect:
            self.elector = LeaderElector(self.lease_client, le, identity=self.identity, clock=self.clock,
                                         metrics=self.metrics, on_started_leading=self._start_leading,
                                         on_stopped_leading=self._lost_lease)
            # every write of the scheduler, its plugins, preemption, the status controllers and the events
            writes = LeaderOnlyWrites(self.client, self.elector.is_leader, self.elector.describe)
            event_writes = writes if self.event_client is self.client else \
                LeaderOnlyWrites(self.event_client, self.elector.is_leader, self.elector.describe)
        name = self.config.profiles[0].scheduler_name
        # started with the scheduling loop: a follower records events too (PreEnqueue runs as informers feed the
        # queue) and holds back those of the last leaseDuration + retryPeriod, the most a gap between two
        # leaders lasts, to write them if it comes to lead; older ones were the leader's to write
        events = self.events = EventRecorder(
            event_writes.create_event, name, metrics=self.metrics, clock=self.clock,
            patch=event_writes.patch_event if hasattr(self.event_client, "patch_event") else None,
            hold_seconds=le.lease_duration + le.retry_period if le.leader_elect else None)
        stack.push_async_callback(events.stop)
        sched = self.scheduler = Scheduler(self.config, writes, events, self.metrics, clock=self.clock)
        self.metrics.bind_queue(sched.queue)

        clock = self.clock
        nodes = Informer(self.client, "/api/v1/nodes", name="nodes", clock=clock,
                         on_add=sched.on_node_add, on_update=sched.on_node_update, on_delete=sched.on_node_delete)
        pods = Informer(self.client, "/api/v1/pods", name="pods", clock=clock,
                        on_add=sched.on_pod_add, on_update=sched.on_pod_update, on_delete=sched.on_pod_delete,
                        share_spec=("containers", "initContainers", "tolerations"))
        # priority classes only to tell a pod naming a missing class (see Scheduler._pod_problem)
        sched.priority_classes = set()
        classes = Informer(self.client, "/apis/scheduling.k8s.io/v1/priorityclasses", name="priorityclasses",
                           clock=clock,
                           on_add=sched.on_priority_class_add, on_update=sched.on_priority_class_update,
                           on_delete=sched.on_priority_class_delete)
        self.informers = [nodes, classes]
        # the two PodGroup APIs, each watched when the server serves it (discovery at start): scheduler-plugins'
        # CRD, and upstream's scheduling.k8s.io/v1alpha2 (1.36 serves it with the runtime-config and gates)
        served = [v for v in (PODGROUPS_GROUP_VERSION, NATIVE_POD_GROUP_API_VERSION) if await self._serves(v)]
        sched.cache.gangs.crd_served = PODGROUPS_GROUP_VERSION in served
        for version in served:
            native = version == NATIVE_POD_GROUP_API_VERSION
            self.informers.append(Informer(
                self.client, f"/apis/{version}/podgroups",
                name="podgroups.scheduling.k8s.io" if native else "podgroups", clock=clock, on_add=functools.partial(sched.on_pod_group_add, native=native),
                on_update=functools.partial(sched.on_pod_group_update, native=native),
                on_delete=functools.partial(sched.on_pod_group_delete, native=native)))
        if served:
            # listening before the informers start: their initial lists mark every group dirty
            self.pod_group_controller = PodGroupController(sched, writes, events, qps=self.podgroup_status_qps,
                                                          burst=self.podgroup_status_burst)
            sched.group_listeners.append(self.pod_group_controller.on_pod_change)
        if PODGROUPS_GROUP_VERSION not in served:
            log.warning("the API server does not serve %s: its PodGroup gangs are off (apply manifests/crds); "
                        "GangScheduling schedules pods labelled for them alone, Coscheduling holds them",
                        PODGROUPS_GROUP_VERSION)
        if NATIVE_POD_GROUP_API_VERSION not in served:
            log.info("the API server does not serve %s: native pod groups are off", NATIVE_POD_GROUP_API_VERSION)
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
            # NodeVolumeLimits: the nodes' attach limits per CSI driver, and the volumes attached to them
            Informer(self.client, "/apis/storage.k8s.io/v1/csinodes", name="csinodes", clock=clock,
                     on_add=sched.on_csinode_add, on_update=sched.on_csinode_update,
                     on_delete=sched.on_csinode_delete),
            Informer(self.client, "/apis/storage.k8s.io/v1/volumeattachments", name="volumeattachments",
                     clock=clock, on_add=sched.on_volume_attachment_add,
                     on_update=sched.on_volume_attachment_update, on_delete=sched.on_volume_attachment_delete),
            # provisioning: which CSI drivers have their capacity checked, and the capacities they publish
            Informer(self.client, "/apis/storage.k8s.io/v1/csidrivers", name="csidrivers", clock=clock,
                     on_add=sched.on_csi_driver_add, on_update=sched.on_csi_driver_update,
                     on_delete=sched.on_csi_driver_delete),
            Informer(self.client, "/apis/storage.k8s.io/v1/csistoragecapacities", name="csistoragecapacities",
                     clock=clock, on_add=sched.on_capacity_add, on_update=sched.on_capacity_update,
                     on_delete=sched.on_capacity_delete),
            # DynamicResources: the classes devices are asked for by, the drivers' slices, and the claims
            Informer(self.client, "/apis/resource.k8s.io/v1/deviceclasses", name="deviceclasses", clock=clock,
                     on_add=sched.on_device_class_add, on_update=sched.on_device_class_update,
                     on_delete=sched.on_device_class_delete),
            Informer(self.client, "/apis/resource.k8s.io/v1/resourceslices", name="resourceslices", clock=clock,
                     on_add=sched.on_resource_slice_add, on_update=sched.on_resource_slice_update,
                     on_delete=sched.on_resource_slice_delete),
            Informer(self.client, "/apis/resource.k8s.io/v1/resourceclaims", name="resourceclaims", clock=clock,
                     on_add=sched.on_resource_claim_add, on_update=sched.on_resource_claim_update,
                     on_delete=sched.on_resource_claim_delete),
        ):
            if await self._lists(inf.path):
                self.informers.append(inf)
        if sched.rebalancer:
            # Consolidation moves a Job's pods only if its podFailurePolicy ignores DisruptionTarget
            reb = sched.rebalancer
            jobs = Informer(self.client, "/apis/batch/v1/jobs", name="jobs", clock=clock,
                            on_add=reb.on_job, on_update=lambda old, new: reb.on_job(new),
                            on_delete=lambda obj: reb.on_job(None, obj))
            if await self._lists(jobs.path):
                self.informers.append(jobs)
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
            # ready once synced, follower or leader (kube-scheduler's followers report ready too)
            sec = await self._secure_serving()
            self.health_server = await stack.enter_async_context(
                serve_health(self.health_host, self.health_port, self.metrics, ready=lambda: True,
                             ssl_context=sec.ssl_context, middlewares=sec.middlewares))
        # on the way out: stop what writes (drain binds, flush events), then hand the lease over
        stack.push_async_callback(self._stop_electing)
        stack.push_async_callback(self._stop_leading)
        if self.elector is None:
            self._start_leading()
            return
        self._elector_task = asyncio.create_task(self.elector.run(), name="leader-election")
        self._elector_task.add_done_callback(self._elector_ended)

    def _start_leading(self) -> None:
        """The lease is ours (or leader election is off): start everything that writes."""
        sched = self.scheduler
        assert sched is not None
        if self._closing:
            return
        if self.events is not None:
            self.events.start()
        for fw in sched.frameworks.values():
            for plugin in fw.background_plugins:
                self._leading_tasks.append(asyncio.create_task(plugin.run(), name=f"plugin-{plugin.NAME}"))
        if self.pod_group_controller is not None:
            self._leading_tasks.append(asyncio.create_task(self.pod_group_controller.run(), name="podgroup-status"))
        if sched.rebalancer:
            self._leading_tasks.append(asyncio.create_task(sched.rebalancer.run(), name="consolidation"))
        self._loop_task = asyncio.create_task(sched.run(), name="tandem-scheduling-loop")
        self._loop_task.add_done_callback(lambda _: self._done.set())
        log.info("scheduling for %s", ", ".join(p.scheduler_name for p in self.config.profiles))

    def _lost_lease(self) -> None:
        """The lease is lost: no cycle starts from here (the write gate already refuses what is under way)."""
        log.error("leaderelection lost")
        self.lost_leadership = True
        if self.scheduler is not None:
            self.scheduler.halt()
        for task in self._leading_tasks:
            task.cancel()
        self._done.set()

    def _elector_ended(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or task.exception() is None:
            return                       # stopped by us, or ended through _lost_lease
        log.error("leader election failed: %r", task.exception())
        if not self.lost_leadership:
            self._lost_lease()

    async def _stop_leading(self) -> None:
        if self._loop_task is not None:
            await self._stop_loop()
        for task in self._leading_tasks:
            await _cancel(task)
        if self.events is not None:
            await self.events.stop()     # written while the lease is still ours

    async def _stop_electing(self) -> None:
        if self._elector_task is not None:
            await _cancel(self._elector_task)
        if self.elector is not None and not self.lost_leadership:
            await self.elector.release()

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

    async def _secure_serving(self) -> SecureServing:
        """TLS and the reviews' guard for the health server (kube-scheduler's secure port).

        The reviews get a client of their own when this App made its clients, as kube-scheduler's
        delegating authenticator and authorizer have theirs (QPS 200, burst 400): a scrape never waits
        behind binds for a token, nor binds behind a scrape.
        """
        reviews = self.client
        if not self.serving.insecure and self.event_client is not self.client:
            reviews = APIClient(self.client.config, qps=REVIEW_QPS, burst=REVIEW_BURST, clock=self.clock)
            self._stack.push_async_callback(reviews.close)
        self.secure_serving = secure_serving(self.serving, reviews, self.clock)
        self._stack.push_async_callback(self.secure_serving.close)   # after the server, before the client
        return self.secure_serving

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
        """Until the process should end: the lease was lost (``lost_leadership``), or the scheduling loop
        ended (only on stop or a bug). A follower waits here until it leads and then loses the lease."""
        await self._done.wait()

    def is_leader(self) -> bool:
        """Does this replica schedule (it holds the lease, or leader election is off)?"""
        return self.elector.is_leader() if self.elector is not None else self._loop_task is not None


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
