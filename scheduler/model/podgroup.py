"""The one PodGroup record every gang consumer reads, its two parsers, and how a gang's members are counted.

Two APIs map onto one record, so Coscheduling, GangReadiness, preemption
and the status controller read the same fields whichever a gang uses:

* scheduler-plugins' ``scheduling.x-k8s.io/v1alpha1`` PodGroup CRD
  (:func:`parse_pod_group`): minMember, minResources,
  scheduleTimeoutSeconds; tandem's annotations add a disruption mode and a
  topology key;
* upstream's ``scheduling.k8s.io/v1alpha2`` PodGroup (1.36, alpha;
  :func:`parse_native_pod_group`): ``schedulingPolicy.gang.minCount`` is the
  quorum, ``schedulingPolicy.basic`` is no gang, and
  ``schedulingConstraints.topology[0].key``, ``disruptionMode`` and
  ``priority`` carry over.

A gang's key in the index says which API it uses, so a native group and a
CRD group of one name in one namespace never merge: ``ns/name`` for the
CRD (as always), ``scheduling.k8s.io/ns/name`` for the native API (a
namespace is a DNS label, without dots, so the two forms cannot meet).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Collection, Mapping

from scheduler.model.fields import _d, _int, parse_time
from scheduler.model.pod import NATIVE_KEY_PREFIX, Pod

POD_GROUP_API_VERSION = "scheduling.x-k8s.io/v1alpha1"   # scheduler-plugins' PodGroup CRD
NATIVE_POD_GROUP_API_VERSION = "scheduling.k8s.io/v1alpha2"   # upstream's PodGroup (Workload API, 1.36 alpha)
# the CRD gets upstream's topology constraint through this annotation: every member in one domain of the label
TOPOLOGY_KEY_ANNOTATION = "scheduling.tandem.dev/topology-key"
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

    One record for both APIs: scheduler-plugins' ``scheduling.x-k8s.io/v1alpha1``
    CRD (:func:`parse_pod_group`) and upstream's ``scheduling.k8s.io/v1alpha2``
    (:func:`parse_native_pod_group`: ``gang.minCount`` is ``min_member``,
    ``basic`` is 0); every gang consumer reads it (Coscheduling,
    GangScheduling, GangReadiness, the status controller). ``min_member`` is
    clamped once, at parse: a missing, negative or non-integer count is 0
    ("no gang constraint"), and
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
    # every member in one domain of this node label ("" none): the native API's schedulingConstraints.topology
    # [0].key, the CRD's annotation TOPOLOGY_KEY_ANNOTATION
    topology_key: str = ""
    problem: str = ""                        # why no member can be scheduled ("" fine): a field tandem refuses
    spec: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    status: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def native(self) -> bool:
        """Upstream's scheduling.k8s.io PodGroup (rather than scheduler-plugins' CRD)?"""
        return self.api_version == NATIVE_POD_GROUP_API_VERSION

    @property
    def key(self) -> str:
        return native_gang_key(self.namespace, self.name) if self.native else f"{self.namespace}/{self.name}"

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


def native_gang_key(namespace: str, name: str) -> str:
    """The gang index key of the scheduling.k8s.io/v1alpha2 PodGroup ``name`` in ``namespace``."""
    return f"{NATIVE_KEY_PREFIX}{namespace}/{name}"


def split_gang_key(key: str) -> tuple[bool, str, str]:
    """(native, namespace, name) of a gang index key."""
    native = key.startswith(NATIVE_KEY_PREFIX)
    ns, _, name = key[len(NATIVE_KEY_PREFIX):].partition("/") if native else key.partition("/")
    return native, ns, name


def pod_group_path(key: str) -> str:
    """The API path of the PodGroup whose gang index key is ``key`` (either API); add "/status" for its status."""
    native, ns, name = split_gang_key(key)
    version = NATIVE_POD_GROUP_API_VERSION if native else POD_GROUP_API_VERSION
    return f"/apis/{version}/namespaces/{ns}/podgroups/{name}"


def group_conflict(pod: Pod) -> str:
    """Why the pod names no usable gang ("" fine): it names a native group and a scheduler-plugins group both,
    or an empty spec.schedulingGroup.podGroupName. Upstream would gang it by the first alone, scheduler-plugins
    by the second alone: either choice breaks one gang, so the pod is refused, naming both."""
    if pod.scheduling_group is None:
        return ""
    if not pod.scheduling_group:
        return "spec.schedulingGroup.podGroupName: Required value"
    if pod.pod_group:
        return (f'pod names two pod groups: spec.schedulingGroup.podGroupName "{pod.scheduling_group}" '
                f'({NATIVE_POD_GROUP_API_VERSION}) and "{pod.pod_group}" ({POD_GROUP_API_VERSION}, label '
                f'scheduling.x-k8s.io/pod-group or annotation scheduling.k8s.io/group-name); a pod joins one gang')
    return ""


def missing_group_message(key: str) -> str:
    """What a pod whose PodGroup does not exist waits with (kube-scheduler holds such pods without a word)."""
    native, ns, name = split_gang_key(key)
    if native:
        return (f'waiting for pod\'s pod group "{name}" to appear: PodGroup {ns}/{name} '
                f"({NATIVE_POD_GROUP_API_VERSION}) not found")
    return f"PodGroup {key} not found"


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
        priority=_priority(spec),
        topology_key=str(ann.get(TOPOLOGY_KEY_ANNOTATION) or "") if isinstance(ann, dict) else "",
        spec=spec, status=_d(obj.get("status")), raw=obj)


def parse_native_pod_group(obj: dict[str, Any]) -> PodGroup:
    """A PodGroup record from a scheduling.k8s.io/v1alpha2 PodGroup (list items may lack apiVersion).

    ``schedulingPolicy`` is required on the PodGroup itself (controllers copy it there from the
    Workload's template; upstream's scheduler does not read ``podGroupTemplateRef`` either): without it,
    or with ``resourceClaims`` (dynamic resources for a whole group, which tandem does not allocate),
    the record carries a ``problem`` and its pods wait with it. ``disruptionMode`` and ``priority`` exist
    only with the WorkloadAwarePreemption gate: read when present.
    """
    meta = _d(obj.get("metadata"))
    spec = _d(obj.get("spec"))
    ann = meta.get("annotations")
    policy = spec.get("schedulingPolicy")
    gang = _d(policy).get("gang") if isinstance(policy, dict) else None
    problem = ""
    if not isinstance(policy, dict) or (policy.get("gang") is None and policy.get("basic") is None):
        problem = "spec.schedulingPolicy: Required value: one of gang or basic"
    elif spec.get("resourceClaims"):
        problem = "spec.resourceClaims: tandem does not allocate dynamic resources to pod groups"
    topology = [_d(t).get("key") for t in spec.get("schedulingConstraints", {}).get("topology") or ()] \
        if isinstance(spec.get("schedulingConstraints"), dict) else []
    key = topology[0] if topology and isinstance(topology[0], str) else ""
    return PodGroup(
        namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""), api_version=NATIVE_POD_GROUP_API_VERSION,
        resource_version=str(meta.get("resourceVersion") or ""),
        generation=_int(meta.get("generation")),
        created=parse_time(meta.get("creationTimestamp")),
        annotations={str(k): str(v) for k, v in ann.items()} if isinstance(ann, dict) else {},
        # basic: no gang (each member on its own, once its PodGroup exists); gang: minCount is the quorum
        min_member=max(0, _int(_d(gang).get("minCount"))) if gang is not None else 0,
        disruption_mode=_disruption_mode(spec, None),
        priority=_priority(spec),
        topology_key=key, problem=problem,
        spec=spec, status=_d(obj.get("status")), raw=obj)


def _priority(spec: dict[str, Any]) -> int | None:
    v = spec.get("priority")
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _disruption_mode(spec: dict[str, Any], ann: Any) -> str:
    """PodGroup when the field or the annotation says so (case-insensitively), else Pod ("Pod", tandem's older
    "Single", or unset: members are disrupted one by one)."""
    raw = spec.get("disruptionMode")
    if not isinstance(raw, str) and isinstance(ann, dict):
        raw = ann.get(DISRUPTION_MODE_ANNOTATION)
    return DISRUPTION_POD_GROUP if isinstance(raw, str) and raw.lower() == "podgroup" else DISRUPTION_POD
