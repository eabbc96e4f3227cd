"""Native gangs end to end: scheduling.k8s.io/v1alpha2 PodGroups, on the simulated cluster and a real kube-apiserver.

Every test runs twice: against the simulated cluster (``SimCluster(native_gangs=True)``, with its node
agent and Job controller) and against a real kube-apiserver 1.36 serving the alpha gang API with
upstream's runtime-config and gates, with kube-controller-manager's job-controller (the private
control plane of tests/support/envtest.py, started once for this module; that run is skipped,
saying why, without ``KUBEBUILDER_ASSETS``). The scheduler (:class:`App`, in process) runs tandem's
built-in configuration, what ``tandem-scheduler`` runs with no ``--config`` (``load_config(None)``):
its default profile, whose GangScheduling schedules these gangs. Changed for a test, and nothing
else: backoffs of 0.1 to 1 s (not 1 to 10 s), a client rate limit of 2000 qps (not 50) and no leader
election (one replica); the PreEnqueue and PodGroup reports of a held pod come after 0.3 s (not 5 s)
where a test waits for them.

The test reads and writes only through the API, as a user would: it creates nodes, PodGroups,
Workloads, Jobs and pods, and follows its namespace's pods and PodGroups with an informer, so its
checks read what the server last said. What the scheduler holds (members assumed and not bound) is
read from the in-process scheduler's cache, and so is how many members of a gang had a node when
its first bind was seen; that is when the informer brings the bind, a moment after it, so a gang
bound member by member could still show fewer than all. Pods join with
``spec.schedulingGroup.podGroupName``. No case here needs what only the simulated cluster can do (a
refused bind, the store's insides): those are in test_gangs.py.

What is checked is what kube-scheduler 1.36 does with the gates on (issue 22), and where tandem is
deliberately better: a gang is bound whole or not at all, its PodGroup's PodGroupScheduled condition
says so in upstream's words, a pod of a missing group waits naming it, a topology-constrained gang
goes into one domain or none (scheduler-plugins' CRD gangs too, through their annotation, under the
same default profile), a PodGroup made from a Workload's template and a Job's group are scheduled,
and preemption takes a gang whole when its disruption mode says so. Where tandem's words still
differ from kube-scheduler 1.36.2's, run by hand on the same real control plane, the test says what
kube-scheduler says and is marked xfail (strict), naming the difference.

The real server is shared by the module's tests and has no kubelet: each test works in a namespace
of its own, and when it ends its Jobs and pods are deleted (bound pods with ``gracePeriodSeconds: 0``,
as nothing else would end them) and its nodes removed, so the next test's scheduler sees nothing of it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio

from bench.simcluster.agent import AgentConfig
from scheduler.apiclient import APIClient, Conflict, NotFound, from_kubeconfig
from scheduler.app import App
from scheduler.config import SchedulerConfig, load_config
from scheduler.framework.clock import Clock
from scheduler.informers import Informer
from tests.integration.test_gangs import GangView, names, quick_reports  # noqa: F401 (a fixture)
from tests.integration.test_scheduler import eventually, make_node, make_pod, stays
from tests.support import envtest, servers
from tests.support.servers import Server

pytestmark = pytest.mark.asyncio(loop_scope="module")

V1A2 = "/apis/scheduling.k8s.io/v1alpha2"
GANG = "gang"          # the members' label naming their gang, for the test's bookkeeping only
ZONE = "topology.kubernetes.io/zone"
WAITING = ("pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, one or more plugins "
           "asked to wait and no plugin rejected pod")
_namespaces = itertools.count()

real = servers.real_apiserver_fixture(native_gangs=True, controllers=("job-controller",))


@pytest_asyncio.fixture(params=["sim", "real"], loop_scope="module")
async def server(request: pytest.FixtureRequest, tmp_path: Path,
                 real: envtest.RealAPIServer | None) -> AsyncIterator[Server]:
    # the simulated cluster's node agent runs its Job controller (and marks bound pods Running, which
    # nothing here reads)
    async with servers.serving(request.param, tmp_path, real, native_gangs=True,
                               agent=AgentConfig(ready_delay=0.05, tick=0.01)) as s:
        yield s


def default_config() -> SchedulerConfig:
    """tandem's built-in configuration, as with no ``--config``, sized for a test (the module docstring says how)."""
    builtin = load_config(None)
    return dataclasses.replace(builtin, pod_initial_backoff_seconds=0.1, pod_max_backoff_seconds=1,
                               client_qps=2000, client_burst=4000,
                               leader_election=dataclasses.replace(builtin.leader_election, leader_elect=False))


def native_member(name: str, group: str, cpu: str = "1", **kw: Any) -> dict[str, Any]:
    return make_pod(name, cpu=cpu, memory="64Mi", labels={GANG: group, "app": group},
                    schedulingGroup={"podGroupName": group}, **kw)


def gang_policy(min_count: int | None) -> dict[str, Any]:
    return {"gang": {"minCount": min_count}} if min_count else {"basic": {}}


@dataclass
class Cluster(GangView):
    """One test's view of a server: its namespace, what it made there, and the informers it reads.

    ``pods`` and ``groups`` follow the namespace's pods and native PodGroups (started by the caller); a
    pod seen bound for the first time has its gang noted (:meth:`GangView.note_bind`) then, a moment
    after the bind itself.
    """

    client: APIClient
    ns: str
    clock: Clock
    app: App | None = None
    first_bind_placed: dict[str, int] = field(default_factory=dict)
    nodes: list[str] = field(default_factory=list)       # the nodes this test made
    pods: Informer = field(init=False)
    groups: Informer = field(init=False)

    group_label = GANG

    def __post_init__(self) -> None:
        self.pods = Informer(self.client, f"/api/v1/namespaces/{self.ns}/pods", on_update=self.on_pod_update,
                             clock=self.clock)
        self.groups = Informer(self.client, f"{V1A2}/namespaces/{self.ns}/podgroups", clock=self.clock)

    def gang_key(self, group: str) -> str:
        return f"scheduling.k8s.io/{self.ns}/{group}"

    def pod(self, name: str) -> dict[str, Any] | None:
        return self.pods.store.get(f"{self.ns}/{name}")

    def pod_group(self, name: str) -> dict[str, Any] | None:
        return self.groups.store.get(f"{self.ns}/{name}")

    def on_pod_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if new["spec"].get("nodeName") and not old["spec"].get("nodeName"):
            self.note_bind(new["metadata"].get("labels") or {})

    def labelled(self, key: str, value: str) -> list[dict[str, Any]]:
        """The namespace's pods whose label ``key`` is ``value``."""
        return [p for p in list(self.pods.store.values()) if (p["metadata"].get("labels") or {}).get(key) == value]

    async def create(self, resource: str, body: dict[str, Any], api: str = V1A2) -> dict[str, Any]:
        """Create ``body`` in the test's namespace: ``resource`` under ``api`` (e.g. "podgroups")."""
        body = {**body, "metadata": {**body["metadata"], "namespace": self.ns}}
        return await self.client.create(f"{api}/namespaces/{self.ns}/{resource}", body)

    async def create_pod(self, body: dict[str, Any]) -> None:
        await self.create("pods", body, "/api/v1")

    async def create_native_group(self, name: str, min_count: int | None, topology: str = "", **spec: Any) -> None:
        body: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                                "metadata": {"name": name}, "spec": {"schedulingPolicy": gang_policy(min_count), **spec}}
        if topology:
            body["spec"]["schedulingConstraints"] = {"topology": [{"key": topology}]}
        await self.create("podgroups", body)

    async def create_gang(self, group: str, min_count: int | None, members: int = 0, topology: str = "",
                          **spec: Any) -> list[str]:
        """A native PodGroup and ``members`` (minCount by default) one-cpu members; their names."""
        await self.create_native_group(group, min_count, topology, **spec)
        gang = names(group, members or min_count or 0)
        for n in gang:
            await self.create_pod(native_member(n, group))
        return gang

    async def add_node(self, body: dict[str, Any]) -> None:
        await self.client.create("/api/v1/nodes", body)
        self.nodes.append(body["metadata"]["name"])

    async def delete_pod(self, name: str) -> None:
        """Delete a pod at once, bound or not (on the real server nothing else would end a bound one)."""
        with contextlib.suppress(NotFound):
            await self.client.delete(f"/api/v1/namespaces/{self.ns}/pods/{name}", {"gracePeriodSeconds": 0})

    async def ensure_priority_classes(self) -> None:
        """test_preemption's classes (cluster-scoped: on the shared real server an earlier test may have made them)."""
        from tests.integration.test_preemption import VALUES, priority_class
        for name in VALUES:
            with contextlib.suppress(Conflict):
                await self.client.create("/apis/scheduling.k8s.io/v1/priorityclasses", priority_class(name))

    async def clean_up(self) -> None:
        """Leave nothing a later test's scheduler would see: the Jobs (so that no pod is made again), every
        pod of the namespace (pods a finalizer keeps are terminating, which a scheduler skips), the nodes."""
        jobs = f"/apis/batch/v1/namespaces/{self.ns}/jobs"
        for job in (await self.client.list(jobs))["items"]:
            with contextlib.suppress(NotFound):
                await self.client.delete(f"{jobs}/{job['metadata']['name']}", {"propagationPolicy": "Background"})

        async def no_live_pod() -> bool:
            items = (await self.client.list(f"/api/v1/namespaces/{self.ns}/pods"))["items"]
            live = [p["metadata"]["name"] for p in items if not p["metadata"].get("deletionTimestamp")]
            for name in live:
                await self.delete_pod(name)
            return not live

        await eventually(no_live_pod, 10, f"every pod of {self.ns} deleted")
        for node in self.nodes:
            with contextlib.suppress(NotFound):
                await self.client.delete(f"/api/v1/nodes/{node}")


@contextlib.asynccontextmanager
async def running(server: Server, nodes: list[dict[str, Any]]) -> AsyncIterator[Cluster]:
    """A fresh namespace with ``nodes`` in the cluster, and tandem (built-in configuration) running for the block."""
    ns = f"gangs-{next(_namespaces)}-{server.kind}"
    clock = Clock()
    async with await from_kubeconfig(str(server.kubeconfig), qps=0, clock=clock) as client:
        await client.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        cluster = Cluster(client, ns, clock)
        try:
            async with cluster.pods, cluster.groups:
                await eventually(lambda: cluster.pods.synced.is_set() and cluster.groups.synced.is_set(), 10,
                                 "the test's informers to list")
                for n in nodes:
                    await cluster.add_node(n)
                async with App(default_config(), kubeconfig=str(server.kubeconfig)) as app:
                    cluster.app = app
                    yield cluster
                    assert app._loop_task is not None and not app._loop_task.done(), "the scheduling loop ended"
                cluster.app = None
        finally:
            await cluster.clean_up()


def zoned(zone: str, i: int, cpu: str = "2") -> dict[str, Any]:
    return make_node(f"{zone}-node-{i}", cpu=cpu, labels={ZONE: zone})


# ---------------------------------------------------------------------------- all or nothing


async def test_a_full_native_gang_is_bound_whole_and_its_pod_group_says_scheduled(server):
    async with running(server, [make_node(f"node-{i}", cpu="2") for i in range(4)]) as c:
        await bound_whole(c, "train", await c.create_gang("train", 8))
        assert c.first_bind_placed == {"train": 8}, "the first bind came after all 8 had a node"


async def bound_whole(c: Cluster, group: str, gang: list[str]) -> None:
    """Wait for every member of ``gang`` to be bound and its PodGroup to say Scheduled."""
    await eventually(lambda: len(c.bound(*gang)) == len(gang), 10, f"{group} to be bound whole")
    cond = await eventually(lambda: c.group_condition(group).get("status") == "True" and c.group_condition(group),
                            10, f"PodGroupScheduled True on {group}")
    assert (cond["reason"], cond["message"]) == ("Scheduled", ""), cond


async def short_gang(c: Cluster, group: str, size: int) -> list[str]:
    """A native gang of ``size`` one-cpu members that cannot all fit, every member saying why it waits; its names."""
    gang = await c.create_gang(group, size)
    await eventually(lambda: all(c.message(n) for n in gang), 10, f"every member of {group} to say why it waits")
    return gang


async def binds_none_and_says_why(c: Cluster, group: str, gang: list[str], nodes: int) -> None:
    """Members that would fit wait for the gang, the others fit nowhere, its PodGroup says it is unschedulable,
    and nothing is bound or held for it."""
    msgs = {c.message(n) for n in gang}
    assert WAITING in msgs, msgs
    assert all(m == WAITING or m.startswith(f"0/{nodes} nodes are available: {nodes} Insufficient cpu.")
               for m in msgs), msgs
    cond = await eventually(lambda: c.group_condition(group), 10, f"PodGroupScheduled on {group}")
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "False", "Unschedulable", "0/1 placements are available, first placement status: pod group is unschedulable")
    await stays(lambda: not c.bound(*gang) and not c.assumed(), 0.5, f"a member of {group} bound or held")


async def test_a_native_gang_of_6_with_room_for_4_binds_none_and_one_that_fits_binds_whole(server):
    async with running(server, [make_node(f"node-{i}", cpu="2") for i in range(2)]) as c:
        six = await short_gang(c, "six", 6)
        await binds_none_and_says_why(c, "six", six, 2)

        await bound_whole(c, "four", await c.create_gang("four", 4))
        assert c.first_bind_placed == {"four": 4}, "the first bind came after all 4 had a node"
        assert not c.bound(*six) and c.group_condition("six").get("status") == "False"


# kube-scheduler 1.36.2 with its gang gates (GenericWorkload, GangScheduling, TopologyAwareWorkloadScheduling),
# run by hand on this module's real control plane with the same nodes and pods: every member is tried; the
# four that fit wait for the gang, the two that fit nowhere say why, with DefaultPreemption's part
INSUFFICIENT = ("0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, "
                "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")


async def test_the_members_of_a_native_gang_of_6_with_room_for_4_say_what_kube_scheduler_says(server):
    async with running(server, [make_node(f"node-{i}", cpu="2") for i in range(2)]) as c:
        six = await short_gang(c, "six", 6)
        assert sorted(c.message(n) for n in six) == [INSUFFICIENT] * 2 + [WAITING] * 4


async def test_a_short_native_gang_binds_nothing_says_why_then_all_when_a_node_joins(server):
    async with running(server, [make_node(f"node-{i}", cpu="2") for i in range(3)]) as c:
        gang = await short_gang(c, "mpi", 8)
        await binds_none_and_says_why(c, "mpi", gang, 3)
        # which members are the two that fit nowhere depends on the order they are tried in: the events of the
        # others say they wait for the gang
        notes = [note for n in gang for note in await c.events(n, "FailedScheduling")]
        assert WAITING in notes, notes

        await c.add_node(make_node("node-3", cpu="2"))
        await eventually(lambda: len(c.bound(*gang)) == 8, 10, "the gang to be bound once a node joins")
        assert c.first_bind_placed == {"mpi": 8}
        await eventually(lambda: c.group_condition("mpi").get("status") == "True", 10, "the condition to turn True")


async def test_two_racing_native_gangs_end_one_whole_and_one_waiting(server):
    async with running(server, [make_node(f"node-{i}", cpu="2") for i in range(4)]) as c:
        await c.create_native_group("a", 6)
        await c.create_native_group("b", 6)
        a, b = names("a", 6), names("b", 6)
        for x, y in zip(a, b):
            await c.create_pod(native_member(x, "a"))
            await c.create_pod(native_member(y, "b"))

        def one_whole() -> bool:
            return sorted((len(c.bound(*a)), len(c.bound(*b)))) == [0, 6]

        await eventually(one_whole, 10, "one gang bound whole")
        await stays(lambda: one_whole() and not c.assumed(), 1.0, "the other gang to stay wholly pending")
        winner, loser = (a, b) if c.bound(*a) else (b, a)
        for n in winner:
            await c.delete_pod(n)
        await eventually(lambda: len(c.bound(*loser)) == 6, 10, "the waiting gang to bind once room is freed")


async def test_a_quorum_gang_binds_min_count_and_the_rest_as_room_comes(server):
    async with running(server, [make_node(f"node-{i}", cpu="2") for i in range(2)]) as c:
        gang = await c.create_gang("q", 3, members=5)
        await eventually(lambda: len(c.bound(*gang)) == 4, 10, "minCount members and what else fits")
        cond = await eventually(lambda: c.group_condition("q").get("status") == "True" and c.group_condition("q"),
                                10, "the group to be Scheduled")
        assert cond["reason"] == "Scheduled"
        await stays(lambda: c.group_condition("q").get("status") == "True", 0.5,
                    "the condition going back to False while a member is pending")
        await c.add_node(make_node("node-2", cpu="2"))
        await eventually(lambda: len(c.bound(*gang)) == 5, 10, "the last member once room comes")


async def test_a_basic_group_is_no_gang(server):
    async with running(server, [make_node("node-0", cpu="2")]) as c:
        pods = await c.create_gang("loose", None, members=3)
        await eventually(lambda: len(c.bound(*pods)) == 2, 10, "the members that fit, one by one")
        await eventually(lambda: c.group_condition("loose").get("status") == "True", 10, "Scheduled")
        await stays(lambda: len(c.bound(*pods)) == 2, 0.3, "a third member on a full node")


async def test_pods_of_a_missing_native_group_wait_naming_it_and_bind_once_it_exists(server, quick_reports):
    async with running(server, [make_node("node-0", cpu="4")]) as c:
        ghosts = names("ghost", 2)
        for n in ghosts:
            await c.create_pod(native_member(n, "ghost"))
        await c.create_pod(make_pod("control"))
        await eventually(lambda: c.node_of("control"), 10, "the control pod to be bound")
        want = (f'waiting for pod\'s pod group "ghost" to appear: PodGroup {c.ns}/ghost '
                '(scheduling.k8s.io/v1alpha2) not found')
        for n in ghosts:
            await eventually(lambda n=n: c.reason(n) == ("False", "NotReadyForScheduling", want), 10,
                             f"{n} to say why it waits")
        await stays(lambda: not c.bound(*ghosts), 0.5, "a pod of a missing PodGroup was bound")
        await c.create_native_group("ghost", 2)
        await eventually(lambda: len(c.bound(*ghosts)) == 2, 10, "the pods to bind once their PodGroup exists")


async def test_a_crd_group_of_the_same_name_is_not_a_native_pods_group(server, quick_reports):
    async with running(server, [make_node("node-0", cpu="4")]) as c:
        await c.create_group("shared", 1)   # scheduler-plugins' CRD, same name
        await c.create_pod(native_member("n0", "shared"))
        await eventually(lambda: c.reason("n0")[1] == "NotReadyForScheduling", 10, "the native pod to wait")
        await stays(lambda: not c.bound("n0"), 0.3, "a native pod bound through a CRD group")


# ---------------------------------------------------------------------------- a Workload's template


async def test_a_pod_group_made_from_a_workloads_template_is_scheduled_as_a_gang(server, quick_reports):
    async with running(server, [make_node(f"node-{i}", cpu="2") for i in range(2)]) as c:
        policy = gang_policy(4)
        await c.create("workloads", {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "Workload",
                                     "metadata": {"name": "train"},
                                     "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": policy}]}})
        # as a workload controller makes it: the template's policy copied, the template named
        ref = {"workload": {"workloadName": "train", "podGroupTemplateName": "workers"}}
        await c.create_native_group("train-workers", 4, podGroupTemplateRef=ref)
        gang = names("train-workers", 4)
        for n in gang[:3]:
            await c.create_pod(native_member(n, "train-workers"))
        held = ("False", "NotReadyForScheduling",
                f"PodGroup scheduling.k8s.io/{c.ns}/train-workers: 3 of 4 members exist; waiting for more")
        await eventually(lambda: all(c.reason(n) == held for n in gang[:3]), 10, "three members to say they wait")
        await stays(lambda: not c.bound(*gang) and not c.assumed(), 0.5, "a member bound before the fourth came")
        await c.create_pod(native_member(gang[3], "train-workers"))
        await bound_whole(c, "train-workers", gang)


# ---------------------------------------------------------------------------- topology


async def test_a_topology_gang_goes_into_the_one_zone_that_fits_it(server):
    nodes = [zoned("z1", i) for i in range(2)] + [zoned("z2", i) for i in range(3)] + [zoned("z3", 0)]
    async with running(server, nodes) as c:
        gang = await c.create_gang("zonal", 6, topology=ZONE)
        placed = await eventually(lambda: len(c.bound(*gang)) == 6 and {c.node_of(n) for n in gang}, 10,
                                  "the gang to be bound")
        assert {n.split("-")[0] for n in placed} == {"z2"}, placed


async def test_a_topology_gang_that_fits_only_across_zones_binds_nothing_and_says_so(server):
    nodes = [zoned(z, i) for z in ("z1", "z2", "z3") for i in range(2)]   # 4 cpu a zone, 12 in all
    async with running(server, nodes) as c:
        gang = await c.create_gang("wide", 6, topology=ZONE)
        want = (f'pod group is unschedulable: no single domain of topology key "{ZONE}" fits the pod group: it needs '
                f"6 member(s) in one domain, and the most any of its 3 domain(s) can take is 4")
        await eventually(lambda: all(c.message(n) == want for n in gang), 10, "every member to say why")
        cond = await eventually(lambda: c.group_condition("wide"), 10, "PodGroupScheduled on the group")
        assert (cond["status"], cond["reason"], cond["message"]) == (
            "False", "Unschedulable", "0/3 placements are available, first placement status: pod group is unschedulable")
        await stays(lambda: not c.bound(*gang) and not c.assumed(), 0.5, "a member bound across zones")
        for i in range(2, 4):
            await c.add_node(zoned("z3", i))
        placed = await eventually(lambda: len(c.bound(*gang)) == 6 and {c.node_of(n) for n in gang}, 10,
                                  "the gang once one zone has room")
        assert {n.split("-")[0] for n in placed} == {"z3"}, placed


async def test_the_crd_gets_the_topology_constraint_through_its_annotation(server):
    nodes = [zoned("z1", 0), zoned("z2", 0), zoned("z2", 1)]
    async with running(server, nodes) as c:
        await c.create("podgroups", {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                                     "metadata": {"name": "crd",
                                                  "annotations": {"scheduling.tandem.dev/topology-key": ZONE}},
                                     "spec": {"minMember": 3}}, "/apis/scheduling.x-k8s.io/v1alpha1")
        gang = names("crd", 3)
        for n in gang:
            await c.create_pod(make_pod(n, cpu="1", labels={"scheduling.x-k8s.io/pod-group": "crd"}))
        placed = await eventually(lambda: len(c.bound(*gang)) == 3 and {c.node_of(n) for n in gang}, 10,
                                  "the CRD gang to be bound")
        assert {n.split("-")[0] for n in placed} == {"z2"}, placed


# ---------------------------------------------------------------------------- a Job's group


async def test_a_job_created_group_is_scheduled_whole(server):
    async with running(server, [make_node(f"node-{i}", cpu="2") for i in range(2)]) as c:
        await c.create("jobs", {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
            "spec": {"completionMode": "Indexed", "parallelism": 4, "completions": 4,
                     "template": {"spec": {"schedulerName": "tandem-scheduler", "restartPolicy": "Never",
                                           "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                                           "resources": {"requests": {"cpu": "1"}}}]}}}},
            "/apis/batch/v1")

        def job_pods() -> list[dict[str, Any]]:
            return c.labelled("batch.kubernetes.io/job-name", "train")

        pods = await eventually(lambda: len(job_pods()) == 4 and job_pods(), 10, "the Job's four pods")
        group = pods[0]["spec"]["schedulingGroup"]["podGroupName"]
        assert all(p["spec"]["schedulingGroup"]["podGroupName"] == group for p in pods)
        assert c.pod_group(group)["spec"]["schedulingPolicy"] == gang_policy(4), "the Job controller's gang"
        await eventually(lambda: all(p["spec"].get("nodeName") for p in job_pods()), 10, "the Job's pods bound")
        await eventually(lambda: c.group_condition(group).get("reason") == "Scheduled", 10, "its group Scheduled")


# ---------------------------------------------------------------------------- preemption


def prioritized(name: str, group: str, cpu: str, priority: str) -> dict[str, Any]:
    from tests.integration.test_preemption import pod
    return pod(name, cpu, priority, labels={GANG: group, "app": group}, schedulingGroup={"podGroupName": group})


async def test_a_native_gang_preempts_for_all_its_members_at_once_or_evicts_nothing(server):
    from tests.integration.test_preemption import HIGH, LOW, pod
    async with running(server, [make_node(f"n{i}", cpu="2") for i in range(3)]) as c:
        await c.ensure_priority_classes()
        for i in range(3):
            await c.create_pod(pod(f"low-{i}", "1500m", LOW))
        await eventually(lambda: len(c.bound(*(f"low-{i}" for i in range(3)))) == 3, 10, "the low pods")
        # four members of 1.5 cpu on three 2-cpu nodes: even evicting everything, one would not fit
        await c.create_native_group("big", 4, priorityClassName=HIGH)
        for i in range(4):
            await c.create_pod(prioritized(f"big-{i}", "big", "1500m", HIGH))
        await eventually(lambda: c.message("big-0"), 10, "big-0 to say why it waits")
        await stays(lambda: all(c.pod(f"low-{i}") is not None for i in range(3)), 1.0,
                    "a gang that cannot be whole evicts nobody")
        await c.create_native_group("fits", 3, priorityClassName=HIGH)
        for i in range(3):
            await c.create_pod(prioritized(f"fits-{i}", "fits", "1500m", HIGH))
        await eventually(lambda: len(c.bound("fits-0", "fits-1", "fits-2")) == 3, 15, "the gang bound whole")
        assert all(c.pod(f"low-{i}") is None for i in range(3))
        assert not c.bound(*(f"big-{i}" for i in range(4)))


async def test_a_native_gang_with_disruption_mode_pod_group_is_preempted_whole_and_marked(server):
    from tests.integration.test_preemption import HIGH, LOW, pod
    async with running(server, [make_node(f"n{i}", cpu="2") for i in range(2)]) as c:
        await c.ensure_priority_classes()
        await c.create_native_group("batch", 2, disruptionMode="PodGroup", priorityClassName=LOW)
        for i in range(2):
            await c.create_pod(prioritized(f"batch-{i}", "batch", "1500m", LOW))
        await eventually(lambda: len(c.bound("batch-0", "batch-1")) == 2, 10, "the victim gang bound")
        await c.create_pod(pod("high", "1500m", HIGH))
        await eventually(lambda: c.bound("high"), 15, "the preemptor bound")
        # one node was enough for high, but the gang goes whole: never left below its minCount
        await eventually(lambda: c.pod("batch-0") is None and c.pod("batch-1") is None, 10,
                         "both members of the victim gang evicted")
        cond = await eventually(lambda: c.group_condition("batch", "DisruptionTarget"), 10,
                                "DisruptionTarget on the PodGroup")
        assert (cond["status"], cond["reason"]) == ("True", "PreemptionByScheduler"), cond
        assert c.group_condition("batch").get("reason") == "Scheduled", "its other condition is kept"
