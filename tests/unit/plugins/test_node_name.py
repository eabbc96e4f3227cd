"""NodeName: a pod that names its node fits only that node (plugins/node_name.py)."""

from __future__ import annotations

import pytest

from plugins.node_name import NodeName
from scheduler.framework import ActionType, Code, CycleState, Resource
from scheduler.model import parse_node, parse_pod
from scheduler.state.cache import Cache

CASES = [
    pytest.param("", ["a", "b", "c"], id="a pod without nodeName fits every node"),
    pytest.param("b", ["b"], id="a pod with nodeName fits only that node"),
    pytest.param("gone", [], id="a pod naming an unknown node fits nothing"),
]


@pytest.mark.parametrize("node_name, want", CASES)
def test_filter(node_name: str, want: list[str]) -> None:
    cache = Cache()
    for n in ("a", "b", "c"):
        cache.add_node(parse_node({"metadata": {"name": n}}))
    pod = parse_pod({"metadata": {"name": "p", "namespace": "default", "uid": "u"},
                     "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "busybox"}]}})
    rows = cache.nodes.rows()
    res = NodeName(None, None).filter(CycleState(), pod, cache.nodes, rows)
    assert cache.nodes.names_of(rows[res.passed]) == want
    if len(want) < 3:
        assert [(r.reason, r.code, int(r.mask.sum())) for r in res.rejections] == [
            ("node(s) didn't match the requested node name", Code.UNSCHEDULABLE_AND_UNRESOLVABLE, 3 - len(want))]


def test_only_a_new_node_can_help() -> None:
    (ev,) = NodeName(None, None).events_to_register()
    assert (ev.event.resource, ev.event.action, ev.hint) == (Resource.NODE, ActionType.ADD, None)
