"""Start a real kube-apiserver (with its etcd) for tests, the envtest way.

Tests that must hold against the real thing (tests/e2e) run against a
kube-apiserver when one is provided, by controller-runtime's envtest
convention: ``KUBEBUILDER_ASSETS`` names a folder holding the
``kube-apiserver`` and ``etcd`` binaries, as ``setup-envtest use -p path``
prints. Without it, :func:`skip_reason` says why the tests are skipped.

:func:`real_apiserver` starts, in a caller-owned temporary folder:

1. etcd on free loopback client and peer ports;
2. kube-apiserver on a free loopback secure port, with the flags envtest
   uses (``pkg/internal/testing/controlplane/apiserver.go``): it self-signs
   its serving certificate into ``--cert-dir``, whose ``apiserver.crt`` (leaf
   plus signing CA) is then the CA file for clients; a static token file
   gives one user in ``system:masters``; RBAC; a service-account signing key;
   the ServiceAccount admission plugin off, because no controller-manager
   creates the default ServiceAccount;

then waits for ``/readyz``, creates the PodGroup CRD from ``manifests/crds``
and waits until it is Established and served, makes sure namespace
``default`` exists, and writes a kubeconfig that kubernetes-asyncio and
kubectl accept. On request it also serves upstream's alpha gang API
(``native_gangs``) and runs chosen controllers in a kube-controller-manager
(``controllers``; the binary must be in the same folder).

This module must never touch the user's own kubeconfig or ``~/.kube``, and
never leave a process running: both processes are stopped (SIGTERM, then
SIGKILL) when the context exits, whatever happened inside it. Every failure
is an :class:`EnvtestError` whose message carries the end of both logs
(``<tmp>/envtest/logs``), because a bare "timed out" is useless in CI.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import math
import os
import secrets
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

ASSETS_ENV = "KUBEBUILDER_ASSETS"
BINARIES = ("kube-apiserver", "etcd")

REPO_ROOT = Path(__file__).resolve().parents[2]
PODGROUP_CRD = REPO_ROOT / "manifests" / "crds" / "scheduling.x-k8s.io_podgroups.yaml"

ADMIN_USER = "tandem-envtest-admin"
ADMIN_GROUPS = ("system:masters",)
# envtest's default; one /24 is plenty when nothing allocates ClusterIPs.
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"

# Upstream's native gang API (scheduling.k8s.io/v1alpha2 PodGroup and Workload) is alpha: served only
# with this --runtime-config and these gates, as ../shared/realk8s/up.sh starts its server.
NATIVE_GANGS_RUNTIME_CONFIG = "scheduling.k8s.io/v1alpha2=true"
NATIVE_GANGS_GATES = ("GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true,"
                      "WorkloadAwarePreemption=true,WorkloadWithJob=true")
# the controller-manager's gates (its own set: the scheduling ones it knows)
NATIVE_GANGS_CONTROLLER_GATES = "GenericWorkload=true,GangScheduling=true,WorkloadWithJob=true"

START_TIMEOUT = 60.0   # seconds etcd, then kube-apiserver, may take to answer healthy
SETUP_TIMEOUT = 30.0   # seconds for the CRDs to be served and namespace default to exist
STOP_GRACE = 5.0       # seconds between SIGTERM and SIGKILL
LOG_TAIL_LINES = 60

_HOW_TO = ("set it to a folder with kube-apiserver and etcd (setup-envtest use -p path prints one) "
           "to run these tests against a real API server")


class EnvtestError(RuntimeError):
    """The control plane could not be started or set up; the message says why."""


@dataclass(frozen=True, slots=True)
class RealAPIServer:
    base_url: str            # https://127.0.0.1:<port>
    kubeconfig: Path         # token + CA, for kubernetes-asyncio and kubectl
    token: str               # bearer token of a system:masters user
    ca_file: Path | None     # verifies the serving certificate
    controllers: tuple[str, ...] = ()   # what a kube-controller-manager runs against it (none: no KCM)


# --- finding the binaries ----------------------------------------------------

def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def assets_dir() -> Path | None:
    """``KUBEBUILDER_ASSETS`` if it holds both binaries, executable; else None."""
    raw = os.environ.get(ASSETS_ENV, "").strip()
    if not raw:
        return None
    folder = Path(raw).expanduser()
    if all(_executable(folder / b) for b in BINARIES):
        return folder.resolve()
    return None


def _nested_assets(folder: Path) -> Path | None:
    # setup-envtest's store keeps versions in subfolders (k8s/1.31.0-linux-amd64);
    # pointing at the store instead of one version is the common mistake.
    for depth in ("*", "*/*", "*/*/*"):
        for candidate in sorted(folder.glob(f"{depth}/kube-apiserver"), reverse=True):
            if (candidate.parent / "etcd").is_file():
                return candidate.parent
    return None


def skip_reason() -> str | None:
    """None when a real kube-apiserver can be started; else one sentence saying why not."""
    raw = os.environ.get(ASSETS_ENV, "").strip()
    if not raw:
        return f"{ASSETS_ENV} is not set: {_HOW_TO}"
    folder = Path(raw).expanduser()
    if not folder.is_dir():
        return f"{ASSETS_ENV}={raw} is not a folder: {_HOW_TO}"
    missing = [b for b in BINARIES if not (folder / b).is_file()]
    if missing:
        nested = _nested_assets(folder)
        hint = f" (but {nested} has both: point {ASSETS_ENV} there)" if nested else ""
        return f"{ASSETS_ENV}={raw} has no {' and no '.join(missing)}{hint}: {_HOW_TO}"
    not_executable = [b for b in BINARIES if not os.access(folder / b, os.X_OK)]
    if not_executable:
        return (f"{ASSETS_ENV}={raw} has {' and '.join(not_executable)} but "
                f"{'they are' if len(not_executable) > 1 else 'it is'} not executable: chmod +x them")
    if os.name != "posix":
        return "a real kube-apiserver can only be started on Linux or macOS"
    return None


# --- files the control plane needs --------------------------------------------

def _write_private(path: Path, data: bytes) -> None:
    # Tokens and keys: readable by the owner only, like kubeadm writes them.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def write_kubeconfig(path: Path, *, server: str, token: str, ca_file: Path | None = None,
                     name: str = "envtest", namespace: str = "default") -> Path:
    """Write a kubeconfig with one cluster, one token user and one current context.

    ``ca_file`` becomes ``certificate-authority`` (an absolute path, so the
    file works from any working directory); without it the system trust
    store applies. Returns ``path``.
    """
    cluster: dict[str, Any] = {"server": server}
    if ca_file is not None:
        cluster["certificate-authority"] = str(Path(ca_file).resolve())
    user = f"{name}-admin"
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user, "namespace": namespace}}],
        "current-context": name,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_private(path, yaml.safe_dump(doc, sort_keys=False).encode())
    return path


def write_token_file(path: Path, *, token: str, user: str, uid: str,
                     groups: Sequence[str] = ADMIN_GROUPS) -> Path:
    """A ``--token-auth-file``: CSV ``token,user,uid,"group1,group2"``."""
    if any(c in token + user + uid for c in ',"\n'):
        raise ValueError("token, user and uid must not contain commas, quotes or newlines")
    line = f'{token},{user},{uid},"{",".join(groups)}"\n'
    _write_private(Path(path), line.encode())
    return Path(path)


# RSA with the standard library only: no dependency for a test key that signs
# service-account tokens nobody verifies outside this process tree.

_SMALL_PRIMES = [p for p in range(3, 2000, 2) if all(p % q for q in range(3, math.isqrt(p) + 1, 2))]


def _probable_prime(n: int, rounds: int = 24) -> bool:
    for p in _SMALL_PRIMES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for _ in range(rounds):  # Miller-Rabin with random bases
        x = pow(secrets.randbelow(n - 3) + 2, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = pow(x, 2, n)
            if x == n - 1:
                break
        else:
            return False
    return True


def _random_prime(bits: int, e: int) -> int:
    while True:
        # The top two bits set make p*q exactly 2*bits long; the low bit makes it odd.
        candidate = secrets.randbits(bits) | (3 << (bits - 2)) | 1
        if math.gcd(candidate - 1, e) == 1 and _probable_prime(candidate):
            return candidate


def _der(tag: int, body: bytes) -> bytes:
    n = len(body)
    if n < 0x80:
        length = bytes([n])
    else:
        raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(raw)]) + raw
    return bytes([tag]) + length + body


def _der_int(v: int) -> bytes:
    # Non-negative only; bit_length()//8 + 1 bytes gives the leading zero
    # exactly when the top bit would otherwise read as a sign.
    return _der(0x02, v.to_bytes(v.bit_length() // 8 + 1, "big"))


def _der_seq(*items: bytes) -> bytes:
    return _der(0x30, b"".join(items))


def _pem(label: str, der: bytes) -> bytes:
    b64 = base64.b64encode(der).decode()
    lines = [b64[i:i + 64] for i in range(0, len(b64), 64)]
    return (f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n").encode()


_RSA_ENCRYPTION_OID = bytes.fromhex("06092a864886f70d010101")  # 1.2.840.113549.1.1.1
_DER_NULL = b"\x05\x00"


def generate_rsa_key(bits: int = 2048) -> tuple[bytes, bytes]:
    """A new RSA key: (PKCS#1 ``RSA PRIVATE KEY`` PEM, PKIX ``PUBLIC KEY`` PEM)."""
    e = 65537
    while True:
        p = _random_prime(bits // 2, e)
        q = _random_prime(bits // 2, e)
        if p != q:
            break
    if p < q:
        p, q = q, p
    n = p * q
    d = pow(e, -1, math.lcm(p - 1, q - 1))
    private = _der_seq(
        _der_int(0), _der_int(n), _der_int(e), _der_int(d), _der_int(p), _der_int(q),
        _der_int(d % (p - 1)), _der_int(d % (q - 1)), _der_int(pow(q, -1, p)),
    )
    rsa_public = _der_seq(_der_int(n), _der_int(e))
    spki = _der_seq(_der_seq(_RSA_ENCRYPTION_OID, _DER_NULL), _der(0x03, b"\x00" + rsa_public))
    return _pem("RSA PRIVATE KEY", private), _pem("PUBLIC KEY", spki)


# --- command lines --------------------------------------------------------------

def etcd_args(*, data_dir: Path, client_port: int, peer_port: int, no_fsync: bool = False) -> list[str]:
    """A single-member etcd on loopback (envtest's ``etcd.go`` defaults, plus a
    name and initial cluster that agree with the peer port)."""
    client = f"http://127.0.0.1:{client_port}"
    peer = f"http://127.0.0.1:{peer_port}"
    args = [
        "--name=envtest",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=envtest={peer}",
    ]
    if no_fsync:
        # etcd >= 3.5: a throwaway store need not survive a power cut.
        args.append("--unsafe-no-fsync=true")
    return args


def apiserver_args(*, etcd_url: str, secure_port: int, cert_dir: Path, token_file: Path,
                   sa_key: Path, sa_pub: Path, disable_insecure_port: bool = False) -> list[str]:
    """kube-apiserver flags, as envtest's ``APIServer.defaultArgs`` plus token auth."""
    args = [
        f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1",
        f"--secure-port={secure_port}",
        # No --tls-cert-file: the server self-signs apiserver.crt/.key here,
        # valid for the bind address 127.0.0.1.
        f"--cert-dir={cert_dir}",
        f"--token-auth-file={token_file}",
        "--authorization-mode=RBAC",
        # Required since 1.20.
        f"--service-account-issuer=https://127.0.0.1:{secure_port}/",
        f"--service-account-key-file={sa_pub}",
        f"--service-account-signing-key-file={sa_key}",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        # No controller-manager creates the default ServiceAccount, so with
        # this plugin on every pod create would be rejected. Nor does one
        # lift the not-ready taint TaintNodesByCondition puts on new nodes;
        # scheduler_perf's test server turns it off for the same reason.
        "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
        "--allow-privileged=true",
    ]
    if disable_insecure_port:
        # Before 1.20 the insecure port 8080 was on unless set to 0.
        args.append("--insecure-port=0")
    return args


# --- processes ---------------------------------------------------------------------

def _free_ports(count: int) -> list[int]:
    # Hold every socket until all are chosen so the ports differ; the
    # processes bind them a moment later (envtest accepts the same race).
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


async def _help_text(binary: Path) -> str:
    """``binary --help``, for feature discovery as envtest's ``CheckFlag`` does."""
    try:
        proc = await asyncio.create_subprocess_exec(
            str(binary), "--help", stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except OSError as e:
        raise EnvtestError(f"cannot run {binary}: {e}") from e
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 30)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return ""
    return out.decode(errors="replace")


@dataclass(slots=True)
class _Process:
    name: str
    argv: list[str]
    log: Path
    proc: asyncio.subprocess.Process

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    async def stop(self, grace: float | None = None) -> None:
        if self.proc.returncode is not None:
            return
        grace = STOP_GRACE if grace is None else grace
        try:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), grace)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                await self.proc.wait()
        finally:
            self.kill()  # cancelled while waiting: do not leave it running

    def kill(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()

    def tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            with open(self.log, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 64 * 1024))
                text = f.read().decode(errors="replace")
        except OSError as e:
            return f"(cannot read {self.log}: {e})"
        return "\n".join(text.splitlines()[-lines:]) or "(empty)"


async def _spawn(name: str, binary: Path, args: list[str], logs: Path) -> _Process:
    log = logs / f"{name}.log"
    argv = [str(binary), *args]
    with open(log, "wb") as f:
        f.write(("$ " + " ".join(argv) + "\n").encode())
        f.flush()
        try:
            # The child gets its own copy of the descriptor, so ours can close.
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
        except OSError as e:
            raise EnvtestError(f"cannot start {name} ({binary}): {e}") from e
    return _Process(name, argv, log, proc)


def _failure(message: str, procs: Sequence[_Process]) -> EnvtestError:
    parts = [message]
    for p in procs:
        state = "running" if p.returncode is None else f"exit code {p.returncode}"
        parts.append(f"--- {p.name} ({state}), last lines of {p.log} ---\n{p.tail()}")
    return EnvtestError("\n".join(parts))


Check = Callable[[], Awaitable[tuple[bool, str]]]


async def _wait_for(what: str, check: Check, procs: Sequence[_Process], timeout: float,
                    interval: float = 0.25) -> None:
    """Poll ``check`` until it reports ready; fail at once if a process exits."""
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while True:
        for p in procs:
            if p.returncode is not None:
                raise _failure(f"{p.name} exited with code {p.returncode} while waiting for {what}", procs)
        try:
            ok, last = await check()
        except _ANSWER_ERRORS as e:  # not listening yet, reset, TLS not ready: try again
            ok, last = False, f"{type(e).__name__}: {e}"
        if ok:
            return
        if time.monotonic() >= deadline:
            raise _failure(f"timed out after {timeout:.0f}s waiting for {what}; last answer: {last}", procs)
        await asyncio.sleep(interval)


async def _stop_all(procs: list[_Process]) -> None:
    # kube-apiserver first, so it does not spend its shutdown retrying etcd.
    try:
        for p in reversed(procs):
            await p.stop()
    finally:
        for p in procs:  # if a stop was cancelled, the rest still must not outlive us
            p.kill()


# --- talking to the server ------------------------------------------------------

_ANSWER_ERRORS = (aiohttp.ClientError, OSError, ssl.SSLError, TimeoutError)


class _API:
    """Just enough of a REST client for setup: JSON in, (status, JSON or text) out."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str, token: str, ca_file: Path) -> None:
        self.session = session
        self.base_url = base_url
        self.headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        self.ca_file = ca_file
        self._ssl: ssl.SSLContext | None = None

    def ssl_context(self) -> ssl.SSLContext | None:
        # apiserver.crt appears in --cert-dir before the port opens; until
        # then there is nothing to trust and nothing to talk to.
        if self._ssl is None and self.ca_file.is_file() and self.ca_file.stat().st_size > 0:
            self._ssl = ssl.create_default_context(cafile=str(self.ca_file))
        return self._ssl

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        ctx = self.ssl_context()
        if ctx is None:
            raise EnvtestError(f"{self.ca_file} has not been written yet")
        async with self.session.request(method, self.base_url + path, json=body,
                                        headers=self.headers, ssl=ctx) as resp:
            text = await resp.text()
            if resp.content_type == "application/json":
                try:
                    return resp.status, await resp.json(content_type=None)
                except ValueError:
                    pass
            return resp.status, text

    async def readyz(self) -> tuple[bool, str]:
        if self.ssl_context() is None:
            return False, f"{self.ca_file.name} not written yet"
        status, body = await self.call("GET", "/readyz")
        return status == 200, f"HTTP {status}: {str(body).strip()[-2000:]}"


async def _etcd_healthy(session: aiohttp.ClientSession, url: str) -> tuple[bool, str]:
    async with session.get(url + "/health") as resp:
        body = await resp.text()
    healthy = resp.status == 200 and '"health":"true"' in body.replace(" ", "")
    return healthy, f"HTTP {resp.status}: {body.strip()}"


def _condition(obj: Any, kind: str) -> dict[str, Any] | None:
    if not isinstance(obj, dict):
        return None
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c
    return None


async def _install_crds(api: _API, paths: Sequence[Path], procs: Sequence[_Process]) -> None:
    base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    for path in paths:
        try:
            docs = [d for d in yaml.safe_load_all(Path(path).read_text()) if d]
        except (OSError, yaml.YAMLError) as e:
            raise EnvtestError(f"cannot read CRD manifest {path}: {e}") from e
        for crd in docs:
            name = crd["metadata"]["name"]
            status, body = await api.call("POST", base, crd)
            if status not in (201, 409):  # 409: already there from an earlier apply
                raise _failure(f"creating CRD {name} from {path} failed: HTTP {status}: {body}", procs)

            async def established(name: str = name) -> tuple[bool, str]:
                status, obj = await api.call("GET", f"{base}/{name}")
                names = _condition(obj, "NamesAccepted")
                if names and names.get("status") == "False":
                    raise _failure(f"CRD {name} names not accepted: {names.get('message')}", procs)
                cond = _condition(obj, "Established")
                return bool(cond and cond.get("status") == "True"), f"HTTP {status}, Established={cond}"

            await _wait_for(f"CRD {name} to be Established", established, procs, SETUP_TIMEOUT)

            # Established can precede discovery by a moment; clients that
            # discover first (kubectl) must find the resource.
            group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
            for version in (v["name"] for v in crd["spec"]["versions"] if v.get("served")):
                async def served(gv: str = f"{group}/{version}") -> tuple[bool, str]:
                    status, obj = await api.call("GET", f"/apis/{gv}")
                    found = isinstance(obj, dict) and any(
                        r.get("name") == plural for r in obj.get("resources") or [])
                    return found, f"HTTP {status}, {plural} listed: {found}"

                await _wait_for(f"{plural}.{group}/{version} in discovery", served, procs, SETUP_TIMEOUT)


async def _ensure_namespace(api: _API, name: str, procs: Sequence[_Process]) -> None:
    # The apiserver's own controller creates "default" shortly after start;
    # creating it here as well only races to a harmless 409.
    async def exists() -> tuple[bool, str]:
        status, body = await api.call("GET", f"/api/v1/namespaces/{name}")
        if status == 404:
            status, body = await api.call("POST", "/api/v1/namespaces", {
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
            return status in (201, 409), f"create: HTTP {status}: {body}"
        return status == 200, f"HTTP {status}: {body}"

    await _wait_for(f"namespace {name}", exists, procs, SETUP_TIMEOUT)


# --- the whole thing -------------------------------------------------------------

async def _start_controller_manager(assets: Path, kubeconfig: Path, controllers: Sequence[str],
                                    native_gangs: bool, logs: Path, procs: list[_Process]) -> None:
    """kube-controller-manager from the assets folder, running only ``controllers``.

    Its flags are ../shared/realk8s/up.sh's. It has no health endpoint here
    (``--secure-port=0``); it is started once the server is ready and given a
    moment to start its informers. A controller's effects are what tests wait for.
    """
    binary = assets / "kube-controller-manager"
    if not _executable(binary):
        raise _failure(f"{binary} is missing: controllers {', '.join(controllers)} need it", procs)
    args = [f"--kubeconfig={kubeconfig}", "--leader-elect=false", "--secure-port=0",
            "--kube-api-qps=1000", "--kube-api-burst=2000", f"--controllers={','.join(controllers)}"]
    if native_gangs:
        args.append(f"--feature-gates={NATIVE_GANGS_CONTROLLER_GATES}")
    procs.append(await _spawn("kube-controller-manager", binary, args, logs))
    await asyncio.sleep(1.0)
    if procs[-1].returncode is not None:
        raise _failure("kube-controller-manager exited at start", procs)


@asynccontextmanager
async def real_apiserver(tmp: Path, *, crds: Sequence[Path] = (PODGROUP_CRD,),
                         start_timeout: float = START_TIMEOUT, native_gangs: bool = False,
                         controllers: Sequence[str] = ()) -> AsyncIterator[RealAPIServer]:
    """Run etcd and kube-apiserver from ``KUBEBUILDER_ASSETS`` until the block exits.

    Everything (etcd data, certificates, keys, logs, kubeconfig) goes under
    ``tmp/envtest``, which must not exist yet, and is left there for
    inspection. ``crds`` are created and waited for before the block runs;
    ``start_timeout`` bounds the wait for etcd and again for kube-apiserver.
    ``native_gangs`` serves upstream's alpha gang API (:data:`NATIVE_GANGS_RUNTIME_CONFIG`
    and its gates); ``controllers`` (e.g. ``("job-controller",)``) are run by a
    kube-controller-manager from the same folder, stopped with the rest.
    """
    assets = assets_dir()
    if assets is None:
        raise EnvtestError(skip_reason() or f"{ASSETS_ENV} does not hold kube-apiserver and etcd")
    root = Path(tmp).resolve() / "envtest"
    try:
        # A reused folder would hand the new server the old etcd data and
        # serving certificate; every control plane starts from nothing.
        root.mkdir(parents=True, exist_ok=False)
    except FileExistsError:
        raise EnvtestError(f"{root} already exists: give each real_apiserver() its own folder") from None
    logs, certs, secrets_dir = root / "logs", root / "certs", root / "secrets"
    logs.mkdir()
    certs.mkdir(mode=0o700)
    secrets_dir.mkdir(mode=0o700)

    client_port, peer_port, secure_port = _free_ports(3)
    etcd_url = f"http://127.0.0.1:{client_port}"
    base_url = f"https://127.0.0.1:{secure_port}"
    token = secrets.token_urlsafe(32)
    token_file = write_token_file(secrets_dir / "tokens.csv", token=token, user=ADMIN_USER, uid=ADMIN_USER)
    sa_key_pem, sa_pub_pem = generate_rsa_key()
    sa_key, sa_pub = secrets_dir / "sa.key", secrets_dir / "sa.pub"
    _write_private(sa_key, sa_key_pem)
    _write_private(sa_pub, sa_pub_pem)
    ca_file = certs / "apiserver.crt"

    procs: list[_Process] = []
    async with AsyncExitStack() as stack:
        stack.push_async_callback(_stop_all, procs)
        session = await stack.enter_async_context(
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)))

        etcd_bin, apiserver_bin = assets / "etcd", assets / "kube-apiserver"
        etcd_help = await _help_text(etcd_bin)
        procs.append(await _spawn("etcd", etcd_bin, etcd_args(
            data_dir=root / "etcd-data", client_port=client_port, peer_port=peer_port,
            no_fsync="unsafe-no-fsync" in etcd_help), logs))
        await _wait_for(f"etcd at {etcd_url}/health", lambda: _etcd_healthy(session, etcd_url),
                        procs, start_timeout)

        apiserver_help = await _help_text(apiserver_bin)
        args = apiserver_args(
            etcd_url=etcd_url, secure_port=secure_port, cert_dir=certs, token_file=token_file,
            sa_key=sa_key, sa_pub=sa_pub,
            disable_insecure_port="--insecure-port" in apiserver_help)
        if native_gangs:
            args += [f"--runtime-config={NATIVE_GANGS_RUNTIME_CONFIG}", f"--feature-gates={NATIVE_GANGS_GATES}"]
        procs.append(await _spawn("kube-apiserver", apiserver_bin, args, logs))
        api = _API(session, base_url, token, ca_file)
        await _wait_for(f"kube-apiserver at {base_url}/readyz", api.readyz, procs, start_timeout)

        try:
            await _install_crds(api, crds, procs)
            await _ensure_namespace(api, "default", procs)
        except EnvtestError:
            raise
        except _ANSWER_ERRORS as e:
            raise _failure(f"setting up {base_url} failed: {type(e).__name__}: {e}", procs) from e

        kubeconfig = write_kubeconfig(root / "kubeconfig", server=base_url, token=token, ca_file=ca_file)
        if controllers:
            await _start_controller_manager(assets, kubeconfig, controllers, native_gangs, logs, procs)
        yield RealAPIServer(base_url=base_url, kubeconfig=kubeconfig, token=token, ca_file=ca_file,
                            controllers=tuple(controllers))
