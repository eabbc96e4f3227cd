"""Dynamic Resource Allocation (resource.k8s.io/v1) on both servers: the API, and the resourceclaim controller.

The stand-in serves resource.k8s.io/v1 as kube-apiserver 1.36 does
(bench/simcluster/dra.py and its draclaims, dradevices, drafields) and plays
kube-controller-manager's resourceclaim controller
(bench/simcluster/resourceclaims.py). Every test runs on both servers with
the same assertions; the messages are the real server's words. On the real
one kube-controller-manager runs its resourceclaim-controller for the
session (``NATIVE_CONTROLLERS`` in conftest.py), without the garbage
collector. Neither server runs a scheduler or kubelets, so the tests write
what a scheduler would (an allocation, reservations, the delete-protection
finalizer) and what a kubelet would (a pod's phase). Cluster-scoped objects
carry the test's namespace in their names. Every wait is for a condition,
with a bound.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.simcluster.names import DNS1123_LABEL_ERROR, DNS1123_SUBDOMAIN_ERROR
from tests.simcluster.conftest import Target, pod_body
from tests.simcluster.test_volumes import until
from tests.simcluster.test_writes import MERGE, STRATEGIC, assert_status, create, get, pods

pytestmark = pytest.mark.asyncio(loop_scope="session")

API = "/apis/resource.k8s.io/v1"
SLICES = f"{API}/resourceslices"
CLASSES = f"{API}/deviceclasses"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
PROTECTION = "resource.kubernetes.io/delete-protection"
WAIT = 15.0  # seconds; the real controller acts within milliseconds


def claims(t: Target) -> str:
    return f"{API}/namespaces/{t.ns}/resourceclaims"


def templates(t: Target) -> str:
    return f"{API}/namespaces/{t.ns}/resourceclaimtemplates"


def request(name: str, device_class: str = "gpu.example.com", **exactly: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": device_class, **exactly}}


def claim_body(name: str, *requests: dict[str, Any], **devices: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": list(requests), **devices}}}


def template_body(name: str, *requests: dict[str, Any], metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"metadata": metadata or {}, "spec": {"devices": {"requests": list(requests)}}}}


def slice_body(name: str, driver: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"driver": driver, "pool": {"name": "pool-a", "resourceSliceCount": 1}, **spec}}


def allocation(*devices: str) -> dict[str, Any]:
    return {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "node-a", "device": d}
                                    for d in devices]}}


def consumer(pod: dict[str, Any]) -> dict[str, Any]:
    return {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}


def invalid(kind: str, name: str, *causes: str) -> str:
    joined = causes[0] if len(causes) == 1 else "[" + ", ".join(causes) + "]"
    return f'{kind}.resource.k8s.io "{name}" is invalid: {joined}'


def driver_of(t: Target) -> str:
    """A driver name of the test's own: slices of other tests share the real server."""
    return f"{t.ns}.example.com"


async def put_status(t: Target, claim: dict[str, Any], status: dict[str, Any]) -> Any:
    body = {**claim, "status": status}
    return await t.req("PUT", f"{claims(t)}/{claim['metadata']['name']}/status", body)


async def claim_with(t: Target, name: str, status: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    """A claim with one request "gpu", then this status written through the status subresource."""
    body = claim_body(name, request("gpu"))
    body["metadata"].update(metadata)
    claim = await create(t, claims(t), body)
    r = await put_status(t, claim, status)
    assert r.status == 200, r.body
    return r.body


# ---------------------------------------------------------------------------- serving

RESOURCE_LIST = [
    ("deviceclasses", "deviceclass", False, "DeviceClass"),
    ("resourceclaims", "resourceclaim", True, "ResourceClaim"),
    ("resourceclaims/status", "", True, "ResourceClaim"),
    ("resourceclaimtemplates", "resourceclaimtemplate", True, "ResourceClaimTemplate"),
    ("resourceslices", "resourceslice", False, "ResourceSlice"),
]
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


async def test_discovery_lists_resource_k8s_io_v1_and_its_four_kinds(target):
    r = await target.req("GET", "/apis")
    group = next(g for g in r.body["groups"] if g["name"] == "resource.k8s.io")
    v1 = {"groupVersion": "resource.k8s.io/v1", "version": "v1"}
    assert group == {"name": "resource.k8s.io", "versions": [v1], "preferredVersion": v1}
    r = await target.req("GET", "/apis/resource.k8s.io")
    assert (r.status, r.body["versions"], r.body["preferredVersion"]) == (200, [v1], v1)
    r = await target.req("GET", API)
    assert r.status == 200, r.body
    got = [{k: v for k, v in res.items() if k != "storageVersionHash"} for res in r.body["resources"]]
    assert got == [{"name": name, "singularName": singular, "namespaced": namespaced, "kind": kind,
                    "verbs": ["get", "patch", "update"] if "/" in name else VERBS}
                   for name, singular, namespaced, kind in RESOURCE_LIST]


@pytest.mark.parametrize("kind", ["claim", "template", "slice", "class"])
async def test_each_kind_is_created_read_listed_watched_and_deleted(target, kind):
    name = f"{target.ns}-x" if kind in ("slice", "class") else "x"
    collection, body = {
        "claim": (claims(target), claim_body(name, request("gpu"))),
        "template": (templates(target), template_body(name, request("gpu"))),
        "slice": (SLICES, slice_body(name, driver_of(target), allNodes=True)),
        "class": (CLASSES, {"metadata": {"name": name}, "spec": {}}),
    }[kind]
    listed = await target.req("GET", collection)
    made = await create(target, collection, body)
    assert await get(target, f"{collection}/{name}") == made
    r = await target.req("GET", collection)
    assert name in [i["metadata"]["name"] for i in r.body["items"]]
    events = await target.watch(collection, {"resourceVersion": listed.body["metadata"]["resourceVersion"]},
                                stop=lambda ev: ev["object"]["metadata"]["name"] == name)
    assert (events[-1]["type"], events[-1]["object"]) == ("ADDED", made)
    r = await target.req("DELETE", f"{collection}/{name}")
    assert r.status == 200, r.body
    assert (await target.req("GET", f"{collection}/{name}")).status == 404


async def test_resource_slices_are_selected_by_node_name_and_driver(target):
    driver, other = driver_of(target), f"other.{driver_of(target)}"
    for name, drv, where in (("a", driver, {"nodeName": "node-a"}), ("b", driver, {"nodeName": "node-b"}),
                             ("c", other, {"nodeName": "node-a"}), ("d", driver, {"allNodes": True})):
        await create(target, SLICES, slice_body(f"{target.ns}-{name}", drv, **where))

    async def selected(selector: str) -> list[str]:
        r = await target.req("GET", SLICES, params={"fieldSelector": selector})
        assert r.status == 200, r.body
        return sorted(i["metadata"]["name"][len(target.ns) + 1:] for i in r.body["items"]
                      if i["spec"]["driver"] in (driver, other))

    assert await selected("spec.nodeName=node-a") == ["a", "c"]
    assert await selected(f"spec.driver={driver}") == ["a", "b", "d"]
    assert await selected(f"spec.driver={driver},spec.nodeName!=node-a") == ["b", "d"]
    assert await selected("spec.nodeName=") == ["d"]
    r = await target.req("GET", claims(target), params={"fieldSelector": "spec.nodeName=node-a"})
    assert_status(r, 400, "BadRequest")   # claims select on their metadata only


async def test_tables_show_upstreams_columns(target):
    await create(target, CLASSES, {"metadata": {"name": f"{target.ns}.example.com"}})
    await create(target, SLICES, slice_body(f"{target.ns}-s", driver_of(target), nodeName="node-a"))
    await create(target, templates(target), template_body("t", request("gpu")))
    await claim_with(target, "allocated", {"allocation": allocation("gpu-0")})
    await create(target, claims(target), claim_body("pending", request("gpu")))
    tables = {}
    for kind, path in (("class", CLASSES), ("slice", SLICES), ("template", templates(target)),
                       ("claim", claims(target))):
        async with target.session.get(target.url + path, headers={"Accept": TABLE}) as r:
            table = await r.json()
        rows = {row["cells"][0]: row["cells"][1:-1] for row in table["rows"]}
        tables[kind] = ([c["name"] for c in table["columnDefinitions"]], rows)
    assert tables["class"][0] == tables["template"][0] == ["Name", "Age"]
    assert tables["slice"][0] == ["Name", "Node", "Driver", "Pool", "Age"]
    assert tables["slice"][1][f"{target.ns}-s"] == ["node-a", driver_of(target), "pool-a"]
    assert tables["claim"] == (["Name", "State", "Age"], {"allocated": ["allocated"], "pending": ["pending"]})


# ---------------------------------------------------------------------------- defaults

async def test_a_claim_is_stored_with_its_requests_defaulted_and_no_status(target):
    body = claim_body("c", request("gpu", tolerations=[{"key": "a", "value": "b"}],
                                   capacity={"requests": {"memory": "1.5Gi"}}),
                      {"name": "fa", "firstAvailable": [{"name": "one", "deviceClassName": "gpu.example.com"},
                                                        {"name": "all", "deviceClassName": "gpu.example.com",
                                                         "allocationMode": "All", "capacity": {"requests": {}}}]})
    body["status"] = {"reservedFor": [{"resource": "pods", "name": "x", "uid": "1"}]}
    made = await create(target, claims(target), body)
    assert made["spec"] == {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1,
                                    "tolerations": [{"key": "a", "operator": "Equal", "value": "b"}],
                                    "capacity": {"requests": {"memory": "1536Mi"}}}},
        {"name": "fa", "firstAvailable": [
            {"name": "one", "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1},
            {"name": "all", "deviceClassName": "gpu.example.com", "allocationMode": "All", "capacity": {}}]}]}}
    assert made["status"] == {}
    assert "generation" not in made["metadata"]


async def test_empty_specs_are_written_out_as_their_go_types_encode_them(target):
    claim = await create(target, claims(target), {"metadata": {"name": "empty"}})
    assert claim["spec"] == {"devices": {"requests": None}}
    claim = await create(target, claims(target), claim_body("lists", constraints=[], config=[]))
    assert claim["spec"] == {"devices": {"requests": None}}
    template = await create(target, templates(target), {"metadata": {"name": "empty"}})
    assert template["spec"] == {"metadata": {}, "spec": {"devices": {"requests": None}}}
    device_class = await create(target, CLASSES, {"metadata": {"name": f"{target.ns}.example.com"}})
    assert (device_class["spec"], device_class["metadata"]["generation"]) == ({}, 1)


async def test_a_slice_is_stored_with_its_pool_generation_canonical_quantities_and_taint_times(target):
    # and without list-typed attribute values: 1.36 drops them (DRAListTypeAttributes is off)
    body = slice_body(f"{target.ns}-s", driver_of(target), nodeName="node-a", devices=[
        {"name": "gpu-0", "attributes": {"model": {"string": "a100"}, "index": {"int": 0, "ints": [0, 1]}},
         "capacity": {"memory": {"value": "2048Mi"}, "cores": {"value": "1000m"}},
         "taints": [{"key": "k", "effect": "NoSchedule"}]},
        {"name": "gpu-1", "attributes": {}, "taints": [{"key": "k", "effect": "NoSchedule",
                                                         "timeAdded": "2020-01-01T00:00:00Z"}]}])
    made = await create(target, SLICES, body)
    assert made["metadata"]["generation"] == 1
    assert made["spec"]["pool"] == {"name": "pool-a", "generation": 0, "resourceSliceCount": 1}
    first, second = made["spec"]["devices"]
    assert first["capacity"] == {"memory": {"value": "2Gi"}, "cores": {"value": "1"}}
    assert first["attributes"] == {"model": {"string": "a100"}, "index": {"int": 0}}   # list values: gate off
    assert first["taints"][0]["timeAdded"] == made["metadata"]["creationTimestamp"]
    assert second == {"name": "gpu-1", "taints": [{"key": "k", "effect": "NoSchedule",
                                                   "timeAdded": "2020-01-01T00:00:00Z"}]}
    made["spec"]["pool"]["generation"] = 1
    r = await target.req("PUT", f"{SLICES}/{target.ns}-s", made)
    assert (r.status, r.body["metadata"]["generation"]) == (200, 2), r.body


# ---------------------------------------------------------------------------- validation

LABEL_ERROR = f"Invalid value: {{}}: {DNS1123_LABEL_ERROR}"
SUBDOMAIN_ERROR = f"Invalid value: {{}}: {DNS1123_SUBDOMAIN_ERROR}"
C_IDENTIFIER_ERROR = ("a valid C identifier must start with alphabetic character or '_', followed by a string of "
                      "alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used "
                      "for validation is '[A-Za-z_][A-Za-z0-9_]*')")
NAME_PART_ERROR = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                   "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                   "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
LABEL_VALUE_ERROR = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
                     "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  "
                     "or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
REF_ERROR = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
R = "spec.devices.requests"
C = "spec.devices.constraints"

CLAIM_CASES = [
    pytest.param([{"name": "Gpu"}], {}, [
        f'{R}[0].name: {LABEL_ERROR.format(chr(34) + "Gpu" + chr(34))}',
        f"{R}[0]: Required value: exactly one of `exactly` or `firstAvailable` is required"],
        id="a request needs a DNS-label name and exactly or firstAvailable"),
    pytest.param([{**request("a"), "firstAvailable": [{"name": "s", "deviceClassName": "x"}]}, request("a")], {}, [
        f"{R}[0]: Invalid value: null: exactly one of `exactly` or `firstAvailable` is required, but multiple "
        "fields are set", f'{R}[1]: Duplicate value: "a"'],
        id="a request with both, and a request name used twice"),
    pytest.param([{"name": "b", "exactly": {}}, request("c", allocationMode="All", count=2),
                  request("d", count=0), request("e", allocationMode="Foo"), request("f", count=-1)], {}, [
        f"{R}[0].exactly.deviceClassName: Required value",
        f"{R}[1].exactly.count: Invalid value: 2: must not be specified when allocationMode is 'All'",
        f'{R}[3].exactly.allocationMode: Unsupported value: "Foo": supported values: "All", "ExactCount"',
        f"{R}[4].exactly.count: Invalid value: -1: must be greater than zero"],
        id="exactly needs a class, a known mode and a count that fits it (0 is the default 1)"),
    pytest.param([{"name": "f", "firstAvailable": [{"name": "s"}, {"name": "s", "deviceClassName": "x"}]},
                  {"name": "g", "firstAvailable": [{"name": f"s{i}", "deviceClassName": "x"} for i in range(9)]}], {},
                 [f"{R}[0].firstAvailable[0].deviceClassName: Required value",
                  f'{R}[0].firstAvailable[1]: Duplicate value: "s"',
                  f"{R}[1].firstAvailable: Too many: 9: must have at most 8 items"],
                 id="subrequests need a class and unique names, at most 8"),
    pytest.param([request("a", deviceClassName="X_y", selectors=[{}], tolerations=[
        {"operator": "Exists", "value": "v"}, {"key": "bad key!", "operator": "Foo", "effect": "Bad"},
        {"value": "@@"}])], {}, [
        f'{R}[0].exactly.deviceClassName: {SUBDOMAIN_ERROR.format(chr(34) + "X_y" + chr(34))}',
        f"{R}[0].exactly.selectors[0].cel: Required value",
        f'{R}[0].exactly.tolerations[0].value: Invalid value: "v": must be empty for operator `Exists`',
        f'{R}[0].exactly.tolerations[1].key: Invalid value: "bad key!": {NAME_PART_ERROR}',
        f'{R}[0].exactly.tolerations[1].operator: Unsupported value: "Foo": supported values: "Equal", "Exists"',
        f'{R}[0].exactly.tolerations[1].effect: Unsupported value: "Bad": supported values: "NoExecute", '
        '"NoSchedule", "None"',
        f'{R}[0].exactly.tolerations[2].value: Invalid value: "@@": {LABEL_VALUE_ERROR}'],
        id="a class name is a DNS subdomain, a selector has cel, tolerations are checked"),
    pytest.param([request("a")], {"constraints": [
        {"requests": ["zz", "a/b", "a", "a"], "matchAttribute": "model"}, {"requests": ["a"]},
        {"matchAttribute": "example.com/"}, {"matchAttribute": "Bad_domain/x"}, {"matchAttribute": "example.com/1x"},
        {"matchAttribute": "example.com/x", "distinctAttribute": "example.com/y"},
        {"matchAttribute": "a.example.com/b/c"}]}, [
        f'{C}[0].requests[0]: Invalid value: "zz": {REF_ERROR}',
        f'{C}[0].requests[1]: Invalid value: "a/b": {REF_ERROR}',
        f'{C}[0].requests[3]: Duplicate value: "a"',
        f'{C}[0].matchAttribute: Invalid value: "model": a fully qualified name must be a domain and a name '
        "separated by a slash",
        f'{C}[1]: Required value: exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple '
        "fields are set",
        f'{C}[2].matchAttribute: Invalid value: "": the name must not be empty',
        f'{C}[3].matchAttribute: {SUBDOMAIN_ERROR.format(chr(34) + "Bad_domain" + chr(34))}',
        f'{C}[4].matchAttribute: Invalid value: "1x": {C_IDENTIFIER_ERROR}'],
        id="constraints name requests once and match a fully qualified attribute"),
    pytest.param([request("a")], {"config": [
        {}, {"requests": ["zz"], "opaque": {"driver": "", "parameters": {}}},
        {"opaque": {"driver": "d.example.com", "parameters": [1]}}, {"opaque": {"driver": "d.example.com"}}]}, [
        "spec.devices.config[0].opaque: Required value",
        f'spec.devices.config[1].requests[0]: Invalid value: "zz": {REF_ERROR}',
        "spec.devices.config[1].opaque.driver: Required value",
        'spec.devices.config[2].opaque.parameters: Invalid value: "<value omitted>": must be a valid JSON object',
        "spec.devices.config[3].opaque.parameters: Required value"],
        id="configs are opaque, with a driver and a JSON object"),
    pytest.param([request(f"r{i}") for i in range(33)], {}, [f"{R}: Too many: 33: must have at most 32 items"],
                 id="at most 32 requests"),
    pytest.param([request("gpu", adminAccess=True)], {}, [
        f"{R}[0].adminAccess: Forbidden: admin access to devices requires the "
        "`resource.kubernetes.io/admin-access: true` label on the containing namespace"],
        id="admin access needs the namespace's label"),
]


@pytest.mark.parametrize("requests,devices,causes", CLAIM_CASES)
async def test_claim_validation(target, requests, devices, causes):
    r = await target.req("POST", claims(target), claim_body("bad", *requests, **devices))
    body = assert_status(r, 422, "Invalid")
    assert body["message"] == invalid("ResourceClaim", "bad", *causes)
    assert [c["field"] for c in body["details"]["causes"]] == [c.split(":")[0] for c in causes]


async def test_a_mistyped_count_is_a_decoding_error(target):
    r = await target.req("POST", claims(target), claim_body("bad", request("gpu", count="2")))
    body = assert_status(r, 400, "BadRequest")
    assert body["message"] == ('ResourceClaim in version "v1" cannot be handled as a ResourceClaim: json: cannot '
                               "unmarshal string into Go struct field ExactDeviceRequest.spec.devices.requests."
                               "exactly.count of type int64")


async def test_a_cel_expression_that_does_not_compile_is_refused(target):
    if target.sim is not None:
        pytest.skip("the stand-in does not compile CEL (it may not import tandem's CEL): any expression passes")
    r = await target.req("POST", CLASSES, {"metadata": {"name": f"{target.ns}.example.com"},
                                           "spec": {"selectors": [{"cel": {"expression": "device.driver == 1"}}]}})
    body = assert_status(r, 422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "spec.selectors[0].cel.expression"
    assert "found no matching overload for '_==_' applied to '(string, int)'" in body["message"]


async def test_template_validation(target):
    body = template_body("bad", {"name": "r"}, metadata={"name": "x", "labels": {"bad key": "v"}})
    body["spec"]["spec"]["devices"]["requests"].append(request("g2", deviceClassName="Bad_"))
    r = await target.req("POST", templates(target), body)
    body = assert_status(r, 422, "Invalid")
    assert body["message"] == invalid(
        "ResourceClaimTemplate", "bad", f'spec.metadata.labels: Invalid value: "bad key": {NAME_PART_ERROR}',
        "spec.metadata.name: Forbidden: cannot be set",
        "spec.spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required",
        f'spec.spec.devices.requests[1].exactly.deviceClassName: {SUBDOMAIN_ERROR.format(chr(34) + "Bad_" + chr(34))}')


SLICE_CASES = [
    pytest.param({}, ["spec.driver: Required value", "spec.pool.name: Required value",
                      "spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero",
                      "spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                      "`perDeviceNodeSelection` is required"],
                 id="a slice needs a driver, a pool and where its devices are"),
    pytest.param({"driver": "Bad_Driver", "pool": {"name": "a//b", "generation": -1, "resourceSliceCount": 1},
                  "nodeName": "", "allNodes": False, "nodeSelector": {"nodeSelectorTerms": []}}, [
        f'spec.driver: {SUBDOMAIN_ERROR.format(chr(34) + "Bad_Driver" + chr(34))}',
        f'spec.pool.name: {SUBDOMAIN_ERROR.format(chr(34) * 2)}',
        "spec.pool.generation: Invalid value: -1: must be greater than or equal to zero",
        'spec.nodeName: Invalid value: "": must be either unset or set to a non-empty string',
        "spec.nodeSelector.nodeSelectorTerms: Required value: must have at least one node selector term",
        "spec.nodeSelector.nodeSelectorTerms: Invalid value: []: must have exactly one node selector term",
        "spec.allNodes: Invalid value: false: must be either unset or set to true"],
        id="names, pool counts and node selection are checked"),
    pytest.param({"driver": "d.example.com", "pool": {"name": "p", "resourceSliceCount": 1}, "allNodes": True,
                  "nodeName": "n", "nodeSelector": {"nodeSelectorTerms": [
                      {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}, {}]},
                  "devices": [{"name": "a"}], "sharedCounters": [{"name": "c", "counters": {"x": {"value": "1"}}}]}, [
        'spec.nodeSelector.nodeSelectorTerms: Invalid value: [{"MatchExpressions":null,"MatchFields":[{"Key":'
        '"metadata.name","Operator":"In","Values":["n"]}]},{"MatchExpressions":null,"MatchFields":null}]: must '
        "have exactly one node selector term",
        'spec: Invalid value: "{`nodeName`, `nodeSelector`, `allNodes`}": exactly one of `nodeName`, '
        "`nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set",
        'spec: Invalid value: "": only one of `sharedCounters` or `devices` is allowed'],
        id="one way of selecting nodes, one term, and devices or counters"),
    pytest.param({"driver": "d.example.com", "pool": {"name": "p", "resourceSliceCount": 1}, "allNodes": True,
                  "devices": [{"name": "d"}, {"name": "d", "attributes": {"y": {"int": 1, "bool": True}}},
                              {"name": "Bad", "taints": [{"key": "k", "value": "Bad value", "effect": "Bad"}]}]}, [
        'spec.devices[1].attributes[y]: Invalid value: {"IntValue":1,"BoolValue":true,"StringValue":null,'
        '"VersionValue":null,"IntValues":null,"BoolValues":null,"StringValues":null,"VersionValues":null}: '
        "exactly one value must be specified",
        f'spec.devices[2].name: {LABEL_ERROR.format(chr(34) + "Bad" + chr(34))}',
        f'spec.devices[2].taints[0].value: Invalid value: "Bad value": {LABEL_VALUE_ERROR}',
        'spec.devices[2].taints[0].effect: Unsupported value: "Bad": supported values: "NoExecute", "NoSchedule", '
        '"None"',
        'spec.devices[1]: Duplicate value: "d"'],
        id="devices have unique DNS-label names, one-typed attributes and valid taints"),
]
ATTRIBUTE_CASES = [
    pytest.param({"x": {}}, 'spec.devices[0].attributes[x]: Invalid value: "": exactly one value must be specified',
                 id="an attribute without a value"),
    pytest.param({"z": {"version": "1.0"}}, 'spec.devices[0].attributes[z].version: Invalid value: "1.0": must '
                 "be a string compatible with semver.org spec 2.0.0", id="a version that is no semver"),
    pytest.param({"bad-name": {"bool": True}}, f'spec.devices[0].attributes: Invalid value: "bad-name": '
                 f"{C_IDENTIFIER_ERROR}", id="a name that is no C identifier"),
    pytest.param({"x" * 33: {"string": "v" * 65}}, "[spec.devices[0].attributes: Too long: may not be more than "
                 f"32 bytes, spec.devices[0].attributes[{'x' * 33}].string: Too long: may not be more than 64 bytes]",
                 id="a name over 32 bytes and a string over 64"),
    pytest.param({"x" * 64 + ".com/y": {"bool": True}}, "spec.devices[0].attributes: Too long: may not be more "
                 "than 63 bytes", id="a domain over 63 bytes"),
    pytest.param({f"a{i}": {"int": i} for i in range(33)}, "spec.devices[0]: Invalid value: 33: the total number "
                 "of attributes and capacities must not exceed 32", id="more than 32 attributes"),
]


@pytest.mark.parametrize("spec,causes", SLICE_CASES)
async def test_slice_validation(target, spec, causes):
    r = await target.req("POST", SLICES, {"metadata": {"name": f"{target.ns}-bad"}, "spec": spec})
    body = assert_status(r, 422, "Invalid")
    assert body["message"] == invalid("ResourceSlice", f"{target.ns}-bad", *causes)


@pytest.mark.parametrize("attributes,message", ATTRIBUTE_CASES)
async def test_device_attribute_validation(target, attributes, message):
    # one bad attribute per case: the real server reports a map's entries in Go's random order
    r = await target.req("POST", SLICES, {"metadata": {"name": f"{target.ns}-bad"}, "spec": {
        "driver": "d.example.com", "pool": {"name": "p", "resourceSliceCount": 1}, "allNodes": True,
        "devices": [{"name": "d", "attributes": attributes}]}})
    body = assert_status(r, 422, "Invalid")
    assert body["message"] == f'ResourceSlice.resource.k8s.io "{target.ns}-bad" is invalid: {message}'


async def test_class_validation(target):
    r = await target.req("POST", CLASSES, {"metadata": {"name": "Bad_Class", "generateName": "Bad_"}, "spec": {
        "selectors": [{}], "config": [{}, {"opaque": {"driver": "d.example.com"}}], "extendedResourceName": "cpu"}})
    body = assert_status(r, 422, "Invalid")
    assert body["message"] == invalid(
        "DeviceClass", "Bad_Class", f'metadata.name: {SUBDOMAIN_ERROR.format(chr(34) + "Bad_Class" + chr(34))}',
        "spec.selectors[0].cel: Required value", "spec.config[0].opaque: Required value",
        "spec.config[1].opaque.parameters: Required value",
        'spec.extendedResourceName: Invalid value: "cpu": must be a valid extended resource name')


# ---------------------------------------------------------------------------- updates

async def test_a_claims_spec_is_immutable_and_printed_as_its_go_struct(target):
    claim = await create(target, claims(target), claim_body("c", request("gpu")))
    claim["spec"] = {"devices": {
        "requests": [request("Bad", tolerations=[{"key": "k<>", "operator": "Exists", "tolerationSeconds": 5}]),
                     {"name": "fa", "firstAvailable": [{"name": "s", "deviceClassName": "c", "count": 2}]}],
        "constraints": [{"requests": ["Bad"], "matchAttribute": "a.com/b"}],
        "config": [{"requests": ["Bad"], "opaque": {"driver": "d.com", "parameters": {"k": 1, "z": None}}}]}}
    r = await target.req("PUT", f"{claims(target)}/c", claim)
    body = assert_status(r, 422, "Invalid")
    # only the immutability is checked on update: the bad request name is not reported
    assert body["message"] == invalid("ResourceClaim", "c", (
        'spec: Invalid value: {"Devices":{"Requests":[{"Name":"Bad","Exactly":{"DeviceClassName":"gpu.example.com",'
        '"Selectors":null,"AllocationMode":"ExactCount","Count":1,"AdminAccess":null,"Tolerations":[{"Key":'
        '"k\\u003c\\u003e","Operator":"Exists","Value":"","Effect":"","TolerationSeconds":5}],"Capacity":null},'
        '"FirstAvailable":null},{"Name":"fa","Exactly":null,"FirstAvailable":[{"Name":"s","DeviceClassName":"c",'
        '"Selectors":null,"AllocationMode":"ExactCount","Count":2,"Tolerations":null,"Capacity":null}]}],'
        '"Constraints":[{"Requests":["Bad"],"MatchAttribute":"a.com/b","DistinctAttribute":null}],"Config":'
        '[{"Requests":["Bad"],"Opaque":{"Driver":"d.com","Parameters":{"k":1,"z":null}}}]}}: field is immutable'))
    # the same spec, with its defaults left out, is no change
    r = await target.req("PATCH", f"{claims(target)}/c", {"metadata": {"labels": {"a": "b"}}, "spec": {"devices": {
        "requests": [request("gpu", allocationMode="ExactCount")]}}}, content_type=MERGE)
    assert (r.status, r.body["metadata"]["labels"]) == (200, {"a": "b"}), r.body


async def test_a_templates_spec_is_immutable(target):
    made = await create(target, templates(target), template_body("t", request("gpu"), metadata={"labels": {"x": "y"}}))
    made["spec"]["metadata"]["labels"] = {"x": "z", "a": "b"}
    r = await target.req("PUT", f"{templates(target)}/t", made)
    body = assert_status(r, 422, "Invalid")
    assert body["message"] == invalid("ResourceClaimTemplate", "t", (
        'spec: Invalid value: {"labels":{"a":"b","x":"z"},"Spec":{"Devices":{"Requests":[{"Name":"gpu","Exactly":'
        '{"DeviceClassName":"gpu.example.com","Selectors":null,"AllocationMode":"ExactCount","Count":1,'
        '"AdminAccess":null,"Tolerations":null,"Capacity":null},"FirstAvailable":null}],"Constraints":null,'
        '"Config":null}}}: field is immutable'))


async def test_a_slices_driver_pool_and_node_are_immutable(target):
    made = await create(target, SLICES, slice_body(f"{target.ns}-s", driver_of(target), nodeName="node-a"))
    made["spec"].update(driver="x.example.com", pool={"name": "p2", "generation": 1, "resourceSliceCount": 1},
                        nodeName="node-b")
    r = await target.req("PUT", f"{SLICES}/{target.ns}-s", made)
    body = assert_status(r, 422, "Invalid")
    assert body["message"] == invalid("ResourceSlice", f"{target.ns}-s",
                                      'spec.pool.name: Invalid value: "p2": field is immutable',
                                      'spec.driver: Invalid value: "x.example.com": field is immutable',
                                      'spec.nodeName: Invalid value: "node-b": field is immutable')


async def test_a_class_update_is_validated_and_bumps_its_generation(target):
    name = f"{target.ns}.example.com"
    made = await create(target, CLASSES, {"metadata": {"name": name},
                                          "spec": {"selectors": [{"cel": {"expression": "true"}}]}})
    made["spec"]["selectors"] = [{"cel": {"expression": "false"}}]
    r = await target.req("PUT", f"{CLASSES}/{name}", made)
    assert (r.status, r.body["metadata"]["generation"]) == (200, 2), r.body
    made = r.body
    made["spec"]["selectors"] = [{}]
    r = await target.req("PUT", f"{CLASSES}/{name}", made)
    body = assert_status(r, 422, "Invalid")
    assert body["message"] == invalid("DeviceClass", name, "spec.selectors[0].cel: Required value")


# ---------------------------------------------------------------------------- status

async def test_the_status_subresource_changes_status_only_and_the_claim_never_its_status(target):
    pod = await create(target, pods(target), pod_body("p"))
    claim = await create(target, claims(target), claim_body("c", request("gpu")))
    claim["metadata"]["labels"] = {"from": "status"}
    claim["spec"] = {"devices": {"requests": [request("other")]}}
    r = await put_status(target, claim, {"allocation": allocation("gpu-0"), "reservedFor": [consumer(pod)]})
    assert r.status == 200, r.body
    assert (r.body["spec"]["devices"]["requests"][0]["name"], r.body["metadata"].get("labels")) == ("gpu", None)
    assert r.body["status"] == {"allocation": allocation("gpu-0"), "reservedFor": [consumer(pod)]}
    r = await target.req("PATCH", f"{claims(target)}/c", {"metadata": {"labels": {"a": "b"}}, "status": {}},
                         content_type=MERGE)
    assert (r.status, r.body["metadata"]["labels"]) == (200, {"a": "b"}), r.body
    assert r.body["status"] == {"allocation": allocation("gpu-0"), "reservedFor": [consumer(pod)]}


async def test_reservations_need_an_allocation_and_are_unique_and_complete(target):
    claim = await create(target, claims(target), claim_body("c", request("gpu")))
    r = await put_status(target, claim, {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]})
    body = assert_status(r, 422, "Invalid")
    assert body["message"] == invalid("ResourceClaim", "c", "status.reservedFor: Forbidden: may not be specified "
                                                             "when `allocated` is not set")
    r = await put_status(target, claim, {"allocation": allocation("gpu-0"), "reservedFor": [
        {}, {"resource": "pods", "name": "p", "uid": "u1"}, {"resource": "pods", "name": "q", "uid": "u1"}]})
    body = assert_status(r, 422, "Invalid")
    assert body["message"] == invalid("ResourceClaim", "c", "status.reservedFor[0].resource: Required value",
                                      "status.reservedFor[0].name: Required value",
                                      "status.reservedFor[0].uid: Required value",
                                      'status.reservedFor[2]: Duplicate value: "u1"')
    r = await put_status(target, claim, {"allocation": allocation("gpu-0"), "reservedFor": [
        {"resource": "pods", "name": f"p{i}", "uid": f"u{i}"} for i in range(257)]})
    body = assert_status(r, 422, "Invalid")
    assert body["message"] == invalid("ResourceClaim", "c", "status.reservedFor: Too many: 257: must have at most "
                                                             "256 items")


async def test_a_new_allocation_is_validated(target):
    claim = await create(target, claims(target), claim_body("c", request("gpu")))
    r = await put_status(target, claim, {"allocation": {"devices": {"results": [
        {"request": "nope", "driver": "", "pool": "", "device": "Bad"}]}, "nodeSelector": {"nodeSelectorTerms": []}}})
    body = assert_status(r, 422, "Invalid")
    assert body["message"] == invalid(
        "ResourceClaim", "c", f'status.allocation.devices.results[0].request: Invalid value: "nope": {REF_ERROR}',
        "status.allocation.devices.results[0].driver: Required value",
        "status.allocation.devices.results[0].pool: Required value",
        f'status.allocation.devices.results[0].device: {LABEL_ERROR.format(chr(34) + "Bad" + chr(34))}',
        "status.allocation.nodeSelector.nodeSelectorTerms: Required value: must have at least one node selector term")


async def test_an_allocation_cannot_change_and_is_cleared_only_without_reservations(target):
    pod = await create(target, pods(target), pod_body("p"))
    claim = await claim_with(target, "c", {"allocation": allocation("gpu-0"), "reservedFor": [consumer(pod)]})
    changed = allocation("gpu-1")
    changed["devices"]["results"][0]["tolerations"] = [{"key": "k"}]   # defaulted before the comparison
    r = await put_status(target, claim, {"allocation": changed, "reservedFor": [consumer(pod)]})
    body = assert_status(r, 422, "Invalid")
    assert body["message"] == invalid("ResourceClaim", "c", (
        'status.allocation: Invalid value: {"Devices":{"Results":[{"Request":"gpu","Driver":"gpu.example.com",'
        '"Pool":"node-a","Device":"gpu-1","AdminAccess":null,"Tolerations":[{"Key":"k","Operator":"Equal",'
        '"Value":"","Effect":"","TolerationSeconds":null}],"BindingConditions":null,"BindingFailureConditions":'
        'null,"ShareID":null,"ConsumedCapacity":null}],"Config":null},"NodeSelector":null,"AllocationTimestamp":'
        "null}: field is immutable"))
    r = await put_status(target, claim, {"reservedFor": [consumer(pod)]})
    body = assert_status(r, 422, "Invalid")
    assert body["message"] == invalid("ResourceClaim", "c", "status.reservedFor: Forbidden: may not be specified "
                                                             "when `allocated` is not set")
    r = await put_status(target, claim, {})
    assert (r.status, r.body["status"]) == (200, {}), r.body


async def test_a_claim_being_deleted_takes_no_new_reservation(target):
    first, second = [await create(target, pods(target), pod_body(n)) for n in ("p", "q")]
    claim = await claim_with(target, "c", {"allocation": allocation("gpu-0"), "reservedFor": [consumer(first)]},
                             finalizers=["example.com/keep"])
    r = await target.req("DELETE", f"{claims(target)}/c")
    assert r.status == 200, r.body
    claim = await get(target, f"{claims(target)}/c")
    r = await put_status(target, claim, {"allocation": allocation("gpu-0"),
                                         "reservedFor": [consumer(first), consumer(second)]})
    body = assert_status(r, 422, "Invalid")
    assert body["message"] == invalid("ResourceClaim", "c", "status.reservedFor: Forbidden: new entries may not be "
                                      "added while `deallocationRequested` or `deletionTimestamp` are set")
    claim["metadata"]["finalizers"] = []
    assert (await target.req("PUT", f"{claims(target)}/c", claim)).status == 200


async def test_unreserve_deletes_one_reservation_by_strategic_merge_with_the_claims_uid(target):
    # kube-scheduler's Unreserve: {"metadata": {"uid": <claim>}, "status": {"reservedFor": [{"$patch": "delete", ...}]}}
    first, second = [await create(target, pods(target), pod_body(n)) for n in ("p", "q")]
    claim = await claim_with(target, "c", {"allocation": allocation("gpu-0"),
                                           "reservedFor": [consumer(first), consumer(second)]})

    def unreserve(claim_uid: str) -> dict[str, Any]:
        return {"metadata": {"uid": claim_uid},
                "status": {"reservedFor": [{"$patch": "delete", "uid": first["metadata"]["uid"]}]}}

    wrong = "0b3b0c8e-0000-0000-0000-000000000000"
    r = await target.req("PATCH", f"{claims(target)}/c/status", unreserve(wrong), content_type=STRATEGIC)
    body = assert_status(r, 422, "Invalid")   # a recreated claim is not touched: its uid is immutable
    assert body["message"] == invalid("ResourceClaim", "c", f'metadata.uid: Invalid value: "{wrong}": field is '
                                                             "immutable")
    r = await target.req("PATCH", f"{claims(target)}/c/status", unreserve(claim["metadata"]["uid"]),
                         content_type=STRATEGIC)
    assert r.status == 200, r.body
    assert r.body["status"] == {"allocation": allocation("gpu-0"), "reservedFor": [consumer(second)]}
    r = await target.req("PATCH", f"{claims(target)}/c/status", unreserve(claim["metadata"]["uid"]),
                         content_type=STRATEGIC)
    assert (r.status, r.body["status"]["reservedFor"]) == (200, [consumer(second)]), r.body   # gone already: no-op
    stale = {**claim, "metadata": {**claim["metadata"], "uid": wrong}}
    r = await put_status(target, stale, {})
    body = assert_status(r, 409, "Conflict")   # an update's uid is a precondition
    assert "Precondition failed: UID in precondition: " in body["message"]


# ---------------------------------------------------------------------------- pods

async def test_a_pods_claim_statuses_are_kept_and_checked_through_its_status(target):
    pod = await create(target, pods(target), pod_body("p", resourceClaims=[
        {"name": "gpu", "resourceClaimName": "c"}, {"name": "nic", "resourceClaimName": "d"}]))
    path = f"{pods(target)}/p/status"
    r = await target.req("PATCH", path, {"status": {"resourceClaimStatuses": [
        {"name": "gpu", "resourceClaimName": "x"}]}}, content_type=STRATEGIC)
    assert (r.status, r.body["status"].get("resourceClaimStatuses")) == (200, [{"name": "gpu",
                                                                                 "resourceClaimName": "x"}]), r.body
    r = await target.req("PATCH", path, {"status": {"resourceClaimStatuses": [
        {"name": "nic", "resourceClaimName": "y"}]}}, content_type=STRATEGIC)   # merges by name, the patch's first
    assert r.body["status"]["resourceClaimStatuses"] == [{"name": "nic", "resourceClaimName": "y"},
                                                         {"name": "gpu", "resourceClaimName": "x"}]
    pod = r.body
    pod["status"]["conditions"] = [{"type": "Example", "status": "True"}]
    r = await target.req("PUT", path, pod)
    assert len(r.body["status"]["resourceClaimStatuses"]) == 2, r.body
    r = await target.req("PATCH", path, {"status": {"resourceClaimStatuses": [
        {"name": "nope", "resourceClaimName": "Bad_Name"}, {"name": "gpu"}, {"name": "gpu"}]}}, content_type=MERGE)
    body = assert_status(r, 422, "Invalid")
    assert body["message"] == (
        'Pod "p" is invalid: [status.resourceClaimStatuses[0].name: Invalid value: "nope": must match the name of '
        "an entry in `spec.resourceClaims`, status.resourceClaimStatuses[0].resourceClaimName: "
        f'{SUBDOMAIN_ERROR.format(chr(34) + "Bad_Name" + chr(34))}, '
        'status.resourceClaimStatuses[2].name: Duplicate value: "gpu"]')



async def test_a_pods_claims_and_its_containers_uses_of_them_are_checked(target):
    body = pod_body("p", resourceClaims=[
        {"name": "Bad"}, {"name": "a", "resourceClaimName": "x", "resourceClaimTemplateName": "y"},
        {"name": "a", "resourceClaimName": "Bad_x"}])
    body["spec"]["containers"][0]["resources"]["claims"] = [
        {"name": "zz"}, {"name": "a"}, {"name": "a", "request": "r"}, {"name": "Bad", "request": "Bad"}]
    r = await target.req("POST", pods(target), body)
    body = assert_status(r, 422, "Invalid")
    assert body["message"] == (
        f'Pod "p" is invalid: [spec.resourceClaims[0].name: {LABEL_ERROR.format(chr(34) + "Bad" + chr(34))}, '
        'spec.resourceClaims[0]: Invalid value: {"Name":"Bad","ResourceClaimName":null,"ResourceClaimTemplateName"'
        ":null}: must specify one of: `resourceClaimName`, `resourceClaimTemplateName`, spec.resourceClaims[1]: "
        'Invalid value: {"Name":"a","ResourceClaimName":"x","ResourceClaimTemplateName":"y"}: at most one of '
        "`resourceClaimName` or `resourceClaimTemplateName` may be specified, spec.resourceClaims[2].name: "
        'Duplicate value: "a", spec.resourceClaims[2].resourceClaimName: '
        f'{SUBDOMAIN_ERROR.format(chr(34) + "Bad_x" + chr(34))}, spec.containers[0].resources.claims[0]: Not '
        'found: "zz": must be one of the names in pod.spec.resourceClaims: Bad, a, '
        'spec.containers[0].resources.claims[2]: Duplicate value: "a", '
        f'spec.containers[0].resources.claims[3].request: {LABEL_ERROR.format(chr(34) + "Bad" + chr(34))}]')


# ---------------------------------------------------------------------------- the resourceclaim controller

CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"


def owner(pod: dict[str, Any]) -> dict[str, Any]:
    """The ownerReference the controller gives a claim it makes (1.36 sets no blockOwnerDeletion)."""
    return {"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"],
            "controller": True}


async def fetch_claim(t: Target, name: str) -> dict[str, Any] | None:
    r = await t.req("GET", f"{claims(t)}/{name}")
    assert r.status in (200, 404), r.body
    return r.body if r.status == 200 else None


async def claim_statuses(t: Target, pod: str) -> list[dict[str, Any]]:
    return (await get(t, f"{pods(t)}/{pod}"))["status"].get("resourceClaimStatuses") or []


async def recorded(t: Target, pod: str, entries: int = 1) -> list[dict[str, Any]]:
    """Until the pod's status records ``entries`` generated claims; returns them."""
    return await until(lambda: claim_statuses(t, pod), lambda got: len(got) == entries,
                       f"pod {pod} records {entries} claim(s)", WAIT)


async def all_claims(t: Target) -> list[dict[str, Any]]:
    return (await get(t, claims(t)))["items"]


async def generated_and_allocated(t: Target) -> tuple[dict[str, Any], str]:
    """Pod "p" with a claim from template "t", once made; then what a scheduler writes to that claim: the
    delete-protection finalizer, an allocation and the pod's reservation. The pod and the claim's name."""
    await create(t, templates(t), template_body("t", request("gpu")))
    pod = await create(t, pods(t), pod_body("p", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}]))
    [entry] = await recorded(t, "p")
    name = entry["resourceClaimName"]
    claim = await get(t, f"{claims(t)}/{name}")
    claim["metadata"]["finalizers"] = [PROTECTION]
    claim = (await t.req("PUT", f"{claims(t)}/{name}", claim)).body
    r = await put_status(t, claim, {"allocation": allocation("gpu-0"), "reservedFor": [consumer(pod)]})
    assert r.status == 200, r.body
    return pod, name


async def test_a_template_entry_gets_a_claim_made_from_the_template(target):
    target.needs_controllers("resourceclaim-controller")
    template = await create(target, templates(target), template_body(
        "t", request("gpu", tolerations=[{"key": "k"}]),
        metadata={"labels": {"app": "web"}, "annotations": {"note": "from the template"}}))
    pod = await create(target, pods(target), pod_body("p", resourceClaims=[
        {"name": "gpu", "resourceClaimTemplateName": "t"}, {"name": "direct", "resourceClaimName": "mine"}]))
    [entry] = await recorded(target, "p")
    assert entry["name"] == "gpu" and entry["resourceClaimName"].startswith("p-gpu-"), entry
    assert len(entry["resourceClaimName"]) == len("p-gpu-") + 5
    [claim] = await all_claims(target)   # none for the entry that names its claim
    meta = claim["metadata"]
    assert (meta["name"], meta["generateName"]) == (entry["resourceClaimName"], "p-gpu-")
    assert meta["annotations"] == {"note": "from the template", CLAIM_NAME: "gpu"}
    assert meta["labels"] == {"app": "web"}
    assert meta["ownerReferences"] == [owner(pod)]
    assert claim["spec"] == template["spec"]["spec"]
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] == [{"key": "k", "operator": "Equal"}]
    assert claim["status"] == {}


async def test_a_long_pod_and_entry_name_are_cut_in_proportion(target):
    target.needs_controllers("resourceclaim-controller")
    await create(target, templates(target), template_body("t", request("gpu")))
    pod_name, entry = "p" * 60, "c" * 20
    await create(target, pods(target), pod_body(pod_name, resourceClaims=[
        {"name": entry, "resourceClaimTemplateName": "t"}]))
    await recorded(target, pod_name)
    [claim] = await all_claims(target)
    # 82 characters are too many: 60*57//82 of the pod's and 20*57//82 of the entry's, joined by "-"
    assert claim["metadata"]["generateName"] == "p" * 41 + "-" + "c" * 13


async def test_a_missing_template_is_an_event_and_its_claim_is_made_once_it_exists(target):
    target.needs_controllers("resourceclaim-controller")
    await create(target, pods(target), pod_body("p", resourceClaims=[
        {"name": "gpu", "resourceClaimTemplateName": "later"}]))
    want = ('PodResourceClaim gpu: resource claim template "later": resourceclaimtemplate.resource.k8s.io '
            '"later" not found')

    async def warnings() -> set[tuple[str, str, str, str]]:
        r = await target.req("GET", f"/api/v1/namespaces/{target.ns}/events",
                             params={"fieldSelector": "reason=FailedResourceClaimCreation"})
        return {(e["type"], e["source"]["component"], e["involvedObject"]["name"], e["message"])
                for e in r.body["items"]}

    await until(warnings, lambda got: got == {("Warning", "resource_claim", "p", want)}, "the warning", WAIT)
    assert await all_claims(target) == []
    await create(target, templates(target), template_body("later", request("gpu")))
    [entry] = await recorded(target, "p")
    assert [c["metadata"]["name"] for c in await all_claims(target)] == [entry["resourceClaimName"]]


async def test_a_claim_made_for_the_pod_before_is_used_again(target):
    target.needs_controllers("resourceclaim-controller")
    await create(target, templates(target), template_body("t", request("gpu")))
    await create(target, pods(target), pod_body("p", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}]))
    [entry] = await recorded(target, "p")
    # the status loses the entry (as after a failed status write): the claim is found again, not made twice
    r = await target.req("PATCH", f"{pods(target)}/p/status", {"status": {"resourceClaimStatuses": [
        {"$patch": "delete", "name": "gpu"}]}}, content_type=STRATEGIC)
    assert r.status == 200, r.body
    assert await recorded(target, "p") == [entry]
    assert [c["metadata"]["name"] for c in await all_claims(target)] == [entry["resourceClaimName"]]


async def test_a_pod_put_on_a_node_gets_its_allocated_claim_reserved(target):
    target.needs_controllers("resourceclaim-controller")
    [node] = await target.make_nodes(1)
    await claim_with(target, "c", {"allocation": allocation("gpu-0")})
    pod = await create(target, pods(target), pod_body("p", nodeName=node,
                                                      resourceClaims=[{"name": "gpu", "resourceClaimName": "c"}]))
    claim = await until(lambda: fetch_claim(target, "c"), lambda c: c["status"].get("reservedFor"),
                        "the reservation", WAIT)
    assert claim["status"] == {"allocation": allocation("gpu-0"), "reservedFor": [consumer(pod)]}


async def test_a_deleted_pods_reservation_is_dropped_and_a_protected_claim_deallocated(target):
    target.needs_controllers("resourceclaim-controller")
    pod = await create(target, pods(target), pod_body("p", resourceClaims=[
        {"name": "a", "resourceClaimName": "protected"}, {"name": "b", "resourceClaimName": "plain"}]))
    await claim_with(target, "protected", {"allocation": allocation("gpu-0"), "reservedFor": [consumer(pod)]},
                     finalizers=[PROTECTION, "example.com/other"])
    await claim_with(target, "plain", {"allocation": allocation("gpu-1"), "reservedFor": [consumer(pod)]})
    r = await target.req("DELETE", f"{pods(target)}/p", {"gracePeriodSeconds": 0})
    assert r.status == 200, r.body
    protected = await until(lambda: fetch_claim(target, "protected"), lambda c: c["status"] == {},
                            "the protected claim deallocated", WAIT)
    protected = await until(lambda: fetch_claim(target, "protected"),
                            lambda c: c["metadata"].get("finalizers") == ["example.com/other"],
                            "its delete-protection lifted", WAIT)
    # a claim without the finalizer was not allocated by a scheduler: it keeps its allocation
    plain = await until(lambda: fetch_claim(target, "plain"), lambda c: "reservedFor" not in c["status"],
                        "the plain claim released", WAIT)
    assert plain["status"] == {"allocation": allocation("gpu-1")}


async def test_a_finished_pods_generated_claim_is_released_and_deleted(target):
    target.needs_controllers("resourceclaim-controller")
    _, name = await generated_and_allocated(target)
    r = await target.req("PATCH", f"{pods(target)}/p/status", {"status": {"phase": "Succeeded"}}, content_type=MERGE)
    assert r.status == 200, r.body
    await until(lambda: fetch_claim(target, name), lambda c: c is None, "the claim deleted", WAIT)


async def test_a_deleted_pods_generated_claim_is_released_and_left_to_the_garbage_collector(target):
    target.needs_controllers("resourceclaim-controller")
    pod, name = await generated_and_allocated(target)
    r = await target.req("DELETE", f"{pods(target)}/p", {"gracePeriodSeconds": 0})
    assert r.status == 200, r.body
    claim = await until(lambda: fetch_claim(target, name),
                        lambda c: c["status"] == {} and not c["metadata"].get("finalizers"),
                        "the claim released, deallocated and unprotected", WAIT)
    assert claim["metadata"]["ownerReferences"] == [owner(pod)]   # no garbage collector runs on either server


async def test_a_protected_claim_being_deleted_is_deallocated_and_goes(target):
    target.needs_controllers("resourceclaim-controller")
    await claim_with(target, "c", {"allocation": allocation("gpu-0")}, finalizers=[PROTECTION])
    r = await target.req("DELETE", f"{claims(target)}/c")
    assert r.status == 200, r.body
    await until(lambda: fetch_claim(target, "c"), lambda c: c is None, "the claim gone", WAIT)
