"""scheduler/transport.py: keep-alive reuse, the ways a response ends, and never reading a stale answer.

Each test runs a scripted TCP server that answers with exact bytes, so the
cases a real API server produces rarely (chunking, EOF-delimited bodies,
closing an idle connection, a reply cut off midway) are produced on purpose.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

import pytest

from scheduler.transport import Transport, TransportError
from tests.support.waiting import eventually, settle

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


class Server:
    """Counts connections; ``handler(reader, writer, conn_no)`` serves each."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.requests: list[bytes] = []
        self.server: asyncio.base_events.Server | None = None
        self.port = 0

    async def __aenter__(self) -> "Server":
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            try:
                await self.handler(reader, writer, self.connections)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()

        self.server = await asyncio.start_server(serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    async def read_request(self, reader: asyncio.StreamReader) -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await reader.readexactly(length) if length else b""
        self.requests.append(head + body)
        return head + body


def ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s" % (
        len(body), extra, body)


def keep_alive_server(replies: list[bytes] | None = None) -> Server:
    async def handler(reader, writer, n):
        i = 0
        while True:
            await srv.read_request(reader)
            writer.write(replies[i % len(replies)] if replies else ok(b'{"n": %d}' % n))
            await writer.drain()
            i += 1

    srv = Server(handler)
    return srv


async def test_sequential_requests_reuse_one_connection_and_send_what_was_asked() -> None:
    async with keep_alive_server() as srv:
        t = Transport("127.0.0.1", srv.port)
        for _ in range(3):
            resp = await t.request("POST", "/api/v1/namespaces/ns/pods/p/binding", query="dryRun=All",
                                   headers={"Content-Type": "application/json"}, body=b'{"a":1}')
            assert resp.status == 200 and resp.body == b'{"n": 1}'
            assert resp.headers["content-type"] == "application/json"
        await t.close()
    assert srv.connections == 1
    first = srv.requests[0]
    assert first.startswith(b"POST /api/v1/namespaces/ns/pods/p/binding?dryRun=All HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{srv.port}\r\n".encode() in first
    assert b"Content-Length: 7\r\n" in first and first.endswith(b'\r\n\r\n{"a":1}')


async def test_connection_close_is_honoured_and_the_next_request_opens_a_new_one() -> None:
    async with keep_alive_server([ok(b"{}", b"Connection: close\r\n")]) as srv:
        t = Transport("127.0.0.1", srv.port)
        assert (await t.request("GET", "/x")).status == 200
        assert (await t.request("GET", "/x")).status == 200
        await t.close()
    assert srv.connections == 2


async def test_a_chunked_response_is_reassembled() -> None:
    reply = (b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
             b"4\r\n{\"a\"\r\n3\r\n: 1\r\n1\r\n}\r\n0\r\n\r\n")
    async with keep_alive_server([reply]) as srv:
        t = Transport("127.0.0.1", srv.port)
        resp = await t.request("GET", "/x")
        assert (resp.status, resp.body) == (201, b'{"a": 1}')
        assert (await t.request("GET", "/x")).body == b'{"a": 1}'
        await t.close()
    assert srv.connections == 1, "a chunked answer leaves the connection reusable"


def one_reply_server(reply: bytes) -> Server:
    """Answers one request with ``reply``, then closes the connection."""
    async def handler(reader, writer, n):
        await srv.read_request(reader)
        writer.write(reply)
        await writer.drain()

    srv = Server(handler)
    return srv


async def test_a_response_ended_by_closing_the_connection_is_whole() -> None:
    async with one_reply_server(b"HTTP/1.1 200 OK\r\n\r\n{\"until\": \"eof\"}") as srv:
        t = Transport("127.0.0.1", srv.port)
        assert (await t.request("GET", "/x")).body == b'{"until": "eof"}'
        assert (await t.request("GET", "/x")).body == b'{"until": "eof"}'
        await t.close()
    assert srv.connections == 2


async def test_an_idle_connection_the_server_closed_is_not_handed_out() -> None:
    async with one_reply_server(ok(b"{}")) as srv:   # a keep-alive answer, then the server closes
        t = Transport("127.0.0.1", srv.port)
        await t.request("GET", "/x")
        await eventually(lambda: t.connections == 0, "the pool to notice the close")
        assert (await t.request("GET", "/x")).status == 200
        await t.close()
    assert srv.connections == 2


async def test_a_reply_cut_off_midway_is_a_transport_error() -> None:
    async with one_reply_server(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"short\"") as srv:
        t = Transport("127.0.0.1", srv.port)
        with pytest.raises(TransportError, match="closed before the response ended"):
            await t.request("GET", "/x")
        await t.close()


async def test_a_reply_that_is_not_http_is_a_transport_error_and_the_connection_goes() -> None:
    async with keep_alive_server([b"SSH-2.0-OpenSSH_9.6\r\n\r\n"]) as srv:
        t = Transport("127.0.0.1", srv.port)
        with pytest.raises(TransportError, match="malformed HTTP response"):
            await t.request("GET", "/x")
        await asyncio.sleep(0)
        assert t.connections == 0
        await t.close()


def slow_then_fresh_server(release: asyncio.Event) -> Server:
    """Answers /slow only once ``release`` is set, anything else at once."""
    async def handler(reader, writer, n):
        while True:
            req = await srv.read_request(reader)
            if b"/slow" in req:
                await release.wait()
                writer.write(ok(b'{"late": true}'))
            else:
                writer.write(ok(b'{"fresh": true}'))
            await writer.drain()

    srv = Server(handler)
    return srv


async def test_a_timed_out_exchange_closes_its_connection_so_the_late_answer_is_never_read() -> None:
    release = asyncio.Event()
    async with slow_then_fresh_server(release) as srv:
        t = Transport("127.0.0.1", srv.port)
        with pytest.raises(TransportError, match="no whole response within"):
            await t.request("GET", "/slow", timeout=0.05)
        release.set()
        resp = await t.request("GET", "/fast")
        assert resp.body == b'{"fresh": true}'
        await t.close()
    assert srv.connections == 2


async def test_a_timed_out_exchange_on_a_warm_connection_closes_it_too() -> None:
    # the warm path (an idle connection, a free slot) times the answer with its own timer
    release = asyncio.Event()
    async with slow_then_fresh_server(release) as srv:
        t = Transport("127.0.0.1", srv.port)
        assert (await t.request("GET", "/fast", timeout=5)).body == b'{"fresh": true}'
        with pytest.raises(TransportError, match="no whole response within"):
            await t.request("GET", "/slow", timeout=0.05)
        release.set()
        assert (await t.request("GET", "/fast", timeout=5)).body == b'{"fresh": true}'
        await t.close()
    assert srv.connections == 2, "the timed-out connection was closed, the next request opened another"


async def test_a_cancelled_exchange_closes_its_connection() -> None:
    release = asyncio.Event()
    async with slow_then_fresh_server(release) as srv:
        t = Transport("127.0.0.1", srv.port)
        task = asyncio.create_task(t.request("GET", "/slow"))
        await eventually(lambda: any(b"/slow" in r for r in srv.requests), "the server to receive /slow")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()
        assert (await t.request("GET", "/fast")).body == b'{"fresh": true}'
        await t.close()
    assert srv.connections == 2


async def test_concurrent_requests_open_at_most_limit_connections() -> None:
    gate = asyncio.Event()

    async def handler(reader, writer, n):
        while True:
            await srv.read_request(reader)
            await gate.wait()
            writer.write(ok(b"{}"))
            await writer.drain()

    async with Server(handler) as srv:
        t = Transport("127.0.0.1", srv.port, limit=2)
        tasks = [asyncio.create_task(t.request("GET", "/x")) for _ in range(6)]
        await eventually(lambda: len(srv.requests) == 2, "the first two requests to arrive")
        await settle()
        assert t.connections == 2 and len(srv.requests) == 2, "the other four wait for a pooled connection"
        gate.set()
        assert [r.status for r in await asyncio.gather(*tasks)] == [200] * 6
        await t.close()
    assert srv.connections == 2


async def test_refused_connection_is_a_transport_error() -> None:
    async with keep_alive_server() as srv:
        port = srv.port
    t = Transport("127.0.0.1", port)
    with pytest.raises(TransportError, match="connecting to"):
        await t.request("GET", "/x")
    await t.close()


async def test_paths_are_percent_encoded_once_and_the_base_path_prefixes_them() -> None:
    async with keep_alive_server() as srv:
        t = Transport("127.0.0.1", srv.port, base_path="/k8s/clusters/c-1/")
        await t.request("GET", "/api/v1/namespaces/a b/pods/x%2Fy")
        await t.close()
    assert srv.requests[0].startswith(b"GET /k8s/clusters/c-1/api/v1/namespaces/a%20b/pods/x%2Fy HTTP/1.1\r\n")


async def test_a_query_written_into_the_path_stays_a_query() -> None:
    async with keep_alive_server() as srv:
        t = Transport("127.0.0.1", srv.port)
        await t.request("GET", "/api/v1/pods?limit=5", query="continue=abc")
        await t.close()
    assert srv.requests[0].startswith(b"GET /api/v1/pods?limit=5&continue=abc HTTP/1.1\r\n")


async def test_a_header_with_a_line_break_is_refused_before_anything_is_sent() -> None:
    async with keep_alive_server() as srv:
        t = Transport("127.0.0.1", srv.port)
        with pytest.raises(ValueError, match="line breaks"):
            await t.request("GET", "/x", headers={"Authorization": "Bearer a\r\nX-Evil: 1"})
        await t.close()
    assert srv.requests == []


@pytest.mark.parametrize("host, port, tls, want", [
    ("10.0.0.1", 443, True, "10.0.0.1"),
    ("10.0.0.1", 6443, True, "10.0.0.1:6443"),
    ("example.com", 80, False, "example.com"),
    ("::1", 6443, False, "[::1]:6443"),
])
def test_the_host_header_omits_the_default_port_and_brackets_ipv6(host, port, tls, want) -> None:
    import ssl
    t = Transport(host, port, ssl=ssl.create_default_context() if tls else None)
    assert t.host_header == want
