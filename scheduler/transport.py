"""A lean HTTP/1.1 keep-alive transport for the API client's request/response calls.

Why not aiohttp here: a ``ClientSession`` request costs 90-170 us of CPU
(cookie jar, tracing hooks, URL objects, timer contexts, response objects;
``python -m bench.micro_http`` measures it), and at 1,000 pods/s binds,
events and status patches are 1,000-3,000 requests a second on the
scheduler's one core. This transport does the same exchange for 25-60%
less: one :class:`asyncio.Protocol` per connection, responses parsed by
httptools (llhttp, the C parser uvicorn uses), idle connections kept in a
LIFO pool so the warm ones are reused. aiohttp stays for watches (long
streams read incrementally) and for everything when a proxy is configured.

What it speaks: HTTP/1.1 over TCP or TLS, one request at a time per
connection (no pipelining), request bodies with Content-Length, responses
with Content-Length, chunked, or ended by the server closing the
connection. What it never does: redirects, cookies, compression (it never
sends Accept-Encoding, so the server never compresses), proxies, HTTP/2.

Failure semantics, which :class:`scheduler.apiclient.APIClient` relies on:

* every failure to get a whole response (refused, reset, closed early,
  timed out, malformed) raises :class:`TransportError`, an ``OSError``;
* a connection whose exchange did not end cleanly (error, timeout,
  cancellation, ``Connection: close``) is closed, never reused, so a late
  answer can never be read as the answer to the next request;
* an idle connection the server closed is noticed (``connection_lost``)
  and dropped from the pool before it is handed out.
"""

from __future__ import annotations

import asyncio
import ssl as ssl_module
from dataclasses import dataclass
from urllib.parse import quote

import httptools
from multidict import CIMultiDict, CIMultiDictProxy

from scheduler.framework.clock import io_timer

# path characters sent as they are: RFC 3986 pchar plus "/" and "%" (a path that is already percent-encoded
# stays as it is, as yarl does with encoded=True)
_SAFE_PATH = "/:@!$&'()*+,;=-._~%"


class TransportError(OSError):
    """No whole response: the connection failed, broke, timed out, or the answer was not HTTP."""


@dataclass(slots=True)
class Response:
    status: int
    headers: CIMultiDictProxy[str]
    body: bytes


class _Connection(asyncio.Protocol):
    """One keep-alive connection; at most one exchange at a time."""

    __slots__ = ("transport", "parser", "waiter", "headers", "body", "closed", "headers_done", "until_eof",
                 "pool", "loop")

    def __init__(self, pool: "Transport") -> None:
        self.pool = pool
        # made by the loop's create_connection, and used on it only: asyncio.get_running_loop() is a getpid()
        # system call in CPython 3.11, and 1.6% of the scheduler's samples (py-spy --native, SchedulingBasic)
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[tuple[Response, bool]] | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.closed = False
        self.headers_done = False
        self.until_eof = False          # a response without Content-Length or chunking ends at EOF

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.waiter is None:
            self.close()   # nobody asked: a stray or late answer must not be read by the next request
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(TransportError(f"malformed HTTP response: {exc}"))
            self.close()

    def eof_received(self) -> bool:
        return False   # close our side too; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool._lost(self)
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        if self.headers_done and self.until_eof and exc is None:
            self._complete(keep_alive=False)
            return
        why = f": {exc}" if exc is not None else ""
        self._fail(TransportError(f"the connection closed before the response ended{why}"))

    # -- httptools callbacks

    def on_message_begin(self) -> None:
        self.headers = []
        self.body = []
        self.headers_done = False
        self.until_eof = False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.headers_done = True
        status = self.parser.get_status_code()
        # 204 and 304 have no body by definition; anything else without a length is read until EOF
        self.until_eof = status not in (204, 304) and not any(
            n.lower() in (b"content-length", b"transfer-encoding") for n, _ in self.headers)

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self._complete(keep_alive=self.parser.should_keep_alive() and not self.until_eof)

    # -- our side

    def _complete(self, keep_alive: bool) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is None or waiter.done():
            return
        headers = CIMultiDict((n.decode("latin-1"), v.decode("latin-1")) for n, v in self.headers)
        body = self.body[0] if len(self.body) == 1 else b"".join(self.body)
        waiter.set_result((Response(self.parser.get_status_code(), CIMultiDictProxy(headers), body), keep_alive))

    def _fail(self, exc: Exception) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def send(self, data: bytes) -> asyncio.Future[tuple[Response, bool]]:
        assert self.transport is not None and self.waiter is None
        self.waiter = self.loop.create_future()
        self.transport.write(data)
        return self.waiter

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    @property
    def usable(self) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing()


def _expire(waiter: asyncio.Future, method: str, path: str, timeout: float) -> None:
    if not waiter.done():
        waiter.set_exception(TransportError(f"{method} {path}: no whole response within {timeout}s"))


class Transport:
    """A pool of keep-alive connections to one server.

    ``host``/``port`` are where to connect; ``ssl`` a context for https
    (None for http); ``server_hostname`` overrides the TLS name (kubeconfig's
    ``tls-server-name``); ``base_path`` prefixes every path (an API server
    behind a path-routing proxy); ``limit`` caps connections, further
    requests wait for one.
    """

    def __init__(self, host: str, port: int, *, ssl: ssl_module.SSLContext | None = None,
                 server_hostname: str | None = None, base_path: str = "", limit: int = 256) -> None:
        self.host = host
        self.port = port
        self.ssl = ssl
        self.server_hostname = server_hostname
        self.base_path = base_path.rstrip("/")
        default_port = 443 if ssl is not None else 80
        bracketed = f"[{host}]" if ":" in host else host
        self.host_header = bracketed if port == default_port else f"{bracketed}:{port}"
        self.limit = limit
        self._idle: list[_Connection] = []
        self._all: set[_Connection] = set()
        self._slots: asyncio.Semaphore | None = None
        self._closed = False

    @property
    def connections(self) -> int:
        """Open connections, idle or busy."""
        return len(self._all)

    def _lost(self, conn: _Connection) -> None:
        self._all.discard(conn)

    async def _connect(self, timeout: float | None) -> _Connection:
        loop = asyncio.get_running_loop()
        kw = {}
        if self.ssl is not None:
            kw["ssl"] = self.ssl
            if self.server_hostname:
                kw["server_hostname"] = self.server_hostname
        try:
            async with asyncio.timeout(timeout):
                _, conn = await loop.create_connection(lambda: _Connection(self), self.host, self.port, **kw)
        except TimeoutError as exc:
            raise TransportError(f"connecting to {self.host_header} timed out after {timeout}s") from exc
        except ssl_module.SSLError as exc:
            raise TransportError(f"TLS handshake with {self.host_header}: {exc}") from exc
        except OSError as exc:
            if isinstance(exc, TransportError):
                raise
            raise TransportError(f"connecting to {self.host_header}: {exc}") from exc
        self._all.add(conn)
        return conn

    def _head(self, method: str, path: str, query: str, headers: dict[str, str], body: bytes | None) -> bytes:
        if "?" in path:   # a query written into the path, as aiohttp would take a str URL
            path, inline = path.split("?", 1)
            query = f"{inline}&{query}" if query else inline
        target = quote(self.base_path + path, safe=_SAFE_PATH)
        if query:
            target = f"{target}?{query}"
        parts = [f"{method} {target} HTTP/1.1\r\nHost: {self.host_header}\r\n"]
        for k, v in headers.items():
            if "\r" in v or "\n" in v or "\r" in k or "\n" in k:
                raise ValueError(f"header {k!r}: line breaks are not allowed in HTTP headers")
            parts.append(f"{k}: {v}\r\n")
        if body is not None:
            parts.append(f"Content-Length: {len(body)}\r\n")
        parts.append("\r\n")
        head = "".join(parts).encode("latin-1")
        return head + body if body else head

    async def request(self, method: str, path: str, *, query: str = "", headers: dict[str, str] | None = None,
                      body: bytes | None = None, timeout: float | None = None,
                      connect_timeout: float | None = None) -> Response:
        """One exchange. ``query`` is already encoded. ``timeout`` bounds the answer, and connecting when a new
        connection is needed; when every slot is taken, it covers the wait for one as well."""
        if self._closed:
            raise TransportError("the transport is closed")
        data = self._head(method, path, query, headers or {}, body)
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limit)
        if timeout is not None and not self._slots.locked():
            return await self._send_now(method, path, data, timeout, connect_timeout)
        conn: _Connection | None = None
        try:
            async with asyncio.timeout(timeout):
                async with self._slots:
                    conn = self._idle_connection()
                    if conn is None:
                        conn = await self._connect(connect_timeout)
                    resp, keep_alive = await conn.send(data)
                    self._done_with(conn, keep_alive)
                    conn = None
                    return resp
        except TimeoutError as exc:
            raise TransportError(f"{method} {path}: no whole response within {timeout}s") from exc
        finally:
            if conn is not None:   # the exchange did not end cleanly: its connection is never reused
                conn.close()

    def _done_with(self, conn: _Connection, keep_alive: bool) -> None:
        """A clean exchange's connection: back to the pool, or closed when the server or we are done with it."""
        if keep_alive and not self._closed:
            self._idle.append(conn)
        else:
            conn.close()

    def _idle_connection(self) -> "_Connection | None":
        while self._idle:
            c = self._idle.pop()
            if c.usable:
                return c
        return None

    async def _send_now(self, method: str, path: str, data: bytes, timeout: float,
                        connect_timeout: float | None) -> Response:
        """The usual exchange: a slot is free, so nothing is waited for but a connection and the answer. A warm
        connection is taken when one is idle, else one is opened (within ``connect_timeout`` and ``timeout``,
        each). The answer is timed by one timer that fails its future (``asyncio.timeout``'s bookkeeping cost
        more than the rest of the exchange's Python), from when the request is written; the connection of an
        exchange that did not end cleanly is closed, as in :meth:`request`."""
        slots = self._slots
        assert slots is not None
        await slots.acquire()   # free: no wait
        conn = None
        timer = None
        try:
            conn = self._idle_connection()
            if conn is None:
                conn = await self._connect(timeout if connect_timeout is None else min(connect_timeout, timeout))
            waiter = conn.send(data)
            timer = io_timer(timeout, _expire, waiter, method, path, timeout)
            resp, keep_alive = await waiter
            self._done_with(conn, keep_alive)
            conn = None
            return resp
        finally:
            if timer is not None:
                timer.cancel()
            slots.release()
            if conn is not None:   # the exchange did not end cleanly: its connection is never reused
                conn.close()

    async def close(self) -> None:
        self._closed = True
        for conn in list(self._all):
            conn.close()
        self._idle.clear()
        await asyncio.sleep(0)   # let the transports run their close callbacks
