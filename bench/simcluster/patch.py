"""The three PATCH flavours of kube-apiserver, applied to plain JSON values.

* :func:`merge_patch` — ``application/merge-patch+json`` (RFC 7386), with the
  quirks of evanphx/json-patch v4 ``MergePatch`` that kube-apiserver uses.
* :func:`json_patch` — ``application/json-patch+json`` (RFC 6902), with the
  semantics of evanphx/json-patch v4 (``gopkg.in/evanphx/json-patch.v4``),
  including where it departs from the RFC: ``replace`` of a missing object key
  adds it, negative array indices count from the end, ``copy`` from a missing
  key copies ``null``, ``add`` to ``""`` fails.
* :func:`strategic_merge_patch` — ``application/strategic-merge-patch+json``,
  the apply half of k8s.io/apimachinery ``pkg/util/strategicpatch`` with the
  ``patchStrategy``/``patchMergeKey`` tags of the built-in kinds the simulated
  cluster serves (see ``_SCHEMAS``), including its list ordering rules and the
  ``$patch``, ``$retainKeys``, ``$setElementOrder/`` and
  ``$deleteFromPrimitiveList/`` directives.

kube-apiserver runs a patch against the object decoded into its Go type and
decodes the result back into that type, which silently drops fields the type
does not have and turns ``null`` into "unset". Values this module takes from a
patch as a whole are cleaned the same way (``$``-directive keys and nulls
removed), so what is stored looks like what the real server would store.

Nothing here may mutate its inputs: the caller keeps the old object to emit
watch events and to answer concurrent readers. Everything works on a private
deep copy. Failures raise :class:`PatchError` carrying the HTTP code the real
server answers with; :meth:`PatchError.status` renders the Status body.

This module does no I/O and must stay free of anything asynchronous.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from types import MappingProxyType
from typing import Any, Mapping

__all__ = ["PatchError", "merge_patch", "json_patch", "strategic_merge_patch", "MAX_JSON_PATCH_OPERATIONS"]

# handlers.maxJSONPatchOperations
MAX_JSON_PATCH_OPERATIONS = 10000


class PatchError(ValueError):
    """A patch kube-apiserver would refuse.

    ``code`` is the HTTP status: 400 for a malformed patch document, 422 for a
    patch that cannot apply (failed ``test``, missing path, list of lists),
    413 for too many JSON patch operations, 415 for a strategic merge patch on
    a kind that has none, and 500 for the strategic-merge errors upstream does
    not classify (unknown ``$patch`` value, missing merge key, ...), which
    kube-apiserver really answers as an unknown-reason 500.
    ``message`` is the text of the error upstream produces; see
    :meth:`status` for how the server wraps it.
    """

    _REASONS = {400: "BadRequest", 413: "RequestEntityTooLarge", 415: "UnsupportedMediaType",
                422: "Invalid", 500: ""}

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = self._REASONS.get(code, "")

    def status(self) -> dict[str, Any]:
        """The ``meta/v1 Status`` body kube-apiserver sends for this failure."""
        body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Failure", "message": self.message, "code": self.code}
        if self.code == 422:
            # errors.NewGenericServerResponse(422, ...): a fixed message, the
            # library's error as the single cause.
            body["message"] = "the server rejected our request due to an error in our request"
            body["details"] = {"causes": [{"reason": "UnexpectedServerResponse", "message": self.message}]}
        elif self.code == 413:
            body["message"] = f"Request entity too large: {self.message}"
        if self.reason:
            body["reason"] = self.reason
        return body


# --------------------------------------------------------------------------
# Helpers shared by all three flavours.

def _copy(v: Any) -> Any:
    """Deep copy of a JSON value; several times faster than copy.deepcopy."""
    t = type(v)
    if t is dict:
        return {k: _copy(x) for k, x in v.items()}
    if t is list:
        return [_copy(x) for x in v]
    return v


def _json_kind(v: Any) -> str:
    """The word encoding/json uses for a value in an UnmarshalTypeError."""
    t = type(v)
    if t is dict:
        return "object"
    if t is list:
        return "array"
    if t is str:
        return "string"
    if t is bool:
        return "bool"
    if v is None:
        return "null"
    return "number"


def _go_type(v: Any) -> str:
    """reflect.TypeOf(v) as %s prints it, for a value decoded from JSON."""
    t = type(v)
    if t is dict:
        return "map[string]interface {}"
    if t is list:
        return "[]interface {}"
    if t is str:
        return "string"
    if t is bool:
        return "bool"
    if t is int:
        return "int64"
    if t is float:
        return "float64"
    return "%!s(<nil>)"


def _go_float(f: float) -> str:
    # fmt %v of a float64: shortest digits, exponent form outside [1e-4, 1e21).
    if f != f:
        return "NaN"
    if f in (float("inf"), float("-inf")):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "0"
    d = Decimal(repr(f))
    exp = d.adjusted()
    if -4 <= exp < 21:
        text = format(d, "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    sign, digits, _ = d.as_tuple()
    mant = str(digits[0]) + ("." + "".join(map(str, digits[1:])).rstrip("0") if len(digits) > 1 else "")
    mant = mant.rstrip(".")
    return f"{'-' if sign else ''}{mant}e{'+' if exp >= 0 else '-'}{abs(exp):02d}"


def _go_v(v: Any) -> str:
    """fmt's %v of a JSON value: map[k:v ...] with sorted keys, [a b], <nil>."""
    t = type(v)
    if v is None:
        return "<nil>"
    if t is bool:
        return "true" if v else "false"
    if t is float:
        return _go_float(v)
    if t is dict:
        return "map[" + " ".join(f"{k}:{_go_v(v[k])}" for k in sorted(v)) + "]"
    if t is list:
        return "[" + " ".join(_go_v(x) for x in v) + "]"
    return str(v)


def _go_s(v: Any) -> str:
    """fmt's %s of a JSON value (non-strings come out as %!s(type=value))."""
    t = type(v)
    if t is str:
        return v
    if v is None:
        return "%!s(<nil>)"
    if t is dict:
        return "map[" + " ".join(f"{k}:{_go_s(v[k])}" for k in sorted(v)) + "]"
    if t is list:
        return "[" + " ".join(_go_s(x) for x in v) + "]"
    return f"%!s({_go_type(v)}={_go_v(v)})"


def _go_eq(a: Any, b: Any) -> bool:
    """Go's == on two interface{} values holding decoded JSON."""
    if type(a) is not type(b):
        return False  # different dynamic types (int64 vs float64, bool vs number, ...)
    if type(a) in (dict, list):
        raise PatchError(500, f"runtime error: comparing uncomparable type {_go_type(a)}")
    return a == b


def _json_equal(a: Any, b: Any) -> bool:
    """Structural JSON equality that, like json-patch's, tells 1 from 1.0 and true from 1."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if type(a) is list:
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    return a == b


# --------------------------------------------------------------------------
# JSON merge patch (RFC 7386) as evanphx/json-patch v4 MergePatch.


def merge_patch(target: dict, patch: Any) -> Any:
    """Apply an ``application/merge-patch+json`` body to ``target``; returns a new value.

    A ``null`` key deletes; objects merge recursively; anything else replaces.
    kube-apiserver only accepts an object as the patch document: ``null``
    fails with ``Invalid JSON Patch`` and an array or scalar fails to decode,
    both 400.
    """
    if type(patch) is not dict:
        if patch is None:
            raise PatchError(400, "Invalid JSON Patch")
        raise PatchError(400, "error decoding patch: json: cannot unmarshal "
                              f"{_json_kind(patch)} into Go value of type map[string]interface {{}}")
    doc = _copy(target) if type(target) is dict else {}
    _merge_docs(doc, patch)
    return doc


def _merge_docs(doc: dict, patch: dict) -> None:
    for k, v in patch.items():
        if v is None:
            doc.pop(k, None)
            continue
        cur = doc.get(k)
        if cur is None:
            doc[k] = _prune_nulls(v)
        elif type(cur) is dict:
            if type(v) is dict:
                _merge_docs(cur, v)
            else:
                # json-patch returns a non-object patch value here without pruning it.
                doc[k] = _copy(v)
        else:
            doc[k] = _prune_nulls(v)


def _prune_nulls(v: Any) -> Any:
    # pruneNulls: drop null members of objects at any depth; nulls in arrays stay.
    t = type(v)
    if t is dict:
        return {k: _prune_nulls(x) for k, x in v.items() if x is not None}
    if t is list:
        return [_prune_nulls(x) for x in v]
    return v


# --------------------------------------------------------------------------
# JSON patch (RFC 6902) as evanphx/json-patch v4.

_POINTER_ESCAPE = re.compile("~[01]")
_ATOI_RE = re.compile(r"[+-]?[0-9]+")


def _decode_pointer_token(token: str) -> str:
    return _POINTER_ESCAPE.sub(lambda m: "/" if m.group() == "~1" else "~", token)


class _OpError(Exception):
    """A container operation failed; message in Go's wrapped-error style."""


def _atoi(key: str) -> int:
    if _ATOI_RE.fullmatch(key):
        n = int(key)
        if -(1 << 63) <= n < (1 << 63):
            return n
        raise _OpError(f'strconv.Atoi: parsing "{key}": value out of range')
    raise _OpError(f'strconv.Atoi: parsing "{key}": invalid syntax')


def _bad_index(idx: int) -> _OpError:
    return _OpError(f"Unable to access invalid index: {idx}: invalid index referenced")


def _c_get(con: Any, key: str) -> Any:
    """container.get: None for a missing or null member of an object."""
    if type(con) is dict:
        return con.get(key)
    idx = _atoi(key)
    if idx < 0:
        if idx < -len(con):
            raise _bad_index(idx)
        idx += len(con)
    if idx >= len(con):
        raise _bad_index(idx)
    return con[idx]


def _c_set(con: Any, key: str, val: Any) -> None:
    # Only reached after _c_get succeeded on the same key.
    if type(con) is dict:
        con[key] = val
        return
    idx = _atoi(key)
    if idx < 0:
        idx += len(con)
    con[idx] = val


def _c_add(con: Any, key: str, val: Any) -> None:
    if type(con) is dict:
        con[key] = val
        return
    if key == "-":
        con.append(val)
        return
    try:
        idx = _atoi(key)
    except _OpError as err:
        raise _OpError(f"value was not a proper array index: '{key}': {err}") from None
    size = len(con) + 1
    if idx >= size:
        raise _bad_index(idx)
    if idx < 0:
        if idx < -size:
            raise _bad_index(idx)
        idx += size
    con.insert(idx, val)


def _c_remove(con: Any, key: str) -> None:
    if type(con) is dict:
        if key not in con:
            raise _OpError(f"Unable to remove nonexistent key: {key}: missing value")
        del con[key]
        return
    idx = _atoi(key)
    if idx >= len(con):
        raise _bad_index(idx)
    if idx < 0:
        if idx < -len(con):
            raise _bad_index(idx)
        idx += len(con)
    del con[idx]


def _find_object(doc: Any, path: str) -> tuple[Any, str] | None:
    """findObject: the container holding the last token, or None.

    Like upstream, the first segment is dropped without checking that it is
    empty, so ``a/b`` addresses ``/b``.
    """
    split = path.split("/")
    if len(split) < 2:
        return None
    cur = doc
    for part in split[1:-1]:
        try:
            nxt = _c_get(cur, _decode_pointer_token(part))
        except _OpError:
            return None
        if type(nxt) not in (dict, list):
            return None
        cur = nxt
    return cur, _decode_pointer_token(split[-1])


_OP_FIELDS = ("op", "path", "from")


def _validate_ops(ops: Any) -> list:
    """The strict decode into []jsonPatchOp kube-apiserver does before applying."""
    prefix = "error decoding patch: json: cannot unmarshal "
    if type(ops) is not list:
        raise PatchError(400, f"{prefix}{_json_kind(ops)} into Go value of type []handlers.jsonPatchOp")
    for op in ops:
        if op is None:
            continue
        if type(op) is not dict:
            raise PatchError(400, f"{prefix}{_json_kind(op)} into Go value of type handlers.jsonPatchOp")
        for name in _OP_FIELDS:
            v = op.get(name)
            if v is not None and type(v) is not str:
                raise PatchError(400, f"{prefix}{_json_kind(v)} into Go struct field "
                                      f"jsonPatchOp.{name} of type string")
    if len(ops) > MAX_JSON_PATCH_OPERATIONS:
        raise PatchError(413, f"The allowed maximum operations in a JSON patch is "
                              f"{MAX_JSON_PATCH_OPERATIONS}, got {len(ops)}")
    return ops


def json_patch(target: Any, ops: Any) -> Any:
    """Apply an ``application/json-patch+json`` body to ``target``; returns a new value.

    ``ops`` is the decoded patch document (a list of operation objects); a
    JSON ``null`` document is an empty patch, as upstream decodes it.
    """
    if ops is None:
        return _copy(target)
    _validate_ops(ops)
    if type(target) not in (dict, list):
        raise PatchError(500, f"json: cannot unmarshal {_json_kind(target)} into Go value of type "
                              "jsonpatch.partialDoc")
    holder = [_copy(target)]
    for op in ops:
        op = op or {}
        kind = op.get("op")
        if type(kind) is not str:
            kind = "unknown"
        apply = _JSON_PATCH_OPS.get(kind)
        if apply is None:
            raise PatchError(422, f"Unexpected kind: {kind}")
        try:
            apply(holder, op)
        except _OpError as err:
            raise PatchError(422, str(err)) from None
    return holder[0]


def _op_value(op: dict) -> Any:
    # A missing "value" behaves as null everywhere but in test.
    return _copy(op.get("value"))


def _jp_add(holder: list, op: dict) -> None:
    path = op.get("path")
    if path is None:
        raise _OpError("add operation failed to decode path: missing value")
    found = _find_object(holder[0], path)
    if found is None:
        raise _OpError(f'add operation does not apply: doc is missing path: "{path}": missing value')
    con, key = found
    try:
        _c_add(con, key, _op_value(op))
    except _OpError as err:
        raise _OpError(f"error in add for path: '{path}': {err}") from None


def _jp_remove(holder: list, op: dict) -> None:
    path = op.get("path")
    if path is None:
        raise _OpError("remove operation failed to decode path: missing value")
    found = _find_object(holder[0], path)
    if found is None:
        raise _OpError(f'remove operation does not apply: doc is missing path: "{path}": missing value')
    con, key = found
    try:
        _c_remove(con, key)
    except _OpError as err:
        raise _OpError(f"error in remove for path: '{path}': {err}") from None


def _jp_replace(holder: list, op: dict) -> None:
    path = op.get("path")
    if path is None:
        raise _OpError("replace operation failed to decode path: operation missing path field: missing value")
    if path == "":
        if "value" not in op:
            raise PatchError(500, "runtime error: invalid memory address or nil pointer dereference")
        value = op["value"]
        # Upstream wraps a nil error here, so a scalar value is silently ignored.
        if type(value) in (dict, list):
            holder[0] = _copy(value)
        return
    found = _find_object(holder[0], path)
    if found is None:
        raise _OpError(f"replace operation does not apply: doc is missing path: {path}: missing value")
    con, key = found
    try:
        _c_get(con, key)
    except _OpError:
        raise _OpError(f"replace operation does not apply: doc is missing key: {path}: missing value") from None
    # v4 quirk: an object member that does not exist is simply added.
    _c_set(con, key, _op_value(op))


def _jp_move(holder: list, op: dict) -> None:
    src = op.get("from")
    if src is None:
        raise _OpError("move operation failed to decode from: operation, missing from field: missing value")
    found = _find_object(holder[0], src)
    if found is None:
        raise _OpError(f"move operation does not apply: doc is missing from path: {src}: missing value")
    con, key = found
    try:
        val = _c_get(con, key)
        _c_remove(con, key)
    except _OpError as err:
        raise _OpError(f"error in move for path: '{key}': {err}") from None
    path = op.get("path")
    if path is None:
        raise _OpError("move operation failed to decode path: operation missing path field: missing value")
    found = _find_object(holder[0], path)
    if found is None:
        raise _OpError(f"move operation does not apply: doc is missing destination path: {path}: missing value")
    con, key = found
    try:
        _c_add(con, key, val)
    except _OpError as err:
        raise _OpError(f"error in move for path: '{path}': {err}") from None


def _jp_copy(holder: list, op: dict) -> None:
    src = op.get("from")
    if src is None:
        raise _OpError("copy operation failed to decode from: operation, missing from field: missing value")
    found = _find_object(holder[0], src)
    if found is None:
        raise _OpError(f"copy operation does not apply: doc is missing from path: {src}: missing value")
    con, key = found
    try:
        val = _c_get(con, key)
    except _OpError as err:
        raise _OpError(f"error in copy for from: '{src}': {err}") from None
    path = op.get("path")
    if path is None:
        raise _OpError("copy operation failed to decode path: missing value")
    found = _find_object(holder[0], path)
    if found is None:
        raise _OpError(f"copy operation does not apply: doc is missing destination path: {path}: missing value")
    con, key = found
    try:
        _c_add(con, key, _copy(val))
    except _OpError as err:
        raise _OpError(f"error while adding value during copy: {err}") from None


def _jp_test(holder: list, op: dict) -> None:
    path = op.get("path")
    if path is None:
        raise _OpError("test operation failed to decode path: operation missing path field: missing value")
    failed = _OpError(f"testing value {path} failed: test failed")
    if path == "":
        if "value" not in op:
            # Upstream dereferences the absent value and panics.
            raise PatchError(500, "runtime error: invalid memory address or nil pointer dereference")
        if not _json_equal(holder[0], op["value"]):
            raise failed
        return
    found = _find_object(holder[0], path)
    if found is None:
        raise _OpError(f"test operation does not apply: is missing path: {path}: missing value")
    con, key = found
    try:
        val = _c_get(con, key)
    except _OpError as err:
        raise _OpError(f"error in test for path: '{path}': {err}") from None
    if val is None:
        if "value" not in op:
            raise PatchError(500, "runtime error: invalid memory address or nil pointer dereference")
        if op["value"] is None:
            return
        raise failed
    if "value" not in op or not _json_equal(val, op["value"]):
        raise failed


_JSON_PATCH_OPS = {"add": _jp_add, "remove": _jp_remove, "replace": _jp_replace,
                   "move": _jp_move, "copy": _jp_copy, "test": _jp_test}


# --------------------------------------------------------------------------
# Strategic merge patch: the patch metadata of the served kinds.


@dataclass(frozen=True, slots=True)
class _Meta:
    """The patch tags of one field, and the schema of its value (or list element).

    ``strategy`` is "merge", "replace" or "" (lists replace, maps merge);
    ``retainKeys`` only steers patch *generation* and is left out.
    """

    strategy: str = ""
    merge_key: str = ""
    fields: Mapping[str, "_Meta"] = field(default_factory=lambda: _NO_FIELDS)


_NO_FIELDS: Mapping[str, _Meta] = MappingProxyType({})
_UNKNOWN = _Meta()


def _struct(**fields: _Meta) -> Mapping[str, _Meta]:
    return MappingProxyType(fields)


def _merge_list(merge_key: str = "", fields: Mapping[str, _Meta] = _NO_FIELDS) -> _Meta:
    return _Meta("merge", merge_key, fields)


# k8s.io/apimachinery meta/v1 ObjectMeta
_OBJECT_META = _struct(
    finalizers=_merge_list(),
    ownerReferences=_merge_list("uid"),
)

# k8s.io/api core/v1 Container and EphemeralContainerCommon
_CONTAINER = _struct(
    ports=_merge_list("containerPort"),
    env=_merge_list("name"),
    volumeMounts=_merge_list("mountPath"),
    volumeDevices=_merge_list("devicePath"),
)

_POD_SPEC = _struct(
    volumes=_merge_list("name"),  # "merge,retainKeys"
    initContainers=_merge_list("name", _CONTAINER),
    containers=_merge_list("name", _CONTAINER),
    ephemeralContainers=_merge_list("name", _CONTAINER),
    imagePullSecrets=_merge_list("name"),
    hostAliases=_merge_list("ip"),
    topologySpreadConstraints=_merge_list("topologyKey"),
    schedulingGates=_merge_list("name"),
    resourceClaims=_merge_list("name"),  # "merge,retainKeys"
    # tolerations, readinessGates, affinity terms, ...: atomic, replaced whole.
)

_POD_STATUS = _struct(
    conditions=_merge_list("type"),
    podIPs=_merge_list("ip"),
    hostIPs=_merge_list("ip"),
    resourceClaimStatuses=_merge_list("name"),  # "merge,retainKeys"
    # containerStatuses and friends: atomic.
)

_CONDITIONS_ONLY = _struct(conditions=_merge_list("type"))

# core/v1 PodTemplateSpec, as the controllers embed it
_WITH_POD_TEMPLATE = _struct(template=_Meta(fields=_struct(metadata=_Meta(fields=_OBJECT_META),
                                                           spec=_Meta(fields=_POD_SPEC))))


def _kind(**fields: Mapping[str, _Meta]) -> Mapping[str, _Meta]:
    top = {"metadata": _Meta(fields=_OBJECT_META)}
    top.update({name: _Meta(fields=schema) for name, schema in fields.items()})
    return MappingProxyType(top)


_SCHEMAS: Mapping[str, Mapping[str, _Meta]] = MappingProxyType({
    "Pod": _kind(spec=_POD_SPEC, status=_POD_STATUS),
    "Node": _kind(
        spec=_struct(podCIDRs=_merge_list()),  # taints: atomic
        status=_struct(conditions=_merge_list("type"), addresses=_merge_list("type")),  # images: atomic
    ),
    "Namespace": _kind(status=_CONDITIONS_ONLY),  # spec.finalizers: atomic
    "PersistentVolumeClaim": _kind(status=_CONDITIONS_ONLY),
    "PersistentVolume": _kind(),
    "StorageClass": _kind(),
    # policy/v1: spec.selector is patchStrategy "replace".
    "PodDisruptionBudget": _kind(spec=_struct(selector=_Meta("replace")), status=_CONDITIONS_ONLY),
    "PriorityClass": _kind(),
    "Lease": _kind(),
    "Event": _kind(),
    # ServiceSpec.ports: "merge" on port; externalIPs, clusterIPs, ipFamilies: atomic
    "Service": _kind(spec=_struct(ports=_merge_list("port")), status=_CONDITIONS_ONLY),
    # the selectors (a map, or a LabelSelector whose matchExpressions are atomic) have no tags
    "ReplicationController": _kind(spec=_WITH_POD_TEMPLATE, status=_CONDITIONS_ONLY),
    "ReplicaSet": _kind(spec=_WITH_POD_TEMPLATE, status=_CONDITIONS_ONLY),
    "StatefulSet": _kind(spec=_WITH_POD_TEMPLATE, status=_CONDITIONS_ONLY),  # volumeClaimTemplates: atomic
    "Job": _kind(spec=_WITH_POD_TEMPLATE, status=_CONDITIONS_ONLY),
    # scheduling.k8s.io/v1alpha2, by qualified kind: the scheduler-plugins CRD is a PodGroup too, and
    # custom resources take no strategic merge
    "PodGroup.scheduling.k8s.io": _kind(spec=_struct(resourceClaims=_merge_list("name")),
                      status=_struct(conditions=_merge_list("type"), resourceClaimStatuses=_merge_list("name"))),
    "Workload.scheduling.k8s.io": _kind(),  # podGroupTemplates: atomic
    # resource.k8s.io/v1: only a claim's status.reservedFor merges (by uid, as kube-scheduler's Unreserve
    # deletes its pod's entry); every other list of the group is atomic
    "ResourceClaim": _kind(status=_struct(reservedFor=_merge_list("uid"))),
    "ResourceClaimTemplate": _kind(),
    "ResourceSlice": _kind(),
    "DeviceClass": _kind(),
})

_UNSUPPORTED_SMP = ("the body of the request was in an unknown format - accepted media types include: "
                    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")


# --------------------------------------------------------------------------
# Strategic merge patch: the algorithm (mergeMap and friends).

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList"
_SET_ELEMENT_ORDER = "$setElementOrder"

_ERR_PRIMITIVE_LIST = "invalid patch format of primitive list"
_ERR_RETAIN_KEYS = "invalid patch format of retainKeys"
_ERR_SET_ELEMENT_ORDER = "invalid patch format of setElementOrder list"


def schema_kind(kind: str, group: str) -> str:
    """The name :func:`strategic_merge_patch` knows a kind by: ``Kind.group`` where a bare kind is ambiguous."""
    qualified = f"{kind}.{group}"
    return qualified if qualified in _SCHEMAS else kind


def strategic_merge_patch(target: dict, patch: dict, kind: str) -> dict:
    """Apply an ``application/strategic-merge-patch+json`` body to a ``kind`` object.

    Returns a new object. A kind without strategic-merge metadata (custom
    resources) gets the 415 kube-apiserver answers; a JSON ``null`` patch is
    a no-op, as upstream decodes it into an empty map.
    """
    schema = _SCHEMAS.get(kind)
    if schema is None:
        raise PatchError(415, _UNSUPPORTED_SMP)
    if patch is None:
        return _copy(target)
    if type(patch) is not dict:
        raise PatchError(400, f"json: cannot unmarshal {_json_kind(patch)} into Go value of type "
                              "map[string]interface {}")
    original = _copy(target) if type(target) is dict else {}
    return _merge_map(original, _copy(patch), schema)


def _err_no_merge_key(m: dict, key: str) -> PatchError:
    return PatchError(500, f"map: {_go_v(m)} does not contain declared merge key: {key}")


def _err_bad_arg_type(expected: str, actual: Any) -> PatchError:
    return PatchError(500, f"expected a {expected}, but received a {_go_type(actual)}")


def _err_bad_patch_type(directive: Any, m: dict) -> PatchError:
    return PatchError(500, f"unknown patch type: {_go_s(directive)} in map: {_go_v(m)}")


def _is_directive_key(k: str) -> bool:
    return k.startswith("$")


def _clean(v: Any) -> Any:
    """What survives decoding a patch value into a Go struct: no nulls, no $-keys."""
    t = type(v)
    if t is dict:
        return {k: _clean(x) for k, x in v.items() if x is not None and not _is_directive_key(k)}
    if t is list:
        return [_clean(x) for x in v]
    return v


def _remove_directives(v: Any) -> tuple[Any, bool]:
    """removeDirectives: a map carrying $patch is dropped (from its list or key)."""
    t = type(v)
    if t is dict:
        if _DIRECTIVE in v:
            return None, False
        out = {}
        for k, x in v.items():
            nx, keep = _remove_directives(x)
            if keep:
                out[k] = nx
        return out, True
    if t is list:
        out_list = []
        for x in v:
            nx, keep = _remove_directives(x)
            if keep:
                out_list.append(nx)
        return out_list, True
    return v, True


def _from_patch(v: Any) -> tuple[Any, bool]:
    # discardNullValuesFromPatch + removeDirectives + the Go-type decode.
    nv, keep = _remove_directives(v)
    return (_clean(nv), keep)


def _extract_key(key: str, prefix: str, error: str) -> str:
    head, sep, rest = key.partition("/")
    if not sep or head != prefix:
        raise PatchError(400, error)
    return rest


def _merge_map(original: dict, patch: dict, schema: Mapping[str, _Meta]) -> dict:
    """mergeMap: both arguments are private copies and may be mutated."""
    if _DIRECTIVE in patch:
        directive = patch[_DIRECTIVE]
        if directive == "replace" and type(directive) is str:
            del patch[_DIRECTIVE]
            return _clean(patch)
        if directive == "delete" and type(directive) is str:
            return {}
        raise _err_bad_patch_type(directive, patch)

    _apply_retain_keys(original, patch)
    _apply_set_element_order(original, patch, schema)

    for k, patch_v in patch.items():
        is_delete_list = False
        if k.startswith(_DELETE_FROM_PRIMITIVE_LIST):
            k = _extract_key(k, _DELETE_FROM_PRIMITIVE_LIST, _ERR_PRIMITIVE_LIST)
            is_delete_list = True
        if patch_v is None:
            original.pop(k, None)
            continue
        if k not in original:
            # A field the Go type does not have never reaches storage.
            if not is_delete_list and not _is_directive_key(k):
                value, keep = _from_patch(patch_v)
                if keep:
                    original[k] = value
            continue
        original_v = original[k]
        if type(original_v) is not type(patch_v):
            if not is_delete_list:
                value, keep = _from_patch(patch_v)
                if keep:
                    original[k] = value
                else:
                    del original[k]
            continue
        meta = schema.get(k, _UNKNOWN)
        if type(original_v) is dict:
            if meta.strategy == "replace":
                original[k] = _clean(patch_v)
            else:
                original[k] = _merge_map(original_v, patch_v, meta.fields)
        elif type(original_v) is list:
            original[k] = _merge_slice_handler(original_v, patch_v, meta, is_delete_list, None)
        else:
            original[k] = patch_v
    return original


def _apply_retain_keys(original: dict, patch: dict) -> None:
    if _RETAIN_KEYS not in patch:
        return
    retain = patch.pop(_RETAIN_KEYS)
    if type(retain) is not list:
        raise PatchError(400, _ERR_RETAIN_KEYS)
    keep = {x for x in retain if type(x) is str}
    for k, v in patch.items():
        if v is None or k.startswith(_DELETE_FROM_PRIMITIVE_LIST) or k.startswith(_SET_ELEMENT_ORDER):
            continue
        if k not in keep:
            raise PatchError(400, _ERR_RETAIN_KEYS)
    for k in [k for k in original if k not in keep]:
        del original[k]


def _apply_set_element_order(original: dict, patch: dict, schema: Mapping[str, _Meta]) -> None:
    """mergePatchIntoOriginal: merge each list that has a $setElementOrder, then order it."""
    for key in [k for k in patch if k.startswith(_SET_ELEMENT_ORDER)]:
        order = patch.pop(key)
        if type(order) is not list:
            raise _err_bad_arg_type("[]interface {}", order)
        okey = _extract_key(key, _SET_ELEMENT_ORDER, _ERR_SET_ELEMENT_ORDER)
        found_original, found_patch = okey in original, okey in patch
        original_list: list = []
        patch_list: list = []
        if found_original:
            original_list = original[okey]
            if type(original_list) is not list:
                raise _err_bad_arg_type("[]interface {}", original_list)
        if found_patch:
            patch_list = patch[okey]
            if type(patch_list) is not list:
                raise _err_bad_arg_type("[]interface {}", patch_list)
        meta = schema.get(okey, _UNKNOWN)
        merge_key = meta.merge_key
        _validate_against_order(patch_list, order, merge_key)

        # Upstream merges into the live list's own backing array, and then
        # orders by that array: deleted entries shift left in it and appended
        # entries land in the freed tail. ``view`` replays that.
        server_order = original_list
        if found_original and not found_patch:
            merged = original_list
        elif found_patch and not found_original:
            merged, _ = _remove_directives(patch_list)
            merged = _clean(merged)
        elif found_original and found_patch:
            server_order = list(original_list)
            merged = _merge_slice_handler(original_list, patch_list, meta, False, server_order)
        else:
            continue

        if merge_key:
            patch_items, server_only = _partition_maps(merged, order, merge_key)
        else:
            patch_items, server_only = _partition_primitives(merged, order)
        element = _slice_element_type(server_order, patch_list)
        original[okey] = _normalize_order(patch_items, server_only, order, server_order, merge_key, element)
        patch.pop(okey, None)


def _validate_against_order(patch_list: list, order: list, merge_key: str) -> None:
    """validatePatchWithSetOrderList: patch entries must appear in order, and in the order list."""
    if not order or not patch_list:
        return
    if merge_key:
        for item in patch_list:
            if type(item) is not dict:
                raise _err_bad_arg_type("map[string]interface {}", item)
        entries = [item for item in patch_list if not _is_delete(item)]
    else:
        entries = patch_list
    pi = si = 0
    while pi < len(entries) and si < len(order):
        if type(entries[pi]) is dict and _DIRECTIVE in entries[pi]:
            pi += 1
            continue
        if _merge_key_equal(entries[pi], order[si], merge_key):
            pi += 1
        si += 1
    if pi < len(entries) and si >= len(order):
        raise PatchError(500, f"the order in patch list:\n{_go_v(patch_list)}\n doesn't match "
                              f"{_SET_ELEMENT_ORDER} list:\n{_go_v(order)}")


def _is_delete(item: Any) -> bool:
    if type(item) is not dict:
        return False
    d = item.get(_DIRECTIVE)
    return type(d) is str and d == "delete"


def _merge_key_equal(left: Any, right: Any, merge_key: str) -> bool:
    if not merge_key:
        return _go_eq(left, right)
    for side in (left, right):
        if type(side) is not dict:
            raise _err_bad_arg_type("map[string]interface {}", side)
        if merge_key not in side:
            raise _err_no_merge_key(side, merge_key)
    return _go_eq(left[merge_key], right[merge_key])


def _merge_slice_handler(original: list, patch: list, meta: _Meta, is_delete_list: bool,
                         view: list | None) -> list:
    # Delete lists apply whatever the field's strategy; other lists without
    # the merge strategy are replaced whole.
    if meta.strategy == "merge" or is_delete_list:
        return _merge_slice(original, patch, meta, is_delete_list, view)
    return _clean(patch)


def _slice_element_type(*lists: list) -> type:
    """sliceElementType: the one type all elements share."""
    found: type | None = None
    for lst in lists:
        for v in lst:
            t = type(v)
            if found is None:
                if v is None:
                    raise PatchError(500, "runtime error: invalid memory address or nil pointer dereference")
                if t is list:
                    raise PatchError(422, "lists of lists are not supported")
                found = t
            elif t is not found:
                raise PatchError(500, f"list element types are not identical: {_go_v(list(lists))}")
    if found is None:
        raise PatchError(500, "no elements in any of the given slices")
    return found


def _merge_slice(original: list, patch: list, meta: _Meta, is_delete_list: bool, view: list | None) -> list:
    if not original and not patch:
        return original
    element = _slice_element_type(original, patch)
    merge_key = meta.merge_key
    if element is not dict:
        if is_delete_list:
            return _delete_from_slice(original, patch)
        merged = _dedup_scalars(original + patch)
    else:
        if not merge_key:
            raise PatchError(500, "cannot merge lists without merge key")
        original, patch, view = _merge_special_elements(original, patch, merge_key, view)
        merged = _merge_plain_elements(original, patch, merge_key, meta.fields, view)
    if not merge_key:
        patch_items, server_only = _partition_primitives(merged, patch)
    else:
        patch_items, server_only = _partition_maps(merged, patch, merge_key)
    return _normalize_order(patch_items, server_only, patch, original, merge_key, element)


def _merge_special_elements(original: list, patch: list, merge_key: str,
                            view: list | None) -> tuple[list, list, list | None]:
    """Apply the $patch entries of a list patch; returns (original, rest of patch, view)."""
    rest: list = []
    replace = False
    current = list(original)
    for v in patch:
        if _DIRECTIVE not in v:
            rest.append(v)
            continue
        directive = v[_DIRECTIVE]
        if type(directive) is str and directive == "delete":
            if merge_key not in v:
                raise _err_no_merge_key(v, merge_key)
            value = v[merge_key]
            while (idx := _find_by_key(current, merge_key, value)) >= 0:
                del current[idx]
                if view is not None:
                    view[:len(current)] = current  # in-place shift; the tail keeps stale entries
        elif type(directive) is str and directive == "replace":
            replace = True  # keep scanning: later $patch entries are still pruned
        elif type(directive) is str and directive == "merge":
            raise PatchError(500, "merging lists cannot yet be specified in the patch")
        else:
            raise _err_bad_patch_type(directive, v)
    if replace:
        # The patch entries become the list; appends no longer touch the live array.
        return [_clean(x) for x in rest], [], None
    return current, rest, view


def _merge_plain_elements(original: list, patch: list, merge_key: str, fields: Mapping[str, _Meta],
                          view: list | None) -> list:
    merged = list(original)
    for v in patch:
        if merge_key not in v:
            raise _err_no_merge_key(v, merge_key)
        idx = _find_by_key(merged, merge_key, v[merge_key])
        if idx >= 0:
            merged[idx] = _merge_map(merged[idx], v, fields)
        else:
            if view is not None and len(merged) < len(view):
                view[len(merged)] = v  # append inside the live array's capacity
            merged.append(_clean(v))
    return merged


def _find_by_key(items: list, key: str, value: Any) -> int:
    for i, item in enumerate(items):
        if type(item) is not dict:
            raise PatchError(500, f"value for key {i} is not a map")
        if key in item and _go_eq(item[key], value):
            return i
    return -1


def _delete_from_slice(current: list, to_delete: list) -> list:
    doomed = {_hash_key(v) for v in to_delete}
    return [v for v in current if _hash_key(v) not in doomed]


def _hash_key(v: Any) -> tuple[type, Any]:
    # A Go map[interface{}] key: type and value; maps and slices cannot be keys.
    if type(v) in (dict, list):
        raise PatchError(500, f"runtime error: hash of unhashable type {_go_type(v)}")
    return (type(v), v)


def _dedup_scalars(s: list) -> list:
    """deduplicateScalars, including how it reorders (a duplicate is overwritten by the last item)."""
    s = list(s)
    length = len(s) - 1
    i = 0
    while i < length:
        j = i + 1
        while j <= length:
            if _go_eq(s[i], s[j]):
                s[j] = s[length]
                s = s[:length]
                length -= 1
                j -= 1
            j += 1
        i += 1
    return s


def _partition_primitives(items: list, by: list) -> tuple[list, list]:
    wanted = {_hash_key(v) for v in by}
    inside, outside = [], []
    for v in items:
        (inside if _hash_key(v) in wanted else outside).append(v)
    return inside, outside


def _partition_maps(items: list, by: list, merge_key: str) -> tuple[list, list]:
    inside, outside = [], []
    for v in items:
        if type(v) is not dict:
            raise _err_bad_arg_type("map[string]interface {}", v)
        if merge_key not in v:
            raise _err_no_merge_key(v, merge_key)
        (inside if _find_by_key(by, merge_key, v[merge_key]) >= 0 else outside).append(v)
    return inside, outside


def _index(items: list, value: Any, merge_key: str, element: type) -> int:
    if element is dict:
        def key(x: Any) -> Any:
            return x.get(merge_key) if type(x) is dict else None
    else:
        def key(x: Any) -> Any:
            return x
    wanted = key(value)
    for i, item in enumerate(items):
        if _go_eq(wanted, key(item)):
            return i
    return -1


def _sort_by_order(items: list, order: list, merge_key: str, element: type) -> list:
    """normalizeSliceOrder: stable sort by position in ``order``; $patch: delete entries go last."""
    doomed: list = []
    if element is dict:
        for lst in (items, order):
            for x in lst:
                if type(x) is not dict:
                    raise _err_bad_arg_type("map[string]interface {}", x)
                if merge_key not in x:
                    raise _err_no_merge_key(x, merge_key)
        doomed = [x for x in items if _is_delete(x)]
        items = [x for x in items if not _is_delete(x)]
    ranked = sorted(((_index(order, x, merge_key, element), n, x) for n, x in enumerate(items)),
                    key=lambda t: (t[0], t[1]))
    return [x for _, _, x in ranked] + doomed


def _normalize_order(patch_items: list, server_only: list, patch_order: list, server_order: list,
                     merge_key: str, element: type) -> list:
    """normalizeElementOrder: interleave server-only entries into the patch entries.

    A server-only entry goes before a patch entry only when both are in the
    server's list and it came first there; so entries new to the list end up
    ahead of the server-only ones that follow them.
    """
    right = _sort_by_order(patch_items, patch_order, merge_key, element)
    left = _sort_by_order(server_only, server_order, merge_key, element)
    out: list = []
    i = j = 0
    while i < len(left) or j < len(right):
        if i >= len(left):
            out.append(right[j])
            j += 1
        elif j >= len(right):
            out.append(left[i])
            i += 1
        else:
            li = _index(server_order, left[i], merge_key, element)
            ri = _index(server_order, right[j], merge_key, element)
            if li >= 0 and ri >= 0 and li < ri:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
    return out
