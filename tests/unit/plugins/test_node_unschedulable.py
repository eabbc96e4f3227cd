"""NodeUnschedulable: cordoned nodes unless the pod tolerates the unschedulable taint (plugins/node_unschedulable.py)."""

from __future__ import annotations

from typing import Any

import pytest

from plugins.node_unschedulable import NodeUnschedulable
from scheduler.framework import Code, CycleState, QueueingHint
from scheduler.model import parse_node, parse_pod
from scheduler.state.cache import Cache

KEY = "node.kubernetes.io/unschedulable"


def make_node(name: str, unschedulable: bool) -> Any:
    return parse_node({"metadata": {"name": name}, "spec": {"unschedulable": unschedulable}})


def make_pod(tolerations: list[dict[str, str]], uid: str = "u1") -> Any:
    return parse_pod({"metadata": {"name": "p", "namespace": "default", "uid": uid},
                      "spec": {"containers": [{"name": "c", "image": "busybox"}], "tolerations": tolerations}})


CASES = [
    pytest.param(False, [], True, id="a schedulable node fits"),
    pytest.param(True, [], False, id="an unschedulable node is rejected"),
    pytest.param(True, [{"key": KEY, "operator": "Exists", "effect": "NoSchedule"}], True,
                 id="tolerating the unschedulable taint tolerates the cordon"),
    pytest.param(True, [{"key": KEY, "operator": "Exists"}], True, id="a toleration without effect covers NoSchedule"),
    pytest.param(True, [{"operator": "Exists"}], True, id="an empty key with Exists tolerates the cordon"),
    pytest.param(True, [{"key": KEY, "operator": "Equal", "effect": "NoSchedule"}], True,
                 id="Equal with an empty value matches the taint's empty value"),
    pytest.param(True, [{"key": KEY, "operator": "Equal", "value": "true", "effect": "NoSchedule"}], False,
                 id="Equal with a value does not match the taint's empty value"),
    pytest.param(True, [{"key": KEY, "operator": "Exists", "effect": "NoExecute"}], False,
                 id="a NoExecute toleration does not cover the NoSchedule taint"),
]


@pytest.mark.parametrize("unschedulable, tolerations, fits", CASES)
def test_filter(unschedulable: bool, tolerations: list[dict[str, str]], fits: bool) -> None:
    cache = Cache()
    cache.add_node(make_node("n", unschedulable))
    rows = cache.nodes.rows()
    res = NodeUnschedulable(None, None).filter(CycleState(), make_pod(tolerations), cache.nodes, rows)
    assert res.passed.tolist() == [fits]
    want = [] if fits else [("node(s) were unschedulable", Code.UNSCHEDULABLE_AND_UNRESOLVABLE)]
    assert [(r.reason, r.code) for r in res.rejections] == want


HINT_CASES = [
    pytest.param(None, False, QueueingHint.QUEUE, id="an added schedulable node queues the pod"),
    pytest.param(None, True, QueueingHint.SKIP, id="an added unschedulable node is skipped"),
    pytest.param(True, False, QueueingHint.QUEUE, id="an uncordoned node queues the pod"),
    pytest.param(False, False, QueueingHint.SKIP, id="a node that was schedulable already is skipped"),
]


@pytest.mark.parametrize("old, new, want", HINT_CASES)
def test_node_change_hint(old: bool | None, new: bool, want: int) -> None:
    ev = NodeUnschedulable(None, None).events_to_register()[0]
    assert ev.hint(make_pod([]), None if old is None else make_node("n", old), make_node("n", new)) == want


def test_toleration_hint_queues_the_pod_once_it_tolerates_the_cordon() -> None:
    ev = NodeUnschedulable(None, None).events_to_register()[1]
    pod = make_pod([])
    assert ev.hint(pod, pod, make_pod([{"key": KEY, "operator": "Exists"}])) == QueueingHint.QUEUE
    assert ev.hint(pod, pod, make_pod([{"key": "other", "operator": "Exists"}])) == QueueingHint.SKIP
    assert ev.hint(pod, None, make_pod([{"key": KEY, "operator": "Exists"}], uid="u2")) == QueueingHint.SKIP
