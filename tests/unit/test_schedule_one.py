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


NATIVE = "tandem does not schedule scheduling.k8s.io/v1alpha2 pod groups yet"


@pytest.mark.parametrize("pod, want", [
    pytest.param(pod_spec(), ("", ""), id="a plain pod uses nothing tandem ignores"),
    pytest.param(pod_spec(schedulingGroup={"podGroupName": "trainers"}),
                 ("spec.schedulingGroup", f'pod uses spec.schedulingGroup (podGroupName "trainers"): {NATIVE}'),
                 id="a member of a native PodGroup is refused, naming the field and the group"),
    pytest.param(pod_spec(schedulingGroup={}),
                 ("spec.schedulingGroup", f'pod uses spec.schedulingGroup (podGroupName ""): {NATIVE}'),
                 id="a schedulingGroup naming no group is still a schedulingGroup"),
    pytest.param(pod_spec(schedulingGates=[{"name": "g"}], resourceClaims=[{"name": "gpu"}]), ("", ""),
                 id="fields that plugins refuse or evaluate are left to them"),
])
def test_unsupported(pod: Any, want: tuple[str, str]) -> None:
    assert unsupported(pod) == want


def test_a_pod_group_name_that_is_not_a_string_makes_the_pod_invalid() -> None:
    p = pod_spec(schedulingGroup={"podGroupName": ["a"]})
    assert p.invalid.startswith("spec.schedulingGroup.podGroupName: must be a string"), p.invalid
    assert p.scheduling_group == ""
