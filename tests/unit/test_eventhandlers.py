"""scheduler/eventhandlers.py: informer events -> the cache, the queue and the group index.

Handlers are called the way the informers call them, on a real
:class:`Scheduler` with a client that is never reached (no cycle runs).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.config import parse_config
from scheduler.eventhandlers import node_update_action
from scheduler.framework import ActionType
from scheduler.framework.clock import Clock, FakeClock
from scheduler.model import Node, Taint
from scheduler.scheduler import Scheduler

SCHED = "tandem-scheduler"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
GANG_CONFIG = Path(__file__).resolve().parents[2] / "config" / "gang.yaml"
PIPELINES_CONFIG = Path(__file__).resolve().parents[2] / "config" / "pipelines.yaml"
A = ActionType

BASE = Node(name="n1", labels={"zone": "a"}, annotations={"note": "x"}, allocatable={"cpu": 4000}, ready=True)


def changed(**fields: Any) -> Node:
    return Node(**{**{f: getattr(BASE, f) for f in ("name", "labels", "annotations", "allocatable", "ready")},
                   **fields})


@pytest.mark.parametrize("new, action", [
    pytest.param(changed(), 0, id="an update that changes nothing scheduling reads is no event"),
    pytest.param(changed(allocatable={"cpu": 8000}), A.UPDATE_NODE_ALLOCATABLE, id="allocatable"),
    pytest.param(changed(labels={"zone": "b"}), A.UPDATE_NODE_LABEL, id="labels"),
    pytest.param(changed(taints=(Taint("k"),)), A.UPDATE_NODE_TAINT, id="taints"),
    pytest.param(changed(unschedulable=True), A.UPDATE_NODE_TAINT, id="cordoning counts as a taint change"),
    pytest.param(changed(ready=False), A.UPDATE_NODE_CONDITION, id="readiness"),
    pytest.param(changed(annotations={}), A.UPDATE_NODE_ANNOTATION, id="annotations"),
    pytest.param(changed(declared_features=frozenset({"RestartAllContainersOnContainerExits"})),
                 A.UPDATE_NODE_DECLARED_FEATURE, id="declared features (status.declaredFeatures)"),
    pytest.param(changed(labels={}, ready=False), A.UPDATE_NODE_LABEL | A.UPDATE_NODE_CONDITION,
                 id="several changes are one event with several actions"),
])
def test_node_update_action(new: Node, action: int) -> None:
    assert node_update_action(BASE, new) == action


# ---------------------------------------------------------------------------- handlers


class NoAPI:
    async def bind(self, *args: Any) -> None:
        raise AssertionError("no cycle runs in these tests")

    async def patch_pod_status(self, *args: Any) -> None:
        raise AssertionError("no cycle runs in these tests")


def scheduler() -> Scheduler:
    cfg = parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"},
                       "<test>")
    s = Scheduler(cfg, NoAPI(), clock=Clock())
    s.on_node_add({"metadata": {"name": "n1", "uid": "n1"},
                   "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
    return s


def pod(name: str, group: str = "", node: str = "", scheduler_name: str = SCHED) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                     "labels": {GROUP_LABEL: group} if group else {}},
        "spec": {"schedulerName": scheduler_name,
                 "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"phase": "Pending"}}
    if node:
        obj["spec"]["nodeName"] = node
    return obj


def test_our_unscheduled_pods_are_queued_and_others_are_not() -> None:
    s = scheduler()
    s.on_pod_add(pod("mine"))
    s.on_pod_add(pod("theirs", scheduler_name="default-scheduler"))
    assert "uid-mine" in s.queue and "uid-theirs" not in s.queue
    assert set(s.pods) == {"uid-mine", "uid-theirs"}


def test_a_pod_bound_by_someone_else_leaves_the_queue_and_takes_room() -> None:
    s = scheduler()
    s.on_pod_add(pod("p"))
    s.on_pod_update(pod("p"), pod("p", node="n1"))
    assert "uid-p" not in s.queue
    assert s.cache.where("uid-p") == "n1"
    s.on_pod_delete(pod("p", node="n1"))
    assert s.cache.where("uid-p") is None and "uid-p" not in s.pods


def test_the_group_index_follows_pods_that_join_move_and_leave_groups() -> None:
    s = scheduler()
    changes: list[str] = []
    s.group_listeners.append(changes.append)
    s.on_pod_add(pod("a", group="g1"))
    s.on_pod_add(pod("b", group="g1"))
    assert s.cache.gangs.members == {"default/g1": {"uid-a", "uid-b"}}
    s.on_pod_update(pod("a", group="g1"), pod("a", group="g2"))
    assert s.cache.gangs.members == {"default/g1": {"uid-b"}, "default/g2": {"uid-a"}}
    s.on_pod_delete(pod("b", group="g1"))
    assert s.cache.gangs.members == {"default/g2": {"uid-a"}}, "an emptied group is dropped from the index"
    assert changes == ["default/g1", "default/g1", "default/g1", "default/g2", "default/g1"]


def test_namespaces_and_their_labels_are_kept_in_the_cache() -> None:
    s = scheduler()
    s.on_namespace_add({"metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "team-a"}}})
    s.on_namespace_add({"metadata": {"name": "bare"}})
    s.on_namespace_update({"metadata": {"name": "team-a"}},
                          {"metadata": {"name": "team-a", "labels": {"env": "prod", "bad": 3}}})
    assert s.cache.namespaces == {"team-a": {"env": "prod"}, "bare": {}}, "labels are a map of strings"
    s.on_namespace_delete({"metadata": {"name": "bare"}})
    s.on_namespace_add({"metadata": {"labels": {"no": "name"}}})  # malformed: logged, nothing kept
    assert s.cache.namespaces == {"team-a": {"env": "prod"}}


def test_every_profiles_handle_reaches_the_one_spread_selectors() -> None:
    cfg = parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                        "profiles": [{"schedulerName": "a"}, {"schedulerName": "b"}]}, "<test>")
    s = Scheduler(cfg, NoAPI(), clock=Clock())
    assert [fw.handle.spread_selectors for fw in s.frameworks.values()] == [s.spread_selectors] * 2
    s.spread_selectors.on_add("Service", {"metadata": {"name": "web", "namespace": "default"},
                                          "spec": {"selector": {"app": "web"}}})
    handle = s.frameworks["b"].handle
    assert handle.spread_selectors.default_selector("default", {"app": "web"}, ()) == ({"app": "web"}, [])


def _claim_pod(name: str, claim: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"schedulerName": SCHED, "containers": [{"name": "c", "image": "x"}],
                     "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]},
            "status": {"phase": "Pending"}}


def test_volume_objects_are_kept_and_their_events_requeue_pods_waiting_for_them() -> None:
    s = scheduler()
    s.on_pod_add(_claim_pod("p", "data"))
    s.on_pod_add(_claim_pod("q", "other"))
    for uid in ("uid-p", "uid-q"):   # as VolumeBinding's PreFilter leaves them
        qi = s.queue.infos[uid]
        s.queue._set_where(uid, "inflight")
        qi.unschedulable_plugins = {"VolumeBinding"}
        s.queue.requeue_failed(qi, unschedulable=True)
    claim = {"metadata": {"name": "data", "namespace": "default"}, "spec": {"volumeName": "v"}}
    s.on_pvc_add(claim)
    assert s.cache.volumes.assumed_claim("default", "data").volume_name == "v"
    assert s.queue.where["uid-p"] in ("active", "backoff") and s.queue.where["uid-q"] == "unschedulable", \
        "only the pod using the claim"
    volume = {"metadata": {"name": "v", "resourceVersion": "1"}, "spec": {}}
    s.on_pv_add(volume)
    s.on_storage_class_add({"metadata": {"name": "local"}, "volumeBindingMode": "WaitForFirstConsumer"})
    assert "v" in s.cache.volumes.api_volumes and s.cache.volumes.classes["local"].binding_mode == "WaitForFirstConsumer"
    assert s.queue.where["uid-q"] in ("active", "backoff"), "a volume appearing may help any of them"
    s.on_pvc_delete(claim)
    s.on_pv_delete(volume)
    s.on_storage_class_delete({"metadata": {"name": "local"}})
    assert not (s.cache.volumes.api_claims or s.cache.volumes.api_volumes or s.cache.volumes.classes)


def test_a_volume_whose_zone_labels_change_requeues_pods_volume_zone_rejected() -> None:
    s = scheduler()
    s.on_pv_add({"metadata": {"name": "v", "labels": {"topology.kubernetes.io/zone": "a"}}, "spec": {}})
    s.on_pod_add(_claim_pod("p", "data"))
    qi = s.queue.infos["uid-p"]
    s.queue._set_where("uid-p", "inflight")
    qi.unschedulable_plugins = {"VolumeZone"}
    s.queue.requeue_failed(qi, unschedulable=True)
    s.on_pv_update({}, {"metadata": {"name": "v", "labels": {"topology.kubernetes.io/zone": "a", "x": "y"}},
                        "spec": {}})
    assert s.queue.where["uid-p"] == "unschedulable", "a label VolumeZone does not read changed"
    s.on_pv_update({}, {"metadata": {"name": "v", "labels": {"topology.kubernetes.io/zone": "b"}}, "spec": {}})
    assert s.queue.where["uid-p"] in ("active", "backoff")
    assert s.cache.volumes.api_volumes["v"].topologies == (("topology.kubernetes.io/zone", frozenset({"b"})),)


def _resizing_pod(name: str, status_cpu: str) -> dict[str, Any]:
    """A pod bound to n1 by someone else, asking 1 cpu, whose container status (a kubelet's) reports ``status_cpu``."""
    obj = pod(name, node="n1", scheduler_name="default-scheduler")
    obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"
    obj["status"] = {"phase": "Running",
                     "containerStatuses": [{"name": "c", "resources": {"requests": {"cpu": status_cpu}}}]}
    return obj


def test_a_resize_down_finishing_on_a_bound_pod_wakes_the_pods_waiting_for_room() -> None:
    s = scheduler()
    s.on_pod_add(_resizing_pod("big", "3"))
    assert s.cache.pods["uid-big"].pod.requests["cpu"] == 3000, "charged what its status holds"
    waiting = pod("waiting")
    waiting["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    s.on_pod_add(waiting)
    qi = s.queue.infos["uid-waiting"]
    s.queue._set_where("uid-waiting", "inflight")     # as NodeResourcesFit's Filter leaves it
    qi.unschedulable_plugins = {"NodeResourcesFit"}
    s.queue.requeue_failed(qi, unschedulable=True)
    s.on_pod_update(_resizing_pod("big", "3"), _resizing_pod("big", "3"))
    assert s.queue.where["uid-waiting"] == "unschedulable", "a status update holding as much frees nothing"
    s.on_pod_update(_resizing_pod("big", "3"), _resizing_pod("big", "1"))
    assert s.cache.pods["uid-big"].pod.requests["cpu"] == 1000
    assert s.queue.where["uid-waiting"] in ("active", "backoff"), "the resize down is a scale-down event"


def _run_pod(name: str, node: str = "", phase: str = "Running") -> dict[str, Any]:
    obj = pod(name, node=node)
    obj["metadata"]["labels"]["tekton.dev/pipelineRun"] = "run-1"
    obj["status"]["phase"] = phase
    return obj


def test_a_finished_pipeline_pod_frees_its_node_but_its_run_keeps_the_node_until_it_is_deleted() -> None:
    cfg = parse_config(yaml.safe_load(PIPELINES_CONFIG.read_text()), str(PIPELINES_CONFIG))
    s = Scheduler(cfg, NoAPI(), clock=Clock())
    s.on_node_add({"metadata": {"name": "n1", "uid": "n1"},
                   "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
    run = ("run", "tekton.dev/pipelineRun", "default", "run-1")
    s.on_pod_add(_run_pod("t1", node="n1"))
    s.on_pod_update(_run_pod("t1", node="n1"), _run_pod("t1", node="n1", phase="Succeeded"))
    assert s.cache.where("uid-t1") is None, "a finished pod is charged nowhere"
    assert s.cache.runs.holder(run).node == "n1"
    s.on_pod_add(_run_pod("t0", node="n1", phase="Failed"))   # listed already finished (a restart)
    assert s.cache.runs.is_finished_member("uid-t0")
    waiting = _run_pod("t2", phase="Pending")
    s.on_pod_add(waiting)
    qi = s.queue.infos["uid-t2"]
    s.queue._set_where("uid-t2", "inflight")
    qi.unschedulable_plugins = {"NodeColocation"}
    s.queue.requeue_failed(qi, unschedulable=True)
    s.on_pod_delete(_run_pod("t1", node="n1", phase="Succeeded"))
    assert s.queue.where["uid-t2"] in ("active", "backoff"), "a finished pod of its run deleted: it may move"
    s.on_pod_delete(_run_pod("t0", node="n1", phase="Failed"))
    assert s.cache.runs.holder(run) is None, "deleted: the run holds nothing"


# ---------------------------------------------------------------------------- PodGroup deletion


class StatusAPI:
    """Records the PodScheduled writes of pods that failed a cycle (the only API use of these tests)."""

    def __init__(self) -> None:
        self.status: dict[str, dict[str, Any]] = {}   # pod name -> the last status it was given

    async def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self.status[name] = patch["status"]


async def test_a_deleted_pod_group_rejects_its_members_waiting_at_permit_at_once() -> None:
    clock = FakeClock()
    api = StatusAPI()
    s = Scheduler(parse_config(yaml.safe_load(GANG_CONFIG.read_text()), str(GANG_CONFIG)), api, clock=clock)
    s.on_node_add({"metadata": {"name": "n1", "uid": "n1"},
                   "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})
    group = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": "g", "namespace": "default", "uid": "pg-g"},
             "spec": {"minMember": 4, "scheduleTimeoutSeconds": 900}}
    s.on_pod_group_add(group)
    # four members, one left to a scheduler that is not running: three get a node and wait for the fourth
    s.on_pod_add(pod("g-other", group="g", scheduler_name="default-scheduler"))
    gang = ["g-0", "g-1", "g-2"]
    for n in gang:
        s.on_pod_add(pod(n, group="g"))
    s.schedule_next(await s.queue.pop())
    fw = s.frameworks[SCHED]
    assert sorted(wp.pod.name for wp in fw.iterate_waiting_pods()) == gang
    assert len(s.cache.gangs.placed_members("default/g")) == 3

    s.on_pod_group_delete(group)   # no clock advance: the 900 s hold must not be what ends it

    waiting = fw.iterate_waiting_pods()
    assert [wp.future.done() for wp in waiting] == [True] * 3, "rejected at once"
    assert {wp.future.result().message() for wp in waiting} == {"PodGroup default/g was deleted"}
    assert s.cache.gangs.placed_members("default/g") == {}, "their room is free at once"
    assert all(s.cache.where(f"uid-{n}") is None for n in gang)
    for _ in range(20):   # the binding tasks see the rejection, requeue and report each pod
        await asyncio.sleep(0)
    assert fw.iterate_waiting_pods() == []
    for n in gang:
        cond = api.status[n]["conditions"][0]
        assert (cond["type"], cond["status"], cond["reason"]) == ("PodScheduled", "False", "Unschedulable")
        assert cond["message"] == "PodGroup default/g was deleted", "each member says why in the same words"
        assert f"uid-{n}" in s.queue, "requeued, not lost"
    # they wait for their PodGroup, and come back with it
    for n in gang:
        assert s.frameworks[SCHED].pre_enqueue(s.pods[f"uid-{n}"]).message() == "PodGroup default/g not found"


def test_csinodes_attachments_and_claims_binding_keep_the_attach_counts_and_requeue_pods_over_the_limit() -> None:
    s = scheduler()
    driver = "ebs.csi.aws.com"
    csinode = {"metadata": {"name": "n1"}, "spec": {"drivers": [{"name": driver, "allocatable": {"count": 1}}]}}
    s.on_csinode_add(csinode)
    s.on_storage_class_add({"metadata": {"name": "gp3"}, "provisioner": driver})
    s.on_pvc_add({"metadata": {"name": "held", "namespace": "default"}, "spec": {"storageClassName": "gp3"}})
    holder = _claim_pod("holder", "held")
    holder["spec"]["nodeName"] = "n1"
    s.on_pod_add(holder)
    att, row = s.cache.attachments, s.cache.nodes.row("n1")
    assert att.limit[row, att.drivers[driver]] == 1 and att.used[row, att.drivers[driver]] == 1, \
        "an unbound claim of a placed pod counts under its class's provisioner"
    # the claim binds: it is its volume now, counted once with the attachment of that volume
    s.on_pv_add({"metadata": {"name": "pv"}, "spec": {"csi": {"driver": driver, "volumeHandle": "vol-1"}}})
    s.on_pvc_update({}, {"metadata": {"name": "held", "namespace": "default"},
                         "spec": {"storageClassName": "gp3", "volumeName": "pv"}})
    va = {"metadata": {"name": "va"}, "spec": {"nodeName": "n1", "attacher": driver,
                                               "source": {"persistentVolumeName": "pv"}}}
    s.on_volume_attachment_add(va)
    assert att.nodes_using == {f"{driver}/vol-1": {"n1"}} and att.used[row, att.drivers[driver]] == 1
    s.on_pod_add(_claim_pod("p", "held"))
    qi = s.queue.infos["uid-p"]
    s.queue._set_where("uid-p", "inflight")
    qi.unschedulable_plugins = {"NodeVolumeLimits"}
    s.queue.requeue_failed(qi, unschedulable=True)
    csinode["spec"]["drivers"][0]["allocatable"]["count"] = 0
    s.on_csinode_update({}, csinode)
    assert s.queue.where["uid-p"] == "unschedulable", "a count that shrank helps nobody"
    s.on_volume_attachment_delete(va)
    assert s.queue.where["uid-p"] in ("active", "backoff"), "the detached volume is the pod's claim's"
    s.on_pod_delete(holder)
    s.on_csinode_delete(csinode)
    assert att.used[row].sum() == 0 and att.limit[row].max() == -1 and not att.csinodes and not att.attachments
