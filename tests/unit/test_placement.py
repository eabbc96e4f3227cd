"""scheduler/framework/placement.py: the one domain a topology-constrained gang goes into."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.framework.placement import choose_domain, copies_per_node, topology_message
from scheduler.model import Pod, parse_node
from scheduler.state.cache import Cache

ZONE = "topology.kubernetes.io/zone"


def cluster(*nodes: tuple[str, str, str]) -> Cache:
    """Nodes as (name, zone or "" for none, cpu)."""
    cache = Cache()
    for name, zone, cpu in nodes:
        labels = {ZONE: zone} if zone else {}
        cache.add_node(parse_node({"metadata": {"name": name, "labels": labels},
                                   "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "10"}}}))
    return cache


def all_rows(cache: Cache) -> np.ndarray:
    return cache.nodes.rows()


def test_copies_per_node_is_the_tightest_resource_and_counts_pods() -> None:
    cache = cluster(("a", "z1", "4"), ("b", "z1", "1500m"))
    rows = all_rows(cache)
    assert copies_per_node(cache.nodes, rows, {"cpu": 1000}).tolist() == [4, 1]
    assert copies_per_node(cache.nodes, rows, {"cpu": 100}).tolist() == [10, 10], "at most 10 pods a node"
    assert copies_per_node(cache.nodes, rows, {"example.com/gpu": 1}).tolist() == [0, 0], "no node has it"


@pytest.mark.parametrize("nodes, need, count, want_domain, want_most", [
    pytest.param([("a", "z1", "2"), ("b", "z2", "4"), ("c", "z2", "4")], 6, 6, "z2", 6,
                 id="the domain that takes the whole gang"),
    pytest.param([("a", "z1", "4"), ("b", "z2", "2"), ("c", "z2", "2")], 4, 4, "z1", 4,
                 id="both fit: the tightest wins (z1 has no room to spare)"),
    pytest.param([("a", "z1", "4"), ("b", "z2", "4")], 4, 4, "z1", 4,
                 id="equal domains: the first by name"),
    pytest.param([("a", "z1", "3"), ("b", "z2", "3"), ("c", "", "8")], 4, 4, "", 3,
                 id="room for the gang only across zones, or on a node without the key: none fits"),
    pytest.param([("a", "z1", "3"), ("b", "z2", "6")], 4, 6, "z2", 6,
                 id="a quorum gang: the domain that takes more of its members scores higher"),
])
def test_choose_domain(nodes, need, count, want_domain, want_most) -> None:
    cache = cluster(*nodes)
    rows = all_rows(cache)
    copies = copies_per_node(cache.nodes, rows, {"cpu": 1000})
    choice = choose_domain(cache.nodes, ZONE, [(rows, copies, count)], need)
    assert (choice.domain, choice.most, choice.fits) == (want_domain, want_most, bool(want_domain))
    assert choice.domains == len({z for _, z, _ in nodes if z})
    if choice.fits:
        assert choice.mask is not None
        assert sorted(cache.nodes.names_of(np.flatnonzero(choice.mask))) == \
            sorted(n for n, z, _ in nodes if z == want_domain)


def test_members_already_placed_fix_the_domain() -> None:
    cache = cluster(("a", "z1", "2"), ("b", "z2", "8"))
    rows = all_rows(cache)
    copies = copies_per_node(cache.nodes, rows, {"cpu": 1000})
    assert choose_domain(cache.nodes, ZONE, [(rows, copies, 2)], 2, required="z1").domain == "z1"
    none = choose_domain(cache.nodes, ZONE, [(rows, copies, 4)], 4, required="z1")
    assert not none.fits and none.most == 2, "z2 has room, but the gang is in z1"
    assert not choose_domain(cache.nodes, ZONE, [(rows, copies, 1)], 1, required="").fits, \
        "members in two domains already: none fits"


def test_shapes_add_up_per_domain_each_capped_at_its_members() -> None:
    cache = cluster(("a", "z1", "4"), ("b", "z2", "4"))
    rows = all_rows(cache)
    small = (rows, copies_per_node(cache.nodes, rows, {"cpu": 1000}), 2)
    big = (rows[:1], copies_per_node(cache.nodes, rows[:1], {"cpu": 2000}), 1)   # big fits only on "a"
    choice = choose_domain(cache.nodes, ZONE, [small, big], 3)
    assert choice.domain == "z1" and choice.most == 3


def test_a_key_no_node_has_fits_nowhere_and_the_message_has_the_numbers() -> None:
    cache = cluster(("a", "z1", "4"))
    choice = choose_domain(cache.nodes, "rack", [], 2)
    assert not choice.fits and choice.domains == 0
    cache = cluster(("a", "z1", "2"), ("b", "z2", "2"), ("c", "z3", "2"))
    rows = all_rows(cache)
    choice = choose_domain(cache.nodes, ZONE, [(rows, copies_per_node(cache.nodes, rows, {"cpu": 1000}), 4)], 4)
    assert topology_message(choice) == (f'no single domain of topology key "{ZONE}" fits the pod group: it needs 4 '
                                        f"member(s) in one domain, and the most any of its 3 domain(s) can take is 2")


def test_a_pod_is_a_pod_for_copies() -> None:
    cache = cluster(("a", "z1", "4"))
    cache.add_pod(Pod(uid="x", namespace="ns", name="x", node_name="a", requests={"cpu": 3000}))
    assert copies_per_node(cache.nodes, all_rows(cache), {"cpu": 1000}).tolist() == [1], "what bound pods hold counts"
