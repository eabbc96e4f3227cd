"""bench/workloads/dra.yaml: upstream's DRA workloads in tandem-bench's format, and their Smoke runs end to end.

The file's test cases carry upstream's names, ops and sizes (nodes with the driver's slices and nodes
without, devices counted against the pods), and its templates are upstream's. Their Smoke scale then runs
with tandem on the simulated cluster (which serves resource.k8s.io/v1 and runs the resourceclaim controller
with its node agent), and as ``tandem-bench run --start-kube-scheduler`` runs it: kube-scheduler (the binary in
``KUBEBUILDER_ASSETS``, as ``../shared/realk8s/up.sh --assets`` prints) on a real kube-apiserver whose
kube-controller-manager runs the resourceclaim controller; every measured pod must end bound with its
claim allocated on its node, and the slices and the claims allocated without pods must be what upstream's
ops make. Skipped, saying why, without those binaries. Nothing here is a measurement.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Any

import pytest

from bench.dra import claim_problems, devices_of
from bench.record import Recorder
from bench.runner import run_workload
from bench.target import KUBE_SCHEDULER_NAME, open_target, start_kube_scheduler, start_scheduler
from bench.workload import (AllocResourceClaims, CheckResourceClaims, CreateAny, CreateNodes, CreatePods,
                            CreateResourceDriver, find_workload, load_workloads,
                            uses_controllers)
from tests.support import envtest, servers

WORKLOADS = Path(__file__).resolve().parents[2] / "bench" / "workloads"
DRA = WORKLOADS / "dra.yaml"
API = "/apis/resource.k8s.io/v1"
TEST_CASES = {
    "SchedulingWithResourceClaimTemplate": ["Smoke", "500Nodes", "5000Nodes"],
    "SteadyStateClusterResourceClaimTemplate": ["Smoke", "500NodesEmpty", "500NodesHalf", "500NodesFull"],
    "SchedulingWithResourceClaimTemplateMatchAttribute": ["Smoke", "500Nodes", "5000Nodes"],
}

real = servers.real_apiserver_fixture(controllers=("resourceclaim-controller", "garbage-collector-controller"))


def ops_of(w, kind) -> list[Any]:
    return [op for op in w.ops if isinstance(op, kind)]


def dra_nodes(w) -> int:
    """The nodes createResourceDriver's glob picks, by the name the runner gives them (<prefix><run>-<n>)."""
    (driver,) = ops_of(w, CreateResourceDriver)
    n = 0
    for op in ops_of(w, CreateNodes):
        prefix = op.template["metadata"]["generateName"]
        if fnmatch.fnmatchcase(f"{prefix}abcde-0", driver.nodes):
            n += op.count
    return n


# ---------------------------------------------------------------------------- the file


def test_the_file_has_upstreams_test_cases_at_their_scales_and_every_op_is_valid():
    workloads = load_workloads(DRA)
    assert {t: [w.name for w in workloads if w.test == t] for t in TEST_CASES} == TEST_CASES
    for w in workloads:
        assert isinstance(w.ops[-1], CheckResourceClaims), w.full_name   # every run ends checking the claims
        assert "dra" in w.labels
        assert uses_controllers(w)   # the claims come from templates: a simulated cluster runs its controller


@pytest.mark.parametrize("name,dra,plain,devices", [
    ("SchedulingWithResourceClaimTemplate/Smoke", 1, 1, 10),
    ("SchedulingWithResourceClaimTemplate/500Nodes", 500, 0, 10),
    ("SchedulingWithResourceClaimTemplate/5000Nodes", 1100, 3900, 10),
    ("SchedulingWithResourceClaimTemplateMatchAttribute/500Nodes", 500, 0, 9),
    ("SchedulingWithResourceClaimTemplateMatchAttribute/5000Nodes", 3700, 1300, 9),
])
def test_nodes_with_and_without_the_driver_and_pods_that_fill_its_devices(name, dra, plain, devices):
    w = find_workload(WORKLOADS, name)
    (driver,) = ops_of(w, CreateResourceDriver)
    nodes = ops_of(w, CreateNodes)
    assert dra_nodes(w) == dra and sum(op.count for op in nodes) == dra + plain
    assert (driver.driver_name, driver.nodes, driver.max_claims_per_node) == ("test-driver.cdi.k8s.io",
                                                                             "scheduler-perf-dra-*", devices)
    pods = sum(op.count for op in ops_of(w, CreatePods))
    per_claim = 2 if "MatchAttribute" in name else 1
    per_node = devices // 3 if per_claim == 2 else devices   # two of a NUMA node of three: one claim per NUMA node
    room = dra * per_node
    # upstream's sizes fill every device; ours fill all but a hundred claims at most
    assert pods <= room and (room - pods <= 100 if name.endswith("Nodes") else True), (pods, room)


@pytest.mark.parametrize("scale,claims", [("Smoke", 0), ("500NodesEmpty", 0), ("500NodesHalf", 2500),
                                          ("500NodesFull", 4990)])
def test_the_steady_state_keeps_ten_pods_in_flight_on_a_cluster_filled_beforehand(scale, claims):
    w = find_workload(WORKLOADS, f"SteadyStateClusterResourceClaimTemplate/{scale}")
    (init,) = [op for op in ops_of(w, CreateAny) if op.template["kind"] == "ResourceClaim"]
    (alloc,) = ops_of(w, AllocResourceClaims)
    (steady,) = ops_of(w, CreatePods)
    assert (init.count, init.namespace, alloc.namespace) == (claims, "init", "init")
    assert (steady.count, steady.steady_state, steady.duration, steady.collect_metrics) == (
        10, True, 2.0 if scale == "Smoke" else 10.0, True)
    if scale == "500NodesFull":   # room for exactly one batch
        assert dra_nodes(w) * ops_of(w, CreateResourceDriver)[0].max_claims_per_node - claims == steady.count


def test_the_templates_are_upstreams():
    w = find_workload(WORKLOADS, "SteadyStateClusterResourceClaimTemplate/Smoke")
    by_kind = {op.template["kind"]: op.template for op in ops_of(w, CreateAny)}
    assert by_kind["DeviceClass"]["metadata"]["name"] == "test-class"
    assert by_kind["DeviceClass"]["spec"]["selectors"] == [
        {"cel": {"expression": 'device.driver == "test-driver.cdi.k8s.io"'}}]
    assert by_kind["ResourceClaim"]["metadata"]["name"] == "test-claim-{{.Index}}"
    template = by_kind["ResourceClaimTemplate"]
    assert template["metadata"]["name"] == "test-claim-template"
    assert template["spec"]["spec"]["devices"]["requests"] == [
        {"name": "req-0", "exactly": {"deviceClassName": "test-class"}}]
    pod = ops_of(w, CreatePods)[0].template
    assert pod["spec"]["resourceClaims"] == [{"name": "resource", "resourceClaimTemplateName": "test-claim-template"}]
    assert pod["spec"]["containers"][0]["resources"] == {"claims": [{"name": "resource"}]}
    numa = find_workload(WORKLOADS, "SchedulingWithResourceClaimTemplateMatchAttribute/Smoke")
    (two,) = {op.namespace: op.template for op in ops_of(numa, CreateAny)
              if op.template["kind"] == "ResourceClaimTemplate" and op.namespace == "test-numa"}.values()
    assert two["spec"]["spec"]["devices"] == {
        "requests": [{"name": "req-0", "exactly": {"deviceClassName": "test-class", "count": 2}}],
        "constraints": [{"requests": ["req-0"], "matchAttribute": "dra.example.com/numa"}]}


# ---------------------------------------------------------------------------- end to end, with tandem


SMOKES = ["SchedulingWithResourceClaimTemplate/Smoke", "SteadyStateClusterResourceClaimTemplate/Smoke",
          "SchedulingWithResourceClaimTemplateMatchAttribute/Smoke"]


@pytest.mark.parametrize("name", SMOKES)
async def test_the_smoke_runs_bind_every_pod_with_its_devices_with_tandem_on_the_simulated_cluster(name, tmp_path):
    w = find_workload(WORKLOADS, name)
    recorder = Recorder()
    # as tandem-bench starts it: the simulated cluster with its controllers (the resourceclaim controller)
    async with open_target(None, tmp_path, agent=uses_controllers(w)) as target:
        async with start_scheduler(None, target.kubeconfig, tmp_path):
            await run_workload(w, target, "tandem-scheduler", recorder, timeout=60)   # ends with checkResourceClaims
        claims = await items(target.client, f"{API}/resourceclaims")
    measured = recorder.measured()
    (last,) = [op for op in ops_of(w, CreatePods) if op.collect_metrics]
    in_flight = last.count if last.steady_state else 0   # a steady state may end with its last batch waiting
    assert measured and sum(p.bound is None for p in measured) <= in_flight, name
    assert sum(bool((c.get("status") or {}).get("allocation")) for c in claims) >= sum(
        p.gone is None and p.bound is not None for p in measured)


# ---------------------------------------------------------------------------- end to end, with kube-scheduler


def kube_scheduler() -> Path:
    folder = envtest.assets_dir()
    binary = folder / "kube-scheduler" if folder is not None else None
    if binary is None or not os.access(binary, os.X_OK) or not (folder / "kube-controller-manager").is_file():
        pytest.skip(envtest.skip_reason() or "KUBEBUILDER_ASSETS has no kube-scheduler and kube-controller-manager "
                                             "(../shared/realk8s/up.sh --assets prints a folder that has them)")
    return binary


async def items(client, path: str) -> list[dict[str, Any]]:
    return (await client.list(path))["items"]


@pytest.mark.asyncio(loop_scope="module")   # the module's real server shares the loop of its tests
@pytest.mark.parametrize("name,overrides", [
    ("SchedulingWithResourceClaimTemplate/Smoke", {}),
    ("SteadyStateClusterResourceClaimTemplate/Smoke", {"initClaims": "5"}),
    ("SchedulingWithResourceClaimTemplateMatchAttribute/Smoke", {}),
], ids=["one device per pod", "a steady state on claims allocated beforehand", "two devices of one NUMA node"])
async def test_the_smoke_runs_bind_every_pod_with_its_devices_on_its_node_with_kube_scheduler(real, tmp_path, name,
                                                                                          overrides):
    binary = kube_scheduler()
    if real is None:
        pytest.skip(envtest.skip_reason() or "the real kube-apiserver did not start")
    w = find_workload(WORKLOADS, name, overrides)
    recorder = Recorder()
    async with open_target(real.kubeconfig, tmp_path) as target:
        before = {s["metadata"]["name"] for s in await items(target.client, f"{API}/resourceslices")}
        async with start_kube_scheduler([str(binary)], real.kubeconfig, tmp_path):
            await run_workload(w, target, KUBE_SCHEDULER_NAME, recorder, timeout=60)
        c = target.client
        every_slice = await items(c, f"{API}/resourceslices")   # the module's server is shared: earlier tests' too
        slices = [s for s in every_slice if s["metadata"]["name"] not in before]
        claims = await items(c, f"{API}/resourceclaims")
        namespaces = sorted({op.namespace for op in ops_of(w, CreatePods)})
        pods = [p for ns in namespaces for p in await items(c, f"/api/v1/namespaces/{ns}/pods")]
        nodes = {n["metadata"]["name"] for n in await items(c, "/api/v1/nodes")}
        for pod in pods:   # a steady state's last batch may wait still: the next test's scheduler must not see it
            await c.delete(f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}",
                           {"gracePeriodSeconds": 0})

    measured = recorder.measured()
    assert measured and all(p.node for p in measured if p.gone is None and p.bound is not None)
    if not ops_of(w, CreatePods)[-1].steady_state:
        assert all(p.bound is not None for p in measured)
    # one slice per node of the run with the driver, named after it: the glob picked the DRA nodes only
    (driver,) = ops_of(w, CreateResourceDriver)
    assert sorted(s["spec"]["nodeName"] for s in slices) == sorted(s["metadata"]["name"] for s in slices)
    assert len(slices) == dra_nodes(w) and all(s["metadata"]["name"].startswith("scheduler-perf-dra-")
                                                  and s["metadata"]["name"] in nodes for s in slices)
    assert all(len(s["spec"]["devices"]) == driver.max_claims_per_node for s in slices)
    # every bound pod's claim allocated with its own node's devices, reserved for it, no device twice
    device_nodes = {d.id: node for node, ds in devices_of(every_slice).items() for d in ds}
    n_pods, n_claims, problems = claim_problems(pods, claims, device_nodes)
    assert not problems and n_pods == n_claims == sum(1 for p in pods if p["spec"].get("nodeName"))
    if "MatchAttribute" in name:
        numa = {(d.pool, d.name): d.attribute("dra.example.com/numa") for ds in devices_of(slices).values() for d in ds}
        for claim in (c for c in claims if c["metadata"]["namespace"] == "test-numa"):
            results = claim["status"]["allocation"]["devices"]["results"]
            assert len(results) == 2 and len({numa[(r["pool"], r["device"])] for r in results}) == 1, results
    # upstream's allocResourceClaims: the init claims allocated without pods, none reserved, on a DRA node each
    for alloc in ops_of(w, AllocResourceClaims):
        init = [c for c in claims if c["metadata"]["namespace"] == alloc.namespace
                and c["metadata"]["name"].startswith("test-claim-")]
        assert sorted(c["metadata"]["name"] for c in init) == sorted(f"test-claim-{i}"
                                                                     for i in range(int(overrides["initClaims"])))
        check_allocated_without_pods(init, device_nodes)


def check_allocated_without_pods(init: list[dict[str, Any]], device_nodes: dict) -> None:
    for claim in init:
        status = claim["status"]
        assert not status.get("reservedFor") and len(status["allocation"]["devices"]["results"]) == 1
        (result,) = status["allocation"]["devices"]["results"]
        assert device_nodes[(result["driver"], result["pool"], result["device"])] == result["pool"]

