"""GangReadiness and the PodGroup status controller end to end, on the simulated cluster.

Each test starts a :class:`SimCluster` (API server plus node agent, which
makes bound pods Running and Ready, except those annotated
``simcluster.tandem.dev/never-ready``) and the whole scheduler through
:class:`App` with a profile that enables GangReadiness with second-scale
timeouts. Tests run twice where it matters: with Coscheduling (members bind
together, the way gangs are meant to run) and without it (plain pods
labelled into a PodGroup, bound one by one), since GangReadiness and the
status controller must not depend on how the members got their nodes.

What is checked is what a user sees through the API: pods deleted and
recreated (bare pods get the same names back, even when the scheduler
process stops between the delete and the create), the PodGroup's
status.phase, counts, conditions and requeueState, and the events on the
PodGroup that say why.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any, AsyncIterator

import pytest

import plugins.gang_readiness
from bench.simcluster import SimCluster
from bench.simcluster.agent import NEVER_READY, TERMINATION_SECONDS, AgentConfig
from bench.simcluster.resources import lookup
from scheduler.apiclient import APIClient, from_kubeconfig
from scheduler.app import App
from scheduler.config import parse_config
from scheduler.framework.clock import Clock
from scheduler.framework.registry import REGISTRY, load_builtin_plugins
from tests.integration.test_scheduler import eventually, stays
from tests.support import envtest

PODS = lookup("", "v1", "pods")
NODES = lookup("", "v1", "nodes")
POD_GROUPS = lookup("scheduling.x-k8s.io", "v1alpha1", "podgroups")
SCHED = "tandem-scheduler"
NS = "default"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
OPT_IN = "scheduling.tandem.dev/wait-for-pods-ready"

load_builtin_plugins()
MODES = [pytest.param("coscheduling", id="with Coscheduling",
                      marks=pytest.mark.skipif("Coscheduling" not in REGISTRY, reason="Coscheduling not built yet")),
         pytest.param("plain", id="members bound one by one")]
GANG_MODE = "coscheduling" if "Coscheduling" in REGISTRY else "plain"


def make_config(mode: str, **readiness: Any) -> Any:
    enabled = [{"name": "GangReadiness"}]
    disabled: list[dict[str, str]] = []
    plugin_config = [{"name": "GangReadiness", "args": readiness}]
    if mode == "coscheduling":
        enabled.insert(0, {"name": "Coscheduling"})
        disabled.append({"name": "PrioritySort"})   # one queue sort per profile: Coscheduling's
        plugin_config.append({"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 5}})
    return parse_config({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "podInitialBackoffSeconds": 0.1, "podMaxBackoffSeconds": 1,
        "clientConnection": {"qps": 2000, "burst": 4000},
        "profiles": [{"schedulerName": SCHED,
                      "plugins": {"multiPoint": {"enabled": enabled, "disabled": disabled}},
                      "pluginConfig": plugin_config}],
    }, "<test>")


def make_node(name: str, cpu: str = "4") -> dict[str, Any]:
    capacity = {"cpu": cpu, "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": capacity, "allocatable": capacity,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}


def make_pod(name: str, group: str, cpu: str = "500m", never_ready: bool = False,
             owner: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "labels": {GROUP_LABEL: group}}
    if never_ready:
        meta["annotations"] = {NEVER_READY: "true"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": owner,
                                    "uid": f"{owner}-uid", "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"schedulerName": SCHED, "restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}}


def make_group(name: str, min_member: int, opt_in: bool = True) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS, "annotations": {OPT_IN: "true"} if opt_in else {}},
            "spec": {"minMember": min_member}}


class Env:
    def __init__(self, cluster: SimCluster, client: APIClient, kubeconfig: Path) -> None:
        self.cluster = cluster
        self.client = client
        self.kubeconfig = kubeconfig
        self.app: App | None = None    # the scheduler process while one runs

    @property
    def store(self) -> Any:
        return self.cluster.store

    def create(self, rt: Any, body: dict[str, Any]) -> None:
        self.store.create(rt, "" if rt is NODES else NS, body)

    def pod(self, name: str) -> dict[str, Any] | None:
        return self.store.get_obj(PODS, NS, name)

    def uid(self, name: str) -> str:
        return ((self.pod(name) or {}).get("metadata") or {}).get("uid", "")

    def node_of(self, name: str) -> str:
        return ((self.pod(name) or {}).get("spec") or {}).get("nodeName") or ""

    def group(self, name: str) -> dict[str, Any]:
        return self.store.get_obj(POD_GROUPS, NS, name) or {}

    def status(self, name: str) -> dict[str, Any]:
        return self.group(name).get("status") or {}

    def pods_ready(self, name: str) -> dict[str, Any]:
        for c in self.status(name).get("conditions") or ():
            if c.get("type") == "PodsReady":
                return c
        return {}

    async def events(self, regarding: str, reason: str | None = None, kind: str = "PodGroup") -> list[dict[str, Any]]:
        items = (await self.client.list(f"/apis/events.k8s.io/v1/namespaces/{NS}/events"))["items"]
        return [e for e in items if (e.get("regarding") or {}).get("name") == regarding
                and (e.get("regarding") or {}).get("kind") == kind and (reason is None or e.get("reason") == reason)]


@contextlib.asynccontextmanager
async def running(tmp_path: Path, cfg: Any, nodes: list[dict[str, Any]]) -> AsyncIterator[Env]:
    async with simulated(tmp_path, nodes) as env, scheduling(env, cfg):
        yield env


@contextlib.asynccontextmanager
async def simulated(tmp_path: Path, nodes: list[dict[str, Any]]) -> AsyncIterator[Env]:
    """The cluster and a client; the scheduler comes and goes with :func:`scheduling`."""
    kc = tmp_path / "kubeconfig"
    agent = AgentConfig(ready_delay=0.05, termination_delay=0.05, tick=0.01)
    async with SimCluster(nodes=0, agent=agent, kubeconfig=kc) as cluster:
        for n in nodes:
            cluster.store.create(NODES, "", n)
        async with await from_kubeconfig(str(kc), qps=0, clock=Clock()) as client:
            yield Env(cluster, client, kc)


@contextlib.asynccontextmanager
async def scheduling(env: Env, cfg: Any) -> AsyncIterator[App]:
    async with App(cfg, kubeconfig=str(env.kubeconfig)) as app:
        assert app.pod_group_controller is not None, "the podgroups CRD is served: status is kept"
        env.app = app
        yield app
        assert app._loop_task is not None and not app._loop_task.done(), "the scheduling loop ended"
    env.app = None


# ---------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("mode", MODES)
async def test_the_pods_ready_timeout_evicts_the_gang_and_requeues_it(tmp_path: Path, mode: str) -> None:
    cfg = make_config(mode, timeoutSeconds=1, backoffBaseSeconds=1, backoffMaxSeconds=1)
    async with running(tmp_path, cfg, [make_node("node-0"), make_node("node-1")]) as env:
        env.create(POD_GROUPS, make_group("train", 3))
        names = ["train-0", "train-1", "train-2"]
        for n in names:
            env.create(PODS, make_pod(n, "train", never_ready=n == "train-2"))
        await eventually(lambda: all(env.node_of(n) for n in names), 10, "the gang to be bound")
        first = {n: env.uid(n) for n in names}
        # Running is about pod phases: the never-Ready member runs too; PodsReady is about readiness
        await eventually(lambda: env.status("train").get("phase") == "Running", 5, "phase Running")
        await eventually(lambda: env.pods_ready("train").get("reason") == "WaitForStart", 5,
                         "PodsReady=False while the clock runs")

        cond = await eventually(lambda: env.pods_ready("train").get("reason") == "PodsReadyTimeout"
                                and env.pods_ready("train"), 10, "the PodsReady timeout")
        assert cond["status"] == "False"
        assert cond["message"] == ("2/3 required members became Ready within 1s of the gang being bound; "
                                   "evicted 3 pod(s); requeue 1 after a backoff of 1s")
        assert env.status("train")["requeueState"]["count"] == 1
        (ev,) = await eventually(lambda: env.events("train", "PodsReadyTimeout"), 5, "a PodsReadyTimeout event")
        assert ev["type"] == "Warning" and ev["note"] == cond["message"]
        assert ev["reportingController"] == SCHED
        await eventually(lambda: env.events("train-0", "PodsReadyTimeout", kind="Pod"), 5,
                         "each evicted pod to say why too")

        # bare pods: recreated under their own names, then bound again once the backoff is over
        def second_round() -> bool:
            return all(env.uid(n) and env.uid(n) != first[n] and env.node_of(n) for n in names)

        await eventually(second_round, 10, "the recreated members to be bound again")
        assert env.app.scheduler.frameworks[SCHED].plugins["GangReadiness"].recreated >= 3


async def test_podgroup_status_and_events_follow_the_gang(tmp_path: Path) -> None:
    cfg = make_config(GANG_MODE, timeoutSeconds=30)
    async with running(tmp_path, cfg, [make_node("node-0", cpu="2")]) as env:
        env.create(POD_GROUPS, make_group("web", 3))
        for i in range(3):
            env.create(PODS, make_pod(f"web-{i}", "web", cpu="1", owner="web-job"))

        ev = await eventually(lambda: env.events("web", "Unschedulable"), 10, "an event saying why")
        note = ev[0]["note"]
        assert ev[0]["type"] == "Warning"
        m = re.fullmatch(r"(\d)/3 members have a node; waiting for (\d): (.+)", note)
        assert m is not None, note
        assert int(m.group(1)) + int(m.group(2)) == 3
        if GANG_MODE == "plain":
            assert note == "2/3 members have a node; waiting for 1: 0/1 nodes are available: 1 Insufficient cpu."
        status = await eventually(lambda: env.status("web").get("phase") == "Scheduling" and env.status("web"),
                                  5, "phase Scheduling")
        assert status.get("scheduled", 0) == int(m.group(1))
        assert status["scheduleStartTime"]

        env.create(NODES, make_node("node-1", cpu="2"))
        status = await eventually(lambda: env.status("web").get("phase") == "Running" and env.status("web"),
                                  10, "phase Running once a node is added")
        assert {k: status.get(k) for k in ("scheduled", "running", "succeeded", "failed", "occupiedBy")} == {
            "scheduled": 3, "running": 3, "succeeded": None, "failed": None, "occupiedBy": "default/web-job"}
        (done,) = await eventually(lambda: env.events("web", "Scheduled"), 5, "the Scheduled event")
        assert done["type"] == "Normal" and done["note"] == "3/3 members have a node; the gang is complete"
        cond = await eventually(lambda: env.pods_ready("web").get("status") == "True" and env.pods_ready("web"),
                                5, "PodsReady=True")
        assert cond["reason"] == "PodsReady" and cond["message"] == "3/3 required members are Ready"


async def test_the_backoff_limit_fails_the_podgroup_and_keeps_its_pods_out(tmp_path: Path) -> None:
    cfg = make_config(GANG_MODE, timeoutSeconds=1, backoffBaseSeconds=0.5, backoffMaxSeconds=0.5,
                      backoffLimitCount=1)
    async with running(tmp_path, cfg, [make_node("node-0")]) as env:
        env.create(POD_GROUPS, make_group("flaky", 2))
        env.create(PODS, make_pod("flaky-0", "flaky"))
        env.create(PODS, make_pod("flaky-1", "flaky", never_ready=True))

        cond = await eventually(lambda: env.pods_ready("flaky").get("reason") == "RequeuingLimitExceeded"
                                and env.pods_ready("flaky"), 15, "the second timeout to fail the gang")
        assert cond["message"].endswith("the gang was requeued 1 time(s), its backoffLimitCount: the PodGroup "
                                        "failed and its pods are not scheduled any more")
        assert env.status("flaky")["requeueState"] == {"count": 2}
        await eventually(lambda: env.status("flaky").get("phase") == "Failed", 5, "phase Failed")
        (ev,) = await eventually(lambda: env.events("flaky", "RequeuingLimitExceeded"), 5, "the event")
        assert ev["type"] == "Warning"
        await eventually(lambda: _count(env.events("flaky", "PodsReadyTimeout"), 2), 5, "two PodsReadyTimeout events")

        # the bare pods come back (nothing is lost), and stay pending: the gang is not admitted again
        await eventually(lambda: env.pod("flaky-0") and env.pod("flaky-1")
                         and not env.node_of("flaky-0") and not env.node_of("flaky-1"), 5, "the pods recreated")
        await stays(lambda: not env.node_of("flaky-0") and not env.node_of("flaky-1")
                    and env.status("flaky").get("phase") == "Failed", 1.0, "a failed gang is not scheduled again")


async def _count(events: Any, n: int) -> bool:
    return len(await events) == n


async def test_a_bare_pod_evicted_before_a_restart_is_created_by_the_next_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the first process stops while the pod terminates (2 s), without waiting for it at shutdown
    monkeypatch.setattr(plugins.gang_readiness, "SHUTDOWN_GRACE_SECONDS", 0.1)
    cfg = make_config("plain", timeoutSeconds=0.5, backoffBaseSeconds=0.5, backoffMaxSeconds=0.5)
    async with simulated(tmp_path, [make_node("node-0")]) as env:
        env.create(POD_GROUPS, make_group("solo", 1))
        body = make_pod("solo-0", "solo", never_ready=True)
        body["metadata"]["annotations"][TERMINATION_SECONDS] = "2"
        env.create(PODS, body)
        first = ""
        async with scheduling(env, cfg):
            await eventually(lambda: env.node_of("solo-0"), 10, "the pod to be bound")
            first = env.uid("solo-0")
            await eventually(lambda: (env.pod("solo-0") or {}).get("metadata", {}).get("deletionTimestamp"), 10,
                             "the PodsReady timeout to evict it")
        assert env.uid("solo-0") == first, "still terminating when the first process is gone"
        record = env.group("solo")["metadata"]["annotations"][plugins.gang_readiness.RECREATE_ANNOTATION]
        assert first in record

        async with scheduling(env, cfg):
            await eventually(lambda: env.uid("solo-0") not in ("", first), 10, "the next process to create it")
            await eventually(lambda: plugins.gang_readiness.RECREATE_ANNOTATION not in
                             (env.group("solo")["metadata"].get("annotations") or {}), 5, "the record to go")
        pod = env.pod("solo-0") or {}
        assert pod["metadata"]["labels"] == {GROUP_LABEL: "solo"} and pod["spec"]["schedulerName"] == SCHED


@pytest.mark.skipif(envtest.skip_reason() is not None, reason=str(envtest.skip_reason()))
async def test_a_real_kube_apiserver_accepts_the_recreation_of_a_pod_it_refuses_to_copy(tmp_path: Path) -> None:
    """What recreation() leaves out is what kube-apiserver 1.36 refuses on create: ephemeral containers, and
    the priority, preemptionPolicy and overhead admission filled in from classes that changed since."""
    pods = f"/api/v1/namespaces/{NS}/pods"
    classes = "/apis/scheduling.k8s.io/v1/priorityclasses"
    runtimes = "/apis/node.k8s.io/v1/runtimeclasses"

    def priority_class(value: int, policy: str) -> dict[str, Any]:
        return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                "value": value, "preemptionPolicy": policy}

    def runtime_class(cpu: str) -> dict[str, Any]:
        return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "rc"},
                "handler": "runc", "overhead": {"podFixed": {"cpu": cpu}}}

    async with envtest.real_apiserver(tmp_path) as server:
        async with await from_kubeconfig(str(server.kubeconfig), qps=0, clock=Clock()) as client:
            await client.create(classes, priority_class(1000, "PreemptLowerPriority"))
            await client.create(runtimes, runtime_class("100m"))
            await client.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
            body = make_pod("p", "g")
            body["spec"].update(priorityClassName="high", runtimeClassName="rc")
            await client.create(pods, body)
            await client.create(f"{pods}/p/binding", {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
                                                      "target": {"kind": "Node", "name": "n1"}})
            await client.patch(f"{pods}/p/ephemeralcontainers", {"spec": {"ephemeralContainers": [
                {"name": "debug", "image": "busybox", "targetContainerName": "c"}]}},
                "application/strategic-merge-patch+json")
            await client.delete_pod(NS, "p")   # no kubelet: it stays, terminating, with all of the above
            old = await client.get(f"{pods}/p")
            assert old["spec"]["ephemeralContainers"] and old["spec"]["nodeName"] == "n1"
            # the classes change under it
            await client.delete(f"{classes}/high")
            await client.create(classes, priority_class(2000, "Never"))
            await client.delete(f"{runtimes}/rc")
            await client.create(runtimes, runtime_class("200m"))

            again = plugins.gang_readiness.recreation(old)
            again["metadata"]["name"] = "p-again"   # the old one holds its name until a kubelet lets go

            async def created() -> dict[str, Any] | None:
                try:   # admission reads the classes from an informer: a moment after they changed
                    return await client.create(pods, again)
                except Exception as exc:  # noqa: BLE001
                    if getattr(exc, "status", None) != 403:
                        raise
                    return None

            new = await eventually(created, 10, "the recreated pod to be admitted", interval=0.2)
            assert "ephemeralContainers" not in new["spec"] and "nodeName" not in new["spec"]
            assert (new["spec"]["priority"], new["spec"]["preemptionPolicy"], new["spec"]["overhead"]) == \
                (2000, "Never", {"cpu": "200m"}), "filled in again from the classes as they are now"
            assert new["metadata"]["labels"] == old["metadata"]["labels"]
            assert new["metadata"]["uid"] != old["metadata"]["uid"]
