"""Tests for manifests/crds: the PodGroup CRD matches scheduler-plugins' PodGroup."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PODGROUP_CRD = REPO / "manifests" / "crds" / "scheduling.x-k8s.io_podgroups.yaml"


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(PODGROUP_CRD.read_text()) if d]
    assert len(docs) == 1, "one CRD per file, as controller-gen writes them"
    return docs[0]


@pytest.fixture(scope="module")
def version(crd: dict[str, Any]) -> dict[str, Any]:
    (v,) = crd["spec"]["versions"]
    return v


def _props(version: dict[str, Any], part: str) -> dict[str, Any]:
    return version["schema"]["openAPIV3Schema"]["properties"][part]["properties"]


def test_crd_is_the_scheduler_plugins_podgroup(crd: dict[str, Any]) -> None:
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == "podgroups.scheduling.x-k8s.io"
    spec = crd["spec"]
    assert spec["group"] == "scheduling.x-k8s.io"
    assert spec["scope"] == "Namespaced"
    assert spec["names"] == {
        "kind": "PodGroup",
        "listKind": "PodGroupList",
        "plural": "podgroups",
        "singular": "podgroup",
        "shortNames": ["pg", "pgs"],
    }
    # The CRD name must be <plural>.<group> or the apiserver rejects it.
    assert crd["metadata"]["name"] == f"{spec['names']['plural']}.{spec['group']}"


def test_v1alpha1_is_served_stored_and_has_a_status_subresource(version: dict[str, Any]) -> None:
    assert version["name"] == "v1alpha1"
    assert version["served"] is True
    assert version["storage"] is True
    assert version["subresources"] == {"status": {}}


INT32 = {"type": "integer", "format": "int32"}
FIELDS = [
    pytest.param("spec", "minMember", INT32, id="spec.minMember is an int32"),
    pytest.param("spec", "scheduleTimeoutSeconds", INT32, id="spec.scheduleTimeoutSeconds is an int32"),
    pytest.param("spec", "minResources", {"type": "object"}, id="spec.minResources is a map"),
    pytest.param("status", "phase", {"type": "string"}, id="status.phase is a string"),
    pytest.param("status", "occupiedBy", {"type": "string"}, id="status.occupiedBy is a string"),
    pytest.param("status", "scheduled", INT32, id="status.scheduled is an int32"),
    pytest.param("status", "running", INT32, id="status.running is an int32"),
    pytest.param("status", "succeeded", INT32, id="status.succeeded is an int32"),
    pytest.param("status", "failed", INT32, id="status.failed is an int32"),
    pytest.param("status", "scheduleStartTime", {"type": "string", "format": "date-time"},
                 id="status.scheduleStartTime is a date-time"),
]


@pytest.mark.parametrize(("part", "field", "want"), FIELDS)
def test_schema_field_has_the_upstream_type(version: dict[str, Any], part: str, field: str,
                                            want: dict[str, str]) -> None:
    schema = _props(version, part)[field]
    assert {k: schema.get(k) for k in want} == want


# tandem's additions (GangReadiness's PodsReady condition and Kueue-style requeueState); upstream's
# objects never carry them, so scheduler-plugins manifests still apply unchanged
TANDEM_STATUS_FIELDS = {"conditions", "requeueState"}
# preemption (README "Priorities and preemption"): named as upstream's scheduling.k8s.io/v1alpha2 PodGroup names them
TANDEM_SPEC_FIELDS = {"disruptionMode", "priority"}


@pytest.mark.parametrize("part", ["spec", "status"])
def test_schema_has_no_fields_beyond_upstream_and_tandems_own(version: dict[str, Any], part: str) -> None:
    # A typo'd extra field would silently prune the real one on every write.
    extra = TANDEM_STATUS_FIELDS if part == "status" else TANDEM_SPEC_FIELDS
    assert set(_props(version, part)) == {f.values[1] for f in FIELDS if f.values[0] == part} | extra


def test_conditions_are_metav1_conditions_keyed_by_type(version: dict[str, Any]) -> None:
    conditions = _props(version, "status")["conditions"]
    assert conditions["type"] == "array"
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    item = conditions["items"]
    assert set(item["required"]) == {"type", "status", "lastTransitionTime", "reason", "message"}
    assert item["properties"]["status"]["enum"] == ["True", "False", "Unknown"]
    assert item["properties"]["lastTransitionTime"] == {"type": "string", "format": "date-time"}


def test_requeue_state_has_kueues_fields(version: dict[str, Any]) -> None:
    props = _props(version, "status")["requeueState"]["properties"]
    assert {k: props["count"].get(k) for k in INT32} == INT32
    assert {k: props["requeueAt"].get(k) for k in ("type", "format")} == {"type": "string", "format": "date-time"}


def test_min_member_rejects_negative_counts_only(version: dict[str, Any]) -> None:
    assert _props(version, "spec")["minMember"]["minimum"] == 0


def test_min_resources_values_are_quantities(version: dict[str, Any]) -> None:
    value = _props(version, "spec")["minResources"]["additionalProperties"]
    assert value["x-kubernetes-int-or-string"] is True
    assert value["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    pattern = re.compile(value["pattern"])
    for ok in ("1", "100m", "1.5", "2Gi", "512Mi", "1e3", "+3", ".5"):
        assert pattern.match(ok), ok
    for bad in ("1.5.3", "2GB", "ten", "1 Gi"):
        assert not pattern.match(bad), bad


def test_every_property_is_structural(version: dict[str, Any]) -> None:
    # apiextensions/v1 rejects a schema node without a type (unless int-or-string).
    def walk(node: dict[str, Any], path: str) -> None:
        assert "type" in node or node.get("x-kubernetes-int-or-string"), path
        for name, child in (node.get("properties") or {}).items():
            walk(child, f"{path}.{name}")
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{path}[*]")

    walk(version["schema"]["openAPIV3Schema"], "")


@pytest.mark.parametrize("column", ["Phase", "MinMember", "Running", "Age"])
def test_printer_column_is_shown(version: dict[str, Any], column: str) -> None:
    assert column in {c["name"] for c in version["additionalPrinterColumns"]}


def test_printer_columns_point_at_schema_fields(version: dict[str, Any]) -> None:
    for col in version["additionalPrinterColumns"]:
        if col["jsonPath"] == ".metadata.creationTimestamp":
            assert col["type"] == "date"
            continue
        part, field = col["jsonPath"].lstrip(".").split(".")
        schema = _props(version, part)[field]
        assert col["type"] == schema["type"], col["name"]
