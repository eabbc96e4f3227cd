"""NodePorts: a pod's host ports must be free on the node.

PreFilter collects the pod's (hostIP, protocol, hostPort) triples from its
app containers (Skip when there are none); Filter rejects nodes where one
of them conflicts with a port already in use, with upstream's
HostPortInfo.CheckConflict rules:

* a wanted port on 0.0.0.0 conflicts with that protocol/port in use on any IP;
* a wanted port on a specific IP conflicts with the same IP or with 0.0.0.0.

The node table keeps a pod count per (protocol, port) over all IPs and per
(IP, protocol, port), so each wanted port is one or two column reads.
The reason is Unschedulable (not unresolvable): preemption can free a port.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework import (
    ActionType, ClusterEvent, ClusterEventWithHint, Code, CycleState, FilterResult, PreFilterResult, QueueingHint,
    Resource, Status, register,
)
from scheduler.model import HostPort, Pod

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

NAME = "NodePorts"
PRE_FILTER_KEY = "PreFilter" + NAME
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
BIND_ALL = "0.0.0.0"

_OK = Status()
_SKIP = Status(Code.SKIP)


def conflicts(used: set[tuple[str, str, int]], ip: str, protocol: str, port: int) -> bool:
    """HostPortInfo.CheckConflict on a set of (ip, protocol, port) (queueing hints only)."""
    if ip == BIND_ALL:
        return any(p == protocol and n == port for _, p, n in used)
    return (BIND_ALL, protocol, port) in used or (ip, protocol, port) in used


def ports_in_use(nodes: NodeTable, rows: np.ndarray, hp: HostPort) -> np.ndarray:
    """bool[k]: rows where ``hp`` conflicts with a host port already in use."""
    if hp.ip == BIND_ALL:
        col = nodes.port_use(hp.protocol, hp.port)
        return np.zeros(len(rows), dtype=bool) if col is None else col[rows] > 0
    hit = np.zeros(len(rows), dtype=bool)
    for ip in (BIND_ALL, hp.ip):
        col = nodes.port_use_on(ip, hp.protocol, hp.port)
        if col is not None:
            hit |= col[rows] > 0
    return hit


@register
class NodePorts:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"EnqueueExtensions", "PreFilter", "Filter"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None:
        pass

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Pod ports are immutable, so only a deleted pod or a new node can free one (upstream, queueing hints on).
        return [
            ClusterEventWithHint(ClusterEvent(Resource.POD, ActionType.DELETE), _after_pod_deleted),
            ClusterEventWithHint(ClusterEvent(Resource.NODE, ActionType.ADD)),
        ]

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeTable) -> tuple[PreFilterResult | None, Status]:
        if not pod.host_ports:
            return None, _SKIP
        state.write(PRE_FILTER_KEY, pod.host_ports)
        return None, _OK

    def filter(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> FilterResult:
        wanted = state.get(PRE_FILTER_KEY)
        if wanted is None:
            wanted = pod.host_ports
        bad = np.zeros(len(rows), dtype=bool)
        for hp in wanted:
            bad |= ports_in_use(nodes, rows, hp)
        return FilterResult.from_mask(~bad, ERR_REASON)


def _after_pod_deleted(pod: Pod, old: Pod | None, new: Any) -> int:
    deleted = old
    if deleted is None:
        return QueueingHint.QUEUE
    if not deleted.node_name and not deleted.nominated_node_name:
        return QueueingHint.SKIP  # an unscheduled pod held no ports
    used = {(hp.ip, hp.protocol, hp.port) for hp in deleted.host_ports}
    if not used:
        return QueueingHint.SKIP
    if any(conflicts(used, hp.ip, hp.protocol, hp.port) for hp in pod.host_ports):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP
