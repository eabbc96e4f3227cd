"""plugins/coscheduling.py: gangs placed all together or not at all, as scheduler-plugins' Coscheduling.

The plugin is driven through a real Cache and node table and a Handle
with the scheduler's shared indexes filled by hand; the framework's
waiting pods are stand-ins that record allow and reject.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import pytest

from plugins.coscheduling import Coscheduling, CoschedulingArgs
from scheduler.framework import (
    ActionType, ClusterEvent, Code, ConfigError, CycleState, Handle, QueueingHint, Resource, Status, parse_args,
)
from scheduler.framework import interface as fi
from scheduler.framework.clock import FakeClock
from scheduler.framework.registry import REGISTRY
from scheduler.model import Pod, parse_node, parse_pod_group
from scheduler.state.cache import Cache

NS = "ns"
OK, U, UU, WAIT = Code.SUCCESS, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.WAIT
T0 = "2024-05-01T10:00:00Z"
T1 = "2024-05-01T10:00:05Z"


# ---------------------------------------------------------------------------- stand-ins


class Events:
    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str]] = []

    def eventf(self, regarding: Any, related: Any, type_: str, reason: str, action: str, note: str) -> None:
        self.recorded.append((regarding.name, reason, note))


class Future:
    """The part of an asyncio.Future a waiting pod exposes."""

    def __init__(self) -> None:
        self.status: Status | None = None

    def done(self) -> bool:
        return self.status is not None

    def cancelled(self) -> bool:
        return False

    def result(self) -> Status:
        assert self.status is not None
        return self.status


class Waiting:
    """A pod waiting at Permit (runtime.WaitingPod): records who allowed or rejected it."""

    def __init__(self, pod: Pod, on_reject: Any = None) -> None:
        self.pod = pod
        self.future = Future()
        self.allowed_by: list[str] = []
        self.on_reject = on_reject

    def allow(self, plugin: str) -> None:
        self.allowed_by.append(plugin)

    def reject(self, plugin: str, msg: str) -> None:
        if not self.future.done():
            self.future.status = Status(U, msg, plugin=plugin)
            if self.on_reject is not None:
                self.on_reject()

    @property
    def rejection(self) -> str:
        return self.future.status.message() if self.future.status else ""


class Framework:
    def __init__(self) -> None:
        self.waiting: dict[str, Waiting] = {}

    def iterate_waiting_pods(self) -> list[Waiting]:
        return list(self.waiting.values())

    def get_waiting_pod(self, uid: str) -> Waiting | None:
        return self.waiting.get(uid)


class Env:
    """A Coscheduling plugin over a cache, with the scheduler's indexes it reads."""

    def __init__(self, args: CoschedulingArgs | None = None, nodes: int = 2, cpu: str = "4",
                 activate: Callable[[list[str]], None] | None = None) -> None:
        self.cache = Cache()
        for i in range(nodes):
            self.cache.add_node(parse_node({"metadata": {"name": f"n{i}"},
                                            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "10"}}}))
        self.clock = FakeClock()
        self.events = Events()
        self.fw = Framework()
        self.activated: list[str] = []
        self.handle = Handle(self.cache, events=self.events, clock=self.clock, pods={}, framework=self.fw,
                             activate=activate or self.activated.extend)
        self.plugin = Coscheduling(args, self.handle)

    def group(self, name: str = "g", min_member: int = 3, created: str = T0, **spec: Any) -> None:
        self.cache.gangs.set_group(parse_pod_group({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS, "creationTimestamp": created},
            "spec": {"minMember": min_member, **spec}}))

    def add(self, *pods: Pod) -> None:
        for p in pods:
            self.cache.gangs.update_membership(self.handle.pods.get(p.uid), p)
            self.handle.pods[p.uid] = p

    def bind(self, p: Pod, node: str = "n0") -> Pod:
        bound = dataclasses.replace(p, node_name=node)
        self.add(bound)
        self.cache.add_pod(bound)
        return bound

    def wait(self, p: Pod, node: str = "n0") -> Waiting:
        """``p`` assumed on ``node`` and waiting at Permit; a rejection releases it as the core's _release does."""
        self.add(p)
        self.cache.assume(p, node)

        def release() -> None:
            self.plugin.unreserve(CycleState(), p, node)
            self.cache.forget(p)

        wp = self.fw.waiting[p.uid] = Waiting(p, release)
        return wp


def pod(name: str, group: str | None = "g", *, cpu: int = 1000, priority: int = 0, created: float = 0.0,
        phase: str = "Pending", deleting: bool = False, ns: str = NS) -> Pod:
    return Pod(uid=name, namespace=ns, name=name, pod_group=group or "", requests={"cpu": cpu}, priority=priority,
               created=created, phase=phase, deleting=deleting)


@dataclasses.dataclass
class Info:
    """The QueuedPodInfo fields QueueSort reads."""

    pod: Pod
    timestamp: float


# ---------------------------------------------------------------------------- registration and args


def test_registered_and_serves_every_gang_extension_point() -> None:
    assert REGISTRY["Coscheduling"] is Coscheduling
    plugin = Coscheduling(None, Handle(Cache(), clock=FakeClock()))
    for proto in (fi.PreEnqueuePlugin, fi.QueueSortPlugin, fi.PreFilterPlugin, fi.PostFilterPlugin,
                  fi.ReservePlugin, fi.PermitPlugin, fi.EnqueueExtensions, fi.GangPlugin):
        assert isinstance(plugin, proto), proto.__name__
    assert not isinstance(plugin, fi.FilterPlugin) and not isinstance(plugin, fi.ScorePlugin)


@pytest.mark.parametrize("raw, want", [
    pytest.param(None, CoschedulingArgs(60, 0), id="no args are upstream's defaults"),
    pytest.param({"permitWaitingTimeSeconds": 10, "podGroupBackoffSeconds": 5}, CoschedulingArgs(10, 5),
                 id="both fields in camelCase"),
    pytest.param({"kind": "CoschedulingArgs", "permitWaitingTimeSeconds": 900}, CoschedulingArgs(900, 0),
                 id="the framework's longest wait is allowed"),
])
def test_args_parse(raw: Any, want: CoschedulingArgs) -> None:
    assert parse_args(CoschedulingArgs, raw, "pluginConfig[0].args") == want


@pytest.mark.parametrize("raw, error", [
    pytest.param({"permitWaitingTimeSeconds": 0}, "pluginConfig[0].args.permitWaitingTimeSeconds: must be > 0",
                 id="a zero wait would reject every gang at once"),
    pytest.param({"permitWaitingTimeSeconds": 901}, "pluginConfig[0].args.permitWaitingTimeSeconds: must be > 0 "
                 "and at most 900", id="a wait past the framework's cap"),
    pytest.param({"podGroupBackoffSeconds": -1}, "pluginConfig[0].args.podGroupBackoffSeconds: must be >= 0, got -1",
                 id="a negative backoff"),
    pytest.param({"permitWaitingTimeSeconds": "60"}, "pluginConfig[0].args.permitWaitingTimeSeconds: expected an "
                 "integer", id="a string for a number"),
    pytest.param({"kubeConfigPath": "/etc/k"}, "pluginConfig[0].args.kubeConfigPath: unknown field",
                 id="upstream's client fields are not taken: tandem's client serves the plugin"),
])
def test_args_validation_names_the_field(raw: Any, error: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_args(CoschedulingArgs, raw, "pluginConfig[0].args")
    assert str(exc.value).startswith(error), str(exc.value)


# ---------------------------------------------------------------------------- QueueSort


@pytest.mark.parametrize("queue, order", [
    pytest.param([("b1", "b", 0, 1.0), ("a1", "a", 0, 2.0), ("b2", "b", 0, 3.0), ("a2", "a", 0, 4.0)],
                 ["a1", "a2", "b1", "b2"], id="members of the older PodGroup first and together"),
    pytest.param([("a1", "a", 0, 1.0), ("vip", None, 10, 9.0)], ["vip", "a1"],
                 id="priority before anything else"),
    pytest.param([("b1", "b", 0, 1.0), ("solo", None, 0, 5.0), ("a1", "a", 0, 9.0)], ["a1", "solo", "b1"],
                 id="a pod without a group is ordered by its own creation among the groups"),
    pytest.param([("a2", "a", 0, 2.0), ("a1", "a", 0, 1.0)], ["a1", "a2"],
                 id="within a gang, the time each entered the queue"),
    pytest.param([("c1", "c", 0, 2.0), ("b1", "b", 0, 3.0), ("c2", "c", 0, 1.0)], ["b1", "c2", "c1"],
                 id="groups created in the same second: by key, still together"),
])
def test_sort_key_keeps_gangs_together(queue: list[tuple[str, str | None, int, float]], order: list[str]) -> None:
    env = Env()
    env.group("a", created=T0)
    env.group("b", created=T1)
    env.group("c", created=T1)
    created_solo = env.plugin.sort_key(Info(pod("x", "a"), 0.0))[1] + 3  # between a (T0) and b (T1)
    infos = [Info(pod(n, g, priority=prio, created=created_solo), ts) for n, g, prio, ts in queue]
    assert [i.pod.name for i in sorted(infos, key=env.plugin.sort_key)] == order


def test_sort_key_of_a_member_whose_group_is_missing_uses_the_pod() -> None:
    env = Env()
    assert env.plugin.sort_key(Info(pod("p", "nope", created=7.0, priority=3), 2.0)) == (-3, 7.0, "ns/nope", 2.0)


# ---------------------------------------------------------------------------- PreEnqueue


def _members(n: int, group: str = "g", **kw: Any) -> list[Pod]:
    return [pod(f"{group}-{i}", group, **kw) for i in range(n)]


@pytest.mark.parametrize("setup, code, message", [
    pytest.param(lambda env: None, OK, "", id="a pod without a group is not held"),
    pytest.param(lambda env: env.add(*_members(3)), UU, "PodGroup ns/g not found",
                 id="a missing PodGroup holds the pod and names the group"),
    pytest.param(lambda env: (env.group(min_member=3), env.add(*_members(2))), UU,
                 "PodGroup ns/g: 2 of 3 members exist; waiting for more",
                 id="fewer pods than minMember"),
    pytest.param(lambda env: (env.group(min_member=3), env.add(*_members(3))), OK, "",
                 id="minMember pods exist"),
    pytest.param(lambda env: (env.group(min_member=3), env.add(*_members(2), pod("g-8", phase="Succeeded"),
                                                             pod("g-9", deleting=True))), UU,
                 "PodGroup ns/g: 2 of 3 members exist; waiting for more",
                 id="finished and deleting pods do not count"),
    pytest.param(lambda env: (env.group(min_member=3),
                              env.add(*_members(2), dataclasses.replace(pod("g-9"), scheduling_gates=("x",)))), UU,
                 "PodGroup ns/g: 2 of 3 members exist; waiting for more",
                 id="a pod behind scheduling gates does not count until they are removed"),
    pytest.param(lambda env: (env.group(min_member=3), env.add(*_members(1)), env.bind(pod("g-7")),
                              env.bind(pod("g-8"))), OK, "",
                 id="members already bound count (a gang half-bound before a restart)"),
    pytest.param(lambda env: (env.group(min_member=0), env.add(*_members(1))), OK, "",
                 id="minMember 0 is no constraint"),
])
def test_pre_enqueue(setup: Any, code: Code, message: str) -> None:
    env = Env()
    setup(env)
    p = env.handle.pods.get("g-0") or pod("g-0", None)
    st = env.plugin.pre_enqueue(p)
    assert (st.code, st.message()) == (code, message)


def test_a_held_member_reports_nothing_itself() -> None:
    # the scheduler puts PreEnqueue messages on the pod (scheduler/preenqueue.py), delayed and deduplicated;
    # a plugin event on every re-evaluation would be a second, unbudgeted report
    env = Env()
    (p,) = _members(1)
    env.add(p)
    for _ in range(3):
        env.plugin.pre_enqueue(p)
    env.group(min_member=2)
    env.plugin.pre_enqueue(p)
    assert env.events.recorded == []
    env.group(min_member=1)
    assert env.plugin.pre_enqueue(p).is_success()


def test_every_held_member_of_a_gang_says_the_same() -> None:
    env = Env()
    env.group(min_member=2147483647)
    members = _members(3)
    env.add(*members)
    assert {env.plugin.pre_enqueue(m).message() for m in members} == \
        {"PodGroup ns/g: 3 of 2147483647 members exist; waiting for more"}


def test_the_member_completing_the_gang_activates_the_held_siblings_once() -> None:
    passed: list[str] = []

    def activate(uids: list[str]) -> None:
        # as the queue's activate: a held pod goes through PreEnqueue again
        env.activated.extend(uids)
        passed.extend(u for u in uids if env.plugin.pre_enqueue(env.handle.pods[u]).is_success())

    env = Env(activate=activate)
    env.group(min_member=3)
    a, b, c = _members(3)
    env.add(a)
    assert env.plugin.pre_enqueue(a).code == UU
    env.add(b)
    assert env.plugin.pre_enqueue(b).code == UU
    env.add(c)
    assert env.plugin.pre_enqueue(c).is_success()
    assert sorted(env.activated) == sorted(passed) == ["g-0", "g-1"]
    assert env.plugin.pre_enqueue(a).is_success()     # later: counted again, and nothing left to activate
    assert sorted(env.activated) == ["g-0", "g-1"]


# ---------------------------------------------------------------------------- PreFilter


def _gang(env: Env, n: int = 3, **spec: Any) -> list[Pod]:
    env.group(min_member=n, **spec)
    members = _members(n)
    env.add(*members)
    return members


GAP = "PodGroup ns/g minResources do not fit the cluster's free capacity: resource gap: "


@pytest.mark.parametrize("min_resources, held, other, code, message", [
    pytest.param(None, 0, 0, OK, "", id="no minResources: nothing to check"),
    pytest.param({"cpu": "8"}, 0, 0, OK, "", id="exactly the free cpu of two 4-cpu nodes"),
    pytest.param({"cpu": "8"}, 0, 1, UU, GAP + "cpu 1", id="one cpu taken by another pod: the gap is named"),
    pytest.param({"cpu": "10", "memory": "1Gi"}, 0, 0, UU, GAP + "cpu 2", id="only the short resource is named"),
    pytest.param({"cpu": "8500m", "memory": "20Gi"}, 0, 0, UU, GAP + "cpu 500m, memory 4Gi",
                 id="every short resource, in quantities a user writes"),
    pytest.param({"example.com/gpu": "1"}, 0, 0, UU, GAP + "example.com/gpu 1", id="a resource no node has"),
    pytest.param({"cpu": "8"}, 2, 0, OK, "", id="what the gang's placed members hold counts as free for it"),
    pytest.param({"cpu": "8"}, 2, 1, UU, GAP + "cpu 1", id="but what others hold does not"),
    pytest.param({"cpu": "4"}, 0, 5, OK, "", id="an over-committed node owes nothing to the others"),
    pytest.param({"pods": "25"}, 0, 0, UU, GAP + "pods 5", id="pods are a resource too"),
])
def test_pre_filter_min_resources(min_resources: dict[str, str] | None, held: int, other: int, code: Code,
                                  message: str) -> None:
    env = Env()
    members = _gang(env, **({"minResources": min_resources} if min_resources else {}))
    if other:
        env.cache.add_pod(dataclasses.replace(pod("other", None, cpu=other * 1000), node_name="n1"))
    for p in members[1:1 + held]:
        env.cache.assume(p, "n0")
    _, st = env.plugin.pre_filter(CycleState(), members[0], env.cache.nodes)
    assert (st.code, st.message()) == (code, message)


def test_pre_filter_checks_min_resources_once_per_attempt_window() -> None:
    env = Env()
    a, *_ = _gang(env, minResources={"cpu": "8"}, scheduleTimeoutSeconds=5)
    assert env.plugin.pre_filter(CycleState(), a, env.cache.nodes)[1].is_success()
    env.cache.add_pod(dataclasses.replace(pod("hog", None, cpu=4000), node_name="n1"))
    # upstream's permittedPG: the verdict stands for the group's wait time
    assert env.plugin.pre_filter(CycleState(), a, env.cache.nodes)[1].is_success()
    env.clock.advance(6)
    assert env.plugin.pre_filter(CycleState(), a, env.cache.nodes)[1].code == UU


@pytest.mark.parametrize("setup, code, message", [
    pytest.param(lambda env: env.add(pod("g-0")), UU, "PodGroup ns/g not found", id="the group went away"),
    pytest.param(lambda env: (env.group(min_member=3), env.add(*_members(2))), UU,
                 "pre-filter pod g-0 cannot find enough sibling pods, current pods number: 2, minMember of group: 3",
                 id="a member was deleted since it was enqueued"),
])
def test_pre_filter_repeats_the_cheap_checks(setup: Any, code: Code, message: str) -> None:
    env = Env()
    setup(env)
    _, st = env.plugin.pre_filter(CycleState(), env.handle.pods["g-0"], env.cache.nodes)
    assert (st.code, st.message()) == (code, message)


def test_pre_filter_skips_pods_without_a_group() -> None:
    env = Env()
    assert env.plugin.pre_filter(CycleState(), pod("solo", None), env.cache.nodes)[1].code == Code.SKIP


# ---------------------------------------------------------------------------- Permit


@pytest.mark.parametrize("bound, assumed, spec, code, timeout", [
    pytest.param(0, 0, {}, WAIT, 60.0, id="the first member waits the plugin's default"),
    pytest.param(0, 1, {"scheduleTimeoutSeconds": 7}, WAIT, 7.0, id="the PodGroup's own timeout wins"),
    pytest.param(0, 1, {"scheduleTimeoutSeconds": 0}, WAIT, 60.0, id="a zero timeout means the default"),
    pytest.param(0, 2, {}, OK, 0.0, id="the member that makes quorum is allowed"),
    pytest.param(2, 0, {}, OK, 0.0, id="members bound before a restart count toward quorum"),
    pytest.param(1, 1, {}, OK, 0.0, id="bound and assumed members together"),
])
def test_permit_holds_until_quorum(bound: int, assumed: int, spec: dict[str, Any], code: Code,
                                   timeout: float) -> None:
    env = Env()
    me, *others = _gang(env, 3, **spec)
    for p in others[:bound]:
        env.bind(p, "n1")
    for p in others[bound:bound + assumed]:
        env.cache.assume(p, "n1")
    env.cache.assume(me, "n0")
    st, t = env.plugin.permit(CycleState(), me, "n0")
    assert (st.code, t) == (code, timeout)


def test_quorum_allows_every_waiting_sibling_and_nobody_else() -> None:
    env = Env()
    a, b, c = _gang(env, 3)
    env.group("h", min_member=2)
    stranger = pod("h-0", "h")
    wa, wb, wh = env.wait(a), env.wait(b), env.wait(stranger, "n1")
    env.cache.assume(c, "n1")
    st, _ = env.plugin.permit(CycleState(), c, "n1")
    assert st.is_success()
    assert (wa.allowed_by, wb.allowed_by, wh.allowed_by) == (["Coscheduling"], ["Coscheduling"], [])


def test_permit_rejects_a_member_whose_group_is_gone() -> None:
    env = Env()
    p = pod("g-0")
    env.cache.assume(p, "n0")
    st, _ = env.plugin.permit(CycleState(), p, "n0")
    assert (st.code, st.message()) == (U, "PodGroup ns/g not found")


def test_permit_lets_pods_without_a_group_through() -> None:
    env = Env()
    assert env.plugin.permit(CycleState(), pod("solo", None), "n0") == (Status(), 0.0)


# ---------------------------------------------------------------------------- Unreserve


def test_a_member_timing_out_rejects_its_waiting_siblings_and_frees_their_room() -> None:
    env = Env()
    a, b, c, d = _gang(env, 4)
    env.group("h", min_member=2)
    waiting = [env.wait(p) for p in (a, b, c)]
    stranger = env.wait(pod("h-0", "h"), "n1")
    waiting[0].reject("Coscheduling", "rejected due to timeout after waiting 1s at plugin Coscheduling")
    assert [w.rejection for w in waiting[1:]] == [
        "rejection in Unreserve: Pod g-0 of PodGroup ns/g gave up its node: "
        "rejected due to timeout after waiting 1s at plugin Coscheduling"] * 2
    assert env.cache.gangs.placed_members("ns/g") == {}                  # nothing of the gang stays held
    assert not stranger.future.done()                             # another gang is left alone


def test_unreserve_after_a_bind_error_says_so() -> None:
    env = Env()
    a, b, c = _gang(env, 3)
    wb = env.wait(b)
    env.cache.assume(a, "n0")
    env.plugin.unreserve(CycleState(), a, "n0")
    assert wb.rejection == "rejection in Unreserve: Pod g-0 of PodGroup ns/g gave up its node"


def test_unreserve_of_a_pod_without_a_group_does_nothing() -> None:
    env = Env()
    _gang(env, 3)
    wb = env.wait(pod("g-1"))
    env.plugin.unreserve(CycleState(), pod("solo", None), "n0")
    assert not wb.future.done()


# ---------------------------------------------------------------------------- PostFilter and the group cycle


class Diagnosis:
    def message(self) -> str:
        return "0/2 nodes are available: 2 Insufficient cpu."


def test_a_member_that_fits_nowhere_rejects_the_gang() -> None:
    env = Env()
    a, b, c = _gang(env, 3)
    wa, wb = env.wait(a), env.wait(b)
    _, st = env.plugin.post_filter(CycleState(), c, Diagnosis())
    assert (st.code, st.message()) == (U, "PodGroup ns/g gets rejected due to Pod g-2 is unschedulable even after "
                                          "PostFilter")
    why = "PodGroup ns/g gets rejected due to Pod g-2 is unschedulable: 0/2 nodes are available: 2 Insufficient cpu."
    assert wa.rejection == wb.rejection == "optimistic rejection in PostFilter: " + why
    assert env.cache.gangs.placed_members("ns/g") == {}
    # the group cycle then tells the members not tried yet the same reason
    assert env.plugin.gang_failed(c, Status(U, "0/2 nodes are available: 2 Insufficient cpu. ...")) == why


def test_a_gang_with_quorum_is_not_rejected_for_an_extra_member() -> None:
    env = Env()
    env.group(min_member=2)
    a, b, c = _members(3)
    env.add(a, b, c)
    env.bind(a)
    env.bind(b)
    _, st = env.plugin.post_filter(CycleState(), c, Diagnosis())
    assert (st.code, st.message()) == (U, "")
    assert env.plugin.gang_failed(c, Status(U, "0/2 nodes are available: 2 Insufficient cpu.")) == ""


def test_a_gang_with_members_to_spare_goes_on_until_too_few_are_left() -> None:
    env = Env()
    env.group(min_member=3)
    members = _members(5)
    env.add(*members)
    w0 = env.wait(members[0])
    fail = Status(U, "0/2 nodes are available: 2 Insufficient cpu.")
    assert env.plugin.gang_failed(members[1], fail) == ""       # 4 left to try, 3 needed
    assert env.plugin.gang_failed(members[2], fail) == ""       # 3 left
    assert not w0.future.done()
    msg = env.plugin.gang_failed(members[3], fail)               # 2 left: the gang cannot be whole
    assert msg == "PodGroup ns/g gets rejected due to Pod g-3 is unschedulable: " + fail.message()
    assert w0.rejection == msg


def test_a_failure_before_post_filter_rejects_the_waiting_members_too() -> None:
    env = Env()
    a, b, c = _gang(env, 3)
    wa = env.wait(a)
    msg = env.plugin.gang_failed(b, Status(UU, "0/2 nodes are available: node(s) had untolerated taint(s)."))
    assert msg == wa.rejection == ("PodGroup ns/g gets rejected due to Pod g-1 is unschedulable: 0/2 nodes are "
                                   "available: node(s) had untolerated taint(s).")


def test_post_filter_leaves_pods_without_a_group_alone() -> None:
    env = Env()
    assert env.plugin.post_filter(CycleState(), pod("solo", None), Diagnosis())[1] == Status(U)


def test_a_failed_gang_backs_off_as_a_whole() -> None:
    env = Env(CoschedulingArgs(permit_waiting_time_seconds=60, pod_group_backoff_seconds=10))
    a, b, c = _gang(env, 3)
    env.wait(a)
    env.plugin.post_filter(CycleState(), c, Diagnosis())
    assert env.plugin.pre_filter(CycleState(), b, env.cache.nodes)[1] == Status(UU, "podGroup ns/g failed recently")
    assert env.plugin.pre_enqueue(b) == Status(UU, "podGroup ns/g failed recently")
    assert env.plugin.gang_failed(b, Status(UU, "podGroup ns/g failed recently")) == "podGroup ns/g failed recently"
    env.activated.clear()
    env.clock.advance(9.9)
    assert env.activated == [], "the window has not ended"
    env.clock.advance(0.1)
    assert sorted(env.activated) == sorted(p.uid for p in (a, b, c)), "the window's end wakes the whole gang"
    assert env.plugin.pre_filter(CycleState(), b, env.cache.nodes)[1].is_success()
    assert env.plugin.pre_enqueue(b).is_success()


def test_without_group_backoff_a_failed_gang_may_retry_at_once() -> None:
    env = Env()
    a, b, c = _gang(env, 3)
    env.plugin.post_filter(CycleState(), c, Diagnosis())
    assert env.plugin.pre_filter(CycleState(), a, env.cache.nodes)[1].is_success()


# ---------------------------------------------------------------------------- EnqueueExtensions


def _hint(env: Env, resource: str, action: int) -> Any:
    for ceh in env.plugin.events_to_register():
        if ceh.event.matches(ClusterEvent(resource, action)):
            return ceh.hint or (lambda *_: QueueingHint.QUEUE)
    return None


@pytest.mark.parametrize("resource, action, old, new, want", [
    pytest.param(Resource.ASSIGNED_POD, ActionType.ADD, None, pod("g-9"), QueueingHint.QUEUE,
                 id="a member of the same gang appears (bound, or found at startup)"),
    pytest.param(Resource.ASSIGNED_POD, ActionType.ADD, None, pod("h-9", "h"), QueueingHint.SKIP,
                 id="a pod of another gang appears"),
    pytest.param(Resource.ASSIGNED_POD, ActionType.ADD, None, pod("g-9", ns="other"), QueueingHint.SKIP,
                 id="a group of the same name in another namespace"),
    pytest.param(Resource.POD_GROUP, ActionType.ADD, None,
                 parse_pod_group({"metadata": {"namespace": NS, "name": "g"}}), QueueingHint.QUEUE,
                 id="its PodGroup is created"),
    pytest.param(Resource.POD_GROUP, ActionType.UPDATE, parse_pod_group({"metadata": {"namespace": NS, "name": "h"}}),
                 parse_pod_group({"metadata": {"namespace": NS, "name": "h"}}),
                 QueueingHint.SKIP, id="another PodGroup changes"),
    pytest.param(Resource.POD_GROUP, ActionType.UPDATE, None,
                 parse_pod_group({"metadata": {"namespace": "other", "name": "g"}}),
                 QueueingHint.SKIP, id="a PodGroup of the same name in another namespace"),
    pytest.param(Resource.NODE, ActionType.ADD, None, None, QueueingHint.QUEUE, id="a node joins"),
    pytest.param(Resource.NODE, ActionType.UPDATE_NODE_ALLOCATABLE, None, None, QueueingHint.QUEUE,
                 id="a node grows"),
    pytest.param(Resource.ASSIGNED_POD, ActionType.DELETE, pod("x", None), None, QueueingHint.QUEUE,
                 id="another pod frees its room"),
    pytest.param(Resource.ASSIGNED_POD, ActionType.DELETE, pod("g-5"), None, QueueingHint.SKIP,
                 id="the gang's own member gives its room back: nothing new for the gang"),
])
def test_events_that_may_help_a_held_member(resource: str, action: int, old: Any, new: Any, want: int) -> None:
    env = Env()
    hint = _hint(env, resource, action)
    assert hint is not None, "not registered"
    assert hint(pod("g-0"), old, new) == want


@pytest.mark.parametrize("resource, action", [
    pytest.param(Resource.NODE, ActionType.UPDATE_NODE_LABEL, id="a node relabelled"),
    pytest.param(Resource.POD_GROUP, ActionType.DELETE, id="a PodGroup deleted"),
    pytest.param(Resource.UNSCHEDULED_POD, ActionType.UPDATE, id="a pending pod updated"),
])
def test_events_that_cannot_help_are_not_registered(resource: str, action: int) -> None:
    assert _hint(Env(), resource, action) is None


# ---------------------------------------------------------------------------- GangScheduling and the CRD


@pytest.mark.parametrize("crd_served, plugin, want", [
    pytest.param(True, "GangScheduling", "ns/g", id="GangScheduling keeps CRD gangs where the CRD is served"),
    pytest.param(False, "GangScheduling", None,
                 id="where the CRD is not served GangScheduling schedules a labelled pod alone, as kube-scheduler"),
    pytest.param(False, "Coscheduling", "ns/g",
                 id="Coscheduling, enabled on purpose, still holds it naming the missing PodGroup"),
])
def test_crd_gangs_follow_whether_the_server_serves_the_crd(crd_served: bool, plugin: str, want: str | None) -> None:
    cache = Cache()
    cache.gangs.crd_served = crd_served
    p = REGISTRY[plugin](None, Handle(cache, clock=FakeClock(), pods={}))
    assert p.gang_key(pod("a")) == want
    assert p.pre_enqueue(pod("a")).code == (OK if want is None else UU)
    native = Pod(uid="n", namespace=NS, name="n", scheduling_group="trainers")
    assert p.gang_key(native) == f"scheduling.k8s.io/{NS}/trainers", "native groups do not depend on the CRD"
