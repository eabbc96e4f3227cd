"""What a plugin may reach besides its args: the framework handle.

Plugins import only ``scheduler.framework``, ``scheduler.model`` and numpy
(docs/architecture.md, enforced by tests/unit/test_boundaries.py);
everything else they need arrives through the Handle given to their
constructor: the cache (node table, pods per node, the gang index, the
PersistentVolumeClaims, PersistentVolumes and StorageClasses), the
one clock (now, timers, sleeps), the API client (binders, preemption), the
event recorder, the spread selectors (Services and controllers, for
PodTopologySpread's system defaults), and the framework itself (for
waiting pods). Tests build
one with only what the plugin under test uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from scheduler.framework.clock import Clock

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable
    from scheduler.framework.podcounts import PodCounts
    from scheduler.state.cache import Cache
    from scheduler.state.gangs import GangIndex
    from scheduler.state.spreadselectors import SpreadSelectors
    from scheduler.state.volumes import Volumes


class Handle:
    def __init__(self, cache: "Cache", client: Any = None, scheduler_name: str = "tandem-scheduler",
                 events: Any = None, *, clock: Clock) -> None:
        self.cache = cache
        self.client = client              # scheduler.apiclient.APIClient (async bind, patch, delete)
        self.scheduler_name = scheduler_name
        self.events = events              # scheduler.observe.EventRecorder
        # the scheduler's one clock: ``clock()`` is now, ``clock.call_later`` and ``clock.sleep`` fire on it
        self.clock: Clock = clock
        self.framework: Any = None        # set by the framework that owns this handle
        # set by the scheduler (shared across profiles; read-only for plugins):
        self.pods: dict[str, Any] = {}               # uid -> latest scheduler.model.Pod the informer saw
        self.activate: Callable[[list[str]], None] = lambda uids: None   # move pods to activeQ now
        # what selects a pod for PodTopologySpread's system default constraints (upstream
        # helper.DefaultSelector): default_selector(namespace, labels, owners), and a version that moves
        # when an answer may; None where no scheduler feeds one (tests build handles without)
        self.spread_selectors: "SpreadSelectors | None" = None
        # preemption: the eviction executor (scheduler/preemption.py; None where no scheduler runs one), the
        # PodDisruptionBudgets by "ns/name" (policy/v1, from their informer), and a seed for its random offset
        self.preemption: Any = None
        self.pdbs: dict[str, Any] = {}
        self.seed: int | None = None

    @property
    def nodes(self) -> "NodeTable":
        return self.cache.nodes

    @property
    def counts(self) -> "PodCounts":
        """Per-node counts of placed pods by selection, and placed pods' affinity terms (read-only here)."""
        return self.cache.counts

    @property
    def volumes(self) -> "Volumes":
        """PersistentVolumeClaims, PersistentVolumes and StorageClasses, from their informers (read-only here)."""
        return self.cache.volumes

    @property
    def gangs(self) -> "GangIndex":
        """The one gang index: PodGroup records, their pods, their members on nodes (read-only here)."""
        return self.cache.gangs
