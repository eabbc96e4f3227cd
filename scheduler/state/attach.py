"""Attachable volumes per node and per CSI driver, for NodeVolumeLimits.

Upstream's Filter (nodevolumelimits/csi.go) walks, for every node, the
node's pods and their volumes, resolves each to ``<driver>/<volumeHandle>``
and counts the unique ones per driver, adds the node's VolumeAttachments
whose volume no pod there uses, and compares with the CSINode's
``allocatable.count``. Here that count is kept per node as columns aligned
with the node table's rows (``limit``: -1 where the node's CSINode sets no
count for the driver; ``used``: the node's unique volumes of the driver), and
``nodes_using`` names the nodes whose pods use each volume, so that a cycle only
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

The counts are brought up to date by the method that records the change, at
once; a read answers from what is there and changes nothing. They are kept
only while some CSINode sets a count for some driver (:attr:`Attachments.counting`):
while none does, no pod can be refused for its volumes, NodeVolumeLimits
skips every pod without reading a count, and a placement only records the
pod's references (the cycle pays nothing for volumes it cannot be refused).
The first CSINode count to arrive counts every node; when the last goes, the
counts are forgotten (no limit, nothing used).

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
        # class events read that index, so a placement costs an append (:meth:`_take_in_claim_log`)
        self._claim_log: list[tuple[str, str, int]] = []
        self._claim_pv: dict[str, str] = {}               # such a claim -> the PV it named when last seen
        self._pv_claims: dict[str, set[str]] = {}
        self._counted: dict[str, set[str]] = {}           # node -> the unique volumes its pods use
        self._nodes_using: dict[str, set[str]] = {}             # unique volume -> nodes whose pods use it
        self._drivers: dict[str, int] = {}                 # driver -> column
        # driver -> how many CSINodes set a count for it: a pod none of whose drivers is here fits every node
        # without a look at the counts (most clusters: CSI volumes with no attach limit, or none at all); the
        # counts are kept only while it is not empty (:attr:`counting`)
        self.limited: dict[str, int] = {}
        cap = nodes.cap
        self._limit = np.full((cap, 0), -1, dtype=np.int64)   # [cap, drivers]: allocatable.count, -1 none
        self._used = np.zeros((cap, 0), dtype=np.int64)       # [cap, drivers]: unique volumes there
        self._migrated = np.zeros((cap, len(PLUGINS)), dtype=bool)   # [cap, PLUGINS]: the CSINode migrated it
        # [cap, drivers]: limit - used where a count is set, else NO_LIMIT: how many new volumes of the driver
        # the node still takes (Filter's common case is one take of this column)
        self._headroom = np.full((cap, 0), NO_LIMIT, dtype=np.int64)
        # column -> its least headroom over every row (NO_LIMIT: none), kept at every write of the column: a pod
        # with no more new volumes than that fits every node, and Filter has nothing to look at
        self._least: list[int] = []

    # ------------------------------------------------------------------ reads (answer from what is there)

    @property
    def counting(self) -> bool:
        """Are the counts kept? Only while some CSINode sets a count for some driver; otherwise nothing reads
        them, every column holds "no limit, nothing used" and ``nodes_using`` and ``counted`` are empty."""
        return bool(self.limited)

    @property
    def limit(self) -> np.ndarray:
        """int64[cap, drivers]: each node's CSINode count for each driver, -1 where it sets none."""
        return self._limit

    @property
    def used(self) -> np.ndarray:
        """int64[cap, drivers]: the unique volumes of each driver on each node (its pods' and attachments')."""
        return self._used

    @property
    def migrated(self) -> np.ndarray:
        """bool[cap, PLUGINS]: the node's CSINode lists the in-tree plugin as migrated."""
        return self._migrated

    @property
    def nodes_using(self) -> dict[str, set[str]]:
        """Unique volume -> the nodes whose pods use it."""
        return self._nodes_using

    @property
    def headroom(self) -> np.ndarray:
        """int64[cap, drivers]: ``limit - used`` where a count is set, else NO_LIMIT."""
        return self._headroom

    def fits_everywhere(self, c: int, need: int) -> bool:
        """Does every node take ``need`` more volumes of driver column ``c``? O(1): the column's least headroom
        is kept."""
        return need <= self._least[c]

    def volumes_fit_everywhere(self, volumes: list[Resolved]) -> bool:
        """Does every node take ``volumes`` (a pod's, resolved, each of a driver some CSINode limits)? True only
        when that is sure without a look at rows: per driver, the nodes' least headroom is at least the pod's
        count, each volume counted as new on every node. (One a pod on a node uses already is not new there,
        and an in-tree one does not count where its plugin is not migrated: counting them anyway only makes the
        answer stricter.)"""
        need: dict[str, int] = {}
        for _, driver, _ in volumes:
            need[driver] = need.get(driver, 0) + 1
        for driver, n in need.items():
            c = self._drivers.get(driver)
            if c is None or not self.fits_everywhere(c, n):
                return False
        return True

    @property
    def drivers(self) -> dict[str, int]:
        """Driver -> its column."""
        return self._drivers

    @property
    def counted(self) -> dict[str, set[str]]:
        """Node -> the unique volumes its pods use."""
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
        for node in self._nodes_using.get(unique, ()):
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
            self._least.append(NO_LIMIT)
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

    def recount(self, node: str) -> None:
        """Mutates: ``node``'s counts may have changed (or its row is new, or reused): recompute them now, from
        what it holds. Nothing while the counts are not kept (:attr:`counting`)."""
        if self.limited:
            self._write_counts(node)

    def _write_counts(self, node: str) -> None:
        """Recompute ``node``'s counts, its row and ``nodes_using`` from what it holds now."""
        per_driver, counted = self.node_counts(node)
        old = self._counted.get(node, set())
        new = counted
        for u in old - new:
            s = self._nodes_using.get(u)
            if s is not None:
                s.discard(node)
                if not s:
                    del self._nodes_using[u]
        for u in new - old:
            self._nodes_using.setdefault(u, set()).add(node)
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
        before = self._headroom[row].copy()
        self._headroom[row] = NO_LIMIT
        for d, n in limits.items():
            self._headroom[row, self._drivers[d]] = n - per_driver.get(d, 0)
        self._headroom_written(row, before)
        mig = self.migrated_on(node)
        if mig or self._migrated[row].any():
            self._migrated[row] = [p in mig for p in PLUGINS]

    def _headroom_written(self, row: int, before: np.ndarray) -> None:
        """``row``'s headroom was rewritten (it was ``before``): keep each column's least headroom exact. A value
        below the least is the new least; where the row held the least and rose, the column's least is taken
        again over its rows (numpy), which only a rise of a least-headroom node costs."""
        after = self._headroom[row]
        least = self._least
        for c in np.flatnonzero(after != before).tolist():
            v = int(after[c])
            if v < least[c]:
                least[c] = v
            elif int(before[c]) == least[c]:
                least[c] = int(self._headroom[:, c].min())

    def clear_row(self, row: int) -> None:
        """Mutates: the node table freed ``row``: no limit, nothing used, until a node takes it (its
        :meth:`recount`)."""
        if row < self._limit.shape[0]:
            self._limit[row] = -1
            self._used[row] = 0
            self._migrated[row] = False
            before = self._headroom[row].copy()
            self._headroom[row] = NO_LIMIT
            self._headroom_written(row, before)

    def _count_every_node(self) -> None:
        """The counts start being kept (a first CSINode count arrived): count every node that holds a volume
        reference, a VolumeAttachment or a CSINode (the others hold nothing: no limit, nothing used)."""
        for node in dict.fromkeys([*self._refs, *self._va_on, *self.csinodes]):
            self._write_counts(node)

    def _forget_counts(self) -> None:
        """The counts stop being kept (the last CSINode count went): no limit and nothing used anywhere."""
        self._limit[:] = -1
        self._used[:] = 0
        self._migrated[:] = False
        self._headroom[:] = NO_LIMIT
        self._least = [NO_LIMIT] * len(self._least)
        self._counted.clear()
        self._nodes_using.clear()

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
            self._take_in_claim_log()   # a cluster whose claims never change still keeps the log bounded
        if self.limited and not self._count_fresh(node, fresh):
            self._write_counts(node)

    def _count_fresh(self, node: str, fresh: list[Ref]) -> bool:
        """Add the volumes of ``fresh`` references to ``node``'s counts in place, when that is exact: the node
        has a row with columns, no VolumeAttachments (which may name the same volumes) and every new
        volume is a CSI one (an in-tree one counts only if the node migrated its plugin). The common
        placement (a pod with its own CSI volume) then costs a few item writes, not a recount. False: a
        recount is needed."""
        row = self._nodes.row(node)
        if row is None or node in self._va_on or row >= self._used.shape[0]:
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
        nodes_using = self._nodes_using
        for unique, driver in adds.items():
            c = self._col(driver)
            self._used[row, c] += 1
            if self._limit[row, c] >= 0:
                left = int(self._headroom[row, c]) - 1
                self._headroom[row, c] = left
                if left < self._least[c]:
                    self._least[c] = left
            counted.add(unique)
            nodes = nodes_using.get(unique)
            if nodes is None:
                nodes_using[unique] = {node}
            else:
                nodes.add(node)
        return True

    def unplace(self, pod: Pod, node: str) -> None:
        refs = pod.volume_refs
        on = self._refs.get(node)
        if not refs or on is None:
            return
        gone = False
        for ref in refs:
            n = on.get(ref, 0) - 1
            if n > 0:
                on[ref] = n
            else:
                on.pop(ref, None)
                gone = True
            if ref[0] == "claim":
                self._claim_log.append((ref[1], node, -1))
        if not on:
            del self._refs[node]
        if gone:   # a reference other pods there still hold changes no count
            self.recount(node)

    def _take_in_claim_log(self) -> None:
        """Mutates: apply what was logged since to the index of the nodes whose placed pods use each claim
        (``_claim_nodes``: "ns/claim" -> node -> uses); a claim in it is tracked under the volume it names
        (:meth:`_track_claim`). Called by the claim, volume and class events, the index's only readers."""
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
        """Mutates: a PersistentVolumeClaim was added, changed (bound) or deleted: recount the nodes whose pods use
        it."""
        self._take_in_claim_log()
        users = self._claim_nodes.get(key)
        if not users:
            return
        self._untrack_claim(key)
        self._track_claim(key)
        for node in list(users):
            self.recount(node)

    def volume_changed(self, name: str) -> None:
        """Mutates: a PersistentVolume was added, changed or deleted: recount the nodes of its claims and
        attachments."""
        self._take_in_claim_log()
        index = self._claim_nodes
        nodes = {n for key in self._pv_claims.get(name, ()) for n in index.get(key, {})}
        nodes.update(self.attachments[va].node for va in self._va_of_pv.get(name, ()))
        for node in nodes:
            self.recount(node)

    def class_changed(self, name: str) -> None:
        """Mutates: a StorageClass was added or deleted: recount the nodes of placed pods' claims of that class
        (rare)."""
        self._take_in_claim_log()
        nodes: set[str] = set()
        for key, users in self._claim_nodes.items():
            pvc = self._volumes.api_claims.get(key)
            if pvc is not None and pvc.storage_class == name:
                nodes.update(users)
        for node in nodes:
            self.recount(node)

    def set_csinode(self, cn: CSINode) -> None:
        """Mutates: a CSINode added or updated: its node's limits, and the counts start if it sets the first."""
        counting = self.counting
        old = self.csinodes.get(cn.name)
        if old is not None:
            self._limits_counted(old, -1)
        self.csinodes[cn.name] = cn
        self._limits_counted(cn, 1)
        self._limits_changed(counting, cn.name)

    def remove_csinode(self, name: str) -> None:
        """Mutates: a CSINode deleted: its node has no limit; the counts stop if it set the last."""
        counting = self.counting
        old = self.csinodes.pop(name, None)
        if old is not None:
            self._limits_counted(old, -1)
            self._limits_changed(counting, name)

    def _limits_changed(self, was_counting: bool, node: str) -> None:
        """``node``'s CSINode changed: the counts start (every node counted), stop (all forgotten), or go on
        (``node`` recounted, for its limits)."""
        if self.limited and not was_counting:
            self._count_every_node()
        elif was_counting and not self.limited:
            self._forget_counts()
        else:
            self.recount(node)

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
            self.recount(old.node)
        self.recount(va.node)

    def remove_attachment(self, name: str) -> None:
        va = self.attachments.pop(name, None)
        if va is not None:
            self._drop_attachment(va)
            self.recount(va.node)

    def _drop_attachment(self, va: VolumeAttachment) -> None:
        for index, key in ((self._va_on, va.node), (self._va_of_pv, va.pv_name)):
            s = index.get(key)
            if s is not None:
                s.discard(va.name)
                if not s:
                    del index[key]
