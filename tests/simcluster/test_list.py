"""Lists: selectors, namespaces, pagination and resourceVersions, as kube-apiserver serves them.

Every assertion here holds against the real server too (``target`` runs
each test on both). Where the stand-in can say more than the real server
can be pinned to (the exact global resourceVersion), the test says so with
``target.only_sim``.

Upstream behaviour mirrored:

* selectors: ``labels.Parse`` / ``fields.ParseSelector`` semantics; ``!=``
  and ``notin`` match objects that lack the key;
* pagination (``storage/etcd3/store.go`` GetList, and the watch cache's
  snapshots since 1.34): a continue token pins the first page's revision,
  so later pages show the objects as they were then; ``remainingItemCount``
  is set for unfiltered lists that have more;
* ``resourceVersionMatch=Exact`` reads the past; invalid list options are a
  422 Invalid ``ListOptions.meta.k8s.io`` (``handlers/get.go`` ListResource).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.simcluster.conftest import Target, pod_body

pytestmark = pytest.mark.asyncio(loop_scope="session")


def pods_path(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/pods"


async def without_kubelets(target: Target) -> None:
    """The real test server has no kubelets: stop the stand-in's so bound pods stay as written."""
    if target.sim is not None and target.sim.node_agent is not None:
        await target.sim.node_agent.stop()


async def create_pod(target: Target, name: str, ns: str | None = None, **kw: Any) -> dict[str, Any]:
    r = await target.req("POST", pods_path(ns or target.ns), pod_body(name, **kw))
    assert r.status == 201, r.body
    return r.body


async def list_pods(target: Target, ns: str | None = None, **params: str) -> dict[str, Any]:
    path = "/api/v1/pods" if ns == "" else pods_path(ns or target.ns)  # "": all namespaces
    r = await target.req("GET", path, params=params or None)
    assert r.status == 200, r.body
    return r.body


def names(lst: dict[str, Any]) -> list[str]:
    return [i["metadata"]["name"] for i in lst["items"]]


async def seed_selector_pods(target: Target) -> None:
    """Four pods spanning the selector cases.

    a: tier=web env=prod, on node-a, Running      b: tier=db env=dev, on node-b
    c: tier=web (no env), unscheduled               d: no labels, other-scheduler
    """
    await without_kubelets(target)
    await create_pod(target, "a", labels={"tier": "web", "env": "prod"}, nodeName="node-a")
    await create_pod(target, "b", labels={"tier": "db", "env": "dev"}, nodeName="node-b")
    await create_pod(target, "c", labels={"tier": "web"})
    await create_pod(target, "d", schedulerName="other-scheduler")
    r = await target.req("GET", f"{pods_path(target.ns)}/a")
    pod = r.body
    pod["status"]["phase"] = "Running"
    r = await target.req("PUT", f"{pods_path(target.ns)}/a/status", pod)
    assert r.status == 200, r.body


LABEL_CASES = [
    ("tier=web", {"a", "c"}, "equals selects pods with that value"),
    ("tier==web", {"a", "c"}, "double equals is the same as equals"),
    ("env!=prod", {"b", "c", "d"}, "not-equals also selects pods without the key"),
    ("env in (prod,dev)", {"a", "b"}, "in selects any listed value"),
    ("env notin (prod)", {"b", "c", "d"}, "notin also selects pods without the key"),
    ("env", {"a", "b"}, "a bare key selects pods that have it"),
    ("!env", {"c", "d"}, "a negated key selects pods that lack it"),
    ("tier=web,env=prod", {"a"}, "comma-separated requirements must all hold"),
    ("tier=web,!env", {"c"}, "equality and absence combine"),
    ("tier in (web),env notin (dev)", {"a", "c"}, "in and notin combine"),
    ("tier=nope", set(), "no pod has the value"),
]


@pytest.mark.parametrize("selector,expected", [c[:2] for c in LABEL_CASES], ids=[c[2] for c in LABEL_CASES])
async def test_label_selector_filters_list(target, selector, expected):
    await seed_selector_pods(target)
    lst = await list_pods(target, labelSelector=selector)
    assert set(names(lst)) == expected


FIELD_CASES = [
    ("metadata.name=b", {"b"}, "metadata.name picks one pod"),
    ("metadata.name!=b", {"a", "c", "d"}, "metadata.name negated excludes one pod"),
    ("metadata.namespace={ns}", {"a", "b", "c", "d"}, "metadata.namespace selects the whole namespace"),
    ("metadata.namespace=elsewhere", set(), "metadata.namespace of another namespace selects nothing"),
    ("spec.nodeName=node-a", {"a"}, "spec.nodeName selects the pods bound to a node"),
    ("spec.nodeName=", {"c", "d"}, "an empty spec.nodeName selects unscheduled pods"),
    ("spec.nodeName!=", {"a", "b"}, "a non-empty spec.nodeName selects bound pods"),
    ("spec.schedulerName=other-scheduler", {"d"}, "spec.schedulerName selects a scheduler's pods"),
    ("spec.schedulerName=default-scheduler", {"a", "b", "c"}, "the defaulted scheduler name is selectable"),
    ("status.phase=Running", {"a"}, "status.phase selects by phase"),
    ("status.phase!=Running", {"b", "c", "d"}, "status.phase negated"),
    ("spec.nodeName=,spec.schedulerName=default-scheduler", {"c"}, "field requirements must all hold"),
]


@pytest.mark.parametrize("selector,expected", [c[:2] for c in FIELD_CASES], ids=[c[2] for c in FIELD_CASES])
async def test_field_selector_filters_list(target, selector, expected):
    await seed_selector_pods(target)
    lst = await list_pods(target, fieldSelector=selector.format(ns=target.ns))
    assert set(names(lst)) == expected


COMBINED_CASES = [
    ("tier=web", "spec.nodeName=", {"c"}, "web pods that are unscheduled"),
    ("tier=web", "status.phase=Running", {"a"}, "web pods that run"),
    ("env", "spec.nodeName=", set(), "no labelled env pod is unscheduled"),
]


@pytest.mark.parametrize("labels,fields,expected", [c[:3] for c in COMBINED_CASES],
                         ids=[c[3] for c in COMBINED_CASES])
async def test_label_and_field_selectors_combine(target, labels, fields, expected):
    await seed_selector_pods(target)
    lst = await list_pods(target, labelSelector=labels, fieldSelector=fields)
    assert set(names(lst)) == expected


@pytest.mark.parametrize("params,reason_word", [
    ({"labelSelector": "tier in web"}, "unable to parse requirement"),
    ({"fieldSelector": "spec.nonsense=x"}, "field label not supported: spec.nonsense"),
], ids=["a malformed label selector is 400", "an unsupported field is 400"])
async def test_bad_selector_is_bad_request(target, params, reason_word):
    r = await target.req("GET", pods_path(target.ns), params=params)
    assert r.status == 400, r.body
    assert r.reason == "BadRequest"
    assert reason_word in r.body["message"]


async def test_namespaced_list_sees_one_namespace_and_cluster_list_sees_all(target):
    other = f"{target.ns}-b"
    r = await target.req("POST", "/api/v1/namespaces", {"metadata": {"name": other}})
    assert r.status == 201, r.body
    run = {"run": target.ns}
    await create_pod(target, "here", labels=run)
    await create_pod(target, "there", ns=other, labels=run)

    assert names(await list_pods(target, labelSelector=f"run={target.ns}")) == ["here"]
    assert names(await list_pods(target, ns=other, labelSelector=f"run={target.ns}")) == ["there"]
    everywhere = await list_pods(target, ns="", labelSelector=f"run={target.ns}")
    assert sorted((i["metadata"]["namespace"], i["metadata"]["name"]) for i in everywhere["items"]) == \
        sorted([(target.ns, "here"), (other, "there")])
    assert everywhere["kind"] == "PodList" and everywhere["apiVersion"] == "v1"


async def test_list_of_a_namespace_that_does_not_exist_is_empty(target):
    # a list is a range read: no 404, unlike a get (storage returns an empty range)
    lst = await list_pods(target, ns=f"{target.ns}-missing")
    assert lst["items"] == []


PAGE_CASES = [
    (3, {}, [f"p{i}" for i in range(7)], "pages of three walk seven pods"),
    (7, {}, [f"p{i}" for i in range(7)], "a limit equal to the size gives one page"),
    (1, {}, [f"p{i}" for i in range(7)], "pages of one walk seven pods"),
    (2, {"labelSelector": "even=true"}, ["p0", "p2", "p4", "p6"], "a selector filters across pages"),
    (2, {"fieldSelector": "metadata.name!=p3"}, ["p0", "p1", "p2", "p4", "p5", "p6"],
     "a field selector filters across pages"),
]


@pytest.mark.parametrize("limit,params,expected", [c[:3] for c in PAGE_CASES], ids=[c[3] for c in PAGE_CASES])
async def test_limit_and_continue_walk_every_item_exactly_once(target, limit, params, expected):
    for i in range(7):
        await create_pod(target, f"p{i}", labels={"even": str(i % 2 == 0).lower()})
    seen: list[str] = []
    cont = ""
    pages = 0
    first_rv = None
    while True:
        q = {"limit": str(limit), **params}
        if cont:
            q["continue"] = cont
        page = await list_pods(target, **q)
        pages += 1
        assert len(page["items"]) <= limit
        first_rv = first_rv or page["metadata"]["resourceVersion"]
        assert page["metadata"]["resourceVersion"] == first_rv  # every page reports the snapshot's rv
        seen += names(page)
        cont = page["metadata"].get("continue", "")
        if not cont:
            assert "remainingItemCount" not in page["metadata"]
            break
        assert pages < 20
    assert seen == expected  # in key order, each once


async def test_remaining_item_count_counts_what_later_pages_hold(target):
    for i in range(7):
        await create_pod(target, f"p{i}")
    first = await list_pods(target, limit="3")
    assert first["metadata"]["remainingItemCount"] == 4
    second = await list_pods(target, limit="3", **{"continue": first["metadata"]["continue"]})
    assert second["metadata"]["remainingItemCount"] == 1
    last = await list_pods(target, limit="3", **{"continue": second["metadata"]["continue"]})
    assert names(last) == ["p6"]
    assert "continue" not in last["metadata"] or not last["metadata"]["continue"]


async def test_continue_token_pins_the_first_pages_snapshot(target):
    created = {}
    for i in range(6):
        created[f"p{i}"] = await create_pod(target, f"p{i}", labels={"v": "1"})
    first = await list_pods(target, limit="2")
    snap_rv = first["metadata"]["resourceVersion"]
    assert names(first) == ["p0", "p1"]

    # between pages: a create that sorts into a later page, a delete, and a change
    await create_pod(target, "p2a")
    await create_pod(target, "p9")
    r = await target.req("DELETE", f"{pods_path(target.ns)}/p4")
    assert r.status == 200, r.body
    r = await target.req("PATCH", f"{pods_path(target.ns)}/p3", {"metadata": {"labels": {"v": "2"}}},
                         content_type="application/merge-patch+json")
    assert r.status == 200, r.body
    p3_now = r.body

    rest: list[dict[str, Any]] = []
    cont = first["metadata"]["continue"]
    while cont:
        page = await list_pods(target, limit="2", **{"continue": cont})
        assert page["metadata"]["resourceVersion"] == snap_rv
        rest += page["items"]
        cont = page["metadata"].get("continue", "")
    by_name = {i["metadata"]["name"]: i for i in rest}
    assert list(by_name) == ["p2", "p3", "p4", "p5"]  # no p2a, no p9; p4 still there
    for name, item in by_name.items():
        # items carry the versions they had at the snapshot
        assert item["metadata"]["resourceVersion"] == created[name]["metadata"]["resourceVersion"]
        assert int(item["metadata"]["resourceVersion"]) <= int(snap_rv)
    assert by_name["p3"]["metadata"]["labels"] == {"v": "1"}

    fresh = await list_pods(target)
    assert names(fresh) == ["p0", "p1", "p2", "p2a", "p3", "p5", "p9"]
    assert {i["metadata"]["name"]: i for i in fresh["items"]}["p3"]["metadata"]["resourceVersion"] == \
        p3_now["metadata"]["resourceVersion"]


async def test_continue_token_that_is_garbage_is_bad_request(target):
    r = await target.req("GET", pods_path(target.ns), params={"limit": "1", "continue": "not-a-token"})
    assert r.status == 400, r.body
    assert r.reason == "BadRequest"


async def test_exact_resource_version_lists_the_past(target):
    await create_pod(target, "x", labels={"v": "1"})
    then = (await list_pods(target))["metadata"]["resourceVersion"]
    r = await target.req("PATCH", f"{pods_path(target.ns)}/x", {"metadata": {"labels": {"v": "2"}}},
                         content_type="application/merge-patch+json")
    assert r.status == 200, r.body
    await create_pod(target, "y")

    past = await list_pods(target, resourceVersion=then, resourceVersionMatch="Exact")
    assert past["metadata"]["resourceVersion"] == then
    assert names(past) == ["x"]
    assert past["items"][0]["metadata"]["labels"] == {"v": "1"}

    now = await list_pods(target)
    assert names(now) == ["x", "y"]
    assert now["items"][0]["metadata"]["labels"] == {"v": "2"}


async def test_exact_resource_version_before_an_object_existed_omits_it(target):
    before = (await list_pods(target))["metadata"]["resourceVersion"]
    await create_pod(target, "later")
    past = await list_pods(target, resourceVersion=before, resourceVersionMatch="Exact")
    assert past["items"] == []


async def test_list_at_resource_version_zero_serves_the_cache(target):
    await create_pod(target, "z")
    # rv "0" may be served from a slightly stale cache on the real server: wait for it
    for _ in range(50):
        lst = await list_pods(target, resourceVersion="0")
        if names(lst) == ["z"]:
            break
        await asyncio.sleep(0.1)
    assert names(lst) == ["z"]
    assert int(lst["metadata"]["resourceVersion"]) > 0


async def test_list_resource_version_is_global_across_resources(target):
    pod = await create_pod(target, "g")
    pod_rv = int(pod["metadata"]["resourceVersion"])
    pods = await list_pods(target)
    assert int(pods["metadata"]["resourceVersion"]) >= pod_rv
    assert all(int(i["metadata"]["resourceVersion"]) <= int(pods["metadata"]["resourceVersion"])
               for i in pods["items"])
    # one revision for all resources (etcd's): a nodes list is at least as new as the pod write
    r = await target.req("GET", "/api/v1/nodes")
    assert r.status == 200, r.body
    assert int(r.body["metadata"]["resourceVersion"]) >= pod_rv


async def test_list_resource_version_equals_the_stores_global_resource_version(target):
    target.only_sim("the real server's global revision moves on its own (leases, events)")
    await create_pod(target, "g")
    for path in (pods_path(target.ns), "/api/v1/nodes", "/api/v1/namespaces"):
        r = await target.req("GET", path)
        assert r.body["metadata"]["resourceVersion"] == str(target.sim.store.rv)


INVALID_LIST_OPTIONS = [
    ({"resourceVersionMatch": "Exact"},
     "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
     "Exact without a resourceVersion"),
    ({"resourceVersionMatch": "Exact", "resourceVersion": "0"},
     'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
     "Exact at resourceVersion 0"),
    ({"resourceVersionMatch": "Sometimes", "resourceVersion": "1"},
     'resourceVersionMatch: Unsupported value: "Sometimes"',
     "an unknown resourceVersionMatch"),
    ({"sendInitialEvents": "true"},
     "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
     "sendInitialEvents on a list"),
]


@pytest.mark.parametrize("params,message", [c[:2] for c in INVALID_LIST_OPTIONS],
                         ids=[c[2] for c in INVALID_LIST_OPTIONS])
async def test_invalid_list_options_are_422_invalid_list_options(target, params, message):
    r = await target.req("GET", pods_path(target.ns), params=params)
    assert r.status == 422, r.body
    assert r.reason == "Invalid"
    assert r.body["message"].startswith('ListOptions.meta.k8s.io "" is invalid: ')
    assert message in r.body["message"]
    assert r.body["details"]["kind"] == "ListOptions"
    assert r.body["details"]["group"] == "meta.k8s.io"


async def test_continue_token_and_exact_list_older_than_the_window_are_410_expired(target):
    target.only_sim("the real server forgets revisions only when etcd compacts (every 5 minutes)")
    for i in range(3):
        await create_pod(target, f"p{i}")
    first = await list_pods(target, limit="1")
    then = first["metadata"]["resourceVersion"]
    await create_pod(target, "p9")
    r = await target.req("POST", "/simcluster/compact")
    assert r.status == 200, r.body

    r = await target.req("GET", pods_path(target.ns), params={"limit": "1", "continue": first["metadata"]["continue"]})
    assert (r.status, r.reason) == (410, "Expired"), r.body
    assert "continue parameter is too old" in r.body["message"]
    r = await target.req("GET", pods_path(target.ns), params={"resourceVersion": then, "resourceVersionMatch": "Exact"})
    assert (r.status, r.reason) == (410, "Expired"), r.body
    # a fresh list still works and sees everything
    assert names(await list_pods(target)) == ["p0", "p1", "p2", "p9"]
