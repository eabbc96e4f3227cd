"""NodeVolumeLimits (plugins/node_volume_limits.py) and its per-node counts (scheduler/state/attach.py).

The table translates kubernetes/kubernetes ``pkg/scheduler/framework/plugins/nodevolumelimits/csi_test.go``
(TestCSILimits): the same fixture (four bound claims per driver, ``csi-<driver>-<j>``, each on a PV of that driver
whose handle is its name, or an in-tree EBS or hostPath PV for those "drivers"; ``csi-4`` unbound with class
``csi-sc`` whose provisioner is the first driver, ``csi-5`` without a class, ``csi-6`` naming a PV that does not
exist; ``vaCount`` VolumeAttachments per driver of ``csi-<driver>-<j>``; a CSINode whose drivers have the count
``maxVols``, or no count, or no CSINode, with the in-tree EBS plugin marked migrated). Upstream's pods in
namespace "" are in "ns" here. Where upstream's PreFilter succeeds and Filter then fits every node, tandem's
PreFilter may Skip (no limit applies): the verdict is the same, "fits".
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from plugins.node_volume_limits import ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, NodeVolumeLimits
from scheduler.config import parse_config
from scheduler.framework import ActionType, ClusterEvent, Code, CycleState, Handle, QueueingHint, Resource
from scheduler.framework.clock import FakeClock
from scheduler.framework.runtime import Framework
from scheduler.model import (
    MIGRATED_PLUGINS_ANNOTATION, Pod, parse_csinode, parse_node, parse_pod, parse_pv, parse_pvc,
    parse_storage_class, parse_volume_attachment,
)
from scheduler.state.cache import Cache
from tests.unit.plugins.test_default_preemption import FakePreemption
from tests.unit.plugins.volumes import volume_cache

EBS, GCE = "ebs.csi.aws.com", "pd.csi.storage.gke.io"
EBS_IN_TREE, HOSTPATH = "kubernetes.io/aws-ebs", "kubernetes.io/hostpath"
NODE = "node-for-max-pd-test-1"
SC = "csi-sc"
U, UU = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE
EXCEED = (U, ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)


def pod(name: str = "p", *claims: str, ns: str = "ns", uid: str = "", node: str = "",
        volumes: tuple[dict[str, Any], ...] = ()) -> Pod:
    vols = [{"name": f"c{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return parse_pod({"metadata": {"name": name, "namespace": ns, "uid": uid or f"uid-{name}-{len(claims)}"},
                      "spec": {"containers": [{"name": "c", "image": "x"}], "nodeName": node,
                               "volumes": vols + list(volumes)}})


def ephemeral(name: str) -> dict[str, Any]:
    return {"name": name, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}


def aws_inline(volume_id: str) -> dict[str, Any]:
    return {"name": "aws", "awsElasticBlockStore": {"volumeID": volume_id}}


CONFIG_AND_SECRET = ({"name": "cm", "configMap": {"name": "x"}}, {"name": "s", "secret": {"secretName": "x"}})

# upstream's pods
RUNNING = pod("running", f"csi-{EBS}-3")
PENDING = pod("pending", "csi-4")
UNBOUND2 = pod("unbound2", "csi-4")
MISSING_PV = pod("missing-pv", "csi-6")
NO_SC = pod("no-sc", "csi-5")
GCE_TWO = pod("gce-two", f"csi-{GCE}-1", f"csi-{GCE}-2")
IN_TREE_ONE = pod("in-tree-one", f"csi-{EBS_IN_TREE}-0")
IN_TREE_TWO = pod("in-tree-two", f"csi-{EBS_IN_TREE}-1", f"csi-{EBS_IN_TREE}-2")
EBS_ONE = pod("ebs-one", f"csi-{EBS}-0")
EBS_TWO = pod("ebs-two", f"csi-{EBS}-1", f"csi-{EBS}-2")
HOSTPATH_ONE = pod("hostpath-one", f"csi-{HOSTPATH}-0")
EPHEMERAL = pod("abc", ns="test", uid="12345", volumes=(ephemeral("xyz"),))
EPHEMERAL_TWO = pod("abc", ns="test", uid="12345II", volumes=(ephemeral("x"), ephemeral("y")))
IN_TREE_INLINE = pod("in-tree-inline", volumes=(aws_inline("aws-inline1"),))
IN_TREE_INLINE_SAME_ID = pod("in-tree-inline-same", volumes=(aws_inline(f"csi-{EBS}-1"),))
ONLY_CONFIG = pod("only-config", volumes=CONFIG_AND_SECRET)
PVC_WITH_CONFIG = pod("pvc-config", f"csi-{EBS}-0", volumes=CONFIG_AND_SECRET)
EPHEMERAL_WITH_CONFIG = pod("abc", ns="test", uid="12345", volumes=(*CONFIG_AND_SECRET, ephemeral("xyz")))
INLINE_WITH_CONFIG = pod("inline-config", volumes=(*CONFIG_AND_SECRET, aws_inline("aws-inline1")))


def claim(name: str, ns: str = "test", sc: str | None = SC, owner: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if owner:
        meta["ownerReferences"] = [{"kind": "Pod", "name": "abc", "uid": owner, "controller": True}]
    return {"metadata": meta, "spec": {"storageClassName": sc} if sc else {}}


EPHEMERAL_CLAIM = claim("abc-xyz", owner="12345")
CONFLICTING_CLAIM = claim("abc-xyz")
EPHEMERAL_CLAIM_X, EPHEMERAL_CLAIM_Y = claim("abc-x", owner="12345II"), claim("abc-y", owner="12345II")


def fixture(drivers: list[str], va_count: int) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """getFakeCSIPVLister, getFakeCSIPVCLister, getFakeCSIStorageClassLister, getFakeVolumeAttachmentLister."""
    pvs, pvcs, vas = [], [], []
    for d in drivers:
        for j in range(4):
            name = f"csi-{d}-{j}"
            if d == EBS_IN_TREE:
                source: dict[str, Any] = {"awsElasticBlockStore": {"volumeID": name}}
            elif d == HOSTPATH:
                source = {"hostPath": {"path": "/tmp"}}
            else:
                source = {"csi": {"driver": d, "volumeHandle": name}}
            pvs.append({"metadata": {"name": name}, "spec": source})
            pvcs.append({"metadata": {"name": name, "namespace": "ns"}, "spec": {"volumeName": name}})
        vas += [{"metadata": {"name": f"va-{d}-{j}"},
                 "spec": {"nodeName": NODE, "attacher": d, "source": {"persistentVolumeName": f"csi-{d}-{j}"}}}
                for j in range(va_count)]
    pvcs += [{"metadata": {"name": "csi-4", "namespace": "ns"}, "spec": {"storageClassName": SC}},
             {"metadata": {"name": "csi-5", "namespace": "ns"}, "spec": {}},
             {"metadata": {"name": "csi-6", "namespace": "ns"},
              "spec": {"storageClassName": SC, "volumeName": "missing-in-action"}}]
    classes = [{"metadata": {"name": SC}, "provisioner": drivers[0]}]
    return pvs, pvcs, classes, vas


def csinode(source: str, limit: int, drivers: list[str]) -> dict[str, Any] | None:
    """getNodeWithPodAndVolumeLimits' CSINode, with enableMigrationOnNode(EBS in-tree)."""
    if source not in ("csinode", "csinode-with-no-limit"):
        return None
    ds = [{"name": d, "nodeID": NODE} | ({"allocatable": {"count": limit}} if source == "csinode" else {})
          for d in drivers]
    return {"metadata": {"name": NODE, "annotations": {MIGRATED_PLUGINS_ANNOTATION: EBS_IN_TREE}},
            "spec": {"drivers": ds}}


def cache_with(drivers: list[str], existing: tuple[Pod, ...] = (), limit: int = 0, source: str = "csinode",
               va_count: int = 0, extra_claims: tuple[dict[str, Any], ...] = ()) -> Cache:
    pvs, pvcs, classes, vas = fixture(drivers, va_count)
    cache = volume_cache({NODE: {}}, tuple(pvcs) + extra_claims, tuple(pvs), tuple(classes))
    cn = csinode(source, limit, drivers)
    if cn is not None:
        cache.attachments.set_csinode(parse_csinode(cn))
    for va in vas:
        cache.attachments.set_attachment(parse_volume_attachment(va))
    for p in existing:
        cache.add_pod(parse_pod(p.raw | {"spec": p.raw["spec"] | {"nodeName": NODE}}))
    return cache


def verdict(cache: Cache, p: Pod) -> tuple[Code, str] | None | str:
    """None: the node fits; (code, reason) if Filter fails it; "skip-all" if PreFilter skips a pod with no
    volume it could count (upstream's own Skip)."""
    plugin = NodeVolumeLimits(None, Handle(cache, clock=FakeClock()))
    state = CycleState()
    _, st = plugin.pre_filter(state, p, cache.nodes)
    if st.code == Code.SKIP:
        return "skip" if not p.pvcs and not p.inline_attach else None
    assert st.is_success(), st
    rows = cache.nodes.rows()
    res = plugin.filter(state, p, cache.nodes, rows)
    if res.error is not None:
        return res.error.code, res.error.message()
    if res.passed.all():
        return None
    (r,) = res.rejections
    return r.code, r.reason


CASES = [
    # (new pod, existing pods, maxVols, drivers, limit source, vaCount, extra claims, want)
    pytest.param(EBS_ONE, (), 2, [EBS], "csinode", 2, (), EXCEED,
                 id="should count VolumeAttachments towards volume limit when no pods exist"),
    pytest.param(EBS_ONE, (), 2, [EBS], "csinode", 1, (), None,
                 id="should schedule pod when VolumeAttachments count does not exceed limit"),
    pytest.param(EBS_ONE, (RUNNING, EBS_TWO), 4, [EBS], "csinode", 0, (), None,
                 id="fits when node volume limit >= new pods CSI volume"),
    pytest.param(EBS_ONE, (RUNNING, EBS_TWO), 2, [EBS], "csinode", 0, (), EXCEED,
                 id="doesn't when node volume limit <= pods CSI volume"),
    pytest.param(EBS_ONE, (RUNNING, EBS_TWO), 2, [EBS], "csinode-with-no-limit", 0, (), None,
                 id="should when driver does not support volume limits"),
    pytest.param(EBS_ONE, (PENDING, EBS_TWO), 2, [EBS], "csinode", 0, (), EXCEED,
                 id="count pending PVCs towards volume limit <= pods CSI volume"),
    pytest.param(EBS_ONE, (PENDING, UNBOUND2, EBS_TWO), 4, [EBS], "csinode", 0, (), None,
                 id="count multiple pending pvcs towards volume limit >= pods CSI volume"),
    pytest.param(EBS_ONE, (MISSING_PV, EBS_TWO), 2, [EBS], "csinode", 0, (), EXCEED,
                 id="should count PVCs with invalid PV name but valid SC"),
    pytest.param(EBS_ONE, (RUNNING, NO_SC), 2, [EBS], "csinode", 0, (), None,
                 id="don't count pvcs with missing SC towards volume limit"),
    pytest.param(EBS_ONE, (GCE_TWO, EBS_TWO), 2, [EBS, GCE], "csinode", 0, (), EXCEED,
                 id="count pvcs with the same type towards volume limit"),
    pytest.param(GCE_TWO, (EBS_TWO, RUNNING), 2, [EBS, GCE], "csinode", 0, (), None,
                 id="don't count pvcs with different type towards volume limit"),
    pytest.param(IN_TREE_ONE, (IN_TREE_TWO,), 2, [EBS_IN_TREE, EBS], "csinode", 0, (), EXCEED,
                 id="should count in-tree volumes if migration is enabled"),
    pytest.param(IN_TREE_INLINE, (IN_TREE_TWO,), 0, [EBS_IN_TREE, EBS], "", 0, (), None, id="nil csi node"),
    pytest.param(PENDING, (IN_TREE_TWO,), 2, [EBS_IN_TREE, EBS], "csinode", 0, (), EXCEED,
                 id="should count unbound in-tree volumes if migration is enabled"),
    pytest.param(IN_TREE_ONE, (IN_TREE_TWO,), 2, [EBS_IN_TREE, EBS], "csinode-with-no-limit", 0, (), None,
                 id="should not limit pod if volume used does not report limits"),
    pytest.param(HOSTPATH_ONE, (EBS_TWO,), 2, [HOSTPATH, EBS], "csinode", 0, (), None,
                 id="should not count non-migratable in-tree volumes"),
    pytest.param(IN_TREE_INLINE, (IN_TREE_TWO,), 2, [EBS_IN_TREE, EBS], "csinode", 0, (), EXCEED,
                 id="should count in-tree inline volumes if migration is enabled"),
    pytest.param(IN_TREE_ONE, (EBS_TWO,), 2, [EBS_IN_TREE, EBS], "csinode", 0, (), EXCEED,
                 id="should count in-tree and csi volumes if migration is enabled (when scheduling in-tree volumes)"),
    pytest.param(IN_TREE_INLINE, (EBS_TWO, IN_TREE_ONE), 3, [EBS_IN_TREE, EBS], "csinode", 0, (), EXCEED,
                 id="should count in-tree, inline and csi volumes if migration is enabled"),
    pytest.param(IN_TREE_INLINE_SAME_ID, (EBS_TWO, IN_TREE_ONE), 3, [EBS_IN_TREE, EBS], "csinode", 0, (), None,
                 id="an inline in-tree volume with a CSI volume's handle is that volume, counted once"),
    pytest.param(EBS_ONE, (IN_TREE_TWO,), 2, [EBS_IN_TREE, EBS], "csinode", 0, (), EXCEED,
                 id="should count in-tree and csi volumes if migration is enabled (when scheduling csi volumes)"),
    pytest.param(EPHEMERAL, (), 0, [EBS], "csinode-with-no-limit", 0, (),
                 (UU, 'looking up PVC test/abc-xyz: persistentvolumeclaims "abc-xyz" not found'),
                 id="ephemeral volume missing"),
    pytest.param(EPHEMERAL, (), 0, [EBS], "csinode-with-no-limit", 0, (CONFLICTING_CLAIM,),
                 (Code.ERROR, "PVC test/abc-xyz was not created for pod test/abc (pod is not owner)"),
                 id="ephemeral volume not owned"),
    pytest.param(EPHEMERAL, (), 0, [EBS], "csinode-with-no-limit", 0, (EPHEMERAL_CLAIM,), None,
                 id="ephemeral volume unbound"),
    pytest.param(EPHEMERAL, (RUNNING, EBS_TWO), 2, [EBS], "csinode", 0, (EPHEMERAL_CLAIM,), EXCEED,
                 id="ephemeral doesn't when node volume limit <= pods CSI volume"),
    pytest.param(EBS_ONE, (RUNNING, EPHEMERAL_TWO), 2, [EBS], "csinode", 0, (EPHEMERAL_CLAIM_X, EPHEMERAL_CLAIM_Y),
                 EXCEED, id="ephemeral doesn't when node volume limit <= pods ephemeral CSI volume"),
    pytest.param(EBS_ONE, (RUNNING, EPHEMERAL, EBS_TWO), 3, [EBS], "csinode", 0, (EPHEMERAL_CLAIM,), EXCEED,
                 id="persistent doesn't when node volume limit <= pods ephemeral CSI volume + persistent volume"),
    pytest.param(EBS_ONE, (RUNNING, EPHEMERAL, EBS_TWO), 5, [EBS], "csinode", 0, (EPHEMERAL_CLAIM,), None,
                 id="persistent okay when node volume limit > pods ephemeral CSI volume + persistent volume"),
    pytest.param(ONLY_CONFIG, (), 2, [EBS], "csinode", 0, (), "skip",
                 id="skip Filter when the pod only uses secrets and configmaps"),
    pytest.param(PVC_WITH_CONFIG, (), 2, [EBS], "csinode", 0, (), None, id="don't skip Filter when the pod has pvcs"),
    pytest.param(EPHEMERAL_WITH_CONFIG, (), 0, [EBS], "csinode-with-no-limit", 0, (),
                 (UU, 'looking up PVC test/abc-xyz: persistentvolumeclaims "abc-xyz" not found'),
                 id="don't skip Filter when the pod has ephemeral volumes"),
    pytest.param(INLINE_WITH_CONFIG, (IN_TREE_TWO,), 2, [EBS_IN_TREE, EBS], "csinode", 0, (), EXCEED,
                 id="don't skip Filter when the pod has inline migratable volumes"),
    # tandem's: attachments and pods' volumes are one set; the new pod's volumes already there are not new
    pytest.param(pod("p", f"csi-{EBS}-3"), (EBS_TWO,), 4, [EBS], "csinode", 2, (), None,
                 id="a volume both attached and used by a pod counts once"),
    pytest.param(pod("p", f"csi-{EBS}-3"), (EBS_TWO,), 3, [EBS], "csinode", 2, (), EXCEED,
                 id="attached volumes no pod uses count too"),
    pytest.param(pod("p", f"csi-{EBS}-1"), (EBS_TWO,), 1, [EBS], "csinode", 0, (), None,
                 id="a pod whose volumes are all on the node fits even where the count is passed"),
    pytest.param(IN_TREE_ONE, (IN_TREE_TWO,), 2, [EBS_IN_TREE, EBS], "csinode-not-migrated", 0, (), None,
                 id="in-tree volumes count only where the CSINode says they are migrated"),
]


@pytest.mark.parametrize("new, existing, limit, drivers, source, va_count, extra, want", CASES)
def test_csi_limits(new: Pod, existing: tuple[Pod, ...], limit: int, drivers: list[str], source: str,
                    va_count: int, extra: tuple[dict[str, Any], ...], want: Any) -> None:
    if source == "csinode-not-migrated":
        cache = cache_with(drivers, existing, limit, "csinode", va_count, extra)
        cn = csinode("csinode", limit, drivers)
        assert cn is not None
        cn["metadata"]["annotations"] = {}
        cache.attachments.set_csinode(parse_csinode(cn))
    else:
        cache = cache_with(drivers, existing, limit, source, va_count, extra)
    assert verdict(cache, new) == want


# ---------------------------------------------------------------------------- the counts as things change

def test_a_claim_that_binds_is_recounted_under_its_volume() -> None:
    cache = cache_with([EBS], (PENDING,), limit=1)
    att = cache.attachments
    col = att.drivers[EBS]
    row = cache.nodes.row(NODE)
    assert att.used[row, col] == 1, "counted by its class's provisioner while unbound"
    # the claim binds to csi-ebs-0: now it is that volume, and a pod of csi-ebs-0 adds nothing there
    cache.volumes.api_claims["ns/csi-4"] = parse_pvc({"metadata": {"name": "csi-4", "namespace": "ns"},
                                                  "spec": {"storageClassName": SC, "volumeName": f"csi-{EBS}-0"}})
    att.claim_changed("ns/csi-4")
    assert att.used[row, col] == 1
    assert verdict(cache, EBS_ONE) is None
    assert verdict(cache, pod("q", f"csi-{EBS}-1")) == EXCEED
    # its volume's handle changes (a PV recreated): counted under the new handle
    cache.volumes.api_volumes[f"csi-{EBS}-0"] = parse_pv({"metadata": {"name": f"csi-{EBS}-0"},
                                                      "spec": {"csi": {"driver": EBS, "volumeHandle": "other"}}})
    att.volume_changed(f"csi-{EBS}-0")
    assert att.nodes_using.get(f"{EBS}/other") == {NODE}
    cache.remove_pod(PENDING)
    assert att.used[row, col] == 0 and att.nodes_using == {} and att.counted == {}


def test_the_claims_users_are_logged_at_placement_and_indexed_when_a_claim_or_volume_event_needs_them() -> None:
    """A placement appends its claims' users to a log (the cycle pays an append); the index of which nodes use
    a claim takes the log in when a claim, volume or class event reads it, or when the log grows long, and then
    is what placing and removing the pods one by one gives."""
    from scheduler.state.attach import CLAIM_LOG_LIMIT
    cache = cache_with([EBS], (), limit=CLAIM_LOG_LIMIT * 2)
    att = cache.attachments
    placed = [parse_pod(pod(f"p{i}", f"csi-{EBS}-{i % 4}", node=NODE).raw | {"metadata": {
        "name": f"p{i}", "namespace": "ns", "uid": f"u{i}"}}) for i in range(CLAIM_LOG_LIMIT + 10)]
    for p in placed[:5]:
        cache.add_pod(p)
    assert att._claim_nodes == {} and len(att._claim_log) == 5, "placing only logs"
    att.volume_changed(f"csi-{EBS}-0")
    assert att._claim_log == [] and att._claim_nodes == {f"ns/csi-{EBS}-{j}": {NODE: 2 if j == 0 else 1}
                                                         for j in range(4)}
    assert att._claim_pv == {f"ns/csi-{EBS}-{j}": f"csi-{EBS}-{j}" for j in range(4)}, "tracked under its volume"
    for p in placed[5:]:
        cache.add_pod(p)
    assert len(att._claim_log) < CLAIM_LOG_LIMIT, "a log no event reads stays bounded"
    for p in placed[:-1]:
        cache.remove_pod(p)
    att.class_changed(SC)
    last = f"ns/csi-{EBS}-{(len(placed) - 1) % 4}"
    assert att._claim_nodes == {last: {NODE: 1}} and list(att._claim_pv) == [last], "removals untrack"


def test_a_csinode_that_arrives_or_grows_changes_the_verdict_and_a_deleted_one_lifts_the_limit() -> None:
    cache = cache_with([EBS], (EBS_TWO,), source="")
    assert verdict(cache, EBS_ONE) is None, "no CSINode: no limit"
    cn = csinode("csinode", 2, [EBS])
    assert cn is not None
    cache.attachments.set_csinode(parse_csinode(cn))
    assert verdict(cache, EBS_ONE) == EXCEED
    cn["spec"]["drivers"][0]["allocatable"]["count"] = 3
    cache.attachments.set_csinode(parse_csinode(cn))
    assert verdict(cache, EBS_ONE) is None
    cache.attachments.remove_csinode(NODE)
    assert verdict(cache, pod("q", f"csi-{EBS}-0", f"csi-{EBS}-3")) is None


def test_while_no_csinode_sets_a_count_nothing_is_counted_and_a_count_that_arrives_counts_every_pod() -> None:
    """While no CSINode limits a driver no pod can be refused for its volumes: a placement records the pod's
    references and counts nothing (the cycle pays nothing for volumes it cannot be refused). The first count to
    arrive counts every pod placed before it; when the last goes, the counts are forgotten."""
    cache = cache_with([EBS], (EBS_TWO,), source="")
    att = cache.attachments
    row = cache.nodes.row(NODE)
    assert not att.counting and att.limited == {}
    assert att.counted == {} and att.nodes_using == {} and not att.used.any(), "the placement counted nothing"
    assert verdict(cache, EBS_ONE) is None
    cn = csinode("csinode", 2, [EBS])
    assert cn is not None
    att.set_csinode(parse_csinode(cn))
    assert att.counting and att.limited == {EBS: 1}
    col = att.drivers[EBS]
    assert (att.limit[row, col], att.used[row, col]) == (2, 2), "the two volumes placed before the count arrived"
    assert att.fits_everywhere(col, 0) and not att.fits_everywhere(col, 1)
    assert verdict(cache, EBS_ONE) == EXCEED
    att.remove_csinode(NODE)
    assert not att.counting and att.limited == {}
    assert att.counted == {} and att.nodes_using == {} and not att.used.any() and (att.limit == -1).all(), "forgotten"
    assert att.fits_everywhere(col, 1_000)
    cache.add_pod(parse_pod(EBS_ONE.raw | {"spec": EBS_ONE.raw["spec"] | {"nodeName": NODE}}))
    assert not att.used.any(), "nothing counted again"
    att.set_csinode(parse_csinode(cn))
    assert att.used[row, col] == 3 and att.counted == {NODE: {f"{EBS}/csi-{EBS}-{j}" for j in range(3)}}


@pytest.mark.parametrize("placed,ebs", [
    pytest.param((EBS_ONE, EBS_TWO, pod("again", f"csi-{EBS}-0")), 3, id="CSI volumes, one placed twice"),
    pytest.param((EBS_ONE, PENDING, UNBOUND2), 2, id="a claim not bound yet, counted once under its class's provisioner"),
    pytest.param((EBS_TWO, IN_TREE_ONE, EBS_ONE), 4, id="a migrated in-tree volume among them: recounted"),
])
def test_a_placement_counted_in_place_gives_what_a_recount_gives(placed: tuple[Pod, ...], ebs: int) -> None:
    cache = cache_with([EBS, EBS_IN_TREE], (), limit=9)
    att = cache.attachments
    row = cache.nodes.row(NODE)
    assert row is not None

    def snapshot() -> tuple[Any, ...]:
        return (att.used[row].tolist(), att.headroom[row].tolist(), {n: set(v) for n, v in att.counted.items()},
                {u: set(v) for u, v in att.nodes_using.items()}, list(att._least))

    for p in placed:
        cache.add_pod(parse_pod(p.raw | {"spec": p.raw["spec"] | {"nodeName": NODE}}))
        incremental = snapshot()
        att.recount(NODE)
        assert snapshot() == incremental, p.name
        assert att._least == att.headroom.min(axis=0).tolist(), "each column's least headroom is exact"
    assert att.used[row, att.drivers[EBS]] == ebs


def held(att: Any) -> dict[str, Any]:
    """Everything an Attachments holds (its node table and volume store aside), as plain values."""
    return {k: v.tolist() if isinstance(v, np.ndarray) else copy.deepcopy(v)
            for k, v in vars(att).items() if k not in ("_nodes", "_volumes")}


def placed(p: Pod, node: str = NODE) -> Pod:
    return parse_pod(p.raw | {"spec": p.raw["spec"] | {"nodeName": node}})


def test_reading_the_counts_changes_nothing_and_finds_every_change_counted() -> None:
    """STYLE.md 13: a read answers from what is there. Changes of every kind are made (pods placed and removed,
    one not countable in place, a claim that binds, an attachment, a count that shrinks and one that grows
    back), then every read NodeVolumeLimits makes, and a cycle's PreFilter and Filter, run: what the
    Attachments holds is the same after them as before, and what they read is what a recount gives, so each
    change was counted when it was made."""
    cache = cache_with([EBS, EBS_IN_TREE], (EBS_TWO, RUNNING, PENDING), limit=6, va_count=1)
    att = cache.attachments
    row = cache.nodes.row(NODE)
    ebs = att.drivers[EBS]
    cache.remove_pod(placed(RUNNING))
    cache.add_pod(placed(IN_TREE_ONE))
    cache.volumes.api_claims["ns/csi-4"] = parse_pvc({"metadata": {"name": "csi-4", "namespace": "ns"},
                                                      "spec": {"storageClassName": SC, "volumeName": f"csi-{EBS}-3"}})
    att.claim_changed("ns/csi-4")
    att.set_attachment(parse_volume_attachment({"metadata": {"name": "late"}, "spec": {
        "nodeName": NODE, "attacher": EBS, "source": {"persistentVolumeName": f"csi-{EBS}-2"}}}))
    cn = csinode("csinode", 4, [EBS, EBS_IN_TREE])
    assert cn is not None
    att.set_csinode(parse_csinode(cn))
    cache.remove_pod(placed(PENDING))   # the least headroom rises

    before = held(att)
    got = (att.counting, att.limit[row].tolist(), att.used[row].tolist(), att.migrated[row].tolist(),
           att.headroom[row].tolist(), dict(att.drivers), {n: set(v) for n, v in att.counted.items()},
           {u: set(v) for u, v in att.nodes_using.items()})
    fits = [att.fits_everywhere(c, need) for c in range(len(att.drivers)) for need in (0, 1, 2, 3, 5, 1_000)]
    att.volumes_fit_everywhere([att.resolve_inline(EBS_IN_TREE, "x"), (f"{EBS}/y", EBS, "")])
    for unique in (*att.nodes_using, "nobody/none"):
        att.rows_using(unique)
    att.node_counts(NODE, {("claim", f"ns/csi-{EBS}-1"): -1})
    att.limits_on(NODE), att.migrated_on(NODE), att.resolve_claim(cache.volumes.api_claims["ns/csi-4"])
    assert verdict(cache, pod("new", f"csi-{EBS}-0", f"csi-{EBS_IN_TREE}-1")) == EXCEED
    assert verdict(cache, pod("shared", f"csi-{EBS}-1", f"csi-{EBS_IN_TREE}-0")) is None
    assert held(att) == before, "a read changed what the counts hold"

    # the attached csi-0, the pods' csi-1 and csi-2 (csi-2 attached too), the migrated in-tree volume
    per_driver, on_node = att.node_counts(NODE)   # computed from the node's references, not read
    assert per_driver == {EBS: 4} and got[2][ebs] == 4 and got[1][ebs] == 4 and got[4][ebs] == 0
    assert got[6] == {NODE: on_node} and len(on_node) == 3
    assert fits == [need <= least for least in att.headroom.min(axis=0).tolist() for need in (0, 1, 2, 3, 5, 1_000)]
    att.recount(NODE)
    assert held(att) == before, "the counts were already what a recount gives"


def test_the_least_headroom_of_each_driver_is_exact_after_every_change() -> None:
    """fits_everywhere answers from a kept least headroom per driver; it goes down with a placement, and back up
    when the one node that held it gets room again (a pod removed, a count grown, a node gone)."""
    cache = volume_cache({"a": {}, "b": {}, "c": {}}, tuple(fixture([EBS], 0)[1]), tuple(fixture([EBS], 0)[0]),
                         tuple(fixture([EBS], 0)[2]))
    att = cache.attachments
    for n, count in (("a", 3), ("b", 2), ("c", 4)):
        att.set_csinode(parse_csinode({"metadata": {"name": n}, "spec": {"drivers": [
            {"name": EBS, "allocatable": {"count": count}}]}}))
    ebs = att.drivers[EBS]

    def least() -> int:
        assert att._least == att.headroom.min(axis=0).tolist()
        return att._least[ebs]

    assert least() == 2
    one, two = pod("one", f"csi-{EBS}-0", node="b"), pod("two", f"csi-{EBS}-1", f"csi-{EBS}-2", node="a")
    cache.add_pod(one)
    assert least() == 1
    sharer = pod("sharer", f"csi-{EBS}-0", node="b")   # the same claim, on the same node: nothing new
    cache.add_pod(sharer)
    assert least() == 1
    cache.remove_pod(sharer)
    assert least() == 1 and att.used[cache.nodes.row("b"), ebs] == 1, "one still uses it"
    cache.add_pod(two)
    assert least() == 1 and att.fits_everywhere(ebs, 1) and not att.fits_everywhere(ebs, 2)
    cache.remove_pod(one)
    assert least() == 1, "a holds the least now"
    cache.remove_pod(two)
    assert least() == 2
    att.set_csinode(parse_csinode({"metadata": {"name": "b"}, "spec": {"drivers": [
        {"name": EBS, "allocatable": {"count": 5}}]}}))
    assert least() == 3
    cache.remove_node("a")
    assert least() == 4 and att.fits_everywhere(ebs, 4)


def test_a_node_that_fills_up_is_seen_although_every_node_had_room_before() -> None:
    cache = cache_with([EBS], (), limit=2)
    att = cache.attachments
    assert verdict(cache, EBS_ONE) is None
    assert att.fits_everywhere(att.drivers[EBS], 2) and not att.fits_everywhere(att.drivers[EBS], 3)
    cache.add_pod(parse_pod(EBS_TWO.raw | {"spec": EBS_TWO.raw["spec"] | {"nodeName": NODE}}))
    assert not att.fits_everywhere(att.drivers[EBS], 1)
    assert verdict(cache, EBS_ONE) == EXCEED


def test_a_csinode_whose_node_is_not_known_yet_limits_nothing_and_breaks_nothing() -> None:
    """A CSINode that sets a count for a node tandem has no row for (its node pool deleted, or not seen yet):
    the driver is limited somewhere, so Filter looks, and finds no row to limit."""
    cache = cache_with([EBS], (), source="")
    cn = csinode("csinode", 1, [EBS])
    assert cn is not None
    cn["metadata"]["name"] = "gone"
    cache.attachments.set_csinode(parse_csinode(cn))
    assert cache.attachments.limited == {EBS: 1}
    assert verdict(cache, EBS_TWO) is None


def test_a_detached_volume_frees_its_slot() -> None:
    cache = cache_with([EBS], (), limit=2, va_count=2)
    assert verdict(cache, EBS_ONE) == EXCEED
    cache.attachments.remove_attachment(f"va-{EBS}-1")
    assert verdict(cache, EBS_ONE) is None


def test_a_node_that_comes_after_its_csinode_gets_its_limits_and_a_freed_row_forgets_them() -> None:
    cache = Cache()
    cache.attachments.set_csinode(parse_csinode(csinode("csinode", 0, [EBS]) or {}))
    cache.add_node(parse_node({"metadata": {"name": NODE}}))
    row = cache.nodes.row(NODE)
    assert cache.attachments.limit[row, cache.attachments.drivers[EBS]] == 0
    cache.remove_node(NODE)
    cache.add_node(parse_node({"metadata": {"name": "other"}}))
    assert cache.nodes.row("other") == row, "the row is reused"
    assert (cache.attachments.limit[row] == -1).all()


def test_only_the_rows_that_exceed_fail() -> None:
    cache = volume_cache({"a": {}, "b": {}}, tuple(fixture([EBS], 0)[1]), tuple(fixture([EBS], 0)[0]))
    for n, limit in (("a", 1), ("b", 3)):
        cache.attachments.set_csinode(parse_csinode({"metadata": {"name": n}, "spec": {"drivers": [
            {"name": EBS, "allocatable": {"count": limit}}]}}))
        cache.add_pod(pod(f"on-{n}", f"csi-{EBS}-{1 if n == 'a' else 2}", node=n))
    plugin = NodeVolumeLimits(None, Handle(cache, clock=FakeClock()))
    state = CycleState()
    p = pod("p", f"csi-{EBS}-0")
    assert plugin.pre_filter(state, p, cache.nodes)[1].is_success()
    rows = cache.nodes.rows()
    res = plugin.filter(state, p, cache.nodes, rows)
    assert cache.nodes.names_of(rows[res.passed]) == ["b"]
    # a pod of the volume on a: a is no obstacle to a pod sharing it
    q, state = pod("q", f"csi-{EBS}-1"), CycleState()
    assert plugin.pre_filter(state, q, cache.nodes)[1].is_success()
    assert plugin.filter(state, q, cache.nodes, rows).passed.all()


def two_nodes_allowing_one_ebs_volume() -> Cache:
    """Nodes a and b, each with a CSINode that allows one EBS volume, and the fixture's claims and volumes."""
    pvs, pvcs, classes, _ = fixture([EBS], 0)
    cache = volume_cache({"a": {}, "b": {}}, tuple(pvcs), tuple(pvs), tuple(classes))
    cache.set_namespace("ns", {})
    for n in ("a", "b"):
        cache.attachments.set_csinode(parse_csinode({"metadata": {"name": n}, "spec": {"drivers": [
            {"name": EBS, "allocatable": {"count": 1}}]}}))
    return cache


def test_prefilter_skips_filter_only_while_every_node_takes_the_pod_as_it_stands() -> None:
    """The common case, nodes with room for the pod's volumes even counted as new everywhere, is settled in
    PreFilter (Skip: Filter need not look at 5,000 rows). A node without that room sends the pod to Filter,
    which knows a volume a pod there already uses is not new there."""
    cache = cache_with([EBS], (), limit=2)
    plugin = NodeVolumeLimits(None, Handle(cache, clock=FakeClock()))
    assert plugin.pre_filter(CycleState(), EBS_ONE, cache.nodes)[1].code == Code.SKIP
    assert plugin.pre_filter(CycleState(), EBS_TWO, cache.nodes)[1].code == Code.SKIP, "two fit in two"
    assert plugin.pre_filter(CycleState(), pod("three", *(f"csi-{EBS}-{j}" for j in range(3))),
                             cache.nodes)[1].code == Code.SUCCESS, "three do not: Filter decides"
    cache.add_pod(parse_pod(RUNNING.raw | {"spec": RUNNING.raw["spec"] | {"nodeName": NODE}}))
    assert plugin.pre_filter(CycleState(), EBS_TWO, cache.nodes)[1].code == Code.SUCCESS, "the node has room for one"
    assert verdict(cache, EBS_TWO) == EXCEED
    assert plugin.pre_filter(CycleState(), EBS_ONE, cache.nodes)[1].code == Code.SKIP
    assert plugin.pre_filter(CycleState(), pod("again", f"csi-{EBS}-3"), cache.nodes)[1].code == Code.SKIP, \
        "a volume in use on the node, counted as new, still fits"
    cache.add_pod(parse_pod(EBS_ONE.raw | {"spec": EBS_ONE.raw["spec"] | {"nodeName": NODE}}))
    shared = pod("shared", f"csi-{EBS}-3")
    assert plugin.pre_filter(CycleState(), shared, cache.nodes)[1].code == Code.SUCCESS, "the node is full"
    assert verdict(cache, shared) is None, "Filter: the volume is there already, so the full node takes the pod"
    assert verdict(cache, EBS_TWO) == EXCEED


def test_a_nominated_pods_volumes_count_on_its_node_so_prefilter_does_not_skip_while_any_pod_is_nominated() -> None:
    """Nodes a and b allow one EBS volume, and a pod of the same priority is nominated to a with a volume of its
    own: RunFilterPluginsWithNominatedPods charges it to a, so the new pod fits b only. Had PreFilter skipped
    (every node has room as the cache stands), Filter would not have been asked and a would pass."""
    cache = two_nodes_allowing_one_ebs_volume()
    prof = {"schedulerName": "tandem-scheduler", "plugins": {"multiPoint": {
        "disabled": [{"name": "*"}], "enabled": [{"name": n} for n in ("PrioritySort", "NodeVolumeLimits",
                                                                        "DefaultBinder")]}}}
    (config,) = parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                              "profiles": [prof]}).profiles
    fw = Framework(config, Handle(cache, scheduler_name="tandem-scheduler", clock=FakeClock()))

    def feasible(p: Pod) -> tuple[list[str], bool]:
        state = CycleState()
        rows, st, diag = fw.run_pre_filter(state, p)
        assert st.is_success(), st
        passed, st = fw.run_filter_with_nominated(state, p, rows, diag)
        assert st.is_success(), st
        return cache.nodes.names_of(passed), "NodeVolumeLimits" in state.skip_filter

    assert feasible(EBS_ONE) == (["a", "b"], True)
    cache.nominations.set(pod("nominated", f"csi-{EBS}-1"), "a")
    assert feasible(EBS_ONE) == (["b"], False)


# ---------------------------------------------------------------------------- preemption's dry run

def test_add_and_remove_pod_adjust_only_the_state_they_are_given() -> None:
    cache = cache_with([EBS], (RUNNING, EBS_TWO), limit=3)
    plugin = NodeVolumeLimits(None, Handle(cache, clock=FakeClock()))
    state = CycleState()
    assert plugin.pre_filter(state, EBS_ONE, cache.nodes)[1].is_success()
    rows = cache.nodes.rows()
    row = cache.nodes.row(NODE)
    assert not plugin.filter(state, EBS_ONE, cache.nodes, rows).passed.any()
    dry = state.clone()
    assert plugin.remove_pod(dry, EBS_ONE, cache.pods["uid-running-1"].pod, row).is_success()
    assert plugin.filter(dry, EBS_ONE, cache.nodes, rows).passed.all()
    assert not plugin.filter(state, EBS_ONE, cache.nodes, rows).passed.any(), "the original state is unchanged"
    assert plugin.add_pod(dry, EBS_ONE, cache.pods["uid-running-1"].pod, row).is_success()
    assert not plugin.filter(dry, EBS_ONE, cache.nodes, rows).passed.any()


def test_preemption_evicts_only_the_pod_whose_volume_takes_the_slot() -> None:
    """Two nodes whose CSINodes allow one EBS volume: on a, a low-priority pod with a volume and one without; on
    b, a pod of higher priority than the preemptor's. Preemption's dry run (through AddPod/RemovePod) picks a and
    evicts only the pod with the volume: the other is reprieved, as it takes no slot."""
    cache = two_nodes_allowing_one_ebs_volume()

    def prio(p: Pod, priority: int, node: str = "") -> Pod:
        return parse_pod(p.raw | {"spec": p.raw["spec"] | {"priority": priority, "nodeName": node,
                                                           "schedulerName": "tandem-scheduler"}})

    holder, bystander = prio(pod("holder", f"csi-{EBS}-1"), 0, "a"), prio(pod("bystander"), 0, "a")
    guarded = prio(pod("guarded", f"csi-{EBS}-2"), 2000, "b")
    for p in (holder, bystander, guarded):
        cache.add_pod(p)
    prof = {"schedulerName": "tandem-scheduler", "plugins": {"multiPoint": {
        "disabled": [{"name": "*"}],
        "enabled": [{"name": n} for n in ("PrioritySort", "NodeVolumeLimits", "DefaultPreemption",
                                                                     "DefaultBinder")]}}}
    (config,) = parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                              "profiles": [prof]}).profiles
    handle = Handle(cache, scheduler_name="tandem-scheduler", clock=FakeClock(), preemption=FakePreemption(), seed=4)
    fw = Framework(config, handle)
    preemptor = prio(pod("preemptor", f"csi-{EBS}-0"), 1000)
    state = CycleState()
    rows, st, diag = fw.run_pre_filter(state, preemptor)
    assert st.is_success()
    feasible, st = fw.run_filter_with_nominated(state, preemptor, rows, diag)
    assert len(feasible) == 0 and diag.reasons == {ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED: 2}
    diag.num_all_nodes = 2
    result, st = fw.plugins["DefaultPreemption"].post_filter(state, preemptor, diag)
    assert st.is_success(), st
    assert result is not None and result.nominated_node == "a"
    assert handle.preemption.calls == [("preemptor", "a", ["holder"], False)]
    row = cache.nodes.row("a")
    assert cache.attachments.used[row, cache.attachments.drivers[EBS]] == 1, "the dry run left no trace"


# ---------------------------------------------------------------------------- queueing hints

def hints() -> dict[tuple[str, int], Any]:
    return {(e.event.resource, e.event.action): e.hint
            for e in NodeVolumeLimits(None, Handle(volume_cache({}, tuple(fixture([EBS], 0)[1])),
                                                   clock=FakeClock())).events_to_register()}


def test_registered_events() -> None:
    assert set(hints()) == {(Resource.CSI_NODE, ActionType.ADD), (Resource.CSI_NODE, ActionType.UPDATE),
                            (Resource.ASSIGNED_POD, ActionType.DELETE), (Resource.PVC, ActionType.ADD),
                            (Resource.VOLUME_ATTACHMENT, ActionType.DELETE)}
    assert hints()[(Resource.CSI_NODE, ActionType.ADD)] is None, "any new CSINode, as upstream"
    assert ClusterEvent(Resource.POD, ActionType.DELETE).matches(ClusterEvent(Resource.ASSIGNED_POD,
                                                                              ActionType.DELETE))


@pytest.mark.parametrize("deleted, want", [
    pytest.param(pod("d", "placeholder", node=NODE), QueueingHint.QUEUE, id="a deleted pod with a PVC"),
    pytest.param(pod("d", node=NODE, volumes=(aws_inline("x"),)), QueueingHint.QUEUE,
                 id="a deleted pod with an inline migratable volume"),
    pytest.param(pod("d", node=NODE), QueueingHint.SKIP, id="a deleted pod without volumes"),
    pytest.param(pod("d", f"csi-{EBS}-0"), QueueingHint.SKIP, id="a deleted pod that was not scheduled"),
])
def test_pod_deleted_hint(deleted: Pod, want: int) -> None:
    assert hints()[(Resource.ASSIGNED_POD, ActionType.DELETE)](pod("p", f"csi-{EBS}-2"), deleted, None) == want


@pytest.mark.parametrize("p, added, want", [
    pytest.param(pod("p", ns="ns1"), {"name": "x", "namespace": "ns2"}, QueueingHint.SKIP,
                 id="a pod isn't in the same namespace as an added PVC"),
    pytest.param(pod("p", "pvc1", ns="ns1"), {"name": "pvc1", "namespace": "ns1"}, QueueingHint.QUEUE,
                 id="a pod is in the same namespace as an added PVC"),
    pytest.param(pod("pod1", ns="ns1", volumes=(ephemeral("ephemeral"),)),
                 {"name": "pod1-ephemeral", "namespace": "ns1"}, QueueingHint.QUEUE,
                 id="a pod has an ephemeral volume related to an added PVC"),
    pytest.param(pod("p", "pvc1", ns="ns1"), {"name": "pvc2", "namespace": "ns1"}, QueueingHint.SKIP,
                 id="a pod doesn't have the same PVC as an added PVC"),
    pytest.param(pod("p", ns="ns1"), {"name": "pvc2", "namespace": "ns1"}, QueueingHint.SKIP,
                 id="a pod doesn't have any PVC attached"),
])
def test_pvc_added_hint(p: Pod, added: dict[str, Any], want: int) -> None:
    assert hints()[(Resource.PVC, ActionType.ADD)](p, None, parse_pvc({"metadata": added})) == want


def va(attacher: str, pv: str = "", inline: bool = False) -> Any:
    source: dict[str, Any] = {"persistentVolumeName": pv} if pv else {
        "inlineVolumeSpec": {"csi": {"driver": attacher}}}
    return parse_volume_attachment({"metadata": {"name": "va1"},
                                    "spec": {"nodeName": NODE, "attacher": attacher, "source": source}})


@pytest.mark.parametrize("p, deleted, want", [
    pytest.param(pod("p", f"csi-{EBS}-1"), va("test.storage.gke.io", f"csi-{EBS}-1"), QueueingHint.QUEUE,
                 id="a pod has PVC when VolumeAttachment is deleting"),
    pytest.param(pod("p", volumes=(aws_inline("test"),)), va(EBS), QueueingHint.QUEUE,
                 id="a pod has an Inline Migratable volume (AWSEBSDriver) when VolumeAttachment (AWSEBSDriver) is "
                    "deleting (match)"),
    pytest.param(pod("p", volumes=({"name": "g", "gcePersistentDisk": {"pdName": "test"}},)), va(EBS),
                 QueueingHint.SKIP, id="a pod has an Inline Migratable volume (GCEPDDriver) when VolumeAttachment "
                                       "(AWSEBSDriver) is deleting (no match)"),
    pytest.param(pod("p", f"csi-{EBS}-1", volumes=(aws_inline("test"),)), va("test.storage.gke.io", f"csi-{EBS}-1"),
                 QueueingHint.QUEUE, id="a pod has an Inline Migratable volume and PVC when the PVC's "
                                        "VolumeAttachment is deleting"),
    pytest.param(pod("p"), va("test.storage.gke.io", "pv1"), QueueingHint.SKIP,
                 id="a pod has no PVC when VolumeAttachment is deleting"),
])
def test_volume_attachment_deleted_hint(p: Pod, deleted: Any, want: int) -> None:
    assert hints()[(Resource.VOLUME_ATTACHMENT, ActionType.DELETE)](p, deleted, None) == want


@pytest.mark.parametrize("old, new, want", [
    pytest.param(2, 3, QueueingHint.QUEUE, id="a count that grew"),
    pytest.param(2, None, QueueingHint.QUEUE, id="a count that went away"),
    pytest.param(2, 2, QueueingHint.SKIP, id="the same count"),
    pytest.param(2, 1, QueueingHint.SKIP, id="a count that shrank"),
])
def test_csinode_updated_hint(old: int, new: int | None, want: int) -> None:
    def cn(count: int | None) -> Any:
        return parse_csinode({"metadata": {"name": NODE}, "spec": {"drivers": [
            {"name": EBS} | ({"allocatable": {"count": count}} if count is not None else {})]}})
    assert hints()[(Resource.CSI_NODE, ActionType.UPDATE)](pod("p", "x"), cn(old), cn(new)) == want


def test_volume_columns_follow_the_node_table_as_it_grows() -> None:
    cache = Cache()
    for i in range(40):   # past the node table's first capacity
        cache.add_node(parse_node({"metadata": {"name": f"n{i}"}}))
    cache.attachments.set_csinode(parse_csinode({"metadata": {"name": "n39"}, "spec": {"drivers": [
        {"name": EBS, "allocatable": {"count": 7}}]}}))
    att = cache.attachments
    assert att.limit.shape[0] >= cache.nodes.cap
    assert att.limit[cache.nodes.row("n39"), att.drivers[EBS]] == 7
    assert np.count_nonzero(att.limit >= 0) == 1
