"""Names and generateNames, held to what kube-apiserver 1.36 accepts kind by kind.

Each kind's strategy checks ``metadata.name`` and ``metadata.generateName``
with its own rule (a DNS subdomain for most kinds, a DNS label for
Namespaces, Services and StatefulSets, only the generated name for
ReplicationControllers, a path segment for RBAC objects, nothing at all for
core/v1 Events and PodDisruptionBudgets), then every create gets the
path-segment check. A generated name is the generateName cut to 58
characters plus 5 random ones, made after admission, so admission errors
name the object by its generateName. Every case runs on both servers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

import pytest

from bench.simcluster.names import DNS1123_LABEL_ERROR, DNS1123_SUBDOMAIN_ERROR
from tests.simcluster.conftest import Target, pod_body

pytestmark = pytest.mark.asyncio(loop_scope="session")

SUFFIX = "[bcdfghjklmnpqrstvwxz2456789]{5}"   # storage/names.SimpleNameGenerator's alphabet
GENERATED = "<generated>"                      # stands for the generated name in expected messages
MERGE = "application/merge-patch+json"


def _pod_spec() -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}


def _template(labels: dict[str, str], restart: str) -> dict[str, Any]:
    return {"metadata": {"labels": labels}, "spec": {**_pod_spec(), "restartPolicy": restart}}


# kind -> (collection path, a valid body without metadata)
KINDS: dict[str, Callable[[Target], tuple[str, dict[str, Any]]]] = {
    "Namespace": lambda t: ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace"}),
    "Pod": lambda t: (f"/api/v1/namespaces/{t.ns}/pods", {"apiVersion": "v1", "kind": "Pod", "spec": _pod_spec()}),
    "Event": lambda t: (f"/api/v1/namespaces/{t.ns}/events", {
        "apiVersion": "v1", "kind": "Event", "reason": "Scheduled", "message": "m",
        "involvedObject": {"kind": "Pod", "namespace": t.ns, "name": "p"}}),
    "events.k8s.io Event": lambda t: (f"/apis/events.k8s.io/v1/namespaces/{t.ns}/events", {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "eventTime": "2024-05-01T12:00:00.000000Z",
        "reportingController": "example.com/tester", "reportingInstance": "tester-1", "action": "Binding",
        "reason": "Scheduled", "note": "m", "type": "Normal",
        "regarding": {"kind": "Pod", "namespace": t.ns, "name": "p"}}),
    "Service": lambda t: (f"/api/v1/namespaces/{t.ns}/services", {
        "apiVersion": "v1", "kind": "Service", "spec": {"ports": [{"port": 80}]}}),
    "ReplicationController": lambda t: (f"/api/v1/namespaces/{t.ns}/replicationcontrollers", {
        "apiVersion": "v1", "kind": "ReplicationController",
        "spec": {"replicas": 0, "selector": {"app": "a"}, "template": _template({"app": "a"}, "Always")}}),
    "StatefulSet": lambda t: (f"/apis/apps/v1/namespaces/{t.ns}/statefulsets", {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "a"}}, "template": _template({"app": "a"}, "Always")}}),
    "PodDisruptionBudget": lambda t: (f"/apis/policy/v1/namespaces/{t.ns}/poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "spec": {"minAvailable": 1}}),
    "ClusterRole": lambda t: ("/apis/rbac.authorization.k8s.io/v1/clusterroles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "rules": []}),
    "Role": lambda t: (f"/apis/rbac.authorization.k8s.io/v1/namespaces/{t.ns}/roles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "rules": []}),
    "Job": lambda t: (f"/apis/batch/v1/namespaces/{t.ns}/jobs", {
        "apiVersion": "batch/v1", "kind": "Job", "spec": {"suspend": True, "template": _template({}, "Never")}}),
    "PodGroup": lambda t: (f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{t.ns}/podgroups", {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "spec": {"minMember": 1}}),
}


def _invalid(value: str, msg: str) -> str:
    return f'Invalid value: "{value}": {msg}'


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    field: str                  # "name" or "generateName"
    value: str                  # {ns} is the test's namespace (cluster-scoped names must not collide)
    refused: tuple[tuple[str, str], ...] | None = None   # the causes (field, message); None: created

    def param(self) -> Any:
        return pytest.param(self, id=self.id)


CASES = [
    # the rule this started from: "x." is no DNS subdomain, but core/v1 Events check no name
    Case("a core/v1 Event takes generateName x.", "Event", "generateName", "x."),
    Case("an events.k8s.io/v1 Event refuses generateName x.", "events.k8s.io Event", "generateName", "x.",
         (("metadata.generateName", _invalid("x.", DNS1123_SUBDOMAIN_ERROR)),)),
    Case("a core/v1 Event takes an upper-case name with a colon", "Event", "name", "Tester:A"),
    Case("a core/v1 Event takes generateName ..", "Event", "generateName", ".."),
    Case("a core/v1 Event is still no path segment: name ..", "Event", "name", "..",
         (("metadata.name", _invalid("..", "may not be '..'")),)),
    Case("a core/v1 Event generateName may not contain a slash", "Event", "generateName", "a/",
         (("metadata.generateName", _invalid("a/", "may not contain '/'")),
          ("metadata.name", _invalid(GENERATED, "may not contain '/'")))),
    Case("an events.k8s.io/v1 Event refuses an upper-case name", "events.k8s.io Event", "name", "A",
         (("metadata.name", _invalid("A", DNS1123_SUBDOMAIN_ERROR)),)),
    # pods keep the subdomain rule, for names and prefixes alike
    Case("a pod refuses generateName x.", "Pod", "generateName", "x.",
         (("metadata.generateName", _invalid("x.", DNS1123_SUBDOMAIN_ERROR)),)),
    Case("a pod takes a dotted name", "Pod", "name", "a.b"),
    # DNS labels
    Case("a namespace refuses a dotted name", "Namespace", "name", "a.b{ns}",
         (("metadata.name", _invalid("a.b{ns}", "must not contain dots")),)),
    Case("a namespace refuses generateName x. twice over", "Namespace", "generateName", "x.",
         (("metadata.generateName", _invalid("x.", DNS1123_LABEL_ERROR)),
          ("metadata.name", _invalid(GENERATED, "must not contain dots")))),
    Case("a namespace from generateName a/ has no name label to refuse yet", "Namespace", "generateName", "a/",
         (("metadata.generateName", _invalid("a/", DNS1123_LABEL_ERROR)),
          ("metadata.name", _invalid(GENERATED, DNS1123_LABEL_ERROR)))),
    Case("a service refuses a dotted name", "Service", "name", "a.b",
         (("metadata.name", _invalid("a.b", "must not contain dots")),)),
    Case("a service takes a name starting with a digit", "Service", "name", "1a"),
    Case("a statefulset refuses a dotted name", "StatefulSet", "name", "a.b",
         (("metadata.name", _invalid("a.b", "must not contain dots")),)),
    Case("a statefulset refuses a 64-character name", "StatefulSet", "name", "s" * 64,
         (("metadata.name", _invalid("s" * 64, "must be no more than 63 characters")),)),
    # ReplicationControllers check the generated name only
    Case("a replicationcontroller takes generateName x.", "ReplicationController", "generateName", "x."),
    Case("a replicationcontroller names only the generated name", "ReplicationController", "generateName", "X",
         (("metadata.name", _invalid(GENERATED, DNS1123_SUBDOMAIN_ERROR)),)),
    # no rule of their own: the path-segment check alone
    Case("a poddisruptionbudget takes an upper-case name", "PodDisruptionBudget", "name", "Web_Budget"),
    Case("a poddisruptionbudget name may not contain a percent sign", "PodDisruptionBudget", "name", "a%b",
         (("metadata.name", _invalid("a%b", "may not contain '%'")),)),
    # RBAC names are path segments, and so are their generateNames
    Case("a clusterrole takes a name with colons", "ClusterRole", "name", "system:{ns}:reader"),
    Case("a role takes generateName x.", "Role", "generateName", "x."),
    Case("a clusterrole refuses generateName .. as a name", "ClusterRole", "generateName", "..",
         (("metadata.generateName", _invalid("..", "may not be '..'")),)),
    # the Job's name becomes a label value in its template
    Case("a job refuses a 64-character name through its labels and its template's", "Job", "name", "j" * 64,
         # a Job without labels shares its template's label map, so the generated labels are on both
         (("metadata.labels", _invalid("j" * 64, "must be no more than 63 bytes")),) * 2
         + (("spec.template.labels", _invalid("j" * 64, "must be no more than 63 bytes")),) * 2),
    Case("a podgroup (a custom resource) refuses generateName x.", "PodGroup", "generateName", "x.",
         (("metadata.generateName", _invalid("x.", DNS1123_SUBDOMAIN_ERROR)),)),
    # a generateName is cut to 58 characters before the 5 random ones
    Case("a long generateName is cut to 58 characters", "Pod", "generateName", "p" * 70 + "-"),
    Case("a long namespace generateName is cut to a valid label", "Namespace", "generateName", "n" * 60),
]


@pytest.mark.parametrize("case", [c.param() for c in CASES])
async def test_each_kind_checks_names_by_its_own_rule(target, case):
    path, body = KINDS[case.kind](target)
    value = case.value.format(ns=target.ns)
    body["metadata"] = {case.field: value}
    r = await target.req("POST", path, body)
    if case.refused is None:
        assert r.status == 201, r.body
        name = r.body["metadata"]["name"]
        if case.field == "generateName":
            assert re.fullmatch(re.escape(value[:58]) + SUFFIX, name), name
            assert r.body["metadata"]["generateName"] == value
        else:
            assert name == value
        return
    assert r.status == 422, r.body
    assert r.body["reason"] == "Invalid", r.body
    name = r.body["details"]["name"]
    if case.field == "generateName":
        assert re.fullmatch(re.escape(value[:58]) + SUFFIX, name), name
    causes = [(c["field"], c["message"]) for c in r.body["details"]["causes"]]
    assert causes == [(f, m.format(ns=target.ns).replace(GENERATED, name)) for f, m in case.refused]


async def test_core_event_with_generate_name_x_dot_is_created_and_events_k8s_io_refuses_it(target):
    core_path, core_body = KINDS["Event"](target)
    r = await target.req("POST", core_path, {**core_body, "metadata": {"generateName": "x."}})
    assert r.status == 201, r.body
    created = r.body["metadata"]["name"]
    assert re.fullmatch(r"x\." + SUFFIX, created), created
    # the same event reads back through the other API, name and all
    r = await target.req("GET", f"/apis/events.k8s.io/v1/namespaces/{target.ns}/events/{created}")
    assert r.status == 200, r.body
    assert r.body["metadata"]["generateName"] == "x."

    v1_path, v1_body = KINDS["events.k8s.io Event"](target)
    r = await target.req("POST", v1_path, {**v1_body, "metadata": {"generateName": "x."}})
    assert r.status == 422, r.body
    generated = r.body["details"]["name"]
    assert r.body["message"] == (f'Event "{generated}" is invalid: metadata.generateName: '
                                 f'{_invalid("x.", DNS1123_SUBDOMAIN_ERROR)}')
    assert r.body["details"]["kind"] == "Event" and "group" not in r.body["details"]


async def test_a_namespace_made_from_a_generate_name_is_labelled_with_the_generated_name(target):
    r = await target.req("POST", "/api/v1/namespaces", {"metadata": {"generateName": "gen-"}})
    assert r.status == 201, r.body
    name = r.body["metadata"]["name"]
    assert r.body["metadata"]["labels"] == {"kubernetes.io/metadata.name": name}


async def test_admission_names_an_object_by_its_generate_name(target):
    body = pod_body("", priorityClassName="no-such-class")
    body["metadata"] = {"generateName": "web-"}
    r = await target.req("POST", f"/api/v1/namespaces/{target.ns}/pods", body)
    assert r.status == 403, r.body
    assert r.body["message"] == 'pods "web-" is forbidden: no PriorityClass with name no-such-class was found'
    assert r.body["details"]["name"] == "web-"


@pytest.mark.parametrize("kind,name", [
    pytest.param("Event", "Tester:{ns}", id="a core/v1 Event named Tester:..."),
    pytest.param("PodDisruptionBudget", "Web_{ns}", id="a poddisruptionbudget named Web_..."),
    pytest.param("ClusterRole", "system:{ns}", id="a clusterrole named system:..."),
])
async def test_an_object_whose_name_only_the_path_rule_allows_can_be_updated(target, kind, name):
    path, body = KINDS[kind](target)
    name = name.format(ns=target.ns)
    r = await target.req("POST", path, {**body, "metadata": {"name": name}})
    assert r.status == 201, r.body
    r = await target.req("PATCH", f"{path}/{name}", {"metadata": {"labels": {"round": "2"}}}, content_type=MERGE)
    assert r.status == 200, r.body
    assert r.body["metadata"]["labels"] == {"round": "2"}


@pytest.mark.parametrize("field,template_labels,keeps_only_its_own", [
    pytest.param("name", {"app": "train"}, False, id="a named Job shares its template's labels, generated ones too"),
    pytest.param("generateName", {"app": "train"}, True,
                 id="a Job made from a generateName copies its template's labels before the generated ones"),
    pytest.param("name", None, False, id="a named Job without template labels reads back with the generated ones"),
    pytest.param("generateName", None, False,
                 id="a Job from a generateName without template labels reads back with the generated ones"),
])
async def test_a_job_without_labels_of_its_own_takes_its_templates(target, field, template_labels,
                                                                   keeps_only_its_own):
    path, body = KINDS["Job"](target)
    if template_labels is None:
        del body["spec"]["template"]["metadata"]
    else:
        body["spec"]["template"]["metadata"]["labels"] = template_labels
    r = await target.req("POST", path, {**body, "metadata": {field: "train-" if field == "generateName" else "train"}})
    assert r.status == 201, r.body
    meta = r.body["metadata"]
    generated = {"batch.kubernetes.io/controller-uid": meta["uid"], "batch.kubernetes.io/job-name": meta["name"],
                 "controller-uid": meta["uid"], "job-name": meta["name"]}
    own = template_labels or {}
    assert r.body["spec"]["template"]["metadata"]["labels"] == {**own, **generated}
    assert meta["labels"] == (own if keeps_only_its_own else {**own, **generated})
    r = await target.req("GET", f"{path}/{meta['name']}")
    assert r.body["metadata"]["labels"] == meta["labels"]
