"""Tests for scheduler/apiclient.py.

Status codes, headers and broken streams are scripted on a small aiohttp
server (the aiohttp analogue of httpx's MockTransport: the real client stack
runs, only the other end is fake). What the real API server decides (binding
rules, preconditions, patches) is asserted against the simulated cluster.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

import aiohttp
import orjson
import pytest
import yaml
from aiohttp import web
from kubernetes_asyncio import client as k8s_client

from bench.simcluster import SimCluster
from scheduler import apiclient
from scheduler.apiclient import (
    APIClient,
    APIError,
    BadRequest,
    ConfigError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    RetryPolicy,
    ServerError,
    TooManyRequests,
    Unreachable,
    from_kubeconfig,
)
from scheduler.framework.clock import Clock, FakeClock

FAST_RETRY = RetryPolicy(attempts=3, base=0.01, cap=0.02)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def status_body(code: int, reason: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code, **extra}


def status_response(code: int, reason: str, message: str, headers: dict[str, str] | None = None,
                    **extra: Any) -> web.Response:
    return web.Response(body=orjson.dumps(status_body(code, reason, message, **extra)), status=code,
                        content_type="application/json", headers=headers)


def ok(body: Any = None) -> web.Response:
    return web.Response(body=orjson.dumps(body if body is not None else {"kind": "Pod", "metadata": {"name": "p"}}),
                        content_type="application/json")


@dataclass
class FakeServer:
    """Answers each request with the next scripted handler (the last one repeats); records requests."""

    script: list[Handler] = field(default_factory=list)
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    url: str = ""

    def answer(self, *responses: Handler | web.Response) -> None:
        self.script = [r if callable(r) else _const(r) for r in responses]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.method, request.path_qs, dict(request.headers)))
        if not self.script:
            return ok()
        handler = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        return await handler(request)


def _const(resp: web.Response) -> Handler:
    # a Response can be sent once; keep its parts and build a new one each time
    body, status, headers = resp.body, resp.status, {k: v for k, v in resp.headers.items()
                                                     if k.lower() not in ("content-length", "content-type")}

    async def handler(_: web.Request) -> web.Response:
        return web.Response(body=body, status=status, headers=headers, content_type="application/json")
    return handler


async def _serve(app: web.Application, ssl_context: ssl.SSLContext | None = None) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


@pytest.fixture
async def fake():
    server = FakeServer()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.handle)
    runner, port = await _serve(app)
    server.url = f"http://127.0.0.1:{port}"
    yield server
    await runner.cleanup()


def make_client(url: str, **kwargs: Any) -> APIClient:
    cfg = k8s_client.Configuration(host=url)
    kwargs.setdefault("qps", 0)
    kwargs.setdefault("retry", FAST_RETRY)
    kwargs.setdefault("clock", Clock())   # real: FAST_RETRY's delays pass while the fake server answers
    return APIClient(cfg, **kwargs)


@pytest.fixture(params=["transport", "aiohttp"])
async def client(fake, request):
    """Both request paths: the keep-alive transport, and aiohttp (what a configured proxy gets)."""
    c = make_client(fake.url)
    if request.param == "aiohttp":
        await c.transport.close()
        c.transport = None
    yield c
    await c.close()


# ---------------------------------------------------------------------------- typed errors


ERROR_CASES = [
    (400, "BadRequest", "the object provided could not be decoded", BadRequest),
    (403, "Forbidden", 'pods "p" is forbidden: unable to create new content', Forbidden),
    (404, "NotFound", 'pods "p" not found', NotFound),
    (409, "Conflict", 'Operation cannot be fulfilled on pods "p": the object has been modified', Conflict),
    (409, "AlreadyExists", 'pods "p" already exists', Conflict),
    (410, "Expired", "too old resource version: 5 (10)", Gone),
    (422, "Invalid", 'Pod "p" is invalid: spec.containers: Required value', Invalid),
    (429, "TooManyRequests", "Too many requests, please try again later.", TooManyRequests),
    (500, "InternalError", "Internal error occurred: boom", ServerError),
    (503, "ServiceUnavailable", "the server is currently unable to handle the request", ServerError),
]


@pytest.mark.parametrize("code,reason,message,cls", ERROR_CASES,
                         ids=[f"{code} {reason} is {cls.__name__}" for code, reason, _, cls in ERROR_CASES])
async def test_status_body_becomes_typed_error(fake, code, reason, message, cls):
    fake.answer(status_response(code, reason, message, headers={"Retry-After": "3"} if code == 429 else None,
                                details={"causes": [{"field": "spec.containers"}]} if code == 422 else {}))
    async with make_client(fake.url, retry=apiclient.NO_RETRY) as c:
        with pytest.raises(cls) as info:
            await c.get("/api/v1/namespaces/default/pods/p")
    err = info.value
    assert (err.status, err.reason, err.message) == (code, reason, message)
    assert err.body["kind"] == "Status"
    assert message in str(err)
    if cls is Conflict:
        assert err.already_exists == (reason == "AlreadyExists")
    if cls is TooManyRequests:
        assert err.retry_after == 3
    if cls is Invalid:
        assert err.causes == [{"field": "spec.containers"}]


async def test_non_status_error_body_still_gives_a_typed_error(fake, client):
    fake.answer(web.Response(text="404 page not found", status=404))
    with pytest.raises(NotFound) as info:
        await client.get("/nowhere")
    assert info.value.message == "404 page not found"


async def test_connection_refused_is_unreachable_after_retries():
    # a port nobody listens on: bind one, note it, close it
    runner, port = await _serve(web.Application())
    await runner.cleanup()
    async with make_client(f"http://127.0.0.1:{port}") as c:
        with pytest.raises(Unreachable) as info:
            await c.get("/version")
    assert info.value.status == 0
    assert isinstance(info.value, APIError)
    assert isinstance(info.value.__cause__, (aiohttp.ClientError, OSError))
    assert c.counts["get", "<error>"] == FAST_RETRY.attempts
    assert c.retries["Unreachable"] == FAST_RETRY.attempts - 1


# ---------------------------------------------------------------------------- retries


async def test_429_retry_after_is_honoured_then_success(fake):
    fake.answer(status_response(429, "TooManyRequests", "slow down", headers={"Retry-After": "1"}), ok())
    clock = FrozenClock()
    async with make_client(fake.url, retry=RetryPolicy(attempts=3, base=0.01, cap=0.02), clock=clock) as c:
        body = await c.get("/api/v1/namespaces/default/pods/p")
    assert body["metadata"]["name"] == "p"
    assert clock.slept == [1.0], "the retry waited what Retry-After said, not the 10 ms backoff"
    assert c.counts == {("get", "429"): 1, ("get", "200"): 1}
    assert c.retries == {"TooManyRequests": 1}


@pytest.mark.parametrize("codes", [[500], [503, 502], [504, 500]], ids=["one 500", "503 then 502", "504 then 500"])
async def test_server_errors_are_retried_then_succeed(fake, client, codes):
    fake.answer(*[status_response(c, "InternalError", "try again") for c in codes], ok())
    body = await client.create("/api/v1/namespaces/default/pods", {"metadata": {"name": "p"}})
    assert body["metadata"]["name"] == "p"
    assert [m for m, _, _ in fake.requests] == ["POST"] * (len(codes) + 1)
    assert client.counts["create", "200"] == 1
    assert sum(client.retries.values()) == len(codes)


async def test_retries_give_up_after_the_limit_with_the_typed_error(fake, client):
    fake.answer(status_response(503, "ServiceUnavailable", "still down"))
    with pytest.raises(ServerError) as info:
        await client.bind("default", "p", "uid-1", "node-0")
    assert info.value.message == "still down"
    assert len(fake.requests) == FAST_RETRY.attempts
    assert client.counts["create", "503"] == FAST_RETRY.attempts


@pytest.mark.parametrize("code,cls", [(400, BadRequest), (404, NotFound), (409, Conflict), (422, Invalid)],
                         ids=["400", "404", "409", "422"])
async def test_client_errors_are_not_retried(fake, client, code, cls):
    fake.answer(status_response(code, "X", "no"))
    with pytest.raises(cls):
        await client.get("/api/v1/namespaces/default/pods/p")
    assert len(fake.requests) == 1


async def test_body_cut_off_midway_is_retried(fake, client):
    async def truncated(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json", "Content-Length": "1000"})
        await resp.prepare(request)
        await resp.write(b'{"kind": "Pod"')
        request.transport.close()  # type: ignore[union-attr]
        return resp
    fake.answer(truncated, ok())
    body = await client.get("/api/v1/namespaces/default/pods/p")
    assert body["metadata"]["name"] == "p"
    assert len(fake.requests) == 2


def test_backoff_grows_exponentially_with_jitter_and_is_capped():
    policy = RetryPolicy(attempts=10, base=0.1, cap=1.0)
    err = ServerError(500)
    for n, full in enumerate([0.1, 0.2, 0.4, 0.8, 1.0, 1.0]):
        delays = {policy.delay(n, err) for _ in range(50)}
        assert all(full / 2 <= d <= full for d in delays)
        assert len(delays) > 1, "jittered"
    assert policy.delay(0, TooManyRequests(429, retry_after=7)) == 7


# ---------------------------------------------------------------------------- rate limit


class FrozenClock(FakeClock):
    """Time stands still; ``sleep`` records what it was asked to wait and returns at once."""

    def __init__(self) -> None:
        super().__init__()
        self.slept: list[float] = []

    async def sleep(self, delay: float) -> None:
        self.slept.append(delay)
        await asyncio.sleep(0)


async def test_token_bucket_spaces_requests_beyond_burst(fake):
    qps, burst, n = 20.0, 5, 25
    clock = FrozenClock()
    async with make_client(fake.url, qps=qps, burst=burst, clock=clock) as c:
        await asyncio.gather(*(c.get("/version") for _ in range(n)))
    assert len(fake.requests) == n
    assert sorted(clock.slept) == pytest.approx([(i + 1) / qps for i in range(n - burst)]), \
        "the burst goes at once; each request after it waits one more token's time, in arrival order"
    assert c.bucket.waited == pytest.approx(sum(clock.slept))


# ---------------------------------------------------------------------------- watch


async def test_watch_streams_events_split_across_chunks_and_large_ones(fake, client):
    big = {"type": "ADDED", "object": {"metadata": {"name": "big", "resourceVersion": "2",
                                                    "annotations": {"blob": "x" * 300_000}}}}
    events = [{"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "1"}}}, big,
              {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "3"}}}]
    data = b"".join(orjson.dumps(e) + b"\n" for e in events)

    async def stream(request: web.Request) -> web.StreamResponse:
        assert request.query["watch"] == "true"
        assert request.query["allowWatchBookmarks"] == "true"
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        for i in range(0, len(data), 7000):  # lines split at arbitrary points
            await resp.write(data[i:i + 7000])
            await asyncio.sleep(0)
        await resp.write_eof()
        return resp
    fake.answer(stream)
    got = [e async for e in client.watch("/api/v1/pods", {"allowWatchBookmarks": True, "timeoutSeconds": 5})]
    assert got == events


async def test_watch_error_event_410_raises_gone(fake, client):
    line = orjson.dumps({"type": "ERROR", "object": status_body(410, "Expired", "too old resource version: 1 (5)")})
    fake.answer(web.Response(body=line + b"\n", content_type="application/json"))
    with pytest.raises(Gone) as info:
        async for _ in client.watch("/api/v1/pods", {"resourceVersion": "1"}):
            pass
    assert info.value.message == "too old resource version: 1 (5)"


async def test_watch_other_error_event_raises_its_type(fake, client):
    line = orjson.dumps({"type": "ERROR", "object": status_body(500, "InternalError", "etcd is sad")})
    fake.answer(web.Response(body=line + b"\n", content_type="application/json"))
    with pytest.raises(ServerError):
        async for _ in client.watch("/api/v1/pods"):
            pass


async def test_watch_broken_midstream_raises_unreachable(fake, client):
    async def broken(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        await resp.write(b'{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n{"type":"MOD')
        request.transport.close()  # type: ignore[union-attr]
        return resp
    fake.answer(broken)
    got = []
    with pytest.raises(Unreachable):
        async for e in client.watch("/api/v1/pods"):
            got.append(e)
    assert [e["object"]["metadata"]["name"] for e in got] == ["a"]


async def test_watch_against_simcluster_ends_after_timeout_seconds():
    async with SimCluster(agent=None) as cluster:
        async with make_client(cluster.url) as c:
            lst = await c.list("/api/v1/namespaces")
            t = time.monotonic()
            events = [e async for e in c.watch("/api/v1/namespaces", {"resourceVersion": lst["metadata"]["resourceVersion"],
                                                                      "timeoutSeconds": 1,
                                                                      "allowWatchBookmarks": True})]
            assert 0.9 <= time.monotonic() - t < 3
            assert [e["type"] for e in events] == ["BOOKMARK"]


# ---------------------------------------------------------------------------- what the scheduler says, on the simulated cluster

POD = {"metadata": {"name": "p"}, "spec": {"schedulerName": "tandem-scheduler",
                                             "containers": [{"name": "c", "image": "pause"}]}}


@pytest.fixture
async def sim(tmp_path):
    async with SimCluster(nodes=2, agent=None, kubeconfig=tmp_path / "kubeconfig") as cluster:
        async with await from_kubeconfig(str(tmp_path / "kubeconfig"), qps=0, clock=Clock()) as c:
            yield cluster, c


async def test_bind_sets_the_node(sim):
    _, c = sim
    pod = await c.create("/api/v1/namespaces/default/pods", POD)
    assert await c.bind("default", "p", pod["metadata"]["uid"], "node-0") is None
    got = await c.get("/api/v1/namespaces/default/pods/p")
    assert got["spec"]["nodeName"] == "node-0"
    assert {"type": "PodScheduled", "status": "True"}.items() <= got["status"]["conditions"][0].items()
    assert c.counts["create", "201"] == 2


async def test_bind_of_a_bound_pod_raises_conflict_with_the_message(sim):
    _, c = sim
    pod = await c.create("/api/v1/namespaces/default/pods", POD)
    await c.bind("default", "p", pod["metadata"]["uid"], "node-0")
    with pytest.raises(Conflict) as info:
        await c.bind("default", "p", pod["metadata"]["uid"], "node-1")
    assert 'pod p is already assigned to node "node-0"' in info.value.message
    assert not info.value.already_exists


async def test_bind_with_a_stale_uid_raises_conflict(sim):
    _, c = sim
    await c.create("/api/v1/namespaces/default/pods", POD)
    with pytest.raises(Conflict) as info:
        await c.bind("default", "p", "not-the-uid", "node-0")
    assert "Precondition failed: UID in precondition: not-the-uid" in info.value.message


async def test_bind_of_a_missing_pod_raises_not_found(sim):
    _, c = sim
    with pytest.raises(NotFound) as info:
        await c.bind("default", "ghost", "uid", "node-0")
    assert info.value.message == 'pods "ghost" not found'


async def test_bind_retried_through_injected_errors_lands_once(sim):
    cluster, c = sim
    from bench.simcluster.faults import FaultRule
    pod = await c.create("/api/v1/namespaces/default/pods", POD)
    cluster.faults.rules = [FaultRule(verb="create", resource="pods/binding", error_rate=0.7, error_code=503)]
    cluster.faults.seed = None
    c.retry = RetryPolicy(attempts=30, base=0.001, cap=0.002)
    await c.bind("default", "p", pod["metadata"]["uid"], "node-1")
    cluster.faults.clear()
    assert (await c.get("/api/v1/namespaces/default/pods/p"))["spec"]["nodeName"] == "node-1"


async def test_patch_pod_status_merges_conditions_and_nominated_node(sim):
    _, c = sim
    await c.create("/api/v1/namespaces/default/pods", POD)
    got = await c.patch_pod_status("default", "p", {
        "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                   "message": "0/2 nodes are available"}],
                   "nominatedNodeName": "node-1"}})
    assert got["status"]["nominatedNodeName"] == "node-1"
    cond = [x for x in got["status"]["conditions"] if x["type"] == "PodScheduled"]
    assert cond[0]["reason"] == "Unschedulable"


async def test_create_event_uses_the_events_api_in_the_events_namespace(sim):
    cluster, c = sim
    ev = await c.create_event({
        "metadata": {"name": "p.1881f0a5c2e4b7d0", "namespace": "default"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "tandem-scheduler",
        "reportingInstance": "tandem-scheduler-0", "action": "Scheduling", "reason": "Scheduled",
        "note": "Successfully assigned default/p to node-0", "type": "Normal",
        "regarding": {"kind": "Pod", "namespace": "default", "name": "p"}})
    assert ev["apiVersion"] == "events.k8s.io/v1"
    assert ev["metadata"]["namespace"] == "default"
    listed = await c.list("/apis/events.k8s.io/v1/namespaces/default/events")
    assert [e["reason"] for e in listed["items"]] == ["Scheduled"]


async def test_delete_pod_with_uid_precondition(sim):
    _, c = sim
    pod = await c.create("/api/v1/namespaces/default/pods", POD)
    with pytest.raises(Conflict):
        await c.delete_pod("default", "p", uid="someone-else")
    await c.delete_pod("default", "p", uid=pod["metadata"]["uid"], grace_seconds=0)
    with pytest.raises(NotFound):
        await c.get("/api/v1/namespaces/default/pods/p")


async def test_create_existing_raises_already_exists(sim):
    _, c = sim
    await c.create("/api/v1/namespaces/default/pods", POD)
    with pytest.raises(Conflict) as info:
        await c.create("/api/v1/namespaces/default/pods", POD)
    assert info.value.already_exists


async def test_update_with_stale_resource_version_raises_conflict(sim):
    _, c = sim
    pod = await c.create("/api/v1/namespaces/default/pods", POD)
    await c.patch("/api/v1/namespaces/default/pods/p", {"metadata": {"labels": {"a": "b"}}})
    with pytest.raises(Conflict) as info:
        await c.update("/api/v1/namespaces/default/pods/p", pod)
    assert not info.value.already_exists


async def test_list_and_get_return_raw_dicts(sim):
    _, c = sim
    nodes = await c.list("/api/v1/nodes", {"labelSelector": "kubernetes.io/hostname=node-1"})
    assert [n["metadata"]["name"] for n in nodes["items"]] == ["node-1"]
    assert type(nodes["items"][0]) is dict
    with pytest.raises(BadRequest):
        await c.list("/api/v1/pods", {"fieldSelector": "spec.nope=1"})


# ---------------------------------------------------------------------------- configuration


def _write_kubeconfig(path: Path, server: str, user: dict[str, Any], cluster_extra: dict[str, Any] | None = None) -> str:
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
           "clusters": [{"name": "c", "cluster": {"server": server, **(cluster_extra or {})}}],
           "users": [{"name": "u", "user": user}],
           "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


async def test_kubeconfig_token_is_sent_as_bearer(fake, tmp_path):
    path = _write_kubeconfig(tmp_path / "kc", fake.url, {"token": "s3cret"})
    async with await from_kubeconfig(path, qps=7, burst=3, clock=Clock()) as c:
        await c.get("/version")
        assert (c.bucket.qps, c.bucket.burst) == (7, 3)
    assert fake.requests[0][2]["Authorization"] == "Bearer s3cret"
    assert fake.requests[0][2]["Accept"] == "application/json"


async def test_kubeconfig_of_the_simulated_cluster_works(tmp_path):
    async with SimCluster(nodes=1, agent=None, kubeconfig=tmp_path / "kc") as cluster:
        async with await from_kubeconfig(str(tmp_path / "kc"), clock=Clock()) as c:
            assert c.host == cluster.url
            assert (await c.get("/api/v1/nodes/node-0"))["metadata"]["name"] == "node-0"


async def test_no_path_and_not_in_cluster_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    with pytest.raises(ConfigError, match="not running inside a cluster"):
        await from_kubeconfig(None, clock=Clock())


async def test_no_path_uses_kubeconfig_env(fake, tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", _write_kubeconfig(tmp_path / "kc", fake.url, {"token": "t"}))
    async with await from_kubeconfig(None, clock=Clock()) as c:
        assert c.host == fake.url


async def test_in_cluster_config_reads_the_service_account(tmp_path, monkeypatch):
    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("sa-token")
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    from kubernetes_asyncio.config import incluster_config
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    cfg = await apiclient.load_configuration(None)
    assert cfg.host == "https://10.0.0.1:443"
    assert await cfg.get_api_key_with_prefix("BearerToken") == "Bearer sa-token"


async def test_missing_kubeconfig_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        await from_kubeconfig(str(tmp_path / "nope"), clock=Clock())


async def test_broken_kubeconfig_is_a_clear_error(tmp_path):
    p = tmp_path / "kc"
    p.write_text("apiVersion: v1\nkind: Config\ncurrent-context: nope\n")
    with pytest.raises(ConfigError, match=str(p)):
        await from_kubeconfig(str(p), clock=Clock())


# ---------------------------------------------------------------------------- TLS


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def pki(tmp_path):
    """A CA, a server certificate for 127.0.0.1 and a client certificate, made with the openssl CLI."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl CLI is not installed; it makes the test certificates")
    d = tmp_path
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test-ca",
             "-keyout", "ca.key", "-out", "ca.crt", cwd=d)
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    for name, cn in (("server", "127.0.0.1"), ("client", "tandem-scheduler")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}", "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", cwd=d)
        extra = ["-extfile", "san.ext"] if name == "server" else []
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", "1", "-out", f"{name}.crt", *extra, cwd=d)
    return d


@pytest.fixture
async def tls_server(pki):
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(pki / "server.crt", pki / "server.key")
    ctx.load_verify_locations(pki / "ca.crt")
    ctx.verify_mode = ssl.CERT_OPTIONAL  # a client certificate is checked when sent
    seen: list[Any] = []

    async def handle(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert")  # type: ignore[union-attr]
        seen.append((peer, request.headers.get("Authorization")))
        return ok({"kind": "Status", "status": "Success"})
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner, port = await _serve(app, ctx)
    yield f"https://127.0.0.1:{port}", pki, seen
    await runner.cleanup()


async def test_https_with_ca_and_client_certificate(tls_server, tmp_path):
    url, pki, seen = tls_server
    path = _write_kubeconfig(tmp_path / "kc", url,
                             {"client-certificate": str(pki / "client.crt"), "client-key": str(pki / "client.key")},
                             {"certificate-authority": str(pki / "ca.crt")})
    async with await from_kubeconfig(path, clock=Clock()) as c:
        assert (await c.get("/version"))["status"] == "Success"
    peer, auth = seen[0]
    assert dict(x[0] for x in peer["subject"])["commonName"] == "tandem-scheduler"
    assert auth is None


async def test_https_with_token_and_ca(tls_server, tmp_path):
    url, pki, seen = tls_server
    path = _write_kubeconfig(tmp_path / "kc", url, {"token": "tls-token"},
                             {"certificate-authority": str(pki / "ca.crt")})
    async with await from_kubeconfig(path, clock=Clock()) as c:
        await c.get("/version")
    assert seen[0] == (None, "Bearer tls-token")


async def test_https_with_an_unknown_ca_is_unreachable(tls_server, tmp_path):
    url, _, _ = tls_server
    path = _write_kubeconfig(tmp_path / "kc", url, {"token": "t"})
    async with await from_kubeconfig(path, retry=apiclient.NO_RETRY, clock=Clock()) as c:
        with pytest.raises(Unreachable, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            await c.get("/version")


async def test_https_insecure_skip_tls_verify(tls_server, tmp_path):
    url, _, seen = tls_server
    path = _write_kubeconfig(tmp_path / "kc", url, {"token": "t"}, {"insecure-skip-tls-verify": True})
    async with await from_kubeconfig(path, clock=Clock()) as c:
        await c.get("/version")
    assert len(seen) == 1


async def test_a_configured_proxy_sends_everything_through_aiohttp_which_honours_it():
    cfg = k8s_client.Configuration(host="https://10.0.0.1:6443")
    cfg.proxy = "http://proxy.internal:3128"
    c = APIClient(cfg, clock=FakeClock())
    assert c.transport is None and c._request_kw["proxy"] == "http://proxy.internal:3128"
    await c.close()
    direct = make_client("https://10.0.0.1:6443/k8s/clusters/c-1")
    assert (direct.transport.host, direct.transport.port, direct.transport.base_path) == (
        "10.0.0.1", 6443, "/k8s/clusters/c-1")
    await direct.close()


@pytest.mark.parametrize("host, word", [("https://10.0.0.1:port", "port"), ("https://:6443", "no host")])
async def test_an_api_server_address_that_cannot_be_dialled_is_a_config_error(host, word):
    with pytest.raises(apiclient.ConfigError, match=word):
        APIClient(k8s_client.Configuration(host=host), clock=FakeClock())


async def test_the_token_sent_follows_the_configuration_when_it_changes(fake, client):
    # the headers are built once per content type and token: a new token is sent from the next request on
    client.config.api_key["BearerToken"] = "Bearer one"
    fake.answer(ok({"kind": "Pod"}), ok({"kind": "Pod"}), ok({"kind": "Pod"}))
    await client.get("/api/v1/namespaces/a/pods/p")
    await client.get("/api/v1/namespaces/a/pods/p")
    client.config.api_key["BearerToken"] = "Bearer two"
    await client.get("/api/v1/namespaces/a/pods/p")
    assert [h.get("Authorization") for _, _, h in fake.requests] == ["Bearer one", "Bearer one", "Bearer two"]
