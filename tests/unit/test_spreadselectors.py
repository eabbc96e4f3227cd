"""Tests for scheduler/state/spreadselectors.py: the selectors PodTopologySpread's system defaults spread by.

The first tables are upstream's (pkg/scheduler/framework/plugins/helper/
spread_test.go, TestGetPodServices and TestDefaultSelector), compared the
way upstream compares them: as the selector's string, requirements sorted by
key. The rest pin what upstream's code does where its tests are silent:
which controller references count, nil and empty selectors, merge order, and
the handlers' bookkeeping.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from scheduler.model import OwnerRef
from scheduler.state.spreadselectors import (
    REPLICA_SET, REPLICATION_CONTROLLER, SERVICE, STATEFUL_SET, SpreadSelectors)

NS = "test"


def service(name: str, selector: dict[str, str] | None, namespace: str = NS) -> dict[str, Any]:
    spec = {} if selector is None else {"selector": selector}
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


def replication_controller(name: str, selector: dict[str, str] | None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS}, "spec": {"selector": selector}}


def label_selector_owner(name: str, selector: Any) -> dict[str, Any]:
    """A ReplicaSet or a StatefulSet: both have a metav1.LabelSelector at spec.selector."""
    return {"metadata": {"name": name, "namespace": NS}, "spec": {"selector": selector}}


def owned_by(kind: str, name: str, api_version: str, controller: bool = True) -> OwnerRef:
    return OwnerRef(kind, name, f"uid-{name}", controller, api_version)


def selector_string(answer: tuple[dict[str, str], list[dict[str, Any]]] | None) -> str:
    """labels.Selector.String() of the answer: requirements sorted by key, "" when nothing selects."""
    if answer is None:
        return ""
    merged, label_selectors = answer
    reqs = [(k, f"{k}={v}") for k, v in merged.items()]
    for sel in label_selectors:
        reqs += [(k, f"{k}={v}") for k, v in (sel.get("matchLabels") or {}).items()]
        for e in sel.get("matchExpressions") or []:
            op, key = e["operator"], e["key"]
            text = {"Exists": key, "DoesNotExist": f"!{key}"}.get(op) or \
                f"{key} {op.lower()} ({','.join(sorted(e['values']))})"
            reqs.append((key, text))
    return ",".join(text for _, text in sorted(reqs, key=lambda r: r[0]))


def store(*objects: tuple[str, dict[str, Any]]) -> SpreadSelectors:
    s = SpreadSelectors()
    for kind, obj in objects:
        s.on_add(kind, obj)
    return s


# ---------------------------------------------------------------------------- upstream's tables

@pytest.mark.parametrize("i, expected", [
    pytest.param(0, "app=test-0", id="GetPodServices for pod-0"),
    pytest.param(1, "app=test-1", id="GetPodServices for pod-1"),
    pytest.param(2, "app=test-2", id="GetPodServices for pod-2"),
    pytest.param(3, "", id="GetPodServices for pod-3"),
    pytest.param(4, "", id="GetPodServices for pod-4"),
])
def test_get_pod_services(i, expected):
    s = store(*((SERVICE, service(f"service-{j}", {"app": f"test-{j}"})) for j in range(3)))
    labels = {"app": f"test-{i}", "label": f"label-{i}"}
    assert selector_string(s.default_selector(NS, labels, ())) == expected


POD_LABELS = {"podLabelKey": "podLabelVal"}
FAKE_SERVICE = (SERVICE, service("test-service", {"podLabelKey": "podLabelVal"}))
FAKE_REPLICA_SET = (REPLICA_SET, label_selector_owner(
    "test-replicaset", {"matchLabels": {"replicaSetLabelKey": "replicaSetLabelVal"}}))
FAKE_REPLICATION_CONTROLLER = (REPLICATION_CONTROLLER, replication_controller(
    "test-replicationcontroller", {"replicationLabelKey": "replicationLabelVal"}))
FAKE_STATEFUL_SET = (STATEFUL_SET, label_selector_owner(
    "test-statefulset", {"matchLabels": {"statefulSetLabelKey": "statefulSetLabelVal"}}))


@pytest.mark.parametrize("owners, objects, expected", [
    pytest.param((), (), "", id="DefaultSelector for default case"),
    pytest.param((), (FAKE_SERVICE,), "podLabelKey=podLabelVal", id="DefaultSelector for no OwnerReference pod case"),
    pytest.param((owned_by("ReplicaSet", "test-replicaset", "apps/v1"),), (FAKE_SERVICE, FAKE_REPLICA_SET),
                 "podLabelKey=podLabelVal,replicaSetLabelKey=replicaSetLabelVal",
                 id="DefaultSelector for ReplicaSet OwnerReference pod case"),
    pytest.param((owned_by("ReplicationController", "test-replicationcontroller", "v1"),),
                 (FAKE_SERVICE, FAKE_REPLICATION_CONTROLLER),
                 "podLabelKey=podLabelVal,replicationLabelKey=replicationLabelVal",
                 id="DefaultSelector for ReplicationController OwnerReference pod case"),
    pytest.param((owned_by("StatefulSet", "test-statefulset", "apps/v1"),), (FAKE_SERVICE, FAKE_STATEFUL_SET),
                 "podLabelKey=podLabelVal,statefulSetLabelKey=statefulSetLabelVal",
                 id="DefaultSelector for StatefulSet OwnerReference pod case"),
])
def test_default_selector(owners, objects, expected):
    assert selector_string(store(*objects).default_selector(NS, POD_LABELS, owners)) == expected


# ---------------------------------------------------------------------------- what upstream's code does besides

ALL_OWNERS = (FAKE_REPLICA_SET, FAKE_REPLICATION_CONTROLLER, FAKE_STATEFUL_SET)


@pytest.mark.parametrize("owners, expected", [
    pytest.param((owned_by("ReplicaSet", "test-replicaset", "extensions/v1beta1"),), "",
                 id="a ReplicaSet of another API version is no known controller"),
    pytest.param((owned_by("StatefulSet", "test-statefulset", "apps/v1beta2"),), "",
                 id="a StatefulSet of another API version is no known controller"),
    pytest.param((owned_by("ReplicationController", "test-replicationcontroller", "apps/v1"),), "",
                 id="a ReplicationController is v1, not apps/v1"),
    pytest.param((owned_by("ReplicationController", "test-replicationcontroller", "/v1"),),
                 "replicationLabelKey=replicationLabelVal", id="ParseGroupVersion reads /v1 as v1"),
    pytest.param((owned_by("ReplicaSet", "test-replicaset", "apps/v1/x"),), "",
                 id="an apiVersion that does not parse matches nothing"),
    pytest.param((owned_by("Deployment", "test-replicaset", "apps/v1"),), "",
                 id="a Deployment is no controller DefaultSelector knows"),
    pytest.param((owned_by("ReplicaSet", "test-replicaset", "apps/v1", controller=False),), "",
                 id="an owner that is not the controller does not count"),
    pytest.param((owned_by("ReplicaSet", "test-replicaset", "apps/v1", controller=False),
                  owned_by("StatefulSet", "test-statefulset", "apps/v1")),
                 "statefulSetLabelKey=statefulSetLabelVal", id="the controller is the owner marked so"),
    pytest.param((owned_by("Job", "batch", "batch/v1"), owned_by("ReplicaSet", "test-replicaset", "apps/v1")), "",
                 id="only the first controller counts"),
    pytest.param((owned_by("ReplicaSet", "missing", "apps/v1"),), "", id="a controller not in the store adds nothing"),
])
def test_which_controller_reference_counts(owners, expected):
    s = store(*ALL_OWNERS)
    assert selector_string(s.default_selector(NS, {}, owners)) == expected


@pytest.mark.parametrize("objects, labels, expected", [
    pytest.param(((SERVICE, service("nil", None)),), {"app": "web"}, None,
                 id="a service without a selector selects nothing, not everything"),
    pytest.param(((SERVICE, service("empty", {})),), {"app": "web"}, None,
                 id="a service with an empty selector adds nothing"),
    pytest.param(((SERVICE, service("web", {"app": "web", "tier": "fe"})),), {"app": "web"}, None,
                 id="a service needing a label the pod lacks does not select it"),
    pytest.param(((SERVICE, service("blank", {"app": ""})),), {}, None,
                 id="an empty value still needs the key"),
    pytest.param(((SERVICE, service("a", {"app": "web"})), (SERVICE, service("b", {"tier": "fe"}))),
                 {"app": "web", "tier": "fe", "x": "y"}, ({"app": "web", "tier": "fe"}, []),
                 id="the selectors of every service selecting the pod are merged"),
    pytest.param(((SERVICE, service("other", {"app": "web"}, namespace="other")),), {"app": "web"}, None,
                 id="services of other namespaces do not count"),
])
def test_services(objects, labels, expected):
    assert store(*objects).default_selector(NS, labels, ()) == expected


def test_the_replication_controllers_selector_wins_over_the_services():
    s = store((SERVICE, service("web", {"app": "web"})),
              (REPLICATION_CONTROLLER, replication_controller("rc", {"app": "other", "rc": "1"})))
    owners = (owned_by("ReplicationController", "rc", "v1"),)
    assert s.default_selector(NS, {"app": "web"}, owners) == ({"app": "other", "rc": "1"}, [])


@pytest.mark.parametrize("selector, expected", [
    pytest.param(None, None, id="a nil selector is labels.Nothing: no requirements"),
    pytest.param({}, None, id="an empty selector is labels.Everything: no requirements"),
    pytest.param({"matchLabels": {}, "matchExpressions": []}, None, id="empty lists are no requirements"),
    pytest.param({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                       {"key": "canary", "operator": "DoesNotExist"}]},
                 ({}, [{"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                             {"key": "canary", "operator": "DoesNotExist"}]}]),
                 id="expressions are requirements, handed over as the API has them"),
    pytest.param({"matchExpressions": [{"key": "tier", "operator": "Gt", "values": ["1"]}]}, None,
                 id="an operator LabelSelectorAsSelector refuses adds nothing"),
    pytest.param({"matchExpressions": [{"key": "tier", "operator": "In", "values": []}]}, None,
                 id="In without values adds nothing"),
    pytest.param({"matchExpressions": [{"key": "tier", "operator": "Exists", "values": ["a"]}]}, None,
                 id="Exists with values adds nothing"),
    pytest.param({"matchLabels": {"not a key!": "x"}}, None, id="an invalid key adds nothing"),
    pytest.param({"matchLabels": {"app": "-bad-"}}, None, id="an invalid value adds nothing"),
    pytest.param({"matchLabels": {"example.com/app": "web", "app": ""}},
                 ({}, [{"matchLabels": {"example.com/app": "web", "app": ""}}]),
                 id="prefixed keys and empty values are valid"),
])
def test_a_replica_sets_selector(selector, expected):
    s = store((REPLICA_SET, label_selector_owner("rs", selector)))
    assert s.default_selector(NS, {}, (owned_by("ReplicaSet", "rs", "apps/v1"),)) == expected


# ---------------------------------------------------------------------------- handlers and version

def test_version_moves_only_when_an_answer_may_change():
    s = SpreadSelectors()
    rs = label_selector_owner("rs", {"matchLabels": {"app": "web"}})
    steps = [
        ("add", lambda: s.on_add(REPLICA_SET, rs), 1),
        ("a status-only update", lambda: s.on_update(REPLICA_SET, rs, {**rs, "status": {"replicas": 3}}), 1),
        ("a selector change", lambda: s.on_update(
            REPLICA_SET, rs, label_selector_owner("rs", {"matchLabels": {"app": "api"}})), 2),
        ("a service without selector", lambda: s.on_add(SERVICE, service("headless", None)), 2),
        ("a delete of what is not stored", lambda: s.on_delete(SERVICE, service("headless", None)), 2),
        ("a delete", lambda: s.on_delete(REPLICA_SET, rs), 3),
    ]
    for what, step, version in steps:
        step()
        assert s.version == version, what
    assert s.default_selector(NS, {"app": "api"}, (owned_by("ReplicaSet", "rs", "apps/v1"),)) is None


def test_an_update_that_drops_the_selector_forgets_it():
    s = store((SERVICE, service("web", {"app": "web"})))
    s.on_update(SERVICE, service("web", {"app": "web"}), service("web", None))
    assert s.default_selector(NS, {"app": "web"}, ()) is None
    assert s.version == 2


@pytest.mark.parametrize("kind, obj", [
    pytest.param(SERVICE, "not an object", id="an object that is no mapping"),
    pytest.param(SERVICE, {"spec": {"selector": {"app": "web"}}}, id="no metadata"),
    pytest.param(SERVICE, {"metadata": {"name": "x"}, "spec": {"selector": {"app": "web"}}}, id="no namespace"),
    pytest.param(SERVICE, {"metadata": {"name": "x", "namespace": NS}, "spec": "web"}, id="a spec that is a string"),
    pytest.param(SERVICE, {"metadata": {"name": "x", "namespace": NS}, "spec": {"selector": ["app"]}},
                 id="a selector that is a list"),
    pytest.param(REPLICATION_CONTROLLER, {"metadata": {"name": "x", "namespace": NS}, "spec": {"selector": {"a": 1}}},
                 id="a selector value that is no string"),
    pytest.param(REPLICA_SET, {"metadata": {"name": "x", "namespace": NS},
                               "spec": {"selector": {"matchExpressions": "app"}}}, id="expressions that are no list"),
    pytest.param(STATEFUL_SET, {"metadata": {"name": "x", "namespace": NS},
                                "spec": {"selector": {"matchExpressions": [{"key": 3, "operator": "Exists"}]}}},
                 id="a key that is no string"),
])
def test_malformed_objects_are_logged_and_hold_no_selector(kind, obj, caplog):
    s = SpreadSelectors()
    with caplog.at_level(logging.WARNING, logger="tandem.spreadselectors"):
        s.on_add(kind, obj)
        s.on_update(kind, obj, obj)
        s.on_delete(kind, obj)
    assert caplog.records, "a malformed object is logged"
    assert s.version == 0
    owners = [owned_by(k, "x", v) for k, v in (("ReplicationController", "v1"), ("ReplicaSet", "apps/v1"))]
    assert s.default_selector(NS, {"app": "web"}, owners[:1]) is None
    assert s.default_selector(NS, {"app": "web"}, owners[1:]) is None


def test_a_malformed_update_drops_what_was_stored():
    s = store((SERVICE, service("web", {"app": "web"})))
    s.on_update(SERVICE, service("web", {"app": "web"}), {"metadata": {"name": "web", "namespace": NS}, "spec": 7})
    assert s.default_selector(NS, {"app": "web"}, ()) is None
