"""ResourceClaims and ResourceClaimTemplates (resource.k8s.io/v1) as kube-apiserver 1.36 defaults and checks them.

Observed on kube-apiserver 1.36.2 (the messages are its words; the paths
name v1's fields):

* **Defaults** of every request, ``exactly`` or a ``firstAvailable``
  subrequest: ``allocationMode: ExactCount``, then ``count: 1`` when the mode
  is ExactCount and no count was given (a count of 0 is "none"); a
  toleration's ``operator: Equal``. ``spec.devices.requests`` is always
  written, ``null`` when there are none; a template always has
  ``spec.metadata`` (``{}``). A claim's status is dropped on create and is
  ``{}`` until written; tolerations of allocation results get their
  operator too.
* **Spec** (create): at most 32 requests with unique DNS-label names, each
  with exactly one of ``exactly`` (a required DNS-subdomain
  ``deviceClassName``, at most 32 selectors each with a ``cel``, mode All
  without a count or ExactCount with a count above zero, tolerations) and
  ``firstAvailable`` (at most 8 subrequests with unique names, each like
  ``exactly`` plus its name); constraints whose ``requests`` name requests
  (``request`` or ``request/subrequest``, no repeats) and whose
  ``matchAttribute`` (or ``distinctAttribute``) is a fully qualified
  attribute name; configs with ``requests`` likewise and an opaque
  configuration. ``adminAccess: true`` needs the namespace label
  ``resource.kubernetes.io/admin-access: "true"`` (403-free: a 422 cause).
* **Updates**: the spec of a claim, and of a template, is immutable: the
  only check (no re-validation), printed as the whole internal Go struct.
  Updates of the claim itself never change its status; status writes never
  change its spec or metadata.
* **Status**: ``reservedFor`` at most 256 entries, each with ``resource``,
  ``name`` and ``uid``, unique by ``uid``, only while ``allocation`` is
  set, and no new entries once the claim is being deleted; an
  ``allocation`` is validated when it is first set (results naming
  requests, drivers, pools, devices; configs; node selector) and cannot
  change afterwards, only be cleared.
* A template's ``spec.metadata`` may carry labels and annotations only.
* A pod's ``spec.resourceClaims`` have DNS-label names, once each, and
  exactly one of ``resourceClaimName`` and ``resourceClaimTemplateName``;
  its containers' ``resources.claims`` name them (a claim used whole and also
  by request, or a request used twice, is a duplicate). Its
  ``status.resourceClaimStatuses`` name entries of its ``spec.resourceClaims``
  once each; a ``resourceClaimName`` is a DNS subdomain.

Not checked: CEL expressions (the real server compiles them; see
:func:`bench.simcluster.drafields.validate_selectors`), ``status.devices``
beyond dropping the entries of deallocated devices, binding conditions and
share IDs of allocation results, and admin access in status writes.
"""

from __future__ import annotations

from typing import Any

from bench.simcluster import defaults, names
from bench.simcluster.drafields import (
    DEVICE_CONFIG_MAX, DEVICE_CONSTRAINTS_MAX, DEVICE_REQUESTS_MAX, FIRST_AVAILABLE_MAX, I, NODE_SELECTOR, OPAQUE,
    RAW, SELECTOR, TOLERATION, S, as_dict, as_list, canonical_quantities, check_int, default_toleration, dicts,
    drop_empty, duplicates, go_object, go_text, go_value, map_of, ptr, semantic, slice_of, strip_nulls, struct,
    text, too_many, validate_class_name, validate_configs, validate_dns_label, validate_driver_name,
    validate_fully_qualified_name, validate_opaque, validate_pool_name, validate_request_ref,
    validate_request_refs, validate_selectors, validate_toleration,
)
from bench.simcluster.errors import (
    FieldError, duplicate, field_not_found, forbidden_field, invalid_value, not_supported, required,
)

ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
RESERVED_FOR_MAX = 256
ALLOCATION_RESULTS_MAX = 32
ALLOCATION_MODES = ["All", "ExactCount"]
CONFIG_SOURCES = ["FromClaim", "FromClass"]
IMMUTABLE = "field is immutable"

RequestNames = dict[str, "set[str] | None"]   # request -> its subrequests (None: it has none)

# the internal Go types, as "field is immutable" prints them
_CAPACITY = ptr(struct(("Requests", "requests", map_of(RAW))))
_COMMON = (("DeviceClassName", "deviceClassName", S), ("Selectors", "selectors", slice_of(SELECTOR)),
           ("AllocationMode", "allocationMode", S), ("Count", "count", I))
_EXACT = struct(*_COMMON, ("AdminAccess", "adminAccess", RAW), ("Tolerations", "tolerations", slice_of(TOLERATION)),
                ("Capacity", "capacity", _CAPACITY))
_SUBREQUEST = struct(("Name", "name", S), *_COMMON, ("Tolerations", "tolerations", slice_of(TOLERATION)),
                     ("Capacity", "capacity", _CAPACITY))
_REQUEST = struct(("Name", "name", S), ("Exactly", "exactly", ptr(_EXACT)),
                  ("FirstAvailable", "firstAvailable", slice_of(_SUBREQUEST)))
_CONSTRAINT = struct(("Requests", "requests", slice_of(S)), ("MatchAttribute", "matchAttribute", RAW),
                     ("DistinctAttribute", "distinctAttribute", RAW))
_CLAIM_CONFIG = struct(("Requests", "requests", slice_of(S)), ("Opaque", "opaque", OPAQUE))
CLAIM_SPEC = struct(("Devices", "devices", struct(
    ("Requests", "requests", slice_of(_REQUEST)), ("Constraints", "constraints", slice_of(_CONSTRAINT)),
    ("Config", "config", slice_of(_CLAIM_CONFIG)))))
_RESULT = struct(("Request", "request", S), ("Driver", "driver", S), ("Pool", "pool", S), ("Device", "device", S),
                 ("AdminAccess", "adminAccess", RAW), ("Tolerations", "tolerations", slice_of(TOLERATION)),
                 ("BindingConditions", "bindingConditions", slice_of(S)),
                 ("BindingFailureConditions", "bindingFailureConditions", slice_of(S)), ("ShareID", "shareID", RAW),
                 ("ConsumedCapacity", "consumedCapacity", map_of(RAW)))
_ALLOCATION_CONFIG = struct(("Source", "source", S), ("Requests", "requests", slice_of(S)), ("Opaque", "opaque", OPAQUE))
ALLOCATION = struct(("Devices", "devices", struct(("Results", "results", slice_of(_RESULT)),
                                                  ("Config", "config", slice_of(_ALLOCATION_CONFIG)))),
                    ("NodeSelector", "nodeSelector", NODE_SELECTOR), ("AllocationTimestamp", "allocationTimestamp", RAW))
# metav1.ObjectMeta's fields in order: embedded in the template spec, they print by their json names, omitempty
_OBJECT_META = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
                "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
                "ownerReferences", "finalizers", "managedFields")
_TEMPLATE_META_ALLOWED = frozenset(("labels", "annotations"))

# v1's field order, which the stored JSON follows
_REQUEST_KEYS = ("name", "exactly", "firstAvailable")
_EXACT_KEYS = ("name", "deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations",
               "capacity")


def _ordered(d: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    out = {k: d[k] for k in keys if k in d}
    out.update((k, v) for k, v in d.items() if k not in out)
    return out


# ---------------------------------------------------------------------------- decoding and defaults

def _prepare_exact(kind: str, e: dict[str, Any], go_field: str) -> dict[str, Any]:
    """SetDefaults_ExactDeviceRequest (and of a subrequest), after decoding its int and quantities."""
    check_int(kind, e.get("count"), go_field)
    if not e.get("allocationMode"):
        e["allocationMode"] = "ExactCount"
    if e["allocationMode"] == "ExactCount" and not e.get("count"):
        e["count"] = 1
    if e.get("count") == 0:
        del e["count"]   # omitempty
    for t in as_list(e.get("tolerations")):
        if isinstance(t, dict):
            default_toleration(t)
    if isinstance(e.get("capacity"), dict):
        canonical_quantities(kind, e["capacity"].get("requests"))
        drop_empty(e["capacity"], "requests")
    drop_empty(e, "selectors", "tolerations")
    return _ordered(e, _EXACT_KEYS)


def prepare_spec(kind: str, spec: Any, path: str) -> dict[str, Any]:
    """A claim's spec (at ``path``, for decoding errors) decoded and defaulted as the real server stores it."""
    spec = strip_nulls(as_dict(spec))
    devices = as_dict(spec.get("devices"))
    go_path = f"{path}.devices.requests"
    requests = []
    for r in as_list(devices.get("requests")):
        if isinstance(r, dict):
            if isinstance(r.get("exactly"), dict):
                r["exactly"] = _prepare_exact(kind, r["exactly"], f"ExactDeviceRequest.{go_path}.exactly.count")
            subs = as_list(r.get("firstAvailable"))
            r["firstAvailable"] = [_prepare_exact(kind, s, f"DeviceSubRequest.{go_path}.firstAvailable.count")
                                   if isinstance(s, dict) else s for s in subs]
            drop_empty(r, "firstAvailable")
            r = _ordered(r, _REQUEST_KEYS)
        requests.append(r)
    devices["requests"] = requests or None   # not omitempty: null when there are none
    for key in ("constraints", "config"):
        for entry in as_list(devices.get(key)):
            if isinstance(entry, dict):
                drop_empty(entry, "requests")
    drop_empty(devices, "constraints", "config")
    spec["devices"] = _ordered(devices, ("requests", "constraints", "config"))
    return spec


def prepare_template_spec(kind: str, spec: Any) -> dict[str, Any]:
    spec = strip_nulls(as_dict(spec))
    meta = as_dict(spec.get("metadata"))
    drop_empty(meta, "labels", "annotations")
    return {"metadata": meta, "spec": prepare_spec(kind, spec.get("spec"), "spec.spec")}


def prepare_status(kind: str, status: Any, old_status: Any) -> dict[str, Any]:
    """A status write as decoded and prepared (dropDeallocatedStatusDevices included)."""
    status = strip_nulls(as_dict(status))
    allocation = status.get("allocation")
    allocated = set()
    if isinstance(allocation, dict):
        for r in as_list(as_dict(allocation.get("devices")).get("results")):
            if isinstance(r, dict):
                for t in as_list(r.get("tolerations")):
                    if isinstance(t, dict):
                        default_toleration(t)
                canonical_quantities(kind, r.get("consumedCapacity"))
                allocated.add((r.get("driver"), r.get("pool"), r.get("device")))
    old_results = dicts(as_dict(as_dict(as_dict(old_status).get("allocation")).get("devices")).get("results"))
    gone = {(r.get("driver"), r.get("pool"), r.get("device")) for _, r in old_results} - allocated
    if gone and isinstance(status.get("devices"), list):
        status["devices"] = [d for d in status["devices"]
                             if (as_dict(d).get("driver"), as_dict(d).get("pool"), as_dict(d).get("device")) not in gone]
    drop_empty(status, "reservedFor", "devices")
    return status


# ---------------------------------------------------------------------------- spec

def request_names(spec: Any) -> RequestNames:
    out: RequestNames = {}
    for _, r in dicts(as_dict(as_dict(spec).get("devices")).get("requests")):
        subs = dicts(r.get("firstAvailable"))
        out[text(r.get("name"))] = {text(s.get("name")) for _, s in subs} if subs else None
    return out


def _validate_mode(e: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    mode, count = text(e.get("allocationMode")), e.get("count", 0)
    if mode == "All":
        if count:
            errs.append(invalid_value(f"{path}.count", count, "must not be specified when allocationMode is 'All'"))
    elif mode == "ExactCount":
        if not isinstance(count, int) or count <= 0:
            errs.append(invalid_value(f"{path}.count", count, "must be greater than zero"))
    else:
        errs.append(not_supported(f"{path}.allocationMode", mode, ALLOCATION_MODES))


def _validate_exact(e: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    """validateExactDeviceRequest, and the shared part of validateDeviceSubRequest (after the name)."""
    validate_class_name(text(e.get("deviceClassName")), f"{path}.deviceClassName", errs)
    validate_selectors(e.get("selectors"), f"{path}.selectors", errs)
    _validate_mode(e, path, errs)
    for i, t in dicts(e.get("tolerations")):
        validate_toleration(t, f"{path}.tolerations[{i}]", errs)


def _validate_request(r: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    validate_dns_label(text(r.get("name")), f"{path}.name", errs)
    subs, exactly = dicts(r.get("firstAvailable")), r.get("exactly")
    if not subs and exactly is None:
        errs.append(required(path, "exactly one of `exactly` or `firstAvailable` is required"))
    elif subs and exactly is not None:
        errs.append(invalid_value(path, None, "exactly one of `exactly` or `firstAvailable` is required, "
                                              "but multiple fields are set"))
    elif subs:
        if too_many(subs, FIRST_AVAILABLE_MAX, f"{path}.firstAvailable", errs):
            return
        for i, s in subs:
            p = f"{path}.firstAvailable[{i}]"
            validate_dns_label(text(s.get("name")), f"{p}.name", errs)
            _validate_exact(s, p, errs)
        duplicates([text(s.get("name")) for _, s in subs], f"{path}.firstAvailable", errs)
    else:
        _validate_exact(as_dict(exactly), f"{path}.exactly", errs)


def _validate_constraint(c: dict[str, Any], path: str, requests: RequestNames, errs: list[FieldError]) -> None:
    validate_request_refs(c.get("requests"), f"{path}.requests", requests, errs)
    for key in ("matchAttribute", "distinctAttribute"):
        if c.get(key) is not None:
            validate_fully_qualified_name(text(c[key]), f"{path}.{key}", errs)
            return
    # the DRAConsumableCapacity wording (sic: "multiple" where none is set), as 1.36 has the gate on
    errs.append(required(path, 'exactly one of "matchAttribute" or "distinctAttribute" is required, '
                               "but multiple fields are set"))


def validate_spec(spec: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    """validateResourceClaimSpec: the requests, then the constraints, then the configs."""
    devices = as_dict(spec.get("devices"))
    path = f"{path}.devices"
    names_ = request_names(spec)
    requests = dicts(devices.get("requests"))
    if not too_many(requests, DEVICE_REQUESTS_MAX, f"{path}.requests", errs):
        for i, r in requests:
            _validate_request(r, f"{path}.requests[{i}]", errs)
        duplicates([text(r.get("name")) for _, r in requests], f"{path}.requests", errs)
    constraints = dicts(devices.get("constraints"))
    if not too_many(constraints, DEVICE_CONSTRAINTS_MAX, f"{path}.constraints", errs):
        for i, c in constraints:
            _validate_constraint(c, f"{path}.constraints[{i}]", names_, errs)
    validate_configs(devices.get("config"), DEVICE_CONFIG_MAX, f"{path}.config", errs, names_)


def admin_access(spec: dict[str, Any], namespace_labels: dict[str, str]) -> list[FieldError]:
    """AuthorizedForAdmin: a request for admin access needs the namespace's opt-in label (the path is
    ``spec.devices`` for templates too, as upstream builds it)."""
    if namespace_labels.get(ADMIN_ACCESS_LABEL) == "true":
        return []
    return [forbidden_field(f"spec.devices.requests[{i}].adminAccess",
                            f"admin access to devices requires the `{ADMIN_ACCESS_LABEL}: true` label on the "
                            "containing namespace")
            for i, r in dicts(as_dict(spec.get("devices")).get("requests"))
            if as_dict(r.get("exactly")).get("adminAccess") is True]


def spec_immutable(new: Any, old: Any) -> list[FieldError]:
    """A claim's spec cannot change (ValidateImmutableField on the internal type)."""
    if semantic(new) == semantic(old):
        return []
    return [invalid_value("spec", go_value(CLAIM_SPEC, new), IMMUTABLE)]


# ---------------------------------------------------------------------------- templates

def validate_template_metadata(meta: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    """ValidateTemplateObjectMeta: annotations, labels, and no other metadata field."""
    defaults.validate_annotations(meta.get("annotations"), f"{path}.annotations", errs)
    defaults.validate_labels(meta.get("labels"), f"{path}.labels", errs)
    for key in _OBJECT_META:
        if key not in _TEMPLATE_META_ALLOWED and meta.get(key) not in (None, "", 0, [], {}):
            errs.append(forbidden_field(f"{path}.{key}", "cannot be set"))


def template_spec_immutable(new: Any, old: Any) -> list[FieldError]:
    if semantic(new) == semantic(old):
        return []
    meta = as_dict(as_dict(new).get("metadata"))
    shown: dict[str, Any] = {}
    for key in _OBJECT_META:   # embedded metav1.ObjectMeta: its json names, empty ones left out
        value = meta.get(key)
        if value not in (None, "", 0, [], {}):
            shown[key] = {k: value[k] for k in sorted(value)} if isinstance(value, dict) else value
    shown["Spec"] = go_object(CLAIM_SPEC, as_dict(new).get("spec"))
    return [invalid_value("spec", go_text(shown), IMMUTABLE)]


# ---------------------------------------------------------------------------- status

def _validate_allocation(allocation: dict[str, Any], path: str, requests: RequestNames,
                         errs: list[FieldError]) -> None:
    """validateAllocationResult, for a newly set allocation."""
    devices = as_dict(allocation.get("devices"))
    results = dicts(devices.get("results"))
    if not too_many(results, ALLOCATION_RESULTS_MAX, f"{path}.devices.results", errs):
        for i, r in results:
            p = f"{path}.devices.results[{i}]"
            validate_request_ref(text(r.get("request")), f"{p}.request", requests, errs)
            validate_driver_name(text(r.get("driver")), f"{p}.driver", errs)
            validate_pool_name(text(r.get("pool")), f"{p}.pool", errs)
            validate_dns_label(text(r.get("device")), f"{p}.device", errs)
            for j, t in dicts(r.get("tolerations")):
                validate_toleration(t, f"{p}.tolerations[{j}]", errs)
    configs = dicts(devices.get("config"))
    if not too_many(configs, 2 * DEVICE_CONFIG_MAX, f"{path}.devices.config", errs):   # class's and claim's
        for i, cfg in configs:
            p = f"{path}.devices.config[{i}]"
            source = text(cfg.get("source"))
            if not source:
                errs.append(required(f"{p}.source"))
            elif source not in CONFIG_SOURCES:
                errs.append(not_supported(f"{p}.source", source, CONFIG_SOURCES))
            validate_request_refs(cfg.get("requests"), f"{p}.requests", requests, errs)
            if cfg.get("opaque") is None:
                errs.append(required(f"{p}.opaque"))
            else:
                validate_opaque(as_dict(cfg["opaque"]), f"{p}.opaque", errs)
    if allocation.get("nodeSelector") is not None:
        defaults.validate_node_selector(allocation["nodeSelector"], f"{path}.nodeSelector", errs)


def _consumer(ref: dict[str, Any]) -> tuple[str, str, str, str]:
    return (text(ref.get("apiGroup")), text(ref.get("resource")), text(ref.get("name")), text(ref.get("uid")))


def validate_status(claim: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    """validateResourceClaimStatusUpdate."""
    errs: list[FieldError] = []
    status, old_status = as_dict(claim.get("status")), as_dict(old.get("status"))
    reserved = as_list(status.get("reservedFor"))
    if not too_many(reserved, RESERVED_FOR_MAX, "status.reservedFor", errs):
        entries = dicts(reserved)
        for i, ref in entries:
            for key in ("resource", "name", "uid"):
                if not text(ref.get(key)):
                    errs.append(required(f"status.reservedFor[{i}].{key}"))
        duplicates([text(ref.get("uid")) for _, ref in entries], "status.reservedFor", errs)
    allocation, old_allocation = status.get("allocation"), old_status.get("allocation")
    if reserved:
        if allocation is None:
            errs.append(forbidden_field("status.reservedFor", "may not be specified when `allocated` is not set"))
        elif claim["metadata"].get("deletionTimestamp"):
            before = {_consumer(r) for _, r in dicts(old_status.get("reservedFor"))}
            if any(_consumer(r) not in before for _, r in dicts(reserved)):
                errs.append(forbidden_field("status.reservedFor", "new entries may not be added while "
                                                                  "`deallocationRequested` or `deletionTimestamp` are set"))
    if old_allocation is not None and allocation is not None:
        if semantic(allocation) != semantic(old_allocation):
            errs.append(invalid_value("status.allocation", go_value(ALLOCATION, allocation), IMMUTABLE))
    elif allocation is not None:
        _validate_allocation(as_dict(allocation), "status.allocation", request_names(claim.get("spec")), errs)
    return errs


# ---------------------------------------------------------------------------- pods

_POD_CLAIM = struct(("Name", "name", S), ("ResourceClaimName", "resourceClaimName", RAW),
                    ("ResourceClaimTemplateName", "resourceClaimTemplateName", RAW))


def _validate_pod_claim(pc: dict[str, Any], path: str, seen: set[str], errs: list[FieldError]) -> None:
    """validatePodResourceClaim: one entry of ``spec.resourceClaims``."""
    name = text(pc.get("name"))
    claim, template = pc.get("resourceClaimName"), pc.get("resourceClaimTemplateName")
    if not name:
        errs.append(required(f"{path}.name"))
    elif name in seen:
        errs.append(duplicate(f"{path}.name", name))
    else:
        validate_dns_label(name, f"{path}.name", errs)
        seen.add(name)
    if claim is None and template is None:
        errs.append(invalid_value(path, go_value(_POD_CLAIM, pc), "must specify one of: `resourceClaimName`, "
                                                                  "`resourceClaimTemplateName`"))
    if claim is not None and template is not None:
        errs.append(invalid_value(path, go_value(_POD_CLAIM, pc), "at most one of `resourceClaimName` or "
                                                                  "`resourceClaimTemplateName` may be specified"))
    for key, value in (("resourceClaimName", claim), ("resourceClaimTemplateName", template)):
        if value is not None:
            for msg in names.name_is_dns_subdomain(text(value), False):
                errs.append(invalid_value(f"{path}.{key}", value, msg))


def _validate_container_claims(claims: Any, pod_claims: set[str], path: str, errs: list[FieldError]) -> None:
    """validateResourceClaimNames: a container's ``resources.claims`` name the pod's claims, each once. A claim
    used whole takes all its requests: with any other use of it the later one is a duplicate (as 1.36 words it,
    by the claim's name); a request used twice is a duplicate ``claim/request``."""
    whole: set[str] = set()
    requests: dict[str, set[str]] = {}
    known = ", ".join(sorted(pod_claims))
    for i, claim in dicts(claims):
        name, request = text(claim.get("name")), text(claim.get("request"))
        if not name:
            errs.append(required(f"{path}[{i}]"))
            continue
        if not request:
            if name in whole or name in requests:
                errs.append(duplicate(f"{path}[{i}]", name))
            whole.add(name)
        elif name in whole:
            errs.append(duplicate(f"{path}[{i}]", name))
        elif request in requests.get(name, ()):
            errs.append(duplicate(f"{path}[{i}]", f"{name}/{request}"))
        else:
            validate_dns_label(request, f"{path}[{i}].request", errs)
            requests.setdefault(name, set()).add(request)
        if name not in pod_claims:
            errs.append(field_not_found(f"{path}[{i}]", name, "must be one of the names in pod.spec.resourceClaims"
                                                              + (f": {known}" if known else " which is empty")))


def validate_pod_resource_claims(pod: dict[str, Any]) -> list[FieldError]:
    """A pod's ``spec.resourceClaims`` and its containers' claims of them, on create.

    Upstream checks these amid the rest of the pod spec (the entries after the volumes, a container's claims
    with its resources); the stand-in reports them after the pod's other errors."""
    errs: list[FieldError] = []
    spec = as_dict(pod.get("spec"))
    entries = dicts(spec.get("resourceClaims"))
    seen: set[str] = set()
    for i, pc in entries:
        _validate_pod_claim(pc, f"spec.resourceClaims[{i}]", seen, errs)
    pod_claims = {text(pc.get("name")) for _, pc in entries}
    for key in ("containers", "initContainers"):
        for i, container in dicts(spec.get(key)):
            _validate_container_claims(as_dict(container.get("resources")).get("claims"), pod_claims,
                                       f"spec.{key}[{i}].resources.claims", errs)
    return errs


def validate_pod_claim_statuses(pod: dict[str, Any]) -> list[FieldError]:
    """validatePodResourceClaimStatuses: each entry names one of the pod's claims, once."""
    errs: list[FieldError] = []
    claims = {text(c.get("name")) for _, c in dicts(as_dict(pod.get("spec")).get("resourceClaims"))}
    seen: set[str] = set()
    for i, entry in dicts(as_dict(pod.get("status")).get("resourceClaimStatuses")):
        path, name = f"status.resourceClaimStatuses[{i}]", text(entry.get("name"))
        if name not in claims:
            errs.append(invalid_value(f"{path}.name", name, "must match the name of an entry in `spec.resourceClaims`"))
        if name in seen:
            errs.append(duplicate(f"{path}.name", name))
        seen.add(name)
        claim_name = entry.get("resourceClaimName")
        if isinstance(claim_name, str):
            for msg in names.name_is_dns_subdomain(claim_name, False):
                errs.append(invalid_value(f"{path}.resourceClaimName", claim_name, msg))
    return errs
