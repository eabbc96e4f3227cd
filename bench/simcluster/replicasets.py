"""The ReplicaSet controller, as kube-controller-manager 1.36 runs it.

A ReplicaSet keeps ``spec.replicas`` pods of its template alive: what a
scheduler sees of a Deployment's or a ReplicaSet's pods on a real cluster,
including a replacement appearing the moment one of them starts terminating
(an eviction, a preemption). Following ``pkg/controller/replicaset/replica_set.go``
(syncReplicaSet, manageReplicas, getPodsToDelete) and ``replica_set_utils.go``
(calculateStatus, updateReplicaSetStatus), observed on kube-controller-manager
1.36.2:

* **Its pods** are the pods of its namespace that its ``spec.selector``
  selects and that name it (by uid) in their controller ownerReference.
  *Active* ones have no deletionTimestamp and a phase other than Succeeded
  or Failed; *terminating* ones have a deletionTimestamp and are not
  finished yet.
* **Claiming** (ClaimPods, over the active pods only): an active pod without
  a controller that the selector selects is adopted (the ReplicaSet's
  controller ownerReference appended); one of its own that the selector no
  longer selects is released (its ownerReference to the ReplicaSet
  removed). A ReplicaSet being deleted does neither.
* **Too few** active pods: the missing ones are created at once (at most 500
  per sync, upstream's burstReplicas), each with ``generateName:
  "<name>-"``, the template's labels, annotations and finalizers, the
  template's spec, and one ownerReference ``{apiVersion: apps/v1, kind:
  ReplicaSet, name, uid, controller: true, blockOwnerDeletion: true}``.
  Event ``SuccessfulCreate`` "Created pod: <pod>"; a failed create gets
  ``FailedCreate`` "Error creating: <message>" and stops the creates of that
  sync, as slow start's batches stop at a failure.
* **Too many**: the surplus is deleted (a plain delete: a pod on a node gets
  its grace period), chosen in upstream's order: unscheduled first, then
  Pending before Unknown before Running, not Ready before Ready, a lower
  ``controller.kubernetes.io/pod-deletion-cost`` first, more of its active
  pods on the same node first, Ready for a shorter time first, more
  container restarts first, created later first. Event ``SuccessfulDelete``
  "Deleted pod: <pod>". A ReplicaSet being deleted creates and deletes
  nothing.
* **Status**, written through the status subresource: ``replicas`` (active
  pods, counted before this sync's creates and deletes, as upstream),
  ``fullyLabeledReplicas`` (active pods carrying all the template's labels),
  ``readyReplicas`` (Ready), ``availableReplicas`` (Ready for
  ``minReadySeconds``; a ReplicaSet whose pods are all ready but not yet all
  available is looked at again ``minReadySeconds`` later),
  ``terminatingReplicas`` (its terminating pods: the
  DeploymentReplicaSetTerminatingReplicas gate is on in 1.36),
  ``observedGeneration``, and the ``ReplicaFailure`` condition while a create
  or delete fails. Zero counts are left out as Go's omitempty leaves them;
  ``terminatingReplicas`` is always written. Nothing is written when nothing
  changed.

A ReplicaSet is synced when it changes, and when a pod it selects, selected
before a change, or names as its controller changes. The stand-in's writes
are seen at once, so upstream's expectations (waiting for its informer to
see its own creates) have nothing to do here.

Not simulated: the Deployment controller (a Deployment's rollout, its
ReplicaSets and their pod-template-hash are a controller of their own, and
the stand-in does not serve Deployments), the logarithmic comparison of
ready and creation times when choosing whom to delete (plain times are
compared, with no tie-break by uid), the back-off of retries (a sync whose
create or delete failed runs again a second later, and on any change), and
the garbage collector (a deleted ReplicaSet leaves its pods, as
kube-controller-manager without its garbage collector does).

Like the other controllers here it reads the store through cursors and
writes through it, so watchers see what they would from
kube-controller-manager (see :mod:`bench.simcluster.looping`). It must never
import ``scheduler/`` or ``plugins/``.
"""

from __future__ import annotations

import copy
import heapq
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bench.simcluster import errors
from bench.simcluster.disruption import controller_of
from bench.simcluster.looping import StoreLoop, record_event
from bench.simcluster.resources import lookup
from bench.simcluster.selectors import LabelSelector, SelectorError, label_selector_from_object
from bench.simcluster.store import DELETED, MATCH_ALL, Entry, Key, Store, Watcher, rfc3339

log = logging.getLogger("simcluster.replicasets")

REPLICA_SETS = lookup("apps", "v1", "replicasets")
PODS = lookup("", "v1", "pods")

CONTROLLER_NAME = "replicaset-controller"
BURST_REPLICAS = 500          # upstream's burstReplicas: creates or deletes per sync at the most
RETRY_AFTER = 1.0             # seconds before a sync whose create or delete failed runs again
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
REPLICA_FAILURE = "ReplicaFailure"
_TERMINAL = ("Succeeded", "Failed")
_PHASE_ORDER = {"Pending": 0, "Unknown": 1, "Running": 2}  # podPhaseToOrdinal; any other phase counts as Pending


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def controller_ref(rs: dict[str, Any]) -> dict[str, Any]:
    """The ownerReference a ReplicaSet puts on the pods it creates or adopts."""
    meta = rs["metadata"]
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def pod_from_template(rs: dict[str, Any]) -> dict[str, Any]:
    """controller.GetPodFromTemplate: what the ReplicaSet asks the API server to create."""
    name = rs["metadata"]["name"]
    template = _dict(_dict(rs.get("spec")).get("template"))
    tmeta = _dict(template.get("metadata"))
    # getPodsPrefix: "<name>-" unless that is no valid generateName (a name at the length limit)
    meta: dict[str, Any] = {"generateName": f"{name}-" if len(name) < 253 else name}
    for key in ("labels", "annotations", "finalizers"):
        if tmeta.get(key):
            meta[key] = copy.deepcopy(tmeta[key])
    meta["ownerReferences"] = [controller_ref(rs)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(_dict(template.get("spec")))}


# ---------------------------------------------------------------------------- what a pod is to its ReplicaSet

def ready_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    conditions = _dict(pod.get("status")).get("conditions")
    for c in conditions if isinstance(conditions, list) else ():
        if isinstance(c, dict) and c.get("type") == "Ready":
            return c
    return None


def is_ready(pod: dict[str, Any]) -> bool:
    c = ready_condition(pod)
    return c is not None and c.get("status") == "True"


def _parse_time(value: Any) -> float | None:
    try:
        return datetime.fromisoformat(value).timestamp()
    except (TypeError, ValueError):
        return None


def available_at(pod: dict[str, Any], min_ready_seconds: int) -> float | None:
    """When a Ready pod counts as available (podutil.IsPodAvailable); None when it is not Ready.

    With ``minReadySeconds`` 0 a Ready pod is available at once (time 0); otherwise it is
    ``minReadySeconds`` after its Ready transition, and never without a transition time.
    """
    c = ready_condition(pod)
    if c is None or c.get("status") != "True":
        return None
    if min_ready_seconds <= 0:
        return 0.0
    since = _parse_time(c.get("lastTransitionTime"))
    return float("inf") if since is None else since + min_ready_seconds


def deletion_order(pods: list[dict[str, Any]], related: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``pods`` sorted as ActivePodsWithRanks sorts them: the first ones are deleted first.

    The rank of a pod is how many of ``related`` (the ReplicaSet's active pods) share its node
    (getPodsRankedByRelatedPodsOnSameNode); a higher rank is deleted first.
    """
    on_node: dict[str, int] = {}
    for pod in related:
        node = _dict(pod.get("spec")).get("nodeName") or ""
        on_node[node] = on_node.get(node, 0) + 1

    def key(pod: dict[str, Any]) -> tuple[Any, ...]:
        meta, spec, status = pod["metadata"], _dict(pod.get("spec")), _dict(pod.get("status"))
        node = spec.get("nodeName") or ""
        ready = is_ready(pod)
        ready_since = _parse_time((ready_condition(pod) or {}).get("lastTransitionTime")) if ready else None
        restarts = max((_int(_dict(c).get("restartCount")) for c in status.get("containerStatuses") or []),
                       default=0)
        created = _parse_time(meta.get("creationTimestamp")) or 0.0
        return (bool(node), _PHASE_ORDER.get(status.get("phase"), 0), ready, _deletion_cost(meta),
                -on_node.get(node, 0), -(ready_since or 0.0), -restarts, -created)

    return sorted(pods, key=key)


def _deletion_cost(meta: dict[str, Any]) -> int:
    raw = _dict(meta.get("annotations")).get(DELETION_COST)
    try:
        return int(raw) if raw is not None else 0
    except ValueError:
        return 0  # upstream's validation refuses such a value; a planted one counts as no cost


# ---------------------------------------------------------------------------- the status

def calculate_status(rs: dict[str, Any], active: list[dict[str, Any]], terminating: int, now: float,
                     failure: tuple[str, str] | None) -> dict[str, Any]:
    """calculateStatus and updateReplicaSetStatus: the status to write for these active pods, at the
    ReplicaSet's generation; ``failure`` is (reason, message) of a create or delete that failed in this sync."""
    spec, old = _dict(rs.get("spec")), _dict(rs.get("status"))
    template_labels = _dict(_dict(_dict(spec.get("template")).get("metadata")).get("labels"))
    min_ready = _int(spec.get("minReadySeconds"))
    labelled = ready = available = 0
    for pod in active:
        labels = _dict(pod["metadata"].get("labels"))
        if all(labels.get(k) == v for k, v in template_labels.items()):
            labelled += 1
        at = available_at(pod, min_ready)
        if at is not None:
            ready += 1
            if at < now or min_ready <= 0:
                available += 1
    status: dict[str, Any] = {"replicas": len(active)}
    # omitempty: a zero count is not written; terminatingReplicas is a pointer and always is
    for key, value in (("fullyLabeledReplicas", labelled), ("readyReplicas", ready),
                       ("availableReplicas", available)):
        if value:
            status[key] = value
    status["terminatingReplicas"] = terminating
    if rs["metadata"].get("generation"):
        status["observedGeneration"] = rs["metadata"]["generation"]
    conditions = [copy.deepcopy(c) for c in old.get("conditions") or [] if isinstance(c, dict)]
    failed = next((c for c in conditions if c.get("type") == REPLICA_FAILURE), None)
    if failure is not None and failed is None:
        conditions.append({"type": REPLICA_FAILURE, "status": "True", "lastTransitionTime": rfc3339(now),
                           "reason": failure[0], "message": failure[1]})
    elif failure is None and failed is not None:
        conditions.remove(failed)
    if conditions:
        status["conditions"] = conditions
    return status


def status_changed(rs: dict[str, Any], status: dict[str, Any]) -> bool:
    """updateReplicaSetStatus's test: a write only when a count, a condition or the generation moved."""
    old = _dict(rs.get("status"))
    keys = ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas")
    return (any(old.get(k, 0) != status.get(k, 0) for k in keys)
            or old.get("terminatingReplicas") != status.get("terminatingReplicas")  # a pointer: unset is not 0
            or (old.get("conditions") or []) != (status.get("conditions") or [])
            or old.get("observedGeneration", 0) != rs["metadata"].get("generation", 0))


# ---------------------------------------------------------------------------- the controller

@dataclass(slots=True)
class _Tracked:
    uid: str
    selector: LabelSelector | None   # None: does not parse (the sync says so and does nothing)


@dataclass(slots=True)
class _Sync:
    """One sync's view of a ReplicaSet's pods."""

    active: list[dict[str, Any]] = field(default_factory=list)
    terminating: int = 0


class ReplicaSetController(StoreLoop):
    """Keeps every ReplicaSet's pods and status; started and stopped by :class:`SimCluster`."""

    def __init__(self, store: Store, tick: float = 0.02) -> None:
        super().__init__("simcluster-replicaset-controller", tick, log)
        self.store = store
        self._sets: dict[str, dict[str, _Tracked]] = {}  # namespace -> ReplicaSet name -> what routes pods to it
        self._dirty: set[Key] = set()
        self._later: list[tuple[float, Key]] = []          # (clock time, ReplicaSet): syncs due later
        self._waiting: set[Key] = set()                    # the ReplicaSets in _later

    # ------------------------------------------------------------------ loop

    def _resync(self) -> tuple[Watcher, Watcher]:
        rv = str(self.store.rv)
        cursors = (self.store.watcher(REPLICA_SETS, "", MATCH_ALL, rv, send_initial=False),
                   self.store.watcher(PODS, "", MATCH_ALL, rv, send_initial=False))
        self._sets.clear()
        for entry in list(self.store.table(REPLICA_SETS).objects.values()):
            self._track(entry)
        return cursors

    def _step(self, cursors: tuple[Watcher, Watcher]) -> None:
        sets, pods = cursors
        while True:
            seen = False
            for ev in sets.poll_events():
                seen = True
                if ev.type == DELETED:
                    self._untrack(ev.new.key)
                else:
                    self._track(ev.new)
            for ev in pods.poll_events():
                seen = True
                self._on_pod(ev.new, ev.old)
            if not seen:
                break
        now = self.store.clock()
        while self._later and self._later[0][0] <= now:
            key = heapq.heappop(self._later)[1]
            self._waiting.discard(key)
            self._dirty.add(key)
        dirty, self._dirty = self._dirty, set()
        for key in sorted(dirty):
            try:
                self.sync(key)
            except Exception:  # one ReplicaSet's bug must not starve the others
                log.exception("replicaset controller: syncing %s/%s failed", *key)

    def _track(self, entry: Entry) -> None:
        ns, name = entry.key
        rs = entry.obj()
        try:
            selector: LabelSelector | None = label_selector_from_object(_dict(rs.get("spec")).get("selector"))
        except (SelectorError, AttributeError, TypeError):
            selector = None
        self._sets.setdefault(ns, {})[name] = _Tracked(entry.uid, selector)
        self._dirty.add(entry.key)

    def _untrack(self, key: Key) -> None:
        sets = self._sets.get(key[0])
        if sets is not None:
            sets.pop(key[1], None)
            if not sets:
                del self._sets[key[0]]
        self._dirty.discard(key)

    def _on_pod(self, new: Entry, old: Entry | None) -> None:
        """Mark the ReplicaSets a pod change concerns: those selecting it now or before, and its controller's."""
        sets = self._sets.get(new.key[0])
        if not sets:
            return  # no ReplicaSet in that namespace: the common case costs one lookup
        for name, tracked in sets.items():
            sel = tracked.selector
            if sel is not None and (sel(new.labels) or (old is not None and sel(old.labels))):
                self._dirty.add((new.key[0], name))
        for entry in (new, old):
            if entry is not None and b'"ReplicaSet"' in entry.raw:  # parse only pods a ReplicaSet may own
                ref = controller_of(entry.obj()["metadata"])
                if ref is not None and ref.get("kind") == "ReplicaSet" and ref.get("name") in sets:
                    self._dirty.add((new.key[0], ref["name"]))

    # ------------------------------------------------------------------ sync

    def sync(self, key: Key) -> None:
        """syncReplicaSet: claim the pods, create or delete the difference, write the status."""
        rs = self.store.get_obj(REPLICA_SETS, *key)
        if rs is None:
            return
        spec = _dict(rs.get("spec"))
        try:
            selector = label_selector_from_object(spec.get("selector"))
        except (SelectorError, AttributeError, TypeError) as exc:
            log.warning("replicaset %s/%s: its selector does not parse: %s", *key, exc)
            return  # upstream gives up on it until it changes, writing nothing
        deleting = bool(rs["metadata"].get("deletionTimestamp"))
        pods = self._claim(rs, selector, deleting)
        failure = None if deleting else self._manage(rs, pods.active, _int(spec.get("replicas"), 1))
        now = self.store.clock()
        status = calculate_status(rs, pods.active, pods.terminating, now, failure)
        if status_changed(rs, status):
            rs["status"] = status
            try:
                self.store.update(REPLICA_SETS, key[0], key[1], rs, "status")
            except errors.APIError as exc:
                if exc.code == 409:
                    self._dirty.add(key)   # changed under us: the next step syncs what is stored
                elif exc.code != 404:
                    log.warning("replicaset %s/%s: status: %s", *key, exc.message)
                return
        replicas = _int(spec.get("replicas"), 1)
        min_ready = _int(spec.get("minReadySeconds"))
        if failure is not None:
            self._again(key, now + RETRY_AFTER)   # upstream requeues it, rate-limited
        elif min_ready > 0 and status.get("readyReplicas", 0) == replicas \
                and status.get("availableReplicas", 0) != replicas:
            self._again(key, now + min_ready)

    def _again(self, key: Key, when: float) -> None:
        """Sync ``key`` again at clock time ``when``, unless it already waits (upstream's queue holds it once)."""
        if key not in self._waiting:
            self._waiting.add(key)
            heapq.heappush(self._later, (when, key))

    def _claim(self, rs: dict[str, Any], selector: LabelSelector, deleting: bool) -> _Sync:
        """The ReplicaSet's active pods (adopting and releasing as ClaimPods does) and its terminating count."""
        ns, uid = rs["metadata"]["namespace"], rs["metadata"]["uid"]
        out = _Sync()
        marker = uid.encode()
        for entry in self.store.list(PODS, ns).entries:
            selected = selector(entry.labels)
            if not selected and marker not in entry.raw:
                continue  # neither selected nor naming it: not its business (and not parsed)
            pod = entry.obj()
            meta = pod["metadata"]
            if _dict(pod.get("status")).get("phase") in _TERMINAL:
                continue
            ref = controller_of(meta)
            mine = ref is not None and ref.get("uid") == uid
            if meta.get("deletionTimestamp"):
                if mine and selected:
                    out.terminating += 1
                continue
            if ref is not None and not mine:
                continue  # another controller's
            if mine and selected:
                out.active.append(pod)
            elif mine and not deleting:
                self._set_owner(pod, [r for r in meta.get("ownerReferences") or [] if _dict(r).get("uid") != uid])
            elif ref is None and selected and not deleting:
                adopted = self._set_owner(pod, [*(meta.get("ownerReferences") or []), controller_ref(rs)])
                if adopted is not None:
                    out.active.append(adopted)
        return out

    def _set_owner(self, pod: dict[str, Any], refs: list[Any]) -> dict[str, Any] | None:
        """Adopt or release: write the pod's new ownerReferences; the pod as stored, or None if that failed."""
        meta = pod["metadata"]
        if refs:
            meta["ownerReferences"] = refs
        else:
            meta.pop("ownerReferences", None)
        try:
            return self.store.update(PODS, meta["namespace"], meta["name"], pod).obj()
        except errors.APIError as exc:  # changed or gone meanwhile: its event brings the ReplicaSet back
            log.debug("replicaset controller: owner of pod %s/%s: %s", meta["namespace"], meta["name"], exc.message)
            return None

    def _manage(self, rs: dict[str, Any], active: list[dict[str, Any]], replicas: int) -> tuple[str, str] | None:
        """manageReplicas: create or delete the difference; (reason, message) of the first failure."""
        meta = rs["metadata"]
        ns = meta["namespace"]
        diff = len(active) - replicas
        if diff < 0:
            for _ in range(min(-diff, BURST_REPLICAS)):
                try:
                    entry = self.store.create(PODS, ns, pod_from_template(rs))
                except errors.APIError as exc:
                    self._event(rs, "Warning", "FailedCreate", f"Error creating: {exc.message}")
                    return "FailedCreate", exc.message
                self._event(rs, "Normal", "SuccessfulCreate", f"Created pod: {entry.key[1]}")
        elif diff > 0:
            for pod in deletion_order(active, active)[:min(diff, BURST_REPLICAS)]:
                name = pod["metadata"]["name"]
                try:
                    self.store.delete(PODS, ns, name)
                except errors.APIError as exc:
                    if exc.code == 404:
                        continue
                    self._event(rs, "Warning", "FailedDelete", f"Error deleting: {exc.message}")
                    return "FailedDelete", exc.message
                self._event(rs, "Normal", "SuccessfulDelete", f"Deleted pod: {name}")
        return None

    def _event(self, rs: dict[str, Any], type_: str, reason: str, message: str) -> None:
        record_event(self.store, rs, "ReplicaSet", "apps/v1", CONTROLLER_NAME, type_, reason, message)
