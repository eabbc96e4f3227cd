"""Dynamic Resource Allocation acceptance scenarios, written once, run against any scheduler.

Each scenario is an async function taking a :class:`Driver`: HTTP create, get, list and delete on
one API server, the ``schedulerName`` its pods ask for, and a way to wait for a condition with a
bound. It plays the DRA driver (one ResourceSlice per node, pool named after the node) and the
kubelet (a bound pod is deleted with ``gracePeriodSeconds: 0``), creates pods with ResourceClaims,
and asserts what kube-scheduler 1.36.2 does with them: where they are placed, what the claims'
``status.allocation`` and ``status.reservedFor`` say, and the exact words of a pod that waits. The
words and shapes were taken from kube-scheduler 1.36.2 on a real kube-apiserver 1.36.2 with the
resourceclaim controller (docs/dra-upstream-behaviour.md says how, and quotes them).

Two runners use these: tests/integration/test_dra_kube_scheduler.py (kube-scheduler itself, so the
expectations here stay true) and tests/integration/test_dra.py (tandem, on the simulated cluster
and on the real server). The server must serve resource.k8s.io/v1 and, for
:func:`a_native_gang_with_devices_binds_whole_or_not_at_all`, scheduling.k8s.io/v1alpha2, and run a
resourceclaim controller (claims from templates, ``status.resourceClaimStatuses``, release of a
deleted pod's claims) and a garbage collector (which deletes the claims made for a deleted pod).

Every scenario works in a namespace of its own (``dra-<tag>``) on nodes of its own
(``<tag>-node-<i>``), and leaves no pod, node or ResourceSlice behind, so that the next one's
scheduler counts only its nodes in ``0/<n> nodes are available``; before its first pod it waits
until a probe pod's message counts exactly its nodes. DeviceClasses are cluster-wide and shared.
Waiting is always for a condition, with a bound, and there is no fixed window: that a pod held before
scheduling (PreEnqueue) was never tried is checked behind a barrier pod created after it.
This module holds no pytest tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Protocol, TypeVar

import aiohttp

T = TypeVar("T")

DRIVER = "gpu.example.com"
CLASS = "gpu"                                  # every device of DRIVER
CLASS_B = "gpu-model-b"                        # DRIVER's devices whose model is "b"
CLASS_CONFIGURED = "gpu-configured"            # CLASS with an opaque config of its own
RESOURCE = "/apis/resource.k8s.io/v1"
V1A2 = "/apis/scheduling.k8s.io/v1alpha2"
FINALIZER = "resource.kubernetes.io/delete-protection"
PAUSE = "registry.k8s.io/pause:3.10"
MODEL_B = f'device.attributes["{DRIVER}"].model == "b"'
CLASS_CONFIG = {"driver": DRIVER, "parameters": {"sharing": "none"}}
WAIT = 10.0                                    # seconds: the bound of every wait here (kube-scheduler needs < 1)

# a gang member that fits waits for its siblings (scheduling.k8s.io/v1alpha2, GangScheduling)
GANG_WAITING = ("pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, one or more "
                "plugins asked to wait and no plugin rejected pod")


def not_helpful(n: int) -> str:
    """DefaultPreemption's part when every node was rejected UnschedulableAndUnresolvable."""
    return f"preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."


def cannot_allocate(n: int) -> str:
    """A pod with claims that DynamicResources' Filter rejects on all ``n`` nodes. Its PostFilter, which runs
    before DefaultPreemption, found no allocated-but-unreserved claim to deallocate: ``still not schedulable``."""
    return f"0/{n} nodes are available: {n} cannot allocate all claims. still not schedulable, {not_helpful(n)}"


def refused_at_pre_filter(n: int, reason: str) -> str:
    """DynamicResources' PreFilter refused the pod: no node count before the reason, and PostFilter, which found
    no claims recorded by that PreFilter, says ``no new claims to deallocate``."""
    return f"0/{n} nodes are available: {reason}. no new claims to deallocate, {not_helpful(n)}"


# ---------------------------------------------------------------------------- the driver


class APIError(Exception):
    """The server answered ``code`` (>= 300) to ``method path``; ``body`` is its Status."""

    def __init__(self, method: str, path: str, code: int, body: Any) -> None:
        self.code, self.body = code, body
        message = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{method} {path}: HTTP {code}: {message}")

    @property
    def message(self) -> str:
        return self.body.get("message", "") if isinstance(self.body, dict) else str(self.body)


class Driver(Protocol):
    """What a scenario needs of a server and a scheduler."""

    scheduler: str   # the pods' spec.schedulerName

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to the collection ``path``; the created object. APIError on refusal."""

    async def get(self, path: str) -> dict[str, Any] | None:
        """The object at ``path``, None when it does not exist."""

    async def list(self, path: str) -> list[dict[str, Any]]:
        """The items of the collection ``path``."""

    async def delete(self, path: str, body: dict[str, Any] | None = None) -> None:
        """DELETE ``path`` (with DeleteOptions ``body``); gone already is fine."""

    async def wait_for(self, cond: Callable[[], Awaitable[T]], what: str, timeout: float = WAIT) -> T:
        """Poll ``cond`` until it returns something truthy, and return that; AssertionError naming ``what``
        after ``timeout`` seconds."""


@dataclass
class HTTPDriver:
    """A :class:`Driver` over an aiohttp session that already carries the server's credentials."""

    session: aiohttp.ClientSession
    url: str
    scheduler: str
    interval: float = 0.02

    async def _call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        # compact, as kubectl and client-go send JSON: kube-apiserver keeps an opaque config's ``parameters`` as
        # the bytes it got, so a claim created with spaces there cannot be changed by any JSON write after
        # (``spec: field is immutable``; README, Devices (DRA))
        data = json.dumps(body, separators=(",", ":")).encode() if body is not None else None
        async with self.session.request(method, self.url + path, data=data,
                                        headers={"Content-Type": "application/json"}) as r:
            return r.status, await r.json(content_type=None)

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        code, out = await self._call("POST", path, body)
        if code >= 300:
            raise APIError("POST", path, code, out)
        return out

    async def get(self, path: str) -> dict[str, Any] | None:
        code, out = await self._call("GET", path)
        if code == 404:
            return None
        if code >= 300:
            raise APIError("GET", path, code, out)
        return out

    async def list(self, path: str) -> list[dict[str, Any]]:
        out = await self.get(path)
        return list((out or {}).get("items") or [])

    async def delete(self, path: str, body: dict[str, Any] | None = None) -> None:
        code, out = await self._call("DELETE", path, body)
        if code >= 300 and code != 404:
            raise APIError("DELETE", path, code, out)

    async def wait_for(self, cond: Callable[[], Awaitable[T]], what: str, timeout: float = WAIT) -> T:
        deadline = time.monotonic() + timeout
        while True:
            got = await cond()
            if got:
                return got
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
            await asyncio.sleep(self.interval)


async def until_equal(d: Driver, read: Callable[[], Awaitable[T]], expected: T, what: str) -> None:
    """Wait until ``read()`` equals ``expected``; on timeout fail with the last value read (pytest shows the diff)."""
    last: list[T] = []

    async def cond() -> bool:
        last[:] = [await read()]
        return last[0] == expected

    try:
        await d.wait_for(cond, what)
    except AssertionError:
        assert last and last[0] == expected, what
        raise


# ---------------------------------------------------------------------------- objects


def device(name: str, model: str = "a", numa: int = 0, **extra: Any) -> dict[str, Any]:
    return {"name": name, "attributes": {"model": {"string": model}, "numa": {"int": numa}},
            "capacity": {"memory": {"value": "40Gi"}}, **extra}


def devices(count: int) -> list[dict[str, Any]]:
    return [device(f"gpu-{j}") for j in range(count)]


def exactly(name: str = "gpu", device_class: str = CLASS, **more: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": device_class, **more}}


def claim_spec(*requests: dict[str, Any], **devices_more: Any) -> dict[str, Any]:
    """A ResourceClaimSpec of ``requests`` (one ``exactly(...)`` by default)."""
    return {"devices": {"requests": list(requests) or [exactly()], **devices_more}}


def node_selector(node: str) -> dict[str, Any]:
    """The nodeSelector of an allocation of node-local devices: the node, by name."""
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def template(name: str) -> dict[str, str]:
    return {"resourceClaimTemplateName": name}


def claim(name: str) -> dict[str, str]:
    return {"resourceClaimName": name}


# ---------------------------------------------------------------------------- a scenario's world


_probes = itertools.count()


@dataclass
class Scene:
    """One scenario's namespace and nodes on a server, with what it reads and writes there."""

    d: Driver
    tag: str
    ns: str = ""
    nodes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)   # node -> its devices

    def __post_init__(self) -> None:
        self.ns = self.ns or f"dra-{self.tag}"

    # --- writing

    async def add_node(self, name: str, devs: list[dict[str, Any]]) -> None:
        """A Ready node and its ResourceSlice (pool ``name``, one slice), as a DRA driver publishes it."""
        capacity = {"cpu": "4", "memory": "8Gi", "pods": "110"}
        self.nodes[name] = devs
        await self.d.create("/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": capacity, "allocatable": capacity,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}})
        await self.d.create(f"{RESOURCE}/resourceslices", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{name}-{DRIVER}"},
            "spec": {"nodeName": name, "driver": DRIVER,
                     "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}, "devices": devs}})

    async def create_template(self, name: str, spec: dict[str, Any]) -> None:
        await self.d.create(f"{RESOURCE}/namespaces/{self.ns}/resourceclaimtemplates", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": spec}})

    async def create_claim(self, name: str, spec: dict[str, Any], ns: str = "") -> None:
        await self.d.create(f"{RESOURCE}/namespaces/{ns or self.ns}/resourceclaims", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name}, "spec": spec})

    async def create_pod(self, name: str, claims: dict[str, dict[str, str]], **spec: Any) -> None:
        """A pause pod whose one container uses ``claims`` (pod claim name -> template(...) or claim(...))."""
        await self.d.create(f"/api/v1/namespaces/{self.ns}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": self.d.scheduler,
                     "resourceClaims": [{"name": k, **ref} for k, ref in claims.items()],
                     "containers": [{"name": "c", "image": PAUSE,
                                     "resources": {"claims": [{"name": k} for k in claims]}}],
                     **spec}})

    async def delete_pod(self, name: str) -> None:
        """As the kubelet would once the pod stopped: at once."""
        await self.d.delete(f"/api/v1/namespaces/{self.ns}/pods/{name}", {"gracePeriodSeconds": 0})

    # --- reading

    async def pod(self, name: str) -> dict[str, Any]:
        pod = await self.d.get(f"/api/v1/namespaces/{self.ns}/pods/{name}")
        assert pod is not None, f"pod {self.ns}/{name} is gone"
        return pod

    async def claim(self, name: str) -> dict[str, Any] | None:
        return await self.d.get(f"{RESOURCE}/namespaces/{self.ns}/resourceclaims/{name}")

    async def claims(self) -> list[dict[str, Any]]:
        return await self.d.list(f"{RESOURCE}/namespaces/{self.ns}/resourceclaims")

    async def claim_of(self, pod: str, pod_claim: str = "gpu") -> dict[str, Any]:
        """The ResourceClaim behind the pod's claim ``pod_claim``: named in its spec, or (from a template) in its
        ``status.resourceClaimStatuses``, where the resourceclaim controller writes it."""
        p = await self.pod(pod)
        ref = next(c for c in p["spec"]["resourceClaims"] if c["name"] == pod_claim)
        if "resourceClaimName" in ref:
            name = ref["resourceClaimName"]
        else:
            statuses = {s["name"]: s.get("resourceClaimName") for s in p["status"].get("resourceClaimStatuses") or []}
            assert statuses.get(pod_claim), f"{pod} has no resourceClaimStatuses for {pod_claim}: {p['status']}"
            name = statuses[pod_claim]
        found = await self.claim(name)
        assert found is not None, f"{pod}'s claim {name} does not exist"
        return found

    async def node_of(self, name: str) -> str:
        return (await self.pod(name))["spec"].get("nodeName") or ""

    async def bound(self, *names: str) -> dict[str, str]:
        """Wait until every pod of ``names`` is bound; pod -> node."""
        where: dict[str, str] = {}

        async def all_bound() -> bool:
            for n in names:
                where[n] = await self.node_of(n)
            return all(where.values())

        try:
            await self.d.wait_for(all_bound, f"{', '.join(names)} to be bound")
        except AssertionError as e:
            said = {n: (await self.condition(n)).get("message", "") for n in names if not where.get(n)}
            raise AssertionError(f"{e}; those not bound say {said}") from None
        return where

    async def condition(self, name: str) -> dict[str, Any]:
        for c in (await self.pod(name)).get("status", {}).get("conditions") or ():
            if c.get("type") == "PodScheduled":
                return c
        return {}

    async def waiting(self, name: str, reason: str = "Unschedulable") -> str:
        """Wait until the pod's PodScheduled condition is False with ``reason``; its message."""
        async def said() -> str:
            c = await self.condition(name)
            return c.get("message", "") if (c.get("status"), c.get("reason")) == ("False", reason) else ""

        try:
            return await self.d.wait_for(said, f"{name} to be {reason}")
        except AssertionError as e:
            pod = await self.pod(name)
            raise AssertionError(f"{e}; it is on {pod['spec'].get('nodeName')!r}, its PodScheduled condition is "
                                 f"{await self.condition(name)}") from None

    async def events(self, name: str, reason: str) -> list[dict[str, Any]]:
        return [e for e in await self.d.list(f"/apis/events.k8s.io/v1/namespaces/{self.ns}/events")
                if (e.get("regarding") or {}).get("name") == name and e.get("reason") == reason]

    async def notes(self, name: str, reason: str = "FailedScheduling") -> set[str]:
        """Wait for at least one event ``reason`` about the pod; the set of their notes."""
        async def some() -> set[str]:
            return {e.get("note", "") for e in await self.events(name, reason)}

        return await self.d.wait_for(some, f"a {reason} event about {name}")

    async def says(self, name: str, message: str, reason: str = "Unschedulable") -> None:
        """The pod waits saying exactly ``message``, in its condition and in every FailedScheduling event."""
        assert await self.waiting(name, reason) == message
        assert await self.notes(name) == {message}

    async def settle_nodes(self) -> None:
        """Wait until the scheduler counts exactly this scene's nodes: a probe pod that matches no node is
        created (again, under a new name, while its message counts other nodes) and deleted."""
        n = len(self.nodes)

        async def counted() -> bool:
            probe = f"probe-{next(_probes)}"
            await self.d.create(f"/api/v1/namespaces/{self.ns}/pods", {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": probe},
                "spec": {"schedulerName": self.d.scheduler, "nodeSelector": {"dra.example.com/probe": "nowhere"},
                         "containers": [{"name": "c", "image": PAUSE}]}})
            try:
                message = await self.waiting(probe)
            finally:
                await self.delete_pod(probe)
            return re.match(rf"0/{n} nodes are available: {n} node\(s\) didn't match", message) is not None

        await self.d.wait_for(counted, f"the scheduler to count the {n} nodes of {self.tag}")

    # --- checks

    async def assert_allocated(self, pod: str, node: str, count: int = 1, pod_claim: str = "gpu",
                               users: list[str] | None = None) -> list[dict[str, Any]]:
        """The pod's claim is allocated ``count`` devices of ``node`` (pool = the node), for that node, reserved
        for ``users`` (the pod by default) in that order, and protected by the scheduler's finalizer; its
        results."""
        c = await self.claim_of(pod, pod_claim)
        status = c.get("status") or {}
        allocation = status.get("allocation") or {}
        results = (allocation.get("devices") or {}).get("results") or []
        assert len(results) == count, f"{c['metadata']['name']}: {status}"
        assert {(r["driver"], r["pool"]) for r in results} == {(DRIVER, node)}, results
        assert {r["device"] for r in results} <= {d["name"] for d in self.nodes[node]}, results
        assert len({r["device"] for r in results}) == count, f"a device twice in one claim: {results}"
        assert allocation.get("nodeSelector") == node_selector(node), allocation
        assert allocation.get("allocationTimestamp"), allocation
        users = users or [pod]
        uids = {u: (await self.pod(u))["metadata"]["uid"] for u in users}
        assert status.get("reservedFor") == [{"resource": "pods", "name": u, "uid": uids[u]} for u in users], status
        assert c["metadata"].get("finalizers") == [FINALIZER], c["metadata"]
        return results

    async def assert_generated_for(self, pod: str, pod_claim: str = "gpu") -> dict[str, Any]:
        """The pod's claim was made from its template by the resourceclaim controller: owned by the pod,
        named ``<pod>-<claim>-<random>``, annotated with the pod's claim name. The claim."""
        c = await self.claim_of(pod, pod_claim)
        meta = c["metadata"]
        uid = (await self.pod(pod))["metadata"]["uid"]
        assert meta["name"].startswith(f"{pod}-{pod_claim}-"), meta["name"]
        assert meta.get("annotations", {}).get("resource.kubernetes.io/pod-claim-name") == pod_claim, meta
        assert [(o["kind"], o["name"], o["uid"], o.get("controller")) for o in meta.get("ownerReferences") or []] \
            == [("Pod", pod, uid, True)], meta
        return c

    async def assert_unallocated(self, pod: str, pod_claim: str = "gpu") -> None:
        c = await self.claim_of(pod, pod_claim)
        status = c.get("status") or {}
        assert not status.get("allocation") and not status.get("reservedFor"), f"{c['metadata']['name']}: {status}"
        assert FINALIZER not in (c["metadata"].get("finalizers") or []), c["metadata"]

    # --- leaving nothing behind

    async def clean_up(self) -> None:
        """Delete the namespace's pods at once, then this scene's ResourceSlices and nodes, and wait until they
        are gone. Claims stay (namespaced, and their finalizer is the resourceclaim controller's business)."""
        pods = f"/api/v1/namespaces/{self.ns}/pods"

        async def no_pods() -> bool:
            items = await self.d.list(pods)
            for p in items:
                await self.d.delete(f"{pods}/{p['metadata']['name']}", {"gracePeriodSeconds": 0})
            return not items

        await self.d.wait_for(no_pods, f"the pods of {self.ns} to be deleted")
        for node in self.nodes:
            await self.d.delete(f"{RESOURCE}/resourceslices/{node}-{DRIVER}")
            await self.d.delete(f"/api/v1/nodes/{node}")

        async def nodes_gone() -> bool:
            return all([await self.d.get(f"/api/v1/nodes/{n}") is None for n in self.nodes])

        await self.d.wait_for(nodes_gone, f"the nodes of {self.tag} to be deleted")


async def ensure(d: Driver, path: str, body: dict[str, Any]) -> None:
    """Create a cluster-wide object that an earlier scenario (or run) may have made already."""
    refused: APIError | None = None
    try:
        await d.create(path, body)
    except APIError as e:   # 409 when it is there already
        refused = e
    assert await d.get(f"{path}/{body['metadata']['name']}") is not None, f"not made, not there: {refused}"


async def ensure_device_class(d: Driver, name: str, *expressions: str, config: list[dict[str, Any]] | None = None
                              ) -> None:
    selectors = [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}] + [{"cel": {"expression": e}}
                                                                             for e in expressions]
    spec: dict[str, Any] = {"selectors": selectors}
    if config:
        spec["config"] = config
    await ensure(d, f"{RESOURCE}/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec})


@contextlib.asynccontextmanager
async def scene(d: Driver, tag: str, nodes: dict[str, list[dict[str, Any]]],
                ns_labels: dict[str, str] | None = None) -> AsyncIterator[Scene]:
    """A namespace ``dra-<tag>``, the device classes, and ``nodes`` (name -> devices) with their slices, counted
    by the scheduler, for the block; its pods, slices and nodes are removed after it, whatever happened."""
    s = Scene(d, tag)
    await ensure(d, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": s.ns, "labels": ns_labels or {}}})
    await ensure_device_class(d, CLASS)
    await ensure_device_class(d, CLASS_B, MODEL_B)
    await ensure_device_class(d, CLASS_CONFIGURED, config=[{"opaque": CLASS_CONFIG}])
    try:
        for name, devs in nodes.items():
            await s.add_node(name, devs)
        await s.settle_nodes()
        yield s
    finally:
        await s.clean_up()


def no_device_twice(results: list[dict[str, Any]]) -> None:
    seen = Counter((r["driver"], r["pool"], r["device"]) for r in results)
    assert all(n == 1 for n in seen.values()), f"a device allocated twice: {seen}"


# ---------------------------------------------------------------------------- a. one device each, until none is left


async def seven_pods_for_six_devices(d: Driver) -> None:
    """Six pods with a one-device template claim on three nodes of two devices each all bind, two per node,
    each claim allocated one device of its pod's node, no device twice; the seventh waits, its claim
    created and unallocated."""
    nodes = {f"a-node-{i}": devices(2) for i in range(3)}
    async with scene(d, "a", nodes) as s:
        await s.create_template("one-gpu", claim_spec())
        six = [f"p{i}" for i in range(6)]
        for name in six:
            await s.create_pod(name, {"gpu": template("one-gpu")})
        where = await s.bound(*six)
        assert Counter(where.values()) == {n: 2 for n in nodes}, where
        results = []
        for name in six:
            await s.assert_generated_for(name)
            results += await s.assert_allocated(name, where[name])
            assert (await s.condition(name)).get("status") == "True"
        assert {r["request"] for r in results} == {"gpu"}
        assert all(set(r) == {"request", "driver", "pool", "device"} for r in results), results
        no_device_twice(results)

        await s.create_pod("p6", {"gpu": template("one-gpu")})
        await s.says("p6", cannot_allocate(3))
        await s.assert_generated_for("p6")
        await s.assert_unallocated("p6")


# ---------------------------------------------------------------------------- b. CEL selectors


async def cel_selectors_bind_only_where_the_model_is_free(d: Driver) -> None:
    """A claim whose request selects model "b" (in the claim, or through a DeviceClass that does) gets a "b"
    device; once both "b" devices are taken, the next of each kind waits."""
    b_devices = {("b-node-1", "gpu-1"), ("b-node-2", "gpu-0")}
    nodes = {"b-node-0": [device("gpu-0", "a"), device("gpu-1", "a")],
             "b-node-1": [device("gpu-0", "a"), device("gpu-1", "b")],
             "b-node-2": [device("gpu-0", "b"), device("gpu-1", "a")]}
    async with scene(d, "b", nodes) as s:
        await s.create_template("by-selector", claim_spec(exactly(selectors=[{"cel": {"expression": MODEL_B}}])))
        await s.create_template("by-class", claim_spec(exactly(device_class=CLASS_B)))
        await s.create_pod("by-class-0", {"gpu": template("by-class")})
        await s.create_pod("by-selector-0", {"gpu": template("by-selector")})
        where = await s.bound("by-class-0", "by-selector-0")
        got = set()
        for name in where:
            (r,) = await s.assert_allocated(name, where[name])
            got.add((where[name], r["device"]))
        assert got == b_devices

        await s.create_pod("by-selector-1", {"gpu": template("by-selector")})
        await s.create_pod("by-class-1", {"gpu": template("by-class")})
        await s.says("by-selector-1", cannot_allocate(3))
        await s.says("by-class-1", cannot_allocate(3))


# ---------------------------------------------------------------------------- c. count and All


async def count_and_all_take_devices_of_one_node(d: Driver) -> None:
    """``count: 2`` takes two devices of one node, with the class's and the claim's config in the allocation
    (class first); ``count: 4`` fits nowhere; ``allocationMode: All`` takes every device of a node none of
    whose devices is taken, until no such node is left."""
    nodes = {"c-node-0": devices(2), "c-node-1": devices(3), "c-node-2": devices(1)}
    async with scene(d, "c", nodes) as s:
        claim_config = {"driver": DRIVER, "parameters": {"mode": "fast"}}
        await s.create_claim("pair", claim_spec(exactly(device_class=CLASS_CONFIGURED, count=2),
                                                config=[{"requests": ["gpu"], "opaque": claim_config}]))
        await s.create_pod("pair", {"gpu": claim("pair")})
        pair_node = (await s.bound("pair"))["pair"]
        assert pair_node in ("c-node-0", "c-node-1")
        results = await s.assert_allocated("pair", pair_node, count=2)
        allocation = (await s.claim_of("pair"))["status"]["allocation"]
        assert allocation["devices"]["config"] == [
            {"source": "FromClass", "requests": ["gpu"], "opaque": CLASS_CONFIG},
            {"source": "FromClaim", "requests": ["gpu"], "opaque": claim_config}]

        for i in range(3):
            await s.create_claim(f"all-{i}", claim_spec(exactly(allocationMode="All")))
        await s.create_pod("all-0", {"gpu": claim("all-0")})
        await s.bound("all-0")
        await s.create_pod("all-1", {"gpu": claim("all-1")})
        where = await s.bound("all-0", "all-1")
        assert sorted([pair_node, *where.values()]) == sorted(nodes), f"pair on {pair_node}, All on {where}"
        for name, node in where.items():
            results += await s.assert_allocated(name, node, count=len(nodes[node]))
        no_device_twice(results)

        await s.create_claim("four", claim_spec(exactly(count=4)))
        await s.create_pod("four", {"gpu": claim("four")})
        await s.create_pod("all-2", {"gpu": claim("all-2")})
        await s.says("four", cannot_allocate(3))
        await s.says("all-2", cannot_allocate(3))


# ---------------------------------------------------------------------------- d. matchAttribute


async def match_attribute_keeps_two_requests_on_one_numa_node(d: Driver) -> None:
    """Two requests under ``matchAttribute: <driver>/numa`` get two devices of one NUMA node: only d-node-1 has
    two, both numa 1; the next claim waits."""
    nodes = {"d-node-0": [device("gpu-0", numa=0), device("gpu-1", numa=1)],
             "d-node-1": [device("gpu-0", numa=0), device("gpu-1", numa=1), device("gpu-2", numa=1)],
             "d-node-2": [device("gpu-0", numa=0), device("gpu-1", numa=1)]}
    async with scene(d, "d", nodes) as s:
        await s.create_template("pair", claim_spec(exactly("a"), exactly("b"),
                                                   constraints=[{"matchAttribute": f"{DRIVER}/numa"}]))
        await s.create_pod("pair-0", {"gpu": template("pair")})
        assert (await s.bound("pair-0")) == {"pair-0": "d-node-1"}
        results = await s.assert_allocated("pair-0", "d-node-1", count=2)
        assert sorted((r["request"], r["device"]) for r in results) in (
            [("a", "gpu-1"), ("b", "gpu-2")], [("a", "gpu-2"), ("b", "gpu-1")]), results

        await s.create_pod("pair-1", {"gpu": template("pair")})
        await s.says("pair-1", cannot_allocate(3))


# ---------------------------------------------------------------------------- e. one claim, two pods


async def a_shared_claim_puts_its_pods_on_one_node_and_is_released_by_the_last(d: Driver) -> None:
    """Two pods naming one ResourceClaim bind to one node and are both in its reservedFor. The second may be
    tried while the first one's allocation is in flight; then it says so, and binds once that is written.
    A pod naming a claim gets no resourceClaimStatuses. When one leaves, it leaves reservedFor; when the last
    leaves, the claim is deallocated (and kept: it was not made for a pod)."""
    async with scene(d, "e", {f"e-node-{i}": devices(1) for i in range(3)}) as s:
        await s.create_claim("shared", claim_spec())
        await s.create_pod("x", {"gpu": claim("shared")})
        await s.create_pod("y", {"gpu": claim("shared")})
        where = await s.bound("x", "y")
        assert where["x"] == where["y"], where
        c = await s.claim_of("x")
        order = [r["name"] for r in c["status"]["reservedFor"]]
        assert sorted(order) == ["x", "y"], c["status"]
        await s.assert_allocated("x", where["x"], users=order)
        in_flight = refused_at_pre_filter(3, f"resource claim {s.ns}/shared is in the process of being allocated")
        for name in ("x", "y"):
            assert "resourceClaimStatuses" not in (await s.pod(name))["status"]
            assert {e.get("note") for e in await s.events(name, "FailedScheduling")} <= {in_flight}

        async def reserved_for() -> list[str]:
            status = (await s.claim_of("y")).get("status") or {}
            return [r["name"] for r in status.get("reservedFor") or []]

        await s.delete_pod("x")
        await until_equal(d, reserved_for, ["y"], "x to leave the claim's reservedFor")
        await s.assert_allocated("y", where["y"], users=["y"])
        await s.delete_pod("y")

        async def released() -> dict[str, Any] | None:
            c = await s.claim("shared")
            assert c is not None, "the shared claim was deleted with its last user"
            return c if not c.get("status") and not c["metadata"].get("finalizers") else None

        await d.wait_for(released, "the shared claim to be deallocated")


# ---------------------------------------------------------------------------- f. a pod leaves, its device is reused


async def deleting_a_bound_pod_gives_its_device_to_a_waiting_one(d: Driver) -> None:
    """One device: ``first`` binds, ``second`` waits. When ``first`` is deleted, the resourceclaim controller
    releases its claim (the garbage collector then deletes it, where one runs: kube-controller-manager's; the
    simulated cluster runs none), and ``second`` binds with the device, having said nothing new."""
    async with scene(d, "f", {"f-node-0": devices(1)}) as s:
        await s.create_template("one-gpu", claim_spec())
        await s.create_pod("first", {"gpu": template("one-gpu")})
        await s.bound("first")
        first_claim = (await s.claim_of("first"))["metadata"]["name"]
        await s.create_pod("second", {"gpu": template("one-gpu")})
        await s.says("second", cannot_allocate(1))

        await s.delete_pod("first")
        assert (await s.bound("second")) == {"second": "f-node-0"}
        (r,) = await s.assert_allocated("second", "f-node-0")
        assert r["device"] == "gpu-0"
        await d.wait_for(lambda: _released(s, first_claim), f"the generated claim {first_claim} to be released")
        assert await s.notes("second") == {cannot_allocate(1)}


async def _released(s: Scene, claim_name: str) -> bool:
    """Deleted, or left without allocation, reservation and finalizer (for a garbage collector to delete)."""
    c = await s.claim(claim_name)
    return c is None or (not (c.get("status") or {}).get("allocation") and not (c.get("status") or {}).get(
        "reservedFor") and not c["metadata"].get("finalizers"))


# ---------------------------------------------------------------------------- g. a native gang with devices


async def a_native_gang_with_devices_binds_whole_or_not_at_all(d: Driver) -> None:
    """A scheduling.k8s.io/v1alpha2 gang of 3 whose members need a device each, with 2 devices in the cluster:
    nothing binds and no claim stays allocated; two members wait for the gang, one cannot get a device, and
    the PodGroup says unschedulable. A third node with a device: all three bind, one device each."""
    async with scene(d, "g", {f"g-node-{i}": devices(1) for i in range(2)}) as s:
        await s.create_template("one-gpu", claim_spec())
        await d.create(f"{V1A2}/namespaces/{s.ns}/podgroups", {
            "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": "three"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}})
        gang = [f"three-{i}" for i in range(3)]
        for name in gang:
            await s.create_pod(name, {"gpu": template("one-gpu")}, schedulingGroup={"podGroupName": "three"})

        async def messages() -> list[str]:
            return sorted([(await s.condition(n)).get("message", "") for n in gang])

        await until_equal(d, messages, sorted([cannot_allocate(2), GANG_WAITING, GANG_WAITING]),
                          "two members waiting for the gang and one without a device")

        async def group_condition() -> dict[str, Any]:
            group = await d.get(f"{V1A2}/namespaces/{s.ns}/podgroups/three") or {}
            conds = [c for c in (group.get("status") or {}).get("conditions") or [] if c["type"] == "PodGroupScheduled"]
            return {k: conds[0].get(k) for k in ("status", "reason", "message")} if conds else {}

        await until_equal(d, group_condition, {
            "status": "False", "reason": "Unschedulable",
            "message": "0/1 placements are available, first placement status: pod group is unschedulable"},
            "the PodGroup to say it is unschedulable")
        for name in gang:
            assert not await s.node_of(name), f"{name} bound without its gang"
            await s.assert_unallocated(name)

        await s.add_node("g-node-2", devices(1))
        where = await s.bound(*gang)
        assert sorted(where.values()) == sorted(s.nodes), where
        for name in gang:
            await s.assert_allocated(name, where[name])
        await until_equal(d, group_condition, {"status": "True", "reason": "Scheduled", "message": ""},
                          "the PodGroup to say it is scheduled")


# ---------------------------------------------------------------------------- h. more of what upstream says


async def a_missing_device_class_is_named_until_it_exists(d: Driver) -> None:
    """A request naming a DeviceClass that does not exist is refused at PreFilter, naming it; the class's
    creation requeues the pod, which binds."""
    missing = "dra-test-missing-class"
    async with scene(d, "h-class", {"h-class-node-0": devices(1), "h-class-node-1": devices(1)}) as s:
        try:
            await s.create_claim("no-class", claim_spec(exactly(device_class=missing)))
            await s.create_pod("no-class", {"gpu": claim("no-class")})
            await s.says("no-class", refused_at_pre_filter(2, f"request gpu: device class {missing} does not exist"))
            await ensure_device_class(d, missing)
            where = await s.bound("no-class")
            await s.assert_allocated("no-class", where["no-class"])
        finally:
            await d.delete(f"{RESOURCE}/deviceclasses/{missing}")


async def barrier(s: Scene, name: str) -> None:
    """A pod that fits nowhere, created now: once it says so, every pod created before it that was going to be
    tried has been (the queue is FIFO among equal priorities)."""
    await s.d.create(f"/api/v1/namespaces/{s.ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"schedulerName": s.d.scheduler, "nodeSelector": {"dra.example.com/probe": "nowhere"},
                 "containers": [{"name": "c", "image": PAUSE}]}})
    await s.waiting(name)


async def a_pod_whose_claim_or_template_is_missing_is_not_tried_until_it_exists(d: Driver) -> None:
    """A pod naming a missing ResourceClaim, or a missing ResourceClaimTemplate, never reaches a scheduling
    cycle (DynamicResources' PreEnqueue): no PodScheduled condition, no FailedScheduling. For the template the
    resourceclaim controller says why it made no claim. Each binds once what it names exists."""
    async with scene(d, "h-missing", {"h-missing-node-0": devices(2)}) as s:
        await s.create_pod("no-claim", {"gpu": claim("later")})
        await s.create_pod("no-template", {"gpu": template("later")})
        await barrier(s, "barrier")
        for name in ("no-claim", "no-template"):
            assert await s.condition(name) == {}, f"{name} was tried"
            assert await s.events(name, "FailedScheduling") == []
            assert not await s.node_of(name)
        said = await d.wait_for(lambda: s.events("no-template", "FailedResourceClaimCreation"),
                                "the resourceclaim controller to say why no-template has no claim")
        assert {(e["type"], e.get("reportingController"), e.get("note")) for e in said} == {(
            "Warning", "resource_claim",
            'PodResourceClaim gpu: resource claim template "later": '
            'resourceclaimtemplate.resource.k8s.io "later" not found')}

        await s.create_claim("later", claim_spec())
        await s.bound("no-claim")
        await s.create_template("later", claim_spec())
        where = await s.bound("no-claim", "no-template")
        await s.assert_allocated("no-claim", where["no-claim"])
        await s.assert_generated_for("no-template")
        await s.assert_allocated("no-template", where["no-template"])


async def a_claim_allocated_elsewhere_keeps_a_pod_off_its_selected_node(d: Driver) -> None:
    """A claim allocated on node-0 for one pod: a second pod of that claim whose nodeSelector names node-1
    waits (node-0 fails NodeAffinity, node-1 DynamicResources); a third without a selector joins on node-0."""
    n0, n1 = "h-pinned-node-0", "h-pinned-node-1"
    async with scene(d, "h-pinned", {n0: devices(1), n1: devices(1)}) as s:
        await s.create_claim("pinned", claim_spec())
        await s.create_pod("on-0", {"gpu": claim("pinned")}, nodeSelector={"kubernetes.io/hostname": n0})
        await s.bound("on-0")
        await s.create_pod("on-1", {"gpu": claim("pinned")}, nodeSelector={"kubernetes.io/hostname": n1})
        await s.says("on-1", "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
                             "1 resourceclaim not available on the node. still not schedulable, " + not_helpful(2))
        await s.create_pod("free", {"gpu": claim("pinned")})
        assert (await s.bound("free")) == {"free": n0}
        await s.assert_allocated("on-0", n0, users=["on-0", "free"])


async def a_tainted_device_is_given_only_to_a_request_that_tolerates_it(d: Driver) -> None:
    """DRADeviceTaints is on: the server keeps a device's taint (adding timeAdded); a request without a
    toleration cannot have the device, one with it can, and its result carries the toleration."""
    taint = {"key": "example.com/broken", "value": "true", "effect": "NoSchedule"}
    toleration = {"key": "example.com/broken", "operator": "Exists", "effect": "NoSchedule"}
    node = "h-taint-node-0"
    async with scene(d, "h-taint", {node: [device("gpu-0", taints=[taint])]}) as s:
        stored = await d.get(f"{RESOURCE}/resourceslices/{node}-{DRIVER}")
        (kept,) = stored["spec"]["devices"][0]["taints"]
        assert {k: kept[k] for k in taint} == taint and kept.get("timeAdded"), kept

        await s.create_claim("plain", claim_spec())
        await s.create_pod("plain", {"gpu": claim("plain")})
        await s.says("plain", cannot_allocate(1))
        await s.create_claim("tolerant", claim_spec(exactly(tolerations=[toleration])))
        await s.create_pod("tolerant", {"gpu": claim("tolerant")})
        await s.bound("tolerant")
        (r,) = await s.assert_allocated("tolerant", node)
        assert r == {"request": "gpu", "driver": DRIVER, "pool": node, "device": "gpu-0", "tolerations": [toleration]}


async def first_available_takes_the_first_subrequest_that_fits(d: Driver) -> None:
    """``firstAvailable``: the first subrequest that can be satisfied wins, in list order, and the result names
    it as ``<request>/<subrequest>``."""
    node = "h-first-node-0"
    async with scene(d, "h-first", {node: [device("gpu-0", "a"), device("gpu-1", "b")]}) as s:
        spec = claim_spec({"name": "gpu", "firstAvailable": [
            {"name": "big", "deviceClassName": CLASS, "selectors": [{"cel": {"expression": MODEL_B}}]},
            {"name": "small", "deviceClassName": CLASS}]})
        for i in range(3):
            await s.create_claim(f"fa-{i}", spec)
        await s.create_pod("fa-0", {"gpu": claim("fa-0")})
        await s.bound("fa-0")
        await s.create_pod("fa-1", {"gpu": claim("fa-1")})
        await s.bound("fa-1")
        got = [(r["request"], r["device"]) for n in ("fa-0", "fa-1") for r in await s.assert_allocated(n, node)]
        assert got == [("gpu/big", "gpu-1"), ("gpu/small", "gpu-0")]
        await s.create_pod("fa-2", {"gpu": claim("fa-2")})
        await s.says("fa-2", cannot_allocate(1))


async def admin_access_needs_the_namespace_label_and_ignores_other_allocations(d: Driver) -> None:
    """adminAccess is refused at creation outside a namespace labelled for it; inside one, an All request with
    admin access gets devices other claims hold (each result marked), and does not keep them from others."""
    node = "h-admin-node-0"
    async with scene(d, "h-admin", {node: devices(2)}, ns_labels={"resource.kubernetes.io/admin-access": "true"}) as s:
        await ensure(d, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": "dra-h-admin-unlabelled"}})
        try:
            await s.create_claim("admin", claim_spec(exactly(adminAccess=True)), ns="dra-h-admin-unlabelled")
        except APIError as e:
            assert (e.code, e.message) == (422, (
                'ResourceClaim.resource.k8s.io "admin" is invalid: spec.devices.requests[0].adminAccess: Forbidden: '
                "admin access to devices requires the `resource.kubernetes.io/admin-access: true` label on the "
                "containing namespace")), e
        else:
            raise AssertionError("a claim with adminAccess was created in a namespace without the label")

        await s.create_template("one-gpu", claim_spec())
        for name in ("r0", "r1"):
            await s.create_pod(name, {"gpu": template("one-gpu")})
        await s.bound("r0", "r1")
        await s.create_claim("admin", claim_spec(exactly(adminAccess=True, allocationMode="All")))
        await s.create_pod("admin", {"gpu": claim("admin")})
        await s.bound("admin")
        results = await s.assert_allocated("admin", node, count=2)
        assert all(r.get("adminAccess") is True for r in results), results

        await s.delete_pod("r0")
        await s.create_pod("r2", {"gpu": template("one-gpu")})
        await s.bound("r2")
        await s.assert_allocated("r2", node)


async def a_cel_runtime_error_is_a_scheduler_error(d: Driver) -> None:
    """A selector that reads a missing attribute fails at run time: Filter returns an error, so the pod's
    condition is SchedulerError with the bare error (no node count, no PostFilter, no preemption)."""
    async with scene(d, "h-cel", {"h-cel-node-0": devices(1)}) as s:
        expression = f'device.attributes["{DRIVER}"].missing == "x"'
        await s.create_claim("broken", claim_spec(exactly(selectors=[{"cel": {"expression": expression}}])))
        await s.create_pod("broken", {"gpu": claim("broken")})
        await s.says("broken", f'running "DynamicResources" filter plugin: claim {s.ns}/broken: selector #0: '
                               "CEL runtime error: no such key: missing", reason="SchedulerError")


async def a_higher_priority_pod_does_not_preempt_for_a_device(d: Driver) -> None:
    """kube-scheduler 1.36 does not preempt for devices: DynamicResources' Filter rejects a node whose devices
    are taken as UnschedulableAndUnresolvable, so a higher-priority pod waits and its lower-priority holder
    stays bound."""
    for name, value in (("dra-test-low", 10), ("dra-test-high", 1000)):
        await ensure(d, "/apis/scheduling.k8s.io/v1/priorityclasses", {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value})
    async with scene(d, "h-priority", {"h-priority-node-0": devices(1)}) as s:
        await s.create_template("one-gpu", claim_spec())
        await s.create_pod("holder", {"gpu": template("one-gpu")}, priorityClassName="dra-test-low")
        await s.bound("holder")
        await s.create_pod("important", {"gpu": template("one-gpu")}, priorityClassName="dra-test-high")
        await s.says("important", cannot_allocate(1))
        holder = await s.pod("holder")
        assert not holder["metadata"].get("deletionTimestamp"), "the holder was preempted"
        assert not (await s.pod("important"))["status"].get("nominatedNodeName")
        await s.assert_allocated("holder", "h-priority-node-0")
        await s.assert_unallocated("important")


SCENARIOS: dict[str, Callable[[Driver], Awaitable[None]]] = {
    "a-six-of-seven": seven_pods_for_six_devices,
    "b-cel-selectors": cel_selectors_bind_only_where_the_model_is_free,
    "c-count-and-all": count_and_all_take_devices_of_one_node,
    "d-match-attribute": match_attribute_keeps_two_requests_on_one_numa_node,
    "e-shared-claim": a_shared_claim_puts_its_pods_on_one_node_and_is_released_by_the_last,
    "f-freed-device": deleting_a_bound_pod_gives_its_device_to_a_waiting_one,
    "g-native-gang": a_native_gang_with_devices_binds_whole_or_not_at_all,
    "h-missing-class": a_missing_device_class_is_named_until_it_exists,
    "h-missing-claim-or-template": a_pod_whose_claim_or_template_is_missing_is_not_tried_until_it_exists,
    "h-claim-allocated-elsewhere": a_claim_allocated_elsewhere_keeps_a_pod_off_its_selected_node,
    "h-device-taint": a_tainted_device_is_given_only_to_a_request_that_tolerates_it,
    "h-first-available": first_available_takes_the_first_subrequest_that_fits,
    "h-admin-access": admin_access_needs_the_namespace_label_and_ignores_other_allocations,
    "h-cel-runtime-error": a_cel_runtime_error_is_a_scheduler_error,
    "h-no-preemption-for-devices": a_higher_priority_pod_does_not_preempt_for_a_device,
}
