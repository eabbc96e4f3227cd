"""What kube-apiserver 1.36 does to the native gang kinds and to Jobs between decoding and storing.

``scheduling.k8s.io/v1alpha2`` PodGroup and Workload are alpha: a real server
serves them only with ``--runtime-config=scheduling.k8s.io/v1alpha2=true``
(and the GenericWorkload gate); the stand-in serves them only when enabled
the same way (:data:`bench.simcluster.resources.NATIVE_GANGS`). What follows
was observed on kube-apiserver 1.36.2 with the gates ``up.sh`` turns on
(GenericWorkload, GangScheduling, TopologyAwareWorkloadScheduling,
WorkloadAwarePreemption, WorkloadWithJob); the messages are the real
server's words:

* **PodGroup** defaults: ``spec.disruptionMode: Pod``; ``spec.priority`` from
  the Priority admission plugin (the class named by ``priorityClassName``,
  else the global default class, else 0); ``podGroupTemplateRef`` is
  serialized ``null`` when unset; an empty ``schedulingConstraints.topology``
  is dropped; ``resourceClaims`` is dropped (its gate, DRAWorkloadResourceClaims,
  is off); ``status`` is ``{}``, whatever a create sent. Every PodGroup gets
  the finalizer ``scheduling.k8s.io/podgroup-protection``, which
  kube-controller-manager's podgroup-protection controller removes once no
  pod names the group (the stand-in's: :mod:`bench.simcluster.jobs`). No
  ``metadata.generation``.
* **PodGroup** validation: exactly one of ``schedulingPolicy.basic`` and
  ``.gang``; ``gang.minCount`` at least 1 (0 reads as unset: "Required
  value"); at most one ``schedulingConstraints.topology`` entry, whose ``key``
  is a label key; ``disruptionMode`` Pod or PodGroup; ``priority`` at most
  1000000000 (so a system class is refused); ``podGroupTemplateRef.workload``
  with a DNS-subdomain ``workloadName`` and a DNS-label
  ``podGroupTemplateName``. All of the spec is immutable ("Invalid value:
  null: field is immutable", null included). Admission refuses (403) a
  priority that differs from the class's, an unknown class, and a
  ``podGroupTemplateRef`` naming a Workload, or a template of it, that does
  not exist. Status writes go through the status subresource only, and
  their conditions are checked as metav1 conditions.
* **Workload** (no status): ``podGroupTemplates`` required, at most 8,
  unique names (DNS labels), each with a scheduling policy as a PodGroup's;
  a template's ``priorityClassName`` is not resolved;
  ``schedulingConstraints`` is serialized ``null`` when unset;
  ``controllerRef`` needs ``kind`` and ``name``. Templates and
  ``controllerRef`` are immutable.
* **Pod** ``spec.schedulingGroup``: exactly ``podGroupName``, a DNS subdomain
  (see :func:`validate_scheduling_group`); immutable like the rest of a pod's
  spec; the group need not exist.
* **Job** (``batch/v1``, always served): the scheme defaults (parallelism,
  completions, backoffLimit, completionMode, suspend, podReplacementPolicy,
  manualSelector) and the generated selector with its four template labels.
  Validation covers only what the stand-in's Job controller relies on:
  a template with restartPolicy Never or OnFailure, completions for an
  Indexed Job, non-negative counts, the template's labels (which carry the
  Job's name, so a Job name longer than 63 characters is refused). The
  template's pod spec is defaulted as upstream does it (restartPolicy
  excepted: a Job's template has none by default) but not validated; update
  rules (immutable template and selector) are not simulated.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from bench.simcluster import defaults, errors, names
from bench.simcluster.errors import FieldError, invalid_value, not_supported, required, too_many

POD_GROUP_FINALIZER = "scheduling.k8s.io/podgroup-protection"
DISRUPTION_MODES = ["Pod", "PodGroup"]
MAX_POD_GROUP_PRIORITY = 1_000_000_000   # HighestUserDefinablePriority
MAX_POD_GROUP_TEMPLATES = 8
MAX_TOPOLOGY_CONSTRAINTS = 1
IMMUTABLE = "field is immutable"

PriorityClassLookup = Callable[[str], "dict[str, Any] | None"]
DefaultPriorityClass = Callable[[], "dict[str, Any] | None"]
WorkloadLookup = Callable[[str, str], "dict[str, Any] | None"]   # (namespace, name)


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _name(obj: dict[str, Any]) -> str:
    meta = _dict(obj.get("metadata"))
    return str(meta.get("name") or meta.get("generateName") or "Unknown")


# ---------------------------------------------------------------------------- decoding

def check_decodes(kind: str, obj: dict[str, Any]) -> None:
    """The int32 fields a client is likeliest to send as strings fail decoding (400), as upstream."""
    spec = _dict(obj.get("spec"))
    fields: list[tuple[Any, str, str]] = []
    if kind == "PodGroup":
        fields = [(_dict(_dict(spec.get("schedulingPolicy")).get("gang")).get("minCount"),
                   "GangSchedulingPolicy.spec.schedulingPolicy.gang.minCount", "int32"),
                  (spec.get("priority"), "PodGroupSpec.spec.priority", "int32")]
    elif kind == "Job":
        fields = [(spec.get(k), f"JobSpec.spec.{k}", "int32") for k in ("parallelism", "completions")]
    for value, where, go_type in fields:
        if value is not None and not _is_int(value):
            what = {str: "string", bool: "bool", list: "array", dict: "object", float: "number"}.get(type(value), "value")
            raise errors.bad_request(f'{kind} in version "{"v1" if kind == "Job" else "v1alpha2"}" cannot be '
                                     f"handled as a {kind}: json: cannot unmarshal {what} into Go struct field "
                                     f"{where} of type {go_type}")


# ---------------------------------------------------------------------------- shared pieces

def _validate_policy(policy: Any, path: str, errs: list[FieldError]) -> None:
    policy = _dict(policy)
    set_ = [k for k in ("basic", "gang") if policy.get(k) is not None]
    if not set_:
        errs.append(invalid_value(path, "", "must specify one of: `basic`, `gang`"))
        return
    if len(set_) > 1:
        errs.append(invalid_value(path, "{basic, gang}", "must specify exactly one of: `basic`, `gang`"))
        return
    if set_ == ["gang"]:
        count = _dict(policy["gang"]).get("minCount")
        if not count:
            errs.append(required(f"{path}.gang.minCount"))
        elif count < 1:
            errs.append(invalid_value(f"{path}.gang.minCount", count, "must be greater than or equal to 1"))


def _default_constraints(holder: dict[str, Any]) -> None:
    constraints = holder.get("schedulingConstraints")
    if isinstance(constraints, dict) and constraints.get("topology") in ([], None):
        constraints.pop("topology", None)   # an empty list is omitted


def _validate_constraints(constraints: Any, path: str, errs: list[FieldError]) -> None:
    topology = _dict(constraints).get("topology")
    if not isinstance(topology, list):
        return
    if len(topology) > MAX_TOPOLOGY_CONSTRAINTS:
        errs.append(too_many(f"{path}.topology", len(topology), MAX_TOPOLOGY_CONSTRAINTS))
        return
    for i, item in enumerate(topology):
        key = _dict(item).get("key")
        kpath = f"{path}.topology[{i}].key"
        if not key:
            errs.append(required(kpath))
        elif isinstance(key, str):
            errs.extend(invalid_value(kpath, key, msg) for msg in names.is_qualified_name(key))


def _validate_disruption_mode(mode: Any, path: str, errs: list[FieldError]) -> None:
    if mode is not None and mode not in DISRUPTION_MODES:
        errs.append(not_supported(path, mode, DISRUPTION_MODES))


def _immutable(old: dict[str, Any], new: dict[str, Any], keys: tuple[str, ...], path: str) -> list[FieldError]:
    return [invalid_value(f"{path}.{k}", None, IMMUTABLE) for k in keys if old.get(k) != new.get(k)]


# ---------------------------------------------------------------------------- PodGroup

def prepare_pod_group(pg: dict[str, Any], lookup_class: PriorityClassLookup,
                      default_class: DefaultPriorityClass) -> None:
    """Scheme defaults, the strategy's PrepareForCreate and the Priority plugin, for a new PodGroup."""
    spec = default_pod_group(pg)
    pg["status"] = {}
    meta = pg["metadata"]
    finalizers = meta.get("finalizers")
    if not isinstance(finalizers, list):
        finalizers = []
    if POD_GROUP_FINALIZER not in finalizers:
        meta["finalizers"] = [*finalizers, POD_GROUP_FINALIZER]
    if spec is not None:
        _admit_priority(pg, spec, lookup_class, default_class)


def default_pod_group(pg: dict[str, Any]) -> dict[str, Any] | None:
    spec = pg.get("spec")
    if spec is None:
        spec = pg["spec"] = {}
    if not isinstance(spec, dict):
        return None
    spec.setdefault("podGroupTemplateRef", None)
    if spec.get("disruptionMode") is None:
        spec["disruptionMode"] = "Pod"
    spec.pop("resourceClaims", None)   # DRAWorkloadResourceClaims is off: the field is dropped
    _default_constraints(spec)
    return spec


def _admit_priority(pg: dict[str, Any], spec: dict[str, Any], lookup_class: PriorityClassLookup,
                    default_class: DefaultPriorityClass) -> None:
    class_name = spec.get("priorityClassName")
    if class_name:
        pc = lookup_class(str(class_name))
        if pc is None:
            raise errors.forbidden("podgroups", _name(pg), f"no PriorityClass with name {class_name} was found",
                                   "scheduling.k8s.io")
    else:
        pc = default_class()
        if pc is not None:
            spec["priorityClassName"] = _dict(pc.get("metadata")).get("name", "")
    priority = 0 if pc is None else pc.get("value", 0)
    given = spec.get("priority")
    if given is not None and given != priority:
        raise errors.forbidden("podgroups", _name(pg), f"priority set in the pod group ({given}) must match the "
                                                       f"priority computed ({priority}) based on the priority class "
                                                       f"set in the spec", "scheduling.k8s.io")
    spec["priority"] = priority


def validate_pod_group(pg: dict[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    spec = _dict(pg.get("spec"))
    _validate_policy(spec.get("schedulingPolicy"), "spec.schedulingPolicy", errs)
    _validate_constraints(spec.get("schedulingConstraints"), "spec.schedulingConstraints", errs)
    ref = spec.get("podGroupTemplateRef")
    if ref is not None:
        workload = _dict(ref).get("workload")
        if workload is None:
            errs.append(invalid_value("spec.podGroupTemplateRef", "", "must specify one of: `workload`"))
        else:
            for key, check in (("workloadName", names.is_dns1123_subdomain),
                               ("podGroupTemplateName", names.is_dns1123_label)):
                value, path = _dict(workload).get(key), f"spec.podGroupTemplateRef.workload.{key}"
                if not value:
                    errs.append(required(path))
                elif isinstance(value, str):
                    errs.extend(invalid_value(path, value, msg) for msg in check(value))
    priority = spec.get("priority")
    if _is_int(priority) and priority > MAX_POD_GROUP_PRIORITY:
        errs.append(invalid_value("spec.priority", priority,
                                  f"must be less than or equal to {MAX_POD_GROUP_PRIORITY}"))
    _validate_disruption_mode(spec.get("disruptionMode"), "spec.disruptionMode", errs)
    return errs


def admit_pod_group_ref(pg: dict[str, Any], get_workload: WorkloadLookup) -> None:
    """The validating admission that refuses a PodGroup whose Workload or template does not exist."""
    workload_ref = _dict(_dict(_dict(pg.get("spec")).get("podGroupTemplateRef")).get("workload"))
    name, template = workload_ref.get("workloadName"), workload_ref.get("podGroupTemplateName")
    if not name:
        return
    wl = get_workload(pg["metadata"]["namespace"], name)
    if wl is None:
        why = f'PodGroup rejected: Workload "{name}" not found'
    elif not any(_dict(t).get("name") == template
                 for t in _dict(wl.get("spec")).get("podGroupTemplates") or []):
        why = f'PodGroup rejected: PodGroupTemplate "{template}" not found in Workload "{name}"'
    else:
        return
    raise errors.forbidden("podgroups", _name(pg), why, "scheduling.k8s.io")


_POD_GROUP_SPEC = ("schedulingPolicy", "schedulingConstraints", "podGroupTemplateRef", "disruptionMode",
                   "priorityClassName", "priority")


def validate_pod_group_update(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    old_spec, spec = _dict(old.get("spec")), default_pod_group(new)
    if spec is None:
        return [invalid_value("spec", None, IMMUTABLE)]
    for key in ("priority", "priorityClassName"):   # the Priority plugin keeps what the body omits
        if spec.get(key) is None and old_spec.get(key) is not None:
            spec[key] = old_spec[key]
    return validate_pod_group(new) + _immutable(old_spec, spec, _POD_GROUP_SPEC, "spec")


_REASON_FMT = "[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?"
_REASON_RE = re.compile(_REASON_FMT)
_REASON_ERROR = names.regex_error(
    "a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric "
    "characters or '_,:', and must end with an alphanumeric character or '_'", _REASON_FMT,
    "my_name", "MY_NAME", "MyName", "ReasonA,ReasonB", "ReasonA:ReasonB")


def validate_pod_group_status(pg: dict[str, Any]) -> list[FieldError]:
    """metav1validation.ValidateConditions over ``status.conditions``."""
    errs: list[FieldError] = []
    conditions = _dict(pg.get("status")).get("conditions")
    seen: set[Any] = set()
    for i, c in enumerate(conditions if isinstance(conditions, list) else ()):
        c, path = _dict(c), f"status.conditions[{i}]"
        ctype = c.get("type")
        if isinstance(ctype, str):
            errs.extend(invalid_value(f"{path}.type", ctype, msg) for msg in names.is_qualified_name(ctype))
            if ctype in seen:
                errs.append(FieldError(f"{path}.type", "FieldValueDuplicate", "", ctype))
            seen.add(ctype)
        if c.get("status") not in ("True", "False", "Unknown"):
            errs.append(not_supported(f"{path}.status", c.get("status") or "", ["False", "True", "Unknown"]))
        generation = c.get("observedGeneration")
        if _is_int(generation) and generation < 0:
            errs.append(invalid_value(f"{path}.observedGeneration", generation,
                                      "must be greater than or equal to zero"))
        if not c.get("lastTransitionTime"):
            errs.append(required(f"{path}.lastTransitionTime"))
        reason = c.get("reason")
        if not reason:
            errs.append(required(f"{path}.reason"))
        elif isinstance(reason, str):
            if not _REASON_RE.fullmatch(reason):
                errs.append(invalid_value(f"{path}.reason", reason, _REASON_ERROR))
            if len(reason) > 1024:
                errs.append(FieldError(f"{path}.reason", "FieldValueTooLong", "may not be more than 1024 bytes"))
        message = c.get("message")
        if isinstance(message, str) and len(message) > 32768:
            errs.append(FieldError(f"{path}.message", "FieldValueTooLong", "may not be more than 32768 bytes"))
    return errs


# ---------------------------------------------------------------------------- Workload

def default_workload(wl: dict[str, Any]) -> None:
    spec = wl.get("spec")
    if spec is None:
        spec = wl["spec"] = {}
    for t in _dict(spec).get("podGroupTemplates") or []:
        if isinstance(t, dict):
            t.setdefault("schedulingConstraints", None)   # serialized null when unset
            t.pop("resourceClaims", None)
            _default_constraints(t)


def _template_json(t: dict[str, Any]) -> dict[str, Any]:
    """A template as Go marshals it (field order; schedulingConstraints without omitempty)."""
    out = {"name": t.get("name", ""), "schedulingPolicy": t.get("schedulingPolicy") or {},
           "schedulingConstraints": t.get("schedulingConstraints")}
    for k in ("priorityClassName", "priority", "disruptionMode"):
        if t.get(k) is not None:
            out[k] = t[k]
    return out


def validate_workload(wl: dict[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    spec = _dict(wl.get("spec"))
    ref = spec.get("controllerRef")
    if ref is not None:
        ref = _dict(ref)
        group = ref.get("apiGroup")
        if group and isinstance(group, str):
            errs.extend(invalid_value("spec.controllerRef.apiGroup", group, msg)
                        for msg in names.is_dns1123_subdomain(group))
        for key in ("kind", "name"):
            value = ref.get(key)
            if not value:
                errs.append(required(f"spec.controllerRef.{key}"))
            elif isinstance(value, str):
                errs.extend(invalid_value(f"spec.controllerRef.{key}", value, msg) for msg in _path_segment(value))
    templates = spec.get("podGroupTemplates")
    if not templates or not isinstance(templates, list):
        errs.append(required("spec.podGroupTemplates"))
        return errs
    if len(templates) > MAX_POD_GROUP_TEMPLATES:
        errs.append(too_many("spec.podGroupTemplates", len(templates), MAX_POD_GROUP_TEMPLATES))
    seen: set[Any] = set()
    for i, t in enumerate(templates):
        t, path = _dict(t), f"spec.podGroupTemplates[{i}]"
        name = t.get("name")
        if not name:
            errs.append(required(f"{path}.name"))
        elif isinstance(name, str):
            errs.extend(invalid_value(f"{path}.name", name, msg) for msg in names.is_dns1123_label(name))
            if name in seen:
                errs.append(FieldError(path, "FieldValueDuplicate", "", _template_json(t)))
            seen.add(name)
        _validate_policy(t.get("schedulingPolicy"), f"{path}.schedulingPolicy", errs)
        _validate_constraints(t.get("schedulingConstraints"), f"{path}.schedulingConstraints", errs)
        _validate_disruption_mode(t.get("disruptionMode"), f"{path}.disruptionMode", errs)
    return errs


def _path_segment(value: str) -> list[str]:
    # path.IsValidPathSegmentName
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


def validate_workload_update(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    default_workload(new)
    return validate_workload(new) + _immutable(_dict(old.get("spec")), _dict(new.get("spec")),
                                               ("podGroupTemplates", "controllerRef"), "spec")


# ---------------------------------------------------------------------------- Pod spec.schedulingGroup

def default_scheduling_group(spec: dict[str, Any]) -> None:
    """Decoding: a null group is no group, and fields the type does not have are dropped."""
    group = spec.get("schedulingGroup")
    if group is None:
        spec.pop("schedulingGroup", None)
    elif isinstance(group, dict):
        spec["schedulingGroup"] = {k: v for k, v in group.items() if k == "podGroupName" and v is not None}


def validate_scheduling_group(spec: dict[str, Any], errs: list[FieldError]) -> None:
    """``spec.schedulingGroup``: exactly one member (``podGroupName``), a DNS subdomain."""
    group = spec.get("schedulingGroup")
    if not isinstance(group, dict):
        return
    path = "spec.schedulingGroup.podGroupName"
    name = group.get("podGroupName")
    if name is None:
        errs.append(invalid_value(path, None, "must specify one of: `podGroupName`"))
    elif isinstance(name, str):
        errs.extend(invalid_value(path, name, msg) for msg in names.is_dns1123_subdomain(name))


# ---------------------------------------------------------------------------- Job

JOB_CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"


def default_job(job: dict[str, Any]) -> None:
    """SetDefaults_Job (batch/v1) and the pod template's SetDefaults_PodSpec."""
    spec = job.get("spec")
    if spec is None:
        spec = job["spec"] = {}
    if not isinstance(spec, dict):
        return
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = 2147483647 if spec.get("backoffLimitPerIndex") is not None else 6
    if not spec.get("completionMode"):
        spec["completionMode"] = "NonIndexed"
    if spec.get("suspend") is None:
        spec["suspend"] = False
    if not spec.get("podReplacementPolicy"):
        spec["podReplacementPolicy"] = "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
    if spec.get("manualSelector") is None:
        spec["manualSelector"] = False
    template = _dict(spec.get("template"))
    template_labels = _dict(template.get("metadata")).get("labels")
    meta = job.get("metadata")
    if isinstance(template_labels, dict) and isinstance(meta, dict) and not meta.get("labels"):
        # a Job without labels takes its template's, the very map (Go shares it), so the selector labels
        # generated into the template later land on the Job too; but a create by generateName works on a
        # deep copy made after defaulting (the registry's retry on a taken generated name), which unshares them
        meta["labels"] = template_labels if meta.get("name") else dict(template_labels)
    if isinstance(template.get("spec"), dict):
        defaults.default_pod_template_spec(template["spec"])


def generate_selector(job: dict[str, Any]) -> None:
    """The Job strategy's generateSelector, with which its Validate starts (before any check, and after the
    name was generated): the selector on the Job's uid and the four template labels."""
    spec = _dict(job.get("spec"))
    template = spec.get("template")
    if spec.get("manualSelector") is True or not isinstance(template, dict):
        return
    meta = job["metadata"]
    uid, name = meta["uid"], meta["name"]
    tmeta = template.get("metadata")
    if not isinstance(tmeta, dict):
        tmeta = template["metadata"] = {}
    labels = tmeta.get("labels")
    if not isinstance(labels, dict):
        labels = tmeta["labels"] = {}
    labels.update({JOB_CONTROLLER_UID_LABEL: uid, JOB_NAME_LABEL: name,
                   LEGACY_CONTROLLER_UID_LABEL: uid, LEGACY_JOB_NAME_LABEL: name})
    spec["selector"] = {"matchLabels": {JOB_CONTROLLER_UID_LABEL: uid}}


def validate_job(job: dict[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    spec = _dict(job.get("spec"))
    for key in ("parallelism", "completions", "backoffLimit"):
        value = spec.get(key)
        if _is_int(value) and value < 0:
            errs.append(invalid_value(f"spec.{key}", value, "must be greater than or equal to 0"))
    mode = spec.get("completionMode")
    if mode not in ("NonIndexed", "Indexed"):
        errs.append(not_supported("spec.completionMode", mode, ["NonIndexed", "Indexed"]))
    elif mode == "Indexed" and spec.get("completions") is None:
        errs.append(required("spec.completions", "when completion mode is Indexed"))
    template = spec.get("template")
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        errs.append(required("spec.template"))
        return errs
    # the generated selector's labels carry the Job's name: a name longer than a label value fails here
    defaults.validate_labels(_dict(template.get("metadata")).get("labels"), "spec.template.labels", errs)
    policy, path = template["spec"].get("restartPolicy"), "spec.template.spec.restartPolicy"
    if not policy or policy == "Always":   # a Job's template is not defaulted to Always
        errs.append(required(path, 'valid values: "OnFailure", "Never"'))
    elif policy not in ("OnFailure", "Never"):   # the pod spec's check, then the Job's
        errs.append(not_supported(path, policy, ["Always", "OnFailure", "Never"]))
        errs.append(not_supported(path, policy, ["OnFailure", "Never"]))
    group_errs: list[FieldError] = []
    validate_scheduling_group(template["spec"], group_errs)
    errs.extend(FieldError("spec.template." + e.field, e.type, e.detail, e.value) for e in group_errs)
    return errs


# ---------------------------------------------------------------------------- the store's entry points

NATIVE = ("scheduling.k8s.io", "v1alpha2")


def prepare_create(kind: str, group: str, version: str, obj: dict[str, Any], lookup_class: PriorityClassLookup,
                   default_class: DefaultPriorityClass) -> None:
    """Defaulting and mutating admission of a create, for the kinds this module owns (others: nothing)."""
    if (group, kind) in (("", "Pod"), ("batch", "Job")):
        check_decodes(kind, obj)
        if kind == "Job":
            default_job(obj)
            obj["status"] = {}   # the strategy's PrepareForCreate
        elif isinstance(obj.get("spec"), dict):
            default_scheduling_group(obj["spec"])
    elif (group, version) == NATIVE:
        check_decodes(kind, obj)
        if kind == "PodGroup":
            prepare_pod_group(obj, lookup_class, default_class)
        elif kind == "Workload":
            default_workload(obj)


def validate_create(kind: str, group: str, version: str, obj: dict[str, Any],
                    get_workload: WorkloadLookup) -> list[FieldError]:
    """Validation, then validating admission (which runs only on a valid object), of a create."""
    if (group, kind) == ("", "Pod"):
        errs: list[FieldError] = []
        validate_scheduling_group(_dict(obj.get("spec")), errs)
        return errs
    if (group, kind) == ("batch", "Job"):
        return validate_job(obj)
    if (group, version) != NATIVE:
        return []
    if kind == "Workload":
        return validate_workload(obj)
    errs = validate_pod_group(obj)
    if not errs:
        admit_pod_group_ref(obj, get_workload)
    return errs


def validate_update(kind: str, group: str, version: str, old: dict[str, Any], new: dict[str, Any],
                    subresource: str) -> list[FieldError]:
    """Defaulting and validation of an update (a status write: of the status only)."""
    if (group, kind) == ("", "Pod"):
        if not subresource and isinstance(new.get("spec"), dict):
            default_scheduling_group(new["spec"])   # then the pod's own rules refuse any change
        return []
    if (group, kind) == ("batch", "Job"):
        check_decodes(kind, new)
        if not subresource:
            default_job(new)
            return validate_job(new)
        return []
    if (group, version) != NATIVE:
        return []
    check_decodes(kind, new)
    if kind == "Workload":
        return validate_workload_update(old, new)
    if subresource == "status":
        if new.get("status") is None:
            new["status"] = {}
        return validate_pod_group_status(new)
    return validate_pod_group_update(old, new)
