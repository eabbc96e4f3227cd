"""Tests for tests/support/envtest.py, as far as they go without real binaries.

No kube-apiserver or etcd is installed on the development machines, so the
launcher is exercised against two small stand-ins written here: an "etcd"
that answers /health and a "kube-apiserver" that checks the flags it gets,
self-signs a chained certificate into --cert-dir as the real one does, and
serves just the calls the launcher makes. They prove the plumbing (ports,
files, TLS with the generated CA, token, waiting, teardown, error reports);
only a run with KUBEBUILDER_ASSETS proves the real flags.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio import client, config

from tests.support import envtest
from tests.support.envtest import (
    EnvtestError,
    apiserver_args,
    assets_dir,
    etcd_args,
    generate_rsa_key,
    real_apiserver,
    skip_reason,
    write_kubeconfig,
    write_token_file,
)

HOW_TO = ("set it to a folder with kube-apiserver and etcd (setup-envtest use -p path prints one) "
          "to run these tests against a real API server")


def _binary(folder: Path, name: str, text: str = "#!/bin/sh\nexit 0\n", executable: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    path.chmod(0o755 if executable else 0o644)
    return path


# --- skip_reason / assets_dir ----------------------------------------------------

def test_unset_assets_skip_with_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    assert skip_reason() == f"KUBEBUILDER_ASSETS is not set: {HOW_TO}"
    assert assets_dir() is None


def test_empty_assets_variable_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBEBUILDER_ASSETS", "  ")
    assert skip_reason() == f"KUBEBUILDER_ASSETS is not set: {HOW_TO}"


def test_assets_pointing_nowhere_say_it_is_not_a_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(missing))
    assert skip_reason() == f"KUBEBUILDER_ASSETS={missing} is not a folder: {HOW_TO}"
    assert assets_dir() is None


@pytest.mark.parametrize(("present", "missing"), [
    pytest.param((), "kube-apiserver and no etcd", id="an empty folder lacks both binaries"),
    pytest.param(("etcd",), "kube-apiserver", id="a folder with only etcd lacks kube-apiserver"),
    pytest.param(("kube-apiserver", "kubectl"), "etcd", id="a folder with only kube-apiserver lacks etcd"),
])
def test_assets_folder_without_binaries_names_what_is_missing(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, present: tuple[str, ...], missing: str) -> None:
    for name in present:
        _binary(tmp_path, name)
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path))
    assert skip_reason() == f"KUBEBUILDER_ASSETS={tmp_path} has no {missing}: {HOW_TO}"
    assert assets_dir() is None


def test_setup_envtest_store_root_points_at_the_version_folder(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    version = tmp_path / "k8s" / "1.31.0-linux-amd64"
    _binary(version, "kube-apiserver")
    _binary(version, "etcd")
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path))
    reason = skip_reason()
    assert reason is not None
    assert f"(but {version} has both: point KUBEBUILDER_ASSETS there)" in reason


def test_binaries_that_cannot_run_say_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _binary(tmp_path, "kube-apiserver", executable=False)
    _binary(tmp_path, "etcd")
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path))
    assert skip_reason() == (f"KUBEBUILDER_ASSETS={tmp_path} has kube-apiserver but it is not executable: "
                             "chmod +x them")
    assert assets_dir() is None


def test_folder_with_both_binaries_is_usable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _binary(tmp_path, "kube-apiserver")
    _binary(tmp_path, "etcd")
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path))
    assert skip_reason() is None
    assert assets_dir() == tmp_path.resolve()


async def test_starting_without_assets_fails_with_the_skip_reason(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    with pytest.raises(EnvtestError, match="KUBEBUILDER_ASSETS is not set"):
        async with real_apiserver(tmp_path):
            pass


# --- files ---------------------------------------------------------------------------

async def test_kubeconfig_loads_in_kubernetes_asyncio(tmp_path: Path) -> None:
    ca = tmp_path / "certs" / "apiserver.crt"
    ca.parent.mkdir()
    ca.write_text("not parsed by the loader\n")
    path = write_kubeconfig(tmp_path / "kubeconfig", server="https://127.0.0.1:6443", token="s3cret", ca_file=ca)

    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(path), client_configuration=cfg)
    assert cfg.host == "https://127.0.0.1:6443"
    assert cfg.api_key["BearerToken"] == "Bearer s3cret"
    assert cfg.ssl_ca_cert == str(ca.resolve())
    assert cfg.verify_ssl is True


def test_kubeconfig_is_private_and_names_one_context(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kc", server="https://127.0.0.1:1", token="t", name="e2e")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    doc = yaml.safe_load(path.read_text())
    assert doc["current-context"] == "e2e"
    assert doc["contexts"] == [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e-admin",
                                                           "namespace": "default"}}]
    assert "certificate-authority" not in doc["clusters"][0]["cluster"]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubeconfig_is_accepted_by_kubectl(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("")
    path = write_kubeconfig(tmp_path / "kubeconfig", server="https://127.0.0.1:6443", token="s3cret", ca_file=ca)
    out = subprocess.run(
        ["kubectl", "--kubeconfig", str(path), "config", "view", "--raw", "--minify", "-o", "yaml"],
        check=True, capture_output=True, text=True, timeout=30).stdout
    view = yaml.safe_load(out)
    assert view["clusters"][0]["cluster"] == {"server": "https://127.0.0.1:6443",
                                              "certificate-authority": str(ca.resolve())}
    assert view["users"][0]["user"] == {"token": "s3cret"}


def test_token_file_grants_system_masters(tmp_path: Path) -> None:
    path = write_token_file(tmp_path / "tokens.csv", token="abc", user="admin", uid="admin-uid")
    assert path.read_text() == 'abc,admin,admin-uid,"system:masters"\n'
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_token_file_refuses_values_that_break_the_csv(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_token_file(tmp_path / "t.csv", token="a,b", user="u", uid="u")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")
def test_service_account_key_is_a_valid_rsa_pair(tmp_path: Path) -> None:
    private, public = generate_rsa_key()
    assert private.startswith(b"-----BEGIN RSA PRIVATE KEY-----\n")
    assert public.startswith(b"-----BEGIN PUBLIC KEY-----\n")
    (tmp_path / "sa.key").write_bytes(private)
    check = subprocess.run(["openssl", "rsa", "-in", str(tmp_path / "sa.key"), "-check", "-noout"],
                           capture_output=True, text=True, timeout=30)
    assert check.returncode == 0 and "RSA key ok" in check.stdout, check.stderr
    derived = subprocess.run(["openssl", "rsa", "-in", str(tmp_path / "sa.key"), "-pubout"],
                             capture_output=True, timeout=30).stdout
    assert derived == public
    bits = subprocess.run(["openssl", "pkey", "-pubin", "-noout", "-text"], input=public,
                          capture_output=True, timeout=30).stdout
    assert b"(2048 bit)" in bits


# --- command lines ----------------------------------------------------------------

APISERVER_FLAGS = [
    pytest.param("--etcd-servers", "http://127.0.0.1:2379", id="talks to the etcd it started"),
    pytest.param("--bind-address", "127.0.0.1", id="listens on loopback only"),
    pytest.param("--secure-port", "6443", id="uses the chosen secure port"),
    pytest.param("--cert-dir", "/t/certs", id="self-signs its serving cert into the cert dir"),
    pytest.param("--token-auth-file", "/t/tokens.csv", id="authenticates the static token"),
    pytest.param("--authorization-mode", "RBAC", id="authorizes with RBAC"),
    pytest.param("--service-account-issuer", "https://127.0.0.1:6443/", id="issues service-account tokens"),
    pytest.param("--service-account-key-file", "/t/sa.pub", id="verifies service-account tokens"),
    pytest.param("--service-account-signing-key-file", "/t/sa.key", id="signs service-account tokens"),
    pytest.param("--service-cluster-ip-range", "10.0.0.0/24", id="has a service range"),
    pytest.param("--disable-admission-plugins", "ServiceAccount,TaintNodesByCondition",
                 id="does not wait for a default ServiceAccount nor taint new nodes not-ready"),
    pytest.param("--allow-privileged", "true", id="admits privileged pods"),
]


@pytest.mark.parametrize(("flag", "value"), APISERVER_FLAGS)
def test_apiserver_command_line(flag: str, value: str) -> None:
    args = apiserver_args(etcd_url="http://127.0.0.1:2379", secure_port=6443, cert_dir=Path("/t/certs"),
                          token_file=Path("/t/tokens.csv"), sa_key=Path("/t/sa.key"), sa_pub=Path("/t/sa.pub"))
    assert f"{flag}={value}" in args
    assert not any(a.startswith("--insecure-port") for a in args)


def test_old_apiservers_get_their_insecure_port_closed() -> None:
    args = apiserver_args(etcd_url="http://e", secure_port=1, cert_dir=Path("/c"), token_file=Path("/t"),
                          sa_key=Path("/k"), sa_pub=Path("/p"), disable_insecure_port=True)
    assert "--insecure-port=0" in args


def test_etcd_command_line_is_one_member_on_loopback() -> None:
    args = etcd_args(data_dir=Path("/t/etcd"), client_port=2379, peer_port=2380, no_fsync=True)
    assert args == [
        "--name=envtest",
        "--data-dir=/t/etcd",
        "--listen-client-urls=http://127.0.0.1:2379",
        "--advertise-client-urls=http://127.0.0.1:2379",
        "--listen-peer-urls=http://127.0.0.1:2380",
        "--initial-advertise-peer-urls=http://127.0.0.1:2380",
        "--initial-cluster=envtest=http://127.0.0.1:2380",
        "--unsafe-no-fsync=true",
    ]


# --- the launcher against stand-ins ----------------------------------------------

FAKE_ETCD = r'''
import os, signal, sys
from aiohttp import web

if "--help" in sys.argv:
    print("      --unsafe-no-fsync   Disables fsync, unsafe, will cause data loss.")
    sys.exit(0)
if os.environ.get("FAKE_ETCD") == "crash":
    print("etcdmain: listen tcp 127.0.0.1:2380: bind: address already in use", flush=True)
    sys.exit(3)
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
assert args["unsafe-no-fsync"] == "true", "feature discovery should have found --unsafe-no-fsync"
with open(os.path.join(os.environ["FAKE_PIDS"], "etcd.pid"), "w") as f:
    f.write(str(os.getpid()))

async def health(request):
    return web.json_response({"health": "true", "reason": ""})

stubborn = os.environ.get("FAKE_ETCD") == "stubborn"
if stubborn:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
app = web.Application()
app.router.add_get("/health", health)
web.run_app(app, host="127.0.0.1", port=int(args["listen-client-urls"].rsplit(":", 1)[1]), print=None,
            handle_signals=not stubborn)
'''

FAKE_APISERVER = r'''
import json, os, ssl, subprocess, sys, urllib.request
from pathlib import Path
from aiohttp import web

if "--help" in sys.argv:
    print("      --secure-port int   The port on which to serve HTTPS.")
    sys.exit(0)
mode = os.environ.get("FAKE_APISERVER", "ok")
if mode == "crash":
    print("Error: invalid argument for --service-cluster-ip-range", flush=True)
    sys.exit(1)
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
with open(os.path.join(os.environ["FAKE_PIDS"], "kube-apiserver.pid"), "w") as f:
    f.write(str(os.getpid()))

# etcd must be healthy before the apiserver starts.
with urllib.request.urlopen(args["etcd-servers"] + "/health", timeout=5) as r:
    assert json.load(r)["health"] == "true"
token, user, uid, groups = Path(args["token-auth-file"]).read_text().strip().split(",", 3)
assert groups == '"system:masters"', groups
assert "BEGIN RSA PRIVATE KEY" in Path(args["service-account-signing-key-file"]).read_text()
assert "BEGIN PUBLIC KEY" in Path(args["service-account-key-file"]).read_text()
assert args["disable-admission-plugins"] == "ServiceAccount,TaintNodesByCondition"
assert "insecure-port" not in args

# Self-sign like kube-apiserver: a CA and a leaf for the bind address,
# written to <cert-dir>/apiserver.crt as leaf followed by CA.
cert_dir = Path(args["cert-dir"])
work = cert_dir / "fake-ca"
work.mkdir(exist_ok=True)
def openssl(*a):
    subprocess.run(["openssl", *map(str, a)], check=True, capture_output=True)
openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", work / "ca.key", "-out", work / "ca.crt",
        "-subj", "/CN=fake-apiserver-ca", "-days", "1")
openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", cert_dir / "apiserver.key", "-out", work / "leaf.csr",
        "-subj", "/CN=fake-apiserver")
(work / "ext.cnf").write_text(f"subjectAltName=IP:{args['bind-address']}\nbasicConstraints=CA:FALSE\n"
                              "extendedKeyUsage=serverAuth\n")
openssl("x509", "-req", "-in", work / "leaf.csr", "-CA", work / "ca.crt", "-CAkey", work / "ca.key",
        "-CAcreateserial", "-out", work / "leaf.crt", "-days", "1", "-extfile", work / "ext.cnf")
(cert_dir / "apiserver.crt").write_bytes((work / "leaf.crt").read_bytes() + (work / "ca.crt").read_bytes())

crds, namespaces = {}, {}

def status(code, reason):
    return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                              "reason": reason, "code": code}, status=code)

@web.middleware
async def authenticate(request, handler):
    if request.headers.get("Authorization") != f"Bearer {token}":
        return status(401, "Unauthorized")
    return await handler(request)

async def readyz(request):
    if mode == "never-ready":
        return web.Response(status=500, text="[-]poststarthook/rbac/bootstrap-roles failed: not finished\n")
    return web.Response(text="ok")

async def create_crd(request):
    crd = await request.json()
    crd["status"] = {"conditions": [{"type": "NamesAccepted", "status": "True"},
                                    {"type": "Established", "status": "True"}]}
    crds[crd["metadata"]["name"]] = crd
    return web.json_response(crd, status=201)

async def get_crd(request):
    crd = crds.get(request.match_info["name"])
    return web.json_response(crd) if crd else status(404, "NotFound")

async def discovery(request):
    g, v = request.match_info["group"], request.match_info["version"]
    resources = [{"name": c["spec"]["names"]["plural"], "namespaced": True, "kind": c["spec"]["names"]["kind"],
                  "verbs": ["get", "list", "watch"]}
                 for c in crds.values() if c["spec"]["group"] == g
                 and any(x["name"] == v and x["served"] for x in c["spec"]["versions"])]
    if not resources:
        return status(404, "NotFound")
    return web.json_response({"kind": "APIResourceList", "groupVersion": f"{g}/{v}", "resources": resources})

async def get_namespace(request):
    ns = namespaces.get(request.match_info["name"])
    return web.json_response(ns) if ns else status(404, "NotFound")

async def create_namespace(request):
    ns = await request.json()
    name = ns["metadata"]["name"]
    if name in namespaces:
        return status(409, "AlreadyExists")
    namespaces[name] = {**ns, "status": {"phase": "Active"}}
    return web.json_response(namespaces[name], status=201)

app = web.Application(middlewares=[authenticate])
app.router.add_get("/readyz", readyz)
app.router.add_post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", create_crd)
app.router.add_get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}", get_crd)
app.router.add_get("/apis/{group}/{version}", discovery)
app.router.add_get("/api/v1/namespaces/{name}", get_namespace)
app.router.add_post("/api/v1/namespaces", create_namespace)
ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
ctx.load_cert_chain(cert_dir / "apiserver.crt", cert_dir / "apiserver.key")
web.run_app(app, host=args["bind-address"], port=int(args["secure-port"]), ssl_context=ctx, print=None)
'''

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="the stand-in apiserver needs openssl")


@pytest.fixture
def fake_assets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    assets = tmp_path / "assets"
    shebang = f"#!{sys.executable}\n"
    _binary(assets, "etcd", shebang + FAKE_ETCD)
    _binary(assets, "kube-apiserver", shebang + FAKE_APISERVER)
    pids = tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets))
    monkeypatch.setenv("FAKE_PIDS", str(pids))
    return pids


def _gone(pid_file: Path) -> bool:
    try:
        os.kill(int(pid_file.read_text()), 0)
    except ProcessLookupError:
        return True
    return False


@needs_openssl
async def test_launcher_starts_both_and_hands_out_a_working_kubeconfig(
        fake_assets: Path, tmp_path: Path) -> None:
    async with real_apiserver(tmp_path / "run") as server:
        assert server.base_url.startswith("https://127.0.0.1:")
        assert server.ca_file == tmp_path / "run" / "envtest" / "certs" / "apiserver.crt"

        cfg = client.Configuration()
        await config.load_kube_config(config_file=str(server.kubeconfig), client_configuration=cfg)
        async with client.ApiClient(cfg) as api:
            ns = await client.CoreV1Api(api).read_namespace("default")
        assert ns.metadata.name == "default"

        if shutil.which("kubectl"):
            ready = subprocess.run(["kubectl", "--kubeconfig", str(server.kubeconfig), "get", "--raw", "/readyz"],
                                   capture_output=True, text=True, timeout=30)
            assert ready.stdout == "ok", ready.stderr

    assert _gone(fake_assets / "etcd.pid")
    assert _gone(fake_assets / "kube-apiserver.pid")


async def test_etcd_that_dies_is_reported_with_its_log(
        fake_assets: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_ETCD", "crash")
    with pytest.raises(EnvtestError) as err:
        async with real_apiserver(tmp_path / "run"):
            pytest.fail("must not get here")
    text = str(err.value)
    assert text.startswith("etcd exited with code 3 while waiting for etcd at http://127.0.0.1:")
    assert "bind: address already in use" in text
    assert not (fake_assets / "kube-apiserver.pid").exists()


async def test_apiserver_that_dies_is_reported_and_etcd_is_stopped(
        fake_assets: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_APISERVER", "crash")
    with pytest.raises(EnvtestError) as err:
        async with real_apiserver(tmp_path / "run"):
            pytest.fail("must not get here")
    text = str(err.value)
    assert text.startswith("kube-apiserver exited with code 1 while waiting for kube-apiserver at https://")
    assert "invalid argument for --service-cluster-ip-range" in text
    assert "--- etcd (running)" in text
    assert _gone(fake_assets / "etcd.pid")


async def test_a_process_that_ignores_sigterm_is_killed(
        fake_assets: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_ETCD", "stubborn")
    monkeypatch.setenv("FAKE_APISERVER", "crash")
    monkeypatch.setattr(envtest, "STOP_GRACE", 0.5)
    with pytest.raises(EnvtestError, match="kube-apiserver exited with code 1"):
        async with real_apiserver(tmp_path / "run"):
            pytest.fail("must not get here")
    assert _gone(fake_assets / "etcd.pid")


@needs_openssl
async def test_apiserver_that_never_gets_ready_times_out_with_the_last_answer(
        fake_assets: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_APISERVER", "never-ready")
    with pytest.raises(EnvtestError) as err:
        async with real_apiserver(tmp_path / "run", start_timeout=4):
            pytest.fail("must not get here")
    text = str(err.value)
    assert text.startswith("timed out after 4s waiting for kube-apiserver at https://")
    assert "HTTP 500: [-]poststarthook/rbac/bootstrap-roles failed" in text
    assert "--- kube-apiserver (running), last lines of" in text
    assert _gone(fake_assets / "etcd.pid")
    assert _gone(fake_assets / "kube-apiserver.pid")


async def test_a_used_folder_is_refused_rather_than_reused(fake_assets: Path, tmp_path: Path) -> None:
    (tmp_path / "run" / "envtest").mkdir(parents=True)
    with pytest.raises(EnvtestError, match="already exists: give each real_apiserver"):
        async with real_apiserver(tmp_path / "run"):
            pytest.fail("must not get here")
    assert not (fake_assets / "etcd.pid").exists()


def test_podgroup_crd_path_is_the_repository_manifest() -> None:
    assert envtest.PODGROUP_CRD.is_file()
