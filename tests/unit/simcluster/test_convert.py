"""Tests for bench/simcluster/convert.py: Events between core/v1 and events.k8s.io/v1."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.simcluster.convert import (
    event_from_events_v1,
    event_to_events_v1,
    validate_core_v1_event,
    validate_events_v1,
)

POD_REF = {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "web-0",
           "uid": "0b6c1d2e-0000-4000-8000-000000000001", "resourceVersion": "42"}
NODE_REF = {"apiVersion": "v1", "kind": "Node", "name": "node-1", "uid": "node-uid"}


def scheduled(drop: tuple[str, ...] = (), **changes: Any) -> dict[str, Any]:
    """A valid events.k8s.io/v1 'Scheduled' event as tandem writes it, with changes."""
    ev: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "web-0.17c5a6b2d1e0f3a4", "namespace": "default"},
        "eventTime": "2024-05-01T12:00:00.123456Z",
        "reportingController": "tandem-scheduler",
        "reportingInstance": "tandem-scheduler-host-1",
        "action": "Binding",
        "reason": "Scheduled",
        "regarding": copy.deepcopy(POD_REF),
        "note": "Successfully assigned default/web-0 to node-1",
        "type": "Normal",
    }
    for key in drop:
        del ev[key]
    ev.update(changes)
    return ev


# --- conversion -------------------------------------------------------------------

RENAMES = [
    pytest.param("regarding", "involvedObject", POD_REF, id="regarding becomes involvedObject"),
    pytest.param("note", "message", "0/3 nodes are available", id="note becomes message"),
    pytest.param("reportingController", "reportingComponent", "tandem-scheduler",
                 id="reportingController becomes reportingComponent"),
    pytest.param("reportingInstance", "reportingInstance", "tandem-1", id="reportingInstance keeps its name"),
    pytest.param("deprecatedSource", "source", {"component": "kubelet", "host": "node-1"},
                 id="deprecatedSource becomes source"),
    pytest.param("deprecatedFirstTimestamp", "firstTimestamp", "2024-05-01T12:00:00Z",
                 id="deprecatedFirstTimestamp becomes firstTimestamp"),
    pytest.param("deprecatedLastTimestamp", "lastTimestamp", "2024-05-01T12:05:00Z",
                 id="deprecatedLastTimestamp becomes lastTimestamp"),
    pytest.param("deprecatedCount", "count", 7, id="deprecatedCount becomes count"),
    pytest.param("eventTime", "eventTime", "2024-05-01T12:00:00.000001Z", id="eventTime keeps its name"),
    pytest.param("series", "series", {"count": 3, "lastObservedTime": "2024-05-01T12:06:00.000000Z"},
                 id="series keeps its name and shape"),
    pytest.param("action", "action", "Binding", id="action keeps its name"),
    pytest.param("reason", "reason", "FailedScheduling", id="reason keeps its name"),
    pytest.param("type", "type", "Warning", id="type keeps its name"),
    pytest.param("related", "related", NODE_REF, id="related keeps its name"),
    pytest.param("metadata", "metadata", {"name": "e", "namespace": "ns", "resourceVersion": "9"},
                 id="metadata keeps its name"),
]


@pytest.mark.parametrize(("v1_field", "core_field", "value"), RENAMES)
def test_field_is_renamed_both_ways(v1_field: str, core_field: str, value: Any) -> None:
    core = event_from_events_v1({"apiVersion": "events.k8s.io/v1", "kind": "Event", v1_field: value})
    assert core == {"apiVersion": "v1", "kind": "Event", core_field: value}
    back = event_to_events_v1(core)
    assert back == {"apiVersion": "events.k8s.io/v1", "kind": "Event", v1_field: value}


def test_a_scheduler_event_converts_to_the_core_shape_kubectl_shows() -> None:
    assert event_from_events_v1(scheduled()) == {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "web-0.17c5a6b2d1e0f3a4", "namespace": "default"},
        "eventTime": "2024-05-01T12:00:00.123456Z",
        "reportingComponent": "tandem-scheduler",
        "reportingInstance": "tandem-scheduler-host-1",
        "action": "Binding",
        "reason": "Scheduled",
        "involvedObject": POD_REF,
        "message": "Successfully assigned default/web-0 to node-1",
        "type": "Normal",
    }


@pytest.mark.parametrize(("convert", "obj", "want"), [
    pytest.param(event_from_events_v1, {"kind": "Event", "note": "n", "message": "core name on the v1 API"},
                 {"apiVersion": "v1", "kind": "Event", "message": "n"},
                 id="a core field name sent to events.k8s.io/v1 is dropped"),
    pytest.param(event_to_events_v1, {"kind": "Event", "message": "m", "note": "v1 name in core"},
                 {"apiVersion": "events.k8s.io/v1", "kind": "Event", "note": "m"},
                 id="an events.k8s.io/v1 field name in a core event is dropped"),
    pytest.param(event_from_events_v1, {"kind": "Event", "spec": {"x": 1}},
                 {"apiVersion": "v1", "kind": "Event"},
                 id="a field neither API knows is dropped"),
    pytest.param(event_to_events_v1, {"apiVersion": "v1"},
                 {"apiVersion": "events.k8s.io/v1", "kind": "Event"},
                 id="apiVersion and kind are always set"),
])
def test_unknown_fields_are_dropped_like_the_decoder_does(convert: Any, obj: dict, want: dict) -> None:
    assert convert(obj) == want


@pytest.mark.parametrize("convert", [
    pytest.param(event_from_events_v1, id="events.k8s.io/v1 to core"),
    pytest.param(event_to_events_v1, id="core to events.k8s.io/v1"),
])
def test_conversion_never_mutates_or_shares_its_input(convert: Any) -> None:
    src = scheduled(series={"count": 2, "lastObservedTime": "2024-05-01T12:00:01.000000Z"},
                    related=copy.deepcopy(NODE_REF))
    if convert is event_to_events_v1:
        src = event_from_events_v1(src)
    before = copy.deepcopy(src)
    out = convert(src)
    assert src == before
    for value in out.values():
        if isinstance(value, dict):
            value["touched"] = True
    assert src == before


# --- round trip ---------------------------------------------------------------------

_text = st.text(max_size=20)
_time = st.datetimes(timezones=st.none()).map(lambda t: t.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
_ref = st.fixed_dictionaries({}, optional={
    k: _text for k in ("apiVersion", "kind", "namespace", "name", "uid", "resourceVersion", "fieldPath")})
_int32 = st.integers(min_value=0, max_value=2**31 - 1)

# One strategy per logical field, named per API below.
_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "metadata": st.fixed_dictionaries({"name": _text, "namespace": _text}, optional={
        "resourceVersion": _text, "uid": _text, "generateName": _text,
        "labels": st.dictionaries(_text, _text, max_size=3),
        "annotations": st.dictionaries(_text, _text, max_size=3)}),
    "eventTime": st.none() | _time,
    "series": st.none() | st.fixed_dictionaries({"count": _int32, "lastObservedTime": _time}),
    "action": _text,
    "reason": _text,
    "type": st.sampled_from(["Normal", "Warning", ""]),
    "related": st.none() | _ref,
    "reportingInstance": _text,
    "controller": _text,
    "regarding": _ref,
    "note": st.text(max_size=200),
    "source": st.fixed_dictionaries({}, optional={"component": _text, "host": _text}),
    "first": st.none() | _time,
    "last": st.none() | _time,
    "count": _int32,
}
_V1_NAMES = {"controller": "reportingController", "note": "note", "regarding": "regarding",
             "source": "deprecatedSource", "first": "deprecatedFirstTimestamp",
             "last": "deprecatedLastTimestamp", "count": "deprecatedCount"}
_CORE_NAMES = {"controller": "reportingComponent", "note": "message", "regarding": "involvedObject",
               "source": "source", "first": "firstTimestamp", "last": "lastTimestamp", "count": "count"}


def _events(api_version: str, names: dict[str, str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"apiVersion": st.just(api_version), "kind": st.just("Event")},
        optional={names.get(k, k): s for k, s in _FIELDS.items()},
    )


@given(_events("events.k8s.io/v1", _V1_NAMES))
def test_events_v1_round_trips_through_core(ev: dict[str, Any]) -> None:
    core = event_from_events_v1(ev)
    assert set(core) <= {"apiVersion", "kind", *(_CORE_NAMES.get(k, k) for k in _FIELDS)}
    assert event_to_events_v1(core) == ev


@given(_events("v1", _CORE_NAMES))
def test_core_round_trips_through_events_v1(ev: dict[str, Any]) -> None:
    assert event_from_events_v1(event_to_events_v1(ev)) == ev


# --- validation ---------------------------------------------------------------------

NAME_PART_REGEX = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
                   "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
                   "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
SUBDOMAIN_REGEX = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                   "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
                   "regex used for validation is "
                   "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")

EVENTS_V1_CASES = [
    pytest.param(scheduled(), [], id="a complete scheduler event is valid"),
    pytest.param(scheduled(type="Warning", reason="FailedScheduling", action="Scheduling"), [],
                 id="a Warning is valid"),
    pytest.param(scheduled(regarding=NODE_REF), [],
                 id="a cluster-scoped object may be reported in namespace default"),
    pytest.param(scheduled(regarding=NODE_REF, metadata={"name": "n.1", "namespace": "kube-system"}), [],
                 id="a cluster-scoped object may be reported in namespace kube-system"),
    pytest.param(scheduled(regarding=NODE_REF, metadata={"name": "n.1", "namespace": "team-a"}),
                 ['involvedObject.namespace: Invalid value: "": does not match event.namespace'],
                 id="a cluster-scoped object reported in another namespace does not match"),
    pytest.param(scheduled(drop=("eventTime",)), ["eventTime: Required value"],
                 id="eventTime is required"),
    pytest.param(scheduled(eventTime=None, metadata={"name": "e", "namespace": "team-a"}),
                 ['involvedObject.namespace: Invalid value: "default": does not match event.namespace',
                  "eventTime: Required value"],
                 id="without eventTime the old namespace rule applies instead of the reporting checks"),
    pytest.param(scheduled(drop=("reportingController",)),
                 ["reportingController: Required value",
                  'reportingController: Invalid value: "": name part must be non-empty',
                  f'reportingController: Invalid value: "": {NAME_PART_REGEX}'],
                 id="reportingController is required and then also not a qualified name"),
    pytest.param(scheduled(reportingController="tandem scheduler"),
                 [f'reportingController: Invalid value: "tandem scheduler": {NAME_PART_REGEX}'],
                 id="reportingController must be a qualified name"),
    pytest.param(scheduled(reportingController="x-k8s.io/tandem-scheduler"), [],
                 id="reportingController may carry a DNS prefix"),
    pytest.param(scheduled(drop=("reportingInstance",)), ["reportingInstance: Required value"],
                 id="reportingInstance is required"),
    pytest.param(scheduled(reportingInstance="i" * 129),
                 ['reportingInstance: Invalid value: "": can have at most 128 characters'],
                 id="reportingInstance is at most 128 characters"),
    pytest.param(scheduled(action=""), ["action: Required value"], id="action is required"),
    pytest.param(scheduled(action="a" * 129), ['action: Invalid value: "": can have at most 128 characters'],
                 id="action is at most 128 characters"),
    pytest.param(scheduled(drop=("reason",)), ["reason: Required value"], id="reason is required"),
    pytest.param(scheduled(note="n" * 1024), [], id="a note of exactly 1 KiB is fine"),
    pytest.param(scheduled(note="n" * 1025),
                 ['message: Invalid value: "": can have at most 1024 characters'],
                 id="a note over 1 KiB is too long and is reported as message"),
    pytest.param(scheduled(note="é" * 513),
                 ['message: Invalid value: "": can have at most 1024 characters'],
                 id="the note limit counts UTF-8 bytes like Go"),
    pytest.param(scheduled(drop=("note",)), [], id="note is optional"),
    pytest.param(scheduled(type="Info"), ['type: Invalid value: "": has invalid value: Info'],
                 id="type must be Normal or Warning"),
    pytest.param(scheduled(drop=("type",)), ['type: Invalid value: "": has invalid value: '],
                 id="type is required"),
    pytest.param(scheduled(series={"count": 1, "lastObservedTime": "2024-05-01T12:00:01.000000Z"}),
                 ['series.count: Invalid value: "": should be at least 2'],
                 id="a series counts at least 2"),
    pytest.param(scheduled(series={"count": 2}), ["series.lastObservedTime: Required value"],
                 id="a series needs lastObservedTime"),
    pytest.param(scheduled(series=None), [], id="a null series is no series"),
    pytest.param(scheduled(deprecatedCount=3), ['count: Invalid value: "": needs to be unset'],
                 id="deprecatedCount must be unset and is reported as count"),
    pytest.param(scheduled(deprecatedCount=0), [], id="a zero deprecatedCount is unset"),
    pytest.param(scheduled(deprecatedFirstTimestamp="2024-05-01T12:00:00Z"),
                 ['firstTimestamp: Invalid value: "": needs to be unset'],
                 id="deprecatedFirstTimestamp must be unset"),
    pytest.param(scheduled(deprecatedLastTimestamp="2024-05-01T12:00:00Z"),
                 ['lastTimestamp: Invalid value: "": needs to be unset'],
                 id="deprecatedLastTimestamp must be unset"),
    pytest.param(scheduled(deprecatedFirstTimestamp=None, deprecatedLastTimestamp=None), [],
                 id="null deprecated timestamps are unset"),
    pytest.param(scheduled(deprecatedSource={"component": "default-scheduler"}),
                 ['source: Invalid value: "": needs to be unset'],
                 id="deprecatedSource must be unset"),
    pytest.param(scheduled(deprecatedSource={}), [], id="an empty deprecatedSource is unset"),
    pytest.param(scheduled(metadata={"namespace": "default"}),
                 ["metadata.name: Required value: name or generateName is required"],
                 id="the event needs a name"),
    pytest.param(scheduled(metadata={"name": "Web_0", "namespace": "default"}),
                 [f'metadata.name: Invalid value: "Web_0": {SUBDOMAIN_REGEX}'],
                 id="the event name is a DNS subdomain"),
    pytest.param(scheduled(metadata={"name": "e"}),
                 [f'namespace: Invalid value: "": {SUBDOMAIN_REGEX}', "metadata.namespace: Required value"],
                 id="the event needs a namespace"),
]


@pytest.mark.parametrize(("event", "want"), EVENTS_V1_CASES)
def test_events_v1_create_is_validated_like_kube_apiserver(event: dict[str, Any], want: list[str]) -> None:
    before = copy.deepcopy(event)
    assert [e.text() for e in validate_events_v1(event)] == want
    assert event == before


CORE_CASES = [
    pytest.param(event_from_events_v1(scheduled()), [], id="a new-style core event is valid"),
    pytest.param({"metadata": {"name": "e", "namespace": "default"}, "involvedObject": POD_REF,
                  "reason": "Scheduled", "message": "m", "count": 4, "type": "Whatever",
                  "source": {"component": "default-scheduler"}, "firstTimestamp": "2024-05-01T12:00:00Z"},
                 [], id="an old-style core event skips the strict rules"),
    pytest.param({"metadata": {"name": "e", "namespace": "team-a"}, "involvedObject": POD_REF},
                 ['involvedObject.namespace: Invalid value: "default": does not match event.namespace'],
                 id="an old-style core event lives in its object's namespace"),
    pytest.param(event_from_events_v1(scheduled(drop=("action",))), ["action: Required value"],
                 id="a core event with eventTime still needs the reporting fields"),
]


@pytest.mark.parametrize(("event", "want"), CORE_CASES)
def test_core_v1_create_gets_only_the_legacy_rules(event: dict[str, Any], want: list[str]) -> None:
    assert [e.text() for e in validate_core_v1_event(event)] == want


@given(_events("events.k8s.io/v1", _V1_NAMES))
def test_validation_never_raises_on_any_shape(ev: dict[str, Any]) -> None:
    for err in validate_events_v1(ev):
        assert err.text()
