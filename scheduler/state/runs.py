"""The run index: which node each pipeline run (and each shared workspace claim) holds, derived from its pods.

NodeColocation (plugins/node_colocation.py) places every pod of a run, the
pods with one value of a run label (``tekton.dev/pipelineRun``) in one
namespace, on one node. Which node that is is never remembered: it is
derived from the run's pods that still exist, placed or assumed, **finished
ones included** (Tekton keeps a PipelineRun's completed TaskRun pods until the
run is pruned, and stage 2 must follow stage 1's finished pods). The cache
(scheduler/state/cache.py) keeps this index from the same informer events as
everything else, so a restarted scheduler or a second replica derives the
same nodes from the same pods.

Groups, each a set of member pods:

* a run: ``("run", label, namespace, value)``, the pods with ``label: value``;
* a workspace claim: ``("pvc", label, namespace, claim)``, the pods with the run
  label that mount that PersistentVolumeClaim (the plugin's workspaces mode;
  whether the claim is ReadWriteOnce is the plugin's question, not the index's).

A group's node (:meth:`RunIndex.holder`) is that of its most recently placed
member that still runs (bound or assumed, not Succeeded or Failed), else that
of its most recently placed finished member. "Most recently" is the pod's
creation time, then the order the index saw placements in: both come from
the cluster, so replicas agree. It is cached per group and recomputed only
after a member changed: O(1) per scheduling cycle.

For isolate-pipelinerun, :meth:`RunIndex.live_runs` is a column over the node
table's rows: how many runs have a running pod on each node, kept in place
as members start and finish, so "nodes other runs hold" is one array
operation in Filter.

This index never charges resources: a finished pod frees its node in the node
table (the cache discharges it) while the index keeps its run and node here
until the pod is deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
import numpy as np

from scheduler.model import Pod, pvc_volume_claims

GroupKey = tuple[str, str, str, str]   # (kind "run" | "pvc", run label, namespace, run value | claim name)


@dataclass(frozen=True, slots=True)
class Holder:
    """The node a group holds, and how many of its members still run (on any node; 0: all finished)."""

    node: str
    running: int


@dataclass(slots=True)
class _Member:
    keys: tuple[GroupKey, ...]
    node: str
    row: int            # the node table row it was charged to while running (-1: finished)
    order: tuple[float, int]
    running: bool


class _Group:
    __slots__ = ("members", "running", "running_on", "holder")

    def __init__(self) -> None:
        self.members: dict[str, _Member] = {}
        self.running = 0                          # members still running
        self.running_on: dict[int, int] = {}      # node row -> members running there (runs only)
        self.holder: Holder | None = None         # cached; None: recompute


class RunIndex:
    """Pipeline runs and workspace claims -> their members and the node each holds (see the module docstring).

    The cache calls :meth:`place`, :meth:`finish` and :meth:`remove`; plugins read :meth:`holder`,
    :meth:`live_runs` and :meth:`run_key`. Labels are followed from :meth:`follow` on (a plugin's
    constructor calls it through the Handle, before the informers deliver any pod).
    """

    __slots__ = ("labels", "groups", "members", "_seq", "_live", "_rows")

    def __init__(self, rows: int = 1024) -> None:
        self.labels: tuple[str, ...] = ()                 # run labels followed
        self.groups: dict[GroupKey, _Group] = {}
        self.members: dict[str, _Member] = {}             # uid -> member (placed or finished pods only)
        self._seq = 0
        self._live: dict[str, np.ndarray] = {}            # label -> int32[rows]: runs running on each row
        self._rows = rows

    # ------------------------------------------------------------------ reading

    def follow(self, label: str) -> bool:
        """Mutates: group pods by ``label`` from now on. True if it was not followed yet."""
        if label in self.labels:
            return False
        self.labels = (*self.labels, label)
        self._live[label] = np.zeros(self._rows, dtype=np.int32)
        return True

    @staticmethod
    def run_key(pod: Pod, label: str) -> GroupKey | None:
        value = pod.labels.get(label)
        return None if value is None else ("run", label, pod.namespace, value)

    @staticmethod
    def claim_keys(pod: Pod, label: str) -> list[GroupKey]:
        """The workspace-claim groups of a pod with the run label (none without it)."""
        if label not in pod.labels or not pod.pvcs:
            return []
        return [("pvc", label, pod.namespace, c) for c in pvc_volume_claims(pod)]

    def holder(self, key: GroupKey) -> Holder | None:
        """The node the group holds (None: no member is placed or finished). O(1) unless a member changed."""
        g = self.groups.get(key)
        if g is None:
            return None
        h = g.holder
        if h is None:
            best: _Member | None = None
            for m in g.members.values():
                if best is None or (m.running, m.order) > (best.running, best.order):
                    best = m
            assert best is not None   # a group exists only while it has members
            h = g.holder = Holder(best.node, g.running)
        return h

    def live_runs(self, label: str, n: int) -> np.ndarray:
        """int32[n]: per node table row, how many runs (by ``label``) have a pod running there. Read-only."""
        col = self._live[label]
        if len(col) < n:
            col = self._grow(label, n)
        return col[:n]

    def is_finished_member(self, uid: str) -> bool:
        m = self.members.get(uid)
        return m is not None and not m.running

    def __len__(self) -> int:
        return len(self.members)

    # ------------------------------------------------------------------ upkeep (the cache's)

    def _keys(self, pod: Pod) -> tuple[GroupKey, ...]:
        keys: list[GroupKey] = []
        for label in self.labels:
            value = pod.labels.get(label)
            if value is not None:
                keys.append(("run", label, pod.namespace, value))
                if pod.pvcs:
                    keys.extend(("pvc", label, pod.namespace, c) for c in pvc_volume_claims(pod))
        return tuple(keys)

    def place(self, pod: Pod, node: str, row: int) -> None:
        """A pod is bound or assumed to ``node`` (row ``row``) and runs. Idempotent; re-keys a relabelled pod."""
        if not self.labels:
            return
        m = self.members.get(pod.uid)
        keys = self._keys(pod)
        if m is not None:
            if m.keys == keys and m.node == node and m.running and m.row == row:
                return
            order = m.order if m.node == node else None   # a move is a new placement
            self._drop(pod.uid)
        else:
            order = None
        if not keys:
            return
        self._add(pod, _Member(keys, node, row, order or self._next_order(pod), True))

    def finish(self, pod: Pod, node: str) -> None:
        """A placed pod Succeeded or Failed on ``node``: it keeps its group's node, no longer runs."""
        if not self.labels:
            return
        m = self.members.get(pod.uid)
        if m is None:   # seen finished first (a restart lists it so)
            keys = self._keys(pod)
            if keys:
                self._add(pod, _Member(keys, node, -1, self._next_order(pod), False))
            return
        if not m.running:
            return
        for key in m.keys:
            g = self.groups[key]
            g.holder = None
            self._run_starts(key, g, m.row, -1)
        m.running = False
        m.row = -1

    def _next_order(self, pod: Pod) -> tuple[float, int]:
        self._seq += 1
        return (pod.created, self._seq)

    def _add(self, pod: Pod, m: _Member) -> None:
        self.members[pod.uid] = m
        for key in m.keys:
            g = self.groups.get(key)
            if g is None:
                g = self.groups[key] = _Group()
            g.members[pod.uid] = m
            g.holder = None
            if m.running:
                self._run_starts(key, g, m.row, +1)

    def remove(self, uid: str) -> bool:
        """The pod was deleted, or its placement was taken back. True if the index knew it."""
        if uid not in self.members:
            return False
        self._drop(uid)
        return True

    def _drop(self, uid: str) -> None:
        m = self.members.pop(uid)
        for key in m.keys:
            g = self.groups[key]
            del g.members[uid]
            if m.running:
                self._run_starts(key, g, m.row, -1)
            if g.members:
                g.holder = None
            else:
                del self.groups[key]

    def _run_starts(self, key: GroupKey, g: _Group, row: int, delta: int) -> None:
        """A member of ``g`` starts (+1) or stops (-1) running on ``row``; keeps ``live_runs`` in step."""
        g.running += delta
        if key[0] != "run":
            return
        n = g.running_on.get(row, 0) + delta
        if n > 0:
            g.running_on[row] = n
            if n == 1 and delta > 0:
                self._count_run(key[1], row, 1)
        else:
            g.running_on.pop(row, None)
            self._count_run(key[1], row, -1)

    def _count_run(self, label: str, row: int, delta: int) -> None:
        col = self._live[label]
        if row >= len(col):
            col = self._grow(label, row + 1)
        col[row] += delta

    def _grow(self, label: str, n: int) -> np.ndarray:
        size = max(n, 2 * len(self._live[label]))
        col = np.zeros(size, dtype=np.int32)
        old = self._live[label]
        col[: len(old)] = old
        self._live[label] = col
        self._rows = max(self._rows, size)
        return col
