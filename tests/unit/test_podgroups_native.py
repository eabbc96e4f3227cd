"""scheduler/podgroups_native.py: the PodGroupScheduled condition of scheduling.k8s.io/v1alpha2 PodGroups.

The controller runs as in tests/unit/test_podgroups.py (a real Scheduler fed through its informer
handlers, a fake client that records patches, a fake clock); the groups are native and the pods join
with spec.schedulingGroup.
"""

from __future__ import annotations

from typing import Any

from tests.unit.test_podgroups import NS, SCHED, Env

KEY = f"scheduling.k8s.io/{NS}/g"
PATH = f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{NS}/podgroups/g/status"
UNSCHEDULABLE = "{n} placements are available, first placement status: pod group is unschedulable"


class NativeEnv(Env):
    def native_group(self, min_count: int | None = 2, topology: str = "", conditions: list[Any] | None = None,
                     rv: str = "1") -> None:
        spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}} if min_count is not None
                                else {"basic": {}}}
        if topology:
            spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
        obj = {"metadata": {"name": "g", "namespace": NS, "uid": "pg-g", "resourceVersion": rv},
               "spec": spec, "status": {"conditions": conditions or []}}
        old = self.sched.cache.gangs.group(KEY)
        if old is None:
            self.sched.on_pod_group_add(obj, native=True)
        else:
            self.sched.on_pod_group_update(old.raw, obj, native=True)

    def member(self, name: str, node: str = "", reason: str = "", message: str = "", scheduler: str = SCHED) -> None:
        conds = [{"type": "PodScheduled", "status": "False", "reason": reason, "message": message,
                  "lastTransitionTime": "2024-05-01T10:00:00Z"}] if reason else []
        obj: dict[str, Any] = {
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
            "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "x"}],
                     "schedulingGroup": {"podGroupName": "g"}},
            "status": {"phase": "Pending", "conditions": conds}}
        if node:
            obj["spec"]["nodeName"] = node
        old = self.objs.get(name)
        self.objs[name] = obj
        if old is None:
            self.sched.on_pod_add(obj)
        else:
            self.sched.on_pod_update(old, obj)

    def conditions(self) -> list[dict[str, Any]]:
        """The PodGroupScheduled conditions written, in order."""
        return [c for path, body in self.client.patches if path == PATH
                for c in body["status"]["conditions"] if c["type"] == "PodGroupScheduled"]

    def observe_native(self) -> None:
        written = [body for path, body in self.client.patches if path == PATH]
        self.native_group(conditions=written[-1]["status"]["conditions"], rv="2")


async def test_unschedulable_then_scheduled_and_never_back() -> None:
    env = NativeEnv()
    env.native_group(min_count=2)
    env.member("a")
    env.member("b")
    await env.sync()
    assert env.conditions() == [], "nobody tried the members yet: nothing to say"
    env.member("a", reason="Unschedulable", message="0/1 nodes are available: 1 Insufficient cpu.")
    env.clock.advance(1)
    await env.sync()
    (c,) = env.conditions()
    assert (c["status"], c["reason"], c["message"]) == ("False", "Unschedulable", UNSCHEDULABLE.format(n="0/1"))
    assert "observedGeneration" not in c, "the 1.36 server sets no generation on PodGroups"
    assert env.client.patches[-1][0] == PATH, "the native API's own status subresource"
    env.observe_native()
    env.member("a", node="n1")
    env.member("b", node="n1")
    env.clock.advance(1)
    await env.sync()
    c = env.conditions()[-1]
    assert (c["status"], c["reason"], c["message"]) == ("True", "Scheduled", "")
    assert "phase" not in env.client.patches[-1][1]["status"], "no CRD fields on a native PodGroup"
    env.observe_native()
    env.member("b", reason="Unschedulable", message="0/1 nodes are available: 1 Insufficient cpu.")
    env.member("c", reason="Unschedulable", message="0/1 nodes are available: 1 Insufficient cpu.")
    env.clock.advance(1)
    n = len(env.client.patches)
    await env.sync()
    assert len(env.client.patches) == n, "True is final: a pending member does not set it back"


async def test_a_basic_group_is_scheduled_with_one_member_bound() -> None:
    env = NativeEnv()
    env.native_group(min_count=None)
    env.member("a", node="n1")
    env.member("b", reason="Unschedulable", message="0/1 nodes are available: 1 Insufficient cpu.")
    await env.sync()
    assert [(c["status"], c["reason"]) for c in env.conditions()] == [("True", "Scheduled")]


async def test_the_placement_count_is_the_number_of_domains_of_the_topology_key() -> None:
    env = NativeEnv()
    for i, zone in enumerate(["z1", "z2", "z3", "z3"]):
        env.sched.on_node_add({"metadata": {"name": f"z{i}", "uid": f"z{i}",
                                            "labels": {"topology.kubernetes.io/zone": zone}},
                               "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}}})
    env.native_group(min_count=4, topology="topology.kubernetes.io/zone")
    env.member("a", reason="Unschedulable", message="pod group is unschedulable: no single domain ...")
    await env.sync()
    assert env.conditions()[-1]["message"] == UNSCHEDULABLE.format(n="0/3")


async def test_a_scheduler_error_says_so_with_the_members_message() -> None:
    env = NativeEnv()
    env.native_group(min_count=2)
    env.member("a", reason="SchedulerError", message="running PreFilter plugin \"X\": boom")
    env.member("b")
    await env.sync()
    c = env.conditions()[-1]
    assert (c["status"], c["reason"], c["message"]) == ("False", "SchedulerError", 'running PreFilter plugin "X": boom')


async def test_a_short_native_group_gets_no_condition_and_another_schedulers_gang_is_left_alone() -> None:
    env = NativeEnv()
    env.native_group(min_count=3)
    env.member("a", reason="NotReadyForScheduling", message="PodGroup ... 1 of 3 members exist; waiting for more")
    await env.sync()
    assert env.conditions() == [], "upstream holds a short gang without a word on its PodGroup"
    env.member("a", reason="Unschedulable", message="x", scheduler="default-scheduler")
    env.clock.advance(1)
    await env.sync()
    assert env.conditions() == []


async def test_events_on_a_native_group() -> None:
    env = NativeEnv()
    env.native_group(min_count=2)
    env.member("a", reason="Unschedulable", message="0/1 nodes are available: 1 Insufficient cpu.")
    env.member("b")
    await env.sync()
    assert env.events.notes("Unschedulable") == [
        "0/2 members have a node; waiting for 2: 0/1 nodes are available: 1 Insufficient cpu."]
    env.observe_native()
    env.member("a", node="n1")
    env.member("b", node="n1")
    env.clock.advance(1)
    await env.sync()
    env.observe_native()
    env.clock.advance(1)
    env.member("b", node="n1", reason="")
    await env.sync()
    assert env.events.notes("Scheduled") == ["2/2 members have a node; the gang is complete"], "once"
    assert env.events.recorded[-1][0]["apiVersion"] == "scheduling.k8s.io/v1alpha2"


async def test_a_scheduled_condition_another_writer_erased_is_written_again() -> None:
    """Another writer's conditions list, made on the version before ours (without the rule), replaced our
    PodGroupScheduled before the informer ever showed it. The controller trusts its own write only until the
    informer shows a newer version than the one it was made on, so it writes the condition again, keeping
    the other writer's, on that version; the group's Scheduled event is not recorded again."""
    env = NativeEnv()
    env.native_group(min_count=2)
    env.member("a", node="n1")
    env.member("b", node="n1")
    await env.sync()
    (c,) = env.conditions()
    assert (c["status"], c["reason"]) == ("True", "Scheduled")
    pods_ready = {"type": "PodsReady", "status": "False", "reason": "WaitForStart", "message": "x",
                  "lastTransitionTime": "2024-05-01T09:00:00Z"}
    env.native_group(min_count=2, conditions=[pods_ready], rv="3")
    env.clock.advance(1)
    await env.sync()
    path, body = env.client.patches[-1]
    assert path == PATH and body["metadata"] == {"resourceVersion": "3"}
    assert body["status"]["conditions"] == [pods_ready, {**c, "lastTransitionTime": "2024-05-01T10:00:01Z"}]
    assert env.events.notes("Scheduled") == ["2/2 members have a node; the gang is complete"]
