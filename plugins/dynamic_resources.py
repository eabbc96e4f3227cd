"""DynamicResources: a pod that asks for dynamically allocated resources is not placed without them.

Upstream's plugin (pkg/scheduler/framework/plugins/dynamicresources) finds
the ResourceClaims a pod's ``spec.resourceClaims`` name or have generated
from templates, allocates devices to them on the chosen node (Filter,
Reserve) and writes the allocation before binding (PreBind). tandem does not
allocate resource claims yet. Placing such a pod anyway would put it on a
node where its claims were never allocated, and the kubelet would not start
it; so PreFilter refuses it, UnschedulableAndUnresolvable, naming the
claims and saying why. It must never let such a pod through.

A pod without resource claims is skipped, as upstream's PreFilter does. A
profile that disables DynamicResources keeps upstream's meaning: the claims
are not evaluated and the pod is placed as if it had none.

PostFilter. Upstream's PostFilter deallocates a claim this scheduler
allocated for a pod that fits nowhere, to try again elsewhere; it runs
before DefaultPreemption (freeing an idle claim beats evicting a pod).
tandem allocates none, so there is never one to deallocate: it says so with
upstream's words for a pod without new claims, ``no new claims to
deallocate``, which kube-scheduler 1.36 puts in every FailedScheduling
message of such a pod (``... 3 Insufficient cpu. no new claims to
deallocate, preemption: 0/3 nodes are available: ...``).

Requeueing. Upstream retries a pod rejected for its claims when a
ResourceClaim, ResourceSlice, DeviceClass or the pod's generated claims
change, since any of them can make an allocation possible. Here none can:
tandem allocates nothing, and ``spec.resourceClaims`` is immutable. So the
plugin registers no event, and a refused pod waits, parked with this plugin
as its rejector, for an update of its own or for the queue's periodic flush
(upstream's podMaxInUnschedulablePodsDuration, 5 minutes), which retries
every unschedulable pod; a retry costs one PreFilter call and a repeat of
the FailedScheduling event, and the pod's condition, unchanged, is not
written again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scheduler.framework import ClusterEventWithHint, Code, CycleState, Status, register
from scheduler.model import Pod

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

NAME = "DynamicResources"
NOT_ALLOCATED = "tandem does not allocate resource claims yet"

_SKIP = Status(Code.SKIP)


@register
class DynamicResources:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"EnqueueExtensions", "PreFilter", "PostFilter"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None:
        pass

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return []   # nothing the cluster does makes tandem allocate claims

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeTable) -> tuple[None, Status]:
        if not pod.resource_claims:
            return None, _SKIP
        return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, refusal(pod.resource_claims))

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Any) -> tuple[None, Status]:
        return None, _NOTHING_TO_DEALLOCATE


NO_NEW_CLAIMS = "no new claims to deallocate"
_NOTHING_TO_DEALLOCATE = Status(Code.UNSCHEDULABLE, NO_NEW_CLAIMS)


def refusal(claims: tuple[str, ...]) -> str:
    """``pod uses resource claim "gpu" (spec.resourceClaims): tandem does not allocate ...``."""
    quoted = ", ".join(f'"{c}"' for c in claims)
    noun = "resource claim" if len(claims) == 1 else "resource claims"
    return f"pod uses {noun} {quoted} (spec.resourceClaims): {NOT_ALLOCATED}"
