"""Gangs end to end on the simulated cluster: all or nothing, never deadlocked, never hoarding.

Each test starts a SimCluster (API server plus node agent) and runs the
scheduler process (:class:`App`) with the profile of ``config/gang.yaml``
(test-sized backoffs and client limits), as a user would run it. PodGroups
are created through the API (``POST /apis/scheduling.x-k8s.io/v1alpha1/...``),
pods through the store with the API server's admission, and the test polls
with timeouts; the few fixed waits are for things that must not happen.

What is checked is what a user of scheduler-plugins' Coscheduling expects:
a gang is bound only once minMember members have a node, a gang that cannot
fit holds nothing and says why on its pods, two gangs competing for room end
with one whole and one waiting (never both half-placed), a pod naming a
missing PodGroup waits with an event naming it, members held for want of
siblings say so with the numbers (and their PodGroup too) until the gang
schedules, a gang's hold ends after its
scheduleTimeoutSeconds and gives the room to ordinary pods (at once when
its PodGroup is deleted), and a gang half-bound when the scheduler stops
completes under the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import yaml

from bench.simcluster import SimCluster
from bench.simcluster import errors as sim_errors
from bench.simcluster.agent import AgentConfig
from bench.simcluster.resources import lookup
from scheduler.apiclient import APIClient, from_kubeconfig
from scheduler.app import App
from scheduler import podgroups, preenqueue
from scheduler.config import SchedulerConfig, parse_config
from scheduler.framework.clock import Clock
from tests.integration.test_scheduler import eventually, make_node, make_pod, scheduled_condition, stays

PODS = lookup("", "v1", "pods")
NODES = lookup("", "v1", "nodes")
PODGROUPS = lookup("scheduling.x-k8s.io", "v1alpha1", "podgroups")
NS = "default"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
GANG_CONFIG = Path(__file__).resolve().parents[2] / "config" / "gang.yaml"


def gang_config() -> SchedulerConfig:
    """config/gang.yaml as users get it, with backoffs and client limits sized for a test."""
    doc = yaml.safe_load(GANG_CONFIG.read_text())
    doc.update({"podInitialBackoffSeconds": 0.1, "podMaxBackoffSeconds": 1,
                "clientConnection": {"qps": 2000, "burst": 4000}})
    return parse_config(doc, str(GANG_CONFIG))


def member(name: str, group: str, cpu: str = "1", **kw: Any) -> dict[str, Any]:
    return make_pod(name, cpu=cpu, memory="64Mi", labels={GROUP_LABEL: group, "app": group}, **kw)


class GangView:
    """What a gang test reads and asks, whichever server it runs on: pods' and groups' conditions, binds,
    what the scheduler holds, events.

    A subclass says where objects come from (:meth:`pod`, :meth:`pod_group`) and has ``client`` (the
    test's own API client), ``app`` (the scheduler, while it runs), ``ns`` and ``first_bind_placed``.
    """

    client: APIClient
    app: App | None
    first_bind_placed: dict[str, int]     # group -> members with a node when its first bind was seen
    ns: str                               # the namespace of the test's pods and groups
    # the label naming a member's gang (test_gangs_native.py's differs)
    group_label = GROUP_LABEL

    def gang_key(self, group: str) -> str:
        """The scheduler's gang index key of a group."""
        return f"{self.ns}/{group}"

    def pod(self, name: str) -> dict[str, Any] | None:
        raise NotImplementedError

    def pod_group(self, name: str) -> dict[str, Any] | None:
        raise NotImplementedError

    async def create_group(self, name: str, min_member: int, **spec: Any) -> None:
        body = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                "metadata": {"name": name, "namespace": self.ns}, "spec": {"minMember": min_member, **spec}}
        await self.client.create(f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{self.ns}/podgroups", body)

    def node_of(self, name: str) -> str:
        return ((self.pod(name) or {}).get("spec") or {}).get("nodeName") or ""

    def bound(self, *names: str) -> list[str]:
        return [n for n in names if self.node_of(n)]

    def message(self, name: str) -> str:
        c = scheduled_condition(self.pod(name))
        return c.get("message", "") if c.get("status") == "False" else ""

    def reason(self, name: str) -> tuple[str, str, str]:
        """The pod's PodScheduled condition: (status, reason, message)."""
        c = scheduled_condition(self.pod(name))
        return c.get("status", ""), c.get("reason", ""), c.get("message", "")

    def group_condition(self, name: str, type_: str = "PodGroupScheduled") -> dict[str, Any]:
        for c in ((self.pod_group(name) or {}).get("status") or {}).get("conditions") or ():
            if c.get("type") == type_:
                return c
        return {}

    def assumed(self) -> list[str]:
        """Pods holding room in the scheduler's cache that the API has not bound (waiting at Permit or binding).

        A pod the API has bound may still be "assumed" until the scheduler's informer brings the binding.
        """
        assert self.app is not None and self.app.scheduler is not None
        return [st.pod.name for st in self.app.scheduler.cache.pods.values()
                if st.assumed and not self.node_of(st.pod.name)]

    def note_bind(self, labels: dict[str, str]) -> None:
        """A member of the gang ``labels`` name was bound: note how many members had a node then (the first time)."""
        group = labels.get(self.group_label)
        if group and group not in self.first_bind_placed and self.app is not None:
            self.first_bind_placed[group] = len(self.app.scheduler.cache.gangs.placed_members(self.gang_key(group)))

    async def events(self, regarding: str, reason: str) -> list[str]:
        items = (await self.client.list(f"/apis/events.k8s.io/v1/namespaces/{self.ns}/events"))["items"]
        return [e.get("note", "") for e in items
                if (e.get("regarding") or {}).get("name") == regarding and e.get("reason") == reason]


@dataclass
class Sim(GangView):
    """The simulated cluster, a client for the test's own reads and writes, and what the binder did."""

    cluster: SimCluster
    client: APIClient
    kubeconfig: Path
    ns: str = NS
    app: App | None = None
    binds: list[tuple[float, str, str]] = field(default_factory=list)     # (when, pod, node) of every bind
    first_bind_placed: dict[str, int] = field(default_factory=dict)       # group -> members with a node then
    held_back: set[str] = field(default_factory=set)                      # pods whose binds the API refuses

    @property
    def store(self) -> Any:
        return self.cluster.store

    def create_pod(self, body: dict[str, Any]) -> None:
        self.store.create(PODS, self.ns, body)

    def pod(self, name: str) -> dict[str, Any] | None:
        return self.store.get_obj(PODS, self.ns, name)

    def pod_group(self, name: str) -> dict[str, Any] | None:
        return self.store.get_obj(PODGROUPS, self.ns, name)

    def watch_binds(self) -> None:
        """Log every bind, note how many members of the pod's gang had a node at its gang's first bind,
        and refuse the binds of ``held_back`` pods (as an API server refusing them would)."""

        def refuse_held_back(verb: str, resource: str, ns: str, name: str) -> None:
            if resource == "pods/binding" and name in self.held_back:
                raise sim_errors.forbidden("pods", name, "held back by the test")

        def on_write(verb: str, resource: str, ns: str, name: str, result: Any) -> None:
            if resource != "pods/binding" or isinstance(result, sim_errors.APIError):
                return
            # observers run inside the write, on the event loop: the scheduler's cache is as it was
            # when the bind came in
            self.note_bind(result.labels)
            self.binds.append((time.monotonic(), name, result.fields["spec.nodeName"]))

        self.store.admit(refuse_held_back)
        self.store.observe(on_write)


@contextlib.asynccontextmanager
async def simulated(tmp_path: Path, nodes: list[dict[str, Any]]) -> AsyncIterator[Sim]:
    kc = tmp_path / "kubeconfig"
    async with SimCluster(nodes=0, agent=AgentConfig(ready_delay=0.05, tick=0.01), kubeconfig=kc) as cluster:
        for n in nodes:
            cluster.store.create(NODES, "", n)
        async with await from_kubeconfig(str(kc), qps=0, clock=Clock()) as client:
            sim = Sim(cluster, client, kc)
            sim.watch_binds()
            yield sim


@contextlib.asynccontextmanager
async def scheduling(sim: Sim) -> AsyncIterator[App]:
    async with App(gang_config(), kubeconfig=str(sim.kubeconfig)) as app:
        sim.app = app
        yield app
        assert app._loop_task is not None and not app._loop_task.done(), "the scheduling loop ended"
    sim.app = None


@contextlib.asynccontextmanager
async def running(tmp_path: Path, nodes: list[dict[str, Any]]) -> AsyncIterator[Sim]:
    async with simulated(tmp_path, nodes) as sim, scheduling(sim):
        yield sim


def names(group: str, n: int) -> list[str]:
    return [f"{group}-{i}" for i in range(n)]


# ---------------------------------------------------------------------------- tests


async def test_gang_is_not_bound_until_min_member_have_a_node(tmp_path):
    async with running(tmp_path, [make_node(f"node-{i}", cpu="2") for i in range(4)]) as sim:
        await sim.create_group("train", 8)
        gang = names("train", 8)
        for n in gang[:7]:
            sim.create_pod(member(n, "train"))
            await asyncio.sleep(0.03)   # one at a time, as a Job controller creates them
        await stays(lambda: not sim.binds and not sim.assumed(), 0.3, "a member was placed before the 8th existed")
        sim.create_pod(member(gang[7], "train"))
        await eventually(lambda: len(sim.bound(*gang)) == 8, 10, "the whole gang to be bound")
        assert sim.first_bind_placed == {"train": 8}   # the first bind came after all 8 had a node
        assert sorted(n for _, n, _ in sim.binds) == sorted(gang)


async def test_gang_without_room_holds_nothing_says_why_and_binds_when_a_node_joins(tmp_path):
    async with running(tmp_path, [make_node(f"node-{i}", cpu="2") for i in range(3)]) as sim:
        await sim.create_group("mpi", 8)
        gang = names("mpi", 8)
        for n in gang:
            sim.create_pod(member(n, "mpi"))
        await eventually(lambda: all(sim.message(n) for n in gang), 10, "every member to say why it waits")
        for n in gang:
            msg = sim.message(n)
            assert "PodGroup default/mpi" in msg and "Insufficient cpu" in msg, (n, msg)
        # room for 6 of 8: nothing bound, and between cycles no member holds room
        await stays(lambda: not sim.bound(*gang) and not sim.assumed(), 1.0, "a partial gang held or bound")

        sim.store.create(NODES, "", make_node("node-3", cpu="2"))
        await eventually(lambda: len(sim.bound(*gang)) == 8, 10, "the gang to be bound once a node joins")
        assert sim.first_bind_placed == {"mpi": 8}


async def test_two_gangs_competing_for_room_end_one_whole_and_one_waiting(tmp_path):
    async with running(tmp_path, [make_node(f"node-{i}", cpu="2") for i in range(4)]) as sim:
        await sim.create_group("a", 6)
        await sim.create_group("b", 6)
        a, b = names("a", 6), names("b", 6)
        for x, y in zip(a, b):   # interleaved, so both gangs fill up together
            sim.create_pod(member(x, "a"))
            sim.create_pod(member(y, "b"))

        def one_whole() -> bool:
            return sorted((len(sim.bound(*a)), len(sim.bound(*b)))) == [0, 6]

        await eventually(one_whole, 10, "one gang bound whole")
        await stays(lambda: one_whole() and not sim.assumed(), 1.0, "the other gang to stay wholly pending")
        winner, loser = (a, b) if sim.bound(*a) else (b, a)
        assert all("PodGroup default/" in sim.message(n) for n in loser), [sim.message(n) for n in loser]

        for n in winner:
            sim.store.delete(PODS, NS, n, grace=0)
        await eventually(lambda: len(sim.bound(*loser)) == 6, 10, "the waiting gang to bind once room is freed")


@pytest.fixture
def quick_reports(monkeypatch: pytest.MonkeyPatch) -> float:
    """Holds at PreEnqueue are shown after 0.3 s instead of 5 s (on pods and PodGroups alike)."""
    monkeypatch.setattr(preenqueue, "REPORT_DELAY", 0.3)
    monkeypatch.setattr(podgroups, "REPORT_DELAY", 0.3)
    return 0.3


async def test_pods_naming_a_missing_pod_group_wait_with_an_event_naming_it(tmp_path, quick_reports):
    async with running(tmp_path, [make_node("node-0", cpu="4")]) as sim:
        ghosts = names("ghost", 2)
        for n in ghosts:
            sim.create_pod(member(n, "ghost"))
        sim.create_pod(make_pod("control"))
        await eventually(lambda: sim.node_of("control"), 10, "the control pod to be bound")
        for n in ghosts:
            notes = await eventually(lambda n=n: sim.events(n, "NotReadyForScheduling"), 10, f"an event on {n}")
            assert notes == ["PodGroup default/ghost not found"]
            assert sim.reason(n) == ("False", "NotReadyForScheduling", "PodGroup default/ghost not found")
        await stays(lambda: not sim.bound(*ghosts), 0.5, "a pod of a missing PodGroup was bound")

        await sim.create_group("ghost", 2)
        await eventually(lambda: len(sim.bound(*ghosts)) == 2, 10, "the pods to bind once their PodGroup exists")


async def test_members_held_for_want_of_siblings_say_so_with_the_numbers_until_the_gang_schedules(
        tmp_path, quick_reports):
    async with running(tmp_path, [make_node(f"node-{i}", cpu="2") for i in range(2)]) as sim:
        await sim.create_group("big", 4)
        gang = names("big", 4)
        for n in gang[:2]:
            sim.create_pod(member(n, "big"))

        def says(count: int) -> str:
            return f"PodGroup default/big: {count} of 4 members exist; waiting for more"

        def all_say(count: int, among: list[str]) -> bool:
            return (all(sim.reason(n) == ("False", "NotReadyForScheduling", says(count)) for n in among)
                    and sim.group_condition("big").get("message") == says(count))

        await eventually(lambda: all_say(2, gang[:2]), 10, "the held members and the PodGroup to say 2 of 4")
        for n in gang[:2]:
            assert await sim.events(n, "NotReadyForScheduling") == [says(2)]
        cond = sim.group_condition("big")
        assert (cond["status"], cond["reason"]) == ("False", "NotReadyForScheduling")

        sim.create_pod(member(gang[2], "big"))   # a third member: every held member's numbers change
        await eventually(lambda: all_say(3, gang[:3]), 10, "the held members and the PodGroup to say 3 of 4")
        await stays(lambda: not sim.bound(*gang), 2 * quick_reports, "a member bound before the gang was whole")
        writes = {n: (await sim.events(n, "NotReadyForScheduling")) for n in gang[:3]}
        assert writes == {gang[0]: [says(2), says(3)], gang[1]: [says(2), says(3)], gang[2]: [says(3)]}, \
            "once per change of the numbers, not once per re-evaluation"

        sim.create_pod(member(gang[3], "big"))   # the gang is whole: it schedules
        await eventually(lambda: len(sim.bound(*gang)) == 4, 10, "the whole gang to be bound")
        await eventually(lambda: not sim.group_condition("big"), 10, "the PodGroup's condition to go")
        for n in gang:
            assert sim.reason(n)[:2] == ("True", ""), (n, sim.reason(n))


async def hold_three_at_permit(sim: Sim, group: str, timeout: int) -> list[str]:
    """A gang of four, one member left to a scheduler that is not running: three get a node and wait."""
    await sim.create_group(group, 4, scheduleTimeoutSeconds=timeout)
    sim.create_pod(member(f"{group}-launcher", group, scheduler="default-scheduler"))
    gang = names(group, 3)
    for n in gang:
        sim.create_pod(member(n, group))
    await eventually(lambda: len(sim.assumed()) == 3, 10, "three members to wait at Permit")
    return gang


async def test_a_hold_that_times_out_gives_the_room_to_ordinary_pods(tmp_path):
    async with running(tmp_path, [make_node(f"node-{i}", cpu="2") for i in range(2)]) as sim:
        gang = await hold_three_at_permit(sim, "slow", 1)
        held_since = time.monotonic()

        web = names("web", 3)
        for n in web:
            sim.create_pod(make_pod(n, cpu="1"))
        await eventually(lambda: len(sim.bound(*web)) == 1 and sum(1 for n in web if sim.message(n)) == 2, 10,
                         "one ordinary pod to take the free cpu, two to wait")

        await eventually(lambda: len(sim.bound(*web)) == 3, 10, "the ordinary pods to get the room after the hold")
        assert time.monotonic() - held_since < 5, "the room came back long after the 1s hold"
        assert not sim.bound(*gang) and not sim.assumed()
        for n in gang:
            assert "timeout after waiting 1s at plugin Coscheduling" in sim.message(n), (n, sim.message(n))


async def test_deleting_the_pod_group_of_a_held_gang_gives_its_room_back_at_once(tmp_path):
    async with running(tmp_path, [make_node(f"node-{i}", cpu="2") for i in range(2)]) as sim:
        gang = await hold_three_at_permit(sim, "stuck", 900)   # 3 of the 4 cpus, for up to 15 minutes
        web = names("web", 2)
        for n in web:
            sim.create_pod(make_pod(n, cpu="1"))
        await eventually(lambda: len(sim.bound(*web)) == 1, 10, "one ordinary pod to take the free cpu")

        await sim.client.delete(f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NS}/podgroups/stuck")
        await eventually(lambda: len(sim.bound(*web)) == 2, 5, "the held room to go to the waiting pod")
        assert not sim.bound(*gang) and not sim.assumed()
        for n in gang:
            # rejected with the reason, then held at PreEnqueue for the missing group
            assert "PodGroup default/stuck was deleted" in await sim.events(n, "FailedScheduling"), n


async def test_a_gang_half_bound_when_the_scheduler_stops_completes_under_the_next(tmp_path):
    async with simulated(tmp_path, [make_node(f"node-{i}", cpu="2") for i in range(4)]) as sim:
        await sim.create_group("job", 8)
        gang = names("job", 8)
        sim.held_back = set(gang[5:])    # the API refuses three binds: the first scheduler gets 5 of 8 bound
        for n in gang:
            sim.create_pod(member(n, "job"))
        async with scheduling(sim):
            await eventually(lambda: len(sim.bound(*gang)) == 5, 10, "five members to be bound")
        placed = {n: sim.node_of(n) for n in gang[:5]}

        sim.held_back.clear()
        async with scheduling(sim):      # a new process: it learns the five bound members from the API
            await eventually(lambda: len(sim.bound(*gang)) == 8, 10, "the rest of the gang to be bound")
        assert {n: sim.node_of(n) for n in gang[:5]} == placed
        assert sorted(n for _, n, _ in sim.binds) == sorted(gang)
