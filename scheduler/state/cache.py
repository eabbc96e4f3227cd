"""The cache: every pod bound or assumed to a node, and the indexes the scheduling cycle reads.

The :class:`Cache` owns the node table (scheduler/framework/nodetable.py)
and every pod bound or assumed to a node, of every scheduler (a node's
capacity is shared), and the one gang index (:class:`~scheduler.state.gangs.GangIndex`):
the PodGroups, the pods that name each, and the
members that hold a node. The queue, the plugins (through the Handle) and
the PodGroup status controller all read that one index. It also owns
:class:`~scheduler.framework.podcounts.PodCounts` (``counts``): per-node counts of
placed pods by selector and the placed pods' own affinity terms, which
InterPodAffinity and PodTopologySpread read instead of walking pods, the
volumes (:mod:`scheduler.state.volumes`), the nominations
(:mod:`scheduler.state.nominations`) and the run index (:mod:`scheduler.state.runs`: pipeline runs and the
node each holds; finished pods leave the node table but stay there until deleted). It is the owner that applies informer
events to them all. Assume adds a pod's
requests to its row before the bind is confirmed; forget takes them back.
Everything here is synchronous and runs on the event loop: the scheduling
cycle reads it without a snapshot because nothing can change it mid-cycle.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterator

from scheduler.framework.nodetable import NodeTable, PodTable
from scheduler.framework.podcounts import PodCounts
from scheduler.model import Node, Pod, pvc_volume_claim_keys
from scheduler.state.attach import Attachments
from scheduler.state.disks import DiskIndex
from scheduler.state.gangs import GangIndex
from scheduler.state.moves import Moves
from scheduler.state.nominations import Nominations
from scheduler.state.runs import RunIndex
from scheduler.state.devices import Devices
from scheduler.state.volumes import Volumes

log = logging.getLogger("tandem.cache")


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
        # PVCs, PVs, StorageClasses, CSI drivers and capacities; the volume assume cache and PV index (VolumeBinding)
        self.volumes = Volumes(self.nodes)
        self.devices = Devices(self.nodes)                # DRA: classes, slices, claims, devices in use
        # per-node counts of placed pods by selection, and placed pods' affinity terms (podcounts.py)
        self.counts = PodCounts(self.nodes)
        self.pod_table = PodTable(self.nodes)             # placed pods as columns (preemption's dry runs)
        self.nominations = Nominations()                  # pods nominated to a node by preemption
        self.moves = Moves()                              # the rebalancer's moves and their steering (moves.py)
        # "ns/claim" -> placed pods whose persistentVolumeClaim volumes use it (upstream's PVCRefCounts,
        # IsPVCUsedByPods), for VolumeRestrictions' ReadWriteOncePod check
        self.claim_users: dict[str, int] = {}
        # attachable volumes per node and CSI driver, CSINodes and VolumeAttachments (NodeVolumeLimits), and the
        # inline disks placed pods use per node (VolumeRestrictions' disk conflicts)
        self.attachments = Attachments(self.nodes, self.volumes)
        self.disks = DiskIndex()
        # pipeline runs -> the node each holds, finished pods included (NodeColocation; state/runs.py)
        self.runs = RunIndex()

    # ------------------------------------------------------------------ nodes

    def add_node(self, node: Node) -> None:
        old = self.node(node.name)
        row = self.nodes.set_node(node)
        self.by_node.setdefault(node.name, {})
        self.attachments.recount(node.name)   # its row may be new (or reused): write its volume columns
        if old is None or old.labels != node.labels:
            self.volumes.node_changed(row, old, node)   # volumes' node affinity, evaluated on this node only

    update_node = add_node

    def remove_node(self, name: str) -> None:
        # Pods still on the node keep their charge on a placeholder row until they go,
        # as upstream keeps a NodeInfo without a Node while pods reference it.
        keep = bool(self.by_node.get(name))
        old, row = self.node(name), self.nodes.row(name)
        self.nodes.clear_node(name, keep_row=keep)
        if old is not None and row is not None:
            self.volumes.node_changed(row, old, None)
        if not keep:
            self.by_node.pop(name, None)
            if row is not None:
                self.attachments.clear_row(row)   # a freed row may be reused by another node

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
        if pod.disks:
            self.disks.place(pod, node)
        if pod.pvcs or pod.inline_attach:
            self.attachments.place(pod, node)
        if self.runs.labels:
            self.runs.place(pod, node, row)
        if pod.gang:
            self.gangs._place(pod, node)
        held = self.nominations.held
        if held:
            held.placed(pod, node, 1)

    def _count_claims(self, pod: Pod, delta: int) -> None:
        users = self.claim_users
        for key in pvc_volume_claim_keys(pod) if pod.pvcs else ():
            n = users.get(key, 0) + delta
            if n > 0:
                users[key] = n
            else:
                users.pop(key, None)

    def _discharge(self, uid: str) -> PodState | None:
        st = self.pods.pop(uid, None)
        if st is None:
            return None
        if st.pod.gang:
            self.gangs._unplace(st.pod)
        self._count_claims(st.pod, -1)
        if st.pod.disks:
            self.disks.unplace(st.pod, st.node)
        if st.pod.pvcs or st.pod.inline_attach:
            self.attachments.unplace(st.pod, st.node)
        self.pod_table.remove(uid)
        held = self.nominations.held
        if held:
            held.placed(st.pod, st.node, -1)
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
                self.attachments.clear_row(row)
                del self.by_node[st.node]
        return st

    def add_pod(self, pod: Pod) -> None:
        """A pod the API says is bound (any scheduler's). Confirms an assumed pod."""
        if not pod.node_name:
            self.remove_pod(pod)
            return
        if pod.terminal:
            self.finish_pod(pod)
            return
        st = self.pods.get(pod.uid)
        if st is not None:
            # what the pod is charged (requests and the nonzero pair) can change while it is bound: an
            # in-place resize moves its status; a change re-charges the node below
            if st.node == pod.node_name and st.pod.requests == pod.requests \
                    and st.pod.nonzero_cpu == pod.nonzero_cpu and st.pod.nonzero_memory == pod.nonzero_memory:
                if st.pod.gang != pod.gang:   # its group label changed: move it in the gang index
                    if st.pod.gang:
                        self.gangs._unplace(st.pod)
                    if pod.gang:
                        self.gangs._place(pod, st.node)
                if self.counts.changes_counts(st.pod, pod):   # labels, deletion or terms: recount it
                    row = self.nodes.row(st.node)
                    if row is not None:
                        self.counts.unplace(st.pod, row)
                        self.counts.place(pod, row)
                if self.nominations.held and (st.pod.start_time != pod.start_time
                                              or st.pod.active_deadline != pod.active_deadline):
                    self.nominations.held.started(pod, st.node)
                st.pod = pod
                st.assumed = False
                self.by_node[st.node][pod.uid] = pod
                self.pod_table.update(pod)
                if self.runs.labels:   # its run label may have changed
                    row = self.nodes.row(st.node)
                    if row is not None:   # a placed pod's node keeps its row (remove_node's placeholder)
                        self.runs.place(pod, st.node, row)
                return
            if st.assumed and st.node != pod.node_name:
                log.warning("pod %s was assumed on %s but is bound to %s", pod.key, st.node, pod.node_name)
            self._discharge(pod.uid)
        self._charge(pod, pod.node_name, assumed=False)

    update_pod = add_pod

    def remove_pod(self, pod: Pod) -> None:
        """The pod was deleted, or is not bound: it leaves its node and the run index."""
        if self.runs.members:
            self.runs.remove(pod.uid)
        self._discharge(pod.uid)

    def finish_pod(self, pod: Pod) -> None:
        """A bound pod Succeeded or Failed: its node's resources are free (kube-scheduler's informer drops such
        pods), but the run index keeps its run and node until the pod is deleted (a finished TaskRun pod still
        holds its PipelineRun's node)."""
        if self.runs.labels and pod.node_name:
            self.runs.finish(pod, pod.node_name)
        self._discharge(pod.uid)

    def assume(self, pod: Pod, node: str) -> None:
        if pod.uid in self.pods:
            raise ValueError(f"pod {pod.key} is already in the cache (on {self.pods[pod.uid].node})")
        self._charge(pod, node, assumed=True)

    def forget(self, pod: Pod) -> None:
        """Take back an assumed pod's charge (the bind failed or was rejected)."""
        st = self.pods.get(pod.uid)
        if st is not None and st.assumed:
            if self.runs.members:
                self.runs.remove(pod.uid)
            self._discharge(pod.uid)

    def lift(self, uid: str) -> PodState | None:
        """Take a placed pod off its node for a what-if (gang preemption's plan); :meth:`restore` puts it back."""
        held = self.nominations.held
        paused, held.paused = held.paused, True   # a what-if: the reservations' sums stay as they are
        try:
            return self._discharge(uid)
        finally:
            held.paused = paused

    def restore(self, st: PodState) -> None:
        held = self.nominations.held
        paused, held.paused = held.paused, True
        try:
            self._charge(st.pod, st.node, st.assumed)
        finally:
            held.paused = paused

    def is_assumed(self, uid: str) -> bool:
        st = self.pods.get(uid)
        return st is not None and st.assumed

    def pods_on(self, node: str) -> Iterator[Pod]:
        return iter(self.by_node.get(node, {}).values())

    def where(self, uid: str) -> str | None:
        st = self.pods.get(uid)
        return None if st is None else st.node

    # ------------------------------------------------------------------ pipeline runs

    def follow_run_label(self, label: str) -> None:
        """Group pods into runs by ``label`` in the run index (NodeColocation's constructor, through the Handle).

        Pods already placed are indexed now; finished pods are known only from the informer events that
        follow, which is why the plugins are built before the informers start.
        """
        if self.runs.follow(label):
            for st in self.pods.values():
                row = self.nodes.row(st.node)
                if row is not None:
                    self.runs.place(st.pod, st.node, row)

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
