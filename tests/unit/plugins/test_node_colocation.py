"""NodeColocation (plugins/node_colocation.py): one node per pipeline run, derived from the run's pods.

The plugin runs inside a real profile (the default plugins plus NodeColocation) over a cache, through
PreFilter, Filter and PostFilter as the scheduling cycle calls them, so the messages are the ones a pod gets.
"""

from __future__ import annotations

from typing import Any

import pytest

from plugins.node_colocation import ERR_HELD, ERR_OTHER_NODE, NodeColocation, NodeColocationArgs
from scheduler.config import parse_config
from scheduler.framework import ConfigError, CycleState, QueueingHint, parse_args
from scheduler.framework.clock import FakeClock
from scheduler.framework.handle import Handle
from scheduler.framework.runtime import Framework
from scheduler.model import parse_node, parse_pod, parse_pv, parse_pvc
from scheduler.state.cache import Cache

LABEL = "tekton.dev/pipelineRun"
ARGS_PATH = "profiles[0].pluginConfig[0].args"


# ---------------------------------------------------------------------------- args

@pytest.mark.parametrize("raw, error", [
    pytest.param({"mode": "pipelineRuns"}, f"{ARGS_PATH}.mode: 'pipelineRuns' is not one of 'workspaces', "
                                           f"'pipelineruns', 'isolate-pipelinerun', 'disabled'",
                 id="a mode Tekton does not have is refused, naming the field and the values"),
    pytest.param({"runLabel": ""}, f"{ARGS_PATH}.runLabel: Invalid value: '': must be a label key",
                 id="an empty run label is refused"),
    pytest.param({"runLabel": "Tekton.dev/pipelineRun"}, f"{ARGS_PATH}.runLabel: Invalid value: "
                                                         f"'Tekton.dev/pipelineRun': the prefix",
                 id="an upper-case prefix is not a DNS subdomain"),
    pytest.param({"runLabel": "tekton.dev/-run"}, f"{ARGS_PATH}.runLabel: Invalid value: 'tekton.dev/-run': the name",
                 id="a name starting with a dash is refused"),
    pytest.param({"runLabel": 7}, f"{ARGS_PATH}.runLabel: expected a string", id="a number is not a label"),
    pytest.param({"coschedule": "pipelineruns"}, f"{ARGS_PATH}.coschedule: unknown field",
                 id="an unknown field is refused"),
])
def test_invalid_args_are_refused_naming_the_field(raw: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_args(NodeColocationArgs, raw, ARGS_PATH)
    assert str(exc.value).startswith(error)


def test_args_default_to_tektons_default_mode_and_label() -> None:
    assert parse_args(NodeColocationArgs, None, ARGS_PATH) == NodeColocationArgs("workspaces", LABEL)
    got = parse_args(NodeColocationArgs, {"mode": "isolate-pipelinerun", "runLabel": "example.com/run"}, ARGS_PATH)
    assert (got.mode, got.run_label) == ("isolate-pipelinerun", "example.com/run")


# ---------------------------------------------------------------------------- harness

def make_node(name: str, cpu: str = "4", unschedulable: bool = False, taints: list[dict[str, str]] | None = None,
              zone: str = "") -> Any:
    labels = {"kubernetes.io/hostname": name, **({"topology.kubernetes.io/zone": zone} if zone else {})}
    return parse_node({"metadata": {"name": name, "labels": labels},
                       "spec": {"unschedulable": unschedulable, "taints": taints or []},
                       "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "20"}}})


def make_pod(uid: str, run: str | None = "run-1", node: str = "", phase: str = "Pending", cpu: str = "1",
             claims: tuple[str, ...] = (), created: str = "2026-01-01T00:00:00Z",
             tolerations: list[dict[str, str]] | None = None) -> Any:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
                            "schedulerName": "tandem-scheduler", "nodeName": node,
                            "tolerations": tolerations or []}
    if claims:
        spec["volumes"] = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    return parse_pod({"metadata": {"name": uid, "namespace": "ns", "uid": uid, "creationTimestamp": created,
                                   "labels": {LABEL: run} if run else {}},
                      "spec": spec, "status": {"phase": phase}})


class Cluster:
    """A cache and one profile (the default plugins and NodeColocation in ``mode``, placed as config/pipelines.yaml
    places it)."""

    def __init__(self, mode: str, *nodes: Any) -> None:
        doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
               "profiles": [{"schedulerName": "tandem-scheduler",
                             # as config/pipelines.yaml: its Filter first (the later filters see one row) and its
                             # PostFilter before DefaultPreemption (its reason comes first)
                             "plugins": {"multiPoint": {"enabled": [{"name": "NodeColocation"}]},
                                         "filter": {"enabled": [{"name": "NodeColocation"}]},
                                         "postFilter": {"enabled": [{"name": "NodeColocation"}]}},
                             "pluginConfig": [{"name": "NodeColocation", "args": {"mode": mode}}]}]}
        self.cache = Cache()
        self.fw = Framework(parse_config(doc).profiles[0], Handle(self.cache, clock=FakeClock()))
        for n in nodes:
            self.cache.add_node(n)
        self.plugin = next(p for p in self.fw.filter_plugins if p.NAME == "NodeColocation")

    def bind(self, p: Any, node: str) -> None:
        self.cache.add_pod(parse_pod({**p.raw, "spec": {**p.raw["spec"], "nodeName": node},
                                      "status": {"phase": "Running"}}))

    def finish(self, p: Any, node: str) -> None:
        self.cache.finish_pod(parse_pod({**p.raw, "spec": {**p.raw["spec"], "nodeName": node},
                                         "status": {"phase": "Succeeded"}}))

    def cycle(self, p: Any) -> tuple[list[str], str]:
        """The nodes the pod may go to, and (when none) the message it would get."""
        state = CycleState()
        rows, st, diag = self.fw.run_pre_filter(state, p)
        if st.is_success():
            rows, st = self.fw.run_filter_with_nominated(state, p, rows, diag)
        diag.num_all_nodes = len(self.cache.nodes)
        if len(rows):
            return self.cache.nodes.names_of(rows), ""
        if st.is_success() or st.code.name == "UNSCHEDULABLE":
            _, pst = self.fw.run_post_filter(state, p, diag)
            if pst.reasons:
                diag.post_filter_msg = pst.message()
        return [], diag.message()


NODES = ("n-0", "n-1", "n-2")


def cluster(mode: str = "pipelineruns", **kw: Any) -> Cluster:
    return Cluster(mode, *(make_node(n, **kw) for n in NODES))


# ---------------------------------------------------------------------------- pipelineruns

def test_the_first_pod_of_a_run_chooses_among_all_nodes_and_later_pods_follow_it() -> None:
    c = cluster()
    assert c.cycle(make_pod("t1"))[0] == list(NODES)
    c.bind(make_pod("t1"), "n-1")
    assert c.cycle(make_pod("t2")) == (["n-1"], "")
    assert c.cycle(make_pod("other", run="run-2"))[0] == list(NODES)   # another run is free
    assert c.cycle(make_pod("plain", run=None))[0] == list(NODES)       # a pod of no run is untouched


def test_finished_pods_still_hold_the_runs_node() -> None:
    c = cluster()
    c.bind(make_pod("t1"), "n-2")
    c.finish(make_pod("t1"), "n-2")
    assert c.cycle(make_pod("t2"))[0] == ["n-2"]


def test_a_full_node_keeps_the_pod_waiting_with_the_run_and_the_node_named() -> None:
    c = cluster(cpu="2")
    c.bind(make_pod("t1", cpu="2"), "n-0")
    nodes, msg = c.cycle(make_pod("t2"))
    assert nodes == []
    assert msg == (f"0/3 nodes are available: 1 Insufficient cpu, 2 {ERR_OTHER_NODE}. "
                   f"PipelineRun ns/run-1 holds node n-0: Insufficient cpu, no new claims to deallocate, preemption: "
                   f"0/3 nodes are available: "
                   f"1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.")
    assert c.fw.filter_plugins[0] is c.plugin


def test_a_cordoned_node_waits_while_a_pod_of_the_run_runs_there_and_moves_once_none_does() -> None:
    c = cluster()
    c.bind(make_pod("t1"), "n-0")
    c.bind(make_pod("t2"), "n-0")
    c.cache.update_node(make_node("n-0", unschedulable=True))
    c.finish(make_pod("t1"), "n-0")
    nodes, msg = c.cycle(make_pod("t3"))
    assert nodes == [] and "PipelineRun ns/run-1 holds node n-0: node(s) were unschedulable" in msg
    c.finish(make_pod("t2"), "n-0")
    assert c.cycle(make_pod("t3"))[0] == ["n-1", "n-2"]        # chooses afresh (NodeUnschedulable keeps n-0 out)


@pytest.mark.parametrize("taint, tolerations, moves", [
    pytest.param({"key": "maint", "effect": "NoSchedule"}, [], True, id="an untolerated NoSchedule taint moves it"),
    pytest.param({"key": "maint", "effect": "NoExecute"}, [], True, id="an untolerated NoExecute taint moves it"),
    pytest.param({"key": "maint", "effect": "PreferNoSchedule"}, [], False, id="PreferNoSchedule does not"),
    pytest.param({"key": "maint", "effect": "NoSchedule"}, [{"key": "maint", "operator": "Exists"}], False,
                 id="a tolerated taint does not"),
])
def test_a_tainted_node_moves_a_finished_run_only_if_the_pod_does_not_tolerate_it(
        taint: dict[str, str], tolerations: list[dict[str, str]], moves: bool) -> None:
    c = cluster()
    c.bind(make_pod("t1"), "n-0")
    c.finish(make_pod("t1"), "n-0")
    c.cache.update_node(make_node("n-0", taints=[taint]))
    nodes, _ = c.cycle(make_pod("t2", tolerations=tolerations))
    assert (nodes != ["n-0"]) == moves


def test_a_gone_node_moves_a_finished_run_and_holds_a_running_one() -> None:
    c = cluster()
    c.bind(make_pod("t1"), "n-0")
    c.cache.remove_node("n-0")
    nodes, msg = c.cycle(make_pod("t2"))
    assert nodes == [] and "PipelineRun ns/run-1 holds node n-0, which is gone" in msg
    c.finish(make_pod("t1"), "n-0")
    assert c.cycle(make_pod("t2"))[0] == ["n-1", "n-2"]


# ---------------------------------------------------------------------------- isolate-pipelinerun

def test_isolate_keeps_new_runs_off_nodes_where_other_runs_run() -> None:
    c = cluster("isolate-pipelinerun")
    c.bind(make_pod("a1", run="a"), "n-0")
    c.bind(make_pod("b1", run="b"), "n-1")
    c.bind(make_pod("plain", run=None), "n-2")                  # a pod of no run does not hold a node
    assert c.cycle(make_pod("c1", run="c"))[0] == ["n-2"]
    c.bind(make_pod("c1", run="c"), "n-2")
    nodes, msg = c.cycle(make_pod("d1", run="d"))
    assert nodes == []
    assert msg.startswith(f"0/3 nodes are available: 3 {ERR_HELD}. PipelineRun ns/d waits for a node that no "
                          f"other PipelineRun holds")
    c.finish(make_pod("a1", run="a"), "n-0")                     # run a finished: n-0 is free for d
    assert c.cycle(make_pod("d1", run="d"))[0] == ["n-0"]
    c.bind(make_pod("d1", run="d"), "n-0")
    # a's next pods (had it any) choose afresh, since d runs on its node now
    nodes, _ = c.cycle(make_pod("a2", run="a"))
    assert nodes == []                                           # every node is another run's


# ---------------------------------------------------------------------------- workspaces

def add_bound_claim(c: Cluster, name: str, mode: str, zone: str = "") -> None:
    """A claim bound to a PV (reachable from every node, or from ``zone`` only), as VolumeBinding reads them."""
    pv: dict[str, Any] = {"metadata": {"name": f"pv-{name}"},
                          "spec": {"capacity": {"storage": "1Gi"}, "accessModes": [mode],
                                   "claimRef": {"namespace": "ns", "name": name}},
                          "status": {"phase": "Bound"}}
    if zone:
        pv["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}]}}
    c.cache.volumes.set_pv(parse_pv(pv))
    c.cache.volumes.set_pvc(parse_pvc({
        "metadata": {"name": name, "namespace": "ns", "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
        "spec": {"accessModes": [mode], "volumeName": f"pv-{name}", "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Bound"}}))


def test_workspaces_groups_pods_by_shared_read_write_once_claims() -> None:
    c = cluster("workspaces")
    for name, mode in (("ws", "ReadWriteOnce"), ("cache", "ReadWriteOnce"), ("shared", "ReadWriteMany")):
        add_bound_claim(c, name, mode)
    c.bind(make_pod("a1", run="a", claims=("ws",)), "n-0")
    c.bind(make_pod("b1", run="b", claims=("cache",)), "n-1")
    c.bind(make_pod("s1", run="s", claims=("shared",)), "n-2")
    assert c.cycle(make_pod("a2", run="a"))[0] == list(NODES)                 # no claim: untouched
    assert c.cycle(make_pod("x", run="x", claims=("ws",)))[0] == ["n-0"]      # another run, the same claim
    assert c.cycle(make_pod("y", run="y", claims=("shared",)))[0] == list(NODES)   # ReadWriteMany: untouched
    nodes, msg = c.cycle(make_pod("z", run="z", claims=("ws", "cache")))
    assert nodes == [] and ("the pod's ReadWriteOnce workspaces are on different nodes: PersistentVolumeClaim "
                            "ns/ws holds node n-0 and PersistentVolumeClaim ns/cache holds node n-1") in msg


def test_a_run_whose_claim_is_bound_to_a_zonal_pv_chooses_and_stays_in_that_zone() -> None:
    c = Cluster("pipelineruns", make_node("a-0", zone="a"), make_node("b-0", zone="b"), make_node("b-1", zone="b"))
    add_bound_claim(c, "ws", "ReadWriteOnce", zone="b")
    first = make_pod("t1", claims=("ws",))
    assert c.cycle(first)[0] == ["b-0", "b-1"]                  # VolumeBinding keeps the run's first pod in b
    c.bind(first, "b-1")
    assert c.cycle(make_pod("t2", claims=("ws",)))[0] == ["b-1"]
    assert c.cycle(make_pod("t3"))[0] == ["b-1"]                 # a task without the workspace follows the run too


def test_disabled_mode_touches_nothing() -> None:
    c = cluster("disabled")
    c.bind(make_pod("t1"), "n-0")
    assert c.cycle(make_pod("t2"))[0] == list(NODES)
    assert c.plugin.events_to_register() == []


# ---------------------------------------------------------------------------- queueing hints

def hints(c: Cluster) -> dict[str, Any]:
    return {ev.event.resource + ("-delete" if ev.event.action & 2 and ev.event.resource == "Node" else ""): ev.hint
            for ev in c.plugin.events_to_register() if ev.hint is not None}


def test_a_pod_of_the_same_run_finishing_queues_the_pod_and_others_do_not() -> None:
    c = cluster()
    hint = hints(c)["AssignedPod"]
    waiting = make_pod("t3")
    assert hint(waiting, make_pod("t1", node="n-0"), None) == QueueingHint.QUEUE
    assert hint(waiting, make_pod("o1", run="run-2", node="n-0"), None) == QueueingHint.SKIP
    assert hint(waiting, make_pod("plain", run=None, node="n-0"), None) == QueueingHint.SKIP
    iso = cluster("isolate-pipelinerun")
    assert hints(iso)["AssignedPod"](waiting, make_pod("o1", run="run-2", node="n-0"), None) == QueueingHint.QUEUE


def test_a_change_to_the_runs_node_queues_the_pod_and_other_nodes_do_not() -> None:
    c = cluster()
    c.bind(make_pod("t1"), "n-0")
    hint = hints(c)["Node-delete"]
    waiting = make_pod("t2")
    assert hint(waiting, make_node("n-0"), make_node("n-0", unschedulable=True)) == QueueingHint.QUEUE
    assert hint(waiting, make_node("n-1"), make_node("n-1", unschedulable=True)) == QueueingHint.SKIP
    assert hint(waiting, make_node("n-0"), None) == QueueingHint.QUEUE


def test_the_plugin_follows_its_run_label_in_the_cache() -> None:
    c = Cache()
    NodeColocation(NodeColocationArgs("pipelineruns", "example.com/run"), Handle(c, clock=FakeClock()))
    assert c.runs.labels == ("example.com/run",)
