"""kubectl, unmodified, against the simulated cluster (and a real kube-apiserver when there is one).

kubectl exercises discovery, table-less JSON output, create from a manifest
and delete-and-wait the way people will poke at a running stand-in; if it
works here, ``kubectl --kubeconfig sim.kubeconfig ...`` works for them.
Skipped, with the reason, where kubectl is not installed.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.simcluster.conftest import Target, pod_body

pytestmark = [
    pytest.mark.asyncio(loop_scope="session"),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed (not on PATH)"),
]

TIMEOUT = 30.0


async def kubectl(t: Target, *args: str) -> str:
    """Run kubectl against the target; returns stdout, fails the test on a non-zero exit or a hang."""
    proc = await asyncio.create_subprocess_exec(
        shutil.which("kubectl") or "kubectl", "--kubeconfig", str(t.kubeconfig), "--request-timeout", "20s", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        # kubectl must see no user kubeconfig or cache: only what the test hands it
        env={"PATH": "/usr/bin:/bin", "HOME": str(t.kubeconfig.parent)})
    try:
        out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        pytest.fail(f"kubectl {' '.join(args)} did not finish in {TIMEOUT}s")
    assert proc.returncode == 0, f"kubectl {' '.join(args)} exited {proc.returncode}: {err.decode()}"
    return out.decode()


async def test_get_nodes_lists_them(target):
    names = await target.make_nodes(2)
    out = await kubectl(target, "get", "nodes", "-o", "wide")
    assert out.splitlines()[0].split()[:2] == ["NAME", "STATUS"]
    for name in names:
        assert name in out


async def test_get_pods_as_json_is_a_pod_list(target):
    r = await target.req("POST", f"/api/v1/namespaces/{target.ns}/pods", pod_body("p"))
    assert r.status == 201, r.body
    listed = json.loads(await kubectl(target, "get", "pods", "-n", target.ns, "-o", "json"))
    assert listed["kind"] == "List" or listed["kind"] == "PodList"
    assert [p["metadata"]["name"] for p in listed["items"]] == ["p"]
    assert listed["items"][0]["spec"]["schedulerName"] == "default-scheduler"


async def test_create_from_a_manifest_then_delete(target, tmp_path: Path):
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump(pod_body("from-file", labels={"app": "kubectl"})))
    out = await kubectl(target, "create", "-n", target.ns, "-f", str(manifest))
    assert "pod/from-file created" in out
    r = await target.req("GET", f"/api/v1/namespaces/{target.ns}/pods/from-file")
    assert r.status == 200 and r.body["metadata"]["labels"] == {"app": "kubectl"}, r.body

    out = await kubectl(target, "delete", "pod", "from-file", "-n", target.ns, "--wait=true")
    assert 'pod "from-file" deleted' in out
    r = await target.req("GET", f"/api/v1/namespaces/{target.ns}/pods/from-file")
    assert r.status == 404, r.body


async def test_get_raw_version(target):
    version = json.loads(await kubectl(target, "get", "--raw", "/version"))
    assert version["major"] == "1" and version["gitVersion"].startswith("v1.")


async def test_api_resources_lists_what_the_scheduler_needs(target):
    out = await kubectl(target, "api-resources", "-o", "name")
    names = set(out.split())
    assert {"pods", "nodes", "namespaces", "events", "leases.coordination.k8s.io",
            "priorityclasses.scheduling.k8s.io", "poddisruptionbudgets.policy",
            "podgroups.scheduling.x-k8s.io", "events.events.k8s.io", "services", "replicationcontrollers",
            "replicasets.apps", "statefulsets.apps"} <= names, sorted(names)
