"""Consolidation in process: defragment, compact, respread, steering, dry run, and what is never moved.

A real scheduler runs on a fake clock against a fake API (tests/support/inprocess.py) that also plays the
controllers a move depends on (:class:`Cluster`): an eviction marks the pod terminating (unless a budget
refuses it with a 429), a ReplicaSet creates the next pod at once, and the kubelet deletes the terminating
pod and makes a bound pod Running and Ready.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from plugins.consolidation import left_by
from scheduler.apiclient import TooManyRequests
from scheduler.config import parse_config
from tests.support.inprocess import NS, InProcess

ZONE = "topology.kubernetes.io/zone"


def config(args: dict[str, Any], reservation: bool = True) -> Any:
    plugins: dict[str, Any] = {"multiPoint": {"enabled": [{"name": "Consolidation"}]}}
    if not reservation:
        plugins["multiPoint"]["disabled"] = [{"name": "CapacityReservation"}]
    prof = {"schedulerName": "tandem-scheduler", "plugins": plugins,
            "pluginConfig": [{"name": "Consolidation", "args": {"intervalSeconds": 5, "minPodAgeSeconds": 0,
                                                                 **args}}]}
    return parse_config({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                         "profiles": [prof]})


class Cluster:
    """The controllers and kubelet around the in-process scheduler."""

    def __init__(self, env: InProcess) -> None:
        self.env = env
        self.n = 0
        self.evictions: list[str] = []              # pod names evicted, in order
        self.refuse: int = 0                        # the next evictions answered 429
        self.created: dict[str, str] = {}           # replacement name -> the name of the pod it replaced
        self.history: dict[str, list[str]] = {}     # pod name -> nodes it was bound to (its own only)
        self.sets: dict[str, dict[str, Any]] = {}   # ReplicaSet name -> its pod template
        self.slow_answer = 0                        # loop turns an eviction's answer takes
        api = env.api
        orig_bind = api.bind

        async def bind(namespace: str, name: str, uid: str, node: str) -> None:
            await orig_bind(namespace, name, uid, node)
            self.history.setdefault(name, []).append(node)
            asyncio.get_running_loop().call_soon(self._run, name)

        async def create(path: str, body: Any, **_: Any) -> dict[str, Any]:
            if path.endswith("/eviction"):
                answer = self._evict(path.split("/")[-2])
                for _ in range(self.slow_answer):   # the replacement is made and scheduled before the answer
                    await asyncio.sleep(0)
                return answer
            return body

        api.bind = bind
        api.create = create

    def path(self, name: str) -> str:
        return f"/api/v1/namespaces/{NS}/pods/{name}"

    def replica_set(self, rs: str, cpu: str = "1", labels: dict[str, str] | None = None,
                    spread: list[dict[str, Any]] | None = None, kind: str = "ReplicaSet") -> None:
        """A controller of pods ``rs-N``: a ReplicaSet's replacement has a new name; a StatefulSet's comes back
        under the evicted pod's name (a new uid) once that pod is gone."""
        spec: dict[str, Any] = {"schedulerName": self.env.profile, "terminationGracePeriodSeconds": 0,
                                "containers": [{"name": "c", "image": "x",
                                                "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}
        if spread:
            spec["topologySpreadConstraints"] = spread
        self.sets[rs] = {"labels": labels or {"app": rs}, "spec": spec, "kind": kind}

    def running(self, rs: str, node: str, annotations: dict[str, str] | None = None) -> str:
        """A pod of ReplicaSet ``rs`` (or a bare pod when ``rs`` is not one), Running and Ready on ``node``."""
        self.n += 1
        name = f"{rs}-{self.n}"
        tmpl = self.sets.get(rs) or {"labels": {"app": rs}, "spec": {
            "schedulerName": self.env.profile, "containers": [
                {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}}]}}
        meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-{name}", "resourceVersion": self.env.api.rv(),
                                "labels": dict(tmpl["labels"]), "creationTimestamp": "2026-01-01T00:00:00Z"}
        if rs in self.sets:
            meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": self.sets[rs]["kind"], "name": rs,
                                        "uid": f"rs-{rs}", "controller": True}]
        if annotations:
            meta["annotations"] = annotations
        spec = copy.deepcopy(tmpl["spec"])
        spec["nodeName"] = node
        obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
               "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z",
                          "conditions": [{"type": "Ready", "status": "True"}]}}
        self.env.api.objects[self.path(name)] = obj
        self.env.s.on_pod_add(obj)
        self.history[name] = [node]
        return name

    def _evict(self, name: str) -> dict[str, Any]:
        if self.refuse > 0:
            self.refuse -= 1
            raise TooManyRequests(429, "TooManyRequests",
                                  "Cannot evict pod as it would violate the pod's disruption budget.")
        self.evictions.append(name)
        old = self.env.api.objects[self.path(name)]
        new = copy.deepcopy(old)
        new["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        new["metadata"]["resourceVersion"] = self.env.api.rv()
        self.env.api.objects[self.path(name)] = new
        self.env.s.on_pod_update(old, new)
        owner = (old["metadata"].get("ownerReferences") or [{}])[0].get("name")
        loop = asyncio.get_running_loop()
        if owner in self.sets and self.sets[owner]["kind"] == "StatefulSet":
            loop.call_soon(self._gone, name)
            loop.call_soon(self._replace, owner, name, name)
            return {"kind": "Status", "status": "Success"}
        if owner in self.sets:
            loop.call_soon(self._replace, owner, name)
        loop.call_soon(self._gone, name)
        return {"kind": "Status", "status": "Success"}

    def _replace(self, rs: str, old_name: str, name: str = "") -> None:
        self.n += 1
        uid = f"uid-{name}-{self.n}" if name else f"uid-{rs}-{self.n}"
        name = name or f"{rs}-{self.n}"
        tmpl = self.sets[rs]
        obj = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": NS, "uid": uid, "resourceVersion": self.env.api.rv(),
                            "labels": dict(tmpl["labels"]), "creationTimestamp": "2026-01-01T00:00:00Z",
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": tmpl["kind"], "name": rs,
                                                 "uid": f"rs-{rs}", "controller": True}]},
               "spec": copy.deepcopy(tmpl["spec"]), "status": {"phase": "Pending"}}
        self.created[name] = old_name
        self.env.api.objects[self.path(name)] = obj
        self.env.s.on_pod_add(obj)

    def _gone(self, name: str) -> None:
        obj = self.env.api.objects.pop(self.path(name), None)
        if obj is not None:
            self.env.s.on_pod_delete(obj)

    def _run(self, name: str) -> None:
        old = self.env.api.objects.get(self.path(name))
        if old is None:
            return
        new = copy.deepcopy(old)
        new["status"] = {"phase": "Running", "startTime": "2026-01-01T00:00:00Z",
                         "conditions": [{"type": "Ready", "status": "True"}]}
        new["metadata"]["resourceVersion"] = self.env.api.rv()
        self.env.api.objects[self.path(name)] = new
        self.env.s.on_pod_update(old, new)

    def nodes_of(self, prefix: str) -> dict[str, str]:
        return {o["metadata"]["name"]: o["spec"].get("nodeName", "") for p, o in self.env.api.objects.items()
                if "/pods/" in p and o["metadata"]["name"].startswith(prefix)}


def two_low_nodes(env: InProcess, c: Cluster) -> None:
    """Two 4-cpu nodes with one 500m pod of ReplicaSet web each: compaction empties one into the other."""
    c.replica_set("web", cpu="500m")
    env.node("n0", cpu="4")
    env.node("n1", cpu="4")
    c.running("web", "n0")
    c.running("web", "n1")


async def started(cfg: Any) -> tuple[InProcess, Cluster, asyncio.Task[None]]:
    env = InProcess(cfg)
    c = Cluster(env)
    env.start()
    task = asyncio.create_task(env.s.rebalancer.run())
    return env, c, task


async def finish(env: InProcess, task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await env.stop()


async def run_for(env: InProcess, seconds: float, step: float = 0.5) -> None:
    t = 0.0
    while t < seconds:
        await env.advance(step)
        t += step


def no_bounce_back(env: InProcess) -> None:
    m = env.s.rebalancer.metrics
    assert m is not None
    assert not any(s.value for metric in m.bounce_backs.collect() for s in metric.samples
                   if s.name.endswith("_total"))


@pytest.mark.parametrize("reservation, slow", [(True, 0), (False, 0), (True, 40)])
async def test_defragment_opens_whole_nodes_for_a_gang(reservation: bool, slow: int) -> None:
    env, c, task = await started(config({}, reservation))
    c.slow_answer = slow   # 40: each replacement is in a cycle before its eviction's answer arrives
    try:
        c.replica_set("web")
        for i in range(4):
            env.node(f"n{i}", cpu="4")
        for i in range(4):
            c.running("web", f"n{i}")
            c.running("web", f"n{i}")
        env.native_group("g", 2)
        env.pod("g-0", group="g", cpu="4")
        env.pod("g-1", group="g", cpu="4")
        await run_for(env, 30)
        gang = env.bound("g-0", "g-1")
        assert len(gang) == 2 and gang["g-0"] != gang["g-1"], env.message("g-0")
        assert 1 <= len(c.evictions) <= 4
        for new, old in c.created.items():
            assert c.history.get(new), f"replacement {new} never bound"
            assert c.history[new][0] != c.history[old][0], f"{new} went back to {c.history[old][0]}"
        no_bounce_back(env)
        notes = [n for who, reason, n in env.events.recorded if reason == "Defragment"]
        assert len(notes) == len(c.evictions)
        assert all("to open room for pod group" in n and "to node n" in n for n in notes)
    finally:
        await finish(env, task)


async def test_nothing_to_gain_evicts_nothing() -> None:
    env, c, task = await started(config({}))
    try:
        c.replica_set("web")
        for i in range(4):
            env.node(f"n{i}", cpu="4")
            c.running("web", f"n{i}")
        env.pod("huge", cpu="8")
        await run_for(env, 20)
        assert c.evictions == []
        assert env.bound("huge") == {}
    finally:
        await finish(env, task)


async def test_compact_empties_low_nodes_and_keeps_prefer_no_eviction() -> None:
    env, c, task = await started(config({"defragment": False, "compact": {"enabled": True}}))
    try:
        c.replica_set("web", cpu="500m")
        for i in range(4):
            env.node(f"n{i}", cpu="4")
        stay = c.running("web", "n3", annotations={"descheduler.alpha.kubernetes.io/prefer-no-eviction": "true"})
        for i in range(3):
            c.running("web", f"n{i}")
        await run_for(env, 40)
        placed = {n for n in c.nodes_of("web").values() if n}
        assert len(placed) <= 2, c.nodes_of("web")
        assert c.nodes_of(stay)[stay] == "n3"
        assert stay not in c.evictions
        no_bounce_back(env)
        notes = [n for who, reason, n in env.events.recorded if reason == "Compact"]
        assert notes and all("to empty node(s)" in n for n in notes)
    finally:
        await finish(env, task)


async def test_respread_to_a_new_zone_with_two_evictions() -> None:
    env, c, task = await started(config({"defragment": False, "spread": {"enabled": True}}))
    try:
        c.replica_set("web", cpu="100m", spread=[{"maxSkew": 1, "topologyKey": ZONE,
                                                   "whenUnsatisfiable": "DoNotSchedule",
                                                   "labelSelector": {"matchLabels": {"app": "web"}}}])
        env.node("a", zone="A")
        env.node("b", zone="B")
        for _ in range(3):
            c.running("web", "a")
            c.running("web", "b")
        await run_for(env, 10)
        assert c.evictions == []   # 3+3 over two zones is within maxSkew
        env.node("c", zone="C")
        await run_for(env, 30)
        zones = sorted(n for n in c.nodes_of("web").values() if n)
        assert zones.count("a") == 2 and zones.count("b") == 2 and zones.count("c") == 2, zones
        assert len(c.evictions) == 2
        no_bounce_back(env)
    finally:
        await finish(env, task)


async def test_dry_run_reports_and_evicts_nothing() -> None:
    env, c, task = await started(config({"dryRun": True, "defragment": False, "compact": {"enabled": True}}))
    try:
        c.replica_set("web", cpu="500m")
        for i in range(3):
            env.node(f"n{i}", cpu="4")
            c.running("web", f"n{i}")
        await run_for(env, 20)
        assert c.evictions == []
        notes = [n for who, reason, n in env.events.recorded if reason == "Compact"]
        assert notes and all(n.startswith("dry run: compact would move") and "to node n" in n for n in notes)
        assert len(notes) == len(set(notes))   # told once, not every interval
    finally:
        await finish(env, task)


async def test_bare_pods_and_job_pods_are_never_moved() -> None:
    env, c, task = await started(config({"defragment": False, "compact": {"enabled": True}}))
    try:
        for i in range(3):
            env.node(f"n{i}", cpu="4")
            c.running(f"bare{i}", f"n{i}")
        await run_for(env, 20)
        assert c.evictions == []
    finally:
        await finish(env, task)


async def test_a_refused_eviction_is_retried_and_the_replacement_avoids_the_source() -> None:
    env, c, task = await started(config({"defragment": False, "compact": {"enabled": True}}))
    try:
        two_low_nodes(env, c)
        c.refuse = 2
        await run_for(env, 30)
        assert len(c.evictions) == 1
        (new, old), = c.created.items()
        assert c.history[new][0] != c.history[old][0]
        m = env.s.rebalancer.metrics
        errors = [s.value for metric in m.pods_evicted.collect() for s in metric.samples
                  if s.name.endswith("_total") and s.labels["result"] == "error"]
        assert sum(errors) == 2
        assert left_by("ReplicaSet default/web") == "node(s) were left by a pod of ReplicaSet default/web moved away"
    finally:
        await finish(env, task)


def test_args_are_validated() -> None:
    from scheduler.framework import ConfigError
    with pytest.raises(ConfigError, match="maxMovesPerNode"):
        config({"maxMovesPerNode": 0})
    with pytest.raises(ConfigError, match="compact.thresholds.cpu"):
        config({"compact": {"enabled": True, "thresholds": {"cpu": 120}}})
    with pytest.raises(ConfigError, match="unknown field"):
        config({"maxMoves": 1})
    cfg = config({"intervalSeconds": 5, "minPodAgeSeconds": 0})
    args = cfg.profiles[0].plugin_args["Consolidation"]
    assert args.interval_seconds == 5 and args.min_pod_age_seconds == 0 and args.defragment


@pytest.mark.parametrize("rules, ignored", [
    ([], False),
    ([{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}], True),
    ([{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}], True),
    ([{"action": "Count", "onPodConditions": [{"type": "DisruptionTarget"}]}], False),
    ([{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "False"}]}], False),
    # an exit-code rule first may match the evicted container's exit code: it decides, so the pod may not move
    ([{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},
      {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}], False),
    ([{"action": "Ignore", "onPodConditions": [{"type": "ConfigIssue"}]},
      {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}], True),
])
def test_a_jobs_pods_move_only_when_its_pod_failure_policy_ignores_disruption(rules: list, ignored: bool) -> None:
    from scheduler.state.moves import disruption_ignored
    job = {"spec": {"podFailurePolicy": {"rules": rules}}} if rules else {"spec": {}}
    assert disruption_ignored(job) is ignored


@pytest.mark.parametrize("ignores", [True, False])
async def test_job_pods_are_compacted_only_if_their_job_ignores_disruption(ignores: bool) -> None:
    env, c, task = await started(config({"defragment": False,
                                         "compact": {"enabled": True, "thresholds": {"cpu": 50}}}))
    try:
        rule = {"action": "Ignore" if ignores else "Count", "onPodConditions": [{"type": "DisruptionTarget"}]}
        env.s.rebalancer.on_job({"metadata": {"uid": "job-uid"}, "spec": {"podFailurePolicy": {"rules": [rule]}}})
        env.node("n0", cpu="4")
        env.node("n1", cpu="4")
        for node in ("n0", "n1"):
            name = c.running("work", node)
            obj = env.api.objects[c.path(name)]
            new = copy.deepcopy(obj)
            new["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "work",
                                                   "uid": "job-uid", "controller": True}]
            env.api.objects[c.path(name)] = new
            env.s.on_pod_update(obj, new)
        await run_for(env, 20)
        assert len(c.evictions) == (1 if ignores else 0)
    finally:
        await finish(env, task)


async def test_a_pod_whose_required_anti_affinity_now_fails_is_moved() -> None:
    env, c, task = await started(config({"defragment": False, "spread": {"enabled": True}}))
    try:
        term = {"labelSelector": {"matchLabels": {"role": "db"}}, "topologyKey": "kubernetes.io/hostname"}
        c.replica_set("db", cpu="100m", labels={"app": "db", "role": "db"})
        c.sets["db"]["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        env.node("n0")
        env.node("n1")
        db = c.running("db", "n0")
        await run_for(env, 10)
        assert c.evictions == []   # alone on n0: its anti-affinity holds
        # another scheduler's pod with the label lands beside it (anti-affinity is not symmetric for it)
        other = c.running("other", "n0")
        obj = env.api.objects[c.path(other)]
        new = copy.deepcopy(obj)
        new["metadata"]["labels"] = {"role": "db"}
        new["spec"]["schedulerName"] = "default-scheduler"
        env.api.objects[c.path(other)] = new
        env.s.on_pod_update(obj, new)
        await run_for(env, 20)
        assert c.evictions == [db]
        (replacement, _), = c.created.items()
        assert c.history[replacement] == ["n1"]
        notes = [n for who, reason, n in env.events.recorded if reason == "Respread"]
        assert notes == ["moving the pod from node n0 to node n1 to restore its topology spread and pod anti-affinity"]
    finally:
        await finish(env, task)


async def test_a_move_that_raises_is_aborted_and_the_next_plan_runs() -> None:
    env, c, task = await started(config({"defragment": False, "compact": {"enabled": True}}))
    try:
        two_low_nodes(env, c)
        real_create = env.api.create
        calls = []

        async def broken(path: str, body: Any, **kw: Any) -> dict[str, Any]:
            calls.append(path)
            if len(calls) == 1:
                raise RuntimeError("a bug")
            return await real_create(path, body, **kw)

        env.api.create = broken
        await run_for(env, 40)
        assert len(calls) >= 2 and len(c.evictions) == 1   # the first move aborted, a later plan moved one
        m = env.s.rebalancer.metrics
        aborted = [s.value for metric in m.moves.collect() for s in metric.samples
                   if s.name.endswith("_total") and s.labels["result"] == "aborted"]
        assert sum(aborted) == 1
        assert not env.s.rebalancer.in_flight_owner and not env.s.rebalancer.in_flight_node
    finally:
        await finish(env, task)


async def test_steering_ends_after_its_ttl() -> None:
    from scheduler.state.moves import STEER_TTL_SECONDS
    env, c, task = await started(config({"defragment": False, "compact": {"enabled": True}}))
    try:
        two_low_nodes(env, c)
        await run_for(env, 10)
        assert len(c.evictions) == 1
        moves = env.s.cache.moves
        assert moves.avoid   # the owner's pods are kept off the node its moved pod left
        await env.advance(STEER_TTL_SECONDS + 2)
        assert not moves.avoid and not moves.awaiting and not moves.replacements and not moves.moving
    finally:
        await finish(env, task)


async def test_a_plans_evictions_start_at_a_pace() -> None:
    """Twelve low nodes, each with one pod of its own ReplicaSet: the limits (per node, per owner) let every
    move of the compact plan start at once, but at most MOVE_BURST do, then MOVES_PER_SECOND."""
    from scheduler.consolidation.rebalancer import MOVE_BURST, MOVES_PER_SECOND
    env, c, task = await started(config({"defragment": False, "compact": {"enabled": True}}))
    try:
        for i in range(12):
            env.node(f"n{i:02}", cpu="4")
            c.replica_set(f"rs{i}", cpu="500m")
            c.running(f"rs{i}", f"n{i:02}")
        for _ in range(40):                  # until the first interval is due and the plan starts
            await env.advance(0.5)
            if c.evictions:
                break
        first = len(c.evictions)
        assert 1 <= first <= MOVE_BURST, c.evictions
        step = 0.25 / MOVES_PER_SECOND
        for k in range(1, 41):
            await env.advance(step)
            assert len(c.evictions) <= first + k * step * MOVES_PER_SECOND + 1, (k, c.evictions)
        await run_for(env, 20)
        assert len(c.evictions) > 2 * MOVE_BURST, c.evictions   # the plan's moves all ran, a few at a time
        placed = {n for n in c.nodes_of("rs").values() if n}
        assert len(placed) < 12
        no_bounce_back(env)
    finally:
        await finish(env, task)


async def test_a_stateful_sets_pod_comes_back_under_its_name_on_the_planned_node() -> None:
    """A StatefulSet makes the evicted pod again under its own name (a new uid) once the old one is gone: it is
    steered to the planned node all the same, and kept off the node it left."""
    env, c, task = await started(config({"defragment": False, "compact": {"enabled": True}}))
    try:
        c.replica_set("db", cpu="500m", kind="StatefulSet")
        env.node("n0", cpu="4")
        env.node("n1", cpu="4")
        c.running("db", "n0")
        c.running("db", "n1")
        await run_for(env, 20)
        assert len(c.evictions) == 1, c.evictions
        name = c.evictions[0]
        source, *after = c.history[name]
        assert after and after[-1] != source, c.history   # bound again, under its name, on the other node
        assert env.uid(name) != f"uid-{name}"            # a new pod, not the evicted one
        assert set(c.nodes_of("db").values()) == {after[-1]}
        notes = [n for who, reason, n in env.events.recorded if reason == "Compact"]
        assert notes == [f"moving the pod from node {source} to node {after[-1]} to empty node(s) {source}"]
        no_bounce_back(env)
    finally:
        await finish(env, task)


@pytest.mark.parametrize("reservation", [True, False])
async def test_defragment_opens_a_whole_rack_for_a_topology_gang(reservation: bool) -> None:
    """A gang that must run in one rack: room for it is opened inside one rack (two whole nodes), the moved pods
    going to the other rack, where the half-free nodes take them."""
    env, c, task = await started(config({}, reservation))
    try:
        c.replica_set("web")
        racks = {"n0": "r1", "n1": "r1", "n2": "r2", "n3": "r2", "n4": "r3"}
        for node, rack in racks.items():
            env.node(node, cpu="4", labels={"rack": rack})
        for node in ("n0", "n1", "n2", "n3"):
            c.running("web", node)
            c.running("web", node)
        c.running("web", "n4")   # rack r3 is one node: it can never take the gang
        env.native_group("g", 2, topology="rack")
        env.pod("g-0", group="g", cpu="4")
        env.pod("g-1", group="g", cpu="4")
        await run_for(env, 30)
        gang = env.bound("g-0", "g-1")
        assert len(gang) == 2 and gang["g-0"] != gang["g-1"], env.message("g-0")
        assert racks[gang["g-0"]] == racks[gang["g-1"]], gang
        assert 1 <= len(c.evictions) <= 4, c.evictions
        for new, old in c.created.items():
            assert c.history.get(new), f"replacement {new} never bound"
            assert c.history[new][0] != c.history[old][0]
            assert c.history[new][0] not in gang.values()
        no_bounce_back(env)
        notes = [n for who, reason, n in env.events.recorded if reason == "Defragment"]
        assert len(notes) == len(c.evictions) and all("to open room for pod group" in n for n in notes)
    finally:
        await finish(env, task)
