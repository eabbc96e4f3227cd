"""scheduler/eventhandlers.py: informer events -> the cache, the queue and the group index.

Handlers are called the way the informers call them, on a real
:class:`Scheduler` with a client that is never reached (no cycle runs).
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.config import parse_config
from scheduler.eventhandlers import node_update_action
from scheduler.framework import ActionType
from scheduler.framework.clock import Clock
from scheduler.model import Node, Taint
from scheduler.scheduler import Scheduler

SCHED = "tandem-scheduler"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
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
    assert s.cache.volumes.claim("default", "data").volume_name == "v"
    assert s.queue.where["uid-p"] in ("active", "backoff") and s.queue.where["uid-q"] == "unschedulable", \
        "only the pod using the claim"
    volume = {"metadata": {"name": "v", "resourceVersion": "1"}, "spec": {}}
    s.on_pv_add(volume)
    s.on_storage_class_add({"metadata": {"name": "local"}, "volumeBindingMode": "WaitForFirstConsumer"})
    assert "v" in s.cache.volumes.volumes and s.cache.volumes.classes["local"].binding_mode == "WaitForFirstConsumer"
    assert s.queue.where["uid-q"] in ("active", "backoff"), "a volume appearing may help any of them"
    s.on_pvc_delete(claim)
    s.on_pv_delete(volume)
    s.on_storage_class_delete({"metadata": {"name": "local"}})
    assert not (s.cache.volumes.claims or s.cache.volumes.volumes or s.cache.volumes.classes)


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
    assert s.cache.volumes.volumes["v"].topologies == (("topology.kubernetes.io/zone", frozenset({"b"})),)
