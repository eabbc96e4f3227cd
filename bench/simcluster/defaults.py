"""What kube-apiserver does to an object between decoding and storing it.

The simulated cluster must hand a scheduler the same objects a real server
would, and refuse the same writes with the same words. This module holds the
parts of that a scheduler can notice:

* the scheme defaults (``pkg/apis/core/v1/defaults.go``): requests copied
  from limits, pull policies, restart and DNS policies, and so on; for
  Services, ReplicationControllers, ReplicaSets and StatefulSets
  (``pkg/apis/apps/v1/defaults.go`` too) :data:`SCHEME_DEFAULTS`, run on
  creates and updates alike, and the zero status of their Go types;
* the mutating admission plugins every cluster runs: ``Priority``
  (``plugin/pkg/admission/priority``) and ``DefaultTolerationSeconds``;
* the pod strategy's ``PrepareForCreate`` (``pkg/registry/core/pod/strategy.go``):
  status reset to Pending with a computed QoS class;
* validation (``pkg/apis/core/validation``, ``apimachinery/.../validation``)
  with upstream's field paths, cause types and message wording, because
  kubectl prints them verbatim and clients branch on them.

Everything works on plain JSON dicts as orjson parses them. Defaulting
mutates the dict it is given (the caller owns a fresh copy) and never
deep-copies; regular expressions are compiled once, at import. Validation
returns a list of :class:`FieldError` and never raises. The one exception
raised on purpose is :class:`APIError` (403 from admission). Malformed input
(a string where a list belongs) must never crash defaulting: it is skipped
there and reported by validation, so the server answers 422 rather than 500.

Order of calls, as in the real server:

* create: ``default_pod`` (may raise 403), then ``validate_object_meta`` and
  ``validate_pod_create`` (the latter checks spec only, so metadata errors
  are not reported twice);
* update: ``admit_pod_update(old, new)``, then ``validate_object_meta`` and
  ``validate_pod_update(old, new)``;
* status update: ``validate_pod_status_update(old, new)``.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache
from typing import Any, Callable

import orjson

from bench.simcluster import names
from bench.simcluster.errors import (
    FieldError,
    forbidden,
    forbidden_field,
    invalid_value,
    not_supported,
    required,
)

__all__ = [
    "QuantityError",
    "parse_quantity",
    "default_pod",
    "admit_pod_update",
    "pod_qos_class",
    "validate_pod_create",
    "validate_pod_update",
    "validate_pod_status_update",
    "default_node",
    "SCHEME_DEFAULTS",
    "fill_zero_status",
    "validate_node_create",
    "validate_object_meta",
    "validate_labels",
]

PriorityClassLookup = Callable[[str], "dict[str, Any] | None"]
DefaultPriorityClass = Callable[[], "dict[str, Any] | None"]

MAX_INT32 = 2147483647
DEFAULT_SCHEDULER = "default-scheduler"
TOLERATION_SECONDS = 300  # kube-apiserver --default-not-ready/unreachable-toleration-seconds
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
SCHEDULING_GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024

# ---------------------------------------------------------------------------- quantities

QUANTITY_FORMAT_ERROR = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
QUANTITY_SUFFIX_ERROR = "unable to parse quantity's suffix"
QUANTITY_NUMERIC_ERROR = "unable to parse numeric part of quantity"

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXP = {e: s for s, e in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_POWER = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_EXPONENT_RE = re.compile(r"[+-]?[0-9]+")
# Deviation: upstream accepts any int64 exponent; a huge one would make an exact
# Fraction enormous, so the stand-in refuses it as a numeric error instead.
_MAX_EXPONENT = 1000

_DEC_SI, _BIN_SI, _DEC_EXP = "DecimalSI", "BinarySI", "DecimalExponent"


class QuantityError(ValueError):
    """A string that resource.ParseQuantity rejects; ``str()`` is upstream's message."""


def parse_quantity(value: Any) -> Fraction:
    """Parse a Kubernetes quantity ("100m", "2Gi", "1e3", 0.5) into an exact Fraction.

    Mirrors ``resource.ParseQuantity``: every SI suffix (n u m k M G T P E),
    every binary suffix (Ki .. Ei) and decimal exponents (e/E), values below
    one nano rounded away from zero to 1n. JSON numbers are accepted, as the
    Go unmarshaller does. Raises :class:`QuantityError` with upstream's text.
    """
    return _parse_quantity(value)[0]


def _parse_quantity(value: Any) -> tuple[Fraction, str]:
    if isinstance(value, str):
        return _parse_quantity_str(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise QuantityError(QUANTITY_FORMAT_ERROR)
    return _parse_quantity_str(repr(value) if isinstance(value, float) else str(value))


@lru_cache(maxsize=8192)
def _parse_quantity_str(s: str) -> tuple[Fraction, str]:
    if not s:
        raise QuantityError(QUANTITY_FORMAT_ERROR)
    negative, num, denom, suffix = _split_quantity(s)
    if suffix in _DECIMAL_SUFFIXES:
        base, exp, fmt = 10, _DECIMAL_SUFFIXES[suffix], _DEC_SI
    elif suffix in _BINARY_SUFFIXES:
        base, exp, fmt = 2, _BINARY_SUFFIXES[suffix], _BIN_SI
    elif len(suffix) > 1 and suffix[0] in "eE" and _EXPONENT_RE.fullmatch(suffix, 1):
        base, exp, fmt = 10, int(suffix[1:]), _DEC_EXP
    else:
        raise QuantityError(QUANTITY_SUFFIX_ERROR)
    if abs(exp) > _MAX_EXPONENT:
        raise QuantityError(QUANTITY_NUMERIC_ERROR)
    q = Fraction(int(num + denom), 10 ** len(denom))
    q = q * base ** exp if exp >= 0 else q / base ** -exp
    nanos = q * 1_000_000_000
    if nanos.denominator != 1:
        # upstream keeps nano precision and rounds the rest up (away from zero)
        q = Fraction(-(-nanos.numerator // nanos.denominator), 1_000_000_000)
    return (-q if negative else q), fmt


def _split_quantity(s: str) -> tuple[bool, str, str, str]:
    """The scanner of ``parseQuantityString``: sign, integer digits, fraction digits, suffix."""
    end = len(s)
    pos = 0
    negative = False
    if s[0] in "+-":
        negative = s[0] == "-"
        pos = 1
    while pos < end and s[pos] == "0":
        pos += 1
    if pos >= end:
        return negative, "0", "", ""
    start = pos
    while pos < end and s[pos] in _DIGITS:
        pos += 1
    num = s[start:pos] or "0"
    denom = ""
    if pos < end and s[pos] == ".":
        pos += 1
        start = pos
        while pos < end and s[pos] in _DIGITS:
            pos += 1
        denom = s[start:pos]
    suffix_start = pos
    while pos < end and s[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and s[pos] in "+-":
        pos += 1
    while pos < end and s[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(QUANTITY_FORMAT_ERROR)
    return negative, num, denom, s[suffix_start:]


def quantity_string(value: Any) -> str:
    """``Quantity.String()``: the canonical form upstream prints in messages ("1500m", "1536Mi")."""
    q, fmt = _parse_quantity(value)
    if q == 0:
        return "0"
    sign = "-" if q < 0 else ""
    mag = -q if q < 0 else q
    if fmt == _BIN_SI and mag >= 1024 and mag.denominator == 1:
        n, power = mag.numerator, 0
        while n % 1024 == 0 and power < 6:
            n //= 1024
            power += 1
        return f"{sign}{n}{_BINARY_BY_POWER[power]}"
    n, exp = (mag * 1_000_000_000).numerator, -9
    while n % 1000 == 0:
        n //= 1000
        exp += 3
    if fmt == _DEC_EXP or exp not in _DECIMAL_BY_EXP:
        return f"{sign}{n}" + (f"e{exp}" if exp else "")
    return f"{sign}{n}{_DECIMAL_BY_EXP[exp]}"


def _quantity_or_none(value: Any) -> Fraction | None:
    try:
        return _parse_quantity(value)[0]
    except QuantityError:
        return None


# ---------------------------------------------------------------------------- name formats

_PORT_NAME_RE = re.compile("[-a-z0-9]+")
_PORT_NAME_LETTER_RE = re.compile("[a-z]")


def _port_name_msgs(port: str) -> list[str]:
    msgs = []
    if len(port) > 15:
        msgs.append("must be no more than 15 characters")
    if not _PORT_NAME_RE.fullmatch(port):
        msgs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _PORT_NAME_LETTER_RE.search(port):
        msgs.append("must contain at least one letter (a-z)")
    if "--" in port:
        msgs.append("must not contain consecutive hyphens")
    if port and (port[0] == "-" or port[-1] == "-"):
        msgs.append("must not begin or end with a hyphen")
    return msgs


# ---------------------------------------------------------------------------- small helpers

def _duplicate(field: str, value: Any, detail: str = "") -> FieldError:
    return FieldError(field, "FieldValueDuplicate", detail, value)


def _type_invalid(field: str, value: Any, kind: str) -> FieldError:
    # what the Go decoder would have refused with a 400; here it is one more cause
    return FieldError(field, "FieldValueTypeInvalid", f"must be of type {kind}", value)


def _dict_items(value: Any) -> list[tuple[str, Any]]:
    return list(value.items()) if isinstance(value, dict) else []


def _dicts(value: Any) -> list[tuple[int, dict[str, Any]]]:
    """(index, item) for the dict items of a JSON list; anything else yields nothing."""
    if not isinstance(value, list):
        return []
    return [(i, v) for i, v in enumerate(value) if isinstance(v, dict)]


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _check_list(value: Any, path: str, errs: list[FieldError]) -> list[tuple[int, dict[str, Any]]]:
    if value is None:
        return []
    if not isinstance(value, list):
        errs.append(_type_invalid(path, value, "array"))
        return []
    out = []
    for i, v in enumerate(value):
        if isinstance(v, dict):
            out.append((i, v))
        else:
            errs.append(_type_invalid(f"{path}[{i}]", v, "object"))
    return out


def _check_dict(value: Any, path: str, errs: list[FieldError]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        errs.append(_type_invalid(path, value, "object"))
        return {}
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _empty(v: Any) -> bool:
    # Semantic.DeepEqual and omitempty: a missing field, null, "", 0, false, [] and {} are one value
    return v is None or v is False or (type(v) in (int, float) and v == 0) or (type(v) in (str, list, dict) and not v)


_QUANTITY_MAPS = frozenset(("requests", "limits", "overhead", "capacity", "allocatable"))


def _same(a: Any, b: Any, quantities: bool = False) -> bool:
    """apiequality.Semantic.DeepEqual for JSON: empty equals absent, quantities compare by value."""
    if a is b:
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a.keys() | b.keys():
            va, vb = a.get(k), b.get(k)
            if _empty(va) and _empty(vb):
                continue
            # the values of a ResourceList are quantities: "1" and "1000m" are the same
            if not _same(va, vb, quantities or k in _QUANTITY_MAPS):
                return False
        return True
    if quantities and isinstance(a, (str, int, float)) and isinstance(b, (str, int, float)):
        qa, qb = _quantity_or_none(a), _quantity_or_none(b)
        if qa is not None and qb is not None:
            return qa == qb
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if _empty(a) and _empty(b):
        return True
    if _is_number(a) and _is_number(b):
        return a == b
    return type(a) is type(b) and a == b


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _h(v: Any) -> Any:
    """A hashable stand-in for a JSON value, so malformed input cannot crash a set lookup."""
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return orjson.dumps(v, option=orjson.OPT_SORT_KEYS)


# ---------------------------------------------------------------------------- pod defaulting

def default_pod(pod: dict[str, Any], lookup_priority_class: PriorityClassLookup,
                default_priority_class: DefaultPriorityClass) -> None:
    """Default and admit a new Pod, as decoding, admission and PrepareForCreate do.

    Raises APIError 403 when the Priority plugin refuses the pod: an unknown
    ``priorityClassName``, or a ``priority``/``preemptionPolicy`` set by the
    client that differs from what the class says.
    """
    spec = pod.get("spec")
    if spec is None:
        spec = pod["spec"] = {}
    if isinstance(spec, dict):
        _default_pod_spec(spec)
        _admit_priority(pod, spec, lookup_priority_class, default_priority_class)
        _add_default_tolerations(spec)
    _prepare_for_create(pod, spec if isinstance(spec, dict) else {})


def admit_pod_update(old: dict[str, Any], new: dict[str, Any]) -> None:
    """Default and admit an updated Pod body before ``validate_pod_update``.

    The real server defaults every decoded body and runs the Priority and
    DefaultTolerationSeconds plugins on update too: the first carries
    ``priority``/``preemptionPolicy`` over from the stored pod when the body
    omits them, the second puts back the two default tolerations. Without this
    a client that PUTs a pod built from its own template would be refused with
    "pod updates may not change fields". Status is not touched.
    """
    spec = new.get("spec")
    if not isinstance(spec, dict):
        return
    _default_pod_spec(spec)
    old_spec = old.get("spec")
    if isinstance(old_spec, dict):
        for key in ("priority", "preemptionPolicy"):
            if spec.get(key) is None and old_spec.get(key) is not None:
                spec[key] = old_spec[key]
    _add_default_tolerations(spec)


def default_pod_template_spec(spec: dict[str, Any]) -> None:
    """SetDefaults_PodSpec for a controller's pod template: neither enableServiceLinks nor restartPolicy
    (a Job's template without one is refused, not defaulted to Always; read off kube-apiserver 1.36.2)."""
    unset = [k for k in ("enableServiceLinks", "restartPolicy") if k not in spec]
    _default_pod_spec(spec)
    for key in unset:
        del spec[key]


def _default_pod_spec(spec: dict[str, Any]) -> None:
    # SetDefaults_PodSpec and SetDefaults_Pod
    if not spec.get("dnsPolicy"):
        spec["dnsPolicy"] = "ClusterFirst"
    if not spec.get("restartPolicy"):
        spec["restartPolicy"] = "Always"
    if spec.get("securityContext") is None:
        spec["securityContext"] = {}
    if spec.get("terminationGracePeriodSeconds") is None:
        spec["terminationGracePeriodSeconds"] = 30
    if not spec.get("schedulerName"):
        spec["schedulerName"] = DEFAULT_SCHEDULER
    if spec.get("enableServiceLinks") is None:
        spec["enableServiceLinks"] = True
    host_network = spec.get("hostNetwork") is True
    for key in ("containers", "initContainers"):
        for _, c in _dicts(spec.get(key)):
            _default_container(c, host_network)
            _default_requests_from_limits(c)
    for _, c in _dicts(spec.get("ephemeralContainers")):
        _default_container(c, False)


def _default_container(c: dict[str, Any], host_network: bool) -> None:
    # SetDefaults_Container; ContainerPort.protocol; defaultHostNetworkPorts
    if not c.get("imagePullPolicy"):
        c["imagePullPolicy"] = "Always" if _image_tag(c.get("image")) == "latest" else "IfNotPresent"
    if not c.get("terminationMessagePath"):
        c["terminationMessagePath"] = "/dev/termination-log"
    if not c.get("terminationMessagePolicy"):
        c["terminationMessagePolicy"] = "File"
    for _, port in _dicts(c.get("ports")):
        if not port.get("protocol"):
            port["protocol"] = "TCP"
        if host_network and not port.get("hostPort") and port.get("containerPort") is not None:
            port["hostPort"] = port["containerPort"]


def _default_requests_from_limits(c: dict[str, Any]) -> None:
    # The one default that changes scheduling: a limit without a request is also the request.
    resources = c.get("resources")
    if not isinstance(resources, dict):
        return
    limits = resources.get("limits")
    if not isinstance(limits, dict) or not limits:
        return
    requests = resources.get("requests")
    if requests is None:
        requests = resources["requests"] = {}
    elif not isinstance(requests, dict):
        return
    for name, value in limits.items():
        if name not in requests:
            requests[name] = value


def _image_tag(image: Any) -> str:
    """The tag ``parsers.ParseImageName`` finds: "latest" when there is neither tag nor digest."""
    if not isinstance(image, str) or not image:
        return ""  # unparseable: upstream ignores the error and defaults to IfNotPresent
    name, at, digest = image.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag = name[colon + 1:] if colon > slash else ""
    if not tag and not at:
        return "latest"
    return tag


def _admission_name(pod: dict[str, Any]) -> str:
    # admission.NewForbidden runs before names are generated: name, else generateName, else "Unknown"
    meta = pod.get("metadata")
    if isinstance(meta, dict):
        return _str(meta.get("name")) or _str(meta.get("generateName")) or "Unknown"
    return "Unknown"


def _admit_priority(pod: dict[str, Any], spec: dict[str, Any], lookup: PriorityClassLookup,
                    default_class: DefaultPriorityClass) -> None:
    class_name = spec.get("priorityClassName")
    if class_name is not None and not isinstance(class_name, str):
        return  # validation reports the type
    if class_name:
        pc = lookup(class_name)
        if pc is None:
            raise forbidden("pods", _admission_name(pod), f"no PriorityClass with name {class_name} was found")
    else:
        pc = default_class()
        if pc is not None:
            spec["priorityClassName"] = _str((pc.get("metadata") or {}).get("name"))
    if pc is None:
        priority, policy = 0, "PreemptLowerPriority"
    else:
        priority = pc.get("value", 0)
        # a stored PriorityClass always has preemptionPolicy (SetDefaults_PriorityClass)
        policy = pc.get("preemptionPolicy") or "PreemptLowerPriority"
    given = spec.get("priority")
    if given is not None and given != priority:
        raise forbidden("pods", _admission_name(pod),
                        f"the integer value of priority ({given}) must not be provided in pod spec; "
                        f"priority admission controller computed {priority} from the given PriorityClass name")
    spec["priority"] = priority
    given = spec.get("preemptionPolicy")
    if given is not None and given != policy:
        raise forbidden("pods", _admission_name(pod),
                        f"the string value of PreemptionPolicy ({given}) must not be provided in pod spec; "
                        f"priority admission controller computed {policy} from the given PriorityClass name")
    spec["preemptionPolicy"] = policy


def _add_default_tolerations(spec: dict[str, Any]) -> None:
    # DefaultTolerationSeconds: a toleration with an empty key or effect already covers the taint
    tolerations = spec.get("tolerations")
    if tolerations is None:
        tolerations = []
    elif not isinstance(tolerations, list):
        return
    not_ready = unreachable = False
    for _, t in _dicts(tolerations):
        key, effect = _str(t.get("key")), _str(t.get("effect"))
        if effect in ("NoExecute", ""):
            not_ready = not_ready or key in (TAINT_NOT_READY, "")
            unreachable = unreachable or key in (TAINT_UNREACHABLE, "")
    if not_ready and unreachable:
        return
    for missing, key in ((not not_ready, TAINT_NOT_READY), (not unreachable, TAINT_UNREACHABLE)):
        if missing:
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": TOLERATION_SECONDS})
    spec["tolerations"] = tolerations


def _prepare_for_create(pod: dict[str, Any], spec: dict[str, Any]) -> None:
    # pod strategy PrepareForCreate: whatever status the client sent is replaced
    status: dict[str, Any] = {"phase": "Pending", "qosClass": pod_qos_class(spec)}
    if spec.get("schedulingGates"):
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                                 "lastTransitionTime": None, "reason": "SchedulingGated",
                                 "message": SCHEDULING_GATED_MESSAGE}]
    pod["status"] = status


def pod_qos_class(spec: dict[str, Any]) -> str:
    """``qos.ComputePodQOS`` over containers and init containers (cpu and memory only).

    Guaranteed when every container has cpu and memory limits and the summed
    requests equal the summed limits; BestEffort when no container asks for
    or limits cpu or memory; Burstable otherwise. Expects defaulted requests.
    Unparseable quantities are skipped: validation reports them.
    """
    requests: dict[str, Fraction] = {}
    limits: dict[str, Fraction] = {}
    guaranteed = True
    for key in ("containers", "initContainers"):
        for _, c in _dicts(spec.get(key)):
            resources = c.get("resources")
            if not isinstance(resources, dict):
                resources = {}
            _sum_positive(resources.get("requests"), requests)
            found = _sum_positive(resources.get("limits"), limits)
            if not ("cpu" in found and "memory" in found):
                guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and all(limits.get(name) == value for name, value in requests.items()) \
            and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


def _sum_positive(resource_list: Any, into: dict[str, Fraction]) -> set[str]:
    found = set()
    for name in ("cpu", "memory"):
        if not isinstance(resource_list, dict) or name not in resource_list:
            continue
        q = _quantity_or_none(resource_list[name])
        if q is not None and q > 0:
            found.add(name)
            into[name] = into.get(name, 0) + q
    return found


# ---------------------------------------------------------------------------- node defaulting

def default_node(node: dict[str, Any]) -> None:
    """SetDefaults_NodeStatus: allocatable is the capacity unless the kubelet says otherwise."""
    status = node.get("status")
    if not isinstance(status, dict):
        return
    capacity = status.get("capacity")
    if status.get("allocatable") is None and isinstance(capacity, dict):
        status["allocatable"] = dict(capacity)


# ---------------------------------------------------------------------------- services and controllers

CLIENT_IP_AFFINITY_SECONDS = 10800  # v1.DefaultClientIPServiceAffinitySeconds


def default_service(svc: dict[str, Any]) -> None:
    """SetDefaults_Service. Not simulated: the clusterIP, ipFamilies and nodePort allocation of
    the service REST storage, so a Service keeps the clusterIP it was sent (none, usually)."""
    spec = _spec(svc)
    if spec is None:
        return
    if not spec.get("sessionAffinity"):
        spec["sessionAffinity"] = "None"
    if spec["sessionAffinity"] == "None":
        spec.pop("sessionAffinityConfig", None)
    elif spec["sessionAffinity"] == "ClientIP":
        config = spec.get("sessionAffinityConfig")
        client_ip = config.get("clientIP") if isinstance(config, dict) else None
        if not isinstance(client_ip, dict) or client_ip.get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": CLIENT_IP_AFFINITY_SECONDS}}
    if not spec.get("type"):
        spec["type"] = "ClusterIP"
    kind = spec["type"]
    for _, port in _dicts(spec.get("ports")):
        if not port.get("protocol"):
            port["protocol"] = "TCP"
        if port.get("targetPort") in (None, 0, "") and _is_int(port.get("port")):
            port["targetPort"] = port["port"]
    # service.ExternallyAccessible
    external = kind in ("LoadBalancer", "NodePort") or (kind == "ClusterIP" and bool(spec.get("externalIPs")))
    if external and not spec.get("externalTrafficPolicy"):
        spec["externalTrafficPolicy"] = "Cluster"
    if spec.get("internalTrafficPolicy") is None and kind in ("ClusterIP", "NodePort", "LoadBalancer"):
        spec["internalTrafficPolicy"] = "Cluster"
    if kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is None:
        spec["allocateLoadBalancerNodePorts"] = True


def default_replication_controller(rc: dict[str, Any]) -> None:
    """SetDefaults_ReplicationController: the selector, and the labels, of the pod template when unset."""
    spec = _spec(rc)
    if spec is None:
        return
    template = spec.get("template")
    template_meta = template.get("metadata") if isinstance(template, dict) else None
    labels = template_meta.get("labels") if isinstance(template_meta, dict) else None
    if isinstance(labels, dict) and labels:
        if not spec.get("selector"):
            spec["selector"] = dict(labels)
        meta = rc.get("metadata")
        if isinstance(meta, dict) and not meta.get("labels"):
            meta["labels"] = dict(labels)
    if spec.get("replicas") is None:
        spec["replicas"] = 1


def default_replica_set(rs: dict[str, Any]) -> None:
    """SetDefaults_ReplicaSet (apps/v1): one replica. The selector is never defaulted in apps/v1."""
    spec = _spec(rs)
    if spec is not None and spec.get("replicas") is None:
        spec["replicas"] = 1


def default_stateful_set(ss: dict[str, Any]) -> None:
    """SetDefaults_StatefulSet (apps/v1)."""
    spec = _spec(ss)
    if spec is None:
        return
    if not spec.get("podManagementPolicy"):
        spec["podManagementPolicy"] = "OrderedReady"
    strategy = spec.get("updateStrategy")
    if strategy is None:
        strategy = spec["updateStrategy"] = {}
    if isinstance(strategy, dict):
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
            if strategy.get("rollingUpdate") is None:
                strategy["rollingUpdate"] = {}
        rolling = strategy.get("rollingUpdate")
        if strategy["type"] == "RollingUpdate" and isinstance(rolling, dict) and rolling.get("partition") is None:
            rolling["partition"] = 0
    policy = spec.get("persistentVolumeClaimRetentionPolicy")
    if policy is None:
        policy = spec["persistentVolumeClaimRetentionPolicy"] = {}
    if isinstance(policy, dict):
        for key in ("whenDeleted", "whenScaled"):
            if not policy.get(key):
                policy[key] = "Retain"
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10


NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def default_namespace(ns: dict[str, Any]) -> None:
    """SetDefaults_Namespace and the namespace strategy's Canonicalize: the label naming the namespace,
    put back on every create and update (what a namespaceSelector matches a namespace by name with)."""
    meta = ns.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not name or not isinstance(name, str):
        return
    labels = meta.get("labels")
    if labels is None:
        labels = meta["labels"] = {}
    if isinstance(labels, dict):
        labels[NAMESPACE_NAME_LABEL] = name


def default_persistent_volume(pv: dict[str, Any]) -> None:
    # SetDefaults_PersistentVolume and SetDefaults_HostPathVolumeSource
    spec = _spec(pv)
    if spec is None:
        return
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    spec.setdefault("volumeMode", "Filesystem")
    host_path = spec.get("hostPath")
    if isinstance(host_path, dict):
        host_path.setdefault("type", "")


def default_persistent_volume_claim(pvc: dict[str, Any]) -> None:
    # SetDefaults_PersistentVolumeClaimSpec
    spec = _spec(pvc)
    if spec is not None:
        spec.setdefault("volumeMode", "Filesystem")


def default_storage_class(sc: dict[str, Any]) -> None:
    # storage/v1 SetDefaults_StorageClass
    sc.setdefault("reclaimPolicy", "Delete")
    sc.setdefault("volumeBindingMode", "Immediate")


PV_PROTECTION = "kubernetes.io/pv-protection"
PVC_PROTECTION = "kubernetes.io/pvc-protection"


def admit_storage_object(kind: str, obj: dict[str, Any], now: str) -> None:
    """A created volume or claim: the StorageObjectInUseProtection admission plugin's finalizer, and a
    volume's first phase transition time (the persistentvolumes strategy's PrepareForCreate)."""
    finalizer = PV_PROTECTION if kind == "PersistentVolume" else PVC_PROTECTION
    meta = obj["metadata"]
    finalizers = meta.get("finalizers")
    if finalizers is None:
        finalizers = meta["finalizers"] = []
    if isinstance(finalizers, list) and finalizer not in finalizers:
        finalizers.append(finalizer)
    if kind == "PersistentVolume":
        obj["status"]["lastPhaseTransitionTime"] = now


def stamp_volume_phase_transition(old: dict[str, Any], new: dict[str, Any], now: str) -> None:
    """The persistentvolumes/status strategy: a phase change moves lastPhaseTransitionTime to now unless
    the writer set a new one; an unchanged phase keeps the stored time when the writer sent none."""
    old_status, new_status = old.get("status") or {}, new.get("status")
    if not isinstance(new_status, dict):
        return
    stamped, before = new_status.get("lastPhaseTransitionTime"), old_status.get("lastPhaseTransitionTime")
    if old_status.get("phase") == new_status.get("phase"):
        if stamped is None and before is not None:
            new_status["lastPhaseTransitionTime"] = before
    elif stamped is None or stamped == before:
        new_status["lastPhaseTransitionTime"] = now


def _spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    # a missing spec is the zero struct, which defaulting fills in; a malformed one is validation's
    spec = obj.get("spec")
    if spec is None:
        spec = obj["spec"] = {}
    return spec if isinstance(spec, dict) else None


# Scheme defaulting by (group, kind): it runs on every body the server decodes, creates and updates alike.
SCHEME_DEFAULTS: dict[tuple[str, str], Callable[[dict[str, Any]], None]] = {
    ("", "Namespace"): default_namespace,
    ("", "Service"): default_service,
    ("", "ReplicationController"): default_replication_controller,
    ("apps", "ReplicaSet"): default_replica_set,
    ("apps", "StatefulSet"): default_stateful_set,
    ("", "PersistentVolume"): default_persistent_volume,
    ("", "PersistentVolumeClaim"): default_persistent_volume_claim,
    ("storage.k8s.io", "StorageClass"): default_storage_class,
}

# The status fields these kinds serialize without omitempty, at their zero value: what a create
# leaves (PrepareForCreate resets status to the zero struct) and what a status write fills in.
_ZERO_STATUS: dict[tuple[str, str], tuple[tuple[str, Callable[[], Any]], ...]] = {
    ("", "Service"): (("loadBalancer", dict),),
    ("", "ReplicationController"): (("replicas", int),),
    ("apps", "ReplicaSet"): (("replicas", int),),
    ("apps", "StatefulSet"): (("replicas", int), ("availableReplicas", int)),
    ("storage.k8s.io", "VolumeAttachment"): (("attached", bool),),
    ("policy", "PodDisruptionBudget"): (("disruptionsAllowed", int), ("currentHealthy", int),
                                        ("desiredHealthy", int), ("expectedPods", int)),
    ("scheduling.k8s.io", "PodGroup"): (),  # status is always there, at least {}
    ("resource.k8s.io", "ResourceClaim"): (),
}


def fill_zero_status(group: str, kind: str, obj: dict[str, Any]) -> None:
    """Give ``obj`` the status fields its Go type always serializes, at zero where they are unset."""
    fields = _ZERO_STATUS.get((group, kind))
    if fields is None:
        return
    status = obj.get("status")
    if status is None:
        status = obj["status"] = {}
    if isinstance(status, dict):
        for key, zero in fields:
            if status.get(key) is None:
                status[key] = zero()


# ---------------------------------------------------------------------------- object meta

def validate_object_meta(obj: dict[str, Any], namespaced: bool,
                         name_rule: names.NameRule = names.name_is_dns_subdomain) -> list[FieldError]:
    """ValidateObjectMeta for any kind: name, generateName, namespace, labels, annotations.

    ``name_rule`` checks the name and the generateName prefix: the kind's own
    rule (DNS-1123 subdomain for pods, nodes and most kinds), or
    :func:`names.validate_path_segment_name` for the check every create gets
    after its kind's (see :mod:`bench.simcluster.names`). Expects
    generateName to have been turned into a name already and a namespaced
    object to carry its namespace, as the real server arranges before
    validating.
    """
    errs: list[FieldError] = []
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        errs.append(required("metadata.name", "name or generateName is required"))
        return errs
    generate_name = meta.get("generateName")
    if generate_name:
        if isinstance(generate_name, str):
            for msg in name_rule(generate_name, True):
                errs.append(invalid_value("metadata.generateName", generate_name, msg))
        else:
            errs.append(_type_invalid("metadata.generateName", generate_name, "string"))
    name = meta.get("name")
    if not name:
        errs.append(required("metadata.name", "name or generateName is required"))
    elif not isinstance(name, str):
        errs.append(_type_invalid("metadata.name", name, "string"))
    else:
        for msg in name_rule(name, False):
            errs.append(invalid_value("metadata.name", name, msg))
    namespace = meta.get("namespace")
    if namespaced:
        if not namespace:
            errs.append(required("metadata.namespace"))
        elif not isinstance(namespace, str):
            errs.append(_type_invalid("metadata.namespace", namespace, "string"))
        else:
            for msg in names.is_dns1123_label(namespace):
                errs.append(invalid_value("metadata.namespace", namespace, msg))
    elif namespace:
        errs.append(forbidden_field("metadata.namespace", "not allowed on this type"))
    generation = meta.get("generation")
    if _is_int(generation) and generation < 0:
        errs.append(invalid_value("metadata.generation", generation, "must be greater than or equal to 0"))
    validate_labels(meta.get("labels"), "metadata.labels", errs)
    validate_annotations(meta.get("annotations"), "metadata.annotations", errs)
    return errs


def validate_labels(labels: Any, path: str, errs: list[FieldError]) -> None:
    """ValidateLabels: keys and values of a label map, appended to ``errs``."""
    # errors name the map, not the key, as unversionedvalidation.ValidateLabels does
    for key, value in _check_dict(labels, path, errs).items():
        for msg in names.is_label_key(key):
            errs.append(invalid_value(path, key, msg))
        if not isinstance(value, str):
            errs.append(_type_invalid(path, value, "string"))
            continue
        for msg in names.is_valid_label_value(value):
            errs.append(invalid_value(path, value, msg))


def _validate_label_name(key: Any, path: str, errs: list[FieldError]) -> None:
    if not isinstance(key, str):
        errs.append(_type_invalid(path, key, "string"))
        return
    for msg in names.is_label_key(key):
        errs.append(invalid_value(path, key, msg))


def validate_annotations(annotations: Any, path: str, errs: list[FieldError]) -> None:
    """ValidateAnnotations: qualified keys (case aside) and at most 256 KiB in all, appended to ``errs``."""
    total = 0
    for key, value in _check_dict(annotations, path, errs).items():
        # QualifiedName, except that case does not matter
        for msg in names.is_qualified_name(key.lower()):
            errs.append(invalid_value(path, key, msg))
        if not isinstance(value, str):
            errs.append(_type_invalid(path, value, "string"))
            continue
        total += len(key.encode()) + len(value.encode())
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.append(FieldError(path, "FieldValueTooLong", f"may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"))


# ---------------------------------------------------------------------------- pod spec validation

def validate_pod_create(pod: dict[str, Any]) -> list[FieldError]:
    """ValidatePodCreate for spec (metadata is ``validate_object_meta``'s job).

    Expects a defaulted pod: the fields defaulting fills (restartPolicy,
    imagePullPolicy, ...) are reported as Required when missing, as upstream.
    """
    errs: list[FieldError] = []
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        errs.append(_type_invalid("spec", spec, "object") if spec is not None else required("spec.containers"))
        return errs
    _validate_pod_spec(spec, errs)
    if spec.get("ephemeralContainers"):
        errs.append(forbidden_field("spec.ephemeralContainers", "cannot be set on create"))
    if spec.get("nodeName") and spec.get("schedulingGates"):
        errs.append(forbidden_field("spec.nodeName", "cannot be set until all schedulingGates have been cleared"))
    return errs


def _validate_pod_spec(spec: dict[str, Any], errs: list[FieldError]) -> None:
    """ValidatePodSpec plus the pod-only container checks, in upstream's order."""
    if spec.get("terminationGracePeriodSeconds") is None:
        errs.append(required("spec.terminationGracePeriodSeconds"))
    containers = _check_list(spec.get("containers"), "spec.containers", errs)
    init_containers = _check_list(spec.get("initContainers"), "spec.initContainers", errs)
    _validate_containers(containers, errs)
    _validate_init_containers(init_containers, containers, errs)
    if spec.get("hostNetwork") is True:
        for i, c in containers:
            for j, port in _dicts(c.get("ports")):
                hp, cp = port.get("hostPort") or 0, port.get("containerPort") or 0
                if hp != cp:
                    errs.append(invalid_value(f"spec.containers[{i}].ports[{j}].hostPort", hp,
                                              "must match `containerPort` when `hostNetwork` is true"))
    _validate_enum(spec.get("restartPolicy"), "spec.restartPolicy", ["Always", "OnFailure", "Never"], errs)
    _validate_enum(spec.get("dnsPolicy"), "spec.dnsPolicy",
                   ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"], errs)
    validate_labels(spec.get("nodeSelector"), "spec.nodeSelector", errs)
    _validate_affinity(spec.get("affinity"), "spec.affinity", errs)
    _validate_scheduling_gates(spec.get("schedulingGates"), errs)
    _validate_topology_spread(spec.get("topologySpreadConstraints"), errs)
    node_name = spec.get("nodeName")
    if node_name:
        if isinstance(node_name, str):
            for msg in names.is_dns1123_subdomain(node_name):
                errs.append(invalid_value("spec.nodeName", node_name, msg))
        else:
            errs.append(_type_invalid("spec.nodeName", node_name, "string"))
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None:
        if not _is_int(deadline):
            errs.append(_type_invalid("spec.activeDeadlineSeconds", deadline, "integer"))
        elif not 1 <= deadline <= MAX_INT32:
            errs.append(invalid_value("spec.activeDeadlineSeconds", deadline,
                                      f"must be between 1 and {MAX_INT32}, inclusive"))
    tolerations = _check_list(spec.get("tolerations"), "spec.tolerations", errs)
    if tolerations:
        _validate_tolerations(tolerations, "spec.tolerations", errs)
    class_name = spec.get("priorityClassName")
    if class_name:
        if isinstance(class_name, str):
            for msg in names.is_dns1123_subdomain(class_name):
                errs.append(invalid_value("spec.priorityClassName", class_name, msg))
        else:
            errs.append(_type_invalid("spec.priorityClassName", class_name, "string"))
    policy = spec.get("preemptionPolicy")
    if policy is not None:
        _validate_enum(policy, "spec.preemptionPolicy", ["PreemptLowerPriority", "Never"], errs)
    # validateContainersOnlyForPod
    for key, items in (("containers", containers), ("initContainers", init_containers)):
        for i, c in items:
            image = c.get("image")
            if isinstance(image, str) and image != image.strip():
                errs.append(invalid_value(f"spec.{key}[{i}].image", image,
                                          "must not have leading or trailing whitespace"))


def _validate_enum(value: Any, path: str, allowed: list[str], errs: list[FieldError]) -> None:
    if not value:
        errs.append(required(path))
    elif value not in allowed:
        errs.append(not_supported(path, value, allowed))


def _validate_containers(containers: list[tuple[int, dict[str, Any]]], errs: list[FieldError]) -> None:
    if not containers:
        errs.append(required("spec.containers"))
        return
    names: set[str] = set()
    for i, c in containers:
        path = f"spec.containers[{i}]"
        _validate_container_common(c, path, errs)
        name = c.get("name")
        if isinstance(name, str):
            if name in names:
                errs.append(_duplicate(f"{path}.name", name))
            names.add(name)
        _validate_container_restart(c, path, errs)
    _check_host_port_conflicts(containers, "spec.containers", errs)


_CONTAINER_RESTART_POLICIES = ["Always", "Never", "OnFailure"]
_RESTART_RULE_ACTIONS = ["Restart", "RestartAllContainers"]


def _validate_container_restart(c: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    """An app container's restartPolicy and restartPolicyRules (1.36: ContainerRestartRules and
    RestartAllContainersOnContainerExits, both beta and on): rules need a policy, each rule a known action."""
    policy, rules = c.get("restartPolicy"), c.get("restartPolicyRules")
    if policy is not None and policy not in _CONTAINER_RESTART_POLICIES:
        errs.append(not_supported(f"{path}.restartPolicy", policy, _CONTAINER_RESTART_POLICIES))
    if rules and policy is None:
        errs.append(required(f"{path}.restartPolicy", "must specify restartPolicy when restart rules are used"))
    for j, rule in enumerate(rules if isinstance(rules, list) else ()):
        action = rule.get("action") if isinstance(rule, dict) else None
        if action not in _RESTART_RULE_ACTIONS:
            errs.append(not_supported(f"{path}.restartPolicyRules[{j}].action", action, _RESTART_RULE_ACTIONS))


def _validate_init_containers(init_containers: list[tuple[int, dict[str, Any]]],
                              containers: list[tuple[int, dict[str, Any]]], errs: list[FieldError]) -> None:
    names = {c.get("name") for _, c in containers if isinstance(c.get("name"), str)}
    for i, c in init_containers:
        path = f"spec.initContainers[{i}]"
        _validate_container_common(c, path, errs)
        restart = c.get("restartPolicy")
        if restart is not None and restart != "Always":
            errs.append(not_supported(f"{path}.restartPolicy", restart, ["Always"]))
        name = c.get("name")
        if isinstance(name, str):
            if name in names:
                errs.append(_duplicate(f"{path}.name", name))
            elif name:
                names.add(name)
        _check_host_port_conflicts([(i, c)], "spec.initContainers", errs)
        if restart != "Always":
            for field in ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe"):
                if c.get(field) is not None:
                    errs.append(forbidden_field(f"{path}.{field}",
                                                "may not be set for init containers without restartPolicy=Always"))


def _validate_container_common(c: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    name = c.get("name")
    if not name:
        errs.append(required(f"{path}.name"))
    elif not isinstance(name, str):
        errs.append(_type_invalid(f"{path}.name", name, "string"))
    else:
        for msg in names.is_dns1123_label(name):
            errs.append(invalid_value(f"{path}.name", name, msg))
    image = c.get("image")
    if not image:
        errs.append(required(f"{path}.image"))
    elif not isinstance(image, str):
        errs.append(_type_invalid(f"{path}.image", image, "string"))
    _validate_enum(c.get("terminationMessagePolicy"), f"{path}.terminationMessagePolicy",
                   ["File", "FallbackToLogsOnError"], errs)
    _validate_container_ports(c.get("ports"), f"{path}.ports", errs)
    _validate_enum(c.get("imagePullPolicy"), f"{path}.imagePullPolicy", ["Always", "IfNotPresent", "Never"], errs)
    _validate_resources(c.get("resources"), f"{path}.resources", errs)


def _validate_container_ports(ports: Any, path: str, errs: list[FieldError]) -> None:
    names: set[str] = set()
    for j, port in _check_list(ports, path, errs):
        p = f"{path}[{j}]"
        name = port.get("name")
        if isinstance(name, str) and name:
            msgs = _port_name_msgs(name)
            for msg in msgs:
                errs.append(invalid_value(f"{p}.name", name, msg))
            if not msgs:
                if name in names:
                    errs.append(_duplicate(f"{p}.name", name))
                names.add(name)
        container_port = port.get("containerPort")
        if not container_port:
            errs.append(required(f"{p}.containerPort"))
        elif not _is_int(container_port) or not 1 <= container_port <= 65535:
            errs.append(invalid_value(f"{p}.containerPort", container_port, "must be between 1 and 65535, inclusive"))
        host_port = port.get("hostPort")
        if host_port and (not _is_int(host_port) or not 1 <= host_port <= 65535):
            errs.append(invalid_value(f"{p}.hostPort", host_port, "must be between 1 and 65535, inclusive"))
        protocol = port.get("protocol")
        if not protocol:
            errs.append(required(f"{p}.protocol"))
        elif protocol not in ("SCTP", "TCP", "UDP"):
            errs.append(not_supported(f"{p}.protocol", protocol, ["SCTP", "TCP", "UDP"]))


def _check_host_port_conflicts(containers: list[tuple[int, dict[str, Any]]], path: str,
                               errs: list[FieldError]) -> None:
    seen: set[str] = set()
    for i, c in containers:
        for j, port in _dicts(c.get("ports")):
            host_port = port.get("hostPort")
            if not host_port:
                continue
            key = f"{_str(port.get('protocol'))}/{_str(port.get('hostIP'))}/{host_port}"
            if key in seen:
                errs.append(_duplicate(f"{path}[{i}].ports[{j}].hostPort", key))
            seen.add(key)


# resource names, as pkg/apis/core/helper classifies them
_STANDARD_RESOURCES = frozenset((
    "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage",
    "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods", "resourcequotas", "services",
    "replicationcontrollers", "secrets", "configmaps", "persistentvolumeclaims", "storage",
    "requests.storage", "services.nodeports", "services.loadbalancers",
))
_STANDARD_CONTAINER_RESOURCES = frozenset(("cpu", "memory", "ephemeral-storage"))
_INTEGER_RESOURCES = frozenset(("pods", "resourcequotas", "services", "replicationcontrollers", "secrets",
                                "configmaps", "persistentvolumeclaims", "services.nodeports",
                                "services.loadbalancers"))


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def is_extended_resource_name(name: str) -> bool:
    """IsExtendedResourceName: a domain-prefixed name outside kubernetes.io that can follow ``requests.``."""
    if _is_native(name) or name.startswith("requests."):
        return False
    return not names.is_qualified_name("requests." + name)


def _overcommit_allowed(name: str) -> bool:
    return _is_native(name) and not _is_hugepages(name)


def _validate_container_resource_name(name: str, path: str, errs: list[FieldError]) -> None:
    msgs = names.is_qualified_name(name)
    for msg in msgs:
        errs.append(invalid_value(path, name, msg))
    if "/" not in name:
        if not msgs and name not in _STANDARD_RESOURCES and not _is_hugepages(name) \
                and not name.startswith("requests.hugepages-"):
            errs.append(invalid_value(path, name, "must be a standard resource type or fully qualified"))
        if name not in _STANDARD_CONTAINER_RESOURCES and not _is_hugepages(name):
            errs.append(invalid_value(path, name, "must be a standard resource for containers"))
    elif not _is_native(name) and not is_extended_resource_name(name):
        errs.append(invalid_value(path, name, "doesn't follow extended resource name standard"))


def _validate_quantity(name: str, value: Any, path: str, errs: list[FieldError]) -> Fraction | None:
    """ValidateResourceQuantityValue, plus the parse error the Go decoder would have raised."""
    try:
        q = _parse_quantity(value)[0]
    except QuantityError as exc:
        errs.append(invalid_value(path, value, str(exc)))
        return None
    if q < 0:
        errs.append(invalid_value(path, quantity_string(value), "must be greater than or equal to 0"))
    if (name in _INTEGER_RESOURCES or is_extended_resource_name(name)) and q.denominator != 1:
        errs.append(invalid_value(path, quantity_string(value), "must be an integer"))
    return q


def _validate_resources(resources: Any, path: str, errs: list[FieldError]) -> None:
    resources = _check_dict(resources, path, errs)
    lim_path, req_path = f"{path}.limits", f"{path}.requests"
    limits = _check_dict(resources.get("limits"), lim_path, errs)
    requests = _check_dict(resources.get("requests"), req_path, errs)
    has_compute = has_hugepages = False
    parsed_limits: dict[str, Fraction | None] = {}
    for name, value in limits.items():
        p = f"{lim_path}[{name}]"
        _validate_container_resource_name(name, p, errs)
        parsed_limits[name] = _validate_quantity(name, value, p, errs)
        has_hugepages = has_hugepages or _is_hugepages(name)
        has_compute = has_compute or name in ("cpu", "memory")
    for name, value in requests.items():
        p = f"{req_path}[{name}]"
        _validate_container_resource_name(name, p, errs)
        q = _validate_quantity(name, value, p, errs)
        if name in limits:
            lim = parsed_limits.get(name)
            if q is not None and lim is not None:
                if q != lim and not _overcommit_allowed(name):
                    errs.append(invalid_value(req_path, quantity_string(value),
                                              f"must be equal to {name} limit of {quantity_string(limits[name])}"))
                elif q > lim:
                    limit = quantity_string(limits[name])
                    errs.append(invalid_value(req_path, quantity_string(value),
                                              f"must be less than or equal to {name} limit of {limit}"))
        elif not _overcommit_allowed(name):
            errs.append(required(lim_path, "Limit must be set for non overcommitable resources"))
        has_hugepages = has_hugepages or _is_hugepages(name)
        has_compute = has_compute or name in ("cpu", "memory")
    if has_hugepages and not has_compute:
        errs.append(forbidden_field(path, "HugePages require cpu or memory"))


def _validate_tolerations(tolerations: list[tuple[int, dict[str, Any]]], path: str, errs: list[FieldError]) -> None:
    for i, t in tolerations:
        p = f"{path}[{i}]"
        key, operator = t.get("key") or "", t.get("operator") or ""
        value, effect = t.get("value") or "", t.get("effect") or ""
        if key:
            _validate_label_name(key, f"{p}.key", errs)
        if not key and operator != "Exists":
            errs.append(invalid_value(f"{p}.operator", operator, "operator must be Exists when `key` is empty, "
                                                                 "which means \"match all values and all keys\""))
        if t.get("tolerationSeconds") is not None and effect != "NoExecute":
            errs.append(invalid_value(f"{p}.effect", effect,
                                      "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        if operator in ("Equal", ""):
            if not isinstance(value, str):
                errs.append(_type_invalid(f"{p}.value", value, "string"))
            else:
                msgs = names.is_valid_label_value(value)
                if msgs:
                    errs.append(invalid_value(f"{p}.operator", value, ";".join(msgs)))
        elif operator == "Exists":
            if value:
                errs.append(invalid_value(f"{p}.operator", value, "value must be empty when `operator` is 'Exists'"))
        else:
            errs.append(not_supported(f"{p}.operator", operator, ["Equal", "Exists"]))
        if effect:
            _validate_taint_effect(effect, f"{p}.effect", errs)


def _validate_taint_effect(effect: Any, path: str, errs: list[FieldError]) -> None:
    if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
        errs.append(not_supported(path, effect, ["NoSchedule", "PreferNoSchedule", "NoExecute"]))


def _validate_affinity(affinity: Any, path: str, errs: list[FieldError]) -> None:
    affinity = _check_dict(affinity, path, errs)
    node = affinity.get("nodeAffinity")
    if node is not None:
        node = _check_dict(node, f"{path}.nodeAffinity", errs)
        req_path = f"{path}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        req = node.get("requiredDuringSchedulingIgnoredDuringExecution")
        if req is not None:
            validate_node_selector(req, req_path, errs)
        pref_path = f"{path}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
        for i, term in _check_list(node.get("preferredDuringSchedulingIgnoredDuringExecution"), pref_path, errs):
            weight = term.get("weight", 0)
            if not _is_int(weight) or not 1 <= weight <= 100:
                errs.append(invalid_value(f"{pref_path}[{i}].weight", weight, "must be in the range 1-100"))
            # preferred terms may name label values that do not exist yet
            _validate_node_selector_term(_check_dict(term.get("preference"), f"{pref_path}[{i}].preference", errs),
                                         f"{pref_path}[{i}].preference", True, errs)
    for kind in ("podAffinity", "podAntiAffinity"):
        pod = affinity.get(kind)
        if pod is None:
            continue
        pod = _check_dict(pod, f"{path}.{kind}", errs)
        req_path = f"{path}.{kind}.requiredDuringSchedulingIgnoredDuringExecution"
        for i, term in _check_list(pod.get("requiredDuringSchedulingIgnoredDuringExecution"), req_path, errs):
            _validate_pod_affinity_term(term, f"{req_path}[{i}]", errs)
        pref_path = f"{path}.{kind}.preferredDuringSchedulingIgnoredDuringExecution"
        for i, term in _check_list(pod.get("preferredDuringSchedulingIgnoredDuringExecution"), pref_path, errs):
            weight = term.get("weight", 0)
            if not _is_int(weight) or not 1 <= weight <= 100:
                errs.append(invalid_value(f"{pref_path}[{i}].weight", weight, "must be in the range 1-100"))
            term_path = f"{pref_path}[{i}].podAffinityTerm"
            _validate_pod_affinity_term(_check_dict(term.get("podAffinityTerm"), term_path, errs), term_path, errs)


def validate_node_selector(selector: Any, path: str, errs: list[FieldError]) -> None:
    """ValidateNodeSelector (label values checked): at least one term, and each term's requirements."""
    selector = _check_dict(selector, path, errs)
    terms = _check_list(selector.get("nodeSelectorTerms"), f"{path}.nodeSelectorTerms", errs)
    if not terms:
        errs.append(required(f"{path}.nodeSelectorTerms", "must have at least one node selector term"))
    for i, term in terms:
        _validate_node_selector_term(term, f"{path}.nodeSelectorTerms[{i}]", False, errs)


def _validate_node_selector_term(term: dict[str, Any], path: str, allow_invalid_values: bool,
                                 errs: list[FieldError]) -> None:
    for j, req in _check_list(term.get("matchExpressions"), f"{path}.matchExpressions", errs):
        p = f"{path}.matchExpressions[{j}]"
        operator = req.get("operator")
        values = req.get("values") or []
        if not isinstance(values, list):
            errs.append(_type_invalid(f"{p}.values", values, "array"))
            values = []
        if operator in ("In", "NotIn"):
            if not values:
                errs.append(required(f"{p}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                errs.append(forbidden_field(f"{p}.values",
                                            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        elif operator in ("Gt", "Lt"):
            if len(values) != 1:
                errs.append(required(f"{p}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'"))
        else:
            errs.append(invalid_value(f"{p}.operator", operator, "not a valid selector operator"))
        _validate_label_name(req.get("key", ""), f"{p}.key", errs)
        if not allow_invalid_values:
            for k, v in enumerate(values):
                if not isinstance(v, str):
                    errs.append(_type_invalid(f"{p}.values[{k}]", v, "string"))
                    continue
                for msg in names.is_valid_label_value(v):
                    errs.append(invalid_value(f"{p}.values[{k}]", v, msg))
    for j, req in _check_list(term.get("matchFields"), f"{path}.matchFields", errs):
        p = f"{path}.matchFields[{j}]"
        operator = req.get("operator")
        values = req.get("values") if isinstance(req.get("values"), list) else []
        if operator in ("In", "NotIn"):
            if len(values) != 1:
                errs.append(required(f"{p}.values", "must be only one value when `operator` is 'In' or 'NotIn' "
                                                    "for node field selector"))
        else:
            errs.append(invalid_value(f"{p}.operator", operator, "not a valid selector operator"))
        if req.get("key") != "metadata.name":
            errs.append(invalid_value(f"{p}.key", req.get("key"), "not a valid field selector key"))
        else:
            for k, v in enumerate(values):
                for msg in names.is_dns1123_subdomain(v) if isinstance(v, str) else ["must be of type string"]:
                    errs.append(invalid_value(f"{p}.values[{k}]", v, msg))


def _validate_pod_affinity_term(term: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    _validate_label_selector(term.get("labelSelector"), f"{path}.labelSelector", errs)
    _validate_label_selector(term.get("namespaceSelector"), f"{path}.namespaceSelector", errs)
    namespaces = term.get("namespaces")
    for ns in namespaces if isinstance(namespaces, list) else []:
        for msg in names.is_dns1123_label(ns) if isinstance(ns, str) else ["must be of type string"]:
            errs.append(invalid_value(f"{path}.namespace", ns, msg))  # sic: upstream says "namespace"
    topology_key = term.get("topologyKey")
    if not topology_key:
        errs.append(required(f"{path}.topologyKey", "can not be empty"))
    # upstream also runs the label-name check on an empty key, so it reports that twice more
    _validate_label_name(topology_key or "", f"{path}.topologyKey", errs)


def _validate_label_selector(selector: Any, path: str, errs: list[FieldError]) -> None:
    if selector is None:
        return
    selector = _check_dict(selector, path, errs)
    validate_labels(selector.get("matchLabels"), f"{path}.matchLabels", errs)
    for i, expr in _check_list(selector.get("matchExpressions"), f"{path}.matchExpressions", errs):
        p = f"{path}.matchExpressions[{i}]"
        operator = expr.get("operator")
        values = expr.get("values") if isinstance(expr.get("values"), list) else []
        if operator in ("In", "NotIn"):
            if not values:
                errs.append(required(f"{p}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                errs.append(forbidden_field(f"{p}.values",
                                            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        else:
            errs.append(invalid_value(f"{p}.operator", operator, "not a valid selector operator"))
        _validate_label_name(expr.get("key", ""), f"{p}.key", errs)
        for k, v in enumerate(values):
            for msg in names.is_valid_label_value(v) if isinstance(v, str) else ["must be of type string"]:
                errs.append(invalid_value(f"{p}.values[{k}]", v, msg))


def _validate_scheduling_gates(gates: Any, errs: list[FieldError]) -> None:
    seen: set[Any] = set()
    for i, gate in _check_list(gates, "spec.schedulingGates", errs):
        name = gate.get("name", "")
        p = f"spec.schedulingGates[{i}]"
        _validate_label_name(name, p, errs)
        if _h(name) in seen:
            errs.append(_duplicate(p, name))
        seen.add(_h(name))


def _validate_topology_spread(constraints: Any, errs: list[FieldError]) -> None:
    items = _check_list(constraints, "spec.topologySpreadConstraints", errs)
    for n, (i, c) in enumerate(items):
        p = f"spec.topologySpreadConstraints[{i}]"
        max_skew = c.get("maxSkew", 0)
        if not _is_int(max_skew) or max_skew <= 0:
            errs.append(invalid_value(f"{p}.maxSkew", max_skew, "must be greater than zero"))
        topology_key = c.get("topologyKey")
        if not topology_key:
            errs.append(required(f"{p}.topologyKey", "can not be empty"))
        action = c.get("whenUnsatisfiable")
        if action not in ("DoNotSchedule", "ScheduleAnyway"):
            errs.append(not_supported(f"{p}.whenUnsatisfiable", action or "", ["DoNotSchedule", "ScheduleAnyway"]))
        for _, later in items[n + 1:]:
            if later.get("topologyKey") == topology_key and later.get("whenUnsatisfiable") == action:
                errs.append(_duplicate(f"{p}.{{topologyKey, whenUnsatisfiable}}", f"{{{topology_key}, {action}}}"))
                break
        min_domains = c.get("minDomains")
        if min_domains is not None:
            if not _is_int(min_domains) or min_domains <= 0:
                errs.append(invalid_value(f"{p}.minDomains", min_domains, "must be greater than zero"))
            if action != "DoNotSchedule":
                errs.append(invalid_value(f"{p}.minDomains", min_domains,
                                          "can only use minDomains if whenUnsatisfiable=DoNotSchedule, "
                                          f"not {action or ''}"))
        for field in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            policy = c.get(field)
            if policy is not None and policy not in ("Honor", "Ignore"):
                errs.append(not_supported(f"{p}.{field}", policy, ["Honor", "Ignore"]))
        _validate_label_selector(c.get("labelSelector"), f"{p}.labelSelector", errs)


# ---------------------------------------------------------------------------- pod update

UPDATABLE_POD_SPEC_FIELDS = ",".join((
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
))
_FORBIDDEN_SPEC_CHANGE = "pod updates may not change fields other than " + UPDATABLE_POD_SPEC_FIELDS


def validate_pod_update(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    """ValidatePodUpdate: the new spec must be valid and differ from the old only where allowed.

    Allowed: container and init container images; activeDeadlineSeconds set
    or lowered; tolerations added (and tolerationSeconds changed);
    schedulingGates removed; terminationGracePeriodSeconds from negative to
    1. While the old pod is still gated: nodeSelector entries added and
    required node affinity narrowed (expressions appended to existing terms),
    exactly upstream's rules. Everything else, spec.nodeName included (only
    the binding subresource sets it), is Forbidden on ``spec``. Metadata is
    ``validate_object_meta``'s job.
    """
    errs: list[FieldError] = []
    old_spec, new_spec = old.get("spec"), new.get("spec")
    if not isinstance(old_spec, dict):
        old_spec = {}
    if new_spec is None:
        new_spec = {}
    if not isinstance(new_spec, dict):
        errs.append(_type_invalid("spec", new_spec, "object"))
        return errs
    _validate_pod_spec(new_spec, errs)

    for key in ("containers", "initContainers"):
        new_list, old_list = new_spec.get(key), old_spec.get(key)
        new_len = len(new_list) if isinstance(new_list, list) else 0
        old_len = len(old_list) if isinstance(old_list, list) else 0
        if new_len != old_len:
            errs.append(forbidden_field(f"spec.{key}", "pod updates may not add or remove containers"))
            return errs
        # image presence was already checked with the rest of the new spec

    new_deadline, old_deadline = new_spec.get("activeDeadlineSeconds"), old_spec.get("activeDeadlineSeconds")
    if _is_int(new_deadline):
        if not 0 <= new_deadline <= MAX_INT32:
            errs.append(invalid_value("spec.activeDeadlineSeconds", new_deadline,
                                      f"must be between 0 and {MAX_INT32}, inclusive"))
            return errs
        if _is_int(old_deadline) and old_deadline < new_deadline:
            errs.append(invalid_value("spec.activeDeadlineSeconds", new_deadline,
                                      "must be less than or equal to previous value"))
            return errs
    elif new_deadline is None and old_deadline is not None:
        errs.append(invalid_value("spec.activeDeadlineSeconds", None,
                                  "must not update from a positive integer to nil value"))

    _validate_only_added_tolerations(new_spec.get("tolerations"), old_spec.get("tolerations"), errs)
    _validate_only_deleted_gates(new_spec.get("schedulingGates"), old_spec.get("schedulingGates"), errs)

    if _same(new_spec, old_spec):
        return errs
    munged = _munge_updatable(new_spec, old_spec, errs)
    if not _same(munged, old_spec):
        errs.append(forbidden_field("spec", f"{_FORBIDDEN_SPEC_CHANGE}\n{_spec_diff(old_spec, munged)}"))
    return errs


def _validate_only_added_tolerations(new: Any, old: Any, errs: list[FieldError]) -> None:
    def ident(t: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(_h(t.get(k) or "") for k in ("key", "operator", "value", "effect"))

    new_ids = {ident(t) for _, t in _dicts(new)}
    for _, t in _dicts(old):
        if ident(t) not in new_ids:  # tolerationSeconds is the one field that may change
            errs.append(forbidden_field("spec.tolerations",
                                        "existing toleration can not be modified except its tolerationSeconds"))
            return
    # upstream validates the new tolerations here a second time; once is enough


def _validate_only_deleted_gates(new: Any, old: Any, errs: list[FieldError]) -> None:
    old_names = {_h(g.get("name")) for _, g in _dicts(old)}
    added: dict[Any, tuple[int, Any]] = {}
    for i, gate in _dicts(new):
        name = gate.get("name")
        if _h(name) not in old_names:
            added[_h(name)] = (i, name)  # as upstream's map: a repeated gate is reported at its last index
    for i, name in added.values():
        errs.append(forbidden_field(f"spec.schedulingGates[{i}].name",
                                    f"only deletion is allowed, but found new scheduling gate '{name}'"))


def _munge_updatable(new_spec: dict[str, Any], old_spec: dict[str, Any], errs: list[FieldError]) -> dict[str, Any]:
    """A shallow copy of the new spec with every field an update may change put back to the old value."""
    munged = dict(new_spec)
    for key in ("containers", "initContainers"):
        new_list, old_list = new_spec.get(key), old_spec.get(key)
        if isinstance(new_list, list) and isinstance(old_list, list):
            munged[key] = [_with_image_of(n, o) for n, o in zip(new_list, old_list)]
    for key in ("activeDeadlineSeconds", "schedulingGates", "tolerations"):
        _restore(munged, old_spec, key)
    old_grace, new_grace = old_spec.get("terminationGracePeriodSeconds"), munged.get("terminationGracePeriodSeconds")
    if _is_int(old_grace) and old_grace < 0 and new_grace == 1:
        munged["terminationGracePeriodSeconds"] = old_grace
    if old_spec.get("schedulingGates"):
        _munge_gated(munged, old_spec, errs)
    return munged


def _with_image_of(new: Any, old: Any) -> Any:
    if not isinstance(new, dict) or not isinstance(old, dict):
        return new
    c = dict(new)
    if "image" in old:
        c["image"] = old["image"]
    else:
        c.pop("image", None)
    return c


def _restore(munged: dict[str, Any], old: dict[str, Any], key: str) -> None:
    if key in old:
        munged[key] = old[key]
    else:
        munged.pop(key, None)


def _munge_gated(munged: dict[str, Any], old_spec: dict[str, Any], errs: list[FieldError]) -> None:
    # a gated pod may still have its placement narrowed (how Kueue-style queues steer it)
    new_selector, old_selector = munged.get("nodeSelector"), old_spec.get("nodeSelector")
    if not _same(new_selector, old_selector):
        new_map = new_selector if isinstance(new_selector, dict) else {}
        for k, v in _dict_items(old_selector):
            if new_map.get(k) != v:
                errs.append(invalid_value(
                    "spec.nodeSelector", new_selector,
                    "only additions to spec.nodeSelector are allowed (no mutations or deletions)"))
                break
        _restore(munged, old_spec, "nodeSelector")
    old_affinity = old_spec.get("affinity") if isinstance(old_spec.get("affinity"), dict) else None
    new_affinity = munged.get("affinity") if isinstance(munged.get("affinity"), dict) else None
    old_na = old_affinity.get("nodeAffinity") if old_affinity else None
    new_na = new_affinity.get("nodeAffinity") if new_affinity else None
    if _same(old_na, new_na):
        return
    _validate_node_affinity_narrowing(new_na, old_na, errs)
    if new_affinity is None:
        if old_na is not None:
            munged["affinity"] = {"nodeAffinity": old_na}
    elif old_affinity is None and not new_affinity.get("podAffinity") and not new_affinity.get("podAntiAffinity"):
        munged.pop("affinity", None)
    else:
        affinity = dict(new_affinity)
        if old_na is None:
            affinity.pop("nodeAffinity", None)
        else:
            affinity["nodeAffinity"] = old_na
        munged["affinity"] = affinity


def _validate_node_affinity_narrowing(new_na: Any, old_na: Any, errs: list[FieldError]) -> None:
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    old_req = old_na.get("requiredDuringSchedulingIgnoredDuringExecution") if isinstance(old_na, dict) else None
    if not isinstance(old_req, dict):
        return  # nothing was required: anything may be set
    old_terms = old_req.get("nodeSelectorTerms") if isinstance(old_req.get("nodeSelectorTerms"), list) else []
    new_req = new_na.get("requiredDuringSchedulingIgnoredDuringExecution") if isinstance(new_na, dict) else None
    new_terms = (new_req.get("nodeSelectorTerms") if isinstance(new_req, dict) else None) or []
    if not isinstance(new_terms, list):
        new_terms = []
    if old_terms and len(old_terms) != len(new_terms):
        errs.append(invalid_value(path, new_terms,
                                  "no additions/deletions to non-empty NodeSelectorTerms list are allowed"))
        return
    for i, (old_term, new_term) in enumerate(zip(old_terms, new_terms)):
        if not _term_only_adds(new_term, old_term):
            errs.append(invalid_value(f"{path}[{i}]", new_term,
                                      "only additions are allowed (no mutations or deletions)"))


def _term_only_adds(new: Any, old: Any) -> bool:
    new = new if isinstance(new, dict) else {}
    old = old if isinstance(old, dict) else {}
    old_exprs, old_fields = old.get("matchExpressions") or [], old.get("matchFields") or []
    new_exprs, new_fields = new.get("matchExpressions") or [], new.get("matchFields") or []
    if not old_exprs and not old_fields and (new_exprs or new_fields):
        return False  # an empty term matches nothing; filling it in would widen it
    for old_list, new_list in ((old_exprs, new_exprs), (old_fields, new_fields)):
        if old_list and (len(new_list) < len(old_list) or not _same(new_list[:len(old_list)], old_list)):
            return False
    return True


def _spec_diff(old: dict[str, Any], new: dict[str, Any]) -> str:
    """A short stand-in for upstream's cmp.Diff: the changed top-level spec fields."""
    lines = ["  core.PodSpec{"]
    for key in sorted(old.keys() | new.keys()):
        a, b = old.get(key), new.get(key)
        if (_empty(a) and _empty(b)) or _same(a, b, key in _QUANTITY_MAPS):
            continue
        if not _empty(a):
            lines.append(f"-\t{key}: {_json(a)},")
        if not _empty(b):
            lines.append(f"+\t{key}: {_json(b)},")
    lines.append("  }")
    return "\n".join(lines)


def _json(v: Any) -> str:
    try:
        return orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return repr(v)


# ---------------------------------------------------------------------------- pod status update

_TERMINAL_PHASES = frozenset(("Succeeded", "Failed"))


def validate_pod_status_update(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    """The pods/status checks a scheduler can trip over.

    A terminal phase is final (upstream leaves this to the kubelet; the
    stand-in enforces it so a buggy agent cannot resurrect a pod), the QoS
    class is immutable, and nominatedNodeName must be a node name.
    """
    errs: list[FieldError] = []
    old_status = old.get("status") if isinstance(old.get("status"), dict) else {}
    new_status = new.get("status")
    if new_status is None:
        new_status = {}
    if not isinstance(new_status, dict):
        errs.append(_type_invalid("status", new_status, "object"))
        return errs
    old_phase, new_phase = old_status.get("phase"), new_status.get("phase")
    if old_phase in _TERMINAL_PHASES and new_phase != old_phase:
        shown = new_phase if isinstance(new_phase, str) and new_phase else '""'
        errs.append(forbidden_field("status.phase",
                                    f"may not be transitioned from terminal phase {old_phase} to {shown}"))
    new_qos, old_qos = new_status.get("qosClass"), old_status.get("qosClass")
    if new_qos and new_qos != old_qos:  # an empty one is backfilled from the stored pod
        errs.append(invalid_value("status.qosClass", new_qos, "field is immutable"))
    nominated = new_status.get("nominatedNodeName")
    if nominated and nominated != old_status.get("nominatedNodeName"):
        for msg in names.is_dns1123_subdomain(nominated) if isinstance(nominated, str) else ["must be of type string"]:
            errs.append(invalid_value("status.nominatedNodeName", nominated, msg))
    return errs


# ---------------------------------------------------------------------------- nodes

def validate_node_create(node: dict[str, Any]) -> list[FieldError]:
    """ValidateNode beyond metadata: taints and capacity/allocatable quantities."""
    errs: list[FieldError] = []
    spec = node.get("spec")
    if spec is not None and not isinstance(spec, dict):
        errs.append(_type_invalid("spec", spec, "object"))
        spec = {}
    # sic: upstream builds the taints path from "metadata", so causes read metadata.taints[i]
    taints = _check_list((spec or {}).get("taints"), "metadata.taints", errs)
    seen: set[tuple[Any, Any]] = set()
    for i, taint in taints:
        p = f"metadata.taints[{i}]"
        key, effect = taint.get("key", ""), taint.get("effect", "")
        _validate_label_name(key, f"{p}.key", errs)
        value = taint.get("value", "")
        if not isinstance(value, str):
            errs.append(_type_invalid(f"{p}.value", value, "string"))
        else:
            msgs = names.is_valid_label_value(value)
            if msgs:
                errs.append(invalid_value(f"{p}.value", value, ";".join(msgs)))
        if not effect:
            errs.append(required(f"{p}.effect"))
        else:
            _validate_taint_effect(effect, f"{p}.effect", errs)
        ident = (_h(key), _h(effect))
        if ident in seen:
            errs.append(_duplicate(p, taint, "taints must be unique by key and effect pair"))
            continue
        seen.add(ident)
    status = node.get("status")
    if status is not None and not isinstance(status, dict):
        errs.append(_type_invalid("status", status, "object"))
        status = {}
    for section in ("capacity", "allocatable"):
        resources = _check_dict((status or {}).get(section), f"status.{section}", errs)
        for name, value in resources.items():
            # sic: upstream uses Child(name), not Key(name): status.capacity.cpu
            _validate_quantity(name, value, f"status.{section}.{name}", errs)
    return errs
