"""A PodGroup's ``status.conditions`` under JSON merge patches, held to kube-apiserver 1.36, for both PodGroup APIs.

tandem's writers of the list (the PodGroup status controller, GangReadiness) follow one rule
(scheduler/framework/podgroupconditions.py), which rests on two things the API server does with a merge
patch of the status subresource; both servers must do them, for scheduler-plugins' CRD and for upstream's
scheduling.k8s.io/v1alpha2:

* a patch that names ``metadata.resourceVersion`` is refused with 409 Conflict unless that is the object's
  current version (the object unchanged), and makes a new version when it is;
* a patch's ``conditions`` replace the list whole: a patch without a version erases what another writer
  added in between.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.simcluster.conftest import Target
from tests.simcluster.test_writes import MERGE, STALE, create, get, podgroup_body, podgroups

pytestmark = pytest.mark.asyncio(loop_scope="session")


def native_groups(t: Target) -> str:
    return f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{t.ns}/podgroups"


def native_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}


def condition(type_: str, reason: str) -> dict[str, Any]:
    return {"type": type_, "status": "False", "reason": reason, "message": f"{type_}: {reason}",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}


@pytest.mark.parametrize("native", [pytest.param(False, id="scheduler-plugins' CRD"),
                                    pytest.param(True, id="scheduling.k8s.io/v1alpha2")])
async def test_a_status_patch_on_an_old_version_is_refused_and_one_without_a_version_replaces_the_list(
        target: Target, native: bool) -> None:
    groups = native_groups(target) if native else podgroups(target)
    created = await create(target, groups, native_body("g") if native else podgroup_body("g"))
    status = f"{groups}/g/status"
    mine = condition("PodGroupScheduled", "Unschedulable")
    v0 = created["metadata"]["resourceVersion"]

    r = await target.req("PATCH", status, {"metadata": {"resourceVersion": v0}, "status": {"conditions": [mine]}},
                         content_type=MERGE)
    assert r.status == 200, r.body
    v1 = r.body["metadata"]["resourceVersion"]
    assert v1 != v0 and r.body["status"]["conditions"] == [mine], "made on the current version: accepted"

    theirs = condition("PodsReady", "WaitForStart")
    r = await target.req("PATCH", status, {"metadata": {"resourceVersion": v0},
                                           "status": {"conditions": [mine, theirs]}}, content_type=MERGE)
    assert (r.status, r.body["reason"]) == (409, "Conflict"), r.body
    assert r.body["message"].endswith(f'"g": {STALE}')
    got = await get(target, f"{groups}/g")
    assert got["metadata"]["resourceVersion"] == v1 and got["status"]["conditions"] == [mine], "unchanged"

    r = await target.req("PATCH", status, {"status": {"conditions": [theirs]}}, content_type=MERGE)
    assert r.status == 200 and r.body["status"]["conditions"] == [theirs], \
        "no version: the list is replaced, the other writer's condition erased"
