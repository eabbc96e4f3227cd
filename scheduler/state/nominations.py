"""Pods nominated to a node, and what they add to their nodes in a cycle's Filter (upstream's nominator)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from scheduler.framework.nodetable import R_PODS, NodeTable
from scheduler.model import Pod
from scheduler.state.reservations import Reservations


class Nominations:
    """Room promised to pods not bound yet: pods nominated to a node (``status.nominatedNodeName`` of our pending
    pods, or set by our preemption), and the capacity held for head-of-line units (``held``,
    :mod:`scheduler.state.reservations`). One account: a held unit's members answer :meth:`get` with their
    planned node, and CapacityReservation's Filter charges the held room on top of the nominated pods'.

    Upstream's nominator. A nominated pod's requests count on its node in the Filter of every pod of
    equal or lower priority (:meth:`plan`), so the room preemption made waits for the pod it was made for.

    The requests are kept summed per priority on a node-table-shaped array, updated in O(resources) on
    every set and clear, so a cycle's plan is a few array sums however many pods are nominated; the
    sums are rebuilt only when the node table's rows move (a node added or gone).
    """

    def __init__(self) -> None:
        self.node_of: dict[str, str] = {}
        self.pods: dict[str, Pod] = {}
        self.by_node: dict[str, set[str]] = {}
        self.version = 0
        self._plans: dict[tuple[int, int, str], Any] = {}
        self._nodes: NodeTable | None = None
        self._basis: tuple[int, int, int, int] | None = None
        self._sums: dict[int, np.ndarray] = {}      # priority -> int64[cap, R]: requests (pods column: count)
        self._ports: set[str] = set()                # nominated pods with host ports
        self.held = Reservations()                   # capacity held for head-of-line units (reservations.py)

    def __len__(self) -> int:
        return len(self.node_of)

    def get(self, uid: str) -> str:
        """The node ``uid`` is promised: its nomination, else its reservation's planned node ("" = none)."""
        node = self.node_of.get(uid, "")
        if node or not self.held.member_of:
            return node
        return self.held.node_of(uid)

    def set(self, pod: Pod, node: str) -> None:
        if not node:
            self.clear(pod.uid)
            return
        if self.node_of.get(pod.uid) == node and self.pods.get(pod.uid) is pod:
            return
        self.clear(pod.uid)
        self.node_of[pod.uid] = node
        self.pods[pod.uid] = pod
        self.by_node.setdefault(node, set()).add(pod.uid)
        if pod.host_ports:
            self._ports.add(pod.uid)
        self._charge(pod, node, 1)
        self._changed()

    def clear(self, uid: str) -> str:
        """Drop a nomination; returns the node it named ("" = none)."""
        node = self.node_of.pop(uid, "")
        if node:
            pod = self.pods.pop(uid)
            on = self.by_node.get(node)
            if on is not None:
                on.discard(uid)
                if not on:
                    del self.by_node[node]
            self._ports.discard(uid)
            self._charge(pod, node, -1)
            self._changed()
        return node

    def on(self, node: str) -> list[Pod]:
        return [self.pods[u] for u in self.by_node.get(node, ())]

    def _changed(self) -> None:
        self.version += 1
        self._plans.clear()

    def _charge(self, pod: Pod, node: str, sign: int) -> None:
        nodes = self._nodes
        if nodes is None or self._basis is None:
            return                                 # summed when a plan is next asked for
        row = nodes.row(node)
        if row is None:
            return                                 # an unknown node: a new row rebuilds the sums
        if len(nodes.resources) != self._basis[3]:
            self._basis = None                     # a new resource column: rebuild on the next plan
            return
        sums = self._sums.get(pod.priority)
        if sums is None:
            sums = self._sums[pod.priority] = np.zeros((nodes.cap, len(nodes.resources)), dtype=np.int64)
        index = nodes.resource_index
        for r, v in pod.requests.items():
            col = index.get(r)
            if col is not None:
                sums[row, col] += sign * v
        sums[row, R_PODS] += sign

    def _sync(self, nodes: NodeTable) -> None:
        basis = (id(nodes), nodes.layout, nodes.cap, len(nodes.resources))
        if basis == self._basis and self._nodes is nodes:
            return
        self._nodes, self._basis, self._sums = nodes, basis, {}
        self._plans.clear()
        for uid, node in self.node_of.items():
            self._charge(self.pods[uid], node, 1)

    def plan(self, pod: Pod, nodes: NodeTable) -> "NominatedPlan | None":
        """What the nominated pods of priority >= ``pod``'s (other than ``pod``) add to their nodes, or None."""
        if not self.node_of:
            return None
        self._sync(nodes)
        skip = pod.uid if pod.uid in self.node_of and self.pods[pod.uid].priority >= pod.priority else ""
        key = (self.version, pod.priority, skip)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._build(pod.priority, nodes, skip)
        return None if plan.empty else plan

    def _build(self, priority: int, nodes: NodeTable, skip: str) -> "NominatedPlan":
        parts = [sums for prio, sums in self._sums.items() if prio >= priority]
        if not parts:
            return NominatedPlan(np.zeros(0, dtype=np.int64), np.zeros((0, len(nodes.resources)), dtype=np.int64),
                                 [], self, priority, skip)
        total = parts[0].copy()
        for more in parts[1:]:
            total += more
        if skip:
            own = self.pods[skip]
            row = nodes.row(self.node_of[skip])
            if row is not None:
                index = nodes.resource_index
                for r, v in own.requests.items():
                    col = index.get(r)
                    if col is not None:
                        total[row, col] -= v
                total[row, R_PODS] -= 1
        rows = np.flatnonzero(total[:, R_PODS] > 0)
        rows = rows[nodes.valid[rows]]
        ports = []
        for uid in self._ports:
            p = self.pods[uid]
            row = nodes.row(self.node_of[uid])
            if uid != skip and p.priority >= priority and row is not None and nodes.valid[row]:
                ports.append((row, p))
        return NominatedPlan(rows, total[rows], ports, self, priority, skip)

    def placed(self, priority: int, nodes: NodeTable, skip: str) -> list[tuple[int, Pod]]:
        """(row, pod) of every nominated pod of priority >= ``priority`` on a node (but ``skip``)."""
        out = []
        for uid, node in self.node_of.items():
            p = self.pods[uid]
            if uid == skip or p.priority < priority:
                continue
            row = nodes.row(node)
            if row is not None and nodes.valid[row]:
                out.append((row, p))
        return out


@dataclass(slots=True)
class NominatedPlan:
    rows: np.ndarray                 # int64[k], distinct node rows holding nominated pods that count
    delta: np.ndarray                # int64[k, R] their summed requests (pods column included)
    ports: list[tuple[int, Pod]]     # those with host ports (charged one by one)
    source: Nominations
    priority: int
    skip: str

    @property
    def empty(self) -> bool:
        return len(self.rows) == 0

    def pods(self, nodes: NodeTable) -> list[tuple[int, Pod]]:
        """Every one, for the PreFilter extensions (AddPod): a walk, only when those are in play."""
        return self.source.placed(self.priority, nodes, self.skip)

    def apply(self, nodes: NodeTable, sign: int) -> None:
        """Charge (1) or take back (-1) the nominated pods on the node table's resource and port columns."""
        if self.delta.shape[1] < nodes.requested.shape[1]:
            self.delta = np.hstack([self.delta, np.zeros((len(self.rows), nodes.requested.shape[1]
                                                            - self.delta.shape[1]), dtype=np.int64)])
        nodes.requested[self.rows, : self.delta.shape[1]] += sign * self.delta
        for row, p in self.ports:
            nodes.charge_ports(row, p, sign)
