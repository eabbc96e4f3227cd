"""CapacityReservation and the scheduler's hold step, in process: who holds, what is held, backfill, ends.

A real scheduler with tandem's default profile runs on a fake clock against a fake API
(tests/support/inprocess.py). The tests play the kubelet: running pods are added bound, with a startTime
and, where the case needs one, an activeDeadlineSeconds; ending one is its update to Succeeded.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

from scheduler.config import parse_config
from tests.support.inprocess import NS, InProcess

RESERVED_BIG = "node(s) had capacity reserved for pod default/big"


def _rfc3339(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class Cluster:
    """The in-process scheduler, with running pods the test starts and ends as a kubelet would."""

    def __init__(self, env: InProcess) -> None:
        self.env = env
        self.n = 0

    def running(self, name: str, node: str, cpu: str = "1", deadline: int | None = None,
                started_ago: float = 0.0, priority: int = 0, port: int = 0) -> dict[str, Any]:
        """A pod of another scheduler's, bound and Running on ``node`` since ``started_ago`` seconds."""
        spec: dict[str, Any] = {"nodeName": node, "schedulerName": "default-scheduler", "priority": priority,
                                "containers": [{"name": "c", "image": "x",
                                                "resources": {"requests": {"cpu": cpu}}}]}
        if deadline is not None:
            spec["activeDeadlineSeconds"] = deadline
        if port:
            spec["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port, "protocol": "TCP"}]
        obj = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": NS, "uid": f"run-{name}", "resourceVersion": self.env.api.rv(),
                            "creationTimestamp": "2026-01-01T00:00:00Z"},
               "spec": spec,
               "status": {"phase": "Running",
                          "startTime": _rfc3339(self.env.clock.wall() - started_ago)}}
        self.env.api.objects[f"/api/v1/namespaces/{NS}/pods/{name}"] = obj
        self.env.s.on_pod_add(obj)
        return obj

    def end(self, name: str) -> None:
        """The kubelet saw it finish: Succeeded."""
        path = f"/api/v1/namespaces/{NS}/pods/{name}"
        old = self.env.api.objects[path]
        new = copy.deepcopy(old)
        new["status"]["phase"] = "Succeeded"
        new["metadata"]["resourceVersion"] = self.env.api.rv()
        self.env.api.objects[path] = new
        self.env.s.on_pod_update(old, new)

    def pending(self, name: str, cpu: str = "1", deadline: int | None = None, priority: int | None = None,
                never: bool = False, selector: dict[str, str] | None = None, group: str = "",
                created: str = "2026-01-01T00:00:00Z", port: int = 0) -> dict[str, Any]:
        """One of tandem's pods, pending."""
        env = self.env
        obj = env.pod(name, group, cpu=cpu, selector=selector)
        new = copy.deepcopy(obj)
        if deadline is not None:
            new["spec"]["activeDeadlineSeconds"] = deadline
        if priority is not None:
            new["spec"]["priority"] = priority
        if never:
            new["spec"]["preemptionPolicy"] = "Never"
        if port:
            new["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port, "protocol": "TCP"}]
        new["metadata"]["creationTimestamp"] = created
        if new != obj:
            new["metadata"]["resourceVersion"] = env.api.rv()
            env.api.objects[f"/api/v1/namespaces/{NS}/pods/{name}"] = new
            env.s.on_pod_update(obj, new)
        return new


def profile(plugins: dict[str, Any] | None = None, plugin_config: list[dict[str, Any]] | None = None) -> Any:
    """tandem's default profile with ``plugins`` and ``pluginConfig`` set."""
    prof: dict[str, Any] = {"schedulerName": "tandem-scheduler"}
    if plugins:
        prof["plugins"] = plugins
    if plugin_config:
        prof["pluginConfig"] = plugin_config
    return parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                         "profiles": [prof]})


def full_nodes(c: Cluster, count: int = 4, deadline: int | None = 30) -> None:
    """``count`` 4-cpu nodes, each full with four 1-cpu pods; the k-th pod of node i ends after (i+k) * 10 s
    (given a deadline), so n0's pods end first."""
    for i in range(count):
        c.env.node(f"n{i}", cpu="4")
        for k in range(4):
            d = None if deadline is None else deadline + 10 * (i + k)
            c.running(f"r{i}-{k}", f"n{i}", deadline=d)


@pytest.fixture
async def env():
    e = InProcess()
    e.start()
    yield e
    await e.stop()


def held(env: InProcess) -> dict[str, list[str]]:
    return {r.what: r.nodes for r in env.s.cache.nominations.held.by_key.values()}


def reserved_events(env: InProcess, name: str) -> list[str]:
    return [note for who, reason, note in env.events.recorded if who == name and reason == "Reserved"]


# ---------------------------------------------------------------------------- one big pod


async def test_a_big_pod_holds_the_node_that_frees_first_and_binds_there_before_small_pods(env) -> None:
    c = Cluster(env)
    full_nodes(c)
    c.pending("big", cpu="4")
    await env.settle()
    assert held(env) == {"pod default/big": ["n0"]}
    assert env.bound("big") == {}
    # a 1-cpu pod comes when n0's first pod ends: it may not take that cpu
    c.end("r0-0")
    c.pending("small-0")
    await env.settle()
    assert env.bound("small-0") == {}
    assert RESERVED_BIG in env.message("small-0")
    assert env.message("small-0").startswith("0/4 nodes are available: ")
    # the hold turned a pod away: the big pod is nominated to n0 and told why it waits
    assert env.api.nominated == {"big": "n0"}
    notes = reserved_events(env, "big")
    assert notes and notes[-1].startswith("reserved 1 node(s) for pod default/big: waiting for 3 running pod(s)")
    # the rest of n0's pods end: the big pod binds there, the small one still waits
    for k in (1, 2, 3):
        c.end(f"r0-{k}")
    await env.advance(1.5)
    assert env.bound("big") == {"big": "n0"}
    assert env.bound("small-0") == {}
    # the big pod's hold is fulfilled; the small pod, blocked only by capacity, is the head of the line now
    assert held(env) == {"pod default/small-0": ["n1"]}
    assert env.s.hold_metrics.reservations.labels("fulfilled", "tandem-scheduler")._value.get() == 1


async def test_small_pods_keep_binding_on_room_the_unit_does_not_need(env) -> None:
    c = Cluster(env)
    for i in range(2):
        env.node(f"n{i}", cpu="8")
        for k in range(6):
            c.running(f"r{i}-{k}", f"n{i}", deadline=30 + 10 * (i + k))
    c.pending("big", cpu="4")   # needs 2 of n0's 6 pods gone (n0's end first): 2 cpu are held, 2 stay free
    await env.settle()
    assert held(env) == {"pod default/big": ["n0"]}
    c.pending("a")
    c.pending("b")
    await env.settle()
    # n0 has 2 free cpu now, and once 2 of its pods end it has room for big: neither needs that room...
    # ...n1 has 2 free too: both small pods bind, and the big one keeps n0
    assert set(env.bound("a", "b")) == {"a", "b"}
    assert held(env) == {"pod default/big": ["n0"]}


async def test_a_pod_too_big_for_every_node_and_one_no_node_matches_hold_nothing(env) -> None:
    c = Cluster(env)
    full_nodes(c)
    c.pending("huge", cpu="64")
    c.pending("lost", cpu="4", selector={"no": "such-node"})
    await env.settle()
    assert held(env) == {}
    c.end("r0-0")
    c.pending("small")
    await env.settle()
    assert env.bound("small") == {"small": "n0"}


async def test_a_pod_blocked_by_a_host_port_holds_the_node_whose_port_frees_first(env) -> None:
    c = Cluster(env)
    for i in range(3):
        env.node(f"n{i}", cpu="8")
        c.running(f"web-{i}", f"n{i}", deadline=100 - 30 * i, port=8080)   # n2's ends first
    c.pending("proxy", port=8080)
    await env.settle()
    assert held(env) == {"pod default/proxy": ["n2"]}
    # the port frees on n2: the proxy goes at once (not after its backoff), and a younger pod wanting the
    # same port does not get n2
    c.end("web-2")
    c.pending("other", port=8080, created="2026-01-02T00:00:00Z")
    await env.settle()
    assert env.bound("proxy") == {"proxy": "n2"}
    assert env.bound("other") == {}


# ---------------------------------------------------------------------------- backfill


async def test_a_short_pod_backfills_held_room_and_a_long_or_endless_one_does_not(env) -> None:
    c = Cluster(env)
    full_nodes(c)          # n0's pods end 30, 40, 50, 60 s after they started (now)
    c.pending("big", cpu="4")
    await env.settle()
    c.end("r0-0")          # one cpu free on n0; the big pod's expected start is in 60 s
    c.pending("endless")                    # no deadline: may not
    c.pending("long", deadline=120)         # ends after the expected start: may not
    c.pending("short", deadline=20)         # ends before: backfills
    await env.settle()
    assert env.bound("short") == {"short": "n0"}
    assert env.bound("endless", "long") == {}
    assert "node(s) had capacity reserved for pod default/big" in env.message("long")
    assert env.s.hold_metrics.backfilled_pods._value.get() >= 1


async def test_with_one_blocker_without_a_deadline_nothing_backfills(env) -> None:
    c = Cluster(env)
    env.node("n0", cpu="4")
    for k in range(3):
        c.running(f"r0-{k}", "n0", deadline=30)
    c.running("r0-3", "n0")   # no deadline: the expected start is unknown
    c.pending("big", cpu="4")
    await env.settle()
    assert held(env) == {"pod default/big": ["n0"]}
    c.end("r0-0")
    c.pending("short", deadline=1)
    await env.settle()
    assert env.bound("short") == {}
    notes = reserved_events(env, "big")
    assert notes and "expected start unknown: 1 of them have no activeDeadlineSeconds" in notes[-1]


# ---------------------------------------------------------------------------- priority


async def test_a_higher_priority_pod_that_never_preempts_binds_on_held_room_and_the_hold_plans_again(env) -> None:
    c = Cluster(env)
    full_nodes(c)
    c.pending("big", cpu="4")
    await env.settle()
    assert held(env) == {"pod default/big": ["n0"]}
    c.end("r0-0")
    c.pending("vip", priority=1000, never=True)
    await env.settle()
    assert env.bound("vip") == {"vip": "n0"}
    await env.advance(11)   # the big pod's next attempt plans again around the vip
    assert "pod default/big" in held(env)


async def test_an_older_unit_of_equal_priority_takes_the_head_of_the_line(env) -> None:
    c = Cluster(env)
    full_nodes(c)
    c.pending("young", cpu="4", created="2026-01-02T00:00:00Z")
    await env.settle()
    assert held(env) == {"pod default/young": ["n0"]}
    c.pending("old", cpu="4", created="2026-01-01T00:00:00Z")
    await env.settle()
    assert list(held(env)) == ["pod default/old"]


# ---------------------------------------------------------------------------- gangs


async def test_a_gang_of_four_whole_nodes_holds_four_nodes_and_binds_whole(env) -> None:
    c = Cluster(env)
    full_nodes(c)
    env.native_group("big", 4)
    for i in range(4):
        c.pending(f"big-{i}", cpu="4", group="big")
    await env.settle()
    assert held(env) == {"pod group default/big": ["n0", "n1", "n2", "n3"]}
    assert env.api.nominated == {}   # nothing competes for the room yet: no nomination, as kube-scheduler
    c.end("r0-0")
    c.pending("small")
    await env.settle()
    assert sorted(env.api.nominated.items()) == [(f"big-{i}", f"n{i}") for i in range(4)]
    assert "node(s) had capacity reserved for pod group default/big" in env.message("small")
    notes = reserved_events(env, "big-0")
    assert notes and notes[-1].startswith("reserved 4 node(s) for pod group default/big: waiting for 15 running")
    for i in range(4):
        for k in range(4):
            if (i, k) != (0, 0):
                c.end(f"r{i}-{k}")
    await env.advance(11)
    assert sorted(env.bound(*[f"big-{i}" for i in range(4)]).values()) == ["n0", "n1", "n2", "n3"]
    assert "pod group default/big" not in held(env)


# ---------------------------------------------------------------------------- ends and opting out


async def test_a_hold_expires_after_max_hold_seconds_and_the_unit_goes_to_the_back_of_its_priority() -> None:
    env = InProcess(profile(plugin_config=[{"name": "CapacityReservation", "args": {"maxHoldSeconds": 5}}]))
    env.start()
    try:
        c = Cluster(env)
        full_nodes(c)
        c.pending("first", cpu="4", created="2026-01-01T00:00:00Z")
        await env.settle()
        assert list(held(env)) == ["pod default/first"]
        await env.advance(6)
        c.pending("second", cpu="4", created="2026-01-02T00:00:00Z")
        await env.settle()
        # first expired: it is behind second now, which holds
        assert list(held(env)) == ["pod default/second"]
    finally:
        await env.stop()


async def test_a_profile_that_disables_the_plugin_holds_nothing() -> None:
    env = InProcess(profile(plugins={"multiPoint": {"disabled": [{"name": "CapacityReservation"}]}}))
    env.start()
    try:
        c = Cluster(env)
        full_nodes(c)
        c.pending("big", cpu="4")
        await env.settle()
        c.end("r0-0")
        c.pending("small")
        await env.settle()
        assert held(env) == {}
        assert env.bound("small") == {"small": "n0"}
    finally:
        await env.stop()


async def test_deleting_the_held_pod_ends_the_hold_and_frees_its_room(env) -> None:
    c = Cluster(env)
    full_nodes(c)
    c.pending("big", cpu="4")
    await env.settle()
    c.end("r0-0")
    c.pending("small")
    await env.settle()
    assert env.bound("small") == {}
    env.delete_pod("big")
    await env.settle()
    assert held(env) == {}
    assert env.bound("small") == {"small": "n0"}


async def test_a_topology_gang_holds_nodes_in_one_domain_the_one_that_frees_first(env) -> None:
    c = Cluster(env)
    # two zones of two 4-cpu nodes, all full; z2's pods end first, but z2-a's last one ends late
    for zone, lives in (("z1", (30, 40)), ("z2", (10, 90))):
        for node, life in zip(("a", "b"), lives):
            env.node(f"{zone}-{node}", cpu="4", zone=zone)
            for k in range(4):
                c.running(f"r-{zone}-{node}-{k}", f"{zone}-{node}", deadline=life)
    env.native_group("tg", 2, topology="topology.kubernetes.io/zone")
    for i in range(2):
        c.pending(f"tg-{i}", cpu="4", group="tg")
    await env.settle()
    # z1 frees whole after 40 s; z2 only after 90 s: both members are planned in z1
    assert held(env) == {"pod group default/tg": ["z1-a", "z1-b"]}


async def test_a_scheduler_plugins_gang_holds_too(env) -> None:
    c = Cluster(env)
    full_nodes(c, count=2)
    env.s.cache.gangs.crd_served = True   # the CRD is installed (App sets it after discovery)
    env.s.on_pod_group_add({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                            "metadata": {"name": "crd", "namespace": NS, "uid": "pg-crd", "resourceVersion": "1",
                                         "creationTimestamp": "2026-01-01T00:00:00Z"},
                            "spec": {"minMember": 2}})
    for i in range(2):
        obj = c.pending(f"crd-{i}", cpu="4")
        new = copy.deepcopy(obj)
        new["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = "crd"
        new["metadata"]["resourceVersion"] = env.api.rv()
        env.api.objects[f"/api/v1/namespaces/{NS}/pods/crd-{i}"] = new
        env.s.on_pod_update(obj, new)
    await env.advance(11)
    assert held(env) == {"pod group default/crd": ["n0", "n1"]}
