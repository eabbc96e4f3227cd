"""The secure port of a running tandem against the simulated cluster, as a scraper meets it.

The simulated cluster issues ServiceAccount tokens and answers TokenReview
and SubjectAccessReview from the RBAC objects it stores, so these tests set
things up as an operator would: a ServiceAccount for the scraper, the
manifests' ``tandem-metrics-reader`` ClusterRole, a binding. Then:
no credentials or a garbage token is 401, a token without the binding 403,
the bound one gets the metrics, the health paths are open; the
certificate was generated at start. The same through the real
``tandem-scheduler`` process and its flags.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import sys
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

from bench.simcluster import SimCluster
from bench.simcluster.auth import ADMIN_TOKEN
from scheduler.app import App
from scheduler.config import parse_config
from tests.integration.test_scheduler import eventually

REPO = Path(__file__).resolve().parents[2]
CONFIG = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def metrics_reader_role() -> dict[str, Any]:
    """The ClusterRole manifests/rbac.yaml asks operators to bind their scraper to."""
    docs = yaml.safe_load_all((REPO / "manifests" / "rbac.yaml").read_text())
    (role,) = [d for d in docs if d and d["kind"] == "ClusterRole" and d["metadata"]["name"] == "tandem-metrics-reader"]
    return role


async def api(s: aiohttp.ClientSession, cluster: SimCluster, path: str, body: Any) -> dict[str, Any]:
    async with s.post(cluster.url + path, data=orjson.dumps(body), headers={"Content-Type": "application/json"}) as r:
        assert r.status == 201, await r.text()
        return orjson.loads(await r.read())


async def scraper_token(s: aiohttp.ClientSession, cluster: SimCluster, name: str, bound: bool) -> str:
    """A ServiceAccount token for ``name`` in namespace monitoring, bound to tandem-metrics-reader if ``bound``."""
    await api(s, cluster, "/api/v1/namespaces/monitoring/serviceaccounts", {"metadata": {"name": name}})
    if bound:
        await api(s, cluster, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "metadata": {"name": f"{name}-tandem-metrics"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "tandem-metrics-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "monitoring"}]})
    tr = await api(s, cluster, f"/api/v1/namespaces/monitoring/serviceaccounts/{name}/token", {"spec": {}})
    return tr["status"]["token"]


async def get(s: aiohttp.ClientSession, url: str, token: str | None = None,
              ssl_ctx: ssl.SSLContext | bool = False) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with s.get(url, headers=headers, ssl=ssl_ctx) as r:
        return r.status, await r.text()


async def test_metrics_on_the_secure_port_need_a_token_bound_to_the_metrics_reader_role(tmp_path) -> None:
    kc = tmp_path / "kubeconfig"
    async with SimCluster(nodes=1, kubeconfig=kc) as cluster, aiohttp.ClientSession() as s:
        await api(s, cluster, "/api/v1/namespaces", {"metadata": {"name": "monitoring"}})
        await api(s, cluster, "/apis/rbac.authorization.k8s.io/v1/clusterroles", metrics_reader_role())
        prometheus = await scraper_token(s, cluster, "prometheus", bound=True)
        other = await scraper_token(s, cluster, "someone-else", bound=False)
        async with App(parse_config(CONFIG, "<test>"), kubeconfig=str(kc), health_port=0) as app:
            base = app.health_server.url
            assert base.startswith("https://")
            for token, status in ((None, 401), ("garbage", 401), (other, 403), (prometheus, 200)):
                got, text = await get(s, f"{base}/metrics", token)
                assert got == status, (token, text)
            assert "scheduler_pending_pods" in text
            for path in ("/healthz", "/livez", "/readyz"):
                assert await get(s, f"{base}{path}") == (200, "ok")
            # the certificate was made at start for localhost and verifies against its CA
            ctx = ssl.create_default_context(cadata=app.secure_serving.generated.ca_pem.decode())
            ctx.check_hostname = False          # the URL says 127.0.0.1, which the certificate names too
            assert (await get(s, f"{base}/healthz", ssl_ctx=ctx))[0] == 200
            guard = app.secure_serving.guard
            assert guard.refused == {401: 2, 403: 1}
            # the reviews went through a client of their own, not the scheduler's
            assert app.client.counts["create", "201"] == 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_the_scheduler_process_serves_https_by_default_and_plain_http_when_asked(tmp_path) -> None:
    kc = tmp_path / "kubeconfig"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    async with SimCluster(nodes=1, kubeconfig=kc), aiohttp.ClientSession() as s:
        for extra, scheme in (((), "https"), (("--insecure-serving",), "http")):
            port = _free_port()
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "scheduler", "--kubeconfig", str(kc), "--port", str(port),
                "--bind-address", "127.0.0.1", *extra, cwd=REPO, env=env,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
            try:
                url = f"{scheme}://127.0.0.1:{port}"

                async def healthy() -> bool:
                    try:
                        return (await get(s, f"{url}/healthz"))[0] == 200
                    except aiohttp.ClientError:
                        return False

                await eventually(healthy, 30, f"{url}/healthz")
                if scheme == "https":
                    assert (await get(s, f"{url}/metrics"))[0] == 401
                    # the kubeconfig's own token is system:masters on the simulated cluster: no access review
                    assert (await get(s, f"{url}/metrics", ADMIN_TOKEN))[0] == 200
                else:
                    assert (await get(s, f"{url}/metrics"))[0] == 200
            finally:
                proc.terminate()
                await asyncio.wait_for(proc.wait(), 10)


async def test_a_certificate_file_that_cannot_be_read_is_one_line_and_exit_code_1(tmp_path) -> None:
    kc = tmp_path / "kubeconfig"
    async with SimCluster(nodes=0, kubeconfig=kc):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "scheduler", "--kubeconfig", str(kc), "--tls-cert-file", str(tmp_path / "no.crt"),
            "--tls-private-key-file", str(tmp_path / "no.key"), cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 1
        lines = err.decode().strip().splitlines()
        assert len(lines) == 1 and "no.crt" in lines[0], lines
