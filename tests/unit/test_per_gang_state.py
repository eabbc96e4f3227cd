"""Per-gang state goes with its gang: GangReadiness and the PodGroup status controller after many short gangs.

Jobs create a PodGroup per run, so a scheduler that keeps one entry per
gang it ever saw grows for as long as it runs. Here a real
:class:`Scheduler` (a profile with GangReadiness, every gang taking part)
and a :class:`PodGroupController` run against an in-memory API server that
delivers every write back through the scheduler's informer handlers, as a
watch would (each write a new resourceVersion; a status patch made on an
old one refused with 409). Many short gangs of both PodGroup APIs come and
go: gangs that become Ready, gangs whose bare pods are evicted at their
PodsReady timeout and created again, gangs short of members long enough to
be reported, a gang with an unreadable timeout; first while this replica
leads (the plugin's and the controller's tasks run), then while it follows
(they do not, the informers still feed them). Afterwards every dict, set
and list either keeps per gang is back to its size before the run.

Time is a fake clock; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
from typing import Any

from scheduler.config import parse_config
from scheduler.framework.clock import FakeClock
from scheduler.framework.registry import load_builtin_plugins
from scheduler.podgroups import PodGroupController
from scheduler.scheduler import Scheduler

SCHED = "tandem-scheduler"
NS = "default"
CRD = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups/"
NATIVE = "/apis/scheduling.k8s.io/v1alpha2/namespaces/default/podgroups/"
PODS = "/api/v1/namespaces/default/pods"

# attributes that are collaborators, not state kept per gang
_NOT_STATE = {"handle", "scheduler", "client", "events", "clock", "args", "bucket", "annotations"}


def state_sizes(obj: Any, name: str, _seen: set[int] | None = None) -> dict[str, int]:
    """len() of every dict, set, list and sized object of tandem's that ``obj`` keeps, and of those its own
    helpers keep, by dotted attribute name (collaborators such as the handle left out)."""
    seen = _seen if _seen is not None else set()
    seen.add(id(obj))
    out: dict[str, int] = {}
    attrs = vars(obj) if hasattr(obj, "__dict__") else {a: getattr(obj, a) for a in obj.__slots__ if hasattr(obj, a)}
    for attr, value in attrs.items():
        if attr in _NOT_STATE or id(value) in seen:
            continue
        path = f"{name}.{attr}"
        ours = type(value).__module__.startswith(("scheduler.", "plugins."))
        if isinstance(value, (dict, set, list)) or (ours and hasattr(type(value), "__len__")):
            out[path] = len(value)
        elif ours and not callable(value):
            out.update(state_sizes(value, path, seen))
    return out


class API:
    """The API server and the informers as far as these two use them: every write is delivered at once."""

    sched: Scheduler   # whose informer handlers the writes are delivered to

    def __init__(self) -> None:
        self.pods: dict[str, dict[str, Any]] = {}
        self.groups: dict[str, dict[str, Any]] = {}   # API path -> object
        self.versions = itertools.count(1)
        self.uids = itertools.count(1)
        self.written: list[str] = []   # what each PodGroup write was: "annotations", or a condition type, or "fields"

    def _stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj["metadata"]["resourceVersion"] = str(next(self.versions))
        return copy.deepcopy(obj)

    # the test's own writes (what Jobs, users and the kubelet do)

    def add_group(self, name: str, min_member: int, native: bool = False, annotations: dict[str, str] | None = None
                  ) -> None:
        spec = {"schedulingPolicy": {"gang": {"minCount": min_member}}} if native else {"minMember": min_member}
        obj = {"metadata": {"name": name, "namespace": NS, "uid": f"pg-{name}", "annotations": annotations or {}},
               "spec": spec, "status": {}}
        self.groups[(NATIVE if native else CRD) + name] = obj
        self.sched.on_pod_group_add(self._stamp(obj), native=native)

    def delete_group(self, name: str) -> None:
        for base in (CRD, NATIVE):
            obj = self.groups.pop(base + name, None)
            if obj is not None:
                self.sched.on_pod_group_delete(copy.deepcopy(obj), native=base == NATIVE)

    def add_pod(self, name: str, group: str, native: bool = False, **spec: Any) -> None:
        meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"u-{name}-{next(self.uids)}"}
        body: dict[str, Any] = {"schedulerName": SCHED, "containers": [{"name": "c", "image": "pause"}], **spec}
        if native:
            body["schedulingGroup"] = {"podGroupName": group}
        else:
            meta["labels"] = {"scheduling.x-k8s.io/pod-group": group}
        self._create({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body,
                      "status": {"phase": "Pending"}})

    def _create(self, obj: dict[str, Any]) -> None:
        self.pods[obj["metadata"]["name"]] = obj
        self.sched.on_pod_add(self._stamp(obj))

    def update_pod(self, name: str, node: str = "", ready: bool | None = None, unschedulable: str = "") -> None:
        old = copy.deepcopy(self.pods[name])
        obj = self.pods[name]
        if node:
            obj["spec"]["nodeName"] = node
            obj["status"]["phase"] = "Running"
        if ready is not None:
            obj["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
        if unschedulable:
            obj["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                            "message": unschedulable, "lastTransitionTime": "2024-05-01T10:00:00Z"}]
        self.sched.on_pod_update(old, self._stamp(obj))

    def remove_pod(self, name: str) -> None:
        obj = self.pods.pop(name, None)
        if obj is not None:
            self.sched.on_pod_delete(copy.deepcopy(obj))

    # the scheduler's writes

    async def patch(self, path: str, body: Any, content_type: str = "", **kw: Any) -> dict[str, Any]:
        status = path.endswith("/status")
        obj = self.groups.get(path.removesuffix("/status"))
        if obj is None:
            raise APIError(404)
        old = copy.deepcopy(obj)
        if status:
            rv = (body.get("metadata") or {}).get("resourceVersion")
            if rv is not None and rv != obj["metadata"]["resourceVersion"]:
                raise APIError(409)
            obj["status"].update(copy.deepcopy(body["status"]))
            self.written += [c["type"] for c in body["status"].get("conditions") or ()] or ["fields"]
        else:
            self.written.append("annotations")
            for k, v in body["metadata"]["annotations"].items():
                if v is None:
                    obj["metadata"]["annotations"].pop(k, None)
                else:
                    obj["metadata"]["annotations"][k] = v
        self.sched.on_pod_group_update(old, self._stamp(obj), native=path.startswith(NATIVE))
        return copy.deepcopy(obj)

    async def patch_pod_status(self, ns: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return {}

    async def delete_pod(self, ns: str, name: str, uid: str | None = None, grace_seconds: int | None = None) -> Any:
        obj = self.pods.get(name)
        if obj is None:
            raise APIError(404)
        if uid is not None and obj["metadata"]["uid"] != uid:
            raise APIError(409)
        self.remove_pod(name)
        return {}

    async def create(self, path: str, body: Any, **kw: Any) -> dict[str, Any]:
        name = body["metadata"]["name"]
        if name in self.pods:
            raise APIError(409)
        obj = copy.deepcopy(body)
        obj["metadata"]["uid"] = f"u-{name}-{next(self.uids)}"
        obj["status"] = {"phase": "Pending"}
        self._create(obj)
        return obj

    async def get(self, path: str, **kw: Any) -> dict[str, Any]:
        obj = self.pods.get(path.rsplit("/", 1)[-1])
        if obj is None:
            raise APIError(404)
        return copy.deepcopy(obj)


class APIError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


async def test_after_many_short_gangs_the_per_gang_state_is_back_to_its_size_before() -> None:
    load_builtin_plugins()
    cfg = parse_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": SCHED,
                      "plugins": {"multiPoint": {"enabled": [{"name": "GangReadiness"}]}},
                      "pluginConfig": [{"name": "GangReadiness", "args": {
                          "allGangs": True, "timeoutSeconds": 5, "backoffBaseSeconds": 1,
                          "backoffMaxSeconds": 1}}]}]}, "<test>")
    clock = FakeClock(wall_start=1_714_557_600.0)
    api = API()
    sched = api.sched = Scheduler(cfg, api, clock=clock)
    plugin = sched.frameworks[SCHED].plugins["GangReadiness"]
    ctl = PodGroupController(sched, api, None, interval=0.5)
    sched.group_listeners.append(ctl.on_pod_change)
    sched.on_node_add({"metadata": {"name": "n1", "uid": "n1"},
                       "status": {"allocatable": {"cpu": "1000", "memory": "1000Gi", "pods": "10000"}}})
    api.add_group("steady", 1)        # a gang that stays all along
    api.add_pod("steady-0", "steady")
    api.update_pod("steady-0", node="n1", ready=True)

    tasks: list[asyncio.Task[None]] = []

    def lead() -> None:
        tasks.extend([asyncio.ensure_future(plugin.run()), asyncio.ensure_future(ctl.run())])

    async def follow() -> None:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        tasks.clear()

    async def settle(seconds: float = 2.0, step: float = 0.25) -> None:
        for _ in range(round(seconds / step)):
            clock.advance(step)
            for _ in range(30):
                await asyncio.sleep(0)

    def state() -> dict[str, int]:
        return {**state_sizes(plugin, "GangReadiness"), **state_sizes(ctl, "PodGroupController")}

    lead()
    await settle(10)
    before = state()

    async def short_gangs(round_: int, n: int) -> None:
        for i in range(n):
            g = f"r{round_}-g{i}"
            kind = i % 5
            native = kind == 1
            api.add_group(g, 2 if kind != 3 else 3, native=native,
                          annotations={"scheduling.tandem.dev/pods-ready-timeout-seconds": "soon"} if kind == 4 else None)
            names = [f"{g}-{j}" for j in range(2)]
            for name in names:
                api.add_pod(name, g, native=native)
            if native:
                api.update_pod(names[0], unschedulable="0/1 nodes are available: 1 Insufficient cpu.")
            await settle(1)
            if kind != 3:                        # a short gang (3 of 2 members) stays pending, and is reported
                for name in names:
                    api.update_pod(name, node="n1", ready=kind != 2)   # kind 2 is never Ready: evicted, recreated
            await settle(8 if kind in (2, 3) else 1)
            for name in [p for p in api.pods if p.startswith(f"{g}-")]:
                api.remove_pod(name)
            api.delete_group(g)
            await settle(0.5)

    await short_gangs(1, 25)
    await settle(10)
    assert plugin.recreated >= 10, "the gangs that were never Ready were evicted and their bare pods created again"
    assert {"annotations", "PodsReady", "PodGroupScheduled", "fields"} <= set(api.written)
    assert state() == before, "leading"

    await follow()
    await short_gangs(2, 10)
    await settle(10)
    # (what a follower keeps for the live groups is read again when it leads: less than before, never more)
    assert {k: n for k, n in state().items() if n > before[k]} == {}, \
        "following: the informers feed both, their tasks do not run"
    lead()
    await settle(10)
    assert state() == before, "after following for a while, then leading again"
    await follow()
    assert api.groups.keys() == {CRD + "steady"}
