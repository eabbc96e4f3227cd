"""Fixtures shared by the bench tests."""

from __future__ import annotations

import pytest

from bench.simcluster import SimCluster
from bench.target import Target
from scheduler.apiclient import from_kubeconfig
from scheduler.framework.clock import Clock


@pytest.fixture
async def sim(tmp_path):
    """A simulated cluster in this process (no node agent) and a Target on it: fast, and its store is at hand."""
    kubeconfig = tmp_path / "sim.kubeconfig"
    async with SimCluster(nodes=0, agent=None, kubeconfig=str(kubeconfig)) as cluster:
        client = await from_kubeconfig(str(kubeconfig), qps=0, clock=Clock())
        try:
            yield cluster, Target(kubeconfig=kubeconfig, client=client, sim_process=None, url=cluster.url)
        finally:
            await client.close()
