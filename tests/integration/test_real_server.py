"""tandem against a real kube-apiserver and the simulated cluster: sidecar host ports and resized pods.

Issue 18 found two ways tandem placed pods where kube-scheduler 1.36 does not: it ignored the host
ports of sidecars (init containers with ``restartPolicy: Always``) and charged a bound pod its spec
requests when its status says an in-place resize holds more. Each test here is the user's view of one
of them, run against both API servers with the scheduler (:class:`App`) in process:

* two pods whose sidecar asks for one hostPort, pinned by nodeSelector to one node: one binds, the
  other waits with NodePorts' reason;
* a 4-cpu node holding a pod whose spec asks 1 cpu but whose status (written as a kubelet writes it,
  through pods/status, after the test bound it through pods/binding) says 3 cpu are allocated and
  actuated: a 2-cpu pod waits with ``Insufficient cpu``, then a 1-cpu pod binds.

kube-scheduler 1.36.2 did exactly this on a real control plane (``../shared/realk8s/up.sh``, default
profile), which is what these expectations are taken from. The real server is the private one of
tests/support/envtest.py (started once for this module; skipped, saying why, without
``KUBEBUILDER_ASSETS``); neither server has a kubelet, so nothing but the test writes pod status.
"""

from __future__ import annotations

import contextlib
import itertools
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import pytest_asyncio

from scheduler.app import App
from tests.integration.test_scheduler import SCHED, config, eventually, scheduled_condition
from tests.support import envtest, servers
from tests.support.servers import Server

pytestmark = pytest.mark.asyncio(loop_scope="module")

NODE_PORTS_REASON = "node(s) didn't have free ports for the requested pod ports"
_names = itertools.count()

real = servers.real_apiserver_fixture()


@pytest_asyncio.fixture(params=["sim", "real"], loop_scope="module")
async def server(request: pytest.FixtureRequest, tmp_path: Path,
                 real: envtest.RealAPIServer | None) -> AsyncIterator[Server]:
    # no node agent: as on the real server, no kubelet writes pod status behind the test's back
    async with servers.serving(request.param, tmp_path, real, agent=None) as s:
        yield s


@contextlib.asynccontextmanager
async def scenario(server: Server) -> AsyncIterator[tuple[str, str]]:
    """A fresh namespace and a 4-cpu node only this test's pods select; tandem runs for the block."""
    n = next(_names)
    ns, node = f"t18-{n}-{server.kind}", f"t18-{n}-{server.kind}-node"
    await server.call("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    capacity = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    await server.call("POST", "/api/v1/nodes", {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node, "t18": node}},
        "status": {"capacity": capacity, "allocatable": capacity,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}})
    async with App(config(), kubeconfig=str(server.kubeconfig)) as app:
        yield ns, node
        assert app._loop_task is not None and not app._loop_task.done(), "the scheduling loop ended"


def pod(name: str, node: str, cpu: str, *, scheduler: str = SCHED, sidecar_port: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler, "nodeSelector": {"t18": node},
        "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": cpu}}}]}
    if sidecar_port is not None:
        spec["initContainers"] = [{"name": "proxy", "image": "registry.k8s.io/pause:3.10", "restartPolicy": "Always",
                                   "ports": [{"containerPort": sidecar_port, "hostPort": sidecar_port}]}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


async def waiting_with(server: Server, ns: str, name: str, reason: str) -> str:
    """Wait for PodScheduled=False whose message names ``reason``; returns the message."""
    async def cond() -> str:
        c = scheduled_condition(await server.pod(ns, name))
        return c.get("message", "") if c.get("status") == "False" and reason in c.get("message", "") else ""
    return await eventually(cond, 15, f"{name} to wait with {reason!r}")


async def bound_to(server: Server, ns: str, name: str) -> str:
    async def cond() -> str:
        return (await server.pod(ns, name))["spec"].get("nodeName", "")
    return await eventually(cond, 15, f"{name} to be bound")


async def test_two_pods_whose_sidecars_want_one_host_port_do_not_share_a_node(server: Server) -> None:
    async with scenario(server) as (ns, node):
        for name in ("first", "second"):
            await server.call("POST", f"/api/v1/namespaces/{ns}/pods", pod(name, node, "100m", sidecar_port=9100))
        first = await bound_to(server, ns, "first")
        assert first == node
        msg = await waiting_with(server, ns, "second", NODE_PORTS_REASON)
        assert msg.startswith("0/"), msg
        assert not (await server.pod(ns, "second"))["spec"].get("nodeName")


async def test_a_pod_whose_status_holds_3_of_4_cpu_leaves_room_for_1_and_not_for_2(server: Server) -> None:
    async with scenario(server) as (ns, node):
        # a pod of another scheduler, bound by the test as a scheduler would, then resized by its "kubelet":
        # the spec asks 1 cpu, the status says 3 are allocated and actuated (a resize down not yet done)
        await server.call("POST", f"/api/v1/namespaces/{ns}/pods", pod("resized", node, "1", scheduler="nobody"))
        await server.call("POST", f"/api/v1/namespaces/{ns}/pods/resized/binding", {
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "resized"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
        patched = await server.call("PATCH", f"/api/v1/namespaces/{ns}/pods/resized/status", {"status": {
            "phase": "Running",
            "containerStatuses": [{
                "name": "app", "image": "registry.k8s.io/pause:3.10", "imageID": "", "ready": True, "started": True,
                "restartCount": 0, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                "allocatedResources": {"cpu": "3"}, "resources": {"requests": {"cpu": "3"}}}]}},
            content_type="application/merge-patch+json")
        status = patched["status"]["containerStatuses"][0]
        assert (status["allocatedResources"], status["resources"]) == ({"cpu": "3"}, {"requests": {"cpu": "3"}}), \
            "the server kept what the kubelet wrote"
        await server.call("POST", f"/api/v1/namespaces/{ns}/pods", pod("two", node, "2"))
        await waiting_with(server, ns, "two", "Insufficient cpu")
        await server.call("POST", f"/api/v1/namespaces/{ns}/pods", pod("one", node, "1"))
        assert await bound_to(server, ns, "one") == node
        assert not (await server.pod(ns, "two"))["spec"].get("nodeName"), "the 2-cpu pod still waits"
