"""The store's write hooks: observers see every write and its outcome, admissions can refuse one.

Integration tests use these to see binds and 409s as they happen, and to
make the API refuse chosen writes. A hook is an in-process facility, not an
API behaviour, so these tests run against the store alone (and once through
the HTTP layer, to show that requests from clients reach the hooks too).
"""

from __future__ import annotations

import json
from typing import Any, Callable

import aiohttp
import pytest

from bench.simcluster import SimCluster
from bench.simcluster import errors
from bench.simcluster.resources import lookup
from bench.simcluster.store import Entry, Store

PODS = lookup("", "v1", "pods")
NODES = lookup("", "v1", "nodes")
PODGROUPS = lookup("scheduling.x-k8s.io", "v1alpha1", "podgroups")
EVENTS_V1 = lookup("events.k8s.io", "v1", "events")
NS = "default"
MERGE = "application/merge-patch+json"


def pod(name: str = "", **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, **meta}, "spec": {"containers": [{"name": "c", "image": "pause"}]}}


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def binding(name: str, target: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"name": target}}


class Log:
    """An observer that keeps (verb, resource, namespace, name, result) of each write."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, str, Any]] = []

    def __call__(self, verb: str, resource: str, ns: str, name: str, result: Any) -> None:
        self.calls.append((verb, resource, ns, name, result))

    def targets(self) -> list[tuple[str, str, str, str]]:
        return [c[:4] for c in self.calls]


@pytest.fixture
def store() -> Store:
    s = Store()
    s.create(NODES, "", node("node-a"))
    s.create(PODS, NS, pod("existing"))
    return s


# ---------------------------------------------------------------- what observers see of successful writes


def _create_pod(s: Store) -> Any:
    return s.create(PODS, NS, pod("web"))


def _create_generated(s: Store) -> Any:
    return s.create(PODS, NS, pod(generateName="job-"))


def _create_in_body_namespace(s: Store) -> Any:
    return s.create(PODS, "", pod("from-body", namespace="kube-system"))


def _create_node(s: Store) -> Any:
    return s.create(NODES, "", node("node-b"))


def _create_podgroup(s: Store) -> Any:
    return s.create(PODGROUPS, NS, {"metadata": {"name": "gang"}, "spec": {"minMember": 2}})


def _create_events_v1(s: Store) -> Any:
    return s.create(EVENTS_V1, NS, {
        "metadata": {"name": "ev"}, "eventTime": "2024-01-01T00:00:00.000000Z", "reason": "Scheduled",
        "action": "Binding", "type": "Normal", "reportingController": "tandem-scheduler",
        "reportingInstance": "tandem-scheduler-1", "note": "bound",
        "regarding": {"kind": "Pod", "namespace": NS, "name": "existing"}})


def _update_status(s: Store) -> Any:
    body = s.get_obj(PODS, NS, "existing")
    body["status"]["phase"] = "Running"
    return s.update(PODS, NS, "existing", body, "status")


def _patch_labels(s: Store) -> Any:
    return s.patch(PODS, NS, "existing", MERGE, json.dumps({"metadata": {"labels": {"a": "b"}}}).encode())


def _delete_pod(s: Store) -> Any:
    return s.delete(PODS, NS, "existing", grace=0)


def _bind(s: Store) -> Any:
    return s.bind(NS, "existing", binding("existing", "node-a"))


@pytest.mark.parametrize("write, verb, resource, ns, name", [
    pytest.param(_create_pod, "create", "pods", NS, "web", id="a pod create"),
    pytest.param(_create_generated, "create", "pods", NS, None, id="a create by generateName names the object made"),
    pytest.param(_create_in_body_namespace, "create", "pods", "kube-system", "from-body",
                 id="a create takes the namespace from the body when the call has none"),
    pytest.param(_create_node, "create", "nodes", "", "node-b", id="a cluster-scoped create has namespace empty"),
    pytest.param(_create_podgroup, "create", "podgroups.scheduling.x-k8s.io", NS, "gang",
                 id="a custom resource is named with its group"),
    pytest.param(_create_events_v1, "create", "events.events.k8s.io", NS, "ev",
                 id="a write through a view is named as the view"),
    pytest.param(_update_status, "update", "pods/status", NS, "existing", id="a status update names the subresource"),
    pytest.param(_patch_labels, "patch", "pods", NS, "existing", id="a patch"),
    pytest.param(_delete_pod, "delete", "pods", NS, "existing", id="a delete"),
    pytest.param(_bind, "create", "pods/binding", NS, "existing", id="a bind is a create of pods/binding"),
])
def test_an_observer_sees_each_write_with_what_it_stored(
        store: Store, write: Callable[[Store], Any], verb: str, resource: str, ns: str, name: str | None) -> None:
    log = Log()
    store.observe(log)
    returned = write(store)
    entry = returned[0] if isinstance(returned, tuple) else returned    # delete answers (entry, gone)
    assert isinstance(entry, Entry)
    assert len(log.calls) == 1, log.calls
    assert log.calls[0][:3] == (verb, resource, ns)
    assert log.calls[0][3] == (name or entry.key[1]) and log.calls[0][3]
    assert log.calls[0][4] is entry


def test_an_observer_runs_after_the_write_and_before_its_caller_returns(store: Store) -> None:
    seen: list[str] = []

    def observer(verb: str, resource: str, ns: str, name: str, result: Any) -> None:
        seen.append(store.get_obj(PODS, ns, name)["spec"].get("nodeName", ""))

    store.observe(observer)
    store.bind(NS, "existing", binding("existing", "node-a"))
    assert seen == ["node-a"]


# ---------------------------------------------------------------- failed writes


def _bind_twice(s: Store) -> None:
    s.bind(NS, "existing", binding("existing", "node-a"))
    s.bind(NS, "existing", binding("existing", "node-b"))


def _bind_stale_uid(s: Store) -> None:
    b = binding("existing", "node-a")
    b["metadata"]["uid"] = "not-the-pods-uid"
    s.bind(NS, "existing", b)


def _create_taken_name(s: Store) -> None:
    s.create(PODS, NS, pod("existing"))


def _update_missing(s: Store) -> None:
    s.update(PODS, NS, "missing", pod("missing"))


def _create_invalid(s: Store) -> None:
    s.create(PODS, NS, {"metadata": {"name": "no-containers"}, "spec": {"containers": []}})


@pytest.mark.parametrize("write, verb, resource, name, code, message", [
    pytest.param(_bind_twice, "create", "pods/binding", "existing", 409,
                 'Operation cannot be fulfilled on pods/binding "existing": '
                 'pod existing is already assigned to node "node-a"',
                 id="a bind of a bound pod is seen as its 409 and message"),
    pytest.param(_bind_stale_uid, "create", "pods/binding", "existing", 409, "Precondition failed: UID",
                 id="a bind with a stale uid precondition is seen as 409"),
    pytest.param(_create_taken_name, "create", "pods", "existing", 409, 'pods "existing" already exists',
                 id="a create of a taken name is seen as 409"),
    pytest.param(_update_missing, "update", "pods", "missing", 404, 'pods "missing" not found',
                 id="an update of a missing object is seen as 404"),
    pytest.param(_create_invalid, "create", "pods", "no-containers", 422, "spec.containers: Required value",
                 id="an invalid create is seen as 422"),
])
def test_an_observer_sees_a_failed_write_with_the_error_its_caller_gets(
        store: Store, write: Callable[[Store], None], verb: str, resource: str, name: str, code: int,
        message: str) -> None:
    log = Log()
    store.observe(log)
    with pytest.raises(errors.APIError) as raised:
        write(store)
    verb_, resource_, ns_, name_, result = log.calls[-1]
    assert (verb_, resource_, ns_, name_) == (verb, resource, NS, name)
    assert result is raised.value
    assert result.code == code
    assert message in result.message, result.message


# ---------------------------------------------------------------- what is and is not a write


def test_dry_runs_write_nothing_and_are_not_reported(store: Store) -> None:
    log = Log()
    store.observe(log)
    store.create(PODS, NS, pod("dry"), dry_run=True)
    store.patch(PODS, NS, "existing", MERGE, b'{"metadata":{"labels":{"a":"b"}}}', "", True)
    store.delete(PODS, NS, "existing", None, None, True)
    assert log.calls == []
    assert store.get_obj(PODS, NS, "dry") is None


def test_each_delete_of_a_delete_collection_is_reported(store: Store) -> None:
    store.create(PODS, NS, pod("second"))
    log = Log()
    store.observe(log)
    store.delete_collection(PODS, NS, lambda e: True, grace=0)
    assert sorted(log.targets()) == [("delete", "pods", NS, "existing"), ("delete", "pods", NS, "second")]


def test_reads_are_not_reported(store: Store) -> None:
    log = Log()
    store.observe(log)
    store.get(PODS, NS, "existing")
    store.list(PODS, NS)
    store.watcher(PODS, NS, lambda e: True, "")
    assert log.calls == []


# ---------------------------------------------------------------- admission


def test_an_admission_refuses_a_write_that_then_changes_nothing(store: Store) -> None:
    log = Log()
    store.observe(log)
    asked: list[tuple[str, str, str, str]] = []

    def refuse_binds(verb: str, resource: str, ns: str, name: str) -> None:
        asked.append((verb, resource, ns, name))
        assert store.get_obj(PODS, ns, name)["spec"].get("nodeName") is None   # before the write
        if resource == "pods/binding":
            raise errors.forbidden("pods", name, "held back by the test")

    store.admit(refuse_binds)
    rv = store.rv
    with pytest.raises(errors.APIError) as raised:
        store.bind(NS, "existing", binding("existing", "node-a"))
    assert raised.value.code == 403
    assert asked == [("create", "pods/binding", NS, "existing")]
    assert store.rv == rv and store.get_obj(PODS, NS, "existing")["spec"].get("nodeName") is None
    assert log.calls == [("create", "pods/binding", NS, "existing", raised.value)]


def test_an_admission_that_returns_lets_the_write_through(store: Store) -> None:
    store.admit(lambda verb, resource, ns, name: None)
    store.bind(NS, "existing", binding("existing", "node-a"))
    assert store.get_obj(PODS, NS, "existing")["spec"]["nodeName"] == "node-a"


# ---------------------------------------------------------------- registering and removing


WRITE_METHODS = ("create", "update", "patch", "delete", "bind")


def _plain(store: Store) -> dict[str, bool]:
    """Per write method: is it the class's own, bound to this store (nothing in between)?"""
    return {m: getattr(getattr(store, m), "__func__", None) is getattr(Store, m) for m in WRITE_METHODS}


def test_a_store_runs_the_plain_write_methods_until_a_hook_and_after_the_last_is_removed(store: Store) -> None:
    assert all(_plain(store).values())
    remove_observer = store.observe(Log())
    remove_admission = store.admit(lambda *_: None)
    assert not any(_plain(store).values())
    remove_observer()
    assert not any(_plain(store).values())       # the admission still needs them hooked
    remove_admission()
    assert all(_plain(store).values())


def test_a_removed_observer_is_not_called_and_the_others_still_are(store: Store) -> None:
    first, second = Log(), Log()
    remove_first = store.observe(first)
    remove_admission = store.admit(lambda *_: None)
    store.observe(second)
    remove_first()
    remove_admission()
    store.create(PODS, NS, pod("after"))
    assert first.calls == []
    assert second.targets() == [("create", "pods", NS, "after")]


def test_an_observer_may_remove_itself_while_being_called(store: Store) -> None:
    later = Log()
    calls: list[str] = []

    def once(verb: str, resource: str, ns: str, name: str, result: Any) -> None:
        calls.append(name)
        remove()

    remove = store.observe(once)
    store.observe(later)
    store.create(PODS, NS, pod("one"))
    store.create(PODS, NS, pod("two"))
    assert calls == ["one"]
    assert [c[3] for c in later.calls] == ["one", "two"]


# ---------------------------------------------------------------- through the HTTP API


async def test_writes_made_over_http_reach_the_hooks() -> None:
    async with SimCluster(nodes=1, agent=None) as cluster:
        log = Log()
        cluster.store.observe(log)
        cluster.store.create(PODS, NS, pod("web"))
        url = f"{cluster.url}/api/v1/namespaces/{NS}/pods/web/binding"
        node_name = cluster.store.list(NODES).entries[0].key[1]
        async with aiohttp.ClientSession() as session:
            async with session.post(url, json=binding("web", node_name)) as r:
                assert r.status == 201
            async with session.post(url, json=binding("web", node_name)) as r:
                assert r.status == 409
                body = await r.json()
        bind_calls = [c for c in log.calls if c[1] == "pods/binding"]
        assert [type(c[4]) for c in bind_calls] == [Entry, errors.APIError]
        assert bind_calls[1][4].message == body["message"]
