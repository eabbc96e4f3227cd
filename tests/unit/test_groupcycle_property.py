"""Property: a topology-constrained gang binds whenever some domain fits it, and only then, whole and in one domain.

Hypothesis draws a small cluster (1-3 zones of 1-3 nodes; each node a role label, a cpu size and 0-2 local
volumes) and one gang constrained to one zone, whose members come in classes: each class has its own
nodeSelector (a role) or the gang has one class and no selector, its own cpu request, and a
WaitForFirstConsumer local-volume claim per member or none. The scheduler (tandem's built-in default
profile, in process: tests/support/inprocess.py) runs until it is idle; then the test's own brute force
over the zones says whether some zone fits the gang, and the property is checked against what was bound:

* some zone fits: every member is bound, all in one zone, each on a node its selector admits, no node
  over its cpu, each claim's volume on its pod's node;
* no zone fits: nothing is bound, and nothing holds room.

The classes keep the brute force exact and the scheduler's within-domain placement exact too: members of a
class are alike (one cpu request, a claim each or none) and classes never share a node (a node has one role),
so placing a class's members one by one wherever they fit reaches the most that class can have. Which
domain is the question here; how to pack unlike members into one is bin packing, which no scheduler
promises (tests/integration/test_gang_property.py says the same for gangs without a topology).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.inprocess import NS, ZONE, InProcess

ROLES = ("a", "b")


@dataclasses.dataclass(frozen=True)
class Node:
    name: str
    zone: str
    role: str
    cpu: int          # whole cpus
    volumes: int      # local volumes on it


@dataclasses.dataclass(frozen=True)
class Class:
    role: str | None  # the members' nodeSelector role (None: no selector)
    cpu: int          # each member's cpu request, in millicores
    count: int
    claims: bool      # each member has a local-volume claim


@st.composite
def clusters(draw: Any) -> list[Node]:
    out = []
    for z in range(draw(st.integers(1, 3))):
        for i in range(draw(st.integers(1, 3))):
            out.append(Node(f"z{z}-n{i}", f"z{z}", draw(st.sampled_from(ROLES)), draw(st.integers(1, 4)),
                            draw(st.integers(0, 2))))
    return out


@st.composite
def gangs(draw: Any) -> list[Class]:
    cpu = st.sampled_from((500, 1000, 2000))
    if draw(st.booleans()):
        return [Class(None, draw(cpu), draw(st.integers(1, 4)), draw(st.booleans()))]
    roles = draw(st.lists(st.sampled_from(ROLES), min_size=1, max_size=2, unique=True))
    return [Class(r, draw(cpu), draw(st.integers(1, 3)), draw(st.booleans())) for r in roles]


def zone_fits(nodes: list[Node], classes: list[Class], zone: str) -> bool:
    """The brute force: each class on its own nodes of ``zone``, as many as their room and volumes take."""
    for c in classes:
        room = 0
        for n in nodes:
            if n.zone != zone or (c.role is not None and n.role != c.role):
                continue
            slots = n.cpu * 1000 // c.cpu
            room += min(slots, n.volumes) if c.claims else slots
        if room < c.count:
            return False
    return True


async def scenario(nodes: list[Node], classes: list[Class]) -> None:
    env = InProcess()
    env.local_class()
    for n in nodes:
        env.node(n.name, cpu=str(n.cpu), zone=n.zone, labels={"role": n.role})
        for v in range(n.volumes):
            env.local_volume(f"pv-{n.name}-{v}", n.name)
    members: dict[str, Class] = {}
    for ci, c in enumerate(classes):
        for i in range(c.count):
            members[f"m{ci}-{i}"] = c
    env.native_group("gang", len(members), topology=ZONE)
    for name, c in members.items():
        if c.claims:
            env.claim(f"data-{name}")
        env.pod(name, "gang", cpu=f"{c.cpu}m", selector={"role": c.role} if c.role else None,
                claims=(f"data-{name}",) if c.claims else ())
    env.start()
    try:
        for _ in range(3):
            await env.settle(200)
            await env.advance(0.5)
        placed = env.bound(*members)
        held = [st.pod.name for st in env.s.cache.pods.values() if st.assumed and st.pod.name not in placed]
    finally:
        await env.stop()

    by_name = {n.name: n for n in nodes}
    zones = sorted({n.zone for n in nodes})
    fits = [z for z in zones if zone_fits(nodes, classes, z)]
    context = (f"\nnodes: {nodes}\nclasses: {classes}\nzones that fit: {fits}\nplaced: {placed}"
               f"\nmessages: { {m: env.message(m) for m in members if m not in placed} }")
    if not fits:
        assert not placed, f"bound though no zone fits the gang{context}"
        assert not held, f"holding room for a gang that cannot be placed: {held}{context}"
        return
    assert len(placed) == len(members), f"a zone fits the gang, but it was not bound whole{context}"
    assert len({by_name[n].zone for n in placed.values()}) == 1, f"the gang spans zones{context}"
    used: dict[str, int] = {}
    for name, node in placed.items():
        c = members[name]
        assert c.role is None or by_name[node].role == c.role, f"{name} on a node its selector refuses{context}"
        used[node] = used.get(node, 0) + c.cpu
        if c.claims:
            pv = next(p for p, o in env.api.objects.items() if "/persistentvolumes/" in p
                      and (o["spec"].get("claimRef") or {}).get("name") == f"data-{name}")
            assert pv.rsplit("/", 1)[1].startswith(f"pv-{node}-"), f"{name}'s volume {pv} is not on {node}{context}"
    for node, cpu in used.items():
        assert cpu <= by_name[node].cpu * 1000, f"{node} is over its cpu{context}"
    assert f"/api/v1/namespaces/{NS}/pods/m0-0" in env.api.objects


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=clusters(), classes=gangs())
def test_a_topology_gang_binds_whole_in_one_zone_exactly_when_some_zone_fits_it(nodes, classes) -> None:
    asyncio.run(scenario(nodes, classes))
