"""The stand-in's token authority and RBAC evaluation, against a store without a server or an event loop.

What both servers do alike is tested in tests/simcluster/test_auth.py; here
is what a test can only see with the store's clock in hand or by reading
the evaluation directly: tokens expire, a token dies with its
ServiceAccount (a new one of the same name has a new uid), a binding to a
missing role says so in the reason, and the rule matching table.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.simcluster import errors
from bench.simcluster.auth import (ADMIN_TOKEN, ADMIN_USER, CLUSTER_ROLE_BINDINGS, SERVICE_ACCOUNTS, Authority,
                                   _resource_matches, _url_matches)
from bench.simcluster.store import Store

NS = "default"


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def authority() -> tuple[Authority, Store, Clock]:
    clock = Clock()
    store = Store(clock=clock)
    return Authority(store), store, clock


def issue(auth: Authority, store: Store, name: str = "prom", **spec: Any) -> str:
    if store.get_obj(SERVICE_ACCOUNTS, NS, name) is None:
        store.create(SERVICE_ACCOUNTS, NS, {"metadata": {"name": name}})
    return auth.token_request(NS, name, {"spec": spec})["status"]["token"]


def reviewed(auth: Authority, token: str) -> dict[str, Any]:
    return auth.token_review({"spec": {"token": token}})["status"]


def test_a_token_is_valid_until_it_expires():
    auth, store, clock = authority()
    token = issue(auth, store, expirationSeconds=600)
    clock.now += 599
    assert reviewed(auth, token)["authenticated"] is True
    clock.now += 1
    status = reviewed(auth, token)
    assert not status.get("authenticated") and status["error"].endswith("service account token has expired]")


def test_a_token_dies_with_its_service_account_even_if_one_of_the_same_name_comes_back():
    auth, store, _ = authority()
    token = issue(auth, store)
    store.delete(SERVICE_ACCOUNTS, NS, "prom", 0, None)
    assert not reviewed(auth, token).get("authenticated")
    store.create(SERVICE_ACCOUNTS, NS, {"metadata": {"name": "prom"}})
    status = reviewed(auth, token)
    assert not status.get("authenticated") and "invalidated" in status["error"]
    assert reviewed(auth, issue(auth, store))["authenticated"] is True


def test_the_admin_token_is_a_system_masters_user_valid_for_any_audience():
    auth, _, _ = authority()
    status = auth.token_review({"spec": {"token": ADMIN_TOKEN, "audiences": ["anything"]}})["status"]
    assert status["user"]["username"] == ADMIN_USER and "system:masters" in status["user"]["groups"]
    assert status["audiences"] == ["anything"]


def test_a_review_that_is_not_one_is_a_bad_request():
    auth, _, _ = authority()
    with pytest.raises(errors.APIError) as exc:
        auth.token_review({"kind": "SubjectAccessReview", "spec": {"token": "x"}})
    assert exc.value.code == 400


def test_a_binding_to_a_missing_role_is_named_in_the_reason():
    auth, store, _ = authority()
    store.create(CLUSTER_ROLE_BINDINGS, "", {
        "metadata": {"name": "dangling"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gone"},
        "subjects": [{"kind": "User", "name": "alice"}]})
    assert auth.authorize("alice", [], {}, {"path": "/metrics", "verb": "get"}) == \
        (False, 'RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found')
    assert auth.authorize("bob", [], {}, {"path": "/metrics", "verb": "get"}) == (False, "")


@pytest.mark.parametrize("rule, path, matches", [
    pytest.param("/metrics", "/metrics", True, id="an exact URL matches itself"),
    pytest.param("/metrics", "/metrics/slis", False, id="an exact URL does not match below it"),
    pytest.param("/metrics*", "/metrics/slis", True, id="a trailing star matches by prefix"),
    pytest.param("/debug/*", "/debugger", False, id="a prefix ends where the star starts"),
    pytest.param("*", "/anything", True, id="a lone star matches every URL"),
])
def test_non_resource_url_matching(rule, path, matches):
    assert _url_matches(rule, path) is matches


@pytest.mark.parametrize("rules, resource, subresource, matches", [
    pytest.param(["pods"], "pods", "", True, id="a resource matches itself"),
    pytest.param(["pods"], "pods", "status", False, id="a resource does not grant its subresources"),
    pytest.param(["pods/status"], "pods", "status", True, id="a subresource is named with its resource"),
    pytest.param(["*/status"], "nodes", "status", True, id="star slash subresource matches any resource's"),
    pytest.param(["*/status"], "nodes", "", False, id="star slash subresource grants no main resource"),
    pytest.param(["*"], "pods", "log", True, id="a lone star matches everything"),
])
def test_resource_matching(rules, resource, subresource, matches):
    assert _resource_matches(rules, resource, subresource) is matches
