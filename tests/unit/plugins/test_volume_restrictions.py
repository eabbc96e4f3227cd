"""VolumeRestrictions: ReadWriteOncePod claims and inline disk conflicts (plugins/volume_restrictions.py)."""

from __future__ import annotations

from typing import Any

import pytest

from plugins.volume_restrictions import (
    ERR_REASON_DISK_CONFLICT, ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT, VolumeRestrictions,
)
from scheduler.framework import ActionType, ClusterEvent, Code, CycleState, Handle, QueueingHint, Resource
from scheduler.framework.clock import FakeClock
from scheduler.model import parse_pod, parse_pvc
from tests.unit.plugins.volumes import volume_cache

UU, U = Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.UNSCHEDULABLE
NODES = {"n1": {}, "n2": {}}


def pod(name: str, *claims: str, node: str = "", ns: str = "ns", deleting: bool = False,
        extra: tuple[dict[str, Any], ...] = ()) -> Any:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    volumes = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return parse_pod({"metadata": meta, "spec": {"containers": [{"name": "c", "image": "x"}], "nodeName": node,
                                                 "volumes": volumes + list(extra)},
                      "status": {"phase": "Running" if node else "Pending"}})


def pvc(name: str, *modes: str, ns: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns},
            "spec": {"accessModes": list(modes), "volumeName": f"pv-{name}"}}


RWOP, RWO, RWX = "ReadWriteOncePod", "ReadWriteOnce", "ReadWriteMany"
CLAIMS = (pvc("solo", RWOP), pvc("solo2", RWOP, RWO), pvc("shared", RWX), pvc("solo", RWOP, ns="other"))


def run(p: Any, placed: tuple[Any, ...] = ()) -> tuple[Code, str, str | None]:
    """PreFilter's code and message, then Filter's one reason for all nodes (None: every node fits)."""
    cache = volume_cache(NODES, CLAIMS)
    for q in placed:
        cache.add_pod(q)
    plugin = VolumeRestrictions(None, Handle(cache, clock=FakeClock()))
    state = CycleState()
    _, st = plugin.pre_filter(state, p, cache.nodes)
    if not st.is_success() or st.code == Code.SKIP:
        return st.code, st.message(), None
    rows = cache.nodes.rows()
    res = plugin.filter(state, p, cache.nodes, rows)
    if res.passed.all():
        return st.code, st.message(), None
    (r,) = res.rejections
    assert r.mask.all() and r.code == U
    return st.code, st.message(), r.reason


CONFLICT = (Code.SUCCESS, "", ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT)
CONFLICT_NONE = (Code.SUCCESS, "", None)
SKIP = (Code.SKIP, "", None)
CASES = [
    pytest.param(pod("p"), (), SKIP, id="a pod without volumes is skipped"),
    pytest.param(pod("p", "solo"), (), SKIP, id="a ReadWriteOncePod claim nobody uses is skipped"),
    pytest.param(pod("p", "solo"), (pod("q", "solo", node="n1"),), CONFLICT,
                 id="a ReadWriteOncePod claim a placed pod uses fits nowhere, Unschedulable"),
    pytest.param(pod("p", "solo2"), (pod("q", "solo2", node="n2"),), CONFLICT,
                 id="ReadWriteOncePod among other access modes counts"),
    pytest.param(pod("p", "solo"), (pod("q", "solo", node="n1", deleting=True),), CONFLICT,
                 id="a terminating pod still holds the claim, as upstream"),
    pytest.param(pod("p", "solo"), (pod("q", "solo", node="n1", ns="other"),), SKIP,
                 id="the same claim name in another namespace is another claim"),
    pytest.param(pod("p", "shared"), (pod("q", "shared", node="n1"),), SKIP,
                 id="a ReadWriteMany claim may be shared"),
    pytest.param(pod("p", "missing"), (), (UU, 'persistentvolumeclaim "missing" not found', None),
                 id="a missing claim is named"),
    pytest.param(pod("p", extra=({"name": "disk", "gcePersistentDisk": {"pdName": "d1"}},)), (), CONFLICT_NONE,
                 id="an inline GCE disk nobody uses fits everywhere"),
]


@pytest.mark.parametrize("p, placed, want", CASES)
def test_pre_filter_and_filter(p: Any, placed: tuple[Any, ...], want: tuple[Code, str, str | None]) -> None:
    assert run(p, placed) == want


def test_removing_the_user_in_a_dry_run_lifts_the_conflict_and_adding_it_back_restores_it() -> None:
    user = pod("q", "solo", node="n1")
    cache = volume_cache(NODES, CLAIMS)
    cache.add_pod(user)
    plugin = VolumeRestrictions(None, Handle(cache, clock=FakeClock()))
    state = CycleState()
    p = pod("p", "solo")
    assert plugin.pre_filter(state, p, cache.nodes)[1].is_success()
    rows = cache.nodes.rows()
    dry = state.clone()
    assert plugin.remove_pod(dry, p, user, 0).is_success()
    assert plugin.filter(dry, p, cache.nodes, rows).passed.all()
    assert not plugin.filter(state, p, cache.nodes, rows).passed.any(), "the original state is not changed"
    assert plugin.add_pod(dry, p, user, 0).is_success()
    assert not plugin.filter(dry, p, cache.nodes, rows).passed.any()
    assert plugin.add_pod(dry, p, pod("r", "solo", ns="other"), 0).is_success()
    assert dry.get("PreFilterVolumeRestrictions").conflicts == 1


def test_the_cache_forgets_a_claim_when_its_last_user_goes() -> None:
    cache = volume_cache(NODES, CLAIMS)
    a, b = pod("a", "solo", node="n1"), pod("b", "solo", "shared", node="n2")
    cache.add_pod(a)
    cache.add_pod(b)
    assert cache.claim_users == {"ns/solo": 2, "ns/shared": 1}
    cache.remove_pod(a)
    cache.remove_pod(b)
    assert cache.claim_users == {}


def test_a_deleted_pod_requeues_only_pods_sharing_a_claim_with_it() -> None:
    hints = {ev.event.resource: ev.hint for ev in VolumeRestrictions(None, None).events_to_register()}
    (on_delete, on_claim) = hints[Resource.POD], hints[Resource.PVC]
    p = pod("p", "solo")
    assert on_delete(p, pod("q", "solo", node="n1"), None) == QueueingHint.QUEUE
    assert on_delete(p, pod("q", "shared", node="n1"), None) == QueueingHint.SKIP
    assert on_delete(p, pod("q", "solo", node="n1", ns="other"), None) == QueueingHint.SKIP
    assert on_claim(p, None, parse_pvc(pvc("solo"))) == QueueingHint.QUEUE
    assert on_claim(p, None, parse_pvc(pvc("solo", ns="other"))) == QueueingHint.SKIP
    assert ClusterEvent(Resource.NODE, ActionType.ADD) in [
        ev.event for ev in VolumeRestrictions(None, None).events_to_register()]


# ---------------------------------------------------------------------------- disk conflicts (upstream's
# TestGCEDiskConflicts, TestAWSDiskConflicts, TestRBDDiskConflicts, TestISCSIDiskConflicts and the read-only
# cases of isVolumeConflict)

def gce(pd: str, ro: bool = False) -> dict[str, Any]:
    return {"name": "v", "gcePersistentDisk": {"pdName": pd, "fsType": "ext4", "readOnly": ro}}


def ebs(vid: str, ro: bool = False) -> dict[str, Any]:
    return {"name": "v", "awsElasticBlockStore": {"volumeID": vid, "readOnly": ro}}


def rbd(monitors: list[str], pool: str = "foo", image: str = "bar", ro: bool = False) -> dict[str, Any]:
    return {"name": "v", "rbd": {"monitors": monitors, "pool": pool, "image": image, "readOnly": ro}}


def iscsi(iqn: str, ro: bool = False) -> dict[str, Any]:
    return {"name": "v", "iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": iqn, "lun": 0, "readOnly": ro}}


IQN1, IQN2 = "iqn.2016-12.server:storage.target01", "iqn.2016-12.server:storage.target02"
DISK_CASES = [
    # (the new pod's volume, the volume of the pod on n1, does n1 fail)
    pytest.param(gce("foo"), gce("foo"), True, id="the same GCE disk conflicts"),
    pytest.param(gce("foo"), gce("bar"), False, id="another GCE disk does not"),
    pytest.param(gce("foo", ro=True), gce("foo", ro=True), False, id="a GCE disk read-only by both is shared"),
    pytest.param(gce("foo", ro=True), gce("foo"), True, id="a GCE disk read-write by the placed pod conflicts"),
    pytest.param(gce("foo"), gce("foo", ro=True), True, id="a GCE disk read-write by the new pod conflicts"),
    pytest.param(ebs("foo"), ebs("foo"), True, id="the same EBS volume conflicts"),
    pytest.param(ebs("foo"), ebs("bar"), False, id="another EBS volume does not"),
    pytest.param(ebs("foo", ro=True), ebs("foo", ro=True), True, id="an EBS volume conflicts even read-only"),
    pytest.param(rbd(["a", "b"]), rbd(["a", "b"]), True, id="the same RBD image conflicts"),
    pytest.param(rbd(["a", "b"]), rbd(["c", "d"]), False, id="an RBD image behind other monitors does not"),
    pytest.param(rbd(["a", "b"]), rbd(["b", "c"]), True, id="one Ceph monitor in common is the same image"),
    pytest.param(rbd(["a"], pool="p2"), rbd(["a"]), False, id="another RBD pool does not"),
    pytest.param(rbd(["a"], image="i2"), rbd(["a"]), False, id="another RBD image does not"),
    pytest.param(rbd(["a"], ro=True), rbd(["a"], ro=True), False, id="an RBD image read-only by both is shared"),
    pytest.param(iscsi(IQN1), iscsi(IQN1), True, id="the same iSCSI IQN conflicts"),
    pytest.param(iscsi(IQN1), iscsi(IQN2), False, id="another IQN does not"),
    pytest.param(iscsi(IQN1, ro=True), iscsi(IQN1, ro=True), False, id="an IQN read-only by both is shared"),
    pytest.param(iscsi(IQN1, ro=True), iscsi(IQN1), True, id="an IQN read-write by the placed pod conflicts"),
    pytest.param(gce("foo"), ebs("foo"), False, id="disks of different kinds never conflict"),
]


@pytest.mark.parametrize("mine, theirs, conflicts", DISK_CASES)
def test_disk_conflicts(mine: dict[str, Any], theirs: dict[str, Any], conflicts: bool) -> None:
    cache = volume_cache(NODES, CLAIMS)
    cache.add_pod(pod("q", node="n1", extra=(theirs,)))
    plugin = VolumeRestrictions(None, Handle(cache, clock=FakeClock()))
    state = CycleState()
    p = pod("p", extra=(mine,))
    assert plugin.pre_filter(state, p, cache.nodes)[1].code == Code.SUCCESS, "a pod with a disk is not skipped"
    rows = cache.nodes.rows()
    res = plugin.filter(state, p, cache.nodes, rows)
    failed = set(cache.nodes.names_of(rows[~res.passed]))
    assert failed == ({"n1"} if conflicts else set())
    if conflicts:
        (r,) = res.rejections
        assert (r.reason, r.code) == (ERR_REASON_DISK_CONFLICT, U)


def test_a_disk_conflict_is_reported_before_a_read_write_once_pod_conflict() -> None:
    cache = volume_cache(NODES, CLAIMS)
    cache.add_pod(pod("q", "solo", node="n1", extra=(gce("foo"),)))
    plugin = VolumeRestrictions(None, Handle(cache, clock=FakeClock()))
    state = CycleState()
    p = pod("p", "solo", extra=(gce("foo"),))
    plugin.pre_filter(state, p, cache.nodes)
    rows = cache.nodes.rows()
    res = plugin.filter(state, p, cache.nodes, rows)
    assert not res.passed.any()
    reasons = {r.reason: set(cache.nodes.names_of(rows[r.mask])) for r in res.rejections}
    assert reasons == {ERR_REASON_DISK_CONFLICT: {"n1"}, ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT: {"n2"}}


def test_removing_the_disk_user_in_a_dry_run_frees_its_node_only() -> None:
    cache = volume_cache(NODES, CLAIMS)
    user, other = pod("q", node="n1", extra=(gce("foo"),)), pod("r", node="n2", extra=(gce("foo"),))
    cache.add_pod(user)
    cache.add_pod(other)
    plugin = VolumeRestrictions(None, Handle(cache, clock=FakeClock()))
    state = CycleState()
    p = pod("p", extra=(gce("foo"),))
    plugin.pre_filter(state, p, cache.nodes)
    rows = cache.nodes.rows()
    n1 = cache.nodes.row("n1")
    dry = state.clone()
    assert plugin.remove_pod(dry, p, user, n1).is_success()
    passed = plugin.filter(dry, p, cache.nodes, rows).passed
    assert set(cache.nodes.names_of(rows[passed])) == {"n1"}
    assert not plugin.filter(state, p, cache.nodes, rows).passed.any(), "the original state is not changed"
    assert plugin.add_pod(dry, p, user, n1).is_success()
    assert not plugin.filter(dry, p, cache.nodes, rows).passed.any()


def test_the_disk_index_forgets_a_disk_when_its_last_user_goes() -> None:
    cache = volume_cache(NODES, CLAIMS)
    a, b = pod("a", node="n1", extra=(gce("foo", ro=True),)), pod("b", node="n1", extra=(gce("foo"),))
    cache.add_pod(a)
    cache.add_pod(b)
    assert cache.disks.uses == {"gce\0foo": {"n1": [2, 1]}}
    cache.remove_pod(b)
    assert list(cache.disks.conflicting("gce\0foo", True, True)) == []
    cache.remove_pod(a)
    assert cache.disks.uses == {}


def test_a_deleted_pod_whose_disk_conflicted_requeues_the_pod() -> None:
    hints = {ev.event.resource: ev.hint for ev in VolumeRestrictions(None, None).events_to_register()}
    on_delete = hints[Resource.POD]
    p = pod("p", extra=(gce("foo"),))
    assert on_delete(p, pod("q", node="n1", extra=(gce("foo"),)), None) == QueueingHint.QUEUE
    assert on_delete(p, pod("q", node="n1", extra=(gce("bar"),)), None) == QueueingHint.SKIP
    assert on_delete(pod("p", extra=(gce("foo", ro=True),)), pod("q", node="n1", extra=(gce("foo", ro=True),)),
                     None) == QueueingHint.SKIP
    # upstream skips a deleted pod of another namespace before looking at disks
    assert on_delete(p, pod("q", node="n1", ns="other", extra=(gce("foo"),)), None) == QueueingHint.SKIP
