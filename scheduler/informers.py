"""List + watch for one resource, turned into add / update / delete callbacks.

One :class:`Informer` per resource the scheduler follows (pods, nodes,
podgroups, PVCs, PVs, PDBs...). It keeps ``store``, the current objects as
the API server sent them, and calls sync handlers for every change. The
cache and the queue are built on those handlers, so the one promise that
matters is: **no change is lost and none is reported twice**, across
dropped connections, watch timeouts and 410 Gone.

The loop is split in two, as kopf's ``watching.py`` and client-go's
reflector do:

* :meth:`Informer._list_and_watch` (inner) lists, then watches from the
  list's resourceVersion, and keeps re-watching from the last event or
  bookmark when a stream ends (the server ends every watch after
  ``timeoutSeconds``, randomized 5-10 minutes like the reflector so that
  informers do not reconnect in lockstep). It returns when the server
  answers 410 Gone: the history it would resume from is compacted away.
* :meth:`Informer._run` (outer) runs forever: it relists at once after
  Gone, and after any other failure (connection lost, 5xx after the
  client's retries) waits with capped exponential backoff and resumes the
  watch from the last resourceVersion, without a relist.

A relist is reconciled against ``store``: new objects are adds, objects
with another resourceVersion are updates, objects that vanished are deletes
(with the last object known), so a pod deleted while the watch was down
still reaches ``on_delete``. A key whose uid changed is a delete of the old
object and an add of the new one, as two watch events would have said.

Performance: the pod informer sees every pod of the cluster (50,000 and
more). Lines are parsed with orjson by the client, objects are kept and
handed out as those very dicts (never copied, so handlers must not mutate
them), and the reconcile is a single pass over dicts.

``metadata.managedFields`` is dropped from every object as it arrives, as
kube-scheduler's informers do (``TransformStripManagedFields``): the
scheduler never reads it, and on a real API server it is most of a pod's
containers (34 of 49 dicts and lists of a pod just created), each one
memory and a walk of the cyclic collector's for as long as the pod lives.
An update that sends such an object back (a PV or PVC in VolumeBinding's
PreBind) leaves the server's managedFields as they are: an absent field is
not a request to clear them.

Handlers are sync, run on the loop, and must be quick; an exception in one
is logged and the informer carries on. Note that list items carry no
``kind`` / ``apiVersion`` (as from kube-apiserver) while watch objects do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from typing import Any, Callable, Mapping, Protocol

import orjson

from scheduler.apiclient import APIClient, Gone
from scheduler.framework.clock import Clock

log = logging.getLogger("tandem.informers")

Obj = dict[str, Any]

# the reflector's watch timeout: minWatchTimeout * (1 + rand) with minWatchTimeout = 5 min
DEFAULT_WATCH_TIMEOUT = (300, 600)
# a watch that ends this fast with nothing in it is a failure, not a timeout (reflector's "very short watch")
_SHORT_WATCH = 1.0
# give the loop a turn every this many objects while a big list is delivered
_YIELD_EVERY = 5000


class OnAdd(Protocol):
    def __call__(self, obj: Obj, /) -> None: ...


class OnUpdate(Protocol):
    def __call__(self, old: Obj, new: Obj, /) -> None: ...


class OnDelete(Protocol):
    def __call__(self, obj: Obj, /) -> None: ...


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name``, or ``name`` for cluster-scoped objects (client-go's MetaNamespaceKeyFunc)."""
    meta = obj["metadata"]
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else meta["name"]


class ShortWatch(Exception):
    """The server ended a watch at once with no events: back off instead of spinning."""


class Informer:
    """Follows one collection (``path``, e.g. ``/api/v1/pods``) and reports every change.

    ``params`` are extra ListOptions for both list and watch (selectors).
    ``page_size`` > 0 lists in pages of that many (``limit``/``continue``);
    0 lists in one request, as the reflector effectively does against the
    watch cache. ``backoff`` is (first, cap) seconds between reconnects.
    """

    def __init__(self, client: APIClient, path: str, params: Mapping[str, Any] | None = None, *,
                 name: str | None = None, on_add: OnAdd | None = None, on_update: OnUpdate | None = None,
                 on_delete: OnDelete | None = None, watch_timeout: tuple[int, int] = DEFAULT_WATCH_TIMEOUT,
                 backoff: tuple[float, float] = (0.5, 30.0), page_size: int = 0, clock: Clock,
                 share_spec: tuple[str, ...] = ()) -> None:
        self.client = client
        # spec fields whose equal values objects share (one list for all the pods of a template's containers)
        self.share_spec = share_spec
        self._shared: dict[bytes, Any] = {}
        self.clock: Clock = clock   # backoff waits and the short-watch check
        self.path = path
        self.params = dict(params or {})
        self.name = name or path.rstrip("/").rsplit("/", 1)[-1]
        self.watch_timeout = watch_timeout
        self.backoff = backoff
        self.page_size = page_size
        self.store: dict[str, Obj] = {}
        self.last_rv: str | None = None
        self.synced = asyncio.Event()
        # counters, for metrics and tests
        self.lists = 0
        self.watches = 0
        self.events = 0
        self.handler_errors = 0
        self._adds: list[OnAdd] = []
        self._updates: list[OnUpdate] = []
        self._deletes: list[OnDelete] = []
        self.add_handlers(on_add, on_update, on_delete)
        self._need_list = True
        self._progress = False
        self._task: asyncio.Task[None] | None = None

    def add_handlers(self, on_add: OnAdd | None = None, on_update: OnUpdate | None = None,
                     on_delete: OnDelete | None = None) -> None:
        """Register more handlers (before :meth:`start`); each is called in registration order."""
        if on_add is not None:
            self._adds.append(on_add)
        if on_update is not None:
            self._updates.append(on_update)
        if on_delete is not None:
            self._deletes.append(on_delete)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        if self._task is not None:
            raise RuntimeError(f"informer {self.name} already started")
        self._task = asyncio.create_task(self._run(), name=f"informer:{self.name}")
        self._task.add_done_callback(self._done)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def __aenter__(self) -> "Informer":
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("informer %s died", self.name, exc_info=task.exception())

    # ------------------------------------------------------------------ the two loops

    async def _run(self) -> None:
        """Outer loop: forever; relist after Gone, back off and resume after anything else."""
        first, cap = self.backoff
        delay = first
        while True:
            self._progress = False
            try:
                await self._list_and_watch()
            except asyncio.CancelledError:
                raise
            except Gone as exc:
                # a paged list whose continue token expired: start the list over, at once the first time
                self._need_list = True
                if self._progress:
                    delay = first
                    log.info("informer %s: %s; relisting", self.name, exc)
                    continue
                log.warning("informer %s: %s; relisting in %.1fs", self.name, exc, delay)
                await self.clock.sleep(delay)
                delay = min(cap, delay * 2)
                continue
            except Exception as exc:
                if self._progress:
                    delay = first
                action = "relisting" if self._need_list else f"resuming the watch at {self.last_rv}"
                log.warning("informer %s: %s: %s; %s in %.1fs", self.name, type(exc).__name__, exc,
                            action, delay)
                await self.clock.sleep(delay)
                delay = min(cap, delay * 2)
                continue
            log.info("informer %s: resourceVersion %s is gone (410); relisting", self.name, self.last_rv)
            delay = first

    async def _list_and_watch(self) -> None:
        """Inner loop: list (unless resuming), then watch until the server says 410 Gone."""
        if self._need_list:
            await self._relist()
            self._need_list = False
        while True:
            lo, hi = self.watch_timeout
            params = {**self.params, "allowWatchBookmarks": True, "resourceVersion": self.last_rv,
                      "timeoutSeconds": random.randint(lo, hi)}
            started = self.clock()
            received = 0
            self.watches += 1
            try:
                async with contextlib.aclosing(self.client.watch(self.path, params)) as stream:
                    async for event in stream:
                        received += 1
                        self._apply(event)
            except Gone:
                self._need_list = True
                return
            if not received and self.clock() - started < _SHORT_WATCH:
                raise ShortWatch(f"watch at {self.last_rv} ended at once with no events")
            self._progress = True

    # ------------------------------------------------------------------ list and reconcile

    async def _list(self) -> tuple[list[Obj], str]:
        if self.page_size <= 0:
            body = await self.client.list(self.path, self.params or None)
            return body.get("items") or [], body["metadata"]["resourceVersion"]
        items: list[Obj] = []
        cont = None
        while True:
            body = await self.client.list(self.path, {**self.params, "limit": self.page_size, "continue": cont})
            items.extend(body.get("items") or ())
            meta = body["metadata"]
            cont = meta.get("continue")
            if not cont:
                return items, meta["resourceVersion"]

    async def _relist(self) -> None:
        started = time.perf_counter()
        items, rv = await self._list()
        listed = time.perf_counter()
        self.lists += 1
        fresh: dict[str, Obj] = {}
        for obj in items:
            meta = obj["metadata"]
            self._trim(obj, meta)
            ns = meta.get("namespace")
            fresh[f"{ns}/{meta['name']}" if ns else meta["name"]] = obj
        old = self.store
        self.store = fresh
        self.last_rv = rv
        self._progress = True
        adds = updates = deletes = 0
        if not old:
            for i, obj in enumerate(items):
                self._add(obj)
                if i % _YIELD_EVERY == _YIELD_EVERY - 1:
                    await asyncio.sleep(0)
            adds = len(items)
        else:
            # deletes first: what they free (node capacity) is there for what the adds bring
            for key in old.keys() - fresh.keys():
                self._delete(old[key])
                deletes += 1
            for i, (key, obj) in enumerate(fresh.items()):
                prev = old.get(key)
                if prev is None:
                    self._add(obj)
                    adds += 1
                else:
                    pm, m = prev["metadata"], obj["metadata"]
                    if pm.get("resourceVersion") == m.get("resourceVersion"):
                        # unchanged: keep the dict the handlers already hold, so a later update's
                        # ``old`` is the very object they were given
                        fresh[key] = prev
                    elif pm.get("uid") != m.get("uid"):
                        self._delete(prev)
                        self._add(obj)
                        deletes += 1
                        adds += 1
                    else:
                        self._update(prev, obj)
                        updates += 1
                if i % _YIELD_EVERY == _YIELD_EVERY - 1:
                    await asyncio.sleep(0)
        done = time.perf_counter()
        self.synced.set()
        log.info("informer %s: listed %d at resourceVersion %s in %.3fs (+%.3fs handlers: %d added, "
                 "%d updated, %d deleted)", self.name, len(items), rv, listed - started, done - listed,
                 adds, updates, deletes)

    # ------------------------------------------------------------------ watch events

    def _apply(self, event: Obj) -> None:
        typ = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            log.warning("informer %s: watch event without an object: %r", self.name, event)
            return
        meta = obj.get("metadata") or {}
        rv = meta.get("resourceVersion")
        self._progress = True
        if typ == "BOOKMARK":
            if rv:
                self.last_rv = rv
            return
        self.events += 1
        self._trim(obj, meta)
        ns = meta.get("namespace")
        key = f"{ns}/{meta['name']}" if ns else meta["name"]
        store = self.store
        if typ == "ADDED" or typ == "MODIFIED":
            prev = store.get(key)
            store[key] = obj
            if prev is None:
                self._add(obj)
            else:
                pm = prev["metadata"]
                if pm.get("uid") != meta.get("uid"):
                    self._delete(prev)
                    self._add(obj)
                elif pm.get("resourceVersion") != rv:
                    self._update(prev, obj)
                # else: the same version again (a replay); nothing changed
        elif typ == "DELETED":
            prev = store.pop(key, None)
            if prev is not None:
                # the delete of what the handlers know: the event's object, unless the key was reused
                self._delete(obj if prev["metadata"].get("uid") == meta.get("uid") else prev)
        else:
            log.warning("informer %s: unknown watch event type %r", self.name, typ)
            return
        if rv:
            self.last_rv = rv

    def _trim(self, obj: Obj, meta: Obj) -> None:
        """What every object gets as it arrives, listed or watched: no managedFields, and its shared fields."""
        meta.pop("managedFields", None)
        if self.share_spec:
            self._share(obj)

    def _share(self, obj: Obj) -> None:
        """Point ``share_spec``'s fields at an equal value seen before, so the store keeps one of each: the pods of a
        template repeat their containers (a fifth of a pod's memory, strings mostly). What is shared is never
        written (handlers must not mutate what they are given). At most 4,096 distinct values are kept."""
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        shared = self._shared
        for field in self.share_spec:
            value = spec.get(field)
            if not value:
                continue
            key = orjson.dumps(value)
            hit = shared.get(key)
            if hit is not None:
                spec[field] = hit
            else:
                if len(shared) >= 4096:
                    shared.clear()
                shared[bytes(memoryview(key))] = value   # at its exact size: orjson's buffer is larger

    # ------------------------------------------------------------------ handler calls

    def _add(self, obj: Obj) -> None:
        for fn in self._adds:
            try:
                fn(obj)
            except Exception:
                self._handler_failed("add", fn, obj)

    def _update(self, old: Obj, new: Obj) -> None:
        for fn in self._updates:
            try:
                fn(old, new)
            except Exception:
                self._handler_failed("update", fn, new)

    def _delete(self, obj: Obj) -> None:
        for fn in self._deletes:
            try:
                fn(obj)
            except Exception:
                self._handler_failed("delete", fn, obj)

    def _handler_failed(self, what: str, fn: Callable[..., Any], obj: Obj) -> None:
        self.handler_errors += 1
        try:
            key = object_key(obj)
        except (KeyError, TypeError):
            key = "?"
        log.exception("informer %s: %s handler %s failed on %s", self.name, what,
                      getattr(fn, "__qualname__", fn), key)


__all__ = ["Informer", "OnAdd", "OnUpdate", "OnDelete", "ShortWatch", "object_key"]
