"""GangStarvation (bench/workloads/gang.yaml) at its Smoke scale, and the measure it adds: the cpu in use while
gangs waited.

The workload keeps the nodes full of short 1-cpu pods while whole-node native gangs arrive; tandem runs with
its built-in configuration (CapacityReservation included), the simulated cluster serving the native
PodGroup API. Every measured pod must bind, every gang whole, and the run must report each gang's wait and
the utilization (a share of the nodes' cpu, from the pods' own bind and delete times).
"""

from __future__ import annotations

import pytest

from bench.metrics import collect, utilization_during_gang_wait
from bench.record import Recorder
from bench.runner import run_workload
from bench.target import open_target, start_scheduler
from bench.workload import NATIVE_POD_GROUP_API_VERSION, find_workload
from tests.bench.test_runner import SCHEDULER, WORKLOADS


async def test_gang_starvation_smoke_binds_every_pod_and_reports_the_gangs_wait_and_the_utilization(tmp_path):
    workload = find_workload(WORKLOADS, "GangStarvation/Smoke")
    recorder = Recorder()
    async with open_target(None, tmp_path, [f"--runtime-config={NATIVE_POD_GROUP_API_VERSION}=true"]) as target:
        async with start_scheduler(None, target.kubeconfig, tmp_path):
            await run_workload(workload, target, SCHEDULER, recorder, timeout=60)
    measured = recorder.measured()
    assert measured and all(p.bound is not None for p in measured)
    m = collect(recorder, workload.full_name, SCHEDULER)
    assert len(m.gangs) == 2, "both gangs bound whole"
    assert recorder.node_cpu == 2 * 4000
    assert m.gang_wait_utilization is not None and 0.0 < m.gang_wait_utilization <= 1.0


def test_utilization_counts_each_pod_from_its_bind_to_its_delete_within_the_gangs_wait():
    r = Recorder(node_cpu=4000)
    r.start_collecting(0.0)
    r.created("gangs/g-0", 10.0, group="gangs/g", cpu=4000)
    r.bound("gangs/g-0", 20.0, "n0")
    r.created("small/a", 0.0, measured=False, cpu=1000)
    r.bound("small/a", 0.0, "n0")
    r.gone("small/a", 15.0)          # 1 cpu for the first half of the wait [10, 20]
    r.created("small/b", 12.0, cpu=2000)
    r.bound("small/b", 12.0, "n0")   # 2 cpu from 12 to the end (never deleted)
    r.created("small/c", 30.0, cpu=1000)
    r.bound("small/c", 30.0, "n0")   # after the wait: not counted
    want = (1000 * 5 + 2000 * 8) / (4000 * 10)
    assert utilization_during_gang_wait(r) == pytest.approx(want)
    assert utilization_during_gang_wait(Recorder(node_cpu=4000)) is None
