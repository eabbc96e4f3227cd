"""The one HTTP client for everything tandem says to kube-apiserver.

Every read and write of the scheduler goes through :class:`APIClient`: the
informers' lists and watches, binds, pod status patches, events, preemption
deletes, leases. The process has two instances, as kube-scheduler has two
clientsets: one for events and one for everything else, each with the
configured QPS/burst (client-go's ``flowcontrol`` token bucket sits in the
same place), so that recording events never spends the tokens binds need.
The class is the one place for retries and for the request counters the
metrics endpoint reports.

Why not the generated kubernetes-asyncio API classes: they deserialize every
response into model objects (about 120 us per pod against 3 us for
``orjson.loads``, see docs/architecture.md), and the binding subresource answers a
``Status`` the generated ``create_namespaced_binding`` cannot parse. So this
module speaks raw JSON and hands out plain dicts: request/response calls
go through :mod:`scheduler.transport` (a keep-alive HTTP/1.1 pool with the
httptools parser, 25-60% less CPU per request than aiohttp), watches and
everything behind a proxy through aiohttp. kubernetes-
asyncio is used for what it is good at: reading kubeconfig / in-cluster
config and carrying authentication (its token refresh hook is called before
every request, so rotated in-cluster tokens are picked up).

Errors have types (kopf's ``errors.py``): a non-2xx answer becomes an
:class:`APIError` subclass chosen by status code, with ``reason`` and
``message`` taken from the ``Status`` body the server sent. Connection
failures and timeouts are
:class:`Unreachable`. A watch reports a too-old resourceVersion as an
``ERROR`` event, not an HTTP status; :meth:`APIClient.watch` turns that into
:class:`Gone` too, so callers handle 410 in one place.

Retries: 429 (honouring Retry-After), 5xx and :class:`Unreachable` are
retried with exponential backoff and jitter, a bounded number of times,
for every verb. That is safe for the scheduler's writes: a repeated bind
answers 409 (already assigned), which the binder reads as "bound"; a
repeated status patch or delete with a uid precondition converges to the
same state. A caller that must not repeat a write passes ``retry=False``.

This module must never import ``bench/`` and must never run the generated
models on a response.
"""

from __future__ import annotations

import gc
import logging
import os
import random
import ssl
from collections import Counter
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping, TypeVar
from urllib.parse import urlencode, urlsplit

import aiohttp
import orjson
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from scheduler.framework.clock import Clock, TokenBucket
from scheduler.transport import Transport, TransportError

log = logging.getLogger("tandem.apiclient")

_T = TypeVar("_T")

JSON = "application/json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"

USER_AGENT = "tandem-scheduler/0.1"
_BIG_BODY = 1 << 18  # replies larger than this are parsed with the GC paused (see _loads)

# kube verbs by HTTP method, for the request counters (client-go labels by method; the kube verb reads better)
_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


# ---------------------------------------------------------------------------- errors


class ConfigError(Exception):
    """No usable kubeconfig or in-cluster configuration."""


class APIError(Exception):
    """A request kube-apiserver answered with an error, or could not be reached.

    ``status`` is the HTTP code (0 for :class:`Unreachable`); ``reason`` and
    ``message`` come from the ``Status`` body (``NotFound``, ``pods "x" not
    found``); ``body`` is the parsed Status (or the raw text when the server
    sent something else).
    """

    def __init__(self, status: int, reason: str = "", message: str = "", body: Any = None) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body
        super().__init__(status, reason, message)

    def __str__(self) -> str:
        return f"({self.status} {self.reason}) {self.message}" if self.reason else f"({self.status}) {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.status}, {self.reason!r}, {self.message!r})"


class BadRequest(APIError):
    """400: malformed body or parameters."""


class Unauthorized(APIError):
    """401: the credentials were not accepted."""


class Forbidden(APIError):
    """403: RBAC said no, or the namespace is terminating."""


class NotFound(APIError):
    """404: the object (or its namespace, or the resource type) does not exist."""


class Conflict(APIError):
    """409: a stale resourceVersion, a failed precondition, an already bound pod, or AlreadyExists."""

    @property
    def already_exists(self) -> bool:
        return self.reason == "AlreadyExists"


class Gone(APIError):
    """410: the resourceVersion asked for is older than the server remembers. List again."""


class UnsupportedMediaType(APIError):
    """415: e.g. a strategic merge patch on a custom resource."""


class Invalid(APIError):
    """422: the object failed validation; ``causes`` lists the fields."""

    @property
    def causes(self) -> list[dict[str, Any]]:
        if isinstance(self.body, dict):
            return (self.body.get("details") or {}).get("causes") or []
        return []


class TooManyRequests(APIError):
    """429: server-side throttling (API Priority and Fairness, or max-in-flight)."""

    def __init__(self, status: int, reason: str = "", message: str = "", body: Any = None,
                 retry_after: float | None = None) -> None:
        super().__init__(status, reason, message, body)
        self.retry_after = retry_after


class ServerError(APIError):
    """5xx: the server failed; usually worth a retry."""


class Unreachable(APIError):
    """No answer: connection refused or reset, DNS, TLS, or a timeout. ``status`` is 0."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "Unreachable", message)


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 410: Gone,
    415: UnsupportedMediaType, 422: Invalid, 429: TooManyRequests,
}


def error_from_status(status: int, body: Any, headers: Mapping[str, str] | None = None) -> APIError:
    """The typed error for an HTTP status and a (parsed) ``Status`` body."""
    if isinstance(body, dict):
        reason = body.get("reason") or ""
        message = body.get("message") or ""
    else:
        reason = ""
        message = body.decode(errors="replace")[:1000] if isinstance(body, (bytes, bytearray)) else str(body or "")
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else APIError)
    if cls is TooManyRequests:
        return TooManyRequests(status, reason, message, body, retry_after=_retry_after(body, headers))
    return cls(status, reason, message, body)


def _retry_after(body: Any, headers: Mapping[str, str] | None) -> float | None:
    value = headers.get("Retry-After") if headers is not None else None
    if value is None and isinstance(body, dict):
        value = (body.get("details") or {}).get("retryAfterSeconds")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        return None  # an HTTP-date; kube-apiserver only sends seconds


def _parse_error_body(raw: bytes) -> Any:
    try:
        return orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        return raw


# ---------------------------------------------------------------------------- rate limit and retries


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and jitter.

    ``attempts`` counts every try, the first included. The n-th retry waits
    ``min(cap, base * 2**n)`` scaled by a random factor in [0.5, 1] ("equal
    jitter", so a herd of binders does not retry in lockstep). A 429 waits
    what its Retry-After says instead (at most ``max_retry_after``).
    """

    attempts: int = 5
    base: float = 0.2
    cap: float = 5.0
    max_retry_after: float = 60.0

    def delay(self, retry: int, err: APIError) -> float:
        if isinstance(err, TooManyRequests) and err.retry_after is not None:
            return min(err.retry_after, self.max_retry_after)
        d = min(self.cap, self.base * (2 ** retry))
        return d * (0.5 + 0.5 * random.random())


NO_RETRY = RetryPolicy(attempts=1)


def _retriable(err: APIError) -> bool:
    return isinstance(err, (TooManyRequests, ServerError, Unreachable))


def _query(params: Mapping[str, Any] | None) -> dict[str, str] | None:
    """Query values as the API server parses them (yarl refuses bools; Go wants "true")."""
    if not params:
        return None
    out: dict[str, str] = {}
    for k, v in params.items():
        if v is None:
            continue
        out[k] = ("true" if v else "false") if isinstance(v, bool) else str(v)
    return out


# ---------------------------------------------------------------------------- the client


class APIClient:
    """Raw-JSON REST client with QPS/burst, retries, typed errors and counters.

    Build it with :func:`from_kubeconfig` (or directly from a
    kubernetes-asyncio ``Configuration``) inside the running loop; close it
    with :meth:`close` or ``async with``.

    ``counts`` maps ``(verb, code)`` to the number of HTTP attempts, retries
    included; ``code`` is the status as a string, or ``"<error>"`` when no
    answer came. ``retries`` counts retries by the error's class name.
    """

    def __init__(self, configuration: k8s_client.Configuration, *, qps: float = 50, burst: int = 100,
                 retry: RetryPolicy = RetryPolicy(), timeout: float = 60.0, connect_timeout: float = 10.0,
                 watch_grace: float = 30.0, max_connections: int = 256, clock: Clock) -> None:
        self.config = configuration
        self.clock: Clock = clock   # the token bucket and retry delays
        self.host = (configuration.host or "").rstrip("/")
        if not self.host.startswith(("http://", "https://")):
            raise ConfigError(f"API server address {configuration.host!r} is not an http:// or https:// URL")
        self.bucket = TokenBucket(qps, burst, self.clock)
        self.retry = retry
        self.timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=connect_timeout)
        self.connect_timeout = connect_timeout
        self.watch_grace = watch_grace  # how long past timeoutSeconds a silent watch is trusted
        self.counts: Counter[tuple[str, str]] = Counter()
        self.retries: Counter[str] = Counter()
        self._request_kw: dict[str, Any] = {}
        if configuration.tls_server_name:
            self._request_kw["server_hostname"] = configuration.tls_server_name
        if configuration.proxy:
            self._request_kw["proxy"] = configuration.proxy
        self._static_headers = {"Accept": JSON, "User-Agent": USER_AGENT}
        self._header_cache: dict[tuple, dict[str, str]] = {}   # shared: read, never written
        url = urlsplit(self.host)   # checked before anything is opened, so a bad address leaks nothing
        try:
            port = url.port
        except ValueError as exc:
            raise ConfigError(f"API server address {configuration.host!r}: {exc}") from exc
        if not url.hostname:
            raise ConfigError(f"API server address {configuration.host!r} has no host")
        ssl_ctx = self._ssl_context(configuration)
        connector = aiohttp.TCPConnector(limit=max_connections, ssl=ssl_ctx)
        # watch events of big objects exceed aiohttp's 64 KiB default buffer (kubernetes-asyncio does the same)
        self.session = aiohttp.ClientSession(connector=connector, read_bufsize=2 ** 21)
        self.transport: Transport | None = None   # None: every call through aiohttp (a proxy is configured)
        if not configuration.proxy:
            self.transport = Transport(
                url.hostname, port or (443 if url.scheme == "https" else 80),
                ssl=ssl_ctx if isinstance(ssl_ctx, ssl.SSLContext) else None,
                server_hostname=configuration.tls_server_name or None, base_path=url.path, limit=max_connections)

    @staticmethod
    def _ssl_context(cfg: k8s_client.Configuration) -> ssl.SSLContext | bool:
        if not cfg.host.startswith("https://"):
            return False
        ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
        if cfg.cert_file:
            ctx.load_cert_chain(cfg.cert_file, keyfile=cfg.key_file)
        if not cfg.verify_ssl:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx

    async def __aenter__(self) -> "APIClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self.transport is not None:
            await self.transport.close()
        await self.session.close()

    # ------------------------------------------------------------------ plumbing

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        """The request's headers. Built once per content type and token while no refresh hook can change the
        token (a kubeconfig's token or certificate); with a hook (in-cluster token rotation) on every call."""
        cfg = self.config
        if cfg.refresh_api_key_hook is not None:
            return await self._build_headers(content_type)
        key = (content_type, cfg.api_key.get("BearerToken"), cfg.api_key.get("authorization"))
        cached = self._header_cache.get(key)
        if cached is None:
            cached = self._header_cache[key] = await self._build_headers(content_type)
        return cached

    async def _build_headers(self, content_type: str | None) -> dict[str, str]:
        headers = dict(self._static_headers)
        # calls the refresh hook (in-cluster token rotation) when one is set
        token = await self.config.get_api_key_with_prefix("BearerToken", alias="authorization")
        if token:
            headers["Authorization"] = token
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    async def _attempt(self, method: str, verb: str, url: str, params: dict[str, str] | None,
                       body: bytes | None, headers: dict[str, str],
                       timeout: aiohttp.ClientTimeout) -> aiohttp.ClientResponse:
        """One HTTP attempt; returns the response (status < 400) unread, or raises a typed error."""
        await self.bucket.acquire()
        try:
            resp = await self.session.request(method, url, params=params, data=body, headers=headers,
                                              timeout=timeout, **self._request_kw)
        except (aiohttp.ClientError, OSError) as exc:  # TimeoutError is an OSError
            self.counts[verb, "<error>"] += 1
            raise Unreachable(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
        self.counts[verb, str(resp.status)] += 1
        if resp.status < 400:
            return resp
        try:
            raw = await resp.read()
        except (aiohttp.ClientError, OSError) as exc:
            resp.release()
            raise Unreachable(f"{method} {url}: reading the error body: {exc}") from exc
        err = error_from_status(resp.status, _parse_error_body(raw), resp.headers)
        try:
            resp.raise_for_status()
        except aiohttp.ClientResponseError as exc:
            raise err from exc
        raise err  # unreachable: raise_for_status raises for every status >= 400

    async def _open(self, method: str, path: str, *, verb: str, params: Mapping[str, Any] | None = None,
                    body: bytes | None = None, content_type: str | None = None,
                    timeout: aiohttp.ClientTimeout | None = None,
                    retry: RetryPolicy | None = None) -> aiohttp.ClientResponse:
        """Send with rate limit and retries; the caller reads and releases the response."""
        url = self.host + path
        query = _query(params)
        headers = await self._headers(content_type)
        return await self._retrying(method, path, retry or self.retry, lambda: self._attempt(
            method, verb, url, query, body, headers, timeout or self.timeout))

    async def _retrying(self, method: str, path: str, policy: RetryPolicy,
                        attempt: Callable[[], Awaitable[_T]]) -> _T:
        """``attempt()`` until it succeeds, its error is not retriable, or ``policy`` gives up."""
        n = 0
        while True:
            try:
                return await attempt()
            except APIError as err:
                n += 1
                if n >= policy.attempts or not _retriable(err):
                    raise
                delay = policy.delay(n - 1, err)
                self.retries[type(err).__name__] += 1
                log.debug("%s %s: %s; retry %d/%d in %.2fs", method, path, err, n, policy.attempts - 1, delay)
                await self.clock.sleep(delay)

    async def _exchange(self, method: str, verb: str, path: str, query: str, body: bytes | None,
                        headers: dict[str, str], timeout: float | None) -> tuple[int, bytes]:
        """One attempt through the keep-alive transport: (status, body) for status < 400, else a typed error."""
        assert self.transport is not None
        await self.bucket.acquire()
        try:
            resp = await self.transport.request(method, path, query=query, headers=headers, body=body,
                                                timeout=timeout, connect_timeout=self.connect_timeout)
        except (TransportError, OSError) as exc:
            self.counts[verb, "<error>"] += 1
            raise Unreachable(f"{method} {self.host}{path}: {type(exc).__name__}: {exc}") from exc
        self.counts[verb, str(resp.status)] += 1
        if resp.status >= 400:
            raise error_from_status(resp.status, _parse_error_body(resp.body), resp.headers)
        return resp.status, resp.body

    async def _request(self, method: str, path: str, *, verb: str, params: Mapping[str, Any] | None = None,
                       body: bytes | None = None, content_type: str | None = None,
                       timeout: float | None = None, retry: RetryPolicy | None = None) -> Any:
        """A whole request with rate limit and retries: the parsed JSON reply (None when empty)."""
        if self.transport is None:
            status, raw = await self._request_via_session(method, path, verb=verb, params=params, body=body,
                                                          content_type=content_type, timeout=timeout, retry=retry)
        else:
            query = _query(params)
            qs = urlencode(query) if query else ""
            headers = await self._headers(content_type)
            total = self.timeout.total if timeout is None else timeout
            status, raw = await self._retrying(method, path, retry or self.retry, lambda: self._exchange(
                method, verb, path, qs, body, headers, total))
        if not raw:
            return None
        try:
            return _loads(raw)
        except orjson.JSONDecodeError as exc:
            raise APIError(status, "", f"{method} {path}: the reply is not JSON: {raw[:200]!r}", raw) from exc

    async def _request_via_session(self, method: str, path: str, *, verb: str,
                                   params: Mapping[str, Any] | None, body: bytes | None, content_type: str | None,
                                   timeout: float | None, retry: RetryPolicy | None) -> tuple[int, bytes]:
        """``_request`` through aiohttp (a proxy is configured): (status, raw body)."""
        t = None if timeout is None else aiohttp.ClientTimeout(total=timeout, sock_connect=self.connect_timeout)
        policy = retry or self.retry
        n = 0
        while True:
            resp = await self._open(method, path, verb=verb, params=params, body=body,
                                    content_type=content_type, timeout=t, retry=policy)
            try:
                return resp.status, await resp.read()
            except (aiohttp.ClientError, OSError) as exc:
                # the answer was cut off mid-body: retry like a failed connection
                err = Unreachable(f"{method} {path}: reading the response: {type(exc).__name__}: {exc}")
                n += 1
                if n >= policy.attempts:
                    raise err from exc
                self.retries["Unreachable"] += 1
                await self.clock.sleep(policy.delay(n - 1, err))
            finally:
                resp.release()

    # ------------------------------------------------------------------ generic verbs

    async def get(self, path: str, params: Mapping[str, Any] | None = None, *,
                  timeout: float | None = None) -> dict[str, Any]:
        return await self._request("GET", path, verb="get", params=params, timeout=timeout)

    async def list(self, path: str, params: Mapping[str, Any] | None = None, *,
                   timeout: float | None = None) -> dict[str, Any]:
        """One list call (one page when ``params`` has ``limit``): the raw parsed ``*List``."""
        return await self._request("GET", path, verb="list", params=params, timeout=timeout)

    async def create(self, path: str, body: Any, *, params: Mapping[str, Any] | None = None,
                     retry: RetryPolicy | None = None) -> dict[str, Any]:
        return await self._request("POST", path, verb="create", params=params, body=orjson.dumps(body),
                                   content_type=JSON, retry=retry)

    async def update(self, path: str, body: Any, *, params: Mapping[str, Any] | None = None,
                     retry: RetryPolicy | None = None) -> dict[str, Any]:
        return await self._request("PUT", path, verb="update", params=params, body=orjson.dumps(body),
                                   content_type=JSON, retry=retry)

    async def patch(self, path: str, patch: Any, content_type: str = MERGE_PATCH, *,
                    params: Mapping[str, Any] | None = None, retry: RetryPolicy | None = None) -> dict[str, Any]:
        """PATCH with the given patch type (merge by default; strategic merge works on built-in kinds only)."""
        data = patch if isinstance(patch, bytes) else orjson.dumps(patch)
        return await self._request("PATCH", path, verb="patch", params=params, body=data,
                                   content_type=content_type, retry=retry)

    async def delete(self, path: str, options: Mapping[str, Any] | None = None, *,
                     params: Mapping[str, Any] | None = None, retry: RetryPolicy | None = None) -> Any:
        """DELETE with optional ``DeleteOptions``; the deleted object (or a Status) as sent back."""
        body = None
        if options:
            body = orjson.dumps({"kind": "DeleteOptions", "apiVersion": "v1", **options})
        return await self._request("DELETE", path, verb="delete", params=params, body=body,
                                   content_type=JSON if body else None, retry=retry)

    async def watch(self, path: str, params: Mapping[str, Any] | None = None) -> AsyncIterator[dict[str, Any]]:
        """Stream watch events, one dict per line, until the server ends the watch.

        ``params`` are the ListOptions (``resourceVersion``,
        ``allowWatchBookmarks``, ``timeoutSeconds``, selectors); ``watch=true``
        is added. Opening is rate limited and retried like any request;
        once events flow, a broken stream raises :class:`Unreachable` and is
        not retried here (the informer decides where to resume). An ``ERROR``
        event raises its typed error: :class:`Gone` for 410.

        Use with ``contextlib.aclosing`` when breaking out early, so the
        connection is released at once.
        """
        q = dict(params or {})
        q["watch"] = True
        server_timeout = q.get("timeoutSeconds")
        # the client gives up only well after the server should have ended the stream
        total = float(server_timeout) + self.watch_grace if server_timeout else None
        timeout = aiohttp.ClientTimeout(total=total, sock_connect=self.connect_timeout)
        resp = await self._open("GET", path, verb="watch", params=q, timeout=timeout)
        loads = orjson.loads
        try:
            pending = b""
            async for chunk in resp.content.iter_any():
                if pending:
                    chunk = pending + chunk
                view = memoryview(chunk)
                start = 0
                while True:
                    nl = chunk.find(b"\n", start)
                    if nl < 0:
                        break
                    if nl > start:
                        event = loads(view[start:nl])
                        if event.get("type") == "ERROR":
                            raise _watch_error(event)
                        yield event
                    start = nl + 1
                pending = chunk[start:] if start < len(chunk) else b""
            if pending.strip():
                event = loads(pending)
                if event.get("type") == "ERROR":
                    raise _watch_error(event)
                yield event
        except (aiohttp.ClientError, OSError) as exc:
            raise Unreachable(f"watch {path}: stream broken: {type(exc).__name__}: {exc}") from exc
        except orjson.JSONDecodeError as exc:
            raise Unreachable(f"watch {path}: undecodable event: {exc}") from exc
        finally:
            resp.release()

    # ------------------------------------------------------------------ what the scheduler says

    async def bind(self, namespace: str, name: str, uid: str | None, node: str) -> None:
        """POST pods/NAME/binding with a uid precondition.

        The reply is a ``Status`` (the generated client expects a Binding and
        cannot parse it), so it is read raw and only its code matters.
        Raises :class:`Conflict` when the pod already has a node (also after
        a retried bind that had in fact succeeded), is being deleted, or its
        uid changed; :class:`NotFound` when it is gone.
        """
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        if uid:
            meta["uid"] = uid
        body = orjson.dumps({"apiVersion": "v1", "kind": "Binding", "metadata": meta,
                             "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
        reply = await self._request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding",
                                    verb="create", body=body, content_type=JSON)
        if isinstance(reply, dict) and reply.get("kind") == "Status" and reply.get("status") == "Failure":
            raise error_from_status(int(reply.get("code") or 500), reply)

    async def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """Strategic merge patch on pods/NAME/status (conditions merge by type; nominatedNodeName)."""
        return await self.patch(f"/api/v1/namespaces/{namespace}/pods/{name}/status", patch,
                                STRATEGIC_MERGE_PATCH)

    async def create_event(self, event: dict[str, Any]) -> dict[str, Any]:
        """Create an ``events.k8s.io/v1`` Event in the event's own namespace."""
        ns = (event.get("metadata") or {}).get("namespace") or "default"
        body = event if event.get("apiVersion") else {"apiVersion": "events.k8s.io/v1", "kind": "Event", **event}
        return await self.create(f"/apis/events.k8s.io/v1/namespaces/{ns}/events", body)

    async def patch_event(self, event: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
        """Patch an Event this client created (the recorder bumps ``series`` this way)."""
        meta = event.get("metadata") or {}
        ns, name = meta.get("namespace") or "default", meta.get("name", "")
        return await self.patch(f"/apis/events.k8s.io/v1/namespaces/{ns}/events/{name}", patch,
                                STRATEGIC_MERGE_PATCH)

    async def delete_pod(self, namespace: str, name: str, uid: str | None = None,
                         grace_seconds: int | None = None) -> Any:
        """Delete a pod, only if it still has ``uid`` (preemption must not kill a successor of the victim)."""
        opts: dict[str, Any] = {}
        if uid:
            opts["preconditions"] = {"uid": uid}
        if grace_seconds is not None:
            opts["gracePeriodSeconds"] = grace_seconds
        return await self.delete(f"/api/v1/namespaces/{namespace}/pods/{name}", opts)


def _loads(raw: bytes) -> Any:
    """orjson.loads, with the cyclic GC paused for big bodies.

    A 50,000-pod list is millions of new dicts, lists and strings; every
    700 allocations the collector runs and walks the young objects, and it
    keeps promoting them into ever bigger collections: with the GC on,
    parsing such a list takes 4-6x as long. JSON cannot hold reference
    cycles, so those collections can never free anything, and no Python code
    runs inside the one C call, so pausing the collector is safe.
    """
    if len(raw) < _BIG_BODY or not gc.isenabled():
        return orjson.loads(raw)
    gc.disable()
    try:
        return orjson.loads(raw)
    finally:
        gc.enable()


def _watch_error(event: dict[str, Any]) -> APIError:
    status = event.get("object") or {}
    code = status.get("code") if isinstance(status, dict) else None
    try:
        code = int(code) if code else 500
    except (TypeError, ValueError):
        code = 500
    return error_from_status(code, status)


# ---------------------------------------------------------------------------- configuration


async def load_configuration(path: str | None) -> k8s_client.Configuration:
    """kubeconfig at ``path``; with no path, in-cluster config, else $KUBECONFIG; else :class:`ConfigError`."""
    cfg = k8s_client.Configuration()
    try:
        if path is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config(client_configuration=cfg)
            return cfg
        if path is None:
            env = os.environ.get("KUBECONFIG", "")
            path = next((p for p in env.split(os.pathsep) if p), None)
        if path is None:
            raise ConfigError("no kubeconfig given and not running inside a cluster (KUBERNETES_SERVICE_HOST "
                              "is unset): pass --kubeconfig PATH or set KUBECONFIG")
        if not os.path.isfile(path):
            raise ConfigError(f"kubeconfig {path}: no such file")
        await k8s_config.load_kube_config(config_file=path, client_configuration=cfg, persist_config=False)
    except ConfigError:
        raise
    except (k8s_config.ConfigException, OSError, ValueError, KeyError, TypeError) as exc:
        where = f"kubeconfig {path}" if path else "in-cluster config"
        raise ConfigError(f"{where}: {exc}") from exc
    return cfg


async def from_kubeconfig(path: str | None, qps: float = 50, burst: int = 100, *, clock: Clock,
                          **kwargs: Any) -> APIClient:
    """An :class:`APIClient` for the cluster ``path`` names (see :func:`load_configuration`), on ``clock``.

    ``kwargs`` go to :class:`APIClient` (``retry``, ``timeout``, ...).
    ``qps <= 0`` turns the client-side rate limit off.
    """
    cfg = await load_configuration(path)
    try:
        return APIClient(cfg, qps=qps, burst=burst, clock=clock, **kwargs)
    except (ssl.SSLError, OSError) as exc:  # unreadable or malformed CA / client certificate files
        raise ConfigError(f"{path or 'in-cluster config'}: TLS setup: {exc}") from exc
