"""VolumeBinding for claims that wait for their first consumer: matching, reasons, Reserve and PreBind
(plugins/volume_binding.py over scheduler/state/volumes.py), as upstream's binder_test.go cases."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from plugins.volume_binding import (
    ERR_BIND_TIMEOUT, ERR_REASON_BIND_CONFLICT, ERR_REASON_NODE_CONFLICT, ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST, PLAN_KEY, VolumeBinding, VolumeBindingArgs,
)
from scheduler.framework import Code, CycleState, Handle, QueueingHint
from scheduler.framework.clock import FakeClock
from scheduler.model import parse_csi_driver, parse_csi_storage_capacity, parse_pod, parse_pv, parse_pvc
from tests.unit.plugins.volumes import volume_cache

UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
NODES = {f"n{i}": {"kubernetes.io/hostname": f"n{i}", "zone": z} for i, z in ((1, "a"), (2, "a"), (3, "b"))}
LOCAL = {"metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
         "volumeBindingMode": "WaitForFirstConsumer"}
DYNAMIC = {"metadata": {"name": "fast"}, "provisioner": "csi.example.com", "volumeBindingMode": "WaitForFirstConsumer"}


def pod(*claims: str, name: str = "p", uid: str = "pod-uid") -> Any:
    return parse_pod({"metadata": {"name": name, "namespace": "ns", "uid": uid},
                      "spec": {"containers": [{"name": "c", "image": "x"}],
                               "volumes": [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                                           for i, c in enumerate(claims)]}})


def claim(name: str, size: str = "1Gi", cls: str = "local", modes: tuple[str, ...] = ("ReadWriteOnce",),
          selected: str | None = None, volume: str = "", selector: Any = None, mode: str | None = None,
          rv: str = "1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": rv,
                            "annotations": {}}
    if selected:
        meta["annotations"]["volume.kubernetes.io/selected-node"] = selected
    if volume:
        meta["annotations"]["pv.kubernetes.io/bind-completed"] = "yes"
    spec: dict[str, Any] = {"storageClassName": cls, "accessModes": list(modes),
                            "resources": {"requests": {"storage": size}}}
    if volume:
        spec["volumeName"] = volume
    if selector is not None:
        spec["selector"] = selector
    if mode:
        spec["volumeMode"] = mode
    return {"metadata": meta, "spec": spec, "status": {"phase": "Bound" if volume else "Pending"}}


def vol(name: str, size: str = "1Gi", node: str | None = None, zone: str | None = None, cls: str = "local",
        modes: tuple[str, ...] = ("ReadWriteOnce",), phase: str = "Available", ref: str | None = None,
        labels: dict[str, str] | None = None, mode: str | None = None, rv: str = "1",
        deleting: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": size}, "storageClassName": cls, "accessModes": list(modes)}
    if node or zone:
        key, value = ("kubernetes.io/hostname", node) if node else ("zone", zone)
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]}}
    if ref:
        spec["claimRef"] = {"namespace": "ns", "name": ref, "uid": f"uid-{ref}"}
    if mode:
        spec["volumeMode"] = mode
    meta: dict[str, Any] = {"name": name, "uid": f"pv-{name}", "resourceVersion": rv, "labels": labels or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


class Env:
    def __init__(self, pvcs: tuple[dict[str, Any], ...] = (), pvs: tuple[dict[str, Any], ...] = (),
                 classes: tuple[dict[str, Any], ...] = (LOCAL, DYNAMIC), client: Any = None,
                 timeout: int = 600, pods: dict[str, Any] | None = None) -> None:
        self.cache = volume_cache(NODES, pvcs, pvs, classes)
        self.clock = FakeClock()
        self.plugin = VolumeBinding(VolumeBindingArgs(bind_timeout_seconds=timeout),
                                    Handle(self.cache, client, clock=self.clock, pods=pods if pods is not None else {}))

    def filter(self, p: Any) -> dict[str, tuple[str, ...]]:
        """Each node's reasons (() where it fits)."""
        state = CycleState()
        _, st = self.plugin.pre_filter(state, p, self.cache.nodes)
        assert st.is_success(), st.message()
        rows = self.cache.nodes.rows()
        res = self.plugin.filter(state, p, self.cache.nodes, rows)
        out = {}
        for i, n in enumerate(self.cache.nodes.names_of(rows)):
            reasons = tuple(r.reason for r in res.rejections if r.mask[i])
            assert bool(reasons) == (not res.passed[i]) and all(r.code == UU for r in res.rejections)
            out[n] = reasons
        return out

    def reserve(self, p: Any, node: str) -> CycleState:
        state = CycleState()
        _, st = self.plugin.pre_filter(state, p, self.cache.nodes)
        assert st.is_success()
        assert self.plugin.reserve(state, p, node).is_success()
        return state

    def chosen(self, state: CycleState) -> tuple[list[str], list[str]]:
        plan = state.get(PLAN_KEY)
        return [pv.name for pv, _, _ in plan.static], [c.name for c in plan.provision]


OK: tuple[str, ...] = ()
BIND = (ERR_REASON_BIND_CONFLICT,)

MATCHING = [
    pytest.param(Env(pvcs=(claim("data"),), pvs=(vol("pv1", node="n1"), vol("pv3", node="n3"))),
                 {"n1": OK, "n2": BIND, "n3": OK}, id="a local volume serves its node only"),
    pytest.param(Env(pvcs=(claim("data", "5Gi"),), pvs=(vol("small", "1Gi", node="n1"), vol("big", "10Gi", node="n3"))),
                 {"n1": BIND, "n2": BIND, "n3": OK}, id="a volume smaller than the request does not match"),
    pytest.param(Env(pvcs=(claim("data", modes=("ReadWriteMany",)),), pvs=(vol("pv1", node="n1"),)),
                 {"n1": BIND, "n2": BIND, "n3": BIND}, id="the volume's access modes must include the claim's"),
    pytest.param(Env(pvcs=(claim("data", mode="Block"),), pvs=(vol("pv1", node="n1"), vol("b", node="n3", mode="Block"))),
                 {"n1": BIND, "n2": BIND, "n3": OK}, id="the volume modes must be equal"),
    pytest.param(Env(pvcs=(claim("data"),), pvs=(vol("pv1", node="n1", cls="other"),)),
                 {"n1": BIND, "n2": BIND, "n3": BIND}, id="a volume of another class does not match"),
    pytest.param(Env(pvcs=(claim("data"),), pvs=(vol("pv1", node="n1", ref="someone"),)),
                 {"n1": BIND, "n2": BIND, "n3": BIND}, id="a volume bound to another claim does not match"),
    pytest.param(Env(pvcs=(claim("data"),), pvs=(vol("pv1", node="n1", phase="Released"),)),
                 {"n1": BIND, "n2": BIND, "n3": BIND}, id="a volume that is not Available does not match"),
    pytest.param(Env(pvcs=(claim("data"),), pvs=(vol("pv1", node="n1", deleting=True),)),
                 {"n1": BIND, "n2": BIND, "n3": BIND}, id="a volume being deleted does not match"),
    pytest.param(Env(pvcs=(claim("data", selector={"matchLabels": {"tier": "gold"}}),),
                     pvs=(vol("pv1", node="n1"), vol("pv3", node="n3", labels={"tier": "gold"}))),
                 {"n1": BIND, "n2": BIND, "n3": OK}, id="the claim's selector picks among the volumes"),
    pytest.param(Env(pvcs=(claim("data"),), pvs=(vol("pv-a", zone="a"),)),
                 {"n1": OK, "n2": OK, "n3": BIND}, id="a zonal volume serves every node of its zone"),
    pytest.param(Env(pvcs=(claim("data"),), pvs=(vol("anywhere"),)),
                 {"n1": OK, "n2": OK, "n3": OK}, id="a volume without node affinity serves every node"),
    pytest.param(Env(pvcs=(claim("data"), claim("logs")), pvs=(vol("a1", node="n1"), vol("a2", node="n1"),
                                                              vol("c1", node="n3"))),
                 {"n1": OK, "n2": BIND, "n3": BIND}, id="two claims need two volumes on the node"),
    pytest.param(Env(pvcs=(claim("data"), claim("logs")), pvs=(vol("z1", zone="a"), vol("z2", zone="a"),
                                                              vol("b1", zone="b"))),
                 {"n1": OK, "n2": OK, "n3": BIND}, id="two claims need two volumes of the zone"),
    pytest.param(Env(pvcs=(claim("data"),), pvs=(vol("pv1", node="n1"),)),
                 {"n1": OK, "n2": BIND, "n3": BIND}, id="no volume and a class that does not provision"),
    pytest.param(Env(pvcs=(claim("data", cls="fast"),)), {"n1": OK, "n2": OK, "n3": OK},
                 id="a class that provisions fits every node"),
    pytest.param(Env(pvcs=(claim("data", cls="fast"),),
                     classes=({**DYNAMIC, "allowedTopologies": [{"matchLabelExpressions": [
                         {"key": "zone", "values": ["b"]}]}]},)),
                 {"n1": BIND, "n2": BIND, "n3": OK}, id="allowedTopologies keep provisioning to its zone"),
    pytest.param(Env(pvcs=(claim("data", cls="fast", selected="n2"),)), {"n1": BIND, "n2": OK, "n3": BIND},
                 id="a claim with selected-node is provisioned there only"),
    pytest.param(Env(pvcs=(claim("data", volume="gone"), claim("new")), pvs=(vol("pv3", node="n3"),)),
                 {n: (ERR_REASON_BIND_CONFLICT, ERR_REASON_PV_NOT_EXIST) if n != "n3" else (ERR_REASON_PV_NOT_EXIST,)
                  for n in NODES}, id="a bound claim's missing volume and a delayed claim's reasons add up"),
    pytest.param(Env(pvcs=(claim("data", volume="bound3"), claim("new")),
                     pvs=(vol("bound3", node="n3", ref="data", phase="Bound"), vol("pv1", node="n1"))),
                 {"n1": (ERR_REASON_NODE_CONFLICT,), "n2": (ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT),
                  "n3": BIND}, id="node affinity of the bound volume and no volume to bind, per node"),
]


@pytest.mark.parametrize("env, want", MATCHING)
def test_filter(env: Env, want: dict[str, tuple[str, ...]]) -> None:
    claims = sorted({c.name for c in env.cache.volumes.api_claims.values() if c.storage_class in ("local", "fast")})
    assert env.filter(pod(*claims)) == want


def capacity(name: str, size: str | None, zone: str | None, cls: str = "fast") -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": name, "namespace": "kube-system"}, "storageClassName": cls}
    if size:
        obj["capacity"] = size
    if zone:
        obj["nodeTopology"] = {"matchLabels": {"zone": zone}}
    return obj


@pytest.mark.parametrize("checked, capacities, want", [
    pytest.param(False, (), {"n1": OK, "n2": OK, "n3": OK}, id="a driver without storageCapacity is not checked"),
    pytest.param(True, (), {n: (ERR_REASON_NOT_ENOUGH_SPACE,) for n in NODES}, id="no capacity published: no room"),
    pytest.param(True, (capacity("a", "10Gi", "a"), capacity("b", "1Gi", "b")),
                 {"n1": OK, "n2": OK, "n3": (ERR_REASON_NOT_ENOUGH_SPACE,)}, id="room in one zone only"),
    pytest.param(True, (capacity("a", "10Gi", "a", cls="other"),), {n: (ERR_REASON_NOT_ENOUGH_SPACE,) for n in NODES},
                 id="a capacity of another class does not count"),
    pytest.param(True, (capacity("a", "10Gi", None),), {n: (ERR_REASON_NOT_ENOUGH_SPACE,) for n in NODES},
                 id="a capacity without node topology serves no node"),
])
def test_storage_capacity(checked: bool, capacities: tuple[dict[str, Any], ...], want: dict[str, Any]) -> None:
    env = Env(pvcs=(claim("data", "5Gi", cls="fast"),))
    vols = env.cache.volumes
    d = parse_csi_driver({"metadata": {"name": "csi.example.com"}, "spec": {"storageCapacity": checked}})
    vols.drivers[d.name] = d
    for c in map(parse_csi_storage_capacity, capacities):
        vols.set_capacity(c)
    assert env.filter(pod("data")) == want


def test_the_smallest_fitting_volume_is_chosen() -> None:
    env = Env(pvcs=(claim("data", "2Gi"),), pvs=(vol("huge", "100Gi", zone="a"), vol("tiny", "1Gi", zone="a"),
                                                  vol("snug", "3Gi", zone="a"), vol("big", "10Gi", zone="a")))
    assert env.chosen(env.reserve(pod("data"), "n1")) == (["snug"], [])


def test_a_volume_prebound_to_the_claim_wins_over_a_smaller_one() -> None:
    env = Env(pvcs=(claim("data"),), pvs=(vol("small", "1Gi", zone="a"), vol("mine", "5Gi", node="n1", ref="data")))
    assert env.filter(pod("data")) == {"n1": OK, "n2": BIND, "n3": BIND}   # elsewhere: no match, no provisioner
    assert env.chosen(env.reserve(pod("data"), "n1")) == (["mine"], [])


def test_two_pods_in_a_row_never_take_one_volume_and_unreserve_gives_it_back() -> None:
    env = Env(pvcs=(claim("a"), claim("b"), claim("c")), pvs=(vol("pv1", node="n1"), vol("pv3", node="n3")))
    first = env.reserve(pod("a", uid="1"), "n1")
    assert env.chosen(first) == (["pv1"], [])
    assert env.filter(pod("b", uid="2")) == {"n1": BIND, "n2": BIND, "n3": OK}
    env.plugin.unreserve(first, pod("a", uid="1"), "n1")
    assert env.filter(pod("b", uid="2")) == {"n1": OK, "n2": BIND, "n3": OK}


def test_an_informer_event_newer_than_the_assumption_replaces_it_an_older_one_does_not() -> None:
    env = Env(pvcs=(claim("a"), claim("b")), pvs=(vol("pv1", node="n1", rv="5"),))
    env.reserve(pod("a", uid="1"), "n1")
    vols = env.cache.volumes
    vols.set_pv(parse_pv(vol("pv1", node="n1", rv="5")))   # a resync of the same version: still assumed
    assert vols.assumed_volume("pv1").claim_ref.name == "a"
    vols.set_pv(parse_pv(vol("pv1", node="n1", rv="6")))   # the API moved on without our write: it wins
    assert vols.assumed_volume("pv1").claim_ref is None
    assert env.filter(pod("b", uid="2"))["n1"] == OK


def test_a_relabelled_node_is_evaluated_again_for_the_volumes() -> None:
    from scheduler.model import parse_node
    env = Env(pvcs=(claim("data"),), pvs=(vol("pv-c", zone="c"), vol("local4", node="n4")))
    assert env.filter(pod("data")) == {"n1": BIND, "n2": BIND, "n3": BIND}
    env.cache.update_node(parse_node({"metadata": {"name": "n2", "labels": {"kubernetes.io/hostname": "n2",
                                                                            "zone": "c"}}}))
    env.cache.add_node(parse_node({"metadata": {"name": "n4", "labels": {"kubernetes.io/hostname": "n4"}}}))
    assert env.filter(pod("data")) == {"n1": BIND, "n2": OK, "n3": BIND, "n4": OK}
    env.cache.remove_node("n4")
    assert "n4" not in env.filter(pod("data"))


# ---------------------------------------------------------------------------- PreBind


class FakeClient:
    def __init__(self, fail: Exception | None = None) -> None:
        self.updates: list[tuple[str, dict[str, Any]]] = []
        self.fail = fail

    async def update(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.fail is not None:
            raise self.fail
        self.updates.append((path, body))
        rv = str(int(body["metadata"].get("resourceVersion", "1")) + 1)
        return {**body, "metadata": {**body["metadata"], "resourceVersion": rv}}


class Conflict(Exception):
    message = ('Operation cannot be fulfilled on persistentvolumes "pv1": the object has been modified; '
               "please apply your changes to the latest version and try again")


def _bound_claim(name: str, volume: str, rv: str) -> Any:
    return parse_pvc(claim(name, volume=volume, rv=rv))


async def test_pre_bind_writes_the_claim_ref_and_waits_for_the_pv_controller() -> None:
    client = FakeClient()
    p = pod("data")
    env = Env(pvcs=(claim("data"),), pvs=(vol("pv1", node="n1"),), client=client, pods={p.uid: p})
    state = env.reserve(p, "n1")
    task = asyncio.create_task(env.plugin.pre_bind(state, p, "n1"))
    await asyncio.sleep(0)
    (path, body), = client.updates
    assert path == "/api/v1/persistentvolumes/pv1"
    assert body["spec"]["claimRef"] == {"kind": "PersistentVolumeClaim", "namespace": "ns", "name": "data",
                                        "uid": "uid-data", "apiVersion": "v1", "resourceVersion": "1"}
    assert body["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    assert body["metadata"]["resourceVersion"] == "1"   # the version Reserve saw: a stale one conflicts
    vols = env.cache.volumes
    written = {**vol("pv1", node="n1", rv="2"), "spec": body["spec"]}
    vols.set_pv(parse_pv(written))
    await asyncio.sleep(0)
    assert not task.done()                            # the claim is not bound yet
    vols.set_pvc(_bound_claim("data", "pv1", "2"))    # the PV controller completes the binding
    st = await asyncio.wait_for(task, 1)
    assert st.is_success(), st.message()


async def test_pre_bind_sets_selected_node_for_provisioning() -> None:
    client = FakeClient()
    p = pod("data")
    env = Env(pvcs=(claim("data", cls="fast"),), client=client, pods={p.uid: p})
    state = env.reserve(p, "n3")
    assert env.chosen(state) == ([], ["data"])
    assert env.cache.volumes.assumed_claim("ns", "data").selected_node == "n3"   # assumed
    task = asyncio.create_task(env.plugin.pre_bind(state, p, "n3"))
    await asyncio.sleep(0)
    (path, body), = client.updates
    assert path == "/api/v1/namespaces/ns/persistentvolumeclaims/data"
    assert body["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "n3"
    provisioned = claim("data", cls="fast", selected="n3", rv="3")
    env.cache.volumes.set_pvc(parse_pvc({**provisioned, "metadata": {**provisioned["metadata"], "annotations": {}}}))
    st = await asyncio.wait_for(task, 1)   # the provisioner gave up: selected-node removed
    assert st.code == Code.ERROR and st.message() == 'binding volumes: provisioning failed for PVC "data"'


async def test_pre_bind_times_out_after_bind_timeout_seconds() -> None:
    p = pod("data")
    env = Env(pvcs=(claim("data"),), pvs=(vol("pv1", node="n1"),), client=FakeClient(), timeout=30, pods={p.uid: p})
    state = env.reserve(p, "n1")
    task = asyncio.create_task(env.plugin.pre_bind(state, p, "n1"))
    for _ in range(31):
        await asyncio.sleep(0)
        env.clock.advance(1)
    st = await asyncio.wait_for(task, 1)
    assert st.code == Code.ERROR and st.message() == ERR_BIND_TIMEOUT
    env.plugin.unreserve(state, p, "n1")   # what the binding cycle does next: the volume is free again
    assert env.cache.volumes.assumed_volume("pv1").claim_ref is None


async def test_a_conflict_fails_pre_bind_with_the_servers_words() -> None:
    p = pod("data")
    env = Env(pvcs=(claim("data"),), pvs=(vol("pv1", node="n1"),), client=FakeClient(Conflict()), pods={p.uid: p})
    state = env.reserve(p, "n1")
    st = await env.plugin.pre_bind(state, p, "n1")
    assert st.code == Code.ERROR and st.message() == Conflict.message


async def test_a_deleted_pod_stops_the_wait() -> None:
    p = pod("data")
    pods = {p.uid: p}
    env = Env(pvcs=(claim("data"),), pvs=(vol("pv1", node="n1"),), client=FakeClient(), pods=pods)
    state = env.reserve(p, "n1")
    task = asyncio.create_task(env.plugin.pre_bind(state, p, "n1"))
    await asyncio.sleep(0)
    del pods[p.uid]
    env.clock.advance(1)
    st = await asyncio.wait_for(task, 1)
    assert st.message() == 'binding volumes: pod does not exist any more: pod "p" not found'


async def test_all_bound_claims_need_no_pre_bind() -> None:
    env = Env(pvcs=(claim("data", volume="pv1"),), pvs=(vol("pv1", node="n1", ref="data", phase="Bound"),),
              client=FakeClient(fail=AssertionError("no write expected")))
    state = env.reserve(pod("data"), "n1")
    assert (await env.plugin.pre_bind(state, pod("data"), "n1")).is_success()


# ---------------------------------------------------------------------------- queueing hints


def _hint(resource: str) -> Any:
    (ev,) = [e for e in VolumeBinding(None, Handle(volume_cache({}), clock=FakeClock())).events_to_register()
             if e.event.resource == resource]
    return ev


def test_queueing_hints() -> None:
    p = pod("data")
    sc_old = parse_storage_class_(DYNAMIC)
    sc_new = parse_storage_class_({**DYNAMIC, "allowedTopologies": [{"matchLabelExpressions": [
        {"key": "zone", "values": ["a"]}]}]})
    assert _hint("StorageClass").hint(p, sc_old, sc_new) == QueueingHint.QUEUE
    assert _hint("StorageClass").hint(p, sc_old, sc_old) == QueueingHint.SKIP
    small = parse_csi_storage_capacity(capacity("c", "1Gi", "a"))
    big = parse_csi_storage_capacity(capacity("c", "5Gi", "a"))
    assert _hint("CSIStorageCapacity").hint(p, small, big) == QueueingHint.QUEUE
    assert _hint("CSIStorageCapacity").hint(p, big, small) == QueueingHint.SKIP
    off = parse_csi_driver({"metadata": {"name": "d"}})
    on = parse_csi_driver({"metadata": {"name": "d"}, "spec": {"storageCapacity": True}})
    assert _hint("CSIDriver").hint(p, off, on) == QueueingHint.QUEUE
    assert _hint("CSIDriver").hint(p, on, on) == QueueingHint.SKIP
    # upstream: a claim's deletion never makes a pod schedulable; a node's arrival may
    from scheduler.framework import ActionType
    assert not _hint("PersistentVolumeClaim").event.action & ActionType.DELETE
    assert _hint("Node").event.action & ActionType.ADD


def parse_storage_class_(obj: dict[str, Any]) -> Any:
    from scheduler.model import parse_storage_class
    return parse_storage_class(obj)


def test_best_static_needs_no_loop_over_pinned_volumes() -> None:
    """5,000 local volumes: each node row gets its own, smallest first, in one array answer."""
    nodes = {f"n{i}": {"kubernetes.io/hostname": f"n{i}"} for i in range(2500)}
    pvs = tuple(vol(f"pv{i}-{j}", f"{1 + j}Gi", node=f"n{i}") for i in range(2500) for j in range(2))
    cache = volume_cache(nodes, (claim("data"),), pvs, (LOCAL,))
    rows = cache.nodes.rows()
    m = cache.volumes.best_static(cache.volumes.assumed_claim("ns", "data"), rows, [])
    names = [m.name(i) for i in range(len(rows))]
    assert names == [f"pv{n[1:]}-0" for n in cache.nodes.names_of(rows)]
    assert isinstance(m.slot, np.ndarray)


@pytest.mark.parametrize("old_migrated,new_migrated,want", [
    pytest.param((), (), QueueingHint.SKIP, id="an update that migrates nothing new is skipped"),
    pytest.param((), ("kubernetes.io/aws-ebs",), QueueingHint.QUEUE, id="a plugin newly migrated queues the pod"),
])
def test_a_csinode_update_queues_only_when_its_migrated_plugins_change(old_migrated, new_migrated, want) -> None:
    from plugins.volume_binding import _csi_node_changed
    from scheduler.model import MIGRATED_PLUGINS_ANNOTATION, parse_csinode

    def cn(migrated: tuple[str, ...]) -> Any:
        ann = {MIGRATED_PLUGINS_ANNOTATION: ",".join(migrated)} if migrated else {}
        return parse_csinode({"metadata": {"name": "n1", "annotations": ann}, "spec": {"drivers": []}})

    pod = parse_pod({"metadata": {"name": "p", "namespace": "ns", "uid": "p"}, "spec": {}})
    assert _csi_node_changed(pod, cn(old_migrated), cn(new_migrated)) == want


def test_a_claims_selector_mask_is_kept_across_reservations_and_redone_when_labels_change(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The mask of the volumes a claim's selector picks is computed once per class and selector: assuming a
    volume for a pod (Reserve) changes which volumes are free, not their labels, so the next claim with that
    selector reuses it; a volume whose labels change makes it computed again."""
    from scheduler.model import LabelSelector
    gold = {"matchLabels": {"tier": "gold"}}
    env = Env(pvcs=(claim("a", selector=gold), claim("b", selector=gold)),
              pvs=(vol("pv1", node="n1", labels={"tier": "gold"}), vol("pv3", node="n3", labels={"tier": "gold"}),
                   vol("plain", node="n2")))
    calls = 0
    matches = LabelSelector.matches

    def counting(self: LabelSelector, labels: dict[str, str]) -> bool:
        nonlocal calls
        calls += 1
        return matches(self, labels)

    monkeypatch.setattr(LabelSelector, "matches", counting)
    assert env.filter(pod("a", uid="1")) == {"n1": OK, "n2": BIND, "n3": OK}
    first = calls
    assert first == 2, "one look at each labelled volume's labels"
    env.reserve(pod("a", uid="1"), "n1")
    assert env.filter(pod("b", uid="2")) == {"n1": BIND, "n2": BIND, "n3": OK}
    assert calls == first, "the reservation did not make the mask computed again"
    env.cache.volumes.set_pv(parse_pv(vol("plain", node="n2", labels={"tier": "gold"}, rv="2")))
    assert env.filter(pod("b", uid="2")) == {"n1": BIND, "n2": OK, "n3": OK}
    assert calls == first + 3, "computed again, now over three labelled volumes"


def test_a_claimref_is_interned_while_a_volume_names_it_and_forgotten_after() -> None:
    """The volumes' claimRefs are interned for the index's columns; an id goes with the last volume naming it, so
    a cluster whose claims come and go (a StatefulSet scaled up and down, a pipeline's workspaces) keeps the
    interned set to the claims its volumes name now."""
    env = Env(pvs=(vol("pv1", node="n1", ref="a"), vol("pv2", node="n2", ref="a"), vol("pv3", node="n3", ref="b")))
    vols = env.cache.volumes
    assert set(vols._claim_ids) == {"ns/a", "ns/b"}
    vols.set_pv(parse_pv(vol("pv3", node="n3", ref="c", rv="2")))
    assert set(vols._claim_ids) == {"ns/a", "ns/c"}, "a volume that names another claim lets go of its old one"
    vols.delete_pv("pv1")
    assert set(vols._claim_ids) == {"ns/a", "ns/c"}, "pv2 still names a"
    vols.delete_pv("pv2")
    vols.delete_pv("pv3")
    assert vols._claim_ids == {} and vols._claim_uses == {}
    env2 = Env(pvcs=(claim("a"),), pvs=(vol("mine", node="n1", ref="a"), vol("other", node="n2")))
    assert env2.filter(pod("a")) == {"n1": OK, "n2": BIND, "n3": BIND}, "a volume pre-bound to the claim still wins"
