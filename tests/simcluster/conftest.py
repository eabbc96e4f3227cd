"""One fixture, two API servers: every simcluster test runs against both.

``target`` is the simulated cluster (always) and a real kube-apiserver
(when ``KUBEBUILDER_ASSETS`` holds kube-apiserver and etcd; otherwise that
run is skipped and says why). Both serve upstream's alpha native gang API
(scheduling.k8s.io/v1alpha2); the real one runs the controllers the stand-in
plays (Job, podgroup-protection, ReplicaSet, disruption, resourceclaim: :data:`NATIVE_CONTROLLERS`)
when the assets have kube-controller-manager (tests needing them call
``target.needs_controllers(...)``). Tests talk HTTP through ``target.req`` or
kubernetes-asyncio through ``target.api_client()``, in a fresh namespace
``target.ns``, and assert the same things on both: that is how the stand-in
is kept honest.

Behaviour only the stand-in has (fault injection, the node agent, forced
compaction) is reached through ``target.sim``; such tests call
``target.only_sim("why")`` first, which skips the real run with that reason.

Every test module here sets ``pytestmark = pytest.mark.asyncio(loop_scope="session")``
so the real server, started once per session, shares the tests' loop.
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import aiohttp
import orjson
import pytest
import pytest_asyncio
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

from bench.simcluster import SimCluster
from bench.simcluster.agent import AgentConfig
from tests.support import envtest

_ns_counter = itertools.count()
# what kube-controller-manager runs for the whole session on the real server: the stand-in's controllers
# (the volume ones run for test_volumes.py alone)
NATIVE_CONTROLLERS = ("job-controller", "podgroup-protection-controller", "replicaset-controller",
                      "disruption-controller", "resourceclaim-controller")


@dataclass
class Resp:
    status: int
    body: Any            # parsed JSON, or the text when it is not JSON
    headers: Any

    @property
    def reason(self) -> str | None:
        return self.body.get("reason") if isinstance(self.body, dict) else None


@dataclass
class Target:
    kind: str                         # "sim" or "real"
    url: str
    kubeconfig: Path
    session: aiohttp.ClientSession    # authenticated, TLS set up
    ns: str                           # a fresh namespace for this test
    sim: SimCluster | None = None
    controllers: tuple[str, ...] = NATIVE_CONTROLLERS   # the kube-controller-manager controllers that run
    _clients: list[k8s.ApiClient] = field(default_factory=list)

    def only_sim(self, why: str) -> None:
        if self.sim is None:
            pytest.skip(f"simulated cluster only: {why}")

    def needs_controllers(self, *names: str) -> None:
        """Skip the real run when no kube-controller-manager runs these controllers."""
        missing = [n for n in names if n not in self.controllers]
        if missing:
            pytest.skip(f"{', '.join(missing)} not running: {envtest.ASSETS_ENV} has no kube-controller-manager")

    async def req(self, method: str, path: str, body: Any = None, *, params: dict[str, str] | None = None,
                  content_type: str = "application/json", data: bytes | None = None) -> Resp:
        """One HTTP request; ``body`` is JSON-encoded unless ``data`` gives raw bytes."""
        if data is None and body is not None:
            data = orjson.dumps(body)
        headers = {"Content-Type": content_type} if data is not None else {}
        async with self.session.request(method, self.url + path, data=data, params=params,
                                         headers=headers) as r:
            raw = await r.read()
            try:
                parsed: Any = orjson.loads(raw) if raw else None
            except orjson.JSONDecodeError:
                parsed = raw.decode(errors="replace")
            return Resp(r.status, parsed, r.headers)

    async def watch(self, path: str, params: dict[str, str], *, until: int | None = None,
                    timeout: float = 10.0, stop: Callable[[dict[str, Any]], bool] | None = None
                    ) -> list[dict[str, Any]]:
        """Collect watch events until the server ends the stream, ``until`` events arrived, an event ``stop``
        says is the last arrived, or ``timeout``."""
        events: list[dict[str, Any]] = []
        p = {"watch": "true", **params}

        async def read() -> None:
            async with self.session.get(self.url + path, params=p) as r:
                assert r.status == 200, await r.text()
                async for line in r.content:
                    if line.strip():
                        events.append(orjson.loads(line))
                        if until is not None and len(events) >= until or stop is not None and stop(events[-1]):
                            return

        try:
            await asyncio.wait_for(read(), timeout)
        except asyncio.TimeoutError:
            pass
        return events

    async def api_client(self) -> k8s.ApiClient:
        """A kubernetes-asyncio client from this target's kubeconfig (closed after the test)."""
        c = await k8s_config.new_client_from_config(config_file=str(self.kubeconfig))
        self._clients.append(c)
        return c

    async def make_nodes(self, count: int, *, cpu: str = "4", memory: str = "32Gi", pods: str = "110",
                         labels: dict[str, str] | None = None) -> list[str]:
        """Create nodes through the API (works on both servers); names are unique per test."""
        names = []
        for i in range(count):
            name = f"{self.ns}-node-{i}"
            r = await self.req("POST", "/api/v1/nodes", node_body(name, cpu=cpu, memory=memory, pods=pods,
                                                                  labels=labels))
            assert r.status == 201, r.body
            names.append(name)
        return names


def node_body(name: str, *, cpu: str = "4", memory: str = "32Gi", pods: str = "110",
              labels: dict[str, str] | None = None) -> dict[str, Any]:
    capacity = {"cpu": cpu, "memory": memory, "pods": pods}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "status": {"capacity": capacity, "allocatable": dict(capacity),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod_body(name: str, *, cpu: str = "100m", memory: str = "128Mi", labels: dict[str, str] | None = None,
             **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": cpu, "memory": memory}}}], **spec}}


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def real_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[envtest.RealAPIServer | None]:
    """The real kube-apiserver, started once per session if the assets exist."""
    if envtest.skip_reason() is not None:
        yield None
        return
    # both servers serve the native gang API; the stand-in's controllers run on the real one when
    # the assets have kube-controller-manager (setup-envtest's do not)
    assets = envtest.assets_dir()
    controllers = NATIVE_CONTROLLERS if assets is not None and (assets / "kube-controller-manager").is_file() else ()
    async with envtest.real_apiserver(tmp_path_factory.mktemp("real"), native_gangs=True,
                                      controllers=controllers) as real:
        yield real


async def _new_namespace(session: aiohttp.ClientSession, url: str) -> str:
    name = f"t{next(_ns_counter)}-{asyncio.get_running_loop().time():.0f}"[:40]
    async with session.post(f"{url}/api/v1/namespaces", data=orjson.dumps({"metadata": {"name": name}}),
                            headers={"Content-Type": "application/json"}) as r:
        assert r.status == 201, await r.text()
    return name


@pytest_asyncio.fixture(params=["sim", "real"], loop_scope="session")
async def target(request: pytest.FixtureRequest, tmp_path: Path,
                 real_server: envtest.RealAPIServer | None) -> AsyncIterator[Target]:
    timeout = aiohttp.ClientTimeout(total=60)
    if request.param == "real":
        reason = envtest.skip_reason()
        if reason is not None or real_server is None:
            pytest.skip(reason or "the real kube-apiserver did not start")
        ctx = ssl.create_default_context(cafile=str(real_server.ca_file)) if real_server.ca_file else False
        session = aiohttp.ClientSession(headers={"Authorization": f"Bearer {real_server.token}"},
                                        connector=aiohttp.TCPConnector(ssl=ctx), timeout=timeout)
        t = Target("real", real_server.base_url, real_server.kubeconfig, session, "",
                   controllers=real_server.controllers)
        try:
            t.ns = await _new_namespace(session, t.url)
            yield t
        finally:
            for c in t._clients:
                await c.close()
            await session.close()
        return
    cluster = SimCluster(nodes=0, kubeconfig=tmp_path / "sim.kubeconfig", bookmark_interval=1.0,
                         agent=AgentConfig(ready_delay=0.1, termination_delay=0.1, tick=0.01), native_gangs=True)
    async with cluster:
        session = aiohttp.ClientSession(timeout=timeout)
        t = Target("sim", cluster.url, tmp_path / "sim.kubeconfig", session, "", sim=cluster)
        try:
            t.ns = await _new_namespace(session, t.url)
            yield t
        finally:
            for c in t._clients:
                await c.close()
            await session.close()
