"""Pod fields kube-scheduler 1.36's default profile honours, end to end: refused by name, or evaluated.

Upstream 1.36's native gangs: a pod's ``spec.schedulingGroup.podGroupName``
names a scheduling.k8s.io/v1alpha2 PodGroup, and kube-scheduler places its
members together or not at all. tandem's gang plugin (Coscheduling, or
GangScheduling as upstream names it, which the default profile runs) schedules
them (tests/integration/test_gangs_native.py); a profile without one (one
that disables GangScheduling) must keep
such a pod Pending with a FailedScheduling that names the field, never
place it alone (the check is in the core of the cycle, not in a plugin a
profile could leave out). The refusal cannot change while the pod lives
(the field is immutable), so the pod is not retried at every cluster event
either.

NodeDeclaredFeatures (beta, on by default in 1.36): a pod whose container
restarts all containers on exit goes only to a node whose kubelet declares
that feature in ``status.declaredFeatures``.
"""

from __future__ import annotations

import json
from typing import Any


from scheduler.config import SchedulerConfig
from tests.integration.test_scheduler import (
    MERGE, NODES, bound, config, eventually, make_node, make_pod, running, scheduled_condition, stays, unschedulable,
)

REFUSAL = ('pod uses spec.schedulingGroup (podGroupName "{group}"): this profile has no gang plugin to keep its '
           "pod group whole (enable GangScheduling or Coscheduling)")


def native_member(name: str, group: str, **kw: Any) -> dict[str, Any]:
    return make_pod(name, schedulingGroup={"podGroupName": group}, **kw)


async def assert_refused(env: Any, name: str, group: str, nodes: int) -> None:
    """PodScheduled=False, reason Unschedulable, in FitError words naming the field; the event says the same."""
    want = REFUSAL.format(group=group)
    c = await unschedulable(env, name)
    assert (c["status"], c["reason"], c["message"]) == ("False", "Unschedulable",
                                                        f"0/{nodes} nodes are available: {want}."), c
    notes = [e["note"] for e in await env.events_by_reason(name, "FailedScheduling")]
    assert notes and all(want in n for n in notes), notes
    assert not env.node_of(name)


NO_GANGS = {"plugins": {"multiPoint": {"disabled": [{"name": "GangScheduling"}]}}}


def no_gangs() -> SchedulerConfig:
    """The default profile with its gang plugin disabled (the default schedules native gangs: test_gangs_native.py)."""
    return config(profiles=[{"schedulerName": "tandem-scheduler", **NO_GANGS}])


def two_profiles() -> SchedulerConfig:
    """The default profile without GangScheduling, and one with every default plugin off but the queue sort and
    the binder."""
    return config(profiles=[
        {"schedulerName": "tandem-scheduler", **NO_GANGS},
        {"schedulerName": "tandem-bare", "plugins": {"multiPoint": {
            "disabled": [{"name": "*"}], "enabled": [{"name": "PrioritySort"}, {"name": "DefaultBinder"}]}}},
    ])


async def test_a_pod_naming_a_native_pod_group_is_refused_by_name_in_profiles_without_a_gang_plugin(tmp_path):
    async with running(tmp_path, [make_node("node-0")], two_profiles()) as env:
        env.create_pod(native_member("member", "trainers"))
        env.create_pod(native_member("bare-member", "trainers", scheduler="tandem-bare"))
        env.create_pod(make_pod("control"))
        env.create_pod(make_pod("bare-control", scheduler="tandem-bare"))
        await bound(env, "control", "bare-control")
        assert env.pod("member")["spec"]["schedulingGroup"] == {"podGroupName": "trainers"}
        for name in ("member", "bare-member"):
            await assert_refused(env, name, "trainers", nodes=1)
        await stays(lambda: not env.node_of("member") and not env.node_of("bare-member"), 0.3,
                    "a native gang member placed alone")


async def test_a_native_gang_of_six_with_room_for_four_gets_no_member_bound_without_a_gang_plugin(tmp_path):
    # two nodes with room for two 1-cpu members each (and the small control pod)
    nodes = [make_node(f"node-{i}", cpu="2200m") for i in range(2)]
    members = [f"member-{i}" for i in range(6)]
    async with running(tmp_path, nodes, no_gangs()) as env:
        for name in members:
            env.create_pod(native_member(name, "trainers", cpu="1"))
        env.create_pod(make_pod("control"))
        await bound(env, "control")
        for name in members:
            await assert_refused(env, name, "trainers", nodes=2)

        # nothing the cluster does can change the answer: room for all six appears, and no member is tried
        # again for it, let alone bound
        queue = env.app.scheduler.queue
        uids = [env.pod(n)["metadata"]["uid"] for n in members]
        attempts = [queue.infos[u].attempts for u in uids]
        for i in range(2, 4):
            env.create_node(make_node(f"node-{i}", cpu="4"))
        env.create_pod(make_pod("control-2", node_selector={"kubernetes.io/hostname": "node-3"}))
        await bound(env, "control-2")
        await stays(lambda: not any(env.node_of(n) for n in members), 0.3, "a native gang member bound")
        assert [queue.infos[u].attempts for u in uids] == attempts
        assert all(scheduled_condition(env.pod(n))["reason"] == "Unschedulable" for n in members)


async def test_the_refusal_waits_for_the_pods_own_update(tmp_path):
    async with running(tmp_path, [make_node("node-0")], no_gangs()) as env:
        env.create_pod(native_member("member", "trainers"))
        await assert_refused(env, "member", "trainers", nodes=1)
        uid = env.pod("member")["metadata"]["uid"]
        queue = env.app.scheduler.queue
        before = queue.infos[uid].attempts
        env.patch_pod("member", {"metadata": {"labels": {"app": "member", "tier": "gold"}}})
        await eventually(lambda: queue.infos.get(uid) is not None and queue.infos[uid].attempts > before,
                         what="the updated pod to be tried again")
        await stays(lambda: not env.node_of("member"), 0.2, "a native gang member placed after an update")


# ---------------------------------------------------------------------------- NodeDeclaredFeatures


RESTART_ALL = "RestartAllContainersOnContainerExits"


def restarts_all(name: str) -> dict[str, Any]:
    """A pod one of whose containers restarts all of them on exit code 42 (needs RESTART_ALL of its node)."""
    body = make_pod(name)
    body["spec"]["containers"][0].update(restartPolicy="Never", restartPolicyRules=[
        {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}])
    return body


def declaring(name: str, *features: str) -> dict[str, Any]:
    n = make_node(name)
    n["status"]["declaredFeatures"] = list(features)
    return n


async def test_a_pod_needing_a_node_feature_waits_for_a_node_that_declares_it(tmp_path):
    async with running(tmp_path, [declaring("old-0"), declaring("old-1", "SomethingElse")]) as env:
        env.create_pod(restarts_all("restarter"))
        env.create_pod(make_pod("control"))
        await bound(env, "control")
        c = await unschedulable(env, "restarter")
        assert c["reason"] == "Unschedulable", c
        # unresolvable: preemption cannot help (upstream's words, both parts)
        assert c["message"] == ("0/2 nodes are available: 2 node(s) didn't match Pod's required features. "
                                "no new claims to deallocate, preemption: "
                                "0/2 nodes are available: 2 Preemption is not helpful for scheduling."), c
        # the kubelet of old-1 starts declaring it: the status update requeues the pod, which goes there
        env.store.patch(NODES, "", "old-1", MERGE, json.dumps(
            {"status": {"declaredFeatures": ["SomethingElse", RESTART_ALL]}}).encode(), subresource="status")
        assert (await bound(env, "restarter")) == {"restarter": "old-1"}
