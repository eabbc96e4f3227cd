"""Upstream's native gang API (scheduling.k8s.io/v1alpha2) and Jobs, held to kube-apiserver 1.36.

Both servers here serve the alpha API (the real one started with
``--runtime-config=scheduling.k8s.io/v1alpha2=true`` and the gates, the
stand-in with ``native_gangs=True``): PodGroup and Workload defaults,
validation and admission in the real server's words, pods'
``spec.schedulingGroup``, Jobs' defaults, and what kube-controller-manager's
Job and podgroup-protection controllers do (the real run of those needs
kube-controller-manager in ``KUBEBUILDER_ASSETS``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable

import pytest

from bench.simcluster import SimCluster
from bench.simcluster.jobs import pod_group_name, workload_name
from tests.simcluster.conftest import Target, pod_body
from tests.simcluster.test_writes import MERGE, STRATEGIC, create, pods

pytestmark = pytest.mark.asyncio(loop_scope="session")

V1A2 = "/apis/scheduling.k8s.io/v1alpha2"
FINALIZER = "scheduling.k8s.io/podgroup-protection"
IMMUTABLE = "Invalid value: null: field is immutable"
SUBDOMAIN_ERROR = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                   "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                   "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
CONDITION = {"type": "PodGroupScheduled", "status": "True", "reason": "Scheduled", "message": "",
             "lastTransitionTime": "2026-01-01T00:00:00Z"}


def groups(t: Target) -> str:
    return f"{V1A2}/namespaces/{t.ns}/podgroups"


def workloads(t: Target) -> str:
    return f"{V1A2}/namespaces/{t.ns}/workloads"


def jobs(t: Target) -> str:
    return f"/apis/batch/v1/namespaces/{t.ns}/jobs"


def pod_group(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": name},
            "spec": spec}


def gang(n: int) -> dict[str, Any]:
    return {"gang": {"minCount": n}}


def workload(name: str, *templates: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "Workload", "metadata": {"name": name},
            "spec": {"podGroupTemplates": list(templates), **spec}}


def template(name: str = "t", **fields: Any) -> dict[str, Any]:
    return {"name": name, "schedulingPolicy": gang(2), **fields}


def job(name: str, *, mode: str = "Indexed", parallelism: int | None = 3, completions: int | None = 3,
        group: str | None = None, **spec: Any) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {"restartPolicy": "Never",
                                "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}
    if group is not None:
        pod_spec["schedulingGroup"] = {"podGroupName": group}
    body: dict[str, Any] = {"completionMode": mode, **spec,
                            "template": {"metadata": {"labels": {"app": name}, "annotations": {"note": "x"}},
                                         "spec": pod_spec}}
    if parallelism is not None:
        body["parallelism"] = parallelism
    if completions is not None:
        body["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": body}


async def eventually(probe: Callable[[], Awaitable[Any]], timeout: float = 15.0) -> Any:
    """``probe()``'s first truthy answer, polled until ``timeout`` (then the test fails)."""
    deadline = time.monotonic() + timeout
    while True:
        got = await probe()
        if got:
            return got
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.05)


def causes(body: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["reason"], c["field"], c["message"]) for c in body["details"]["causes"]]


# ---------------------------------------------------------------------------- discovery

async def test_discovery_serves_the_alpha_group_version_and_jobs(target: Target) -> None:
    group = (await target.req("GET", "/apis/scheduling.k8s.io")).body
    assert [v["version"] for v in group["versions"]] == ["v1", "v1alpha2"]
    assert group["preferredVersion"]["version"] == "v1"
    resources = {r["name"]: r for r in (await target.req("GET", V1A2)).body["resources"]}
    assert set(resources) == {"podgroups", "podgroups/status", "workloads"}
    for name, kind in (("podgroups", "PodGroup"), ("workloads", "Workload")):
        r = resources[name]
        assert (r["kind"], r["namespaced"], r["singularName"], "shortNames" in r) == (kind, True, name[:-1], False)
    assert sorted(resources["podgroups/status"]["verbs"]) == ["get", "patch", "update"]
    batch = {r["name"]: r for r in (await target.req("GET", "/apis/batch/v1")).body["resources"]}
    assert batch["jobs"]["kind"] == "Job" and batch["jobs"]["categories"] == ["all"]
    assert "jobs/status" in batch
    assert (await target.req("GET", f"{workloads(target)}/x/status")).status == 404


async def test_a_default_sim_serves_neither_kind_as_a_default_real_server(target: Target) -> None:
    target.only_sim("the real server of this suite is started with the runtime-config")
    async with SimCluster() as plain:
        import aiohttp
        async with aiohttp.ClientSession() as s:
            async with s.get(plain.url + "/apis/scheduling.k8s.io") as r:
                assert [v["version"] for v in (await r.json())["versions"]] == ["v1"]
            async with s.get(plain.url + V1A2) as r:
                assert r.status == 404
            async with s.get(plain.url + "/api/v1/namespaces/default/pods") as r:
                assert r.status == 200
            async with s.get(plain.url + f"{V1A2}/namespaces/default/podgroups") as r:
                assert r.status == 404
            async with s.get(plain.url + "/apis/batch/v1/namespaces/default/jobs") as r:
                assert r.status == 200


# ---------------------------------------------------------------------------- PodGroup

async def test_a_pod_group_is_defaulted_and_protected(target: Target) -> None:
    body = pod_group("g", schedulingPolicy=gang(2), schedulingConstraints={"topology": []},
                     resourceClaims=[{"name": "x", "resourceClaimName": "y"}])
    body["status"] = {"conditions": [CONDITION]}
    pg = await create(target, groups(target), body)
    assert pg["spec"] == {"podGroupTemplateRef": None, "schedulingPolicy": gang(2), "schedulingConstraints": {},
                          "disruptionMode": "Pod", "priority": 0}
    assert pg["status"] == {}
    assert pg["metadata"]["finalizers"] == [FINALIZER]
    assert "generation" not in pg["metadata"]


INVALID_GROUPS = [
    ("no policy", {}, [("FieldValueInvalid", "spec.schedulingPolicy",
                        'Invalid value: "": must specify one of: `basic`, `gang`')]),
    ("both policies", {"schedulingPolicy": {"basic": {}, **gang(2)}},
     [("FieldValueInvalid", "spec.schedulingPolicy",
       'Invalid value: "{basic, gang}": must specify exactly one of: `basic`, `gang`')]),
    ("minCount 0", {"schedulingPolicy": gang(0)},
     [("FieldValueRequired", "spec.schedulingPolicy.gang.minCount", "Required value")]),
    ("minCount negative", {"schedulingPolicy": gang(-1)},
     [("FieldValueInvalid", "spec.schedulingPolicy.gang.minCount",
       "Invalid value: -1: must be greater than or equal to 1")]),
    ("empty topology key", {"schedulingPolicy": gang(2), "schedulingConstraints": {"topology": [{"key": ""}]}},
     [("FieldValueRequired", "spec.schedulingConstraints.topology[0].key", "Required value")]),
    ("two topology keys", {"schedulingPolicy": gang(2),
                           "schedulingConstraints": {"topology": [{"key": "a"}, {"key": "b"}]}},
     [("FieldValueTooMany", "spec.schedulingConstraints.topology", "Too many: 2: must have at most 1 item")]),
    ("unknown disruption mode", {"schedulingPolicy": {"basic": {}}, "disruptionMode": "All"},
     [("FieldValueNotSupported", "spec.disruptionMode",
       'Unsupported value: "All": supported values: "Pod", "PodGroup"')]),
    ("empty template ref", {"schedulingPolicy": {"basic": {}}, "podGroupTemplateRef": {}},
     [("FieldValueInvalid", "spec.podGroupTemplateRef", 'Invalid value: "": must specify one of: `workload`')]),
    ("empty workload ref", {"schedulingPolicy": {"basic": {}}, "podGroupTemplateRef": {"workload": {}}},
     [("FieldValueRequired", "spec.podGroupTemplateRef.workload.workloadName", "Required value"),
      ("FieldValueRequired", "spec.podGroupTemplateRef.workload.podGroupTemplateName", "Required value")]),
    ("a system priority class", {"schedulingPolicy": {"basic": {}}, "priorityClassName": "system-cluster-critical"},
     [("FieldValueInvalid", "spec.priority", "Invalid value: 2000000000: must be less than or equal to 1000000000")]),
]


@pytest.mark.parametrize("spec,want", [c[1:] for c in INVALID_GROUPS], ids=[c[0] for c in INVALID_GROUPS])
async def test_an_invalid_pod_group_is_refused_in_the_real_servers_words(target: Target, spec, want) -> None:
    r = await target.req("POST", groups(target), pod_group("bad", **spec))
    assert (r.status, r.reason) == (422, "Invalid"), r.body
    assert causes(r.body) == want
    assert r.body["message"].startswith('PodGroup.scheduling.k8s.io "bad" is invalid: ')


async def test_a_bad_topology_key_is_refused_as_a_label_key(target: Target) -> None:
    r = await target.req("POST", groups(target), pod_group(
        "bad", schedulingPolicy=gang(2), schedulingConstraints={"topology": [{"key": "a b/!"}]}))
    assert r.status == 422
    assert [m.split(":", 2)[2].strip()[:30] for _, _, m in causes(r.body)] == [
        "prefix part a lowercase RFC 11", "name part must consist of alph"]


async def test_admission_refuses_priorities_and_missing_workloads(target: Target) -> None:
    ns_groups = groups(target)
    cases = [
        (pod_group("p", schedulingPolicy={"basic": {}}, priority=5),
         'podgroups.scheduling.k8s.io "p" is forbidden: priority set in the pod group (5) must match the priority '
         'computed (0) based on the priority class set in the spec'),
        (pod_group("c", schedulingPolicy={"basic": {}}, priorityClassName="nope"),
         'podgroups.scheduling.k8s.io "c" is forbidden: no PriorityClass with name nope was found'),
        (pod_group("w", schedulingPolicy={"basic": {}},
                   podGroupTemplateRef={"workload": {"workloadName": "w", "podGroupTemplateName": "t"}}),
         'podgroups.scheduling.k8s.io "w" is forbidden: PodGroup rejected: Workload "w" not found'),
    ]
    for body, message in cases:
        r = await target.req("POST", ns_groups, body)
        assert (r.status, r.reason, r.body["message"]) == (403, "Forbidden", message)
    await create(target, workloads(target), workload("w", template("t")))
    ref = {"workload": {"workloadName": "w", "podGroupTemplateName": "other"}}
    r = await target.req("POST", ns_groups, pod_group("x", schedulingPolicy={"basic": {}}, podGroupTemplateRef=ref))
    assert (r.status, r.body["message"]) == (403, 'podgroups.scheduling.k8s.io "x" is forbidden: PodGroup rejected: '
                                                  'PodGroupTemplate "other" not found in Workload "w"')
    ref["workload"]["podGroupTemplateName"] = "t"
    pg = await create(target, ns_groups, pod_group("x", schedulingPolicy={"basic": {}}, podGroupTemplateRef=ref))
    assert pg["spec"]["podGroupTemplateRef"] == ref


async def test_a_pod_groups_spec_is_immutable_and_its_status_has_its_own_subresource(target: Target) -> None:
    path = f"{groups(target)}/g"
    pg = await create(target, groups(target), pod_group("g", schedulingPolicy=gang(2)))
    for change in ({"schedulingPolicy": gang(3)}, {"disruptionMode": "PodGroup"}):
        r = await target.req("PUT", path, {**pg, "spec": {**pg["spec"], **change}})
        assert r.status == 422
        assert causes(r.body) == [("FieldValueInvalid", f"spec.{next(iter(change))}", IMMUTABLE)]
    pg["metadata"]["labels"] = {"a": "b"}
    pg["status"] = {"conditions": [CONDITION]}
    r = await target.req("PUT", path, pg)
    assert r.status == 200 and r.body["metadata"]["labels"] == {"a": "b"}
    assert r.body["status"] == {}, "the main resource ignores status"
    r = await target.req("PUT", f"{path}/status", {**r.body, "status": {"conditions": [CONDITION]}})
    assert r.status == 200 and r.body["status"]["conditions"] == [CONDITION]
    bad = {**CONDITION, "status": "Maybe", "reason": ""}
    r = await target.req("PATCH", f"{path}/status", {"status": {"conditions": [bad]}}, content_type=MERGE)
    assert r.status == 422
    assert causes(r.body) == [
        ("FieldValueNotSupported", "status.conditions[0].status",
         'Unsupported value: "Maybe": supported values: "False", "True", "Unknown"'),
        ("FieldValueRequired", "status.conditions[0].reason", "Required value")]
    target_condition = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                        "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    r = await target.req("PATCH", f"{path}/status", {"status": {"conditions": [target_condition]}},
                         content_type=STRATEGIC)
    assert r.status == 200
    assert [c["type"] for c in r.body["status"]["conditions"]] == ["DisruptionTarget", "PodGroupScheduled"]


async def test_a_pod_group_named_by_a_pod_is_deleted_only_after_the_pod(target: Target) -> None:
    target.needs_controllers("podgroup-protection-controller")
    await create(target, groups(target), pod_group("g", schedulingPolicy={"basic": {}}))
    await create(target, pods(target), pod_body("p", schedulingGroup={"podGroupName": "g"}))
    r = await target.req("DELETE", f"{groups(target)}/g")
    assert r.status == 200 and r.body["metadata"]["deletionTimestamp"]
    await asyncio.sleep(0.5)
    r = await target.req("GET", f"{groups(target)}/g")
    assert r.status == 200 and r.body["metadata"]["finalizers"] == [FINALIZER]
    assert (await target.req("DELETE", f"{pods(target)}/p")).status == 200

    async def gone() -> bool:
        return (await target.req("GET", f"{groups(target)}/g")).status == 404
    await eventually(gone)


async def test_a_finished_pod_does_not_hold_its_pod_group(target: Target) -> None:
    target.needs_controllers("podgroup-protection-controller")
    await create(target, groups(target), pod_group("g", schedulingPolicy={"basic": {}}))
    pod = await create(target, pods(target), pod_body("p", schedulingGroup={"podGroupName": "g"}))
    pod["status"]["phase"] = "Succeeded"
    assert (await target.req("PUT", f"{pods(target)}/p/status", pod)).status == 200
    assert (await target.req("DELETE", f"{groups(target)}/g")).status == 200

    async def gone() -> bool:
        return (await target.req("GET", f"{groups(target)}/g")).status == 404
    await eventually(gone)


# ---------------------------------------------------------------------------- Workload

async def test_a_workload_is_stored_with_null_constraints(target: Target) -> None:
    wl = await create(target, workloads(target), workload(
        "w", template("t", priorityClassName="nope"), controllerRef={"apiGroup": "batch", "kind": "Job", "name": "j"}))
    assert wl["spec"]["podGroupTemplates"] == [{"name": "t", "schedulingPolicy": gang(2),
                                                "schedulingConstraints": None, "priorityClassName": "nope"}]
    assert "status" not in wl and "generation" not in wl["metadata"]
    wl["spec"]["podGroupTemplates"][0]["schedulingPolicy"] = gang(3)
    r = await target.req("PUT", f"{workloads(target)}/w", wl)
    assert r.status == 422 and causes(r.body) == [("FieldValueInvalid", "spec.podGroupTemplates", IMMUTABLE)]


INVALID_WORKLOADS = [
    ("no templates", workload("w"), [("FieldValueRequired", "spec.podGroupTemplates", "Required value")]),
    ("nine templates", workload("w", *(template(f"t{i}") for i in range(9))),
     [("FieldValueTooMany", "spec.podGroupTemplates", "Too many: 9: must have at most 8 items")]),
    ("duplicate names", workload("w", template(), template()),
     [("FieldValueDuplicate", "spec.podGroupTemplates[1]", 'Duplicate value: {"name":"t","schedulingPolicy":'
                                                           '{"gang":{"minCount":2}},"schedulingConstraints":null}')]),
    ("no policy", workload("w", {"name": "t"}),
     [("FieldValueInvalid", "spec.podGroupTemplates[0].schedulingPolicy",
       'Invalid value: "": must specify one of: `basic`, `gang`')]),
    ("empty controllerRef", workload("w", template(), controllerRef={}),
     [("FieldValueRequired", "spec.controllerRef.kind", "Required value"),
      ("FieldValueRequired", "spec.controllerRef.name", "Required value")]),
]


@pytest.mark.parametrize("body,want", [c[1:] for c in INVALID_WORKLOADS], ids=[c[0] for c in INVALID_WORKLOADS])
async def test_an_invalid_workload_is_refused(target: Target, body, want) -> None:
    r = await target.req("POST", workloads(target), body)
    assert r.status == 422, r.body
    assert causes(r.body) == want


# ---------------------------------------------------------------------------- Pod spec.schedulingGroup

POD_GROUP_NAME = "spec.schedulingGroup.podGroupName"
SCHEDULING_GROUPS = [
    ("empty", {}, [("FieldValueInvalid", POD_GROUP_NAME, "Invalid value: null: must specify one of: `podGroupName`")]),
    ("bad name", {"podGroupName": "Bad_Name"},
     [("FieldValueInvalid", POD_GROUP_NAME, f'Invalid value: "Bad_Name": {SUBDOMAIN_ERROR}')]),
]


@pytest.mark.parametrize("group,want", [c[1:] for c in SCHEDULING_GROUPS], ids=[c[0] for c in SCHEDULING_GROUPS])
async def test_a_pods_scheduling_group_is_validated(target: Target, group, want) -> None:
    r = await target.req("POST", pods(target), pod_body("p", schedulingGroup=group))
    assert r.status == 422, r.body
    assert causes(r.body) == want


async def test_a_pods_scheduling_group_is_kept_immutable_and_need_not_exist(target: Target) -> None:
    pod = await create(target, pods(target), pod_body("p", schedulingGroup={"podGroupName": "nowhere",
                                                                              "other": 1}))
    assert pod["spec"]["schedulingGroup"] == {"podGroupName": "nowhere"}
    bare = await create(target, pods(target), pod_body("q", schedulingGroup=None))
    assert "schedulingGroup" not in bare["spec"]
    r = await target.req("PATCH", f"{pods(target)}/p", {"spec": {"schedulingGroup": {"podGroupName": "g2"}}},
                         content_type=MERGE)
    assert (r.status, causes(r.body)[0][:2]) == (422, ("FieldValueForbidden", "spec"))


# ---------------------------------------------------------------------------- Jobs

async def test_a_job_is_defaulted_with_a_generated_selector(target: Target) -> None:
    j = await create(target, jobs(target), job("j", mode="NonIndexed", parallelism=None, completions=None))
    uid, spec = j["metadata"]["uid"], j["spec"]
    assert {k: spec[k] for k in ("parallelism", "completions", "backoffLimit", "completionMode", "suspend",
                                 "podReplacementPolicy", "manualSelector")} == {
        "parallelism": 1, "completions": 1, "backoffLimit": 6, "completionMode": "NonIndexed", "suspend": False,
        "podReplacementPolicy": "TerminatingOrFailed", "manualSelector": False}
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert spec["template"]["metadata"]["labels"] == {
        "app": "j", "batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "j",
        "controller-uid": uid, "job-name": "j"}
    pod_spec = spec["template"]["spec"]
    assert (pod_spec["schedulerName"], pod_spec["terminationGracePeriodSeconds"], pod_spec["dnsPolicy"]) == (
        "default-scheduler", 30, "ClusterFirst")
    assert "enableServiceLinks" not in pod_spec and "tolerations" not in pod_spec
    assert j["metadata"]["generation"] == 1


RESTART_POLICIES = [
    ("unset", None, [("FieldValueRequired", "spec.template.spec.restartPolicy",
                      'Required value: valid values: "OnFailure", "Never"')]),
    ("Always", "Always", [("FieldValueRequired", "spec.template.spec.restartPolicy",
                           'Required value: valid values: "OnFailure", "Never"')]),
    ("unknown", "Bogus", [
        ("FieldValueNotSupported", "spec.template.spec.restartPolicy",
         'Unsupported value: "Bogus": supported values: "Always", "OnFailure", "Never"'),
        ("FieldValueNotSupported", "spec.template.spec.restartPolicy",
         'Unsupported value: "Bogus": supported values: "OnFailure", "Never"')]),
]


@pytest.mark.parametrize("policy,want", [c[1:] for c in RESTART_POLICIES], ids=[c[0] for c in RESTART_POLICIES])
async def test_a_jobs_pods_must_not_restart_always(target: Target, policy, want) -> None:
    body = job("j")
    if policy is None:
        del body["spec"]["template"]["spec"]["restartPolicy"]
    else:
        body["spec"]["template"]["spec"]["restartPolicy"] = policy
    r = await target.req("POST", jobs(target), body)
    assert r.status == 422 and causes(r.body) == want


async def test_an_indexed_job_needs_completions(target: Target) -> None:
    r = await target.req("POST", jobs(target), job("j", completions=None))
    assert r.status == 422
    assert ("FieldValueRequired", "spec.completions", "Required value: when completion mode is Indexed") \
        in causes(r.body)


async def test_a_qualifying_job_gets_a_workload_and_a_gang_pod_group_before_its_pods(target: Target) -> None:
    target.needs_controllers("job-controller")
    j = await create(target, jobs(target), job("train"))
    uid = j["metadata"]["uid"]
    wl_name = workload_name("train", uid)
    pg_name = pod_group_name(wl_name, "train-pgt-0")
    job_ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": uid, "controller": True,
               "blockOwnerDeletion": True}

    async def three_pods() -> list[dict[str, Any]]:
        items = (await target.req("GET", pods(target))).body["items"]
        return items if len(items) == 3 else []
    members = await three_pods() or await eventually(three_pods)
    wl = (await target.req("GET", f"{workloads(target)}/{wl_name}")).body
    assert wl["metadata"]["ownerReferences"] == [job_ref]
    assert wl["spec"] == {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "train"},
                          "podGroupTemplates": [{"name": "train-pgt-0", "schedulingPolicy": gang(3),
                                                 "schedulingConstraints": None}]}
    pg = (await target.req("GET", f"{groups(target)}/{pg_name}")).body
    assert pg["metadata"]["ownerReferences"] == [job_ref, {"apiVersion": "scheduling.k8s.io/v1alpha2",
                                                           "kind": "Workload", "name": wl_name,
                                                           "uid": wl["metadata"]["uid"]}]
    assert pg["metadata"]["finalizers"] == [FINALIZER]
    assert pg["spec"] == {"podGroupTemplateRef": {"workload": {"workloadName": wl_name,
                                                               "podGroupTemplateName": "train-pgt-0"}},
                          "schedulingPolicy": gang(3), "disruptionMode": "Pod", "priority": 0}
    by_index = {p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]: p for p in members}
    assert sorted(by_index) == ["0", "1", "2"]
    for index, p in by_index.items():
        meta = p["metadata"]
        assert meta["name"].startswith(f"train-{index}-") and meta["generateName"] == f"train-{index}-"
        assert meta["annotations"] == {"batch.kubernetes.io/job-completion-index": index, "note": "x"}
        assert meta["labels"]["app"] == "train" and meta["labels"]["job-name"] == "train"
        assert meta["ownerReferences"] == [job_ref], "no ownerReference to the PodGroup"
        assert meta["finalizers"] == ["batch.kubernetes.io/job-tracking"]
        assert p["spec"]["schedulingGroup"] == {"podGroupName": pg_name}
        assert p["spec"]["hostname"] == f"train-{index}"
        assert p["spec"]["containers"][0]["env"][0]["name"] == "JOB_COMPLETION_INDEX"
        assert int(meta["resourceVersion"]) > int(pg["metadata"]["resourceVersion"]), "the group comes first"

    async def reasons() -> list[str]:
        events = (await target.req("GET", f"/api/v1/namespaces/{target.ns}/events")).body["items"]
        got = sorted(e["reason"] for e in events if e["involvedObject"]["name"] == "train")
        return got if len(got) == 4 else []
    assert await eventually(reasons) == ["SuccessfulCreate"] * 3 + ["WorkloadCreated"]

    async def started() -> dict[str, Any]:
        status = (await target.req("GET", f"{jobs(target)}/train")).body.get("status") or {}
        return status if status.get("active") == 3 else {}
    assert (await eventually(started)).get("startTime")


OTHER_JOBS = [
    ("non-indexed", {"mode": "NonIndexed"}, 3),
    ("parallelism 1", {"parallelism": 1, "completions": 1}, 1),
    ("completions above parallelism", {"parallelism": 2, "completions": 3}, 2),
    ("its own group", {"group": "mine"}, 3),
]


@pytest.mark.parametrize("fields,count", [c[1:] for c in OTHER_JOBS], ids=[c[0] for c in OTHER_JOBS])
async def test_other_jobs_get_pods_and_no_groups(target: Target, fields, count) -> None:
    target.needs_controllers("job-controller")
    await create(target, jobs(target), job("j", **fields))

    async def all_pods() -> list[dict[str, Any]]:
        items = (await target.req("GET", pods(target))).body["items"]
        return items if len(items) == count else []
    members = await eventually(all_pods)
    assert {(p["spec"].get("schedulingGroup") or {}).get("podGroupName") for p in members} == {fields.get("group")}
    assert (await target.req("GET", workloads(target))).body["items"] == []
    assert (await target.req("GET", groups(target))).body["items"] == []


async def test_a_suspended_qualifying_job_gets_its_groups_and_no_pods(target: Target) -> None:
    target.needs_controllers("job-controller")
    await create(target, jobs(target), job("s", parallelism=2, completions=2, suspend=True))

    async def one_group() -> list[dict[str, Any]]:
        return (await target.req("GET", groups(target))).body["items"]
    [pg] = await eventually(one_group)
    assert pg["spec"]["schedulingPolicy"] == gang(2)
    assert (await target.req("GET", pods(target))).body["items"] == []


TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
STATUS_COLUMN = [
    ("pending", [], "Pending"),
    ("scheduled", [{**CONDITION, "reason": "Other"}], "Scheduled"),
    ("unschedulable", [{**CONDITION, "status": "False", "reason": "SchedulerError"}], "Unschedulable"),
    ("disrupted", [CONDITION, {**CONDITION, "type": "DisruptionTarget", "reason": "PreemptionByScheduler"}],
     "PreemptionByScheduler"),
]


async def test_kubectl_columns_of_pod_groups(target: Target) -> None:
    await create(target, workloads(target), workload("w", template("t")))
    for name, conditions, _ in STATUS_COLUMN:
        ref = {"workload": {"workloadName": "w", "podGroupTemplateName": "t"}} if name == "pending" else None
        await create(target, groups(target), pod_group(name, schedulingPolicy=gang(2) if conditions else {"basic": {}},
                                                       podGroupTemplateRef=ref))
        if conditions:
            r = await target.req("PATCH", f"{groups(target)}/{name}/status", {"status": {"conditions": conditions}},
                                 content_type=MERGE)
            assert r.status == 200, r.body
    async with target.session.get(target.url + groups(target), headers={"Accept": TABLE}) as r:
        table = await r.json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Policy", "Workload", "Status", "Age"]
    rows = {row["cells"][0]: row["cells"][1:4] for row in table["rows"]}
    assert rows == {name: ["Basic" if not conditions else "Gang", "w" if name == "pending" else "<none>", want]
                    for name, conditions, want in STATUS_COLUMN}
