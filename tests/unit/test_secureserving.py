"""scheduler/secureserving.py: HTTPS on the health and metrics port, delegated authentication and authorization.

The reviews go to a fake API client (the httpx ``MockTransport`` habit):
it knows some tokens and some grants, counts every review, and can fail.
Caches run on a ``FakeClock``, so a TTL passes when the test says so. The
server is the real one (:func:`scheduler.observe.serve_health` over TLS),
and the client a real TLS client.
"""

from __future__ import annotations

import asyncio
import datetime
import ssl
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from scheduler.framework.clock import FakeClock
from scheduler.observe import Metrics, serve_health
from scheduler.secureserving import (
    SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS, ServingOptions, TTLCache, bearer_token, generate_self_signed,
    path_allowed, secure_serving, server_ssl_context,
)
from tests.support.waiting import eventually, settle

PROMETHEUS = {"username": "system:serviceaccount:monitoring:prometheus", "uid": "u-1",
              "groups": ["system:serviceaccounts", "system:authenticated"]}
STRANGER = {"username": "stranger", "groups": ["system:authenticated"]}
ADMIN = {"username": "admin", "groups": ["system:masters", "system:authenticated"]}
TOKENS = {"prom-token": PROMETHEUS, "stranger-token": STRANGER, "admin-token": ADMIN}
GRANTS = {(PROMETHEUS["username"], "get", "/metrics")}


class FakeReviews:
    """The API client's ``create`` for the two reviews: known tokens, known grants, every call counted."""

    def __init__(self, tokens: dict[str, dict[str, Any]] = TOKENS,
                 grants: set[tuple[str, str, str]] = GRANTS, reason: str = "") -> None:
        self.tokens = tokens
        self.grants = grants
        self.reason = reason
        self.calls: Counter[str] = Counter()
        self.fail: Exception | None = None
        self.gate: asyncio.Event | None = None     # set: reviews wait for it
        self.bodies: list[dict[str, Any]] = []

    async def create(self, path: str, body: Any) -> dict[str, Any]:
        self.calls[path] += 1
        self.bodies.append(body)
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        spec = body["spec"]
        if path == TOKEN_REVIEWS:
            user = self.tokens.get(spec["token"])
            return {**body, "status": {"authenticated": True, "user": user} if user else {"user": {}}}
        assert path == SUBJECT_ACCESS_REVIEWS, path
        attrs = spec["nonResourceAttributes"]
        allowed = (spec["user"], attrs["verb"], attrs["path"]) in self.grants
        status: dict[str, Any] = {"allowed": allowed}
        if self.reason:
            status["reason"] = self.reason
        return {**body, "status": status}

    @property
    def token_reviews(self) -> int:
        return self.calls[TOKEN_REVIEWS]

    @property
    def access_reviews(self) -> int:
        return self.calls[SUBJECT_ACCESS_REVIEWS]


def metrics() -> Metrics:
    m = Metrics()
    m.observe_attempt("scheduled", "tandem-scheduler", 0.01)
    return m


class Served:
    def __init__(self, url: str, reviews: FakeReviews, clock: FakeClock, serving: Any, port: int) -> None:
        self.url, self.reviews, self.clock, self.serving, self.port = url, reviews, clock, serving, port

    async def get(self, path: str, token: str | None = None, header: str | None = None) -> tuple[int, str, Any]:
        headers = {}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if header is not None:
            headers["Authorization"] = header
        async with aiohttp.ClientSession() as s, s.get(self.url + path, headers=headers, ssl=False) as r:
            return r.status, await r.text(), r.headers


class serving:
    """An async context: the secure health server with a fake reviewer and a fake clock."""

    def __init__(self, opts: ServingOptions = ServingOptions(), reviews: FakeReviews | None = None) -> None:
        self.opts = opts
        self.reviews = reviews if reviews is not None else FakeReviews()
        self.clock = FakeClock()

    async def __aenter__(self) -> Served:
        sec = secure_serving(self.opts, self.reviews, self.clock)
        self._cm = serve_health("127.0.0.1", 0, metrics(), ready=lambda: True, ssl_context=sec.ssl_context,
                                middlewares=sec.middlewares)
        server = await self._cm.__aenter__()
        return Served(server.url, self.reviews, self.clock, sec, server.port)

    async def __aexit__(self, *exc: Any) -> None:
        await self._cm.__aexit__(*exc)


# ---------------------------------------------------------------------------- who may read what


@pytest.mark.parametrize("token, header, status, token_reviews, access_reviews", [
    pytest.param(None, None, 401, 0, 0, id="no credentials are unauthorized without a review"),
    pytest.param(None, "Basic dXNlcjpwYXNz", 401, 0, 0, id="basic auth is not a credential here"),
    pytest.param(None, "Bearer", 401, 0, 0, id="a bearer header without a token is unauthorized"),
    pytest.param("garbage", None, 401, 1, 0, id="a token the API server does not know is unauthorized"),
    pytest.param("stranger-token", None, 403, 1, 1, id="an authenticated user without the grant is forbidden"),
    pytest.param("prom-token", None, 200, 1, 1, id="an authorized token gets the metrics"),
    pytest.param("admin-token", None, 200, 1, 0, id="system:masters is allowed without an access review"),
])
async def test_metrics_need_an_authenticated_authorized_client(token, header, status, token_reviews,
                                                               access_reviews) -> None:
    async with serving() as srv:
        got, text, headers = await srv.get("/metrics", token, header)
        assert got == status, text
        assert (srv.reviews.token_reviews, srv.reviews.access_reviews) == (token_reviews, access_reviews)
        if status == 200:
            assert "scheduler_schedule_attempts_total" in text
            assert headers["Content-Type"].startswith("text/plain")
        else:
            assert "scheduler_" not in text


async def test_unauthorized_and_forbidden_answer_upstreams_status_bodies() -> None:
    async with serving() as srv:
        status, text, headers = await srv.get("/metrics")
        assert (status, headers["Content-Type"]) == (401, "application/json")
        assert orjson.loads(text) == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized",
            "reason": "Unauthorized", "code": 401}
        status, text, _ = await srv.get("/metrics", "stranger-token")
        assert orjson.loads(text) == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": 'forbidden: User "stranger" cannot get path "/metrics"', "reason": "Forbidden",
            "details": {}, "code": 403}


async def test_the_access_reviews_reason_is_added_to_the_forbidden_message() -> None:
    async with serving(reviews=FakeReviews(reason="no RBAC policy matched")) as srv:
        status, text, _ = await srv.get("/metrics", "stranger-token")
        assert status == 403
        assert orjson.loads(text)["message"] == \
            'forbidden: User "stranger" cannot get path "/metrics": no RBAC policy matched'


async def test_the_access_review_asks_for_the_users_get_on_the_path() -> None:
    async with serving() as srv:
        await srv.get("/metrics", "prom-token")
        (sar,) = [b for b in srv.reviews.bodies if b["kind"] == "SubjectAccessReview"]
        assert sar == {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
            "user": PROMETHEUS["username"], "uid": "u-1", "groups": PROMETHEUS["groups"],
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}}


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz"])
@pytest.mark.parametrize("token", [None, "garbage"], ids=["without credentials", "with a garbage token"])
async def test_health_paths_are_open_and_ask_the_api_server_nothing(path, token) -> None:
    async with serving() as srv:
        status, text, _ = await srv.get(path, token)
        assert (status, text) == (200, "ok")
        assert srv.reviews.calls == Counter()


async def test_an_unknown_path_is_guarded_like_metrics() -> None:
    async with serving() as srv:
        assert (await srv.get("/debug/pprof"))[0] == 401
        assert (await srv.get("/debug/pprof", "prom-token"))[0] == 403     # prometheus may get /metrics only


async def test_a_failed_token_review_is_unauthorized_and_not_cached() -> None:
    async with serving() as srv:
        srv.reviews.fail = ConnectionError("API server unreachable")
        assert (await srv.get("/metrics", "prom-token"))[0] == 401
        srv.reviews.fail = None
        assert (await srv.get("/metrics", "prom-token"))[0] == 200
        assert srv.reviews.token_reviews == 2


async def test_a_failed_access_review_is_an_internal_error() -> None:
    reviews = FakeReviews()
    async with serving(ServingOptions(token_ttl=600), reviews) as srv:
        assert (await srv.get("/metrics", "prom-token"))[0] == 200
        srv.clock.advance(11)                   # the access answer expired, the token's has not
        reviews.fail = ConnectionError("refused")
        status, text, _ = await srv.get("/metrics", "prom-token")
        assert (status, text) == (500, 'Internal Server Error: "/metrics": SubjectAccessReview: refused')


# ---------------------------------------------------------------------------- caching


async def test_a_token_review_is_cached_for_its_ttl_on_the_injected_clock() -> None:
    async with serving() as srv:
        for _ in range(3):
            assert (await srv.get("/metrics", "prom-token"))[0] == 200
        assert (srv.reviews.token_reviews, srv.reviews.access_reviews) == (1, 1)
        srv.clock.advance(9.9)
        assert (await srv.get("/metrics", "prom-token"))[0] == 200
        assert srv.reviews.token_reviews == 1
        srv.clock.advance(0.2)                                          # 10.1 s: past the 10 s TTL
        assert (await srv.get("/metrics", "prom-token"))[0] == 200
        assert (srv.reviews.token_reviews, srv.reviews.access_reviews) == (2, 2)


async def test_an_unknown_token_is_cached_too_and_a_grant_is_seen_once_the_refusal_expires() -> None:
    opts = ServingOptions(authorized_ttl=300, unauthorized_ttl=30)
    async with serving(opts) as srv:
        assert (await srv.get("/metrics", "garbage"))[0] == 401
        assert (await srv.get("/metrics", "garbage"))[0] == 401
        assert srv.reviews.token_reviews == 1
        assert (await srv.get("/metrics", "stranger-token"))[0] == 403
        srv.reviews.grants = GRANTS | {("stranger", "get", "/metrics")}    # RBAC changes
        srv.clock.advance(9)
        assert (await srv.get("/metrics", "stranger-token"))[0] == 403     # the refusal is still cached
        srv.clock.advance(22)                                              # 31 s: the refusal expired
        assert (await srv.get("/metrics", "stranger-token"))[0] == 200
        srv.reviews.grants = GRANTS                                        # and revoked again
        srv.clock.advance(200)
        assert (await srv.get("/metrics", "stranger-token"))[0] == 200     # the allow is kept for 300 s
        srv.clock.advance(101)
        assert (await srv.get("/metrics", "stranger-token"))[0] == 403


async def test_concurrent_requests_with_one_token_share_one_review() -> None:
    reviews = FakeReviews()
    reviews.gate = asyncio.Event()
    async with serving(reviews=reviews) as srv:
        tasks = [asyncio.create_task(srv.get("/metrics", "prom-token")) for _ in range(5)]
        await eventually(lambda: reviews.token_reviews, "the first token review")
        reviews.gate.set()
        assert [s for s, _, _ in await asyncio.gather(*tasks)] == [200] * 5
        assert (reviews.token_reviews, reviews.access_reviews) == (1, 1)


async def test_the_cache_keeps_a_bounded_number_of_answers_dropping_expired_then_oldest() -> None:
    clock = FakeClock()
    cache = TTLCache(clock, size=3)

    async def answer(v: str, ttl: float) -> tuple[str, float]:
        return v, ttl

    await cache.get("short", lambda: answer("s", 1))
    for k in ("a", "b", "c"):
        await cache.get(k, lambda k=k: answer(k, 100))
    assert len(cache) == 3
    clock.advance(2)
    await cache.get("d", lambda: answer("d", 100))
    assert len(cache) == 3
    assert await cache.get("a", lambda: answer("fresh", 100)) == "fresh"      # the oldest was dropped
    assert await cache.get("d", lambda: answer("never", 100)) == "d"


async def test_a_shared_review_outlives_a_requester_that_went_away_and_close_cancels_what_is_under_way() -> None:
    cache = TTLCache(FakeClock())
    gate = asyncio.Event()
    calls = 0

    async def fetch() -> tuple[str, float]:
        nonlocal calls
        calls += 1
        await gate.wait()
        return "yes", 10

    first = asyncio.create_task(cache.get("k", fetch))
    await settle()
    first.cancel()                                   # a scrape that timed out
    second = asyncio.create_task(cache.get("k", fetch))
    await settle()
    gate.set()
    assert await second == "yes" and calls == 1 and first.cancelled()
    stuck = asyncio.create_task(cache.get("other", asyncio.Event().wait))   # never answers
    await settle()
    await cache.close()
    with pytest.raises(asyncio.CancelledError):
        await stuck


# ---------------------------------------------------------------------------- certificates


async def peer_certificates(port: int, ca: bytes | None = None) -> x509.Certificate:
    """The certificate the server presents; verified against ``ca`` for the name localhost when given."""
    if ca is None:
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    else:
        ctx = ssl.create_default_context(cadata=ca.decode())
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    return x509.load_der_x509_certificate(der)


def common_name(name: x509.Name) -> str:
    return name.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value


async def test_a_certificate_for_localhost_is_generated_when_none_is_given() -> None:
    async with serving() as srv:
        assert srv.url.startswith("https://")
        pair = srv.serving.generated
        cert = await peer_certificates(srv.port, pair.ca_pem)       # verifies: chain to its CA, name localhost
        assert common_name(cert.subject).startswith("localhost@")
        assert common_name(cert.issuer).startswith("localhost-ca@")
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert sans.get_values_for_type(x509.DNSName) == ["localhost"]
        assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
        ca = x509.load_pem_x509_certificate(pair.ca_pem)
        assert ca.subject == ca.issuer == cert.issuer                  # the CA signed itself, and the certificate
        assert cert.not_valid_after_utc - cert.not_valid_before_utc == datetime.timedelta(days=365)


async def test_a_plain_http_client_cannot_read_the_secure_port() -> None:
    async with serving() as srv:
        async with aiohttp.ClientSession() as s:
            with pytest.raises(aiohttp.ClientError):
                async with s.get(f"http://127.0.0.1:{srv.port}/healthz") as r:
                    await r.read()


async def test_the_given_certificate_and_key_are_served(tmp_path: Path) -> None:
    pair = generate_self_signed("tandem.example.com", ips=())
    (tmp_path / "tls.crt").write_bytes(pair.cert_pem)
    (tmp_path / "tls.key").write_bytes(pair.key_pem)
    opts = ServingOptions(cert_file=str(tmp_path / "tls.crt"), key_file=str(tmp_path / "tls.key"))
    async with serving(opts) as srv:
        assert srv.serving.generated is None
        cert = await peer_certificates(srv.port)
        assert cert == x509.load_pem_x509_certificate(pair.cert_pem)
        assert common_name(cert.subject).startswith("tandem.example.com@")


def test_a_cert_dir_keeps_the_generated_pair_and_reuses_it(tmp_path: Path) -> None:
    _, first = server_ssl_context(ServingOptions(cert_dir=str(tmp_path / "certs")))
    crt, key = tmp_path / "certs" / "tandem-scheduler.crt", tmp_path / "certs" / "tandem-scheduler.key"
    assert first is not None and crt.read_bytes() == first.cert_pem
    assert key.stat().st_mode & 0o777 == 0o600
    _, second = server_ssl_context(ServingOptions(cert_dir=str(tmp_path / "certs")))
    assert second is None and crt.read_bytes() == first.cert_pem


def test_a_certificate_without_its_key_is_refused() -> None:
    with pytest.raises(ValueError, match="must be given together"):
        ServingOptions(cert_file="tls.crt")


async def test_insecure_serving_is_plain_http_with_nothing_checked() -> None:
    async with serving(ServingOptions(insecure=True)) as srv:
        assert srv.url.startswith("http://")
        async with aiohttp.ClientSession() as s, s.get(f"{srv.url}/metrics") as r:
            assert r.status == 200 and "scheduler_schedule_attempts_total" in await r.text()
        assert srv.reviews.calls == Counter()


# ---------------------------------------------------------------------------- parsing


@pytest.mark.parametrize("header, token", [
    pytest.param("Bearer abc", "abc", id="a bearer token"),
    pytest.param("bearer abc", "abc", id="the scheme is case-insensitive"),
    pytest.param("Bearer", "", id="no token"),
    pytest.param("Basic abc", "", id="another scheme"),
    pytest.param("", "", id="no header"),
])
def test_bearer_token(header, token) -> None:
    assert bearer_token(header) == token


@pytest.mark.parametrize("path, allowed", [
    pytest.param("/healthz", True, id="an exact path"),
    pytest.param("/healthz/ping", False, id="not below an exact path"),
    pytest.param("/debug/pprof", True, id="a prefix ending in a star"),
    pytest.param("/metrics", False, id="anything else"),
])
def test_always_allowed_paths(path, allowed) -> None:
    assert path_allowed(path, ("/healthz", "debug/*")) is allowed


# ---------------------------------------------------------------------------- the command line


@pytest.mark.parametrize("argv, expected", [
    pytest.param([], ServingOptions(), id="HTTPS with a generated certificate and upstream's TTLs by default"),
    pytest.param(["--insecure-serving"], ServingOptions(insecure=True), id="plain HTTP when asked"),
    pytest.param(["--tls-cert-file", "c", "--tls-private-key-file", "k", "--cert-dir", "d"],
                 ServingOptions(cert_file="c", key_file="k", cert_dir="d"), id="the certificate flags"),
    pytest.param(["--authentication-token-webhook-cache-ttl", "1m",
                  "--authorization-webhook-cache-authorized-ttl", "5m0s",
                  "--authorization-webhook-cache-unauthorized-ttl", "30s"],
                 ServingOptions(token_ttl=60, authorized_ttl=300, unauthorized_ttl=30),
                 id="cache TTLs as Go durations"),
    pytest.param(["--authorization-always-allow-paths", "/healthz,/debug/*"],
                 ServingOptions(always_allow_paths=("/healthz", "/debug/*")), id="the always allowed paths"),
])
def test_the_flags_describe_the_serving_options(argv, expected) -> None:
    from scheduler.__main__ import parser, serving_options

    assert serving_options(parser().parse_args(argv)) == expected


@pytest.mark.parametrize("argv, words", [
    pytest.param(["--tls-cert-file", "c"], "must be given together", id="a certificate without its key"),
    pytest.param(["--authorization-webhook-cache-authorized-ttl", "soon"], "invalid duration",
                 id="a TTL that is not a duration"),
])
def test_contradicting_or_malformed_serving_flags_are_usage_errors(capsys, argv, words) -> None:
    from scheduler.__main__ import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert words in capsys.readouterr().err
