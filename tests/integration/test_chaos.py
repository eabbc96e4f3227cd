"""Chaos: two tandem replicas with leader election through a burst of pods, faults, kills and node churn.

What issue 12 asks to keep true, checked from the API server's side only:

* every pod is bound or explained (PodScheduled=False with a message, or a
  FailedScheduling event), and none is lost;
* no node is ever over-committed: at every bind, the requests of the live
  pods on the bound node (terminating ones included) fit its allocatable,
  each pod counted as 1.36's scheduler counts it, resized pods at what
  their status says they hold (issue 18);
* no two live pods on a node hold conflicting host ports (same protocol
  and port, on one IP or on 0.0.0.0), sidecars' ports included (issue 18);
* volumes (issue 20): no PersistentVolume is claimRef'd to one claim and
  then to another, and no two claims name one volume; at every bind, each
  of the pod's claims is already Bound (PreBind waited for the PV
  controller) to a volume whose node affinity admits the bound node; a
  pending pod with claims counts as one that fits only on nodes its claims
  can reach (its bound volume's, an unclaimed local volume's, or any node
  for a provisioned claim);
* no gang is left with fewer than minMember bound once any member is bound;
* no bind by a non-leader: each replica process talks to the API with a
  token of its own; a middleware on the simulated cluster remembers the
  token of the request being served, and at every bind that reaches the
  store the observer records (token, the Lease's holderIdentity right
  then). Afterwards every token's binds must name the identity that same
  process logged ("this replica's identity is ..."). A restarted process
  gets a new token, so its binds are told apart from its predecessor's.

The faults: 5% of binds answered 500, 3% of every call 429, every watch cut
every 2 s, and a watch window of a few dozen events per resource, so that
a batch of creates pushes live watchers past it and they resume into 410
Gone and relist; the test asserts both that the server answered 410s and
that the replicas' informers logged relists. During the burst: the leader
is SIGKILLed; once the other replica has taken over, the killed one is
started again (as its Deployment would); once that one is ready, the other
one, leading, gets SIGTERM and hands over; nodes are added, cordoned and
deleted. Each of the three leadership terms must have bound pods.

Some pods come as a StatefulSet's replicas do, with a WaitForFirstConsumer
claim each (``data-local-3`` for pod ``local-3``): half of them of a class
with no provisioner, served by local volumes pinned by hostname node
affinity, LOCAL_PVS_PER_NODE on each of the first nodes (two of which are
cordoned or deleted mid-burst), the rest of a class of the simulated
cluster's own provisioner, which creates each volume on the node tandem
selected. The simulated cluster plays the PV controller; the faults reach
tandem's PV and claim writes as they reach everything else, and a kill can
land in PreBind.

The workload has pods whose sidecar (an init container with restartPolicy
Always) or app container asks for host port 9100, and, bound before the
replicas start, pods in the middle of an in-place resize: a resize down not
yet actuated (spec 250m, status still 1500m) and an infeasible resize up
(spec 3 cpu, status 500m, PodResizePending Infeasible). Mid-burst, half of
the resizes down finish (their status drops to 250m), which frees room. Randomness (pod sizes, faults) is seeded; what the processes and
the event loop interleave is not, which is why the invariants, not exact
placements, are what is checked.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import random
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from bench.simcluster import SimCluster
from bench.simcluster import errors as sim_errors
from bench.simcluster.agent import AgentConfig
from bench.simcluster.faults import FaultRule, Faults
from bench.simcluster.resources import lookup
from bench.simcluster.volumes import PROVISIONER, TOPOLOGY_PARAMETER
from tests.integration.test_leader_election import LEADER_ELECTION, Process, lease_holder, ready, reap, spawn
from tests.integration.test_scheduler import (NS, allocatable_of, cpu_m, eventually, make_node, make_pod, phase,
                                              quantity, scheduled_condition)

pytestmark = pytest.mark.chaos

REPO = Path(__file__).resolve().parents[2]
PODS = lookup("", "v1", "pods")
NODES = lookup("", "v1", "nodes")
EVENTS = lookup("events.k8s.io", "v1", "events")
PODGROUPS = lookup("scheduling.x-k8s.io", "v1alpha1", "podgroups")
PVS = lookup("", "v1", "persistentvolumes")
PVCS = lookup("", "v1", "persistentvolumeclaims")
CLASSES = lookup("storage.k8s.io", "v1", "storageclasses")
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
MERGE = "application/merge-patch+json"

SEED = 20261124
WINDOW = 12                       # events each resource retains: one batch of creates outruns it
BATCHES, BATCH_SIZE, BATCH_EVERY = 20, 16, 0.75   # a 15 s burst: room for the handovers on a loaded machine
GANGS, GANG_SIZE = 8, 5
IMPOSSIBLE = 3                    # pods asking for more cpu than any node has: must end explained
SIDECAR_TCP, APP_TCP, SIDECAR_UDP = 12, 4, 4   # pods wanting host port 9100: by sidecar or app container
HOST_PORT = 9100
RESIZING_DOWN, INFEASIBLE = 6, 2  # pods bound before the burst, mid-resize (on node-00.. in turn)
LOCAL_CLAIMS, PROVISIONED_CLAIMS = 12, 8   # pods with one WaitForFirstConsumer claim each
LOCAL_CLASS, PROVISIONED_CLASS = "local-wffc", "sim-wffc"
LOCAL_PVS_PER_NODE, LOCAL_PV_NODES = 2, 12   # on node-00 .. node-11: 24 volumes for 12 claims

CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="")


# ---------------------------------------------------------------------------- what the API server saw


@dataclass
class Audit:
    binds: list[tuple[float, str, str, str]] = field(default_factory=list)   # (when, caller, lease holder, pod)
    overcommitted: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    port_conflicts: list[str] = field(default_factory=list)                  # host ports two pods of a node hold
    gone: int = 0                                                              # watches answered 410
    claim_refs: dict[str, tuple[str, str]] = field(default_factory=dict)       # volume -> the first claim it named
    volume_conflicts: list[str] = field(default_factory=list)                 # a volume claimed twice
    unreachable: list[str] = field(default_factory=list)                      # bound where a volume is not


def _requests(r: dict[str, Any]) -> dict[str, int]:
    return {"cpu": cpu_m(r["cpu"]) if "cpu" in r else 0, "memory": quantity(r["memory"]) if "memory" in r else 0}


def _sidecars(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in pod["spec"].get("initContainers") or () if c.get("restartPolicy") == "Always"]


def effective_requests_of(pod: dict[str, Any]) -> dict[str, int]:
    """The test's own reading of what 1.36's scheduler charges a pod (the workload's shapes: containers and
    sidecars): per container, once its status carries ``resources``, the largest of spec,
    ``resources.requests`` and ``allocatedResources``, the spec left out when PodResizePending is Infeasible."""
    status = pod.get("status") or {}
    infeasible = any(c.get("type") == "PodResizePending" and c.get("reason") == "Infeasible"
                     for c in status.get("conditions") or ())
    statuses = {cs.get("name"): cs for cs in status.get("containerStatuses") or ()}
    out = {"cpu": 0, "memory": 0, "pods": 1}
    for c in pod["spec"]["containers"] + _sidecars(pod):
        held = [_requests((c.get("resources") or {}).get("requests") or {})]
        cs = statuses.get(c["name"])
        if cs is not None and cs.get("resources") is not None:
            held = ([] if infeasible else held) + [_requests(cs["resources"].get("requests") or {}),
                                                   _requests(cs.get("allocatedResources") or {})]
        for k in ("cpu", "memory"):
            out[k] += max(h[k] for h in held)
    return out


def host_ports_of(pod: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(hostIP, protocol, hostPort) held by the pod's sidecars and app containers, upstream's defaults filled."""
    return [(p.get("hostIP") or "0.0.0.0", p.get("protocol") or "TCP", p["hostPort"])
            for c in _sidecars(pod) + pod["spec"]["containers"] for p in c.get("ports") or () if p.get("hostPort")]


def ports_conflict(a: tuple[str, str, int], b: tuple[str, str, int]) -> bool:
    """HostPortInfo.CheckConflict: one protocol and port, on one IP or with either side on 0.0.0.0."""
    return a[1:] == b[1:] and (a[0] == b[0] or "0.0.0.0" in (a[0], b[0]))


def reaches(pv: dict[str, Any], node: dict[str, Any]) -> bool:
    """The volume's required node affinity admits the node (the In / NotIn / Exists / DoesNotExist of the
    volumes made here and by the provisioner; a term with matchFields is refused rather than guessed)."""
    required = ((pv["spec"].get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")
    if not required:
        return True
    labels = node["metadata"].get("labels") or {}

    def holds(e: dict[str, Any]) -> bool:
        op, has = e["operator"], e["key"] in labels
        if op == "In":
            return has and labels[e["key"]] in e["values"]
        if op == "NotIn":
            return not has or labels[e["key"]] not in e["values"]
        assert op in ("Exists", "DoesNotExist"), e
        return has == (op == "Exists")

    assert not any(t.get("matchFields") for t in required), required
    return any(all(holds(e) for e in t.get("matchExpressions") or ()) for t in required)


def claims_of(pod: dict[str, Any]) -> list[str]:
    return [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"].get("volumes") or ()
            if v.get("persistentVolumeClaim")]


def audit_volumes(a: Audit, store: Any, resource: str, result: Any) -> None:
    """A volume whose claimRef moves from one claim to another (no claim is ever deleted here), or a claim
    naming a volume another claim names, is a volume bound twice."""
    if isinstance(result, sim_errors.APIError):
        return
    obj = result.obj()
    if resource.startswith("persistentvolumes"):
        ref = obj["spec"].get("claimRef") or {}
        if ref.get("name"):
            claim = (ref.get("namespace", ""), ref["name"])
            first = a.claim_refs.setdefault(obj["metadata"]["name"], claim)
            if first != claim:
                a.volume_conflicts.append(f"{obj['metadata']['name']} claimRef'd to {first} and then to {claim}")
    elif resource.startswith("persistentvolumeclaims"):
        volume = obj["spec"].get("volumeName")
        if volume:
            others = [e.key for e in store.table(PVCS).objects.values()
                      if e.obj()["spec"].get("volumeName") == volume and e.key[1] != obj["metadata"]["name"]]
            if others:
                a.volume_conflicts.append(f"{volume} named by {obj['metadata']['name']} and by {others}")


def audit_bind_volumes(a: Audit, store: Any, pod: dict[str, Any], node: dict[str, Any]) -> None:
    """At a bind: every claim of the pod Bound, to a volume that reaches the node."""
    where = f"{pod['metadata']['name']} on {node['metadata']['name']}"
    for claim in claims_of(pod):
        pvc = store.get_obj(PVCS, NS, claim)
        volume = (pvc or {}).get("spec", {}).get("volumeName")
        if pvc is None or not volume or (pvc.get("status") or {}).get("phase") != "Bound":
            a.unreachable.append(f"{where}: claim {claim} not Bound yet: {pvc and pvc.get('status')}")
            continue
        pv = store.get_obj(PVS, "", volume)
        if pv is None or not reaches(pv, node):
            a.unreachable.append(f"{where}: volume {volume} of {claim} does not reach it: "
                                 f"{pv and pv['spec'].get('nodeAffinity')}")


def audit(cluster: SimCluster) -> Audit:
    a = Audit()
    store = cluster.store

    def on_write(verb: str, resource: str, ns: str, name: str, result: Any) -> None:
        if resource.startswith(("persistentvolumes", "persistentvolumeclaims")):
            audit_volumes(a, store, resource, result)
            return
        if resource != "pods/binding":
            return
        a.binds.append((time.monotonic(), CALLER.get(), lease_holder(cluster), name))
        if isinstance(result, sim_errors.APIError):
            if result.code == 409:
                a.conflicts.append(f"{name}: {result.message}")
            return
        node_name = result.fields["spec.nodeName"]
        node = store.get_obj(NODES, "", node_name)
        if node is None:
            return      # bound to a node deleted meanwhile: the pod fails (pod GC), no room is taken
        bound_pod = store.get_obj(PODS, ns, name)
        if bound_pod is not None:
            audit_bind_volumes(a, store, bound_pod, node)
        room = allocatable_of(node)
        held: list[tuple[str, tuple[str, str, int]]] = []
        for e in store.table(PODS).objects.values():
            if e.fields.get("spec.nodeName") == node_name:
                pod = e.obj()
                if phase(pod) not in ("Succeeded", "Failed"):
                    for k, v in effective_requests_of(pod).items():
                        room[k] -= v
                    held += [(pod["metadata"]["name"], hp) for hp in host_ports_of(pod)]
        if any(v < 0 for v in room.values()):
            a.overcommitted.append(f"{node_name} after binding {name}: {room}")
        for i, (p1, hp1) in enumerate(held):
            a.port_conflicts += [f"{node_name}: {p1} {hp1} and {p2} {hp2}" for p2, hp2 in held[i + 1:]
                                 if p1 != p2 and ports_conflict(hp1, hp2)]

    store.observe(on_write)

    watcher = store.watcher

    def counting_watcher(*args: Any, **kwargs: Any) -> Any:
        try:
            return watcher(*args, **kwargs)
        except sim_errors.APIError as exc:
            if exc.code == 410:
                a.gone += 1
            raise

    store.watcher = counting_watcher     # type: ignore[method-assign]
    return a


def tag_callers(cluster: SimCluster) -> None:
    """Before start: every request is served with CALLER set to its bearer token, for the observer to read."""
    make_app = cluster.server.app

    def app() -> web.Application:
        application = make_app()

        @web.middleware
        async def caller(request: web.Request, handler: Any) -> web.StreamResponse:
            CALLER.set(request.headers.get("Authorization", "").removeprefix("Bearer "))
            return await handler(request)

        application.middlewares.insert(0, caller)
        return application

    cluster.server.app = app      # type: ignore[method-assign]


def kubeconfig(path: Path, server: str, token: str) -> Path:
    """A kubeconfig whose user is ``token``: the simulated cluster takes any token, and the observer sees it."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sim",
        "clusters": [{"name": "sim", "cluster": {"server": server}}],
        "users": [{"name": token, "user": {"token": token}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": token, "namespace": NS}}],
    }))
    return path


# ---------------------------------------------------------------------------- replicas


@dataclass
class Replicas:
    """The scheduler Deployment, by hand: each process started with a token (``r1``, ``r2``, ...) of its own."""

    tmp_path: Path
    server: str
    config: Path
    procs: dict[str, Process] = field(default_factory=dict)

    async def start(self) -> str:
        token = f"r{len(self.procs) + 1}"
        kc = kubeconfig(self.tmp_path / f"{token}.kubeconfig", self.server, token)
        self.procs[token] = await spawn(kc, self.config)
        return token

    def identity(self, token: str) -> str:
        for line in self.procs[token].lines:
            m = re.search(r"this replica's identity is (\S+)", line)
            if m:
                return m.group(1)
        return ""

    def holding(self, holder: str) -> str:
        """The token of the running process whose identity is ``holder`` ("" if none)."""
        return next((t for t, p in self.procs.items() if p.proc.returncode is None and holder
                     and self.identity(t) == holder), "")

    def logs(self) -> str:
        return "\n".join(f"[{t}] {line}" for t, p in self.procs.items() for line in p.lines[-40:])


def config_file(tmp_path: Path) -> Path:
    doc = yaml.safe_load((REPO / "config" / "gang.yaml").read_text())
    doc.update({"podInitialBackoffSeconds": 0.1, "podMaxBackoffSeconds": 1,
                "clientConnection": {"qps": 2000, "burst": 4000}, "leaderElection": LEADER_ELECTION})
    doc["profiles"][0]["pluginConfig"][0]["args"]["permitWaitingTimeSeconds"] = 10
    p = tmp_path / "config.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


# ---------------------------------------------------------------------------- the workload


def workload(rng: random.Random) -> list[list[dict[str, Any]]]:
    """BATCHES batches of pods: plain ones of random size, gangs split across two batches, a few impossible."""
    ported = SIDECAR_TCP + APP_TCP + SIDECAR_UDP
    claimed = LOCAL_CLAIMS + PROVISIONED_CLAIMS
    plain = [make_pod(f"p-{i:03d}", cpu=f"{rng.choice((100, 150, 200, 250, 300, 400))}m",
                      memory=f"{rng.choice((64, 128, 256))}Mi")
             for i in range(BATCHES * BATCH_SIZE - GANGS * GANG_SIZE - IMPOSSIBLE - ported - claimed)]
    plain += [replica("local", i) for i in range(LOCAL_CLAIMS)]
    plain += [replica("dynamic", i) for i in range(PROVISIONED_CLAIMS)]
    plain += [make_pod(f"huge-{i}", cpu="64", memory="64Mi") for i in range(IMPOSSIBLE)]
    plain += [port_pod(f"sidecar-tcp-{i}", "TCP") for i in range(SIDECAR_TCP)]
    plain += [port_pod(f"app-tcp-{i}", "TCP", sidecar=False) for i in range(APP_TCP)]
    plain += [port_pod(f"sidecar-udp-{i}", "UDP") for i in range(SIDECAR_UDP)]
    members = [make_pod(f"g{g}-{m}", cpu="500m", memory="128Mi", labels={GROUP_LABEL: f"g{g}", "app": f"g{g}"})
               for g in range(GANGS) for m in range(GANG_SIZE)]
    rng.shuffle(plain)
    batches: list[list[dict[str, Any]]] = [[] for _ in range(BATCHES)]
    for i, m in enumerate(members):      # gang g's members land in batches g and g + 1
        batches[(i // GANG_SIZE) + (i % GANG_SIZE) % 2].append(m)
    for b in batches:
        while len(b) < BATCH_SIZE:
            b.append(plain.pop())
    return batches


def port_pod(name: str, protocol: str, sidecar: bool = True) -> dict[str, Any]:
    """A pod wanting HOST_PORT/``protocol`` through a sidecar (a node-local proxy) or its app container."""
    pod = make_pod(name, cpu="100m", memory="64Mi")
    port = {"containerPort": HOST_PORT, "hostPort": HOST_PORT, "protocol": protocol}
    if sidecar:
        pod["spec"]["initContainers"] = [{"name": "proxy", "image": "registry.k8s.io/pause:3.10",
                                          "restartPolicy": "Always", "ports": [port]}]
    else:
        pod["spec"]["containers"][0]["ports"] = [port]
    return pod


def replica(statefulset: str, ordinal: int) -> dict[str, Any]:
    """Replica ``ordinal`` of a StatefulSet with a volumeClaimTemplate ``data``: its claim is data-<pod>."""
    name = f"{statefulset}-{ordinal}"
    return make_pod(name, cpu="100m", memory="64Mi", labels={"app": statefulset},
                    volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{name}"}}])


def claim_for(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The claim the StatefulSet controller would create before the pod: local-* pods use LOCAL_CLASS, dynamic-*
    PROVISIONED_CLASS."""
    names = claims_of(pod)
    if not names:
        return None
    cls = LOCAL_CLASS if pod["metadata"]["labels"].get("app") == "local" else PROVISIONED_CLASS
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": names[0], "namespace": NS},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": cls,
                     "resources": {"requests": {"storage": "1Gi"}}}}


def storage(cluster: SimCluster) -> None:
    """Both WaitForFirstConsumer classes, and LOCAL_PVS_PER_NODE local volumes on each of the first nodes."""
    for name, provisioner, params in ((LOCAL_CLASS, "kubernetes.io/no-provisioner", {}),
                                      (PROVISIONED_CLASS, PROVISIONER, {TOPOLOGY_PARAMETER: "hostname"})):
        cluster.store.create(CLASSES, "", {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                           "metadata": {"name": name}, "provisioner": provisioner,
                                           "parameters": params, "volumeBindingMode": "WaitForFirstConsumer"})
    for n in range(LOCAL_PV_NODES):
        node = f"node-{n:02d}"
        for j in range(LOCAL_PVS_PER_NODE):
            cluster.store.create(PVS, "", {
                "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"local-{node}-{j}"},
                "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                         "storageClassName": LOCAL_CLASS, "persistentVolumeReclaimPolicy": "Retain",
                         "local": {"path": f"/mnt/disks/vol{j}"},
                         "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                             {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}})


def resize_status(cpu: str, allocated: str, infeasible: bool = False) -> bytes:
    """pods/status as a kubelet writes it mid-resize: container "c" holds ``cpu``, ``allocated`` allocated."""
    status: dict[str, Any] = {"containerStatuses": [{
        "name": "c", "image": "registry.k8s.io/pause:3.10", "imageID": "", "ready": True, "started": True,
        "restartCount": 0, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
        "allocatedResources": {"cpu": allocated}, "resources": {"requests": {"cpu": cpu}}}]}
    if infeasible:
        status["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible",
                                 "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    return json.dumps({"status": status}).encode()


async def resizing_pods(cluster: SimCluster) -> list[str]:
    """Pods bound before the burst (by another scheduler) and resized in place: RESIZING_DOWN resizes down not
    yet actuated (spec 250m, status 1500m), INFEASIBLE resizes up the node refused (spec 3, status 500m)."""
    shapes = [("resize-down", "250m", "1500m", False)] * RESIZING_DOWN + [("infeasible", "3", "500m", True)] * INFEASIBLE
    names = []
    for i, (kind, spec_cpu, held, infeasible) in enumerate(shapes):
        name = f"{kind}-{i}"
        cluster.store.create(PODS, NS, make_pod(name, cpu=spec_cpu, memory="64Mi", scheduler="default-scheduler",
                                                node_name=f"node-{i:02d}"))
        names.append(name)
    # once the agent has started them (its status write would replace the containers' statuses), the kubelet's
    # view of the resize
    await eventually(lambda: all(phase(cluster.store.get_obj(PODS, NS, n)) == "Running" for n in names), 10,
                     "the resized pods to run")
    for name, (_, _, held, infeasible) in zip(names, shapes):
        cluster.store.patch(PODS, NS, name, MERGE, resize_status(held, held, infeasible), "status")
    return names


def pods(cluster: SimCluster) -> list[dict[str, Any]]:
    return [e.obj() for e in cluster.store.table(PODS).objects.values()]


def explained(cluster: SimCluster) -> set[str]:
    """Pods with a FailedScheduling event or a PodScheduled=False condition with a message."""
    out = {(e.obj().get("regarding") or {}).get("name", "") for e in cluster.store.table(EVENTS).objects.values()
           if e.obj().get("reason") == "FailedScheduling"}
    for p in pods(cluster):
        c = scheduled_condition(p)
        if c.get("status") == "False" and c.get("message"):
            out.add(p["metadata"]["name"])
    return out


def reachable(cluster: SimCluster, pod: dict[str, Any], nodes: dict[str, Any]) -> set[str]:
    """The nodes every claim of the pod can reach: its bound volume's; for an unbound local claim, those of a
    volume of its class that names no other claim; any node for a provisioned claim."""
    store, out = cluster.store, set(nodes)
    for claim in claims_of(pod):
        pvc = store.get_obj(PVCS, NS, claim)
        if pvc is None:
            return set()
        volume = pvc["spec"].get("volumeName")
        if volume:
            candidates = [store.get_obj(PVS, "", volume)]
        elif pvc["spec"].get("storageClassName") == LOCAL_CLASS:
            candidates = [e.obj() for e in store.table(PVS).objects.values()
                          if e.obj()["spec"].get("storageClassName") == LOCAL_CLASS
                          and (e.obj()["spec"].get("claimRef") or {}).get("name", claim) == claim]
        else:
            continue
        out &= {n for n in nodes for pv in candidates
                if pv is not None and reaches(pv, store.get_obj(NODES, "", n))}
    return out


def unsettled(cluster: SimCluster) -> list[str]:
    """What keeps the cluster from being settled: unexplained pods, plain pods that fit somewhere, partial gangs."""
    problems = []
    room = {}
    held: dict[str, list[tuple[str, str, int]]] = {}
    for e in cluster.store.table(NODES).objects.values():
        node = e.obj()
        if not (node.get("spec") or {}).get("unschedulable"):
            room[e.key[1]] = allocatable_of(node)
            held[e.key[1]] = []
    everything = pods(cluster)
    for p in everything:
        node = p["spec"].get("nodeName")
        if node in room and phase(p) not in ("Succeeded", "Failed"):
            for k, v in effective_requests_of(p).items():
                room[node][k] -= v
            held[node] += host_ports_of(p)
    why = explained(cluster)
    bound_in: dict[str, int] = {}
    for p in everything:
        name, group = p["metadata"]["name"], p["metadata"]["labels"].get(GROUP_LABEL)
        if p["spec"].get("nodeName"):
            if group:
                bound_in[group] = bound_in.get(group, 0) + 1
            continue
        if name not in why:
            problems.append(f"{name} is pending unexplained")
        want, ports = effective_requests_of(p), host_ports_of(p)
        if not group and any(all(r[k] >= want[k] for k in want)
                             and not any(ports_conflict(a, b) for a in ports for b in held[n])
                             for n, r in room.items() if n in reachable(cluster, p, room)):
            problems.append(f"{name} {want} {ports} fits on a node and is not bound")
    problems += [f"gang {g} has {n} of {GANG_SIZE} bound" for g, n in bound_in.items() if n < GANG_SIZE]
    return problems


# ---------------------------------------------------------------------------- the test


async def test_through_faults_kills_and_node_churn_nothing_is_lost_overcommitted_partial_or_bound_by_a_follower(
        tmp_path):
    rng = random.Random(SEED)
    faults = Faults(rules=[
        FaultRule(verb="create", resource="pods/binding", error_rate=0.05, error_code=500),
        FaultRule(verb="*", resource="*", throttle_rate=0.03, retry_after=0),
    ], watch_drop_interval=2.0, seed=SEED)
    cluster = SimCluster(nodes=0, agent=AgentConfig(ready_delay=0.05, tick=0.02, seed=SEED), faults=faults,
                         watch_window=WINDOW)
    tag_callers(cluster)
    async with cluster:
        for i in range(16):
            cluster.store.create(NODES, "", make_node(f"node-{i:02d}", cpu="4", memory="8Gi", pods="110"))
        for g in range(GANGS):
            cluster.store.create(PODGROUPS, NS, {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                                                 "metadata": {"name": f"g{g}", "namespace": NS},
                                                 "spec": {"minMember": GANG_SIZE}})
        storage(cluster)
        seen = audit(cluster)
        resized = await resizing_pods(cluster)
        replicas = Replicas(tmp_path, cluster.url, config_file(tmp_path))
        try:
            first, second = await replicas.start(), await replicas.start()
            leader = await eventually(lambda: replicas.holding(lease_holder(cluster)), 30, "a replica to lead")
            killed = restarted = stopped = ""
            added = 16
            names = list(resized)
            for b, batch in enumerate(workload(rng)):
                for pod in batch:      # all at once, no await: live watchers fall out of the window
                    claim = claim_for(pod)
                    if claim is not None:
                        cluster.store.create(PVCS, NS, claim)
                    cluster.store.create(PODS, NS, pod)
                    names.append(pod["metadata"]["name"])
                holder = replicas.holding(lease_holder(cluster))
                if b == 3:             # the leader dies mid-burst
                    killed = holder or leader
                    other = second if killed == first else first
                    replicas.procs[killed].proc.send_signal(signal.SIGKILL)
                elif killed and not restarted and holder == other:
                    # its Deployment starts it again, by when the other replica has taken over
                    restarted = await replicas.start()
                elif restarted and not stopped and holder == other and await ready(replicas.procs[restarted]):
                    # the other one, now leading, is stopped as a rolling update stops it
                    replicas.procs[other].proc.send_signal(signal.SIGTERM)
                    stopped = other
                    assert b < BATCHES - 2, "SIGTERM came too late for the restarted replica to get pods of its own"
                if b in (2, 5, 9):
                    for _ in range(4):
                        cluster.store.create(NODES, "", make_node(f"node-{added:02d}", cpu="4", memory="8Gi"))
                        added += 1
                if b == 4:
                    for n in ("node-03", "node-17"):
                        cluster.store.patch(NODES, "", n, MERGE, b'{"spec":{"unschedulable":true}}')
                if b == 6:             # half the resizes down finish: the room they held is free
                    for n in resized[:RESIZING_DOWN // 2]:
                        cluster.store.patch(PODS, NS, n, MERGE, resize_status("250m", "250m"), "status")
                if b == 8:
                    for n in ("node-05", "node-21"):
                        cluster.store.delete(NODES, "", n)
                await asyncio.sleep(BATCH_EVERY)
            assert stopped, f"the burst ended before the other replica led and got SIGTERM\n{replicas.logs()}"

            assert await replicas.procs[stopped].exit_code(15) == 0, replicas.logs()
            waiting: list[str] = []

            def settled() -> bool:
                waiting[:] = unsettled(cluster)
                return not waiting

            try:
                await eventually(settled, 60, "every pod bound or explained, gangs whole", interval=0.25)
            except AssertionError:
                raise AssertionError(f"not settled: {waiting[:20]}\n{replicas.logs()}") from None
            died = {t: p.proc.returncode for t, p in replicas.procs.items()
                    if p.proc.returncode is not None and t not in (killed, stopped)}
            assert not died, f"replicas exited unasked: {died}\n{replicas.logs()}"
        finally:
            await reap(list(replicas.procs.values()))

        # none lost: every pod created is still there (those on deleted nodes Failed, as pod GC marks them)
        present = {p["metadata"]["name"]: p for p in pods(cluster)}
        assert sorted(present) == sorted(names)
        huge = [present[f"huge-{i}"] for i in range(IMPOSSIBLE)]
        assert all("Insufficient cpu" in scheduled_condition(p).get("message", "") for p in huge), \
            [scheduled_condition(p) for p in huge]
        bound = [n for n, p in present.items() if p["spec"].get("nodeName")]
        assert len(bound) >= 0.9 * (len(names) - IMPOSSIBLE), f"only {len(bound)} of {len(names)} bound"
        assert seen.overcommitted == [], seen.overcommitted[:10]
        assert seen.conflicts == [], seen.conflicts[:10]
        assert seen.port_conflicts == [], seen.port_conflicts[:10]

        # volumes: none claimed twice, none bound before its claim or away from its volume (the audit, at every
        # write); the unbound replicas are explained and fit nowhere their claims reach (settled, above); most
        # replicas of both StatefulSets bound, each provisioned one to a volume of its own
        assert seen.volume_conflicts == [], seen.volume_conflicts[:10]
        assert seen.unreachable == [], seen.unreachable[:10]
        for sts, n in (("local", LOCAL_CLAIMS), ("dynamic", PROVISIONED_CLAIMS)):
            placed = [f"{sts}-{i}" for i in range(n) if present[f"{sts}-{i}"]["spec"].get("nodeName")]
            assert len(placed) >= n // 2, (sts, placed)
            volumes = {p: cluster.store.get_obj(PVCS, NS, f"data-{p}")["spec"].get("volumeName", "") for p in placed}
            prefix = "pvc-" if sts == "dynamic" else "local-node-"
            assert all(v.startswith(prefix) for v in volumes.values()), volumes
            assert len(set(volumes.values())) == len(placed), volumes

        # no bind by a non-leader: the Lease named the binding process's identity when its bind arrived
        identities = {t: replicas.identity(t) for t in replicas.procs}
        assert all(identities.values()), identities
        strangers = [(round(when, 3), caller, holder, pod) for when, caller, holder, pod in seen.binds
                     if identities.get(caller) != holder]
        assert strangers == [], f"binds by a replica not holding the lease: {strangers[:10]}; {identities}"
        binders = {caller for _, caller, _, _ in seen.binds}
        assert binders == {killed, stopped, restarted}, f"each of the three terms bound pods: {binders}"

        # the relist path ran: the server answered watches 410 Gone and the informers relisted
        relists = sum(1 for p in replicas.procs.values() for line in p.lines if "(410); relisting" in line)
        assert seen.gone >= 1 and relists >= 1, (seen.gone, relists)
