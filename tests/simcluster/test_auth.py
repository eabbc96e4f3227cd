"""ServiceAccount tokens, TokenReview and SubjectAccessReview, held to kube-apiserver.

These are what a component delegating its authentication and authorization
to the API server asks (kube-scheduler's secure port, and tandem's): is this
bearer token someone (TokenReview), and may that someone ``get`` the
non-resource URL ``/metrics`` (SubjectAccessReview, answered from RBAC). The
tokens are ServiceAccount tokens from the TokenRequest API, and the admin
token of the target's own kubeconfig.

Every test runs against the stand-in and, when ``KUBEBUILDER_ASSETS`` is set,
a real kube-apiserver. The real server's RBAC authorizer reads bindings from
an informer, so a review that must see a binding just created is retried
until it does (:func:`review_until`); a refusal is asserted only after an
allow proved the bindings are visible. Cluster-scoped objects get names
unique to the test and are deleted after it.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable

import pytest
import yaml

from tests.simcluster.conftest import Target
from tests.simcluster.test_writes import assert_status, create

pytestmark = pytest.mark.asyncio(loop_scope="session")

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
RBAC_GROUP = "rbac.authorization.k8s.io"


def own_token(t: Target) -> str:
    """The bearer token of the target's kubeconfig (a system:masters user on both servers)."""
    cfg = yaml.safe_load(t.kubeconfig.read_text())
    return cfg["users"][0]["user"]["token"]


async def token_review(t: Target, token: str, audiences: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"token": token}
    if audiences is not None:
        spec["audiences"] = audiences
    body = await create(t, TOKEN_REVIEWS, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                           "spec": spec})
    assert (body["kind"], body["apiVersion"]) == ("TokenReview", "authentication.k8s.io/v1")
    return body["status"]


async def service_account_token(t: Target, name: str, **spec: Any) -> tuple[str, str]:
    """(token, the ServiceAccount's uid) for a new ServiceAccount ``name`` in the test's namespace."""
    sa = await create(t, f"/api/v1/namespaces/{t.ns}/serviceaccounts",
                      {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
    tr = await create(t, f"/api/v1/namespaces/{t.ns}/serviceaccounts/{name}/token",
                      {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
    assert tr["kind"] == "TokenRequest" and tr["status"]["token"], tr
    return tr["status"]["token"], sa["metadata"]["uid"]


def sar(user: str = "", groups: list[str] | None = None, *, path: str | None = None, verb: str = "get",
        **resource: str) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if user:
        spec["user"] = user
    if groups:
        spec["groups"] = groups
    if path is not None:
        spec["nonResourceAttributes"] = {"path": path, "verb": verb}
    else:
        spec["resourceAttributes"] = {"verb": verb, **resource}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


async def review(t: Target, body: dict[str, Any]) -> dict[str, Any]:
    answer = await create(t, SUBJECT_ACCESS_REVIEWS, body)
    assert (answer["kind"], answer["apiVersion"]) == ("SubjectAccessReview", "authorization.k8s.io/v1")
    return answer["status"]


async def review_until(t: Target, body: dict[str, Any], done: Callable[[dict[str, Any]], bool],
                       timeout: float = 10.0) -> dict[str, Any]:
    """Review until ``done(status)``: the real authorizer sees new bindings after its informer does."""
    deadline = time.monotonic() + timeout
    while True:
        status = await review(t, body)
        if done(status) or time.monotonic() > deadline:
            return status
        await asyncio.sleep(0.05)


@asynccontextmanager
async def cluster_objects(t: Target, *objects: tuple[str, dict[str, Any]]) -> AsyncIterator[None]:
    """Create cluster-scoped RBAC objects ((plural, body)) for the block; delete them after it."""
    made: list[str] = []
    try:
        for plural, body in objects:
            await create(t, f"{RBAC}/{plural}", body)
            made.append(f"{RBAC}/{plural}/{body['metadata']['name']}")
        yield
    finally:
        for path in made:
            await t.req("DELETE", path)


def cluster_role(name: str, *rules: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "clusterroles", {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole", "metadata": {"name": name},
                            "rules": list(rules)}


def binding(kind: str, name: str, role_kind: str, role: str, *subjects: dict[str, Any],
            namespace: str | None = None) -> tuple[str, dict[str, Any]]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return kind.lower() + "s", {"apiVersion": f"{RBAC_GROUP}/v1", "kind": kind, "metadata": meta,
                                "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": role},
                                "subjects": list(subjects)}


def user(name: str) -> dict[str, Any]:
    return {"apiGroup": RBAC_GROUP, "kind": "User", "name": name}


METRICS_RULE = {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}


def allowed(status: dict[str, Any]) -> bool:
    return status.get("allowed") is True


# ---------------------------------------------------------------------------- TokenReview


async def test_the_kubeconfig_token_reviews_as_an_authenticated_system_masters_user(target):
    status = await token_review(target, own_token(target))
    assert status["authenticated"] is True
    assert status["user"]["username"]
    assert {"system:masters", "system:authenticated"} <= set(status["user"]["groups"])


async def test_a_garbage_token_is_not_authenticated_and_names_no_user(target):
    status = await token_review(target, "not-a-token-anyone-issued")
    assert not status.get("authenticated")
    assert not status.get("user")


async def test_a_token_review_without_a_token_is_a_bad_request(target):
    r = await target.req("POST", TOKEN_REVIEWS, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                                 "spec": {}})
    body = assert_status(r, 400, "BadRequest")
    assert body["message"] == "token is required for TokenReview in authentication"


async def test_a_service_account_token_reviews_as_the_service_account(target):
    token, uid = await service_account_token(target, "scraper")
    status = await token_review(target, token)
    assert status["authenticated"] is True
    info = status["user"]
    assert info["username"] == f"system:serviceaccount:{target.ns}:scraper"
    assert info["uid"] == uid
    assert set(info["groups"]) == {"system:serviceaccounts", f"system:serviceaccounts:{target.ns}",
                                   "system:authenticated"}


async def test_a_token_is_reviewed_for_the_audiences_it_was_requested_for(target):
    token, _ = await service_account_token(target, "aud", audiences=["tandem-metrics"])
    status = await token_review(target, token, audiences=["tandem-metrics"])
    assert status["authenticated"] is True
    assert status["audiences"] == ["tandem-metrics"]
    assert not (await token_review(target, token, audiences=["someone-else"])).get("authenticated")
    # without audiences the review asks for the API server's own, which this token is not for
    assert not (await token_review(target, token)).get("authenticated")


async def test_a_token_request_for_a_missing_service_account_is_not_found(target):
    r = await target.req("POST", f"/api/v1/namespaces/{target.ns}/serviceaccounts/nobody/token",
                         {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
    body = assert_status(r, 404, "NotFound")
    assert body["message"] == 'serviceaccounts "nobody" not found'


async def test_a_token_request_shorter_than_ten_minutes_is_invalid(target):
    await create(target, f"/api/v1/namespaces/{target.ns}/serviceaccounts", {"metadata": {"name": "brief"}})
    r = await target.req("POST", f"/api/v1/namespaces/{target.ns}/serviceaccounts/brief/token",
                         {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                          "spec": {"expirationSeconds": 60}})
    body = assert_status(r, 422, "Invalid")
    assert "may not specify a duration less than 10 minutes" in body["message"]


async def test_a_token_request_defaults_to_an_hour(target):
    await create(target, f"/api/v1/namespaces/{target.ns}/serviceaccounts", {"metadata": {"name": "hour"}})
    tr = await create(target, f"/api/v1/namespaces/{target.ns}/serviceaccounts/hour/token",
                      {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
    assert tr["spec"]["expirationSeconds"] == 3600
    assert tr["spec"]["audiences"] and tr["status"]["expirationTimestamp"]


# ---------------------------------------------------------------------------- SubjectAccessReview


async def test_a_user_bound_to_a_metrics_reader_role_may_get_metrics_and_nothing_else(target):
    name = f"{target.ns}-metrics"
    who = f"{target.ns}-prometheus"
    async with cluster_objects(target, cluster_role(name, METRICS_RULE),
                               binding("ClusterRoleBinding", name, "ClusterRole", name, user(who))):
        status = await review_until(target, sar(who, path="/metrics"), allowed)
        assert status["allowed"] is True
        assert status["reason"] == (f'RBAC: allowed by ClusterRoleBinding "{name}" of ClusterRole "{name}" '
                                    f'to User "{who}"')
        for other in (sar(who, path="/metrics", verb="post"), sar(who, path="/metrics/slis"),
                      sar(who, path="/debug/pprof"), sar(f"{who}-not", path="/metrics")):
            status = await review(target, other)
            assert status["allowed"] is False, other
            assert not status.get("denied"), other     # RBAC has no opinion; it never denies


async def test_an_unbound_user_may_not_get_metrics(target):
    status = await review(target, sar(f"{target.ns}-stranger", path="/metrics"))
    assert status["allowed"] is False
    assert not status.get("denied")


async def test_system_masters_may_do_anything(target):
    for body in (sar(f"{target.ns}-root", ["system:masters"], path="/metrics"),
                 sar(f"{target.ns}-root", ["system:masters"], verb="delete", resource="nodes", name="n")):
        assert (await review(target, body))["allowed"] is True


async def test_a_non_resource_url_ending_in_a_star_matches_by_prefix(target):
    name = f"{target.ns}-debug"
    who = f"{target.ns}-debugger"
    async with cluster_objects(target, cluster_role(name, {"nonResourceURLs": ["/debug/*"], "verbs": ["get"]}),
                               binding("ClusterRoleBinding", name, "ClusterRole", name, user(who))):
        assert allowed(await review_until(target, sar(who, path="/debug/pprof/heap"), allowed))
        assert not allowed(await review(target, sar(who, path="/debugger")))


async def test_a_group_and_a_service_account_subject_are_matched(target):
    name = f"{target.ns}-subjects"
    group = f"{target.ns}-monitoring"
    sa = f"system:serviceaccount:{target.ns}:prometheus"
    async with cluster_objects(target, cluster_role(name, METRICS_RULE), binding(
            "ClusterRoleBinding", name, "ClusterRole", name,
            {"apiGroup": RBAC_GROUP, "kind": "Group", "name": group},
            {"kind": "ServiceAccount", "name": "prometheus", "namespace": target.ns})):
        status = await review_until(target, sar(sa, path="/metrics"), allowed)
        assert status["reason"] == (f'RBAC: allowed by ClusterRoleBinding "{name}" of ClusterRole "{name}" '
                                    f'to ServiceAccount "prometheus/{target.ns}"')
        assert allowed(await review_until(target, sar(f"{target.ns}-anyone", [group], path="/metrics"), allowed))
        # the same name in another namespace is another account
        assert not allowed(await review(target, sar(f"system:serviceaccount:{target.ns}x:prometheus",
                                                    path="/metrics")))


async def test_a_role_binding_grants_its_role_in_its_namespace_only(target):
    who = f"{target.ns}-reader"
    role = {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "Role", "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods", "pods/status"], "verbs": ["get", "list"]}]}
    await create(target, f"{RBAC}/namespaces/{target.ns}/roles", role)
    _, rb = binding("RoleBinding", "read-pods", "Role", "pod-reader", user(who))
    await create(target, f"{RBAC}/namespaces/{target.ns}/rolebindings", rb)
    status = await review_until(target, sar(who, verb="get", resource="pods", namespace=target.ns, name="p"),
                                allowed)
    assert status["reason"] == (f'RBAC: allowed by RoleBinding "read-pods/{target.ns}" of Role "pod-reader" '
                                f'to User "{who}"')
    assert allowed(await review(target, sar(who, verb="list", resource="pods", subresource="status",
                                            namespace=target.ns)))
    for body in (sar(who, verb="get", resource="pods", namespace="default"),
                 sar(who, verb="delete", resource="pods", namespace=target.ns),
                 sar(who, verb="get", resource="pods", subresource="log", namespace=target.ns),
                 sar(who, verb="get", resource="deployments", group="apps", namespace=target.ns)):
        assert not allowed(await review(target, body)), body


ONE_OF = "exactly one of nonResourceAttributes or resourceAttributes must be specified"


@pytest.mark.parametrize("spec, message", [
    pytest.param({"nonResourceAttributes": {"path": "/metrics", "verb": "get"}},
                 "spec.user: Invalid value: \"\": at least one of user or group must be specified",
                 id="neither a user nor a group is invalid"),
    pytest.param({"user": "u"}, f"spec.resourceAttributes: Invalid value: null: {ONE_OF}",
                 id="no attributes at all is invalid"),
    pytest.param({"user": "u", "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
                  "resourceAttributes": {"verb": "get", "resource": "pods"}},
                 'spec.nonResourceAttributes: Invalid value: {"Path":"/metrics","Verb":"get"}: '
                 "cannot be specified in combination with resourceAttributes",
                 id="both kinds of attributes is invalid, blaming nonResourceAttributes"),
    pytest.param({"nonResourceAttributes": {"verb": "get"}, "resourceAttributes": {"verb": "get"}},
                 '[spec.nonResourceAttributes: Invalid value: {"Path":"","Verb":"get"}: cannot be specified in '
                 'combination with resourceAttributes, spec.user: Invalid value: "": at least one of user or group '
                 "must be specified]",
                 id="both kinds and no subject: both causes, in the server's order"),
])
async def test_an_incomplete_subject_access_review_is_invalid(target, spec, message):
    r = await target.req("POST", SUBJECT_ACCESS_REVIEWS, {"apiVersion": "authorization.k8s.io/v1",
                                                          "kind": "SubjectAccessReview", "spec": spec})
    body = assert_status(r, 422, "Invalid")
    assert message in body["message"], body["message"]


async def test_the_review_apis_are_discovered_as_create_only(target):
    for path, name, kind in ((("/apis/authentication.k8s.io/v1", "tokenreviews", "TokenReview")),
                             ("/apis/authorization.k8s.io/v1", "subjectaccessreviews", "SubjectAccessReview")):
        r = await target.req("GET", path)
        assert r.status == 200, r.body
        entry = {e["name"]: e for e in r.body["resources"]}[name]
        assert (entry["kind"], entry["namespaced"], entry["verbs"]) == (kind, False, ["create"])
    r = await target.req("GET", "/api/v1")
    token = {e["name"]: e for e in r.body["resources"]}["serviceaccounts/token"]
    assert (token["kind"], token["verbs"], token.get("group"), token.get("version")) == \
        ("TokenRequest", ["create"], "authentication.k8s.io", "v1")
