"""scheduler/framework/handle.py: a Handle is built complete and never changes; what-ifs go through named methods."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from scheduler.state.cache import Cache
from scheduler.config import parse_config
from scheduler.framework import Handle
from scheduler.framework.clock import FakeClock
from scheduler.framework.runtime import Framework
from scheduler.model import parse_node, parse_pod
from scheduler.scheduler import Scheduler

REPO = Path(__file__).resolve().parents[2]
CONFIG = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
          "profiles": [{"schedulerName": "one"}, {"schedulerName": "two"}]}


def _pod(name: str, node: str = "") -> dict:
    spec: dict = {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": spec}


@pytest.mark.parametrize("name", [*Handle.__slots__, "cache", "anything_new"])
def test_no_attribute_is_assigned_or_deleted_after_construction(name: str) -> None:
    handle = Handle(Cache(), clock=FakeClock())
    with pytest.raises(AttributeError, match="set at construction only"):
        setattr(handle, name, None)
    if hasattr(handle, name):
        with pytest.raises(AttributeError, match="set at construction only"):
            delattr(handle, name)


def test_the_default_views_are_empty_and_refuse_writes() -> None:
    handle = Handle(Cache(), clock=FakeClock())
    assert len(handle.pods) == 0 and len(handle.pdbs) == 0
    with pytest.raises(TypeError):
        handle.pods["x"] = None  # type: ignore[index]


def _assigned_handle_attributes(path: Path, root: Path = REPO) -> list[str]:
    """``handle.x = ...`` / ``self.handle.x = ...`` / ``fw.handle.x += ...`` anywhere in the file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for t in targets:
            for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                if isinstance(el, ast.Attribute):
                    owner = el.value
                    name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
                    if name == "handle":
                        out.append(f"{path.relative_to(root)}:{el.lineno}: handle.{el.attr} assigned")
    return out


def test_no_code_assigns_a_handle_attribute() -> None:
    found = [hit for top in ("scheduler", "plugins", "bench", "tests") for path in sorted((REPO / top).rglob("*.py"))
             for hit in _assigned_handle_attributes(path)]
    assert found == []


def test_the_checker_finds_an_assignment(tmp_path: Path) -> None:
    bad = tmp_path / "probe.py"
    bad.write_text("def f(env):\n    env.handle.activate = print\n    handle.seed, x = 1, 2\n    h.seed = 3\n")
    assert _assigned_handle_attributes(bad, tmp_path) == \
        ["probe.py:2: handle.activate assigned", "probe.py:3: handle.seed assigned"]


def test_a_framework_gives_its_plugins_a_handle_naming_it() -> None:
    cache = Cache()
    pods: dict = {}
    given = Handle(cache, scheduler_name="one", clock=FakeClock(), pods=pods, seed=7)
    (profile, _) = parse_config(CONFIG).profiles
    fw = Framework(profile, given)
    assert given.framework is None                  # the given handle is not changed
    assert fw.handle.framework is fw
    assert {id(p.handle) for p in fw.plugins.values() if hasattr(p, "handle")} == {id(fw.handle)}
    assert fw.handle.pods is pods and fw.handle.seed == 7 and fw.handle.nodes is cache.nodes
    assert fw.handle.scheduler_name == "one" and fw.handle.clock is given.clock


def test_the_scheduler_builds_every_handle_complete() -> None:
    s = Scheduler(parse_config(CONFIG), client=None, seed=3, clock=FakeClock())
    for name, fw in s.frameworks.items():
        h = fw.handle
        assert h.framework is fw and h.scheduler_name == name
        assert h.pods is s.pods and h.pdbs is s.pdbs and h.spread_selectors is s.spread_selectors
        assert h.preemption is s.preemption and h.seed == 3 and h.client is None


async def test_the_handles_and_the_executor_reach_the_queue_built_after_them() -> None:
    s = Scheduler(parse_config(CONFIG), client=None, clock=FakeClock())
    s.on_pod_add({**_pod("p"), "spec": {**_pod("p")["spec"], "schedulerName": "one"}})
    qi = await s.queue.pop()
    assert qi is not None and qi.uid == "p"
    s.queue.requeue_failed(qi, unschedulable=True)
    assert s.queue.where["p"] == "unschedulable"
    s.frameworks["one"].handle.activate(["p"])      # a plugin's activate: the queue's
    assert s.queue.where["p"] == "active"
    s.preemption.gate("p", "DefaultPreemption")     # the executor's gate: the queue's
    assert s.queue.where["p"] == "gated"
    s.preemption.activate(["p"])                    # out of the gate, through PreEnqueue: its backoff is not over
    assert s.queue.where["p"] == "backoff"


def test_lift_and_restore_take_a_pod_off_its_node_and_put_it_back() -> None:
    cache = Cache()
    cache.add_node(parse_node({"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "4", "pods": "10"}}}))
    placed = parse_pod(_pod("p", "n"))
    cache.add_pod(placed)
    handle = Handle(cache, clock=FakeClock())
    row = cache.nodes.row("n")
    before = cache.nodes.requested[row].copy()
    st = handle.lift("p")
    assert st is not None and "p" not in handle.placed and list(handle.pods_on("n")) == []
    assert (cache.nodes.requested[row] < before).any()
    handle.restore(st)
    assert handle.placed["p"].node == "n" and (cache.nodes.requested[row] == before).all()
    other = parse_pod(_pod("q"))
    handle.assume(other, "n")
    assert cache.is_assumed("q")
    handle.forget(other)
    assert "q" not in handle.placed and (cache.nodes.requested[row] == before).all()
