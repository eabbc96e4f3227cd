"""Topology helpers shared by InterPodAffinity, PodTopologySpread and the cache's pod counts.

A topology domain is a value of a node label key (``topology.kubernetes.io/zone=a``). The node table
interns each key's values into an int32 column (0 = the node lacks the key), so "how many of these pods
are in each domain" is one ``bincount`` of a per-node count column over that label column
(:func:`domain_counts`), and "the count in this node's domain" is a gather by the node's value id.
The per-node count columns themselves are kept by ``scheduler.framework.podcounts.PodCounts`` (``handle.counts``).
"""

from __future__ import annotations

import numpy as np

from scheduler.framework.nodetable import NodeTable
from scheduler.model import Pod, PodSelection

# the kinds of placed pods' terms handle.counts.held_terms(kind) groups
REQUIRED_ANTI, REQUIRED_AFFINITY, PREFERRED = "required-anti", "required-affinity", "preferred"

Selections = tuple[PodSelection, ...]


def pod_matches(parts: Selections, pod: Pod, ns_labels: dict[str, str]) -> bool:
    """Does ``pod`` match every part (upstream's podMatchesAllAffinityTerms; no parts matches nothing)?"""
    if not parts:
        return False
    ns, labels = pod.namespace, pod.labels
    for s in parts:
        if not s.matches(ns, labels, ns_labels):
            return False
    return True


def domain_counts(nodes: "NodeTable", key: str, counts: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """Sum of ``counts`` per value of label ``key``: int64[V] indexed by value id (0 = nodes without the key).

    ``rows`` limits the sum to those rows (e.g. the nodes a spread constraint counts); by default every
    row in use. One ``bincount``; never a Python loop over nodes.
    """
    ids = nodes.label(key)
    size = len(nodes.label_values(key))
    if ids is None:
        return np.zeros(1, dtype=np.int64)
    if rows is None:
        n = nodes.n
        out = np.bincount(ids[:n], weights=counts[:n], minlength=size)
    else:
        out = np.bincount(ids[rows], weights=counts[rows], minlength=size)
    return out.astype(np.int64)
