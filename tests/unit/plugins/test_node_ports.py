"""NodePorts: host ports must be free on the node, with upstream's 0.0.0.0 rules (plugins/node_ports.py)."""

from __future__ import annotations

from typing import Any

import pytest

from plugins.node_ports import NodePorts
from scheduler.framework import Code, CycleState, QueueingHint
from scheduler.model import parse_node, parse_pod
from scheduler.state.cache import Cache


def port(host_port: int, protocol: str = "", host_ip: str = "", container_port: int = 80) -> dict[str, Any]:
    p: dict[str, Any] = {"containerPort": container_port, "hostPort": host_port}
    if protocol:
        p["protocol"] = protocol
    if host_ip:
        p["hostIP"] = host_ip
    return p


def make_pod(ports: list[dict[str, Any]], uid: str = "new", node: str = "", nominated: str = "") -> Any:
    obj: dict[str, Any] = {"metadata": {"name": uid, "namespace": "default", "uid": uid},
                           "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox", "ports": ports}]}}
    if nominated:
        obj["status"] = {"nominatedNodeName": nominated}
    return parse_pod(obj)


def fits(used: list[dict[str, Any]], wanted: list[dict[str, Any]]) -> bool | str:
    """Does a pod wanting ``wanted`` fit a node where a pod already holds ``used``? "skip" when PreFilter skips."""
    cache = Cache()
    cache.add_node(parse_node({"metadata": {"name": "n"}}))
    cache.add_node(parse_node({"metadata": {"name": "empty"}}))
    if used:
        cache.add_pod(make_pod(used, uid="old", node="n"))
    pl = NodePorts(None, None)
    state = CycleState()
    pod = make_pod(wanted)
    _, st = pl.pre_filter(state, pod, cache.nodes)
    if st.code == Code.SKIP:
        return "skip"
    rows = cache.nodes.rows()
    res = pl.filter(state, pod, cache.nodes, rows)
    assert res.passed[cache.nodes.names_of(rows).index("empty")]
    ok = bool(res.passed[cache.nodes.names_of(rows).index("n")])
    if not ok:
        assert [(r.reason, r.code) for r in res.rejections] == [
            ("node(s) didn't have free ports for the requested pod ports", Code.UNSCHEDULABLE)]
    return ok


CASES = [
    pytest.param([], [], "skip", id="a pod without host ports is skipped"),
    pytest.param([], [{"containerPort": 80}], "skip", id="a container port without hostPort is no host port"),
    pytest.param([], [port(8080)], True, id="a free port fits"),
    pytest.param([port(8080)], [port(8080)], False, id="the same TCP port on 0.0.0.0 conflicts"),
    pytest.param([port(8080)], [port(8081)], True, id="another port fits"),
    pytest.param([port(8080, "UDP")], [port(8080, "TCP")], True, id="the same port with another protocol fits"),
    pytest.param([port(8080, "UDP")], [port(8080, "UDP")], False, id="the same UDP port conflicts"),
    pytest.param([port(8080, host_ip="127.0.0.1")], [port(8080)], False,
                 id="wanting 0.0.0.0 conflicts with the port used on a specific IP"),
    pytest.param([port(8080)], [port(8080, host_ip="127.0.0.1")], False,
                 id="wanting a specific IP conflicts with the port used on 0.0.0.0"),
    pytest.param([port(8080, host_ip="127.0.0.1")], [port(8080, host_ip="127.0.0.1")], False,
                 id="the same port on the same IP conflicts"),
    pytest.param([port(8080, host_ip="127.0.0.1")], [port(8080, host_ip="10.0.0.1")], True,
                 id="the same port on two specific IPs fits"),
    pytest.param([port(8080, host_ip="127.0.0.1")], [port(8080, "UDP")], True,
                 id="0.0.0.0 only conflicts on the same protocol"),
    pytest.param([port(8080, host_ip="127.0.0.1"), port(9090)], [port(7070), port(9090, host_ip="10.0.0.1")], False,
                 id="one conflicting port out of several rejects the node"),
]


@pytest.mark.parametrize("used, wanted, want", CASES)
def test_filter_follows_check_conflict(used: list[dict[str, Any]], wanted: list[dict[str, Any]],
                                       want: bool | str) -> None:
    assert fits(used, wanted) == want


def test_a_port_is_free_again_once_its_pod_is_gone() -> None:
    cache = Cache()
    cache.add_node(parse_node({"metadata": {"name": "n"}}))
    old = make_pod([port(8080, host_ip="127.0.0.1")], uid="old", node="n")
    cache.add_pod(old)
    pl = NodePorts(None, None)
    pod = make_pod([port(8080, host_ip="127.0.0.1")])
    state = CycleState()
    pl.pre_filter(state, pod, cache.nodes)
    assert not pl.filter(state, pod, cache.nodes, cache.nodes.rows()).passed.any()
    cache.remove_pod(old)
    assert pl.filter(state, pod, cache.nodes, cache.nodes.rows()).passed.all()


HINT_CASES = [
    pytest.param(make_pod([port(8080)], uid="old", node="n"), QueueingHint.QUEUE,
                 id="deleting a bound pod that held the port queues the pod"),
    pytest.param(make_pod([port(8080)], uid="old", nominated="n"), QueueingHint.QUEUE,
                 id="deleting a nominated pod that held the port queues the pod"),
    pytest.param(make_pod([port(8080)], uid="old"), QueueingHint.SKIP,
                 id="deleting an unscheduled pod is skipped"),
    pytest.param(make_pod([port(9090)], uid="old", node="n"), QueueingHint.SKIP,
                 id="deleting a pod with other ports is skipped"),
    pytest.param(make_pod([], uid="old", node="n"), QueueingHint.SKIP,
                 id="deleting a pod without host ports is skipped"),
    pytest.param(make_pod([port(8080, host_ip="10.0.0.1")], uid="old", node="n"), QueueingHint.SKIP,
                 id="deleting a pod holding the port on another IP is skipped"),
]


@pytest.mark.parametrize("deleted, want", HINT_CASES)
def test_pod_deleted_hint(deleted: Any, want: int) -> None:
    ev = NodePorts(None, None).events_to_register()[0]
    assert ev.hint(make_pod([port(8080, host_ip="127.0.0.1")]), deleted, None) == want


def test_ports_by_ip_survive_the_table_growing() -> None:
    from scheduler.framework.nodetable import NodeTable
    cache = Cache()
    cache.nodes = NodeTable(capacity=2)
    for i in range(5):
        cache.add_node(parse_node({"metadata": {"name": f"n{i}"}}))
        cache.add_pod(make_pod([port(8080, host_ip="127.0.0.1")], uid=f"old{i}", node=f"n{i}"))
    pl = NodePorts(None, None)
    rows = cache.nodes.rows()
    for wanted, fit in ((port(8080, host_ip="127.0.0.1"), False), (port(8080, host_ip="10.0.0.1"), True)):
        pod = make_pod([wanted])
        state = CycleState()
        pl.pre_filter(state, pod, cache.nodes)
        assert pl.filter(state, pod, cache.nodes, rows).passed.tolist() == [fit] * 5


# ---------------------------------------------------------------------------- sidecars (GetHostPorts)


def sidecar_pod(ports: list[dict[str, Any]], uid: str = "new", node: str = "", init_restart: str = "Always",
                app_ports: list[dict[str, Any]] = ()) -> Any:
    """A pod whose init container (a sidecar with restartPolicy Always, by default) asks for ``ports``."""
    init = {"name": "proxy", "image": "envoy", "ports": ports}
    if init_restart:
        init["restartPolicy"] = init_restart
    return parse_pod({"metadata": {"name": uid, "namespace": "default", "uid": uid},
                      "spec": {"nodeName": node, "initContainers": [init],
                               "containers": [{"name": "c", "image": "busybox", "ports": list(app_ports)}]}})


def sidecar_fits(old: Any, new: Any) -> bool | str:
    cache = Cache()
    cache.add_node(parse_node({"metadata": {"name": "n"}}))
    cache.add_pod(old)
    pl = NodePorts(None, None)
    state = CycleState()
    _, st = pl.pre_filter(state, new, cache.nodes)
    if st.code == Code.SKIP:
        return "skip"
    res = pl.filter(state, new, cache.nodes, cache.nodes.rows())
    if not res.passed[0]:
        assert [r.reason for r in res.rejections] == ["node(s) didn't have free ports for the requested pod ports"]
    return bool(res.passed[0])


SIDECAR_CASES = [
    pytest.param(sidecar_pod([port(9100)], uid="old", node="n"), sidecar_pod([port(9100)]), False,
                 id="two pods whose sidecars want one host port do not share a node"),
    pytest.param(sidecar_pod([port(9100)], uid="old", node="n"), make_pod([port(9100)]), False,
                 id="a sidecar's port already held keeps an app container's pod away"),
    pytest.param(make_pod([port(9100)], uid="old", node="n"), sidecar_pod([port(9100)]), False,
                 id="an app container's port already held keeps a sidecar's pod away"),
    pytest.param(sidecar_pod([port(9100)], uid="old", node="n"), sidecar_pod([port(9100, "UDP")]), True,
                 id="a sidecar's port on another protocol fits"),
    pytest.param(sidecar_pod([port(9100, host_ip="10.0.0.1")], uid="old", node="n"),
                 sidecar_pod([port(9100, host_ip="10.0.0.2")]), True,
                 id="sidecars' ports on two specific IPs fit"),
    pytest.param(sidecar_pod([port(9100)], uid="old", node="n", init_restart=""), sidecar_pod([port(9100)]), True,
                 id="a plain init container held no port once it finished"),
    pytest.param(make_pod([port(9100)], uid="old", node="n"), sidecar_pod([port(9100)], init_restart=""), "skip",
                 id="a pod whose only host port is on a plain init container is skipped"),
]


@pytest.mark.parametrize("old, new, want", SIDECAR_CASES)
def test_sidecar_host_ports_are_held_and_wanted_as_upstream(old: Any, new: Any, want: bool | str) -> None:
    assert sidecar_fits(old, new) == want


def test_deleting_a_pod_whose_sidecar_held_the_port_queues_the_pod() -> None:
    ev = NodePorts(None, None).events_to_register()[0]
    assert ev.hint(sidecar_pod([port(9100)]), sidecar_pod([port(9100)], uid="old", node="n"), None) \
        == QueueingHint.QUEUE
