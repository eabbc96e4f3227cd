"""The node table and the placed-pods table: cluster state as numpy columns, for the plugins and the cache.

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
* ``image_size(name)``: int64[rows] bytes of that image on each node;
* ``port_use(proto, port)``: int32[rows] pods using that host port (any
  host IP); ``port_use_on(ip, proto, port)``: the same for one host IP.

The :class:`PodTable` keeps every placed pod as one row of columns, for
preemption's vectorized dry run.

Both live in the framework because the plugins read them (``handle.nodes``,
``handle.cache.pod_table``) and the framework's own helpers (topology,
taints, node affinity, the pod counts) compute on them; the cache
(scheduler/state/cache.py) owns the instances and keeps them in step with
the informers. This module imports only the model: everything that reads a
node table imports it, at run time, from here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.model import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Node, Pod, Taint

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
        self._label_order: dict[str, np.ndarray] = {}   # key -> value ids' ranks by name (label_order)
        self.taint_list: list[Taint] = []
        self.taint_ids: dict[Taint, int] = {}
        self.taints = np.zeros((capacity, 0), dtype=bool)
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

    def label_order(self, key: str) -> np.ndarray:
        """int64[len(label_values(key))]: each value id's place in name order (the absent marker first).

        A memo: computed when first asked and again once the key has a new value (value ids only grow);
        eagerly it would cost a sort at every new value, and hostnames are one a node."""
        names = self.label_values(key)
        got = self._label_order.get(key)
        if got is None or len(got) != len(names):
            got = np.empty(len(names), dtype=np.int64)
            got[np.argsort(np.array(names, dtype=object), kind="stable")] = np.arange(len(names))
            self._label_order[key] = got
        return got

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
            for t in node.taints:
                col = self.taint_column(t)  # first: a new taint widens self.taints
                self.taints[row, col] = True
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
    +inf while unknown: upstream's GetPodStartTime takes "now" for a pod not started), ``deadline``
    (activeDeadlineSeconds, +inf: none), ``req`` (int64[cap, R]
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
        self.deadline = np.full(capacity, np.inf)      # spec.activeDeadlineSeconds (+inf: none)
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
        self.deadline = grow(self.deadline, np.inf)
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
        self.deadline[i] = pod.active_deadline if pod.active_deadline > 0 else np.inf
        self.gang[i] = self.gang_id(pod.gang) if pod.gang else -1
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
