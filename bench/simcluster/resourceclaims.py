"""The resourceclaim controller, as kube-controller-manager 1.36 runs it.

A pod asks for devices through ``spec.resourceClaims``: an entry names a
ResourceClaim (``resourceClaimName``) or a ResourceClaimTemplate
(``resourceClaimTemplateName``) to make one from. A scheduler allocates and
reserves the claims; this controller makes the claims of templates, and
releases claims once their pods are done. Following upstream's
``pkg/controller/resourceclaim/controller.go`` (syncPod, handleClaim,
syncClaim), observed on kube-controller-manager 1.36.2:

* **A claim per template entry** of a pod that may still run (not being
  deleted, not Succeeded or Failed): ``generateName: <pod>-<entry>-`` (when
  that is longer than 57 characters, both names are cut in proportion to
  their lengths and joined by ``-``), the template's ``spec.metadata``
  labels and annotations plus ``resource.kubernetes.io/pod-claim-name:
  <entry>``, one ownerReference ``{apiVersion: v1, kind: Pod, name, uid,
  controller: true}`` (no blockOwnerDeletion in 1.36), and the template's
  ``spec.spec``. A claim it made for the pod before (the pod as its
  controller, the annotation naming the entry) is used again instead of
  making another. The pod's ``status.resourceClaimStatuses`` then records
  ``{name: <entry>, resourceClaimName: <claim>}`` through the pods/status
  subresource; an entry naming a claim directly gets no status entry. A
  template that does not exist is a ``FailedResourceClaimCreation`` warning
  on the pod, "PodResourceClaim <entry>: resource claim template "<t>":
  resourceclaimtemplate.resource.k8s.io "<t>" not found".
* **Reserving for a pod already on a node** (``spec.nodeName`` set without a
  scheduler): an allocated claim not reserved for it gets
  ``{resource: pods, name, uid}`` appended to ``status.reservedFor`` (while
  there are fewer than 256 entries).
* **Releasing**: a ``reservedFor`` entry of a pod that is gone, was
  replaced (another uid), has finished, or was deleted before it was
  scheduled is removed, with an update of the status (not a patch: it fails
  if the claim changed meanwhile). When that leaves no entry, a claim with
  the ``resource.kubernetes.io/delete-protection`` finalizer (what a
  scheduler adds when it allocates) is deallocated in the same write
  (``status.allocation`` cleared), then the finalizer is removed. Only that
  transition deallocates: a claim allocated and never reserved stays
  allocated, since a driver need not reserve. A claim being deleted with the
  finalizer and no reservation is deallocated and loses the finalizer.
* **Deleting** a claim made for a pod once it is not reserved and its pod
  has finished or was replaced. A claim whose pod is gone is left to the
  garbage collector, which the stand-in does not run (neither does the
  tests' kube-controller-manager).

Upstream writes the pod's status with server-side apply (field manager
``ResourceClaimController``); the stand-in, which serves no apply, writes
the same entries with a strategic merge patch (``resourceClaimStatuses``
merges by ``name``). A template that appears later brings its waiting pods
back at once (upstream retries them with back-off); another failed write is
tried again a second later.

Like the other controllers here it reads the store through cursors and
writes through it (see :mod:`bench.simcluster.looping`). It must never
import ``scheduler/`` or ``plugins/``.
"""

from __future__ import annotations

import copy
import heapq
import logging
from typing import Any, Callable

import orjson

from bench.simcluster import errors
from bench.simcluster.drafields import DELETE_PROTECTION, as_dict, as_list, dicts, text
from bench.simcluster.looping import StoreLoop, record_event
from bench.simcluster.resources import lookup
from bench.simcluster.store import DELETED, MATCH_ALL, Entry, Key, Store, Watcher

log = logging.getLogger("simcluster.resourceclaims")

PODS = lookup("", "v1", "pods")
CLAIMS = lookup("resource.k8s.io", "v1", "resourceclaims")
TEMPLATES = lookup("resource.k8s.io", "v1", "resourceclaimtemplates")

CONTROLLER_NAME = "resourceclaim-controller"
EVENT_SOURCE = "resource_claim"       # the component of its events
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
MAX_GENERATE_NAME = 57                # leaves room for the hyphen-free 5 random characters of a 63-character name
RESERVED_FOR_MAX = 256
RETRY_AFTER = 1.0                     # seconds before a failed sync runs again
STRATEGIC = "application/strategic-merge-patch+json"
_TERMINAL = ("Succeeded", "Failed")


class ClaimError(Exception):
    """Why a pod's claim could not be made; its text is the event's, after "PodResourceClaim <entry>: "."""


# ---------------------------------------------------------------------------- what a pod is to its claims

def is_terminal(pod: dict[str, Any]) -> bool:
    return as_dict(pod.get("status")).get("phase") in _TERMINAL


def is_done(pod: dict[str, Any]) -> bool:
    """isPodDone: certain never to run again: finished, or deleted before it was scheduled."""
    return is_terminal(pod) or (bool(pod["metadata"].get("deletionTimestamp"))
                                and not as_dict(pod.get("spec")).get("nodeName"))


def claim_name(pod: dict[str, Any], entry: dict[str, Any]) -> tuple[str | None, bool, str]:
    """resourceclaim.Name: (the claim's name or None when the pod needs none, whether the claim must be the
    pod's own, an error) for one ``spec.resourceClaims`` entry. A template entry not yet in the pod's status
    is the error "not found"."""
    if entry.get("resourceClaimName") is not None:
        return text(entry["resourceClaimName"]), False, ""
    if entry.get("resourceClaimTemplateName") is not None:
        for _, status in dicts(as_dict(pod.get("status")).get("resourceClaimStatuses")):
            if status.get("name") == entry.get("name"):
                name = status.get("resourceClaimName")
                return (text(name) if name is not None else None), True, ""
        return None, False, "not found"
    meta = pod["metadata"]
    return None, False, (f'pod "{meta["namespace"]}/{meta["name"]}", spec.resourceClaim '
                         f'"{text(entry.get("name"))}": API is not supported')


def controlling_pod(claim: dict[str, Any]) -> tuple[str, str] | None:
    """(name, uid) of the pod a claim was made for: its controller ownerReference of kind Pod, v1."""
    for _, ref in dicts(claim["metadata"].get("ownerReferences")):
        if ref.get("controller") is True and ref.get("apiVersion") == "v1" and ref.get("kind") == "Pod":
            return text(ref.get("name")), text(ref.get("uid"))
    return None


def is_for_pod(pod: dict[str, Any], claim: dict[str, Any]) -> bool:
    owner = controlling_pod(claim)
    return owner is not None and owner[1] == pod["metadata"]["uid"]


def generate_name(pod: str, entry: str) -> str:
    """``<pod>-<entry>-``, or both cut in proportion when that is longer than 57 characters."""
    name = f"{pod}-{entry}-"
    if len(name) <= MAX_GENERATE_NAME:
        return name
    # both cuts use the full length, as upstream's one assignment computes them
    return pod[:len(pod) * MAX_GENERATE_NAME // len(name)] + "-" + entry[:len(entry) * MAX_GENERATE_NAME // len(name)]


def claim_from_template(pod: dict[str, Any], entry: str, template: dict[str, Any]) -> dict[str, Any]:
    """The ResourceClaim the controller asks the API server to create for a pod's template entry."""
    spec = as_dict(template.get("spec"))
    template_meta = as_dict(spec.get("metadata"))
    meta: dict[str, Any] = {
        "generateName": generate_name(pod["metadata"]["name"], entry),
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"],
                             "uid": pod["metadata"]["uid"], "controller": True}],
        "annotations": {**as_dict(template_meta.get("annotations")), POD_CLAIM_NAME: entry},
    }
    if template_meta.get("labels"):
        meta["labels"] = copy.deepcopy(template_meta["labels"])
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
            "spec": copy.deepcopy(as_dict(spec.get("spec")))}


def _reserved_for(claim: dict[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for _, ref in dicts(as_dict(claim.get("status")).get("reservedFor")))


# ---------------------------------------------------------------------------- the controller

class ResourceClaimController(StoreLoop):
    """Makes pods' claims from templates and releases them; started and stopped by :class:`SimCluster`."""

    def __init__(self, store: Store, tick: float = 0.02) -> None:
        super().__init__("simcluster-resourceclaim-controller", tick, log)
        self.store = store
        self._pods: set[Key] = set()                    # pods to sync
        self._claims: set[Key] = set()                  # claims to sync
        self._users: dict[Key, set[str]] = {}           # claim -> the pods naming it (upstream's pod index)
        self._uses: dict[Key, tuple[str, ...]] = {}     # pod -> the claims it names
        self._made_for: dict[str, set[Key]] = {}        # pod uid -> the claims with it as controller
        self._owner_of: dict[Key, str] = {}             # claim -> its controlling pod's uid
        self._awaiting: dict[Key, set[str]] = {}        # template -> the pods waiting for it
        self._later: list[tuple[float, str, Key]] = []  # (clock time, "pod" or "claim", key): syncs due later
        self._waiting: set[tuple[str, Key]] = set()

    # ------------------------------------------------------------------ loop

    def _resync(self) -> tuple[Watcher, Watcher, Watcher]:
        rv = str(self.store.rv)
        cursors = (self.store.watcher(PODS, "", MATCH_ALL, rv, send_initial=False),
                   self.store.watcher(CLAIMS, "", MATCH_ALL, rv, send_initial=False),
                   self.store.watcher(TEMPLATES, "", MATCH_ALL, rv, send_initial=False))
        for index in (self._users, self._uses, self._made_for, self._owner_of, self._awaiting):
            index.clear()
        for entry in list(self.store.table(CLAIMS).objects.values()):
            self._on_claim(entry, deleted=False)
        for entry in list(self.store.table(PODS).objects.values()):
            if b'"resourceClaims"' in entry.raw:
                self._on_pod(entry, deleted=False)
        return cursors

    def _step(self, cursors: tuple[Watcher, Watcher, Watcher]) -> None:
        pods, claims, templates = cursors
        while True:
            seen = False
            for ev in pods.poll_events():
                seen = True
                # a pod's spec never changes: one without claims (the common case) is not even parsed
                if b'"resourceClaims"' in ev.new.raw:
                    self._on_pod(ev.new, ev.type == DELETED)
            for ev in claims.poll_events():
                seen = True
                self._on_claim(ev.new, ev.type == DELETED)
            for ev in templates.poll_events():
                seen = True
                if ev.type != DELETED:
                    self._pods.update((ev.new.key[0], pod) for pod in self._awaiting.pop(ev.new.key, ()))
            if not seen:
                break
        now = self.store.clock()
        while self._later and self._later[0][0] <= now:
            _, kind, key = heapq.heappop(self._later)
            self._waiting.discard((kind, key))
            (self._pods if kind == "pod" else self._claims).add(key)
        claims_due, self._claims = self._claims, set()
        for key in sorted(claims_due):
            self._guarded(self.sync_claim, "claim", key)
        pods_due, self._pods = self._pods, set()
        for key in sorted(pods_due):
            self._guarded(self.sync_pod, "pod", key)

    def _guarded(self, sync: Callable[[Key], None], kind: str, key: Key) -> None:
        try:
            sync(key)
        except Exception:   # one object's bug must not starve the others
            log.exception("resourceclaim controller: syncing %s %s/%s failed", kind, *key)

    def _again(self, kind: str, key: Key) -> None:
        """Sync ``key`` again a little later, as upstream's rate-limited queue does after an error."""
        if (kind, key) not in self._waiting:
            self._waiting.add((kind, key))
            heapq.heappush(self._later, (self.store.clock() + RETRY_AFTER, kind, key))

    def _on_pod(self, entry: Entry, deleted: bool) -> None:
        """enqueuePod: keep the claim index; a pod that no longer needs its claims brings them to a sync."""
        key, pod = entry.key, entry.obj()
        names = []
        for _, pc in dicts(as_dict(pod.get("spec")).get("resourceClaims")):
            name, _, err = claim_name(pod, pc)
            if name and not err:
                names.append(name)
        for name in self._uses.pop(key, ()):
            users = self._users.get((key[0], name))
            if users is not None:
                users.discard(key[1])
                if not users:
                    del self._users[(key[0], name)]
        if deleted or is_done(pod):   # podNeedsClaims
            self._claims.update((key[0], name) for name in names)
        if not deleted:
            self._uses[key] = tuple(names)
            for name in names:
                self._users.setdefault((key[0], name), set()).add(key[1])
            self._pods.add(key)

    def _on_claim(self, entry: Entry, deleted: bool) -> None:
        """enqueueResourceClaim: the claim itself (unless deleted) and every pod naming it."""
        key = entry.key
        uid = self._owner_of.pop(key, None)
        if uid is not None:
            made = self._made_for.get(uid)
            if made is not None:
                made.discard(key)
                if not made:
                    del self._made_for[uid]
        if not deleted:
            self._note_owner(key, entry.obj())
            self._claims.add(key)
        self._pods.update((key[0], pod) for pod in self._users.get(key, ()))

    def _note_owner(self, key: Key, claim: dict[str, Any]) -> None:
        owner = controlling_pod(claim)
        if owner is not None:
            self._owner_of[key] = owner[1]
            self._made_for.setdefault(owner[1], set()).add(key)

    # ------------------------------------------------------------------ pods

    def sync_pod(self, key: Key) -> None:
        """syncPod: make the claims of the pod's templates, record them, reserve claims for a bound pod."""
        pod = self.store.get_obj(PODS, *key)
        if pod is None or pod["metadata"].get("deletionTimestamp") or is_terminal(pod):
            return   # nothing to make for a pod that will not run
        entries = [pc for _, pc in dicts(as_dict(pod.get("spec")).get("resourceClaims"))]
        made: dict[str, str] = {}
        for pc in entries:
            try:
                self._handle_claim(pod, pc, made)
            except ClaimError as exc:
                record_event(self.store, pod, "Pod", "v1", EVENT_SOURCE, "Warning", "FailedResourceClaimCreation",
                             f"PodResourceClaim {text(pc.get('name'))}: {exc}")
                return
        if made:
            patch = {"status": {"resourceClaimStatuses": [{"name": n, "resourceClaimName": c} for n, c in made.items()]}}
            try:
                pod = self.store.patch(PODS, key[0], key[1], STRATEGIC, orjson.dumps(patch), "status").obj()
            except errors.APIError as exc:
                if exc.code != 404:
                    log.warning("resourceclaim controller: status of pod %s/%s: %s", *key, exc.message)
                    self._again("pod", key)
                return
        if as_dict(pod.get("spec")).get("nodeName"):
            self._reserve_for(pod, entries)

    def _handle_claim(self, pod: dict[str, Any], pc: dict[str, Any], made: dict[str, str]) -> None:
        """handleClaim: the claim of one entry exists, or is made now (noted in ``made``)."""
        ns = pod["metadata"]["namespace"]
        name, check_owner, err = claim_name(pod, pc)
        if err and err != "not found":
            raise ClaimError(f"checking for claim before creating it: {err}")
        if not err and name is None:
            return   # the pod needs no claim for this entry
        if name:
            claim = self.store.get_obj(CLAIMS, ns, name)
            if claim is not None and (not check_owner or is_for_pod(pod, claim)):
                return
            # gone, or not the pod's own: upstream makes another
        template = pc.get("resourceClaimTemplateName")
        if template is None:
            return
        claim = self._made_before(pod, text(pc.get("name")))
        if claim is None:
            found = self.store.get_obj(TEMPLATES, ns, text(template))
            if found is None:
                self._awaiting.setdefault((ns, text(template)), set()).add(pod["metadata"]["name"])
                raise ClaimError(f'resource claim template "{text(template)}": '
                                 f'resourceclaimtemplate.resource.k8s.io "{text(template)}" not found')
            try:
                entry = self.store.create(CLAIMS, ns, claim_from_template(pod, text(pc.get("name")), found))
            except errors.APIError as exc:
                self._again("pod", (ns, pod["metadata"]["name"]))
                raise ClaimError(f"create ResourceClaim : {exc.message}") from None   # sic: the name is not known yet
            claim = entry.obj()
            self._note_owner(entry.key, claim)   # seen at once, as upstream's mutation cache has it
        made[text(pc.get("name"))] = claim["metadata"]["name"]

    def _made_before(self, pod: dict[str, Any], entry: str) -> dict[str, Any] | None:
        """findPodResourceClaim: a claim the pod controls whose annotation names this entry."""
        ns = pod["metadata"]["namespace"]
        for key in sorted(self._made_for.get(pod["metadata"]["uid"], ())):
            claim = self.store.get_obj(CLAIMS, *key)
            if claim is not None and key[0] == ns and is_for_pod(pod, claim) \
                    and as_dict(claim["metadata"].get("annotations")).get(POD_CLAIM_NAME) == entry:
                return claim
        return None

    def _reserve_for(self, pod: dict[str, Any], entries: list[dict[str, Any]]) -> None:
        """A pod put on a node without a scheduler: reserve its allocated claims for it (reserveForPod)."""
        meta = pod["metadata"]
        for pc in entries:
            name, check_owner, err = claim_name(pod, pc)
            if err or name is None:
                continue
            claim = self.store.get_obj(CLAIMS, meta["namespace"], name)
            if claim is None or (check_owner and not is_for_pod(pod, claim)):
                return
            status = as_dict(claim.get("status"))
            if status.get("allocation") is None or _reserved_for(claim, meta["uid"]) \
                    or len(as_list(status.get("reservedFor"))) >= RESERVED_FOR_MAX:
                continue
            status["reservedFor"] = [*as_list(status.get("reservedFor")),
                                     {"resource": "pods", "name": meta["name"], "uid": meta["uid"]}]
            claim["status"] = status
            if not self._write(claim, "status"):
                return

    # ------------------------------------------------------------------ claims

    def sync_claim(self, key: Key) -> None:
        """syncClaim: drop reservations of pods that will not run; deallocate, unprotect, delete."""
        claim = self.store.get_obj(CLAIMS, *key)
        if claim is None:
            return
        status = as_dict(claim.get("status"))
        reserved = as_list(status.get("reservedFor"))
        valid = []
        for ref in reserved:
            ref = as_dict(ref)
            if text(ref.get("apiGroup")) or ref.get("resource") != "pods":
                log.warning("resourceclaim controller: claim %s/%s: unsupported ReservedFor entry %s", *key, ref)
                return   # upstream's sync fails here, and keeps failing
            pod = self.store.get_obj(PODS, key[0], text(ref.get("name")))
            if pod is not None and pod["metadata"]["uid"] == ref.get("uid") and not is_done(pod):
                valid.append(ref)
        protected = DELETE_PROTECTION in as_list(claim["metadata"].get("finalizers"))
        if len(valid) < len(reserved):
            # an update, not a patch: it must fail if the claim changed meanwhile
            status = {k: v for k, v in status.items() if k != "reservedFor"} | ({"reservedFor": valid} if valid else {})
            if not valid and protected:
                status.pop("allocation", None)   # the last consumer is gone: deallocate
            claim["status"] = status
            written = self._write(claim, "status")
            if written is None:
                return
            claim = written
            if DELETE_PROTECTION in as_list(claim["metadata"].get("finalizers")) \
                    and as_dict(claim.get("status")).get("allocation") is None:
                claim = self._unprotect(claim)
                if claim is None:
                    return
        elif protected and claim["metadata"].get("deletionTimestamp") and not valid:
            if status.get("allocation") is not None:
                claim["status"] = {k: v for k, v in status.items() if k != "allocation"}
                claim = self._write(claim, "status")
                if claim is None:
                    return
            if self._unprotect(claim) is None:
                return
        if not valid:
            self._delete_if_unused(claim)

    def _unprotect(self, claim: dict[str, Any]) -> dict[str, Any] | None:
        finalizers = [f for f in as_list(claim["metadata"].get("finalizers")) if f != DELETE_PROTECTION]
        if finalizers:
            claim["metadata"]["finalizers"] = finalizers
        else:
            claim["metadata"].pop("finalizers", None)
        return self._write(claim, "")

    def _delete_if_unused(self, claim: dict[str, Any]) -> None:
        """A claim made for a pod that finished or was replaced; one whose pod is gone is the garbage collector's."""
        owner = controlling_pod(claim)
        if owner is None:
            return
        meta = claim["metadata"]
        pod = self.store.get_obj(PODS, meta["namespace"], owner[0])
        if pod is None or (pod["metadata"]["uid"] == owner[1] and not is_done(pod)):
            return
        try:
            self.store.delete(CLAIMS, meta["namespace"], meta["name"])
        except errors.APIError as exc:
            if exc.code != 404:
                log.warning("resourceclaim controller: delete claim %s/%s: %s", meta["namespace"], meta["name"],
                            exc.message)
                self._again("claim", (meta["namespace"], meta["name"]))

    def _write(self, claim: dict[str, Any], subresource: str) -> dict[str, Any] | None:
        """An update of the claim as read (its resourceVersion a precondition); None when it failed."""
        meta = claim["metadata"]
        key = (meta["namespace"], meta["name"])
        try:
            entry = self.store.update(CLAIMS, key[0], key[1], claim, subresource)
        except errors.APIError as exc:
            if exc.code == 409:
                self._claims.add(key)   # changed meanwhile: the next step syncs what is stored
            elif exc.code != 404:
                log.warning("resourceclaim controller: claim %s/%s: %s", *key, exc.message)
                self._again("claim", key)
            return None
        if entry.key[1] != key[1] or entry.key not in self.store.table(CLAIMS).objects:
            return None   # its last finalizer went: the claim is gone
        return entry.obj()
