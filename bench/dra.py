"""Dynamic Resource Allocation in tandem-bench: what a DRA driver and upstream's DRA ops do to a cluster with no kubelet.

scheduler_perf's DRA workloads (``test/integration/scheduler_perf/dra/``) run with no kubelet and no
driver: the benchmark publishes the devices and, to start from a cluster in use, allocates claims itself.
This module does the same over HTTP, for any server that serves ``resource.k8s.io/v1``:

* **createResourceDriver** (:func:`create_resource_driver`): one ResourceSlice per node of the run whose name
  matches the op's glob, as the driver's kubelet plugin publishes it, built as upstream's ``resourceSlice()``
  builds it (``scheduler_perf/dra.go``): named after the node, one pool of the node's name (generation 1, one
  slice), ``maxClaimsPerNode`` devices ``instance-<i>`` with attributes model ``A100``, family ``GPU``,
  driverVersion ``1.2.3`` and ``dra.example.com/numa`` (the index; with ``devicesPerNumaNode: k``, index // k)
  and capacity memory 1Gi. Two deliberate differences: upstream also gives every device binding conditions
  (read only by its binding-conditions test case, and stripped where that gate is off), which a 1.36 server
  keeps (DRADeviceBindingConditions is beta, on) and on which kube-scheduler would wait for a DeviceAttached
  condition no one sets, so they are left out; and upstream matches the glob against every node of its fresh
  cluster, where here only the nodes this run created count, so that an earlier run's nodes on a long-lived
  cluster get no slices.
* **allocResourceClaims** (:func:`alloc_resource_claims`): every unallocated claim of the namespace gets an
  allocation on a node picked at random, written to its status with no reservedFor and no finalizer, as
  upstream's op writes it: devices in use by something the scheduler does not schedule. The decisions are
  made one claim at a time against what is allocated so far (as upstream's), then written concurrently. The
  allocator here covers what benchmark claims ask for, not all of DRA: requests ``exactly`` in ExactCount
  mode (``count``, default 1) without selectors of their own, DeviceClasses whose selectors are all
  ``device.driver == "<name>"``, and ``matchAttribute`` constraints; anything else fails the op, naming it.
* **checkResourceClaims** (:func:`check_resource_claims`, tandem-bench's own): every bound pod that has
  resource claims has each one allocated with devices of its own node and reserved for it, and no device is
  in two allocations. A scheduler that bound pods without allocating their claims would otherwise post the
  best numbers of all; the op fails the run instead, naming pods and claims.

Nothing here starts a process or imports the scheduler's DRA code: the benchmark must judge the allocation
it measures, not share it.
"""

from __future__ import annotations

import asyncio
import fnmatch
import random
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from bench.workload import AllocResourceClaims, CheckResourceClaims, CreateResourceDriver
from scheduler.apiclient import APIError, NotFound

if TYPE_CHECKING:
    from bench.runner import _Run

API = "/apis/resource.k8s.io/v1"
NUMA_ATTRIBUTE = "dra.example.com/numa"
LIST_PAGE = 5000
CHECK_RETRY = 0.5              # seconds between checks while the claims' writes settle
DEFAULT_CHECK_TIMEOUT = 10.0

DeviceID = tuple[str, str, str]   # (driver, pool, device), as upstream's structured.DeviceID


# ---------------------------------------------------------------------------- the driver's slices


def resource_slice(driver: str, node: str, devices: int, devices_per_numa_node: int = 0) -> dict[str, Any]:
    """The ResourceSlice upstream's ``resourceSlice(driver, node, capacity)`` builds, in resource.k8s.io/v1
    (see the module docstring for what differs). ``devices_per_numa_node`` 0 is upstream's numa attribute
    (the device's index)."""
    per_numa = devices_per_numa_node or 1
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": node},
        "spec": {
            "driver": driver, "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{
                "name": f"instance-{i}",
                "attributes": {"model": {"string": "A100"}, "family": {"string": "GPU"},
                               "driverVersion": {"version": "1.2.3"}, NUMA_ATTRIBUTE: {"int": i // per_numa}},
                "capacity": {"memory": {"value": "1Gi"}},
            } for i in range(devices)],
        },
    }


async def create_resource_driver(run: "_Run", op: CreateResourceDriver) -> None:
    nodes = sorted(n for n in run.nodes if fnmatch.fnmatchcase(n, op.nodes))
    if not nodes:
        raise _fail(run, op, f"no node this run created matches {op.nodes!r}: the driver would publish no devices")
    done = 0
    run.progress(op.label, 0, len(nodes))

    async def one(node: str) -> None:
        nonlocal done
        try:
            await run._create(f"{API}/resourceslices", resource_slice(op.driver_name, node,
                                                                      op.max_claims_per_node,
                                                                      op.devices_per_numa_node))
        except NotFound as exc:
            raise _fail(run, op, f"the server does not serve resource.k8s.io/v1 ResourceSlices: {exc}") from exc
        done += 1
        run.progress(op.label, done, len(nodes))

    await run._each(op, nodes, one)


# ---------------------------------------------------------------------------- a small allocator


@dataclass(frozen=True, slots=True)
class Device:
    driver: str
    pool: str
    name: str
    node: str
    attributes: tuple[tuple[str, Any], ...]   # the slice's attribute map, as sorted items

    @property
    def id(self) -> DeviceID:
        return (self.driver, self.pool, self.name)

    def attribute(self, qualified: str) -> Any:
        """The value of attribute ``qualified`` (``domain/id``), or None. An unqualified attribute is in the
        driver's domain, as upstream reads it."""
        attrs = dict(self.attributes)
        domain, _, ident = qualified.rpartition("/")
        value = attrs.get(qualified)
        if value is None and domain == self.driver:
            value = attrs.get(ident)
        return None if value is None else tuple(sorted(value.items()))


@dataclass(frozen=True, slots=True)
class Request:
    name: str
    driver: str | None            # from the DeviceClass's selectors; None: any device
    count: int


@dataclass(frozen=True, slots=True)
class Constraint:
    attribute: str
    requests: tuple[str, ...]     # empty: every request of the claim


class Unsupported(ValueError):
    """A claim or class that this allocator cannot read; the message says what."""


_DRIVER_SELECTOR = re.compile(r'^\s*device\.driver\s*==\s*"([^"\\]+)"\s*$')


def devices_of(slices: Iterable[Mapping[str, Any]]) -> dict[str, list[Device]]:
    """Node -> the devices of its node-local slices, in slice and device order."""
    out: dict[str, list[Device]] = {}
    for s in slices:
        spec = s.get("spec") or {}
        node = spec.get("nodeName")
        if not node:
            continue    # a slice for many nodes: not what a per-node driver publishes
        for d in spec.get("devices") or ():
            out.setdefault(node, []).append(Device(spec["driver"], (spec.get("pool") or {}).get("name", ""),
                                                   d["name"], node, tuple(sorted((d.get("attributes") or {}).items()))))
    return out


def class_driver(device_class: Mapping[str, Any]) -> str | None:
    """The driver a DeviceClass's selectors ask for (None: any device). Unsupported for any other selector."""
    drivers = set()
    for sel in (device_class.get("spec") or {}).get("selectors") or ():
        m = _DRIVER_SELECTOR.match(((sel.get("cel") or {}).get("expression")) or "")
        if not m:
            raise Unsupported(f"DeviceClass {device_class['metadata']['name']}: selector {sel!r} is not "
                              f'device.driver == "<name>"')
        drivers.add(m.group(1))
    if len(drivers) > 1:
        raise Unsupported(f"DeviceClass {device_class['metadata']['name']}: selectors ask for two drivers")
    return next(iter(drivers), None)


def claim_requests(claim: Mapping[str, Any],
                   classes: Mapping[str, str | None]) -> tuple[list[Request], list[Constraint]]:
    """What a claim asks for, as :class:`Request` and :class:`Constraint`; Unsupported for what this allocator
    does not do (firstAvailable, selectors in the claim, allocationMode All, unknown constraints)."""
    where = f"ResourceClaim {claim['metadata'].get('namespace')}/{claim['metadata']['name']}"
    devices = (claim.get("spec") or {}).get("devices") or {}
    requests = []
    for r in devices.get("requests") or ():
        exactly = r.get("exactly")
        if not isinstance(exactly, dict):
            raise Unsupported(f"{where}: request {r.get('name')} is not 'exactly' (firstAvailable is not supported)")
        if exactly.get("selectors") or exactly.get("allocationMode", "ExactCount") != "ExactCount" \
                or exactly.get("adminAccess") or exactly.get("tolerations") or exactly.get("capacity"):
            raise Unsupported(f"{where}: request {r['name']}: only deviceClassName and count are supported")
        cls = exactly.get("deviceClassName")
        if cls not in classes:
            raise Unsupported(f"{where}: request {r['name']}: no DeviceClass {cls!r}")
        requests.append(Request(r["name"], classes[cls], int(exactly.get("count") or 1)))
    constraints = []
    for c in devices.get("constraints") or ():
        if set(c) - {"requests", "matchAttribute"} or not c.get("matchAttribute"):
            raise Unsupported(f"{where}: constraint {c!r}: only matchAttribute is supported")
        constraints.append(Constraint(c["matchAttribute"], tuple(c.get("requests") or ())))
    if devices.get("config"):
        raise Unsupported(f"{where}: config is not supported (an allocation would have to carry it)")
    return requests, constraints


def allocate_on(free: list[Device], requests: list[Request],
                constraints: list[Constraint]) -> list[tuple[str, Device]] | None:
    """(request name, device) for every device the claim needs, all from ``free`` (one node's free devices), or
    None when they do not fit. Depth-first in device order, as upstream's allocator searches: the devices of one
    request in increasing order (no permutation tried twice), backtracking when a constraint fails."""
    slots = [r for r in requests for _ in range(r.count)]
    chosen: list[tuple[str, Device]] = []
    used: set[DeviceID] = set()

    def fits(request: str, device: Device) -> bool:
        for c in constraints:
            if c.requests and request not in c.requests:
                continue
            mine = device.attribute(c.attribute)
            if mine is None:
                return False
            if any(other.attribute(c.attribute) != mine for r, other in chosen if not c.requests or r in c.requests):
                return False
        return True

    def place(i: int, start: int) -> bool:
        if i == len(slots):
            return True
        req = slots[i]
        for j in range(start, len(free)):
            d = free[j]
            if d.id in used or (req.driver is not None and d.driver != req.driver) or not fits(req.name, d):
                continue
            used.add(d.id)
            chosen.append((req.name, d))
            same = i + 1 < len(slots) and slots[i + 1] is req
            if place(i + 1, j + 1 if same else 0):
                return True
            used.discard(d.id)
            chosen.pop()
        return False

    return chosen if place(0, 0) else None


def allocation(node: str, picked: list[tuple[str, Device]]) -> dict[str, Any]:
    """A claim's ``status.allocation`` as kube-scheduler writes one for node-local devices."""
    return {"devices": {"results": [{"request": r, "driver": d.driver, "pool": d.pool, "device": d.name}
                                    for r, d in picked]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}


def allocated_devices(claims: Iterable[Mapping[str, Any]]) -> dict[DeviceID, str]:
    """Device -> the claim ("ns/name") whose allocation holds it."""
    out: dict[DeviceID, str] = {}
    for c in claims:
        alloc = (c.get("status") or {}).get("allocation") or {}
        for r in (alloc.get("devices") or {}).get("results") or ():
            out[(r["driver"], r["pool"], r["device"])] = f"{c['metadata']['namespace']}/{c['metadata']['name']}"
    return out


async def _list_all(run: "_Run", path: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cont = None
    while True:
        params: dict[str, Any] = {"limit": LIST_PAGE}
        if cont:
            params["continue"] = cont
        page = await run.client.list(path, params)
        items += page.get("items") or []
        cont = (page.get("metadata") or {}).get("continue")
        if not cont:
            return items


def _fail(run: "_Run", op: Any, msg: str) -> Exception:
    from bench.runner import RunError
    return RunError(f"{run.workload.full_name} {op.label}: {msg}")


async def alloc_resource_claims(run: "_Run", op: AllocResourceClaims) -> None:
    ns_path = f"{API}/namespaces/{op.namespace}/resourceclaims" if op.namespace else f"{API}/resourceclaims"
    try:
        claims = await _list_all(run, ns_path)
        every = claims if not op.namespace else await _list_all(run, f"{API}/resourceclaims")
        by_node = devices_of(await _list_all(run, f"{API}/resourceslices"))
        classes = {c["metadata"]["name"]: class_driver(c) for c in await _list_all(run, f"{API}/deviceclasses")}
    except NotFound as exc:
        raise _fail(run, op, f"the server does not serve resource.k8s.io/v1: {exc}") from exc
    except Unsupported as exc:
        raise _fail(run, op, str(exc)) from None
    used = set(allocated_devices(every))
    todo = [c for c in claims if not (c.get("status") or {}).get("allocation")]
    nodes = sorted(by_node)
    rng = random.Random()
    writes: list[dict[str, Any]] = []
    for i, claim in enumerate(todo):
        try:
            requests, constraints = claim_requests(claim, classes)
        except Unsupported as exc:
            raise _fail(run, op, str(exc)) from None
        rng.shuffle(nodes)     # a node at random for each claim, as upstream
        for node in nodes:
            picked = allocate_on([d for d in by_node[node] if d.id not in used], requests, constraints)
            if picked is not None:
                used.update(d.id for _, d in picked)
                writes.append({**claim, "status": {**(claim.get("status") or {}), "allocation": allocation(node, picked)}})
                break
        else:
            raise _fail(run, op, f"could not allocate claim {i} of {len(todo)} "
                                 f"({claim['metadata']['namespace']}/{claim['metadata']['name']}): no node has the "
                                 f"devices left (as upstream's 'Could not allocate claim')")
    done = 0
    run.progress(op.label, 0, len(writes))

    async def write(claim: dict[str, Any]) -> None:
        nonlocal done
        meta = claim["metadata"]
        await run.client.update(f"{API}/namespaces/{meta['namespace']}/resourceclaims/{meta['name']}/status", claim)
        done += 1
        run.progress(op.label, done, len(writes))

    await run._each(op, writes, write)


# ---------------------------------------------------------------------------- the check


def claim_problems(pods: Iterable[Mapping[str, Any]], claims: Iterable[Mapping[str, Any]],
                   device_nodes: Mapping[DeviceID, str]) -> tuple[int, int, list[str]]:
    """(pods checked, claims checked, problems) for the bound pods among ``pods`` that have resource claims.

    A pod's claim is the one ``resourceClaimName`` names, or the one its ``status.resourceClaimStatuses``
    names (a claim from a template). Each must exist, have an allocation whose devices are on slices of the
    pod's node (``device_nodes``) and whose nodeSelector, if any, names that node, and list the pod in
    ``reservedFor``. No device may be in two allocations.
    """
    claims = list(claims)
    by_name = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in claims}
    problems: list[str] = []
    holders: dict[DeviceID, str] = {}
    for c in claims:
        alloc = (c.get("status") or {}).get("allocation") or {}
        for r in (alloc.get("devices") or {}).get("results") or ():
            dev = (r["driver"], r["pool"], r["device"])
            me = f"{c['metadata']['namespace']}/{c['metadata']['name']}"
            if dev in holders:
                problems.append(f"device {'/'.join(dev)} is allocated to claims {holders[dev]} and {me}")
            holders.setdefault(dev, me)
    n_pods = n_claims = 0
    for pod in pods:
        spec, meta = pod.get("spec") or {}, pod["metadata"]
        node = spec.get("nodeName")
        if not node or not spec.get("resourceClaims") or meta.get("deletionTimestamp"):
            continue
        n_pods += 1
        who = f"pod {meta['namespace']}/{meta['name']} on {node}"
        generated = {s["name"]: s.get("resourceClaimName")
                     for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()}
        for ref in spec["resourceClaims"]:
            name = ref.get("resourceClaimName") or generated.get(ref["name"])
            if not name:
                problems.append(f"{who}: claim {ref['name']!r} has no ResourceClaim (no resourceClaimStatuses)")
                continue
            n_claims += 1
            claim = by_name.get((meta["namespace"], name))
            if claim is None:
                problems.append(f"{who}: ResourceClaim {name} does not exist")
                continue
            status = claim.get("status") or {}
            alloc = status.get("allocation")
            if not alloc:
                problems.append(f"{who}: ResourceClaim {name} is not allocated")
                continue
            if not any(r.get("resource") == "pods" and r.get("uid") == meta.get("uid")
                       for r in status.get("reservedFor") or ()):
                problems.append(f"{who}: ResourceClaim {name} is not reserved for the pod")
            for r in (alloc.get("devices") or {}).get("results") or ():
                where = device_nodes.get((r["driver"], r["pool"], r["device"]))
                if where != node:
                    problems.append(f"{who}: ResourceClaim {name} holds device {r['pool']}/{r['device']}, "
                                    f"which is {'on ' + where if where else 'in no slice'}")
            for term in (alloc.get("nodeSelector") or {}).get("nodeSelectorTerms") or ():
                for f in term.get("matchFields") or ():
                    if f.get("key") == "metadata.name" and f.get("operator") == "In" and node not in f["values"]:
                        problems.append(f"{who}: ResourceClaim {name} is allocated for nodes {f['values']}")
    return n_pods, n_claims, problems


async def check_resource_claims(run: "_Run", op: CheckResourceClaims) -> None:
    namespaces = op.namespaces or sorted({p.namespace for p in run.pods.pods.values() if p.counted})
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (op.timeout if op.timeout is not None else DEFAULT_CHECK_TIMEOUT)
    while True:
        try:
            slices = await _list_all(run, f"{API}/resourceslices")
            claims = await _list_all(run, f"{API}/resourceclaims")
            pods = [p for ns in namespaces for p in await _list_all(run, f"/api/v1/namespaces/{ns}/pods")]
        except APIError as exc:
            raise _fail(run, op, f"listing pods, claims and slices: {exc}") from exc
        device_nodes = {d.id: node for node, ds in devices_of(slices).items() for d in ds}
        n_pods, n_claims, problems = claim_problems(pods, claims, device_nodes)
        if not problems:   # (none bound is no problem: a steady state may end with its batch in flight)
            run.progress(op.label, n_pods, n_pods)
            return
        if loop.time() >= deadline:
            shown = "; ".join(problems[:5])
            raise _fail(run, op, f"{len(problems)} problems with the claims of {n_pods} bound pods "
                                 f"({n_claims} claims), e.g.: {shown}")
        await asyncio.sleep(CHECK_RETRY)
