"""The native-gang workloads of bench/workloads/gang.yaml at their Smoke scale, as tandem-bench runs them.

GangBasicNative, GangContentionNative, TopologyGang and TopologyGangZones create upstream's
scheduling.k8s.io/v1alpha2 PodGroups, so the simulated cluster (its own process) is started serving that
API, as tandem-bench does for them, and tandem runs with config/gang-native.yaml. Every measured pod must
be created and bound; the groups are native ones, their members join by spec.schedulingGroup, and a
TopologyGang gang has all its members in one rack (of one zone), a TopologyGangZones gang in one zone.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench.record import Recorder
from bench.runner import NATIVE_GROUP_LABEL, run_workload
from bench.target import open_target, start_scheduler
from bench.workload import (
    NATIVE_POD_GROUP_API_VERSION, RACK_LABEL, ZONE_LABEL, find_workload, load_workloads, uses_native_gangs,
)
from tests.bench.test_runner import SCHEDULER, WORKLOADS, expected_measured

REPO = Path(__file__).resolve().parents[2]
NATIVE_SMOKE = [w.full_name for w in load_workloads(WORKLOADS / "gang.yaml")
                if w.name == "Smoke" and "native-gang" in w.labels]


def test_the_native_workloads_are_issue_22s_and_the_zone_variant_of_issue_26():
    assert NATIVE_SMOKE == ["GangBasicNative/Smoke", "GangContentionNative/Smoke", "TopologyGang/Smoke",
                            "TopologyGangZones/Smoke"]
    assert all(uses_native_gangs(find_workload(WORKLOADS, n)) for n in NATIVE_SMOKE)
    assert not uses_native_gangs(find_workload(WORKLOADS, "GangBasic/Smoke"))


@pytest.mark.parametrize("name", NATIVE_SMOKE)
async def test_native_smoke_workload_binds_every_measured_pod(name, tmp_path):
    workload = find_workload(WORKLOADS, name)
    recorder = Recorder()
    sim_args = [f"--runtime-config={NATIVE_POD_GROUP_API_VERSION}=true"]
    async with open_target(None, tmp_path, sim_args) as target:
        async with start_scheduler(REPO / "config" / "gang-native.yaml", target.kubeconfig, tmp_path):
            started = time.time()
            await run_workload(workload, target, SCHEDULER, recorder, timeout=30)
            finished = time.time()
            groups = (await target.client.list(f"/apis/{NATIVE_POD_GROUP_API_VERSION}/podgroups"))["items"]
            assert groups and all(g["spec"]["schedulingPolicy"]["gang"]["minCount"] >= 2 for g in groups)
            nodes = {n["metadata"]["name"]: n["metadata"].get("labels") or {}
                     for n in (await target.client.list("/api/v1/nodes"))["items"]}
            members = (await target.client.list("/api/v1/pods", {"labelSelector": NATIVE_GROUP_LABEL}))["items"]
            key = ZONE_LABEL if name.startswith("TopologyGangZones") else RACK_LABEL
            domains: dict[str, set[str]] = {}
            for p in members:
                group = p["spec"]["schedulingGroup"]["podGroupName"]
                assert group == p["metadata"]["labels"][NATIVE_GROUP_LABEL]
                assert "scheduling.x-k8s.io/pod-group" not in p["metadata"]["labels"]
                if p["spec"].get("nodeName"):
                    domains.setdefault(group, set()).add(nodes[p["spec"]["nodeName"]].get(key, ""))
            if name.startswith("TopologyGang"):
                assert domains and all(len(d) == 1 and "" not in d for d in domains.values()), domains
            if name == "TopologyGang/Smoke":
                racks = {labels[RACK_LABEL] for labels in nodes.values() if RACK_LABEL in labels}
                assert racks == {"zone1-rack1", "zone1-rack2", "zone2-rack1", "zone2-rack2"}, racks
    measured = recorder.measured()
    assert len(measured) == expected_measured(workload)
    assert all(started <= p.created <= p.bound <= finished and p.node for p in measured)
