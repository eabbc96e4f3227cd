"""DynamicResources (plugins/dynamic_resources.py) over the device index (scheduler/state/devices.py).

Each case builds a small cluster (nodes with one slice of GPUs each, classes, claims), runs PreFilter and, when
it passes, Filter on every node, and compares the codes and upstream's words. Then the later points: Reserve
takes devices before anything is written, Unreserve gives them back, PreBind writes the finalizer and then the
allocation with the pod in reservedFor (retrying a conflict), and PostFilter deallocates an unused claim that
pins a pod elsewhere. CEL selectors are tests/unit/dra/test_cel.py's and the integration tests'.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from plugins.dynamic_resources import (
    CANNOT_ALLOCATE, DEALLOCATED, NO_NEW_CLAIMS, NOT_AVAILABLE, STILL_NOT_SCHEDULABLE, DynamicResources,
)
from scheduler.config import load_config
from scheduler.framework import Code, CycleState
from scheduler.framework.clock import FakeClock
from scheduler.framework.handle import Handle
from scheduler.model import parse_node, parse_pod
from scheduler.model.dra import FINALIZER, parse_device_class, parse_resource_claim, parse_resource_slice
from scheduler.state.cache import Cache

UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
DRIVER = "gpu.example.com"
NODES = ("n1", "n2", "n3")


def node_obj(name: str) -> dict[str, Any]:
    cap = {"cpu": "8", "memory": "16Gi", "pods": "110"}
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": cap, "allocatable": cap}}


def slice_obj(node: str, n: int = 2, numa: tuple[int, ...] = ()) -> dict[str, Any]:
    devs = [{"name": f"gpu-{i}", "attributes": {"numa": {"int": numa[i] if numa else i}}} for i in range(n)]
    return {"metadata": {"name": f"{node}-gpus"}, "spec": {
        "driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "devices": devs}}


def claim_obj(name: str, *, count: int = 1, mode: str = "ExactCount", cls: str = "gpu", owner: str = "",
              allocated_on: str = "", reserved: tuple[str, ...] = (), deleting: bool = False,
              constraints: list[dict[str, Any]] | None = None, extra: dict[str, Any] | None = None,
              requests: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls, "allocationMode": mode}
    if mode == "ExactCount":
        exactly["count"] = count
    devices: dict[str, Any] = {"requests": requests or [{"name": "gpu", "exactly": exactly}]}
    if constraints:
        devices["constraints"] = constraints
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "5"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner, "uid": owner,
                                    "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    obj: dict[str, Any] = {"metadata": meta, "spec": {"devices": {**devices, **(extra or {})}}, "status": {}}
    if allocated_on:
        obj["status"]["allocation"] = {
            "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": allocated_on, "device": "gpu-0"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [allocated_on]}]}]}}
        obj["metadata"]["finalizers"] = [FINALIZER]
    if reserved:
        obj["status"]["reservedFor"] = [{"resource": "pods", "name": u, "uid": u} for u in reserved]
    return obj


def pod(*entries: dict[str, Any], uid: str = "p", statuses: dict[str, str] | None = None) -> Any:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if entries:
        spec["resourceClaims"] = list(entries)
    status = {"resourceClaimStatuses": [{"name": k, "resourceClaimName": v} for k, v in statuses.items()]} \
        if statuses else {}
    return parse_pod({"metadata": {"name": uid, "namespace": "ns", "uid": uid}, "spec": spec, "status": status})


def named(claim: str, entry: str = "gpu") -> dict[str, Any]:
    return {"name": entry, "resourceClaimName": claim}


def templated(entry: str = "gpu") -> dict[str, Any]:
    return {"name": entry, "resourceClaimTemplateName": "t"}


class FakeClient:
    """The claims as the API server holds them: JSON patches of the claim and its status, with resourceVersion checks."""

    def __init__(self, claims: dict[str, dict[str, Any]]) -> None:
        self.claims = claims
        self.writes: list[tuple[str, str]] = []
        self.conflicts = 0

    def _key(self, path: str) -> tuple[str, bool]:
        parts = path.split("/")
        return f"{parts[5]}/{parts[7]}", path.endswith("/status")

    async def get(self, path: str, params: Any = None) -> dict[str, Any]:
        return copy.deepcopy(self.claims[self._key(path)[0]])

    async def patch(self, path: str, patch: Any, content_type: str = "application/json-patch+json") -> dict[str, Any]:
        """A JSON patch, conditional on the resourceVersion it sets, as the API server applies it."""
        key, status = self._key(path)
        cur = self.claims[key]
        version = next(op["value"] for op in patch if op["path"] == "/metadata/resourceVersion")
        if self.conflicts or version != cur["metadata"]["resourceVersion"]:
            self.conflicts = max(0, self.conflicts - 1)
            err = RuntimeError("conflict")
            err.status = 409  # type: ignore[attr-defined]
            raise err
        new = copy.deepcopy(cur)
        for op in patch:
            where, _, field = op["path"].rpartition("/")
            target = {"/status": new.setdefault("status", {}), "/metadata": new["metadata"]}[where]
            if field == "resourceVersion":
                continue
            assert where == ("/status" if status else "/metadata"), op
            if op["op"] == "remove":
                del target[field]
            else:
                target[field] = copy.deepcopy(op["value"])
        new["metadata"]["resourceVersion"] = str(int(cur["metadata"]["resourceVersion"]) + 1)
        self.claims[key] = new
        self.writes.append(("status" if status else "update", key))
        return copy.deepcopy(new)


class Env:
    def __init__(self, *claims: dict[str, Any], slices: tuple[dict[str, Any], ...] | None = None,
                 classes: tuple[str, ...] = ("gpu",)) -> None:
        self.cache = Cache()
        for n in NODES:
            self.cache.add_node(parse_node(node_obj(n)))
        devices = self.cache.devices
        for c in classes:
            devices.set_class(parse_device_class({"metadata": {"name": c}, "spec": {}}))
        for s in slices if slices is not None else tuple(slice_obj(n) for n in NODES):
            devices.set_slice(parse_resource_slice(s))
        for c in claims:
            devices.set_claim(parse_resource_claim(c))
        self.client = FakeClient({f"ns/{c['metadata']['name']}": copy.deepcopy(c) for c in claims})
        self.plugin = DynamicResources(None, Handle(self.cache, self.client, clock=FakeClock()))

    def run(self, p: Any, state: CycleState | None = None) -> tuple[Code, str, dict[str, str | None]]:
        state = state if state is not None else CycleState()
        _, st = self.plugin.pre_filter(state, p, self.cache.nodes)
        if not st.is_success() or st.code == Code.SKIP:
            return st.code, st.message(), {}
        rows = self.cache.nodes.rows()
        res = self.plugin.filter(state, p, self.cache.nodes, rows)
        assert res.error is None, res.error
        out: dict[str, str | None] = {}
        for i, n in enumerate(self.cache.nodes.names_of(rows)):
            reasons = [r.reason for r in res.rejections if r.mask[i]]
            assert bool(reasons) == (not res.passed[i])
            out[n] = reasons[0] if reasons else None
        return st.code, st.message(), out


FITS = {"n1": None, "n2": None, "n3": None}
NOPE = {"n1": CANNOT_ALLOCATE, "n2": CANNOT_ALLOCATE, "n3": CANNOT_ALLOCATE}

CASES = [
    pytest.param(Env(), pod(), (Code.SKIP, "", {}), id="a pod without claims is skipped"),
    pytest.param(Env(), pod(templated()), (UU, 'pod "ns/p": ResourceClaim not created yet', {}),
                 id="a template claim the controller has not created yet"),
    pytest.param(Env(), pod(named("x")), (UU, 'resourceclaim.resource.k8s.io "x" not found', {}),
                 id="a named claim that does not exist"),
    pytest.param(Env(claim_obj("x", deleting=True)), pod(named("x")), (UU, 'resourceclaim "x" is being deleted', {}),
                 id="a claim being deleted"),
    pytest.param(Env(claim_obj("p-gpu-1", owner="other")), pod(templated(), statuses={"gpu": "p-gpu-1"}),
                 (UU, "ResourceClaim ns/p-gpu-1 was not created for pod ns/p (pod is not owner)", {}),
                 id="a generated claim of another pod"),
    pytest.param(Env(claim_obj("x", cls="tpu")), pod(named("x")),
                 (UU, "request gpu: device class tpu does not exist", {}), id="a request naming a missing class"),
    pytest.param(Env(claim_obj("x", constraints=[{"distinctAttribute": f"{DRIVER}/numa"}])), pod(named("x")),
                 (UU, 'resourceclaim "x": spec.devices.constraints[0].distinctAttribute: not supported by tandem', {}),
                 id="a field tandem does not evaluate is refused by name"),
    pytest.param(Env(claim_obj("x")), pod(named("x")), (Code.SUCCESS, "", FITS), id="one device fits every node"),
    pytest.param(Env(claim_obj("p-gpu-1", owner="p")), pod(templated(), statuses={"gpu": "p-gpu-1"}),
                 (Code.SUCCESS, "", FITS), id="a generated claim found through resourceClaimStatuses"),
    pytest.param(Env(claim_obj("x", count=3)), pod(named("x")), (Code.SUCCESS, "", NOPE),
                 id="three devices fit no node of two"),
    pytest.param(Env(claim_obj("x", mode="All")), pod(named("x")), (Code.SUCCESS, "", FITS),
                 id="all of a node's devices"),
    pytest.param(Env(claim_obj("x", mode="All"), claim_obj("y", allocated_on="n2", reserved=("q",))),
                 pod(named("x")), (Code.SUCCESS, "", {"n1": None, "n2": CANNOT_ALLOCATE, "n3": None}),
                 id="all of a node's devices, where one is in use elsewhere, fits no more"),
    pytest.param(Env(claim_obj("y", allocated_on="n2", reserved=("q",)), claim_obj("x", count=2)),
                 pod(named("x")), (Code.SUCCESS, "", {"n1": None, "n2": CANNOT_ALLOCATE, "n3": None}),
                 id="a device in use by another claim is not free"),
    pytest.param(Env(claim_obj("x", allocated_on="n2")), pod(named("x")),
                 (Code.SUCCESS, "", {"n1": NOT_AVAILABLE, "n2": None, "n3": NOT_AVAILABLE}),
                 id="an allocated claim pins the pod to its node"),
    pytest.param(Env(claim_obj("x", allocated_on="n2", reserved=tuple(f"u{i}" for i in range(256)))),
                 pod(named("x")), (UU, "resourceclaim in use", {}), id="a claim reserved for 256 pods is in use"),
    pytest.param(Env(claim_obj("x", count=2, constraints=[{"matchAttribute": f"{DRIVER}/numa"}]),
                     slices=(slice_obj("n1", numa=(0, 1)), slice_obj("n2", numa=(1, 1)), slice_obj("n3", 1))),
                 pod(named("x")), (Code.SUCCESS, "", {"n1": CANNOT_ALLOCATE, "n2": None, "n3": CANNOT_ALLOCATE}),
                 id="a matchAttribute constraint: two devices on one NUMA node"),
    pytest.param(Env(claim_obj("x", requests=[{"name": "gpu", "firstAvailable": [
                     {"name": "two", "deviceClassName": "gpu", "count": 2},
                     {"name": "one", "deviceClassName": "gpu", "count": 1}]}]),
                     slices=(slice_obj("n1", 1), slice_obj("n2", 2))),
                 pod(named("x")), (Code.SUCCESS, "", {"n1": None, "n2": None, "n3": CANNOT_ALLOCATE}),
                 id="firstAvailable: either subrequest will do"),
]


@pytest.mark.parametrize("env, p, want", CASES)
def test_pre_filter_and_filter(env: Env, p: Any, want: tuple[Code, str, dict[str, str | None]]) -> None:
    assert env.run(p) == want


def test_a_claim_in_flight_for_another_pod_makes_a_sharer_wait() -> None:
    env = Env(claim_obj("x"))
    state = CycleState()
    env.run(pod(named("x"), uid="a"), state)
    assert env.plugin.reserve(state, pod(named("x"), uid="a"), "n1").is_success()
    assert env.run(pod(named("x"), uid="b")) == (UU, "resource claim ns/x is in the process of being allocated", {})


def test_reserve_takes_the_device_at_once_and_unreserve_gives_it_back() -> None:
    env = Env(claim_obj("x", count=2), claim_obj("y", count=2))
    state = CycleState()
    p = pod(named("x"), uid="a")
    env.run(p, state)
    assert env.plugin.reserve(state, p, "n1").is_success()
    assert env.run(pod(named("y"), uid="b"))[2] == {"n1": CANNOT_ALLOCATE, "n2": None, "n3": None}
    env.plugin.unreserve(state, p, "n1")
    assert env.run(pod(named("y"), uid="b"))[2] == FITS


def test_pre_bind_writes_the_finalizer_then_the_allocation_and_reservation() -> None:
    env = Env(claim_obj("x"))
    state = CycleState()
    p = pod(named("x"), uid="a")
    env.run(p, state)
    assert env.plugin.reserve(state, p, "n2").is_success()
    st = asyncio.run(env.plugin.pre_bind(state, p, "n2"))
    assert st.is_success(), st.message()
    assert env.client.writes == [("update", "ns/x"), ("status", "ns/x")]
    got = env.client.claims["ns/x"]
    assert got["metadata"]["finalizers"] == [FINALIZER]
    assert got["status"]["reservedFor"] == [{"resource": "pods", "name": "a", "uid": "a"}]
    (res,) = got["status"]["allocation"]["devices"]["results"]
    assert (res["driver"], res["pool"], res["request"]) == (DRIVER, "n2", "gpu")
    assert got["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n2"]
    # written and assumed: no longer in flight, still in use
    assert not env.cache.devices.in_flight
    assert (DRIVER, "n2", res["device"]) in env.cache.devices.in_use


def test_pre_bind_retries_a_conflict_with_a_fresh_read() -> None:
    env = Env(claim_obj("x"))
    env.client.conflicts = 1
    state = CycleState()
    p = pod(named("x"), uid="a")
    env.run(p, state)
    env.plugin.reserve(state, p, "n1")
    assert asyncio.run(env.plugin.pre_bind(state, p, "n1")).is_success()
    assert env.client.claims["ns/x"]["status"]["reservedFor"][0]["uid"] == "a"


def test_pre_bind_refuses_a_device_another_scheduler_took_meanwhile() -> None:
    env = Env(claim_obj("x"))
    state = CycleState()
    p = pod(named("x"), uid="a")
    env.run(p, state)
    env.plugin.reserve(state, p, "n1")
    mine = env.cache.devices.in_flight["uid-x"].allocated[0].device
    other = claim_obj("other", allocated_on="n1", reserved=("z",))
    other["status"]["allocation"]["devices"]["results"][0]["device"] = mine[2]
    env.cache.devices.set_claim(parse_resource_claim(other))
    st = asyncio.run(env.plugin.pre_bind(state, p, "n1"))
    assert st.code == Code.ERROR and "already allocated to claim ns/other" in st.message()
    assert env.client.writes == []


def test_a_shared_allocated_claim_only_gets_the_pod_added() -> None:
    env = Env(claim_obj("x", allocated_on="n1", reserved=("a",)))
    state = CycleState()
    p = pod(named("x"), uid="b")
    assert env.run(p, state)[2] == {"n1": None, "n2": NOT_AVAILABLE, "n3": NOT_AVAILABLE}
    env.plugin.reserve(state, p, "n1")
    assert asyncio.run(env.plugin.pre_bind(state, p, "n1")).is_success()
    assert env.client.writes == [("status", "ns/x")]
    assert [r["uid"] for r in env.client.claims["ns/x"]["status"]["reservedFor"]] == ["a", "b"]


@pytest.mark.parametrize("claims, p, want", [
    pytest.param((), pod(), NO_NEW_CLAIMS, id="a pod without claims"),
    pytest.param((claim_obj("x", allocated_on="n2"),), pod(named("x")), DEALLOCATED,
                 id="an allocated claim nobody uses is deallocated"),
    pytest.param((claim_obj("x", allocated_on="n2", reserved=("other",)),), pod(named("x")), STILL_NOT_SCHEDULABLE,
                 id="an allocated claim another pod uses stays"),
])
def test_post_filter(claims: tuple[dict[str, Any], ...], p: Any, want: str) -> None:
    env = Env(*claims)

    async def go() -> str:
        state = CycleState()
        env.run(p, state)
        _, st = env.plugin.post_filter(state, p, None)
        await asyncio.sleep(0)   # let the deallocation write run
        await asyncio.sleep(0)
        return st.message()

    assert asyncio.run(go()) == want
    if want == DEALLOCATED:
        assert "allocation" not in env.client.claims["ns/x"]["status"]


def test_the_default_profile_runs_it_everywhere_upstream_does() -> None:
    p = load_config(None).profiles[0]
    for point in ("preEnqueue", "preFilter", "filter", "postFilter", "reserve", "preBind"):
        assert "DynamicResources" in p.plugins[point], point


def test_gang_members_share_a_claim_a_sibling_is_allocating_and_write_after_it() -> None:
    env = Env(claim_obj("x"))
    labels = {"scheduling.x-k8s.io/pod-group": "g"}

    def member(uid: str) -> Any:
        return parse_pod({"metadata": {"name": uid, "namespace": "ns", "uid": uid, "labels": labels},
                          "spec": {"containers": [{"name": "c", "image": "x"}], "resourceClaims": [named("x")]}})

    a, b = member("a"), member("b")
    sa, sb = CycleState(), CycleState()
    env.run(a, sa)
    assert env.plugin.reserve(sa, a, "n3").is_success()
    # the sibling may use the allocation in flight: it is pinned to the same node, and not refused
    assert env.run(b, sb) == (Code.SUCCESS, "", {"n1": NOT_AVAILABLE, "n2": NOT_AVAILABLE, "n3": None})
    assert env.run(pod(named("x"), uid="stranger")) == (
        UU, "resource claim ns/x is in the process of being allocated", {})
    env.plugin.reserve(sb, b, "n3")

    async def both() -> tuple[Any, Any]:
        tb = asyncio.ensure_future(env.plugin.pre_bind(sb, b, "n3"))   # b first: it waits for a's write
        await asyncio.sleep(0)
        assert not tb.done() and env.client.writes == []
        return await env.plugin.pre_bind(sa, a, "n3"), await tb

    sta, stb = asyncio.run(both())
    assert sta.is_success() and stb.is_success(), (sta.message(), stb.message())
    assert [r["uid"] for r in env.client.claims["ns/x"]["status"]["reservedFor"]] == ["a", "b"]


# ---------------------------------------------------------------------------- property: no device twice

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def workloads(draw: Any) -> tuple[list[int], list[dict[str, Any]], list[str]]:
    per_node = [draw(st.integers(0, 3)) for _ in NODES]
    claims = []
    for i in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["count", "all", "numa", "two"]))
        if kind == "count":
            claims.append(claim_obj(f"c{i}", count=draw(st.integers(1, 3))))
        elif kind == "all":
            claims.append(claim_obj(f"c{i}", mode="All"))
        elif kind == "numa":
            claims.append(claim_obj(f"c{i}", count=2, constraints=[{"matchAttribute": f"{DRIVER}/numa"}]))
        else:
            claims.append(claim_obj(f"c{i}", requests=[
                {"name": "a", "exactly": {"deviceClassName": "gpu", "count": 1}},
                {"name": "b", "exactly": {"deviceClassName": "gpu", "count": 1}}]))
    steps = draw(st.lists(st.sampled_from(["bind", "unreserve"]), min_size=len(claims), max_size=len(claims)))
    return per_node, claims, steps


@settings(max_examples=150, deadline=None)
@given(w=workloads())
def test_filter_agrees_with_the_allocator_and_no_device_is_ever_taken_twice(w: Any) -> None:
    per_node, claims, steps = w
    slices = tuple(slice_obj(n, k, numa=tuple(j % 2 for j in range(k))) for n, k in zip(NODES, per_node) if k)
    env = Env(*claims, slices=slices)
    devices = env.cache.devices
    for c, step in zip(claims, steps):
        name = c["metadata"]["name"]
        p = pod(named(name), uid=f"pod-{name}")
        state = CycleState()
        code, _, verdict = env.run(p, state)
        assert code == Code.SUCCESS
        claim = devices.claim("ns", name)
        assert claim is not None
        for n, why in verdict.items():   # the counts' answer is the search's answer
            assert (why is None) == (devices.allocate([claim], n) is not None), (n, why)
        fits = [n for n, why in verdict.items() if why is None]
        if not fits:
            continue
        assert env.plugin.reserve(state, p, fits[0]).is_success()
        if step == "unreserve":
            env.plugin.unreserve(state, p, fits[0])
        else:
            assert asyncio.run(env.plugin.pre_bind(state, p, fits[0])).is_success()
        held: dict[Any, str] = {}
        for key, raw in env.client.claims.items():
            for r in ((raw.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", ()):
                d = (r["driver"], r["pool"], r["device"])
                assert d not in held, f"{d} allocated to {held.get(d)} and {key}"
                held[d] = key
        assert set(held) == set(devices.in_use), "the index's devices in use are the written allocations"


def test_admin_access_takes_devices_in_use_and_takes_them_from_no_one() -> None:
    admin = claim_obj("admin", mode="All")
    admin["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = True
    env = Env(claim_obj("y", count=2), admin, slices=(slice_obj("n1"),))
    state = CycleState()
    p = pod(named("y"), uid="a")
    env.run(p, state)
    env.plugin.reserve(state, p, "n1")
    assert asyncio.run(env.plugin.pre_bind(state, p, "n1")).is_success()
    state = CycleState()
    q = pod(named("admin"), uid="b")
    assert env.run(q, state)[2] == {"n1": None, "n2": CANNOT_ALLOCATE, "n3": CANNOT_ALLOCATE}
    env.plugin.reserve(state, q, "n1")
    assert asyncio.run(env.plugin.pre_bind(state, q, "n1")).is_success()
    results = env.client.claims["ns/admin"]["status"]["allocation"]["devices"]["results"]
    assert [(r["device"], r.get("adminAccess")) for r in results] == [("gpu-0", True), ("gpu-1", True)]
    assert env.cache.devices.in_use == {(DRIVER, "n1", "gpu-0"): 1, (DRIVER, "n1", "gpu-1"): 1}


@pytest.mark.parametrize("where, expression, want", [
    pytest.param("claim", 'device.attributes["gpu.example.com"].missing == "x"',
                 "claim ns/x: selector #0: CEL runtime error: no such key: missing",
                 id="a claim's selector failing on a device names the claim, as kube-scheduler 1.36"),
    pytest.param("class", 'device.attributes["gpu.example.com"].missing == "x"',
                 "class gpu: selector #0: CEL runtime error: no such key: missing",
                 id="a class's selector failing names the class"),
    pytest.param("claim", "device.driver ==", "claim ns/x: selector #0: CEL compile error: ",
                 id="a selector that does not compile (the API server checks them: a stand-in may not)"),
])
def test_a_failing_selector_is_an_error_naming_its_owner(where: str, expression: str, want: str) -> None:
    sel = [{"cel": {"expression": expression}}]
    c = claim_obj("x")
    if where == "claim":
        c["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = sel
    env = Env(c)
    if where == "class":
        env.cache.devices.set_class(parse_device_class({"metadata": {"name": "gpu"}, "spec": {"selectors": sel}}))
    state = CycleState()
    p = pod(named("x"))
    _, st = env.plugin.pre_filter(state, p, env.cache.nodes)
    assert st.is_success()
    res = env.plugin.filter(state, p, env.cache.nodes, env.cache.nodes.rows())
    assert res.error is not None and res.error.code == Code.ERROR
    assert res.error.message().startswith(want), res.error.message()


def test_selectors_choose_devices_by_attribute() -> None:
    c = claim_obj("x")
    c["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": 'device.attributes["gpu.example.com"].numa == 1'}}]
    env = Env(c, slices=(slice_obj("n1", 2, numa=(0, 0)), slice_obj("n2", 2, numa=(0, 1))))
    assert env.run(pod(named("x")))[2] == {"n1": CANNOT_ALLOCATE, "n2": None, "n3": CANNOT_ALLOCATE}


def test_a_claims_own_event_concerns_the_pods_that_name_it_and_its_owner_only() -> None:
    env = Env()
    devices = env.cache.devices
    devices.track_pod("a", "ns", ("x",))
    devices.track_pod("b", "ns", ("x", "y"))
    devices.track_pod("c", "other", ("x",))
    x = parse_resource_claim(claim_obj("x", owner="d"))
    assert devices.concerned(x) == {"a", "b", "d"}
    devices.track_pod("b", "ns", ())   # placed
    assert devices.concerned(x) == {"a", "d"}
    hint = next(e.hint for e in env.plugin.events_to_register() if e.event.resource == "ResourceClaim")
    assert hint(pod(named("x"), uid="a"), None, x) == 1
    assert hint(pod(named("z"), uid="e"), None, x) == 0, "another pod's new claim frees nothing"
    freed = parse_resource_claim(claim_obj("y"))
    held = parse_resource_claim(claim_obj("y", allocated_on="n1", reserved=("q",)))
    assert hint(pod(named("z"), uid="e"), held, freed) == 1, "a deallocated claim's devices may serve anyone"


def test_a_node_that_comes_after_its_slice_and_goes_moves_only_its_own_counts() -> None:
    env = Env(claim_obj("x", count=2), slices=tuple(slice_obj(n) for n in NODES) + (slice_obj("n4"),))
    assert env.run(pod(named("x")))[2] == FITS   # n4's slice has no node yet: not a row
    env.cache.add_node(parse_node(node_obj("n4")))
    env.cache.devices.node_changed("n4")
    assert env.run(pod(named("x")))[2] == {**FITS, "n4": None}
    env.cache.remove_node("n1")
    env.cache.devices.node_changed("n1")
    env.cache.add_node(parse_node(node_obj("n5")))   # may take n1's freed row: no devices come with it
    env.cache.devices.node_changed("n5")
    assert env.run(pod(named("x")))[2] == {"n2": None, "n3": None, "n4": None, "n5": CANNOT_ALLOCATE}


def test_an_informer_update_older_than_what_pre_bind_wrote_frees_nothing() -> None:
    """The finalizer's update arrives after PreBind assumed the allocation: the claim still holds its device
    (and the event handlers do not offer a freed device to every waiting pod)."""
    env = Env(claim_obj("x"))
    state = CycleState()
    p = pod(named("x"), uid="a")
    env.run(p, state)
    env.plugin.reserve(state, p, "n1")
    assert asyncio.run(env.plugin.pre_bind(state, p, "n1")).is_success()
    devices = env.cache.devices
    held = dict(devices.in_use)
    older = copy.deepcopy(env.client.claims["ns/x"])
    older["metadata"]["resourceVersion"] = "6"   # the finalizer's version: no allocation yet
    older["status"] = {}
    devices.set_claim(parse_resource_claim(older))
    assert devices.claim("ns", "x").allocation is not None
    assert devices.in_use == held and held
