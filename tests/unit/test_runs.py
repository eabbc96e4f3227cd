"""The run index (scheduler/state/runs.py) as the cache keeps it: a run's node derived from its pods, finished ones
included, without charging finished pods to their node."""

from __future__ import annotations

from typing import Any

import numpy as np

from scheduler.model import parse_node, parse_pod
from scheduler.state.cache import Cache

LABEL = "tekton.dev/pipelineRun"


def node(name: str) -> Any:
    return parse_node({"metadata": {"name": name}, "status": {"allocatable": {"cpu": "4", "pods": "10"}}})


def pod(uid: str, node_name: str = "", run: str | None = "r1", phase: str = "Running", created: str | None = None,
        claims: tuple[str, ...] = (), ns: str = "ns") -> Any:
    labels = {LABEL: run} if run is not None else {}
    meta: dict[str, Any] = {"name": uid, "namespace": ns, "uid": uid, "labels": labels}
    if created:
        meta["creationTimestamp"] = created
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                            "nodeName": node_name}
    if claims:
        spec["volumes"] = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    return parse_pod({"metadata": meta, "spec": spec, "status": {"phase": phase}})


def cache(*nodes: str) -> Cache:
    c = Cache()
    c.follow_run_label(LABEL)
    for n in nodes:
        c.add_node(node(n))
    return c


RUN = ("run", LABEL, "ns", "r1")


def test_a_finished_pod_keeps_its_runs_node_but_frees_its_resources() -> None:
    c = cache("a", "b")
    c.add_pod(pod("p1", "a"))
    assert c.nodes.requested[c.nodes.row("a"), 0] == 1000
    c.add_pod(pod("p1", "a", phase="Succeeded"))
    assert c.nodes.requested[c.nodes.row("a"), 0] == 0          # charged nowhere
    assert c.where("p1") is None
    h = c.runs.holder(RUN)
    assert (h.node, h.running) == ("a", 0)                       # but its run still holds a
    c.remove_pod(pod("p1", "a", phase="Succeeded"))              # deleted: the run holds nothing
    assert c.runs.holder(RUN) is None


def test_a_pod_seen_first_as_finished_holds_its_runs_node() -> None:
    c = cache("a")
    c.finish_pod(pod("p1", "a", phase="Failed"))                 # a restart lists a finished pod
    assert c.runs.holder(RUN).node == "a"
    assert c.runs.is_finished_member("p1")


def test_the_latest_running_pod_wins_over_finished_ones_and_the_latest_finished_over_older() -> None:
    c = cache("a", "b", "c")
    c.add_pod(pod("old", "a", created="2026-01-01T00:00:00Z"))
    c.add_pod(pod("new", "b", created="2026-01-01T00:01:00Z"))
    assert c.runs.holder(RUN).node == "b"
    c.finish_pod(pod("new", "b", phase="Succeeded", created="2026-01-01T00:01:00Z"))
    assert c.runs.holder(RUN).node == "a"                        # a is still running there
    c.finish_pod(pod("old", "a", phase="Succeeded", created="2026-01-01T00:00:00Z"))
    assert c.runs.holder(RUN).node == "b"                        # all finished: the latest placed
    c.assume(pod("next", created="2026-01-01T00:02:00Z"), "c")
    assert (c.runs.holder(RUN).node, c.runs.holder(RUN).running) == ("c", 1)
    c.forget(pod("next", created="2026-01-01T00:02:00Z"))       # the bind failed
    assert (c.runs.holder(RUN).node, c.runs.holder(RUN).running) == ("b", 0)


def test_live_runs_counts_runs_running_on_each_row() -> None:
    c = cache("a", "b")
    c.add_pod(pod("p1", "a", run="r1"))
    c.add_pod(pod("p2", "a", run="r1"))
    c.add_pod(pod("p3", "a", run="r2"))
    c.add_pod(pod("q", "b", run=None))                           # not a run's pod
    live = c.runs.live_runs(LABEL, c.nodes.n)
    assert live.tolist() == [2, 0]
    c.finish_pod(pod("p1", "a", phase="Succeeded", run="r1"))
    assert c.runs.live_runs(LABEL, c.nodes.n).tolist() == [2, 0]  # r1 still runs p2 there
    c.finish_pod(pod("p2", "a", phase="Succeeded", run="r1"))
    assert c.runs.live_runs(LABEL, c.nodes.n).tolist() == [1, 0]
    c.remove_pod(pod("p3", "a", run="r2"))
    assert not np.any(c.runs.live_runs(LABEL, c.nodes.n))


def test_a_relabelled_pod_moves_to_its_new_run() -> None:
    c = cache("a")
    c.add_pod(pod("p1", "a", run="r1"))
    c.add_pod(pod("p1", "a", run="r2"))
    assert c.runs.holder(RUN) is None
    assert c.runs.holder(("run", LABEL, "ns", "r2")).node == "a"


def test_workspace_claims_group_the_pods_that_mount_them() -> None:
    c = cache("a")
    c.add_pod(pod("p1", "a", claims=("ws", "cache")))
    assert c.runs.holder(("pvc", LABEL, "ns", "ws")).node == "a"
    assert c.runs.holder(("pvc", LABEL, "ns", "cache")).node == "a"
    c.add_pod(pod("x", "a", run=None, claims=("other",)))       # without the run label: not grouped
    assert c.runs.holder(("pvc", LABEL, "ns", "other")) is None


def test_following_a_label_late_indexes_the_pods_already_placed() -> None:
    c = Cache()
    c.add_node(node("a"))
    c.add_pod(pod("p1", "a"))
    c.follow_run_label(LABEL)
    assert c.runs.holder(RUN).node == "a"


def test_without_a_followed_label_nothing_is_indexed() -> None:
    c = Cache()
    c.add_node(node("a"))
    c.add_pod(pod("p1", "a"))
    c.finish_pod(pod("p1", "a", phase="Succeeded"))
    assert len(c.runs) == 0
