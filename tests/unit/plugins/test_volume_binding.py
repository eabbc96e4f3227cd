"""VolumeBinding: claims, their binding, their volumes' node affinity (plugins/volume_binding.py)."""

from __future__ import annotations

from typing import Any

import pytest

from plugins.volume_binding import (
    ERR_REASON_NODE_CONFLICT, ERR_REASON_PV_NOT_EXIST, ERR_UNBOUND_IMMEDIATE, VolumeBinding, VolumeBindingArgs,
)
from scheduler.framework import Code, ConfigError, CycleState, Handle, QueueingHint, parse_args
from scheduler.framework.clock import FakeClock
from scheduler.model import parse_pod, parse_pv, parse_pvc
from scheduler.state.cache import Cache
from tests.unit.plugins.volumes import volume_cache

UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
NODES = {"n1": {"kubernetes.io/hostname": "n1", "zone": "a"},
         "n2": {"kubernetes.io/hostname": "n2", "zone": "b"},
         "n3": {"kubernetes.io/hostname": "n3", "zone": "b"}}


def pod(*volumes: dict[str, Any], name: str = "p", uid: str = "pod-uid") -> Any:
    return parse_pod({"metadata": {"name": name, "namespace": "ns", "uid": uid},
                      "spec": {"containers": [{"name": "c", "image": "x"}], "volumes": list(volumes)}})


def claim_vol(claim: str, name: str = "data") -> dict[str, Any]:
    return {"name": name, "persistentVolumeClaim": {"claimName": claim}}


def ephemeral_vol(name: str = "scratch") -> dict[str, Any]:
    return {"name": name, "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}


def pvc(name: str, volume: str = "", bound: bool = True, cls: str | None = None, phase: str = "",
        deleting: bool = False, owner_uid: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"pvc-{name}",
                            "annotations": {"pv.kubernetes.io/bind-completed": "yes"} if volume and bound else {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if owner_uid:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner_uid,
                                    "controller": True}]
    spec: dict[str, Any] = {}
    if volume:
        spec["volumeName"] = volume
    if cls is not None:
        spec["storageClassName"] = cls
    return {"metadata": meta, "spec": spec,
            "status": {"phase": phase or ("Bound" if volume and bound else "Pending")}}


def pv(name: str, *terms: dict[str, Any], required: Any = "terms") -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": "1Gi"}}
    if terms:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": list(terms)}}
    elif required != "terms":
        spec["nodeAffinity"] = {"required": required}
    return {"metadata": {"name": name, "uid": f"pv-{name}"}, "spec": spec}


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": op, "values": list(values)}]}


def sc(name: str, mode: str | None) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": name}, "provisioner": "example.com/csi"}
    if mode is not None:
        obj["volumeBindingMode"] = mode
    return obj


class Env:
    def __init__(self, pvcs: tuple[dict[str, Any], ...] = (), pvs: tuple[dict[str, Any], ...] = (),
                 classes: tuple[dict[str, Any], ...] = ()) -> None:
        self.cache = volume_cache(NODES, pvcs, pvs, classes)
        self.plugin = VolumeBinding(None, Handle(self.cache, clock=FakeClock()))

    def run(self, p: Any) -> tuple[Code, str, dict[str, str | None]]:
        """PreFilter's code and message, then each node's Filter verdict (None: fits) when Filter runs."""
        state = CycleState()
        _, st = self.plugin.pre_filter(state, p, self.cache.nodes)
        rows = self.cache.nodes.rows()
        names = self.cache.nodes.names_of(rows)
        if not st.is_success() or st.code == Code.SKIP:
            return st.code, st.message(), {}
        res = self.plugin.filter(state, p, self.cache.nodes, rows)
        out: dict[str, str | None] = {}
        for i, n in enumerate(names):
            reasons = [(r.reason, r.code) for r in res.rejections if r.mask[i]]
            assert bool(reasons) == (not res.passed[i])
            assert all(code == UU for _, code in reasons), reasons
            out[n] = reasons[0][0] if reasons else None
        return st.code, st.message(), out


FITS_ALL = {"n1": None, "n2": None, "n3": None}
ZONE_B = expr("zone", "In", "b")

CASES = [
    pytest.param(Env(), pod({"name": "e", "emptyDir": {}}), (Code.SKIP, "", {}),
                 id="a pod without claims is skipped"),
    pytest.param(Env(), pod(claim_vol("data")), (UU, 'persistentvolumeclaim "data" not found', {}),
                 id="a missing claim is named"),
    pytest.param(Env(), pod(ephemeral_vol()),
                 (UU, 'waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch"', {}),
                 id="a generic ephemeral volume's claim not created yet"),
    pytest.param(Env(pvcs=(pvc("p-scratch", "v1", owner_uid="someone-else"),), pvs=(pv("v1"),)), pod(ephemeral_vol()),
                 (UU, "PVC ns/p-scratch was not created for pod ns/p (pod is not owner)", {}),
                 id="an ephemeral volume's claim owned by another pod"),
    pytest.param(Env(pvcs=(pvc("p-scratch", "v1", owner_uid="pod-uid"),), pvs=(pv("v1"),)), pod(ephemeral_vol()),
                 (Code.SKIP, "", {}), id="an ephemeral volume's own bound claim"),
    pytest.param(Env(pvcs=(pvc("data", "v1", phase="Lost"),)), pod(claim_vol("data")),
                 (UU, 'persistentvolumeclaim "data" bound to non-existent persistentvolume "v1"', {}),
                 id="a lost claim"),
    pytest.param(Env(pvcs=(pvc("data", "v1", deleting=True),), pvs=(pv("v1"),)), pod(claim_vol("data")),
                 (UU, 'persistentvolumeclaim "data" is being deleted', {}), id="a claim being deleted"),
    pytest.param(Env(pvcs=(pvc("data"),)), pod(claim_vol("data")), (UU, ERR_UNBOUND_IMMEDIATE, {}),
                 id="an unbound claim without a class binds at once: the PV controller's job"),
    pytest.param(Env(pvcs=(pvc("data", cls="fast"),), classes=(sc("fast", "Immediate"),)), pod(claim_vol("data")),
                 (UU, ERR_UNBOUND_IMMEDIATE, {}), id="an unbound claim of an Immediate class"),
    pytest.param(Env(pvcs=(pvc("data", cls="gone"),)), pod(claim_vol("data")), (UU, ERR_UNBOUND_IMMEDIATE, {}),
                 id="an unbound claim of a class that does not exist counts as immediate"),
    pytest.param(Env(pvcs=(pvc("data", "v1", bound=False, cls="local"),), pvs=(pv("v1"),),
                     classes=(sc("local", "WaitForFirstConsumer"),)), pod(claim_vol("data")),
                 (UU, ERR_UNBOUND_IMMEDIATE, {}), id="a claim only pre-bound counts as immediate whatever its class"),
    pytest.param(Env(pvcs=(pvc("data", "v1"),), pvs=(pv("v1"),)), pod(claim_vol("data")), (Code.SKIP, "", {}),
                 id="a claim bound to a volume without node affinity fits everywhere"),
    pytest.param(Env(pvcs=(pvc("data", "v1"),), pvs=(pv("v1", required=None),)), pod(claim_vol("data")),
                 (Code.SKIP, "", {}), id="nodeAffinity without required is no constraint"),
    pytest.param(Env(pvcs=(pvc("data", "v1"),)), pod(claim_vol("data")),
                 (Code.SUCCESS, "", {n: ERR_REASON_PV_NOT_EXIST for n in NODES}),
                 id="a bound claim whose volume does not exist fits nowhere"),
    pytest.param(Env(pvcs=(pvc("data", "v1"),), pvs=(pv("v1", ZONE_B),)), pod(claim_vol("data")),
                 (Code.SUCCESS, "", {"n1": ERR_REASON_NODE_CONFLICT, "n2": None, "n3": None}),
                 id="a volume's node affinity keeps the pod to the matching nodes"),
    pytest.param(Env(pvcs=(pvc("data", "v1"),), pvs=(pv("v1", expr("zone", "In", "c"), ZONE_B),)),
                 pod(claim_vol("data")), (Code.SUCCESS, "", {"n1": ERR_REASON_NODE_CONFLICT, "n2": None, "n3": None}),
                 id="the terms of a volume are ORed"),
    pytest.param(Env(pvcs=(pvc("data", "v1"), pvc("logs", "v2")),
                     pvs=(pv("v1", ZONE_B), pv("v2", expr("kubernetes.io/hostname", "In", "n1", "n3")))),
                 pod(claim_vol("data"), claim_vol("logs", "logs")),
                 (Code.SUCCESS, "", {"n1": ERR_REASON_NODE_CONFLICT, "n2": ERR_REASON_NODE_CONFLICT, "n3": None}),
                 id="every volume's affinity must match"),
    pytest.param(Env(pvcs=(pvc("data", "v1"),), pvs=(pv("v1", expr("zone", "Bogus", "b")),)),
                 pod(claim_vol("data")), (Code.SUCCESS, "", {n: ERR_REASON_NODE_CONFLICT for n in NODES}),
                 id="a term that does not parse matches no node"),
    pytest.param(Env(pvcs=(pvc("data", "v1"),),
                     pvs=(pv("v1", {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}),)),
                 pod(claim_vol("data")), (Code.SUCCESS, "", {n: ERR_REASON_NODE_CONFLICT for n in NODES}),
                 id="matchFields see a node without a name, as volume.CheckNodeAffinity"),
    pytest.param(Env(pvcs=(pvc("data", "v1"),), pvs=(pv("v1", ZONE_B),)),
                 pod(claim_vol("data"), claim_vol("other", "o")), (UU, 'persistentvolumeclaim "other" not found', {}),
                 id="any claim's problem refuses the pod at PreFilter"),
]

# Two bad claims: upstream's PreFilter checks every claim for existence, loss, deletion and ownership
# (podHasPVCs) before any for its binding (GetPodVolumeClaims), so the order of the pod's volumes decides
# only between problems of the same pass.
IMMEDIATE = pvc("first")   # unbound, no class: binds at once, the PV controller's job
ORDER_CASES = [
    pytest.param(Env(pvcs=(IMMEDIATE,)), pod(claim_vol("first", "a"), claim_vol("second", "b")),
                 (UU, 'persistentvolumeclaim "second" not found', {}),
                 id="an unbound immediate claim, then a missing one: the missing one is named"),
    pytest.param(Env(pvcs=(IMMEDIATE, pvc("second", "v2", phase="Lost"))),
                 pod(claim_vol("first", "a"), claim_vol("second", "b")),
                 (UU, 'persistentvolumeclaim "second" bound to non-existent persistentvolume "v2"', {}),
                 id="an unbound immediate claim, then a lost one: the lost one is named"),
    pytest.param(Env(pvcs=(IMMEDIATE, pvc("second", "v2", deleting=True)), pvs=(pv("v2"),)),
                 pod(claim_vol("first", "a"), claim_vol("second", "b")),
                 (UU, 'persistentvolumeclaim "second" is being deleted', {}),
                 id="an unbound immediate claim, then one being deleted: the deleted one is named"),
    pytest.param(Env(pvcs=(IMMEDIATE,)), pod(claim_vol("first", "a"), ephemeral_vol()),
                 (UU, 'waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch"', {}),
                 id="an unbound immediate claim, then an ephemeral volume's claim not created yet"),
    pytest.param(Env(pvcs=(IMMEDIATE, pvc("p-scratch", "v2", owner_uid="someone-else")), pvs=(pv("v2"),)),
                 pod(claim_vol("first", "a"), ephemeral_vol()),
                 (UU, "PVC ns/p-scratch was not created for pod ns/p (pod is not owner)", {}),
                 id="an unbound immediate claim, then an ephemeral volume's claim of another pod"),
    pytest.param(Env(pvcs=(pvc("first", "v1", bound=False, cls="local"),), pvs=(pv("v1"),),
                     classes=(sc("local", "WaitForFirstConsumer"),)),
                 pod(claim_vol("first", "a"), claim_vol("second", "b")),
                 (UU, 'persistentvolumeclaim "second" not found', {}),
                 id="a claim only pre-bound, then a missing one: the missing one is named"),
    pytest.param(Env(pvcs=(pvc("second"),)), pod(claim_vol("first", "a"), claim_vol("second", "b")),
                 (UU, 'persistentvolumeclaim "first" not found', {}),
                 id="a missing claim, then an unbound immediate one: the missing one, as before"),
    pytest.param(Env(), pod(claim_vol("first", "a"), claim_vol("second", "b")),
                 (UU, 'persistentvolumeclaim "first" not found', {}),
                 id="two missing claims: the first in the pod's volumes"),
    pytest.param(Env(pvcs=(pvc("first", phase="Lost"), pvc("second", deleting=True))),
                 pod(claim_vol("first", "a"), claim_vol("second", "b")),
                 (UU, 'persistentvolumeclaim "first" bound to non-existent persistentvolume ""', {}),
                 id="a lost claim, then one being deleted: the first in the pod's volumes"),
    pytest.param(Env(pvcs=(IMMEDIATE, pvc("second", cls="fast")), classes=(sc("fast", "Immediate"),)),
                 pod(claim_vol("first", "a"), claim_vol("second", "b")), (UU, ERR_UNBOUND_IMMEDIATE, {}),
                 id="two unbound immediate claims, both there: unbound immediate"),
]


@pytest.mark.parametrize("env, p, want", CASES + ORDER_CASES)
def test_volume_binding(env: Env, p: Any, want: tuple[Code, str, dict[str, str | None]]) -> None:
    assert env.run(p) == want


@pytest.mark.parametrize("env, p, want", ORDER_CASES)
def test_filter_without_pre_filter_names_the_same_problem(env: Env, p: Any,
                                                          want: tuple[Code, str, dict[str, str | None]]) -> None:
    """With PreFilter disabled, Filter evaluates the claims itself, in the same order, on every node."""
    rows = env.cache.nodes.rows()
    res = env.plugin.filter(CycleState(), p, env.cache.nodes, rows)
    assert not res.passed.any()
    assert {(r.reason, r.code) for r in res.rejections} == {(want[1], want[0])}


def test_filter_without_pre_filter_evaluates_the_claims_itself() -> None:
    env = Env(pvcs=(pvc("data", "v1"),), pvs=(pv("v1", ZONE_B),))
    rows = env.cache.nodes.rows()
    res = env.plugin.filter(CycleState(), pod(claim_vol("data")), env.cache.nodes, rows)
    assert res.passed.tolist() == [False, True, True]
    res = env.plugin.filter(CycleState(), pod(claim_vol("nope")), env.cache.nodes, rows)
    assert not res.passed.any() and res.rejections[0].reason == 'persistentvolumeclaim "nope" not found'


def test_a_changed_volume_is_compiled_again() -> None:
    env = Env(pvcs=(pvc("data", "v1"),), pvs=(pv("v1", ZONE_B),))
    assert env.run(pod(claim_vol("data")))[2]["n1"] == ERR_REASON_NODE_CONFLICT
    v = parse_pv({**pv("v1", expr("zone", "In", "a")), "metadata": {"name": "v1", "resourceVersion": "2"}})
    env.cache.volumes.set_pv(v)
    assert env.run(pod(claim_vol("data")))[2] == {"n1": None, "n2": ERR_REASON_NODE_CONFLICT,
                                                  "n3": ERR_REASON_NODE_CONFLICT}


@pytest.mark.parametrize("new, want", [
    pytest.param(parse_pvc(pvc("data")), QueueingHint.QUEUE, id="the pod's claim"),
    pytest.param(parse_pvc(pvc("p-scratch")), QueueingHint.QUEUE, id="the pod's ephemeral volume's claim"),
    pytest.param(parse_pvc(pvc("other")), QueueingHint.SKIP, id="another claim"),
    pytest.param(parse_pvc({**pvc("data"), "metadata": {"name": "data", "namespace": "elsewhere"}}),
                 QueueingHint.SKIP, id="a claim of that name in another namespace"),
])
def test_a_claim_event_requeues_only_the_pods_using_it(new: Any, want: int) -> None:
    (hint,) = [e.hint for e in VolumeBinding(None, Handle(Cache(), clock=FakeClock())).events_to_register()
               if e.event.resource == "PersistentVolumeClaim"]
    assert hint(pod(claim_vol("data"), ephemeral_vol()), None, new) == want


@pytest.mark.parametrize("raw, error", [
    pytest.param({}, None, id="no args"),
    pytest.param({"bindTimeoutSeconds": 30}, None, id="a bind timeout"),
    pytest.param({"bindTimeoutSeconds": -1}, "args.bindTimeoutSeconds: Invalid value: -1: invalid BindTimeoutSeconds, "
                                             "should not be a negative value", id="a negative bind timeout"),
    pytest.param({"shape": [{"utilization": 0, "score": 0}]}, "args.shape: Forbidden", id="a capacity score shape"),
])
def test_args(raw: dict[str, Any], error: str | None) -> None:
    if error is None:
        assert isinstance(parse_args(VolumeBindingArgs, raw, "args"), VolumeBindingArgs)
    else:
        with pytest.raises(ConfigError, match=error):
            parse_args(VolumeBindingArgs, raw, "args")
