"""Native gangs end to end: scheduling.k8s.io/v1alpha2 PodGroups on the simulated cluster.

The simulated cluster serves upstream's native gang API (``SimCluster(native_gangs=True)``, as a real
server with the runtime-config and gates) and runs its Job controller; the scheduler runs with
``config/gang-native.yaml`` (upstream's plugin names; GangScheduling is tandem's gang mechanism)
sized for a test. Pods join with ``spec.schedulingGroup.podGroupName``. What is checked is what
kube-scheduler 1.36 does with the gates on (issue 22), and where tandem is deliberately better:
a gang is bound whole or not at all, its PodGroup's PodGroupScheduled condition says so in
upstream's words, a pod of a missing group waits naming it, a topology-constrained gang goes into
one domain or none, a Job's group is scheduled, and preemption takes a gang whole when its
disruption mode says so.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import yaml

from bench.simcluster import SimCluster
from bench.simcluster.agent import AgentConfig
from bench.simcluster.resources import lookup
from scheduler import preenqueue
from scheduler.apiclient import from_kubeconfig
from scheduler.app import App
from scheduler.config import SchedulerConfig, parse_config
from scheduler.framework.clock import Clock
from tests.integration.test_gangs import NODES, NS, PODS, Sim, names
from tests.integration.test_scheduler import eventually, make_node, make_pod, stays

PODGROUPS = lookup("scheduling.k8s.io", "v1alpha2", "podgroups")
GROUPS_PATH = f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{NS}/podgroups"
NATIVE_CONFIG = Path(__file__).resolve().parents[2] / "config" / "gang-native.yaml"
GANG = "gang"          # the members' label naming their gang, for the test's bookkeeping only
ZONE = "topology.kubernetes.io/zone"
WAITING = ("pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, one or more plugins "
           "asked to wait and no plugin rejected pod")


def native_config(path: Path = NATIVE_CONFIG) -> SchedulerConfig:
    doc = yaml.safe_load(path.read_text())
    doc.update({"podInitialBackoffSeconds": 0.1, "podMaxBackoffSeconds": 1,
                "clientConnection": {"qps": 2000, "burst": 4000}})
    return parse_config(doc, str(path))


def native_member(name: str, group: str, cpu: str = "1", **kw: Any) -> dict[str, Any]:
    return make_pod(name, cpu=cpu, memory="64Mi", labels={GANG: group, "app": group},
                    schedulingGroup={"podGroupName": group}, **kw)


class NativeSim(Sim):
    async def create_native_group(self, name: str, min_count: int | None, topology: str = "", **spec: Any) -> None:
        body: dict[str, Any] = {
            "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": name, "namespace": NS},
            "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}} if min_count else {"basic": {}}, **spec}}
        if topology:
            body["spec"]["schedulingConstraints"] = {"topology": [{"key": topology}]}
        await self.client.create(GROUPS_PATH, body)

    def native_condition(self, name: str, type_: str = "PodGroupScheduled") -> dict[str, Any]:
        pg = self.store.get_obj(PODGROUPS, NS, name) or {}
        for c in (pg.get("status") or {}).get("conditions") or ():
            if c.get("type") == type_:
                return c
        return {}

    group_label = GANG

    @staticmethod
    def gang_key(group: str) -> str:
        return f"scheduling.k8s.io/{NS}/{group}"


@contextlib.asynccontextmanager
async def running(tmp_path: Path, nodes: list[dict[str, Any]], cfg: SchedulerConfig | None = None
                  ) -> AsyncIterator[NativeSim]:
    kc = tmp_path / "kubeconfig"
    async with SimCluster(nodes=0, agent=AgentConfig(ready_delay=0.05, tick=0.01), kubeconfig=kc,
                          native_gangs=True) as cluster:
        for n in nodes:
            cluster.store.create(NODES, "", n)
        async with await from_kubeconfig(str(kc), qps=0, clock=Clock()) as client:
            sim = NativeSim(cluster, client, kc)
            sim.watch_binds()
            async with App(cfg or native_config(), kubeconfig=str(kc)) as app:
                sim.app = app
                yield sim
                assert app._loop_task is not None and not app._loop_task.done(), "the scheduling loop ended"


def zoned(zone: str, i: int, cpu: str = "2") -> dict[str, Any]:
    return make_node(f"{zone}-node-{i}", cpu=cpu, labels={ZONE: zone})


# ---------------------------------------------------------------------------- all or nothing


async def test_a_full_native_gang_is_bound_whole_and_its_pod_group_says_scheduled(tmp_path):
    async with running(tmp_path, [make_node(f"node-{i}", cpu="2") for i in range(4)]) as sim:
        await sim.create_native_group("train", 8)
        gang = names("train", 8)
        for n in gang:
            sim.create_pod(native_member(n, "train"))
        await eventually(lambda: len(sim.bound(*gang)) == 8, 10, "the whole gang to be bound")
        assert sim.first_bind_placed == {"train": 8}, "the first bind came after all 8 had a node"
        c = await eventually(lambda: sim.native_condition("train"), 10, "PodGroupScheduled on the group")
        assert (c["status"], c["reason"], c["message"]) == ("True", "Scheduled", "")


async def test_a_short_native_gang_binds_nothing_says_why_then_all_when_a_node_joins(tmp_path):
    async with running(tmp_path, [make_node(f"node-{i}", cpu="2") for i in range(3)]) as sim:
        await sim.create_native_group("mpi", 8)
        gang = names("mpi", 8)
        for n in gang:
            sim.create_pod(native_member(n, "mpi"))
        await eventually(lambda: all(sim.message(n) for n in gang), 10, "every member to say why it waits")
        msgs = {sim.message(n) for n in gang}
        assert WAITING in msgs, msgs
        assert all(m == WAITING or m.startswith("0/3 nodes are available") for m in msgs), msgs
        c = await eventually(lambda: sim.native_condition("mpi"), 10, "PodGroupScheduled on the group")
        assert (c["status"], c["reason"], c["message"]) == (
            "False", "Unschedulable", "0/1 placements are available, first placement status: pod group is unschedulable")
        await stays(lambda: not sim.bound(*gang) and not sim.assumed(), 0.5, "a partial gang held or bound")
        assert WAITING in await sim.events(gang[0], "FailedScheduling") + await sim.events(gang[-1], "FailedScheduling")

        sim.store.create(NODES, "", make_node("node-3", cpu="2"))
        await eventually(lambda: len(sim.bound(*gang)) == 8, 10, "the gang to be bound once a node joins")
        assert sim.first_bind_placed == {"mpi": 8}
        await eventually(lambda: sim.native_condition("mpi").get("status") == "True", 10, "the condition to turn True")


async def test_two_racing_native_gangs_end_one_whole_and_one_waiting(tmp_path):
    async with running(tmp_path, [make_node(f"node-{i}", cpu="2") for i in range(4)]) as sim:
        await sim.create_native_group("a", 6)
        await sim.create_native_group("b", 6)
        a, b = names("a", 6), names("b", 6)
        for x, y in zip(a, b):
            sim.create_pod(native_member(x, "a"))
            sim.create_pod(native_member(y, "b"))

        def one_whole() -> bool:
            return sorted((len(sim.bound(*a)), len(sim.bound(*b)))) == [0, 6]

        await eventually(one_whole, 10, "one gang bound whole")
        await stays(lambda: one_whole() and not sim.assumed(), 1.0, "the other gang to stay wholly pending")
        winner, loser = (a, b) if sim.bound(*a) else (b, a)
        for n in winner:
            sim.store.delete(PODS, NS, n, grace=0)
        await eventually(lambda: len(sim.bound(*loser)) == 6, 10, "the waiting gang to bind once room is freed")


async def test_a_quorum_gang_binds_min_count_and_the_rest_as_room_comes(tmp_path):
    async with running(tmp_path, [make_node(f"node-{i}", cpu="2") for i in range(2)]) as sim:
        await sim.create_native_group("q", 3)
        gang = names("q", 5)
        for n in gang:
            sim.create_pod(native_member(n, "q"))
        await eventually(lambda: len(sim.bound(*gang)) == 4, 10, "minCount members and what else fits")
        c = await eventually(lambda: sim.native_condition("q").get("status") == "True" and sim.native_condition("q"),
                             10, "the group to be Scheduled")
        assert c["reason"] == "Scheduled"
        await stays(lambda: sim.native_condition("q").get("status") == "True", 0.5,
                    "the condition going back to False while a member is pending")
        sim.store.create(NODES, "", make_node("node-2", cpu="2"))
        await eventually(lambda: len(sim.bound(*gang)) == 5, 10, "the last member once room comes")


async def test_a_basic_group_is_no_gang(tmp_path):
    async with running(tmp_path, [make_node("node-0", cpu="2")]) as sim:
        await sim.create_native_group("loose", None)
        pods = names("loose", 3)
        for n in pods:
            sim.create_pod(native_member(n, "loose"))
        await eventually(lambda: len(sim.bound(*pods)) == 2, 10, "the members that fit, one by one")
        await eventually(lambda: sim.native_condition("loose").get("status") == "True", 10, "Scheduled")
        await stays(lambda: len(sim.bound(*pods)) == 2, 0.3, "a third member on a full node")


@pytest.fixture
def quick_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preenqueue, "REPORT_DELAY", 0.3)


async def test_pods_of_a_missing_native_group_wait_naming_it_and_bind_once_it_exists(tmp_path, quick_reports):
    async with running(tmp_path, [make_node("node-0", cpu="4")]) as sim:
        ghosts = names("ghost", 2)
        for n in ghosts:
            sim.create_pod(native_member(n, "ghost"))
        sim.create_pod(make_pod("control"))
        await eventually(lambda: sim.node_of("control"), 10, "the control pod to be bound")
        want = ('waiting for pod\'s pod group "ghost" to appear: PodGroup default/ghost '
                '(scheduling.k8s.io/v1alpha2) not found')
        for n in ghosts:
            await eventually(lambda n=n: sim.reason(n) == ("False", "NotReadyForScheduling", want), 10,
                             f"{n} to say why it waits")
        await stays(lambda: not sim.bound(*ghosts), 0.5, "a pod of a missing PodGroup was bound")
        await sim.create_native_group("ghost", 2)
        await eventually(lambda: len(sim.bound(*ghosts)) == 2, 10, "the pods to bind once their PodGroup exists")


async def test_a_crd_group_of_the_same_name_is_not_a_native_pods_group(tmp_path, quick_reports):
    async with running(tmp_path, [make_node("node-0", cpu="4")]) as sim:
        await sim.create_group("shared", 1)   # scheduler-plugins' CRD, same name
        sim.create_pod(native_member("n0", "shared"))
        await eventually(lambda: sim.reason("n0")[1] == "NotReadyForScheduling", 10, "the native pod to wait")
        await stays(lambda: not sim.bound("n0"), 0.3, "a native pod bound through a CRD group")


# ---------------------------------------------------------------------------- topology


async def test_a_topology_gang_goes_into_the_one_zone_that_fits_it(tmp_path):
    nodes = [zoned("z1", i) for i in range(2)] + [zoned("z2", i) for i in range(3)] + [zoned("z3", 0)]
    async with running(tmp_path, nodes) as sim:
        await sim.create_native_group("zonal", 6, topology=ZONE)
        gang = names("zonal", 6)
        for n in gang:
            sim.create_pod(native_member(n, "zonal"))
        placed = await eventually(lambda: len(sim.bound(*gang)) == 6 and {sim.node_of(n) for n in gang}, 10,
                                  "the gang to be bound")
        assert {n.split("-")[0] for n in placed} == {"z2"}, placed


async def test_a_topology_gang_that_fits_only_across_zones_binds_nothing_and_says_so(tmp_path):
    nodes = [zoned(z, i) for z in ("z1", "z2", "z3") for i in range(2)]   # 4 cpu a zone, 12 in all
    async with running(tmp_path, nodes) as sim:
        await sim.create_native_group("wide", 6, topology=ZONE)
        gang = names("wide", 6)
        for n in gang:
            sim.create_pod(native_member(n, "wide"))
        want = (f'pod group is unschedulable: no single domain of topology key "{ZONE}" fits the pod group: it needs '
                f"6 member(s) in one domain, and the most any of its 3 domain(s) can take is 4")
        await eventually(lambda: all(sim.message(n) == want for n in gang), 10, "every member to say why")
        c = await eventually(lambda: sim.native_condition("wide"), 10, "PodGroupScheduled on the group")
        assert (c["status"], c["reason"], c["message"]) == (
            "False", "Unschedulable", "0/3 placements are available, first placement status: pod group is unschedulable")
        await stays(lambda: not sim.bound(*gang) and not sim.assumed(), 0.5, "a member bound across zones")
        for i in range(2, 4):
            sim.store.create(NODES, "", zoned("z3", i))
        placed = await eventually(lambda: len(sim.bound(*gang)) == 6 and {sim.node_of(n) for n in gang}, 10,
                                  "the gang once one zone has room")
        assert {n.split("-")[0] for n in placed} == {"z3"}, placed


async def test_the_crd_gets_the_topology_constraint_through_its_annotation(tmp_path):
    nodes = [zoned("z1", 0), zoned("z2", 0), zoned("z2", 1)]
    cfg = native_config(NATIVE_CONFIG.parent / "gang.yaml")
    async with running(tmp_path, nodes, cfg) as sim:
        body = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                "metadata": {"name": "crd", "namespace": NS,
                             "annotations": {"scheduling.tandem.dev/topology-key": ZONE}},
                "spec": {"minMember": 3}}
        await sim.client.create(f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NS}/podgroups", body)
        gang = names("crd", 3)
        for n in gang:
            sim.create_pod(make_pod(n, cpu="1", labels={"scheduling.x-k8s.io/pod-group": "crd"}))
        placed = await eventually(lambda: len(sim.bound(*gang)) == 3 and {sim.node_of(n) for n in gang}, 10,
                                  "the CRD gang to be bound")
        assert {n.split("-")[0] for n in placed} == {"z2"}, placed


# ---------------------------------------------------------------------------- a Job's group


async def test_a_job_created_group_is_scheduled_whole(tmp_path):
    async with running(tmp_path, [make_node(f"node-{i}", cpu="2") for i in range(2)]) as sim:
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": NS},
               "spec": {"completionMode": "Indexed", "parallelism": 4, "completions": 4,
                        "template": {"spec": {"schedulerName": "tandem-scheduler", "restartPolicy": "Never",
                                              "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                                              "resources": {"requests": {"cpu": "1"}}}]}}}}
        await sim.client.create(f"/apis/batch/v1/namespaces/{NS}/jobs", job)

        def job_pods() -> list[dict[str, Any]]:
            table = sim.store.table(PODS).objects
            return [p for (ns, _), e in list(table.items()) if ns == NS and
                    ((p := e.obj())["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name") == "train"]

        pods = await eventually(lambda: len(job_pods()) == 4 and job_pods(), 10, "the Job's four pods")
        group = pods[0]["spec"]["schedulingGroup"]["podGroupName"]
        assert all(p["spec"]["schedulingGroup"]["podGroupName"] == group for p in pods)
        await eventually(lambda: all(p["spec"].get("nodeName") for p in job_pods()), 10, "the Job's pods bound")
        await eventually(lambda: sim.native_condition(group).get("reason") == "Scheduled", 10, "its group Scheduled")


# ---------------------------------------------------------------------------- preemption


def prioritized(name: str, group: str, cpu: str, priority: str) -> dict[str, Any]:
    from tests.integration.test_preemption import pod
    return pod(name, cpu, priority, labels={GANG: group, "app": group}, schedulingGroup={"podGroupName": group})


async def test_a_native_gang_preempts_for_all_its_members_at_once_or_evicts_nothing(tmp_path):
    from tests.integration.test_preemption import HIGH, LOW, create_classes, pod
    async with running(tmp_path, [make_node(f"n{i}", cpu="2") for i in range(3)]) as sim:
        create_classes(sim)
        for i in range(3):
            sim.create_pod(pod(f"low-{i}", "1500m", LOW))
        await eventually(lambda: len(sim.bound(*(f"low-{i}" for i in range(3)))) == 3, 10, "the low pods")
        # four members of 1.5 cpu on three 2-cpu nodes: even evicting everything, one would not fit
        await sim.create_native_group("big", 4, priorityClassName=HIGH)
        for i in range(4):
            sim.create_pod(prioritized(f"big-{i}", "big", "1500m", HIGH))
        await eventually(lambda: sim.message("big-0"), 10, "big-0 to say why it waits")
        await stays(lambda: all(sim.pod(f"low-{i}") is not None for i in range(3)), 1.0,
                    "a gang that cannot be whole evicts nobody")
        await sim.create_native_group("fits", 3, priorityClassName=HIGH)
        for i in range(3):
            sim.create_pod(prioritized(f"fits-{i}", "fits", "1500m", HIGH))
        await eventually(lambda: len(sim.bound("fits-0", "fits-1", "fits-2")) == 3, 15, "the gang bound whole")
        assert all(sim.pod(f"low-{i}") is None for i in range(3))
        assert not sim.bound(*(f"big-{i}" for i in range(4)))


async def test_a_native_gang_with_disruption_mode_pod_group_is_preempted_whole_and_marked(tmp_path):
    from tests.integration.test_preemption import HIGH, LOW, create_classes, pod
    async with running(tmp_path, [make_node(f"n{i}", cpu="2") for i in range(2)]) as sim:
        create_classes(sim)
        await sim.create_native_group("batch", 2, disruptionMode="PodGroup", priorityClassName=LOW)
        for i in range(2):
            sim.create_pod(prioritized(f"batch-{i}", "batch", "1500m", LOW))
        await eventually(lambda: len(sim.bound("batch-0", "batch-1")) == 2, 10, "the victim gang bound")
        sim.create_pod(pod("high", "1500m", HIGH))
        await eventually(lambda: sim.bound("high"), 15, "the preemptor bound")
        # one node was enough for high, but the gang goes whole: never left below its minCount
        await eventually(lambda: sim.pod("batch-0") is None and sim.pod("batch-1") is None, 10,
                         "both members of the victim gang evicted")
        c = await eventually(lambda: sim.native_condition("batch", "DisruptionTarget"), 10,
                             "DisruptionTarget on the PodGroup")
        assert (c["status"], c["reason"]) == ("True", "PreemptionByScheduler"), c
        assert sim.native_condition("batch").get("reason") == "Scheduled", "its other condition is kept"
