"""Preemption end to end on the simulated cluster: what a kube-scheduler user sees, under tandem.

Each test runs the scheduler process (:class:`App`) with the default profile
against a SimCluster whose node agent honours grace periods where a test
needs victims to take time to go. Checked from outside, through the API: the
preemptor's ``status.nominatedNodeName`` before its bind, the victims'
``DisruptionTarget`` condition and ``Preempted`` event, which pods were
evicted and which were spared, and the PodScheduled messages of pods that
cannot preempt.
"""

from __future__ import annotations

from typing import Any

from bench.simcluster.agent import AgentConfig
from bench.simcluster.resources import lookup
from tests.integration.test_scheduler import (
    bound, config, eventually, make_node, make_pod, running, stays, unschedulable,
)

PRIORITY_CLASSES = lookup("scheduling.k8s.io", "v1", "priorityclasses")
LOW, MID, HIGH, HIGH_NEVER = "low", "mid", "high", "high-never"
VALUES = {LOW: 10, MID: 100, HIGH: 1000, HIGH_NEVER: 1000}


def pod(name: str, cpu: str, priority: str = LOW, **kw: Any) -> dict[str, Any]:
    """A pod of PriorityClass ``priority`` (the API server resolves spec.priority from it, as admission does)."""
    body = make_pod(name, cpu=cpu, memory="64Mi", **kw)
    body["spec"]["priorityClassName"] = priority
    body["spec"].setdefault("terminationGracePeriodSeconds", 0)
    return body


def priority_class(name: str) -> dict[str, Any]:
    """The PriorityClass ``name`` (one of :data:`VALUES`)."""
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": VALUES[name], "preemptionPolicy": "Never" if name == HIGH_NEVER else "PreemptLowerPriority"}


def create_classes(env: Any) -> None:
    for name in VALUES:
        env.store.create(PRIORITY_CLASSES, "", priority_class(name))


def fast_config() -> Any:
    return config(podInitialBackoffSeconds=0.05, podMaxBackoffSeconds=0.2)


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    for c in ((obj or {}).get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return c
    return {}


async def test_a_high_priority_pod_evicts_the_fewest_lower_priority_pods_it_needs(tmp_path):
    seen_nominated: list[str] = []
    async with running(tmp_path, [make_node("n1", cpu="4")], fast_config()) as env:
        create_classes(env)
        for i in range(4):
            env.create_pod(pod(f"low-{i}", "900m", LOW))
        await bound(env, *(f"low-{i}" for i in range(4)))

        def watch(verb: str, resource: str, ns: str, name: str, result: Any) -> None:
            if resource == "pods/binding" and name == "high":
                obj = env.pod("high") or {}
                seen_nominated.append((obj.get("status") or {}).get("nominatedNodeName") or "")

        env.store.observe(watch)
        env.create_pod(pod("high", "1500m", HIGH))
        await bound(env, "high")
        assert seen_nominated == ["n1"], "nominatedNodeName was set before the bind"
        left = [f"low-{i}" for i in range(4) if env.pod(f"low-{i}") is not None]
        assert len(left) == 2, f"400m free + 2 x 900m is enough: two victims, not more ({left} left)"
        events = [e for i in range(4) for e in await env.events_by_reason(f"low-{i}", "Preempted")]
        assert len(events) == 2
        high_uid = env.pod("high")["metadata"]["uid"]
        assert all(e["note"] == f"Preempted by pod {high_uid} on node n1" for e in events)
        assert all(e["related"]["name"] == "high" and e["action"] == "Preempting" for e in events)


async def test_victims_get_disruption_target_and_the_preemptor_waits_for_them_to_terminate(tmp_path):
    agent = AgentConfig(ready_delay=0.05, tick=0.01, termination_delay=None)   # grace periods in full
    async with running(tmp_path, [make_node("n1", cpu="3")], fast_config(), agent=agent) as env:
        create_classes(env)
        env.create_pod(pod("victim", "2", LOW, terminationGracePeriodSeconds=2))
        await bound(env, "victim")
        env.create_pod(pod("high", "2", HIGH))
        await eventually(lambda: condition(env.pod("victim"), "DisruptionTarget"), 5, "DisruptionTarget on victim")
        c = condition(env.pod("victim"), "DisruptionTarget")
        assert (c["status"], c["reason"]) == ("True", "PreemptionByScheduler")
        assert c["message"] == "tandem-scheduler: preempting to accommodate a higher priority pod"
        # the condition is written, then the pod deleted (two writes): the test may look in between
        await eventually(lambda: ((env.pod("victim") or {}).get("metadata") or {}).get("deletionTimestamp"), 1.5,
                         "the victim terminating (its 2 s grace period), not gone")
        await eventually(lambda: (env.pod("high") or {}).get("status", {}).get("nominatedNodeName") == "n1", 5,
                         "high nominated to n1")
        sched = env.app.scheduler
        assert sched.cache.nominations.get(env.pod("high")["metadata"]["uid"]) == "n1"
        # a lower-priority pod arriving while the victim terminates must not take the room: the victim still
        # counts, and once it is gone the nomination holds 2 cpu for high (mid would fit in the 3 freed)
        env.create_pod(pod("mid", "1500m", MID))
        await stays(lambda: not env.node_of("high") and not env.node_of("mid"), 1.0,
                    "nothing binds while the victim terminates")
        await bound(env, "high", timeout=10)
        assert env.pod("victim") is None
        await unschedulable(env, "mid")
        assert not env.node_of("mid")


async def test_never_policy_and_equal_priority_preempt_nothing(tmp_path):
    async with running(tmp_path, [make_node("n1", cpu="2")], fast_config()) as env:
        create_classes(env)
        env.create_pod(pod("low", "1500m", LOW))
        await bound(env, "low")
        env.create_pod(pod("never", "1500m", HIGH_NEVER))
        c = await unschedulable(env, "never")
        assert c["message"] == ("0/1 nodes are available: 1 Insufficient cpu. "
                                "no new claims to deallocate, preemption: not eligible due to preemptionPolicy=Never.")
        env.create_pod(pod("equal", "1500m", LOW))
        c = await unschedulable(env, "equal")
        assert c["message"] == ("0/1 nodes are available: 1 Insufficient cpu. "
                                "no new claims to deallocate, preemption: 0/1 nodes are "
                                "available: 1 No preemption victims found for incoming pod.")
        await stays(lambda: env.pod("low") is not None, 0.5, "low is never evicted")


async def test_futile_preemption_evicts_nothing(tmp_path):
    async with running(tmp_path, [make_node("n1", cpu="2"), make_node("n2", cpu="2")], fast_config()) as env:
        create_classes(env)
        env.create_pod(pod("low-1", "1", LOW))
        env.create_pod(pod("low-2", "1", LOW))
        await bound(env, "low-1", "low-2")
        env.create_pod(pod("huge", "3", HIGH))   # larger than any node: unresolvable
        c = await unschedulable(env, "huge")
        assert "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling." in c["message"]
        await stays(lambda: env.pod("low-1") is not None and env.pod("low-2") is not None, 0.5, "no victims")


# ---------------------------------------------------------------------------- gangs


def gang_cfg() -> Any:
    from tests.integration.test_gangs import gang_config
    return gang_config()


async def create_group(env: Any, name: str, min_member: int, whole: bool = False) -> None:
    body: dict[str, Any] = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                            "metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": min_member}}
    if whole:
        body["metadata"]["annotations"] = {"scheduling.tandem.dev/disruption-mode": "PodGroup"}
    await env.client.create("/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups", body)


def member(name: str, group: str, cpu: str, priority: str) -> dict[str, Any]:
    return pod(name, cpu, priority, labels={"scheduling.x-k8s.io/pod-group": group, "app": group})


async def test_a_gang_preempts_for_all_its_members_at_once_or_evicts_nothing(tmp_path):
    nodes = [make_node(f"n{i}", cpu="2") for i in range(3)]
    async with running(tmp_path, nodes, gang_cfg()) as env:
        create_classes(env)
        for i in range(3):
            env.create_pod(pod(f"low-{i}", "1500m", LOW))
        await bound(env, *(f"low-{i}" for i in range(3)))
        # four members of 1.5 cpu on three 2-cpu nodes: even evicting everything, one would not fit
        await create_group(env, "big", 4)
        for i in range(4):
            env.create_pod(member(f"big-{i}", "big", "1500m", HIGH))
        await unschedulable(env, "big-0")
        await stays(lambda: all(env.pod(f"low-{i}") is not None for i in range(3)), 1.0,
                    "a gang that cannot be whole evicts nobody")
        # three members fit once all three low pods go: all evicted in one go, the gang bound whole
        await create_group(env, "fits", 3)
        for i in range(3):
            env.create_pod(member(f"fits-{i}", "fits", "1500m", HIGH))
        await bound(env, "fits-0", "fits-1", "fits-2", timeout=15)
        assert all(env.pod(f"low-{i}") is None for i in range(3))
        assert not any(env.node_of(f"big-{i}") for i in range(4))


async def test_a_victim_gang_with_disruption_mode_pod_group_is_evicted_whole(tmp_path):
    nodes = [make_node(f"n{i}", cpu="2") for i in range(2)]
    async with running(tmp_path, nodes, gang_cfg()) as env:
        create_classes(env)
        await create_group(env, "batch", 2, whole=True)
        for i in range(2):
            env.create_pod(member(f"batch-{i}", "batch", "1500m", LOW))
        await bound(env, "batch-0", "batch-1")
        assert env.node_of("batch-0") != env.node_of("batch-1")
        env.create_pod(pod("high", "1500m", HIGH))
        await bound(env, "high", timeout=15)
        # one node was enough for high, but the gang goes whole: never left below its minMember
        await eventually(lambda: env.pod("batch-0") is None and env.pod("batch-1") is None, 10,
                         "both members of the victim gang evicted")


async def test_the_node_with_the_least_important_victims_is_chosen(tmp_path):
    async with running(tmp_path, [make_node("n1", cpu="2"), make_node("n2", cpu="2")], fast_config()) as env:
        create_classes(env)
        env.create_pod(pod("mid", "1500m", MID, nodeSelector={"kubernetes.io/hostname": "n1"}))
        env.create_pod(pod("low", "1500m", LOW, nodeSelector={"kubernetes.io/hostname": "n2"}))
        await bound(env, "mid", "low")
        env.create_pod(pod("high", "1500m", HIGH))
        assert (await bound(env, "high"))["high"] == "n2"
        assert env.pod("low") is None and env.pod("mid") is not None


async def test_a_pod_protected_by_a_pdb_is_spared_when_another_node_will_do(tmp_path):
    async with running(tmp_path, [make_node("n1", cpu="2"), make_node("n2", cpu="2")], fast_config()) as env:
        create_classes(env)
        env.create_pod(pod("guarded", "1500m", LOW, labels={"app": "db"},
                           nodeSelector={"kubernetes.io/hostname": "n1"}))
        env.create_pod(pod("free", "1500m", LOW, labels={"app": "batch"},
                           nodeSelector={"kubernetes.io/hostname": "n2"}))
        await bound(env, "guarded", "free")
        await env.client.create("/apis/policy/v1/namespaces/default/poddisruptionbudgets", {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}})

        async def counted() -> bool:
            pdb = await env.client.get("/apis/policy/v1/namespaces/default/poddisruptionbudgets/db")
            st = pdb.get("status") or {}
            return st.get("currentHealthy") == 1 and st.get("disruptionsAllowed") == 0

        await eventually(counted, 5, "the disruption controller to count the guarded pod")
        await eventually(lambda: "default/db" in env.app.scheduler.pdbs
                         and env.app.scheduler.pdbs["default/db"].disruptions_allowed == 0, 5, "the PDB informer")
        env.create_pod(pod("high", "1500m", HIGH))
        assert (await bound(env, "high"))["high"] == "n2"
        assert env.pod("guarded") is not None and env.pod("free") is None
