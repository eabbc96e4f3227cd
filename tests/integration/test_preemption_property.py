"""Property: preemption never evicts up, never over-commits, takes PodGroup-mode gangs whole, and ends in a bind.

Hypothesis draws a small cluster (1-3 nodes with random cpu / memory / pod
capacity) and a workload in two waves. First the *fill*: single pods and
one or two gangs (PodGroups of 2-4 small members, two in three with
disruption mode PodGroup, by the annotation or by spec.disruptionMode) of
the two lowest PriorityClasses, arriving shuffled; the test waits until each
of them is bound or says why not. Then the *mix*: single pods of every
PriorityClass, most of them higher (one class has preemptionPolicy Never),
and in a third of the examples a gang of high priority, shuffled, some after
a short pause. Pods carry labels that random policy/v1
PodDisruptionBudgets (minAvailable or maxUnavailable, a number or a
percentage) select; a PDB's status is left empty (the zero status, as
before a disruption controller has seen it) or written once, never kept up
to date: preemption must be safe either way. Some pods have a
termination grace period of a second, and the node agent makes their
deletes take that long. Priorities come from PriorityClasses through the
simulated API server's priority admission, as in a real cluster.

A write observer on the simulated API server's store follows every bind and
every pod delete as it happens; a victim is a pod the scheduler deleted (the
first delete of a uid: nothing else deletes pods here), and the Preempted
events say whom it was deleted for. Once the scheduler has settled (every
pod bound or PodScheduled=False with a message, nothing terminating, every
victim's Preempted event written, no pod written for QUIET seconds, longer
than the longest backoff), the test's own Python checks:

(a) every victim carries DisruptionTarget=True (PreemptionByScheduler) and
    has a Preempted event whose related pod (and note) names its preemptor;
    the victim's priority is strictly lower than the preemptor's, and no pod
    with preemptionPolicy Never preempts;
(b) at every bind, the requests of all pods on that node, terminating ones
    included, fit the node's allocatable;
(c) a gang with disruption mode PodGroup loses either none of its placed
    members or all of them;
(d) every preemptor ends bound, after its victims' deletes and within
    BIND_WITHIN seconds of the last one; unless a pod of strictly higher
    priority was bound since on a node it preempted on (upstream lets a
    higher-priority pod take a nominated pod's room) or holds capacity there
    as the head of the line (a Reserved event), or, for a gang
    member, on a node any member of its gang preempted on (the gang is
    whole or not at all). A gang member that preempted ends with its gang
    complete (minMember bound);
(e) every pod is bound or has PodScheduled=False with a message and no
    nomination left (a nomination holds room against pods of equal or lower
    priority; upstream clears it when preemption finds no candidate) unless
    it holds capacity as the head of the line (it got a Reserved event), and
    no single pod is left pending that fits a node once every pod of lower
    priority there is gone (for preemptionPolicy Never: that fits as is),
    unless capacity held for an older unit turned it away or the node is
    held for a pending pod of equal or higher priority.

The same property for preemptor gangs, (f): a high-priority gang whose
minMember members fit once every lower-priority pod is gone ends complete
(the group cycle's preemption: a gang preempts for all its missing members
at once, or evicts nothing). It is its own test: its nodes are filled to
the last millicore with small low-priority pods, then one high-priority gang
comes whose members each fit an empty node, so it can only get room by
preemption, and always can. The all-or-nothing half (a gang member that
caused evictions ends with its gang complete) is in (d), with the others.

Examples are few (15, and 5 for (f)) because each runs a cluster and a
scheduler for a second or two; together they take about 30 s.

The node agent's termination_delay is the longest grace period here, so
every graceful delete takes its whole grace period.
"""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
import time
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bench.simcluster import SimCluster
from bench.simcluster import errors as sim_errors
from bench.simcluster.agent import AgentConfig
from bench.simcluster.resources import lookup
from scheduler.app import App
from tests.integration.test_gang_property import (
    GROUP_LABEL, NODES, NS, POD_GROUPS, PODS, can_place, gang_config, quantity,
)

EVENTS = lookup("events.k8s.io", "v1", "events")
PDBS = lookup("policy", "v1", "poddisruptionbudgets")
PRIORITY_CLASSES = lookup("scheduling.k8s.io", "v1", "priorityclasses")
DISRUPTION_ANNOTATION = "scheduling.tandem.dev/disruption-mode"

GRACE = 1            # seconds: the grace period of the pods that take time to go
QUIET = 0.6          # seconds without a pod write (more than podMaxBackoffSeconds): settled
SETTLE_LIMIT = 20.0  # seconds: still moving after this long is a failure of its own
BIND_WITHIN = GRACE + 4.0  # seconds from a preemptor's last eviction to its bind

# ---------------------------------------------------------------------------- vocabulary

# name -> (value, preemptionPolicy)
CLASSES = {"p10": (10, "PreemptLowerPriority"), "p20": (20, "PreemptLowerPriority"),
           "p30": (30, "PreemptLowerPriority"), "p40": (40, "PreemptLowerPriority"),
           "p40-never": (40, "Never")}
LOW = ("p10", "p20")
HIGH = ("p30", "p40")
MIX = ("p10", "p20", "p30", "p30", "p40", "p40", "p40-never")   # the mix leans high: most of it must preempt

CPU_CAP = ("1", "2", "3")
MEM_CAP = ("1Gi", "2Gi", "4Gi")
POD_CAP = ("3", "110")
CPU_REQ = ("250m", "500m", "1", "1500m")
MEM_REQ = ("128Mi", "512Mi", "1Gi")
LABELS = {"team": ("a", "b"), "tier": ("web", "batch")}
MODES = ("Single", "annotation", "field")   # how a gang sets its disruption mode: not at all, or to PodGroup


@dataclasses.dataclass(frozen=True)
class PodSpec:
    name: str
    cls: str
    cpu: str
    memory: str
    labels: tuple[tuple[str, str], ...]
    grace: int
    gang: str = ""


@dataclasses.dataclass(frozen=True)
class Gang:
    name: str
    min_member: int
    mode: str


@dataclasses.dataclass(frozen=True)
class Workload:
    gangs: tuple[Gang, ...]
    fill: tuple[PodSpec, ...]
    mix: tuple[PodSpec, ...]
    pauses: frozenset[int]        # indexes into mix: wait a moment before creating that pod
    pdbs: tuple[dict[str, Any], ...]


label_sets = st.dictionaries(st.sampled_from(sorted(LABELS)), st.none()).flatmap(
    lambda keys: st.fixed_dictionaries({k: st.sampled_from(LABELS[k]) for k in keys})).map(
    lambda d: tuple(sorted(d.items())))
graces = st.sampled_from((0, 0, GRACE))


@st.composite
def nodes(draw: Any, min_size: int = 1) -> list[dict[str, Any]]:
    return [node_object(f"node-{i}", draw(st.sampled_from(CPU_CAP)), draw(st.sampled_from(MEM_CAP)),
                        draw(st.sampled_from(POD_CAP))) for i in range(draw(st.integers(min_size, 3)))]


@st.composite
def single(draw: Any, name: str, classes: tuple[str, ...]) -> PodSpec:
    return PodSpec(name, draw(st.sampled_from(classes)), draw(st.sampled_from(CPU_REQ)),
                   draw(st.sampled_from(MEM_REQ)), draw(label_sets), draw(graces))


@st.composite
def gang(draw: Any, name: str, classes: tuple[str, ...], modes: tuple[str, ...], sizes: tuple[int, int],
         cpus: tuple[str, ...] = CPU_REQ) -> tuple[Gang, list[PodSpec]]:
    """A gang of one PriorityClass and one pod template (as a Job's pods), members' grace periods apart."""
    size = draw(st.integers(*sizes))
    cls, cpu, mem = draw(st.sampled_from(classes)), draw(st.sampled_from(cpus)), draw(st.sampled_from(MEM_REQ))
    labels = draw(label_sets)
    members = [PodSpec(f"{name}-{m}", cls, cpu, mem, labels, draw(graces), name) for m in range(size)]
    return Gang(name, draw(st.integers(1, size)), draw(st.sampled_from(modes))), members


@st.composite
def pdbs(draw: Any) -> tuple[dict[str, Any], ...]:
    out = []
    for i in range(draw(st.integers(0, 3))):
        key = draw(st.sampled_from(sorted(LABELS)))
        field = draw(st.sampled_from(("minAvailable", "maxUnavailable")))
        value = draw(st.sampled_from((0, 1, 2, "50%")))
        body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                "metadata": {"name": f"pdb-{i}", "namespace": NS},
                                "spec": {"selector": {"matchLabels": {key: draw(st.sampled_from(LABELS[key]))}},
                                         field: value}}
        allowed = draw(st.sampled_from((None, 0, 1, 2)))   # None: the zero status, as nothing maintains it
        if allowed is not None:
            body["status"] = {"disruptionsAllowed": allowed, "currentHealthy": 0, "desiredHealthy": 0,
                              "expectedPods": 0, "observedGeneration": 1}
        out.append(body)
    return tuple(out)


@st.composite
def workloads(draw: Any) -> Workload:
    gangs: list[Gang] = []
    fill = [draw(single(f"fill-{i}", LOW)) for i in range(draw(st.integers(0, 6)))]
    for i in range(draw(st.integers(1, 2))):
        g, members = draw(gang(f"victims-{i}", LOW, MODES, (2, 4), CPU_REQ[:2]))   # small: most get placed
        gangs.append(g)
        fill.extend(members)
    mix = [draw(single(f"mix-{i}", MIX)) for i in range(draw(st.integers(2, 8)))]
    if draw(st.integers(0, 2)) == 0:
        g, members = draw(gang("preemptors", HIGH, ("Single",), (1, 3)))
        gangs.append(g)
        mix.extend(members)
    mix = draw(st.permutations(mix))
    pauses = draw(st.frozensets(st.integers(0, len(mix) - 1), max_size=2))
    return Workload(tuple(gangs), tuple(draw(st.permutations(fill))), tuple(mix), pauses, draw(pdbs()))


# ---------------------------------------------------------------------------- objects


def node_object(name: str, cpu: str, memory: str, pods: str) -> dict[str, Any]:
    cap = {"cpu": cpu, "memory": memory, "pods": pods}
    return {"metadata": {"name": name},
            "status": {"capacity": cap, "allocatable": cap, "conditions": [{"type": "Ready", "status": "True"}]}}


def class_object(name: str) -> dict[str, Any]:
    value, policy = CLASSES[name]
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "preemptionPolicy": policy}


def pod_group_object(g: Gang) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": g.name, "namespace": NS}
    spec: dict[str, Any] = {"minMember": g.min_member, "scheduleTimeoutSeconds": 60}
    if g.mode == "annotation":
        meta["annotations"] = {DISRUPTION_ANNOTATION: "PodGroup"}
    elif g.mode == "field":
        spec["disruptionMode"] = "PodGroup"
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": meta, "spec": spec}


def pod_object(p: PodSpec, scheduler_name: str) -> dict[str, Any]:
    labels = dict(p.labels)
    if p.gang:
        labels[GROUP_LABEL] = p.gang
    # priorityClassName only: the API server's priority admission fills spec.priority, as a real one does
    return {"metadata": {"name": p.name, "namespace": NS, "labels": labels}, "spec": {
        "schedulerName": scheduler_name, "priorityClassName": p.cls, "terminationGracePeriodSeconds": p.grace,
        "containers": [{"name": "c", "image": "pause",
                        "resources": {"requests": {"cpu": p.cpu, "memory": p.memory}}}]}}


# ---------------------------------------------------------------------------- the test's own rules

RESOURCES = ("cpu", "memory", "pods")


def allocatable_of(node: dict[str, Any]) -> tuple[int, int, int]:
    a = node["status"]["allocatable"]
    return quantity(a["cpu"], True), quantity(a["memory"], False), int(a["pods"])


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return c
    return {}


@dataclasses.dataclass(frozen=True)
class Info:
    """What the test knows of a pod it created."""

    name: str
    priority: int
    never: bool                    # preemptionPolicy Never
    want: tuple[int, int, int]     # cpu (m), memory (bytes), pods
    gang: str


class Recorder:
    """The store's write observer: binds and the scheduler's deletes, checked and timed as they happen."""

    def __init__(self, store: Any, allocatable: dict[str, tuple[int, int, int]], whole_gangs: set[str]) -> None:
        self.store = store
        self.allocatable = allocatable
        self.whole_gangs = whole_gangs
        self.info: dict[str, Info] = {}                    # uid -> the pod as created
        self.binds: dict[str, tuple[float, str]] = {}      # uid -> (when, node)
        self.deleted: dict[str, float] = {}                # uid -> when the scheduler deleted it
        self.placed_when_hit: dict[str, set[str]] = {}     # whole gang -> uids bound at its first eviction
        self.problems: list[str] = []                      # (a) and (b), as they happen
        self.last_write = time.monotonic()

    def create(self, body: dict[str, Any]) -> None:
        obj = self.store.create(PODS, NS, body).obj()
        spec = obj["spec"]
        r = spec["containers"][0]["resources"]["requests"]
        gang = (obj["metadata"].get("labels") or {}).get(GROUP_LABEL, "")
        self.info[obj["metadata"]["uid"]] = Info(obj["metadata"]["name"], spec["priority"],
                                                 spec.get("preemptionPolicy") == "Never",
                                                 (quantity(r["cpu"], True), quantity(r["memory"], False), 1), gang)

    def on_write(self, verb: str, resource: str, ns: str, name: str, result: Any) -> None:
        if isinstance(result, sim_errors.APIError) or not resource.startswith("pods"):
            return
        self.last_write = time.monotonic()
        if resource == "pods/binding":
            self._bound(result)
        elif resource == "pods" and verb == "delete" and result.uid not in self.deleted:
            self._deleted(result)

    def _on_node(self, node: str) -> list[Any]:
        return [e for e in self.store.table(PODS).objects.values()
                if e.fields["spec.nodeName"] == node and e.fields["status.phase"] not in ("Succeeded", "Failed")]

    def _bound(self, entry: Any) -> None:
        node = entry.fields["spec.nodeName"]
        self.binds[entry.uid] = (time.monotonic(), node)
        here = self._on_node(node)
        used = [sum(self.info[e.uid].want[r] for e in here) for r in range(3)]
        alloc = self.allocatable[node]
        if any(u > a for u, a in zip(used, alloc)):
            names = sorted(self.info[e.uid].name + ("(terminating)" if e.obj()["metadata"].get("deletionTimestamp")
                                                    else "") for e in here)
            self.problems.append(f"(b) binding {entry.key[1]} over-commits {node}: "
                                 f"{dict(zip(RESOURCES, used))} > {dict(zip(RESOURCES, alloc))} with {names}")

    def _deleted(self, entry: Any) -> None:
        # the first delete of a uid is the scheduler's (the agent's final delete of a graceful one comes later)
        self.deleted[entry.uid] = time.monotonic()
        c = condition(entry.obj(), "DisruptionTarget")
        if (c.get("status"), c.get("reason")) != ("True", "PreemptionByScheduler"):
            self.problems.append(f"(a) {entry.key[1]} was deleted without DisruptionTarget=True "
                                 f"(PreemptionByScheduler): {c}")
        gang = self.info[entry.uid].gang
        if gang in self.whole_gangs and gang not in self.placed_when_hit:
            self.placed_when_hit[gang] = {entry.uid} | {
                e.uid for e in self.store.table(PODS).objects.values()
                if e.uid in self.info and self.info[e.uid].gang == gang and e.fields["spec.nodeName"]}


def preempted_events(store: Any, reason: str = "Preempted") -> list[dict[str, Any]]:
    return [e for e in (EVENTS.to_view(x.obj()) for x in store.list(EVENTS, NS).entries)
            if e.get("reason") == reason]


def pods_now(store: Any) -> dict[str, dict[str, Any]]:
    """uid -> pod, as the API server holds them now."""
    return {e.uid: e.obj() for e in store.table(PODS).objects.values() if e.key[0] == NS}


def unsettled(store: Any, rec: Recorder) -> list[str]:
    """Why the cluster is not settled yet (empty: settled)."""
    why = []
    for uid, p in pods_now(store).items():
        name = p["metadata"]["name"]
        if p["metadata"].get("deletionTimestamp"):
            why.append(f"{name} terminating")
        elif not p["spec"].get("nodeName"):
            c = condition(p, "PodScheduled")
            if c.get("status") != "False" or not c.get("message"):
                why.append(f"{name} pending without PodScheduled=False and a message")
    told = {(e.get("regarding") or {}).get("uid") for e in preempted_events(store)}
    why += [f"{rec.info[uid].name} deleted without a Preempted event yet" for uid in rec.deleted if uid not in told]
    quiet = time.monotonic() - rec.last_write
    if quiet < QUIET:
        why.append(f"a pod was written {quiet:.2f}s ago")
    return why


@dataclasses.dataclass
class Outcome:
    rec: Recorder
    pods: dict[str, dict[str, Any]]        # uid -> pod, at the end
    events: list[dict[str, Any]]           # the Preempted events
    gangs: dict[str, Gang]
    allocatable: dict[str, tuple[int, int, int]]
    context: str
    holding: set[str] = dataclasses.field(default_factory=set)   # uids with a Reserved event (they hold capacity)

    def bound(self, uid: str) -> str:
        p = self.pods.get(uid)
        return (p["spec"].get("nodeName") or "") if p is not None else ""

    def rooms(self, keep: Any) -> dict[str, list[int]]:
        """Room left per node counting only the bound pods ``keep(info)`` says stay."""
        room = {n: list(a) for n, a in self.allocatable.items()}
        for uid in self.pods:
            node = self.bound(uid)
            if node and keep(self.rec.info[uid]):
                for r, v in enumerate(self.rec.info[uid].want):
                    room[node][r] -= v
        return room


# ---------------------------------------------------------------------------- the run


async def wait_for(cond: Any, limit: float, what: Any) -> None:
    deadline = time.monotonic() + limit
    while True:
        why = cond()
        if not why:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} after {limit:.0f}s: {why}")
        await asyncio.sleep(0.02)


async def run(node_objs: list[dict[str, Any]], w: Workload) -> Outcome:
    cfg, scheduler_name = gang_config()
    allocatable = {n["metadata"]["name"]: allocatable_of(n) for n in node_objs}
    whole = {g.name for g in w.gangs if g.mode != "Single"}
    with tempfile.TemporaryDirectory() as tmp:
        kc = f"{tmp}/kubeconfig"
        agent = AgentConfig(ready_delay=0.02, tick=0.01, termination_delay=float(GRACE))
        async with SimCluster(nodes=0, agent=agent, kubeconfig=kc) as cluster:
            store = cluster.store
            for n in node_objs:
                store.create(NODES, "", n)
            for name in CLASSES:
                store.create(PRIORITY_CLASSES, "", class_object(name))
            for b in w.pdbs:
                status = b.get("status")
                store.create(PDBS, NS, {k: v for k, v in b.items() if k != "status"})
                if status is not None:   # written once, as a disruption controller would, then never again
                    cur = store.get_obj(PDBS, NS, b["metadata"]["name"])
                    store.update(PDBS, NS, b["metadata"]["name"], {**cur, "status": status}, subresource="status")
            for g in w.gangs:
                store.create(POD_GROUPS, NS, pod_group_object(g))
            rec = Recorder(store, allocatable, whole)
            store.observe(rec.on_write)
            async with App(cfg, kubeconfig=kc):
                for p in w.fill:
                    rec.create(pod_object(p, scheduler_name))

                def fill_unplaced() -> list[str]:
                    return [p["metadata"]["name"] for p in pods_now(store).values()
                            if not p["spec"].get("nodeName") and condition(p, "PodScheduled").get("status") != "False"]

                await wait_for(fill_unplaced, SETTLE_LIMIT, "the fill pods were neither bound nor unschedulable")
                for i, p in enumerate(w.mix):
                    if i in w.pauses:
                        await asyncio.sleep(0.1)   # spreads the arrivals out; waits for nothing
                    rec.create(pod_object(p, scheduler_name))
                await wait_for(lambda: unsettled(store, rec), SETTLE_LIMIT, "never settled")
            events = preempted_events(store)
            holding = {e["regarding"]["uid"] for e in preempted_events(store, "Reserved")}
            pods = pods_now(store)

    def line(uid: str) -> str:
        i = rec.info[uid]
        where = (pods[uid]["spec"].get("nodeName") or "pending") if uid in pods else "evicted"
        return f"{i.name}(prio {i.priority}{' never' if i.never else ''}, {i.want[0]}m/{i.want[1] >> 20}Mi)@{where}"

    context = (f"\nnodes: { {n: (a[0], a[1] >> 20, a[2]) for n, a in allocatable.items()} } (m, Mi, pods)"
               f"\ngangs: {[(g.name, g.min_member, g.mode) for g in w.gangs]}"
               f"\npdbs: {[(b['spec'], (b.get('status') or {}).get('disruptionsAllowed')) for b in w.pdbs]}"
               f"\npods: {[line(u) for u in rec.info]}"
               f"\npreempted: {[(e['regarding']['name'], e['note']) for e in events]}")
    return Outcome(rec, pods, events, {g.name: g for g in w.gangs}, allocatable, context, holding)


# ---------------------------------------------------------------------------- the checks


def check_safety(o: Outcome) -> None:
    """(a) to (e)."""
    rec, info, ctx = o.rec, o.rec.info, o.context
    assert not rec.problems, "\n".join(rec.problems) + ctx

    # (a) strictly lower priority, named preemptor, never a Never pod (two preemptors may pick one victim)
    preemptors_of: dict[str, set[str]] = {}
    nodes_of: dict[str, set[str]] = {}
    for e in o.events:
        victim, preemptor = e["regarding"]["uid"], (e.get("related") or {}).get("uid", "")
        assert preemptor in info, f"(a) the Preempted event of {e['regarding']['name']} names no pod of ours: {e}{ctx}"
        node = e["note"].rsplit(" ", 1)[-1]
        assert e["note"] == f"Preempted by pod {preemptor} on node {node}" and node in o.allocatable, (
            f"(a) Preempted note {e['note']!r}{ctx}")
        v, p = info[victim], info[preemptor]
        assert v.priority < p.priority, (
            f"(a) {v.name} (priority {v.priority}) was preempted by {p.name} (priority {p.priority}){ctx}")
        assert not p.never, f"(a) {p.name} has preemptionPolicy Never but preempted {v.name}{ctx}"
        preemptors_of.setdefault(victim, set()).add(preemptor)
        nodes_of.setdefault(preemptor, set()).add(node)
    for uid in rec.deleted:
        assert uid in preemptors_of, f"(a) {info[uid].name} was deleted, and no Preempted event says for whom{ctx}"

    # (c) PodGroup-mode gangs are evicted whole
    for g, placed in rec.placed_when_hit.items():
        spared = sorted(info[u].name for u in placed if u not in rec.deleted)
        assert not spared, (f"(c) {g} (disruption mode PodGroup) lost members to preemption but kept {spared}, "
                            f"fewer than all its placed members{ctx}")

    # (d) every preemptor ends bound, after its victims and soon after them, unless a higher pod took its room;
    # a gang member's room is its gang's (all or nothing: a higher pod on a sibling's node leaves the gang short,
    # and the siblings' nominations go with it)
    gang_nodes: dict[str, set[str]] = {}
    for preemptor, nodes in nodes_of.items():
        if info[preemptor].gang:
            gang_nodes.setdefault(info[preemptor].gang, set()).update(nodes)
    for preemptor, nodes in nodes_of.items():
        p = info[preemptor]
        evictions = [rec.deleted[v] for v, q in preemptors_of.items() if preemptor in q and v in rec.deleted]
        first = min(evictions, default=0.0)
        if preemptor not in rec.binds:
            room = gang_nodes[p.gang] if p.gang else nodes
            overtaken = [info[u].name for u, (t, n) in rec.binds.items()
                         if n in room and t >= first and info[u].priority > p.priority]
            # a unit of higher priority that holds capacity there (a Reserved event, nominated to the node) took
            # the room as a bound pod would: held room is the head of the line's (README, No starvation)
            overtaken += [info[u].name for u, q in o.pods.items()
                          if u in o.holding and not o.bound(u) and info[u].priority > p.priority
                          and (q.get("status") or {}).get("nominatedNodeName") in room]
            assert overtaken, (f"(d) {p.name} preempted on {sorted(nodes)} and never bound, and no pod of higher "
                               f"priority was bound there since{ctx}")
            continue
        t_bind = rec.binds[preemptor][0]
        if evictions:
            assert t_bind > max(evictions), f"(d) {p.name} was bound before its victims were deleted{ctx}"
            assert t_bind - max(evictions) <= BIND_WITHIN, (
                f"(d) {p.name} was bound {t_bind - max(evictions):.1f}s after its last eviction{ctx}")
        if p.gang:
            g = o.gangs[p.gang]
            n = sum(1 for u, i in info.items() if i.gang == p.gang and o.bound(u))
            assert n >= g.min_member, (f"(d) {p.name} of gang {g.name} preempted, and the gang ends with {n} of "
                                       f"minMember {g.min_member} bound{ctx}")

    # (e) bound or told why, and nominated nowhere (a nomination holds room against pods of its priority and
    # lower); no single pod left pending that fits once the lower-priority pods are gone
    for uid, pod in o.pods.items():
        i = info[uid]
        if o.bound(uid):
            continue
        c = condition(pod, "PodScheduled")
        assert c.get("status") == "False" and c.get("message"), f"(e) {i.name} is pending and says nothing: {c}{ctx}"
        nominated = (pod.get("status") or {}).get("nominatedNodeName")
        # a pod holding capacity as the head of the line is nominated to its held node (README, No starvation)
        assert not nominated or uid in o.holding, (f"(e) {i.name} (priority {i.priority}) ends pending but still nominated to {nominated} "
                               f"(its last attempt: {c['message']!r}); the nomination holds room there against pods "
                               f"of equal or lower priority, and must go when the pod cannot use it (upstream: "
                               f"PostFilter's result clears it when preemption finds no candidate){ctx}")
        if i.gang or "had capacity reserved for" in c["message"]:
            continue   # a gang's members may not fit one by one; held room is promised to an older unit
        room = o.rooms(lambda other: other.priority >= i.priority or i.never)
        fits = [n for n, r in room.items() if all(v <= r[k] for k, v in enumerate(i.want))]
        # room held for a pending pod of equal or higher priority (it got a Reserved event and is nominated
        # there) is not this pod's to take, by preemption or otherwise (README, No starvation)
        held = {(p.get("status") or {}).get("nominatedNodeName") for u, p in o.pods.items()
                if u in o.holding and not o.bound(u) and info[u].priority >= i.priority}
        fits = [n for n in fits if n not in held]
        assert not fits, (f"(e) {i.name} (priority {i.priority}) is pending ({c['message']!r}) but fits on {fits} "
                          f"{'as is' if i.never else 'without its lower-priority pods'}{ctx}")


def check_preemptor_gangs(o: Outcome) -> None:
    """(f) a high-priority gang that fits once the lower-priority pods are gone ends complete."""
    info = o.rec.info
    for g in o.gangs.values():
        members = [u for u, i in info.items() if i.gang == g.name]
        prio = info[members[0]].priority
        if info[members[0]].priority not in (CLASSES[c][0] for c in HIGH):
            continue
        placed = sum(1 for u in members if o.bound(u))
        if placed >= g.min_member:
            continue
        room = o.rooms(lambda other: other.priority >= prio)
        names = sorted(room)
        wants = [info[u].want for u in members if not o.bound(u)]
        witness = can_place(wants, [room[n] for n in names], g.min_member - placed)
        assert witness is None, (
            f"(f) gang {g.name} (priority {prio}, minMember {g.min_member}) ends with {placed} bound, but "
            f"{g.min_member - placed} more fit once the lower-priority pods are gone: "
            f"{[names[k] for k in witness if k >= 0]}{o.context}")


# ---------------------------------------------------------------------------- the properties


# Found by this property: "mid" preempts "low" and is nominated; "never" (higher priority, preemptionPolicy
# Never) takes half the node once "low" is gone; "mid" no longer fits and has no victims left, and must lose its
# nomination, or it keeps holding room that "tiny" (lower priority, fits in what is left) is refused.
STALE_NOMINATION = Workload(
    gangs=(), fill=(PodSpec("low", "p10", "1", "128Mi", (), GRACE),),
    mix=(PodSpec("mid", "p20", "800m", "128Mi", (), 0), PodSpec("never", "p40-never", "500m", "128Mi", (), 0),
         PodSpec("tiny", "p10", "250m", "128Mi", (), 0)),
    pauses=frozenset(), pdbs=())


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(node_objs=nodes(), workload=workloads())
@example(node_objs=[node_object("node-0", "1", "1Gi", "110")], workload=STALE_NOMINATION)
def test_preemption_evicts_only_lower_priority_never_overcommits_and_ends_in_a_bind(node_objs, workload):
    check_safety(asyncio.run(run(node_objs, workload)))


@st.composite
def gang_workloads(draw: Any) -> tuple[list[dict[str, Any]], Workload]:
    """Nodes filled to the last millicore with small low-priority pods, then one high-priority gang whose members
    each fit an empty node: it can only get room by preemption, and always can."""
    node_objs = [node_object(f"node-{i}", draw(st.sampled_from(CPU_CAP)), "4Gi", "110")
                 for i in range(draw(st.integers(2, 3)))]
    total = sum(quantity(n["status"]["allocatable"]["cpu"], True) for n in node_objs)
    fill = [PodSpec(f"fill-{i}", draw(st.sampled_from(LOW)), "250m", "128Mi", (), 0) for i in range(total // 250)]
    smallest = min(quantity(n["status"]["allocatable"]["cpu"], True) for n in node_objs)
    cpu = draw(st.sampled_from([c for c in CPU_REQ if quantity(c, True) <= smallest]))
    size = draw(st.integers(1, len(node_objs)))
    g = Gang("preemptors", draw(st.integers(1, size)), "Single")
    cls = draw(st.sampled_from(HIGH))
    mix = [PodSpec(f"preemptors-{m}", cls, cpu, "128Mi", (), 0, g.name) for m in range(size)]
    return node_objs, Workload((g,), tuple(fill), tuple(mix), frozenset(), ())


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=gang_workloads())
def test_a_high_priority_gang_that_fits_once_lower_pods_are_gone_ends_complete(case):
    node_objs, workload = case
    check_preemptor_gangs(asyncio.run(run(node_objs, workload)))
