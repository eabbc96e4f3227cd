"""Leases as leader election writes them: what tandem's elector (scheduler/leader.py) relies on.

client-go's LeaseLock, and tandem's after it, reads the Lease (404 when
there is none, then creates it), and writes the whole spec back with PUT on
the resourceVersion it read: the holder, its duration, two MicroTimes and
the transition count. A release writes an empty holder. Two replicas that
read the same version and both write: the second gets 409, which is how a
takeover race is decided. Every assertion holds on a real kube-apiserver.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.simcluster.conftest import Target
from tests.simcluster.test_writes import STALE, assert_status, create, get, rv

pytestmark = pytest.mark.asyncio(loop_scope="session")


def leases(t: Target) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{t.ns}/leases"


def record(holder: str, duration: int, transitions: int, acquired: str, renewed: str) -> dict[str, Any]:
    return {"holderIdentity": holder, "leaseDurationSeconds": duration, "acquireTime": acquired,
            "renewTime": renewed, "leaseTransitions": transitions}


T0, T1, T2 = "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:02.250000Z", "2026-01-01T00:00:04.123456Z"


async def test_a_missing_lease_is_404_not_found(target):
    r = await target.req("GET", f"{leases(target)}/tandem-scheduler")
    body = assert_status(r, 404, "NotFound")
    assert body["message"] == 'leases.coordination.k8s.io "tandem-scheduler" not found'
    assert body["details"] == {"name": "tandem-scheduler", "group": "coordination.k8s.io", "kind": "leases"}


async def test_a_lease_round_trips_the_record_leader_election_writes(target):
    path = f"{leases(target)}/tandem-scheduler"
    mine = record("host_1", 15, 0, T0, T0)
    created = await create(target, leases(target), {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                                    "metadata": {"name": "tandem-scheduler"}, "spec": mine})
    assert created["spec"] == mine, "MicroTimes and counts come back exactly as written"
    got = await get(target, path)
    assert got["spec"] == mine and got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

    # a renewal: the whole spec, PUT on the version read
    renewed = record("host_1", 15, 0, T0, T1)
    r = await target.req("PUT", path, {**got, "spec": renewed})
    assert r.status == 200, r.body
    assert r.body["spec"] == renewed and rv(r.body) > rv(got)

    # a release, as client-go's ReleaseOnCancel writes it: the empty holder is kept, not dropped
    released = record("", 1, 0, T2, T2)
    r = await target.req("PUT", path, {**r.body, "spec": released})
    assert r.status == 200, r.body
    assert r.body["spec"] == released
    assert (await get(target, path))["spec"]["holderIdentity"] == ""


async def test_of_two_takeovers_from_the_same_read_the_second_is_409_conflict(target):
    path = f"{leases(target)}/tandem-scheduler"
    seen = await create(target, leases(target), {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                                 "metadata": {"name": "tandem-scheduler"},
                                                 "spec": record("", 1, 3, T0, T0)})
    first = await target.req("PUT", path, {**seen, "spec": record("host_a", 15, 4, T1, T1)})
    assert first.status == 200, first.body
    second = await target.req("PUT", path, {**seen, "spec": record("host_b", 15, 4, T1, T1)})
    body = assert_status(second, 409, "Conflict")
    assert body["message"] == f'Operation cannot be fulfilled on leases.coordination.k8s.io "tandem-scheduler": {STALE}'
    assert (await get(target, path))["spec"]["holderIdentity"] == "host_a"
