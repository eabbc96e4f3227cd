"""``make run`` as CI runs it: ``python -m bench.demo --once`` in its own process.

The demo's table is its promise to a first-time user: each pod of the
workload on the node its constraints and the default scores pick, and the
pod that fits nowhere pending with upstream's "0/N nodes are available"
message in both its PodScheduled condition and its FailedScheduling event.
The expectations are written out here rather than read from the demo
module, so a change in the demo's workload or in scheduling behaviour shows
up as a failure to look at, not as a silently updated expectation.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

EXPECTED = {                     # pod -> (node, zone)
    "batch-large": ("large-c", "zone-c"),
    "web": ("medium-b", "zone-b"),
    "api": ("small-a", "zone-a"),
    "db": ("small-c", "zone-c"),
    "worker": ("medium-b", "zone-b"),
    "trainer": ("gpu-a", "zone-a"),
    "gated-job": ("medium-b", "zone-b"),
    "too-big": ("<pending>", "-"),
    "pg-0": ("medium-b", "zone-b"),
    "pg-1": ("large-c", "zone-c"),
    "cache-0": ("small-a", "zone-a"),
}
CLAIMS = {                       # claim -> (class, status, where its volume is)
    "data-pg-0": ("local-storage", "Bound", "hostname=medium-b"),
    "data-pg-1": ("local-storage", "Bound", "hostname=large-c"),
    "data-cache-0": ("zonal", "Bound", "zone=zone-a"),
}
FIT_ERROR = ("0/6 nodes are available: 1 node(s) had untolerated taint(s), "
             "1 node(s) were unschedulable, 4 Insufficient cpu.")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    kubeconfig = tmp_path_factory.mktemp("demo") / "sim.kubeconfig"
    proc = subprocess.run([sys.executable, "-m", "bench.demo", "--once", "--kubeconfig", str(kubeconfig)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    return proc, kubeconfig


def _rows(out: str, header: str) -> dict[str, list[str]]:
    """A table of the demo's output by its header's regex: first cell -> the other cells."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(header, line))
    rows = {}
    for line in lines[start + 1:]:
        if not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())
        rows[cells[0]] = cells[1:]
    return rows


def _placements(out: str) -> dict[str, tuple[str, str, str]]:
    """The placement table: pod -> (node, zone, why)."""
    return {pod: (c[0], c[1], c[-1]) for pod, c in _rows(out, r"POD\s+NODE\s+ZONE\s+REQUESTS\s+WHY$").items()}


def test_demo_exits_cleanly_and_quickly(demo: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, _ = demo
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr


def _claims(out: str) -> dict[str, tuple[str, ...]]:
    """The claims' table: claim -> (class, status, volume, volume on)."""
    return {c: tuple(cells) for c, cells in _rows(out, r"CLAIM\s+CLASS\s+STATUS\s+VOLUME\s+VOLUME ON$").items()}


def test_statefulset_claims_bind_one_volume_each_where_their_pods_are(
        demo: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    """WaitForFirstConsumer: pg-0 and pg-1 take one local volume each (never the same one), on their pods'
    nodes; cache-0's volume is provisioned in the zone its class allows."""
    proc, _ = demo
    claims = _claims(proc.stdout)
    assert {c: (cls, status, where) for c, (cls, status, _, where) in claims.items()} == CLAIMS, proc.stdout
    assert claims["data-pg-0"][2] == "local-medium-b" and claims["data-pg-1"][2] == "local-large-c", claims
    assert claims["data-cache-0"][2].startswith("pvc-"), claims   # the provisioner's name for a claim's volume


def test_every_pod_lands_where_its_constraints_and_scores_send_it(
        demo: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, _ = demo
    placed = _placements(proc.stdout)
    assert {pod: (node, zone) for pod, (node, zone, _) in placed.items()} == EXPECTED, proc.stdout
    assert "UNEXPECTED" not in proc.stdout
    assert placed["trainer"][2] == "toleration + gpu"
    assert "zone affinity" in placed["db"][2] and "zone affinity" in placed["worker"][2]


def test_gated_pod_waits_for_its_gate_to_be_removed(demo: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, _ = demo
    assert "gated-job before release: node=-, gates=['tandem.dev/approval']" in proc.stdout, proc.stdout
    assert "released it: kubectl patch pod gated-job" in proc.stdout


def test_pending_pod_shows_its_condition_and_failed_scheduling_event(
        demo: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, _ = demo
    out = proc.stdout
    assert "condition  PodScheduled=False reason=Unschedulable" in out, out
    assert "event      Warning FailedScheduling by tandem-scheduler (action Scheduling)" in out, out
    # once under the condition, once under the event
    assert out.count(FIT_ERROR) == 2, out


def test_demo_points_at_kubectl_with_its_kubeconfig(demo: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    proc, kubeconfig = demo
    assert f"kubectl --kubeconfig {kubeconfig} get pods -o wide" in proc.stdout
    assert kubeconfig.is_file()
    assert 'scheduler_schedule_attempts_total{profile="tandem-scheduler",result="scheduled"} 10.0' in proc.stdout
