"""Fault injection: the failures a scheduler must survive, on demand.

Fault injection is the stand-in's own, so everything here runs on the
simulated cluster only. What an injected failure looks like is what the
real server sends in the same situation: a ``Status`` with the code and
reason kube-apiserver uses (500 InternalError, 503 ServiceUnavailable, 429
TooManyRequests with ``Retry-After`` as the max-in-flight filter sends it),
so clients take their real error paths.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from bench.simcluster.faults import FaultRule, Faults
from tests.simcluster.conftest import Target, pod_body

pytestmark = pytest.mark.asyncio(loop_scope="session")

ONLY_SIM = "fault injection is the stand-in's own"


def pods_path(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/pods"


async def set_faults(target: Target, config: dict[str, Any]) -> dict[str, Any]:
    r = await target.req("PUT", "/simcluster/faults", config)
    assert r.status == 200, r.body
    return r.body


async def requests_by_verb(target: Target) -> dict[str, int]:
    """One request of each kind a scheduler makes; the status each got."""
    ns = target.ns
    out = {}
    out["create pods"] = (await target.req("POST", pods_path(ns), pod_body("p"))).status
    out["get pods"] = (await target.req("GET", f"{pods_path(ns)}/seed")).status
    out["list pods"] = (await target.req("GET", pods_path(ns))).status
    out["patch pods"] = (await target.req("PATCH", f"{pods_path(ns)}/seed", {"metadata": {"labels": {"a": "b"}}},
                                          content_type="application/merge-patch+json")).status
    out["create pods/binding"] = (await target.req(
        "POST", f"{pods_path(ns)}/seed/binding",
        {"metadata": {"name": "seed"}, "target": {"kind": "Node", "name": "n"}})).status
    out["list nodes"] = (await target.req("GET", "/api/v1/nodes")).status
    out["create podgroups"] = (await target.req(
        "POST", f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups",
        {"metadata": {"name": "g"}, "spec": {"minMember": 1}})).status
    return out


ALL_OK = {"create pods": 201, "get pods": 200, "list pods": 200, "patch pods": 200, "create pods/binding": 201,
          "list nodes": 200, "create podgroups": 201}

RULE_CASES = [
    ({"verb": "create", "resource": "pods", "error_rate": 1.0}, {"create pods": 500},
     "error_rate 1 on create pods fails only pod creates"),
    ({"verb": "create", "resource": "pods", "error_rate": 1.0, "error_code": 503}, {"create pods": 503},
     "error_code picks the status"),
    ({"verb": "create", "resource": "pods/binding", "error_rate": 1.0}, {"create pods/binding": 500},
     "a subresource rule fails only binds"),
    ({"verb": "*", "resource": "pods", "error_rate": 1.0},
     {"create pods": 500, "get pods": 500, "list pods": 500, "patch pods": 500},
     "a wildcard verb covers every verb on the resource but not its subresources"),
    ({"verb": "list", "resource": "*", "throttle_rate": 1.0}, {"list pods": 429, "list nodes": 429},
     "a wildcard resource covers every resource"),
    ({"verb": "create", "resource": "podgroups.scheduling.x-k8s.io", "error_rate": 1.0},
     {"create podgroups": 500}, "a custom resource is named with its group"),
    ({"verb": "create", "resource": "pods", "error_rate": 0.0}, {}, "error_rate 0 fails nothing"),
]


@pytest.mark.parametrize("rule,failing", [c[:2] for c in RULE_CASES], ids=[c[2] for c in RULE_CASES])
async def test_a_rule_fails_exactly_the_requests_it_matches(target, rule, failing):
    target.only_sim(ONLY_SIM)
    r = await target.req("POST", pods_path(target.ns), pod_body("seed"))
    assert r.status == 201, r.body
    await set_faults(target, {"rules": [rule]})
    assert await requests_by_verb(target) == {**ALL_OK, **failing}


@pytest.mark.parametrize("code,reason", [(500, "InternalError"), (502, "BadGateway"),
                                         (503, "ServiceUnavailable"), (504, "Timeout")],
                         ids=["500 is InternalError", "502 is BadGateway", "503 is ServiceUnavailable",
                              "504 is Timeout"])
async def test_injected_errors_are_status_objects(target, code, reason):
    target.only_sim(ONLY_SIM)
    await set_faults(target, {"rules": [{"verb": "create", "resource": "pods", "error_rate": 1.0,
                                         "error_code": code}]})
    r = await target.req("POST", pods_path(target.ns), pod_body("p"))
    assert r.status == code
    assert (r.body["kind"], r.body["status"], r.body["code"], r.body["reason"]) == ("Status", "Failure", code, reason)
    assert r.body["message"]


async def test_throttling_answers_429_with_retry_after(target):
    target.only_sim(ONLY_SIM)
    await set_faults(target, {"rules": [{"verb": "create", "resource": "pods/binding", "throttle_rate": 1.0,
                                         "retry_after": 3}]})
    r = await target.req("POST", f"{pods_path(target.ns)}/x/binding",
                         {"metadata": {"name": "x"}, "target": {"kind": "Node", "name": "n"}})
    assert r.status == 429
    assert r.headers["Retry-After"] == "3"
    assert r.reason == "TooManyRequests"
    assert r.body["details"]["retryAfterSeconds"] == 3


async def test_throttle_rate_fails_about_that_fraction(target):
    target.only_sim(ONLY_SIM)
    await set_faults(target, {"rules": [{"verb": "list", "resource": "pods", "throttle_rate": 0.5}]})
    statuses = [(await target.req("GET", pods_path(target.ns))).status for _ in range(200)]
    assert set(statuses) == {200, 429}
    assert 60 <= statuses.count(429) <= 140  # binomial(200, 0.5): outside this once in ~10^8 runs


async def test_latency_delays_only_matching_requests(target):
    target.only_sim(ONLY_SIM)
    await set_faults(target, {"rules": [{"verb": "list", "resource": "pods", "latency": 0.3}]})
    t0 = time.monotonic()
    assert (await target.req("GET", pods_path(target.ns))).status == 200
    slow = time.monotonic() - t0
    t0 = time.monotonic()
    assert (await target.req("GET", "/api/v1/nodes")).status == 200
    fast = time.monotonic() - t0
    assert slow >= 0.3
    assert fast < 0.2


async def test_watch_drop_interval_cuts_watches(target):
    target.only_sim(ONLY_SIM)
    await set_faults(target, {"watch_drop_interval": 0.3})
    t0 = time.monotonic()
    events = await target.watch(pods_path(target.ns), {"timeoutSeconds": "30"}, timeout=10)
    elapsed = time.monotonic() - t0
    assert events == []
    assert 0.25 <= elapsed < 2  # cut long before its own 30 s timeout


async def test_a_watch_error_fault_fails_the_watch_request(target):
    target.only_sim(ONLY_SIM)
    await set_faults(target, {"rules": [{"verb": "watch", "resource": "pods", "error_rate": 1.0}]})
    r = await target.req("GET", pods_path(target.ns), params={"watch": "true"})
    assert (r.status, r.reason) == (500, "InternalError")
    assert (await target.req("GET", pods_path(target.ns))).status == 200  # a list is not a watch


async def test_faults_change_at_runtime_and_read_back(target):
    target.only_sim(ONLY_SIM)
    assert (await target.req("GET", "/simcluster/faults")).body == {"rules": [], "watch_drop_interval": 0.0}
    config = {"rules": [{"verb": "create", "resource": "pods", "error_rate": 1.0}], "watch_drop_interval": 5}
    put = await set_faults(target, config)
    got = (await target.req("GET", "/simcluster/faults")).body
    assert got == put
    assert got["watch_drop_interval"] == 5.0
    assert got["rules"] == [{"verb": "create", "resource": "pods", "error_rate": 1.0, "error_code": 500,
                             "throttle_rate": 0.0, "retry_after": 1, "latency": 0.0}]
    assert (await target.req("POST", pods_path(target.ns), pod_body("p"))).status == 500
    await set_faults(target, {"rules": []})
    assert (await target.req("POST", pods_path(target.ns), pod_body("p"))).status == 201


BAD_CONFIGS = [
    ({"rules": [{"verb": "create", "resource": "pods", "error_rate": 2}]}, "error_rate", "a rate above 1"),
    ({"rules": [{"verb": "create", "resource": "pods", "throttle_rate": -0.1}]}, "throttle_rate",
     "a negative rate"),
    ({"rules": [{"verb": "create", "resource": "pods", "error_rate": "half"}]}, "error_rate",
     "a rate that is not a number"),
    ({"rules": [{"verb": "create", "resource": "pods", "error_code": 418}]}, "error_code",
     "an error code the stand-in cannot send"),
    ({"rules": [{"verb": "create", "resource": "pods", "latency": -1}]}, "latency", "a negative latency"),
    ({"rules": [{"verb": "create", "resource": "pods", "bogus": 1}]}, "bogus", "an unknown rule field"),
    ({"rules": [{"verb": "crate", "resource": "pods", "error_rate": 1}]}, "verb", "a misspelt verb"),
    ({"rules": [{"verb": "create", "resource": "podz", "error_rate": 1}]}, "resource", "an unknown resource"),
    ({"rules": [{"verb": "create", "resource": ["pods"], "error_rate": 1}]}, "resource",
     "a resource that is not a string"),
    ({"rules": "all"}, "rules", "rules that are not a list"),
    ({"watch_drop_interval": -1}, "watch_drop_interval", "a negative drop interval"),
    ({"watch_drop_interval": "often"}, "watch_drop_interval", "a drop interval that is not a number"),
    ({"surprise": 1}, "surprise", "an unknown top-level field"),
]


@pytest.mark.parametrize("config,field", [c[:2] for c in BAD_CONFIGS], ids=[c[2] for c in BAD_CONFIGS])
async def test_bad_fault_config_is_400_naming_the_field_and_changes_nothing(target, config, field):
    target.only_sim(ONLY_SIM)
    before = await set_faults(target, {"rules": [{"verb": "get", "resource": "nodes", "latency": 0.01}]})
    r = await target.req("PUT", "/simcluster/faults", config)
    assert (r.status, r.reason) == (400, "BadRequest"), r.body
    assert field in r.body["message"]
    assert (await target.req("GET", "/simcluster/faults")).body == before  # all or nothing


@pytest.mark.parametrize("data", [b"{not json", b"[]", b""], ids=["malformed JSON", "a list", "an empty body"])
async def test_fault_config_that_is_not_an_object_is_400(target, data):
    target.only_sim(ONLY_SIM)
    r = await target.req("PUT", "/simcluster/faults", data=data)
    assert (r.status, r.reason) == (400, "BadRequest"), r.body


PARSE_CASES = [
    ("create:pods/binding:error_rate=0.1,error_code=503",
     FaultRule("create", "pods/binding", error_rate=0.1, error_code=503), "error rate and code"),
    ("*:*:throttle_rate=0.05,retry_after=2", FaultRule("*", "*", throttle_rate=0.05, retry_after=2),
     "wildcards with throttling"),
    ("list:pods:latency=0.2", FaultRule("list", "pods", latency=0.2), "latency"),
    ("::latency=1", FaultRule("*", "*", latency=1.0), "empty verb and resource mean any"),
    ("watch:podgroups.scheduling.x-k8s.io:", FaultRule("watch", "podgroups.scheduling.x-k8s.io"),
     "no settings is a rule that does nothing"),
]


@pytest.mark.parametrize("spec,rule", [c[:2] for c in PARSE_CASES], ids=[c[2] for c in PARSE_CASES])
async def test_fault_rule_parses_the_cli_form(spec, rule):
    assert FaultRule.parse(spec) == rule


PARSE_ERRORS = [
    ("create:pods", "expected VERB:RESOURCE:key=value", "a missing settings part"),
    ("create:pods:error_rate", "is not key=value", "a setting without a value"),
    ("create:pods:error_rate=lots", "error_rate='lots' is not a number", "a value that is not a number"),
    ("create:pods:error_code=5xx", "error_code='5xx' is not a number", "an error code that is not a number"),
    ("create:pods:colour=red", "colour", "an unknown setting"),
    ("create:pods:error_rate=1.5", "error_rate", "a rate above 1"),
    ("create:pods:error_code=404", "error_code", "an unsupported error code"),
    ("crate:pods:error_rate=1", "verb", "a misspelt verb"),
]


@pytest.mark.parametrize("spec,message", [c[:2] for c in PARSE_ERRORS], ids=[c[2] for c in PARSE_ERRORS])
async def test_fault_rule_parse_errors_name_the_problem(spec, message):
    with pytest.raises(ValueError) as exc:
        FaultRule.parse(spec)
    assert message in str(exc.value)


async def test_faults_decide_adds_latency_of_every_matching_rule():
    faults = Faults(rules=[FaultRule("list", "*", latency=0.1), FaultRule("*", "pods", latency=0.2),
                           FaultRule("get", "pods", latency=5)])
    latency, err = faults.decide("list", "pods")
    assert latency == pytest.approx(0.3) and err is None


async def test_stats_count_requests_and_objects(target):
    target.only_sim(ONLY_SIM)
    before = (await target.req("GET", "/simcluster/stats")).body
    await target.req("POST", pods_path(target.ns), pod_body("p"))
    after = (await target.req("GET", "/simcluster/stats")).body
    assert after["objects"]["pods"] == before["objects"]["pods"] + 1
    assert after["requests"] >= before["requests"] + 2
    assert int(after["resourceVersion"]) > int(before["resourceVersion"])
