"""The disruption controller: PodDisruptionBudget status, as kube-controller-manager keeps it.

A preemption or drain that respects budgets reads ``status.disruptionsAllowed``;
on a real cluster kube-controller-manager's disruption controller keeps it,
so the stand-in must too for such tests to mean what they would there. What
it writes, following ``pkg/controller/disruption/disruption.go`` (trySync,
getExpectedPodCount, countHealthyPods, buildDisruptedPodMap, updatePdbStatus,
failSafe) and component-helpers' ``UpdateDisruptionAllowedCondition``:

* **Pods** are those of the budget's namespace that ``spec.selector``
  selects, in any phase: policy/v1's null selector selects none, ``{}``
  every pod.
* ``currentHealthy``: selected pods that are Ready (condition Ready=True),
  not being deleted (no deletionTimestamp) and not in ``disruptedPods``.
* ``expectedPods`` and ``desiredHealthy``: with an integer ``minAvailable``,
  the number of selected pods and that integer. With a percentage
  ``minAvailable`` or any ``maxUnavailable``, the sum of the scale
  (``spec.replicas``) of the selected pods' controllers, each counted once,
  and the percentage of it rounded up (``desiredHealthy`` is then that sum
  minus ``maxUnavailable``, at least 0). Controllers are found as upstream's
  finders find them: a ReplicationController, the Deployment that controls
  a ReplicaSet, a ReplicaSet, a StatefulSet, else the kind's scale
  subresource (here: a served ReplicaSet, StatefulSet or
  ReplicationController; the stand-in serves no Deployments, so a
  ReplicaSet controlled by one counts with its own scale, which is what the
  scale subresource gives upstream when that Deployment is not found). Pods
  without a controller are left out of the sum (upstream warns, with an
  UnmanagedPods event, and goes on).
* ``disruptionsAllowed``: ``currentHealthy - desiredHealthy``, and 0 while
  that is not positive or while ``expectedPods`` is 0.
* The ``DisruptionAllowed`` condition: True with reason SufficientPods when
  disruptions are allowed, False with InsufficientPods when not.
  ``observedGeneration`` is the budget's generation.
* A sync that fails (a selector that does not parse, a percentage that is
  not one, a pod whose controller cannot be found or has no scale) leaves
  the status as it was except ``disruptionsAllowed: 0`` and the condition
  False with reason SyncFailed and the error as its message (failSafe).
* ``disruptedPods`` is filled by the eviction subresource
  (:mod:`bench.simcluster.eviction`), which spends a disruption and records
  the pod before deleting it; entries are kept as upstream keeps them: for
  selected pods not being deleted, until two minutes (DeletionTimeout)
  after their time, and looked at again then.

A budget is synced when it changes, when a pod it selects (or selected
before a relabel) changes, and when a ReplicationController, ReplicaSet or
StatefulSet of its namespace changes. Upstream does not watch controllers:
their scale changes reach it through the pods their controllers then create
or delete. The stand-in runs a ReplicaSet controller
(:mod:`bench.simcluster.replicasets`) but none for ReplicationControllers
or StatefulSets, whose scale changes would go unseen: it looks itself.

Not simulated: the controller's Events (NoPods, UnmanagedPods, ...), the
cleanup of stale DisruptionTarget pod conditions, scale subresources of
kinds the stand-in does not serve (a pod controlled by one fails the sync
with "no matches for kind").

Like the node agent it reads the store directly (cursors over the tables,
not HTTP; see :mod:`bench.simcluster.looping`) and writes status through
the store, so watchers see MODIFIED events as they would from
kube-controller-manager's UpdateStatus. It must never import ``scheduler/``
or ``plugins/``.
"""

from __future__ import annotations

import copy
import heapq
import logging
import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

from bench.simcluster import errors
from bench.simcluster.looping import StoreLoop
from bench.simcluster.resources import RESOURCES, ResourceType, lookup
from bench.simcluster.selectors import NOTHING, LabelSelector, SelectorError, label_selector_from_object
from bench.simcluster.store import DELETED, MATCH_ALL, Entry, Event, Key, Store, Watcher, rfc3339

log = logging.getLogger("simcluster.disruption")

PODS = lookup("", "v1", "pods")
PDBS = lookup("policy", "v1", "poddisruptionbudgets")
CONTROLLERS = (lookup("", "v1", "replicationcontrollers"), lookup("apps", "v1", "replicasets"),
               lookup("apps", "v1", "statefulsets"))

DISRUPTION_ALLOWED = "DisruptionAllowed"
SUFFICIENT_PODS = "SufficientPods"
INSUFFICIENT_PODS = "InsufficientPods"
SYNC_FAILED = "SyncFailed"

DELETION_TIMEOUT = 120.0  # seconds an eviction's disruptedPods entry waits for the pod's deletion
RETRY_AFTER = 1.0         # seconds before a budget whose status write failed is synced again

# the kinds whose scale subresource upstream reads (each implements it in a real cluster)
_SCALABLE = frozenset({("", "ReplicationController"), ("apps", "ReplicaSet"), ("apps", "StatefulSet"),
                       ("apps", "Deployment")})
_APPS_GROUPS = ("apps", "extensions")  # what verifyGroupKind accepts for ReplicaSets and Deployments
_SERVED: dict[tuple[str, str], ResourceType] = {(r.group, r.kind): r for r in RESOURCES if r.storage is None}
_ATOI = re.compile(r"[+-]?[0-9]+")


class SyncError(Exception):
    """A budget's status cannot be computed; ``str(err)`` is the SyncFailed condition's message."""


# ---------------------------------------------------------------------------- what a pod contributes

@dataclass(frozen=True, slots=True)
class PodFacts:
    """What the disruption controller reads of one pod."""

    name: str
    terminating: bool                 # has a deletionTimestamp
    ready: bool                       # condition Ready is True
    controller: dict[str, Any] | None  # the ownerReference with controller: true


def pod_facts(entry: Entry) -> PodFacts:
    # a pod planted with admit=False may hold anything: what does not parse counts as absent
    pod = entry.obj()
    meta = _dict(pod.get("metadata"))
    conditions = _dict(pod.get("status")).get("conditions")
    ready = isinstance(conditions, list) and any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return PodFacts(entry.key[1], bool(meta.get("deletionTimestamp")), ready, controller_of(meta))


def controller_of(meta: dict[str, Any]) -> dict[str, Any] | None:
    """metav1.GetControllerOf: the first owner reference that is the controller."""
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


# ---------------------------------------------------------------------------- the status numbers

@dataclass(frozen=True, slots=True)
class Counts:
    """One sync's result: the numbers of the status, and when to look again."""

    expected_pods: int
    desired_healthy: int
    current_healthy: int
    disrupted_pods: dict[str, str] = field(default_factory=dict)  # pod name -> eviction time (RFC 3339)
    recheck: float | None = None  # clock time an entry of disrupted_pods expires

    @property
    def disruptions_allowed(self) -> int:
        # expectedPods 0 allows nothing: a budget whose first pods appear before its next sync stays safe
        if self.expected_pods <= 0:
            return 0
        return max(0, self.current_healthy - self.desired_healthy)


def budget_selector(pdb: dict[str, Any]) -> LabelSelector:
    """The budget's pod selector (LabelSelectorAsSelector); raises SyncError when it does not parse."""
    selector = _dict(pdb.get("spec")).get("selector")
    if selector is not None and not isinstance(selector, dict):
        raise SyncError("invalid label selector: expected an object")
    try:
        return label_selector_from_object(selector)
    except SelectorError as exc:
        raise SyncError(str(exc)) from None


def count(store: Store, pdb: dict[str, Any], now: float,
          facts: Callable[[Entry], PodFacts] = pod_facts) -> Counts:
    """trySync's numbers for ``pdb`` at clock time ``now``; raises SyncError as trySync fails."""
    ns = pdb["metadata"]["namespace"]
    selector = budget_selector(pdb)
    entries = [] if selector is NOTHING else store.list(PODS, ns, lambda e: selector(e.labels)).entries
    pods = [facts(e) for e in entries]
    expected, desired = _expected_and_desired(store, ns, _dict(pdb.get("spec")), pods)
    disrupted, recheck = _disrupted_pods(pdb, pods, now)
    healthy = sum(1 for p in pods if p.ready and not p.terminating and p.name not in disrupted)
    return Counts(expected, desired, healthy, disrupted, recheck)


def _expected_and_desired(store: Store, ns: str, spec: dict[str, Any], pods: list[PodFacts]) -> tuple[int, int]:
    """getExpectedPodCount: (expectedPods, desiredHealthy)."""
    max_unavailable, min_available = spec.get("maxUnavailable"), spec.get("minAvailable")
    if max_unavailable is not None:
        expected = _expected_scale(store, ns, pods)
        return expected, max(0, expected - _scaled(max_unavailable, expected))
    if min_available is not None:
        if _is_int(min_available):
            return len(pods), min_available
        expected = _expected_scale(store, ns, pods)
        return expected, _scaled(min_available, expected)
    return 0, 0


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _scaled(value: Any, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent, rounding up."""
    if _is_int(value):
        return value
    if not isinstance(value, str):
        raise SyncError("invalid value for IntOrString: invalid type: neither int nor percentage")
    if not value.endswith("%"):
        raise SyncError("invalid value for IntOrString: invalid type: string is not a percentage")
    digits = value[:-1]
    if not _ATOI.fullmatch(digits):
        raise SyncError(f'invalid value for IntOrString: invalid value "{value}": '
                        f'strconv.Atoi: parsing "{digits}": invalid syntax')
    return math.ceil(int(digits) * total / 100)


def _expected_scale(store: Store, ns: str, pods: list[PodFacts]) -> int:
    """getExpectedScale: the sum of the scales of the pods' controllers, each counted once."""
    scales: dict[str, int] = {}
    for pod in pods:
        ref = pod.controller
        if ref is None:
            continue  # an unmanaged pod: upstream records an UnmanagedPods event and leaves it out
        if ref.get("uid") in scales:
            continue
        found = _controller_scale(store, ns, ref)
        if found is None:
            raise SyncError(f'found no controllers for pod "{pod.name}"')
        scales[found[0]] = found[1]
    return sum(scales.values())


def _controller_scale(store: Store, ns: str, ref: dict[str, Any]) -> tuple[str, int] | None:
    """(uid, replicas) of the controller ``ref`` names, trying upstream's finders in their order."""
    group, version = _group_version(ref.get("apiVersion"))
    kind, name, uid = ref.get("kind"), ref.get("name"), ref.get("uid")
    if kind == "ReplicationController" and group == "":
        found = _scale_of(store, ("", kind), ns, name, uid)
        if found is not None:
            return found
    if kind == "ReplicaSet" and group in _APPS_GROUPS:
        rs = _get(store, ("apps", kind), ns, name, uid)
        if rs is not None:
            owner = controller_of(_dict(rs.get("metadata")))
            if owner is None or owner.get("kind") != "Deployment":
                return uid, _replicas(rs)                                   # getPodReplicaSet
            if _group_version(owner.get("apiVersion"))[0] in _APPS_GROUPS:  # getPodDeployment
                found = _scale_of(store, ("apps", "Deployment"), ns, owner.get("name"), owner.get("uid"))
                if found is not None:
                    return found
    if kind == "StatefulSet" and group == "apps":
        found = _scale_of(store, ("apps", kind), ns, name, uid)
        if found is not None:
            return found
    # getScaleController: the scale subresource of whatever kind it is
    rt = _SERVED.get((group, kind))
    if rt is None:
        gv = f"{group}/{version}" if group else version
        raise SyncError(f'no matches for kind "{kind}" in version "{gv}"')
    if (group, kind) not in _SCALABLE:
        raise SyncError(f"{rt.qualified()} does not implement the scale subresource")
    return _scale_of(store, (group, kind), ns, name, uid)


def _group_version(api_version: Any) -> tuple[str, str]:
    """schema.ParseGroupVersion."""
    gv = api_version if isinstance(api_version, str) else ""
    if gv in ("", "/"):
        return "", ""
    if gv.count("/") > 1:
        raise SyncError(f"unexpected GroupVersion string: {gv}")
    group, _, version = gv.rpartition("/")
    return group, version


def _get(store: Store, group_kind: tuple[str, str], ns: str, name: Any, uid: Any) -> dict[str, Any] | None:
    """The object of that kind, name and uid, if the stand-in serves the kind and holds it."""
    rt = _SERVED.get(group_kind)
    if rt is None or not isinstance(name, str):
        return None
    obj = store.get_obj(rt, ns, name)
    if obj is None or obj["metadata"].get("uid") != uid:
        return None
    return obj


def _scale_of(store: Store, group_kind: tuple[str, str], ns: str, name: Any, uid: Any) -> tuple[str, int] | None:
    obj = _get(store, group_kind, ns, name, uid)
    return None if obj is None else (uid, _replicas(obj))


def _replicas(obj: dict[str, Any]) -> int:
    replicas = _dict(obj.get("spec")).get("replicas", 1)  # defaulted to 1 on every write
    return replicas if _is_int(replicas) else 0


def _disrupted_pods(pdb: dict[str, Any], pods: list[PodFacts], now: float) -> tuple[dict[str, str], float | None]:
    """buildDisruptedPodMap: the entries still due, and when the first of them expires."""
    recorded = _dict(pdb.get("status")).get("disruptedPods")
    if not isinstance(recorded, dict) or not recorded:
        return {}, None
    kept: dict[str, str] = {}
    recheck: float | None = None
    for pod in pods:
        if pod.terminating or pod.name not in recorded:
            continue
        at = _parse_time(recorded[pod.name])
        if at is None:
            continue
        expires = at + DELETION_TIMEOUT
        if expires < now:
            continue  # the eviction never led to a delete: the pod counts again
        kept[pod.name] = recorded[pod.name]
        recheck = expires if recheck is None else min(recheck, expires)
    return kept, recheck


def _parse_time(value: Any) -> float | None:
    try:
        return datetime.fromisoformat(value).timestamp()
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------------------- the status written

def status_update(pdb: dict[str, Any], counts: Counts, now: float) -> dict[str, Any] | None:
    """updatePdbStatus: the status to write, or None when the stored one is up to date."""
    old = _dict(pdb.get("status"))
    generation = pdb["metadata"].get("generation") or 0
    allowed = counts.disruptions_allowed
    if (old.get("currentHealthy", 0) == counts.current_healthy
            and old.get("desiredHealthy", 0) == counts.desired_healthy
            and old.get("expectedPods", 0) == counts.expected_pods
            and old.get("disruptionsAllowed", 0) == allowed
            and (old.get("disruptedPods") or {}) == counts.disrupted_pods
            and old.get("observedGeneration", 0) == generation
            and _condition_up_to_date(old, allowed)):
        return None
    status: dict[str, Any] = {}
    if generation:
        status["observedGeneration"] = generation
    if counts.disrupted_pods:
        status["disruptedPods"] = dict(counts.disrupted_pods)
    status.update(disruptionsAllowed=allowed, currentHealthy=counts.current_healthy,
                  desiredHealthy=counts.desired_healthy, expectedPods=counts.expected_pods)
    status["conditions"] = _conditions(old)
    update_allowed_condition(status, now)
    return status


def fail_safe(pdb: dict[str, Any], message: str, now: float) -> dict[str, Any]:
    """failSafe: the stored status with no disruptions allowed and the condition saying why."""
    old = pdb.get("status")
    status = copy.deepcopy(old) if isinstance(old, dict) else {}
    status["disruptionsAllowed"] = 0
    conditions = _conditions(status)
    observed = status.get("observedGeneration")
    _set_condition(conditions, "False", SYNC_FAILED, message, observed if _is_int(observed) else 0, now)
    status["conditions"] = conditions
    return status


def update_allowed_condition(status: dict[str, Any], now: float) -> None:
    """pdbhelper.UpdateDisruptionAllowedCondition: the condition as ``disruptionsAllowed`` says, at the
    status's observedGeneration (what the eviction subresource writes when it spends the last disruption)."""
    conditions = _conditions(status)
    observed = status.get("observedGeneration")
    observed = observed if _is_int(observed) else 0
    if (status.get("disruptionsAllowed") or 0) > 0:
        _set_condition(conditions, "True", SUFFICIENT_PODS, "", observed, now)
    else:
        _set_condition(conditions, "False", INSUFFICIENT_PODS, "", observed, now)
    status["conditions"] = conditions


def _condition_up_to_date(status: dict[str, Any], allowed: int) -> bool:
    """pdbhelper.ConditionsAreUpToDate (its generation check is the caller's)."""
    cond = next((c for c in _conditions(status) if c.get("type") == DISRUPTION_ALLOWED), None)
    if cond is None:
        return False
    if allowed > 0:
        return cond.get("status") == "True" and cond.get("reason") == SUFFICIENT_PODS
    return cond.get("status") == "False" and cond.get("reason") == INSUFFICIENT_PODS


def _conditions(status: dict[str, Any]) -> list[dict[str, Any]]:
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return []
    return [copy.deepcopy(c) for c in conditions if isinstance(c, dict)]


def _set_condition(conditions: list[dict[str, Any]], status: str, reason: str, message: str,
                   generation: int, now: float) -> None:
    """apimeta.SetStatusCondition for DisruptionAllowed: the transition time moves only with the status."""
    for c in conditions:
        if c.get("type") == DISRUPTION_ALLOWED:
            if c.get("status") != status:
                c["status"] = status
                c["lastTransitionTime"] = rfc3339(now)
            c["reason"], c["message"] = reason, message
            if generation:
                c["observedGeneration"] = generation
            else:
                c.pop("observedGeneration", None)  # omitempty
            return
    c = {"type": DISRUPTION_ALLOWED, "status": status}
    if generation:
        c["observedGeneration"] = generation
    c.update(lastTransitionTime=rfc3339(now), reason=reason, message=message)
    conditions.append(c)


# ---------------------------------------------------------------------------- the controller

@dataclass(slots=True)
class _Cursors:
    budgets: Watcher
    pods: Watcher
    controllers: list[Watcher]


class DisruptionController(StoreLoop):
    """Keeps every PodDisruptionBudget's status; started and stopped by :class:`SimCluster`."""

    def __init__(self, store: Store, tick: float = 0.02) -> None:
        super().__init__("simcluster-disruption-controller", tick, log)
        self.store = store
        self._selectors: dict[str, dict[str, LabelSelector | None]] = {}  # ns -> budget -> selector (None: bad)
        self._dirty: set[Key] = set()
        self._recheck: list[tuple[float, Key]] = []  # (clock time, budget)
        self._recheck_at: dict[Key, float] = {}      # the one pending recheck of a budget, as upstream's queue
        self._facts: dict[Key, tuple[int, PodFacts]] = {}  # pod -> (resourceVersion, facts), parsed once
        self._caught_up_rv = -1
        self.syncs = 0
        self.writes = 0

    def caught_up(self) -> bool:
        """Whether every write to the store so far has been seen, and every budget it touched synced.

        For tests that must tell "the controller reacted to this change" from "it happened to
        sync anyway": they wait for this before making the change.
        """
        return self._caught_up_rv == self.store.rv

    # ------------------------------------------------------------------ loop

    def _step(self, cursors: _Cursors) -> None:
        self._drain(cursors)
        drained = self.store.rv
        self._due(self.store.clock())
        self._sync_dirty()
        if self.store.rv == drained and not self._dirty:
            self._caught_up_rv = drained  # it wrote nothing, so nothing of its own is left to see

    def _resync(self) -> _Cursors:
        rv = str(self.store.rv)
        cursors = _Cursors(self.store.watcher(PDBS, "", MATCH_ALL, rv, send_initial=False),
                           self.store.watcher(PODS, "", MATCH_ALL, rv, send_initial=False),
                           [self.store.watcher(rt, "", MATCH_ALL, rv, send_initial=False) for rt in CONTROLLERS])
        self._selectors.clear()
        self._facts.clear()
        for entry in list(self.store.table(PDBS).objects.values()):
            self._track(entry)
        return cursors

    def _drain(self, cursors: _Cursors) -> None:
        while True:
            seen = False
            for ev in cursors.budgets.poll_events():
                seen = True
                self._on_budget(ev)
            for ev in cursors.pods.poll_events():
                seen = True
                self._on_pod(ev)
            for watcher in cursors.controllers:
                for ev in watcher.poll_events():
                    seen = True
                    self._dirty.update((ev.new.key[0], name) for name in self._selectors.get(ev.new.key[0], ()))
            if not seen:
                return

    def _track(self, entry: Entry) -> None:
        ns, name = entry.key
        try:
            selector: LabelSelector | None = budget_selector(entry.obj())
        except SyncError:
            selector = None  # its sync reports the error; no pod routes to it (GetPodPodDisruptionBudgets)
        self._selectors.setdefault(ns, {})[name] = selector
        self._dirty.add(entry.key)

    def _on_budget(self, ev: Event) -> None:
        if ev.type != DELETED:
            self._track(ev.new)
            return
        ns, name = ev.new.key
        budgets = self._selectors.get(ns)
        if budgets is not None:
            budgets.pop(name, None)
            if not budgets:
                del self._selectors[ns]
        self._dirty.discard(ev.new.key)

    def _on_pod(self, ev: Event) -> None:
        ns = ev.new.key[0]
        if ev.type == DELETED:
            self._facts.pop(ev.new.key, None)
        budgets = self._selectors.get(ns)
        if not budgets:
            return
        old = ev.old.labels if ev.old is not None else None
        for name, selector in budgets.items():
            # a relabel leaves the budgets that selected the pod before as changed as the ones that do now
            if selector is not None and (selector(ev.new.labels) or (old is not None and selector(old))):
                self._dirty.add((ns, name))

    def _due(self, now: float) -> None:
        while self._recheck and self._recheck[0][0] <= now:
            when, key = heapq.heappop(self._recheck)
            if self._recheck_at.get(key) == when:
                del self._recheck_at[key]
                self._dirty.add(key)

    def _recheck_later(self, key: Key, when: float) -> None:
        """Sync ``key`` again at clock time ``when``, unless it is already due earlier."""
        pending = self._recheck_at.get(key)
        if pending is None or when < pending:
            self._recheck_at[key] = when
            heapq.heappush(self._recheck, (when, key))

    def _facts_of(self, entry: Entry) -> PodFacts:
        cached = self._facts.get(entry.key)
        if cached is not None and cached[0] == entry.rv:
            return cached[1]
        facts = pod_facts(entry)
        self._facts[entry.key] = (entry.rv, facts)
        return facts

    # ------------------------------------------------------------------ sync

    def _sync_dirty(self) -> None:
        dirty, self._dirty = self._dirty, set()
        for key in sorted(dirty):
            try:
                self._sync(key)
            except Exception:  # one budget's bug must not starve the others: retried, as upstream requeues
                log.exception("disruption controller: syncing %s/%s failed; retrying", key[0], key[1])
                self._recheck_later(key, self.store.clock() + RETRY_AFTER)

    def _sync(self, key: Key) -> None:
        pdb = self.store.get_obj(PDBS, *key)
        if pdb is None:
            return
        self.syncs += 1
        now = self.store.clock()
        recheck = None
        try:
            counts = count(self.store, pdb, now, self._facts_of)
            status = status_update(pdb, counts, now)
            recheck = counts.recheck
        except SyncError as exc:
            status = fail_safe(pdb, str(exc), now)
        if status is not None and not self._write(key, pdb, status):
            return
        if recheck is not None:
            self._recheck_later(key, recheck)

    def _write(self, key: Key, pdb: dict[str, Any], status: dict[str, Any]) -> bool:
        pdb["status"] = status
        try:
            self.store.update(PDBS, key[0], key[1], pdb, "status")
        except errors.APIError as exc:
            if exc.code == 409:
                self._dirty.add(key)  # changed under us: the next step syncs it from what is stored
            elif exc.code != 404:
                log.warning("disruption controller: status of %s/%s: %s", key[0], key[1], exc.message)
                self._recheck_later(key, self.store.clock() + RETRY_AFTER)
            return False
        self.writes += 1
        return True
