"""Informers against the simulated cluster: nothing lost, nothing twice.

Each test starts its own SimCluster without the node agent (kubelet status
writes would add events the assertions do not expect) and follows pods with
an :class:`Informer` whose handlers write into a :class:`Recorder`. The
recorder checks the handler contract as events arrive (no add for a key it
already has, no update or delete for one it does not, versions only move
forward) and can be compared with what the server holds.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Any, Callable

import pytest

from bench.simcluster import SimCluster
from bench.simcluster.faults import FaultRule, Faults
from scheduler.apiclient import APIClient, RetryPolicy, from_kubeconfig
from scheduler.framework.clock import Clock
from scheduler.informers import Informer, object_key
from tests.integration.test_scheduler import eventually

PODS = "/api/v1/namespaces/default/pods"
FAST = dict(backoff=(0.05, 0.2))


def pod(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"schedulerName": "tandem-scheduler", "containers": [{"name": "c", "image": "pause"}]}}


def rv(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


class Recorder:
    """Handlers that log every call and check the contract while they run."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str, int]] = []
        self.objects: dict[str, dict[str, Any]] = {}
        self.violations: list[str] = []

    def on_add(self, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        if key in self.objects:
            self.violations.append(f"add of known {key}")
        self.objects[key] = obj
        self.log.append(("add", key, rv(obj)))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        key = object_key(new)
        known = self.objects.get(key)
        if known is None:
            self.violations.append(f"update of unknown {key}")
        elif known is not old:
            self.violations.append(f"update of {key}: old is not the object last delivered")
        if rv(new) <= rv(old):
            self.violations.append(f"update of {key} went back: {rv(old)} -> {rv(new)}")
        self.objects[key] = new
        self.log.append(("update", key, rv(new)))

    def on_delete(self, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        if self.objects.pop(key, None) is None:
            self.violations.append(f"delete of unknown {key}")
        self.log.append(("delete", key, rv(obj)))

    def handlers(self) -> dict[str, Callable[..., None]]:
        return {"on_add": self.on_add, "on_update": self.on_update, "on_delete": self.on_delete}

    def versions(self) -> dict[str, str]:
        return {k: o["metadata"]["resourceVersion"] for k, o in self.objects.items()}


async def server_versions(client: APIClient) -> dict[str, str]:
    items = (await client.list("/api/v1/pods"))["items"]
    return {object_key(o): o["metadata"]["resourceVersion"] for o in items}


async def converged(client: APIClient, rec: Recorder, inf: Informer, timeout: float = 15.0) -> dict[str, str]:
    """Wait until handlers and store agree with the server; returns the server's versions."""
    want: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    while True:
        want = await server_versions(client)
        store = {k: o["metadata"]["resourceVersion"] for k, o in inf.store.items()}
        if rec.versions() == want and store == want:
            return want
        if time.monotonic() > deadline:
            missing = want.keys() - rec.versions().keys()
            extra = rec.versions().keys() - want.keys()
            raise AssertionError(f"informer never converged: missing {sorted(missing)[:5]}, "
                                 f"extra {sorted(extra)[:5]}, violations {rec.violations[:5]}")
        await asyncio.sleep(0.05)


@pytest.fixture
async def cluster(tmp_path):
    async with SimCluster(nodes=2, agent=None, kubeconfig=tmp_path / "kc") as c:
        yield c


@pytest.fixture
async def client(cluster, tmp_path):
    async with await from_kubeconfig(str(tmp_path / "kc"), qps=0,
                                     retry=RetryPolicy(attempts=2, base=0.01, cap=0.02), clock=Clock()) as c:
        yield c


async def test_initial_list_is_delivered_as_adds_then_synced(cluster, client):
    for name in ("a", "b", "c"):
        await client.create(PODS, pod(name))
    rec = Recorder()
    async with Informer(client, "/api/v1/pods", name="pods", **rec.handlers(), clock=client.clock, **FAST) as inf:
        await asyncio.wait_for(inf.synced.wait(), 5)
        assert sorted(rec.log) == [("add", f"default/{n}", rv) for n, rv in
                                   sorted((k.split("/")[1], int(v)) for k, v in (await server_versions(client)).items())]
        assert set(inf.store) == {"default/a", "default/b", "default/c"}
        assert inf.last_rv == (await client.list("/api/v1/pods"))["metadata"]["resourceVersion"]
        assert inf.lists == 1
    assert not rec.violations


async def test_managed_fields_never_reach_the_handlers_or_the_store(cluster, client):
    # kube-scheduler's informers strip them (TransformStripManagedFields): most of a pod's dicts, never read
    fields = [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
               "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}]
    listed = pod("listed", app="x")
    listed["metadata"]["managedFields"] = fields
    await client.create(PODS, listed)
    assert (await client.get(f"{PODS}/listed"))["metadata"].get("managedFields"), "the server keeps them"
    rec = Recorder()
    async with Informer(client, "/api/v1/pods", name="pods", **rec.handlers(), clock=client.clock, **FAST) as inf:
        await asyncio.wait_for(inf.synced.wait(), 5)
        watched = pod("watched", app="y")
        watched["metadata"]["managedFields"] = fields
        await client.create(PODS, watched)
        await client.patch(f"{PODS}/listed", {"metadata": {"labels": {"app": "z"}}})
        await eventually(lambda: len(rec.log) == 3, what="the add and the update to be delivered")
        assert [k for k, _ in sorted(rec.objects.items()) if "managedFields" in rec.objects[k]["metadata"]] == []
        assert [k for k, o in inf.store.items() if "managedFields" in o["metadata"]] == []
    assert not rec.violations


async def test_equal_spec_fields_named_to_share_are_one_object_in_the_store(cluster, client):
    # the pods of a template repeat their containers: the store keeps one list for all of them
    def with_image(p: dict[str, Any], image: str) -> dict[str, Any]:
        p["spec"]["containers"][0]["image"] = image
        return p

    await client.create(PODS, with_image(pod("listed-a"), "pause:1"))
    async with Informer(client, "/api/v1/pods", name="pods", clock=client.clock, share_spec=("containers",),
                        **FAST) as inf:
        await asyncio.wait_for(inf.synced.wait(), 5)
        await client.create(PODS, with_image(pod("watched-a"), "pause:1"))
        await client.create(PODS, with_image(pod("watched-b"), "pause:2"))
        await eventually(lambda: len(inf.store) == 3, what="the two watched pods")
        a, same, other = (inf.store[f"default/{n}"]["spec"]["containers"] for n in ("listed-a", "watched-a", "watched-b"))
        assert a is same, "equal containers: one list"
        assert other is not a and other[0]["image"] == "pause:2" and a[0]["image"] == "pause:1"
    async with Informer(client, "/api/v1/pods", name="pods", clock=client.clock, **FAST) as plain:
        await asyncio.wait_for(plain.synced.wait(), 5)
        s = plain.store
        assert s["default/listed-a"]["spec"]["containers"] is not s["default/watched-a"]["spec"]["containers"], \
            "only the fields named are shared"


async def test_cluster_scoped_objects_are_keyed_by_name(cluster, client):
    async with Informer(client, "/api/v1/nodes", clock=client.clock, **FAST) as inf:
        await asyncio.wait_for(inf.synced.wait(), 5)
        assert set(inf.store) == {"node-0", "node-1"}


async def test_later_changes_arrive_in_order(cluster, client):
    await client.create(PODS, pod("a"))
    rec = Recorder()
    async with Informer(client, "/api/v1/pods", **rec.handlers(), clock=client.clock, **FAST) as inf:
        await asyncio.wait_for(inf.synced.wait(), 5)
        rec.log.clear()
        b = await client.create(PODS, pod("b"))
        a2 = await client.patch(f"{PODS}/a", {"metadata": {"labels": {"x": "1"}}})
        await client.delete(f"{PODS}/a")
        b2 = await client.patch(f"{PODS}/b", {"metadata": {"labels": {"x": "2"}}})
        await eventually(lambda: len(rec.log) == 5, what="five events")
        # a pod delete is two writes, as in kube-apiserver: the deletion marks (MODIFIED), then DELETED
        assert [(t, k) for t, k, _ in rec.log] == [("add", "default/b"), ("update", "default/a"),
                                                   ("update", "default/a"), ("delete", "default/a"),
                                                   ("update", "default/b")]
        assert rec.log[0][2] == rv(b) and rec.log[1][2] == rv(a2) and rec.log[4][2] == rv(b2)
        assert [v for _, _, v in rec.log] == sorted(v for _, _, v in rec.log)
        assert rec.objects["default/b"]["metadata"]["labels"] == {"x": "2"}
        assert inf.last_rv == b2["metadata"]["resourceVersion"]
    assert not rec.violations


async def test_a_recreated_name_is_a_delete_and_an_add(cluster, client):
    await client.create(PODS, pod("a"))
    rec = Recorder()
    async with Informer(client, "/api/v1/pods", **rec.handlers(), clock=client.clock, **FAST) as inf:
        await asyncio.wait_for(inf.synced.wait(), 5)
        rec.log.clear()
        await client.delete(f"{PODS}/a")
        await client.create(PODS, pod("a"))
        await eventually(lambda: len(rec.log) == 3)
        assert [t for t, _, _ in rec.log] == ["update", "delete", "add"]
    assert not rec.violations


async def test_relist_after_410_reconciles_what_happened_while_the_watch_was_down(tmp_path):
    async with SimCluster(nodes=1, agent=None, kubeconfig=tmp_path / "kc", bookmark_interval=3600) as cluster:
        async with await from_kubeconfig(str(tmp_path / "kc"), qps=0,
                                         retry=RetryPolicy(attempts=2, base=0.01, cap=0.02), clock=Clock()) as client:
            for name in ("gone", "changed", "same", "reborn"):
                await client.create(PODS, pod(name))
            rec = Recorder()
            # watches end every second, so the test need not wait minutes for one to end
            inf = Informer(client, "/api/v1/pods", **rec.handlers(), watch_timeout=(1, 1), clock=client.clock, **FAST)
            async with inf:
                await asyncio.wait_for(inf.synced.wait(), 5)
                before = {k: o for k, o in inf.store.items()}
                # take the watch down: every new watch fails, and the current one ends within a second
                cluster.faults.rules = [FaultRule(verb="watch", resource="pods", error_rate=1.0)]
                await eventually(lambda: cluster.server._watch_count == 0, what="the watch to end")
                rec.log.clear()
                await client.delete(f"{PODS}/gone")
                changed = await client.patch(f"{PODS}/changed", {"metadata": {"labels": {"v": "2"}}})
                await client.delete(f"{PODS}/reborn")
                reborn = await client.create(PODS, pod("reborn"))
                new = await client.create(PODS, pod("new"))
                cluster.store.compact()  # the history the informer would resume from is gone: 410
                cluster.faults.clear()
                want = await converged(client, rec, inf)

            assert inf.lists == 2, "one relist, after the 410"
            assert sorted(rec.log) == sorted([
                ("delete", "default/gone", rv(before["default/gone"])),   # the last object it knew
                ("update", "default/changed", rv(changed)),
                ("delete", "default/reborn", rv(before["default/reborn"])),
                ("add", "default/reborn", rv(reborn)),
                ("add", "default/new", rv(new)),
            ])
            assert set(want) == {"default/changed", "default/same", "default/reborn", "default/new"}
            assert not rec.violations


async def test_410_on_resume_after_an_error_relists(tmp_path):
    # the watch window is tiny: by the time the informer reconnects, its resourceVersion is out of it
    async with SimCluster(nodes=1, agent=None, kubeconfig=tmp_path / "kc", watch_window=4) as cluster:
        async with await from_kubeconfig(str(tmp_path / "kc"), qps=0,
                                         retry=RetryPolicy(attempts=2, base=0.01, cap=0.02), clock=Clock()) as client:
            rec = Recorder()
            async with Informer(client, "/api/v1/pods", **rec.handlers(), watch_timeout=(1, 1), clock=client.clock,
                                **FAST) as inf:
                await asyncio.wait_for(inf.synced.wait(), 5)
                cluster.faults.rules = [FaultRule(verb="watch", resource="pods", error_rate=1.0)]
                await eventually(lambda: cluster.server._watch_count == 0)
                for i in range(20):
                    await client.create(PODS, pod(f"p{i}"))
                cluster.faults.clear()
                await converged(client, rec, inf)
                assert inf.lists == 2
    assert not rec.violations


@pytest.mark.parametrize("window", [20_000, 2], ids=["resume from every drop", "drops that also hit 410"])
async def test_watch_dropped_every_second_with_continuous_writes_loses_nothing(tmp_path, window):
    faults = Faults(watch_drop_interval=1.0)
    async with SimCluster(nodes=1, agent=None, kubeconfig=tmp_path / "kc", faults=faults,
                          watch_window=window):
        async with await from_kubeconfig(str(tmp_path / "kc"), qps=0, clock=Clock()) as client:
            for i in range(20):
                await client.create(PODS, pod(f"seed{i}"))
            rec = Recorder()
            async with Informer(client, "/api/v1/pods", **rec.handlers(), clock=client.clock, **FAST) as inf:
                await asyncio.wait_for(inf.synced.wait(), 5)
                rng = random.Random(7)
                alive = [f"seed{i}" for i in range(20)]
                writes = 0
                n = 0
                deadline = time.monotonic() + 4.0
                while time.monotonic() < deadline:
                    # a burst of concurrent writes, each on its own pod: 2 creates, 2 patches, 1 delete
                    touched = rng.sample(alive, 3)
                    alive.remove(touched[2])
                    new = [f"w{n}", f"w{n + 1}"]
                    n += 2
                    await asyncio.gather(
                        *(client.create(PODS, pod(name)) for name in new),
                        *(client.patch(f"{PODS}/{name}", {"metadata": {"labels": {"n": str(n)}}})
                          for name in touched[:2]),
                        client.delete(f"{PODS}/{touched[2]}"))
                    alive += new
                    writes += 5
                    await asyncio.sleep(0.01)
                want = await converged(client, rec, inf)
                assert set(want) == {f"default/{name}" for name in alive}
                assert inf.watches >= 4, "the watch was cut and resumed several times"
                if window < 1000:
                    assert inf.lists >= 2, "some reconnects were too late for the window and relisted"
                assert writes > 200
    assert not rec.violations


async def test_server_errors_on_list_are_retried(tmp_path):
    faults = Faults(rules=[FaultRule(verb="list", resource="pods", error_rate=1.0, error_code=503)])
    async with SimCluster(nodes=1, agent=None, kubeconfig=tmp_path / "kc", faults=faults) as cluster:
        async with await from_kubeconfig(str(tmp_path / "kc"), qps=0,
                                         retry=RetryPolicy(attempts=2, base=0.01, cap=0.02), clock=Clock()) as client:
            await client.create(PODS, pod("a"))
            rec = Recorder()
            async with Informer(client, "/api/v1/pods", **rec.handlers(), clock=client.clock, **FAST) as inf:
                await asyncio.sleep(0.5)
                assert not inf.synced.is_set()
                assert client.counts["list", "503"] >= 4, "the client retried, then the informer did"
                cluster.faults.clear()
                await asyncio.wait_for(inf.synced.wait(), 5)
                assert [(t, k) for t, k, _ in rec.log] == [("add", "default/a")]
                assert inf.lists == 1


async def test_flaky_list_is_absorbed_by_client_retries(tmp_path):
    faults = Faults(rules=[FaultRule(verb="list", resource="pods", error_rate=0.5, error_code=500)], seed=3)
    async with SimCluster(nodes=1, agent=None, kubeconfig=tmp_path / "kc", faults=faults):
        async with await from_kubeconfig(str(tmp_path / "kc"), qps=0,
                                         retry=RetryPolicy(attempts=10, base=0.01, cap=0.02), clock=Clock()) as client:
            async with Informer(client, "/api/v1/nodes", clock=client.clock, **FAST) as inf:
                await asyncio.wait_for(inf.synced.wait(), 5)
                assert set(inf.store) == {"node-0"}


async def test_paged_list_gets_everything(cluster, client):
    for i in range(23):
        await client.create(PODS, pod(f"p{i}"))
    rec = Recorder()
    async with Informer(client, "/api/v1/pods", **rec.handlers(), page_size=5, clock=client.clock, **FAST) as inf:
        await asyncio.wait_for(inf.synced.wait(), 5)
        assert len(rec.objects) == 23
        assert client.counts["list", "200"] == 5
        await client.create(PODS, pod("late"))
        await converged(client, rec, inf)


async def test_label_selector_is_applied_to_list_and_watch(cluster, client):
    await client.create(PODS, pod("mine", team="a"))
    await client.create(PODS, pod("theirs", team="b"))
    rec = Recorder()
    async with Informer(client, "/api/v1/pods", {"labelSelector": "team=a"}, **rec.handlers(), clock=client.clock,
                        **FAST) as inf:
        await asyncio.wait_for(inf.synced.wait(), 5)
        assert set(inf.store) == {"default/mine"}
        await client.patch(f"{PODS}/theirs", {"metadata": {"labels": {"team": "a"}}})  # starts matching: an add
        await client.patch(f"{PODS}/mine", {"metadata": {"labels": {"team": "b"}}})    # stops matching: a delete
        await eventually(lambda: set(inf.store) == {"default/theirs"})
        assert [(t, k) for t, k, _ in rec.log][-2:] == [("add", "default/theirs"), ("delete", "default/mine")]
    assert not rec.violations


async def test_a_raising_handler_does_not_stop_the_informer(cluster, client, caplog):
    rec = Recorder()

    def picky(obj: dict[str, Any]) -> None:
        if obj["metadata"]["name"] == "bad":
            raise ValueError("cannot stand this pod")

    inf = Informer(client, "/api/v1/pods", on_add=picky, clock=client.clock, **FAST)
    inf.add_handlers(**rec.handlers())
    with caplog.at_level(logging.ERROR, logger="tandem.informers"):
        async with inf:
            await asyncio.wait_for(inf.synced.wait(), 5)
            await client.create(PODS, pod("bad"))
            await client.create(PODS, pod("good"))
            await eventually(lambda: "default/good" in rec.objects)
            assert "default/bad" in rec.objects, "the next handler still saw the event"
            assert inf.handler_errors == 1
            assert inf._task is not None and not inf._task.done()
    assert any("cannot stand this pod" in (r.exc_text or "") for r in caplog.records)
    assert any("add handler" in r.getMessage() and "default/bad" in r.getMessage() for r in caplog.records)


async def test_stop_ends_cleanly_and_no_events_follow(cluster, client):
    rec = Recorder()
    inf = Informer(client, "/api/v1/pods", **rec.handlers(), clock=client.clock, **FAST)
    await inf.stop()  # before start: nothing to do
    inf.start()
    with pytest.raises(RuntimeError):
        inf.start()
    await asyncio.wait_for(inf.synced.wait(), 5)
    await eventually(lambda: cluster.server._watch_count == 1, what="the watch to open")
    t = time.monotonic()
    await inf.stop()
    assert time.monotonic() - t < 1.0
    assert inf._task is None
    await client.create(PODS, pod("after"))
    await asyncio.sleep(0.2)
    assert rec.log == []
    await eventually(lambda: cluster.server._watch_count == 0, what="the server to see the watch closed")
    await inf.stop()  # twice is fine


async def test_stop_while_backing_off(tmp_path):
    faults = Faults(rules=[FaultRule(verb="list", resource="*", error_rate=1.0)])
    async with SimCluster(agent=None, kubeconfig=tmp_path / "kc", faults=faults):
        async with await from_kubeconfig(str(tmp_path / "kc"), qps=0, retry=RetryPolicy(attempts=1),
                                         clock=Clock()) as client:
            inf = Informer(client, "/api/v1/nodes", backoff=(30, 30), clock=client.clock)
            inf.start()
            await asyncio.sleep(0.2)
            t = time.monotonic()
            await inf.stop()
            assert time.monotonic() - t < 1.0
            assert not inf.synced.is_set()


async def test_bookmarks_move_the_resource_version(tmp_path):
    async with SimCluster(nodes=1, agent=None, kubeconfig=tmp_path / "kc", bookmark_interval=0.2):
        async with await from_kubeconfig(str(tmp_path / "kc"), qps=0, clock=Clock()) as client:
            async with Informer(client, "/api/v1/pods", clock=client.clock, **FAST) as inf:
                await asyncio.wait_for(inf.synced.wait(), 5)
                start = int(inf.last_rv)
                await client.create("/api/v1/namespaces", {"metadata": {"name": "other"}})  # not a pod
                await eventually(lambda: int(inf.last_rv) > start, what="a bookmark past the namespace write")
                assert inf.store == {}
