"""The three PATCH flavours produce what kube-apiserver produces, and fail as it fails.

Expected results follow evanphx/json-patch v4 (JSON and merge patch) and
k8s.io/apimachinery strategicpatch with the core/v1 patch tags (strategic
merge); several cases are upstream's own test vectors for those packages.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.simcluster.patch import (
    MAX_JSON_PATCH_OPERATIONS,
    PatchError,
    json_patch,
    merge_patch,
    strategic_merge_patch,
)

# ---------------------------------------------------------------- merge patch


@pytest.mark.parametrize("target, patch, expected", [
    pytest.param({"a": 1}, {"b": 2}, {"a": 1, "b": 2}, id="a new key is added"),
    pytest.param({"a": 1}, {"a": "x"}, {"a": "x"}, id="a scalar is replaced"),
    pytest.param({"a": 1, "b": 2}, {"a": None}, {"b": 2}, id="null deletes a key"),
    pytest.param({"a": 1}, {"zz": None}, {"a": 1}, id="null on a missing key changes nothing"),
    pytest.param({"m": {"x": 1, "y": 2}}, {"m": {"y": None, "z": 3}}, {"m": {"x": 1, "z": 3}},
                 id="objects merge recursively"),
    pytest.param({"l": [1, 2, 3]}, {"l": [4]}, {"l": [4]}, id="lists are replaced whole"),
    pytest.param({}, {"m": {"x": None, "y": {"z": None}}}, {"m": {"y": {}}},
                 id="nulls inside a new object are pruned"),
    pytest.param({"l": 1}, {"l": [None, {"x": None}]}, {"l": [None, {}]},
                 id="nulls in a new list stay but nulls in its objects go"),
    pytest.param({"m": {"x": 1}}, {"m": 5}, {"m": 5}, id="an object is replaced by a scalar"),
    pytest.param({"m": 5}, {"m": {"x": 1}}, {"m": {"x": 1}}, id="a scalar is replaced by an object"),
    pytest.param({"a": 1}, {}, {"a": 1}, id="an empty patch changes nothing"),
])
def test_merge_patch_applies_rfc7386(target: dict, patch: dict, expected: dict) -> None:
    assert merge_patch(target, patch) == expected


@pytest.mark.parametrize("patch, message", [
    pytest.param(None, "Invalid JSON Patch", id="a null document is an invalid patch"),
    pytest.param([1], "error decoding patch: json: cannot unmarshal array into Go value of type "
                      "map[string]interface {}", id="an array document does not decode"),
    pytest.param("x", "error decoding patch: json: cannot unmarshal string into Go value of type "
                      "map[string]interface {}", id="a string document does not decode"),
    pytest.param(3, "error decoding patch: json: cannot unmarshal number into Go value of type "
                    "map[string]interface {}", id="a number document does not decode"),
])
def test_merge_patch_refuses_a_non_object_document_as_bad_request(patch: Any, message: str) -> None:
    with pytest.raises(PatchError) as err:
        merge_patch({"a": 1}, patch)
    assert (err.value.code, str(err.value)) == (400, message)


# ---------------------------------------------------------------- JSON patch

_DOC = {"a": {"b": [1, 2, 3]}, "c": "x", "n": None, "x/y": 1, "t~u": 2}


@pytest.mark.parametrize("ops, expected", [
    pytest.param([{"op": "add", "path": "/d", "value": {"e": 1}}],
                 {**_DOC, "d": {"e": 1}}, id="add sets an object member"),
    pytest.param([{"op": "add", "path": "/c", "value": "y"}], {**_DOC, "c": "y"},
                 id="add overwrites an existing member"),
    pytest.param([{"op": "add", "path": "/a/b/1", "value": 9}], {**_DOC, "a": {"b": [1, 9, 2, 3]}},
                 id="add inserts into an array"),
    pytest.param([{"op": "add", "path": "/a/b/-", "value": 4}], {**_DOC, "a": {"b": [1, 2, 3, 4]}},
                 id="add with a dash appends"),
    pytest.param([{"op": "add", "path": "/a/b/3", "value": 4}], {**_DOC, "a": {"b": [1, 2, 3, 4]}},
                 id="add at the length appends"),
    pytest.param([{"op": "add", "path": "/a/b/-1", "value": 4}], {**_DOC, "a": {"b": [1, 2, 3, 4]}},
                 id="add with a negative index counts from the end as json-patch v4 does"),
    pytest.param([{"op": "add", "path": "/d"}], {**_DOC, "d": None}, id="add without a value adds null"),
    pytest.param([{"op": "remove", "path": "/c"}], {k: v for k, v in _DOC.items() if k != "c"},
                 id="remove deletes a member"),
    pytest.param([{"op": "remove", "path": "/a/b/0"}], {**_DOC, "a": {"b": [2, 3]}},
                 id="remove deletes an array element"),
    pytest.param([{"op": "remove", "path": "/a/b/-1"}], {**_DOC, "a": {"b": [1, 2]}},
                 id="remove with a negative index counts from the end"),
    pytest.param([{"op": "replace", "path": "/c", "value": 7}], {**_DOC, "c": 7}, id="replace swaps a value"),
    pytest.param([{"op": "replace", "path": "/a/b/2", "value": 0}], {**_DOC, "a": {"b": [1, 2, 0]}},
                 id="replace swaps an array element"),
    pytest.param([{"op": "replace", "path": "/zz", "value": 1}], {**_DOC, "zz": 1},
                 id="replace of a missing member adds it as json-patch v4 does"),
    pytest.param([{"op": "replace", "path": "", "value": {"new": 1}}], {"new": 1},
                 id="replace at the root swaps the document"),
    pytest.param([{"op": "move", "from": "/c", "path": "/a/c"}],
                 {"a": {"b": [1, 2, 3], "c": "x"}, "n": None, "x/y": 1, "t~u": 2}, id="move relocates a value"),
    pytest.param([{"op": "move", "from": "/a/b/0", "path": "/a/b/-"}], {**_DOC, "a": {"b": [2, 3, 1]}},
                 id="move within an array"),
    pytest.param([{"op": "copy", "from": "/a", "path": "/z"}], {**_DOC, "z": {"b": [1, 2, 3]}},
                 id="copy duplicates a value"),
    pytest.param([{"op": "copy", "from": "/nope", "path": "/z"}], {**_DOC, "z": None},
                 id="copy from a missing member copies null as json-patch v4 does"),
    pytest.param([{"op": "test", "path": "/c", "value": "x"}], _DOC, id="a passing test changes nothing"),
    pytest.param([{"op": "test", "path": "/n", "value": None}], _DOC, id="test matches an explicit null"),
    pytest.param([{"op": "test", "path": "/nope", "value": None}], _DOC, id="test of null matches a missing member"),
    pytest.param([{"op": "test", "path": "/a", "value": {"b": [1, 2, 3]}}], _DOC, id="test compares structurally"),
    pytest.param([{"op": "replace", "path": "/x~1y", "value": 9}], {**_DOC, "x/y": 9},
                 id="tilde one in a pointer stands for a slash"),
    pytest.param([{"op": "replace", "path": "/t~0u", "value": 9}], {**_DOC, "t~u": 9},
                 id="tilde zero in a pointer stands for a tilde"),
    pytest.param([{"op": "add", "path": "/d", "value": 1}, {"op": "move", "from": "/d", "path": "/e"},
                  {"op": "test", "path": "/e", "value": 1}], {**_DOC, "e": 1}, id="operations apply in order"),
    pytest.param(None, _DOC, id="a null document is an empty patch"),
    pytest.param([], _DOC, id="an empty list changes nothing"),
])
def test_json_patch_applies_each_operation(ops: Any, expected: Any) -> None:
    assert json_patch(_DOC, ops) == expected


@pytest.mark.parametrize("ops, code, message", [
    pytest.param([{"op": "test", "path": "/c", "value": "y"}], 422, "testing value /c failed: test failed",
                 id="a failing test cannot apply"),
    pytest.param([{"op": "test", "path": "/a/b/0", "value": 1.0}], 422,
                 "testing value /a/b/0 failed: test failed", id="test tells an integer from a float"),
    pytest.param([{"op": "test", "path": "/c"}], 422, "testing value /c failed: test failed",
                 id="test without a value fails on a present member"),
    pytest.param([{"op": "add", "path": "/q/r", "value": 1}], 422,
                 'add operation does not apply: doc is missing path: "/q/r": missing value',
                 id="add under a missing parent cannot apply"),
    pytest.param([{"op": "add", "path": "", "value": 1}], 422,
                 'add operation does not apply: doc is missing path: "": missing value',
                 id="add at the root cannot apply in json-patch v4"),
    pytest.param([{"op": "add", "path": "/a/b/5", "value": 1}], 422,
                 "error in add for path: '/a/b/5': Unable to access invalid index: 5: invalid index referenced",
                 id="add past the end of an array cannot apply"),
    pytest.param([{"op": "add", "path": "/a/b/x", "value": 1}], 422,
                 "error in add for path: '/a/b/x': value was not a proper array index: 'x': "
                 'strconv.Atoi: parsing "x": invalid syntax', id="add with a non-numeric index cannot apply"),
    pytest.param([{"op": "remove", "path": "/zz"}], 422,
                 "error in remove for path: '/zz': Unable to remove nonexistent key: zz: missing value",
                 id="remove of a missing member cannot apply"),
    pytest.param([{"op": "remove", "path": "/a/b/3"}], 422,
                 "error in remove for path: '/a/b/3': Unable to access invalid index: 3: invalid index referenced",
                 id="remove past the end of an array cannot apply"),
    pytest.param([{"op": "replace", "path": "/a/b/7", "value": 1}], 422,
                 "replace operation does not apply: doc is missing key: /a/b/7: missing value",
                 id="replace of a missing array element cannot apply"),
    pytest.param([{"op": "replace", "path": "/q/r", "value": 1}], 422,
                 "replace operation does not apply: doc is missing path: /q/r: missing value",
                 id="replace under a missing parent cannot apply"),
    pytest.param([{"op": "move", "from": "/zz", "path": "/y"}], 422,
                 "error in move for path: 'zz': Unable to remove nonexistent key: zz: missing value",
                 id="move from a missing member cannot apply"),
    pytest.param([{"op": "move", "path": "/y"}], 422,
                 "move operation failed to decode from: operation, missing from field: missing value",
                 id="move without from cannot apply"),
    pytest.param([{"op": "copy", "from": "/a/b/9", "path": "/y"}], 422,
                 "error in copy for from: '/a/b/9': Unable to access invalid index: 9: invalid index referenced",
                 id="copy from past the end of an array cannot apply"),
    pytest.param([{"op": "remove"}], 422, "remove operation failed to decode path: missing value",
                 id="an operation without a path cannot apply"),
    pytest.param([{"op": "frobnicate", "path": "/c"}], 422, "Unexpected kind: frobnicate",
                 id="an unknown operation cannot apply"),
    pytest.param([{"path": "/c"}], 422, "Unexpected kind: unknown", id="an operation without op cannot apply"),
    pytest.param({"op": "add"}, 400, "error decoding patch: json: cannot unmarshal object into Go value of "
                                     "type []handlers.jsonPatchOp", id="a document that is not a list is malformed"),
    pytest.param([3], 400, "error decoding patch: json: cannot unmarshal number into Go value of type "
                           "handlers.jsonPatchOp", id="an operation that is not an object is malformed"),
    pytest.param([{"op": "add", "path": 5}], 400, "error decoding patch: json: cannot unmarshal number into "
                                                  "Go struct field jsonPatchOp.path of type string",
                 id="a path that is not a string is malformed"),
    pytest.param([{"op": "test", "path": "/c", "value": "x"}] * (MAX_JSON_PATCH_OPERATIONS + 1), 413,
                 f"The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, "
                 f"got {MAX_JSON_PATCH_OPERATIONS + 1}", id="too many operations are refused as too large"),
])
def test_json_patch_failures_carry_upstream_code_and_message(ops: Any, code: int, message: str) -> None:
    with pytest.raises(PatchError) as err:
        json_patch(_DOC, ops)
    assert (err.value.code, err.value.message) == (code, message)


def test_json_patch_failure_renders_as_the_generic_invalid_status() -> None:
    with pytest.raises(PatchError) as err:
        json_patch(_DOC, [{"op": "test", "path": "/c", "value": "y"}])
    status = err.value.status()
    assert status["code"] == 422 and status["reason"] == "Invalid"
    assert status["message"] == "the server rejected our request due to an error in our request"
    assert status["details"]["causes"] == [{"reason": "UnexpectedServerResponse",
                                            "message": "testing value /c failed: test failed"}]


def test_json_patch_copy_does_not_alias_the_source() -> None:
    out = json_patch({"a": {"b": 1}}, [{"op": "copy", "from": "/a", "path": "/c"},
                                       {"op": "replace", "path": "/c/b", "value": 2}])
    assert out == {"a": {"b": 1}, "c": {"b": 2}}


def test_json_patch_works_on_an_array_document() -> None:
    assert json_patch([1, 2], [{"op": "add", "path": "/0", "value": 0}]) == [0, 1, 2]


# ---------------------------------------------------------------- strategic merge patch


def _pod(**overrides: Any) -> dict:
    pod: dict = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web", "tier": "fe"},
                     "finalizers": ["a.example.com/x", "b.example.com/y"],
                     "ownerReferences": [{"uid": "u1", "kind": "ReplicaSet", "name": "rs1"}]},
        "spec": {
            "containers": [
                {"name": "app", "image": "app:1",
                 "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                 "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                {"name": "sidecar", "image": "side:1"},
            ],
            "tolerations": [{"key": "k1", "operator": "Exists"}, {"key": "k2", "operator": "Exists"}],
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
                {"type": "Ready", "status": "False"},
            ],
        },
    }
    pod.update(overrides)
    return pod


def _node() -> dict:
    return {
        "metadata": {"name": "n1"},
        "spec": {"podCIDRs": ["10.0.0.0/24"], "taints": [{"key": "a", "effect": "NoSchedule"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "status": "False"}],
                   "addresses": [{"type": "InternalIP", "address": "10.1.0.1"},
                                 {"type": "Hostname", "address": "n1"}],
                   "images": [{"names": ["a:1"]}, {"names": ["b:1"]}]},
    }


def _at(obj: Any, *path: Any) -> Any:
    for p in path:
        obj = obj[p]
    return obj


@pytest.mark.parametrize("patch, path, expected", [
    pytest.param({"status": {"conditions": [{"type": "PodScheduled", "status": "True", "reason": None}]}},
                 ("status", "conditions"),
                 [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}],
                 id="a pod condition is updated by type and the others are left alone"),
    pytest.param({"status": {"conditions": [{"type": "Initialized", "status": "True"}]}},
                 ("status", "conditions"),
                 [{"type": "Initialized", "status": "True"}, {"type": "PodScheduled", "status": "False",
                                                              "reason": "Unschedulable"},
                  {"type": "Ready", "status": "False"}],
                 id="a new pod condition goes ahead of the existing ones as upstream orders it"),
    pytest.param({"spec": {"containers": [{"name": "sidecar", "image": "side:2"}]}},
                 ("spec", "containers"),
                 [{"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                   "ports": [{"containerPort": 80, "protocol": "TCP"}]},
                  {"name": "sidecar", "image": "side:2"}],
                 id="a container is merged by name keeping its place and the other containers"),
    pytest.param({"spec": {"containers": [{"name": "app", "env": [{"name": "B", "value": "3"},
                                                                   {"name": "C", "value": "4"}]}]}},
                 ("spec", "containers", 0, "env"),
                 [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}],
                 id="container env merges by name"),
    pytest.param({"spec": {"containers": [{"name": "app", "ports": [{"containerPort": 80, "name": "http"}]}]}},
                 ("spec", "containers", 0, "ports"),
                 [{"containerPort": 80, "protocol": "TCP", "name": "http"}],
                 id="container ports merge by container port"),
    pytest.param({"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}},
                 ("spec", "containers"),
                 [{"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                   "ports": [{"containerPort": 80, "protocol": "TCP"}]}],
                 id="a patch delete directive removes a list element"),
    pytest.param({"spec": {"containers": [{"name": "only", "image": "o:1"}, {"$patch": "replace"}]}},
                 ("spec", "containers"), [{"name": "only", "image": "o:1"}],
                 id="a patch replace directive in a list replaces the whole list"),
    pytest.param({"metadata": {"finalizers": ["c.example.com/z", "a.example.com/x"]}},
                 ("metadata", "finalizers"), ["c.example.com/z", "a.example.com/x", "b.example.com/y"],
                 id="finalizers are a union without duplicates"),
    pytest.param({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.example.com/x"]}},
                 ("metadata", "finalizers"), ["b.example.com/y"],
                 id="delete from primitive list removes a finalizer"),
    pytest.param({"metadata": {"ownerReferences": [{"uid": "u1", "controller": True}]}},
                 ("metadata", "ownerReferences"), [{"uid": "u1", "kind": "ReplicaSet", "name": "rs1",
                                                    "controller": True}],
                 id="owner references merge by uid"),
    pytest.param({"metadata": {"labels": {"tier": None, "new": "x"}}},
                 ("metadata", "labels"), {"app": "web", "new": "x"}, id="null deletes a label and maps merge"),
    pytest.param({"metadata": {"labels": {"$patch": "replace", "only": "x"}}},
                 ("metadata", "labels"), {"only": "x"}, id="a patch replace directive replaces a map"),
    pytest.param({"metadata": {"labels": {"$patch": "delete"}}},
                 ("metadata", "labels"), {}, id="a patch delete directive empties a map"),
    pytest.param({"spec": {"tolerations": [{"key": "k3", "operator": "Exists"}]}},
                 ("spec", "tolerations"), [{"key": "k3", "operator": "Exists"}],
                 id="tolerations have no strategy and are replaced whole"),
    pytest.param({"spec": {"volumes": [{"name": "data", "$retainKeys": ["name", "hostPath"],
                                         "hostPath": {"path": "/d"}}]}},
                 ("spec", "volumes"), [{"name": "data", "hostPath": {"path": "/d"}}],
                 id="retain keys clears the fields a union member leaves behind"),
    pytest.param({"spec": {"schedulingGates": [{"name": "g1"}]}},
                 ("spec", "schedulingGates"), [{"name": "g1"}], id="a list missing from the object is taken whole"),
    pytest.param({"spec": {"nodeName": "n1"}, "status": {"phase": "Running"}},
                 ("spec", "nodeName"), "n1", id="scalars are set"),
])
def test_strategic_merge_patch_of_a_pod(patch: dict, path: tuple, expected: Any) -> None:
    assert _at(strategic_merge_patch(_pod(), patch, "Pod"), *path) == expected


def _containers(*names: str) -> dict:
    return {"spec": {"containers": [{"name": n, "image": f"{n}:1"} for n in names]}}


@pytest.mark.parametrize("live, patch, expected", [
    pytest.param(_containers("a", "b"), {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]},
                 ["b", "a"], id="set element order alone reorders the list"),
    pytest.param(_containers("a", "b", "c"),
                 {"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}],
                  "containers": [{"name": "a", "image": "a:2"}]},
                 ["b", "c", "a"], id="entries missing from the order keep their place ahead of later ones"),
    pytest.param(_containers("a"),
                 {"$setElementOrder/containers": [{"name": "a"}, {"name": "n"}],
                  "containers": [{"name": "n", "image": "n:1"}]},
                 ["a", "n"], id="a new entry lands where the order puts it"),
    # kubectl apply's shape: add c3, delete c1, order [c2, c3], with c4 added on the
    # server meanwhile. Upstream orders against the live list as mutated in place
    # by the delete, which is what puts c4 before c3 (upstream vector).
    pytest.param(_containers("c1", "c2", "c4"),
                 {"$setElementOrder/containers": [{"name": "c2"}, {"name": "c3"}],
                  "containers": [{"name": "c3", "image": "c3:1"}, {"name": "c1", "$patch": "delete"}]},
                 ["c2", "c4", "c3"], id="an apply-style add and delete orders like upstream"),
])
def test_set_element_order_orders_a_merged_list(live: dict, patch: dict, expected: list) -> None:
    result = strategic_merge_patch(live, {"spec": patch}, "Pod")
    assert [c["name"] for c in result["spec"]["containers"]] == expected


@pytest.mark.parametrize("patch, path, expected", [
    pytest.param({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}, ("status", "conditions"),
                 [{"type": "Ready", "status": "False"}, {"type": "MemoryPressure", "status": "False"}],
                 id="a node condition is updated by type"),
    pytest.param({"status": {"addresses": [{"type": "ExternalIP", "address": "1.2.3.4"}]}},
                 ("status", "addresses"),
                 [{"type": "ExternalIP", "address": "1.2.3.4"}, {"type": "InternalIP", "address": "10.1.0.1"},
                  {"type": "Hostname", "address": "n1"}], id="node addresses merge by type"),
    pytest.param({"spec": {"podCIDRs": ["10.0.1.0/24"]}}, ("spec", "podCIDRs"), ["10.0.1.0/24", "10.0.0.0/24"],
                 id="pod CIDRs merge as a primitive set"),
    pytest.param({"spec": {"taints": []}}, ("spec", "taints"), [], id="taints have no strategy and are replaced"),
    pytest.param({"status": {"images": [{"names": ["c:1"]}]}}, ("status", "images"), [{"names": ["c:1"]}],
                 id="node images have no strategy and are replaced"),
])
def test_strategic_merge_patch_of_a_node(patch: dict, path: tuple, expected: Any) -> None:
    assert _at(strategic_merge_patch(_node(), patch, "Node"), *path) == expected


def test_pod_disruption_budget_selector_is_replaced_not_merged() -> None:
    pdb = {"spec": {"selector": {"matchLabels": {"app": "a"}}, "minAvailable": 1}}
    out = strategic_merge_patch(pdb, {"spec": {"selector": {"matchLabels": {"app": "b", "x": "y"}}}},
                                "PodDisruptionBudget")
    assert out["spec"] == {"selector": {"matchLabels": {"app": "b", "x": "y"}}, "minAvailable": 1}
    out = strategic_merge_patch(pdb, {"spec": {"selector": {"matchExpressions": []}}}, "PodDisruptionBudget")
    assert out["spec"]["selector"] == {"matchExpressions": []}


@pytest.mark.parametrize("kind, obj, patch, path, expected", [
    pytest.param("PersistentVolumeClaim", {"status": {"conditions": [{"type": "Resizing", "status": "True"},
                                                                       {"type": "X", "status": "True"}]}},
                 {"status": {"conditions": [{"type": "Resizing", "status": "False"}]}}, ("status", "conditions"),
                 [{"type": "Resizing", "status": "False"}, {"type": "X", "status": "True"}],
                 id="claim conditions merge by type"),
    pytest.param("Namespace", {"spec": {"finalizers": ["kubernetes"]}}, {"spec": {"finalizers": ["other"]}},
                 ("spec", "finalizers"), ["other"], id="namespace spec finalizers are replaced"),
    pytest.param("Lease", {"spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}},
                 {"spec": {"holderIdentity": "b"}}, ("spec",), {"holderIdentity": "b", "leaseDurationSeconds": 15},
                 id="a lease spec merges as a map"),
])
def test_strategic_merge_patch_of_other_kinds(kind: str, obj: dict, patch: dict, path: tuple,
                                              expected: Any) -> None:
    assert _at(strategic_merge_patch(obj, patch, kind), *path) == expected


def test_strategic_merge_patch_drops_directives_from_values_taken_whole() -> None:
    pod = _pod()
    del pod["spec"]["volumes"]
    out = strategic_merge_patch(pod, {"spec": {"volumes": [{"name": "v1"}, {"name": "gone", "$patch": "delete"}],
                                               "$bogus": 1}}, "Pod")
    assert out["spec"]["volumes"] == [{"name": "v1"}]
    assert "$bogus" not in out["spec"]


@pytest.mark.parametrize("patch, code, message", [
    pytest.param({"metadata": {"labels": {"$patch": "bogus"}}}, 500,
                 "unknown patch type: bogus in map: map[$patch:bogus]",
                 id="an unknown map directive is an unclassified server error as upstream"),
    pytest.param({"spec": {"containers": [{"name": "app", "$patch": "bogus"}]}}, 500,
                 "unknown patch type: bogus in map: map[$patch:bogus name:app]",
                 id="an unknown list element directive is an unclassified server error"),
    pytest.param({"spec": {"containers": [{"name": "app", "$patch": "merge"}]}}, 500,
                 "merging lists cannot yet be specified in the patch", id="a merge directive in a list is refused"),
    pytest.param({"spec": {"containers": [{"image": "x"}]}}, 500,
                 "map: map[image:x] does not contain declared merge key: name",
                 id="a list element without its merge key is refused"),
    pytest.param({"metadata": {"$deleteFromPrimitiveListX/finalizers": ["a"]}}, 400,
                 "invalid patch format of primitive list", id="a malformed delete list key is a bad request"),
    pytest.param({"spec": {"$setElementOrder": []}}, 400, "invalid patch format of setElementOrder list",
                 id="a set element order key without a field is a bad request"),
    pytest.param({"metadata": {"$retainKeys": "name"}}, 400, "invalid patch format of retainKeys",
                 id="retain keys that are not a list are a bad request"),
    pytest.param({"metadata": {"$retainKeys": ["name"], "labels": {"a": "b"}}}, 400,
                 "invalid patch format of retainKeys", id="a patched field missing from retain keys is a bad request"),
    pytest.param({"metadata": {"finalizers": [1]}}, 500,
                 "list element types are not identical: [[a.example.com/x b.example.com/y] [1]]",
                 id="a merged list of mixed element types is refused"),
    pytest.param({"spec": {"$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
                           "containers": [{"name": "sidecar", "image": "s"}, {"name": "app", "image": "a"}]}}, 500,
                 None, id="a patch list out of step with set element order is refused"),
    pytest.param([1], 400, "json: cannot unmarshal array into Go value of type map[string]interface {}",
                 id="a document that is not an object is a bad request"),
])
def test_strategic_merge_patch_failures_carry_upstream_code_and_message(patch: Any, code: int,
                                                                        message: str | None) -> None:
    with pytest.raises(PatchError) as err:
        strategic_merge_patch(_pod(), patch, "Pod")
    assert err.value.code == code
    if message is not None:
        assert err.value.message == message


def test_strategic_merge_patch_of_a_list_of_lists_cannot_apply() -> None:
    with pytest.raises(PatchError) as err:
        strategic_merge_patch({"metadata": {"finalizers": []}}, {"metadata": {"finalizers": [["x"]]}}, "Pod")
    assert (err.value.code, err.value.message) == (422, "lists of lists are not supported")


def test_strategic_merge_patch_on_a_custom_resource_is_unsupported_media_type() -> None:
    with pytest.raises(PatchError) as err:
        strategic_merge_patch({"spec": {}}, {"spec": {"x": 1}}, "PodGroup")
    assert err.value.code == 415
    assert err.value.status()["reason"] == "UnsupportedMediaType"


def test_strategic_merge_patch_with_a_null_document_changes_nothing() -> None:
    assert strategic_merge_patch(_pod(), None, "Pod") == _pod()  # type: ignore[arg-type]


# ---------------------------------------------------------------- inputs are never mutated

_MUTATION_CASES: list = [
    pytest.param(merge_patch, {"a": {"b": 1, "c": [1]}}, {"a": {"b": None, "c": [2], "d": {"e": None}}},
                 id="merge patch"),
    pytest.param(json_patch, {"a": {"b": [1, 2]}, "c": 1},
                 [{"op": "add", "path": "/a/b/-", "value": {"x": 1}}, {"op": "remove", "path": "/c"},
                  {"op": "move", "from": "/a/b/0", "path": "/m"}, {"op": "copy", "from": "/a", "path": "/k"}],
                 id="json patch"),
    pytest.param(json_patch, {"a": 1}, [{"op": "remove", "path": "/a"}, {"op": "test", "path": "/a", "value": 1}],
                 id="json patch that fails halfway"),
    pytest.param(lambda t, p: strategic_merge_patch(t, p, "Pod"), _pod(),
                 {"metadata": {"labels": {"app": None}, "$deleteFromPrimitiveList/finalizers": ["a.example.com/x"],
                               "$retainKeys": ["labels", "finalizers", "name", "namespace", "ownerReferences"]},
                  "spec": {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}, {"name": "new"}],
                           "containers": [{"name": "app", "env": [{"name": "A", "$patch": "delete"}]},
                                          {"name": "new", "image": "n"}]},
                  "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
                 id="strategic merge patch"),
    pytest.param(lambda t, p: strategic_merge_patch(t, p, "Pod"), _pod(),
                 {"spec": {"containers": [{"name": "app", "image": "x"}, {"$patch": "bogus", "name": "q"}]}},
                 id="strategic merge patch that fails"),
]


@pytest.mark.parametrize("apply, target, patch", _MUTATION_CASES)
def test_patching_never_mutates_its_inputs(apply: Callable[[Any, Any], Any], target: Any, patch: Any) -> None:
    target_before, patch_before = copy.deepcopy(target), copy.deepcopy(patch)
    try:
        result = apply(target, patch)
    except PatchError:
        result = None
    assert target == target_before
    assert patch == patch_before
    if result is not None:
        # Nor does the result share containers with either input.
        result_ids = _container_ids(result)
        assert not result_ids & (_container_ids(target) | _container_ids(patch))


def _container_ids(value: Any) -> set[int]:
    if isinstance(value, dict):
        return {id(value)}.union(*(_container_ids(v) for v in value.values()))
    if isinstance(value, list):
        return {id(value)}.union(*(_container_ids(v) for v in value))
    return set()


# ---------------------------------------------------------------- properties

_json_scalars = st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=5)
_json = st.recursive(_json_scalars, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=12)
_objects = st.dictionaries(st.text(max_size=4), _json, max_size=4)


def _pointer(key: str) -> str:
    return "/" + key.replace("~", "~0").replace("/", "~1")


@given(doc=_objects, key=st.text(max_size=6), value=_json)
def test_json_patch_add_then_remove_is_identity(doc: dict, key: str, value: Any) -> None:
    doc.pop(key, None)
    ops = [{"op": "add", "path": _pointer(key), "value": value}, {"op": "remove", "path": _pointer(key)}]
    assert json_patch(doc, ops) == doc


@given(doc=_objects, key=st.text(max_size=6), value=_json)
def test_json_patch_add_then_test_passes(doc: dict, key: str, value: Any) -> None:
    ops = [{"op": "add", "path": _pointer(key), "value": value},
           {"op": "test", "path": _pointer(key), "value": value}]
    assert json_patch(doc, ops)[key] == value


@given(doc=_objects)
def test_empty_merge_patch_is_identity(doc: dict) -> None:
    assert merge_patch(doc, {}) == doc


@given(doc=_objects)
def test_empty_strategic_merge_patch_is_identity(doc: dict) -> None:
    assert strategic_merge_patch(doc, {}, "Pod") == doc


# keys starting with "$" are strategic-merge directives: only plain keys must agree
_PLAIN_KEYS = st.text(min_size=1, max_size=4).filter(lambda k: not k.startswith("$"))


@given(labels=st.dictionaries(_PLAIN_KEYS, st.text(max_size=4), max_size=4),
       change=st.dictionaries(_PLAIN_KEYS, st.none() | st.text(max_size=4), max_size=4))
def test_merge_and_strategic_patch_agree_on_plain_maps(labels: dict, change: dict) -> None:
    target = {"metadata": {"labels": labels}}
    patch = {"metadata": {"labels": change}}
    assert merge_patch(target, patch) == strategic_merge_patch(target, patch, "Pod")
