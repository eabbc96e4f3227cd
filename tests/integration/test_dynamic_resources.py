"""Pods with resource claims end to end on the simulated cluster (DynamicResources).

The simulated cluster stores a pod's ``spec.resourceClaims`` as a real
kube-apiserver does (it runs no DRA driver or controller). tandem does not
allocate claims, so such a pod must stay Pending with FailedScheduling naming
its claims, never be bound without them; a profile that disables
DynamicResources places it as kube-scheduler without the plugin would.
"""

from __future__ import annotations

from typing import Any

from tests.integration.test_scheduler import (
    BASE_CONFIG, bound, eventually, make_node, make_pod, running, scheduled_condition, stays, unschedulable,
)
from scheduler.config import parse_config

MESSAGE = 'pod uses resource claim "gpu" (spec.resourceClaims): tandem does not allocate resource claims yet'


def pod_with_claim(name: str, **kw: Any) -> dict[str, Any]:
    return make_pod(name, resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}], **kw)


async def test_a_pod_with_resource_claims_is_refused_by_name_unless_its_profile_disables_the_plugin(tmp_path):
    cfg = parse_config({**BASE_CONFIG, "profiles": [
        {"schedulerName": "tandem-scheduler"},
        {"schedulerName": "tandem-no-dra", "plugins": {"multiPoint": {"disabled": [{"name": "DynamicResources"}]}}}]},
        "<test>")
    async with running(tmp_path, [make_node("node-0")], cfg) as env:
        env.create_pod(pod_with_claim("trainer"))
        env.create_pod(pod_with_claim("unchecked", scheduler="tandem-no-dra"))
        env.create_pod(make_pod("control"))
        await bound(env, "control", "unchecked")   # as kube-scheduler without DynamicResources would place it
        assert env.pod("trainer")["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}]
        c = await unschedulable(env, "trainer")
        assert (c["status"], c["reason"]) == ("False", "Unschedulable"), c
        assert c["message"].startswith(f"0/1 nodes are available: {MESSAGE}."), c
        notes = [e["note"] for e in await env.events_by_reason("trainer", "FailedScheduling")]
        assert notes and all(MESSAGE in n for n in notes), notes
        await stays(lambda: not env.node_of("trainer"), 0.3, "a pod placed without its resource claims")


async def test_a_refused_pod_waits_for_its_own_update_not_for_cluster_events(tmp_path):
    async with running(tmp_path, [make_node("node-0")]) as env:
        env.create_pod(pod_with_claim("trainer"))
        await unschedulable(env, "trainer")
        queue = env.app.scheduler.queue
        uid = env.pod("trainer")["metadata"]["uid"]
        before = queue.infos[uid].attempts
        # nodes and pods come and go: none of that can allocate its claims, so it is not tried again
        env.create_node(make_node("node-1"))
        env.create_pod(make_pod("control"))
        await bound(env, "control")
        await stays(lambda: queue.infos[uid].attempts == before, 0.3, "the refused pod retried for a cluster event")
        # its own update is looked at again (and refused again, by name)
        env.patch_pod("trainer", {"metadata": {"labels": {"app": "trainer", "tier": "gold"}}})
        await eventually(lambda: queue.infos.get(uid) is not None and queue.infos[uid].attempts > before,
                         what="the updated pod to be tried again")
        assert MESSAGE in scheduled_condition(env.pod("trainer"))["message"]
        assert not env.node_of("trainer")
