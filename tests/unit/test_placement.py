"""scheduler/framework/placement.py: the domains a topology-constrained gang may go into, best first."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.framework.placement import copies_per_node, rank_domains, topology_message
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


@pytest.mark.parametrize("nodes, need, count, want, want_most", [
    pytest.param([("a", "z1", "2"), ("b", "z2", "4"), ("c", "z2", "4")], 6, 6, ["z2"], 2,
                 id="the domain that can take the whole gang is the only candidate"),
    pytest.param([("a", "z1", "4"), ("b", "z2", "2"), ("c", "z2", "2")], 4, 4, ["z1", "z2"], 0,
                 id="both may: the tightest first (z1 has no room to spare)"),
    pytest.param([("a", "z1", "4"), ("b", "z2", "4")], 4, 4, ["z1", "z2"], 0,
                 id="equal domains: by name"),
    pytest.param([("a", "z1", "3"), ("b", "z2", "3"), ("c", "", "8")], 4, 4, [], 3,
                 id="room for the gang only across zones, or on a node without the key: no candidate"),
    pytest.param([("a", "z1", "5"), ("b", "z2", "6")], 4, 6, ["z2", "z1"], 0,
                 id="a quorum gang: the domain that may take more of its members first"),
])
def test_rank_domains(nodes, need, count, want, want_most) -> None:
    cache = cluster(*nodes)
    rows = all_rows(cache)
    copies = copies_per_node(cache.nodes, rows, {"cpu": 1000})
    ranking = rank_domains(cache.nodes, ZONE, [(rows, copies, count)], need)
    assert (list(ranking.candidates), ranking.most) == (want, want_most)
    assert ranking.domains == len({z for _, z, _ in nodes if z})
    for domain in ranking.candidates:
        assert sorted(cache.nodes.names_of(np.flatnonzero(ranking.mask(cache.nodes, domain)))) == \
            sorted(n for n, z, _ in nodes if z == domain)


def test_members_already_placed_fix_the_domain_whatever_its_bound() -> None:
    cache = cluster(("a", "z1", "2"), ("b", "z2", "8"))
    rows = all_rows(cache)
    copies = copies_per_node(cache.nodes, rows, {"cpu": 1000})
    assert rank_domains(cache.nodes, ZONE, [(rows, copies, 2)], 2, required="z1").candidates == ("z1",)
    assert rank_domains(cache.nodes, ZONE, [(rows, copies, 4)], 4, required="z1").candidates == ("z1",), \
        "its real members say whether it fits: the bound only ranks"
    assert rank_domains(cache.nodes, ZONE, [(rows, copies, 1)], 1, required="").candidates == (), \
        "members in two domains already: none fits"
    failed = rank_domains(cache.nodes, ZONE, [(rows, copies, 2)], 2, required="z1", failed={"z1"})
    assert failed.candidates == () and failed.most == 2


def test_domains_that_failed_are_skipped_and_count_in_most() -> None:
    cache = cluster(("a", "z1", "4"), ("b", "z2", "4"), ("c", "z3", "1"))
    rows = all_rows(cache)
    ranking = rank_domains(cache.nodes, ZONE, [(rows, copies_per_node(cache.nodes, rows, {"cpu": 1000}), 4)], 4,
                           failed={"z1"})
    assert ranking.candidates == ("z2",)
    assert ranking.most == 4, "z1 may take 4 members by its bound; its try failed, which the group cycle counts"


def test_groups_add_up_per_domain_each_capped_at_its_members() -> None:
    cache = cluster(("a", "z1", "4"), ("b", "z2", "4"))
    rows = all_rows(cache)
    small = (rows, copies_per_node(cache.nodes, rows, {"cpu": 1000}), 2)
    big = (rows[:1], copies_per_node(cache.nodes, rows[:1], {"cpu": 2000}), 1)   # big fits only on "a"
    ranking = rank_domains(cache.nodes, ZONE, [small, big], 3)
    assert ranking.candidates == ("z1",) and ranking.most == 2


def test_a_key_no_node_has_fits_nowhere_and_the_message_has_the_numbers() -> None:
    cache = cluster(("a", "z1", "4"))
    ranking = rank_domains(cache.nodes, "rack", [], 2)
    assert not ranking.candidates and ranking.domains == 0
    cache = cluster(("a", "z1", "2"), ("b", "z2", "2"), ("c", "z3", "2"))
    rows = all_rows(cache)
    ranking = rank_domains(cache.nodes, ZONE, [(rows, copies_per_node(cache.nodes, rows, {"cpu": 1000}), 4)], 4)
    assert topology_message(ranking, ranking.most) == (
        f'no single domain of topology key "{ZONE}" fits the pod group: it needs 4 member(s) in one domain, and '
        f"the most any of its 3 domain(s) can take is 2")


def test_a_pod_is_a_pod_for_copies() -> None:
    cache = cluster(("a", "z1", "4"))
    cache.add_pod(Pod(uid="x", namespace="ns", name="x", node_name="a", requests={"cpu": 3000}))
    assert copies_per_node(cache.nodes, all_rows(cache), {"cpu": 1000}).tolist() == [1], "what bound pods hold counts"


def test_a_limit_names_the_best_candidates_and_counts_the_rest() -> None:
    cache = cluster(*[(f"n{i}", f"z{i}", str(i + 1)) for i in range(5)])
    rows = all_rows(cache)
    ranking = rank_domains(cache.nodes, ZONE, [(rows, copies_per_node(cache.nodes, rows, {"cpu": 1000}), 1)], 1,
                           limit=2)
    assert ranking.candidates == ("z0", "z1") and ranking.more == 3, "equal bounds: the tightest first"
