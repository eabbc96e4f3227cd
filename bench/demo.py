"""``make run``: the simulated cluster and tandem in one process, scheduling a small mixed workload.

What it does, in order:

1. starts the simulated cluster (API server + node agent) on loopback and
   writes a kubeconfig;
2. registers six nodes chosen to make decisions visible: three sizes over
   three zones, a GPU node tainted ``dedicated=gpu:NoSchedule`` and
   offering ``nvidia.com/gpu``, and a cordoned node;
3. starts tandem (:class:`scheduler.app.App` with the built-in default
   configuration: profile ``tandem-scheduler``, the upstream default
   plugins) against that kubeconfig, exactly as ``tandem-scheduler
   --kubeconfig`` would;
4. submits pods through the API as a user would (kubernetes-asyncio, the
   same HTTP a kubectl apply sends), all with ``schedulerName:
   tandem-scheduler``: different requests, a GPU pod that tolerates the
   taint, nodeSelector / required / preferred zone affinity, a pod held by
   a scheduling gate (released by a patch two seconds later), one pod
   that fits nowhere, and StatefulSet-shaped pods with WaitForFirstConsumer
   claims: ``pg-0`` and ``pg-1`` with claims ``data-pg-0`` and
   ``data-pg-1`` (as a volumeClaimTemplate named ``data`` names them; the
   stand-in has no StatefulSet controller, so the demo creates claims and
   pods itself) of a local-volume class, with one local volume on each of
   two nodes, and ``cache-0`` whose claim the simulated cluster's
   provisioner creates in the one zone its class allows;
5. prints where each pod landed and why, which volume each claim got, the
   pending pod's PodScheduled condition and FailedScheduling event, a few
   metrics, and the kubectl commands to look further; then serves until
   Ctrl-C (``--once``: exits).

The workload is built so every placement has one right answer whatever the
tie-breaking: pods are submitted one after another and tandem schedules them
in that order (PrioritySort: equal priority, first in first out), and each
expected node wins its score by a clear margin. The table marks any pod
that landed elsewhere, and ``tests/integration/test_demo.py`` holds it to
that. This module is a client of the scheduler, never part of it, and it
lives outside ``bench/simcluster``, which never imports the scheduler.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config

from bench.simcluster.agent import AgentConfig
from bench.simcluster.cluster import SimCluster
from bench.simcluster.volumes import PROVISIONER
from scheduler.app import App
from scheduler.config import load_config
from scheduler.secureserving import ServingOptions

NAMESPACE = "default"
SCHEDULER_NAME = "tandem-scheduler"
ZONE = "topology.kubernetes.io/zone"
GPU = "nvidia.com/gpu"
GATE = "tandem.dev/approval"
GATE_RELEASE_AFTER = 2.0          # seconds after the gated pod is created
PENDING = "<pending>"
HOSTNAME = "kubernetes.io/hostname"
LOCAL_CLASS = "local-storage"     # local volumes, bound by the scheduler's choice of node
ZONAL_CLASS = "zonal"             # the simulated cluster's provisioner, zone-a only


# ---------------------------------------------------------------------------- the cluster

@dataclass(frozen=True)
class NodeSpec:
    name: str
    zone: str
    cpu: str
    memory: str
    gpus: int = 0
    taint: tuple[str, str, str] | None = None      # (key, value, effect)
    cordoned: bool = False

    def notes(self) -> str:
        out = []
        if self.taint:
            k, v, e = self.taint
            out.append(f"taint {k}={v}:{e}")
        if self.cordoned:
            out.append("cordoned (spec.unschedulable)")
        return ", ".join(out)

    def object(self) -> dict[str, Any]:
        capacity = {"cpu": self.cpu, "memory": self.memory, "pods": "110", "ephemeral-storage": "100Gi"}
        if self.gpus:
            capacity[GPU] = str(self.gpus)
        spec: dict[str, Any] = {}
        if self.taint:
            k, v, e = self.taint
            spec["taints"] = [{"key": k, "value": v, "effect": e}]
        if self.cordoned:
            spec["unschedulable"] = True
        return {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": self.name, "labels": {
                "kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                ZONE: self.zone, "topology.kubernetes.io/region": "region-1"}},
            "spec": spec,
            "status": {"capacity": capacity, "phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "kubelet is posting ready status"}]},
        }


NODES: tuple[NodeSpec, ...] = (
    NodeSpec("small-a", "zone-a", "4", "16Gi"),
    NodeSpec("gpu-a", "zone-a", "8", "32Gi", gpus=2, taint=("dedicated", "gpu", "NoSchedule")),
    NodeSpec("medium-b", "zone-b", "8", "32Gi"),
    NodeSpec("cordoned-b", "zone-b", "8", "32Gi", cordoned=True),
    NodeSpec("large-c", "zone-c", "16", "64Gi"),
    NodeSpec("small-c", "zone-c", "2", "8Gi"),
)


LOCAL_VOLUME_NODES = ("medium-b", "large-c")     # one local volume each


def storage_classes() -> list[dict[str, Any]]:
    """Both WaitForFirstConsumer, as the default class on GKE, AKS, kind and most local-volume setups."""
    return [
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": LOCAL_CLASS},
         "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"},
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": ZONAL_CLASS},
         "provisioner": PROVISIONER, "volumeBindingMode": "WaitForFirstConsumer",
         "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["zone-a"]}]}]},
    ]


def local_volume(node: str) -> dict[str, Any]:
    """A disk of ``node``, as the local static provisioner publishes one: pinned by hostname node affinity."""
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"local-{node}"},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                     "storageClassName": LOCAL_CLASS, "persistentVolumeReclaimPolicy": "Retain",
                     "local": {"path": "/mnt/disks/ssd0"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": HOSTNAME, "operator": "In", "values": [node]}]}]}}}}


# ---------------------------------------------------------------------------- the workload

@dataclass(frozen=True)
class PodSpec:
    name: str
    cpu: str
    memory: str
    expect: str                    # the node it should land on, or PENDING
    why: str
    spec: dict[str, Any] = field(default_factory=dict)    # merged into the pod's spec
    gpus: int = 0
    storage_class: str = ""        # a claim data-<pod> of this class, as a volumeClaimTemplate "data" makes

    def requests(self) -> str:
        out = f"{self.cpu} cpu, {self.memory}"
        return out + (f", {self.gpus} gpu" if self.gpus else "")

    @property
    def claim(self) -> str:
        return f"data-{self.name}" if self.storage_class else ""

    def claim_object(self) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": self.claim},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": self.storage_class,
                         "resources": {"requests": {"storage": "5Gi"}}}}

    def object(self) -> dict[str, Any]:
        requests = {"cpu": self.cpu, "memory": self.memory}
        limits = {}
        if self.gpus:
            # extended resources must be asked for in limits too (requests == limits), as on a real cluster
            requests[GPU] = limits[GPU] = str(self.gpus)
        container: dict[str, Any] = {"name": "app", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": requests, **({"limits": limits} if limits else {})}}
        spec = {"schedulerName": SCHEDULER_NAME, "containers": [container], **self.spec}
        if self.claim:
            spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": self.claim}}]
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": self.name, "labels": {"app.kubernetes.io/part-of": "tandem-demo"}},
                "spec": spec}


def _zone_term(*zones: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": ZONE, "operator": "In", "values": list(zones)}]}


# In submission order, which is also the order tandem schedules them in.
WORKLOAD: tuple[PodSpec, ...] = (
    PodSpec("batch-large", "12", "24Gi", "large-c", "needs 12 CPUs: only large-c has them"),
    PodSpec("web", "500m", "1Gi", "medium-b", "no constraints: least allocated node"),
    PodSpec("api", "1", "2Gi", "small-a", "nodeSelector zone-a (gpu-a is tainted)",
            spec={"nodeSelector": {ZONE: "zone-a"}}),
    PodSpec("db", "1", "4Gi", "small-c", "required zone affinity zone-c, emptier node",
            spec={"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [_zone_term("zone-c")]}}}}),
    PodSpec("worker", "1", "2Gi", "medium-b", "preferred zone affinity zone-b (cordoned-b is cordoned)",
            spec={"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": _zone_term("zone-b")}]}}}),
    PodSpec("trainer", "2", "8Gi", "gpu-a", "toleration + gpu", gpus=1,
            spec={"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu",
                                   "effect": "NoSchedule"}]}),
    PodSpec("gated-job", "500m", "1Gi", "medium-b",
            f"gate removed after {GATE_RELEASE_AFTER:g}s, then least allocated",
            spec={"schedulingGates": [{"name": GATE}]}),
    PodSpec("too-big", "24", "2Gi", PENDING, "needs 24 CPUs: no node has that many"),
    PodSpec("pg-0", "500m", "1Gi", "medium-b", "WFFC claim: a local volume's node, the emptier one",
            storage_class=LOCAL_CLASS),
    PodSpec("pg-1", "500m", "1Gi", "large-c", "WFFC claim: the other local volume (pg-0 took one)",
            storage_class=LOCAL_CLASS),
    PodSpec("cache-0", "500m", "1Gi", "small-a", "WFFC claim: provisioned, class allows zone-a only",
            storage_class=ZONAL_CLASS),
)

GATED = "gated-job"
UNSCHEDULABLE = "too-big"


# ---------------------------------------------------------------------------- running it

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _condition(pod: Any, type_: str) -> Any:
    return next((c for c in (pod.status.conditions or []) if c.type == type_), None)


async def _failed_scheduling_event(events_api: client.EventsV1Api, name: str) -> Any:
    # only the pod's: the PV controller's core/v1 events (no eventTime) do not read as events.k8s.io/v1 models
    events = await events_api.list_namespaced_event(NAMESPACE, field_selector=f"regarding.name={name}")
    mine = [e for e in events.items if e.reason == "FailedScheduling"]
    return mine[-1] if mine else None


async def _wait_for_outcomes(v1: client.CoreV1Api, events_api: client.EventsV1Api,
                             timeout: float) -> tuple[dict[str, Any], Any]:
    """Poll until every pod but the unschedulable one is bound and that one has its condition and event."""
    deadline = time.monotonic() + timeout
    while True:
        pods = {p.metadata.name: p for p in (await v1.list_namespaced_pod(NAMESPACE)).items}
        bound = all(pods.get(p.name) is not None and pods[p.name].spec.node_name
                    for p in WORKLOAD if p.expect != PENDING)
        pending = pods.get(UNSCHEDULABLE)
        cond = _condition(pending, "PodScheduled") if pending is not None else None
        event = await _failed_scheduling_event(events_api, UNSCHEDULABLE)
        if (bound and cond is not None and cond.status == "False" and event is not None) \
                or time.monotonic() > deadline:
            return pods, event
        await asyncio.sleep(0.1)


async def _metrics(url: str) -> list[str]:
    """A few of the scheduler's own metric lines, as a Prometheus scrape would read them."""
    wanted = ("scheduler_schedule_attempts_total{", "scheduler_pending_pods{")
    try:
        async with aiohttp.ClientSession() as s, s.get(f"{url}/metrics") as r:
            text = await r.text()
    except aiohttp.ClientError as exc:
        return [f"(cannot read {url}/metrics: {exc})"]
    return [line for line in text.splitlines() if line.startswith(wanted)]


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


async def _print_claims(v1: client.CoreV1Api, pods: dict[str, Any]) -> int:
    """The claims' table: which volume each got and where it lives; returns how many are not where their pod is."""
    volumes = {pv.metadata.name: pv for pv in (await v1.list_persistent_volume()).items}
    claims = {c.metadata.name: c for c in (await v1.list_namespaced_persistent_volume_claim(NAMESPACE)).items}
    rows = [("CLAIM", "CLASS", "STATUS", "VOLUME", "VOLUME ON")]
    surprises = 0
    for p in WORKLOAD:
        if not p.claim:
            continue
        c = claims.get(p.claim)
        name = (c.spec.volume_name if c is not None else None) or "-"
        pv = volumes.get(name)
        terms = pv.spec.node_affinity.required.node_selector_terms if pv is not None and pv.spec.node_affinity else []
        where = ", ".join(f"{e.key.rsplit('/', 1)[-1]}={','.join(e.values)}"
                          for t in terms for e in t.match_expressions or [])
        pod = pods.get(p.name)
        node = pod.spec.node_name if pod is not None else None
        if pv is None or node is None or (node not in where and _zone_of(node) not in where):
            surprises += 1
            where += f"  [UNEXPECTED: pod on {node or PENDING}]"
        rows.append((p.claim, p.storage_class, c.status.phase if c is not None else "-", name, where or "-"))
    print("\n" + "\n".join(_table(rows)))
    return surprises


def _zone_of(node: str) -> str:
    return next((n.zone for n in NODES if n.name == node), "")


async def demo(kubeconfig: Path, once: bool, port: int, metrics_port: int, timeout: float) -> int:
    t0 = time.monotonic()

    def now() -> str:
        return f"+{time.monotonic() - t0:.1f}s"

    async with SimCluster(nodes=0, zones=0, port=port, kubeconfig=kubeconfig,
                          agent=AgentConfig(ready_delay=0.5)) as cluster:
        for n in NODES:
            cluster.add_nodes(1, template=n.object())
        print(f"simulated cluster at {cluster.url}  (kubeconfig: {kubeconfig})\n")
        print("\n".join(_table([("NODE", "ZONE", "CPU", "MEMORY", "GPU", "NOTES")] + [
            (n.name, n.zone, n.cpu, n.memory, str(n.gpus or "-"), n.notes()) for n in NODES])))

        cfg = load_config(None)      # the built-in default: what `tandem-scheduler` runs without --config
        # plain HTTP on loopback, as tandem-scheduler --insecure-serving: the demo's curl needs no token
        async with App(cfg, kubeconfig=str(kubeconfig), health_port=metrics_port,
                       serving=ServingOptions(insecure=True)):
            profiles = ", ".join(p.scheduler_name for p in cfg.profiles)
            print(f"\n{now()} tandem is scheduling for {profiles} (default plugins); "
                  f"health and metrics on http://127.0.0.1:{metrics_port}")
            api = await config.new_client_from_config(config_file=str(kubeconfig))
            async with api:
                v1, events_api = client.CoreV1Api(api), client.EventsV1Api(api)
                storage = client.StorageV1Api(api)
                for sc in storage_classes():
                    await storage.create_storage_class(sc)
                for node in LOCAL_VOLUME_NODES:
                    await v1.create_persistent_volume(local_volume(node))
                print(f"{now()} storage classes {LOCAL_CLASS} (local volumes on {', '.join(LOCAL_VOLUME_NODES)}) "
                      f"and {ZONAL_CLASS} (provisioned, zone-a), both WaitForFirstConsumer")
                gated_at = 0.0
                for p in WORKLOAD:
                    if p.claim:     # the StatefulSet controller creates the claim before the pod
                        await v1.create_namespaced_persistent_volume_claim(NAMESPACE, p.claim_object())
                    await v1.create_namespaced_pod(NAMESPACE, p.object())
                    if p.name == GATED:
                        gated_at = time.monotonic()
                print(f"{now()} submitted {len(WORKLOAD)} pods with schedulerName {SCHEDULER_NAME}; "
                      f"{GATED} carries the scheduling gate {GATE}")

                await asyncio.sleep(max(0.0, gated_at + GATE_RELEASE_AFTER - time.monotonic()))
                gated = await v1.read_namespaced_pod(GATED, NAMESPACE)
                print(f"{now()} {GATED} before release: node={gated.spec.node_name or '-'}, "
                      f"gates={[g.name for g in gated.spec.scheduling_gates or []]}")
                # a JSON patch body (a list) is sent as application/json-patch+json
                await v1.patch_namespaced_pod(GATED, NAMESPACE, [{"op": "remove", "path": "/spec/schedulingGates"}])
                print(f"{now()} released it: kubectl patch pod {GATED} --type=json "
                      f"-p '[{{\"op\":\"remove\",\"path\":\"/spec/schedulingGates\"}}]'")

                pods, event = await _wait_for_outcomes(v1, events_api, timeout)
                print(f"{now()} done\n")

                rows = [("POD", "NODE", "ZONE", "REQUESTS", "WHY")]
                zones = {n.name: n.zone for n in NODES}
                surprises = 0
                for p in WORKLOAD:
                    got = pods.get(p.name)
                    node = (got.spec.node_name if got is not None else None) or PENDING
                    why = p.why
                    if node != p.expect:
                        surprises += 1
                        why += f"  [UNEXPECTED: expected {p.expect}]"
                    rows.append((p.name, node, zones.get(node, "-"), p.requests(), why))
                print("\n".join(_table(rows)))
                surprises += await _print_claims(v1, pods)

                pending = pods.get(UNSCHEDULABLE)
                cond = _condition(pending, "PodScheduled") if pending is not None else None
                print(f"\n{UNSCHEDULABLE} stays Pending (phase {pending.status.phase if pending else '?'}):")
                if cond is not None:
                    print(f"  condition  PodScheduled={cond.status} reason={cond.reason}")
                    print(f"             {cond.message}")
                else:
                    print("  condition  (no PodScheduled condition yet)")
                    surprises += 1
                if event is not None:
                    print(f"  event      {event.type} {event.reason} by {event.reporting_controller} "
                          f"(action {event.action})")
                    print(f"             {event.note}")
                else:
                    print("  event      (no FailedScheduling event yet)")
                    surprises += 1

            print("\nmetrics (curl http://127.0.0.1:%d/metrics):" % metrics_port)
            for line in await _metrics(f"http://127.0.0.1:{metrics_port}"):
                print(f"  {line}")

            print("\nlook further:")
            kc = f"kubectl --kubeconfig {kubeconfig}"
            print(f"  {kc} get nodes")
            print(f"  {kc} get pods -o wide")
            print(f"  {kc} get events --field-selector involvedObject.name={UNSCHEDULABLE}")
            print(f"  {kc} describe pod {UNSCHEDULABLE}")
            if surprises:
                print(f"\n{surprises} outcome(s) differ from what the demo expects (marked above)")
            if once:
                return 1 if surprises else 0
            print("\nserving until Ctrl-C (tandem keeps scheduling: submit your own pods with "
                  f"schedulerName: {SCHEDULER_NAME})")
            sys.stdout.flush()
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            await stop.wait()
            print("\nstopping")
            return 1 if surprises else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.demo",
                                description="The simulated cluster and tandem in one process, with a small workload.")
    p.add_argument("--port", type=int, default=0, help="API server port (0: any free port)")
    p.add_argument("--metrics-port", type=int, default=0,
                   help="tandem's /healthz /readyz /livez /metrics port (0: any free port)")
    p.add_argument("--kubeconfig", type=Path, default=Path(".tandem/sim.kubeconfig"))
    p.add_argument("--timeout", type=float, default=20.0, help="seconds to wait for the outcomes")
    p.add_argument("--once", action="store_true", help="exit after the demo instead of serving")
    p.add_argument("-v", "--v", dest="verbosity", type=int, nargs="?", const=2, default=0,
                   help="tandem's log verbosity, as tandem-scheduler -v")
    args = p.parse_args(argv)
    level = logging.WARNING if args.verbosity <= 0 else logging.INFO if args.verbosity <= 2 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(demo(args.kubeconfig, args.once, args.port, args.metrics_port or _free_port(),
                                args.timeout))
    except KeyboardInterrupt:       # Ctrl-C before the demo got to serving
        return 130


if __name__ == "__main__":
    sys.exit(main())
