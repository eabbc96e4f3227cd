"""The simulated cluster's object store: kube-apiserver's storage semantics in memory.

What a scheduler can observe of kube-apiserver + etcd is reproduced here:
one global resourceVersion that every write bumps; uid, creationTimestamp,
generation and deletionTimestamp set as the real registry sets them;
optimistic concurrency (409 Conflict on a stale resourceVersion); graceful
deletion of pods on nodes and finalizers; status subresources that never
change spec and spec writes that never change status; the pods/binding
subresource; consistent paginated lists; and a watch cache from which a
watch resumes at any resourceVersion still in the retained window (older
ones get 410 Expired).

Layout, chosen for speed and memory:

* An object is stored as an :class:`Entry`: its JSON bytes plus the few
  things selectors look at (labels, selectable fields). A list response is a
  join of stored bytes; a watch event is the stored bytes in an envelope.
  Writes parse, change and re-serialize one object (orjson: microseconds).
* Each table keeps an append-only event log, trimmed to ``window`` events.
  A watcher is a cursor into that log, not a queue: a slow reader costs no
  memory, and one that falls out of the window is dropped, as kube-apiserver
  drops an unresponsive watcher; it then resumes from its last
  resourceVersion or relists on 410, exactly as against the real server.

Everything here is synchronous and runs on the event loop thread, so a
write is atomic with respect to every reader. Nothing may await in here
except :meth:`Watcher.next`.

Tests that must see writes as they happen (every bind, every 409), not only
the state they leave, register hooks: :meth:`Store.observe` (after each
write, with what it stored or the error it failed with) and
:meth:`Store.admit` (before each write, able to refuse it). A store without
hooks runs the plain write methods: the hooks cost nothing until used.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import functools
import inspect
import random
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

import orjson

from bench.simcluster import convert, defaults, dra, draclaims, errors, names, workloads
from bench.simcluster import patch as patching
from bench.simcluster.resources import RESOURCES, ResourceType, lookup

Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped
EMPTY: dict[str, str] = {}

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"
_TYPE_BYTES = {t: f'{{"type":"{t}","object":'.encode() for t in (ADDED, MODIFIED, DELETED)}

# generateName suffix alphabet of apiserver's names.SimpleNameGenerator
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

_TERMINAL = ("Succeeded", "Failed")


def _generate_name(prefix: str) -> str:
    """names.SimpleNameGenerator: the prefix, cut to leave room for them, and 5 random characters."""
    return prefix[:names.MAX_GENERATED_NAME_PREFIX] + "".join(random.choices(_NAME_ALPHABET, k=5))


def rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class Entry:
    """One stored object version. Immutable once built; ``raw`` is the JSON served."""

    __slots__ = ("raw", "labels", "fields", "rv", "key", "uid")

    def __init__(self, raw: bytes, labels: dict[str, str], fields: dict[str, str], rv: int,
                 key: Key, uid: str) -> None:
        self.raw = raw
        self.labels = labels
        self.fields = fields
        self.rv = rv
        self.key = key
        self.uid = uid

    def obj(self) -> dict[str, Any]:
        return orjson.loads(self.raw)


class Event:
    __slots__ = ("rv", "type", "new", "old")

    def __init__(self, rv: int, type_: str, new: Entry, old: Entry | None) -> None:
        self.rv = rv
        self.type = type_
        self.new = new    # for DELETED: the object's last state, stamped with the delete's rv
        self.old = old    # the previous version (None for ADDED)


class Table:
    """All objects of one storage resource, and its watch cache."""

    __slots__ = ("rt", "objects", "log", "base", "window_start", "waiter", "_sorted")

    def __init__(self, rt: ResourceType) -> None:
        self.rt = rt
        self.objects: dict[Key, Entry] = {}
        self.log: list[Event] = []
        self.base = 0              # absolute sequence number of log[0]
        self.window_start = 0      # every event with rv > window_start is still in the log
        self.waiter: asyncio.Future[None] | None = None
        self._sorted: list[Key] | None = None

    def sorted_keys(self) -> list[Key]:
        if self._sorted is None:
            self._sorted = sorted(self.objects)
        return self._sorted

    def end(self) -> int:
        return self.base + len(self.log)


@dataclass(slots=True)
class ListResult:
    entries: list[Entry]
    rv: int
    cont: str = ""
    remaining: int | None = None


class Dropped(Exception):
    """The watcher fell out of the retained window (or the window was compacted)."""


Selector = Callable[[Any], bool]


def MATCH_ALL(_: Any) -> bool:
    """The empty selector. Identity matters: lists count remaining items only for it."""
    return True


# fn(verb, resource, namespace, name, result): result is the stored Entry or the APIError the write failed with
Observer = Callable[[str, str, str, str, "Entry | errors.APIError"], None]
# fn(verb, resource, namespace, name): raises errors.APIError to refuse the write
Admission = Callable[[str, str, str, str], None]


class Store:
    """The whole cluster state. ``window`` is the number of events each resource retains."""

    def __init__(self, window: int = 20_000, clock: Callable[[], float] = time.time) -> None:
        self.window = window
        self.clock = clock
        self.rv = 0
        self.tables: dict[tuple[str, str], Table] = {}
        for rt in RESOURCES:
            if rt.storage is None and rt.stored:
                self.tables[rt.key] = Table(rt)
        self._ts_cache = (0, "")
        self._observers: list[Observer] = []
        self._admissions: list[Admission] = []
        self._bootstrap()

    # ------------------------------------------------------------------ helpers

    def table(self, rt: ResourceType) -> Table:
        return self.tables[rt.key]

    def now(self) -> str:
        t = int(self.clock())
        if self._ts_cache[0] != t:
            self._ts_cache = (t, rfc3339(t))
        return self._ts_cache[1]

    def _bootstrap(self) -> None:
        ns_rt = lookup("", "v1", "namespaces")
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create(ns_rt, "", {"metadata": {"name": ns}})
        pc_rt = lookup("scheduling.k8s.io", "v1", "priorityclasses")
        for name, value in (("system-node-critical", 2000001000), ("system-cluster-critical", 2000000000)):
            self.create(pc_rt, "", {"metadata": {"name": name}, "value": value,
                                    "description": "Used for system critical pods that must run in the cluster, "
                                                   "but can be moved to another node if necessary." if name.endswith("cluster-critical")
                                    else "Used for system critical pods that must not be moved from their current node.",
                                    "preemptionPolicy": "PreemptLowerPriority"})

    def _entry(self, rt: ResourceType, obj: dict[str, Any], rv: int) -> Entry:
        meta = obj["metadata"]
        meta["resourceVersion"] = str(rv)
        raw = orjson.dumps(obj)
        key = (meta.get("namespace", "") if rt.namespaced else "", meta["name"])
        return Entry(raw, meta.get("labels") or EMPTY, rt.fields(obj), rv, key, meta.get("uid", ""))

    def _append(self, table: Table, ev: Event) -> None:
        table.log.append(ev)
        if len(table.log) > self.window + (self.window >> 2):
            cut = len(table.log) - self.window
            table.window_start = table.log[cut - 1].rv
            del table.log[:cut]
            table.base += cut
        w = table.waiter
        if w is not None:
            table.waiter = None
            if not w.done():
                w.set_result(None)

    def _commit(self, table: Table, obj: dict[str, Any], type_: str, old: Entry | None) -> Entry:
        self.rv += 1
        entry = self._entry(table.rt, obj, self.rv)
        if type_ == DELETED:
            del table.objects[entry.key]
            table._sorted = None
        else:
            if old is None:
                table._sorted = None
            table.objects[entry.key] = entry
        self._append(table, Event(self.rv, type_, entry, old))
        return entry

    def compact(self) -> None:
        """Forget all history: every watch or list at an older resourceVersion now gets 410."""
        for table in self.tables.values():
            table.window_start = self.rv
            table.base += len(table.log)
            table.log.clear()
            w = table.waiter
            if w is not None:
                table.waiter = None
                if not w.done():
                    w.set_result(None)

    def _require(self, table: Table, ns: str, name: str) -> Entry:
        entry = table.objects.get((ns, name))
        if entry is None:
            rt = table.rt
            raise errors.not_found(rt.plural, name, rt.group)
        return entry

    def _check_namespace(self, rt: ResourceType, ns: str, name: str) -> None:
        entry = self.tables[("", "namespaces")].objects.get(("", ns))
        if entry is None:
            raise errors.not_found("namespaces", ns)
        if entry.fields.get("status.phase") == "Terminating":
            raise errors.forbidden(rt.plural, name,
                                   f"unable to create new content in namespace {ns} because it is being terminated",
                                   rt.group)

    # ------------------------------------------------------------------ reads

    def get(self, rt: ResourceType, ns: str, name: str) -> Entry:
        return self._require(self.table(rt), ns if rt.namespaced else "", name)

    def get_obj(self, rt: ResourceType, ns: str, name: str) -> dict[str, Any] | None:
        entry = self.table(rt).objects.get((ns if rt.namespaced else "", name))
        return None if entry is None else entry.obj()

    def list(self, rt: ResourceType, ns: str = "", match: Selector = MATCH_ALL, limit: int = 0,
             cont: str = "", rv: str = "", rv_match: str = "") -> ListResult:
        table = self.table(rt)
        start_key = ""
        if cont:
            if rv and rv != "0":  # storage.ValidateListOptions lets "0" through with a continue
                raise errors.bad_request("specifying resource version is not allowed when using continue")
            snap_rv, start_key = _decode_continue(cont)
            snapshot = self._snapshot(table, snap_rv, expired_msg=_CONTINUE_EXPIRED)
        elif rv and rv != "0":
            want = _parse_rv(rv)
            if rv_match == "Exact":
                snap_rv = want
                snapshot = self._snapshot(table, want, expired_msg=
                                          "The resourceVersion for the provided list is too old.")
            else:
                if want > self.rv:
                    raise errors.APIError(504, "Timeout",
                                          f"Too large resource version: {want}, current: {self.rv}",
                                          {"causes": [{"reason": "ResourceVersionTooLarge",
                                                       "message": "Too large resource version"}],
                                           "retryAfterSeconds": 1})
                snap_rv, snapshot = self.rv, None
        else:
            if rv_match == "Exact":
                raise errors.bad_request("resourceVersionMatch \"Exact\" is forbidden for resourceVersion \"0\"" if rv
                                         else "resourceVersionMatch is forbidden unless resourceVersion is provided")
            snap_rv, snapshot = self.rv, None

        if snapshot is None:
            objects = table.objects
            keys = table.sorted_keys()
        else:
            objects = snapshot
            keys = sorted(snapshot)
        i = 0
        if start_key:
            i = bisect.bisect_left(keys, _split_key(start_key))
        if ns and table.rt.namespaced:
            lo = bisect.bisect_left(keys, (ns, ""), lo=i)
            hi = bisect.bisect_left(keys, (ns + "\x00", ""), lo=lo)
        else:
            lo, hi = i, len(keys)
        out: list[Entry] = []
        n = lo
        while n < hi:
            e = objects[keys[n]]
            n += 1
            if match(e):
                out.append(e)
                if limit and len(out) >= limit:
                    break
        result = ListResult(out, snap_rv)
        if limit and len(out) >= limit and n < hi:
            # more may follow: the token pins the snapshot, as etcd's does
            last = out[-1].key
            result.cont = _encode_continue(snap_rv, f"{last[0]}/{last[1]}\x00")
            if match is MATCH_ALL:
                result.remaining = hi - n
        return result

    def _snapshot(self, table: Table, at: int, expired_msg: str) -> dict[Key, Entry]:
        """The table's objects as they were at resourceVersion ``at``, from the watch cache."""
        if at < table.window_start:
            raise errors.expired(expired_msg)
        if at > self.rv:
            raise errors.APIError(504, "Timeout", f"Too large resource version: {at}, current: {self.rv}")
        log = table.log
        i = bisect.bisect_right(log, at, key=lambda ev: ev.rv)
        if i == len(log):
            return table.objects
        older: dict[Key, Entry | None] = {}
        for ev in log[i:]:
            k = ev.new.key
            if k not in older:
                older[k] = ev.old
        snap = dict(table.objects)
        for k, e in older.items():
            if e is None:
                snap.pop(k, None)
            else:
                snap[k] = e
        return snap

    def _workload(self, ns: str, name: str) -> dict[str, Any] | None:
        entry = self.tables[workloads.NATIVE[0], "workloads"].objects.get((ns, name))
        return None if entry is None else entry.obj()

    def lookup_priority_class(self, name: str) -> dict[str, Any] | None:
        entry = self.tables[("scheduling.k8s.io", "priorityclasses")].objects.get(("", name))
        return None if entry is None else entry.obj()

    def default_priority_class(self) -> dict[str, Any] | None:
        for entry in self.tables[("scheduling.k8s.io", "priorityclasses")].objects.values():
            # runs on every pod create: look at the stored bytes before parsing anything
            if b'"globalDefault":true' in entry.raw:
                return entry.obj()
        return None

    # ------------------------------------------------------------------ writes

    def create(self, rt: ResourceType, ns: str, obj: Any, dry_run: bool = False, admit: bool = True) -> Entry:
        """Create an object. ``admit=False`` (Python API only, never over HTTP) skips defaulting and
        validation, so tests can plant objects a real API server would refuse, to check that the
        scheduler survives them."""
        view = obj if rt.from_view is not None and isinstance(obj, dict) else None
        obj = self._decode_body(rt, obj)
        table = self.table(rt)
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        elif not isinstance(meta, dict):
            raise errors.bad_request(f"{rt.kind} in version \"{rt.version}\" cannot be handled as a {rt.kind}: "
                                     f"metadata must be an object")
        if rt.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and ns and body_ns != ns:
                raise errors.bad_request("the namespace of the provided object does not match the namespace sent on the request")
            ns = ns or body_ns or "default"
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
            ns = ""
        name = meta.get("name")
        prefix = meta.get("generateName") if not name else None
        if not (name and isinstance(name, str)) and not (prefix and isinstance(prefix, str)):
            raise _invalid(rt, "", [errors.required("metadata.name", "name or generateName is required")])
        if rt.namespaced:
            # admission names an object by its generateName: no name is generated before admission
            self._check_namespace(rt, ns, name or prefix)
        given_rv = meta.get("resourceVersion")

        # system fields, as rest.FillObjectMetaSystemFields and the registry do
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = self.now()
        meta.pop("resourceVersion", None)
        meta.pop("deletionTimestamp", None)
        meta.pop("deletionGracePeriodSeconds", None)
        meta.pop("selfLink", None)
        if rt.generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if not rt.create_keeps_status:
            obj.pop("status", None)
        if admit:
            self._prepare_create(rt, obj)
        if not name:
            # after defaulting and admission, before validation, as the registry generates it
            name = meta["name"] = _generate_name(prefix)
        if view is not None:
            # events.k8s.io/v1 creates carry stricter rules than core/v1 ones (ValidateEventCreate),
            # checked as upstream once the namespace came from the URL and the name from generateName
            vmeta = view.get("metadata") if isinstance(view.get("metadata"), dict) else {}
            causes = convert.validate_events_v1({**view, "metadata": {**vmeta, "namespace": ns, "name": name}})
            if causes:
                raise _invalid(rt, name, causes)
        causes = self._validate_create(rt, obj) if admit else []
        _raise_undecodable(rt, causes)
        if causes:
            raise _invalid(rt, name, causes)
        if admit:
            self._canonicalize(rt, obj)
        # storage comes last, after admission and validation: a resourceVersion in the body is a
        # bare error there (a 500 with no reason), then a taken name is 409
        if not dry_run and isinstance(given_rv, str) and given_rv.isdigit() and int(given_rv) != 0:
            raise errors.APIError(500, "", "resourceVersion should not be set on objects to be created")
        if (ns, name) in table.objects:
            raise errors.already_exists(rt.plural, name, rt.group)
        if dry_run:
            return self._entry(rt, obj, self.rv)
        return self._commit(table, obj, ADDED, None)

    def update(self, rt: ResourceType, ns: str, name: str, body: Any, subresource: str = "",
               dry_run: bool = False) -> Entry:
        body = self._decode_body(rt, body)
        table = self.table(rt)
        ns = ns if rt.namespaced else ""
        cur = self._require(table, ns, name)
        return self._update(rt, table, cur, cur.obj(), body, subresource, dry_run)

    def patch(self, rt: ResourceType, ns: str, name: str, content_type: str, patch: bytes,
              subresource: str = "", dry_run: bool = False) -> Entry:
        # The content type is checked before anything else. For built-in kinds the go-restful
        # route (Consumes: the patch types) refuses an unknown one before the handler runs; custom
        # resources have no such route, so their handler's negotiation error lists the accepted
        # types. Server-side apply is accepted upstream but not implemented here, so it is refused
        # by the handler's error.
        accepted = _PATCH_TYPES if rt.strategic else _CUSTOM_RESOURCE_PATCH_TYPES
        if content_type not in accepted:
            raise errors.unsupported_media_type() if rt.strategic else _unsupported_patch(accepted)
        if content_type == _APPLY_PATCH:
            raise _unsupported_patch(accepted)
        if not patch:
            raise errors.bad_request("the request body is empty")
        table = self.table(rt)
        ns = ns if rt.namespaced else ""
        cur = self._require(table, ns, name)
        old = cur.obj()
        view = rt.to_view(old) if rt.to_view else old
        try:
            doc = orjson.loads(patch)
        except orjson.JSONDecodeError as exc:
            raise errors.bad_request(f"error decoding patch: {exc}") from None
        try:
            if content_type == "application/merge-patch+json":
                new = patching.merge_patch(view, doc)
            elif content_type == "application/json-patch+json":
                new = patching.json_patch(view, doc)
            elif content_type == "application/strategic-merge-patch+json":
                if not isinstance(doc, dict):
                    raise errors.bad_request("error decoding patch: strategic merge patch must be a JSON object")
                new = patching.strategic_merge_patch(view, doc, patching.schema_kind(rt.kind, rt.group))
            else:
                raise _unsupported_patch(accepted)
        except patching.PatchError as exc:
            st = exc.status()  # the body kube-apiserver sends for this failure, code and all
            raise errors.APIError(exc.code, st.get("reason", ""), st["message"], st.get("details")) from None
        if not isinstance(new, dict):
            raise errors.bad_request(f"the patch produced a {type(new).__name__}, not a {rt.kind} object")
        new = self._decode_body(rt, new)
        uid = new["metadata"].get("uid") if isinstance(new.get("metadata"), dict) else None
        if uid and uid != cur.uid:
            # unlike an update's, a patch's uid is no storage precondition: the patched object fails validation,
            # in rest.BeforeUpdate's common fields and again in the kind's ValidateObjectMetaUpdate
            immutable = errors.invalid_value("metadata.uid", uid, "field is immutable")
            raise _invalid(rt, cur.key[1], [immutable, immutable])
        return self._update(rt, table, cur, old, new, subresource, dry_run)

    def _update(self, rt: ResourceType, table: Table, cur: Entry, old: dict[str, Any],
                body: dict[str, Any], subresource: str, dry_run: bool) -> Entry:
        name = cur.key[1]
        meta = body.get("metadata")
        if not isinstance(meta, dict):
            meta = body["metadata"] = {}
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL ({name})")
        if rt.namespaced and meta.get("namespace") and meta["namespace"] != cur.key[0]:
            raise errors.bad_request("the namespace of the provided object does not match the namespace sent on the request")
        if meta.get("uid") and meta["uid"] != cur.uid:
            # the uid of an update body is a storage precondition (rest.DefaultUpdatedObjectInfo), checked
            # before the update runs, so before its resourceVersion
            raise errors.conflict(rt.plural, name, _storage_precondition_failed(
                rt, cur.key, f"UID in precondition: {meta['uid']}, UID in object meta: {cur.uid}"), rt.group)
        want_rv = meta.get("resourceVersion")
        if want_rv and want_rv != str(cur.rv):
            raise errors.conflict(rt.plural, name, errors.STALE, rt.group)
        old_meta = old["metadata"]
        meta_written = subresource != "status"
        if subresource == "status":
            # status writes change status only (ResetObjectMetaForStatus + spec copied back)
            new = dict(old)
            if "status" in body:
                new["status"] = body["status"]
            else:
                new.pop("status", None)
            defaults.fill_zero_status(rt.group, rt.kind, new)
            if (rt.group, rt.kind) in _STATUS_WRITES_METADATA:
                # ... except that the pods/status and nodes/status strategies reset only spec (and a
                # pod's ownerReferences): the body's labels, annotations and finalizers are written
                meta_written = True
                new_meta = dict(meta)
                keep = _SYSTEM_META + (("ownerReferences",) if rt.kind == "Pod" else ())
                for k in keep:
                    if k in old_meta:
                        new_meta[k] = old_meta[k]
                    else:
                        new_meta.pop(k, None)
                new_meta.pop("selfLink", None)
                new["metadata"] = new_meta
        else:
            new = body
            self._default(rt, new)  # before the generation check: a defaulted field is no spec change
            if rt.has_status:
                if "status" in old:
                    new["status"] = old["status"]
                else:
                    new.pop("status", None)
            new_meta = new["metadata"]
            for k in _SYSTEM_META:
                if k in old_meta:
                    new_meta[k] = old_meta[k]
                else:
                    new_meta.pop(k, None)
            new_meta.pop("selfLink", None)
            if rt.generation and _spec_of(new) != _spec_of(old):
                new_meta["generation"] = old_meta.get("generation", 1) + 1
        new.setdefault("apiVersion", old.get("apiVersion"))
        new.setdefault("kind", old.get("kind"))
        new["metadata"]["resourceVersion"] = old_meta.get("resourceVersion")
        # names are immutable: only a changed generateName can fail here (the kind's rule, else the path rule)
        causes = (defaults.validate_object_meta(new, rt.namespaced, rt.name_rule or names.validate_path_segment_name)
                  if meta_written else [])
        causes += self._validate_update(rt, old, new, subresource)
        _raise_undecodable(rt, causes)
        if causes:
            raise _invalid(rt, name, causes)
        if new == old:
            return cur  # a no-op write does not bump resourceVersion (GuaranteedUpdate short-circuits)
        if dry_run:
            return self._entry(rt, new, cur.rv)
        nm = new["metadata"]
        if nm.get("deletionTimestamp") and not nm.get("finalizers") and not self._awaiting_grace(rt, new):
            # the last finalizer is gone: the pending delete completes now
            return self._commit(table, new, DELETED, cur)
        return self._commit(table, new, MODIFIED, cur)

    def _awaiting_grace(self, rt: ResourceType, obj: dict[str, Any]) -> bool:
        return rt.kind == "Pod" and rt.group == "" and (obj["metadata"].get("deletionGracePeriodSeconds") or 0) > 0

    def delete(self, rt: ResourceType, ns: str, name: str, grace: int | None = None,
               preconditions: dict[str, Any] | None = None, dry_run: bool = False) -> tuple[Entry, bool]:
        """Delete or start deleting. Returns the object and whether it is gone now."""
        table = self.table(rt)
        ns = ns if rt.namespaced else ""
        cur = self._require(table, ns, name)
        if preconditions:
            check_delete_preconditions(rt, cur, preconditions)
        if grace is not None and grace < 0:
            raise errors.invalid("DeleteOptions", "", [errors.invalid_value("gracePeriodSeconds", grace,
                                                                            "must be greater than or equal to 0")])
        obj = cur.obj()
        meta = obj["metadata"]
        is_pod = rt.kind == "Pod" and rt.group == ""
        if is_pod:
            spec = obj.get("spec") or {}
            if grace is None:
                grace = spec.get("terminationGracePeriodSeconds", 30)
            phase = (obj.get("status") or {}).get("phase")
            if not spec.get("nodeName") or phase in _TERMINAL:
                grace = 0  # never scheduled or already finished: nothing to stop (pod strategy CheckGracefulDelete)
            if grace > 0:
                prev = meta.get("deletionGracePeriodSeconds")
                if prev is not None and prev <= grace:
                    return cur, False  # an in-flight delete can only be shortened
                if not meta.get("deletionTimestamp") and meta.get("generation"):
                    meta["generation"] += 1  # BeforeDelete bumps generation on the first graceful delete
                meta["deletionTimestamp"] = rfc3339(self.clock() + grace)
                meta["deletionGracePeriodSeconds"] = grace
                if dry_run:
                    return self._entry(rt, obj, cur.rv), False
                return self._commit(table, obj, MODIFIED, cur), False
            if (meta.get("deletionGracePeriodSeconds") or not meta.get("deletionTimestamp")) \
                    and not meta.get("finalizers") and not dry_run:
                # Pods delete gracefully even at grace 0: the registry first writes the deletion
                # marks (updateForGracefulDeletionAndFinalizers), then deletes. Watchers see a
                # MODIFIED with deletionTimestamp and deletionGracePeriodSeconds=0, then DELETED.
                if not meta.get("deletionTimestamp"):
                    meta["deletionTimestamp"] = self.now()
                    if meta.get("generation"):
                        meta["generation"] += 1
                meta["deletionGracePeriodSeconds"] = 0
                cur = self._commit(table, obj, MODIFIED, cur)
                obj = cur.obj()
                meta = obj["metadata"]
        if rt.kind == "Namespace":
            return self._delete_namespace(table, cur, obj, dry_run)
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp") and (meta.get("deletionGracePeriodSeconds") or 0) == 0:
                return cur, False
            if not meta.get("deletionTimestamp") and meta.get("generation"):
                meta["generation"] += 1  # markAsDeleting / BeforeDelete bump generation once
            meta.setdefault("deletionTimestamp", self.now())
            meta["deletionGracePeriodSeconds"] = 0
            if dry_run:
                return self._entry(rt, obj, cur.rv), False
            return self._commit(table, obj, MODIFIED, cur), False
        if dry_run:
            return cur, True
        if meta.get("deletionGracePeriodSeconds") is not None:
            meta["deletionGracePeriodSeconds"] = 0
        return self._commit(table, obj, DELETED, cur), True

    def _delete_namespace(self, table: Table, cur: Entry, obj: dict[str, Any],
                          dry_run: bool) -> tuple[Entry, bool]:
        name = cur.key[1]
        if name in ("default", "kube-system", "kube-public"):
            raise errors.forbidden("namespaces", name, "this namespace may not be deleted")
        if dry_run:
            return cur, False
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            return cur, False
        meta["deletionTimestamp"] = self.now()
        meta["deletionGracePeriodSeconds"] = 0
        obj.setdefault("status", {})["phase"] = "Terminating"
        entry = self._commit(table, obj, MODIFIED, cur)
        # the namespace controller's job: empty it, then drop the namespace
        try:
            asyncio.get_running_loop().call_soon(self._finish_namespace, name)
        except RuntimeError:
            self._finish_namespace(name)
        return entry, False

    def _finish_namespace(self, ns: str) -> None:
        for table in self.tables.values():
            if not table.rt.namespaced:
                continue
            for key in [k for k in table.objects if k[0] == ns]:
                entry = table.objects[key]
                obj = entry.obj()
                obj["metadata"].pop("finalizers", None)
                obj["metadata"].setdefault("deletionTimestamp", self.now())
                self._commit(table, obj, DELETED, entry)
        ns_table = self.tables[("", "namespaces")]
        cur = ns_table.objects.get(("", ns))
        if cur is not None:
            self._commit(ns_table, cur.obj(), DELETED, cur)

    def delete_collection(self, rt: ResourceType, ns: str, match: Selector, grace: int | None,
                          dry_run: bool = False) -> list[Entry]:
        listed = self.list(rt, ns, match)
        out = []
        for e in listed.entries:
            try:
                entry, _ = self.delete(rt, e.key[0], e.key[1], grace, None, dry_run)
            except errors.APIError as exc:
                if exc.code == 404:
                    continue
                raise
            out.append(entry)
        return out

    def bind(self, ns: str, name: str, binding: Any) -> Entry:
        """POST pods/NAME/binding: set spec.nodeName and PodScheduled=True, as the binding REST storage does."""
        if not isinstance(binding, dict):
            raise errors.bad_request("the object provided is unrecognized (must be of type Binding)")
        if binding.get("kind") not in (None, "", "Binding"):
            raise errors.bad_request(f"the object provided is unrecognized (must be of type Binding): kind {binding.get('kind')}")
        if binding.get("apiVersion") not in (None, "", "v1"):
            raise errors.bad_request(f"the API version in the data ({binding.get('apiVersion')}) does not match the "
                                     f"expected API version (v1)")
        meta = binding.get("metadata")
        meta = {} if meta is None else meta
        target = binding.get("target")
        target = {} if target is None else target
        if not _binding_decodes(meta, target):
            raise errors.bad_request('Binding in version "v1" cannot be handled as a Binding: '
                                     'a field has the wrong JSON type')
        if meta.get("namespace") and meta["namespace"] != ns:
            raise errors.bad_request("the namespace of the provided object does not match the namespace sent on "
                                     "the request")
        if (meta.get("name") or "") != name:
            raise errors.bad_request("name in URL does not match name in Binding object")
        causes = []
        if target.get("kind") not in (None, "", "Node"):
            causes.append(errors.not_supported("target.kind", target.get("kind"), ["Node", "<empty>"]))
        if not target.get("name"):
            causes.append(errors.required("target.name"))
        if causes:
            # BindingREST.Create returns ValidatePodBinding's errors as a bare aggregate, which the
            # handler answers as a 500 with no reason (kubernetes/kubernetes#139488)
            texts = [c.text() for c in causes]
            raise errors.APIError(500, "", texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]")
        pods = self.tables[("", "pods")]
        cur = pods.objects.get((ns, name))
        if cur is None:
            raise errors.not_found("pods", name)
        # the Binding's uid and resourceVersion are storage preconditions of the pod update; their
        # failure is a StorageError that InterpretUpdateError turns into a Conflict on "pods"
        if meta.get("uid") and meta["uid"] != cur.uid:
            raise errors.conflict("pods", name, _storage_precondition_failed(
                pods.rt, cur.key, f"UID in precondition: {meta['uid']}, UID in object meta: {cur.uid}"))
        if meta.get("resourceVersion") and meta["resourceVersion"] != str(cur.rv):
            raise errors.conflict("pods", name, _storage_precondition_failed(
                pods.rt, cur.key, f"ResourceVersion in precondition: {meta['resourceVersion']}, "
                                  f"ResourceVersion in object meta: {cur.rv}"))
        pod = cur.obj()
        pmeta = pod["metadata"]
        spec = pod.setdefault("spec", {})
        if pmeta.get("deletionTimestamp"):
            raise errors.conflict("pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
        if spec.get("nodeName"):
            raise errors.conflict("pods/binding", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"')
        if spec.get("schedulingGates"):
            raise errors.conflict("pods/binding", name, f"pod {name} has non-empty .spec.schedulingGates")
        spec["nodeName"] = target["name"]
        if meta.get("annotations"):
            pmeta.setdefault("annotations", {}).update(meta["annotations"])
        status = pod.setdefault("status", {})
        conditions = status.setdefault("conditions", [])
        now = self.now()
        for c in conditions:
            if c.get("type") == "PodScheduled":
                if c.get("status") != "True":
                    c["status"] = "True"
                    c["lastTransitionTime"] = now
                c.pop("reason", None)
                c.pop("message", None)
                break
        else:
            conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                               "lastTransitionTime": now})
        return self._commit(pods, pod, MODIFIED, cur)

    # ------------------------------------------------------------------ write hooks

    def observe(self, fn: Observer) -> Callable[[], None]:
        """Call ``fn(verb, resource, namespace, name, result)`` after every write; returns its removal.

        What kube-apiserver's audit log records of a request, in process:

        * ``verb``: ``create``, ``update``, ``patch`` or ``delete``; a bind is
          a ``create`` of ``pods/binding``, as the HTTP layer and fault rules
          name it;
        * ``resource``: ``plural[/subresource][.group]``, e.g. ``pods``,
          ``pods/binding``, ``pods/status``, ``podgroups.scheduling.x-k8s.io``;
        * ``namespace``, ``name``: the object's (namespace "" when
          cluster-scoped; name "" for a create refused before generateName
          gave it one);
        * ``result``: the :class:`Entry` the write stored (a delete's: the
          object as the delete left it, gone or marked with a
          deletionTimestamp), or the :class:`errors.APIError` the write failed
          with, as its caller gets it (a refused bind: 409 and its message).

        Every write through :meth:`create`, :meth:`update`, :meth:`patch`,
        :meth:`delete` (each one of a delete-collection too) and :meth:`bind`
        is reported, whoever made it: the HTTP API, the node agent, a test.
        Not reported: dry runs, which write nothing, and the deletes of the
        store's own namespace cleanup.

        Observers run synchronously after the write, before its caller gets
        the answer; they must not write to the store. Whatever one raises
        reaches the caller (over HTTP: a 500), the write stays done.
        """
        return self._add_hook(self._observers, fn)

    def admit(self, fn: Admission) -> Callable[[], None]:
        """Call ``fn(verb, resource, namespace, name)`` before every write; returns its removal.

        A validating admission webhook, in process: ``fn`` refuses the write by
        raising an :class:`errors.APIError`, which the caller gets instead
        (and observers see as the write's result); returning lets it through.
        Arguments and the writes covered are those of :meth:`observe`.
        """
        return self._add_hook(self._admissions, fn)

    def _add_hook(self, hooks: list[Any], fn: Any) -> Callable[[], None]:
        # Zero cost until used: the first hook shadows this store's write methods with hooked
        # ones (instance attributes over the class's); removing the last hook drops them again.
        if not self._observers and not self._admissions:
            for method, verb in _HOOKED_WRITES.items():
                setattr(self, method, _hooked(self, method, verb))
        hooks.append(fn)

        def remove() -> None:
            hooks.remove(fn)
            if not self._observers and not self._admissions:
                for method in _HOOKED_WRITES:
                    delattr(self, method)

        return remove

    # ------------------------------------------------------------------ per-kind rules

    def _decode_body(self, rt: ResourceType, obj: Any) -> dict[str, Any]:
        if not isinstance(obj, dict):
            raise errors.bad_request(f"the object provided is unrecognized (must be of type {rt.kind})")
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if kind and kind != rt.kind:
            raise errors.bad_request(f"the object provided is unrecognized (must be of type {rt.kind}): "
                                     f"couldn't get version/kind; json parse error: kind {kind!r}")
        if api_version and api_version != rt.api_version:
            raise errors.bad_request(f"the API version in the data ({api_version}) does not match the "
                                     f"expected API version ({rt.api_version})")
        if rt.from_view is not None:
            obj = rt.from_view(obj)
            stored = by_kind_storage(rt)
            obj["apiVersion"], obj["kind"] = stored.api_version, stored.kind
        else:
            obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        return obj

    def _prepare_create(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        if rt.group == "":
            if rt.kind == "Pod":
                defaults.default_pod(obj, self.lookup_priority_class, self.default_priority_class)
            elif rt.kind == "Node":
                defaults.default_node(obj)
            elif rt.kind == "Namespace":
                obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
                obj["status"] = {"phase": "Active"}
            elif rt.kind in ("PersistentVolume", "PersistentVolumeClaim"):
                obj["status"] = {"phase": "Pending"}
                defaults.admit_storage_object(rt.kind, obj, self.now())
        workloads.prepare_create(rt.kind, rt.group, rt.version, obj, self.lookup_priority_class,
                                 self.default_priority_class)
        self._default(rt, obj)
        if dra.owns(rt.group):
            dra.prepare_create(rt.kind, obj, self.now())
        defaults.fill_zero_status(rt.group, rt.kind, obj)  # PrepareForCreate: the zero status

    @staticmethod
    def _default(rt: ResourceType, obj: dict[str, Any]) -> None:
        default = defaults.SCHEME_DEFAULTS.get((rt.group, rt.kind))
        if default is not None:
            default(obj)
        elif dra.owns(rt.group):
            dra.default(rt.kind, obj)

    def _validate_create(self, rt: ResourceType, obj: dict[str, Any]) -> list[errors.FieldError]:
        """rest.BeforeCreate's two checks: the kind's strategy, metadata with the kind's name rule first;
        then, only if that found nothing, every kind's metadata check, with path-segment names."""
        if rt.group == "batch" and rt.kind == "Job":
            workloads.generate_selector(obj)   # the Job strategy's Validate starts by generating it
        causes = self._validate_kind_create(rt, obj)
        if rt.name_rule is not None:
            # the second check cannot fail after this one: no name a rule allows is refused as a path
            # segment, and the rest of the metadata is checked the same way
            return defaults.validate_object_meta(obj, rt.namespaced, rt.name_rule) + causes
        return causes or defaults.validate_object_meta(obj, rt.namespaced, names.validate_path_segment_name)

    def _validate_kind_create(self, rt: ResourceType, obj: dict[str, Any]) -> list[errors.FieldError]:
        owned = workloads.validate_create(rt.kind, rt.group, rt.version, obj, self._workload)
        if rt.group == "" and rt.kind == "Pod":
            return defaults.validate_pod_create(obj) + draclaims.validate_pod_resource_claims(obj) + owned
        if owned or rt.group in ("batch", "scheduling.k8s.io"):
            return owned
        if rt.group == "" and rt.kind == "Node":
            return defaults.validate_node_create(obj)
        if rt.group == "" and rt.kind == "Event":
            return convert.validate_core_v1_event(obj)
        if dra.owns(rt.group):
            return dra.validate_create(rt.kind, obj, self._namespace_labels)
        return []

    def _namespace_labels(self, ns: str) -> dict[str, str]:
        namespace = self.get_obj(lookup("", "v1", "namespaces"), "", ns) or {}
        return (namespace.get("metadata") or {}).get("labels") or {}

    @staticmethod
    def _canonicalize(rt: ResourceType, obj: dict[str, Any]) -> None:
        """After validation: the strategy's Canonicalize, and the defaulting every read of the stored object
        gets (the real server defaults what it decodes from etcd)."""
        if rt.group == "" and rt.kind == "Namespace":
            # a namespace made from a generateName is labelled with its name only now
            defaults.default_namespace(obj)
        elif rt.group == "batch" and rt.kind == "Job":
            # a Job stored without labels reads back with its template's, generated selector labels included
            workloads.default_job(obj)

    def _validate_update(self, rt: ResourceType, old: dict[str, Any], new: dict[str, Any],
                         subresource: str) -> list[errors.FieldError]:
        """Update-time admission (may complete ``new``) and validation."""
        owned = workloads.validate_update(rt.kind, rt.group, rt.version, old, new, subresource)
        if owned or rt.group in ("batch", "scheduling.k8s.io"):
            return owned
        if rt.group == "" and rt.kind == "Pod":
            if subresource == "status":
                status = new.get("status")
                if isinstance(status, dict) and not status.get("qosClass"):
                    # the status strategy keeps the stored QoS class when a write omits it
                    qos = (old.get("status") or {}).get("qosClass")
                    if qos:
                        status["qosClass"] = qos
                return defaults.validate_pod_status_update(old, new) + draclaims.validate_pod_claim_statuses(new)
            defaults.admit_pod_update(old, new)
            return defaults.validate_pod_update(old, new)
        if rt.group == "" and rt.kind == "PersistentVolume" and subresource == "status":
            defaults.stamp_volume_phase_transition(old, new, self.now())
        if rt.from_view is not None and rt.kind == "Event":
            return _validate_events_v1_update(old, new)
        if dra.owns(rt.group):
            return dra.validate_update(rt.kind, old, new, subresource, self.now())
        return []

    # ------------------------------------------------------------------ watch

    def watcher(self, rt: ResourceType, ns: str, match: Selector, rv: str,
                send_initial: bool | None = None) -> "Watcher":
        """A cursor over ``rt``'s events after ``rv``.

        As kube-apiserver: an unset or "0" resourceVersion first replays the
        current objects as ADDED; a specific one resumes after it, or fails
        with 410 Expired when it is older than the retained window.
        """
        table = self.table(rt)
        initial: list[Entry] = []
        if send_initial is None:
            send_initial = rv in ("", "0")
        if send_initial:
            snap = self.list(rt, ns, match) if rv in ("", "0") else None
            if snap is not None:
                initial = snap.entries
                seq = table.end()
            else:
                want = _parse_rv(rv)
                snapshot = self._snapshot(table, want, "too old resource version")
                initial = [snapshot[k] for k in sorted(snapshot)
                           if (not ns or k[0] == ns) and match(snapshot[k])]
                seq = self._seq_after(table, want)
        else:
            want = _parse_rv(rv)
            if want < table.window_start:
                raise errors.expired(f"too old resource version: {want} ({table.window_start + 1})")
            seq = self._seq_after(table, want)
        return Watcher(self, rt, table, ns, match, seq, initial)

    @staticmethod
    def _seq_after(table: Table, rv: int) -> int:
        return table.base + bisect.bisect_right(table.log, rv, key=lambda ev: ev.rv)


# the write methods hooks see, and the verb each one is
_HOOKED_WRITES = {"create": "create", "update": "update", "patch": "patch", "delete": "delete", "bind": "create"}


def _hooked(store: Store, method: str, verb: str) -> Callable[..., Any]:
    """``store.<method>`` with the store's admissions before it and its observers after it."""
    plain = getattr(Store, method)
    signature = inspect.signature(plain)

    @functools.wraps(plain)
    def write(*args: Any, **kwargs: Any) -> Any:
        a = signature.bind(store, *args, **kwargs).arguments
        if a.get("dry_run"):
            return plain(store, *args, **kwargs)
        resource, ns, name = _write_target(method, a)
        try:
            for admit in tuple(store._admissions):
                admit(verb, resource, ns, name)
            result = plain(store, *args, **kwargs)
        except errors.APIError as exc:
            for observe in tuple(store._observers):
                observe(verb, resource, ns, name, exc)
            raise
        entry = result[0] if method == "delete" else result   # delete answers (entry, gone)
        for observe in tuple(store._observers):
            observe(verb, resource, entry.key[0], entry.key[1], entry)
        return result

    return write


def _write_target(method: str, a: dict[str, Any]) -> tuple[str, str, str]:
    """(resource, namespace, name) of a write, from its arguments, before it runs."""
    if method == "bind":
        return "pods/binding", a["ns"], a["name"]
    rt: ResourceType = a["rt"]
    resource = rt.label(a.get("subresource", ""))
    ns = a["ns"] if rt.namespaced else ""
    if method != "create":
        return resource, ns, a["name"]
    meta = a["obj"].get("metadata") if isinstance(a["obj"], dict) else None
    meta = meta if isinstance(meta, dict) else {}
    if rt.namespaced and not ns:
        ns = str(meta.get("namespace") or "default")   # as create fills it in
    return resource, ns, str(meta.get("name") or "")


class Watcher:
    """One client's position in a table's event log."""

    __slots__ = ("store", "rt", "table", "ns", "match", "seq", "initial", "last_rv")

    def __init__(self, store: Store, rt: ResourceType, table: Table, ns: str, match: Selector,
                 seq: int, initial: list[Entry]) -> None:
        self.store = store
        self.rt = rt
        self.table = table
        self.ns = ns if rt.namespaced else ""
        self.match = match
        self.seq = seq
        self.initial = initial
        self.last_rv = store.rv if initial else 0

    def take_initial(self) -> list[tuple[str, Entry]]:
        out = [(ADDED, e) for e in self.initial]
        self.initial = []
        return out

    def poll(self, max_events: int = 2048) -> list[tuple[str, Entry]]:
        """Events available now, filtered and typed for this watcher. Raises Dropped."""
        chunk = self._take(max_events)
        out: list[tuple[str, Entry]] = []
        ns, match = self.ns, self.match
        for ev in chunk:
            new = ev.new
            if ns and new.key[0] != ns:
                continue
            if ev.type == MODIFIED:
                now_in = match(new)
                was_in = match(ev.old)
                if now_in and was_in:
                    out.append((MODIFIED, new))
                elif now_in:
                    out.append((ADDED, new))
                elif was_in:
                    # as the watch cache: the previous content, stamped with this event's rv
                    out.append((DELETED, _restamp(ev.old, ev.rv)))
            elif match(new):
                out.append((ev.type, new))
        return out

    def poll_events(self, max_events: int = 2048) -> list[Event]:
        """The table's events available now, as stored: unfiltered (this watcher's namespace and
        selector do not apply), each with the version it replaced (``Event.old``). For the stand-in's
        controllers, which must know what a change left behind: a pod's labels before a relabel.
        Raises Dropped."""
        return self._take(max_events)

    def _take(self, max_events: int) -> list[Event]:
        table = self.table
        if self.seq < table.base:
            raise Dropped()
        start = self.seq - table.base
        chunk = table.log[start:start + max_events]
        self.seq += len(chunk)
        if chunk:
            self.last_rv = chunk[-1].rv
        return chunk

    def caught_up(self) -> bool:
        return self.seq >= self.table.end()

    async def wait(self, timeout: float) -> None:
        """Sleep until the table has an event this watcher has not seen, or ``timeout``."""
        if self.seq < self.table.end() or timeout <= 0:
            return
        table = self.table
        if table.waiter is None or table.waiter.done():
            table.waiter = asyncio.get_running_loop().create_future()
        await asyncio.wait((table.waiter,), timeout=timeout)


# ValidateEventUpdate's strict part (events.k8s.io/v1 writes): (core/v1 key, path upstream reports)
_EVENT_IMMUTABLE = (("involvedObject", "involvedObject"), ("reason", "reason"), ("message", "message"),
                    ("source", "source"), ("firstTimestamp", "firstTimestamp"), ("lastTimestamp", "lastTimestamp"),
                    ("count", "count"), ("type", "type"), ("action", "action"), ("related", "related"),
                    ("reportingComponent", "reportingController"), ("reportingInstance", "reportingInstance"))


def _validate_events_v1_update(old: dict[str, Any], new: dict[str, Any]) -> list[errors.FieldError]:
    """An Event written through events.k8s.io/v1 may change only its series (and metadata)."""
    def norm(v: Any) -> Any:
        return None if v in (None, "", 0, {}, []) else v  # Go zero values compare equal

    causes: list[errors.FieldError] = []
    series = new.get("series")
    if norm(series) != norm(old.get("series")) and isinstance(series, dict):
        if not isinstance(series.get("count"), int) or series["count"] < 2:
            causes.append(errors.invalid_value("series.count", "", "should be at least 2"))
        if not series.get("lastObservedTime"):
            causes.append(errors.required("series.lastObservedTime"))
    for key, path in _EVENT_IMMUTABLE:
        if norm(new.get(key)) != norm(old.get(key)):
            causes.append(errors.invalid_value(path, new.get(key), "field is immutable"))
    if norm(new.get("eventTime")) != norm(old.get("eventTime")):
        try:  # changes below a microsecond are tolerated upstream (kubernetes#111928)
            same = datetime.fromisoformat(new["eventTime"]) == datetime.fromisoformat(old["eventTime"])
        except (KeyError, TypeError, ValueError):
            same = False
        if not same:
            causes.append(errors.invalid_value("eventTime", new.get("eventTime"), "field is immutable"))
    return causes


def _restamp(entry: Entry, rv: int) -> Entry:
    """``entry``'s content at resourceVersion ``rv`` (cacheWatcher.convertToWatchEvent's updateResourceVersion)."""
    obj = entry.obj()
    obj["metadata"]["resourceVersion"] = str(rv)
    return Entry(orjson.dumps(obj), entry.labels, entry.fields, rv, entry.key, entry.uid)


def encode_event(type_: str, raw: bytes) -> bytes:
    return _TYPE_BYTES[type_] + raw + b"}\n"


def _invalid(rt: ResourceType, name: str, causes: list[errors.FieldError]) -> errors.APIError:
    """422 Invalid, naming the kind as its strategy types it: through a view (events.k8s.io/v1), the stored
    kind (core/v1 Event), as the real server says ``Event "x" is invalid``."""
    stored = by_kind_storage(rt) if rt.storage else rt
    return errors.invalid(stored.kind, name, causes, stored.group)


def by_kind_storage(rt: ResourceType) -> ResourceType:
    group, plural = rt.key
    for r in RESOURCES:
        if r.group == group and r.plural == plural and r.storage is None:
            return r
    raise KeyError(rt.key)


_APPLY_PATCH = "application/apply-patch+yaml"
# the PATCH types kube-apiserver lists, in its order: built-in kinds, and custom resources (no strategic merge)
_PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
                "application/strategic-merge-patch+json", _APPLY_PATCH)
_CUSTOM_RESOURCE_PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json", _APPLY_PATCH)


def _unsupported_patch(accepted: tuple[str, ...]) -> errors.APIError:
    # negotiation.NewUnsupportedMediaTypeError
    return errors.APIError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                                                        "accepted media types include: " + ", ".join(accepted))


def _binding_decodes(meta: Any, target: Any) -> bool:
    """Whether a Binding's metadata and target would decode into their Go types (null is a zero value)."""
    if not isinstance(meta, dict) or not isinstance(target, dict):
        return False
    for v in (*(meta.get(k) for k in ("name", "namespace", "uid", "resourceVersion", "generateName")),
              *(target.get(k) for k in ("kind", "name", "namespace", "uid", "apiVersion", "resourceVersion",
                                        "fieldPath"))):
        if v is not None and not isinstance(v, str):
            return False
    for k in ("annotations", "labels"):
        m = meta.get(k)
        if m is not None and not (isinstance(m, dict) and all(isinstance(v, str) or v is None for v in m.values())):
            return False
    return True


# kinds whose status strategy resets only spec, so that a status write keeps the body's labels,
# annotations and finalizers (a custom resource's resets all of metadata)
_STATUS_WRITES_METADATA = frozenset({("", "Pod"), ("", "Node"), ("", "Service"), ("", "ReplicationController"),
                                     ("apps", "ReplicaSet"), ("apps", "StatefulSet"),
                                     ("policy", "PodDisruptionBudget")})

# metadata an update never changes (rest.BeforeUpdate and the strategies)
_SYSTEM_META = ("uid", "creationTimestamp", "namespace", "name", "deletionTimestamp",
                "deletionGracePeriodSeconds", "generation", "generateName")


def _storage_key(rt: ResourceType, key: Key) -> str:
    """The etcd key kube-apiserver stores an object under (default --etcd-prefix /registry)."""
    group, plural = rt.key
    if not rt.strategic:
        prefix = f"/registry/{group}/{plural}"  # custom resources: /registry/GROUP/PLURAL
    else:
        prefix = "/registry/minions" if (group, plural) == ("", "nodes") else f"/registry/{plural}"
    ns, name = key
    return f"{prefix}/{ns}/{name}" if ns else f"{prefix}/{name}"


def _storage_precondition_failed(rt: ResourceType, key: Key, what: str) -> str:
    """storage.Preconditions.Check's error, as StorageError prints it."""
    return (f"StorageError: invalid object, Code: 4, Key: {_storage_key(rt, key)}, ResourceVersion: 0, "
            f"AdditionalErrorMsg: Precondition failed: {what}")


def check_delete_preconditions(rt: ResourceType, cur: Entry, pre: dict[str, Any]) -> None:
    """A delete's preconditions (uid, resourceVersion) against the stored object: 409 Conflict when one fails."""
    name = cur.key[1]
    uid, prv = pre.get("uid"), pre.get("resourceVersion")
    if rt.group == "" and rt.kind == "Namespace":
        # the namespace registry checks them itself, before the generic store, in its own words
        if uid and uid != cur.uid:
            raise errors.conflict("namespaces", name,
                                  f"Precondition failed: UID in precondition: {uid}, UID in object meta: {cur.uid}")
        if prv and prv != str(cur.rv):
            raise errors.conflict("namespaces", name, f"Precondition failed: ResourceVersion in precondition: "
                                                      f"{prv}, ResourceVersion in object meta: {cur.rv}")
        return
    # rest.BeforeDelete fails early, naming the kind: GroupResource{Group, Resource: Kind}
    stored = by_kind_storage(rt) if rt.storage else rt
    if uid and uid != cur.uid:
        raise errors.conflict(stored.kind, name, f"the UID in the precondition ({uid}) does not match the UID in "
                                                 f"record ({cur.uid}). The object might have been deleted and then "
                                                 f"recreated", stored.group)
    if prv and prv != str(cur.rv):
        raise errors.conflict(stored.kind, name, f"the ResourceVersion in the precondition ({prv}) does not match "
                                                 f"the ResourceVersion in record ({cur.rv}). The object might have "
                                                 f"been modified", stored.group)


_UNDECODABLE_QUANTITY = "quantities must match the regular expression"


def _raise_undecodable(rt: ResourceType, causes: list[errors.FieldError]) -> None:
    """A quantity that does not parse fails kube-apiserver's decoding (400), before any validation."""
    for c in causes:
        if c.detail.startswith(_UNDECODABLE_QUANTITY):
            raise errors.bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                                     f"{c.detail}")


def _spec_of(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _parse_rv(rv: str) -> int:
    try:
        n = int(rv)
    except ValueError:
        raise errors.bad_request(f"invalid resource version: {rv!r}") from None
    if n < 0:
        raise errors.bad_request(f"invalid resource version: {rv!r}")
    return n


_CONTINUE_EXPIRED = ("The provided continue parameter is too old to display a consistent list result. "
                     "You can start a new list without the continue parameter, or use the continue token "
                     "in this response to retrieve the remainder of the results. Continuing with the provided "
                     "token results in an inconsistent list - objects that were created, modified, or deleted "
                     "between the time the first chunk was returned and now may show up in the list.")


def _encode_continue(rv: int, start: str) -> str:
    raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, str]:
    try:
        pad = "=" * (-len(token) % 4)
        data = orjson.loads(base64.urlsafe_b64decode(token + pad))
        if data.get("v") != "meta.k8s.io/v1":
            raise ValueError
        return int(data["rv"]), str(data["start"])
    except Exception:
        raise errors.bad_request("continue key is not valid: incorrect encoded start resourceVersion "
                                 "(version meta.k8s.io/v1)") from None


def _split_key(start: str) -> Key:
    ns, _, name = start.partition("/")
    return (ns, name)
