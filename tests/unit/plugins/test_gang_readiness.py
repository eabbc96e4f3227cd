"""plugins/gang_readiness.py: PodsReady timeouts, eviction, backoff, the requeuing limit, blockAdmission.

Time is a fake clock the tests move. The plugin's background task runs as
it does in the scheduler, and hears of every change the test makes to a
pod or a PodGroup through its GroupEvents point (``group_changed``), as the
informer handlers would tell it; ``tick(dt)`` moves the clock (firing the
plugin's timers), lets the plugin act, and waits for the API work it
started. The API client is a fake that records calls and, like the API
server plus the informer, drops a deleted pod from ``handle.pods`` (at the
end of its grace period when it sets one), refuses on create what
kube-apiserver refuses, and shows PodGroup patches (annotations and status,
each a new resourceVersion) on the PodGroup; a status patch made on an old
resourceVersion is refused with 409, as the API server does. A restart is a
new plugin over the same handle and client, the old one's tasks cancelled.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import gzip
import json
import time
from typing import Any

import pytest

from plugins.gang_readiness import (
    ANNOTATIONS_LIMIT, OPT_IN_ANNOTATION, RECREATE_ANNOTATION, TIMEOUT_ANNOTATION, GangReadiness,
    GangReadinessArgs, recreation,
)
from scheduler.framework import Code, ConfigError, Handle, parse_args
from scheduler.framework.clock import FakeClock
from scheduler.framework.podgroupconditions import CONFLICT_RETRIES, CONFLICT_WAIT_SECONDS
from scheduler.model import Pod, parse_pod, parse_pod_group
from scheduler.state.cache import Cache
from tests.unit.test_per_gang_state import state_sizes

NS = "default"
SCHED = "tandem-scheduler"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
GROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups/"
STATUS = GROUPS + "{}/status"
PODS = "/api/v1/namespaces/default/pods/"


def _rfc3339(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


# ---------------------------------------------------------------------------- args


def test_defaults_are_kueues() -> None:
    a = parse_args(GangReadinessArgs, None, "args")
    assert a == GangReadinessArgs(timeout_seconds=300.0, backoff_base_seconds=60.0, backoff_max_seconds=3600.0,
                                  backoff_limit_count=None, block_admission=False, all_gangs=False)


def test_args_are_read_from_camel_case() -> None:
    a = parse_args(GangReadinessArgs, {"timeoutSeconds": 2, "backoffBaseSeconds": 0.5, "backoffMaxSeconds": 4,
                                       "backoffLimitCount": 3, "blockAdmission": True, "allGangs": True}, "args")
    assert a == GangReadinessArgs(2.0, 0.5, 4.0, 3, True, True)


BAD_ARGS = [
    pytest.param({"timeoutSeconds": 0}, "args.timeoutSeconds: must be > 0, got 0.0", id="a zero timeout"),
    pytest.param({"backoffBaseSeconds": -1}, "args.backoffBaseSeconds: must be >= 0", id="a negative backoff"),
    pytest.param({"backoffBaseSeconds": 10, "backoffMaxSeconds": 5},
                 "args.backoffMaxSeconds: must be >= backoffBaseSeconds (10.0), got 5.0", id="max below base"),
    pytest.param({"backoffLimitCount": -1}, "args.backoffLimitCount: must be >= 0 or unset", id="a negative limit"),
    pytest.param({"backoffLimitCount": 1.5}, "args.backoffLimitCount: expected an integer",
                 id="a fractional limit"),
    pytest.param({"blockAdmission": "yes"}, "args.blockAdmission: expected true or false", id="a string as bool"),
    pytest.param({"timeout": 5}, "args.timeout: unknown field", id="an unknown field"),
]


@pytest.mark.parametrize(("raw", "message"), BAD_ARGS)
def test_bad_args_name_the_field(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_args(GangReadinessArgs, raw, "args")
    assert message in str(err.value)


BACKOFFS = [
    pytest.param(60, 3600, 1, 60, id="the first eviction waits the base"),
    pytest.param(60, 3600, 2, 120, id="the second twice that"),
    pytest.param(60, 3600, 4, 480, id="the fourth eight times"),
    pytest.param(60, 3600, 7, 3600, id="capped at the max"),
    pytest.param(60, 3600, 500, 3600, id="no overflow for huge counts"),
    pytest.param(0, 0, 3, 0, id="a zero base never waits"),
]


@pytest.mark.parametrize(("base", "cap", "n", "want"), BACKOFFS)
def test_backoff_is_exponential_and_capped(base: float, cap: float, n: int, want: float) -> None:
    assert GangReadinessArgs(backoff_base_seconds=base, backoff_max_seconds=cap).backoff(n) == want


# ---------------------------------------------------------------------------- the environment


class FakeClient:
    """The API server as far as the plugin uses it. Pods: a graceful delete of a pod that sets
    terminationGracePeriodSeconds leaves it terminating (deletionTimestamp) until its grace period is over
    (or ``env.finalized`` says otherwise); a create refuses what kube-apiserver refuses (ephemeralContainers,
    a resourceVersion) and a name in use (409). PodGroups: metadata patches reach the informer's copy."""

    def __init__(self, env: "Env") -> None:
        self.env = env
        self.calls: list[tuple[Any, ...]] = []
        self.delete_error: Exception | None = None

    async def patch(self, path: str, body: Any, content_type: str = "", **kw: Any) -> dict[str, Any]:
        self.calls.append(("patch", path, body))
        if path.startswith(GROUPS) and path.endswith("/status"):
            return self.env.patch_group_status(path[len(GROUPS):-len("/status")], body)
        if path.startswith(GROUPS):
            self.env.patch_group(path[len(GROUPS):], body["metadata"]["annotations"])
        return {}

    async def patch_pod_status(self, ns: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("patch_pod_status", name, patch))
        return {}

    async def delete_pod(self, ns: str, name: str, uid: str | None = None, grace_seconds: int | None = None) -> Any:
        self.calls.append(("delete_pod", name, uid))
        if self.delete_error is not None:
            raise self.delete_error
        env = self.env
        pod = env.handle.pods.get(env.names.get(name, ""))
        if pod is None:
            raise APIError(404)
        grace = pod.raw["spec"].get("terminationGracePeriodSeconds")
        if not grace:
            env.forget(name)
            return {}
        if not pod.deleting:   # as the kubelet ends it: at the end of its grace period
            raw = copy.deepcopy(pod.raw)
            raw["metadata"].update(deletionTimestamp=_rfc3339(env.clock.wall() + grace),
                                   deletionGracePeriodSeconds=grace)
            env.handle.pods[pod.uid] = parse_pod(raw)
            env.changed(pod.gang)
            env.clock.call_later(grace, env.terminated, name, pod.uid)
        return env.handle.pods[pod.uid].raw

    async def create(self, path: str, body: Any, **kw: Any) -> dict[str, Any]:
        self.calls.append(("create", path, body))
        if body["spec"].get("ephemeralContainers"):
            raise APIError(422, "spec.ephemeralContainers: Forbidden: cannot be set on create")
        if body["metadata"].get("resourceVersion"):
            raise APIError(500, "resourceVersion should not be set on objects to be created")
        name = body["metadata"]["name"]
        if name in self.env.names:
            raise APIError(409)
        self.env.serial += 1
        obj = copy.deepcopy(body)
        obj["metadata"]["uid"] = f"uid-{name}-{self.env.serial}"
        self.env.add(name, obj)
        return obj

    async def get(self, path: str, **kw: Any) -> dict[str, Any]:
        self.calls.append(("get", path))
        if path.startswith(PODS):
            pod = self.env.handle.pods.get(self.env.names.get(path[len(PODS):], ""))
            if pod is None:
                raise APIError(404)
            return pod.raw
        return {}

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        return [c for c in self.calls if c[0] == kind]


class FakeEvents:
    def __init__(self) -> None:
        self.recorded: list[tuple[Any, str, str, str]] = []

    def eventf(self, regarding: Any, related: Any, type_: str, reason: str, action: str, note: str,
               *args: Any) -> None:
        self.recorded.append((regarding, type_, reason, note))

    def on_groups(self, reason: str) -> list[tuple[str, str]]:
        return [(t, n) for r, t, why, n in self.recorded if why == reason and isinstance(r, dict)]


class APIError(Exception):
    def __init__(self, status: int, message: str = "") -> None:
        super().__init__(f"({status}) {message}")
        self.status = status


class Env:
    def __init__(self, **args: Any) -> None:
        self.clock = FakeClock(wall_start=1_714_557_600.0)   # 2024-05-01T10:00:00Z
        self.client = FakeClient(self)
        self.events = FakeEvents()
        self.activated: list[str] = []
        self.cache = Cache()
        self.handle = Handle(self.cache, self.client, SCHED, self.events, clock=self.clock, pods={},
                             activate=self.activated.extend)
        self.plugin = GangReadiness(parse_args(GangReadinessArgs, args, "args"), self.handle)
        self.task: asyncio.Task[None] | None = None  # the plugin's background task, once a test lets time pass
        self.names: dict[str, str] = {}             # pod name -> uid
        self.groups: dict[str, dict[str, Any]] = {}  # PodGroup name -> the API's object
        self.finalized: set[str] = set()            # pods a finalizer keeps after their grace period
        self.informer_paused = False                # PodGroup writes reach the API, not yet the informer
        self.serial = 0
        self.versions = 0

    def changed(self, key: str) -> None:
        """What the informer handlers do after each pod or PodGroup event (Scheduler.group_listeners)."""
        self.plugin.group_changed(key)

    def version(self, raw: dict[str, Any]) -> None:
        self.versions += 1
        raw["metadata"]["resourceVersion"] = str(self.versions)

    def deliver(self, name: str = "g") -> None:
        """The informer brings the API's copy of PodGroup ``name``."""
        self.cache.gangs.set_group(parse_pod_group(copy.deepcopy(self.groups[name])))
        self.changed(f"{NS}/{name}")

    def stored(self, name: str = "g") -> None:
        """A write of PodGroup ``name`` reached the API; the informer delivers it unless paused."""
        self.version(self.groups[name])
        if not self.informer_paused:
            self.deliver(name)

    def patch_group_status(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """A merge patch of the status, refused (409) when it names a resourceVersion that is not the API's."""
        raw = self.groups[name]
        rv = (body.get("metadata") or {}).get("resourceVersion")
        if rv is not None and rv != raw["metadata"]["resourceVersion"]:
            raise APIError(409, "the object has been modified; please apply your changes to the latest version")
        for k, v in body["status"].items():
            if v is None:
                raw["status"].pop(k, None)
            else:
                raw["status"][k] = copy.deepcopy(v)
        self.stored(name)
        return copy.deepcopy(raw)

    def group(self, name: str = "g", min_member: int = 3, annotations: dict[str, str] | None = None,
              status: dict[str, Any] | None = None, uid: str = "") -> None:
        self.groups[name] = {
            "metadata": {"name": name, "namespace": NS, "uid": uid or f"pg-{name}", "generation": 1,
                         "annotations": {OPT_IN_ANNOTATION: "true"} if annotations is None else annotations},
            "spec": {"minMember": min_member}, "status": copy.deepcopy(status) or {}}
        self.version(self.groups[name])
        self.deliver(name)

    def delete_group(self, name: str = "g") -> None:
        del self.groups[name]
        self.cache.gangs.remove_group(f"{NS}/{name}")
        self.changed(f"{NS}/{name}")

    def patch_group(self, name: str, annotations: dict[str, str | None]) -> None:
        """A merge patch of the PodGroup's annotations, as the informer then shows it."""
        raw = self.groups[name]
        for k, v in annotations.items():
            if v is None:
                raw["metadata"]["annotations"].pop(k, None)
            else:
                raw["metadata"]["annotations"][k] = v
        self.stored(name)

    def pod(self, name: str, group: str = "g", node: str = "", ready: bool = False, phase: str = "",
            owner: str = "", scheduler: str = SCHED, **spec: Any) -> str:
        self.serial += 1
        uid = f"uid-{name}-{self.serial}"
        obj: dict[str, Any] = {
            "metadata": {"name": name, "namespace": NS, "uid": uid, "labels": {GROUP_LABEL: group},
                         "resourceVersion": "7", "creationTimestamp": "2024-05-01T09:00:00Z"},
            "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "pause"}], **spec},
            "status": {"phase": phase or ("Running" if node else "Pending"),
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}
        if node:
            obj["spec"]["nodeName"] = node
        if owner:
            obj["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": owner,
                                                   "uid": "job-uid", "controller": True}]
        self.add(name, obj)
        return uid

    def add(self, name: str, obj: dict[str, Any]) -> None:
        self.forget(name)
        uid = obj["metadata"]["uid"]
        self.names[name] = uid
        self.handle.pods[uid] = pod = parse_pod(obj)
        self.handle.gangs.update_membership(None, pod)
        self.changed(pod.gang)

    def forget(self, name: str) -> None:
        uid = self.names.pop(name, None)
        if uid is not None:
            pod = self.handle.pods.pop(uid)
            self.handle.gangs.update_membership(pod, None)
            self.changed(pod.gang)

    def terminated(self, name: str, uid: str) -> None:
        """The kubelet's final delete, unless a finalizer keeps the pod (``finalized``)."""
        if self.names.get(name) == uid and name not in self.finalized:
            self.forget(name)

    def gang(self, n: int, ready: int, group: str = "g", **kw: Any) -> None:
        for i in range(n):
            self.pod(f"{group}-{i}", group=group, node="n1", ready=i < ready, **kw)

    def held(self, name: str) -> str:
        """PreEnqueue's verdict on a fresh member of ``name``'s group ("" when it may go)."""
        p = self.handle.pods[self.names[name]]
        st = self.plugin.pre_enqueue(p)
        assert st.code in (Code.SUCCESS, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        return st.message()

    def running(self) -> None:
        """The plugin's background task runs (from the first time a test lets time pass)."""
        if self.task is None:
            self.task = asyncio.ensure_future(self.plugin.run())

    async def tick(self, dt: float = 0.0) -> None:
        """Let ``dt`` pass (the plugin's timers fire), let the plugin act, and wait for its API work."""
        self.running()
        await settle()
        self.clock.advance(dt)
        await settle()
        await self.plugin.flush()

    async def run_for(self, seconds: float, step: float = 1.0) -> None:
        """Let ``seconds`` pass in steps, without waiting for the API work under way (a recreation may wait for
        minutes)."""
        self.running()
        for _ in range(round(seconds / step)):
            self.clock.advance(step)
            await settle()

    def restart(self) -> None:
        """The process dies (its tasks end where they are) and a new one starts over the same cluster."""
        for task in list(self.plugin._tasks):
            task.cancel()
        if self.task is not None:
            self.task.cancel()
            self.task = None
        self.plugin = GangReadiness(self.plugin.args, self.handle)

    async def stop(self) -> None:
        """The background task ends (the test's end): nothing is left running on the loop."""
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
            self.task = None

    def records(self, group: str = "g") -> dict[str, Any]:
        value = self.handle.gangs.group(f"{NS}/{group}").annotations.get(RECREATE_ANNOTATION)
        return json.loads(value) if value else {}

    def conditions(self, group: str = "g") -> list[dict[str, Any]]:
        return [body["status"]["conditions"][-1] for kind, path, body in self.client.of("patch")
                if path == STATUS.format(group)]

    def status_patches(self, group: str = "g") -> list[dict[str, Any]]:
        return [body["status"] for kind, path, body in self.client.of("patch") if path == STATUS.format(group)]

    def status_patches_with_versions(self, group: str = "g") -> list[tuple[str | None, dict[str, Any]]]:
        """(the resourceVersion it was made on, the status) of each status patch sent."""
        return [((body.get("metadata") or {}).get("resourceVersion"), body["status"])
                for kind, path, body in self.client.of("patch") if path == STATUS.format(group)]


async def settle() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


# ---------------------------------------------------------------------------- who takes part

OPT_IN = [
    pytest.param({}, False, None, id="no annotation: not part of it"),
    pytest.param({}, True, 300.0, id="no annotation with allGangs: part of it"),
    pytest.param({OPT_IN_ANNOTATION: "true"}, False, 300.0, id="opted in by annotation"),
    pytest.param({OPT_IN_ANNOTATION: "false"}, True, None, id="opted out even with allGangs"),
    pytest.param({TIMEOUT_ANNOTATION: "45"}, False, 45.0, id="its own timeout opts it in"),
    pytest.param({TIMEOUT_ANNOTATION: "soon"}, False, 300.0, id="an unreadable timeout falls back to the args"),
    pytest.param({OPT_IN_ANNOTATION: "false", TIMEOUT_ANNOTATION: "45"}, False, None, id="false wins"),
]


@pytest.mark.parametrize(("annotations", "all_gangs", "want"), OPT_IN)
def test_which_gangs_take_part(annotations: dict[str, str], all_gangs: bool, want: float | None) -> None:
    env = Env(allGangs=all_gangs)
    env.group(annotations=annotations)
    assert env.plugin.timeout_for(env.handle.gangs.group("default/g")) == want


async def test_a_gang_that_did_not_opt_in_is_never_evicted() -> None:
    env = Env(timeoutSeconds=10)
    env.group(annotations={})
    env.gang(3, ready=0)
    await env.tick()
    await env.tick(3600)
    assert env.client.calls == [] and env.events.recorded == []


# ---------------------------------------------------------------------------- the round


async def test_a_gang_ready_in_time_gets_pods_ready_true_and_is_never_evicted() -> None:
    env = Env(timeoutSeconds=10)
    env.group(min_member=3)
    env.gang(2, ready=2)
    await env.tick()
    assert env.client.calls == [], "no quorum yet: no round"
    env.pod("g-2", node="n1")
    await env.tick()
    assert env.conditions()[-1]["reason"] == "WaitForStart", "the quorum is seen when it is bound"
    assert env.conditions()[-1]["message"] == "2/3 required members are Ready; waiting up to 10s"
    await env.tick(9)
    assert env.conditions()[-1]["reason"] == "WaitForStart", "9 s of 10: still waiting"
    env.pod("g-2", node="n1", ready=True)
    await env.tick()
    cond = env.conditions()[-1]
    assert {k: cond[k] for k in ("type", "status", "reason", "message")} == {
        "type": "PodsReady", "status": "True", "reason": "PodsReady", "message": "3/3 required members are Ready"}
    # seen when it happens, no time passing; the wall clock moves with the clock: Ready 9 s after the start
    assert cond["lastTransitionTime"] == "2024-05-01T10:00:09Z" and cond["observedGeneration"] == 1
    assert env.events.on_groups("PodsReady") == [("Normal", "3/3 required members are Ready")]
    await env.tick(3600)
    assert env.client.of("delete_pod") == []


async def test_the_timeout_evicts_the_bound_members_and_requeues_the_gang_after_a_backoff() -> None:
    env = Env(timeoutSeconds=10, backoffBaseSeconds=5, backoffMaxSeconds=60)
    env.group(min_member=3)
    env.gang(3, ready=2, owner="train")
    env.pod("g-extra")                 # a fourth member, still pending: it holds nothing and stays
    await env.tick()
    await env.tick(9.9)
    assert env.client.of("delete_pod") == []
    uids = {n: env.names[n] for n in ("g-0", "g-1", "g-2")}
    await env.tick(0.1)

    assert sorted(env.client.of("delete_pod")) == sorted(("delete_pod", n, u) for n, u in uids.items()), \
        "bound members are deleted with a uid precondition"
    marks = env.client.of("patch_pod_status")
    assert len(marks) == 3 and all(m[2]["status"]["conditions"][0]["type"] == "DisruptionTarget" for m in marks)
    assert env.client.of("create") == [], "a Job's pods are recreated by the Job"
    msg = ("2/3 required members became Ready within 10s of the gang being bound; evicted 3 pod(s); "
           "requeue 1 after a backoff of 5s")
    last = env.status_patches()[-1]
    assert last["conditions"][-1]["reason"] == "PodsReadyTimeout"
    assert last["conditions"][-1]["status"] == "False"
    assert last["conditions"][-1]["message"] == msg
    assert last["requeueState"] == {"count": 1, "requeueAt": "2024-05-01T10:00:15Z"}, "evicted at 10 s, back off 5 s"
    assert env.events.on_groups("PodsReadyTimeout") == [("Warning", msg)]

    # the Job creates the members again: held while the gang backs off
    for i in range(3):
        env.pod(f"g-{i}", owner="train")
    assert env.held("g-0") == ("PodGroup default/g is backing off after a PodsReady timeout (eviction 1); "
                               "requeued at 2024-05-01T10:00:15Z")
    await env.tick(2)
    assert env.held("g-0").endswith("requeued at 2024-05-01T10:00:15Z"), "the same text while it waits"
    assert env.plugin.pre_filter(None, env.handle.pods[env.names["g-extra"]], None)[1].code == \
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "members queued before the hold are stopped at PreFilter"
    await env.tick(2.9)
    assert env.activated == []
    await env.tick(0.1)
    assert sorted(env.activated) == sorted(env.names[n] for n in ("g-0", "g-1", "g-2", "g-extra"))
    assert env.held("g-0") == ""


async def test_the_second_eviction_backs_off_twice_as_long() -> None:
    env = Env(timeoutSeconds=10, backoffBaseSeconds=5, backoffMaxSeconds=60)
    env.group(min_member=2)
    env.gang(2, ready=0, owner="j")
    await env.tick()
    await env.tick(10)
    await env.tick(5)
    env.gang(2, ready=1, owner="j")
    await env.tick()
    await env.tick(10)
    # evicted again at 25 s (10 + 5 + 10), backing off 10 s
    assert env.status_patches()[-1]["requeueState"] == {"count": 2, "requeueAt": "2024-05-01T10:00:35Z"}
    env.pod("g-0", owner="j")
    assert env.held("g-0").endswith("(eviction 2); requeued at 2024-05-01T10:00:35Z")


async def test_after_the_requeuing_limit_the_podgroup_fails_and_its_pods_stay_out() -> None:
    env = Env(timeoutSeconds=10, backoffBaseSeconds=1, backoffMaxSeconds=1, backoffLimitCount=1)
    env.group(min_member=2)
    env.gang(2, ready=1, owner="j")
    await env.tick()
    await env.tick(10)
    assert env.status_patches()[-1].get("phase") is None, "one requeue is allowed"
    await env.tick(1)
    env.gang(2, ready=1, owner="j")
    await env.tick()
    await env.tick(10)
    last = env.status_patches()[-1]
    assert last["phase"] == "Failed"
    assert last["requeueState"] == {"count": 2, "requeueAt": None}, "no backoff to wait for: the field is removed"
    assert last["conditions"][-1]["reason"] == "RequeuingLimitExceeded"
    assert last["conditions"][-1]["message"].endswith(
        "the gang was requeued 1 time(s), its backoffLimitCount: the PodGroup failed and its pods are not "
        "scheduled any more")
    assert [t for t, _ in env.events.on_groups("RequeuingLimitExceeded")] == ["Warning"]
    assert len(env.client.of("delete_pod")) == 4, "the failing round is evicted too"
    env.gang(2, ready=0, owner="j")
    assert env.held("g-0") == ("PodGroup default/g failed: its members were not Ready within the PodsReady "
                               "timeout 2 times (backoffLimitCount 1)")
    await env.tick(3600)
    assert env.held("g-0") != "", "for good"


async def test_a_limit_of_zero_fails_at_the_first_timeout() -> None:
    env = Env(timeoutSeconds=1, backoffLimitCount=0)
    env.group(min_member=1)
    env.gang(1, ready=0, owner="j")
    await env.tick()
    await env.tick(1)
    assert env.status_patches()[-1]["phase"] == "Failed"


async def test_bare_pods_are_recreated_from_their_spec_without_the_node() -> None:
    env = Env(timeoutSeconds=1)
    env.group(min_member=2)
    env.gang(2, ready=1)
    old = dict(env.names)
    await env.tick()
    await env.tick(1)
    created = env.client.of("create")
    assert sorted(body["metadata"]["name"] for _, _, body in created) == ["g-0", "g-1"]
    for _, path, body in created:
        assert path == "/api/v1/namespaces/default/pods"
        assert "nodeName" not in body["spec"] and body["spec"]["schedulerName"] == SCHED
        assert body["metadata"]["labels"] == {GROUP_LABEL: "g"}
        assert set(body["metadata"]) == {"name", "namespace", "labels"}, "no uid, resourceVersion or timestamps"
        assert "status" not in body
    assert env.plugin.evicted == 2 and env.plugin.recreated == 2
    assert all(u not in env.handle.pods for u in old.values())


async def test_a_successor_of_the_same_name_is_neither_deleted_nor_recreated() -> None:
    env = Env(timeoutSeconds=1)
    env.group(min_member=1)
    env.gang(1, ready=0)
    env.client.delete_error = APIError(409)   # the uid precondition failed
    await env.tick()
    await env.tick(1)
    assert len(env.client.of("delete_pod")) == 1 and env.client.of("create") == []


def test_recreation_keeps_identity_free_metadata_and_does_not_touch_the_original() -> None:
    raw = {"metadata": {"name": "p", "namespace": NS, "uid": "u", "resourceVersion": "9", "generateName": "p-",
                        "creationTimestamp": "t", "deletionTimestamp": "t2", "deletionGracePeriodSeconds": 30,
                        "generation": 1, "labels": {"a": "b"}, "annotations": {"x": "y"}, "finalizers": ["f/x"],
                        "ownerReferences": [{"kind": "Thing", "name": "t", "uid": "tu"},
                                            {"kind": "Boss", "name": "b", "uid": "bu", "controller": False}],
                        "managedFields": [{"manager": "kubectl"}]},
           "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}], "schedulerName": SCHED,
                    "ephemeralContainers": [{"name": "debug", "image": "busybox"}],
                    "priorityClassName": "high", "priority": 1000, "preemptionPolicy": "PreemptLowerPriority",
                    "runtimeClassName": "rc", "overhead": {"cpu": "100m"}, "terminationGracePeriodSeconds": 30},
           "status": {"phase": "Running", "nominatedNodeName": "n2"}}
    before = copy.deepcopy(raw)
    body = recreation(raw)
    assert body == {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "p", "namespace": NS, "labels": {"a": "b"}, "annotations": {"x": "y"},
                                 "finalizers": ["f/x"],
                                 "ownerReferences": [{"kind": "Thing", "name": "t", "uid": "tu"},
                                                     {"kind": "Boss", "name": "b", "uid": "bu", "controller": False}]},
                    # the class names stay: admission fills priority, preemptionPolicy and overhead in again
                    "spec": {"containers": [{"name": "c", "image": "i"}], "schedulerName": SCHED,
                             "priorityClassName": "high", "runtimeClassName": "rc",
                             "terminationGracePeriodSeconds": 30}}
    assert raw == before


def test_recreation_leaves_out_a_controller_owner() -> None:
    raw = {"metadata": {"name": "p", "ownerReferences": [{"kind": "Job", "name": "j", "uid": "ju", "controller": True},
                                                         {"kind": "Thing", "name": "t", "uid": "tu"}]},
           "spec": {"containers": []}}
    assert recreation(raw)["metadata"]["ownerReferences"] == [{"kind": "Thing", "name": "t", "uid": "tu"}]


# ---------------------------------------------------------------------------- bare pods are never lost


async def test_a_bare_pod_with_ephemeral_containers_is_created_again_without_them() -> None:
    env = Env(timeoutSeconds=1)
    env.group(min_member=1)
    old = env.pod("g-0", node="n1", priorityClassName="high", priority=1000,
                  ephemeralContainers=[{"name": "debug", "image": "busybox", "targetContainerName": "c"}])
    await env.tick()
    await env.tick(1)
    new = env.names.get("g-0")
    assert new is not None and new != old, "the pod exists again"
    spec = env.handle.pods[new].raw["spec"]
    assert "ephemeralContainers" not in spec and "nodeName" not in spec and "priority" not in spec
    assert spec["containers"] == [{"name": "c", "image": "pause"}] and spec["priorityClassName"] == "high"
    assert env.plugin.recreated == 1
    assert env.records() == {}, "its record is removed once it is created"


async def evicted_bare_pod(grace: int, finalized: bool = False) -> tuple[Env, str]:
    """A gang of one bare pod with this grace period, just evicted at its PodsReady timeout; its old uid."""
    env = Env(timeoutSeconds=1)
    env.group(min_member=1)
    old = env.pod("g-0", node="n1", terminationGracePeriodSeconds=grace)
    if finalized:
        env.finalized.add("g-0")
    await env.tick()
    await env.run_for(1)
    assert env.handle.pods[old].deleting, "deleted, and waiting to be created again"
    return env, old


async def test_a_grace_period_of_300s_is_waited_out() -> None:
    env, old = await evicted_bare_pod(300)
    await env.run_for(295, step=5)
    assert env.client.of("create") == [] and env.handle.pods[old].deleting, "terminating for 296 s of 300"
    await env.run_for(6, step=0.5)
    new = env.names.get("g-0")
    assert new is not None and new != old and "nodeName" not in env.handle.pods[new].raw["spec"]
    assert env.records() == {}
    assert [n for _, n in env.events.on_groups("PodsReadyTimeout") if "still terminating" in n] == [], \
        "within its grace period: nothing to report"


async def test_a_pod_kept_past_its_grace_period_is_reported_and_still_created_once_it_goes() -> None:
    env, old = await evicted_bare_pod(10, finalized=True)
    await env.run_for(39)
    assert env.events.on_groups("PodsReadyTimeout")[-1][0] == "Warning"
    assert not any("still terminating" in n for _, n in env.events.on_groups("PodsReadyTimeout"))
    await env.run_for(2)
    assert env.events.on_groups("PodsReadyTimeout")[-1] == (
        "Warning", "evicted bare pod default/g-0 is still terminating 30s after its grace period; "
                   "it is created again once it is gone")
    await env.run_for(600, step=10)
    assert env.names["g-0"] == old, "a finalizer keeps it"
    env.forget("g-0")   # the finalizer is removed
    await env.run_for(10, step=5)
    assert env.names["g-0"] != old and env.records() == {}


async def test_a_restart_between_the_delete_and_the_create_still_creates_the_pod() -> None:
    env, old = await evicted_bare_pod(60)
    env.restart()
    await settle()
    pending = env.records()
    await env.run_for(61)
    new = env.names.get("g-0")
    assert new is not None and new != old, "the new process created it"
    assert env.plugin.recreated == 1 and len(env.client.of("create")) == 1
    assert set(pending) == {"g-0"} and pending["g-0"]["uid"] == old, "it found it on the PodGroup"
    assert pending["g-0"]["pod"] == recreation(env.handle.pods[new].raw)
    assert env.records() == {}, "and removed it there"


async def test_a_restart_after_the_create_does_not_create_the_pod_twice() -> None:
    env = Env(timeoutSeconds=1)
    env.group(min_member=1)
    old = env.pod("g-0", node="n1")
    await env.tick()
    await env.tick(1)
    created = env.names["g-0"]
    assert created != old
    # the process died before removing the record: the next one finds it
    env.patch_group("g", {RECREATE_ANNOTATION: json.dumps({"g-0": {"uid": old, "pod": recreation({
        "metadata": {"name": "g-0", "namespace": NS}, "spec": {"containers": []}})}})})
    env.restart()
    creates = len(env.client.of("create"))
    await env.run_for(2)
    await env.plugin.flush()
    assert env.names["g-0"] == created and len(env.client.of("create")) == creates
    assert env.records() == {}


async def test_a_restart_before_the_delete_leaves_the_pod_where_it_is() -> None:
    env = Env(timeoutSeconds=1)
    env.group(min_member=1, annotations={RECREATE_ANNOTATION: "placeholder"})
    uid = env.pod("g-0", node="n1", ready=True)
    env.patch_group("g", {OPT_IN_ANNOTATION: "true", RECREATE_ANNOTATION: json.dumps(
        {"g-0": {"uid": uid, "pod": recreation(env.handle.pods[uid].raw)}})})
    await env.tick()
    await env.plugin.flush()
    assert env.names["g-0"] == uid and env.client.of("delete_pod") == [] and env.client.of("create") == []
    assert env.records() == {}, "never evicted: nothing to create"


async def test_bare_pods_whose_record_does_not_fit_the_annotations_are_not_evicted() -> None:
    env = Env(timeoutSeconds=1)
    filler = "x" * (ANNOTATIONS_LIMIT - 300)
    env.group(min_member=2, annotations={OPT_IN_ANNOTATION: "true", "filler": filler})
    uids = [env.pod(f"g-{i}", node="n1") for i in range(2)]
    env.pod("g-job", node="n1", owner="j")
    await env.tick()
    await env.tick(1)
    assert [c[1] for c in env.client.of("delete_pod")] == ["g-job"], "the Job's pod goes, the bare ones stay"
    assert [env.names[f"g-{i}"] for i in range(2)] == uids
    assert env.status_patches()[-1]["conditions"][-1]["message"] == (
        "0/2 required members became Ready within 1s of the gang being bound; evicted 1 pod(s); 2 bare pod(s) "
        "not evicted: the record to create them again would make the PodGroup's annotations larger than "
        "256 KiB; requeue 1 after a backoff of 1m0s")


async def test_a_record_too_big_as_json_is_written_gzipped() -> None:
    env = Env(timeoutSeconds=1)
    env.group(min_member=4, annotations={OPT_IN_ANNOTATION: "true", "filler": "x" * (ANNOTATIONS_LIMIT - 6000)})
    note = "the same long text in every member " * 50
    old = [env.pod(f"g-{i}", node="n1", containers=[{"name": "c", "image": "pause", "args": [note]}])
           for i in range(4)]
    await env.tick()
    await env.run_for(1)
    (first, *_) = [body["metadata"]["annotations"][RECREATE_ANNOTATION] for _, path, body in env.client.of("patch")
                   if path == GROUPS + "g"]
    assert not first.startswith("{") and len(first) < 6000
    assert set(json.loads(gzip.decompress(base64.b64decode(first)))) == {"g-0", "g-1", "g-2", "g-3"}
    await env.plugin.flush()
    assert all(env.names[f"g-{i}"] != old[i] for i in range(4)) and env.records() == {}


# ---------------------------------------------------------------------------- blockAdmission


async def test_block_admission_holds_other_gangs_until_the_bound_one_is_ready() -> None:
    env = Env(timeoutSeconds=10, blockAdmission=True)
    env.group("a", min_member=2)
    env.group("b", min_member=2)
    env.group("free", min_member=2, annotations={})
    env.gang(2, ready=0, group="a")
    env.pod("a-extra", group="a")
    for name, group in (("b-0", "b"), ("b-1", "b"), ("f-0", "free")):
        env.pod(name, group=group)
    await env.tick()
    assert env.held("b-0") == "waiting for PodGroup default/a to become Ready (blockAdmission)"
    assert env.held("a-extra") == "", "the bound gang itself is not held"
    assert env.held("f-0") == "", "gangs that did not opt in are not held"
    assert env.plugin.pre_enqueue(Pod(uid="x", namespace=NS, name="x")).is_success(), "nor pods of no gang"
    await env.tick(1)
    assert env.activated == []
    env.gang(2, ready=2, group="a")
    await env.tick(1)
    assert sorted(env.activated) == sorted([env.names["b-0"], env.names["b-1"]])
    assert env.held("b-0") == ""


async def test_block_admission_also_ends_when_the_blocking_gang_is_evicted() -> None:
    env = Env(timeoutSeconds=10, blockAdmission=True, backoffBaseSeconds=30, backoffMaxSeconds=30)
    env.group("a", min_member=1)
    env.group("b", min_member=1)
    env.gang(1, ready=0, group="a", owner="j")
    env.pod("b-0", group="b")
    await env.tick()
    assert env.held("b-0") != ""
    await env.tick(10)
    assert env.activated == [env.names["b-0"]]
    assert env.held("b-0") == ""


async def test_without_block_admission_nothing_else_is_held() -> None:
    env = Env(timeoutSeconds=10)
    env.group("a", min_member=1)
    env.group("b", min_member=1)
    env.gang(1, ready=0, group="a")
    env.pod("b-0", group="b")
    await env.tick()
    assert env.held("b-0") == ""


# ---------------------------------------------------------------------------- restarts and changes


async def test_the_backoff_survives_a_restart_through_the_podgroup_status() -> None:
    env = Env(timeoutSeconds=10)
    env.group(min_member=1, status={"requeueState": {"count": 2, "requeueAt": "2024-05-01T10:00:30Z"},
                                    "conditions": [{"type": "PodsReady", "status": "False",
                                                    "reason": "PodsReadyTimeout", "message": "x"}]})
    env.pod("g-0")
    assert env.held("g-0").endswith("(eviction 2); requeued at 2024-05-01T10:00:30Z")
    await env.tick(30)
    assert env.activated == [env.names["g-0"]] and env.held("g-0") == ""


async def test_a_failed_gang_stays_failed_after_a_restart_until_the_podgroup_is_recreated() -> None:
    env = Env(timeoutSeconds=10)
    env.group(min_member=1, status={"phase": "Failed", "requeueState": {"count": 3}, "conditions": [
        {"type": "PodsReady", "status": "False", "reason": "RequeuingLimitExceeded", "message": "x"}]})
    env.pod("g-0")
    assert env.held("g-0").startswith("PodGroup default/g failed")
    env.group(min_member=1, uid="a-new-one")
    assert env.held("g-0") == ""


async def test_opting_out_releases_a_held_gang() -> None:
    env = Env(timeoutSeconds=1, backoffBaseSeconds=100, backoffMaxSeconds=100)
    env.group(min_member=1)
    env.gang(1, ready=0, owner="j")
    await env.tick()
    await env.tick(1)
    env.pod("g-0", owner="j")
    assert env.held("g-0") != ""
    env.group(min_member=1, annotations={OPT_IN_ANNOTATION: "false"})
    await env.tick(1)
    assert env.activated == [env.names["g-0"]] and env.held("g-0") == ""


async def test_pods_of_other_schedulers_are_not_counted_or_touched() -> None:
    env = Env(timeoutSeconds=1)
    env.group(min_member=1)
    env.gang(1, ready=0, scheduler="default-scheduler")
    await env.tick()
    await env.tick(5)
    assert env.client.calls == []


async def test_queueing_hint_queues_only_pods_no_longer_held() -> None:
    env = Env(timeoutSeconds=1, backoffBaseSeconds=100, backoffMaxSeconds=100)
    env.group(min_member=1)
    env.gang(1, ready=0, owner="j")
    await env.tick()
    await env.tick(1)
    env.pod("g-0", owner="j")
    pod = env.handle.pods[env.names["g-0"]]
    ((_, hint), _) = [(e.event, e.hint) for e in env.plugin.events_to_register()]
    assert hint(pod, None, None) == 0
    await env.tick(100)
    assert hint(pod, None, None) == 1


# ---------------------------------------------------------------------------- events and timers, not a sweep


async def test_an_idle_plugin_arms_no_timer_and_looks_at_no_gang() -> None:
    env = Env(timeoutSeconds=10)
    env.group("quiet", min_member=2)
    env.group("other", min_member=2, annotations={})
    env.pod("quiet-0", group="quiet")
    await env.tick()
    looked: list[str] = []
    timeout_for = env.plugin.timeout_for
    env.plugin.timeout_for = lambda pg: looked.append(pg.key) or timeout_for(pg)  # type: ignore[method-assign]
    assert env.clock.pending == [], "no deadline: nothing to wake up for"
    await env.tick(3600)
    assert looked == [], "an hour without a change: no gang looked at"
    env.pod("quiet-1", group="quiet")
    await env.tick()
    assert looked == ["default/quiet"], "a member's change: its gang, once"


async def test_a_gang_has_one_timer_at_its_next_deadline() -> None:
    env = Env(timeoutSeconds=10, backoffBaseSeconds=30, backoffMaxSeconds=30)
    env.group(min_member=2)
    start = env.clock()
    env.gang(2, ready=0, owner="j")
    await env.tick()
    assert env.clock.pending == [start + 10], "the end of its PodsReady timeout"
    env.pod("g-0", node="n1", ready=True, owner="j")   # a change before the deadline keeps the one timer
    await env.tick(4)
    assert env.clock.pending == [start + 10]
    await env.tick(6)
    assert sorted(c[1] for c in env.client.of("delete_pod")) == ["g-0", "g-1"], "evicted when the timer fired"
    assert env.clock.pending == [start + 10 + 30], "then the end of its backoff"
    env.pod("g-0", owner="j")
    await env.tick(30)
    assert env.activated == [env.names["g-0"]] and env.clock.pending == []


async def test_an_unreadable_timeout_is_logged_once_per_group_and_value(caplog: pytest.LogCaptureFixture) -> None:
    env = Env(timeoutSeconds=10)
    env.group(min_member=2, annotations={TIMEOUT_ANNOTATION: "soon"})
    env.pod("g-0")
    env.held("g-0")
    for second in range(30):
        env.pod("g-1", ready=second % 2 == 0)   # a member that keeps changing
        env.held("g-0")
        await env.tick(1)

    def logged() -> list[str]:
        return [r.getMessage() for r in caplog.records if TIMEOUT_ANNOTATION in r.getMessage()]

    assert logged() == [f"PodGroup default/g: {TIMEOUT_ANNOTATION}='soon' is not a positive number of seconds; "
                        f"using 10.0s"]
    env.patch_group("g", {TIMEOUT_ANNOTATION: "later"})
    await env.tick(5)
    assert len(logged()) == 2 and "'later'" in logged()[1], "a new value is logged once more"


async def test_a_deleted_podgroup_leaves_nothing_behind_and_lets_its_held_pods_go() -> None:
    env = Env(timeoutSeconds=1, backoffBaseSeconds=100, backoffMaxSeconds=100)
    env.group(min_member=1, annotations={TIMEOUT_ANNOTATION: "x"})
    env.gang(1, ready=0, owner="j")
    await env.tick()
    await env.tick(1)
    env.pod("g-0", owner="j")
    assert env.held("g-0") != "" and env.clock.pending, "backing off, with a timer"
    env.delete_group()
    await env.tick()
    assert env.activated == [env.names["g-0"]], "its held pods go (to wait for their PodGroup)"
    assert plugin_state(env.plugin) == {}, "its round, timer, status write and annotation note are gone"


async def test_a_podgroup_deleted_while_the_plugin_does_not_run_leaves_nothing_behind() -> None:
    env = Env(timeoutSeconds=10)
    env.group(min_member=1, annotations={TIMEOUT_ANNOTATION: "x"})
    env.pod("g-0")
    assert env.held("g-0") == "" and plugin_state(env.plugin), "PreEnqueue runs in a follower too"
    env.delete_group()
    assert plugin_state(env.plugin) == {}


def plugin_state(plugin: GangReadiness) -> dict[str, int]:
    """Every non-empty piece of per-gang state the plugin keeps (its tasks aside), by name."""
    return {k: n for k, n in state_sizes(plugin, "plugin").items() if n and k != "plugin._tasks"}


# ---------------------------------------------------------------------------- PodsReady and the other conditions


def scheduled_condition(message: str = "m") -> dict[str, Any]:
    return {"type": "PodGroupScheduled", "status": "False", "reason": "NotReadyForScheduling", "message": message,
            "lastTransitionTime": "2024-05-01T09:00:00Z"}


async def test_pods_ready_is_written_on_the_version_its_conditions_came_from_and_again_after_a_conflict() -> None:
    env = Env(timeoutSeconds=10)
    env.group(min_member=2)
    env.gang(1, ready=0)
    await env.tick()
    informer_version = env.groups["g"]["metadata"]["resourceVersion"]
    # the status controller writes its condition; the informer has not brought that version yet
    env.informer_paused = True
    env.patch_group_status("g", {"status": {"conditions": [scheduled_condition()]}})
    env.pod("g-1", node="n1")
    await env.run_for(1)   # (the writer now waits for the informer: tick() would wait for it)
    (refused,) = env.status_patches_with_versions()
    assert refused[0] == informer_version, "made on the version its other conditions came from"
    assert [c["type"] for c in env.groups["g"]["status"]["conditions"]] == ["PodGroupScheduled"], \
        "refused (409): the controller's condition is not erased"
    env.informer_paused = False
    env.deliver()
    await env.tick()
    assert [c["type"] for c in env.groups["g"]["status"]["conditions"]] == ["PodGroupScheduled", "PodsReady"], \
        "written again on the newer version, keeping the other condition"
    assert env.groups["g"]["status"]["conditions"][0] == scheduled_condition()
    assert env.status_patches_with_versions()[-1][0] != informer_version


async def test_a_write_refused_again_and_again_gives_up_after_a_bounded_number_of_tries_on_the_clock(
        caplog: pytest.LogCaptureFixture) -> None:
    env = Env(timeoutSeconds=1000)
    env.group(min_member=1)
    env.informer_paused = True
    env.patch_group_status("g", {"status": {"conditions": [scheduled_condition()]}})   # never delivered
    env.gang(1, ready=0)
    await env.run_for(0.5, step=0.5)
    assert len(env.status_patches_with_versions()) == 1
    await env.run_for(CONFLICT_WAIT_SECONDS * (CONFLICT_RETRIES + 2), step=CONFLICT_WAIT_SECONDS)
    await env.plugin.flush()
    assert len(env.status_patches_with_versions()) == 1 + CONFLICT_RETRIES, "each retry waited for the clock"
    assert any("cannot write its PodsReady condition" in r.getMessage() for r in caplog.records)
    assert [c["type"] for c in env.groups["g"]["status"]["conditions"]] == ["PodGroupScheduled"]


async def test_a_recreated_blocking_podgroup_stops_blocking() -> None:
    env = Env(timeoutSeconds=10, blockAdmission=True)
    env.group("a", min_member=1)
    env.group("b", min_member=1)
    env.gang(1, ready=0, group="a")
    env.pod("b-0", group="b")
    await env.tick()
    assert env.held("b-0") != ""
    env.group("a", min_member=5, uid="a-again")    # deleted and created anew: its old round is over
    env.plugin.hold(env.handle.pods[env.names["a-0"]])
    assert env.held("b-0") == ""


async def test_a_native_podgroups_requeue_state_is_kept_in_an_annotation_and_read_back_after_a_restart() -> None:
    """A scheduling.k8s.io/v1alpha2 PodGroup's status has only conditions: the real 1.36 server drops
    status.phase and status.requeueState (with a warning). So the requeue state goes to an annotation of the
    object, as the same JSON, and a restarted scheduler reads it back from there."""
    from plugins.gang_readiness import REQUEUE_ANNOTATION
    from scheduler.model import NATIVE_KEY_PREFIX, parse_native_pod_group
    env = Env(timeoutSeconds=10)
    raw = {"metadata": {"name": "n", "namespace": NS, "uid": "pg-n", "generation": 1,
                        "annotations": {OPT_IN_ANNOTATION: "true"}},
           "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}, "status": {}}
    key = f"{NATIVE_KEY_PREFIX}{NS}/n"
    env.cache.gangs.set_group(parse_native_pod_group(raw))
    pg = env.handle.gangs.group(key)
    assert pg is not None
    state = {"count": 2, "requeueAt": "2024-05-01T10:00:30Z"}
    env.plugin._set_condition(key, pg, "False", "PodsReadyTimeout", "x", {"requeueState": state})
    await env.plugin.flush()
    path = f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{NS}/podgroups/n"
    (ann_path, ann), (status_path, status) = [(p, b) for _, p, b in env.client.of("patch")]
    assert (ann_path, ann) == (path, {"metadata": {"annotations": {
        REQUEUE_ANNOTATION: '{"count":2,"requeueAt":"2024-05-01T10:00:30Z"}'}}})
    assert status_path == path + "/status" and set(status["status"]) == {"conditions"}, "no CRD-only field"
    raw["metadata"]["annotations"][REQUEUE_ANNOTATION] = ann["metadata"]["annotations"][REQUEUE_ANNOTATION]
    env.cache.gangs.set_group(parse_native_pod_group(raw))
    env.restart()
    restored = env.plugin._gang(key, env.handle.gangs.group(key))
    assert restored.evictions == 2 and restored.requeue_at_text == "2024-05-01T10:00:30Z"
