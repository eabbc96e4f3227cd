"""Topology-constrained gangs: the one domain of a node label that a whole gang goes into.

A PodGroup with a topology key (the native API's ``schedulingConstraints.topology[0].key``, the CRD's
annotation ``scheduling.tandem.dev/topology-key``) must have every member in one domain of that label,
any label (zone, rack, block). kube-scheduler 1.36 (TopologyPlacementGenerator, PodGroupPodsCount)
generates one placement per domain and runs the gang's pods through each in turn. tandem makes the
choice in one pass of array work before the group cycle (:func:`choose_domain`):

* per member shape (members with the same requests), the node rows the pod passes PreFilter and
  Filter on, computed as the group cycle computes them, and how many copies of it each of those
  nodes holds (its free allocatable over the pod's requests, the pod count included);
* per domain, the members it can take: the sum of those copies over its nodes (one ``bincount`` per
  shape over the label column), capped at the members of that shape;
* the choice: a domain that takes at least the members the gang still needs, scoring highest by
  members it takes (upstream's PodGroupPodsCount); among equals the one with the least room to
  spare (the tightest, so larger gangs keep the larger domains), then the first by name.

Members already on a node fix the domain to theirs (upstream: the required domain of a partly
scheduled gang). The count is an estimate for gangs whose members differ in more than requests
(affinity between siblings, host ports): the group cycle then runs in the chosen domain only, and
a gang it cannot complete there fails that attempt whole, as any gang does. Never a Python loop
over nodes; loops are over shapes and resources.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scheduler.framework.nodetable import R_PODS, NodeTable


@dataclass(frozen=True, slots=True)
class DomainChoice:
    """The outcome of :func:`choose_domain`."""

    key: str                      # the topology label key
    domain: str                   # the chosen value ("" when none fits)
    mask: np.ndarray | None       # bool[nodes.n]: the chosen domain's rows (None when none fits)
    domains: int                  # domains of the key among schedulable nodes (upstream's placements)
    most: int                     # the most members any single domain can take
    need: int                     # the members the gang still needs placed

    @property
    def fits(self) -> bool:
        return self.mask is not None


def copies_per_node(nodes: NodeTable, rows: np.ndarray, requests: dict[str, int]) -> np.ndarray:
    """int64[len(rows)]: how many pods with ``requests`` each node in ``rows`` still holds (pods included)."""
    free = nodes.alloc[rows] - nodes.requested[rows]                      # int64[k, R]
    out = np.maximum(free[:, R_PODS], 0)
    for name, v in requests.items():
        if v <= 0:
            continue
        col = nodes.resource_index.get(name)
        if col is None:
            return np.zeros(len(rows), dtype=np.int64)   # no node has it: none holds the pod
        out = np.minimum(out, np.maximum(free[:, col], 0) // v)
    return out


def choose_domain(nodes: NodeTable, key: str, shapes: list[tuple[np.ndarray, np.ndarray, int]], need: int,
                  required: str | None = None) -> DomainChoice:
    """The domain of label ``key`` the gang goes into (see the module docstring).

    ``shapes``: per member shape, (feasible rows int64[k], copies per row int64[k], members of that
    shape); ``need``: members the gang must still place (0 or less: any domain holding a member will do);
    ``required``: the domain members already on a node fix ("" when they span none of the key's domains).
    """
    ids = nodes.label(key)
    values = nodes.label_values(key)
    size = len(values)
    valid_rows = nodes.rows()
    if ids is None or size <= 1:
        return DomainChoice(key, "", None, 0, 0, need)
    present = np.bincount(ids[valid_rows], minlength=size)
    present[0] = 0                                                       # nodes without the key: no domain
    domains = int(np.count_nonzero(present))
    take = np.zeros(size, dtype=np.int64)
    room = np.zeros(size, dtype=np.int64)
    for rows, copies, count in shapes:
        per = np.bincount(ids[rows], weights=copies, minlength=size).astype(np.int64)
        per[0] = 0
        take += np.minimum(per, count)
        room += per
    if required is not None:
        allowed = np.zeros(size, dtype=bool)
        rid = nodes.label_id(key, required) if required else 0
        if rid:
            allowed[rid] = True
        take = np.where(allowed, take, 0)
    most = int(take.max()) if size else 0
    fits = (take >= max(need, 1)) & (present > 0)
    if required is not None:
        fits &= allowed
    if not fits.any():
        return DomainChoice(key, "", None, domains, most, need)
    cand = np.flatnonzero(fits)
    # highest take, then least room to spare, then the first by name
    order = sorted(cand.tolist(), key=lambda v: (-int(take[v]), int(room[v] - take[v]), values[v]))
    best = order[0]
    mask = np.zeros(nodes.n, dtype=bool)
    mask[: nodes.n] = ids[: nodes.n] == best
    return DomainChoice(key, values[best], mask, domains, most, need)


def topology_message(choice: DomainChoice) -> str:
    """tandem's numbers for a gang no single domain fits, appended to upstream's words on its pods."""
    return (f'no single domain of topology key "{choice.key}" fits the pod group: it needs {choice.need} '
            f"member(s) in one domain, and the most any of its {choice.domains} domain(s) can take is {choice.most}")
