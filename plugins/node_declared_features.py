"""NodeDeclaredFeatures: a pod that needs a node feature goes only to nodes that declare it.

Upstream's plugin (pkg/scheduler/framework/plugins/nodedeclaredfeatures,
beta and on by default in 1.36, last in the default profile) asks the
feature registry of k8s.io/component-helpers/nodedeclaredfeatures which
features a pod needs to be scheduled, and keeps it off nodes whose
``status.declaredFeatures`` (written by the kubelet) does not list all of
them: Filter, UnschedulableAndUnresolvable, "node(s) didn't match Pod's
required features". A pod that needs none is skipped at PreFilter.

The 1.36 registry (component-helpers v0.36.2, features.AllFeatures) infers
two features at scheduling time (its other three are inferred only for
updates of bound pods, or never):

* ``RestartAllContainersOnContainerExits``: a container or init container has
  a ``restartPolicyRules`` entry whose action is ``RestartAllContainers``;
* ``UserNamespacesHostNetworkSupport``: ``hostNetwork: true`` with
  ``hostUsers: false``.

A node's declared features that the registry does not know are ignored, as
upstream's TryMap does; here they just get a column no pod asks for. The
node table keeps one bool column per declared feature name, so Filter is one
column read per required feature.

A rejected pod is retried when a node is added or its declared features
change, and on an update of the pod whose requirements differ (both as
upstream's queueing hints); the pod fields read here are immutable, so the
latter cannot happen on a real server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework import (
    ActionType, ClusterEvent, ClusterEventWithHint, Code, CycleState, FilterResult, PreFilterResult, QueueingHint,
    Resource, Status, register,
)
from scheduler.model import Node, Pod

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

NAME = "NodeDeclaredFeatures"
PRE_FILTER_KEY = "PreFilter" + NAME
ERR_REASON = "node(s) didn't match Pod's required features"

RESTART_ALL_CONTAINERS = "RestartAllContainersOnContainerExits"
USER_NAMESPACES_HOST_NETWORK = "UserNamespacesHostNetworkSupport"

_OK = Status()
_SKIP = Status(Code.SKIP)


def required_features(pod: Pod) -> tuple[str, ...]:
    """The features the pod needs of its node, sorted (InferForPodScheduling over the 1.36 registry)."""
    spec = pod.raw.get("spec")
    if not isinstance(spec, dict):
        return ()
    out = []
    if _restarts_all_containers(spec):
        out.append(RESTART_ALL_CONTAINERS)
    if spec.get("hostNetwork") is True and spec.get("hostUsers") is False:
        out.append(USER_NAMESPACES_HOST_NETWORK)
    return tuple(out)


def _restarts_all_containers(spec: dict[str, Any]) -> bool:
    for kind in ("containers", "initContainers"):
        containers = spec.get(kind)
        for c in containers if isinstance(containers, list) else ():
            rules = c.get("restartPolicyRules") if isinstance(c, dict) else None
            for rule in rules if isinstance(rules, list) else ():
                if isinstance(rule, dict) and rule.get("action") == "RestartAllContainers":
                    return True
    return False


@register
class NodeDeclaredFeatures:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"EnqueueExtensions", "PreFilter", "Filter"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None:
        pass

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(Resource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_DECLARED_FEATURE),
                                 _after_node_change),
            ClusterEventWithHint(ClusterEvent(Resource.UNSCHEDULED_POD, ActionType.UPDATE), _after_pod_update),
        ]

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeTable) -> tuple[PreFilterResult | None, Status]:
        wanted = required_features(pod)
        if not wanted:
            return None, _SKIP
        state.write(PRE_FILTER_KEY, wanted)
        return None, _OK

    def filter(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> FilterResult:
        wanted = state.get(PRE_FILTER_KEY)
        if wanted is None:
            wanted = required_features(pod)
        ok = np.ones(len(rows), dtype=bool)
        for feature in wanted:
            col = nodes.declares(feature)
            if col is None:
                return FilterResult.reject_all(len(rows), ERR_REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
            ok &= col[rows]
        return FilterResult.from_mask(ok, ERR_REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


def _after_node_change(pod: Pod, old: Node | None, new: Node | None) -> int:
    if old is not None and new is not None and old.declared_features == new.declared_features:
        return QueueingHint.SKIP
    return QueueingHint.QUEUE


def _after_pod_update(pod: Pod, old: Pod | None, new: Pod | None) -> int:
    if new is None or new.uid != pod.uid or old is None:
        return QueueingHint.SKIP
    return QueueingHint.SKIP if required_features(old) == required_features(new) else QueueingHint.QUEUE
