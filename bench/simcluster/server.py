"""HTTP front of the simulated cluster: the Kubernetes REST API over the store.

Routes are parsed by hand from the path (``/api/v1/namespaces/NS/pods/NAME/binding``,
``/apis/GROUP/VERSION/...``, the legacy ``/watch/`` prefix), the way
kube-apiserver's request-info resolver does, so one handler serves every
resource the registry knows. Discovery (``/api``, ``/apis``, ``/version``)
is what kubernetes-asyncio and kubectl need to work unmodified.

Every error leaves as a ``Status`` body with the real server's code and
reason; anything unexpected becomes a 500 InternalError and is logged. The
server must never die on a request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any
from urllib.parse import unquote

import aiohttp
import orjson
from aiohttp import web

from bench.simcluster import errors, tables
from bench.simcluster.auth import Authority
from bench.simcluster.eviction import evict
from bench.simcluster.faults import Faults
from bench.simcluster.resources import (
    CREATE_ONLY_SUBRESOURCES, RESOURCES, ResourceType, discovery_resources, lookup, served, served_groups,
)
from bench.simcluster.selectors import SelectorError, parse_field_selector, parse_label_selector
from bench.simcluster.store import MATCH_ALL, Dropped, Entry, Store, Watcher, encode_event

log = logging.getLogger("simcluster.server")

JSON = "application/json"
VERSION = {
    "major": "1", "minor": "34", "gitVersion": "v1.34.0-tandem-simcluster",
    "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z", "goVersion": "n/a", "compiler": "python",
    "platform": "linux/amd64",
}
# query booleans are parsed as Go's strconv.ParseBool does (kubernetes-asyncio sends "True")
_TRUE = ("1", "t", "T", "true", "TRUE", "True")


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type=JSON)


def _raw(body: bytes, status: int = 200) -> web.Response:
    return web.Response(body=body, status=status, content_type=JSON)


def _error(exc: errors.APIError) -> web.Response:
    return web.Response(body=exc.body(), status=exc.code, content_type=JSON, headers=exc.headers)


class Request:
    """What the path and query say: kube-apiserver's RequestInfo."""

    __slots__ = ("rt", "namespace", "name", "subresource", "watch", "verb", "resource_label")

    def __init__(self, rt: ResourceType, namespace: str, name: str, subresource: str, watch: bool,
                 method: str, query: Any) -> None:
        self.rt = rt
        self.namespace = namespace
        self.name = name
        self.subresource = subresource
        self.watch = watch or (method == "GET" and not name and query.get("watch", "") in _TRUE)
        if self.watch:
            self.verb = "watch"
        elif method == "GET":
            self.verb = "get" if name else "list"
        elif method == "POST":
            self.verb = "create"
        elif method == "PUT":
            self.verb = "update"
        elif method == "PATCH":
            self.verb = "patch"
        elif method == "DELETE":
            self.verb = "delete" if name else "deletecollection"
        else:
            self.verb = method.lower()
        self.resource_label = rt.label(subresource)


def parse_path(path: str, method: str, query: Any, enabled: frozenset[str] = frozenset()) -> Request | None:
    parts = [unquote(p) for p in path.strip("/").split("/")]
    if parts[0] == "api" and len(parts) >= 3 and parts[1] == "v1":
        group, version, rest = "", "v1", parts[2:]
    elif parts[0] == "apis" and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    watch = False
    if rest and rest[0] == "watch":
        watch, rest = True, rest[1:]
    if not rest:
        return None
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3 and not (group == "" and len(rest) == 3 and rest[2] in ("status", "finalize")):
        namespace, rest = rest[1], rest[2:]
        if not namespace:
            return None
    rt = lookup(group, version, rest[0])
    if rt is None or len(rest) > 3 or not served(rt, enabled):
        return None
    name = rest[1] if len(rest) >= 2 else ""
    sub = rest[2] if len(rest) == 3 else ""
    if namespace and not rt.namespaced:
        return None
    if name and rt.namespaced and not namespace:
        return None
    if sub and sub not in rt.subresources:
        return None
    return Request(rt, namespace, name, sub, watch, method, query)


class APIServer:
    """aiohttp application serving one :class:`Store`."""

    def __init__(self, store: Store, faults: Faults | None = None, bookmark_interval: float = 60.0,
                 max_watch_timeout: float = 1800.0, runtime_config: frozenset[str] = frozenset()) -> None:
        self.store = store
        self.runtime_config = runtime_config  # the alpha group/versions served (--runtime-config)
        self.groups = served_groups(runtime_config)
        self.auth = Authority(store)    # issued tokens; TokenReview and SubjectAccessReview answers
        self.faults = faults or Faults()
        self.bookmark_interval = bookmark_interval
        self.max_watch_timeout = max_watch_timeout
        self.requests = 0
        self._watch_count = 0
        self._closing = asyncio.Event()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        app.on_shutdown.append(self._on_shutdown)
        return app

    async def _on_shutdown(self, _app: web.Application) -> None:
        self._closing.set()
        for table in self.store.tables.values():
            if table.waiter is not None and not table.waiter.done():
                table.waiter.set_result(None)

    # ------------------------------------------------------------------ dispatch

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        try:
            info = parse_path(request.path, request.method, request.query, self.runtime_config)
            if info is None:
                return await self._non_resource(request)
            latency, fault = self.faults.decide(info.verb, info.resource_label)
            if latency:
                await asyncio.sleep(latency)
            if fault is not None:
                return _error(fault)
            if info.subresource == "eviction" and info.verb != "create":
                # the eviction storage is a NamedCreater only: go-restful has no other route for it
                raise errors.APIError(405, "MethodNotAllowed",
                                      "the server does not allow this method on the requested resource", {})
            if (not info.rt.stored or info.subresource == "token") and info.verb != "create":
                raise errors.method_not_allowed(info.verb, info.resource_label)   # create-only
            if info.watch:
                return await self._watch(request, info)
            return await self._resource(request, info)
        except errors.APIError as exc:
            return _error(exc)
        except (ConnectionResetError, aiohttp.ClientConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as exc:  # a bug, never a crash: answer 500 and keep serving
            log.exception("internal error serving %s %s", request.method, request.path_qs)
            return _error(errors.internal_error(f"{type(exc).__name__}: {exc}"))

    async def _non_resource(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if request.method != "GET":
            if path.startswith("/simcluster/"):
                return await self._admin(request, path)
            raise errors.path_not_found()
        if path in ("/healthz", "/readyz", "/livez") or path.startswith(("/healthz/", "/readyz/", "/livez/")):
            return web.Response(text="ok", content_type="text/plain")
        if path == "/version":
            return _json(VERSION)
        if path == "/api":
            return _json({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}]})
        if path == "/api/v1":
            return _json(_resource_list("", "v1", self.runtime_config))
        if path == "/apis":
            return _json({"kind": "APIGroupList", "apiVersion": "v1",
                          "groups": [_group(self.groups, g) for g in self.groups if g]})
        parts = path.strip("/").split("/")
        if parts[0] == "apis" and len(parts) == 2 and parts[1] in self.groups and parts[1]:
            return _json({"kind": "APIGroup", "apiVersion": "v1", **_group(self.groups, parts[1])})
        if parts[0] == "apis" and len(parts) == 3 and parts[2] in self.groups.get(parts[1], ()) and parts[1]:
            return _json(_resource_list(parts[1], parts[2], self.runtime_config))
        if path == "/openapi/v3":
            return _json({"paths": {gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash={_OPENAPI_HASH}"}
                                    for gv in _openapi_group_versions(self.groups)}})
        if path.startswith("/openapi/v3/") and path[len("/openapi/v3/"):] in _openapi_group_versions(self.groups):
            return _json(_openapi_v3(path[len("/openapi/v3/"):], self.runtime_config))
        if path == "/":
            paths = ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/openapi/v3", "/readyz", "/version"]
            for g, versions in self.groups.items():
                if g:
                    paths.append(f"/apis/{g}")
                    paths += [f"/apis/{g}/{v}" for v in versions]
            return _json({"paths": sorted(paths)})
        if path.startswith("/simcluster/"):
            return await self._admin(request, path)
        raise errors.path_not_found()

    async def _admin(self, request: web.Request, path: str) -> web.StreamResponse:
        if path == "/simcluster/faults":
            if request.method == "GET":
                return _json(self.faults.to_dict())
            if request.method == "PUT":
                try:
                    self.faults.update(orjson.loads(await request.read()))
                except (ValueError, TypeError) as exc:
                    raise errors.bad_request(str(exc)) from None
                return _json(self.faults.to_dict())
        if path == "/simcluster/compact" and request.method == "POST":
            self.store.compact()
            return _json({"resourceVersion": str(self.store.rv)})
        if path == "/simcluster/stats" and request.method == "GET":
            return _json({"resourceVersion": self.store.rv, "requests": self.requests,
                          "watches": self._watch_count,
                          "objects": {f"{g}/{p}" if g else p: len(t.objects)
                                      for (g, p), t in self.store.tables.items()}})
        raise errors.path_not_found()

    async def _body(self, request: web.Request, kind: str) -> Any:
        raw = await request.read()
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            # as the create/update handlers' transformDecodeError words a body that is not JSON
            # (the parser's own text is orjson's, not Go's)
            summary = raw[:30].decode(errors="replace") + ("..." if len(raw) > 30 else "")
            raise errors.bad_request(f"the object provided is unrecognized (must be of type {kind}): couldn't get "
                                     f"version/kind; json parse error: {exc} ({summary})") from None

    async def _resource(self, request: web.Request, info: Request) -> web.StreamResponse:
        rt, store, q = info.rt, self.store, request.query
        dry_run = "All" in q.getall("dryRun", [])
        method = request.method
        if not rt.stored:
            # a review: created, answered, never stored (201, as every create)
            if info.name:
                raise errors.method_not_allowed(info.verb, rt.plural)
            body = await self._body(request, rt.kind)
            review = self.auth.token_review if rt.kind == "TokenReview" else self.auth.subject_access_review
            return _json(review(body), 201)
        if method == "GET":
            table = tables.requested(request.headers.get("Accept", ""), q)  # None: plain JSON, the fast path
            if info.name:
                if table is not None:
                    return _json(table.render(rt, [store.get(rt, info.namespace, info.name)], store.clock()))
                return self._out(rt, store.get(rt, info.namespace, info.name))
            _validate_list_options(q, watch=False)
            match = _selector(rt, q)
            limit = _int_param(q, "limit")
            res = store.list(rt, info.namespace, match, limit=limit, cont=q.get("continue", ""),
                             rv=q.get("resourceVersion", ""), rv_match=q.get("resourceVersionMatch", ""))
            if table is not None:
                return _json(table.render(rt, res.entries, store.clock(), rv=str(res.rv), cont=res.cont,
                                          remaining=res.remaining))
            meta: dict[str, Any] = {"resourceVersion": str(res.rv)}
            if res.cont:
                meta["continue"] = res.cont
                if res.remaining is not None:
                    meta["remainingItemCount"] = res.remaining
            head = (b'{"kind":"' + rt.list_kind.encode() + b'","apiVersion":"' + rt.api_version.encode()
                    + b'","metadata":' + orjson.dumps(meta) + b',"items":[')
            return _raw(head + b",".join(self._raws(rt, res.entries)) + b"]}")
        if method == "POST":
            if info.subresource == "binding":
                store.bind(info.namespace, info.name, await self._body(request, "Binding"))
                return _json({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                              "code": 201}, status=201)
            if info.subresource == "token":
                return _json(self.auth.token_request(info.namespace, info.name,
                                                     await self._body(request, "TokenRequest")), 201)
            if info.subresource == "eviction":
                return _json(evict(store, info.namespace, info.name, await self._body(request, "Eviction"),
                                   dry_run), 201)
            if info.name:
                raise errors.method_not_allowed("create", rt.plural)
            entry = store.create(rt, info.namespace, await self._body(request, rt.kind), dry_run)
            return self._out(rt, entry, 201)
        if method == "PUT" and info.name and info.subresource not in CREATE_ONLY_SUBRESOURCES:
            entry = store.update(rt, info.namespace, info.name, await self._body(request, rt.kind),
                                 info.subresource, dry_run)
            return self._out(rt, entry)
        if method == "PATCH" and info.name and info.subresource not in CREATE_ONLY_SUBRESOURCES:
            ctype = request.headers.get("Content-Type", "").split(";")[0].strip()
            raw = await request.read()
            entry = store.patch(rt, info.namespace, info.name, ctype, raw, info.subresource, dry_run)
            return self._out(rt, entry)
        if method == "DELETE" and not info.subresource:
            grace, pre = await self._delete_options(request)
            if info.name:
                entry, gone = store.delete(rt, info.namespace, info.name, grace, pre, dry_run)
                return self._deleted(rt, entry, gone, await _orphan_dependents_false(request))
            entries = store.delete_collection(rt, info.namespace, _selector(rt, q), grace, dry_run)
            head = (b'{"kind":"' + rt.list_kind.encode() + b'","apiVersion":"' + rt.api_version.encode()
                    + b'","metadata":{"resourceVersion":"' + str(store.rv).encode() + b'"},"items":[')
            return _raw(head + b",".join(self._raws(rt, entries)) + b"]}")
        raise errors.method_not_allowed(method, rt.plural)

    async def _delete_options(self, request: web.Request) -> tuple[int | None, dict[str, Any] | None]:
        q = request.query
        grace = _int_param(q, "gracePeriodSeconds", None)
        pre: dict[str, Any] | None = None
        raw = await request.read()
        if raw:
            try:
                opts = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise errors.bad_request(f"the object provided could not be decoded: {exc}") from None
            if not isinstance(opts, dict):
                raise errors.bad_request("DeleteOptions must be an object")
            if opts.get("gracePeriodSeconds") is not None:
                g = opts["gracePeriodSeconds"]
                if not isinstance(g, int):
                    raise errors.bad_request(f"gracePeriodSeconds must be an integer, got {g!r}")
                grace = g
            pre = opts.get("preconditions") or None
        return grace, pre

    def _raws(self, rt: ResourceType, entries: list[Entry]) -> list[bytes]:
        if rt.to_view is None:
            return [e.raw for e in entries]
        return [orjson.dumps(rt.to_view(e.obj())) for e in entries]

    def _out(self, rt: ResourceType, entry: Entry, status: int = 200) -> web.Response:
        if rt.to_view is None:
            return _raw(entry.raw, status)
        return _json(rt.to_view(entry.obj()), status)

    def _deleted(self, rt: ResourceType, entry: Entry, gone: bool, orphan_false: bool = False) -> web.Response:
        # As the DELETE handler: 200 even while the deletion is pending (graceful, finalizers);
        # 202 only for a pending delete that asked orphanDependents=false (kept for old clients).
        status = 202 if orphan_false and not gone else 200
        # the stores with ReturnDeletedObject (pods, namespaces, services, custom resources) answer
        # with the object; the others with a Success Status naming it
        if gone and rt.kind not in ("Pod", "Namespace", "Service", "ServiceAccount") and rt.group in (
                "", "apps", "policy", "storage.k8s.io", "scheduling.k8s.io", "coordination.k8s.io", "events.k8s.io",
                "rbac.authorization.k8s.io"):
            name = entry.key[1]
            details = {"name": name, "kind": rt.plural, "uid": entry.uid}
            if rt.group:
                details["group"] = rt.group
            return _json({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                          "details": details}, status)
        return self._out(rt, entry, status)

    # ------------------------------------------------------------------ watch

    async def _watch(self, request: web.Request, info: Request) -> web.StreamResponse:
        q = request.query
        rt = info.rt
        match = _selector(rt, q)
        timeout = min(float(_int_param(q, "timeoutSeconds", 0) or self.max_watch_timeout), self.max_watch_timeout)
        bookmarks = q.get("allowWatchBookmarks", "") in _TRUE
        sie = q.get("sendInitialEvents")
        send_initial = None if sie is None else sie in _TRUE
        _validate_list_options(q, watch=True)
        if send_initial and not bookmarks:
            raise errors.invalid("ListOptions", "", [errors.forbidden_field(
                "allowWatchBookmarks", "sendInitialEvents requires setting allowWatchBookmarks to true")],
                "meta.k8s.io")
        table = tables.requested(request.headers.get("Accept", ""), q)  # a 400 here, before the stream
        resp = web.StreamResponse(status=200, headers={"Content-Type": JSON,
                                                         "Cache-Control": "no-cache, private"})
        resp.enable_chunked_encoding()
        try:
            watcher = self.store.watcher(rt, info.namespace, match, q.get("resourceVersion", ""), send_initial)
        except errors.APIError as exc:
            if exc.code != 410:
                raise
            # kube-apiserver's watch cache answers a too-old resourceVersion inside the stream
            await resp.prepare(request)
            await resp.write(b'{"type":"ERROR","object":' + exc.body() + b"}\n")
            await resp.write_eof()
            return resp
        await resp.prepare(request)
        self._watch_count += 1
        try:
            # a Table request gets each event's object as a one-row Table (see tables.TableWatchWriter)
            out = resp if table is None else table.watch_writer(resp, rt, self.store.clock)
            await self._stream(out, watcher, rt, timeout, bookmarks, bool(send_initial))
        except (ConnectionResetError, ConnectionError, aiohttp.ClientConnectionResetError):
            pass  # the client went away
        finally:
            self._watch_count -= 1
        return resp

    async def _stream(self, resp: web.StreamResponse, watcher: Watcher, rt: ResourceType, timeout: float,
                      bookmarks: bool, initial_end_bookmark: bool) -> None:
        loop_time = time.monotonic
        start = loop_time()
        deadline = start + timeout
        drop_every = self.faults.watch_drop_interval
        drop_at = start + drop_every if drop_every else float("inf")
        next_bookmark = start + self.bookmark_interval if bookmarks else float("inf")
        batch = watcher.take_initial()
        if batch:
            await resp.write(b"".join(self._encode(rt, batch)))
        if initial_end_bookmark:
            await resp.write(self._bookmark(rt, self.store.rv, initial_end=True))
        while not self._closing.is_set():
            try:
                batch = watcher.poll()
            except Dropped:
                return  # fell out of the window: end the stream; the client resumes or relists
            if batch:
                await resp.write(b"".join(self._encode(rt, batch)))
                await asyncio.sleep(0)
                continue
            now = loop_time()
            if now >= deadline or now >= drop_at:
                break
            if now >= next_bookmark and watcher.caught_up():
                await resp.write(self._bookmark(rt, self.store.rv))
                next_bookmark = now + self.bookmark_interval
            if watcher.caught_up():
                await watcher.wait(min(deadline, drop_at, next_bookmark) - now)
        if bookmarks and loop_time() >= deadline and watcher.caught_up():
            # kube-apiserver sends a last bookmark when a watch times out, so the client can resume cheaply
            await resp.write(self._bookmark(rt, self.store.rv))
        await resp.write_eof()

    def _encode(self, rt: ResourceType, batch: list[tuple[str, Entry]]) -> list[bytes]:
        if rt.to_view is None:
            return [encode_event(t, e.raw) for t, e in batch]
        return [encode_event(t, orjson.dumps(rt.to_view(e.obj()))) for t, e in batch]

    @staticmethod
    def _bookmark(rt: ResourceType, rv: int, initial_end: bool = False) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(rv), "creationTimestamp": None}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return orjson.dumps({"type": "BOOKMARK", "object": {"kind": rt.kind, "apiVersion": rt.api_version,
                                                            "metadata": meta}}) + b"\n"


def _group(groups: dict[str, list[str]], g: str) -> dict[str, Any]:
    versions = [{"groupVersion": f"{g}/{v}", "version": v} for v in groups[g]]
    return {"name": g, "versions": versions, "preferredVersion": versions[0]}


# Just enough OpenAPI v3 for kubectl: its create/apply validation looks up each kind's PATCH
# operation (by x-kubernetes-group-version-kind) for the fieldValidation query parameter, and
# when the server has it leaves validation to the server instead of downloading schemas.
_OPENAPI_HASH = "0" * 128


def _openapi_group_versions(groups: dict[str, list[str]]) -> list[str]:
    return [f"apis/{g}/{v}" if g else f"api/{v}" for g, versions in groups.items() for v in versions]


def _openapi_v3(gv: str, enabled: frozenset[str]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for r in RESOURCES:
        if (f"apis/{r.group}/{r.version}" if r.group else f"api/{r.version}") != gv or not served(r, enabled):
            continue
        item = (f"/{gv}/namespaces/{{namespace}}/{r.plural}/{{name}}" if r.namespaced
                else f"/{gv}/{r.plural}/{{name}}")
        paths[item] = {"patch": {
            "operationId": f"patch{r.kind}",
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
            "parameters": [{"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
                           for name in ("dryRun", "fieldManager", "fieldValidation", "force")],
        }}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": VERSION["gitVersion"]},
            "paths": paths, "components": {"schemas": {}}}


def _resource_list(group: str, version: str, enabled: frozenset[str]) -> dict[str, Any]:
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": discovery_resources(group, version, enabled)}


def _validate_list_options(q: Any, watch: bool) -> None:
    """ValidateListOptions (apimachinery meta/internalversion/validation): a 422 Invalid ListOptions."""
    causes: list[errors.FieldError] = []
    match, rv, cont = q.get("resourceVersionMatch", ""), q.get("resourceVersion", ""), q.get("continue", "")
    sie = q.get("sendInitialEvents")
    if watch:
        if sie is not None and match != "NotOlderThan":
            causes.append(errors.forbidden_field(
                "resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"))
        if match:
            if sie is None:
                causes.append(errors.forbidden_field(
                    "resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
            if match != "NotOlderThan":
                causes.append(errors.not_supported("resourceVersionMatch", match, ["NotOlderThan"]))
            if cont:
                causes.append(errors.forbidden_field(
                    "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"))
    else:
        if match:
            if not rv:
                causes.append(errors.forbidden_field(
                    "resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided"))
            if cont:
                causes.append(errors.forbidden_field(
                    "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"))
            if match not in ("Exact", "NotOlderThan"):
                causes.append(errors.not_supported("resourceVersionMatch", match, ["Exact", "NotOlderThan", ""]))
            if match == "Exact" and rv == "0":
                causes.append(errors.forbidden_field(
                    "resourceVersionMatch", 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
        if sie is not None:
            causes.append(errors.forbidden_field("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    if causes:
        raise errors.invalid("ListOptions", "", causes, "meta.k8s.io")


async def _orphan_dependents_false(request: web.Request) -> bool:
    """Whether a DELETE asked orphanDependents=false, in its DeleteOptions body or its query."""
    raw = await request.read()  # aiohttp caches the body: _delete_options has read and checked it
    if raw:
        try:
            opts = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return False
        return isinstance(opts, dict) and opts.get("orphanDependents") is False
    return request.query.get("orphanDependents") == "false"


def _int_param(q: Any, name: str, default: int | None = 0) -> int | None:
    v = q.get(name)
    if v is None or v == "":
        return default
    try:
        return int(v)
    except ValueError:
        raise errors.bad_request(f'invalid value for {name}: "{v}" is not an integer') from None


def _selector(rt: ResourceType, q: Any):
    ltext, ftext = q.get("labelSelector", ""), q.get("fieldSelector", "")
    if not ltext and not ftext:
        return MATCH_ALL
    try:
        lsel = parse_label_selector(ltext) if ltext else None
        fsel = parse_field_selector(ftext, rt.field_names) if ftext else None
    except SelectorError as exc:
        raise errors.bad_request(str(exc)) from None
    if lsel is not None and lsel.empty:
        lsel = None
    if fsel is not None and fsel.empty:
        fsel = None
    if lsel is None and fsel is None:
        return MATCH_ALL
    if fsel is not None and rt.to_view is not None:
        to_view, fields = rt.to_view, rt.fields
        return lambda e: (lsel is None or lsel(e.labels)) and fsel(fields(to_view(e.obj())))
    if fsel is None:
        return lambda e: lsel(e.labels)
    if lsel is None:
        return lambda e: fsel(e.fields)
    return lambda e: lsel(e.labels) and fsel(e.fields)
