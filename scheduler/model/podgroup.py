"""The one PodGroup record every gang consumer reads, its parser, and how a gang's members are counted.

Today the record is parsed from scheduler-plugins' PodGroup CRD; a second
PodGroup API (upstream's scheduling.k8s.io) gets its own parser here onto
the same record, so Coscheduling, GangReadiness and the status controller
stay as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Collection, Mapping

from scheduler.model.fields import _d, _int, parse_time
from scheduler.model.pod import Pod

POD_GROUP_API_VERSION = "scheduling.x-k8s.io/v1alpha1"   # scheduler-plugins' PodGroup CRD
DISRUPTION_MODE_ANNOTATION = "scheduling.tandem.dev/disruption-mode"   # for PodGroup CRDs without the field
# PodGroup disruption modes, as upstream's scheduling.k8s.io/v1alpha2 PodGroup spells them: "Pod" (members
# one by one) and "PodGroup" (the gang whole). tandem first called the former "Single"; that spelling is
# still accepted on input, and DISRUPTION_SINGLE is kept as the same value for its importers.
DISRUPTION_POD = "Pod"
DISRUPTION_SINGLE = DISRUPTION_POD
DISRUPTION_POD_GROUP = "PodGroup"
# PodGroup status.conditions (tandem's addition to scheduler-plugins' schema): GangReadiness writes the PodsReady
# condition, and the PodGroup status controller keeps the phase Failed once its reason says the requeuing limit
# was hit (Kueue's names for both)
POD_GROUP_PODS_READY = "PodsReady"
POD_GROUP_REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded"
# why a pod, or a PodGroup, waits before any scheduling cycle (KEP-5501's PodScheduled reason, for a PreEnqueue
# rejection); on a PodGroup it is the reason of a False PodGroupScheduled condition (the Workload API's type)
NOT_READY_FOR_SCHEDULING = "NotReadyForScheduling"
POD_GROUP_SCHEDULED = "PodGroupScheduled"


@dataclass(frozen=True, slots=True)
class PodGroup:
    """A PodGroup, parsed once when the informer delivers it.

    Today scheduler-plugins' ``scheduling.x-k8s.io/v1alpha1`` CRD; the
    record is what every gang consumer reads (Coscheduling, GangReadiness,
    the status controller), so a second PodGroup API maps onto the same
    fields. ``min_member`` is clamped once, here: a missing, negative or
    non-integer ``spec.minMember`` is 0 ("no gang constraint"), and
    :attr:`quorum` is the members that make the gang whole (at least one).
    ``status`` and ``raw`` are the API's, for the status writers.
    """

    namespace: str
    name: str
    uid: str = ""
    api_version: str = POD_GROUP_API_VERSION
    resource_version: str = ""
    generation: int = 0
    created: float = 0.0                     # metadata.creationTimestamp, epoch seconds (0: unset)
    annotations: dict[str, str] = field(default_factory=dict)
    min_member: int = 0                      # spec.minMember, >= 0
    min_resources: Any = None                # spec.minResources as written (None: unset; Coscheduling checks it)
    schedule_timeout_seconds: int = 0        # spec.scheduleTimeoutSeconds (0: unset, use the plugin's default)
    # how preemption may take the gang's members: "PodGroup" (all of them or none; spec.disruptionMode or the
    # annotation DISRUPTION_MODE_ANNOTATION) or "Pod" (one by one, upstream's default; "Single" is read as it)
    disruption_mode: str = DISRUPTION_POD
    priority: int | None = None              # spec.priority: the gang's priority (None: each member's own)
    spec: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    status: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def quorum(self) -> int:
        """Members that make the gang whole: minMember, and one when minMember is 0."""
        return max(self.min_member, 1)

    @property
    def reference(self) -> dict[str, str]:
        """An ObjectReference for events on this PodGroup (list items may lack kind and apiVersion)."""
        ref = {"kind": "PodGroup", "apiVersion": self.api_version, "namespace": self.namespace,
               "name": self.name, "uid": self.uid, "resourceVersion": self.resource_version}
        return {k: v for k, v in ref.items() if v}


def gang_members_present(uids: Collection[str], pods: Mapping[str, "Pod"], need: int) -> int:
    """How many of a gang's pods count toward its quorum before any member is scheduled.

    ``uids`` are the pods naming the group, ``pods`` the latest records by uid. Fewer pods than ``need``
    cannot make a quorum whatever their state, so their number is the answer in O(1) (a gang's members
    arriving one by one are counted on every arrival). Otherwise the pods that could run are counted, up
    to ``need``: not finished, not being deleted, not behind scheduling gates (a gated pod cannot be
    placed until its gates go, and the update that removes them counts it then). Coscheduling's
    PreEnqueue holds by this count and the PodGroup status controller reports it, so both say the same.
    """
    if len(uids) < need:
        return len(uids)
    n = 0
    for uid in uids:
        if could_run(pods.get(uid)):
            n += 1
            if n >= need:
                break
    return n


def could_run(p: "Pod | None") -> bool:
    """A gang member that counts toward its quorum: not finished, not being deleted, not behind scheduling gates."""
    return p is not None and not p.deleting and not p.terminal and not p.scheduling_gates


def gang_waiting_message(key: str, present: int, need: int) -> str:
    """What a gang held for want of members says, on its pods and on its PodGroup."""
    return f"PodGroup {key}: {present} of {need} members exist; waiting for more"


def parse_pod_group(obj: dict[str, Any]) -> PodGroup:
    """A PodGroup record from the API's JSON (a watch event's object or a list item)."""
    meta = _d(obj.get("metadata"))
    spec = _d(obj.get("spec"))
    ann = meta.get("annotations")
    return PodGroup(
        namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        api_version=str(obj.get("apiVersion") or POD_GROUP_API_VERSION),
        resource_version=str(meta.get("resourceVersion") or ""),
        generation=_int(meta.get("generation")),
        created=parse_time(meta.get("creationTimestamp")),
        annotations={str(k): str(v) for k, v in ann.items()} if isinstance(ann, dict) else {},
        min_member=max(0, _int(spec.get("minMember"))),
        min_resources=spec.get("minResources"),
        schedule_timeout_seconds=max(0, _int(spec.get("scheduleTimeoutSeconds"))),
        disruption_mode=_disruption_mode(spec, ann),
        priority=spec.get("priority") if isinstance(spec.get("priority"), int)
        and not isinstance(spec.get("priority"), bool) else None,
        spec=spec, status=_d(obj.get("status")), raw=obj)


def _disruption_mode(spec: dict[str, Any], ann: Any) -> str:
    """PodGroup when the field or the annotation says so (case-insensitively), else Pod ("Pod", tandem's older
    "Single", or unset: members are disrupted one by one)."""
    raw = spec.get("disruptionMode")
    if not isinstance(raw, str) and isinstance(ann, dict):
        raw = ann.get(DISRUPTION_MODE_ANNOTATION)
    return DISRUPTION_POD_GROUP if isinstance(raw, str) and raw.lower() == "podgroup" else DISRUPTION_POD
