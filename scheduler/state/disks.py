"""The inline disks placed pods use, per node, for VolumeRestrictions' disk conflicts.

Upstream's Filter walks the node's pods and their volumes (satisfyVolumeConflicts);
here each placed pod's disk keys (``Pod.disks``: a GCE disk, an EBS volume, an
iSCSI IQN, an RBD image per Ceph monitor) are counted per node as the cache
places and removes pods, so a cycle looks up the pod's few keys and reads the
few nodes that use each, never the pods. Kept by the cache (state/cache.py);
readers never mutate it.
"""

from __future__ import annotations

from collections.abc import Iterator

from scheduler.model import Pod


class DiskIndex:
    """disk key -> node name -> [pods using it there, of which read-write]."""

    __slots__ = ("uses",)

    def __init__(self) -> None:
        self.uses: dict[str, dict[str, list[int]]] = {}

    def place(self, pod: Pod, node: str) -> None:
        for key, read_only, _ in pod.disks:
            c = self.uses.setdefault(key, {}).setdefault(node, [0, 0])
            c[0] += 1
            c[1] += not read_only

    def unplace(self, pod: Pod, node: str) -> None:
        for key, read_only, _ in pod.disks:
            on = self.uses.get(key)
            c = on.get(node) if on is not None else None
            if c is None:
                continue
            c[0] -= 1
            c[1] -= not read_only
            if c[0] <= 0:
                del on[node]
                if not on:
                    del self.uses[key]

    def conflicting(self, key: str, read_only: bool, may_share: bool) -> Iterator[str]:
        """The nodes where a new use of ``key`` conflicts (isVolumeConflict): any use there, or only read-write
        ones when both mounts are read-only and the kind lets read-only mounts share."""
        col = 1 if read_only and may_share else 0
        for node, c in self.uses.get(key, {}).items():
            if c[col] > 0:
                yield node
