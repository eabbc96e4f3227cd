"""One integration test, two API servers: the simulated cluster and a real kube-apiserver.

A module that runs its tests on both gets its real control plane from :func:`real_apiserver_fixture`
(started once for the module, since it takes seconds; ``None`` without ``KUBEBUILDER_ASSETS``) and,
per test, a :class:`Server` from :func:`serving`: a fresh :class:`SimCluster` for ``"sim"``, the
module's real server for ``"real"`` (skipped, saying why, when there is none). Such a module sets
``pytestmark = pytest.mark.asyncio(loop_scope="module")`` so the real server shares its tests' loop.

The real server is shared by the module's tests: what one test creates there (nodes, priority
classes, namespaces) the next one sees, so each test works in its own names and removes the
cluster-scoped objects it made. It has no kubelet: nothing writes pod status but the test, and a
bound pod is deleted with ``gracePeriodSeconds: 0`` or stays Terminating. This module never stops
a process it did not start.
"""

from __future__ import annotations

import contextlib
import json
import ssl
from pathlib import Path
from typing import Any, AsyncIterator, Sequence

import aiohttp
import pytest
import pytest_asyncio

from bench.simcluster import SimCluster
from tests.support import envtest


class Server:
    """One API server as a client sees it: HTTP with its credentials, and a kubeconfig for tandem.

    ``sim`` is the simulated cluster behind it (None on the real server): only tests of what the
    stand-in alone can do reach for it.
    """

    def __init__(self, kind: str, url: str, kubeconfig: Path, session: aiohttp.ClientSession,
                 sim: SimCluster | None = None) -> None:
        self.kind, self.url, self.kubeconfig, self.session, self.sim = kind, url, kubeconfig, session, sim

    async def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        data = json.dumps(body).encode() if body is not None else None
        async with self.session.request(method, self.url + path, data=data,
                                        headers={"Content-Type": content_type}) as r:
            out = await r.json(content_type=None)
            assert r.status < 300, f"{method} {path}: HTTP {r.status}: {out}"
            return out

    async def pod(self, ns: str, name: str) -> dict[str, Any]:
        return await self.call("GET", f"/api/v1/namespaces/{ns}/pods/{name}")


def real_apiserver_fixture(*, native_gangs: bool = False, controllers: Sequence[str] = ()) -> Any:
    """A module-scoped fixture: the real control plane (envtest.real_apiserver with these options),
    or None when ``KUBEBUILDER_ASSETS`` does not provide one. Assign it to a name in the test module."""

    @pytest_asyncio.fixture(scope="module", loop_scope="module")
    async def real(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[envtest.RealAPIServer | None]:
        if envtest.skip_reason() is not None:
            yield None
            return
        async with envtest.real_apiserver(tmp_path_factory.mktemp("real"), native_gangs=native_gangs,
                                          controllers=controllers) as server:
            yield server

    return real


@contextlib.asynccontextmanager
async def serving(kind: str, tmp_path: Path, real: envtest.RealAPIServer | None,
                  **sim_options: Any) -> AsyncIterator[Server]:
    """The server ``kind`` names ("sim" or "real") for one test; ``sim_options`` go to :class:`SimCluster`."""
    timeout = aiohttp.ClientTimeout(total=30)
    if kind == "real":
        if real is None:
            pytest.skip(envtest.skip_reason() or "the real kube-apiserver did not start")
        ctx = ssl.create_default_context(cafile=str(real.ca_file)) if real.ca_file else False
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {real.token}"}, timeout=timeout,
                                         connector=aiohttp.TCPConnector(ssl=ctx)) as session:
            yield Server("real", real.base_url, real.kubeconfig, session)
        return
    kubeconfig = tmp_path / "sim.kubeconfig"
    async with SimCluster(nodes=0, kubeconfig=kubeconfig, **sim_options) as cluster:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            yield Server("sim", cluster.url, kubeconfig, session, cluster)
