"""NodeColocation: a pipeline run's pods on one node, with no placeholder pods (ours; Tekton TEP-0135).

Tekton co-schedules a PipelineRun's pods with an "affinity assistant": a
placeholder StatefulSet per run or per workspace, and required pod affinity
from every TaskRun pod to it. tandem sees every pod of a run, so it places
them together directly. A run is the set of pods with one value of
``runLabel`` (default ``tekton.dev/pipelineRun``) in one namespace; pods
without the label are untouched. The modes are Tekton's ``coschedule``
values:

* ``pipelineruns``: every pod of a run goes to the node the run holds;
* ``isolate-pipelinerun``: the same, and a node never holds running pods of
  two runs (pods of no run may share it). A run whose pods have all finished
  no longer holds its node exclusively: a waiting run may take it, and the
  finished run's next pods choose afresh when another run runs there;
* ``workspaces``: pods of runs that mount the same ReadWriteOnce
  PersistentVolumeClaim go to one node (a pod with two such claims joins both
  groups; pods without the run label that share a claim are untouched);
* ``disabled``: nothing.

The node a run holds is derived from the cluster, never remembered
(scheduler/state/runs.py): the node of its most recently placed pod that
still runs, else of its most recently placed finished pod. The first pod of
a run chooses with the normal filters and scores; later pods may only go to
the run's node: Filter is a one-row mask (for a new run in isolate mode, one
array operation over the nodes other runs hold). When that node cannot take
the pod, the pod waits, and PostFilter says why in the pod's message:
``PipelineRun ns/run-1 holds node n-7: Insufficient cpu`` (the holder's own
reasons, from one more filter pass over that one row), while the other
nodes count as ``node(s) didn't match the node of the pod's PipelineRun``
in the ``0/N nodes are available`` message.

**Cordon-safe.** When no pod of the run runs any more and its node is gone,
unschedulable, or has a NoSchedule/NoExecute taint the pod does not
tolerate, the run chooses a node afresh (Tekton #6586 without a controller
round trip). A pod is never sent elsewhere while pods of its run still run
on the run's node: it waits for them. "Finished" and "running" come from the
pods' phases; no Tekton object is read.

**Queueing hints.** A waiting pod is retried when a pod of its run (in
isolate mode: of any run) finishes or is deleted, and when its run's node
changes taints or goes away; in isolate mode, when a node is added.

Volumes: workspace claims go through VolumeBinding, whose Filter rejects
the nodes a claim's PV cannot reach, so a run whose claim is bound to a
zonal PV chooses its node in that zone, and later pods follow it there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from scheduler.framework import (
    ActionType, ClusterEvent, ClusterEventWithHint, Code, ConfigError, CycleState, FilterResult, QueueingHint,
    Resource, Status, register,
)
from scheduler.framework.runtime import Diagnosis
from scheduler.framework.taints import find_untolerated
from scheduler.model import Node, Pod, Taint

NAME = "NodeColocation"
TEKTON_RUN_LABEL = "tekton.dev/pipelineRun"
MODES = ("workspaces", "pipelineruns", "isolate-pipelinerun", "disabled")

ERR_OTHER_NODE = "node(s) didn't match the node of the pod's PipelineRun"
ERR_HELD = "node(s) held by another PipelineRun"

_STATE_KEY = "PreFilter" + NAME
_UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
_SKIP = Status(Code.SKIP)
_OK = Status()
_UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
# a label key: an optional DNS-subdomain prefix and "/", then a name of at most 63 characters
_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_PREFIX_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True, slots=True)
class NodeColocationArgs:
    """NodeColocation's pluginConfig args."""

    # Tekton's coschedule values; the default is Tekton's default (one node per shared ReadWriteOnce workspace)
    mode: Literal["workspaces", "pipelineruns", "isolate-pipelinerun", "disabled"] = "workspaces"
    # the label whose value names a pod's run (Tekton sets tekton.dev/pipelineRun on every TaskRun pod)
    run_label: str = TEKTON_RUN_LABEL

    def validate(self, path: str) -> None:
        if self.mode not in MODES:   # parse_args checks the Literal; a dataclass built in code is checked here
            raise ConfigError(f"{path}.mode: {self.mode!r} is not one of {', '.join(map(repr, MODES))}")
        problem = _label_key_problem(self.run_label)
        if problem:
            raise ConfigError(f"{path}.runLabel: Invalid value: {self.run_label!r}: {problem}")


def _label_key_problem(key: str) -> str:
    """validation.IsQualifiedName, in short: "" when ``key`` is a valid label key."""
    if not key:
        return "must be a label key such as tekton.dev/pipelineRun, not empty"
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _PREFIX_RE.match(prefix)):
        return "the prefix before '/' must be a DNS subdomain (lower case letters, digits, '-' and '.')"
    if not name or len(name) > 63 or not _NAME_RE.match(name):
        return ("the name must be 1-63 characters, alphanumeric, '-', '_' or '.', starting and ending "
                "with an alphanumeric character")
    return ""


@dataclass(frozen=True, slots=True)
class _Verdict:
    """What PreFilter decided for this pod (immutable, so CycleState clones may share it)."""

    what: str         # "PipelineRun ns/run-1" or "PersistentVolumeClaim ns/ws": who holds the node
    node: str         # the node the pod must go to ("": choose afresh)
    row: int          # its node table row (-1: choose afresh)
    isolate: bool     # choosing afresh in isolate mode: only nodes no other run runs on


@register
class NodeColocation:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"EnqueueExtensions", "PreFilter", "Filter", "PostFilter"})
    Args = NodeColocationArgs

    def __init__(self, args: NodeColocationArgs | None, handle: Any) -> None:
        self.args = args if args is not None else NodeColocationArgs()
        self.handle = handle
        self.mode = self.args.mode
        self.label = self.args.run_label
        if self.mode != "disabled":
            handle.follow_run_label(self.label)

    # ------------------------------------------------------------------ PreFilter

    def pre_filter(self, state: CycleState, pod: Pod, nodes: Any) -> tuple[None, Status]:
        if self.mode == "disabled" or self.label not in pod.labels:
            return None, _SKIP
        if self.mode == "workspaces":
            verdict = self._workspace_verdict(pod, nodes)
        else:
            verdict = self._run_verdict(pod, nodes)
        if isinstance(verdict, Status):
            return None, verdict
        state.write(_STATE_KEY, verdict)
        if verdict.row < 0 and not verdict.isolate:
            return None, _SKIP   # a new run (or one free to move) chooses like any pod
        return None, _OK

    def _run_verdict(self, pod: Pod, nodes: Any) -> _Verdict | Status:
        runs = self.handle.runs
        key = runs.run_key(pod, self.label)
        what = f"PipelineRun {pod.namespace}/{key[3]}"
        isolate = self.mode == "isolate-pipelinerun"
        node = self._pinned(pod, runs.holder(key), nodes, isolate)
        if isinstance(node, Status):
            return Status(node.code, f"{what} {node.message()}")
        if not node:
            return _Verdict(what, "", -1, isolate)
        return _Verdict(what, node, nodes.row(node), False)

    def _workspace_verdict(self, pod: Pod, nodes: Any) -> _Verdict | Status:
        runs = self.handle.runs
        volumes = self.handle.volumes
        pinned: dict[str, str] = {}   # node -> the claim that holds it
        for key in runs.claim_keys(pod, self.label):
            claim = volumes.assumed_claim(key[2], key[3])
            if claim is not None and "ReadWriteOnce" not in claim.access_modes:
                continue   # ReadWriteMany / ReadOnlyMany workspaces need no common node
            what = f"PersistentVolumeClaim {key[2]}/{key[3]}"
            node = self._pinned(pod, runs.holder(key), nodes, False)
            if isinstance(node, Status):
                return Status(node.code, f"{what} {node.message()}")
            if node:
                pinned.setdefault(node, what)
        if not pinned:
            return _Verdict("", "", -1, False)
        if len(pinned) > 1:
            held = " and ".join(f"{what} holds node {node}" for node, what in sorted(pinned.items()))
            return Status(_UNRESOLVABLE, f"the pod's ReadWriteOnce workspaces are on different nodes: {held}")
        ((node, what),) = pinned.items()
        return _Verdict(what, node, nodes.row(node), False)

    def _pinned(self, pod: Pod, holder: Any, nodes: Any, isolate: bool) -> str | Status:
        """The node the pod must go to, "" to choose afresh, or why it must wait (a holder gone with pods on it)."""
        if holder is None:
            return ""
        row = nodes.row(holder.node)
        gone = row is None or not nodes.valid[row]
        if holder.running:
            # the run's node is that of its latest running pod: never leave it while its pods still run
            if gone:
                return Status(_UNRESOLVABLE, f"holds node {holder.node}, which is gone; its pods there must "
                                             f"finish first")
            return holder.node
        # every pod of the run has finished: it moves if its node can no longer take the pod (cordon-safe) ...
        if gone or _blocks(nodes.node(row), pod):
            return ""
        # ... or, in isolate mode, if another run now runs there
        if isolate and self.handle.runs.live_runs(self.label, nodes.n)[row] > 0:
            return ""
        return holder.node

    # ------------------------------------------------------------------ Filter

    def filter(self, state: CycleState, pod: Pod, nodes: Any, rows: np.ndarray) -> FilterResult:
        v: _Verdict | None = state.get(_STATE_KEY)
        if v is None:
            return FilterResult.all_pass(len(rows))
        if v.row >= 0:
            return FilterResult.from_mask(rows == v.row, ERR_OTHER_NODE, _UNRESOLVABLE)   # the one-row mask
        if v.isolate:
            held = self.handle.runs.live_runs(self.label, nodes.n)
            return FilterResult.from_mask(held[rows] == 0, ERR_HELD, _UNRESOLVABLE)
        return FilterResult.all_pass(len(rows))

    # ------------------------------------------------------------------ PostFilter

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Any) -> tuple[None, Status]:
        """Say why the run's node cannot take the pod; never places or nominates (preemption may still)."""
        v: _Verdict | None = state.get(_STATE_KEY)
        if v is None:
            return None, Status(Code.UNSCHEDULABLE)
        if v.row >= 0:
            return None, Status(Code.UNSCHEDULABLE, f"{v.what} holds node {v.node}: {self._why_not(state, pod, v)}")
        if v.isolate and diagnosis is not None and diagnosis.reasons.get(ERR_HELD):
            return None, Status(Code.UNSCHEDULABLE, f"{v.what} waits for a node that no other PipelineRun holds")
        return None, Status(Code.UNSCHEDULABLE)

    def _why_not(self, state: CycleState, pod: Pod, v: _Verdict) -> str:
        """The holder's own reasons: the profile's filters once more over that one row (failures only)."""
        fw = self.handle.framework
        if fw is not None:
            diag = Diagnosis()
            fw.run_filter_with_nominated(state, pod, np.array([v.row], dtype=np.int64), diag)
            if diag.reasons:
                return ", ".join(sorted(diag.reasons))
        return "the pod's other constraints rule it out"

    # ------------------------------------------------------------------ EnqueueExtensions

    def events_to_register(self) -> list[ClusterEventWithHint]:
        if self.mode == "disabled":
            return []
        events = [
            # a pod deleted or finished (the informer turns a terminal pod into a delete): its run may move,
            # in isolate mode its node may be free for another run
            ClusterEventWithHint(ClusterEvent(Resource.ASSIGNED_POD, ActionType.DELETE), self._after_pod_gone),
            # the run's node cordoned, tainted or gone: a run with no pod running there moves
            ClusterEventWithHint(ClusterEvent(Resource.NODE, ActionType.UPDATE_NODE_TAINT | ActionType.DELETE),
                                 self._after_node_change),
        ]
        if self.mode == "isolate-pipelinerun":
            events.append(ClusterEventWithHint(ClusterEvent(Resource.NODE, ActionType.ADD)))
        return events

    def _after_pod_gone(self, pod: Pod, old: Any, new: Any) -> int:
        if not isinstance(old, Pod):
            return QueueingHint.SKIP
        value = old.labels.get(self.label)
        if value is None:
            return QueueingHint.SKIP
        if self.mode == "isolate-pipelinerun":
            return QueueingHint.QUEUE   # any run's pod: that run may have finished and let its node go
        if old.namespace != pod.namespace:
            return QueueingHint.SKIP
        if value == pod.labels.get(self.label):
            return QueueingHint.QUEUE
        if self.mode == "workspaces" and pod.pvcs and set(old.pvcs) & set(pod.pvcs):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def _after_node_change(self, pod: Pod, old: Any, new: Any) -> int:
        node = new if isinstance(new, Node) else old
        if not isinstance(node, Node) or self.label not in pod.labels:
            return QueueingHint.SKIP
        runs = self.handle.runs
        keys = [runs.run_key(pod, self.label)] if self.mode != "workspaces" else runs.claim_keys(pod, self.label)
        for key in keys:
            h = runs.holder(key)
            if h is not None and h.node == node.name:
                return QueueingHint.QUEUE
        return QueueingHint.SKIP


def _blocks(node: Node | None, pod: Pod) -> bool:
    """Can ``node`` no longer take ``pod`` for good: cordoned, or a NoSchedule/NoExecute taint it does not tolerate?"""
    if node is None:
        return True
    tolerations = pod.tolerations
    if node.unschedulable and not any(t.tolerates(_UNSCHEDULABLE_TAINT) for t in tolerations):
        return True
    return find_untolerated(node.taints, tolerations) is not None
