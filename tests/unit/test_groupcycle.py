"""scheduler/groupcycle.py and the gang binds of binding.py: what a gang's group cycle decides, in process.

A real scheduler with tandem's built-in default profile (GangScheduling included) runs on a fake clock
against a fake API (tests/support/inprocess.py). Each case is one of issue 26's findings, the user's view of
it: a topology gang whose members differ goes to the domain where all of them fit; a StatefulSet-shaped
gang with local volumes goes where each member has a volume; a member whose claim is missing says so itself,
and its claim's creation brings the gang back within one backoff; a gang binds only once every member's
PreBind succeeded; a domain that failed is not tried again until a cluster event; and the gang state of a
long run of short gangs goes away with them.
"""

from __future__ import annotations

import pytest

from scheduler import groupcycle
from tests.support.inprocess import NS, ZONE, InProcess

WAITING = ("pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, one or more plugins "
           "asked to wait and no plugin rejected pod")


def statefulset(env: InProcess, name: str, replicas: int) -> list[str]:
    """A native gang of ``replicas`` in one zone, each member with a local-volume claim of its own
    (``data-<pod>``, as volumeClaimTemplates name them)."""
    env.native_group(name, replicas, topology=ZONE)
    pods = [f"{name}-{i}" for i in range(replicas)]
    for p in pods:
        env.claim(f"data-{p}")
        env.pod(p, name, claims=(f"data-{p}",))
    return pods


@pytest.fixture
async def env():
    e = InProcess()
    e.start()
    yield e
    await e.stop()


# ---------------------------------------------------------------------------- topology: the domain that fits


async def test_a_launcher_and_workers_alike_in_requests_go_to_the_zone_where_each_has_its_nodes(env) -> None:
    # z1 has room for three launchers and no worker node; z2 has one launcher node and a worker node for two
    env.node("z1-launch", cpu="4", zone="z1", labels={"role": "launcher"})
    env.node("z2-launch", cpu="1", zone="z2", labels={"role": "launcher"})
    env.node("z2-work", cpu="2", zone="z2", labels={"role": "worker"})
    env.native_group("mpi", 3, topology=ZONE)
    env.pod("launcher", "mpi", selector={"role": "launcher"})
    env.pod("worker-0", "mpi", selector={"role": "worker"})
    env.pod("worker-1", "mpi", selector={"role": "worker"})
    await env.settle()
    assert env.bound("launcher", "worker-0", "worker-1") == {
        "launcher": "z2-launch", "worker-0": "z2-work", "worker-1": "z2-work"}


async def test_a_statefulset_gang_with_local_volumes_goes_to_the_zone_with_a_volume_for_each(env) -> None:
    # z1 is the tighter zone (its node has no room to spare), but it has one local volume; z2 has two
    env.local_class()
    env.node("z1-a", cpu="2", zone="z1")
    env.node("z2-a", cpu="8", zone="z2")
    env.node("z2-b", cpu="8", zone="z2")
    env.local_volume("pv-z1", "z1-a")
    env.local_volume("pv-z2-a", "z2-a")
    env.local_volume("pv-z2-b", "z2-b")
    statefulset(env, "db", 2)
    await env.settle()
    placed = env.bound("db-0", "db-1")
    assert sorted(placed.values()) == ["z2-a", "z2-b"], placed


async def test_a_gang_no_domain_fits_places_nothing_and_says_so_with_the_numbers(env) -> None:
    for z in ("z1", "z2", "z3"):
        env.node(f"{z}-a", cpu="2", zone=z)
    env.native_group("wide", 3, topology=ZONE)
    for i in range(3):
        env.pod(f"wide-{i}", "wide")
    await env.settle()
    assert not env.api.binds and not env.s.cache.pods
    want = (f'pod group is unschedulable: no single domain of topology key "{ZONE}" fits the pod group: it needs 3 '
            f"member(s) in one domain, and the most any of its 3 domain(s) can take is 2")
    assert {env.message(f"wide-{i}") for i in range(3)} == {want}
    env.node("z3-b", cpu="2", zone="z3")   # the cluster changes: z3 can take the gang now
    await env.advance(1)
    assert set(env.bound("wide-0", "wide-1", "wide-2").values()) <= {"z3-a", "z3-b"}
    assert len(env.api.binds) == 3


# ---------------------------------------------------------------------------- a member its own PreFilter rejects


async def test_a_member_whose_claim_is_missing_says_so_and_its_gang_binds_within_one_backoff_of_it(env) -> None:
    env.local_class()
    for z in ("z1", "z2"):
        env.node(f"{z}-a", cpu="4", zone=z)
    env.local_volume("pv-z2", "z2-a")
    env.native_group("job", 2, topology=ZONE)
    env.pod("reader", "job", claims=("data",))
    env.pod("helper", "job")
    await env.settle()
    assert env.message("reader") == '0/2 nodes are available: persistentvolumeclaim "data" not found.'
    # VolumeRestrictions' PreFilter meets the missing claim first, as upstream's: its hint for the claim's
    # creation brings the member back
    assert env.rejectors("reader") == {"VolumeRestrictions"}, "its own plugin, not the gang's"
    assert env.message("helper") == WAITING
    assert env.where("reader") == env.where("helper") == "unschedulable"
    assert not env.api.binds

    env.claim("data")   # the hint for the claim's creation requeues the member, and its gang with it
    await env.advance(1)   # one backoff (podInitialBackoffSeconds)
    assert env.bound("reader", "helper") == {"reader": "z2-a", "helper": "z2-a"}


def device_claim(env: InProcess, name: str) -> None:
    """A ResourceClaim allocated no device, on any node: it only gates its pod until it exists."""
    env.s.on_resource_claim_add({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                 "metadata": {"name": name, "namespace": NS, "uid": f"claim-{name}",
                                              "resourceVersion": env.api.rv()},
                                 "spec": {"devices": {"requests": []}},
                                 "status": {"allocation": {"devices": {"results": []}}}})


async def test_a_member_that_fits_and_is_taken_back_does_not_reject_its_waiting_sibling_in_its_own_words(env) -> None:
    # the first member is tried alone and waits at Permit; the next two, whose ResourceClaims the resourceclaim
    # controller creates later, are tried together: one fits, one fits nowhere. The one that fit is taken back
    # (a try, unreported), and the waiting member is rejected with the gang's words, as when all three are tried
    # together (CI found "rejection in Unreserve: Pod b ... gave up its node" on it: the take-back ran outside
    # the try, and its Unreserve rejected the waiting member first)
    env.node("n0", cpu="2")
    env.native_group("g", 3)
    for name, cpu in (("b", "1"), ("huge", "64")):
        env.pod(name, "g", cpu=cpu, resource_claims=(f"claim-{name}",))
    env.pod("a", "g")
    await env.settle()
    assert env.message("a") == "" and env.where("a") == "inflight", "waiting at Permit"
    assert env.where("b") == env.where("huge") == "gated", "their claims do not exist yet"
    device_claim(env, "claim-b")
    device_claim(env, "claim-huge")
    await env.settle()
    assert env.message("a") == env.message("b") == WAITING, (env.message("a"), env.message("b"))
    assert env.message("huge").startswith("0/1 nodes are available: 1 Insufficient cpu."), env.message("huge")
    assert not env.api.binds and not env.s.cache.pods


# ---------------------------------------------------------------------------- all or nothing through PreBind


async def test_a_gang_binds_only_once_every_member_passed_prebind(env) -> None:
    env.local_class()
    env.node("n0", cpu="4")
    env.local_volume("pv-0", "n0")
    env.native_group("pair", 2)
    env.claim("data")
    env.api.refuse_volume_writes.add("pv-0")   # VolumeBinding's PreBind fails for the member with the claim
    env.pod("with-volume", "pair", claims=("data",))
    env.pod("plain", "pair")
    await env.settle()
    assert env.api.binds == [], "the member without a volume waited for its sibling's PreBind, and was not bound"
    assert env.condition("with-volume")["reason"] == "SchedulerError"
    assert 'running PreBind plugin "VolumeBinding"' in env.message("with-volume")
    assert env.condition("plain")["reason"] == "SchedulerError"
    assert "gets rejected due to Pod with-volume failed at PreBind" in env.message("plain")
    assert not env.s.cache.pods, "both gave their node back"
    assert env.where("with-volume") == env.where("plain") == "backoff", "requeued together"
    assert not env.s._gang_binds and not env.s._open_gang_binds

    env.api.refuse_volume_writes.clear()
    await env.advance(1)
    assert env.bound("with-volume", "plain") == {"with-volume": "n0", "plain": "n0"}
    assert not env.s._gang_binds and not env.s._open_gang_binds


async def test_the_members_of_a_topology_gang_bind_together_too(env) -> None:
    env.local_class()
    env.node("z1-a", cpu="4", zone="z1")
    env.local_volume("pv-z1", "z1-a")
    env.native_group("pair", 2, topology=ZONE)
    env.claim("data")
    env.api.refuse_volume_writes.add("pv-z1")
    env.pod("with-volume", "pair", claims=("data",))
    env.pod("plain", "pair")
    await env.settle()
    assert env.api.binds == []
    assert env.where("with-volume") == env.where("plain") == "backoff"


# ---------------------------------------------------------------------------- the memory of failed domains


async def test_a_domain_that_failed_is_not_tried_again_until_a_cluster_event(env, monkeypatch) -> None:
    tried: list[str] = []
    real = groupcycle.GroupCycle._try_domain

    def spy(self, fw, key, tries, unplaceable):   # type: ignore[no-untyped-def]
        nodes = self.cache.nodes
        tried.append(sorted({nodes.node(r).labels[ZONE] for r in fw.placement.nonzero()[0]})[0])
        return real(self, fw, key, tries, unplaceable)

    monkeypatch.setattr(groupcycle.GroupCycle, "_try_domain", spy)
    env.local_class()
    # both zones may take the gang by their cpu, but only one volume each: neither fits two volume members
    for z in ("z1", "z2"):
        env.node(f"{z}-a", cpu="8", zone=z)
        env.local_volume(f"pv-{z}", f"{z}-a")
    statefulset(env, "db", 2)
    await env.settle()
    assert sorted(tried) == ["z1", "z2"] and not env.api.binds
    key = "scheduling.k8s.io/default/db"
    assert set(env.s.cache.gangs.failed_domains(key)) == {"z1", "z2"}

    tried.clear()
    env.s.queue.activate([env.uid("db-0")])   # tried again with nothing changed: no domain to try
    await env.settle()
    assert tried == [] and not env.api.binds

    env.local_volume("pv-z2-more", "z2-a")   # a new volume: VolumeBinding's hint requeues the gang
    assert not env.s.cache.gangs.failed_domains(key), "the event made the tried domains worth a try"
    await env.advance(2)
    assert set(env.bound("db-0", "db-1").values()) == {"z2-a"}
    assert tried and tried[-1] == "z2"


async def test_an_attempt_tries_a_bounded_number_of_domains_and_the_next_goes_on(env, monkeypatch) -> None:
    monkeypatch.setattr(groupcycle, "MAX_DOMAIN_TRIES", 2)
    env.local_class()
    # five racks may take the gang by cpu; only the last has a volume for each member
    for i in range(5):
        env.node(f"r{i}-a", cpu="8", zone=f"r{i}")
        env.local_volume(f"pv-r{i}", f"r{i}-a")
    env.local_volume("pv-r4-more", "r4-a")
    statefulset(env, "db", 2)
    await env.settle()
    assert not env.api.binds
    assert env.where("db-0") == env.where("db-1") == "backoff", "domains are left: tried again without an event"
    for _ in range(3):
        await env.advance(10)
    assert set(env.bound("db-0", "db-1").values()) == {"r4-a"}


# ---------------------------------------------------------------------------- state goes with the gangs


def gang_state(env: InProcess) -> dict[str, int]:
    """The sizes of everything the scheduler and its gang plugin keep per gang or per pod."""
    s = env.s
    gang = s.frameworks[env.profile].gang
    sizes = {name: len(getattr(gang, name)) for name in
             ("_backoff_until", "_backoff_timers", "_permitted", "_misfits", "_gated", "_why")}
    g = s.cache.gangs
    sizes.update(groups=len(g.groups), members=len(g.members), placed=len(g.placed), failed=len(g._failed_domains),
                 gang_binds=len(s._gang_binds), open_gang_binds=len(s._open_gang_binds), pods=len(s.pods),
                 queue=len(s.queue.infos), conditions=len(s._conditions), cache=len(s.cache.pods))
    return sizes


async def test_after_many_short_gangs_the_gang_state_is_back_to_its_size(env) -> None:
    for z in ("z1", "z2"):
        env.node(f"{z}-a", cpu="4", zone=z)
    before = gang_state(env)
    for round_ in range(30):
        name = f"g{round_}"
        topology = ZONE if round_ % 2 else ""
        env.native_group(name, 2, topology=topology)
        members = [f"{name}-{i}" for i in range(3 if round_ % 3 == 0 else 2)]
        for m in members[:1]:
            env.pod(m, name)   # alone for a while: held for want of siblings
        await env.settle()
        for m in members[1:]:
            env.pod(m, name, cpu="3" if round_ % 5 == 0 else "1")   # some rounds cannot fit: they fail first
        await env.advance(1)
        for m in members:
            env.delete_pod(m)
        env.delete_native_group(name)
        await env.advance(11)
    assert gang_state(env) == before
