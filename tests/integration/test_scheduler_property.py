"""Property: whatever the nodes and pods, the scheduler's placements are valid and nothing that fits waits.

Hypothesis draws a small cluster (nodes with random cpu / memory / pod
capacity, labels from a small vocabulary, taints from a small set) and a
batch of pods (random requests, nodeSelectors, required node affinity with
In / NotIn / Exists / DoesNotExist, tolerations). Each example starts a fresh
simulated cluster and scheduler, creates the pods, waits until the scheduler
has settled, and then checks, with the test's own straightforward Python
(never the plugins):

* no node is over-committed in cpu, memory or pod count;
* every bound pod matches its nodeSelector and required node affinity on
  its node, and tolerates the node's NoSchedule and NoExecute taints;
* every pod left pending fits on no node, given what is bound there
  (resources, selector, affinity and taints together), and says so with
  PodScheduled=False; or fits only on nodes whose room is held for an older
  pod that only capacity blocks (CapacityReservation: the holder is
  nominated there, and the pod's message says the room is reserved).

"Settled" is: every pod bound, or every pending pod fits nowhere and carries
its condition. Once that holds nothing can change any more (bound pods stay,
so a pod that fits nowhere keeps fitting nowhere), and a pod still being
bound would show up as a pending pod that fits, so the wait cannot stop
early.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.simcluster import SimCluster
from bench.simcluster.agent import AgentConfig
from bench.simcluster.resources import lookup
from scheduler.app import App
from scheduler.config import parse_config

PODS = lookup("", "v1", "pods")
NODES = lookup("", "v1", "nodes")
SCHED = "tandem-scheduler"
NS = "default"

CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "podInitialBackoffSeconds": 0.05,
    "podMaxBackoffSeconds": 0.5,
    "clientConnection": {"qps": 2000, "burst": 4000},
}

# ---------------------------------------------------------------------------- vocabulary

LABELS = {"zone": ("a", "b", "c"), "disk": ("ssd", "hdd"), "gpu": ("true",)}
TAINTS = (
    {"key": "dedicated", "value": "batch", "effect": "NoSchedule"},
    {"key": "maintenance", "value": "", "effect": "NoExecute"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},   # soft: never blocks a pod
    {"key": "dedicated", "value": "infra", "effect": "NoSchedule"},
)
TOLERATIONS = (
    {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"},
    {"key": "dedicated", "operator": "Exists"},
    {"key": "maintenance", "operator": "Exists", "effect": "NoExecute"},
    {"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"},   # wrong effect: tolerates nothing here
    {"operator": "Exists"},                                                # tolerates everything
)
CPU_CAP = ("1", "2", "1500m", "4")
MEM_CAP = ("1Gi", "2Gi", "4Gi")
POD_CAP = ("1", "2", "3", "110")
CPU_REQ = (None, "100m", "250m", "500m", "1", "1500m")
MEM_REQ = (None, "64Mi", "256Mi", "512Mi", "1Gi")

label_sets = st.dictionaries(st.sampled_from(sorted(LABELS)), st.none()).flatmap(
    lambda keys: st.fixed_dictionaries({k: st.sampled_from(LABELS[k]) for k in keys}))


@st.composite
def nodes(draw: Any) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(1, 5))):
        cap = {"cpu": draw(st.sampled_from(CPU_CAP)), "memory": draw(st.sampled_from(MEM_CAP)),
               "pods": draw(st.sampled_from(POD_CAP))}
        taints = []
        if draw(st.integers(0, 2)) == 0:  # a third of the nodes are tainted: most pods must fit on resources
            taints = draw(st.lists(st.sampled_from(TAINTS), min_size=1, max_size=2,
                                   unique_by=lambda t: (t["key"], t["effect"])))
        out.append({
            "metadata": {"name": f"node-{i}", "labels": draw(label_sets)},
            "spec": {"taints": [dict(t) for t in taints]} if taints else {},
            "status": {"capacity": cap, "allocatable": cap,
                       "conditions": [{"type": "Ready", "status": "True"}]},
        })
    return out


@st.composite
def expressions(draw: Any) -> dict[str, Any]:
    key = draw(st.sampled_from(sorted(LABELS)))
    op = draw(st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist")))
    e: dict[str, Any] = {"key": key, "operator": op}
    if op in ("In", "NotIn"):
        e["values"] = draw(st.lists(st.sampled_from(LABELS[key]), min_size=1, max_size=2, unique=True))
    return e


@st.composite
def pods(draw: Any) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(1, 16))):
        requests = {k: v for k, v in (("cpu", draw(st.sampled_from(CPU_REQ))),
                                      ("memory", draw(st.sampled_from(MEM_REQ)))) if v is not None}
        spec: dict[str, Any] = {"schedulerName": SCHED,
                                "containers": [{"name": "c", "image": "pause", "resources": {"requests": requests}}]}
        if draw(st.integers(0, 3)) == 0:
            spec["nodeSelector"] = draw(label_sets)
        if draw(st.integers(0, 3)) == 0:
            terms = draw(st.lists(st.lists(expressions(), min_size=1, max_size=2), min_size=1, max_size=2))
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}}}
        tolerations = draw(st.lists(st.sampled_from(TOLERATIONS), max_size=2, unique_by=repr))
        if tolerations:
            spec["tolerations"] = [dict(t) for t in tolerations]
        out.append({"metadata": {"name": f"pod-{i}", "namespace": NS}, "spec": spec})
    return out


# ---------------------------------------------------------------------------- the test's own rules


def quantity(v: str, cpu: bool) -> int:
    """Millicores for cpu, bytes otherwise; enough for the quantities this file writes."""
    if v.endswith("m"):
        return int(v[:-1])
    for suffix, mult in (("Ki", 2 ** 10), ("Mi", 2 ** 20), ("Gi", 2 ** 30)):
        if v.endswith(suffix):
            return int(v[:-2]) * mult
    return int(v) * (1000 if cpu else 1)


def requests_of(pod: dict[str, Any]) -> dict[str, int]:
    out = {"cpu": 0, "memory": 0, "pods": 1}
    for c in pod["spec"]["containers"]:
        r = (c.get("resources") or {}).get("requests") or {}
        for k in ("cpu", "memory"):
            if k in r:
                out[k] += quantity(r[k], k == "cpu")
    return out


def allocatable_of(node: dict[str, Any]) -> dict[str, int]:
    a = node["status"]["allocatable"]
    return {"cpu": quantity(a["cpu"], True), "memory": quantity(a["memory"], False), "pods": int(a["pods"])}


def matches_expression(labels: dict[str, str], e: dict[str, Any]) -> bool:
    key, op, values = e["key"], e["operator"], e.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    raise AssertionError(f"the test does not generate operator {op}")


def placement_problems(pod: dict[str, Any], node: dict[str, Any]) -> list[str]:
    """Why ``pod`` may not run on ``node``, resources aside."""
    spec, labels = pod["spec"], node["metadata"].get("labels") or {}
    problems = []
    for k, v in (spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            problems.append(f"nodeSelector {k}={v}")
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required is not None:
        terms = required.get("nodeSelectorTerms") or []
        if not any(all(matches_expression(labels, e) for e in t.get("matchExpressions") or []) for t in terms):
            problems.append("required node affinity")
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint["effect"] in ("NoSchedule", "NoExecute") and not any(
                tolerates(t, taint) for t in spec.get("tolerations") or []):
            problems.append(f"taint {taint['key']}={taint.get('value', '')}:{taint['effect']}")
    return problems


def tolerates(t: dict[str, Any], taint: dict[str, Any]) -> bool:
    if t.get("effect") and t["effect"] != taint["effect"]:
        return False
    if t.get("operator") == "Exists":
        return not t.get("key") or t["key"] == taint["key"]
    return t.get("key") == taint["key"] and (t.get("value") or "") == (taint.get("value") or "")


def fits(want: dict[str, int], room: dict[str, int]) -> bool:
    return all(room[k] >= v for k, v in want.items())


class View:
    """The cluster as the API server holds it right now."""

    def __init__(self, cluster: SimCluster) -> None:
        self.nodes = {e.key[1]: e.obj() for e in cluster.store.table(NODES).objects.values()}
        self.pods = {e.key[1]: e.obj() for e in cluster.store.table(PODS).objects.values() if e.key[0] == NS}
        self.room = {n: allocatable_of(o) for n, o in self.nodes.items()}
        for p in self.pods.values():
            node = p["spec"].get("nodeName")
            if node:
                for k, v in requests_of(p).items():
                    self.room[node][k] -= v

    def pending(self) -> list[str]:
        return [n for n, p in self.pods.items() if not p["spec"].get("nodeName")]

    def fitting_nodes(self, name: str) -> list[str]:
        pod = self.pods[name]
        want = requests_of(pod)
        return [n for n, node in self.nodes.items() if fits(want, self.room[n]) and not placement_problems(pod, node)]

    def waiting_fits(self, name: str) -> list[str]:
        """The nodes the pending pod fits that nothing keeps it from: all it fits, but for the nodes whose room is
        held for an older pod or gang (CapacityReservation) when the pod says a hold turned it away; those
        are the nominated nodes of pending pods."""
        fit = self.fitting_nodes(name)
        if fit and any("had capacity reserved for" in (c.get("message") or "")
                       for c in (self.pods[name].get("status") or {}).get("conditions") or ()):
            held = {(p.get("status") or {}).get("nominatedNodeName") for p in self.pods.values()
                    if not p["spec"].get("nodeName")}
            fit = [n for n in fit if n not in held]
        return fit

    def settled(self) -> bool:
        for name in self.pending():
            cond = [c for c in (self.pods[name].get("status") or {}).get("conditions") or ()
                    if c.get("type") == "PodScheduled"]
            if not cond or cond[0].get("status") != "False" or self.waiting_fits(name):
                return False
        return True


# ---------------------------------------------------------------------------- the property


async def scenario(node_objs: list[dict[str, Any]], pod_objs: list[dict[str, Any]], view_of: Any = None,
                   settle_timeout: float = 10.0) -> Any:
    """Run the pods on the nodes until settled, check the final state, and return it (a ``view_of(cluster)``,
    by default :class:`View`; another view with the same methods adds its own rules of fit)."""
    view_of = view_of or View
    with tempfile.TemporaryDirectory() as tmp:
        kc = f"{tmp}/kubeconfig"
        agent = AgentConfig(ready_delay=0.02, tick=0.01)
        async with SimCluster(nodes=0, agent=agent, kubeconfig=kc) as cluster:
            for n in node_objs:
                cluster.store.create(NODES, "", n)
            async with App(parse_config(CONFIG, "<property>"), kubeconfig=kc):
                for p in pod_objs:
                    cluster.store.create(PODS, NS, p)
                deadline = time.monotonic() + settle_timeout
                while not view_of(cluster).settled():
                    if time.monotonic() > deadline:
                        v = view_of(cluster)
                        stuck = {n: v.waiting_fits(n) for n in v.pending()}
                        raise AssertionError(f"never settled; pending pods and the nodes they fit: {stuck}")
                    await asyncio.sleep(0.02)
                await asyncio.sleep(0.1)  # anything still in flight would land now
                view = view_of(cluster)

    for name, room in view.room.items():
        assert all(v >= 0 for v in room.values()), f"{name} is over-committed: {room}"
    for name, pod in view.pods.items():
        node = pod["spec"].get("nodeName")
        if node:
            problems = placement_problems(pod, view.nodes[node])
            assert not problems, f"{name} was bound to {node} despite {problems}"
        else:
            assert not view.waiting_fits(name), f"{name} is pending but fits {view.waiting_fits(name)}"
    assert view.settled()
    return view


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node_objs=nodes(), pod_objs=pods())
def test_placements_are_valid_and_no_pod_that_fits_is_left_pending(node_objs, pod_objs):
    asyncio.run(scenario(node_objs, pod_objs))
