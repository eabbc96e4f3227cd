"""Cost of tandem's scheduling cycle alone, in-process, by node count.

    python -m bench.micro_cycle --nodes 500 5000 15000 --pods 2000 --percentage adaptive 100
    python -m bench.micro_cycle --nodes 5000 --existing 10000 --shape anti-affinity spread
    python -m bench.micro_cycle --nodes 5000 --shape wffc      # two local volumes per node, one claim per pod
    python -m bench.micro_cycle --nodes 5000 --shape csi-pv    # one claim per pod, bound to its own CSI volume
    python -m bench.micro_cycle --nodes 5000 --shape wffc-capacity   # provisioned; a CSIStorageCapacity per node
    python -m bench.micro_cycle --nodes 5000 --shape wffc-provisioned   # the same, capacity not checked
    python -m bench.micro_cycle --nodes 5000 --prebind-waiting 1000   # while 1,000 pods wait in PreBind
    python -m bench.micro_cycle --nodes 5000 --existing 5000 --nominated 0 32   # while 32 moves hold room

Builds the scheduler's cache with N scheduler_perf default nodes (4 cpu,
32Gi, 110 pods, three zones), binds E existing pods round robin over them,
and queues P pods of a shape (``default``: 100m / 500Mi; the others add one
scheduler_perf-style term, see SHAPES), then times ``schedule_one`` for each
(PreFilter through Permit with the default plugins; binding is a no-op fake,
so no I/O is measured). The first 10% of cycles are dropped as warm-up.
Reports mean, p50 and p99 per cycle.

``--nominated K``: K pods of the measured shape nominated to K nodes spread over the cluster and never bound,
as Consolidation's moves promise their targets' room to the replacements (a compaction plan moves up to 32
pods at once): what every other pod's Filter pays for room promised to pods not bound yet.

Existing pods: for ``anti-affinity`` the first 1,000 carry the measured
pods' labels and term (one per node, as SchedulingPodAntiAffinity's init
pods) and the rest are plain pods in another namespace; for the other
shapes every existing pod carries the measured pods' labels, so the counts
are real work.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import numpy as np

from scheduler.config import parse_config
from scheduler.model import parse_pod
from scheduler.framework.clock import Clock
from scheduler.scheduler import Scheduler


class _NoAPI:
    """No I/O. VolumeBinding's PreBind writes come back as the informers would bring them (a new version), and
    no PV controller completes the bindings: those pods wait in PreBind, off the cycle, as long as the run."""

    scheduler: "Scheduler | None" = None

    async def bind(self, *args: object) -> None:
        pass

    async def update(self, path: str, body: dict) -> dict:
        meta = body["metadata"]
        new = {**body, "metadata": {**meta, "resourceVersion": str(int(meta.get("resourceVersion") or 1) + 1)}}
        s = self.scheduler
        if s is not None:
            handler = s.on_pv_update if "/persistentvolumes/" in path else s.on_pvc_update
            asyncio.get_running_loop().call_soon(handler, body, new)
        return new

    async def patch_pod_status(self, *args: object) -> None:
        pass

    async def create_event(self, *args: object) -> None:
        pass


GREEN = {"color": "green"}
SHAPES: dict[str, dict] = {
    "default": {},
    "anti-affinity": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": GREEN}, "topologyKey": "kubernetes.io/hostname"}]}}},
    "affinity": {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": GREEN}, "topologyKey": "topology.kubernetes.io/zone"}]}}},
    "preferred-affinity": {"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {"labelSelector": {"matchLabels": GREEN},
                                          "topologyKey": "topology.kubernetes.io/zone"}}]}}},
    "spread": {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                              "whenUnsatisfiable": "DoNotSchedule",
                                              "labelSelector": {"matchLabels": GREEN}}]},
    "preferred-spread": {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                                        "whenUnsatisfiable": "ScheduleAnyway",
                                                        "labelSelector": {"matchLabels": GREEN}}]},
    # one WaitForFirstConsumer claim per pod; every node holds two local volumes of the class (1Gi, 2Gi)
    "wffc": {},
    # one claim per pod, bound to its own CSI volume; nodes allow 39 of the driver (SchedulingCSIPVs' shape)
    "csi-pv": {},
    # one WaitForFirstConsumer claim per pod, provisioned by a CSI driver with storageCapacity: true that
    # publishes one CSIStorageCapacity per node (TopoLVM's shape)
    "wffc-capacity": {},
    # the same claims of the same class, its driver without storageCapacity and no CSIStorageCapacity objects:
    # what wffc-capacity's cycle costs without the capacity check (issue 30 compares the two)
    "wffc-provisioned": {},
}
CAPACITY_CLASS = {"metadata": {"name": "lvm"}, "provisioner": "lvm.csi.example.com",
                  "volumeBindingMode": "WaitForFirstConsumer"}
LOCAL_CLASS = {"metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
               "volumeBindingMode": "WaitForFirstConsumer"}


def _local_pv(name: str, node: str, size: str) -> dict:
    return {"metadata": {"name": name, "resourceVersion": "1"}, "status": {"phase": "Available"},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                     "local": {"path": "/mnt/" + name}, "nodeAffinity": {"required": {"nodeSelectorTerms": [
                         {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                                "values": [node]}]}]}}}}


def _claim(name: str) -> dict:
    return {"metadata": {"name": name, "namespace": "bench", "uid": "c-" + name, "resourceVersion": "1"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                     "resources": {"requests": {"storage": "1Gi"}}}}


def _bound_csi_pair(name: str) -> tuple[dict, dict]:
    """A claim and the CSI volume it is bound to, as the PV controller leaves them."""
    pv = {"metadata": {"name": "pv-" + name, "resourceVersion": "1"}, "status": {"phase": "Bound"},
          "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadOnlyMany"],
                   "csi": {"driver": "simcluster.tandem.dev", "volumeHandle": "pv-" + name},
                   "claimRef": {"namespace": "bench", "name": name, "uid": "c-" + name}}}
    pvc = {"metadata": {"name": name, "namespace": "bench", "uid": "c-" + name, "resourceVersion": "1",
                        "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
           "spec": {"accessModes": ["ReadOnlyMany"], "volumeName": "pv-" + name, "storageClassName": "",
                    "resources": {"requests": {"storage": "1Gi"}}},
           "status": {"phase": "Bound"}}
    return pv, pvc


def _pod(name: str, shape: str, node: str = "", namespace: str = "bench", labelled: bool = True) -> dict:
    spec = {"schedulerName": "tandem-scheduler", "containers": [{
        "name": "pause", "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}], **SHAPES[shape]}
    if node:
        spec["nodeName"] = node
    if shape in ("wffc", "csi-pv", "wffc-capacity", "wffc-provisioned"):
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data-" + name}}]
    return {"metadata": {"name": name, "namespace": namespace, "uid": name, "labels": GREEN if labelled else {}},
            "spec": spec}


async def measure(nodes: int, pods: int, percentage: int | None, shape: str = "default",
                  existing: int = 0, prebind_waiting: int = 0, nominated: int = 0) -> np.ndarray:
    doc: dict = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                 "profiles": [{"schedulerName": "tandem-scheduler"}]}
    if percentage is not None:
        doc["percentageOfNodesToScore"] = percentage
    api = _NoAPI()
    s = api.scheduler = Scheduler(parse_config(doc, "micro_cycle"), api, seed=1, clock=Clock())
    for i in range(nodes):
        s.on_node_add({"metadata": {"name": f"node-{i}", "labels": {
            "kubernetes.io/hostname": f"node-{i}", "topology.kubernetes.io/zone": f"zone-{i % 3}"}},
            "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}}})
    if shape == "wffc" or prebind_waiting:
        s.on_storage_class_add(LOCAL_CLASS)
        for i in range(nodes):
            for j, size in enumerate(("1Gi", "2Gi")):
                s.on_pv_add(_local_pv(f"pv-{i}-{j}", f"node-{i}", size))
    if shape == "wffc":
        for i in range(pods):
            s.on_pvc_add(_claim(f"data-p{i}"))
    if prebind_waiting:
        # pods whose claims tandem binds in PreBind, where they then wait for a PV controller that never comes
        # (as behind a slow one): their binding tasks stay alive while the measured pods are scheduled
        for i in range(prebind_waiting):
            s.on_pvc_add(_claim(f"data-w{i}"))
            s.on_pod_add(_pod(f"w{i}", "wffc"))
        await time_cycles(s, prebind_waiting)
        for _ in range(3):
            await asyncio.sleep(0)
        _assert_waiting(s, prebind_waiting)
    if shape in ("wffc-capacity", "wffc-provisioned"):
        checked = shape == "wffc-capacity"
        s.on_storage_class_add(CAPACITY_CLASS)
        s.on_csi_driver_add({"metadata": {"name": "lvm.csi.example.com"}, "spec": {"storageCapacity": checked}})
        for i in range(nodes if checked else 0):
            s.on_capacity_add({"metadata": {"name": f"cap-{i}", "namespace": "kube-system"},
                               "storageClassName": "lvm", "capacity": "100Gi",
                               "nodeTopology": {"matchLabels": {"kubernetes.io/hostname": f"node-{i}"}}})
        for i in range(pods):
            s.on_pvc_add({**_claim(f"data-p{i}"), "spec": {**_claim(f"data-p{i}")["spec"], "storageClassName": "lvm"}})
    if shape == "csi-pv":
        for i in range(nodes):   # upstream's node-with-volume-limits: the driver allows 39 volumes a node
            s.on_csinode_add({"metadata": {"name": f"node-{i}"}, "spec": {"drivers": [
                {"name": "simcluster.tandem.dev", "nodeID": f"node-{i}", "allocatable": {"count": 39}}]}})
        for i in range(pods):
            pv, pvc = _bound_csi_pair(f"data-p{i}")
            s.on_pv_add(pv)
            s.on_pvc_add(pvc)
    for i in range(existing):
        if shape == "anti-affinity" and i >= 1000:   # plain pods elsewhere, as the workload's filler
            s.on_pod_add(_pod(f"e{i}", "default", f"node-{i % nodes}", "plain", labelled=False))
        else:
            s.on_pod_add(_pod(f"e{i}", shape, f"node-{i % nodes}"))
    for i in range(nominated):   # stand-ins, as the rebalancer's (never in the queue: only their promise counts)
        s.cache.nominations.set(parse_pod(_pod(f"n{i}", "default")), f"node-{i * nodes // nominated}")
    for i in range(pods):
        s.on_pod_add(_pod(f"p{i}", shape))
    d = await time_cycles(s, pods) * 1e3
    _assert_waiting(s, prebind_waiting)   # still there: the measured cycles ran beside them
    return d


def _assert_waiting(s: Scheduler, n: int) -> None:
    waiting = sum(1 for t in s._tasks if not t.done())
    assert waiting >= n, f"only {waiting} of {n} pods wait in PreBind"


async def time_cycles(s: Scheduler, pods: int) -> np.ndarray:
    """Pop and schedule ``pods`` pods, each cycle timed alone (the loop's own awaits in between are not):
    milliseconds per cycle, the first 10% dropped as warm-up."""
    durations = []
    for _ in range(pods):
        qi = await s.queue.pop()
        t = time.perf_counter()
        s.schedule_one(qi)
        durations.append(time.perf_counter() - t)
        await asyncio.sleep(0)     # tasks the cycle started (evictions, bindings) run here, off the clock
    return np.array(durations[pods // 10:]) * 1e3


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.micro_cycle")
    p.add_argument("--nodes", type=int, nargs="+", default=[500, 5000, 15000])
    p.add_argument("--pods", type=int, default=2000)
    p.add_argument("--percentage", nargs="+", default=["adaptive", "100"],
                   help="percentageOfNodesToScore values: 'adaptive' (unset) or 1..100")
    p.add_argument("--shape", nargs="+", default=["default"], choices=sorted(SHAPES),
                   help="the measured pods' shape (default: scheduler_perf's pod-default)")
    p.add_argument("--existing", type=int, default=0, help="pods bound before the measured ones")
    p.add_argument("--nominated", type=int, nargs="+", default=[0],
                   help="pods nominated to as many nodes, never bound, while measuring (Consolidation's promises)")
    p.add_argument("--prebind-waiting", type=int, default=0,
                   help="WaitForFirstConsumer pods left waiting in PreBind (for a PV controller) while measuring")
    args = p.parse_args(argv)
    print(f"{'nodes':>6}  {'existing':>8}  {'prebind':>7}  {'nominated':>9}  {'shape':<18} {'percentageOfNodesToScore':<24} "
          f"{'mean':>7} {'p50':>7} {'p99':>7}  (us per cycle)")
    for n in args.nodes:
        for shape in args.shape:
            for pct in args.percentage:
                for k in args.nominated:
                    d = asyncio.run(measure(n, args.pods, None if pct == "adaptive" else int(pct), shape,
                                            args.existing, args.prebind_waiting, k))
                    print(f"{n:>6}  {args.existing:>8}  {args.prebind_waiting:>7}  {k:>9}  {shape:<18} {pct:<24} "
                          f"{d.mean():7.0f} {np.percentile(d, 50):7.0f} {np.percentile(d, 99):7.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
