"""The DRA scenarios (dra_scenarios.py) hold for kube-scheduler 1.36 on a real kube-apiserver.

This keeps the ground truth true: every scenario tandem must pass (test_dra.py) runs here first against
kube-scheduler itself, the binary ``KUBEBUILDER_ASSETS`` holds (``../shared/realk8s/up.sh --assets``
prints one), with its default profile as ``default-scheduler`` and the gang gates on that upstream's
native gangs need (as up.sh prints its command line). One control plane for the module
(tests/support/envtest.py): kube-apiserver serving scheduling.k8s.io/v1alpha2, and a
kube-controller-manager running the resourceclaim controller, which makes claims from templates, writes
the pods' resourceClaimStatuses and releases (and deletes) the claims of deleted pods. The scenarios
leave nothing behind for the next one but their namespaces and claims.

Skipped, saying why, without ``KUBEBUILDER_ASSETS`` or without kube-scheduler and kube-controller-manager
binaries in it.
"""

from __future__ import annotations

import os
import ssl
import subprocess
from typing import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
import pytest_asyncio

# the scenarios' asserts are the checks: pytest explains them only in modules it rewrites
pytest.register_assert_rewrite("tests.integration.dra_scenarios")

from tests.integration.dra_scenarios import SCENARIOS, Driver, HTTPDriver  # noqa: E402
from tests.support import envtest  # noqa: E402

pytestmark = pytest.mark.asyncio(loop_scope="module")

UPSTREAM = "default-scheduler"
GANG_GATES = "GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true"
# the resourceclaim controller releases a deleted pod's claims; the garbage collector deletes the ones made for it
CONTROLLERS = ("resourceclaim-controller", "garbage-collector-controller")


def _skip_reason() -> str | None:
    reason = envtest.controller_manager_skip_reason()
    if reason is not None:
        return reason
    folder = envtest.assets_dir()
    if folder is None or not os.access(folder / "kube-scheduler", os.X_OK):
        return "KUBEBUILDER_ASSETS has no kube-scheduler binary (../shared/realk8s/up.sh --assets prints one)"
    return None


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def upstream(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Driver]:
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("dra-kube-scheduler")
    async with envtest.real_apiserver(tmp, native_gangs=True, controllers=CONTROLLERS) as server:
        cfg = tmp / "kube-scheduler.yaml"
        cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                       f"clientConnection: {{kubeconfig: \"{server.kubeconfig}\"}}\n"
                       f"leaderElection: {{leaderElect: false}}\nprofiles: [{{schedulerName: {UPSTREAM}}}]\n")
        binary = envtest.assets_dir() / "kube-scheduler"   # type: ignore[operator]
        with open(tmp / "kube-scheduler.log", "wb") as log:
            proc = subprocess.Popen([str(binary), f"--config={cfg}", "--secure-port=0",
                                     f"--feature-gates={GANG_GATES}"], stdout=log, stderr=subprocess.STDOUT)
        try:
            ctx = ssl.create_default_context(cafile=str(server.ca_file)) if server.ca_file else False
            async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {server.token}"},
                                             timeout=aiohttp.ClientTimeout(total=30),
                                             connector=aiohttp.TCPConnector(ssl=ctx)) as session:
                yield HTTPDriver(session, server.base_url, UPSTREAM)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_kube_scheduler_does_what_the_dra_scenario_says(upstream: Driver, scenario: str) -> None:
    run: Callable[[Driver], Awaitable[None]] = SCENARIOS[scenario]
    await run(upstream)
