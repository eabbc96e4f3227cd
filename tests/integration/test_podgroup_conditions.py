"""The two writers of a native PodGroup's ``status.conditions``, end to end on the simulated cluster.

tandem runs (App, its built-in default profile, which schedules native gangs, plus GangReadiness for every
gang): a native gang is bound,
the PodGroup status controller writes PodGroupScheduled and GangReadiness PodsReady into the same list, each
by the rule of scheduler/framework/podgroupconditions.py. A writer that ignores the rule (a merge patch of
the list without a resourceVersion) erases PodGroupScheduled, and the controller writes it again; then the
members become Ready (the test writes their status, as a kubelet would: no node agent runs) and PodsReady
turns True with PodGroupScheduled kept. What the API server does with such patches, on both servers, is
tests/simcluster/test_podgroup_status.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.simcluster import SimCluster
from scheduler.apiclient import from_kubeconfig
from scheduler.app import App
from scheduler.config import SchedulerConfig, parse_config
from scheduler.framework.clock import Clock
from tests.integration.test_gangs_native import native_member
from tests.integration.test_scheduler import NS, eventually, make_node

PODS = f"/api/v1/namespaces/{NS}/pods"
GROUPS_PATH = f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{NS}/podgroups"


def config() -> SchedulerConfig:
    """The built-in default profile sized for a test, with GangReadiness for every gang."""
    return parse_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "podInitialBackoffSeconds": 0.1, "podMaxBackoffSeconds": 1, "leaderElection": {"leaderElect": False},
        "clientConnection": {"qps": 2000, "burst": 4000},
        "profiles": [{"schedulerName": "tandem-scheduler",
                      "plugins": {"multiPoint": {"enabled": [{"name": "GangReadiness"}]}},
                      "pluginConfig": [{"name": "GangReadiness",
                                        "args": {"allGangs": True, "timeoutSeconds": 300}}]}]}, "<test>")


async def test_the_two_writers_of_a_native_groups_conditions_keep_each_others(tmp_path: Path) -> None:
    kc = tmp_path / "kubeconfig"
    async with SimCluster(nodes=0, agent=None, kubeconfig=kc, native_gangs=True), \
            await from_kubeconfig(str(kc), qps=0, clock=Clock()) as client:
        await client.create("/api/v1/nodes", make_node("node-0"))
        await client.create(GROUPS_PATH, {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                                          "metadata": {"name": "g"},
                                          "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}})
        for name in ("g-0", "g-1"):
            await client.create(PODS, native_member(name, "g", cpu="100m"))

        async def conditions() -> dict[str, dict[str, Any]]:
            got = await client.get(f"{GROUPS_PATH}/g")
            return {c["type"]: c for c in (got.get("status") or {}).get("conditions") or ()}

        async def both() -> dict[str, dict[str, Any]]:
            got = await conditions()
            return got if {"PodGroupScheduled", "PodsReady"} <= set(got) else {}

        async def ready() -> dict[str, dict[str, Any]]:
            got = await conditions()
            return got if got.get("PodsReady", {}).get("status") == "True" else {}

        async with App(config(), kubeconfig=str(kc)) as app:
            got = await eventually(both, 20, "PodGroupScheduled and PodsReady on the group")
            assert (got["PodGroupScheduled"]["status"], got["PodGroupScheduled"]["reason"]) == ("True", "Scheduled")
            assert got["PodsReady"]["reason"] == "WaitForStart"

            # a writer that ignores the rule: its list, without a version, erases the controller's condition
            await client.patch(f"{GROUPS_PATH}/g/status", {"status": {"conditions": [got["PodsReady"]]}})
            got = await eventually(both, 10, "PodGroupScheduled to be written again")
            assert got["PodGroupScheduled"]["reason"] == "Scheduled" and got["PodsReady"]["reason"] == "WaitForStart"

            for name in ("g-0", "g-1"):   # Running and Ready, as a kubelet would say
                await client.patch_pod_status(NS, name, {"status": {"phase": "Running", "conditions": [
                    {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
            got = await eventually(ready, 10, "PodsReady=True")
            assert got["PodGroupScheduled"]["reason"] == "Scheduled", "written on the newer version: kept"
            assert app._loop_task is not None and not app._loop_task.done(), "the scheduling loop ended"
