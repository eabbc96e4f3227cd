"""The stand-in's resourceclaim controller (bench/simcluster/resourceclaims.py) on a store, without HTTP.

What tests/simcluster/test_dra.py cannot show on the real server, because
only a write can be waited for: the writes the controller does not make
(an allocated claim nobody reserved keeps its allocation, a claim reserved for
something other than a pod is left alone), and the pieces it is made of.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.simcluster.resourceclaims import (
    CLAIMS, PODS, TEMPLATES, ResourceClaimController, claim_name, generate_name, is_done,
)
from bench.simcluster.store import Store

PROTECTION = "resource.kubernetes.io/delete-protection"
ALLOCATION = {"devices": {"results": [{"request": "gpu", "driver": "d.example.com", "pool": "p", "device": "d0"}]}}


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


def _claim(store: Store, name: str, status: dict[str, Any], finalizers: tuple[str, ...] = ()) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": name}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}
    if finalizers:
        body["metadata"]["finalizers"] = list(finalizers)
    claim = store.create(CLAIMS, "default", body).obj()
    claim["status"] = status
    return store.update(CLAIMS, "default", name, claim, "status").obj()


@pytest.mark.parametrize("pod,entry,want", [
    pytest.param("p", "gpu", "p-gpu-", id="short names are joined as they are"),
    pytest.param("p" * 60, "c" * 20, "p" * 41 + "-" + "c" * 13, id="82 characters: both cut to their share of 57"),
    pytest.param("pod-abc", "x" * 62, "pod-a-" + "x" * 49, id="a long entry name takes most of the room"),
    pytest.param("a" * 25, "b" * 30, "a" * 25 + "-" + "b" * 30 + "-", id="57 characters fit"),
])
def test_generate_name(pod, entry, want) -> None:
    assert generate_name(pod, entry) == want


@pytest.mark.parametrize("entry,statuses,want", [
    pytest.param({"name": "a", "resourceClaimName": "c"}, [], ("c", False, ""), id="a claim named directly"),
    pytest.param({"name": "a", "resourceClaimTemplateName": "t"}, [{"name": "a", "resourceClaimName": "p-a-x"}],
                 ("p-a-x", True, ""), id="a template's claim recorded in the status: it must be the pod's"),
    pytest.param({"name": "a", "resourceClaimTemplateName": "t"}, [{"name": "a"}], (None, True, ""),
                 id="recorded as not needed"),
    pytest.param({"name": "a", "resourceClaimTemplateName": "t"}, [], (None, False, "not found"),
                 id="not made yet"),
])
def test_claim_name(entry, statuses, want) -> None:
    pod = {"metadata": {"name": "p", "namespace": "n"}, "status": {"resourceClaimStatuses": statuses}}
    assert claim_name(pod, entry) == want


@pytest.mark.parametrize("meta,spec,status,want", [
    pytest.param({}, {}, {"phase": "Succeeded"}, True, id="succeeded"),
    pytest.param({}, {}, {"phase": "Failed"}, True, id="failed"),
    pytest.param({"deletionTimestamp": "t"}, {}, {}, True, id="deleted before it was scheduled"),
    pytest.param({"deletionTimestamp": "t"}, {"nodeName": "n"}, {"phase": "Running"}, False,
                 id="terminating on a node: it may still run"),
    pytest.param({}, {}, {"phase": "Pending"}, False, id="pending"),
])
def test_is_done(meta, spec, status, want) -> None:
    assert is_done({"metadata": meta, "spec": spec, "status": status}) is want


def test_an_allocated_claim_nobody_reserved_keeps_its_allocation() -> None:
    store = Store()
    claim = _claim(store, "c", {"allocation": ALLOCATION}, (PROTECTION,))
    ResourceClaimController(store).sync_claim(("default", "c"))
    assert store.get_obj(CLAIMS, "default", "c") == claim   # deallocation follows only a last reservation's end


def test_a_reservation_of_a_replaced_pod_is_dropped() -> None:
    store = Store()
    old = store.create(PODS, "default", _pod("p")).obj()
    store.delete(PODS, "default", "p")
    store.create(PODS, "default", _pod("p"))
    _claim(store, "c", {"allocation": ALLOCATION, "reservedFor": [
        {"resource": "pods", "name": "p", "uid": old["metadata"]["uid"]}]}, (PROTECTION,))
    ResourceClaimController(store).sync_claim(("default", "c"))
    claim = store.get_obj(CLAIMS, "default", "c")
    assert (claim["status"], claim["metadata"].get("finalizers")) == ({}, None)


def test_a_reservation_for_anything_but_a_pod_is_left_alone() -> None:
    store = Store()
    claim = _claim(store, "c", {"allocation": ALLOCATION, "reservedFor": [
        {"apiGroup": "example.com", "resource": "things", "name": "t", "uid": "u"}]}, (PROTECTION,))
    ResourceClaimController(store).sync_claim(("default", "c"))
    assert store.get_obj(CLAIMS, "default", "c") == claim


def test_a_pod_whose_template_appears_is_synced_again() -> None:
    store = Store()
    controller = ResourceClaimController(store)
    cursors = controller._resync()
    store.create(PODS, "default", _pod("p", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}]))
    controller._step(cursors)
    assert store.list(CLAIMS, "default").entries == []
    store.create(TEMPLATES, "default", {"metadata": {"name": "t"}, "spec": {"spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}})
    controller._step(cursors)
    [claim] = [e.obj() for e in store.list(CLAIMS, "default").entries]
    pod = store.get_obj(PODS, "default", "p")
    assert pod["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": claim["metadata"]["name"]}]
