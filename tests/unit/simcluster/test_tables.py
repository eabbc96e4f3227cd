"""Tests for bench/simcluster/tables.py: Table responses print what kube-apiserver prints.

Expected cells are what ``pkg/printers/internalversion`` produces for the same
object (the STATUS reasoning of printPod, the node's Ready/SchedulingDisabled,
``duration.HumanDuration``), because kubectl prints the server's cells verbatim.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from bench.simcluster import errors, tables
from bench.simcluster.resources import RESOURCES, ResourceType, lookup
from bench.simcluster.tables import (
    human_duration,
    include_object_option,
    negotiate,
    node_roles,
    node_status,
    pod_status,
    render_table,
    wants_table,
)

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
CREATED = "2025-12-31T23:55:00Z"  # five minutes before NOW
KUBECTL_ACCEPT = ("application/json;as=Table;v=v1;g=meta.k8s.io,"
                  "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")

PODS = lookup("", "v1", "pods")
NODES = lookup("", "v1", "nodes")
PODGROUPS = lookup("scheduling.x-k8s.io", "v1alpha1", "podgroups")
EVENTS_V1 = lookup("events.k8s.io", "v1", "events")
CRD = Path(__file__).resolve().parents[3] / "manifests" / "crds" / "scheduling.x-k8s.io_podgroups.yaml"


def pod(*, phase: str = "Pending", node: str = "", containers: int = 1, **status: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": "default", "uid": "u1", "resourceVersion": "7",
                     "creationTimestamp": CREATED, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": f"c{i}", "image": "nginx"} for i in range(containers)]},
        "status": {"phase": phase, **status},
    }
    if node:
        obj["spec"]["nodeName"] = node
    return obj


def running(name: str = "c0", ready: bool = True, restarts: int = 0, **extra: Any) -> dict[str, Any]:
    return {"name": name, "ready": ready, "restartCount": restarts, "started": True,
            "state": {"running": {"startedAt": CREATED}}, **extra}


def node(*, ready: str | None = "True", unschedulable: bool = False,
         labels: dict[str, str] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": "n1", "creationTimestamp": CREATED, "labels": labels or {}},
                           "spec": {}, "status": {"nodeInfo": {"kubeletVersion": "v1.34.0"}}}
    if ready is not None:
        obj["status"]["conditions"] = [{"type": "MemoryPressure", "status": "False"},
                                       {"type": "Ready", "status": ready}]
    if unschedulable:
        obj["spec"]["unschedulable"] = True
    return obj


# ---------------------------------------------------------------------------- negotiation

@pytest.mark.parametrize("accept, expected", [
    pytest.param(KUBECTL_ACCEPT, "meta.k8s.io/v1", id="kubectl's header gets a v1 table"),
    pytest.param("application/json;as=Table;v=v1beta1;g=meta.k8s.io", "meta.k8s.io/v1beta1",
                 id="a v1beta1 table is answered in v1beta1"),
    pytest.param("application/json", None, id="plain json gets the object"),
    pytest.param("", None, id="no accept header gets the object"),
    pytest.param("*/*", None, id="a wildcard gets the object"),
    pytest.param("application/json;as=Table;v=v2;g=meta.k8s.io", None, id="an unknown table version is not a table"),
    pytest.param("application/json;as=Table;v=v1", None, id="a table without its group is not a table"),
    pytest.param("application/json;as=Table;v=v1;g=example.com", None, id="a table of another group is not a table"),
    pytest.param("application/json;as=Table;v=v2;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io",
                 "meta.k8s.io/v1beta1", id="an unacceptable clause is skipped for the next"),
    pytest.param("application/json, application/json;as=Table;v=v1;g=meta.k8s.io", None,
                 id="the first acceptable clause wins"),
    pytest.param("application/json;q=0.5, application/json;as=Table;v=v1;g=meta.k8s.io", "meta.k8s.io/v1",
                 id="a higher q wins over the order"),
    pytest.param("application/json;as=Table;v=v1;g=meta.k8s.io;q=0", None, id="q zero refuses the clause"),
    pytest.param("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io", None,
                 id="a protobuf table is never served"),
])
def test_negotiation_asks_for_a_table_only_when_the_accept_header_does(accept, expected):
    assert negotiate(accept) == expected
    assert wants_table(accept) is (expected is not None)


@pytest.mark.parametrize("value, expected", [
    pytest.param(None, "", id="no includeObject means metadata"),
    pytest.param("Metadata", "Metadata", id="metadata is accepted"),
    pytest.param("Object", "Object", id="object is accepted"),
    pytest.param("None", "None", id="none is accepted"),
])
def test_include_object_option_accepts_upstream_values(value, expected):
    assert include_object_option({} if value is None else {"includeObject": value}) == expected


def test_include_object_option_rejects_other_values_with_upstreams_400():
    with pytest.raises(errors.APIError) as exc:
        include_object_option({"includeObject": "Everything"})
    assert exc.value.code == 400
    assert exc.value.message == ("Unable to convert to Table as requested: includeObject: Invalid value: "
                                 "\"Everything\": must be 'Metadata', 'Object', 'None', or empty")


# ---------------------------------------------------------------------------- HumanDuration

@pytest.mark.parametrize("seconds, expected", [
    pytest.param(-3, "<invalid>", id="more than a second in the future is invalid"),
    pytest.param(-1.5, "0s", id="a second of clock skew is now"),
    pytest.param(0, "0s", id="now is zero seconds"),
    pytest.param(5, "5s", id="five seconds"),
    pytest.param(119.9, "119s", id="seconds up to two minutes"),
    pytest.param(120, "2m", id="two minutes"),
    pytest.param(182, "3m2s", id="minutes and seconds under ten minutes"),
    pytest.param(540, "9m", id="whole minutes drop the seconds"),
    pytest.param(600, "10m", id="ten minutes drop the seconds"),
    pytest.param(179 * 60 + 59, "179m", id="minutes up to three hours"),
    pytest.param(3 * 3600, "3h", id="three hours"),
    pytest.param(5 * 3600, "5h", id="five hours"),
    pytest.param(5 * 3600 + 30 * 60, "5h30m", id="hours and minutes under eight hours"),
    pytest.param(8 * 3600 + 59 * 60, "8h", id="eight hours drop the minutes"),
    pytest.param(47 * 3600, "47h", id="hours up to two days"),
    pytest.param(3 * 86400, "3d", id="three days"),
    pytest.param(3 * 86400 + 4 * 3600, "3d4h", id="days and hours under eight days"),
    pytest.param(8 * 86400 + 5 * 3600, "8d", id="eight days drop the hours"),
    pytest.param(400 * 86400, "400d", id="days up to two years"),
    pytest.param(730 * 86400, "2y", id="two years"),
    pytest.param(740 * 86400, "2y10d", id="years and days under eight years"),
    pytest.param(9 * 365 * 86400 + 100 * 86400, "9y", id="years only from eight years on"),
])
def test_human_duration_formats_like_upstream(seconds, expected):
    assert human_duration(seconds) == expected


# ---------------------------------------------------------------------------- Pod

def _gated() -> dict[str, Any]:
    p = pod(conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}])
    p["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    return p


def _terminating() -> dict[str, Any]:
    p = pod(phase="Running", node="n1", containerStatuses=[running()],
            conditions=[{"type": "Ready", "status": "True"}])
    p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:30Z"
    return p


def _terminating_succeeded() -> dict[str, Any]:
    p = pod(phase="Succeeded", node="n1", containerStatuses=[
        {"name": "c0", "ready": False, "restartCount": 0,
         "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}])
    p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:30Z"
    return p


def _node_lost() -> dict[str, Any]:
    p = pod(phase="Running", node="n1", reason="NodeLost", containerStatuses=[running()])
    p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:30Z"
    return p


def _crashloop() -> dict[str, Any]:
    return pod(phase="Running", node="n1", containerStatuses=[
        {"name": "c0", "ready": False, "restartCount": 4,
         "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
         "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "2025-12-31T23:58:00Z"}}}])


def _init_waiting() -> dict[str, Any]:
    p = pod(node="n1", initContainerStatuses=[
        {"name": "init", "ready": False, "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff"}}}])
    p["spec"]["initContainers"] = [{"name": "init", "image": "busybox"}]
    return p


def _init_running() -> dict[str, Any]:
    p = pod(node="n1", initContainerStatuses=[
        {"name": "a", "ready": True, "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
        {"name": "b", "ready": False, "restartCount": 0, "state": {"running": {}}}])
    p["spec"]["initContainers"] = [{"name": "a", "image": "busybox"}, {"name": "b", "image": "busybox"}]
    return p


def _sidecar() -> dict[str, Any]:
    p = pod(phase="Running", node="n1", containerStatuses=[running()],
            initContainerStatuses=[{"name": "proxy", "ready": True, "started": True, "restartCount": 1,
                                    "state": {"running": {}}}],
            conditions=[{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}])
    p["spec"]["initContainers"] = [{"name": "proxy", "image": "envoy", "restartPolicy": "Always"}]
    return p


@pytest.mark.parametrize("obj, status, ready, restarts", [
    pytest.param(pod(), "Pending", "0/1", "0", id="a created pod is pending"),
    pytest.param(_gated(), "SchedulingGated", "0/1", "0", id="a pending gated pod is scheduling gated"),
    pytest.param(pod(phase="Running", node="n1", containers=2, containerStatuses=[running("c0"), running("c1")]),
                 "Running", "2/2", "0", id="a running pod counts its ready containers"),
    pytest.param(pod(phase="Running", node="n1", containerStatuses=[running(ready=False)]),
                 "Running", "0/1", "0", id="a running pod that is not ready shows zero ready"),
    pytest.param(_terminating(), "Terminating", "1/1", "0", id="a terminating pod is terminating"),
    pytest.param(_terminating_succeeded(), "Completed", "0/1", "0",
                 id="a deleted pod that already succeeded stays completed"),
    pytest.param(_node_lost(), "Unknown", "1/1", "0", id="a deleted pod on a lost node is unknown"),
    pytest.param(_crashloop(), "CrashLoopBackOff", "0/1", "4 (2m ago)",
                 id="a crashloop shows the waiting reason and the last restart"),
    pytest.param(pod(phase="Failed", node="n1", containerStatuses=[
        {"name": "c0", "ready": False, "restartCount": 0, "state": {"terminated": {"exitCode": 137}}}]),
        "ExitCode:137", "0/1", "0", id="a terminated container without reason shows its exit code"),
    pytest.param(pod(phase="Failed", node="n1", containerStatuses=[
        {"name": "c0", "ready": False, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "signal": 9}}}]),
        "Signal:9", "0/1", "0", id="a container killed by a signal shows the signal"),
    pytest.param(pod(phase="Failed", reason="Evicted"), "Evicted", "0/1", "0",
                 id="a pod reason replaces the phase"),
    pytest.param(_init_waiting(), "Init:ImagePullBackOff", "0/1", "0",
                 id="an init container's waiting reason is prefixed with init"),
    pytest.param(_init_running(), "Init:1/2", "0/1", "0", id="a running init container shows init progress"),
    pytest.param(_sidecar(), "Running", "2/2", "1", id="a started sidecar counts as a container"),
])
def test_pod_status_is_computed_as_upstream(obj, status, ready, restarts):
    cells = tables.printer_for(PODS).cells(obj, NOW)
    assert cells[1:4] == [ready, status, restarts]
    assert pod_status(obj)[0] == status


def test_pod_wide_cells_show_ip_node_nomination_and_readiness_gates():
    p = pod(phase="Running", node="n1", containerStatuses=[running()], podIP="10.0.0.9",
            podIPs=[{"ip": "10.0.0.9"}], nominatedNodeName="n2",
            conditions=[{"type": "example.com/lb", "status": "True"}])
    p["spec"]["readinessGates"] = [{"conditionType": "example.com/lb"}, {"conditionType": "example.com/dns"}]
    assert tables.printer_for(PODS).cells(p, NOW) == ["web-0", "1/1", "Running", "0", "5m",
                                                      "10.0.0.9", "n1", "n2", "1/2"]


def test_pod_wide_cells_of_a_pending_pod_are_none():
    assert tables.printer_for(PODS).cells(pod(), NOW)[5:] == ["<none>", "<none>", "<none>", "<none>"]


def test_pod_columns_are_upstreams_with_wide_ones_at_priority_one():
    cols = [(c.name, c.type, c.format, c.priority) for c in tables.POD_COLUMNS]
    assert cols == [("Name", "string", "name", 0), ("Ready", "string", "", 0), ("Status", "string", "", 0),
                    ("Restarts", "string", "", 0), ("Age", "string", "", 0), ("IP", "string", "", 1),
                    ("Node", "string", "", 1), ("Nominated Node", "string", "", 1),
                    ("Readiness Gates", "string", "", 1)]


@pytest.mark.parametrize("phase, conditions", [
    pytest.param("Succeeded", [{"type": "Completed", "status": "True", "reason": "Succeeded",
                                "message": "The pod has completed successfully."}], id="a succeeded pod's row is completed"),
    pytest.param("Failed", [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}],
                 id="a failed pod's row is completed"),
    pytest.param("Running", None, id="a running pod's row has no conditions"),
])
def test_finished_pods_carry_the_completed_row_condition(phase, conditions):
    row = render_table(PODS, [pod(phase=phase)], "7", "", NOW)["rows"][0]
    assert row.get("conditions") == conditions


# ---------------------------------------------------------------------------- Node

@pytest.mark.parametrize("obj, expected", [
    pytest.param(node(), "Ready", id="a ready node is ready"),
    pytest.param(node(ready="False"), "NotReady", id="a node whose kubelet is not ready is not ready"),
    pytest.param(node(ready="Unknown"), "NotReady", id="a node with an unknown ready condition is not ready"),
    pytest.param(node(ready=None), "Unknown", id="a node without a ready condition is unknown"),
    pytest.param(node(unschedulable=True), "Ready,SchedulingDisabled", id="a cordoned node is scheduling disabled"),
    pytest.param(node(ready="False", unschedulable=True), "NotReady,SchedulingDisabled",
                 id="a node not ready and cordoned says both"),
])
def test_node_status_is_computed_as_upstream(obj, expected):
    assert node_status(obj) == expected


@pytest.mark.parametrize("labels, expected", [
    pytest.param({}, "<none>", id="a node without role labels has none"),
    pytest.param({"node-role.kubernetes.io/control-plane": ""}, "control-plane", id="a role label names a role"),
    pytest.param({"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/infra": "true",
                  "kubernetes.io/role": "gpu"}, "gpu,infra,worker", id="roles are sorted and joined"),
    pytest.param({"node-role.kubernetes.io/": "", "kubernetes.io/role": ""}, "<none>",
                 id="an empty role name or legacy value is no role"),
])
def test_node_roles_come_from_role_labels(labels, expected):
    assert node_roles(node(labels=labels)) == expected


def test_node_cells_show_version_and_unknown_wide_fields():
    n = node()
    n["status"]["addresses"] = [{"type": "InternalIP", "address": "10.1.2.3"}, {"type": "Hostname", "address": "n1"}]
    assert tables.printer_for(NODES).cells(n, NOW) == ["n1", "Ready", "<none>", "5m", "v1.34.0", "10.1.2.3",
                                                       "<none>", "<unknown>", "<unknown>", "<unknown>"]


# ---------------------------------------------------------------------------- other built-in printers

def _obj(kind: str, name: str = "x", **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name, "creationTimestamp": CREATED, **fields.pop("meta", {})},
            **fields}


@pytest.mark.parametrize("group, plural, obj, expected", [
    pytest.param("", "namespaces", _obj("Namespace", status={"phase": "Active"}), ["x", "Active", "5m"],
                 id="a namespace shows its phase"),
    pytest.param("", "persistentvolumes",
                 _obj("PersistentVolume", spec={"capacity": {"storage": "1024Mi"},
                                                "accessModes": ["ReadOnlyMany", "ReadWriteOnce", "ReadWriteOnce"],
                                                "persistentVolumeReclaimPolicy": "Retain",
                                                "claimRef": {"namespace": "ns", "name": "data"},
                                                "storageClassName": "fast", "volumeMode": "Filesystem"},
                      status={"phase": "Bound"}),
                 ["x", "1Gi", "RWO,ROX", "Retain", "Bound", "ns/data", "fast", "<unset>", "", "5m", "Filesystem"],
                 id="a persistent volume shows canonical capacity and short access modes"),
    pytest.param("", "persistentvolumeclaims",
                 _obj("PersistentVolumeClaim", spec={"resources": {"requests": {"storage": "1Gi"}}},
                      status={"phase": "Pending"}),
                 ["x", "Pending", "", "", "", "", "<unset>", "5m", "<unset>"],
                 id="an unbound claim shows no capacity"),
    pytest.param("", "persistentvolumeclaims",
                 _obj("PersistentVolumeClaim", meta={"deletionTimestamp": CREATED,
                                                     "annotations": {"volume.beta.kubernetes.io/storage-class": "old"}},
                      spec={"volumeName": "pv1", "storageClassName": "fast"},
                      status={"phase": "Bound", "capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"]}),
                 ["x", "Terminating", "pv1", "2Gi", "RWO", "old", "<unset>", "5m", "<unset>"],
                 id="a deleted bound claim is terminating and the beta class annotation wins"),
    pytest.param("storage.k8s.io", "storageclasses",
                 _obj("StorageClass", meta={"annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                      provisioner="example.com/csi"),
                 ["x (default)", "example.com/csi", "Delete", "Immediate", False, "5m"],
                 id="the default storage class says so and policies default"),
    pytest.param("policy", "poddisruptionbudgets",
                 _obj("PodDisruptionBudget", spec={"maxUnavailable": "25%"}, status={"disruptionsAllowed": 2}),
                 ["x", "N/A", "25%", 2, "5m"], id="a disruption budget shows N/A for the unset bound"),
    pytest.param("scheduling.k8s.io", "priorityclasses",
                 _obj("PriorityClass", value=1000, globalDefault=True, preemptionPolicy="Never"),
                 ["x", 1000, True, "5m", "Never"], id="a priority class shows its value and policy"),
    pytest.param("coordination.k8s.io", "leases", _obj("Lease", spec={"holderIdentity": "tandem-0"}),
                 ["x", "tandem-0", "5m"], id="a lease shows its holder"),
    pytest.param("", "events",
                 _obj("Event", involvedObject={"kind": "Pod", "name": "web-0", "fieldPath": "spec.containers{c}"},
                      reason="Scheduled", message=" assigned web-0 to n1 \n", type="Normal",
                      source={"component": "tandem"}, reportingInstance="tandem-0",
                      firstTimestamp="2025-12-31T23:00:00Z", lastTimestamp=CREATED, count=3),
                 ["5m", "Normal", "Scheduled", "pod/web-0", "spec.containers{c}", "tandem, tandem-0",
                  "assigned web-0 to n1", "60m", 3, "x"], id="an event shows its object, source and counts"),
    pytest.param("", "events",
                 _obj("Event", involvedObject={"kind": "Node"}, reason="Ready", type="Normal",
                      eventTime="2025-12-31T23:57:00.000000Z", reportingComponent="kubelet",
                      firstTimestamp=None, lastTimestamp=None),
                 ["3m", "Normal", "Ready", "node", "", "kubelet", "", "3m", 1, "x"],
                 id="a new-style event uses its event time and counts one"),
    pytest.param("", "services",
                 _obj("Service", spec={"type": "LoadBalancer", "clusterIPs": ["10.0.0.7"],
                                       "externalIPs": ["198.51.100.1"], "selector": {"b": "2", "a": "1"},
                                       "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"},
                                                 {"port": 53, "protocol": "UDP"}]},
                      status={"loadBalancer": {"ingress": [{"ip": "192.0.2.2"}, {"hostname": "lb.example.com"},
                                                           {"ip": "192.0.2.2"}]}}),
                 ["x", "LoadBalancer", "10.0.0.7", "192.0.2.2,lb.example.com,198.51.100.1", "80:30080/TCP,53/UDP",
                  "5m", "a=1,b=2"],
                 id="a load balancer shows its addresses then the external IPs, node ports and sorted selector"),
    pytest.param("", "services", _obj("Service", spec={"type": "LoadBalancer", "ports": []}, status={}),
                 ["x", "LoadBalancer", "<none>", "<pending>", "<none>", "5m", "<none>"],
                 id="a load balancer without an address is pending"),
    pytest.param("", "services", _obj("Service", spec={"type": "ExternalName", "externalName": "db.example.com"}),
                 ["x", "ExternalName", "<none>", "db.example.com", "<none>", "5m", "<none>"],
                 id="an external name service shows the name it points at"),
    pytest.param("", "replicationcontrollers",
                 _obj("ReplicationController", spec={"replicas": 3, "selector": {"app": "web"},
                                                     "template": {"spec": {"containers": [
                                                         {"name": "a", "image": "i1"}, {"name": "b", "image": "i2"}]}}},
                      status={"replicas": 2, "readyReplicas": 1}),
                 ["x", 3, 2, 1, "5m", "a,b", "i1,i2", "app=web"],
                 id="a replication controller shows desired, current and ready with its containers"),
    pytest.param("apps", "replicasets",
                 _obj("ReplicaSet", spec={"replicas": 1, "selector": {
                     "matchLabels": {"app": "web"},
                     "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]}}),
                 ["x", 1, 0, 0, "5m", "", "", "app=web,tier in (a,b)"],
                 id="a replica set prints its label selector as upstream's selector string"),
    pytest.param("apps", "replicasets", _obj("ReplicaSet", spec={"selector": {}}),
                 ["x", 0, 0, 0, "5m", "", "", "<none>"], id="a replica set selecting everything shows none"),
    pytest.param("apps", "statefulsets",
                 _obj("StatefulSet", spec={"replicas": 3, "template": {"spec": {"containers": [
                     {"name": "db", "image": "postgres"}]}}}, status={"readyReplicas": 2}),
                 ["x", "2/3", "5m", "db", "postgres"], id="a stateful set shows ready of desired"),
])
def test_builtin_printers_fill_upstreams_cells(group, plural, obj, expected):
    rt = next(r for r in RESOURCES if r.group == group and r.plural == plural)
    printer = tables.printer_for(rt)
    assert printer.cells(obj, NOW) == expected
    assert len(printer.columns) == len(expected)


def test_events_k8s_io_events_print_like_core_events():
    core = _obj("Event", involvedObject={"kind": "Pod", "name": "web-0"}, reason="Scheduled", type="Normal",
                message="ok", firstTimestamp=CREATED, lastTimestamp=CREATED, count=2,
                source={"component": "tandem"})
    core["apiVersion"] = "v1"
    view = EVENTS_V1.to_view(copy.deepcopy(core))
    table = render_table(EVENTS_V1, [view], "9", "Object", NOW)
    assert table["rows"][0]["cells"] == tables.printer_for(lookup("", "v1", "events")).cells(core, NOW)
    assert table["rows"][0]["object"]["apiVersion"] == "events.k8s.io/v1"


# ---------------------------------------------------------------------------- custom resources and the default

def _podgroup(**status: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "gang", "namespace": "default", "creationTimestamp": CREATED},
            "spec": {"minMember": 3}, "status": status}


def _crd_columns() -> list[dict[str, Any]]:
    crd = yaml.safe_load(CRD.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")
    return version["additionalPrinterColumns"]


def test_podgroup_columns_are_the_crds_printer_columns():
    cols = tables.printer_for(PODGROUPS).definitions()
    expected = [("Name", "string", "name", 0)] + [
        (c["name"], c["type"], c.get("format", ""), c.get("priority", 0)) for c in _crd_columns()]
    assert [(c["name"], c["type"], c["format"], c["priority"]) for c in cols] == expected
    assert all(c["description"] for c in cols)


def test_podgroup_cells_follow_the_json_paths_with_missing_values_null():
    cells = tables.printer_for(PODGROUPS).cells(_podgroup(phase="Running", scheduled=3, running=2), NOW)
    by_name = dict(zip([c.name for c in tables.printer_for(PODGROUPS).columns], cells))
    assert by_name["Name"] == "gang"
    assert by_name["Phase"] == "Running"
    assert by_name["MinMember"] == 3
    assert by_name["Scheduled"] == 3
    assert by_name["Failed"] is None  # absent: null, which kubectl prints blank
    assert by_name["Age"] == "5m"


@pytest.mark.parametrize("col_type, value, expected", [
    pytest.param("string", "Running", "Running", id="a string stays a string"),
    pytest.param("string", 3, "3", id="a number in a string column is printed"),
    pytest.param("string", 2.0, "2", id="a whole float prints without a decimal point"),
    pytest.param("string", True, "true", id="a boolean prints as go prints it"),
    pytest.param("string", {"a": 1}, '{"a":1}', id="a map prints as json"),
    pytest.param("integer", 2.7, 2, id="a float in an integer column is truncated"),
    pytest.param("integer", "3", None, id="a string in an integer column is null"),
    pytest.param("integer", True, None, id="a boolean in an integer column is null"),
    pytest.param("number", 3, 3.0, id="an integer in a number column is a float"),
    pytest.param("boolean", "true", None, id="a string in a boolean column is null"),
    pytest.param("date", "2025-12-31T19:00:00Z", "5h", id="a date is an age"),
    pytest.param("date", "yesterday", "<invalid>", id="an unparsable date is invalid"),
])
def test_crd_cells_convert_values_to_the_column_type(col_type, value, expected):
    printer = tables.crd_printer([{"name": "X", "type": col_type, "jsonPath": ".spec.x"}])
    assert printer.cells({"metadata": {"name": "a"}, "spec": {"x": value}}, NOW) == ["a", expected]


def test_crd_version_without_printer_columns_shows_age():
    printer = tables.crd_printer([])
    assert [c.name for c in printer.columns] == ["Name", "Age"]
    assert printer.cells(_podgroup(), NOW) == ["gang", "5m"]


def test_a_resource_without_a_printer_gets_name_and_created_at():
    rt = ResourceType("example.com", "v1", "widgets", "Widget", True)
    table = render_table(rt, [{"metadata": {"name": "w", "creationTimestamp": CREATED}}], "3", "", NOW)
    assert [(c["name"], c["type"]) for c in table["columnDefinitions"]] == [("Name", "string"),
                                                                           ("Created At", "date")]
    assert table["rows"][0]["cells"] == ["w", CREATED]


# ---------------------------------------------------------------------------- the Table

def test_table_carries_kind_metadata_columns_and_partial_metadata_rows():
    table = render_table(PODS, [pod(), pod(phase="Running")], "42", "", NOW, cont="tok", remaining=5)
    assert table["kind"] == "Table"
    assert table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": "42", "continue": "tok", "remainingItemCount": 5}
    assert [c["name"] for c in table["columnDefinitions"]][:5] == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert len(table["rows"]) == 2
    assert all(len(r["cells"]) == len(table["columnDefinitions"]) for r in table["rows"])
    assert table["rows"][0]["object"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                          "metadata": pod()["metadata"]}
    orjson.dumps(table)  # serializable as is


@pytest.mark.parametrize("include, expected", [
    pytest.param("", "PartialObjectMetadata", id="the default row object is partial metadata"),
    pytest.param("Metadata", "PartialObjectMetadata", id="metadata gives partial metadata"),
    pytest.param("Object", "Pod", id="object gives the whole object"),
    pytest.param("None", None, id="none gives a null object"),
])
def test_include_object_decides_what_each_row_carries(include, expected):
    obj = render_table(PODS, [pod()], "7", include, NOW)["rows"][0]["object"]
    assert (obj and obj["kind"]) == expected


def test_a_table_without_headers_has_null_column_definitions():
    table = render_table(PODS, [pod()], "7", "", NOW, headers=False, api_version="meta.k8s.io/v1beta1")
    assert table["columnDefinitions"] is None
    assert table["apiVersion"] == "meta.k8s.io/v1beta1"
    assert table["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"


def test_an_empty_list_is_a_table_with_columns_and_no_rows():
    table = render_table(PODS, [], "5", "", NOW)
    assert table["rows"] == [] and len(table["columnDefinitions"]) == 9


class _Resp:
    def __init__(self) -> None:
        self.data = b""
        self.eof = False

    async def write(self, data: bytes) -> None:
        self.data += data

    async def write_eof(self) -> None:
        self.eof = True


def test_watch_events_become_one_row_tables_with_headers_only_first():
    resp = _Resp()
    writer = tables.TableRequest("meta.k8s.io/v1", "").watch_writer(resp, PODS, lambda: NOW)
    added = orjson.dumps({"type": "ADDED", "object": pod()})
    modified = orjson.dumps({"type": "MODIFIED", "object": pod(phase="Running")})
    error = orjson.dumps({"type": "ERROR", "object": {"kind": "Status", "code": 410}})

    async def run() -> None:
        await writer.write(added + b"\n" + modified[:20])  # a line split across writes is held back
        await writer.write(modified[20:] + b"\n")
        await writer.write(error + b"\n")
        await writer.write_eof()

    asyncio.run(run())
    events = [orjson.loads(line) for line in resp.data.splitlines()]
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "ERROR"]
    first, second, err = (e["object"] for e in events)
    assert first["kind"] == second["kind"] == "Table"
    assert first["columnDefinitions"] and second["columnDefinitions"] is None
    assert first["metadata"] == {"resourceVersion": "7"}
    assert [len(first["rows"]), len(second["rows"])] == [1, 1]
    assert second["rows"][0]["cells"][2] == "Running"
    assert err == {"kind": "Status", "code": 410}
    assert resp.eof
