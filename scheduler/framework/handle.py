"""What a plugin may reach besides its args: the framework handle.

Plugins import only ``scheduler.framework``, ``scheduler.model`` and numpy;
everything else they need arrives through the Handle given to
their constructor: the cache (node table and pods per node), the API client
(binders, preemption), the event recorder, and the framework itself (for
waiting pods). Tests build one with only what the plugin under test uses.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from scheduler.cache import Cache, NodeTable


class Handle:
    def __init__(self, cache: "Cache", client: Any = None, scheduler_name: str = "tandem-scheduler",
                 events: Any = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.cache = cache
        self.client = client              # scheduler.apiclient.APIClient (async bind, patch, delete)
        self.scheduler_name = scheduler_name
        self.events = events              # scheduler.observe.EventRecorder
        self.clock = clock
        self.framework: Any = None        # set by the framework that owns this handle
        # set by the scheduler (shared across profiles; read-only for plugins):
        self.pods: dict[str, Any] = {}               # uid -> latest scheduler.model.Pod the informer saw
        self.pod_groups: dict[str, dict] = {}        # "ns/name" -> PodGroup object as the API returned it
        self.group_pods: dict[str, set[str]] = {}    # "ns/podgroup" -> uids of the pods that name it
        self.activate: Callable[[list[str]], None] = lambda uids: None   # move pods to activeQ now
        self.queued_group_size: Callable[[str], int] = lambda key: 0

    @property
    def nodes(self) -> "NodeTable":
        return self.cache.nodes
