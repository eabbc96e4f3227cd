"""The health and metrics port served as kube-scheduler serves ``--secure-port``.

kube-scheduler listens on 10259 with HTTPS and lets the API server decide
who may read it (k8s.io/apiserver's delegating authentication and
authorization). tandem does the same on the same port, so that Prometheus
setups made for control-plane components scrape it unchanged:

* **TLS.** ``--tls-cert-file`` / ``--tls-private-key-file`` when given (read
  at start). Otherwise a certificate is generated at start, as upstream's
  ``MaybeDefaultWithSelfSignedCerts("localhost", 127.0.0.1)``: a CA made
  for the occasion signs a serving certificate for ``localhost`` and
  ``127.0.0.1``, valid for a year, served with its CA. It is kept in memory
  unless ``--cert-dir`` names a folder, where ``tandem-scheduler.crt`` /
  ``.key`` are reused when present and written when not.
* **Authentication** (``/metrics`` and any path not always allowed): a
  bearer token is sent to the API server in a TokenReview
  (``authentication.k8s.io/v1``); the answer is cached for
  ``--authentication-token-webhook-cache-ttl`` (10 s, upstream's default),
  keyed by a hash of the token. No usable credentials, a token the server
  does not know, or a review that failed: 401, upstream's Status body.
  Unlike kube-scheduler, a request with no credentials is not let through
  as ``system:anonymous`` (which RBAC then almost always refuses with 403):
  it is refused at once with 401.
* **Authorization**: ``get`` (the request's verb) on the request's path, as
  a non-resource URL, in a SubjectAccessReview (``authorization.k8s.io/v1``);
  allowed answers are cached for ``--authorization-webhook-cache-authorized-ttl``
  and refusals for ``--authorization-webhook-cache-unauthorized-ttl`` (10 s
  each, upstream's ``NewDelegatingAuthorizationOptions`` defaults). Members
  of ``system:masters`` are allowed without a review, as upstream. Refused:
  403 with upstream's message (``forbidden: User "u" cannot get path
  "/metrics"``); a review that failed: 500.
* ``/healthz``, ``/livez``, ``/readyz`` (``--authorization-always-allow-paths``)
  need no credentials and cost no review, so probes never depend on the
  API server. (Upstream still authenticates a token sent to them.)
* ``--insecure-serving`` serves plain HTTP with nothing checked: for local
  runs, the demo and the benchmark, never for a cluster.

Client certificates (upstream's ``--client-ca-file``) and front-proxy headers
are not accepted; a scraper authenticates with a bearer token.

Caches read and expire on the process's one clock (``Clock``), so tests
drive them with a ``FakeClock``. Concurrent requests with the same token or
the same access question share one review in flight. This module never
imports anything of the scheduler's state; it only guards the server that
:func:`scheduler.observe.serve_health` runs.
"""

from __future__ import annotations

import asyncio
import collections
import datetime
import hashlib
import ipaddress
import logging
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Hashable, Protocol

import orjson
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from scheduler.framework.clock import Clock

log = logging.getLogger("tandem.secureserving")

PAIR_NAME = "tandem-scheduler"          # <cert-dir>/tandem-scheduler.crt and .key (kube-scheduler: kube-scheduler)
SELF_SIGNED_HOST = "localhost"
SELF_SIGNED_IPS = ("127.0.0.1",)
CERT_VALIDITY = datetime.timedelta(days=365)
CLOCK_SKEW = datetime.timedelta(hours=1)   # valid from an hour ago, as upstream, for peers whose clock is behind

TOKEN_CACHE_TTL = 10.0                  # --authentication-token-webhook-cache-ttl
AUTHORIZED_TTL = 10.0                   # --authorization-webhook-cache-authorized-ttl
UNAUTHORIZED_TTL = 10.0                 # --authorization-webhook-cache-unauthorized-ttl
ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
ALWAYS_ALLOW_GROUPS = ("system:masters",)
CACHE_SIZE = 4096                       # entries per cache; expired ones go first
REVIEW_QPS, REVIEW_BURST = 200, 400     # the reviews' own client, as upstream's delegating options set it

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


@dataclass(frozen=True, slots=True)
class ServingOptions:
    """How the health and metrics port is served (the CLI's secure serving, authn and authz flags)."""

    insecure: bool = False              # plain HTTP, nothing checked
    cert_file: str | None = None
    key_file: str | None = None
    cert_dir: str | None = None         # where a generated pair is kept (None: in memory)
    token_ttl: float = TOKEN_CACHE_TTL
    authorized_ttl: float = AUTHORIZED_TTL
    unauthorized_ttl: float = UNAUTHORIZED_TTL
    always_allow_paths: tuple[str, ...] = ALWAYS_ALLOW_PATHS
    always_allow_groups: tuple[str, ...] = ALWAYS_ALLOW_GROUPS

    def __post_init__(self) -> None:
        if bool(self.cert_file) != bool(self.key_file):
            raise ValueError("--tls-cert-file and --tls-private-key-file must be given together")
        for name in ("token_ttl", "authorized_ttl", "unauthorized_ttl"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")


# ---------------------------------------------------------------------------- certificates


@dataclass(frozen=True, slots=True)
class CertKey:
    cert_pem: bytes          # the serving certificate, then the CA that signed it (the chain served)
    key_pem: bytes
    ca_pem: bytes = b""      # the signing CA alone (empty for a pair read from files)


def generate_self_signed(host: str = SELF_SIGNED_HOST, ips: tuple[str, ...] = SELF_SIGNED_IPS,
                         dns: tuple[str, ...] = ()) -> CertKey:
    """client-go's ``GenerateSelfSignedCertKey``: a CA ``host-ca@<unix>`` signing a server certificate ``host@<unix>``.

    The certificate names ``host`` (as an IP or a DNS name), ``ips`` and
    ``dns``; both are valid from an hour ago for a year. Validity is read
    from the machine's clock on purpose: peers judge it against theirs.
    """
    now = datetime.datetime.now(datetime.timezone.utc)
    stamp = int(now.timestamp())
    start, end = now - CLOCK_SKEW, now - CLOCK_SKEW + CERT_VALIDITY
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}-ca@{stamp}")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(1).not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=True,
                                       content_commitment=False, data_encipherment=False, key_agreement=False,
                                       crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    names: list[x509.GeneralName] = []
    for name in (host, *ips, *dns):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            names.append(x509.DNSName(name))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}@{stamp}")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(2)
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=False,
                                         content_commitment=False, data_encipherment=False, key_agreement=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption())
    return CertKey(cert.public_bytes(serialization.Encoding.PEM) + ca_pem, key_pem, ca_pem)


def server_ssl_context(opts: ServingOptions) -> tuple[ssl.SSLContext, CertKey | None]:
    """The TLS context for the secure port, and the pair generated for it (None when read from files).

    TLS 1.2 at least, as upstream's default ``--tls-min-version``. Raises
    OSError / ssl.SSLError for files that cannot be read or do not match.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if opts.cert_file and opts.key_file:
        ctx.load_cert_chain(opts.cert_file, opts.key_file)
        return ctx, None
    if opts.cert_dir:
        crt, key = Path(opts.cert_dir) / f"{PAIR_NAME}.crt", Path(opts.cert_dir) / f"{PAIR_NAME}.key"
        if crt.is_file() and key.is_file():
            ctx.load_cert_chain(crt, key)
            return ctx, None
        pair = generate_self_signed()
        crt.parent.mkdir(parents=True, exist_ok=True)
        _write(crt, pair.cert_pem, 0o644)
        _write(key, pair.key_pem, 0o600)
        log.info("generated a self-signed certificate for %s into %s", SELF_SIGNED_HOST, crt)
        ctx.load_cert_chain(crt, key)
        return ctx, pair
    pair = generate_self_signed()
    # ssl loads a chain only from files: the pair touches a private folder for the time of the load
    with tempfile.TemporaryDirectory(prefix="tandem-cert-") as tmp:
        crt, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        _write(crt, pair.cert_pem, 0o600)
        _write(key, pair.key_pem, 0o600)
        ctx.load_cert_chain(crt, key)
    log.info("serving with a self-signed certificate for %s generated in memory", SELF_SIGNED_HOST)
    return ctx, pair


def _write(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


# ---------------------------------------------------------------------------- reviews


class Reviews(Protocol):
    """What the reviews need of an API client: ``APIClient.create``."""

    async def create(self, path: str, body: Any) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class UserInfo:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def from_status(cls, user: dict[str, Any]) -> "UserInfo":
        extra = user.get("extra") or {}
        return cls(str(user.get("username") or ""), str(user.get("uid") or ""),
                   tuple(str(g) for g in user.get("groups") or ()),
                   tuple(sorted((str(k), tuple(str(v) for v in vs or ())) for k, vs in extra.items())))


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""


class ReviewError(Exception):
    """The API server could not answer a review (unreachable, throttled past retries, refused the reviewer)."""


class TTLCache:
    """Answers by key, each kept for the time its producer said, on ``clock``; one fetch per key in flight.

    ``get(key, fetch)`` returns the cached answer while it is fresh;
    otherwise it awaits ``fetch()``, which returns ``(answer, ttl)``.
    Concurrent misses of one key share that fetch (upstream's singleflight);
    it runs in a task of its own, so a requester that goes away (a scrape
    that timed out) does not cancel it for the others. A fetch that raises
    caches nothing and raises to every waiter. :meth:`close` cancels the
    fetches under way.
    """

    def __init__(self, clock: Clock, size: int = CACHE_SIZE) -> None:
        self.clock = clock
        self.size = size
        self._entries: collections.OrderedDict[Hashable, tuple[float, Any]] = collections.OrderedDict()
        self._inflight: dict[Hashable, asyncio.Task[Any]] = {}

    async def get(self, key: Hashable, fetch: Callable[[], Awaitable[tuple[Any, float]]]) -> Any:
        hit = self._entries.get(key)
        if hit is not None:
            if self.clock() < hit[0]:
                return hit[1]
            del self._entries[key]
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._fill(key, fetch), name="secureserving-review")
            # its failure is raised to the requesters; this only keeps asyncio from calling it unretrieved
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
            self._inflight[key] = task
        return await asyncio.shield(task)

    async def _fill(self, key: Hashable, fetch: Callable[[], Awaitable[tuple[Any, float]]]) -> Any:
        try:
            answer, ttl = await fetch()
            if ttl > 0:
                self._put(key, answer, ttl)
            return answer
        finally:
            del self._inflight[key]

    async def close(self) -> None:
        tasks = list(self._inflight.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _put(self, key: Hashable, answer: Any, ttl: float) -> None:
        now = self.clock()
        self._entries[key] = (now + ttl, answer)
        self._entries.move_to_end(key)
        if len(self._entries) > self.size:
            for k in [k for k, (expires, _) in self._entries.items() if expires <= now]:
                del self._entries[k]
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class TokenReviewer:
    """Bearer token -> user, by TokenReview (upstream's webhook token authenticator, cached)."""

    def __init__(self, client: Reviews, clock: Clock, ttl: float = TOKEN_CACHE_TTL) -> None:
        self.client = client
        self.ttl = ttl
        self.cache = TTLCache(clock)
        self.reviews = 0          # TokenReviews sent

    async def authenticate(self, token: str) -> UserInfo | None:
        """The user the token belongs to, or None; :class:`ReviewError` when the API server cannot say."""
        # the cache holds a digest, never the token itself
        key = hashlib.sha256(token.encode()).digest()
        return await self.cache.get(key, lambda: self._review(token))

    async def _review(self, token: str) -> tuple[UserInfo | None, float]:
        self.reviews += 1
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        try:
            answer = await self.client.create(TOKEN_REVIEWS, body)
        except Exception as exc:  # noqa: BLE001 - any failure to review is "cannot authenticate"
            raise ReviewError(f"TokenReview: {exc}") from exc
        status = (answer or {}).get("status") or {}
        if not status.get("authenticated"):
            return None, self.ttl
        return UserInfo.from_status(status.get("user") or {}), self.ttl


class AccessReviewer:
    """(user, verb, path) -> allowed, by SubjectAccessReview (upstream's webhook authorizer, cached)."""

    def __init__(self, client: Reviews, clock: Clock, allowed_ttl: float = AUTHORIZED_TTL,
                 denied_ttl: float = UNAUTHORIZED_TTL) -> None:
        self.client = client
        self.allowed_ttl = allowed_ttl
        self.denied_ttl = denied_ttl
        self.cache = TTLCache(clock)
        self.reviews = 0          # SubjectAccessReviews sent

    async def authorize(self, user: UserInfo, verb: str, path: str) -> Decision:
        spec: dict[str, Any] = {"user": user.name, "nonResourceAttributes": {"path": path, "verb": verb}}
        if user.uid:
            spec["uid"] = user.uid
        if user.groups:
            spec["groups"] = list(user.groups)
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        # the key is the whole question, as upstream keys its cache by the serialized review spec
        key = orjson.dumps(spec, option=orjson.OPT_SORT_KEYS)
        return await self.cache.get(key, lambda: self._review(spec))

    async def _review(self, spec: dict[str, Any]) -> tuple[Decision, float]:
        self.reviews += 1
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        try:
            answer = await self.client.create(SUBJECT_ACCESS_REVIEWS, body)
        except Exception as exc:  # noqa: BLE001
            raise ReviewError(f"SubjectAccessReview: {exc}") from exc
        status = (answer or {}).get("status") or {}
        # "denied" without "allowed" is a refusal like no opinion: both end in 403 here
        decision = Decision(status.get("allowed") is True, str(status.get("reason") or ""))
        return decision, self.allowed_ttl if decision.allowed else self.denied_ttl


# ---------------------------------------------------------------------------- the guard

_JSON = "application/json"


def _status(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> web.Response:
    """A meta/v1 Status response, as apiserver's responsewriters write one."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": message, "reason": reason}
    if details is not None:
        body["details"] = details
    body["code"] = code
    return web.Response(status=code, body=orjson.dumps(body), content_type=_JSON,
                        headers={"X-Content-Type-Options": "nosniff"})


def unauthorized() -> web.Response:
    return _status(401, "Unauthorized", "Unauthorized")


def forbidden(user: str, verb: str, path: str, reason: str = "") -> web.Response:
    """responsewriters.Forbidden for a non-resource request: ``forbidden: User "u" cannot get path "/metrics"``."""
    message = f"User {_quote(user)} cannot {verb} path {_quote(path)}"
    if reason:
        message = f"{message}: {reason}"
    return _status(403, "Forbidden", f"forbidden: {message}", {})


def _quote(s: str) -> str:
    """Go's %q for the plain strings that appear here."""
    return orjson.dumps(s).decode()


def bearer_token(header: str) -> str:
    """The token of an ``Authorization: Bearer <token>`` header, else "" (upstream's bearertoken authenticator)."""
    parts = header.strip().split(" ")
    if len(parts) < 2 or parts[0].lower() != "bearer":
        return ""
    return parts[1]


def path_allowed(path: str, allowed: tuple[str, ...]) -> bool:
    """Upstream's path authorizer: an exact path, or a prefix ending in ``*``; the leading / is optional."""
    for p in allowed:
        p = p if p.startswith("/") else "/" + p
        if p.endswith("*") and path.startswith(p[:-1]):
            return True
        if path == p:
            return True
    return False


@dataclass
class Guard:
    """Authentication then authorization for every request to the secure port, as an aiohttp middleware."""

    authenticator: TokenReviewer
    authorizer: AccessReviewer
    always_allow_paths: tuple[str, ...] = ALWAYS_ALLOW_PATHS
    always_allow_groups: tuple[str, ...] = ALWAYS_ALLOW_GROUPS
    refused: collections.Counter[int] = field(default_factory=collections.Counter)   # by status code

    async def close(self) -> None:
        """Cancel the reviews under way (at shutdown, after the server stopped)."""
        await self.authenticator.cache.close()
        await self.authorizer.cache.close()

    @web.middleware
    async def middleware(self, request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        path = request.path
        if path_allowed(path, self.always_allow_paths):
            return await handler(request)
        token = bearer_token(request.headers.get("Authorization", ""))
        if not token:
            return self._refuse(unauthorized())
        try:
            user = await self.authenticator.authenticate(token)
        except ReviewError as exc:
            log.warning("cannot authenticate a request to %s: %s", path, exc)
            return self._refuse(unauthorized())
        if user is None:
            return self._refuse(unauthorized())
        if any(g in self.always_allow_groups for g in user.groups):
            return await handler(request)
        verb = request.method.lower()
        try:
            decision = await self.authorizer.authorize(user, verb, path)
        except ReviewError as exc:
            log.warning("cannot authorize %s to %s %s: %s", user.name, verb, path, exc)
            return self._refuse(web.Response(status=500, text=f"Internal Server Error: {_quote(path)}: {exc}",
                                             headers={"X-Content-Type-Options": "nosniff"}))
        if not decision.allowed:
            return self._refuse(forbidden(user.name, verb, path, decision.reason))
        return await handler(request)

    def _refuse(self, response: web.Response) -> web.Response:
        self.refused[response.status] += 1
        return response


@dataclass(frozen=True, slots=True)
class SecureServing:
    """What :func:`scheduler.observe.serve_health` needs to serve securely: TLS and the guard (None: open)."""

    ssl_context: ssl.SSLContext | None
    guard: Guard | None
    generated: CertKey | None = None     # the self-signed pair, when one was generated

    @property
    def middlewares(self) -> tuple[Any, ...]:
        return () if self.guard is None else (self.guard.middleware,)

    async def close(self) -> None:
        if self.guard is not None:
            await self.guard.close()


def secure_serving(opts: ServingOptions, client: Reviews | None, clock: Clock) -> SecureServing:
    """TLS and the guard for ``opts``; ``client`` asks the reviews (None only with ``insecure``)."""
    if opts.insecure:
        return SecureServing(None, None)
    if client is None:
        raise ValueError("secure serving needs an API client for TokenReview and SubjectAccessReview")
    ctx, generated = server_ssl_context(opts)
    guard = Guard(TokenReviewer(client, clock, opts.token_ttl),
                  AccessReviewer(client, clock, opts.authorized_ttl, opts.unauthorized_ttl),
                  opts.always_allow_paths, opts.always_allow_groups)
    return SecureServing(ctx, guard, generated)
