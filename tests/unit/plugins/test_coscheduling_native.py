"""plugins/coscheduling.py on upstream's native gangs (scheduling.k8s.io/v1alpha2 PodGroups).

The same mechanism as for scheduler-plugins' CRD (tests/unit/plugins/test_coscheduling.py), driven
through the same stand-ins; what differs is how a pod joins (spec.schedulingGroup), the gang key,
and upstream's words.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from plugins.coscheduling import NATIVE_GANG_WAITING, Coscheduling, GangScheduling
from scheduler.framework import Code, CycleState, Status
from scheduler.framework.registry import REGISTRY
from scheduler.framework.runtime import Diagnosis
from scheduler.model import Pod, parse_native_pod_group, parse_pod_group
from tests.unit.plugins.test_coscheduling import NS, Env

OK, U, UU, WAIT = Code.SUCCESS, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.WAIT


def native_group(env: Env, name: str = "g", min_count: int | None = 3, **spec: Any) -> None:
    policy = {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
    env.cache.gangs.set_group(parse_native_pod_group({
        "metadata": {"name": name, "namespace": NS, "creationTimestamp": "2024-05-01T10:00:00Z"},
        "spec": {"schedulingPolicy": policy, **spec}}))


def member(name: str, group: str = "g", crd_group: str = "", cpu: int = 1000) -> Pod:
    return Pod(uid=name, namespace=NS, name=name, scheduling_group=group, pod_group=crd_group,
               requests={"cpu": cpu})


def test_gang_scheduling_is_the_same_mechanism_under_upstreams_name_without_queue_sort() -> None:
    assert REGISTRY["GangScheduling"] is GangScheduling
    assert "QueueSort" not in GangScheduling.EXTENSION_POINTS and "QueueSort" in Coscheduling.EXTENSION_POINTS
    assert GangScheduling.EXTENSION_POINTS | {"QueueSort"} == Coscheduling.EXTENSION_POINTS


@pytest.mark.parametrize("setup, pod, code, msg", [
    pytest.param(lambda env: None, member("a"), UU,
                 'waiting for pod\'s pod group "g" to appear: PodGroup ns/g (scheduling.k8s.io/v1alpha2) not found',
                 id="a missing native group is named, with its API"),
    pytest.param(lambda env: env.group("g", 1), member("a"), UU,
                 'waiting for pod\'s pod group "g" to appear: PodGroup ns/g (scheduling.k8s.io/v1alpha2) not found',
                 id="a CRD group of the same name is not the pod's group"),
    pytest.param(lambda env: native_group(env, "g", 1), member("a", crd_group="old"), UU,
                 'pod names two pod groups: spec.schedulingGroup.podGroupName "g" (scheduling.k8s.io/v1alpha2) '
                 'and "old" (scheduling.x-k8s.io/v1alpha1, label scheduling.x-k8s.io/pod-group or annotation '
                 'scheduling.k8s.io/group-name); a pod joins one gang',
                 id="a pod naming both APIs is held, naming both"),
    pytest.param(lambda env: native_group(env, "g", 2), member("a"), UU,
                 "PodGroup scheduling.k8s.io/ns/g: 1 of 2 members exist; waiting for more",
                 id="a short native gang waits with tandem's numbers"),
    pytest.param(lambda env: native_group(env, "g", None), member("a"), OK, "",
                 id="a basic group is no gang: its pod goes on alone once the group exists"),
    pytest.param(lambda env: env.cache.gangs.set_group(parse_native_pod_group(
                     {"metadata": {"name": "g", "namespace": NS}, "spec": {}})), member("a"), UU,
                 "PodGroup scheduling.k8s.io/ns/g: spec.schedulingPolicy: Required value: one of gang or basic",
                 id="a group without schedulingPolicy holds its pods, naming the field"),
    pytest.param(lambda env: native_group(env, "g", 1, resourceClaims=[{"name": "gpu"}]), member("a"), UU,
                 "PodGroup scheduling.k8s.io/ns/g: spec.resourceClaims: tandem does not allocate dynamic "
                 "resources to pod groups", id="resourceClaims are refused by name"),
])
def test_pre_enqueue_on_native_groups(setup: Any, pod: Pod, code: Code, msg: str) -> None:
    env = Env()
    setup(env)
    env.add(pod)
    st = env.plugin.pre_enqueue(pod)
    assert (st.code, st.message()) == (code, msg)


def test_a_native_and_a_crd_group_of_one_name_are_two_gangs() -> None:
    env = Env()
    native_group(env, "g", 2)
    env.group("g", 2)
    env.add(member("n1"), member("n2"), dataclasses.replace(member("c1", group=""), pod_group="g", scheduling_group=None))
    assert env.cache.gangs.member_uids("scheduling.k8s.io/ns/g") == {"n1", "n2"}
    assert env.cache.gangs.member_uids("ns/g") == {"c1"}
    assert env.plugin.pre_enqueue(member("n1")).is_success(), "the native gang has its two members"
    c1 = env.handle.pods["c1"]
    assert env.plugin.pre_enqueue(c1).message() == "PodGroup ns/g: 1 of 2 members exist; waiting for more"


def test_permit_holds_a_native_member_until_min_count_members_have_a_node() -> None:
    env = Env()
    native_group(env, "g", 2)
    a, b = member("a"), member("b")
    env.add(a, b)
    wa = env.wait(a)
    st, _ = env.plugin.permit(CycleState(), a, "n0")
    assert st.code == WAIT
    env.cache.assume(b, "n1")
    st, _ = env.plugin.permit(CycleState(), b, "n1")
    assert st.is_success() and wa.allowed_by == ["Coscheduling"]


def test_a_doomed_native_gang_says_upstreams_words_and_its_misfit_only_why() -> None:
    env = Env()
    native_group(env, "g", 3)
    a, b, c = member("a"), member("b"), member("c", cpu=64000)
    env.add(a, b, c)
    wa = env.wait(a)
    diag = Diagnosis(num_all_nodes=2)
    diag.add("Insufficient cpu", 2)
    _, st = env.plugin.post_filter(CycleState(), c, diag)
    assert st.code == U and st.message() == "", "the misfit's own message stays upstream's 0/N nodes text"
    assert wa.rejection == NATIVE_GANG_WAITING
    assert env.plugin.gang_failed(c, Status(U, diag.message())) == NATIVE_GANG_WAITING, \
        "its siblings not tried yet get the same words"


def test_give_up_rejects_the_waiting_members() -> None:
    env = Env()
    native_group(env, "g", 3)
    a = member("a")
    env.add(a, member("b"), member("c"))
    wa = env.wait(a)
    env.plugin.give_up("scheduling.k8s.io/ns/g", "pod group is unschedulable: no domain")
    assert wa.rejection == "pod group is unschedulable: no domain"
    assert not env.cache.is_assumed("a"), "its room is given back"


@pytest.mark.parametrize("obj, want", [
    pytest.param({"spec": {"schedulingPolicy": {"gang": {"minCount": 4}}}},
                 dict(min_member=4, quorum=4, topology_key="", disruption_mode="Pod", priority=None, problem=""),
                 id="minCount is the quorum"),
    pytest.param({"spec": {"schedulingPolicy": {"basic": {}}}}, dict(min_member=0, quorum=1),
                 id="basic is no gang"),
    pytest.param({"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "disruptionMode": "PodGroup",
                           "priority": 1000, "schedulingConstraints": {"topology": [{"key": "rack"}]}}},
                 dict(topology_key="rack", disruption_mode="PodGroup", priority=1000),
                 id="topology key, disruption mode and priority carry over"),
    pytest.param({"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "disruptionMode": "Pod"}},
                 dict(disruption_mode="Pod"), id="Pod disruption is one by one"),
    pytest.param({"spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                           "podGroupTemplateRef": {"workload": {"workloadName": "w", "podGroupTemplateName": "t"}}}},
                 dict(problem="", quorum=2), id="the template reference is not read (as upstream's scheduler)"),
])
def test_parse_native_pod_group(obj: dict[str, Any], want: dict[str, Any]) -> None:
    pg = parse_native_pod_group({"metadata": {"name": "g", "namespace": NS}, **obj})
    assert pg.native and pg.key == "scheduling.k8s.io/ns/g"
    for k, v in want.items():
        assert getattr(pg, k) == v, k


def test_the_crd_gets_a_topology_key_through_an_annotation() -> None:
    pg = parse_pod_group({"metadata": {"name": "g", "namespace": NS,
                                       "annotations": {"scheduling.tandem.dev/topology-key": "zone"}},
                          "spec": {"minMember": 2}})
    assert pg.topology_key == "zone" and not pg.native and pg.key == "ns/g"
