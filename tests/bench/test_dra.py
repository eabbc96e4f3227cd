"""bench/dra.py: the driver's slices as upstream builds them, the small allocator, and the claim check; the ops
on the simulated cluster (which serves resource.k8s.io/v1; in this process, without its controllers)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bench.baseline import BASELINE_SCHEDULER_NAME, BaselineBinder
from bench.dra import (NUMA_ATTRIBUTE, Constraint, Request, Unsupported, allocate_on, allocation, allocated_devices,
                       claim_problems, claim_requests, class_driver, devices_of, resource_slice)
from bench.record import Recorder
from bench.runner import RunError, run_workload
from bench.workload import find_workload

DRIVER = "test-driver.cdi.k8s.io"


# ---------------------------------------------------------------------------- slices


def test_a_slice_is_upstreams_resource_slice_for_the_node_without_binding_conditions():
    s = resource_slice(DRIVER, "scheduler-perf-dra-x-3", 10)
    assert s["apiVersion"] == "resource.k8s.io/v1" and s["kind"] == "ResourceSlice"
    assert s["metadata"] == {"name": "scheduler-perf-dra-x-3"}
    spec = s["spec"]
    assert (spec["driver"], spec["nodeName"]) == (DRIVER, "scheduler-perf-dra-x-3")
    assert spec["pool"] == {"name": "scheduler-perf-dra-x-3", "generation": 1, "resourceSliceCount": 1}
    assert [d["name"] for d in spec["devices"]] == [f"instance-{i}" for i in range(10)]
    assert spec["devices"][7] == {
        "name": "instance-7",
        "attributes": {"model": {"string": "A100"}, "family": {"string": "GPU"}, "driverVersion": {"version": "1.2.3"},
                       NUMA_ATTRIBUTE: {"int": 7}},
        "capacity": {"memory": {"value": "1Gi"}},
    }


@pytest.mark.parametrize("per_numa,numa", [(0, list(range(9))), (1, list(range(9))), (3, [0, 0, 0, 1, 1, 1, 2, 2, 2])],
                         ids=["upstream's: a NUMA node per device", "one per NUMA node", "three per NUMA node"])
def test_devices_per_numa_node_groups_the_numa_attribute(per_numa, numa):
    devices = resource_slice(DRIVER, "n", 9, per_numa)["spec"]["devices"]
    assert [d["attributes"][NUMA_ATTRIBUTE]["int"] for d in devices] == numa


# ---------------------------------------------------------------------------- the allocator


def node_devices(node: str = "n", count: int = 9, per_numa: int = 3, driver: str = DRIVER):
    return devices_of([resource_slice(driver, node, count, per_numa)])[node]


def names(picked):
    return [(r, d.name) for r, d in picked]


TWO_ON_ONE_NUMA = ([Request("req-0", DRIVER, 2)], [Constraint(NUMA_ATTRIBUTE, ("req-0",))])


@pytest.mark.parametrize("taken,want", [
    ((), [("req-0", "instance-0"), ("req-0", "instance-1")]),
    (("instance-0", "instance-1"), [("req-0", "instance-3"), ("req-0", "instance-4")]),
    (("instance-0", "instance-1", "instance-3", "instance-4"), [("req-0", "instance-6"), ("req-0", "instance-7")]),
    (("instance-0", "instance-1", "instance-3", "instance-4", "instance-6", "instance-7"), None),
], ids=["the first pair of the first NUMA node", "past a pair that straddles two NUMA nodes",
        "the third NUMA node", "none: one device left on each NUMA node"])
def test_two_devices_of_one_numa_node_backtrack_past_pairs_that_straddle(taken, want):
    free = [d for d in node_devices() if d.name not in taken]
    picked = allocate_on(free, *TWO_ON_ONE_NUMA)
    assert (names(picked) if picked is not None else None) == want


def test_a_constraint_without_requests_holds_across_every_request_and_a_class_picks_its_driver():
    free = node_devices(count=4, per_numa=2) + node_devices(count=2, per_numa=1, driver="other.example.com")
    requests = [Request("a", DRIVER, 1), Request("b", DRIVER, 1), Request("c", "other.example.com", 1)]
    picked = allocate_on(free, requests[:2], [Constraint(NUMA_ATTRIBUTE, ())])
    assert names(picked) == [("a", "instance-0"), ("b", "instance-1")]
    picked = allocate_on(free, requests, [])
    assert [(r, d.driver, d.name) for r, d in picked] == [("a", DRIVER, "instance-0"), ("b", DRIVER, "instance-1"),
                                                          ("c", "other.example.com", "instance-0")]
    assert allocate_on(free, [Request("a", DRIVER, 5)], []) is None


def test_an_allocation_names_its_devices_and_selects_the_node_by_name():
    picked = allocate_on(node_devices("node-1"), [Request("req-0", DRIVER, 1)], [])
    assert allocation("node-1", picked) == {
        "devices": {"results": [{"request": "req-0", "driver": DRIVER, "pool": "node-1", "device": "instance-0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}}


def device_class(*expressions: str) -> dict[str, Any]:
    return {"metadata": {"name": "c"}, "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]}}


def test_a_class_selecting_a_driver_is_read_and_any_other_selector_is_refused_by_name():
    assert class_driver(device_class(f'device.driver == "{DRIVER}"')) == DRIVER
    assert class_driver(device_class()) is None
    with pytest.raises(Unsupported, match='DeviceClass c: selector .* is not device.driver == "<name>"'):
        class_driver(device_class('device.attributes["x"].model == "a"'))


def claim(devices: dict[str, Any], name: str = "c-0") -> dict[str, Any]:
    return {"metadata": {"namespace": "init", "name": name}, "spec": {"devices": devices}}


@pytest.mark.parametrize("devices,message", [
    ({"requests": [{"name": "r", "firstAvailable": [{"name": "a", "deviceClassName": "test-class"}]}]},
     "request r is not 'exactly'"),
    ({"requests": [{"name": "r", "exactly": {"deviceClassName": "test-class",
                                             "selectors": [{"cel": {"expression": "true"}}]}}]},
     "request r: only deviceClassName and count are supported"),
    ({"requests": [{"name": "r", "exactly": {"deviceClassName": "test-class", "allocationMode": "All"}}]},
     "request r: only deviceClassName and count are supported"),
    ({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}, "request r: no DeviceClass 'gpu'"),
    ({"requests": [{"name": "r", "exactly": {"deviceClassName": "test-class"}}],
      "constraints": [{"distinctAttribute": "x"}]}, "only matchAttribute is supported"),
    ({"requests": [{"name": "r", "exactly": {"deviceClassName": "test-class"}}],
      "config": [{"opaque": {"driver": DRIVER, "parameters": {}}}]}, "config is not supported"),
], ids=["firstAvailable", "a selector in the claim", "allocationMode All", "an unknown class",
        "a distinctAttribute constraint", "config"])
def test_what_the_allocator_cannot_do_is_refused_naming_the_claim(devices, message):
    with pytest.raises(Unsupported) as err:
        claim_requests(claim(devices), {"test-class": DRIVER})
    assert str(err.value).startswith("ResourceClaim init/c-0: ") and message in str(err.value)


def test_upstreams_claims_read_as_requests_and_constraints():
    one = claim({"requests": [{"name": "req-0", "exactly": {"deviceClassName": "test-class"}}]})
    assert claim_requests(one, {"test-class": DRIVER}) == ([Request("req-0", DRIVER, 1)], [])
    two = claim({"requests": [{"name": "req-0", "exactly": {"deviceClassName": "test-class", "count": 2}}],
                 "constraints": [{"requests": ["req-0"], "matchAttribute": NUMA_ATTRIBUTE}]})
    assert claim_requests(two, {"test-class": DRIVER}) == TWO_ON_ONE_NUMA


# ---------------------------------------------------------------------------- the check


def device_nodes(*nodes: str) -> dict:
    return {d.id: node for node in nodes for d in node_devices(node, 4, 0)}


def bound_pod(name: str = "p", node: str = "a", claim_name: str = "p-resource-x") -> dict[str, Any]:
    return {"metadata": {"namespace": "test", "name": name, "uid": f"uid-{name}"},
            "spec": {"nodeName": node, "resourceClaims": [{"name": "resource",
                                                           "resourceClaimTemplateName": "test-claim-template"}]},
            "status": {"resourceClaimStatuses": [{"name": "resource", "resourceClaimName": claim_name}]}}


def allocated_claim(name: str = "p-resource-x", node: str = "a", device: str = "instance-0",
                    pod: str = "p") -> dict[str, Any]:
    return {"metadata": {"namespace": "test", "name": name},
            "status": {"allocation": allocation(node, [("req-0", next(d for d in node_devices(node, 4, 0)
                                                                       if d.name == device))]),
                       "reservedFor": [{"resource": "pods", "name": pod, "uid": f"uid-{pod}"}]}}


def broken(change):
    def make():
        pods, claims = [bound_pod()], [allocated_claim()]
        change(pods, claims)
        return pods, claims
    return make


def _unallocate(pods, claims):
    claims[0]["status"] = {}


def _elsewhere(pods, claims):
    claims[0]["status"]["allocation"]["devices"]["results"][0]["pool"] = "b"


def _other_node_selector(pods, claims):
    claims[0]["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] = ["b"]


def _unreserved(pods, claims):
    claims[0]["status"]["reservedFor"] = []


def _no_status(pods, claims):
    pods[0]["status"] = {}


def _gone(pods, claims):
    claims.clear()


def _twice(pods, claims):
    pods.append(bound_pod("q", claim_name="q-resource-y"))
    claims.append(allocated_claim("q-resource-y", pod="q"))


@pytest.mark.parametrize("make,problem", [
    (broken(_unallocate), "pod test/p on a: ResourceClaim p-resource-x is not allocated"),
    (broken(_elsewhere), "pod test/p on a: ResourceClaim p-resource-x holds device b/instance-0, which is on b"),
    (broken(_other_node_selector), "pod test/p on a: ResourceClaim p-resource-x is allocated for nodes ['b']"),
    (broken(_unreserved), "pod test/p on a: ResourceClaim p-resource-x is not reserved for the pod"),
    (broken(_no_status), "pod test/p on a: claim 'resource' has no ResourceClaim (no resourceClaimStatuses)"),
    (broken(_gone), "pod test/p on a: ResourceClaim p-resource-x does not exist"),
    (broken(_twice), f"device {DRIVER}/a/instance-0 is allocated to claims test/p-resource-x and test/q-resource-y"),
], ids=["a claim not allocated", "a device on another node", "a node selector for another node",
        "a claim not reserved for its pod", "a pod whose generated claim is not named", "a claim that is gone",
        "one device in two claims"])
def test_the_check_names_each_way_a_pod_can_be_bound_without_its_devices(make, problem):
    pods, claims = make()
    n_pods, _, problems = claim_problems(pods, claims, device_nodes("a", "b"))
    assert problem in problems, problems
    assert n_pods == len(pods)


def test_the_check_passes_bound_pods_whose_claims_hold_their_nodes_devices_and_skips_the_rest():
    pending = copy.deepcopy(bound_pod("pending"))
    del pending["spec"]["nodeName"]
    plain = {"metadata": {"namespace": "test", "name": "plain", "uid": "u"}, "spec": {"nodeName": "a"}}
    by_name = bound_pod("r", "b", "r-claim")
    by_name["spec"]["resourceClaims"] = [{"name": "shared", "resourceClaimName": "r-claim"}]
    by_name["status"] = {}
    pods = [bound_pod(), pending, plain, by_name]
    claims = [allocated_claim(), allocated_claim("r-claim", "b", "instance-1", pod="r")]
    assert claim_problems(pods, claims, device_nodes("a", "b")) == (2, 2, [])
    assert allocated_devices(claims) == {(DRIVER, "a", "instance-0"): "test/p-resource-x",
                                         (DRIVER, "b", "instance-1"): "test/r-claim"}


# ---------------------------------------------------------------------------- the ops, on the simulated cluster


DRIVER_OPS = """\
- opcode: createNodes
  count: 2
- opcode: createNodes
  count: 3
  nodeTemplate: {apiVersion: v1, kind: Node, metadata: {generateName: scheduler-perf-dra-},
                 status: {capacity: {cpu: "4", pods: "110"}}}
- opcode: createResourceDriver
  driverName: test-driver.cdi.k8s.io
  nodes: scheduler-perf-dra-*
  maxClaimsPerNode: 4
- opcode: createAny
  template: {apiVersion: resource.k8s.io/v1, kind: DeviceClass, metadata: {name: test-class},
             spec: {selectors: [{cel: {expression: 'device.driver == "test-driver.cdi.k8s.io"'}}]}}
- opcode: createAny
  namespace: init
  countParam: $claims
  template: {apiVersion: resource.k8s.io/v1, kind: ResourceClaim, metadata: {name: "test-claim-{{.Index}}"},
             spec: {devices: {requests: [{name: req-0, exactly: {deviceClassName: test-class}}]}}}
- opcode: allocResourceClaims
  namespace: init
"""


def dra_workload(tmp_path, ops: str, claims: int):
    body = "".join(f"  {line}\n" for line in ops.splitlines())
    path = tmp_path / "dra.yaml"
    path.write_text(f"- name: D\n  workloadTemplate:\n{body}  workloads:\n  - name: W\n    params: {{claims: {claims}}}\n")
    return find_workload(path, "D/W")


async def test_the_driver_publishes_a_slice_per_dra_node_of_the_run_and_claims_get_distinct_devices_without_pods(
        sim, tmp_path):
    _, target = sim
    await run_workload(dra_workload(tmp_path, DRIVER_OPS, 10), target, "nobody", Recorder())
    c = target.client
    nodes = [n["metadata"]["name"] for n in (await c.list("/api/v1/nodes"))["items"]]
    slices = (await c.list("/apis/resource.k8s.io/v1/resourceslices"))["items"]
    dra = sorted(n for n in nodes if n.startswith("scheduler-perf-dra-"))
    assert len(nodes) == 5 and len(dra) == 3
    assert sorted(s["metadata"]["name"] for s in slices) == sorted(s["spec"]["nodeName"] for s in slices) == dra
    assert all(len(s["spec"]["devices"]) == 4 for s in slices)
    claims = (await c.list("/apis/resource.k8s.io/v1/namespaces/init/resourceclaims"))["items"]
    assert sorted(x["metadata"]["name"] for x in claims) == sorted(f"test-claim-{i}" for i in range(10))
    held = allocated_devices(claims)
    assert len(held) == 10                                 # ten devices, none twice
    device_nodes = {d.id: node for node, ds in devices_of(slices).items() for d in ds}
    for x in claims:
        (result,) = x["status"]["allocation"]["devices"]["results"]
        (term,) = x["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
        assert term["matchFields"][0]["values"] == [device_nodes[(result["driver"], result["pool"], result["device"])]]
        assert not x["status"].get("reservedFor")           # in use by no pod, as upstream's op leaves them


async def test_claims_beyond_the_devices_fail_the_op_as_upstreams_could_not_allocate(sim, tmp_path):
    _, target = sim
    with pytest.raises(RunError, match=r"op 5 \(allocResourceClaims\): could not allocate claim 12 of 13 "
                                       r"\(init/test-claim-\d+\): no node has the devices left"):
        await run_workload(dra_workload(tmp_path, DRIVER_OPS, 13), target, "nobody", Recorder())


async def test_the_check_fails_a_run_whose_scheduler_bound_pods_without_allocating_their_claims(sim, tmp_path):
    _, target = sim
    ops = DRIVER_OPS.replace("- opcode: allocResourceClaims\n  namespace: init\n", "") + """\
- opcode: createPods
  namespace: init
  count: 2
  podTemplate: {apiVersion: v1, kind: Pod, metadata: {generateName: p-},
                spec: {containers: [{name: c, image: pause, resources: {claims: [{name: r}]}}],
                       resourceClaims: [{name: r, resourceClaimName: test-claim-0}]}}
- opcode: checkResourceClaims
  timeout: 0s
"""
    with pytest.raises(RunError, match=r"op 6 \(checkResourceClaims\): 2 problems with the claims of 2 bound pods "
                                       r"\(2 claims\), e\.g\.: pod init/p-\S+ on \S+: ResourceClaim test-claim-0 is "
                                       r"not allocated"):
        async with BaselineBinder(target.client):     # binds round robin, allocates nothing
            await run_workload(dra_workload(tmp_path, ops, 1), target, BASELINE_SCHEDULER_NAME, Recorder())
