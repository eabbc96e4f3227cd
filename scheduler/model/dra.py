"""Dynamic Resource Allocation's objects (resource.k8s.io/v1), parsed from API JSON into frozen records.

DeviceClass, ResourceSlice (a driver's devices in a pool, on one node, a set of nodes or all of them),
ResourceClaim (what a pod asks for, and once allocated, which devices it got and where). Only what the
scheduler reads is parsed; the raw object is kept for the writes (PreBind updates the claim it read).

A field tandem does not evaluate makes the object say so in ``unsupported`` (the field path and why): a
claim with one is refused by name at PreFilter, a device with one is never allocated. Nothing is allocated
while a field that would change the answer is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scheduler.model.fields import _d, _l

DRA_GROUP = "resource.k8s.io"
DRA_VERSION = "resource.k8s.io/v1"
# the finalizer kube-scheduler adds before it writes an allocation (resourceapi.Finalizer)
FINALIZER = "resource.kubernetes.io/delete-protection"
# the annotation the resourceclaim controller puts on a claim it generated from a template
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
# resourceapi.ResourceClaimReservedForMaxSize
RESERVED_FOR_MAX = 256
EXACT_COUNT = "ExactCount"
ALL = "All"

DeviceID = tuple[str, str, str]   # (driver, pool, device): upstream's DeviceID


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str
    operator: str        # Equal (default) or Exists
    value: str
    effect: str          # "" tolerates every effect

    def tolerates(self, taint: DeviceTaint) -> bool:
        """ToleratesTaint, as for node taints (an empty key with Exists tolerates everything)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.operator in ("Equal", "") and self.value == taint.value


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str
    effect: str          # NoSchedule, NoExecute (None: informational, never keeps a device from a claim)


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    raw: dict[str, Any]                      # the slice's entry (attributes, capacity): the CEL view is built from it
    taints: tuple[DeviceTaint, ...] = ()
    unsupported: str = ""                    # why tandem never allocates it ("" = it may)

    def attribute(self, driver: str, qualified: str) -> Any:
        """The value of attribute ``domain/id`` (an id alone is the driver's), as (kind, value); None if absent."""
        domain, _, ident = qualified.rpartition("/")
        attrs = _d(self.raw.get("attributes"))
        for name in ((ident, qualified) if domain == driver else (qualified,)):
            a = attrs.get(name)
            if isinstance(a, dict):
                for kind in ("int", "bool", "string", "version"):
                    if kind in a:
                        return kind, a[kind]
        return None


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    node_name: str                                # "" unless the slice is one node's
    all_nodes: bool
    node_selector: dict[str, Any] | None          # spec.nodeSelector (raw NodeSelector), None if not set
    devices: tuple[Device, ...]
    unsupported: str = ""                         # a field that makes every device of the slice unusable here


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...]                    # CEL expressions
    config: tuple[dict[str, Any], ...]            # spec.config[] (opaque driver parameters), copied to allocations
    unsupported: str = ""


@dataclass(frozen=True, slots=True)
class ExactRequest:
    """``exactly`` of a request, or one ``firstAvailable`` subrequest."""

    class_name: str
    selectors: tuple[str, ...]
    mode: str                                     # ExactCount or All
    count: int
    admin_access: bool
    tolerations: tuple[DeviceToleration, ...]

    @property
    def key(self) -> tuple[Any, ...]:
        """What decides which devices may serve it (the column key of the device index)."""
        return self.class_name, self.selectors, self.tolerations, self.admin_access


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    exactly: ExactRequest | None
    first_available: tuple[tuple[str, ExactRequest], ...]   # (subrequest name, subrequest)


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    requests: tuple[str, ...]                     # empty: every request of the claim
    match_attribute: str


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    request: str
    device: DeviceID
    admin_access: bool


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    uid: str
    resource_version: str
    requests: tuple[DeviceRequest, ...]
    constraints: tuple[DeviceConstraint, ...]
    config: tuple[dict[str, Any], ...]            # spec.devices.config[]
    allocation: dict[str, Any] | None             # status.allocation, raw
    allocated: tuple[AllocatedDevice, ...]        # its results
    reserved_for: tuple[tuple[str, str, str], ...]   # (resource, name, uid)
    deleting: bool
    finalizers: tuple[str, ...]
    owner_pod: str                                # uid of the controlling Pod ("" if none)
    pod_claim_name: str                           # the resource.kubernetes.io/pod-claim-name annotation
    unsupported: str
    raw: dict[str, Any]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def reserved_for_pod(self, uid: str) -> bool:
        return any(r[2] == uid for r in self.reserved_for)

    def devices(self) -> frozenset[DeviceID]:
        """The devices it holds exclusively (admin access shares a device with its owner: not counted)."""
        return frozenset(a.device for a in self.allocated if not a.admin_access)


def _strs(v: Any) -> tuple[str, ...]:
    return tuple(str(x) for x in _l(v))


def _selectors(raw: Any) -> tuple[str, ...]:
    return tuple(str(_d(_d(s).get("cel")).get("expression", "")) for s in _l(raw))


def _tolerations(raw: Any) -> tuple[DeviceToleration, ...]:
    return tuple(DeviceToleration(str(t.get("key", "") or ""), str(t.get("operator", "") or "Equal"),
                                  str(t.get("value", "") or ""), str(t.get("effect", "") or ""))
                 for t in map(_d, _l(raw)))


def _exact(raw: dict[str, Any], path: str, problems: list[str]) -> ExactRequest:
    if raw.get("capacity"):
        problems.append(f"{path}.capacity: consumable capacity is not supported by tandem")
    mode = str(raw.get("allocationMode") or EXACT_COUNT)
    if mode not in (EXACT_COUNT, ALL):
        problems.append(f"{path}.allocationMode: unsupported value {mode!r}")
    count = raw.get("count")
    count = int(count) if isinstance(count, int) and not isinstance(count, bool) else 1
    return ExactRequest(str(raw.get("deviceClassName", "") or ""), _selectors(raw.get("selectors")), mode,
                        count if mode == EXACT_COUNT else 0, bool(raw.get("adminAccess")),
                        _tolerations(raw.get("tolerations")))


def parse_resource_claim(obj: dict[str, Any]) -> ResourceClaim:
    meta = _d(obj.get("metadata"))
    spec = _d(_d(obj.get("spec")).get("devices"))
    status = _d(obj.get("status"))
    problems: list[str] = []
    requests = []
    for i, r in enumerate(map(_d, _l(spec.get("requests")))):
        path = f"spec.devices.requests[{i}]"
        exactly = _exact(_d(r["exactly"]), f"{path}.exactly", problems) if r.get("exactly") else None
        subs = tuple((str(s.get("name", "")), _exact(s, f"{path}.firstAvailable[{j}]", problems))
                     for j, s in enumerate(map(_d, _l(r.get("firstAvailable")))))
        requests.append(DeviceRequest(str(r.get("name", "")), exactly, subs))
    constraints = []
    for i, c in enumerate(map(_d, _l(spec.get("constraints")))):
        if c.get("distinctAttribute"):
            problems.append(f"spec.devices.constraints[{i}].distinctAttribute: not supported by tandem")
        if c.get("matchAttribute"):
            constraints.append(DeviceConstraint(_strs(c.get("requests")), str(c["matchAttribute"])))
    alloc = status.get("allocation")
    allocated = tuple(
        AllocatedDevice(str(x.get("request", "")), (str(x.get("driver", "")), str(x.get("pool", "")),
                                                     str(x.get("device", ""))), bool(x.get("adminAccess")))
        for x in map(_d, _l(_d(_d(alloc).get("devices")).get("results"))))
    owner = next((str(o.get("uid", "")) for o in map(_d, _l(meta.get("ownerReferences")))
                  if o.get("controller") and o.get("kind") == "Pod" and o.get("apiVersion") == "v1"), "")
    return ResourceClaim(
        namespace=str(meta.get("namespace", "")), name=str(meta.get("name", "")), uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")), requests=tuple(requests),
        constraints=tuple(constraints), config=tuple(map(_d, _l(spec.get("config")))),
        allocation=alloc if isinstance(alloc, dict) else None, allocated=allocated,
        reserved_for=tuple((str(r.get("resource", "")), str(r.get("name", "")), str(r.get("uid", "")))
                           for r in map(_d, _l(status.get("reservedFor")))),
        deleting=bool(meta.get("deletionTimestamp")), finalizers=_strs(meta.get("finalizers")),
        owner_pod=owner, pod_claim_name=str(_d(meta.get("annotations")).get(POD_CLAIM_NAME_ANNOTATION, "")),
        unsupported=problems[0] if problems else "", raw=obj)


def _device(raw: dict[str, Any], path: str) -> Device:
    why = ""
    # fields whose meaning tandem does not evaluate: such a device is never allocated (never ignored)
    for field, what in (("consumesCounters", "partitionable devices (shared counters)"),
                        ("allowMultipleAllocations", "consumable capacity"),
                        ("bindingConditions", "binding conditions"),
                        ("bindsToNode", "binding conditions"),
                        ("nodeName", "per-device node selection"), ("nodeSelector", "per-device node selection"),
                        ("allNodes", "per-device node selection")):
        if raw.get(field):
            why = f"{path}.{field}: {what} are not supported by tandem"
            break
    taints = tuple(DeviceTaint(str(t.get("key", "")), str(t.get("value", "") or ""), str(t.get("effect", "")))
                   for t in map(_d, _l(raw.get("taints"))))
    return Device(str(raw.get("name", "")), raw, taints, why)


def parse_resource_slice(obj: dict[str, Any]) -> ResourceSlice:
    meta = _d(obj.get("metadata"))
    spec = _d(obj.get("spec"))
    pool = _d(spec.get("pool"))
    why = ""
    if spec.get("sharedCounters"):
        why = "spec.sharedCounters: partitionable devices are not supported by tandem"
    elif spec.get("perDeviceNodeSelection"):
        why = "spec.perDeviceNodeSelection: not supported by tandem"
    gen = pool.get("generation")
    count = pool.get("resourceSliceCount")
    sel = spec.get("nodeSelector")
    return ResourceSlice(
        name=str(meta.get("name", "")), driver=str(spec.get("driver", "")), pool=str(pool.get("name", "")),
        generation=gen if isinstance(gen, int) else 0, slice_count=count if isinstance(count, int) else 1,
        node_name=str(spec.get("nodeName", "") or ""), all_nodes=bool(spec.get("allNodes")),
        node_selector=sel if isinstance(sel, dict) else None,
        devices=tuple(_device(d, f"spec.devices[{i}]") for i, d in enumerate(map(_d, _l(spec.get("devices"))))),
        unsupported=why)


def parse_device_class(obj: dict[str, Any]) -> DeviceClass:
    meta = _d(obj.get("metadata"))
    spec = _d(obj.get("spec"))
    why = ""
    if spec.get("extendedResourceName"):
        # pods asking for the extended resource are not served from devices by tandem (NodeResourcesFit
        # counts it as a node resource); a claim naming the class is allocated as usual
        why = ""
    return DeviceClass(str(meta.get("name", "")), _selectors(spec.get("selectors")),
                       tuple(map(_d, _l(spec.get("config")))), why)


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One ``spec.resourceClaims`` entry, resolved to the claim's name (resourceclaim.Name)."""

    entry: str              # spec.resourceClaims[].name
    claim: str | None       # the ResourceClaim's name; None: no claim needed (a template entry the controller skipped)
    generated: bool         # from a template: the claim must be the pod's own (IsForPod)
    error: str              # why the name is not known yet ("" = known)


def pod_claims(pod_raw: dict[str, Any]) -> list[PodClaim]:
    """resourceclaim.Name for each entry: a ``resourceClaimName`` as is; a template's from the pod's
    ``status.resourceClaimStatuses`` (the resourceclaim controller writes it), or not created yet."""
    meta = _d(pod_raw.get("metadata"))
    statuses = {str(s.get("name", "")): s for s in map(_d, _l(_d(pod_raw.get("status")).get("resourceClaimStatuses")))}
    out = []
    for entry in map(_d, _l(_d(pod_raw.get("spec")).get("resourceClaims"))):
        name = str(entry.get("name", ""))
        if entry.get("resourceClaimName"):
            out.append(PodClaim(name, str(entry["resourceClaimName"]), False, ""))
        elif entry.get("resourceClaimTemplateName"):
            st = statuses.get(name)
            if st is None:
                out.append(PodClaim(name, None, True, f'pod "{meta.get("namespace", "")}/{meta.get("name", "")}": '
                                                     "ResourceClaim not created yet"))
            else:
                claim = st.get("resourceClaimName")
                out.append(PodClaim(name, str(claim) if claim else None, True, ""))
        else:
            out.append(PodClaim(name, None, False, f'pod "{meta.get("namespace", "")}/{meta.get("name", "")}", '
                                                   f'spec.resourceClaim {name!r}: none of the supported fields are set'))
    return out
