"""tandem does with ResourceClaims what kube-scheduler 1.36 does: the DRA scenarios, on both servers.

The scenarios of dra_scenarios.py, which test_dra_kube_scheduler.py holds kube-scheduler 1.36.2 to,
run here against tandem (:class:`App`, in process) with config/default.yaml, whose default profile
``tandem-scheduler`` includes DynamicResources. Changed for a test, and nothing else: backoffs of 0.1 to
1 s (not 1 to 10 s), a client rate limit of 2000 qps (not 50), no leader election (one replica).

Every scenario runs twice (tests/support/servers.py): on the simulated cluster, which must serve
resource.k8s.io/v1 and the native gang API and run a resourceclaim controller, and on a real
kube-apiserver 1.36 serving the gang API, with kube-controller-manager's resourceclaim controller and
garbage collector (one control plane for the module; skipped, saying why, without
``KUBEBUILDER_ASSETS``). The scenarios leave no pod, node or ResourceSlice behind them.

One scenario's expectation is relaxed for the simulated cluster, which runs no garbage collector: a deleted
pod's generated claim is released there, not deleted (f).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import AsyncIterator

import pytest
import pytest_asyncio

# the scenarios' asserts are the checks: pytest explains them only in modules it rewrites
pytest.register_assert_rewrite("tests.integration.dra_scenarios")

from bench.simcluster.agent import AgentConfig  # noqa: E402
from scheduler.app import App  # noqa: E402
from scheduler.config import SchedulerConfig, load_config  # noqa: E402
from tests.integration.dra_scenarios import SCENARIOS, HTTPDriver  # noqa: E402
from tests.support import envtest, servers  # noqa: E402
from tests.support.servers import Server  # noqa: E402

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "config" / "default.yaml"
SCHEDULER = "tandem-scheduler"   # config/default.yaml's profile

real = servers.real_apiserver_fixture(native_gangs=True,
                                      controllers=("resourceclaim-controller", "garbage-collector-controller"))


def default_config() -> SchedulerConfig:
    """config/default.yaml, sized for a test (the module docstring says how)."""
    cfg = load_config(str(DEFAULT_CONFIG))
    assert [p.scheduler_name for p in cfg.profiles] == [SCHEDULER]
    return dataclasses.replace(cfg, pod_initial_backoff_seconds=0.1, pod_max_backoff_seconds=1,
                               client_qps=2000, client_burst=4000,
                               leader_election=dataclasses.replace(cfg.leader_election, leader_elect=False))


@pytest_asyncio.fixture(params=["sim", "real"], loop_scope="module")
async def server(request: pytest.FixtureRequest, tmp_path: Path,
                 real: envtest.RealAPIServer | None) -> AsyncIterator[Server]:
    async with servers.serving(request.param, tmp_path, real, native_gangs=True,
                               agent=AgentConfig(ready_delay=0.05, tick=0.01)) as s:
        yield s


@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_tandem_does_what_the_dra_scenario_says(server: Server, scenario: str) -> None:
    async with App(default_config(), kubeconfig=str(server.kubeconfig)):
        await SCENARIOS[scenario](HTTPDriver(server.session, server.url, SCHEDULER))
