"""Conversion and validation of Events between core/v1 and events.k8s.io/v1.

kube-apiserver keeps one Event table and serves it through two APIs: core/v1
``events`` and ``events.k8s.io/v1`` ``events``. An event written through one
is read through the other with some fields renamed (upstream
``pkg/apis/events/v1/conversion.go``)::

    events.k8s.io/v1            core/v1
    regarding                   involvedObject
    note                        message
    reportingController         reportingComponent
    reportingInstance           reportingInstance
    deprecatedSource            source
    deprecatedFirstTimestamp    firstTimestamp
    deprecatedLastTimestamp     lastTimestamp
    deprecatedCount             count
    eventTime, series, action, reason, type, related, metadata: unchanged

The simulated cluster stores events in core/v1 shape and converts at the
edge of the events.k8s.io/v1 view, so this module must stay pure: the
functions never mutate their input and never share nested dicts with it, and
``event_to_events_v1(event_from_events_v1(e)) == e`` for any well-formed
events.k8s.io/v1 event (and the other way round). Fields neither shape knows
are dropped, as the real server's decoder drops them.

The two shapes carry the same information, so conversion never fails and
never fills in defaults; zero values ("", 0, null timestamps) are the HTTP
layer's business.

Validation mirrors upstream ``ValidateEventCreate``
(``pkg/apis/core/validation/events.go``): it runs on the internal (core)
object, so error paths use core field names (``message``, not ``note``;
``firstTimestamp``, not ``deprecatedFirstTimestamp``) exactly as the real
server reports them. A create through core/v1 gets only the legacy rules; a
create through events.k8s.io/v1 gets the legacy rules plus the strict ones.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from bench.simcluster import names
from bench.simcluster.errors import FieldError, invalid_value, required

EVENTS_V1 = "events.k8s.io/v1"
CORE_V1 = "v1"

# events.k8s.io/v1 name -> core/v1 name, for every field either shape has.
_V1_TO_CORE: dict[str, str] = {
    "metadata": "metadata",
    "eventTime": "eventTime",
    "series": "series",
    "reportingController": "reportingComponent",
    "reportingInstance": "reportingInstance",
    "action": "action",
    "reason": "reason",
    "regarding": "involvedObject",
    "related": "related",
    "note": "message",
    "type": "type",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_CORE_TO_V1: dict[str, str] = {core: v1 for v1, core in _V1_TO_CORE.items()}


def _rename(obj: dict[str, Any], names: dict[str, str], api_version: str) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": api_version, "kind": "Event"}
    for key, value in obj.items():
        target = names.get(key)
        if target is not None:
            out[target] = copy.deepcopy(value)
    return out


def event_from_events_v1(obj: dict[str, Any]) -> dict[str, Any]:
    """An events.k8s.io/v1 Event as the same Event in core/v1 shape."""
    return _rename(obj, _V1_TO_CORE, CORE_V1)


def event_to_events_v1(obj: dict[str, Any]) -> dict[str, Any]:
    """A core/v1 Event as the same Event in events.k8s.io/v1 shape."""
    return _rename(obj, _CORE_TO_V1, EVENTS_V1)


# --- validation -------------------------------------------------------------

# Limits from upstream pkg/apis/core/validation/events.go. Go's len() counts
# bytes, so these are UTF-8 byte lengths.
REPORTING_INSTANCE_LENGTH_LIMIT = 128
ACTION_LENGTH_LIMIT = 128
REASON_LENGTH_LIMIT = 128
NOTE_LENGTH_LIMIT = 1024

def _s(obj: Any, key: str) -> str:
    # Wrong JSON types are the decoder's 400, not a validation error; read
    # them as unset so validation never raises.
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else ""


def _is_zero_time(value: Any) -> bool:
    """True for a Go zero ``metav1.Time``/``MicroTime``: absent, null, "" or year 1."""
    if value is None or value == "":
        return True
    if not isinstance(value, str):
        return False
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return (t.year, t.month, t.day, t.hour, t.minute, t.second, t.microsecond) == (1, 1, 1, 0, 0, 0, 0)


def _legacy(ev: dict[str, Any]) -> list[FieldError]:
    """``legacyValidateEvent``: what every create and update gets, on any API."""
    errs: list[FieldError] = []
    meta = ev.get("metadata") if isinstance(ev.get("metadata"), dict) else {}
    namespace = _s(meta, "namespace")
    involved = ev.get("involvedObject") if isinstance(ev.get("involvedObject"), dict) else {}
    involved_ns = _s(involved, "namespace")
    mismatch = "does not match event.namespace"

    if _is_zero_time(ev.get("eventTime")):
        # An old-style event: its namespace must be the involved object's
        # (or empty/"default" for cluster-scoped objects, for old clients).
        if not involved_ns:
            if namespace not in ("", "default"):
                errs.append(invalid_value("involvedObject.namespace", involved_ns, mismatch))
        elif namespace != involved_ns:
            errs.append(invalid_value("involvedObject.namespace", involved_ns, mismatch))
    else:
        if not involved_ns and namespace not in ("default", "kube-system"):
            errs.append(invalid_value("involvedObject.namespace", involved_ns, mismatch))
        controller = _s(ev, "reportingComponent")
        if not controller:
            errs.append(required("reportingController"))
        # Upstream also runs IsQualifiedName on an empty value, so an empty
        # controller is both Required and Invalid, as the real server says.
        for msg in names.is_qualified_name(controller):
            errs.append(invalid_value("reportingController", controller, msg))
        for path, key, limit in (
            ("reportingInstance", "reportingInstance", REPORTING_INSTANCE_LENGTH_LIMIT),
            ("action", "action", ACTION_LENGTH_LIMIT),
            ("reason", "reason", REASON_LENGTH_LIMIT),
        ):
            value = _s(ev, key)
            if not value:
                errs.append(required(path))
            if names.byte_len(value) > limit:
                errs.append(invalid_value(path, "", f"can have at most {limit} characters"))
        if names.byte_len(_s(ev, "message")) > NOTE_LENGTH_LIMIT:
            errs.append(invalid_value("message", "", f"can have at most {NOTE_LENGTH_LIMIT} characters"))

    for msg in names.is_dns1123_subdomain(namespace):
        errs.append(invalid_value("namespace", namespace, msg))
    return errs


def _object_meta(meta: dict[str, Any]) -> list[FieldError]:
    """The name and namespace part of ``ValidateObjectMeta`` for a namespaced
    object named like a DNS subdomain. Labels, annotations, owner references
    and finalizers are not checked here."""
    errs: list[FieldError] = []
    generate_name = _s(meta, "generateName")
    if generate_name:
        for msg in names.name_is_dns_subdomain(generate_name, True):
            errs.append(invalid_value("metadata.generateName", generate_name, msg))
    name = _s(meta, "name")
    if not name:
        errs.append(required("metadata.name", "name or generateName is required"))
    else:
        for msg in names.name_is_dns_subdomain(name, False):
            errs.append(invalid_value("metadata.name", name, msg))
    namespace = _s(meta, "namespace")
    if not namespace:
        errs.append(required("metadata.namespace"))
    else:
        for msg in names.is_dns1123_label(namespace):
            errs.append(invalid_value("metadata.namespace", namespace, msg))
    return errs


def validate_core_v1_event(obj: dict[str, Any]) -> list[FieldError]:
    """Errors a create of this core/v1 Event gets from kube-apiserver.

    Only the legacy rules apply on core/v1 (and events.k8s.io/v1beta1), for
    backwards compatibility. Call it after the server has filled
    ``metadata.namespace`` from the URL.
    """
    return _legacy(obj)


def validate_events_v1(obj: dict[str, Any]) -> list[FieldError]:
    """Errors a create of this events.k8s.io/v1 Event gets from kube-apiserver.

    The legacy rules, then the strict ones: object metadata, ``series``
    (count at least 2, lastObservedTime set), ``eventTime`` required, ``type``
    Normal or Warning, and the deprecated fields unset. Paths are the core
    field names upstream reports. Call it after the server has filled
    ``metadata.namespace`` from the URL and ``metadata.name`` from
    ``generateName``.
    """
    ev = event_from_events_v1(obj)
    errs = _legacy(ev)
    meta = ev.get("metadata") if isinstance(ev.get("metadata"), dict) else {}
    errs.extend(_object_meta(meta))

    series = ev.get("series")
    if isinstance(series, dict):
        count = series.get("count")
        if not isinstance(count, int) or count < 2:
            errs.append(invalid_value("series.count", "", "should be at least 2"))
        if _is_zero_time(series.get("lastObservedTime")):
            errs.append(required("series.lastObservedTime"))

    if _is_zero_time(ev.get("eventTime")):
        errs.append(required("eventTime"))
    event_type = _s(ev, "type")
    if event_type not in ("Normal", "Warning"):
        errs.append(invalid_value("type", "", f"has invalid value: {event_type}"))
    for field in ("firstTimestamp", "lastTimestamp"):
        if not _is_zero_time(ev.get(field)):
            errs.append(invalid_value(field, "", "needs to be unset"))
    if ev.get("count") not in (None, 0):
        errs.append(invalid_value("count", "", "needs to be unset"))
    source = ev.get("source") if isinstance(ev.get("source"), dict) else {}
    if _s(source, "component") or _s(source, "host"):
        errs.append(invalid_value("source", "", "needs to be unset"))
    return errs
