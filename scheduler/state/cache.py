"""Cluster state for scheduling: the node table and the pods on each node.

The :class:`NodeTable` keeps one row per node in numpy columns so Filter
and Score plugins work on whole columns (docs/architecture.md, "The hot path is
vectorized"):

* ``alloc`` / ``requested``: int64[rows, R], R resources (cpu in
  millicores, memory, ephemeral-storage, pods, then extended resources as
  they appear); ``requested[:, PODS]`` counts pods;
* ``nonzero``: int64[rows, 2], cpu and memory requested with the upstream
  defaults for containers that ask nothing (for scoring);
* ``unschedulable``: bool[rows]; ``valid``: bool[rows] (row holds a node);
* ``label(key)``: int32[rows] of interned values (0 = the node lacks the
  key), with ``label_id(key, value)`` to compare against;
* ``taints``: bool[rows, T] over the distinct taints in the cluster;
  ``taint_rank``: int16[rows, T], 1 + the taint's position in the node's
  spec.taints (0 = absent), for upstream's "first untolerated taint";
* ``image_size(name)``: int64[rows] bytes of that image on each node;
* ``port_use(proto, port)``: int32[rows] pods using that host port (any
  host IP); ``port_use_on(ip, proto, port)``: the same for one host IP.

The :class:`Cache` owns the table and every pod bound or assumed to a node,
of every scheduler (a node's capacity is shared), and the one gang index
(:class:`GangIndex`): the PodGroups, the pods that name each, and the
members that hold a node. The queue, the plugins (through the Handle) and
the PodGroup status controller all read that one index. It also owns
:class:`~scheduler.podcounts.PodCounts` (``counts``): per-node counts of
placed pods by selector and the placed pods' own affinity terms, which
InterPodAffinity and PodTopologySpread read instead of walking pods. Assume adds a pod's
requests to its row before the bind is confirmed; forget takes them back.
Everything here is synchronous and runs on the event loop: the scheduling
cycle reads it without a snapshot because nothing can change it mid-cycle.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from scheduler.model import (
    CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Node, PersistentVolume, PersistentVolumeClaim, Pod, PodGroup, StorageClass,
    Taint, pvc_volume_claims,
)
from scheduler.podcounts import PodCounts

log = logging.getLogger("tandem.cache")

FIXED_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)
R_CPU, R_MEMORY, R_EPHEMERAL, R_PODS = range(4)


class NodeTable:
    def __init__(self, capacity: int = 1024) -> None:
        self.cap = capacity
        self.n = 0                                   # rows in use or freed (high-water mark)
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.nodes: list[Node | None] = []
        self.free: list[int] = []
        self.resources: list[str] = list(FIXED_RESOURCES)
        self.resource_index: dict[str, int] = {r: i for i, r in enumerate(self.resources)}
        self.valid = np.zeros(capacity, dtype=bool)
        self.alloc = np.zeros((capacity, len(self.resources)), dtype=np.int64)
        self.requested = np.zeros((capacity, len(self.resources)), dtype=np.int64)
        self.nonzero = np.zeros((capacity, 2), dtype=np.int64)
        self.unschedulable = np.zeros(capacity, dtype=bool)
        self._labels: dict[str, np.ndarray] = {}
        self._label_values: dict[str, dict[str, int]] = {}
        self._label_names: dict[str, list[str]] = {}
        self.taint_list: list[Taint] = []
        self.taint_ids: dict[Taint, int] = {}
        self.taints = np.zeros((capacity, 0), dtype=bool)
        self.taint_rank = np.zeros((capacity, 0), dtype=np.int16)
        self._images: dict[str, np.ndarray] = {}
        self._features: dict[str, np.ndarray] = {}   # declared feature -> bool[cap]: the node declares it
        self._ports: dict[tuple[str, int], np.ndarray] = {}
        self._ip_ports: dict[tuple[str, str, int], np.ndarray] = {}
        self._rows_cache: np.ndarray | None = None
        self.layout = 0                              # bumped whenever a name gets or loses its row, or a row its node

    # ------------------------------------------------------------------ shape

    def _grow(self) -> None:
        new = self.cap * 2

        def grow(a: np.ndarray) -> np.ndarray:
            b = np.zeros((new,) + a.shape[1:], dtype=a.dtype)
            b[: self.cap] = a
            return b

        self.valid = grow(self.valid)
        self.alloc = grow(self.alloc)
        self.requested = grow(self.requested)
        self.nonzero = grow(self.nonzero)
        self.unschedulable = grow(self.unschedulable)
        self.taints = grow(self.taints)
        self.taint_rank = grow(self.taint_rank)
        self._labels = {k: grow(v) for k, v in self._labels.items()}
        self._images = {k: grow(v) for k, v in self._images.items()}
        self._features = {k: grow(v) for k, v in self._features.items()}
        self._ports = {k: grow(v) for k, v in self._ports.items()}
        self._ip_ports = {k: grow(v) for k, v in self._ip_ports.items()}
        self.cap = new

    def resource_col(self, name: str) -> int:
        """Column of a resource, adding one for a new extended resource."""
        col = self.resource_index.get(name)
        if col is None:
            col = len(self.resources)
            self.resources.append(name)
            self.resource_index[name] = col
            self.alloc = np.hstack([self.alloc, np.zeros((self.cap, 1), dtype=np.int64)])
            self.requested = np.hstack([self.requested, np.zeros((self.cap, 1), dtype=np.int64)])
        return col

    def rows(self) -> np.ndarray:
        """int64 indices of rows holding a node (cached until the set of nodes changes)."""
        if self._rows_cache is None:
            self._rows_cache = np.flatnonzero(self.valid[: self.n]).astype(np.int64)
        return self._rows_cache

    def __len__(self) -> int:
        return len(self.rows())

    def row(self, name: str) -> int | None:
        return self.index.get(name)

    def node(self, row: int) -> Node | None:
        return self.nodes[row]

    def names_of(self, rows: np.ndarray) -> list[str]:
        names = self.names
        return [names[r] for r in rows.tolist()]

    # ------------------------------------------------------------------ columns

    def label(self, key: str) -> np.ndarray | None:
        """int32[cap] value ids of ``key`` (0 = absent), or None if no node has it."""
        return self._labels.get(key)

    def label_id(self, key: str, value: str) -> int:
        """The id ``value`` has in ``label(key)``; 0 when no node carries it (matches nothing)."""
        return self._label_values.get(key, {}).get(value, 0)

    def label_values(self, key: str) -> list[str]:
        """Value by id for ``key`` (index 0 is the absent marker "")."""
        return self._label_names.get(key, [""])

    def image_size(self, image: str) -> np.ndarray | None:
        return self._images.get(image)

    def declares(self, feature: str) -> np.ndarray | None:
        """bool[cap]: the nodes whose status.declaredFeatures lists ``feature``; None if none ever did."""
        return self._features.get(feature)

    def port_use(self, protocol: str, port: int) -> np.ndarray | None:
        return self._ports.get((protocol, port))

    def port_use_on(self, ip: str, protocol: str, port: int) -> np.ndarray | None:
        """Pods using the host port on exactly ``ip`` ("0.0.0.0" = all IPs), for NodePorts' IP rules."""
        return self._ip_ports.get((ip, protocol, port))

    def taint_column(self, taint: Taint) -> int:
        tid = self.taint_ids.get(taint)
        if tid is None:
            tid = len(self.taint_list)
            self.taint_list.append(taint)
            self.taint_ids[taint] = tid
            self.taints = np.hstack([self.taints, np.zeros((self.cap, 1), dtype=bool)])
            self.taint_rank = np.hstack([self.taint_rank, np.zeros((self.cap, 1), dtype=np.int16)])
        return tid

    def _intern(self, key: str, value: str) -> int:
        values = self._label_values.get(key)
        if values is None:
            values = self._label_values[key] = {}
            self._label_names[key] = [""]
            self._labels[key] = np.zeros(self.cap, dtype=np.int32)
        vid = values.get(value)
        if vid is None:
            vid = len(self._label_names[key])
            values[value] = vid
            self._label_names[key].append(value)
        return vid

    # ------------------------------------------------------------------ rows

    def _new_row(self, name: str) -> int:
        if self.free:
            row = self.free.pop()
            self.names[row] = name
            self.nodes[row] = None
        else:
            if self.n == self.cap:
                self._grow()
            row = self.n
            self.n += 1
            self.names.append(name)
            self.nodes.append(None)
        self.index[name] = row
        self.layout += 1
        return row

    def ensure_row(self, name: str) -> int:
        """The row of ``name``, creating an invalid placeholder for pods that name an unknown node."""
        row = self.index.get(name)
        if row is None:
            row = self._new_row(name)
        return row

    def set_node(self, node: Node) -> int:
        row = self.ensure_row(node.name)
        old = self.nodes[row]
        self.nodes[row] = node
        self.valid[row] = True
        if old is None:
            self.layout += 1                         # a row became valid
        self.unschedulable[row] = node.unschedulable
        self.alloc[row] = 0
        for r, v in node.allocatable.items():
            col = self.resource_col(r)  # first: a new resource widens self.alloc
            self.alloc[row, col] = v
        if old is None or old.labels != node.labels:
            for col in self._labels.values():
                col[row] = 0
            for k, v in node.labels.items():
                vid = self._intern(k, v)
                self._labels[k][row] = vid
        if old is None or old.taints != node.taints:
            self.taints[row] = False
            self.taint_rank[row] = 0
            for pos, t in enumerate(node.taints):
                col = self.taint_column(t)  # first: a new taint widens self.taints
                self.taints[row, col] = True
                self.taint_rank[row, col] = pos + 1
        if old is None or old.images != node.images:
            for col in self._images.values():
                col[row] = 0
            for names, size in node.images:
                for image in names:
                    col = self._images.get(image)
                    if col is None:
                        col = self._images[image] = np.zeros(self.cap, dtype=np.int64)
                    col[row] = size
        if old is None or old.declared_features != node.declared_features:
            for col in self._features.values():
                col[row] = False
            for feature in node.declared_features:
                col = self._features.get(feature)
                if col is None:
                    col = self._features[feature] = np.zeros(self.cap, dtype=bool)
                col[row] = True
        self._rows_cache = None
        return row

    def clear_node(self, name: str, keep_row: bool) -> None:
        """The node is gone. With ``keep_row`` (pods still name it) the row stays as an invalid placeholder."""
        row = self.index.get(name)
        if row is None:
            return
        self.nodes[row] = None
        self.valid[row] = False
        self.layout += 1
        self.unschedulable[row] = False
        self.alloc[row] = 0
        for col in self._labels.values():
            col[row] = 0
        self.taints[row] = False
        self.taint_rank[row] = 0
        for col in self._images.values():
            col[row] = 0
        for col in self._features.values():
            col[row] = False
        if not keep_row:
            self.requested[row] = 0
            self.nonzero[row] = 0
            for col in self._ports.values():
                col[row] = 0
            for col in self._ip_ports.values():
                col[row] = 0
            del self.index[name]
            self.free.append(row)
        self._rows_cache = None

    def charge(self, row: int, pod: Pod, sign: int) -> None:
        """Add (sign=1) or remove (sign=-1) a pod's requests on a row."""
        for r, v in pod.requests.items():
            col = self.resource_col(r)  # first: a new resource widens self.requested
            self.requested[row, col] += sign * v
        self.requested[row, R_PODS] += sign
        self.nonzero[row, 0] += sign * pod.nonzero_cpu
        self.nonzero[row, 1] += sign * pod.nonzero_memory
        if pod.host_ports:
            self.charge_ports(row, pod, sign)

    def charge_ports(self, row: int, pod: Pod, sign: int) -> None:
        for hp in pod.host_ports:
            col = self._ports.get((hp.protocol, hp.port))
            if col is None:
                col = self._ports[(hp.protocol, hp.port)] = np.zeros(self.cap, dtype=np.int32)
            col[row] += sign
            col = self._ip_ports.get((hp.ip, hp.protocol, hp.port))
            if col is None:
                col = self._ip_ports[(hp.ip, hp.protocol, hp.port)] = np.zeros(self.cap, dtype=np.int32)
            col[row] += sign


class PodTable:
    """Every placed pod (bound or assumed) as one row of numpy columns, for preemption's vectorized dry run.

    ``row`` (node row, -1 = free slot), ``prio`` (the pod's own priority), ``start`` (status.startTime,
    +inf while unknown: upstream's GetPodStartTime takes "now" for a pod not started), ``req`` (int64[cap, R]
    requests in the node table's resource columns, the pods column 1), ``gang`` (id of the pod's PodGroup key
    in ``gang_keys``, -1 = none) and ``deleting``. ``uids[slot]`` maps back. Kept by :class:`Cache` in step
    with the node table; a victim search masks these columns instead of walking pods.
    """

    def __init__(self, nodes: NodeTable, capacity: int = 4096) -> None:
        self.nodes = nodes
        self.cap = capacity
        self.n = 0
        self.free: list[int] = []
        self.slot: dict[str, int] = {}
        self.uids: list[str | None] = []
        self.row = np.full(capacity, -1, dtype=np.int64)
        self.prio = np.zeros(capacity, dtype=np.int64)
        self.start = np.full(capacity, np.inf)
        self.req = np.zeros((capacity, len(nodes.resources)), dtype=np.int64)
        self.gang = np.full(capacity, -1, dtype=np.int64)
        self.deleting = np.zeros(capacity, dtype=bool)
        self.gang_keys: list[str] = []
        self.gang_ids: dict[str, int] = {}

    def _grow(self) -> None:
        new = self.cap * 2

        def grow(a: np.ndarray, fill: Any) -> np.ndarray:
            b = np.full((new,) + a.shape[1:], fill, dtype=a.dtype)
            b[: self.cap] = a
            return b

        self.row = grow(self.row, -1)
        self.prio = grow(self.prio, 0)
        self.start = grow(self.start, np.inf)
        self.req = grow(self.req, 0)
        self.gang = grow(self.gang, -1)
        self.deleting = grow(self.deleting, False)
        self.cap = new

    def columns(self) -> np.ndarray:
        """``req`` widened to the node table's current resources (a new extended resource adds a column)."""
        width = len(self.nodes.resources)
        if self.req.shape[1] < width:
            self.req = np.hstack([self.req, np.zeros((self.cap, width - self.req.shape[1]), dtype=np.int64)])
        return self.req

    def gang_id(self, key: str) -> int:
        gid = self.gang_ids.get(key)
        if gid is None:
            gid = self.gang_ids[key] = len(self.gang_keys)
            self.gang_keys.append(key)
        return gid

    def add(self, pod: Pod, row: int) -> None:
        if self.free:
            i = self.free.pop()
            self.uids[i] = pod.uid
        else:
            if self.n == self.cap:
                self._grow()
            i = self.n
            self.n += 1
            self.uids.append(pod.uid)
        self.slot[pod.uid] = i
        self.row[i] = row
        self.set(i, pod)

    def set(self, i: int, pod: Pod) -> None:
        """(Re)write a slot's pod fields (an in-place update: start time, deletion, group)."""
        req = self.columns()
        req[i] = 0
        index = self.nodes.resource_index
        for r, v in pod.requests.items():
            col = index.get(r)
            if col is not None:
                req[i, col] = v
        req[i, R_PODS] = 1
        self.prio[i] = pod.priority
        self.start[i] = pod.start_time if pod.start_time > 0 else np.inf
        self.gang[i] = self.gang_id(f"{pod.namespace}/{pod.pod_group}") if pod.pod_group else -1
        self.deleting[i] = pod.deleting

    def update(self, pod: Pod) -> None:
        i = self.slot.get(pod.uid)
        if i is not None:
            self.set(i, pod)

    def remove(self, uid: str) -> None:
        i = self.slot.pop(uid, None)
        if i is None:
            return
        self.uids[i] = None
        self.row[i] = -1
        self.free.append(i)


class Nominations:
    """Pods nominated to a node: ``status.nominatedNodeName`` of our pending pods, or set by our preemption.

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

    def __len__(self) -> int:
        return len(self.node_of)

    def get(self, uid: str) -> str:
        return self.node_of.get(uid, "")

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


class GangIndex:
    """Every gang the scheduler knows, by key ``"ns/podgroup"``.

    * ``groups``: key -> :class:`PodGroup` record (the PodGroup informer's);
    * ``members``: key -> uids of the pods that name the group, in any state
      (the pod informer's; a group may have members before its PodGroup exists);
    * ``placed``: key -> uid -> node of the members bound or assumed (the cache's
      own pods, kept in step by :class:`Cache`).

    Upkeep is O(1) per pod event; readers get live views (never mutate them).
    """

    __slots__ = ("groups", "members", "placed")

    def __init__(self) -> None:
        self.groups: dict[str, PodGroup] = {}
        self.members: dict[str, set[str]] = {}
        self.placed: dict[str, dict[str, str]] = {}

    def group(self, key: str) -> PodGroup | None:
        return self.groups.get(key)

    def member_uids(self, key: str) -> set[str]:
        return self.members.get(key, _NO_MEMBERS)

    def placed_members(self, key: str) -> dict[str, str]:
        """Members of ``key`` on a node, bound or assumed: uid -> node."""
        return self.placed.get(key, _NO_PLACED)

    # ------------------------------------------------------------------ upkeep

    def set_group(self, pg: PodGroup) -> None:
        self.groups[pg.key] = pg

    def remove_group(self, key: str) -> None:
        self.groups.pop(key, None)

    def update_membership(self, old: Pod | None, new: Pod | None) -> None:
        """A pod was added (old None), updated, or deleted (new None): keep ``members`` in step."""
        if old is not None and old.pod_group and (new is None or new.pod_group != old.pod_group
                                                   or new.namespace != old.namespace):
            key = f"{old.namespace}/{old.pod_group}"
            uids = self.members.get(key)
            if uids is not None:
                uids.discard(old.uid)
                if not uids:
                    del self.members[key]
        if new is not None and new.pod_group:
            self.members.setdefault(f"{new.namespace}/{new.pod_group}", set()).add(new.uid)

    def _place(self, pod: Pod, node: str) -> None:
        self.placed.setdefault(f"{pod.namespace}/{pod.pod_group}", {})[pod.uid] = node

    def _unplace(self, pod: Pod) -> None:
        key = f"{pod.namespace}/{pod.pod_group}"
        on = self.placed.get(key)
        if on is not None:
            on.pop(pod.uid, None)
            if not on:
                del self.placed[key]


class Volumes:
    """PersistentVolumeClaims by "ns/name", PersistentVolumes and StorageClasses by name (their informers').

    The volume plugins read them; the informer handlers keep them (O(1) per event). Readers never mutate them.
    """

    __slots__ = ("claims", "volumes", "classes")

    def __init__(self) -> None:
        self.claims: dict[str, PersistentVolumeClaim] = {}
        self.volumes: dict[str, PersistentVolume] = {}
        self.classes: dict[str, StorageClass] = {}

    def claim(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        return self.claims.get(f"{namespace}/{name}")


_NO_MEMBERS: set[str] = set()
_NO_PLACED: dict[str, str] = {}


@dataclass(slots=True)
class PodState:
    pod: Pod
    node: str
    assumed: bool


class Cache:
    """Every pod bound or assumed to a node, and the node table they are charged to."""

    def __init__(self) -> None:
        self.nodes = NodeTable()
        self.pods: dict[str, PodState] = {}               # uid -> where it is charged
        self.by_node: dict[str, dict[str, Pod]] = {}      # node name -> uid -> pod
        self.gangs = GangIndex()                          # PodGroups, their pods, their members on nodes
        self.volumes = Volumes()                          # PVCs, PVs and StorageClasses, for VolumeBinding
        # per-node counts of placed pods by selection, and placed pods' affinity terms (podcounts.py)
        self.counts = PodCounts(self.nodes)
        self.pod_table = PodTable(self.nodes)             # placed pods as columns (preemption's dry runs)
        self.nominations = Nominations()                  # pods nominated to a node by preemption
        # "ns/claim" -> placed pods whose persistentVolumeClaim volumes use it (upstream's PVCRefCounts,
        # IsPVCUsedByPods), for VolumeRestrictions' ReadWriteOncePod check
        self.claim_users: dict[str, int] = {}

    # ------------------------------------------------------------------ nodes

    def add_node(self, node: Node) -> None:
        self.nodes.set_node(node)
        self.by_node.setdefault(node.name, {})

    update_node = add_node

    def remove_node(self, name: str) -> None:
        # Pods still on the node keep their charge on a placeholder row until they go,
        # as upstream keeps a NodeInfo without a Node while pods reference it.
        keep = bool(self.by_node.get(name))
        self.nodes.clear_node(name, keep_row=keep)
        if not keep:
            self.by_node.pop(name, None)

    def node(self, name: str) -> Node | None:
        row = self.nodes.row(name)
        return None if row is None else self.nodes.node(row)

    # ------------------------------------------------------------------ pods

    def _charge(self, pod: Pod, node: str, assumed: bool) -> None:
        row = self.nodes.ensure_row(node)
        self.nodes.charge(row, pod, 1)
        self.pods[pod.uid] = PodState(pod, node, assumed)
        self.counts.place(pod, row)
        self.pod_table.add(pod, row)
        self.by_node.setdefault(node, {})[pod.uid] = pod
        self._count_claims(pod, 1)
        if pod.pod_group:
            self.gangs._place(pod, node)

    def _count_claims(self, pod: Pod, delta: int) -> None:
        users = self.claim_users
        for name in pvc_volume_claims(pod) if pod.pvcs else ():
            key = f"{pod.namespace}/{name}"
            n = users.get(key, 0) + delta
            if n > 0:
                users[key] = n
            else:
                users.pop(key, None)

    def _discharge(self, uid: str) -> PodState | None:
        st = self.pods.pop(uid, None)
        if st is None:
            return None
        if st.pod.pod_group:
            self.gangs._unplace(st.pod)
        self._count_claims(st.pod, -1)
        self.pod_table.remove(uid)
        row = self.nodes.row(st.node)
        if row is not None:
            self.nodes.charge(row, st.pod, -1)
            self.counts.unplace(st.pod, row)
        on_node = self.by_node.get(st.node)
        if on_node is not None:
            on_node.pop(uid, None)
            if not on_node and row is not None and self.nodes.node(row) is None:
                # the node left earlier and its last pod just went: drop the placeholder row
                self.nodes.clear_node(st.node, keep_row=False)
                del self.by_node[st.node]
        return st

    def add_pod(self, pod: Pod) -> None:
        """A pod the API says is bound (any scheduler's). Confirms an assumed pod."""
        if not pod.node_name or pod.terminal:
            self.remove_pod(pod)
            return
        st = self.pods.get(pod.uid)
        if st is not None:
            # what the pod is charged (requests and the nonzero pair) can change while it is bound: an
            # in-place resize moves its status; a change re-charges the node below
            if st.node == pod.node_name and st.pod.requests == pod.requests \
                    and st.pod.nonzero_cpu == pod.nonzero_cpu and st.pod.nonzero_memory == pod.nonzero_memory:
                if st.pod.pod_group != pod.pod_group:   # its group label changed: move it in the gang index
                    if st.pod.pod_group:
                        self.gangs._unplace(st.pod)
                    if pod.pod_group:
                        self.gangs._place(pod, st.node)
                if self.counts.changes_counts(st.pod, pod):   # labels, deletion or terms: recount it
                    row = self.nodes.row(st.node)
                    if row is not None:
                        self.counts.unplace(st.pod, row)
                        self.counts.place(pod, row)
                st.pod = pod
                st.assumed = False
                self.by_node[st.node][pod.uid] = pod
                self.pod_table.update(pod)
                return
            if st.assumed and st.node != pod.node_name:
                log.warning("pod %s was assumed on %s but is bound to %s", pod.key, st.node, pod.node_name)
            self._discharge(pod.uid)
        self._charge(pod, pod.node_name, assumed=False)

    update_pod = add_pod

    def remove_pod(self, pod: Pod) -> None:
        self._discharge(pod.uid)

    def assume(self, pod: Pod, node: str) -> None:
        if pod.uid in self.pods:
            raise ValueError(f"pod {pod.key} is already in the cache (on {self.pods[pod.uid].node})")
        self._charge(pod, node, assumed=True)

    def forget(self, pod: Pod) -> None:
        """Take back an assumed pod's charge (the bind failed or was rejected)."""
        st = self.pods.get(pod.uid)
        if st is not None and st.assumed:
            self._discharge(pod.uid)

    def lift(self, uid: str) -> PodState | None:
        """Take a placed pod off its node for a what-if (gang preemption's plan); :meth:`restore` puts it back."""
        return self._discharge(uid)

    def restore(self, st: PodState) -> None:
        self._charge(st.pod, st.node, st.assumed)

    def is_assumed(self, uid: str) -> bool:
        st = self.pods.get(uid)
        return st is not None and st.assumed

    def pods_on(self, node: str) -> Iterator[Pod]:
        return iter(self.by_node.get(node, {}).values())

    def where(self, uid: str) -> str | None:
        st = self.pods.get(uid)
        return None if st is None else st.node

    # ------------------------------------------------------------------ namespaces

    @property
    def namespaces(self) -> dict[str, dict[str, str]]:
        """namespace name -> labels, from the namespace informer (read-only; kept by ``counts``)."""
        return self.counts.namespaces

    def set_namespace(self, name: str, labels: dict[str, str]) -> None:
        """A namespace was added or updated: its labels, for affinity terms' namespaceSelector."""
        self.counts.set_namespace(name, labels)

    def remove_namespace(self, name: str) -> None:
        self.counts.remove_namespace(name)
