"""PodDisruptionBudgets: what the API server stores, and the status the disruption controller keeps.

The first tests hold on a real kube-apiserver too (the ``target`` fixture
runs them against both): a created budget starts from the zero status of
its Go type, and a status write takes the body's labels along, because the
poddisruptionbudgets/status strategy resets only spec.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.simcluster.conftest import Target
from tests.simcluster.test_writes import MERGE, create, get

pytestmark = pytest.mark.asyncio(loop_scope="session")

ZERO_STATUS = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}


def pdbs(t: Target) -> str:
    return f"/apis/policy/v1/namespaces/{t.ns}/poddisruptionbudgets"


def pdb_body(name: str, selector: dict[str, Any] | None, labels: dict[str, str] | None = None,
             **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                            "metadata": {"name": name, "labels": labels or {}}, "spec": dict(spec)}
    if selector is not None:
        body["spec"]["selector"] = selector
    return body


# ---------------------------------------------------------------------------- the API server (both servers)

async def test_a_created_budget_starts_from_the_zero_status(target):
    body = pdb_body("zero", {"matchLabels": {"app": "web"}}, minAvailable=1)
    body["status"] = {"disruptionsAllowed": 5, "currentHealthy": 5}  # PrepareForCreate drops it
    created = await create(target, pdbs(target), body)
    assert created["status"] == ZERO_STATUS
    assert created["metadata"]["generation"] == 1


async def test_a_status_write_takes_the_bodys_labels_along(target):
    await create(target, pdbs(target), pdb_body("l", {"matchLabels": {"app": "web"}}, {"team": "a"},
                                                minAvailable=1))
    # a merge patch carries no resourceVersion, so the stand-in's controller writing status
    # meanwhile cannot make it conflict
    r = await target.req("PATCH", f"{pdbs(target)}/l/status",
                         {"metadata": {"labels": {"via-status": "yes"}}, "spec": {"minAvailable": 9}},
                         content_type=MERGE)
    assert r.status == 200, r.body
    assert r.body["metadata"]["labels"] == {"team": "a", "via-status": "yes"}
    stored = await get(target, f"{pdbs(target)}/l")
    assert stored["metadata"]["labels"] == {"team": "a", "via-status": "yes"}
    assert stored["spec"]["minAvailable"] == 1  # the status strategy resets spec
    assert stored["metadata"]["generation"] == 1
