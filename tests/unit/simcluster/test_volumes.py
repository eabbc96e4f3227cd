"""The volume controllers' rules, case by case, without a server.

Which volume the PV controller picks for a claim (upstream's findByClaim and
FindMatchingVolume, node-less), when a claim may take the volume it names
(checkVolumeSatisfyClaim), the persistentvolumes/status strategy's phase
transition time, and what the test provisioner and the node registration
write. The controllers at work, on both servers: tests/simcluster/test_volumes.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.simcluster.defaults import stamp_volume_phase_transition
from bench.simcluster.store import Store
from bench.simcluster.volumes import (
    ATTACH_LIMIT, CAPACITY_PROVISIONER, CSIDRIVERS, PROVISIONER, ProvisioningError, csinode_for, find_best_match,
    provisioned_volume, register_driver, volume_satisfies_claim,
)


def pv(name: str, size: str, cls: str = "sc", modes: tuple[str, ...] = ("ReadWriteOnce",), phase: str = "Available",
       claim: str | None = None, uid: str = "", labels: dict[str, str] | None = None, deleting: bool = False,
       mode: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": cls}
    if claim is not None:
        spec["claimRef"] = {"namespace": "ns", "name": claim, "uid": uid}
    if mode is not None:
        spec["volumeMode"] = mode
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def pvc(size: str = "2Gi", cls: str = "sc", modes: tuple[str, ...] = ("ReadWriteOnce",), **spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": "data", "uid": "u1"},
            "spec": {"accessModes": list(modes), "storageClassName": cls, "resources": {"requests": {"storage": size}},
                     **spec}}


@pytest.mark.parametrize("volumes, claim, delay, want", [
    pytest.param([pv("a", "10Gi"), pv("b", "3Gi"), pv("c", "1Gi")], pvc(), False, "b", id="the smallest that fits"),
    pytest.param([pv("a", "2Gi")], pvc("2048Mi"), False, "a", id="an equal quantity in other units fits"),
    pytest.param([pv("a", "1Gi")], pvc(), False, None, id="none big enough"),
    pytest.param([pv("a", "3Gi", cls="other"), pv("b", "5Gi")], pvc(), False, "b", id="another class is skipped"),
    pytest.param([pv("a", "3Gi", modes=("ReadWriteOnce", "ReadOnlyMany")), pv("b", "9Gi")], pvc(), False, "b",
                 id="fewer access modes are tried first, whatever the size"),
    pytest.param([pv("a", "3Gi", modes=("ReadWriteMany",))], pvc(), False, None, id="missing the asked mode"),
    pytest.param([pv("a", "3Gi", mode="Block"), pv("b", "5Gi")], pvc(), False, "b", id="volume mode must match"),
    pytest.param([pv("a", "3Gi", phase="Released"), pv("b", "5Gi")], pvc(), False, "b", id="only Available ones"),
    pytest.param([pv("a", "3Gi", deleting=True), pv("b", "5Gi")], pvc(), False, "b", id="not one being deleted"),
    pytest.param([pv("a", "3Gi", claim="other", uid="u9"), pv("b", "5Gi")], pvc(), False, "b",
                 id="not one claimed by another claim"),
    pytest.param([pv("a", "3Gi"), pv("b", "50Gi", claim="data", phase="Bound")], pvc(), False, "b",
                 id="a volume pre-bound to the claim wins"),
    pytest.param([pv("a", "3Gi"), pv("b", "50Gi", claim="data", uid="u1")], pvc(), True, "b",
                 id="delayed: only the one a scheduler bound"),
    pytest.param([pv("a", "3Gi")], pvc(), True, None, id="delayed: never the controller's choice"),
    pytest.param([pv("a", "3Gi"), pv("b", "8Gi", labels={"tier": "fast"})],
                 pvc(selector={"matchLabels": {"tier": "fast"}}), False, "b", id="the claim's selector"),
])
def test_the_volume_chosen_for_a_claim(volumes, claim, delay, want):
    got = find_best_match(claim, volumes, delay)
    assert (got["metadata"]["name"] if got else None) == want


@pytest.mark.parametrize("volume, claim, want", [
    pytest.param(pv("a", "2Gi"), pvc(), "", id="fits"),
    pytest.param(pv("a", "1Gi"), pvc(), "requested PV is too small", id="too small"),
    pytest.param(pv("a", "2Gi", cls="x"), pvc(), "storageClassName does not match", id="class"),
    pytest.param(pv("a", "2Gi", mode="Block"), pvc(), "incompatible volumeMode", id="volume mode"),
    pytest.param(pv("a", "2Gi"), pvc(modes=("ReadWriteMany",)), "incompatible accessMode", id="access mode"),
    pytest.param(pv("a", "2Gi", deleting=True), pvc(), 'the volume is marked for deletion "a"', id="being deleted"),
])
def test_when_a_claim_may_take_the_volume_it_names(volume, claim, want):
    assert volume_satisfies_claim(volume, claim) == want


@pytest.mark.parametrize("old, new, want", [
    pytest.param({"phase": "Pending", "lastPhaseTransitionTime": "T0"}, {"phase": "Available"}, "NOW",
                 id="a new phase: now"),
    pytest.param({"phase": "Bound", "lastPhaseTransitionTime": "T0"}, {"phase": "Bound"}, "T0",
                 id="the same phase: kept"),
    pytest.param({"phase": "Bound", "lastPhaseTransitionTime": "T0"},
                 {"phase": "Released", "lastPhaseTransitionTime": "T0"}, "NOW", id="a new phase with the old time: now"),
    pytest.param({"phase": "Bound", "lastPhaseTransitionTime": "T0"},
                 {"phase": "Released", "lastPhaseTransitionTime": "T5"}, "T5", id="the writer's own time: kept"),
])
def test_a_volume_phase_change_moves_its_transition_time(old, new, want):
    new_obj = {"status": dict(new)}
    stamp_volume_phase_transition({"status": old}, new_obj, "NOW")
    assert new_obj["status"]["lastPhaseTransitionTime"] == want


def test_a_provisioned_volume_takes_the_claims_request_and_the_classs_policy():
    claim = pvc("3Gi", modes=("ReadWriteOncePod",), volumeMode="Block")
    claim["metadata"]["resourceVersion"] = "7"
    sc = {"metadata": {"name": "sc"}, "provisioner": PROVISIONER, "reclaimPolicy": "Retain"}
    got = provisioned_volume("pvc-u1", claim, sc, None)
    assert got["spec"] == {
        "accessModes": ["ReadWriteOncePod"], "capacity": {"storage": "3Gi"},
        "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "ns", "name": "data", "uid": "u1",
                     "apiVersion": "v1", "resourceVersion": "7"},
        "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "sc", "volumeMode": "Block",
        "csi": {"driver": PROVISIONER, "volumeHandle": "pvc-u1"}}
    assert got["metadata"]["annotations"] == {"pv.kubernetes.io/provisioned-by": PROVISIONER}
    del claim["spec"]["resources"]
    with pytest.raises(ProvisioningError):
        provisioned_volume("pvc-u1", claim, sc, None)


def test_the_capacity_driver_has_its_capacity_checked_and_provisions_as_itself():
    """CAPACITY_PROVISIONER is the stand-in's driver under a name whose CSIDriver says storageCapacity: true
    (schedulers then need a CSIStorageCapacity selecting the node); its volumes name it, not PROVISIONER."""
    store = Store()
    register_driver(store)
    register_driver(store)   # again, at a resync: nothing changes
    assert store.get_obj(CSIDRIVERS, "", PROVISIONER)["spec"]["storageCapacity"] is False
    assert store.get_obj(CSIDRIVERS, "", CAPACITY_PROVISIONER)["spec"]["storageCapacity"] is True
    sc = {"metadata": {"name": "lvm"}, "provisioner": CAPACITY_PROVISIONER}
    got = provisioned_volume("pvc-u1", pvc("1Gi"), sc, None)
    assert got["spec"]["csi"]["driver"] == CAPACITY_PROVISIONER
    assert got["metadata"]["annotations"] == {"pv.kubernetes.io/provisioned-by": CAPACITY_PROVISIONER}


@pytest.mark.parametrize("annotations, default, want", [
    pytest.param({}, None, None, id="no limit anywhere: no allocatable"),
    pytest.param({}, 12, 12, id="the configured default"),
    pytest.param({ATTACH_LIMIT: "3"}, 12, 3, id="the node's annotation first"),
    pytest.param({ATTACH_LIMIT: "many"}, 12, 12, id="an annotation that is no count: the default"),
])
def test_a_nodes_csinode_carries_the_attach_limit(annotations, default, want):
    node = {"metadata": {"name": "n1", "uid": "nu", "annotations": annotations}}
    driver = csinode_for(node, default)["spec"]["drivers"][0]
    assert (driver["name"], driver["nodeID"]) == (PROVISIONER, "n1")
    assert driver.get("allocatable", {}).get("count") == want
