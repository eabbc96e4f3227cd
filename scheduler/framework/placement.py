"""Topology-constrained gangs: which domains of a node label a whole gang may go into, best first.

A PodGroup with a topology key (the native API's ``schedulingConstraints.topology[0].key``, the CRD's
annotation ``scheduling.tandem.dev/topology-key``) must have every member in one domain of that label,
any label (zone, rack, block). kube-scheduler 1.36 (TopologyPlacementGenerator, PodGroupPodsCount)
generates one placement per domain, runs the gang's pods through each and keeps the best. tandem's
group cycle (scheduler/groupcycle.py) tries the domains this module ranks, best first, and keeps the
first whose real member cycles place the gang; this module only ranks, with array work:

* the caller gives, per group of members that schedule alike (:func:`scheduler.groupcycle.signature`),
  the node rows the first of them passes PreFilter and Filter on and how many copies of it each of
  those nodes holds (:func:`copies_per_node`: its free allocatable over the pod's requests, the pod
  count included);
* per domain, an upper bound of the members it can take: the sum of those copies over its nodes (one
  ``bincount`` per group over the label column), capped at the members of that group, summed over the
  groups. It is an upper bound, never an under-estimate: the group cycle learns the rest (volumes,
  ports, siblings' affinity) by trying;
* the candidates: the domains whose bound reaches the members the gang still needs, minus the domains
  that already failed for this gang since the last cluster event that could change them; best first
  by the bound (upstream's PodGroupPodsCount scores a placement by the members it takes), then the
  least room to spare (the tightest, so larger gangs keep the larger domains), then the name.

Members already on a node fix the domain to theirs (upstream: the required domain of a partly
scheduled gang). Never a Python loop over nodes; loops are over member groups and resources.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from scheduler.framework.nodetable import R_PODS, NodeTable


@dataclass(frozen=True, slots=True)
class DomainRanking:
    """What :func:`rank_domains` found for one gang."""

    key: str                      # the topology label key
    candidates: tuple[str, ...]   # the domains to try, best first (the first ``limit`` of them)
    domains: int                  # domains of the key among the nodes (upstream's placement count)
    most: int                     # the largest bound among the domains not tried (0 when all are candidates)
    need: int                     # the members the gang still needs placed
    more: int = 0                 # candidates past ``limit``, not named (a key with a domain a node: hostnames)

    def mask(self, nodes: NodeTable, domain: str) -> np.ndarray:
        """bool[nodes.n]: the rows of ``domain``."""
        ids = nodes.label(self.key)
        rid = nodes.label_id(self.key, domain) if ids is not None else 0
        if not rid:
            return np.zeros(nodes.n, dtype=bool)
        return ids[: nodes.n] == rid


def copies_per_node(nodes: NodeTable, rows: np.ndarray, requests: dict[str, int]) -> np.ndarray:
    """int64[len(rows)]: how many pods with ``requests`` each node in ``rows`` still holds (pods included).

    Only the columns the pod asks for are read (one gather each), not the whole k x R block."""
    alloc, requested = nodes.alloc, nodes.requested
    # a column's take is a third of the cost of indexing the 2-D block by (rows, col)
    out = np.maximum(alloc[:, R_PODS].take(rows) - requested[:, R_PODS].take(rows), 0)
    for name, v in requests.items():
        if v <= 0:
            continue
        col = nodes.resource_index.get(name)
        if col is None:
            return np.zeros(len(rows), dtype=np.int64)   # no node has it: none holds the pod
        free = alloc[:, col].take(rows) - requested[:, col].take(rows)
        np.minimum(out, np.maximum(free, 0) // v, out=out)
    return out


def rank_domains(nodes: NodeTable, key: str, groups: list[tuple[np.ndarray, np.ndarray, int]], need: int,
                 required: str | None = None, failed: Collection[str] = (), limit: int | None = None) -> DomainRanking:
    """The domains of label ``key`` the gang may go into, best first (see the module docstring).

    ``groups``: per group of members that schedule alike, (feasible rows int64[k], copies per row
    int64[k], members in the group); ``need``: members the gang must still place (0 or less: its quorum
    is placed already); ``required``: the domain members already on a node fix ("" when they span none
    of the key's domains, or two), which is then the only candidate, whatever its bound; ``failed``:
    domains that failed for this gang since the last cluster event that could change them (skipped);
    ``limit``: name at most this many candidates (the rest are counted in ``more``), so a key with a domain
    per node costs no Python loop over the nodes.
    """
    ids = nodes.label(key)
    values = nodes.label_values(key)
    size = len(values)
    if ids is None or size <= 1:
        return DomainRanking(key, (), 0, 0, need)
    valid = nodes.rows()
    at = ids.take(valid)
    present = np.bincount(at, minlength=size)
    present[0] = 0                                                       # nodes without the key: no domain
    domains = int(np.count_nonzero(present))
    take = np.zeros(size, dtype=np.int64)
    room = np.zeros(size, dtype=np.int64)
    for rows, copies, count in groups:
        # a group feasible everywhere (the common case) reuses the gather of the valid rows' domains (its rows
        # are a sorted subset of the valid rows: as many means the same)
        where = at if len(rows) == len(valid) else ids.take(rows)
        per = np.bincount(where, weights=copies, minlength=size).astype(np.int64)
        per[0] = 0
        take += np.minimum(per, count)
        room += per
    if required is not None:
        rid = nodes.label_id(key, required) if required else 0
        if not rid or not present[rid] or required in failed:
            return DomainRanking(key, (), domains, int(take[rid]) if rid else 0, need)
        return DomainRanking(key, (required,), domains, 0, need)
    ok = (take >= max(need, 1)) & (present > 0)
    if failed:
        skip = [nodes.label_id(key, v) for v in failed]
        ok[[i for i in skip if i]] = False
    cand = np.flatnonzero(ok)
    rest = ~ok & (present > 0)
    most = int(take[rest].max()) if rest.any() else 0
    if not len(cand):
        return DomainRanking(key, (), domains, most, need)
    # best first: the largest bound, then the least room to spare, then the name (lexsort's last key leads)
    order = np.lexsort((nodes.label_order(key)[cand], (room - take)[cand], -take[cand]))
    best = cand[order] if limit is None else cand[order[:limit]]
    return DomainRanking(key, tuple(values[i] for i in best.tolist()), domains, most, need, len(cand) - len(best))


def topology_message(ranking: DomainRanking, most: int) -> str:
    """tandem's numbers for a gang no single domain fits, appended to upstream's words on its pods.

    ``most``: the most members any domain took or could take (the group cycle's tries and the bounds of
    the domains it did not try)."""
    return (f'no single domain of topology key "{ranking.key}" fits the pod group: it needs {ranking.need} '
            f"member(s) in one domain, and the most any of its {ranking.domains} domain(s) can take is {most}")
