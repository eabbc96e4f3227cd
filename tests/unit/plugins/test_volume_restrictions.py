"""VolumeRestrictions: ReadWriteOncePod claims, and refused inline disks (plugins/volume_restrictions.py)."""

from __future__ import annotations

from typing import Any

import pytest

from plugins.volume_restrictions import (
    DISK_CONFLICTS_NOT_CHECKED, ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT, VolumeRestrictions,
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
    pytest.param(pod("p", extra=({"name": "disk", "gcePersistentDisk": {"pdName": "d1"}},)), (),
                 (UU, f'volume "disk" (gcePersistentDisk) may conflict with the same disk used by another pod on '
                      f"the node: {DISK_CONFLICTS_NOT_CHECKED}", None),
                 id="an inline GCE disk is refused by name: tandem does not check disk conflicts"),
    pytest.param(pod("p", extra=({"name": "lun", "iscsi": {"iqn": "x", "targetPortal": "t", "lun": 0}},)), (),
                 (UU, f'volume "lun" (iscsi) may conflict with the same disk used by another pod on the node: '
                      f"{DISK_CONFLICTS_NOT_CHECKED}", None),
                 id="an inline iSCSI volume likewise"),
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
