"""What a plugin may reach besides its args: the framework handle.

Plugins import only ``scheduler.framework``, ``scheduler.model`` and numpy
(docs/architecture.md, enforced by tests/unit/test_boundaries.py);
everything else they need arrives through the Handle given to their
constructor: read-only views of the cache (node table, pods per node, the
placed-pods table, nominations, the gang index, the run index, the PersistentVolumeClaims,
PersistentVolumes and StorageClasses, the attachable volumes per node and the
inline disks placed pods use), the one clock (now, timers, sleeps),
the API client (binders, preemption), the event recorder, the pods the
informer saw, the spread selectors (Services and controllers, for
PodTopologySpread's system defaults), the PodDisruptionBudgets, the eviction
executor, and the framework itself (waiting pods, dry runs).

A Handle is built complete and never changes: every field is a constructor
argument, ``__setattr__`` refuses any later assignment, and ``__slots__``
leaves no room for a new attribute (tests/unit/test_handle.py). The one
circle, a framework that needs its handle to build its plugins and a handle
that names its framework, is broken by :meth:`with_framework`: the scheduler
(or a test) builds a handle from the shared pieces, and the Framework derives
from it the handle its plugins get, which names that framework. That mirrors
upstream, where the framework is the Handle (frameworkImpl implements
framework.Handle) and NewFramework receives the shared pieces as options.

The only lasting writes a plugin makes to scheduling state go through the
methods below that say they mutate (:meth:`assume`, :meth:`forget`,
:meth:`lift`, :meth:`restore`: gang preemption's what-if plan;
:meth:`follow_run_label`, NodeColocation's choice of run label, at
construction). One exception, undone before it returns: preemption's dry runs
(scheduler/framework/preemption/) charge and uncharge rows of the node table
(``nodes.requested``, ``nodes.charge``) while they evaluate victims. The client, the recorder
and the executor are typed by the protocols here, the part of each that the
plugins and the framework use, so the framework names no core module for them.
Tests build one with only what the plugin under test uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from scheduler.framework.clock import Clock

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable, PodTable
    from scheduler.framework.podcounts import PodCounts
    from scheduler.model import Pod, PodDisruptionBudget
    from scheduler.state.attach import Attachments
    from scheduler.state.cache import Cache, PodState
    from scheduler.state.devices import Devices
    from scheduler.state.disks import DiskIndex
    from scheduler.state.gangs import GangIndex
    from scheduler.state.moves import Moves
    from scheduler.state.nominations import Nominations
    from scheduler.state.runs import RunIndex
    from scheduler.state.spreadselectors import SpreadSelectors
    from scheduler.state.volumes import Volumes


class Client(Protocol):
    """The API calls plugins make (scheduler.apiclient.APIClient); errors are its typed exceptions."""

    async def get(self, path: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]: ...

    async def create(self, path: str, body: Any) -> dict[str, Any]: ...

    async def update(self, path: str, body: Any) -> dict[str, Any]: ...

    async def patch(self, path: str, patch: Any, content_type: str = ...) -> dict[str, Any]: ...

    async def bind(self, namespace: str, name: str, uid: str | None, node: str) -> None: ...

    async def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]: ...

    async def delete_pod(self, namespace: str, name: str, uid: str | None = None,
                         grace_seconds: int | None = None) -> Any: ...


class EventRecorder(Protocol):
    """events.k8s.io/v1 events as one profile reports them (scheduler.observe.ProfileRecorder)."""

    def eventf(self, regarding: Any, related: Any, type_: str, reason: str, action: str, note: str,
               *args: Any) -> None: ...


class FrameworkView(Protocol):
    """The part of a profile's Framework (scheduler/framework/runtime.py) that plugins call: waiting pods, the
    gang plugin, and the filter and score runs preemption's dry runs repeat. A protocol, so the handle names
    no runtime module (the runtime imports the handle)."""

    name: str
    gang: Any

    def get_waiting_pod(self, uid: str) -> Any: ...

    def iterate_waiting_pods(self) -> list[Any]: ...

    def extended(self, state: Any) -> list[Any]: ...

    def run_pre_filter(self, state: Any, pod: "Pod") -> Any: ...

    def run_filter_with_nominated(self, state: Any, pod: "Pod", rows: Any, diag: Any) -> Any: ...

    def run_add_pod(self, state: Any, pod: "Pod", pod_to_add: "Pod", row: int,
                    plugins: list[Any] | None = None) -> Any: ...

    def run_remove_pod(self, state: Any, pod: "Pod", pod_to_remove: "Pod", row: int,
                       plugins: list[Any] | None = None) -> Any: ...

    def run_score(self, state: Any, pod: "Pod", rows: Any) -> Any: ...


class Evictions(Protocol):
    """The eviction executor (scheduler/executor.py): what preemption does off the scheduling cycle."""

    def is_preempting(self, uid: str) -> bool: ...

    def attempted(self) -> None: ...

    def preempt(self, fw: FrameworkView, pod: "Pod", node: str, victims: list["Pod"], sync: bool = False) -> None: ...

    def preempt_group(self, fw: FrameworkView, plan: list[tuple["Pod", str, list["Pod"]]],
                      sync: bool = False) -> None: ...

    def withdraw(self, pods: list["Pod"]) -> None: ...


def _activate_none(uids: list[str]) -> None:
    """Where no queue is fed (tests of one plugin): activating a pod does nothing."""


_EMPTY: Mapping[str, Any] = MappingProxyType({})   # the default views: nothing, and nothing can be added


class Handle:
    __slots__ = ("_cache", "client", "scheduler_name", "events", "clock", "pods", "activate", "spread_selectors",
                 "preemption", "pdbs", "seed", "framework")

    _cache: "Cache"
    client: Client | None
    scheduler_name: str
    events: EventRecorder | None
    clock: Clock
    pods: Mapping[str, "Pod"]
    activate: Callable[[list[str]], None]
    spread_selectors: "SpreadSelectors | None"
    preemption: Evictions | None
    pdbs: Mapping[str, "PodDisruptionBudget"]
    seed: int | None
    framework: "FrameworkView | None"

    def __init__(self, cache: "Cache", client: Client | None = None, scheduler_name: str = "tandem-scheduler",
                 events: EventRecorder | None = None, *, clock: Clock,
                 pods: Mapping[str, "Pod"] = _EMPTY, activate: Callable[[list[str]], None] = _activate_none,
                 spread_selectors: "SpreadSelectors | None" = None, preemption: Evictions | None = None,
                 pdbs: Mapping[str, "PodDisruptionBudget"] = _EMPTY, seed: int | None = None,
                 framework: "FrameworkView | None" = None) -> None:
        init = object.__setattr__   # the only writes: __setattr__ below refuses every later one
        init(self, "_cache", cache)
        init(self, "client", client)                  # async bind, get, create, patch, delete
        init(self, "scheduler_name", scheduler_name)
        init(self, "events", events)                  # the profile's recorder (reportingController = its name)
        # the scheduler's one clock: ``clock()`` is now, ``clock.call_later`` and ``clock.sleep`` fire on it
        init(self, "clock", clock)
        # shared by every profile (read-only here): uid -> latest Pod the informer saw, and "move these pods
        # to activeQ now"
        init(self, "pods", pods)
        init(self, "activate", activate)
        # what selects a pod for PodTopologySpread's system default constraints (upstream
        # helper.DefaultSelector): default_selector(namespace, labels, owners), and a version that moves
        # when an answer may; None where no scheduler feeds one (tests build handles without)
        init(self, "spread_selectors", spread_selectors)
        # preemption: the eviction executor (None where no scheduler runs one), the PodDisruptionBudgets by
        # "ns/name" (policy/v1, from their informer), and a seed for its random offset
        init(self, "preemption", preemption)
        init(self, "pdbs", pdbs)
        init(self, "seed", seed)
        # the framework whose plugins hold this handle (waiting pods, dry runs); None until with_framework
        init(self, "framework", framework)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"Handle.{name} is set at construction only (a Handle never changes)")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"Handle.{name} is set at construction only (a Handle never changes)")

    def with_framework(self, framework: FrameworkView) -> "Handle":
        """This handle's pieces, and ``framework``: the handle a Framework gives its plugins."""
        return Handle(self._cache, self.client, self.scheduler_name, self.events, clock=self.clock, pods=self.pods,
                      activate=self.activate, spread_selectors=self.spread_selectors, preemption=self.preemption,
                      pdbs=self.pdbs, seed=self.seed, framework=framework)

    # ------------------------------------------------------------------ read-only views of the cache

    @property
    def nodes(self) -> "NodeTable":
        return self._cache.nodes

    @property
    def counts(self) -> "PodCounts":
        """Per-node counts of placed pods by selection, and placed pods' affinity terms (read-only here)."""
        return self._cache.counts

    @property
    def volumes(self) -> "Volumes":
        """PersistentVolumeClaims, PersistentVolumes and StorageClasses, from their informers (read-only here)."""
        return self._cache.volumes

    @property
    def devices(self) -> "Devices":
        """DRA's DeviceClasses, ResourceSlices and ResourceClaims, the devices in use, and the allocator (the
        plugin marks allocations in flight and assumes what it wrote through it)."""
        return self._cache.devices

    @property
    def attachments(self) -> "Attachments":
        """Attachable volumes per node and CSI driver, CSINodes and VolumeAttachments (read-only here)."""
        return self._cache.attachments

    @property
    def disks(self) -> "DiskIndex":
        """The inline disks (GCE PD, EBS, RBD, iSCSI) placed pods use, per node (read-only here)."""
        return self._cache.disks

    @property
    def gangs(self) -> "GangIndex":
        """The one gang index: PodGroup records, their pods, their members on nodes (read-only here)."""
        return self._cache.gangs

    @property
    def runs(self) -> "RunIndex":
        """Pipeline runs and shared workspace claims -> the node each holds, finished pods included (read-only
        here; :meth:`follow_run_label` chooses the label)."""
        return self._cache.runs

    @property
    def pod_table(self) -> "PodTable":
        """The placed pods as columns (preemption's dry runs; read-only here)."""
        return self._cache.pod_table

    @property
    def placed(self) -> Mapping[str, "PodState"]:
        """uid -> every pod bound or assumed to a node, with its node."""
        return self._cache.pods

    @property
    def nominations(self) -> "Nominations":
        """Pods nominated to a node by preemption (read-only here: the executor nominates)."""
        return self._cache.nominations

    @property
    def moves(self) -> "Moves":
        """The rebalancer's moves: the nodes an owner's pods may not go back to (read-only here)."""
        return self._cache.moves

    @property
    def claim_users(self) -> Mapping[str, int]:
        """"ns/claim" -> how many placed pods use that PersistentVolumeClaim."""
        return self._cache.claim_users

    def pods_on(self, node: str) -> Iterator["Pod"]:
        """The pods bound or assumed to ``node``."""
        return self._cache.pods_on(node)

    def follow_run_label(self, label: str) -> None:
        """Mutates: make the run index group pods by ``label`` (NodeColocation's constructor; idempotent)."""
        self._cache.follow_run_label(label)

    # ------------------------------------------------------------------ what-if changes (they mutate the cache)

    def assume(self, pod: "Pod", node: str) -> None:
        """Mutates: charge ``pod`` to ``node`` as assumed, for a what-if; :meth:`forget` takes it back."""
        self._cache.assume(pod, node)

    def forget(self, pod: "Pod") -> None:
        """Mutates: take back an assumed pod's charge."""
        self._cache.forget(pod)

    def lift(self, uid: str) -> "PodState | None":
        """Mutates: take a placed pod off its node for a what-if; :meth:`restore` puts it back."""
        return self._cache.lift(uid)

    def restore(self, st: "PodState") -> None:
        """Mutates: put a pod :meth:`lift` took off back on its node."""
        self._cache.restore(st)
