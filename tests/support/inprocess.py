"""A whole scheduler in process, on a fake clock and a fake API: for tests of what one cycle or a few decide.

:class:`InProcess` builds a real :class:`~scheduler.scheduler.Scheduler` (tandem's built-in default
configuration unless told otherwise) and feeds it objects through its informer handlers, as the informers
would. The fake API (:class:`FakeAPI`) records binds and PodScheduled conditions, sends each bind back to
the scheduler as the pod informer would, and plays the PV controller for the writes VolumeBinding makes
(a volume's claimRef or a claim's selected node answered with both bound), so gangs with local volumes bind
end to end. Nothing sleeps: the loop is let run with :meth:`InProcess.settle` and time moves only with
:meth:`InProcess.advance`.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import itertools
from typing import Any

from scheduler.config import SchedulerConfig, load_config
from scheduler.framework.clock import FakeClock
from scheduler.observe import Metrics
from scheduler.scheduler import Scheduler

NS = "default"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
LOCAL = "local-storage"   # a WaitForFirstConsumer class with no provisioner: local volumes only


class FakeEvents:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str]] = []   # (object name, reason, note)

    def for_profile(self, scheduler_name: str) -> FakeEvents:
        return self

    def record(self, regarding: Any, type_: str, reason: str, action: str, note: str, controller: Any = None,
               **kw: Any) -> None:
        name = regarding.name if hasattr(regarding, "name") else str((regarding or {}).get("name", ""))
        self.recorded.append((name, reason, note))

    def eventf(self, regarding: Any, related: Any, type_: str, reason: str, action: str, note: str,
               *args: Any) -> None:
        self.record(regarding, type_, reason, action, note)


class FakeAPI:
    """What the scheduler writes, recorded; binds and volume bindings answered as the cluster would."""

    def __init__(self) -> None:
        self.s: Scheduler | None = None
        self.binds: list[tuple[str, str]] = []                # (pod name, node), in order
        self.conditions: dict[str, dict[str, Any]] = {}      # pod name -> last PodScheduled written
        self.nominated: dict[str, str] = {}                  # pod name -> last status.nominatedNodeName written
        self.objects: dict[str, dict[str, Any]] = {}         # API path -> object (pods, PVs, PVCs)
        self.refuse_volume_writes: set[str] = set()          # PV names whose update answers an error
        self._rv = itertools.count(100)

    def rv(self) -> str:
        return str(next(self._rv))

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        self.binds.append((name, node))
        assert self.s is not None
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        old = self.objects[path]
        new = copy.deepcopy(old)
        new["spec"]["nodeName"] = node
        new["metadata"]["resourceVersion"] = self.rv()
        self.objects[path] = new
        self.s.on_pod_update(old, new)

    async def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        for c in patch["status"].get("conditions") or ():
            self.conditions[name] = c
        if "nominatedNodeName" in patch["status"]:
            self.nominated[name] = patch["status"]["nominatedNodeName"] or ""
        return {}

    async def patch(self, path: str, body: Any, content_type: str = "") -> dict[str, Any]:
        return {}

    async def create(self, path: str, body: Any) -> dict[str, Any]:
        return body

    async def update(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """VolumeBinding's writes: a PV's claimRef, a claim's selected node. Answered with the volume and its claim
        bound at once (the PV controller's work), through the informer handlers."""
        assert self.s is not None
        name = body["metadata"]["name"]
        if name in self.refuse_volume_writes:
            raise RuntimeError(f'persistentvolumes "{name}": the object has been modified')
        rv = self.rv()
        if path.startswith("/api/v1/persistentvolumes/"):
            ref = body["spec"]["claimRef"]
            claim_path = f"/api/v1/namespaces/{ref['namespace']}/persistentvolumeclaims/{ref['name']}"
            claim = copy.deepcopy(self.objects[claim_path])
            claim["spec"]["volumeName"] = name
            claim["metadata"].setdefault("annotations", {})["pv.kubernetes.io/bind-completed"] = "yes"
            # the informer brings both after the write returns, as a watch does
            loop = asyncio.get_running_loop()
            loop.call_soon(self._set, path, body, rv, "Bound")
            loop.call_soon(self._set, claim_path, claim, self.rv(), "Bound")
        return {"metadata": {"resourceVersion": rv}}

    def _set(self, path: str, obj: dict[str, Any], rv: str, phase: str) -> None:
        assert self.s is not None
        old = self.objects.get(path)
        new = copy.deepcopy(obj)
        new["metadata"]["resourceVersion"] = rv
        new.setdefault("status", {})["phase"] = phase
        self.objects[path] = new
        if "/persistentvolumes/" in path:
            self.s.on_pv_update(old or new, new)
        else:
            self.s.on_pvc_update(old or new, new)


class InProcess:
    """A scheduler, its fake API and clock; objects go in through its informer handlers."""

    def __init__(self, cfg: SchedulerConfig | None = None, **changes: Any) -> None:
        cfg = cfg or load_config(None)
        changes.setdefault("pod_initial_backoff_seconds", 1.0)
        changes.setdefault("pod_max_backoff_seconds", 10.0)
        cfg = dataclasses.replace(cfg, **changes)
        self.clock = FakeClock()
        self.api = FakeAPI()
        self.events = FakeEvents()
        self.metrics = Metrics()
        self.s = Scheduler(cfg, self.api, self.events, self.metrics, clock=self.clock)
        self.api.s = self.s
        self.profile = cfg.profiles[0].scheduler_name
        self.task: asyncio.Task[None] | None = None
        self._uids = itertools.count()

    # ------------------------------------------------------------------ objects

    def node(self, name: str, cpu: str = "4", zone: str = "", labels: dict[str, str] | None = None) -> None:
        all_labels = {HOSTNAME: name, **({ZONE: zone} if zone else {}), **(labels or {})}
        self.s.on_node_add({"metadata": {"name": name, "uid": f"node-{name}", "labels": all_labels},
                            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}})

    def native_group(self, name: str, min_count: int, topology: str = "") -> None:
        spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
        if topology:
            spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
        self.s.on_pod_group_add({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                                 "metadata": {"name": name, "namespace": NS, "uid": f"pg-{name}",
                                              "resourceVersion": "1", "creationTimestamp": "2026-01-01T00:00:00Z"},
                                 "spec": spec}, native=True)

    def delete_native_group(self, name: str) -> None:
        self.s.on_pod_group_delete({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                                    "metadata": {"name": name, "namespace": NS, "uid": f"pg-{name}"}}, native=True)

    def pod(self, name: str, group: str = "", cpu: str = "1", selector: dict[str, str] | None = None,
            claims: tuple[str, ...] = (), labels: dict[str, str] | None = None, gated: bool = False,
            resource_claims: tuple[str, ...] = ()) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "schedulerName": self.profile,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}
        if group:
            spec["schedulingGroup"] = {"podGroupName": group}
        if selector:
            spec["nodeSelector"] = selector
        if claims:
            spec["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                               for i, c in enumerate(claims)]
        if gated:
            spec["schedulingGates"] = [{"name": "example.com/later"}]
        if resource_claims:
            spec["resourceClaims"] = [{"name": f"rc{i}", "resourceClaimName": c} for i, c in enumerate(resource_claims)]
        obj = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}-{next(self._uids)}",
                            "resourceVersion": self.api.rv(), "labels": labels or {"app": group or name},
                            "creationTimestamp": "2026-01-01T00:00:00Z"},
               "spec": spec, "status": {"phase": "Pending"}}
        self.api.objects[f"/api/v1/namespaces/{NS}/pods/{name}"] = obj
        self.s.on_pod_add(obj)
        return obj

    def ungate(self, name: str) -> None:
        """Remove the pod's schedulingGates, as its controller would."""
        path = f"/api/v1/namespaces/{NS}/pods/{name}"
        old = self.api.objects[path]
        new = {**old, "metadata": {**old["metadata"], "resourceVersion": self.api.rv()},
               "spec": {k: v for k, v in old["spec"].items() if k != "schedulingGates"}}
        self.api.objects[path] = new
        self.s.on_pod_update(old, new)

    def delete_pod(self, name: str) -> None:
        obj = self.api.objects.pop(f"/api/v1/namespaces/{NS}/pods/{name}")
        self.s.on_pod_delete(obj)

    def local_class(self) -> None:
        self.s.on_storage_class_add({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                     "metadata": {"name": LOCAL}, "provisioner": "kubernetes.io/no-provisioner",
                                     "volumeBindingMode": "WaitForFirstConsumer"})

    def local_volume(self, name: str, node: str) -> None:
        """A 1Gi local PersistentVolume on ``node`` (node affinity on its hostname), available."""
        obj = {"apiVersion": "v1", "kind": "PersistentVolume",
               "metadata": {"name": name, "uid": f"pv-{name}", "resourceVersion": self.api.rv()},
               "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": LOCAL,
                        "local": {"path": f"/mnt/{name}"}, "persistentVolumeReclaimPolicy": "Retain",
                        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                            {"key": HOSTNAME, "operator": "In", "values": [node]}]}]}}},
               "status": {"phase": "Available"}}
        self.api.objects[f"/api/v1/persistentvolumes/{name}"] = obj
        self.s.on_pv_add(obj)

    def claim(self, name: str, storage_class: str = LOCAL) -> None:
        """A 1Gi claim of ``storage_class``, unbound."""
        obj = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": name, "namespace": NS, "uid": f"pvc-{name}", "resourceVersion": self.api.rv()},
               "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                        "storageClassName": storage_class},
               "status": {"phase": "Pending"}}
        self.api.objects[f"/api/v1/namespaces/{NS}/persistentvolumeclaims/{name}"] = obj
        self.s.on_pvc_add(obj)

    # ------------------------------------------------------------------ running

    def start(self) -> None:
        self.task = asyncio.create_task(self.s.run())

    async def settle(self, rounds: int = 60) -> None:
        """Let the loop, the binding tasks and the writers run until nothing is left to do right now."""
        for _ in range(rounds):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> None:
        """Move the clock (firing what falls due), then settle."""
        self.clock.advance(seconds)
        await self.settle()

    async def stop(self) -> None:
        self.s.halt()
        if self.task is not None:
            await asyncio.wait_for(self.task, 1)

    # ------------------------------------------------------------------ reading

    def node_of(self, name: str) -> str:
        return dict(self.api.binds).get(name, "")

    def bound(self, *names: str) -> dict[str, str]:
        placed = dict(self.api.binds)
        return {n: placed[n] for n in names if n in placed}

    def condition(self, name: str) -> dict[str, Any]:
        return self.api.conditions.get(name, {})

    def message(self, name: str) -> str:
        return str(self.condition(name).get("message", ""))

    def uid(self, name: str) -> str:
        return str(self.api.objects[f"/api/v1/namespaces/{NS}/pods/{name}"]["metadata"]["uid"])

    def rejectors(self, name: str) -> set[str]:
        """The plugins the queue holds the pod for (its queueing hints)."""
        qi = self.s.queue.infos.get(self.uid(name))
        return set(qi.unschedulable_plugins) if qi is not None else set()

    def where(self, name: str) -> str | None:
        return self.s.queue.where.get(self.uid(name))
