"""scheduler/schedule_one.py: the parts of the scheduling cycle that are plain functions.

The cycle itself runs end to end in tests/integration/test_scheduler.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.model import parse_pod
from scheduler.schedule_one import num_feasible_nodes_to_find, unsupported


@pytest.mark.parametrize("nodes, percentage, want", [
    pytest.param(50, 0, 50, id="fewer than 100 nodes: all of them"),
    pytest.param(99, 10, 99, id="fewer than 100 nodes: all of them whatever the percentage"),
    pytest.param(100, 0, 100, id="adaptive at 100 nodes: 50% but never fewer than 100"),
    pytest.param(1000, 0, 420, id="adaptive at 1,000 nodes: 50% - 1000/125 = 42%"),
    pytest.param(5000, 0, 500, id="adaptive at 5,000 nodes: 10%"),
    pytest.param(15000, 0, 750, id="adaptive at 15,000 nodes: the 5% floor"),
    pytest.param(5000, 30, 1500, id="a set percentage"),
    pytest.param(5000, 1, 100, id="a small percentage still finds 100 nodes"),
    pytest.param(5000, 100, 5000, id="100% means every node"),
])
def test_num_feasible_nodes_to_find(nodes: int, percentage: int, want: int) -> None:
    assert num_feasible_nodes_to_find(nodes, percentage) == want


def pod_spec(**spec: Any) -> Any:
    return parse_pod({"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
                      "spec": {"containers": [{"name": "c", "image": "x"}], **spec}})


NO_GANG = "this profile has no gang plugin to keep its pod group whole (enable GangScheduling or Coscheduling)"
BOTH = ('pod names two pod groups: spec.schedulingGroup.podGroupName "trainers" (scheduling.k8s.io/v1alpha2) and '
        '"old" (scheduling.x-k8s.io/v1alpha1, label scheduling.x-k8s.io/pod-group or annotation '
        'scheduling.k8s.io/group-name); a pod joins one gang')


def pod_in(labels: dict[str, str], annotations: dict[str, str] | None = None, **spec: Any) -> Any:
    return parse_pod({"metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": labels,
                                   "annotations": annotations or {}},
                      "spec": {"containers": [{"name": "c", "image": "x"}], **spec}})


@pytest.mark.parametrize("pod, gangs, want", [
    pytest.param(pod_spec(), False, ("", ""), id="a plain pod uses nothing tandem ignores"),
    pytest.param(pod_spec(schedulingGroup={"podGroupName": "trainers"}), True, ("", ""),
                 id="a member of a native PodGroup is scheduled by a profile with a gang plugin"),
    pytest.param(pod_spec(schedulingGroup={"podGroupName": "trainers"}), False,
                 ("spec.schedulingGroup", f'pod uses spec.schedulingGroup (podGroupName "trainers"): {NO_GANG}'),
                 id="a profile without a gang plugin refuses a native member, naming the field and the group"),
    pytest.param(pod_spec(schedulingGroup={}), True,
                 ("spec.schedulingGroup", "spec.schedulingGroup.podGroupName: Required value"),
                 id="a schedulingGroup naming no group is refused"),
    pytest.param(pod_in({"scheduling.x-k8s.io/pod-group": "old"}, schedulingGroup={"podGroupName": "trainers"}),
                 True, ("spec.schedulingGroup", BOTH), id="a pod naming a native group and a CRD label is refused"),
    pytest.param(pod_in({}, {"scheduling.k8s.io/group-name": "old"}, schedulingGroup={"podGroupName": "trainers"}),
                 True, ("spec.schedulingGroup", BOTH),
                 id="a pod naming a native group and the kube-batch annotation is refused"),
    pytest.param(pod_in({"scheduling.x-k8s.io/pod-group": "old"}), False, ("", ""),
                 id="a CRD member alone is a profile's choice (scheduler-plugins' label is only a label there)"),
    pytest.param(pod_spec(schedulingGates=[{"name": "g"}], resourceClaims=[{"name": "gpu"}]), True, ("", ""),
                 id="fields that plugins refuse or evaluate are left to them"),
])
def test_unsupported(pod: Any, gangs: bool, want: tuple[str, str]) -> None:
    assert unsupported(pod, gangs) == want


def test_gang_keys_of_the_two_apis_never_meet() -> None:
    native = pod_spec(schedulingGroup={"podGroupName": "g"})
    crd = pod_in({"scheduling.x-k8s.io/pod-group": "g"})
    assert native.gang == "scheduling.k8s.io/ns/g" and crd.gang == "ns/g"
    assert pod_spec().gang == ""


def test_a_pod_group_name_that_is_not_a_string_makes_the_pod_invalid() -> None:
    p = pod_spec(schedulingGroup={"podGroupName": ["a"]})
    assert p.invalid.startswith("spec.schedulingGroup.podGroupName: must be a string"), p.invalid
    assert p.scheduling_group == ""
