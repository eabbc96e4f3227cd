"""Runs one :class:`~bench.workload.Workload` against a target and fills a :class:`~bench.record.Recorder`.

The ops run in order, as scheduler_perf's ``runWorkload`` runs them, but
against an API server over HTTP rather than in-process, so the same run can
measure tandem, kube-scheduler or any scheduler that serves the pods'
``schedulerName``:

* Creates go out with up to :data:`CONCURRENCY` requests in flight, each
  body built from a template serialized once (``orjson.Fragment``), over the
  target's client, which has no client-side rate limit: the benchmark must
  never be what limits the scheduler.
* Exactly one watch on pods (all namespaces) runs from the resourceVersion
  taken before the first op; it is the only source of bind times. A pod's
  created time is taken just before its create is sent and recorded before
  the request goes out, so the watch can never report a bind for a pod the
  recorder does not know yet. The bound time is when the first event showing
  ``spec.nodeName`` arrives. A 410 relists (bind times of pods bound in the
  gap become the relist time, and a warning says so).
* Waiting ops (createPods and createPodGroups without
  skipWaitToCompletion: every pod created so far in their namespace, as
  upstream; barrier: the pods its namespaces and labelSelector pick) wait
  on the watch with a timeout and raise :class:`RunError` naming the op and
  how many pods are still pending: a benchmark that cannot finish must say
  so, not hang. A failing watch or background op (churn, deletePods in the
  background) fails the wait at once.
* A createPods op with a claim template creates each pod's claim (and,
  with a volume template, its volume, bound to the claim beforehand, as
  upstream's CreatePodWithPersistentVolume) just before the pod, so that
  the pod's created time is its own; createNodes with
  persistentVolumesPerNode creates each node's local volumes (and
  storageCapacitiesPerNode its CSIStorageCapacity objects) right after
  the node.
* Pods count as measured when their op has collectMetrics, or when they
  are created inside a startCollectingMetrics / stopCollectingMetrics
  window and match its namespaces and labelSelector. Churn pods are never
  recorded.
* Pods a controller makes (a createAny of ReplicaSets) are adopted by the
  watch in the namespaces of those objects: recorded with their owner, never
  measured, never counted by waits or barriers. Their bind, the start of their
  deletion (an eviction) and their end are what the Consolidation measures
  read (bench/consolidation.py). createAny waits for each object's
  ``spec.replicas`` pods to be bound, as createPods waits for its pods.

* Given a :class:`Pause`, a createPods op whose pods are measured (and that
  creates them at once: not paced, not a steady state) holds it before its
  first create and releases it once every create has returned, before it
  waits: bench/pause.py stops the schedulers meanwhile.
* A createPods op with ``steadyState`` keeps ``count`` pods in flight for its
  duration, as upstream's: once the watch has seen every pod of a batch
  bound, the batch is deleted and the next one created.
* The DRA ops (createResourceDriver, allocResourceClaims,
  checkResourceClaims) are bench/dra.py's; createResourceDriver reads the
  names of the nodes this run created.

Names are explicit (``<generateName><run id>-<n>``) so that the created time
can be keyed before the server answers, and so that runs never collide on a
real cluster. The exception is a createAny of one object whose template has
a ``metadata.name``, or of objects whose name has ``{{.Index}}`` (upstream's
``test-claim-{{.Index}}``): it keeps that name, so that pods can refer to it (a
PriorityClass), and one left by an earlier run is reused only if it holds
what the template says. Deletes use gracePeriodSeconds 0: with no kubelet
(the simulated cluster runs without its agent) a graceful delete of a bound
pod would never finish.

For the same reason the runner plays the kubelet's last step for the pods it
created that carry ``simcluster.tandem.dev/termination-seconds`` (the
annotation the simulated cluster's node agent honours): when someone else
(a scheduler preempting) deletes one gracefully, the runner finishes the
delete (gracePeriodSeconds 0, the pod's uid as precondition) that many
seconds after the watch shows it terminating, at most its grace period
later. Where an agent or a kubelet does it first, the runner's delete finds
nothing and is dropped.

This module never starts or stops processes; see :mod:`bench.target`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Protocol

import orjson

from bench.record import Recorder
from bench.target import Target
from bench.dra import alloc_resource_claims, check_resource_claims, create_resource_driver
from bench.pipelines import create_pipeline_runs
from bench.workload import (NATIVE_POD_GROUP_API_VERSION, POD_GROUP_API_VERSION, POD_GROUP_LABEL, RACK_LABEL,
                            ZONE_LABEL, AllocResourceClaims, Barrier, CheckResourceClaims, Churn, CreateAny,
                            CreateNamespaces, CreateNodes, CreatePipelineRuns, CreatePodGroups, CreatePods,
                            CreateResourceDriver, DeletePods, Op, Sleep, StartCollectingMetrics,
                            StopCollectingMetrics, Workload)
from scheduler.apiclient import (APIError, Conflict, Gone, NotFound, ServerError, TooManyRequests, Unreachable)

log = logging.getLogger("tandem.bench.runner")

CONCURRENCY = 64            # requests in flight per op
DELETE_WORKERS = 16         # whenBound deleters, and finishers of graceful deletes
TERMINATION_SECONDS = "simcluster.tandem.dev/termination-seconds"   # the node agent's annotation
WATCH_TIMEOUT = 600         # seconds a single watch request lasts before it is renewed
LIST_PAGE = 5000

Progress = Callable[[str, int, int], None]


class Pause(Protocol):
    """Told around a measured createPods or createPodGroups op's pod creates (bench/pause.py stops the
    schedulers in between)."""

    async def hold(self) -> None: ...

    def release(self) -> None: ...


class RunError(RuntimeError):
    """The workload could not run to the end: an op failed or timed out. The message names the op."""


# ---------------------------------------------------------------------------- pod bookkeeping


@dataclass(slots=True)
class _Pod:
    namespace: str
    labels: dict[str, str]
    counted: bool = True        # barriers and waits count it (churn pods: no)
    created: bool = False       # the create call returned
    bound: bool = False
    attempted: bool = False     # a PodScheduled condition (any status): the scheduler has seen it
    terminating: bool = False   # a deletionTimestamp seen: being deleted, not gone yet
    gone: bool = False
    owner: str = ""             # adopted: "ReplicaSet ns/name", the controller that made it
    live: bool = False          # adopted, bound and not being deleted: counted in _Pods.live_by_owner


@dataclass(eq=False)
class _Waiter:
    pending: set[str]
    total: int
    stage: str
    on_change: Callable[[int], None] | None = None
    event: asyncio.Event = field(default_factory=asyncio.Event)

    def settle(self, key: str) -> None:
        if key in self.pending:
            self.pending.discard(key)
            if self.on_change is not None:
                self.on_change(self.total - len(self.pending))
            if not self.pending:
                self.event.set()


def _matches(labels: dict[str, str], selector: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _selector_string(selector: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))


class _Pods:
    """What the watch has seen of the pods this run created; feeds the recorder and the waiters."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.pods: dict[str, _Pod] = {}
        self.waiters: set[_Waiter] = set()
        self.bind_listeners: list[Callable[[str, _Pod, float], None]] = []
        self.terminating_listeners: list[Callable[[str, dict[str, Any]], None]] = []
        self.adopting: set[str] = set()              # namespaces whose controllers' pods are adopted
        self.live_by_owner: dict[str, int] = {}      # owner -> its adopted pods bound and not being deleted
        self.replicas: dict[str, int] = {}           # owner -> the pods createAny waits for

    def adopt(self, key: str, obj: dict[str, Any]) -> _Pod | None:
        """A pod the runner did not create, in a namespace where it created controllers: recorded with its
        controller (ownerReferences' controller: true), never measured, never counted."""
        meta = obj.get("metadata") or {}
        ref = next((r for r in meta.get("ownerReferences") or () if r.get("controller")), None)
        if ref is None:
            return None
        owner = f"{ref.get('kind')} {meta.get('namespace')}/{ref.get('name')}"
        pod = self.add(key, str(meta.get("namespace")), dict(meta.get("labels") or {}), counted=False)
        pod.owner = owner
        pod.created = True
        self.recorder.adopted(key, time.time(), owner, cpu=_cpu_millis(obj))
        return pod

    def wait_for_owners(self, need: dict[str, int], on_change: Callable[[int], None] | None = None) -> _Waiter:
        """A waiter that settles when each owner has its ``need`` pods bound (and not being deleted)."""
        self.replicas.update(need)
        pending = {o for o, n in need.items() if self.live_by_owner.get(o, 0) < n}
        waiter = _Waiter(pending, len(need), "Scheduled", on_change)
        if on_change is not None:
            on_change(len(need) - len(pending))
        if pending:
            self.waiters.add(waiter)
        else:
            waiter.event.set()
        return waiter

    def _live(self, pod: _Pod, live: bool) -> None:
        if not pod.owner or pod.live == live:
            return
        pod.live = live
        n = self.live_by_owner[pod.owner] = self.live_by_owner.get(pod.owner, 0) + (1 if live else -1)
        if live and n >= self.replicas.get(pod.owner, n + 1):
            self._settle(pod.owner)

    def add(self, key: str, namespace: str, labels: dict[str, str], counted: bool = True) -> _Pod:
        pod = self.pods[key] = _Pod(namespace, labels, counted)
        return pod

    @staticmethod
    def _settled(pod: _Pod, stage: str) -> bool:
        return pod.gone or pod.bound or (stage == "Attempted" and pod.attempted)

    def wait_for(self, keys: Iterable[str], stage: str = "Scheduled",
                 on_change: Callable[[int], None] | None = None) -> _Waiter:
        keys = list(keys)
        pending = {k for k in keys if not self._settled(self.pods[k], stage)}
        waiter = _Waiter(pending, len(keys), stage, on_change)
        if on_change is not None:
            on_change(waiter.total - len(pending))
        if pending:
            self.waiters.add(waiter)
        else:
            waiter.event.set()
        return waiter

    def _settle(self, key: str, stage_only: str | None = None) -> None:
        for w in list(self.waiters):
            if stage_only is None or w.stage == stage_only:
                w.settle(key)
            if w.event.is_set():
                self.waiters.discard(w)

    def bound(self, key: str, t: float, node: str) -> None:
        pod = self.pods.get(key)
        if pod is None or pod.bound:
            return
        pod.bound = True
        self.recorder.bound(key, t, node)
        for listener in self.bind_listeners:
            listener(key, pod, t)
        self._settle(key)
        if not pod.terminating and not pod.gone:
            self._live(pod, True)

    def attempted(self, key: str) -> None:
        pod = self.pods.get(key)
        if pod is not None and not pod.attempted:
            pod.attempted = True
            self._settle(key, "Attempted")

    def gone(self, key: str) -> None:
        pod = self.pods.get(key)
        if pod is not None and not pod.gone:
            pod.gone = True
            self.recorder.gone(key, time.time())
            self._live(pod, False)
            self._settle(key)

    def terminating(self, key: str, obj: dict[str, Any]) -> None:
        """``obj``, the pod ``key``, has a deletionTimestamp: tell the listeners, once."""
        pod = self.pods.get(key)
        if pod is not None and not pod.terminating and not pod.gone:
            pod.terminating = True
            self.recorder.deleting(key, time.time())
            self._live(pod, False)
            for listener in self.terminating_listeners:
                listener(key, obj)

    def on_event(self, event: dict[str, Any]) -> None:
        obj = event.get("object") or {}
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        pod = self.pods.get(key)
        if pod is None:
            if meta.get("namespace") not in self.adopting or event.get("type") == "DELETED":
                return
            pod = self.adopt(key, obj)
            if pod is None:
                return
        node = (obj.get("spec") or {}).get("nodeName")
        if node and not pod.bound:
            self.bound(key, time.time(), node)
        if event.get("type") == "DELETED":
            self.gone(key)
            return
        if meta.get("deletionTimestamp"):
            self.terminating(key, obj)
        if not pod.attempted and not pod.bound:
            for cond in (obj.get("status") or {}).get("conditions") or ():
                if cond.get("type") == "PodScheduled":
                    self.attempted(key)
                    break


# ---------------------------------------------------------------------------- the run


def _run_id() -> str:
    # generateName's alphabet (no vowels, so no words): keeps names valid and unlikely to collide
    return "".join(random.choices("bcdfghjklmnpqrstvwxz2456789", k=5))


def _prefix(template: dict[str, Any], default: str) -> str:
    meta = template.get("metadata") or {}
    if meta.get("generateName"):
        return str(meta["generateName"])
    if meta.get("name"):
        return f"{meta['name']}-"
    return default


def _api_base(api_version: str) -> str:
    """``/api/v1`` for the core group, ``/apis/GROUP/VERSION`` otherwise: where discovery and the resources are."""
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


def _first_difference(wanted: Any, actual: Any, where: str = "") -> str | None:
    """The first field path (``spec.selector``) at which ``actual`` does not hold ``wanted``, or None.

    A map holds another when it holds each of its keys' values; a list
    holds another of its length when each item holds the other's (a
    ResourceClaimTemplate's requests get defaulted fields); anything else
    must be equal.
    """
    if isinstance(wanted, dict):
        if not isinstance(actual, dict):
            return where or "the top level"
        for k, v in wanted.items():
            found = _first_difference(v, actual.get(k), f"{where}.{k}" if where else k)
            if found is not None:
                return found
        return None
    if isinstance(wanted, list) and isinstance(actual, list) and len(wanted) == len(actual):
        for i, (w, a) in enumerate(zip(wanted, actual)):
            found = _first_difference(w, a, f"{where}[{i}]")
            if found is not None:
                return found
        return None
    return None if wanted == actual else f"{where} (wanted {wanted!r}, found {actual!r})"


def _plural_path(api_version: str, kind: str, namespace: str | None) -> str:
    ns = f"/namespaces/{namespace}" if namespace else ""
    return f"{_api_base(api_version)}{ns}/{kind.lower()}s"


class _Run:
    def __init__(self, workload: Workload, target: Target, scheduler_name: str, recorder: Recorder,
                 progress: Progress | None, timeout: float, pause: Pause | None = None) -> None:
        self.workload = workload
        self.pause = pause
        self.client = target.client
        self.scheduler_name = scheduler_name
        self.recorder = recorder
        self.progress = progress if progress is not None else (lambda label, done, total: None)
        self.timeout = timeout
        self.run_id = _run_id()
        self.seq = itertools.count()
        self.pods = _Pods(recorder)
        self.namespaces: set[str] = set()
        self.nodes: list[str] = []                  # the nodes this run created, by name
        self.window: tuple[tuple[str, ...], dict[str, str]] | None = None
        self.background: list[asyncio.Task[None]] = []
        self.watch_task: asyncio.Task[None] | None = None
        self.finishing: asyncio.Queue[tuple[str, str]] | None = None   # graceful deletes due now: (key, uid)
        self.pods.terminating_listeners.append(self._on_terminating)
        self.handlers: dict[type, Callable[[Any], Awaitable[None]]] = {
            CreateNodes: self.create_nodes, CreateNamespaces: self.create_namespaces,
            CreatePods: self.create_pods, CreatePodGroups: self.create_pod_groups, CreateAny: self.create_any,
            Churn: self.churn, DeletePods: self.delete_pods, Barrier: self.barrier, Sleep: self.sleep,
            StartCollectingMetrics: self.start_collecting, StopCollectingMetrics: self.stop_collecting,
            CreatePipelineRuns: self.create_pipeline_runs,
            CreateResourceDriver: lambda op: create_resource_driver(self, op),
            AllocResourceClaims: lambda op: alloc_resource_claims(self, op),
            CheckResourceClaims: lambda op: check_resource_claims(self, op),
        }

    # ------------------------------------------------------------------ lifecycle

    async def run(self) -> None:
        if not self.recorder.scheduler_name:
            self.recorder.scheduler_name = self.scheduler_name
        try:
            first = await self.client.list("/api/v1/pods", {"limit": 1})
        except APIError as exc:
            raise RunError(f"{self.workload.full_name}: cannot list pods on the target: {exc}") from exc
        rv = str((first.get("metadata") or {}).get("resourceVersion") or "")
        self.watch_task = asyncio.create_task(self._watch(rv), name="bench-pod-watch")
        try:
            for op in self.workload.ops:
                await self.handlers[type(op)](op)
                self._check_tasks()
        finally:
            if self.recorder.collecting:
                self.recorder.stop_collecting(time.time())
            tasks = [*self.background, self.watch_task]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _check_tasks(self) -> None:
        """Raise the failure of the watch or of a background op, if one has failed."""
        assert self.watch_task is not None
        if self.watch_task.done():
            exc = None if self.watch_task.cancelled() else self.watch_task.exception()
            raise RunError(f"the pod watch failed: {exc!r}" if exc else "the pod watch ended") from exc
        for t in self.background:
            if t.done() and not t.cancelled() and t.exception() is not None:
                exc = t.exception()
                raise RunError(f"{t.get_name()}: {exc}") from exc

    # ------------------------------------------------------------------ the watch

    async def _watch(self, rv: str) -> None:
        backoff = 0.2
        while True:
            params = {"allowWatchBookmarks": True, "timeoutSeconds": WATCH_TIMEOUT}
            if rv:
                params["resourceVersion"] = rv
            try:
                async with contextlib.aclosing(self.client.watch("/api/v1/pods", params)) as events:
                    async for event in events:
                        obj = event.get("object") or {}
                        rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                        if event.get("type") != "BOOKMARK":
                            self.pods.on_event(event)
                backoff = 0.2
            except Gone:
                rv = await self._relist()
            except (Unreachable, ServerError, TooManyRequests) as exc:
                log.warning("pod watch: %s; resuming from resourceVersion %s in %.1fs", exc, rv, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    async def _relist(self) -> str:
        """After a 410: list every pod, settle what the watch missed, and return the list's resourceVersion."""
        created_before = {k for k, p in self.pods.pods.items() if p.created}
        seen: set[str] = set()
        now = time.time()
        rv, cont = "", None
        while True:
            params: dict[str, Any] = {"limit": LIST_PAGE}
            if cont:
                params["continue"] = cont
            page = await self.client.list("/api/v1/pods", params)
            meta = page.get("metadata") or {}
            rv = rv or str(meta.get("resourceVersion") or "")
            for obj in page.get("items") or ():
                m = obj.get("metadata") or {}
                key = f"{m.get('namespace')}/{m.get('name')}"
                seen.add(key)
                node = (obj.get("spec") or {}).get("nodeName")
                if node:
                    self.pods.bound(key, now, node)
                if m.get("deletionTimestamp"):
                    self.pods.terminating(key, obj)
            cont = meta.get("continue")
            if not cont:
                break
        for key in created_before - seen:
            self.pods.gone(key)
        log.warning("pod watch expired (410 Gone): relisted; pods bound during the gap get the relist time "
                    "as their bind time")
        return rv

    # ------------------------------------------------------------------ the kubelet's last step

    def _on_terminating(self, key: str, obj: dict[str, Any]) -> None:
        """Plan the end of a graceful delete of a pod annotated termination-seconds (see the module docstring)."""
        meta = obj.get("metadata") or {}
        value = (meta.get("annotations") or {}).get(TERMINATION_SECONDS)
        grace = meta.get("deletionGracePeriodSeconds") or 0
        if value is None or grace <= 0:
            return  # not ours to finish, or finishing already (grace 0: the server deletes it now)
        try:
            seconds = float(value)
        except ValueError:
            log.warning("pod %s: annotation %s=%r is not a number; its delete is left to the cluster",
                        key, TERMINATION_SECONDS, value)
            return
        if self.finishing is None:
            self.finishing = asyncio.Queue()
            self.background.append(asyncio.create_task(self._finish_deletes(self.finishing),
                                                       name=f"{self.workload.full_name} graceful deletes"))
        asyncio.get_running_loop().call_later(max(0.0, min(seconds, grace)), self.finishing.put_nowait,
                                              (key, str(meta.get("uid") or "")))

    async def _finish_deletes(self, queue: asyncio.Queue[tuple[str, str]]) -> None:
        """Delete each queued pod with gracePeriodSeconds 0, if it is still the pod of that uid."""
        async def worker() -> None:
            while True:
                key, uid = await queue.get()
                ns, _, name = key.partition("/")
                try:
                    await self.client.delete_pod(ns, name, uid or None, grace_seconds=0)
                except (NotFound, Conflict):
                    pass  # finished by an agent or a kubelet already, or a new pod of that name

        async with asyncio.TaskGroup() as tg:
            for _ in range(DELETE_WORKERS):
                tg.create_task(worker())

    # ------------------------------------------------------------------ helpers

    async def _each(self, op: Op, items: Iterable[Any], fn: Callable[[Any], Awaitable[None]],
                    concurrency: int = CONCURRENCY) -> None:
        """``fn`` over ``items`` with ``concurrency`` in flight; the first failure fails the op."""
        items = list(items)
        if not items:
            return
        it = iter(items)

        async def worker() -> None:
            for item in it:
                await fn(item)

        try:
            async with asyncio.TaskGroup() as tg:
                for _ in range(min(concurrency, len(items))):
                    tg.create_task(worker())
        except ExceptionGroup as eg:
            first: BaseException = eg
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            if isinstance(first, (APIError, RunError)):
                raise RunError(f"{self.workload.full_name} {op.label}: {first}") from first
            raise first

    async def _create(self, path: str, body: dict[str, Any]) -> None:
        try:
            await self.client.create(path, body)
        except Conflict as exc:
            if not exc.already_exists:  # a retried create that had gone through: ours, by its run-unique name
                raise

    async def _delete_pod(self, key: str) -> None:
        ns, _, name = key.partition("/")
        try:
            await self.client.delete(f"/api/v1/namespaces/{ns}/pods/{name}", {"gracePeriodSeconds": 0})
        except NotFound:
            pass

    async def _namespace(self, name: str, template: dict[str, Any] | None = None) -> None:
        if name in self.namespaces:
            return
        body = dict(template or {"apiVersion": "v1", "kind": "Namespace"})
        meta = {k: v for k, v in (body.get("metadata") or {}).items() if k not in ("name", "generateName")}
        body["metadata"] = {**meta, "name": name}
        body.setdefault("apiVersion", "v1")
        body.setdefault("kind", "Namespace")
        await self._create("/api/v1/namespaces", body)
        self.namespaces.add(name)

    def _in_window(self, namespace: str, labels: dict[str, str]) -> bool:
        if self.window is None:
            return False
        namespaces, selector = self.window
        return (not namespaces or namespace in namespaces) and _matches(labels, selector)

    def _pod_maker(self, template: dict[str, Any], namespace: str) -> Callable[[str, dict[str, str]], dict]:
        """A function (name, labels) -> Pod body; the spec is serialized once, with schedulerName filled."""
        meta0 = template.get("metadata") or {}
        rest = {k: v for k, v in meta0.items() if k not in ("name", "generateName", "namespace", "labels")}
        spec = dict(template.get("spec") or {})
        # the run's scheduler, unless the template names one on purpose
        spec.setdefault("schedulerName", self.scheduler_name)
        spec_json = orjson.Fragment(orjson.dumps(spec))
        api_version = template.get("apiVersion", "v1")

        def make(name: str, labels: dict[str, str]) -> dict[str, Any]:
            meta = {**rest, "name": name, "namespace": namespace}
            if labels:
                meta["labels"] = labels
            return {"apiVersion": api_version, "kind": "Pod", "metadata": meta, "spec": spec_json}

        return make

    async def _wait(self, op: Op, waiter: _Waiter, timeout: float | None, what: str, unit: str = "pods") -> None:
        """Until the waiter settles; RunError on timeout, or when the watch or a background op fails."""
        limit = timeout if timeout is not None else self.timeout
        if not await self._settled_by(waiter, asyncio.get_running_loop().time() + limit):
            sample = ", ".join(sorted(waiter.pending)[:3])
            raise RunError(f"{self.workload.full_name} {op.label}: timed out after {limit:g}s waiting for "
                           f"{what}: {len(waiter.pending)} of {waiter.total} {unit} still pending "
                           f"(e.g. {sample})")

    async def _settled_by(self, waiter: _Waiter, deadline: float) -> bool:
        """Has the waiter settled by ``deadline`` (the loop's time)? RunError when the watch or a background op
        fails first."""
        loop = asyncio.get_running_loop()
        settled = asyncio.create_task(waiter.event.wait())
        try:
            while not waiter.event.is_set():
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                assert self.watch_task is not None
                watched = {settled, self.watch_task, *(t for t in self.background if not t.done())}
                await asyncio.wait(watched, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
                self._check_tasks()
        finally:
            settled.cancel()
            self.pods.waiters.discard(waiter)
        return waiter.event.is_set()

    async def _create_pods_and_wait(self, op: Op, namespace: str, pods: list[tuple[str, dict[str, str]]],
                                    make: Callable[[str, dict[str, str]], dict], measured: bool,
                                    wait: bool, timeout: float | None, per_second: float = 0.0,
                                    pause: Pause | None = None) -> None:
        """Create ``pods`` ((name, labels) pairs) in ``namespace``, pod i not before i / ``per_second`` seconds
        when that is set, ``pause`` held meanwhile; then, unless skipped, wait as upstream does."""
        keys = [f"{namespace}/{name}" for name, _ in pods]
        for key, (_, labels) in zip(keys, pods):
            self.pods.add(key, namespace, labels)
        total = len(keys)
        label = op.label
        progress = self.progress
        waiter = None
        if wait:
            # upstream waits for every pod created so far in the op's namespace
            in_ns = [k for k, p in self.pods.pods.items() if p.counted and p.namespace == namespace]
            n_before = len(in_ns) - total
            waiter = self.pods.wait_for(in_ns, on_change=lambda done: progress(label, max(0, done - n_before),
                                                                               total))
        else:
            progress(label, 0, total)
        path = f"/api/v1/namespaces/{namespace}/pods"
        recorder = self.recorder
        created = 0
        cpus: dict[int, int] = {}   # the makers share one serialized spec: read its cpu once

        def cpu_of(body: dict[str, Any]) -> int:
            spec = body.get("spec")
            if isinstance(spec, orjson.Fragment):
                if id(spec) not in cpus:
                    cpus[id(spec)] = _cpu_millis({"spec": orjson.loads(orjson.dumps(spec))})
                return cpus[id(spec)]
            return _cpu_millis(body)

        loop = asyncio.get_running_loop()
        start = loop.time()

        async def one(i: int) -> None:
            nonlocal created
            if per_second:
                delay = start + i / per_second - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            name, labels = pods[i]
            body = make(name, labels)
            group = labels.get(POD_GROUP_LABEL, "") or labels.get(NATIVE_GROUP_LABEL, "")
            recorder.created(keys[i], time.time(), measured,  # before the request: the watch may answer first
                             f"{namespace}/{group}" if group else "", cpu=cpu_of(body))
            await self._create(path, body)
            self.pods.pods[keys[i]].created = True
            created += 1
            if waiter is None:
                progress(label, created, total)

        if pause is not None:
            await pause.hold()
        try:
            await self._each(op, range(total), one)
        finally:
            if pause is not None:
                pause.release()
        if waiter is not None:
            await self._wait(op, waiter, timeout, f"the pods of namespace {namespace} to be scheduled")

    # ------------------------------------------------------------------ ops

    async def create_nodes(self, op: CreateNodes) -> None:
        tmpl = op.template
        meta0 = tmpl.get("metadata") or {}
        fixed = meta0.get("name") if op.count == 1 and not meta0.get("generateName") else None
        prefix = _prefix(tmpl, "node-")
        rest = {k: v for k, v in meta0.items() if k not in ("name", "generateName", "labels", "namespace")}
        base_labels = {**(meta0.get("labels") or {}), **op.labels}
        spec = dict(tmpl.get("spec") or {})
        if op.taints:
            spec["taints"] = [*(spec.get("taints") or []), *op.taints]
        status = dict(tmpl.get("status") or {})
        if op.capacity:
            status["capacity"] = {**(status.get("capacity") or {}), **op.capacity}
            if status.get("allocatable") is not None:
                status["allocatable"] = {**status["allocatable"], **op.capacity}
        per_node = (status.get("allocatable") or status.get("capacity") or {}).get("cpu")
        spec_json = orjson.Fragment(orjson.dumps(spec))
        status_json = orjson.Fragment(orjson.dumps(status))
        self.recorder.node_cpu += op.count * _millis(per_node)
        done = 0
        self.progress(op.label, 0, op.count)

        async def one(i: int) -> None:
            nonlocal done
            name = fixed or f"{prefix}{self.run_id}-{next(self.seq)}"
            labels = {**base_labels, "kubernetes.io/hostname": name}
            if op.zones:
                labels[ZONE_LABEL] = f"zone{i % op.zones + 1}"
                if op.racks_per_zone:   # node i is the (i // zones)-th of its zone: racks round robin inside it
                    labels[RACK_LABEL] = f"zone{i % op.zones + 1}-rack{i // op.zones % op.racks_per_zone + 1}"
            if ZONE_LABEL in labels:
                self.recorder.node_zones[name] = labels[ZONE_LABEL]
            if op.label_values:  # labelNodePrepareStrategy: round robin, as upstream
                labels[op.label_key] = op.label_values[i % len(op.label_values)]
            if op.unique_label_key:  # uniqueNodeLabelStrategy: upstream writes a UUID; the run-unique name is one
                labels[op.unique_label_key] = name
            body = {"apiVersion": "v1", "kind": "Node", "metadata": {**rest, "name": name, "labels": labels},
                    "spec": spec_json, "status": status_json}
            await self._create("/api/v1/nodes", body)
            self.nodes.append(name)
            for j in range(op.volumes_per_node):
                assert op.volume_template is not None
                await self._create("/api/v1/persistentvolumes", local_volume(op.volume_template, f"{name}-pv-{j}", name))
            for j in range(op.capacities_per_node):
                assert op.capacity_template is not None
                body = node_capacity(op.capacity_template, f"{name}-cap-{j}", name)
                ns = body["metadata"]["namespace"]
                await self._namespace(ns)
                await self._create(f"/apis/storage.k8s.io/v1/namespaces/{ns}/csistoragecapacities", body)
            done += 1
            self.progress(op.label, done, op.count)

        await self._each(op, range(op.count), one)

    async def create_namespaces(self, op: CreateNamespaces) -> None:
        async def one(i: int) -> None:
            await self._namespace(f"{op.prefix}-{i}", op.template)

        await self._each(op, range(op.count), one)

    async def create_pods(self, op: CreatePods) -> None:
        await self._namespace(op.namespace)
        make = self._pod_maker(op.template, op.namespace)
        labels = dict((op.template.get("metadata") or {}).get("labels") or {})
        prefix = _prefix(op.template, "pod-")
        pods = [(f"{prefix}{self.run_id}-{next(self.seq)}", labels) for _ in range(op.count)]
        if op.claim_template is not None:
            make = _with_claim(make)
            await self._claims(op, [name for name, _ in pods])
        measured = op.collect_metrics or self._in_window(op.namespace, labels)
        started = op.collect_metrics and not self.recorder.collecting
        if started:
            self.recorder.start_collecting(time.time())
        if op.steady_state:
            await self._create_pods_steadily(op, make, labels, prefix, measured)
        else:
            # a paced stream measures latency at its pace: holding the scheduler would defeat it
            pause = self.pause if measured and not op.per_second else None
            await self._create_pods_and_wait(op, op.namespace, pods, make, measured, not op.skip_wait, op.timeout,
                                             op.per_second, pause)
        if started:
            self.recorder.stop_collecting(time.time())

    async def _create_pods_steadily(self, op: CreatePods, make: Callable[[str, dict[str, str]], dict],
                                    labels: dict[str, str], prefix: str, measured: bool) -> None:
        """upstream's steadyState: ``op.count`` pods in flight until ``op.duration`` is over. Once every pod of a
        batch is bound the batch is deleted (gracePeriodSeconds 0, as upstream's DeleteCollection) and the next
        one created; the pods of the batch in flight at the end are left as they are. RunError when no pod at
        all was bound (as upstream: a steady state that schedules nothing is a failure, not a rate of 0)."""
        ns, label = op.namespace, op.label
        loop = asyncio.get_running_loop()
        deadline = loop.time() + op.duration
        path = f"/api/v1/namespaces/{ns}/pods"
        cpu = _cpu_millis({"spec": op.template.get("spec") or {}})
        keys: list[str] = []
        bound = 0
        self.progress(label, 0, 0)
        while loop.time() < deadline:
            batch = [f"{prefix}{self.run_id}-{next(self.seq)}" for _ in range(op.count)]
            batch_keys = [f"{ns}/{name}" for name in batch]
            for key in batch_keys:
                self.pods.add(key, ns, labels)
            keys += batch_keys
            waiter = self.pods.wait_for(batch_keys)

            async def one(i: int) -> None:
                self.recorder.created(batch_keys[i], time.time(), measured, cpu=cpu)   # before: the watch may answer
                await self._create(path, make(batch[i], labels))
                self.pods.pods[batch_keys[i]].created = True

            await self._each(op, range(len(batch)), one)
            if not await self._settled_by(waiter, deadline):
                break
            bound += len(batch)
            self.progress(label, bound, bound)
            await self._each(op, batch_keys, self._delete_pod)
        if not any(self.pods.pods[k].bound for k in keys):
            raise RunError(f"{self.workload.full_name} {label}: no pod at all was scheduled in the steady state's "
                           f"{op.duration:g}s (as upstream, that fails the run)")

    async def _claims(self, op: CreatePods, pods: list[str]) -> None:
        """Before the op's pods: each one's claim ``pvc-<pod>`` and, with a volume template, ``pv-<pod>``
        pre-bound to it (the volume's claimRef, the claim's volumeName), as upstream's
        CreatePodWithPersistentVolume; then wait until the PV controller has bound every pre-bound pair, so
        the pods meet bound claims as upstream's do. (Upstream's benchmark runs no PV controller and writes
        the pairs as bound; to a PV controller a claim marked bind-completed whose volume's claimRef has no
        uid yet is Misbound.) Without a volume template the claims wait for the scheduler."""
        assert op.claim_template is not None
        tmpl, volume_tmpl, ns = op.claim_template, op.volume_template, op.namespace
        meta0 = {k: v for k, v in (tmpl.get("metadata") or {}).items() if k not in ("name", "generateName", "namespace")}
        path = f"/api/v1/namespaces/{ns}/persistentvolumeclaims"

        async def one(pod: str) -> None:
            claim = {**tmpl, "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {**meta0, "name": f"pvc-{pod}", "namespace": ns},
                     "spec": dict(tmpl.get("spec") or {})}
            claim.pop("status", None)
            if volume_tmpl is not None:
                volume = named_volume(volume_tmpl, f"pv-{pod}")
                volume["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "apiVersion": "v1",
                                              "namespace": ns, "name": claim["metadata"]["name"]}
                claim["spec"]["volumeName"] = volume["metadata"]["name"]
                await self._create("/api/v1/persistentvolumes", volume)
            await self._create(path, claim)

        await self._each(op, pods, one)
        if volume_tmpl is None:
            return
        wanted = {f"pvc-{pod}" for pod in pods}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (op.timeout if op.timeout is not None else self.timeout)
        while True:
            items = (await self.client.list(path))["items"]
            wanted -= {c["metadata"]["name"] for c in items if (c.get("status") or {}).get("phase") == "Bound"}
            if not wanted:
                return
            if loop.time() > deadline:
                raise RunError(f"{self.workload.full_name} {op.label}: {len(wanted)} pre-bound claims not Bound by "
                               f"the PV controller in time (e.g. {sorted(wanted)[0]}): is it running?")
            await asyncio.sleep(0.1)

    async def create_any(self, op: CreateAny) -> None:
        """``op.count`` objects from the template, found through discovery as upstream's REST mapper does."""
        tmpl = op.template
        api_version, kind = tmpl["apiVersion"], tmpl["kind"]
        plural, namespaced = await self._resource_of(op, api_version, kind)
        where = f"{self.workload.full_name} {op.label}"
        if namespaced and not op.namespace:
            raise RunError(f"{where}: {kind} is namespaced: the op needs a namespace (as upstream)")
        if op.namespace and not namespaced:
            raise RunError(f"{where}: namespace {op.namespace} set, but {kind} is cluster-scoped (as upstream)")
        if namespaced:
            await self._namespace(op.namespace)
        base = _api_base(api_version)
        path = f"{base}/namespaces/{op.namespace}/{plural}" if namespaced else f"{base}/{plural}"
        raw_meta = tmpl.get("metadata") or {}
        meta0 = {k: v for k, v in raw_meta.items() if k not in ("name", "generateName")}
        if not namespaced:
            meta0.pop("namespace", None)
        # one object named by the template keeps that name (as createNodes does): other objects refer to it
        # by name, as pods name their PriorityClass; so do objects whose name has {{.Index}} (upstream's
        # test-claim-{{.Index}}), each with its index
        named = raw_meta.get("name") if not raw_meta.get("generateName") else None
        fixed = named if op.count == 1 or (named and INDEX in named) else None
        prefix = _prefix(tmpl, f"{kind.lower()}-")
        pod_template = (tmpl.get("spec") or {}).get("template")
        if isinstance(pod_template, dict) and namespaced:
            self.pods.adopting.add(op.namespace)   # its controller's pods: recorded with their owner
            if not (pod_template.get("spec") or {}).get("schedulerName"):
                # the run's scheduler, unless the template names one, as for the pods the runner creates
                tmpl = {**tmpl, "spec": {**tmpl["spec"], "template": {
                    **pod_template, "spec": {**(pod_template.get("spec") or {}), "schedulerName": self.scheduler_name}}}}
        indexed = INDEX in orjson.dumps(tmpl).decode()
        owners: dict[str, int] = {}
        done = 0
        self.progress(op.label, 0, op.count)

        async def one(i: int) -> None:
            nonlocal done
            meta = {**(_with_index(meta0, i) if indexed else meta0),
                    "name": _with_index(fixed, i) if fixed else f"{prefix}{self.run_id}-{next(self.seq)}"}
            if namespaced:
                meta["namespace"] = op.namespace
            body = {**(_with_index(tmpl, i) if indexed else tmpl), "metadata": meta}
            if op.replicas and namespaced:
                owners[f"{kind} {op.namespace}/{meta['name']}"] = op.replicas
            try:
                if fixed:
                    await self._create_or_reuse(f"{kind} {meta['name']}", path, body)
                else:
                    await self._create(path, body)
            except NotFound as exc:
                raise RunError(f"the server answered 404 for {kind} ({api_version}) at POST {path}: it does not "
                               f"serve {plural}: {exc}") from exc
            done += 1
            self.progress(op.label, done, op.count)

        await self._each(op, range(op.count), one)
        if owners and not op.skip_wait:
            label = op.label
            waiter = self.pods.wait_for_owners(owners, on_change=lambda n: self.progress(label, n, len(owners)))
            await self._wait(op, waiter, op.timeout, f"the {op.replicas} pods of each {kind} to be scheduled "
                             f"(does the cluster run the {kind} controller?)", unit=f"{kind}s")

    async def _create_or_reuse(self, what: str, path: str, body: dict[str, Any]) -> None:
        """Create an object with a fixed name; one that exists already (an earlier run's) must say what ``body`` says.

        Only the fields the body sets are compared, so what the server
        defaulted does not count. RunError when they differ: a PriorityClass
        of another value would silently change what the workload measures.
        """
        try:
            await self.client.create(path, body)
            return
        except Conflict as exc:
            if not exc.already_exists:
                raise
        existing = await self.client.get(f"{path}/{body['metadata']['name']}")
        wanted = {k: v for k, v in body.items() if k not in ("apiVersion", "kind", "metadata")}
        wanted_meta = {k: v for k, v in body["metadata"].items() if k in ("labels", "annotations")}
        differs = _first_difference({**wanted, "metadata": wanted_meta}, existing)
        if differs is not None:
            raise RunError(f"{what} exists already and differs from the template at {differs}: delete it, or "
                           f"name another in the template")

    async def _resource_of(self, op: Op, api_version: str, kind: str) -> tuple[str, bool]:
        """(plural, namespaced) of ``kind`` from the server's discovery; RunError when it does not serve it."""
        path = _api_base(api_version)
        where = f"{self.workload.full_name} {op.label}"
        try:
            doc = await self.client.get(path)
        except NotFound as exc:
            raise RunError(f"{where}: the server does not serve {api_version} (404 for GET {path}), so it cannot "
                           f"create {kind} objects") from exc
        except APIError as exc:
            raise RunError(f"{where}: discovery of {api_version} failed: {exc}") from exc
        for r in doc.get("resources") or ():
            if r.get("kind") == kind and "/" not in str(r.get("name", "")):
                return str(r["name"]), bool(r.get("namespaced"))
        raise RunError(f"{where}: the server does not serve kind {kind} in {api_version} (GET {path} does not "
                       f"list it), so it cannot create {kind} objects")

    async def create_pod_groups(self, op: CreatePodGroups) -> None:
        ns = op.namespace
        await self._namespace(ns)
        gt = op.group_template
        g_meta = gt.get("metadata") or {}
        g_rest = {k: v for k, v in g_meta.items() if k not in ("name", "generateName", "namespace")}
        g_prefix = _prefix(gt, "gang-")
        api_version = gt.get("apiVersion") or POD_GROUP_API_VERSION
        native = api_version == NATIVE_POD_GROUP_API_VERSION
        g_spec = {**(gt.get("spec") or {}), "schedulingPolicy": {"gang": {"minCount": op.min_member}}} if native \
            else {**(gt.get("spec") or {}), "minMember": op.min_member}
        g_path = _plural_path(api_version, gt.get("kind") or "PodGroup", ns)
        groups = [f"{g_prefix}{self.run_id}-{next(self.seq)}" for _ in range(op.count)]

        async def one_group(name: str) -> None:
            await self._create(g_path, {"apiVersion": api_version, "kind": gt.get("kind") or "PodGroup",
                                        "metadata": {**g_rest, "name": name, "namespace": ns}, "spec": g_spec})

        await self._each(op, groups, one_group)  # every PodGroup exists before its first member

        base = dict((op.pod_template.get("metadata") or {}).get("labels") or {})
        make = self._pod_maker(op.pod_template, ns)
        if native:
            # members join with spec.schedulingGroup; the label only tells the recorder the gang (and is not
            # scheduler-plugins' label, which would name a second group)
            make = _joining(make)
        label = NATIVE_GROUP_LABEL if native else POD_GROUP_LABEL
        pods = [(f"{g}-{j}", {**base, label: g}) for g in groups for j in range(op.pods_per_group)]
        measured = op.collect_metrics or self._in_window(ns, base)
        started = op.collect_metrics and not self.recorder.collecting
        if started:
            self.recorder.start_collecting(time.time())
        await self._create_pods_and_wait(op, ns, pods, make, measured, not op.skip_wait, op.timeout,
                                         pause=self.pause if measured else None)
        if started:
            self.recorder.stop_collecting(time.time())

    async def create_pipeline_runs(self, op: CreatePipelineRuns) -> None:
        await create_pipeline_runs(self, op)   # bench/pipelines.py: stage by stage, as Tekton makes the pods

    async def churn(self, op: Churn) -> None:
        if any(t.get("kind") == "Pod" for t in op.templates):
            await self._namespace(op.namespace)
        task = asyncio.create_task(self._churn_loop(op), name=f"{self.workload.full_name} {op.label}")
        self.background.append(task)

    async def _churn_loop(self, op: Churn) -> None:
        """One object per template per interval: create (up to ``number``), or recreate cycles, as upstream."""
        makers: list[Callable[[], tuple[str, str, dict[str, Any]]]] = []
        for tmpl in op.templates:
            prefix = _prefix(tmpl, "churn-")
            if tmpl.get("kind") == "Node":
                meta = {k: v for k, v in (tmpl.get("metadata") or {}).items() if k not in ("name", "generateName")}

                def make_node(tmpl: dict[str, Any] = tmpl, meta: dict[str, Any] = meta,
                              prefix: str = prefix) -> tuple[str, str, dict[str, Any]]:
                    name = f"{prefix}{self.run_id}-{next(self.seq)}"
                    body = {**tmpl, "metadata": {**meta, "name": name}}
                    return "/api/v1/nodes", f"/api/v1/nodes/{name}", body

                makers.append(make_node)
            else:
                pod_make = self._pod_maker(tmpl, op.namespace)
                labels = dict((tmpl.get("metadata") or {}).get("labels") or {})

                def make_pod(pod_make: Callable[..., dict] = pod_make, labels: dict[str, str] = labels,
                             prefix: str = prefix) -> tuple[str, str, dict[str, Any]]:
                    name = f"{prefix}{self.run_id}-{next(self.seq)}"
                    # tracked so the watch knows it, but never counted by waits nor recorded
                    self.pods.add(f"{op.namespace}/{name}", op.namespace, labels, counted=False)
                    return (f"/api/v1/namespaces/{op.namespace}/pods",
                            f"/api/v1/namespaces/{op.namespace}/pods/{name}", pod_make(name, labels))

                makers.append(make_pod)
        live: list[list[str]] = [[] for _ in makers]
        created = [0] * len(makers)
        for tick in itertools.count():
            for i, make in enumerate(makers):
                if op.mode == "create":
                    if op.number and created[i] >= op.number:
                        continue
                    create = True
                else:
                    create = (tick // op.number) % 2 == 0
                if create:
                    collection, item, body = make()
                    await self._create(collection, body)
                    live[i].append(item)
                    created[i] += 1
                elif live[i]:
                    try:
                        await self.client.delete(live[i].pop(0), {"gracePeriodSeconds": 0})
                    except NotFound:
                        pass
            await asyncio.sleep(op.interval)

    async def delete_pods(self, op: DeletePods) -> None:
        if op.when_bound:
            task = asyncio.create_task(self._delete_when_bound(op), name=f"{self.workload.full_name} {op.label}")
            self.background.append(task)
            return
        keys: list[str] = []
        cont = None
        while True:
            params: dict[str, Any] = {"limit": LIST_PAGE}
            if op.label_selector:
                params["labelSelector"] = _selector_string(op.label_selector)
            if cont:
                params["continue"] = cont
            try:
                page = await self.client.list(f"/api/v1/namespaces/{op.namespace}/pods", params)
            except APIError as exc:
                raise RunError(f"{self.workload.full_name} {op.label}: listing pods: {exc}") from exc
            keys += [f"{op.namespace}/{(p.get('metadata') or {}).get('name')}" for p in page.get("items") or ()]
            cont = (page.get("metadata") or {}).get("continue")
            if not cont:
                break
        work = self._delete_paced(op, keys)
        if op.skip_wait:
            self.background.append(asyncio.create_task(work, name=f"{self.workload.full_name} {op.label}"))
            return
        limit = op.timeout if op.timeout is not None else self.timeout
        try:
            await asyncio.wait_for(work, timeout=limit)
        except asyncio.TimeoutError:
            raise RunError(f"{self.workload.full_name} {op.label}: timed out after {limit:g}s deleting "
                           f"{len(keys)} pods") from None

    async def _delete_paced(self, op: DeletePods, keys: list[str]) -> None:
        """Delete ``keys`` at ``deletePodsPerSecond`` (all at once when 0)."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        done = 0
        self.progress(op.label, 0, len(keys))

        async def one(i: int) -> None:
            nonlocal done
            if op.per_second:
                delay = start + i / op.per_second - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            await self._delete_pod(keys[i])
            done += 1
            self.progress(op.label, done, len(keys))

        concurrency = min(CONCURRENCY, op.per_second) if op.per_second else CONCURRENCY
        await self._each(op, range(len(keys)), one, concurrency=max(1, concurrency))

    async def _delete_when_bound(self, op: DeletePods) -> None:
        """Delete each matching pod ``hold`` seconds after it binds, until the workload ends."""
        queue: asyncio.Queue[tuple[float, str]] = asyncio.Queue()

        def wanted(pod: _Pod) -> bool:
            return pod.namespace == op.namespace and _matches(pod.labels, op.label_selector)

        def on_bound(key: str, pod: _Pod, t: float) -> None:
            if wanted(pod):
                queue.put_nowait((t + op.hold, key))

        now = time.time()
        for key, pod in self.pods.pods.items():
            if pod.bound and not pod.gone and wanted(pod):
                queue.put_nowait((now + op.hold, key))
        self.pods.bind_listeners.append(on_bound)

        async def worker() -> None:
            while True:
                due, key = await queue.get()
                delay = due - time.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                await self._delete_pod(key)

        try:
            async with asyncio.TaskGroup() as tg:
                for _ in range(DELETE_WORKERS):
                    tg.create_task(worker())
        finally:
            self.pods.bind_listeners.remove(on_bound)

    async def barrier(self, op: Barrier) -> None:
        keys = [k for k, p in self.pods.pods.items()
                if p.counted and (not op.namespaces or p.namespace in op.namespaces)
                and _matches(p.labels, op.label_selector)]
        label = op.label
        waiter = self.pods.wait_for(keys, op.stage, on_change=lambda done: self.progress(label, done, len(keys)))
        scope = f"namespaces {', '.join(op.namespaces)}" if op.namespaces else "all namespaces"
        if op.label_selector:
            scope += f", labels {_selector_string(op.label_selector)}"
        stage = "scheduled" if op.stage == "Scheduled" else "attempted"
        await self._wait(op, waiter, op.timeout, f"the pods ({scope}) to be {stage}")

    async def sleep(self, op: Sleep) -> None:
        await asyncio.sleep(op.duration)

    async def start_collecting(self, op: StartCollectingMetrics) -> None:
        self.recorder.start_collecting(time.time())
        self.window = (op.namespaces, op.label_selector)

    async def stop_collecting(self, op: StopCollectingMetrics) -> None:
        self.recorder.stop_collecting(time.time())
        self.window = None


async def run_workload(workload: Workload, target: Target, scheduler_name: str, recorder: Recorder,
                       progress: Callable[[str, int, int], None] | None = None, timeout: float = 600,
                       pause: Pause | None = None) -> None:
    """Run ``workload``'s ops in order against ``target``, recording every pod's created and bound time.

    ``scheduler_name`` fills ``spec.schedulerName`` of every pod whose
    template does not set one (a createAny's pod template too: a
    ReplicaSet's). ``progress(op_label, done, total)`` is called
    as an op advances: for pod-creating ops that wait, ``done`` counts the
    op's pods scheduled (or deleted); for ops that do not wait, pods
    created; for createNodes, nodes created; for barrier, pods settled; for
    deletePods, pods deleted. ``op_label`` reads ``op 2 (createPods)``.
    ``timeout`` (seconds) bounds each wait of an op that sets no timeout of
    its own. ``pause`` is held while a measured createPods op creates its
    pods (see :class:`Pause`). Raises :class:`RunError` when an op fails or
    times out.
    """
    await _Run(workload, target, scheduler_name, recorder, progress, timeout, pause).run()


# the native members' label: which gang a pod is in, for the recorder (the API's link is spec.schedulingGroup)
NATIVE_GROUP_LABEL = "bench.tandem.dev/pod-group"


def _millis(cpu: Any) -> int:
    """A cpu quantity ("4", "500m", 2) in millicores; 0 when absent or not one."""
    if cpu is None:
        return 0
    text = str(cpu)
    try:
        return int(float(text[:-1])) if text.endswith("m") else int(float(text) * 1000)
    except ValueError:
        return 0


INDEX = "{{.Index}}"   # createAny's one text/template expression: the object's 0-based index


def _with_index(obj: Any, i: int) -> Any:
    """``obj`` with ``{{.Index}}`` replaced by ``i`` in every string, keys included."""
    if isinstance(obj, dict):
        return {_with_index(k, i): _with_index(v, i) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_with_index(v, i) for v in obj]
    return obj.replace(INDEX, str(i)) if isinstance(obj, str) else obj


def _cpu_millis(pod: dict[str, Any]) -> int:
    """The cpu a pod requests: its containers' requests summed (the utilization measure's share)."""
    return sum(_millis(((c.get("resources") or {}).get("requests") or {}).get("cpu"))
               for c in (pod.get("spec") or {}).get("containers") or ())


def _joining(make: Callable[[str, dict[str, str]], dict]) -> Callable[[str, dict[str, str]], dict]:
    """A pod maker whose pods join the native PodGroup their NATIVE_GROUP_LABEL names."""
    def join(name: str, labels: dict[str, str]) -> dict[str, Any]:
        body = make(name, labels)
        spec = orjson.loads(orjson.dumps(body["spec"]))
        spec["schedulingGroup"] = {"podGroupName": labels[NATIVE_GROUP_LABEL]}
        return {**body, "spec": spec}
    return join


def _with_claim(make: Callable[[str, dict[str, str]], dict]) -> Callable[[str, dict[str, str]], dict]:
    """Pods that each mount their own claim ``pvc-<pod>`` as volume ``vol`` (upstream's name for it)."""
    def mount(name: str, labels: dict[str, str]) -> dict[str, Any]:
        body = make(name, labels)
        spec = orjson.loads(orjson.dumps(body["spec"]))    # the maker's spec is serialized once, shared
        spec["volumes"] = [*(spec.get("volumes") or []), {"name": "vol",
                                                           "persistentVolumeClaim": {"claimName": f"pvc-{name}"}}]
        return {**body, "spec": spec}

    return mount


def named_volume(template: dict[str, Any], name: str) -> dict[str, Any]:
    """A PersistentVolume from ``template`` named ``name``; a CSI volume's handle is its name, as upstream's
    volume factory makes each one a volume of its own."""
    volume = {**template, "apiVersion": "v1", "kind": "PersistentVolume",
              "metadata": {**{k: v for k, v in (template.get("metadata") or {}).items()
                              if k not in ("name", "generateName")}, "name": name},
              "spec": copy.deepcopy(template.get("spec") or {})}
    volume.pop("status", None)
    if isinstance(volume["spec"].get("csi"), dict):
        volume["spec"]["csi"]["volumeHandle"] = name
    return volume


def node_capacity(template: dict[str, Any], name: str, node: str) -> dict[str, Any]:
    """A CSIStorageCapacity of ``node`` only: the template's (its namespace, else default), with a nodeTopology
    selecting the node's hostname label, as TopoLVM's controller publishes one per node."""
    meta = {k: v for k, v in (template.get("metadata") or {}).items() if k not in ("name", "generateName")}
    meta.setdefault("namespace", "default")
    return {**copy.deepcopy(template), "apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
            "metadata": {**meta, "name": name},
            "nodeTopology": {"matchLabels": {"kubernetes.io/hostname": node}}}


def local_volume(template: dict[str, Any], name: str, node: str) -> dict[str, Any]:
    """A volume of ``node`` only: the template's, with required node affinity on the node's hostname label."""
    volume = named_volume(template, name)
    volume["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}
    return volume
