"""The Pod record and its parser: requests as upstream computes them, tolerations, ports, volumes, terms.

Parsing never raises on a malformed pod: what the scheduler cannot
understand is recorded in ``invalid`` with the field path, and the scheduler
reports it on the pod (FailedScheduling) instead of crashing or dropping it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scheduler.model.csi import in_tree_volume
from scheduler.model.fields import _d, _l, _Problems, _s, _str_map, parse_time
from scheduler.model.node import _EFFECTS, Taint
from scheduler.model.quantity import (
    CPU, DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, INT64_MAX, MEMORY, _resource_list,
)
from scheduler.model.selectors import (
    PodAffinity, SpreadConstraint, _check_affinity, _memo, _pod_affinity, _spread_constraints,
)

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
POD_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
# a native (scheduling.k8s.io/v1alpha2) gang's index key is "scheduling.k8s.io/ns/name" (model/podgroup.py)
NATIVE_KEY_PREFIX = "scheduling.k8s.io/"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"   # DisruptionTarget's reason when a scheduler preempts a pod


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"      # Equal | Exists
    value: str = ""
    effect: str = ""             # "" matches every effect
    toleration_seconds: int | None = None

    def tolerates(self, taint: "Taint") -> bool:
        """Toleration.ToleratesTaint: an empty key with Exists matches every taint, an empty effect every effect."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


@dataclass(frozen=True, slots=True)
class HostPort:
    ip: str
    protocol: str
    port: int


@dataclass(frozen=True, slots=True)
class OwnerRef:
    kind: str
    name: str
    uid: str
    controller: bool
    api_version: str = ""         # "v1", "apps/v1": kind alone does not say which API the owner is in


@dataclass(frozen=True, slots=True)
class Pod:
    uid: str
    namespace: str
    name: str
    resource_version: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    scheduler_name: str = "default-scheduler"
    node_name: str = ""
    nominated_node_name: str = ""
    priority: int = 0
    priority_class_name: str = ""
    preemption_policy: str = "PreemptLowerPriority"
    created: float = 0.0
    start_time: float = 0.0       # status.startTime, epoch seconds (0: not started; preemption takes it as now)
    active_deadline: int = 0      # spec.activeDeadlineSeconds (0: none; the API requires at least 1)
    phase: str = "Pending"
    deleting: bool = False
    requests: dict[str, int] = field(default_factory=dict)   # PodRequests, canonical units
    nonzero_cpu: int = 0          # millicores, with DEFAULT_MILLI_CPU_REQUEST for containers asking nothing
    nonzero_memory: int = 0       # bytes, with DEFAULT_MEMORY_REQUEST likewise
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: dict[str, Any] | None = None     # spec.affinity as in the API
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    images: tuple[str, ...] = ()
    scheduling_gates: tuple[str, ...] = ()
    pod_affinity: PodAffinity | None = None     # podAffinity / podAntiAffinity, parsed (None: neither)
    topology_spread: tuple[SpreadConstraint, ...] = ()
    owners: tuple[OwnerRef, ...] = ()
    # the PersistentVolumeClaims its volumes use, in volume order: persistentVolumeClaim.claimName, and for a
    # generic ephemeral volume the claim its controller creates, "<pod>-<volume>" (ephemeral_pvcs lists those)
    pvcs: tuple[str, ...] = ()
    ephemeral_pvcs: tuple[str, ...] = ()
    resource_claims: tuple[str, ...] = ()   # spec.resourceClaims[].name: dynamic resource allocation's claims
    # VolumeRestrictions' disk conflicts: one (disk key, read-only, read-only mounts may share) per disk its
    # inline gcePersistentDisk, awsElasticBlockStore, rbd (one key per Ceph monitor) and iscsi volumes use
    disks: tuple[tuple[str, bool, bool], ...] = ()
    # NodeVolumeLimits: (in-tree plugin, handle) of its inline volumes that CSI migration counts (model/csi.py)
    inline_attach: tuple[tuple[str, str], ...] = ()
    pod_group: str = ""           # the scheduler-plugins PodGroup it joins (label, or kube-batch annotation)
    # spec.schedulingGroup.podGroupName: the scheduling.k8s.io/v1alpha2 PodGroup the pod belongs to
    # (None: no spec.schedulingGroup; "" when it names none)
    scheduling_group: str | None = None
    invalid: str = ""             # why the scheduler cannot use this pod ("" = fine)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    # the gang index key of the PodGroup the pod joins ("" none): the native API's, else the CRD's. A pod
    # naming both is refused in its cycle (schedule_one.unsupported) and at PreEnqueue; it is indexed under
    # the native group, whose members it would be scheduled with. Derived once, here: queueing hints and the
    # gang index compare it for every queued pod on every pod event.
    gang: str = field(init=False, default="")
    # "<namespace>/<claim>" of each of ``pvcs``, in order: the volume store's keys. And the volumes
    # NodeVolumeLimits may count, as references that stay valid while claims bind: ("claim", "ns/name") for
    # each claim (generic ephemeral ones included), ("inline", plugin, handle) for each migratable inline
    # volume. Derived once, here: every cycle of the pod, its placement and its removal read them.
    claim_keys: tuple[str, ...] = field(init=False, default=())
    volume_refs: tuple[tuple[str, ...], ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        if self.scheduling_group:
            key = f"{NATIVE_KEY_PREFIX}{self.namespace}/{self.scheduling_group}"
        elif self.pod_group:
            key = f"{self.namespace}/{self.pod_group}"
        else:
            key = ""
        object.__setattr__(self, "gang", key)
        if self.pvcs or self.inline_attach:
            ns = self.namespace
            keys = tuple([f"{ns}/{name}" for name in self.pvcs])
            object.__setattr__(self, "claim_keys", keys)
            object.__setattr__(self, "volume_refs", (*[("claim", k) for k in keys],
                                                     *[("inline", p, h) for p, h in self.inline_attach]))

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def assigned(self) -> bool:
        return bool(self.node_name)


def _add(into: dict[str, int], more: dict[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], more: dict[str, int]) -> None:
    # maxResourceList: a resource missing from ``into`` is taken even at 0 (an explicit 0 is not missing)
    for k, v in more.items():
        if k not in into or v > into[k]:
            into[k] = v


HUGEPAGES_PREFIX = "hugepages-"             # v1.ResourceHugePagesPrefix


def _with_nonzero(reqs: dict[str, int]) -> dict[str, int]:
    # only a missing request gets the default; an explicit 0 stays 0 (GetNonzeroRequestForResource)
    out = dict(reqs)
    if CPU not in out:
        out[CPU] = DEFAULT_MILLI_CPU_REQUEST
    if MEMORY not in out:
        out[MEMORY] = DEFAULT_MEMORY_REQUEST
    return out


def pod_requests(spec: dict[str, Any], probs: _Problems,
                 status: dict[str, Any] | None = None) -> tuple[dict[str, int], int, int]:
    """PodRequests as upstream's resourcehelper computes it: containers, sidecars, init containers, overhead.

    Returns (requests, nonzero cpu, nonzero memory); the nonzero variant
    counts DEFAULT_* for containers that request no cpu or memory.

    With ``status`` (the pod's), in-place resize is accounted for as 1.36's
    scheduler does (UseStatusResources, on with InPlacePodVerticalScaling;
    pod level with InPlacePodLevelResourcesVerticalScaling, beta and on): a
    container, or sidecar, whose status carries ``resources`` is charged the
    largest of its spec requests, ``resources.requests`` and
    ``allocatedResources`` (determineEffectiveRequests), without the spec
    when the pod's PodResizePending condition says Infeasible. A resize down
    in progress so keeps the node charged for what the container still holds.
    """
    reqs: dict[str, int] = {}
    nz: dict[str, int] = {}
    actual = _ResizeState(status, probs) if status else None
    for i, c in enumerate(_l(spec.get("containers"))):
        c = _d(c)
        r = _resource_list(_d(c.get("resources")).get("requests"), f"spec.containers[{i}].resources.requests", probs)
        if actual is not None:
            r = actual.effective(c.get("name"), r)
        _add(reqs, r)
        _add(nz, _with_nonzero(r))
    sidecars: dict[str, int] = {}
    sidecars_nz: dict[str, int] = {}
    init_max: dict[str, int] = {}
    init_max_nz: dict[str, int] = {}
    for i, c in enumerate(_l(spec.get("initContainers"))):
        c = _d(c)
        r = _resource_list(_d(c.get("resources")).get("requests"), f"spec.initContainers[{i}].resources.requests", probs)
        if c.get("restartPolicy") == "Always":
            # a sidecar runs alongside the app containers and every later init container; only sidecars
            # are resized in place (a finished init container holds nothing)
            if actual is not None:
                r = actual.effective(c.get("name"), r)
            rnz = _with_nonzero(r)
            _add(reqs, r)
            _add(nz, rnz)
            _add(sidecars, r)
            _add(sidecars_nz, rnz)
            _max(init_max, sidecars)
            _max(init_max_nz, sidecars_nz)
        else:
            total = dict(r)
            _add(total, sidecars)
            total_nz = _with_nonzero(r)
            _add(total_nz, sidecars_nz)
            _max(init_max, total)
            _max(init_max_nz, total_nz)
    _max(reqs, init_max)
    _max(nz, init_max_nz)
    # pod-level resources (KEP-2837) replace the containers' sum for the resources upstream supports there
    # (IsSupportedPodLevelResource: cpu, memory and hugepages-*); others in spec.resources are not read
    pod_level = {k: v for k, v in _resource_list(_d(_d(spec.get("resources")).get("requests")),
                                                 "spec.resources.requests", probs).items()
                 if k == CPU or k == MEMORY or k.startswith(HUGEPAGES_PREFIX)}
    if actual is not None and pod_level:
        pod_level = actual.effective_pod_level(pod_level)
    reqs.update(pod_level)
    overhead = _resource_list(spec.get("overhead"), "spec.overhead", probs)
    _add(reqs, overhead)
    _add(nz, overhead)
    if pod_level:   # IsPodLevelRequestsSet
        # upstream getNonMissingContainerRequests: with pod-level requests, a default is added only for
        # a resource the whole pod (pod level, containers, overhead) does not request at all
        for k in (CPU, MEMORY):
            if k in reqs:
                nz[k] = reqs[k]
    # sums of huge quantities saturate rather than overflow the int64 node table
    if any(v > INT64_MAX for v in reqs.values()) or any(v > INT64_MAX for v in nz.values()):
        reqs = {k: min(v, INT64_MAX) for k, v in reqs.items()}
        nz = {k: min(v, INT64_MAX) for k, v in nz.items()}
    return reqs, nz.get(CPU, 0), nz.get(MEMORY, 0)


POD_RESIZE_PENDING = "PodResizePending"     # the pod condition the kubelet sets while it cannot resize yet
RESIZE_INFEASIBLE = "Infeasible"            # ... whose reason says the node can never fit the resize


class _ResizeState:
    """What a pod's status says its containers hold (in-place pod resize, KEP-1287), for pod_requests."""

    __slots__ = ("status", "probs", "by_name", "infeasible")

    def __init__(self, status: dict[str, Any], probs: _Problems) -> None:
        self.status = status
        self.probs = probs
        # a status is found by container name, init container statuses last (as upstream's map is filled)
        self.by_name: dict[str, tuple[str, dict[str, Any]]] = {}
        for kind in ("containerStatuses", "initContainerStatuses"):
            for i, cs in enumerate(_l(status.get(kind))):
                cs = _d(cs)
                if isinstance(cs.get("name"), str):
                    self.by_name[cs["name"]] = (f"status.{kind}[{i}]", cs)
        # IsPodResizeInfeasible: the first PodResizePending condition decides
        self.infeasible = False
        for c in map(_d, _l(status.get("conditions"))):
            if c.get("type") == POD_RESIZE_PENDING:
                self.infeasible = c.get("reason") == RESIZE_INFEASIBLE
                break

    def _effective(self, spec: dict[str, int], resources: Any, allocated: Any, path: str,
                   allocated_path: str) -> dict[str, int]:
        """determineEffectiveRequests: max(spec, actuated, allocated), spec left out when Infeasible."""
        out = {} if self.infeasible else dict(spec)
        _max(out, _resource_list(_d(resources).get("requests"), f"{path}.requests", self.probs))
        _max(out, _resource_list(allocated, allocated_path, self.probs))
        return out

    def effective(self, name: Any, spec: dict[str, int]) -> dict[str, int]:
        """A container's requests: its spec unless its status carries ``resources`` (upstream: cs.Resources != nil)."""
        hit = self.by_name.get(name) if isinstance(name, str) else None
        if hit is None or hit[1].get("resources") is None:
            return spec
        path, cs = hit
        return self._effective(spec, cs["resources"], cs.get("allocatedResources"), f"{path}.resources",
                               f"{path}.allocatedResources")

    def effective_pod_level(self, spec: dict[str, int]) -> dict[str, int]:
        """Pod-level requests once status.resources is set; a resource the effective list lacks is 0, as upstream."""
        if self.status.get("resources") is None:
            return spec
        eff = self._effective(spec, self.status["resources"], self.status.get("allocatedResources"),
                              "status.resources", "status.allocatedResources")
        return {k: eff.get(k, 0) for k in spec}


_TOLERATION_OPS = ("Equal", "Exists", "")


def _tolerations(v: Any, probs: _Problems) -> tuple[Toleration, ...]:
    out = []
    for i, t in enumerate(_l(v)):
        t = _d(t)
        op = t.get("operator") or "Equal"
        effect = t.get("effect") or ""
        if op not in _TOLERATION_OPS:
            probs.add(f"spec.tolerations[{i}].operator", f'Unsupported value: "{op}": supported values: "Equal", "Exists"')
            continue
        if effect and effect not in _EFFECTS:
            probs.add(f"spec.tolerations[{i}].effect", f'Unsupported value: "{effect}"')
            continue
        secs = t.get("tolerationSeconds")
        out.append(Toleration(str(t.get("key") or ""), op, str(t.get("value") or ""), effect,
                              secs if isinstance(secs, int) else None))
    return tuple(out)


# the inline volume sources VolumeRestrictions checks for disk conflicts (needsRestrictionsCheck)
CONFLICT_DISK_SOURCES = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")


def _disk_keys(v: dict[str, Any]) -> list[tuple[str, bool, bool]]:
    """isVolumeConflict's identities of an inline volume: a GCE disk by pdName, an EBS volume by volumeID (never
    shared, even read-only), an iSCSI volume by IQN, an RBD image by each Ceph monitor with pool and image
    (monitors overlap: any one in common). Read-only mounts of the same GCE disk, IQN or RBD image may share."""
    out: list[tuple[str, bool, bool]] = []
    for src in CONFLICT_DISK_SOURCES:
        d = v.get(src)
        if not isinstance(d, dict):
            continue
        ro = d.get("readOnly") is True
        if src == "gcePersistentDisk":
            out.append((f"gce\0{d.get('pdName', '')}", ro, True))
        elif src == "awsElasticBlockStore":
            out.append((f"ebs\0{d.get('volumeID', '')}", ro, False))
        elif src == "iscsi":
            out.append((f"iscsi\0{d.get('iqn', '')}", ro, True))
        else:
            for mon in dict.fromkeys(m for m in _l(d.get("monitors")) if isinstance(m, str)):
                out.append((f"rbd\0{mon}\0{d.get('pool', '')}\0{d.get('image', '')}", ro, True))
    return out


def parse_pod(obj: dict[str, Any]) -> Pod:
    meta = _d(obj.get("metadata"))
    spec = _d(obj.get("spec"))
    status = _d(obj.get("status"))
    probs = _Problems()
    labels = _str_map(meta.get("labels"), "metadata.labels", probs)
    annotations = _str_map(meta.get("annotations"), "metadata.annotations", probs)
    reqs, nz_cpu, nz_mem = pod_requests(spec, probs, status)
    ports = []
    images = []
    for kind in ("initContainers", "containers"):
        for ci, c in enumerate(_l(spec.get(kind))):
            c = _d(c)
            if isinstance(c.get("image"), str):
                images.append(c["image"])
            # GetHostPorts: sidecars (init containers with restartPolicy Always) run all the pod's life and
            # hold their host ports as app containers do (listed first, as upstream lists them); other init
            # containers are done before the app starts
            if kind == "containers" or c.get("restartPolicy") == "Always":
                for j, p in enumerate(_l(c.get("ports"))):
                    p = _d(p)
                    hp = p.get("hostPort")
                    if isinstance(hp, int) and not isinstance(hp, bool) and hp > 0:
                        path = f"spec.{kind}[{ci}].ports[{j}]"
                        # HostPortInfo's sanitize: an empty hostIP binds all addresses, an empty protocol is TCP
                        ports.append(HostPort(_s(p.get("hostIP"), f"{path}.hostIP", probs, "0.0.0.0"),
                                              _s(p.get("protocol"), f"{path}.protocol", probs, "TCP"), hp))
    owners = tuple(OwnerRef(str(o.get("kind", "")), str(o.get("name", "")), str(o.get("uid", "")),
                            bool(o.get("controller")), str(o.get("apiVersion", "")))
                   for o in map(_d, _l(meta.get("ownerReferences"))))
    pvcs: list[str] = []
    ephemeral: list[str] = []
    disks: list[tuple[str, bool, bool]] = []
    inline_attach: list[tuple[str, str]] = []
    for v in map(_d, _l(spec.get("volumes"))):
        claim = v.get("persistentVolumeClaim")
        if claim:   # a volume has one source (the API validates it): no inline disk to look for
            pvcs.append(str(_d(claim).get("claimName", "")))
            continue
        disks.extend(_disk_keys(v))
        attach = in_tree_volume(v)
        if attach is not None:
            inline_attach.append(attach)
        if v.get("ephemeral"):
            # ephemeral.VolumeClaimName: the pod's name, a dash, the volume's name
            ephemeral.append(f"{meta.get('name', '')}-{v.get('name', '')}")
            pvcs.append(ephemeral[-1])
    priority = spec.get("priority")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        probs.add("spec.priority", f"must be an integer, got {priority!r}")
        priority = 0
    pc_name = spec.get("priorityClassName") or ""
    if priority is None:
        priority = 0
    namespace = str(meta.get("namespace", ""))
    aff = _d(spec.get("affinity"))
    pod_affinity = None
    if aff.get("podAffinity") is not None or aff.get("podAntiAffinity") is not None:
        raw_aff = (aff.get("podAffinity"), aff.get("podAntiAffinity"))
        pod_affinity = _memo("affinity", raw_aff, namespace, labels, probs,
                             lambda pr: _pod_affinity(aff, namespace, labels, pr))
    raw_spread = spec.get("topologySpreadConstraints")
    spread: tuple[SpreadConstraint, ...] = ()
    if raw_spread:
        spread = _memo("spread", raw_spread, namespace, labels, probs,
                       lambda pr: _spread_constraints(raw_spread, labels, pr))
    return Pod(
        uid=str(meta.get("uid", "")),
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        labels=labels,
        annotations=annotations,
        scheduler_name=_s(spec.get("schedulerName"), "spec.schedulerName", probs, "default-scheduler"),
        node_name=_s(spec.get("nodeName"), "spec.nodeName", probs),
        nominated_node_name=_s(status.get("nominatedNodeName"), "status.nominatedNodeName", probs),
        priority=priority,
        priority_class_name=pc_name if isinstance(pc_name, str) else "",
        preemption_policy=_s(spec.get("preemptionPolicy"), "spec.preemptionPolicy", probs, "PreemptLowerPriority"),
        created=parse_time(meta.get("creationTimestamp")),
        start_time=parse_time(status.get("startTime")),
        active_deadline=_deadline(spec.get("activeDeadlineSeconds"), probs),
        phase=_s(status.get("phase"), "status.phase", probs, "Pending"),
        deleting=bool(meta.get("deletionTimestamp")),
        requests=reqs,
        nonzero_cpu=nz_cpu,
        nonzero_memory=nz_mem,
        node_selector=_str_map(spec.get("nodeSelector"), "spec.nodeSelector", probs),
        affinity=_check_affinity(spec.get("affinity"), probs),
        tolerations=_tolerations(spec.get("tolerations"), probs),
        host_ports=tuple(ports),
        images=tuple(images),
        scheduling_gates=tuple(str(_d(g).get("name", "")) for g in _l(spec.get("schedulingGates"))),
        pod_affinity=pod_affinity,
        topology_spread=spread,
        owners=owners,
        pvcs=tuple(pvcs),
        ephemeral_pvcs=tuple(ephemeral),
        resource_claims=tuple(str(_d(c).get("name", "")) for c in _l(spec.get("resourceClaims"))),
        disks=tuple(disks),
        inline_attach=tuple(inline_attach),
        pod_group=labels.get(POD_GROUP_LABEL) or annotations.get(POD_GROUP_ANNOTATION) or "",
        scheduling_group=None if spec.get("schedulingGroup") is None else _s(
            _d(spec["schedulingGroup"]).get("podGroupName"), "spec.schedulingGroup.podGroupName", probs),
        invalid=probs.first,
        raw=obj,
    )


def _deadline(raw: Any, probs: Any) -> int:
    if raw is None:
        return 0
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        probs.add("spec.activeDeadlineSeconds", f"must be a positive integer, got {raw!r}")
        return 0
    return raw


def marked_preempted(p: Pod) -> bool:
    """Does the pod carry DisruptionTarget=True with reason PreemptionByScheduler (a scheduler preempted it)?"""
    for c in (p.raw.get("status") or {}).get("conditions") or ():
        if c.get("type") == "DisruptionTarget" and c.get("status") == "True" \
                and c.get("reason") == PREEMPTION_BY_SCHEDULER:
            return True
    return False
