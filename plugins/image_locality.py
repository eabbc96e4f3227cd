"""ImageLocality: favour nodes that already hold the pod's container images.

For each container (init and app) whose image the node reports, the node
earns the image's size scaled by the fraction of all nodes that hold it
(spread images count less, so pods do not pile onto the few nodes that
pulled a rare image first: the "node heating" problem). The sum is clamped
to [23 MiB, 1000 MiB x containers] and mapped linearly to 0..100.

Image names are matched as upstream's normalizedImageName does: a pod
image without a tag gets ":latest"; nothing else is rewritten (upstream
leaves "docker.io/library/" prefixes alone too), and node image names are
taken as the node reports them.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework import MAX_NODE_SCORE, CycleState, register
from scheduler.model import Pod

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


@functools.lru_cache(maxsize=4096)
def normalized_image_name(name: str) -> str:
    """normalizedImageName: append ":latest" when the last ':' is not after the last '/'."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def calculate_priority(sums: np.ndarray, num_containers: int) -> np.ndarray:
    """calculatePriority over int64[k] sums: clamp to [min, max], scale to 0..MAX_NODE_SCORE, truncating."""
    if num_containers == 0:
        # every sum clamps up to the minimum: 0 / (0 - min) is 0 in Go
        return np.zeros(len(sums), dtype=np.int64)
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    clamped = np.clip(sums, MIN_THRESHOLD, max_threshold)
    # non-negative operands: floor division is Go's truncation
    return (MAX_NODE_SCORE * (clamped - MIN_THRESHOLD)) // (max_threshold - MIN_THRESHOLD)


@register
class ImageLocality:
    NAME = "ImageLocality"
    EXTENSION_POINTS = frozenset({"Score"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None:
        self.handle = handle

    def score(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> np.ndarray:
        """int64[k] in 0..100; already normalized, as upstream (no ScoreExtensions)."""
        total_nodes = len(nodes)
        cols = [nodes.image_size(normalized_image_name(image)) for image in pod.images] if total_nodes else []
        sums = np.zeros(len(rows), dtype=np.int64)
        if not any(col is not None for col in cols):
            # no node reports any of the images (scheduler_perf's pods; most pods of a fresh cluster): every
            # sum is 0, which calculatePriority clamps to the minimum, score 0
            return sums
        for col in cols:  # containers, not nodes
            if col is None:
                continue
            # rows of removed nodes are zeroed, so this counts the nodes holding the image
            spread = np.count_nonzero(col[: nodes.n]) / total_nodes
            # int64(float64(size) * spread), as scaledImageScore truncates
            sums += (col[rows].astype(np.float64) * spread).astype(np.int64)
        return calculate_priority(sums, len(pod.images))
