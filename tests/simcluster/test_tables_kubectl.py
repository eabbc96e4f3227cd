"""Real ``kubectl get`` prints the server's Table columns, against the stand-in as against kube-apiserver.

kubectl asks for ``as=Table`` and prints whatever columns and cells come
back; before the stand-in answered Tables it printed only NAME and AGE. These
tests run the kubectl binary itself and read its output the way a person
would, column by column under the header.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.simcluster.conftest import Target, pod_body
from tests.simcluster.test_services_and_controllers import CONTROLLERS, SERVICE, service_body

pytestmark = pytest.mark.asyncio(loop_scope="session")

if shutil.which("kubectl") is None:
    pytest.skip("kubectl is not on PATH: these tests run the real kubectl binary", allow_module_level=True)

CRD = Path(__file__).resolve().parents[2] / "manifests" / "crds" / "scheduling.x-k8s.io_podgroups.yaml"
KUBECTL_TIMEOUT = 30.0


async def kubectl(target: Target, tmp_path: Path, *args: str, timeout: float = KUBECTL_TIMEOUT) -> str:
    """Run kubectl against the target in its namespace; its stdout, or fail with its stderr."""
    proc = await asyncio.create_subprocess_exec(
        shutil.which("kubectl") or "kubectl", "--kubeconfig", str(target.kubeconfig), "--cache-dir",
        str(tmp_path / "kube-cache"), "-n", target.ns, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode == 0, f"kubectl {' '.join(args)} failed: {err.decode()}"
    return out.decode()


def columns(header: str) -> list[tuple[str, int]]:
    """Header names and where each starts (a name may hold single spaces: NOMINATED NODE)."""
    return [(m.group(), m.start()) for m in re.finditer(r"\S+(?: \S+)*", header)]


def parse(text: str) -> list[dict[str, str]]:
    """kubectl's aligned table as rows of {HEADER: cell}; cells start under their header."""
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines, "kubectl printed nothing"
    cols = columns(lines[0])
    rows = []
    for line in lines[1:]:
        row = {}
        for i, (name, start) in enumerate(cols):
            end = cols[i + 1][1] if i + 1 < len(cols) else len(line)
            row[name] = line[start:end].strip()
        rows.append(row)
    return rows


async def wait_for(check, what: str, timeout: float = 10.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = await check()
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def test_get_pods_wide_shows_a_bound_pods_status_and_node(target, tmp_path):
    target.only_sim("the node agent starts bound pods; a real apiserver has no kubelet")
    [node] = await target.make_nodes(1)
    r = await target.req("POST", f"/api/v1/namespaces/{target.ns}/pods", pod_body("web"))
    assert r.status == 201, r.body
    r = await target.req("POST", f"/api/v1/namespaces/{target.ns}/pods/web/binding",
                         {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "web"},
                          "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
    assert r.status == 201, r.body

    async def running() -> dict[str, Any] | None:
        got = await target.req("GET", f"/api/v1/namespaces/{target.ns}/pods/web")
        ok = got.body["status"].get("phase") == "Running" and got.body["status"].get("podIP")
        return got.body if ok else None

    obj = await wait_for(running, "the node agent to start the pod")

    text = await kubectl(target, tmp_path, "get", "pods", "-o", "wide")
    assert [name for name, _ in columns(text.splitlines()[0])] == [
        "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES"]
    [row] = parse(text)
    assert row["NAME"] == "web"
    assert row["READY"] == "1/1"
    assert row["STATUS"] == "Running"
    assert row["RESTARTS"] == "0"
    assert row["IP"] == obj["status"]["podIP"]
    assert row["NODE"] == node
    assert row["NOMINATED NODE"] == "<none>"

    # without -o wide kubectl hides the priority-1 columns
    narrow = await kubectl(target, tmp_path, "get", "pods")
    assert [name for name, _ in columns(narrow.splitlines()[0])] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]


async def test_get_pods_shows_pending_and_scheduling_gated(target, tmp_path):
    r = await target.req("POST", f"/api/v1/namespaces/{target.ns}/pods", pod_body("waiting"))
    assert r.status == 201, r.body
    r = await target.req("POST", f"/api/v1/namespaces/{target.ns}/pods",
                         pod_body("gated", schedulingGates=[{"name": "example.com/hold"}]))
    assert r.status == 201, r.body
    rows = {row["NAME"]: row for row in parse(await kubectl(target, tmp_path, "get", "pods"))}
    assert rows["waiting"]["STATUS"] == "Pending"
    assert rows["gated"]["STATUS"] == "SchedulingGated"
    assert rows["gated"]["READY"] == "0/1"


async def test_get_nodes_shows_ready_roles_and_cordoned(target, tmp_path):
    ready, cordoned = await target.make_nodes(2, labels={"node-role.kubernetes.io/worker": ""})
    r = await target.req("PATCH", f"/api/v1/nodes/{cordoned}", {"spec": {"unschedulable": True}},
                         content_type="application/merge-patch+json")
    assert r.status == 200, r.body
    text = await kubectl(target, tmp_path, "get", "nodes", ready, cordoned)
    assert [name for name, _ in columns(text.splitlines()[0])] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    rows = {row["NAME"]: row for row in parse(text)}
    assert rows[ready]["STATUS"] == "Ready"
    assert rows[cordoned]["STATUS"] == "Ready,SchedulingDisabled"
    assert rows[ready]["ROLES"] == "worker"


async def test_get_podgroups_shows_the_crd_printer_columns(target, tmp_path):
    crd = yaml.safe_load(CRD.read_text())
    printer = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")["additionalPrinterColumns"]
    base = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{target.ns}/podgroups"
    r = await target.req("POST", base, {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                                        "metadata": {"name": "gang"}, "spec": {"minMember": 3}})
    assert r.status == 201, r.body
    r = await target.req("PATCH", f"{base}/gang/status", {"status": {"phase": "Scheduling", "scheduled": 2}},
                         content_type="application/merge-patch+json")
    assert r.status == 200, r.body

    # qualified: both servers here also serve scheduling.k8s.io/v1alpha2 PodGroups, which a bare
    # "podgroups" names (a built-in group wins over a CRD); the short name "pg" is the CRD's alone
    text = await kubectl(target, tmp_path, "get", "podgroups.scheduling.x-k8s.io")
    assert [name for name, _ in columns(text.splitlines()[0])] == \
        ["NAME"] + [c["name"].upper() for c in printer if not c.get("priority")]
    [row] = parse(text)
    assert (row["NAME"], row["PHASE"], row["MINMEMBER"], row["SCHEDULED"]) == ("gang", "Scheduling", "3", "2")
    assert re.fullmatch(r"\d+s", row["AGE"]), row["AGE"]

    wide = await kubectl(target, tmp_path, "get", "pg", "-o", "wide")
    assert [name for name, _ in columns(wide.splitlines()[0])] == \
        ["NAME"] + [c["name"].upper() for c in printer]


async def test_get_pods_watch_prints_a_row_per_event(target, tmp_path):
    r = await target.req("POST", f"/api/v1/namespaces/{target.ns}/pods", pod_body("first"))
    assert r.status == 201, r.body
    proc = await asyncio.create_subprocess_exec(
        shutil.which("kubectl") or "kubectl", "--kubeconfig", str(target.kubeconfig), "--cache-dir",
        str(tmp_path / "kube-cache"), "-n", target.ns, "get", "pods", "-w", "--request-timeout=60s",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    lines: list[str] = []

    async def read_until(name: str) -> None:
        assert proc.stdout is not None
        while not any(line.split()[:1] == [name] for line in lines[1:]):
            raw = await proc.stdout.readline()
            if not raw:
                err = await proc.stderr.read() if proc.stderr else b""
                pytest.fail(f"kubectl get -w ended early: {err.decode()}")
            lines.append(raw.decode().rstrip("\n"))

    try:
        await asyncio.wait_for(read_until("first"), KUBECTL_TIMEOUT)  # from the list
        r = await target.req("POST", f"/api/v1/namespaces/{target.ns}/pods", pod_body("second"))
        assert r.status == 201, r.body
        await asyncio.wait_for(read_until("second"), KUBECTL_TIMEOUT)  # from a watch event
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
    header = [name for name, _ in columns(lines[0])]
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    # each watch event is printed on its own, so its cells need not line up with the header
    rows = {cells[0]: dict(zip(header, cells)) for cells in (line.split() for line in lines[1:])}
    assert rows["first"]["STATUS"] == "Pending"
    assert rows["second"]["READY"] == "0/1"
    assert rows["second"]["STATUS"] == "Pending"


async def _replicas(t: Target, prefix: str, resource: str, name: str, want: int) -> bool:
    r = await t.req("GET", f"{prefix}/namespaces/{t.ns}/{resource}/{name}")
    assert r.status == 200, r.body
    return r.body["status"].get("replicas", 0) == want


async def test_get_services_and_controllers_wide_shows_upstreams_columns(target, tmp_path):
    r = await target.req("POST", SERVICE.collection(target), service_body("web"))
    assert r.status == 201, r.body
    for kind in CONTROLLERS:
        body = kind.body("web")
        body["spec"]["replicas"] = 2
        r = await target.req("POST", kind.collection(target), body)
        assert r.status == 201, r.body

    async def table(resource: str) -> tuple[list[str], dict[str, str]]:
        text = await kubectl(target, tmp_path, "get", resource, "-o", "wide")
        [row] = parse(text)
        return [name for name, _ in columns(text.splitlines()[0])], row

    header, row = await table("services")
    assert header == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR"]
    assert (row["TYPE"], row["EXTERNAL-IP"], row["PORT(S)"], row["SELECTOR"]) == \
        ("ClusterIP", "<none>", "80/TCP", "app=web")
    # no ReplicationController controller runs; a ReplicaSet one does (its pods are current, and none is
    # scheduled, so none is ready)
    replica_set_pods = "2" if "replicaset-controller" in target.controllers else "0"
    await wait_for(lambda: _replicas(target, "/apis/apps/v1", "replicasets", "web", int(replica_set_pods)),
                   "the ReplicaSet's status to count its pods")
    for resource, current in (("replicationcontrollers", "0"), ("replicasets", replica_set_pods)):
        header, row = await table(resource)
        assert header == ["NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
        assert (row["DESIRED"], row["CURRENT"], row["READY"], row["CONTAINERS"], row["IMAGES"], row["SELECTOR"]) == \
            ("2", current, "0", "app", "registry.k8s.io/pause:3.10", "app=web")
    header, row = await table("statefulsets")
    assert header == ["NAME", "READY", "AGE", "CONTAINERS", "IMAGES"]
    assert (row["READY"], row["CONTAINERS"]) == ("0/2", "app")


async def test_get_the_csi_kinds_shows_upstreams_columns(target, tmp_path):
    # cluster-scoped: names carry the namespace, and the rows are picked by name
    names = {k: f"{target.ns}-{k}" for k in ("node", "driver", "va")}
    bodies = {
        "csinodes": {"metadata": {"name": names["node"]}, "spec": {"drivers": [
            {"name": "a.example.com", "nodeID": "n"}, {"name": "b.example.com", "nodeID": "n"}]}},
        "csidrivers": {"metadata": {"name": f"{names['driver']}.example.com"},
                       "spec": {"attachRequired": False, "podInfoOnMount": True, "storageCapacity": True,
                                "tokenRequests": [{"audience": "vault"}], "requiresRepublish": False,
                                "volumeLifecycleModes": ["Persistent", "Ephemeral"]}},
        "volumeattachments": {"metadata": {"name": names["va"]},
                              "spec": {"attacher": "a.example.com", "nodeName": "n",
                                       "source": {"persistentVolumeName": "pv-1"}}},
    }
    for plural, body in bodies.items():
        r = await target.req("POST", f"/apis/storage.k8s.io/v1/{plural}", body)
        assert r.status == 201, r.body

    async def row(resource: str, name: str) -> tuple[list[str], dict[str, str]]:
        text = await kubectl(target, tmp_path, "get", resource, name)
        [got] = parse(text)
        return [n for n, _ in columns(text.splitlines()[0])], got

    header, got = await row("csinodes", names["node"])
    assert (header, got["DRIVERS"]) == (["NAME", "DRIVERS", "AGE"], "2")
    header, got = await row("csidrivers", f"{names['driver']}.example.com")
    assert header == ["NAME", "ATTACHREQUIRED", "PODINFOONMOUNT", "STORAGECAPACITY", "TOKENREQUESTS",
                      "REQUIRESREPUBLISH", "MODES", "AGE"]
    assert [got[c] for c in header[1:-1]] == ["false", "true", "true", "vault", "false", "Persistent,Ephemeral"]
    header, got = await row("volumeattachments", names["va"])
    assert header == ["NAME", "ATTACHER", "PV", "NODE", "ATTACHED", "AGE"]
    assert [got[c] for c in header[1:-1]] == ["a.example.com", "pv-1", "n", "false"]
    for plural, body in bodies.items():
        await target.req("DELETE", f"/apis/storage.k8s.io/v1/{plural}/{body['metadata']['name']}")
