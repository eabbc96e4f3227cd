"""Watches, as kube-apiserver's watch cache serves them.

Each test runs against the stand-in and, when one is available, a real
kube-apiserver; assertions that only the stand-in can be driven to (forced
compaction, a tiny watch window, a reader that stalls) are guarded with
``target.only_sim`` and say why.

Upstream behaviour mirrored (``staging/src/k8s.io/apiserver/pkg/storage/cacher``):

* ``cache_watcher.go`` convertToWatchEvent: an object that starts matching a
  selector arrives as ADDED; one that stops matching arrives as DELETED with
  its *previous* content stamped with the event's resourceVersion;
* an unset or "0" resourceVersion replays the current objects as ADDED;
* bookmarks (``allowWatchBookmarks``) carry only a resourceVersion, every
  minute and two seconds before the watch's deadline upstream (every
  ``bookmark_interval`` in the stand-in; the test fixture uses 1 s);
* ``sendInitialEvents`` ends its replay with a bookmark annotated
  ``k8s.io/initial-events-end``;
* a resourceVersion older than the cache is answered inside a 200 stream
  with one ERROR event holding a 410 Expired Status (the cacher's error
  watcher), which a reflector turns into a relist.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import orjson
import pytest

from bench.simcluster import SimCluster
from bench.simcluster.resources import lookup
from tests.simcluster.conftest import Target, pod_body

pytestmark = pytest.mark.asyncio(loop_scope="session")

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
LEASES = lookup("coordination.k8s.io", "v1", "leases")


def pods_path(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/pods"


def leases_path(ns: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"


def lease_body(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "labels": labels or {}}, "spec": {"holderIdentity": "a"}}


async def without_kubelets(target: Target) -> None:
    """The real test server has no kubelets: stop the stand-in's so pods change only when the test says."""
    if target.sim is not None and target.sim.node_agent is not None:
        await target.sim.node_agent.stop()


async def ok(resp_coro, status: int = 200) -> Any:
    r = await resp_coro
    assert r.status == status, r.body
    return r.body


async def list_rv(target: Target, path: str) -> str:
    return (await ok(target.req("GET", path)))["metadata"]["resourceVersion"]


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in events]


def rvs(events: list[dict[str, Any]]) -> list[int]:
    return [int(e["object"]["metadata"]["resourceVersion"]) for e in events]


def start_watch(target: Target, path: str, params: dict[str, str], **kw: Any) -> asyncio.Task:
    return asyncio.create_task(target.watch(path, params, **kw))


async def until_connected() -> None:
    # the stand-in and the real server both register a watch within a few ms of the request
    await asyncio.sleep(0.3)


# ----------------------------------------------------------------------------- ordering

async def _pod_changes(target: Target) -> None:
    p = pods_path(target.ns)
    await ok(target.req("POST", p, pod_body("a")), 201)
    await ok(target.req("PATCH", f"{p}/a", {"metadata": {"labels": {"step": "2"}}},
                        content_type="application/merge-patch+json"))
    await ok(target.req("POST", p, pod_body("b")), 201)
    await ok(target.req("DELETE", f"{p}/b"))


async def _lease_changes(target: Target) -> None:
    p = leases_path(target.ns)
    await ok(target.req("POST", p, lease_body("a")), 201)
    await ok(target.req("PATCH", f"{p}/a", {"spec": {"holderIdentity": "b"}},
                        content_type="application/merge-patch+json"))
    await ok(target.req("POST", p, lease_body("b")), 201)
    await ok(target.req("DELETE", f"{p}/b"))


ORDER_CASES = [
    (pods_path, _pod_changes,
     # a pod delete writes deletionTimestamp first (pods delete gracefully even at grace 0)
     [("ADDED", "a"), ("MODIFIED", "a"), ("ADDED", "b"), ("MODIFIED", "b"), ("DELETED", "b")],
     "pods: a delete is a MODIFIED with deletionTimestamp, then DELETED"),
    (leases_path, _lease_changes,
     [("ADDED", "a"), ("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "b")],
     "leases: a delete is one DELETED"),
]


@pytest.mark.parametrize("path,changes,expected", [c[:3] for c in ORDER_CASES], ids=[c[3] for c in ORDER_CASES])
async def test_watch_from_a_lists_resource_version_sees_exactly_the_later_changes_in_order(
        target, path, changes, expected):
    await ok(target.req("POST", path(target.ns), lease_body("old") if path is leases_path else pod_body("old")),
             201)
    rv = await list_rv(target, path(target.ns))
    watch = start_watch(target, path(target.ns), {"resourceVersion": rv}, until=len(expected) + 1,
                        timeout=1.5)  # one more than expected: waits out the timeout to prove nothing extra
    await until_connected()
    await changes(target)
    events = await watch
    assert summary(events) == expected  # nothing from before the list ("old"), nothing extra
    seen = rvs(events)
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    assert seen[0] > int(rv)


async def test_pod_delete_event_carries_its_deletion_marks(target):
    await without_kubelets(target)
    p = pods_path(target.ns)
    await ok(target.req("POST", p, pod_body("gone", labels={"v": "1"})), 201)
    rv = await list_rv(target, p)
    await ok(target.req("DELETE", f"{p}/gone"))
    events = await target.watch(p, {"resourceVersion": rv}, until=2, timeout=3)
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]
    marked, deleted = events[0]["object"], events[1]["object"]
    assert marked["metadata"]["deletionTimestamp"]
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 0
    assert marked["metadata"]["generation"] == 2  # BeforeDelete bumps generation on the first delete
    assert deleted["metadata"]["labels"] == {"v": "1"}  # DELETED carries the last state
    assert deleted["metadata"]["deletionTimestamp"] == marked["metadata"]["deletionTimestamp"]
    assert int(deleted["metadata"]["resourceVersion"]) > int(marked["metadata"]["resourceVersion"])


async def test_deleted_event_carries_the_last_state_at_the_deletes_resource_version(target):
    p = leases_path(target.ns)
    await ok(target.req("POST", p, lease_body("l", {"v": "1"})), 201)
    patched = await ok(target.req("PATCH", f"{p}/l", {"metadata": {"labels": {"v": "2"}}},
                                  content_type="application/merge-patch+json"))
    rv = await list_rv(target, p)
    await ok(target.req("DELETE", f"{p}/l"))
    events = await target.watch(p, {"resourceVersion": rv}, until=1, timeout=3)
    assert summary(events) == [("DELETED", "l")]
    obj = events[0]["object"]
    assert obj["metadata"]["labels"] == {"v": "2"}
    assert obj["spec"] == patched["spec"]
    assert int(obj["metadata"]["resourceVersion"]) > int(patched["metadata"]["resourceVersion"])


# ----------------------------------------------------------------------------- initial state

@pytest.mark.parametrize("params", [{}, {"resourceVersion": "0"}],
                         ids=["an unset resourceVersion replays current objects as ADDED",
                              "resourceVersion 0 replays current objects as ADDED"])
async def test_watch_without_a_resource_version_replays_current_objects_first(target, params):
    p = leases_path(target.ns)
    for name in ("x", "y", "z"):
        await ok(target.req("POST", p, lease_body(name)), 201)
    watch = start_watch(target, p, params, until=4, timeout=3)
    await until_connected()
    await ok(target.req("POST", p, lease_body("new")), 201)
    events = await watch
    assert [e["type"] for e in events] == ["ADDED"] * 4
    assert {n for _, n in summary(events[:3])} == {"x", "y", "z"}
    assert summary(events)[3] == ("ADDED", "new")


# ----------------------------------------------------------------------------- filtering

async def test_namespaced_watch_sees_only_its_namespace(target):
    other = f"{target.ns}-b"
    await ok(target.req("POST", "/api/v1/namespaces", {"metadata": {"name": other}}), 201)
    rv = await list_rv(target, leases_path(target.ns))
    here = start_watch(target, leases_path(target.ns), {"resourceVersion": rv}, until=2, timeout=1.2)
    everywhere = start_watch(target, "/apis/coordination.k8s.io/v1/leases",
                             {"resourceVersion": rv, "labelSelector": f"run={target.ns}"}, until=2, timeout=3)
    await until_connected()
    await ok(target.req("POST", leases_path(other), lease_body("there", {"run": target.ns})), 201)
    await ok(target.req("POST", leases_path(target.ns), lease_body("here", {"run": target.ns})), 201)
    assert summary(await here) == [("ADDED", "here")]
    assert summary(await everywhere) == [("ADDED", "there"), ("ADDED", "here")]


async def test_selector_transitions_arrive_as_added_and_deleted(target):
    p = leases_path(target.ns)
    rv = await list_rv(target, p)
    watch = start_watch(target, p, {"resourceVersion": rv, "labelSelector": "app=x"}, until=4, timeout=3)
    await until_connected()
    await ok(target.req("POST", p, lease_body("one", {"app": "x"})), 201)       # ADDED
    await ok(target.req("POST", p, lease_body("two", {"app": "y"})), 201)       # not seen
    left = await ok(target.req("PATCH", f"{p}/one", {"metadata": {"labels": {"app": "y"}}},
                               content_type="application/merge-patch+json"))   # DELETED
    await ok(target.req("PATCH", f"{p}/two", {"metadata": {"labels": {"app": "x"}}},
                        content_type="application/merge-patch+json"))          # ADDED
    await ok(target.req("PATCH", f"{p}/two", {"spec": {"holderIdentity": "c"}},
                        content_type="application/merge-patch+json"))          # MODIFIED
    events = await watch
    assert summary(events) == [("ADDED", "one"), ("DELETED", "one"), ("ADDED", "two"), ("MODIFIED", "two")]
    gone = events[1]["object"]
    # the watch cache sends the previous content (it still matched) at the change's resourceVersion
    assert gone["metadata"]["labels"] == {"app": "x"}
    assert gone["metadata"]["resourceVersion"] == left["metadata"]["resourceVersion"]
    assert events[2]["object"]["metadata"]["labels"] == {"app": "x"}


async def test_binding_a_pod_removes_it_from_an_unscheduled_pods_watch(target):
    # what a scheduler's informer does: watch spec.nodeName= and see a bound pod leave
    await without_kubelets(target)
    p = pods_path(target.ns)
    rv = await list_rv(target, p)
    watch = start_watch(target, p, {"resourceVersion": rv, "fieldSelector": "spec.nodeName="}, until=2, timeout=3)
    await until_connected()
    await ok(target.req("POST", p, pod_body("pending")), 201)
    await ok(target.req("POST", f"{p}/pending/binding",
                        {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "pending"},
                         "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}}), 201)
    bound = await ok(target.req("GET", f"{p}/pending"))
    events = await watch
    assert summary(events) == [("ADDED", "pending"), ("DELETED", "pending")]
    gone = events[1]["object"]
    assert not gone["spec"].get("nodeName")
    assert gone["metadata"]["resourceVersion"] == bound["metadata"]["resourceVersion"]


# ----------------------------------------------------------------------------- bookmarks and timeouts

async def test_watch_ends_after_timeout_seconds(target):
    started = time.monotonic()
    events = await target.watch(leases_path(target.ns), {"timeoutSeconds": "1"}, timeout=10)
    elapsed = time.monotonic() - started
    assert events == []
    assert 0.8 <= elapsed < 5


async def test_bookmark_resource_version_resumes_a_watch_with_nothing_lost(target):
    p = leases_path(target.ns)
    rv = await list_rv(target, p)
    # upstream sends a bookmark 2 s before the deadline; the stand-in every second and at the deadline
    watch = start_watch(target, p, {"resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": "3"},
                        timeout=10)
    await until_connected()
    await ok(target.req("POST", p, lease_body("before")), 201)
    events = await watch
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks, summary(events)
    bm = bookmarks[-1]["object"]
    assert bm["kind"] == "Lease" and bm["apiVersion"] == "coordination.k8s.io/v1"
    assert set(bm["metadata"]) <= {"resourceVersion", "creationTimestamp", "annotations"}
    assert [e["type"] for e in events if e["type"] != "BOOKMARK"] == ["ADDED"]
    bm_rv = int(bm["metadata"]["resourceVersion"])
    before = [e for e in events if e["type"] == "ADDED"][0]
    assert int(before["object"]["metadata"]["resourceVersion"]) <= bm_rv

    await ok(target.req("POST", p, lease_body("after")), 201)
    resumed = await target.watch(p, {"resourceVersion": str(bm_rv)}, until=1, timeout=3)
    assert summary(resumed) == [("ADDED", "after")]


async def test_send_initial_events_ends_the_replay_with_an_annotated_bookmark(target):
    p = leases_path(target.ns)
    for name in ("x", "y"):
        await ok(target.req("POST", p, lease_body(name)), 201)
    watch = start_watch(target, p, {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan",
                                    "allowWatchBookmarks": "true"}, timeout=5,
                        stop=lambda e: e["type"] == "ADDED" and e["object"]["metadata"]["name"] == "later")
    await until_connected()
    await asyncio.sleep(0.2)
    later = await ok(target.req("POST", p, lease_body("later")), 201)
    events = await watch
    assert {n for _, n in summary(events[:2])} == {"x", "y"}
    assert [e["type"] for e in events[:2]] == ["ADDED", "ADDED"]
    end = events[2]
    assert end["type"] == "BOOKMARK"
    assert end["object"]["metadata"]["annotations"] == {INITIAL_EVENTS_END: "true"}
    assert int(end["object"]["metadata"]["resourceVersion"]) < int(later["metadata"]["resourceVersion"])
    # the real server may send its periodic bookmarks in between (seen under load); only the first is annotated
    rest = events[3:]
    assert [s for s in summary(rest) if s[0] != "BOOKMARK"] == [("ADDED", "later")]
    assert all(not (e["object"]["metadata"].get("annotations") or {}) for e in rest if e["type"] == "BOOKMARK")


INVALID_WATCH_OPTIONS = [
    ({"resourceVersionMatch": "NotOlderThan", "resourceVersion": "1"},
     "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
     "resourceVersionMatch without sendInitialEvents"),
    ({"sendInitialEvents": "true", "allowWatchBookmarks": "true"},
     "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
     "sendInitialEvents without resourceVersionMatch"),
]


@pytest.mark.parametrize("params,message", [c[:2] for c in INVALID_WATCH_OPTIONS],
                         ids=[c[2] for c in INVALID_WATCH_OPTIONS])
async def test_invalid_watch_options_are_422_invalid_list_options(target, params, message):
    r = await target.req("GET", leases_path(target.ns), params={"watch": "true", **params})
    assert r.status == 422, r.body
    assert r.reason == "Invalid"
    assert r.body["details"]["kind"] == "ListOptions"
    assert r.body["details"]["group"] == "meta.k8s.io"
    assert message in r.body["message"]


# ----------------------------------------------------------------------------- history and slow readers

async def _raw_watch(url: str, path: str, params: dict[str, str], timeout: float = 5) -> tuple[int, list[dict]]:
    async with aiohttp.ClientSession() as s:
        async with s.get(url + path, params={"watch": "true", **params},
                         timeout=aiohttp.ClientTimeout(total=timeout)) as r:
            return r.status, [orjson.loads(line) for line in (await r.read()).splitlines() if line.strip()]


def _assert_expired(status: int, events: list[dict]) -> None:
    # the cacher answers inside the stream: 200, then one ERROR event with a 410 Expired Status
    assert status == 200
    assert len(events) == 1, events
    assert events[0]["type"] == "ERROR"
    st = events[0]["object"]
    assert (st["kind"], st["status"], st["code"], st["reason"]) == ("Status", "Failure", 410, "Expired")
    assert "too old resource version" in st["message"]


async def test_watch_from_a_compacted_resource_version_gets_410_expired(target):
    target.only_sim("the real server forgets history only when etcd compacts (every 5 minutes); "
                    "the stand-in forgets it on POST /simcluster/compact")
    p = leases_path(target.ns)
    await ok(target.req("POST", p, lease_body("a")), 201)
    rv = await list_rv(target, p)
    await ok(target.req("POST", p, lease_body("b")), 201)
    await ok(target.req("POST", "/simcluster/compact"))
    status, events = await _raw_watch(target.url, p, {"resourceVersion": str(int(rv) - 1)})
    _assert_expired(status, events)
    # a relist and a watch from its resourceVersion work again
    fresh = await list_rv(target, p)
    watch = start_watch(target, p, {"resourceVersion": fresh}, until=1, timeout=3)
    await until_connected()
    await ok(target.req("POST", p, lease_body("c")), 201)
    assert summary(await watch) == [("ADDED", "c")]


async def test_watch_from_beyond_a_small_watch_window_gets_410_expired(target):
    target.only_sim("the real watch cache's window is sized by the server, not by the test")
    async with SimCluster(watch_window=8, agent=None) as c:
        leases = LEASES
        first = c.store.create(leases, "default", lease_body("l0"))
        for i in range(1, 30):
            c.store.create(leases, "default", lease_body(f"l{i}"))
        status, events = await _raw_watch(c.url, leases_path("default"), {"resourceVersion": str(first.rv)})
        _assert_expired(status, events)
        # a resourceVersion inside the window still resumes
        recent = c.store.rv - 3
        status, events = await _raw_watch(c.url, leases_path("default"),
                                          {"resourceVersion": str(recent), "timeoutSeconds": "1"})
        assert status == 200
        assert summary(events) == [("ADDED", "l27"), ("ADDED", "l28"), ("ADDED", "l29")]


async def test_a_watcher_that_stops_reading_is_dropped_and_memory_stays_bounded(target):
    target.only_sim("drives the stand-in's store directly and inspects its watch log")
    window = 20
    async with SimCluster(watch_window=window, agent=None) as c:
        leases = LEASES
        table = c.store.table(leases)
        c.store.create(leases, "default", lease_body("big"))
        start_rv = c.store.rv
        blob = "x" * 200_000  # 200 kB per event: the socket buffers fill long before 300 events
        async with aiohttp.ClientSession() as s:
            r = await s.get(f"{c.url}{leases_path('default')}",
                            params={"watch": "true", "resourceVersion": str(start_rv)},
                            timeout=aiohttp.ClientTimeout(total=30))
            assert r.status == 200
            # the client reads nothing while 300 large events happen
            for i in range(300):
                obj = c.store.get_obj(leases, "default", "big")
                obj["metadata"]["annotations"] = {"i": str(i), "blob": blob}
                c.store.update(leases, "default", "big", obj)
                assert len(table.log) <= window + (window >> 2)  # the server keeps no more than the window
                await asyncio.sleep(0)
            # now it reads: it gets what was already on its way, then the server ends the stream
            got = [orjson.loads(line) for line in (await r.read()).splitlines() if line.strip()]
            r.release()
        assert 0 < len(got) < 300, "the stalled watcher was not dropped"
        seen = rvs(got)
        assert seen == sorted(seen) and seen[0] == start_rv + 1
        assert seen == list(range(start_rv + 1, start_rv + 1 + len(got)))  # a prefix: nothing skipped
        # resuming from the last delivered resourceVersion works if it is still in the window, else 410
        status, events = await _raw_watch(c.url, leases_path("default"),
                                          {"resourceVersion": str(seen[-1]), "timeoutSeconds": "1"})
        assert status == 200
        if seen[-1] < table.window_start:
            _assert_expired(status, events)
        else:
            assert rvs(events) == list(range(seen[-1] + 1, c.store.rv + 1))


# ----------------------------------------------------------------------------- volume

async def test_five_thousand_events_reach_one_watch_in_order_with_none_lost(target):
    p = leases_path(target.ns)
    rv = await list_rv(target, p)
    n = 5000
    watch = start_watch(target, p, {"resourceVersion": rv}, until=n, timeout=45)
    await until_connected()
    sem = asyncio.Semaphore(32)

    async def create(i: int) -> None:
        async with sem:
            await ok(target.req("POST", p, lease_body(f"l{i:04d}")), 201)

    await asyncio.gather(*(create(i) for i in range(n)))
    events = await watch
    assert len(events) == n
    assert {e["type"] for e in events} == {"ADDED"}
    assert {e["object"]["metadata"]["name"] for e in events} == {f"l{i:04d}" for i in range(n)}
    seen = rvs(events)
    assert all(a < b for a, b in zip(seen, seen[1:]))
