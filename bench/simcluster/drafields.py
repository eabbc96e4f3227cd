"""The field rules resource.k8s.io/v1's kinds share, in kube-apiserver 1.36's words.

:mod:`bench.simcluster.draclaims` (ResourceClaim, ResourceClaimTemplate) and
:mod:`bench.simcluster.dradevices` (ResourceSlice, DeviceClass) validate
their objects with these pieces of upstream's
``pkg/apis/resource/validation``: driver, pool, device and request names,
qualified attribute names, tolerations and taints, opaque configuration, lists
with a size limit and unique keys. Each was checked against a 1.36.2 server,
which differs in places from upstream's newest code (an empty driver name is
only "Required value"; a qualified name with two slashes is accepted).

Also here, because both kinds' "field is immutable" errors need it: how a
``field.Error`` prints an internal Go struct (:func:`go_value`). Internal
types carry no json tags, so the message shows Go's field names in their
declaration order, ``null`` for nil pointers and slices, zero values for the
rest, and map keys sorted, as ``encoding/json`` writes them.

Nothing here may import ``scheduler/`` or ``plugins/``; CEL is not compiled
here (see :mod:`bench.simcluster.dra`).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from bench.simcluster import errors, names
from bench.simcluster.defaults import QuantityError, quantity_string
from bench.simcluster.errors import FieldError, invalid_value, not_supported, required

GROUP = "resource.k8s.io"
VERSION = "v1"
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"   # resourceapi.Finalizer

# pkg/apis/resource/types.go
DRIVER_NAME_MAX_LENGTH = 63
POOL_NAME_MAX_LENGTH = 253
DEVICE_MAX_ID_LENGTH = 32
DEVICE_REQUESTS_MAX = 32
DEVICE_SELECTORS_MAX = 32
DEVICE_CONSTRAINTS_MAX = 32
DEVICE_CONFIG_MAX = 32
FIRST_AVAILABLE_MAX = 8
CEL_EXPRESSION_MAX_LENGTH = 10 * 1024
OPAQUE_PARAMETERS_MAX_LENGTH = 10 * 1024

TOLERATION_OPERATORS = ["Equal", "Exists"]
_TOLERATION_KEYS = ("key", "operator", "value", "effect", "tolerationSeconds")
TAINT_EFFECTS = ["NoExecute", "NoSchedule", "None"]

_C_IDENTIFIER_FMT = "[A-Za-z_][A-Za-z0-9_]*"
_C_IDENTIFIER_RE = re.compile(_C_IDENTIFIER_FMT)
_C_IDENTIFIER_ERROR = names.regex_error(
    "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric "
    "characters or '_'", _C_IDENTIFIER_FMT, "my_name", "MY_NAME", "MyName")
REQUEST_REF_ERROR = ("must be the name of a request in the claim or the name of a request and a subrequest "
                     "separated by '/'")

# the RawExtension fields, whose JSON is kept as sent (nulls included)
RAW_FIELDS = frozenset(("parameters", "data"))


def as_dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def as_list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def dicts(v: Any) -> list[tuple[int, dict[str, Any]]]:
    """(index, entry) of a JSON list; an entry that is no object reads as an empty one."""
    return [(i, as_dict(x)) for i, x in enumerate(as_list(v))]


def text(v: Any) -> str:
    return v if isinstance(v, str) else ""


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# ---------------------------------------------------------------------------- decoding

def strip_nulls(v: Any) -> Any:
    """What Go's decoder makes of ``null``: the zero value, which these kinds' omitempty fields then omit.

    RawExtension values (opaque parameters, device data) are kept as sent."""
    if isinstance(v, dict):
        return {k: (x if k in RAW_FIELDS else strip_nulls(x)) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [strip_nulls(x) for x in v]
    return v


def drop_empty(d: dict[str, Any], *keys: str) -> None:
    """Leave out the omitempty fields among ``keys`` that are empty, as their JSON encoding does."""
    for k in keys:
        if k in d and d[k] in (None, "", [], {}):
            del d[k]


def check_int(kind: str, value: Any, go_field: str) -> None:
    """An int64 field sent as something else fails decoding (400), before anything else, as upstream."""
    if value is not None and not is_int(value):
        what = {str: "string", bool: "bool", list: "array", dict: "object", float: "number"}.get(type(value), "value")
        raise errors.bad_request(f'{kind} in version "{VERSION}" cannot be handled as a {kind}: json: cannot '
                                 f"unmarshal {what} into Go struct field {go_field} of type int64")


def canonical_quantity(kind: str, value: Any) -> str:
    """Quantity.String(), as a decoded and re-encoded object carries it; one that does not parse fails decoding
    (400)."""
    try:
        return quantity_string(value)
    except QuantityError as exc:
        raise errors.bad_request(f'{kind} in version "{VERSION}" cannot be handled as a {kind}: {exc}') from None


def canonical_quantities(kind: str, quantities: Any, field: str = "") -> None:
    """Each quantity of a map, in place: its values (``{"memory": "1Gi"}``) or their ``field``
    (``{"memory": {"value": "1Gi"}}``)."""
    for key, value in as_dict(quantities).items():
        if not field:
            if value is not None:
                quantities[key] = canonical_quantity(kind, value)
        elif isinstance(value, dict) and value.get(field) is not None:
            value[field] = canonical_quantity(kind, value[field])


# ---------------------------------------------------------------------------- lists

def too_many(items: list[Any], limit: int, path: str, errs: list[FieldError]) -> bool:
    """validateSlice's first check: more than ``limit`` entries is one Too many error and nothing else."""
    if len(items) > limit:
        errs.append(errors.too_many(path, len(items), limit))
        return True
    return False


def duplicates(keys: list[Any], path: str, errs: list[FieldError]) -> None:
    """validateSet's last check: each repeated key, at its own index, after every entry was validated."""
    seen: set[Any] = set()
    for i, key in enumerate(keys):
        if key in seen:
            errs.append(errors.duplicate(f"{path}[{i}]", key))
        else:
            seen.add(key)


# ---------------------------------------------------------------------------- names

def validate_driver_name(name: str, path: str, errs: list[FieldError]) -> None:
    """ValidateCSIDriverName as 1.36 applies it here: empty is only Required; else at most 63 bytes, and a
    DNS subdomain once lower-cased."""
    if not name:
        errs.append(required(path))
        return
    if names.byte_len(name) > DRIVER_NAME_MAX_LENGTH:
        errs.append(errors.too_long(path, DRIVER_NAME_MAX_LENGTH))
    for msg in names.is_dns1123_subdomain(name.lower()):
        errs.append(invalid_value(path, name, msg))


def validate_pool_name(name: str, path: str, errs: list[FieldError]) -> None:
    """One or more DNS subdomains separated by slashes, at most 253 bytes; each bad part is named."""
    if not name:
        errs.append(required(path))
        return
    if names.byte_len(name) > POOL_NAME_MAX_LENGTH:
        errs.append(errors.too_long(path, POOL_NAME_MAX_LENGTH))
    for part in name.split("/"):
        for msg in names.is_dns1123_subdomain(part):
            errs.append(invalid_value(path, part, msg))


def validate_dns_label(value: str, path: str, errs: list[FieldError]) -> None:
    """Device, request and counter names (an empty one gets the format's message, not Required)."""
    for msg in names.is_dns1123_label(value):
        errs.append(invalid_value(path, value, msg))


def validate_class_name(name: str, path: str, errs: list[FieldError]) -> None:
    """A request's deviceClassName: required, a DNS subdomain."""
    if not name:
        errs.append(required(path))
        return
    for msg in names.is_dns1123_subdomain(name):
        errs.append(invalid_value(path, name, msg))


def _validate_c_identifier(ident: str, path: str, errs: list[FieldError]) -> None:
    if names.byte_len(ident) > DEVICE_MAX_ID_LENGTH:
        errs.append(errors.too_long(path, DEVICE_MAX_ID_LENGTH))
    if not _C_IDENTIFIER_RE.fullmatch(ident):
        errs.append(invalid_value(path, ident, _C_IDENTIFIER_ERROR))


def validate_qualified_name(name: str, path: str, errs: list[FieldError]) -> None:
    """An attribute or capacity name: a C identifier, optionally after a driver-like domain and a slash.

    A name with more slashes is accepted, as 1.36 accepts it (upstream's TODO in validateQualifiedName)."""
    parts = name.split("/")
    if len(parts) == 1:
        _validate_c_identifier(name, path, errs)
    elif len(parts) == 2:
        domain, ident = parts
        if not domain:
            errs.append(invalid_value(path, "", "the domain must not be empty"))
        else:
            validate_driver_name(domain, path, errs)
        if not ident:
            errs.append(invalid_value(path, "", "the name must not be empty"))
        else:
            _validate_c_identifier(ident, path, errs)


def validate_fully_qualified_name(name: str, path: str, errs: list[FieldError]) -> None:
    """A qualified name that must have its domain (a constraint's matchAttribute)."""
    validate_qualified_name(name, path, errs)
    if "/" not in name:
        errs.append(invalid_value(path, name, "a fully qualified name must be a domain and a name separated by a slash"))


def validate_request_ref(ref: str, path: str, requests: dict[str, set[str] | None], errs: list[FieldError]) -> None:
    """validateRequestNameRef: ``request`` or ``request/subrequest`` naming one of the claim's."""
    segments = ref.split("/")
    if len(segments) > 2:
        errs.append(invalid_value(path, ref, REQUEST_REF_ERROR))
        return
    for segment in segments:
        validate_dns_label(segment, path, errs)
    known = segments[0] in requests and (len(segments) == 1 or segments[1] in (requests[segments[0]] or ()))
    if not known:
        errs.append(invalid_value(path, ref, REQUEST_REF_ERROR))


def validate_request_refs(refs: Any, path: str, requests: dict[str, set[str] | None], errs: list[FieldError]) -> None:
    """A constraint's or a config's ``requests``: at most 32, each naming a request, none twice."""
    items = [text(r) for r in as_list(refs)]
    if too_many(items, DEVICE_REQUESTS_MAX, path, errs):
        return
    for i, ref in enumerate(items):
        validate_request_ref(ref, f"{path}[{i}]", requests, errs)
    duplicates(items, path, errs)


# ---------------------------------------------------------------------------- tolerations and taints

def default_toleration(toleration: dict[str, Any]) -> None:
    """SetDefaults_DeviceToleration: the operator is Equal unless set; empty strings are omitted."""
    if not toleration.get("operator"):
        toleration["operator"] = "Equal"
    drop_empty(toleration, "key", "value", "effect")
    ordered = {k: toleration[k] for k in _TOLERATION_KEYS if k in toleration} | toleration
    toleration.clear()
    toleration.update(ordered)


def validate_toleration(t: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    key, op, value, effect = text(t.get("key")), text(t.get("operator")), text(t.get("value")), text(t.get("effect"))
    if key:
        for msg in names.is_label_key(key):
            errs.append(invalid_value(f"{path}.key", key, msg))
    if op == "Exists":
        if value:
            errs.append(invalid_value(f"{path}.value", value, "must be empty for operator `Exists`"))
    elif op == "Equal":
        for msg in names.is_valid_label_value(value):
            errs.append(invalid_value(f"{path}.value", value, msg))
    elif not op:
        errs.append(required(f"{path}.operator"))
    else:
        errs.append(not_supported(f"{path}.operator", op, TOLERATION_OPERATORS))
    if effect and effect not in TAINT_EFFECTS:
        errs.append(not_supported(f"{path}.effect", effect, TAINT_EFFECTS))


def validate_taint(t: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    key, value, effect = text(t.get("key")), text(t.get("value")), text(t.get("effect"))
    for msg in names.is_label_key(key):
        errs.append(invalid_value(f"{path}.key", key, msg))
    if value:
        for msg in names.is_valid_label_value(value):
            errs.append(invalid_value(f"{path}.value", value, msg))
    if not effect:
        errs.append(required(f"{path}.effect"))
    elif effect not in TAINT_EFFECTS:
        errs.append(not_supported(f"{path}.effect", effect, TAINT_EFFECTS))


# ---------------------------------------------------------------------------- configuration

def validate_opaque(opaque: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    """An opaque device configuration: its driver, and parameters that are a JSON object of at most 10 KiB."""
    validate_driver_name(text(opaque.get("driver")), f"{path}.driver", errs)
    params = opaque.get("parameters")
    if params is None:
        errs.append(required(f"{path}.parameters"))
    elif len(orjson.dumps(params)) > OPAQUE_PARAMETERS_MAX_LENGTH:
        errs.append(errors.too_long(f"{path}.parameters", OPAQUE_PARAMETERS_MAX_LENGTH))
    elif not isinstance(params, dict):
        errs.append(invalid_value(f"{path}.parameters", "<value omitted>", "must be a valid JSON object"))


def validate_configs(configs: Any, limit: int, path: str, errs: list[FieldError],
                     requests: dict[str, set[str]] | None = None) -> None:
    """``config`` of a claim (with ``requests``: each entry's requests name the claim's) or of a class."""
    entries = dicts(configs)
    if too_many(entries, limit, path, errs):
        return
    for i, cfg in entries:
        p = f"{path}[{i}]"
        if requests is not None:
            validate_request_refs(cfg.get("requests"), f"{p}.requests", requests, errs)
        if cfg.get("opaque") is None:
            errs.append(required(f"{p}.opaque"))
        else:
            validate_opaque(as_dict(cfg.get("opaque")), f"{p}.opaque", errs)


def validate_selectors(selectors: Any, path: str, errs: list[FieldError]) -> None:
    """CEL device selectors: at most 32, each with a ``cel`` whose expression is at most 10 KiB.

    The real server also compiles each expression (``dracel``) and refuses one that does not compile or costs
    too much; the stand-in does not compile CEL, so it accepts any expression of an allowed length."""
    entries = dicts(selectors)
    if too_many(entries, DEVICE_SELECTORS_MAX, path, errs):
        return
    for i, selector in entries:
        cel = selector.get("cel")
        if cel is None:
            errs.append(required(f"{path}[{i}].cel"))
        elif names.byte_len(text(as_dict(cel).get("expression"))) > CEL_EXPRESSION_MAX_LENGTH:
            errs.append(errors.too_long(f"{path}[{i}].cel.expression", CEL_EXPRESSION_MAX_LENGTH))


# ---------------------------------------------------------------------------- Go structs in messages

S, I, RAW = "string", "int64", "raw"   # leaves: "" when unset, 0 when unset, the JSON value or null


def ptr(schema: Any) -> tuple[str, Any]:
    return ("*", schema)


def slice_of(schema: Any) -> tuple[str, Any]:
    return ("[]", schema)


def map_of(schema: Any) -> tuple[str, Any]:
    return ("map", schema)


def struct(*fields: tuple[str, str, Any]) -> tuple[str, tuple[tuple[str, str, Any], ...]]:
    """An internal Go struct: (Go name, JSON name, schema) in declaration order."""
    return ("struct", fields)


def go_object(schema: Any, value: Any) -> Any:
    """``value`` (this API's JSON) as ``encoding/json`` writes the internal Go struct ``schema`` of it."""
    if schema == S:
        return value if isinstance(value, str) else ""
    if schema == I:
        return value if is_int(value) else 0
    if schema == RAW:
        return value
    tag, inner = schema
    if tag == "*":
        return None if value is None else go_object(inner, value)
    if tag == "[]":
        return None if not isinstance(value, list) else [go_object(inner, v) for v in value]
    if tag == "map":
        return None if not isinstance(value, dict) else {k: go_object(inner, value[k]) for k in sorted(value)}
    obj = as_dict(value)
    return {go_name: go_object(sub, obj.get(json_name)) for go_name, json_name, sub in inner}


_GO_ESCAPES = (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


def go_text(obj: Any) -> errors.GoValue:
    """A :func:`go_object` as field.Error prints it: compact JSON, HTML-escaped as encoding/json escapes."""
    out = orjson.dumps(obj).decode()
    for char, escaped in _GO_ESCAPES:
        out = out.replace(char, escaped)
    return errors.GoValue(out)


def go_value(schema: Any, value: Any) -> errors.GoValue:
    """``value`` as a field.Error shows its internal Go struct ``schema``."""
    return go_text(go_object(schema, value))


def semantic(v: Any) -> Any:
    """``v`` as apiequality.Semantic.DeepEqual compares it: an empty list or map is the same as none."""
    if isinstance(v, dict):
        return {k: semantic(x) for k, x in v.items() if x not in (None, [], {})}
    if isinstance(v, list):
        return [semantic(x) for x in v]
    return v


TOLERATION = struct(("Key", "key", S), ("Operator", "operator", S), ("Value", "value", S), ("Effect", "effect", S),
                    ("TolerationSeconds", "tolerationSeconds", RAW))
SELECTOR = struct(("CEL", "cel", ptr(struct(("Expression", "expression", S)))))
OPAQUE = ptr(struct(("Driver", "driver", S), ("Parameters", "parameters", RAW)))
_REQUIREMENT = slice_of(struct(("Key", "key", S), ("Operator", "operator", S), ("Values", "values", slice_of(S))))
NODE_SELECTOR_TERM = struct(("MatchExpressions", "matchExpressions", _REQUIREMENT),
                            ("MatchFields", "matchFields", _REQUIREMENT))
NODE_SELECTOR = ptr(struct(("NodeSelectorTerms", "nodeSelectorTerms", slice_of(NODE_SELECTOR_TERM))))
