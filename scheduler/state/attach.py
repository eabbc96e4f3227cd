"""Attachable volumes per node and per CSI driver, for NodeVolumeLimits.

Upstream's Filter (nodevolumelimits/csi.go) walks, for every node, the
node's pods and their volumes, resolves each to ``<driver>/<volumeHandle>``
and counts the unique ones per driver, adds the node's VolumeAttachments
whose volume no pod there uses, and compares with the CSINode's
``allocatable.count``. Here that count is kept per node as columns aligned
with the node table's rows (``limit``: -1 where the node's CSINode sets no
count for the driver; ``used``: the node's unique volumes of the driver), and
``where`` names the nodes whose pods use each volume, so that a cycle only
resolves the new pod's few volumes and does array work over the rows.

What a volume counts as (:meth:`Attachments.resolve_claim`): a claim bound to
a CSI PersistentVolume is ``<spec.csi.driver>/<volumeHandle>``; a migratable
in-tree volume (a PV's or a pod's inline source, scheduler/model/csi.py)
counts under its CSI driver on nodes whose CSINode lists the plugin as
migrated (isCSIMigrationOn); a claim without a volume counts under its
StorageClass's provisioner, once per claim; a claim without a class, a
missing claim of a placed pod, and non-attachable sources are not counted,
as upstream. Since what a claim counts as changes when it binds, placed pods
are kept by their volume references (claims, inline disks) and a node's
counts are recomputed from them when a claim, PersistentVolume, StorageClass,
CSINode or VolumeAttachment it depends on changes: O(the node's volumes).

Claims and volumes are read in the API view (``Volumes.api_claims`` and
``api_volumes``, not the assumed view): the counts are recomputed at the
informer events that change what a claim or volume counts as, so they must
read what those events changed (an assumption changes nothing counted here:
a claim's selected-node, a volume's claimRef).

Kept by the cache (state/cache.py) from pod placements and by the informer
handlers (eventhandlers.py); plugins read it through ``Handle.attachments`` and
never mutate it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from scheduler.model import (
    MIGRATABLE_PLUGINS, CSINode, PersistentVolumeClaim, Pod, VolumeAttachment, in_tree_driver,
)

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable
    from scheduler.state.volumes import Volumes

# the handle of a claim without a volume (upstream: a random prefix, then "<namespace>/<claim>")
UNBOUND_HANDLE = "<unbound>"
PLUGINS = MIGRATABLE_PLUGINS   # the columns of ``migrated``

NO_LIMIT = np.iinfo(np.int64).max // 2   # headroom where no CSINode sets a count
CLAIM_LOG_LIMIT = 8192                   # claim users logged before the claim index takes them in anyway

# a pod's reference to a volume (Pod.volume_refs): ("claim", "ns/name") or ("inline", plugin, handle)
Ref = tuple[str, ...]
# what a volume counts as: (unique name "<driver>/<handle>", driver, in-tree plugin or "")
Resolved = tuple[str, str, str]


class Attachments:
    """CSINodes, VolumeAttachments, and the attachable volumes placed pods use, per node (see the module doc)."""

    def __init__(self, nodes: "NodeTable", volumes: "Volumes") -> None:
        self._nodes = nodes
        self._volumes = volumes
        self.csinodes: dict[str, CSINode] = {}
        self.attachments: dict[str, VolumeAttachment] = {}
        self._va_on: dict[str, set[str]] = {}             # node -> VolumeAttachment names
        self._va_of_pv: dict[str, set[str]] = {}          # PV name -> VolumeAttachment names
        self._refs: dict[str, dict[Ref, int]] = {}        # node -> volume reference -> placed pods using it there
        self._claim_nodes: dict[str, dict[str, int]] = {}  # "ns/claim" of placed pods -> node -> uses
        # placements (+1) and removals (-1) of a claim's users not in _claim_nodes yet: only claim, volume and
        # class events read that index, so a placement costs an append (:meth:`_claim_index`)
        self._claim_log: list[tuple[str, str, int]] = []
        self._claim_pv: dict[str, str] = {}               # such a claim -> the PV it named when last seen
        self._pv_claims: dict[str, set[str]] = {}
        self._counted: dict[str, set[str]] = {}           # node -> the unique volumes its pods use
        self._where: dict[str, set[str]] = {}             # unique volume -> nodes whose pods use it
        self._drivers: dict[str, int] = {}                 # driver -> column
        # driver -> how many CSINodes set a count for it: a pod none of whose drivers is here fits every node
        # without a recount (most clusters: CSI volumes with no attach limit, or none at all)
        self.limited: dict[str, int] = {}
        # nodes whose counts changed since they were last written: a recount is O(the node's volumes) and
        # numpy row writes, so it waits until someone reads the counts (:meth:`_flush`), which no cycle does
        # while no CSINode limits a driver
        self._dirty: set[str] = set()
        cap = nodes.cap
        self._limit = np.full((cap, 0), -1, dtype=np.int64)   # [cap, drivers]: allocatable.count, -1 none
        self._used = np.zeros((cap, 0), dtype=np.int64)       # [cap, drivers]: unique volumes there
        self._migrated = np.zeros((cap, len(PLUGINS)), dtype=bool)   # [cap, PLUGINS]: the CSINode migrated it
        # [cap, drivers]: limit - used where a count is set, else NO_LIMIT: how many new volumes of the driver
        # the node still takes (Filter's common case is one take of this column)
        self._headroom = np.full((cap, 0), NO_LIMIT, dtype=np.int64)
        # column -> a lower bound of its headroom over every row, kept as counts go down and recomputed when
        # it no longer settles a question (counts going up leave it low, which is safe): a pod with fewer new
        # volumes than it fits every node, and Filter has nothing to look at
        self._least: dict[int, int] = {}

    # the columns and indexes, current as of this read (a pending recount is done first)

    @property
    def limit(self) -> np.ndarray:
        self._flush()
        return self._limit

    @property
    def used(self) -> np.ndarray:
        self._flush()
        return self._used

    @property
    def migrated(self) -> np.ndarray:
        self._flush()
        return self._migrated

    @property
    def where(self) -> dict[str, set[str]]:
        self._flush()
        return self._where

    @property
    def headroom(self) -> np.ndarray:
        self._flush()
        return self._headroom

    def fits_everywhere(self, c: int, need: int) -> bool:
        """Does every node take ``need`` more volumes of driver column ``c``? O(1) while the bound holds; one
        pass over the column when it must be recomputed."""
        self._flush()
        least = self._least.get(c)
        if least is not None and need <= least:
            return True
        least = self._least[c] = int(self._headroom[:, c].min()) if self._headroom.shape[0] else NO_LIMIT
        return need <= least

    def volumes_fit_everywhere(self, volumes: list[Resolved]) -> bool:
        """Does every node take ``volumes`` (a pod's, resolved, each of a driver some CSINode limits)? True only
        when that is sure without a look at rows: per driver, the kept lower bound of the nodes' headroom is at
        least the pod's count, each volume counted as new on every node. (One a pod on a node uses already is
        not new there, and an in-tree one does not count where its plugin is not migrated: counting them
        anyway only makes the answer stricter.)"""
        self._flush()
        need: dict[str, int] = {}
        for _, driver, _ in volumes:
            need[driver] = need.get(driver, 0) + 1
        for driver, n in need.items():
            c = self._drivers.get(driver)
            if c is None or not self.fits_everywhere(c, n):
                return False
        return True

    def _lowered(self, row: int) -> None:
        """``row``'s headroom was written: keep the lower bounds below it."""
        for c, least in self._least.items():
            v = int(self._headroom[row, c])
            if v < least:
                self._least[c] = v

    @property
    def drivers(self) -> dict[str, int]:
        self._flush()
        return self._drivers

    @property
    def counted(self) -> dict[str, set[str]]:
        self._flush()
        return self._counted

    # ------------------------------------------------------------------ what a volume counts as

    def resolve_claim(self, pvc: PersistentVolumeClaim) -> Resolved | None:
        """getCSIDriverInfo: the bound PV's CSI source (or its migrated in-tree one); without a PV, the class's
        provisioner (getCSIDriverInfoFromSC); None when it does not count."""
        if pvc.volume_name:
            pv = self._volumes.api_volumes.get(pvc.volume_name)
            if pv is not None:
                if pv.csi_driver:
                    return (pv.csi_unique, pv.csi_driver, "") if pv.csi_handle else None
                return self.resolve_inline(*pv.in_tree) if pv.in_tree else None
            # a PV not seen (deleted, or pre-bound and not created yet): counted by its class, as upstream
        if not pvc.storage_class:
            return None   # no class: it binds at once, so it is bound before it is scheduled
        sc = self._volumes.classes.get(pvc.storage_class)
        if sc is None or not sc.provisioner:
            return None
        handle = f"{UNBOUND_HANDLE}{pvc.namespace}/{pvc.name}"
        driver = in_tree_driver(sc.provisioner)
        if driver:
            return f"{driver}/{handle}", driver, sc.provisioner
        return f"{sc.provisioner}/{handle}", sc.provisioner, ""

    @staticmethod
    def resolve_inline(plugin: str, handle: str) -> Resolved:
        driver = in_tree_driver(plugin)
        return f"{driver}/{handle}", driver, plugin

    def _resolve(self, ref: Ref) -> Resolved | None:
        if ref[0] == "inline":
            return self.resolve_inline(ref[1], ref[2])
        pvc = self._volumes.api_claims.get(ref[1])
        return None if pvc is None else self.resolve_claim(pvc)

    def _resolve_va(self, va: VolumeAttachment) -> str | None:
        """getNodeVolumeAttachmentInfo: ``<attacher>/<the PV's volumeHandle>`` for a CSI PV; None otherwise."""
        if not va.attacher or not va.pv_name:
            return None
        pv = self._volumes.api_volumes.get(va.pv_name)
        if pv is None or not pv.csi_driver:
            return None
        return f"{va.attacher}/{pv.csi_handle}"

    # ------------------------------------------------------------------ per-node views

    def migrated_on(self, node: str) -> frozenset[str]:
        cn = self.csinodes.get(node)
        return cn.migrated if cn is not None else frozenset()

    def node_counts(self, node: str, delta: Mapping[Ref, int] | None = None) -> tuple[dict[str, int], set[str]]:
        """Per driver, the unique volumes on ``node`` (its pods' and its VolumeAttachments'), and the unique
        volumes its pods use; with ``delta`` (references added or taken away: a preemption dry run's) applied.
        O(the node's volumes): for the few rows a dry run changed, never for every node."""
        refs = dict(self._refs.get(node, {}))
        for ref, n in (delta or {}).items():
            refs[ref] = refs.get(ref, 0) + n
        mig = self.migrated_on(node)
        counted: dict[str, str] = {}
        for ref, n in refs.items():
            if n > 0:
                r = self._resolve(ref)
                if r is not None and (not r[2] or r[2] in mig):
                    counted[r[0]] = r[1]
        total = dict(counted)
        for name in self._va_on.get(node, ()):
            u = self._resolve_va(self.attachments[name])
            if u is not None:
                total.setdefault(u, self.attachments[name].attacher)
        per_driver: dict[str, int] = {}
        for d in total.values():
            per_driver[d] = per_driver.get(d, 0) + 1
        return per_driver, set(counted)

    def limits_on(self, node: str) -> dict[str, int]:
        cn = self.csinodes.get(node)
        return dict(cn.limits) if cn is not None else {}

    def rows_using(self, unique: str) -> list[int]:
        """The rows whose pods use ``unique`` (few: a volume is attached to one node, or a handful)."""
        rows = []
        for node in self.where.get(unique, ()):   # (the property: pending recounts first)
            r = self._nodes.row(node)
            if r is not None:
                rows.append(r)
        return rows

    # ------------------------------------------------------------------ upkeep

    def _col(self, driver: str) -> int:
        c = self._drivers.get(driver)
        if c is None:
            c = self._drivers[driver] = len(self._drivers)
            self._limit = np.hstack([self._limit, np.full((self._limit.shape[0], 1), -1, dtype=np.int64)])
            self._used = np.hstack([self._used, np.zeros((self._used.shape[0], 1), dtype=np.int64)])
            self._headroom = np.hstack([self._headroom, np.full((self._headroom.shape[0], 1), NO_LIMIT,
                                                                dtype=np.int64)])
        return c

    def _fit(self) -> None:
        """Grow the columns' rows with the node table's capacity."""
        cap, have = self._nodes.cap, self._limit.shape[0]
        if cap > have:
            extra = cap - have
            self._limit = np.vstack([self._limit, np.full((extra, self._limit.shape[1]), -1, dtype=np.int64)])
            self._used = np.vstack([self._used, np.zeros((extra, self._used.shape[1]), dtype=np.int64)])
            self._migrated = np.vstack([self._migrated, np.zeros((extra, len(PLUGINS)), dtype=bool)])
            self._headroom = np.vstack([self._headroom, np.full((extra, self._headroom.shape[1]), NO_LIMIT,
                                                                dtype=np.int64)])

    def refresh(self, node: str) -> None:
        """``node``'s counts may have changed: they are recomputed before they are next read."""
        self._dirty.add(node)

    def _flush(self) -> None:
        while self._dirty:
            self._recount(self._dirty.pop())

    def _recount(self, node: str) -> None:
        """Recompute ``node``'s counts, its row and ``where`` from what it holds now."""
        per_driver, counted = self.node_counts(node)
        old = self._counted.get(node, set())
        new = counted
        for u in old - new:
            s = self._where.get(u)
            if s is not None:
                s.discard(node)
                if not s:
                    del self._where[u]
        for u in new - old:
            self._where.setdefault(u, set()).add(node)
        if new:
            self._counted[node] = new
        else:
            self._counted.pop(node, None)
        limits = self.limits_on(node)
        for d in (*limits, *per_driver):
            self._col(d)   # first: every driver some CSINode limits has a column, even one of no node yet
        row = self._nodes.row(node)
        if row is None:
            return   # kept by name; the row is written when the node arrives (Cache.add_node)
        self._fit()
        self._limit[row] = -1
        for d, n in limits.items():
            self._limit[row, self._drivers[d]] = n
        self._used[row] = 0
        for d, n in per_driver.items():
            self._used[row, self._drivers[d]] = n
        self._headroom[row] = NO_LIMIT
        for d, n in limits.items():
            self._headroom[row, self._drivers[d]] = n - per_driver.get(d, 0)
        self._lowered(row)
        mig = self.migrated_on(node)
        if mig or self._migrated[row].any():
            self._migrated[row] = [p in mig for p in PLUGINS]

    def clear_row(self, row: int) -> None:
        """The node table freed ``row``: no limit, nothing used, until a node takes it (:meth:`refresh`)."""
        self._flush()   # a pending recount of the node that held it must not write it after this
        if row < self._limit.shape[0]:
            self._limit[row] = -1
            self._used[row] = 0
            self._migrated[row] = False
            self._headroom[row] = NO_LIMIT

    def place(self, pod: Pod, node: str) -> None:
        refs = pod.volume_refs
        if not refs:
            return
        on = self._refs.get(node)
        if on is None:
            on = self._refs[node] = {}
        fresh = []
        for ref in refs:
            n = on.get(ref, 0)
            on[ref] = n + 1
            if not n:
                fresh.append(ref)
            if ref[0] == "claim":
                self._claim_log.append((ref[1], node, 1))
        if len(self._claim_log) >= CLAIM_LOG_LIMIT:
            self._claim_index()   # a cluster whose claims never change still keeps the log bounded
        if not self._count_fresh(node, fresh):
            self.refresh(node)

    def _count_fresh(self, node: str, fresh: list[Ref]) -> bool:
        """Add the volumes of ``fresh`` references to ``node``'s counts in place, when that is exact: the node's
        counts are current, it has no VolumeAttachments (which may name the same volumes) and every new
        volume is a CSI one (an in-tree one counts only if the node migrated its plugin). The common
        placement (a pod with its own CSI volume) then costs a few item writes, not a recount. False: a
        recount is needed."""
        row = self._nodes.row(node)
        if row is None or node in self._dirty or node in self._va_on or row >= self._used.shape[0]:
            return False
        counted = self._counted.get(node)
        adds: dict[str, str] = {}
        for ref in fresh:
            r = self._resolve(ref)
            if r is None:
                continue
            unique, driver, plugin = r
            if plugin:
                return False
            if counted is None or unique not in counted:
                adds[unique] = driver
        if not adds:
            return True
        if counted is None:
            counted = self._counted[node] = set()
        where = self._where
        for unique, driver in adds.items():
            c = self._col(driver)
            self._used[row, c] += 1
            if self._limit[row, c] >= 0:
                left = int(self._headroom[row, c]) - 1
                self._headroom[row, c] = left
                least = self._least.get(c)
                if least is not None and left < least:
                    self._least[c] = left
            counted.add(unique)
            nodes = where.get(unique)
            if nodes is None:
                where[unique] = {node}
            else:
                nodes.add(node)
        return True

    def unplace(self, pod: Pod, node: str) -> None:
        refs = pod.volume_refs
        on = self._refs.get(node)
        if not refs or on is None:
            return
        for ref in refs:
            n = on.get(ref, 0) - 1
            if n > 0:
                on[ref] = n
            else:
                on.pop(ref, None)
            if ref[0] == "claim":
                self._claim_log.append((ref[1], node, -1))
        if not on:
            del self._refs[node]
        self.refresh(node)

    def _claim_index(self) -> dict[str, dict[str, int]]:
        """The nodes whose placed pods use each claim ("ns/claim" -> node -> uses), with what was logged since
        it was last read; a claim in it is tracked under the volume it names (:meth:`_track_claim`)."""
        log = self._claim_log
        if log:
            self._claim_log = []
            index = self._claim_nodes
            for key, node, d in log:
                users = index.get(key)
                if users is None:
                    users = index[key] = {}
                    self._track_claim(key)
                n = users.get(node, 0) + d
                if n > 0:
                    users[node] = n
                else:
                    users.pop(node, None)
                    if not users:
                        del index[key]
                        self._untrack_claim(key)
        return self._claim_nodes

    def _track_claim(self, key: str) -> None:
        pvc = self._volumes.api_claims.get(key)
        if pvc is not None and pvc.volume_name:
            self._claim_pv[key] = pvc.volume_name
            self._pv_claims.setdefault(pvc.volume_name, set()).add(key)

    def _untrack_claim(self, key: str) -> None:
        pv = self._claim_pv.pop(key, None)
        if pv is not None:
            s = self._pv_claims.get(pv)
            if s is not None:
                s.discard(key)
                if not s:
                    del self._pv_claims[pv]

    def claim_changed(self, key: str) -> None:
        """A PersistentVolumeClaim was added, changed (bound) or deleted: recount the nodes whose pods use it."""
        users = self._claim_index().get(key)
        if not users:
            return
        self._untrack_claim(key)
        self._track_claim(key)
        for node in list(users):
            self.refresh(node)

    def volume_changed(self, name: str) -> None:
        """A PersistentVolume was added, changed or deleted: recount the nodes of its claims and attachments."""
        index = self._claim_index()
        nodes = {n for key in self._pv_claims.get(name, ()) for n in index.get(key, {})}
        nodes.update(self.attachments[va].node for va in self._va_of_pv.get(name, ()))
        for node in nodes:
            self.refresh(node)

    def class_changed(self, name: str) -> None:
        """A StorageClass was added or deleted: recount the nodes of placed pods' claims of that class (rare)."""
        nodes: set[str] = set()
        for key, users in self._claim_index().items():
            pvc = self._volumes.api_claims.get(key)
            if pvc is not None and pvc.storage_class == name:
                nodes.update(users)
        for node in nodes:
            self.refresh(node)

    def set_csinode(self, cn: CSINode) -> None:
        old = self.csinodes.get(cn.name)
        if old is not None:
            self._limits_counted(old, -1)
        self.csinodes[cn.name] = cn
        self._limits_counted(cn, 1)
        self.refresh(cn.name)

    def remove_csinode(self, name: str) -> None:
        old = self.csinodes.pop(name, None)
        if old is not None:
            self._limits_counted(old, -1)
            self.refresh(name)

    def _limits_counted(self, cn: CSINode, sign: int) -> None:
        for driver, _ in cn.limits:
            n = self.limited.get(driver, 0) + sign
            if n > 0:
                self.limited[driver] = n
            else:
                self.limited.pop(driver, None)

    def set_attachment(self, va: VolumeAttachment) -> None:
        old = self.attachments.get(va.name)
        if old is not None:
            self._drop_attachment(old)
        self.attachments[va.name] = va
        self._va_on.setdefault(va.node, set()).add(va.name)
        if va.pv_name:
            self._va_of_pv.setdefault(va.pv_name, set()).add(va.name)
        if old is not None and old.node != va.node:
            self.refresh(old.node)
        self.refresh(va.node)

    def remove_attachment(self, name: str) -> None:
        va = self.attachments.pop(name, None)
        if va is not None:
            self._drop_attachment(va)
            self.refresh(va.node)

    def _drop_attachment(self, va: VolumeAttachment) -> None:
        for index, key in ((self._va_on, va.node), (self._va_of_pv, va.pv_name)):
            s = index.get(key)
            if s is not None:
                s.discard(va.name)
                if not s:
                    del index[key]
