"""bench/workloads/volumes.yaml at its Smoke sizes, end to end as ``tandem-bench run`` runs them.

Each workload runs against tandem's default profile on a freshly started simulated cluster (its PV
controller and provisioner running, as tandem-bench starts it). Every pod must end bound, and its claim
Bound to a volume that reaches the pod's node: upstream's SchedulingCSIPVs to the volume made for it
beforehand; SchedulingWaitForFirstConsumerPVs to one of the node's own local volumes, chosen by the
scheduler (its claimRef write), never one volume for two claims; SchedulingDynamicProvisioning to a
volume provisioned in the zone of the node written in the claim's selected-node;
SchedulingWithStorageCapacity to a volume of the capacity-checked driver on the selected node, which
has its own CSIStorageCapacity. Nothing here is a measurement.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.record import Recorder
from bench.runner import run_workload
from bench.target import open_target, start_scheduler
from bench.workload import CreatePods, find_workload

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ROOT / "bench" / "workloads"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


def affinity(pv: dict) -> dict[str, list[str]]:
    """The volume's required node affinity as key -> values (the single In term these volumes carry)."""
    terms = ((pv["spec"].get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms") or []
    return {e["key"]: e["values"] for t in terms for e in t.get("matchExpressions") or () if e["operator"] == "In"}


@pytest.mark.parametrize("name", ["SchedulingCSIPVs/Smoke", "SchedulingWaitForFirstConsumerPVs/Smoke",
                                  "SchedulingDynamicProvisioning/Smoke", "SchedulingWithStorageCapacity/Smoke"])
async def test_every_pod_binds_with_its_claim_bound_to_a_volume_that_reaches_its_node(name, tmp_path):
    workload = find_workload(WORKLOADS, name)
    ops = [o for o in workload.ops if isinstance(o, CreatePods)]
    recorder = Recorder()
    async with open_target(None, tmp_path) as target:
        async with start_scheduler(None, target.kubeconfig, tmp_path):
            await run_workload(workload, target, "tandem-scheduler", recorder, timeout=60)
        c = target.client
        pods = [p for o in ops for p in (await c.list(f"/api/v1/namespaces/{o.namespace}/pods"))["items"]]
        claims = {(x["metadata"]["namespace"], x["metadata"]["name"]): x
                  for x in (await c.list("/api/v1/persistentvolumeclaims"))["items"]}
        volumes = {x["metadata"]["name"]: x for x in (await c.list("/api/v1/persistentvolumes"))["items"]}
        nodes = {x["metadata"]["name"]: x for x in (await c.list("/api/v1/nodes"))["items"]}
        capacities = {x["metadata"]["name"]: x["nodeTopology"] for x in
                      (await c.list("/apis/storage.k8s.io/v1/csistoragecapacities"))["items"]}

    assert len(pods) == sum(o.count for o in ops) == len(recorder.pods)
    assert len(recorder.measured()) == ops[-1].count
    used: dict[str, str] = {}
    for pod in pods:
        node = pod["spec"].get("nodeName")
        (vol,) = pod["spec"]["volumes"]
        claim = claims[(pod["metadata"]["namespace"], vol["persistentVolumeClaim"]["claimName"])]
        assert node, pod["metadata"]["name"]
        assert claim["status"]["phase"] == "Bound", claim
        pv = volumes[claim["spec"]["volumeName"]]
        assert used.setdefault(pv["metadata"]["name"], claim["metadata"]["name"]) == claim["metadata"]["name"]
        where, labels = affinity(pv), nodes[node]["metadata"]["labels"]
        annotations = claim["metadata"].get("annotations") or {}
        if name.startswith("SchedulingCSIPVs"):       # bound beforehand, to the volume made for the pod
            assert pv["metadata"]["name"] == f"pv-{pod['metadata']['name']}" and not where, pv
        elif name.startswith("SchedulingWaitForFirstConsumerPVs"):   # the scheduler chose one of the node's
            assert where == {HOSTNAME: [node]}, (node, where)
            assert (pv["metadata"].get("annotations") or {}).get("pv.kubernetes.io/bound-by-controller") == "yes"
        elif name.startswith("SchedulingWithStorageCapacity"):   # on a node whose capacity object selects it
            assert annotations.get("volume.kubernetes.io/selected-node") == node, annotations
            assert pv["spec"]["csi"]["driver"] == "capacity.simcluster.tandem.dev"
            assert where == {HOSTNAME: [node]}, (node, where)
            assert capacities[f"{node}-cap-0"] == {"matchLabels": {HOSTNAME: node}}
        else:                                          # provisioned where selected-node's zone is
            assert annotations.get("volume.kubernetes.io/selected-node") == node, annotations
            assert pv["metadata"]["name"] == f"pvc-{claim['metadata']['uid']}"
            assert where == {ZONE: [labels[ZONE]]}, (node, where)
