"""The extension points, as Protocols a plugin class implements.

A plugin is one class with a ``NAME`` (its upstream name), a constructor
``Plugin(args, handle)``, ``EXTENSION_POINTS`` (a frozenset of the point
names it implements, the keys of :data:`POINTS`) and those points' methods.
The framework builds its per-point plugin lists from the declaration, never
by looking for methods: a misspelt method would otherwise drop its point
without a word. :func:`check_extension_points` holds the declaration against
the methods when a plugin is registered and when a framework is built
(upstream's compile-time ``var _ framework.FilterPlugin = &Plugin{}``).

Filter and Score are vectorized (no Python loop over nodes on the hot
path): they receive ``rows``, an int64 array of node-table row
indices still feasible, and answer for all of them at once. A plugin that
cannot vectorize precomputes per pod in PreFilter and still answers with
arrays.

Shapes, with k = len(rows):

* ``Filter.filter(...) -> FilterResult``: ``passed`` bool[k]; each
  ``Rejection`` carries a reason and a bool[k] mask of the rows it rejects.
* ``Score.score(...) -> int64[k]`` (any range); ``normalize`` maps it to
  0..MAX_NODE_SCORE in place.
"""

from __future__ import annotations

import difflib
import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

import numpy as np

from scheduler.framework.nodetable import NodeTable
from scheduler.framework.status import Code, Status

if TYPE_CHECKING:
    from collections.abc import Collection
    from contextlib import AbstractContextManager

    from scheduler.framework.cycle_state import CycleState
    from scheduler.model import Pod

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


# ---------------------------------------------------------------------------- results

@dataclass(slots=True)
class Rejection:
    """Rows a Filter rejects for one reason ("Insufficient cpu")."""

    reason: str
    mask: np.ndarray                       # bool[k]: True where this reason applies
    code: Code = Code.UNSCHEDULABLE        # or UNSCHEDULABLE_AND_UNRESOLVABLE


@dataclass(slots=True)
class FilterResult:
    passed: np.ndarray                     # bool[k]
    rejections: list[Rejection] = field(default_factory=list)
    error: Status | None = None            # Status(ERROR): the whole cycle fails

    @classmethod
    def all_pass(cls, k: int) -> "FilterResult":
        return cls(np.ones(k, dtype=bool))

    @classmethod
    def reject_all(cls, k: int, reason: str, code: Code = Code.UNSCHEDULABLE) -> "FilterResult":
        return cls(np.zeros(k, dtype=bool), [Rejection(reason, np.ones(k, dtype=bool), code)])

    @classmethod
    def from_mask(cls, ok: np.ndarray, reason: str, code: Code = Code.UNSCHEDULABLE) -> "FilterResult":
        """The common case: one reason for every row that fails."""
        if ok.all():
            return cls(ok)
        return cls(ok, [Rejection(reason, ~ok, code)])


@dataclass(slots=True)
class PreFilterResult:
    """PreFilter may narrow the nodes to consider (NodeAffinity, NodeName). None = all."""

    node_names: frozenset[str] | None = None


@dataclass(slots=True)
class PostFilterResult:
    nominated_node: str = ""


# ---------------------------------------------------------------------------- queueing

class ActionType:
    """framework.ActionType bits: what happened to a resource."""

    ADD = 1
    DELETE = 2
    UPDATE_NODE_ALLOCATABLE = 4
    UPDATE_NODE_LABEL = 8
    UPDATE_NODE_TAINT = 16
    UPDATE_NODE_CONDITION = 32
    UPDATE_NODE_ANNOTATION = 64
    UPDATE_POD_LABEL = 128
    UPDATE_POD_SCALE_DOWN = 256
    UPDATE_POD_TOLERATION = 512
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = 1024
    UPDATE_POD_GENERATED_RESOURCE_CLAIM = 2048
    UPDATE_NODE_DECLARED_FEATURE = 8192     # status.declaredFeatures changed
    UPDATE = (UPDATE_NODE_ALLOCATABLE | UPDATE_NODE_LABEL | UPDATE_NODE_TAINT | UPDATE_NODE_CONDITION
              | UPDATE_NODE_ANNOTATION | UPDATE_POD_LABEL | UPDATE_POD_SCALE_DOWN | UPDATE_POD_TOLERATION
              | UPDATE_POD_SCHEDULING_GATES_ELIMINATED | UPDATE_POD_GENERATED_RESOURCE_CLAIM | 4096
              | UPDATE_NODE_DECLARED_FEATURE)
    ALL = ADD | DELETE | UPDATE


class Resource:
    """framework.EventResource names."""

    POD = "Pod"
    ASSIGNED_POD = "AssignedPod"
    UNSCHEDULED_POD = "UnscheduledPod"
    NODE = "Node"
    PVC = "PersistentVolumeClaim"
    PV = "PersistentVolume"
    STORAGE_CLASS = "StorageClass"
    CSI_NODE = "CSINode"
    VOLUME_ATTACHMENT = "VolumeAttachment"
    CSI_DRIVER = "CSIDriver"
    CSI_STORAGE_CAPACITY = "CSIStorageCapacity"
    POD_GROUP = "PodGroup"
    RESOURCE_CLAIM = "ResourceClaim"
    RESOURCE_SLICE = "ResourceSlice"
    DEVICE_CLASS = "DeviceClass"
    WILDCARD = "*"


class QueueingHint:
    SKIP = 0
    QUEUE = 1


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    resource: str
    action: int
    label: str = ""

    def matches(self, other: "ClusterEvent") -> bool:
        """Does this registered event cover ``other`` (an event that happened)?"""
        if self.resource == Resource.WILDCARD:
            return True
        res = self.resource == other.resource or (
            self.resource == Resource.POD and other.resource in (Resource.ASSIGNED_POD, Resource.UNSCHEDULED_POD))
        return res and bool(self.action & other.action)


# hint(pod, old_obj, new_obj) -> QueueingHint.QUEUE / SKIP
QueueingHintFn = Callable[["Pod", Any, Any], int]


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: QueueingHintFn | None = None


# ---------------------------------------------------------------------------- plugins

@runtime_checkable
class Plugin(Protocol):
    NAME: str


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    def pre_enqueue(self, pod: "Pod") -> Status: ...


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    def sort_key(self, info: Any) -> tuple:
        """Smaller keys pop first (``QueuedPodInfo`` in, a comparable tuple out)."""
        ...


@runtime_checkable
class EnqueueExtensions(Plugin, Protocol):
    def events_to_register(self) -> list[ClusterEventWithHint]: ...


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, state: "CycleState", pod: "Pod", nodes: "NodeTable") -> tuple[PreFilterResult | None, Status]: ...


@runtime_checkable
class PreFilterExtensions(Plugin, Protocol):
    """upstream's PreFilterExtensions (AddPod/RemovePod): preemption's dry runs and nominated pods.

    Update this plugin's PreFilter state in ``state`` as if ``pod_to_add`` were placed on node row
    ``row`` (or ``pod_to_remove`` taken off it); the cache itself (node table, ``handle.counts``) is
    not changed for it. Called only when the plugin's PreFilter ran for ``pod`` and did not Skip.
    Copy-on-write: ``state`` may be a clone that shares entries with other clones, so write a new
    entry (``state.write``) and never mutate arrays read from the old one.
    """

    def add_pod(self, state: "CycleState", pod: "Pod", pod_to_add: "Pod", row: int) -> Status: ...

    def remove_pod(self, state: "CycleState", pod: "Pod", pod_to_remove: "Pod", row: int) -> Status: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: "CycleState", pod: "Pod", nodes: "NodeTable", rows: np.ndarray) -> FilterResult: ...


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    def post_filter(self, state: "CycleState", pod: "Pod", diagnosis: Any) -> tuple[PostFilterResult | None, Status]: ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: "CycleState", pod: "Pod", nodes: "NodeTable", rows: np.ndarray) -> Status: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, state: "CycleState", pod: "Pod", nodes: "NodeTable", rows: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class ScoreNormalizer(Plugin, Protocol):
    def normalize(self, state: "CycleState", pod: "Pod", scores: np.ndarray) -> None:
        """Map ``scores`` (int64[k]) to 0..MAX_NODE_SCORE in place."""
        ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: "CycleState", pod: "Pod", node_name: str) -> Status: ...

    def unreserve(self, state: "CycleState", pod: "Pod", node_name: str) -> None: ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    def permit(self, state: "CycleState", pod: "Pod", node_name: str) -> tuple[Status, float]:
        """Success, a rejection, or Wait with a timeout in seconds."""
        ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    async def pre_bind(self, state: "CycleState", pod: "Pod", node_name: str) -> Status: ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    async def bind(self, state: "CycleState", pod: "Pod", node_name: str) -> Status:
        """Success, Skip (not mine: the next binder), or an error."""
        ...


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    def post_bind(self, state: "CycleState", pod: "Pod", node_name: str) -> None: ...


@runtime_checkable
class GangPlugin(Plugin, Protocol):
    """tandem's group cycle: pods of one gang are scheduled back to back, nothing in between.

    When a popped pod has a gang key, the scheduler takes that gang's other
    pending members out of the queue and runs their cycles consecutively.
    The cycle is synchronous, so no other pod can take room in between, and
    a member that fails makes the plugin reject its waiting siblings, which
    frees their reservations at once: two gangs never hold partial
    reservations at the same time (no deadlock, no hoarding). Upstream's
    workload-aware scheduling (KEP-4671) moves the same way.
    """

    def gang_key(self, pod: "Pod") -> str | None:
        """The pod's gang ("namespace/podgroup"), or None for a pod scheduled alone."""
        ...

    def gang_failed(self, pod: "Pod", status: Status) -> str:
        """A member's cycle failed: reject the waiting siblings; returns the message the members still in
        the queue get (FailedScheduling), or "" when the gang can still be whole without this member
        (quorum reached, or enough untried members left): the group cycle then goes on with the next."""
        ...

    def can_be_whole(self, key: str, unplaceable: "Collection[str]") -> bool:
        """Can gang ``key`` still reach its quorum if the members ``unplaceable`` (uids) get no node? Changes
        nothing: a topology gang's group cycle asks it in each domain it tries."""
        ...

    def reject_gang(self, pod: "Pod", why: str) -> str:
        """``pod`` fits in no domain and its gang cannot be whole without it: reject the waiting siblings, start
        the gang's backoff; returns the message its siblings get (``why``: the pod's own message)."""
        ...

    def give_up(self, key: str, msg: str) -> None:
        """Gang ``key`` cannot be whole now for a reason of its own (no topology domain fits it): reject its
        members waiting at Permit with ``msg`` and start its backoff."""
        ...

    def forget(self, key: str) -> None:
        """Gang ``key`` is gone, its PodGroup and its pods: drop whatever is kept for it."""
        ...

    def trying(self, key: str) -> "AbstractContextManager[None]":
        """While the group cycle tries one domain for gang ``key``: a member's Unreserve, when the try is taken
        back, neither rejects the waiting siblings nor starts a backoff."""
        ...


@runtime_checkable
class BackgroundPlugin(Plugin, Protocol):
    """A plugin with work of its own off the cycle (timeouts, controllers): the App runs ``run()`` as a task
    for the scheduler's lifetime and cancels it at shutdown. It must catch and log its own errors."""

    async def run(self) -> None: ...


@runtime_checkable
class GroupEventsPlugin(Plugin, Protocol):
    """A plugin that hears when a gang changed (tandem): the informer handlers call ``group_changed`` with the gang
    key ("ns/podgroup", or "scheduling.k8s.io/ns/podgroup") when a member pod or the PodGroup itself was added,
    updated or deleted (``Scheduler.group_listeners``; ``handle.pods`` and ``handle.gangs`` already show the
    change). It runs in the informer's handler: O(1), and it must not raise."""

    def group_changed(self, key: str) -> None: ...


# ---------------------------------------------------------------------------- declarations

POINTS: dict[str, type] = {
    "PreEnqueue": PreEnqueuePlugin,
    "QueueSort": QueueSortPlugin,
    "EnqueueExtensions": EnqueueExtensions,
    "PreFilter": PreFilterPlugin,
    "PreFilterExtensions": PreFilterExtensions,   # AddPod/RemovePod; only with PreFilter
    "Filter": FilterPlugin,
    "PostFilter": PostFilterPlugin,
    "PreScore": PreScorePlugin,
    "Score": ScorePlugin,
    "NormalizeScore": ScoreNormalizer,     # upstream's ScoreExtensions; only with Score
    "Reserve": ReservePlugin,              # Reserve and Unreserve
    "Permit": PermitPlugin,
    "PreBind": PreBindPlugin,
    "Bind": BindPlugin,
    "PostBind": PostBindPlugin,
    "Gang": GangPlugin,                    # tandem's group cycle
    "Background": BackgroundPlugin,        # tandem: a task for the scheduler's lifetime
    "GroupEvents": GroupEventsPlugin,      # tandem: a gang's member pod or PodGroup changed
}
"""Extension point name -> the Protocol whose methods a plugin declaring it must define."""

POINT_METHODS: dict[str, tuple[str, ...]] = {
    point: tuple(m for m, v in vars(proto).items() if not m.startswith("_") and callable(v))
    for point, proto in POINTS.items()
}
"""Extension point name -> its method names ("Reserve" -> ("reserve", "unreserve"))."""

CONFIG_POINTS: dict[str, str] = {
    "preEnqueue": "PreEnqueue",
    "queueSort": "QueueSort",
    "preFilter": "PreFilter",
    "filter": "Filter",
    "postFilter": "PostFilter",
    "preScore": "PreScore",
    "score": "Score",
    "reserve": "Reserve",
    "permit": "Permit",
    "preBind": "PreBind",
    "bind": "Bind",
    "postBind": "PostBind",
}
"""The KubeSchedulerConfiguration ``plugins`` fields, in upstream's order -> the extension point each enables."""

_METHOD_POINT = {m: point for point, methods in POINT_METHODS.items() for m in methods}
_ASYNC_METHODS = frozenset(m for m, point in _METHOD_POINT.items()
                           if inspect.iscoroutinefunction(getattr(POINTS[point], m)))
# names a plugin author may reach for, normalized as _squash does: upstream's Go method names
_ALIASES = {"less": "sort_key", "normalizescore": "normalize", "scoreextensions": "normalize"}


def _squash(name: str) -> str:
    return name.replace("_", "").lower()


_SQUASHED = {_squash(m): m for m in _METHOD_POINT} | _ALIASES


def _near_miss(name: str) -> str | None:
    """The extension-point method ``name`` looks like a misspelling of ("scroe" -> "score"), or None."""
    squashed = _squash(name)
    if squashed in _SQUASHED:
        return _SQUASHED[squashed]
    close = difflib.get_close_matches(squashed, _SQUASHED, n=1, cutoff=0.8)
    return _SQUASHED[close[0]] if close else None


def check_extension_points(cls: type) -> frozenset[str]:
    """``cls.EXTENSION_POINTS``, checked against the class's methods; a TypeError naming the plugin and point if
    a declared point's method is missing (or sync where it must be async, or the reverse), or the class defines
    a public method of a point it does not declare or one that looks like a misspelt extension-point method."""
    name = getattr(cls, "NAME", "") or cls.__qualname__
    declared = getattr(cls, "EXTENSION_POINTS", None)
    if not isinstance(declared, frozenset):
        raise TypeError(f"plugin {name}: EXTENSION_POINTS must be a frozenset of extension point names "
                        f"({', '.join(POINTS)}), got {declared!r}")
    unknown = sorted(p for p in declared if p not in POINTS)
    if unknown:
        raise TypeError(f"plugin {name}: unknown extension point {unknown[0]!r} in EXTENSION_POINTS "
                        f"(known: {', '.join(POINTS)})")
    if "NormalizeScore" in declared and "Score" not in declared:
        raise TypeError(f"plugin {name}: declares NormalizeScore without Score")
    if "PreFilterExtensions" in declared and "PreFilter" not in declared:
        raise TypeError(f"plugin {name}: declares PreFilterExtensions without PreFilter")
    for point in sorted(declared):
        for method in POINT_METHODS[point]:
            fn = getattr(cls, method, None)
            if not callable(fn):
                raise TypeError(f"plugin {name}: declares {point} but has no method {method}()")
            if inspect.iscoroutinefunction(fn) != (method in _ASYNC_METHODS):
                want = "async def" if method in _ASYNC_METHODS else "def (not async)"
                raise TypeError(f"plugin {name}: {point} method {method}() must be {want}")
    public = {m for klass in cls.__mro__[:-1] for m, v in vars(klass).items()
           if not m.startswith("_") and callable(v) and not isinstance(v, type)}
    for method in sorted(public):
        point = _METHOD_POINT.get(method)
        if point is not None:
            if point not in declared:
                raise TypeError(f"plugin {name}: defines {method}() but does not declare {point} "
                                f"in EXTENSION_POINTS")
            continue
        like = _near_miss(method)
        if like is not None:
            raise TypeError(f"plugin {name}: method {method}() looks like {like}() of {_METHOD_POINT[like]}; "
                            f"fix the name, or make it private (_{method}) if it is a helper")
    return declared
