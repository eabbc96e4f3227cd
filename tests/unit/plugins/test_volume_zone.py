"""VolumeZone: volumes' zone and region labels against the nodes' (plugins/volume_zone.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from plugins.volume_zone import ERR_REASON_CONFLICT, VolumeZone
from scheduler.framework import Code, CycleState, Handle, QueueingHint
from scheduler.framework.clock import FakeClock
from scheduler.model import parse_pod, parse_pv, parse_pvc, parse_storage_class
from tests.unit.plugins.volumes import volume_cache

UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
ZONE, REGION = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"
BETA_ZONE, BETA_REGION = "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region"
NODES = {
    "a1": {ZONE: "a", REGION: "r1"},
    "b1": {ZONE: "b", REGION: "r1"},
    "c2": {ZONE: "c", REGION: "r2"},
    "beta-a": {BETA_ZONE: "a", BETA_REGION: "r1"},                 # old nodes: only the deprecated labels
    "mixed": {BETA_ZONE: "b", ZONE: "a"},                            # both: the beta label wins for a beta key
    "unlabelled": {"kubernetes.io/hostname": "unlabelled"},          # a single-zone cluster's node: fits
}
ALL = set(NODES)


def pod(*claims: str, ephemeral: str = "") -> Any:
    volumes: list[dict[str, Any]] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                                     for i, c in enumerate(claims)]
    if ephemeral:
        volumes.append({"name": ephemeral, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}})
    return parse_pod({"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
                      "spec": {"containers": [{"name": "c", "image": "x"}], "volumes": volumes}})


def pvc(name: str, volume: str = "", cls: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if volume:
        spec["volumeName"] = volume
    if cls is not None:
        spec["storageClassName"] = cls
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": spec}


def pv(name: str, **labels: str) -> dict[str, Any]:
    keys = {"zone": ZONE, "region": REGION, "beta_zone": BETA_ZONE, "beta_region": BETA_REGION}
    return {"metadata": {"name": name, "labels": {keys.get(k, k): v for k, v in labels.items()}}, "spec": {}}


def sc(name: str, mode: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "provisioner": "example.com/csi", "volumeBindingMode": mode}


class Env:
    def __init__(self, pvcs: tuple[dict[str, Any], ...] = (), pvs: tuple[dict[str, Any], ...] = (),
                 classes: tuple[dict[str, Any], ...] = ()) -> None:
        self.cache = volume_cache(NODES, pvcs, pvs, classes)
        self.plugin = VolumeZone(None, Handle(self.cache, clock=FakeClock()))

    def run(self, p: Any, pre_filter: bool = True) -> tuple[Code, str, set[str]]:
        """PreFilter's code and message, then the nodes Filter lets through (every rejection checked)."""
        state = CycleState()
        code, message = Code.SUCCESS, ""
        if pre_filter:
            _, st = self.plugin.pre_filter(state, p, self.cache.nodes)
            code, message = st.code, st.message()
            if not st.is_success() or st.code == Code.SKIP:
                return code, message, set()
        rows = self.cache.nodes.rows()
        res = self.plugin.filter(state, p, self.cache.nodes, rows)
        for r in res.rejections:
            assert r.code == UU and np.array_equal(r.mask, ~res.passed), r
            if pre_filter:
                assert r.reason == ERR_REASON_CONFLICT
        return code, message, set(self.cache.nodes.names_of(rows[res.passed]))


def bound(zone_labels: dict[str, str]) -> Env:
    return Env(pvcs=(pvc("data", "v1"),), pvs=(pv("v1", **zone_labels),))


CASES = [
    pytest.param(Env(), pod(), (Code.SKIP, "", set()), id="a pod without claims is skipped"),
    pytest.param(bound({}), pod("data"), (Code.SKIP, "", set()), id="a volume without zone labels is skipped"),
    pytest.param(Env(pvcs=(pvc("x-scratch", "v1"),), pvs=(pv("v1", zone="a"),)), pod(ephemeral="scratch"),
                 (Code.SKIP, "", set()), id="generic ephemeral volumes are not looked at, as upstream"),
    pytest.param(bound({"zone": "a"}), pod("data"), (Code.SUCCESS, "", {"a1", "mixed", "unlabelled"}),
                 id="a zone label keeps the pod in that zone; unlabelled nodes fit, beta-only nodes do not"),
    pytest.param(bound({"zone": "a__c"}), pod("data"),
                 (Code.SUCCESS, "", {"a1", "c2", "mixed", "unlabelled"}),
                 id="zones separated by __ are alternatives"),
    pytest.param(bound({"zone": " a __ b "}), pod("data"),
                 (Code.SUCCESS, "", {"a1", "b1", "mixed", "unlabelled"}),
                 id="the listed zones are trimmed"),
    pytest.param(bound({"zone": "a____b"}), pod("data"), (Code.SKIP, "", set()),
                 id="a zone list with an empty zone is ignored, as upstream"),
    pytest.param(bound({"region": "r1"}), pod("data"), (Code.SUCCESS, "", {"a1", "b1", "unlabelled"}),
                 id="a region label; a labelled node without that GA label does not fit (GA is not translated to beta)"),
    pytest.param(bound({"zone": "b", "region": "r1"}), pod("data"), (Code.SUCCESS, "", {"b1", "unlabelled"}),
                 id="zone and region must both match"),
    pytest.param(bound({"beta_zone": "a"}), pod("data"), (Code.SUCCESS, "", {"a1", "beta-a", "unlabelled"}),
                 id="a beta label matches a node's beta label, else its GA label; the node's own beta label wins"),
    pytest.param(bound({"beta_region": "r2"}), pod("data"), (Code.SUCCESS, "", {"c2", "unlabelled"}),
                 id="a beta region label matches GA region labels"),
    pytest.param(bound({"zone": "z"}), pod("data"), (Code.SUCCESS, "", {"unlabelled"}),
                 id="a zone no node is in leaves only unlabelled nodes"),
    pytest.param(Env(pvcs=(pvc("data", "v1"), pvc("logs", "v2")), pvs=(pv("v1", zone="a__b"), pv("v2", zone="b"))),
                 pod("data", "logs"), (Code.SUCCESS, "", {"b1", "unlabelled"}), id="every volume's zones must hold"),
    pytest.param(Env(), pod("data"), (UU, 'persistentvolumeclaim "data" not found', set()),
                 id="a missing claim is named"),
    pytest.param(Env(), pod(""), (UU, "PersistentVolumeClaim had no name", set()), id="a claim without a name"),
    pytest.param(Env(pvcs=(pvc("data"),)), pod("data"),
                 (UU, "PersistentVolumeClaim had no pv name and storageClass name", set()),
                 id="a claim with neither a volume nor a class"),
    pytest.param(Env(pvcs=(pvc("data", cls="fast"),)), pod("data"),
                 (UU, 'storageclass.storage.k8s.io "fast" not found', set()), id="a claim whose class is missing"),
    pytest.param(Env(pvcs=(pvc("data", cls="fast"),), classes=(sc("fast", "Immediate"),)), pod("data"),
                 (UU, "PersistentVolume had no name", set()), id="a claim without a volume whose class binds at once"),
    pytest.param(Env(pvcs=(pvc("data", cls="local"), pvc("logs", "v2")), pvs=(pv("v2", zone="c"),),
                     classes=(sc("local", "WaitForFirstConsumer"),)), pod("data", "logs"),
                 (Code.SUCCESS, "", {"c2", "unlabelled"}),
                 id="a claim waiting for its first consumer is passed over, the others still count"),
    pytest.param(Env(pvcs=(pvc("data", "gone"),)), pod("data"), (UU, 'persistentvolume "gone" not found', set()),
                 id="a claim whose volume is missing"),
]


@pytest.mark.parametrize("env, p, want", CASES)
def test_pre_filter_and_filter(env: Env, p: Any, want: tuple[Code, str, set[str]]) -> None:
    assert env.run(p) == want


def test_filter_alone_works_it_out_when_pre_filter_is_disabled() -> None:
    assert bound({"zone": "b"}).run(pod("data"), pre_filter=False)[2] == {"b1", "unlabelled"}
    code, _, fits = Env().run(pod("data"), pre_filter=False)
    assert fits == set()


def test_queueing_hints() -> None:
    p = pod("data")
    hints = {ev.event.resource: ev.hint for ev in VolumeZone(None, None).events_to_register()}
    cls, pvc_hint, pv_hint = (hints[r] for r in ("StorageClass", "PersistentVolumeClaim", "PersistentVolume"))
    assert cls(p, None, parse_storage_class(sc("s", "WaitForFirstConsumer"))) == QueueingHint.QUEUE
    assert cls(p, None, parse_storage_class(sc("s", "Immediate"))) == QueueingHint.SKIP
    assert pvc_hint(p, None, parse_pvc(pvc("data"))) == QueueingHint.QUEUE
    assert pvc_hint(p, None, parse_pvc(pvc("other"))) == QueueingHint.SKIP
    old, relabelled, same = parse_pv(pv("v1", zone="a")), parse_pv(pv("v1", zone="b")), parse_pv(pv("v1", zone="a"))
    assert pv_hint(p, None, old) == QueueingHint.QUEUE
    assert pv_hint(p, old, relabelled) == QueueingHint.QUEUE
    assert pv_hint(p, old, same) == QueueingHint.SKIP
