"""scheduler/framework/runtime.py: how a profile's plugins run at each extension point (upstream frameworkImpl).

Small fake plugins are registered here under names starting with "Test"; each
test builds a Framework over a handful of nodes and sets what the fakes answer.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import numpy as np
import pytest

from scheduler.config import Profile
from scheduler.framework import Code, CycleState, FilterResult, Handle, PreFilterResult, Rejection, Status, register
from scheduler.framework.clock import FakeClock
from scheduler.framework.registry import ConfigError
from scheduler.framework.runtime import Diagnosis, Framework, go_duration
from scheduler.model import Pod, parse_node
from scheduler.state.cache import Cache

POD = Pod(uid="u1", namespace="ns", name="p")


# ---------------------------------------------------------------------------- fake plugins


class _Base:
    __test__ = False  # the plugin names start with "Test"; these are not test classes
    NAME = ""
    Args = None

    def __init__(self, args: Any, handle: Any) -> None:
        self.calls: list[Any] = []


class _PreFilter(_Base):
    """Answers ``self.answer``: a Status, or node names (a PreFilterResult) with Success."""

    EXTENSION_POINTS = frozenset({"PreFilter"})
    answer: Any = None

    def pre_filter(self, state: CycleState, pod: Pod, nodes: Any) -> tuple[PreFilterResult | None, Status]:
        self.calls.append(pod.uid)
        if isinstance(self.answer, Exception):
            raise self.answer
        if isinstance(self.answer, Status):
            return None, self.answer
        if self.answer is None:
            return None, Status()
        return PreFilterResult(frozenset(self.answer)), Status()


class _Filter(_Base):
    """Rejects the nodes in ``self.reject``: node name -> [(reason, code), ...]."""

    EXTENSION_POINTS = frozenset({"Filter"})
    reject: dict[str, list[tuple[str, Code]]] = {}
    boom: Exception | None = None

    def filter(self, state: CycleState, pod: Pod, nodes: Any, rows: np.ndarray) -> FilterResult:
        names = nodes.names_of(rows)
        self.calls.append(names)
        if self.boom is not None:
            raise self.boom
        rejections: dict[tuple[str, Code], np.ndarray] = {}
        for i, n in enumerate(names):
            for reason, code in self.reject.get(n, ()):
                rejections.setdefault((reason, code), np.zeros(len(rows), dtype=bool))[i] = True
        passed = np.array([n not in self.reject for n in names], dtype=bool)
        return FilterResult(passed, [Rejection(r, m, c) for (r, c), m in rejections.items()])


@register
class TestPreFilterA(_PreFilter):
    NAME = "TestPreFilterA"


@register
class TestPreFilterB(_PreFilter):
    NAME = "TestPreFilterB"


@register
class TestFilterA(_Filter):
    NAME = "TestFilterA"


@register
class TestFilterB(_Filter):
    NAME = "TestFilterB"


@register
class TestSkipper(_PreFilter, _Filter):
    """PreFilter and Filter under one name: its PreFilter may Skip its Filter."""

    NAME = "TestSkipper"
    EXTENSION_POINTS = frozenset({"PreFilter", "Filter"})


class _Score(_Base):
    EXTENSION_POINTS = frozenset({"Score"})
    scores: dict[str, int] = {}
    boom: Exception | None = None

    def score(self, state: CycleState, pod: Pod, nodes: Any, rows: np.ndarray) -> np.ndarray:
        self.calls.append(list(rows))
        if self.boom is not None:
            raise self.boom
        return np.array([self.scores.get(n, 0) for n in nodes.names_of(rows)], dtype=np.int64)


@register
class TestScoreA(_Score):
    NAME = "TestScoreA"


@register
class TestScoreNormalized(_Score):
    """Scores scaled so the best node gets 100, as upstream's DefaultNormalizeScore."""

    NAME = "TestScoreNormalized"
    EXTENSION_POINTS = frozenset({"Score", "NormalizeScore"})

    def normalize(self, state: CycleState, pod: Pod, scores: np.ndarray) -> None:
        top = scores.max()
        if top:
            scores[:] = scores * 100 // top


@register
class TestScoreSkipped(_Score):
    NAME = "TestScoreSkipped"
    EXTENSION_POINTS = frozenset({"PreScore", "Score"})

    def pre_score(self, state: CycleState, pod: Pod, nodes: Any, rows: np.ndarray) -> Status:
        return Status(Code.SKIP)


class _Reserve(_Base):
    EXTENSION_POINTS = frozenset({"Reserve"})
    status = Status()
    log: list[str] = []

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        self.log.append(f"reserve {self.NAME}")
        if isinstance(self.status, Exception):
            raise self.status
        return self.status

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.log.append(f"unreserve {self.NAME}")


@register
class TestReserveA(_Reserve):
    NAME = "TestReserveA"


@register
class TestReserveB(_Reserve):
    NAME = "TestReserveB"


class _Permit(_Base):
    EXTENSION_POINTS = frozenset({"Permit"})
    answer: Any = (Status(), 0.0)

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@register
class TestPermitA(_Permit):
    NAME = "TestPermitA"


@register
class TestPermitB(_Permit):
    NAME = "TestPermitB"


class _Bind(_Base):
    EXTENSION_POINTS = frozenset({"Bind"})
    answer: Any = Status()

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        self.calls.append(node_name)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@register
class TestBindSkip(_Bind):
    NAME = "TestBindSkip"
    answer = Status(Code.SKIP)


@register
class TestBindOK(_Bind):
    NAME = "TestBindOK"


class _PostFilter(_Base):
    EXTENSION_POINTS = frozenset({"PostFilter"})
    answer: Status = Status(Code.UNSCHEDULABLE)

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Any) -> tuple[Any, Status]:
        return None, self.answer


@register
class TestPostFilterA(_PostFilter):
    NAME = "TestPostFilterA"


@register
class TestPostFilterB(_PostFilter):
    NAME = "TestPostFilterB"


# ---------------------------------------------------------------------------- harness


def framework(nodes: int = 3, weights: dict[str, int] | None = None, clock: FakeClock | None = None,
              **points: list[str]) -> Framework:
    """A Framework over nodes n0..n{nodes-1}; ``points`` maps an extension point (camelCase) to plugin names."""
    cache = Cache()
    for i in range(nodes):
        cache.add_node(parse_node({"metadata": {"name": f"n{i}"}, "status": {"allocatable": {"cpu": "1", "pods": "10"}}}))
    profile = Profile(scheduler_name="test", plugins={k: list(v) for k, v in points.items()},
                      weights=weights or {}, plugin_args={})
    return Framework(profile, Handle(cache, scheduler_name="test", clock=clock or FakeClock()))


def names(fw: Framework, rows: np.ndarray) -> list[str]:
    return fw.handle.nodes.names_of(rows)


def cycle(fw: Framework) -> tuple[list[str], Status, Diagnosis, CycleState]:
    """PreFilter then Filter, as the scheduling cycle runs them."""
    state = CycleState()
    rows, st, diag = fw.run_pre_filter(state, POD)
    if st.is_success():
        rows, st = fw.run_filter(state, POD, rows, diag)
    return names(fw, rows), st, diag, state


U, UU = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_a_plugin_at_a_point_it_does_not_implement_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="TestScoreA does not implement filter"):
        framework(filter=["TestScoreA"])


# ---------------------------------------------------------------------------- PreFilter


@pytest.mark.parametrize("skip, feasible", [
    pytest.param(True, ["n0", "n1", "n2"], id="a PreFilter Skip removes that plugin's Filter"),
    pytest.param(False, [], id="without Skip the same Filter runs and rejects"),
])
def test_pre_filter_skip(skip: bool, feasible: list[str]) -> None:
    fw = framework(preFilter=["TestSkipper"], filter=["TestSkipper"])
    pl = fw.plugins["TestSkipper"]
    pl.answer = Status(Code.SKIP) if skip else None
    pl.reject = {n: [("never", U)] for n in ("n0", "n1", "n2")}
    got, st, _, state = cycle(fw)
    assert st.is_success() and got == feasible
    assert ("TestSkipper" in state.skip_filter) is skip
    assert pl.calls == ([POD.uid] if skip else [POD.uid, ["n0", "n1", "n2"]])


@pytest.mark.parametrize("a, b, status, plugins, b_called", [
    pytest.param(Status(U, "pod has a bad day"), None, Status(U, "pod has a bad day"), {"TestPreFilterA"}, True,
                 id="an Unschedulable PreFilter lets the later ones run for preemption's sake"),
    pytest.param(Status(U, "first"), Status(U, "second"), Status(U, "second"), {"TestPreFilterA", "TestPreFilterB"}, True,
                 id="with two Unschedulable PreFilters the last one's message is reported"),
    pytest.param(Status(UU, "never here"), None, Status(UU, "never here"), {"TestPreFilterA"}, False,
                 id="an UnschedulableAndUnresolvable PreFilter ends PreFilter at once"),
])
def test_pre_filter_rejection(a: Status, b: Status | None, status: Status, plugins: set[str], b_called: bool) -> None:
    fw = framework(preFilter=["TestPreFilterA", "TestPreFilterB"], filter=["TestFilterA"])
    fw.plugins["TestPreFilterA"].answer = a
    fw.plugins["TestPreFilterB"].answer = b
    got, st, diag, _ = cycle(fw)
    assert got == [] and st == status
    assert diag.pre_filter_msg == status.message()
    assert diag.unschedulable_plugins == plugins
    assert bool(fw.plugins["TestPreFilterB"].calls) is b_called
    assert fw.plugins["TestFilterA"].calls == [], "no Filter runs after a PreFilter rejection"
    assert diag.message() == f"0/3 nodes are available: {status.message()}."


def test_pre_filter_results_narrow_the_rows() -> None:
    fw = framework(preFilter=["TestPreFilterA", "TestPreFilterB"], filter=["TestFilterA"], nodes=4)
    fw.plugins["TestPreFilterA"].answer = {"n0", "n1", "n2"}
    fw.plugins["TestPreFilterB"].answer = {"n1", "n2", "n3"}
    fw.plugins["TestFilterA"].reject = {"n1": [("node(s) were unlucky", U)]}
    got, st, diag, _ = cycle(fw)
    assert st.is_success() and got == ["n2"]
    assert fw.plugins["TestFilterA"].calls == [["n1", "n2"]], "Filter sees only the intersection"
    assert diag.unschedulable_plugins == {"TestPreFilterA", "TestPreFilterB", "TestFilterA"}
    assert sorted(names(fw, diag.unresolvable_rows)) == ["n0", "n3"], "nodes PreFilter ruled out are unresolvable"
    assert diag.message() == ("0/4 nodes are available: 1 node(s) were unlucky, "
                              "2 node(s) didn't satisfy plugin(s) [TestPreFilterA TestPreFilterB].")


@pytest.mark.parametrize("a, b, msg", [
    pytest.param({"n0"}, {"n1"}, "node(s) didn't satisfy plugin(s) [TestPreFilterA TestPreFilterB] simultaneously",
                 id="two PreFilter results without a common node"),
    pytest.param(set(), None, "node(s) didn't satisfy plugin TestPreFilterA", id="one PreFilter result naming no node"),
])
def test_an_empty_pre_filter_intersection_is_unresolvable(a: set[str], b: set[str] | None, msg: str) -> None:
    fw = framework(preFilter=["TestPreFilterA", "TestPreFilterB"])
    fw.plugins["TestPreFilterA"].answer = a
    fw.plugins["TestPreFilterB"].answer = b
    got, st, diag, _ = cycle(fw)
    assert got == [] and st.code == UU and st.message() == msg
    assert diag.message() == f"0/3 nodes are available: {msg}."


def test_pre_filter_names_that_are_no_node_leave_nothing_to_filter() -> None:
    fw = framework(preFilter=["TestPreFilterA"], filter=["TestFilterA"])
    fw.plugins["TestPreFilterA"].answer = {"ghost"}
    got, st, diag, _ = cycle(fw)
    assert got == [] and st.is_success()
    assert diag.message() == "0/3 nodes are available: 3 node(s) didn't satisfy plugin(s) [TestPreFilterA]."


# ---------------------------------------------------------------------------- Filter


def test_a_node_rejected_by_an_earlier_filter_is_not_seen_by_later_ones() -> None:
    fw = framework(filter=["TestFilterA", "TestFilterB"])
    fw.plugins["TestFilterA"].reject = {"n0": [("node(s) had a", U)]}
    fw.plugins["TestFilterB"].reject = {"n0": [("node(s) had b", U)], "n1": [("node(s) had b", U)]}
    got, st, diag, _ = cycle(fw)
    assert got == ["n2"]
    assert fw.plugins["TestFilterB"].calls == [["n1", "n2"]]
    assert diag.reasons == {"node(s) had a": 1, "node(s) had b": 1}, "n0 is judged by the first plugin only"
    assert diag.unschedulable_plugins == {"TestFilterA", "TestFilterB"}


def test_filters_stop_once_no_node_is_left() -> None:
    fw = framework(filter=["TestFilterA", "TestFilterB"], nodes=2)
    fw.plugins["TestFilterA"].reject = {"n0": [("x", U)], "n1": [("x", U)]}
    cycle(fw)
    assert fw.plugins["TestFilterB"].calls == []


@pytest.mark.parametrize("rejects, message", [
    pytest.param({**{f"n{i}": [("x", U)] for i in range(10)}, "n10": [("y", U)], "n11": [("y", U)]},
                 "0/12 nodes are available: 10 x, 2 y.", id="counts sort as strings so 10 comes before 2"),
    pytest.param({"n0": [("b reason", U)], "n1": [("a reason", U)]},
                 "0/12 nodes are available: 1 a reason, 1 b reason.", id="equal counts sort by reason"),
    pytest.param({"n0": [("Insufficient cpu", U), ("Insufficient memory", U)]},
                 "0/12 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.",
                 id="two reasons on one node are both counted"),
])
def test_reason_histogram(rejects: dict[str, list[tuple[str, Code]]], message: str) -> None:
    fw = framework(filter=["TestFilterA"], nodes=12)
    fw.plugins["TestFilterA"].reject = rejects
    _, _, diag, _ = cycle(fw)
    assert diag.message() == message


def test_unresolvable_rows_are_recorded_for_preemption() -> None:
    fw = framework(filter=["TestFilterA"])
    fw.plugins["TestFilterA"].reject = {"n0": [("node(s) didn't match Pod's node affinity/selector", UU)],
                                        "n1": [("Insufficient cpu", U)]}
    got, st, diag, _ = cycle(fw)
    assert got == ["n2"] and st.is_success()
    assert names(fw, diag.unresolvable_rows) == ["n0"]
    assert sorted(names(fw, diag.rejected_rows)) == ["n0", "n1"]


def test_diagnosis_message_with_a_post_filter_message() -> None:
    d = Diagnosis(num_all_nodes=2, reasons={"Insufficient cpu": 2},
                  post_filter_msg="preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")
    assert d.message() == ("0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: "
                           "2 No preemption victims found for incoming pod.")


# ---------------------------------------------------------------------------- errors


@register
class TestFailing(_Base):
    """Every extension point the framework runs; ``fail[point]`` is what it answers there instead of success:
    an exception it raises, or the Status it returns."""

    NAME = "TestFailing"
    EXTENSION_POINTS = frozenset({"PreFilter", "PreFilterExtensions", "Filter", "PostFilter", "PreScore", "Score",
                                  "NormalizeScore", "Reserve", "Permit", "PreBind", "Bind"})

    def __init__(self, args: Any, handle: Any) -> None:
        super().__init__(args, handle)
        self.fail: dict[str, Exception | Status] = {}

    def _answer(self, point: str) -> Status | None:
        answer = self.fail.get(point)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def pre_filter(self, state: CycleState, pod: Pod, nodes: Any) -> tuple[PreFilterResult | None, Status]:
        return None, self._answer("PreFilter") or Status()

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, row: int) -> Status:
        return self._answer("AddPod") or Status()

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, row: int) -> Status:
        return self._answer("RemovePod") or Status()

    def filter(self, state: CycleState, pod: Pod, nodes: Any, rows: np.ndarray) -> FilterResult:
        return FilterResult(np.ones(len(rows), dtype=bool), error=self._answer("Filter"))

    def post_filter(self, state: CycleState, pod: Pod, diagnosis: Any) -> tuple[Any, Status]:
        return None, self._answer("PostFilter") or Status(U)

    def pre_score(self, state: CycleState, pod: Pod, nodes: Any, rows: np.ndarray) -> Status:
        return self._answer("PreScore") or Status()

    def score(self, state: CycleState, pod: Pod, nodes: Any, rows: np.ndarray) -> Any:
        return self._answer("Score") or np.zeros(len(rows), dtype=np.int64)

    def normalize(self, state: CycleState, pod: Pod, scores: np.ndarray) -> Any:
        return self._answer("NormalizeScore")

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return self._answer("Reserve") or Status()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        pass

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        return self._answer("Permit") or Status(), 0.0

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return self._answer("PreBind") or Status()

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return self._answer("Bind") or Status()


OTHER = Pod(uid="u2", namespace="ns", name="other")


async def _run(point: str, answer: Exception | Status) -> Status:
    """The framework runs TestFailing, which answers ``answer`` at ``point``; the status the framework ends with."""
    fw = framework(preFilter=["TestFailing"], filter=["TestFailing"], postFilter=["TestFailing"],
                   preScore=["TestFailing"], score=["TestFailing"], reserve=["TestFailing"],
                   permit=["TestFailing"], preBind=["TestFailing"], bind=["TestFailing"])
    fw.plugins["TestFailing"].fail = {point: answer}
    state, rows = CycleState(), fw.handle.nodes.rows()
    runs: dict[str, Callable[[], Any]] = {
        "PreFilter": lambda: fw.run_pre_filter(state, POD)[1],
        "AddPod": lambda: fw.run_add_pod(state, POD, OTHER, 0),
        "RemovePod": lambda: fw.run_remove_pod(state, POD, OTHER, 0),
        "Filter": lambda: fw.run_filter(state, POD, rows, Diagnosis())[1],
        "PostFilter": lambda: fw.run_post_filter(state, POD, Diagnosis())[1],
        "PreScore": lambda: fw.run_score(state, POD, rows)[1],
        "Score": lambda: fw.run_score(state, POD, rows)[1],
        "NormalizeScore": lambda: fw.run_score(state, POD, rows)[1],
        "Reserve": lambda: fw.run_reserve(state, POD, "n0"),
        "Permit": lambda: fw.run_permit(state, POD, "n0"),
        "PreBind": lambda: fw.run_pre_bind(state, POD, "n0"),
        "Bind": lambda: fw.run_bind(state, POD, "n0"),
    }
    st = runs[point]()
    return await st if asyncio.iscoroutine(st) else st


# kube-scheduler 1.36's words for a plugin's error, per extension point (pkg/scheduler/framework/runtime/
# framework.go), with the plugin's error where {} is. PreBind and Bind: the binding cycle (scheduler/binding.py)
# wraps what the framework returns, so the framework adds nothing there (no wrapping twice).
WORDING = [
    pytest.param("PreFilter", 'running PreFilter plugin "TestFailing": {}', id="PreFilter (RunPreFilterPlugins)"),
    pytest.param("AddPod", 'running AddPod on PreFilter plugin "TestFailing": {}',
                 id="AddPod, for nominated pods and preemption (RunPreFilterExtensionAddPod)"),
    pytest.param("RemovePod", 'running RemovePod on PreFilter plugin "TestFailing": {}',
                 id="RemovePod, for preemption (RunPreFilterExtensionRemovePod)"),
    pytest.param("Filter", 'running "TestFailing" filter plugin: {}', id="Filter (RunFilterPlugins)"),
    pytest.param("PostFilter", "{}", id="PostFilter adds nothing (RunPostFilterPlugins)"),
    pytest.param("PreScore", 'running PreScore plugin "TestFailing": {}', id="PreScore (RunPreScorePlugins)"),
    pytest.param("Score", 'running Score plugins: plugin "TestFailing" failed with: {}',
                 id="Score (RunScorePlugins)"),
    pytest.param("NormalizeScore", 'running Normalize on Score plugins: plugin "TestFailing" failed with: {}',
                 id="NormalizeScore (RunScorePlugins)"),
    pytest.param("Reserve", 'running Reserve plugin "TestFailing": {}', id="Reserve (RunReservePluginsReserve)"),
    pytest.param("Permit", 'running Permit plugin "TestFailing": {}', id="Permit (RunPermitPlugins)"),
    pytest.param("PreBind", "{}", id="PreBind, worded by the binding cycle (RunPreBindPlugins)"),
    pytest.param("Bind", "{}", id="Bind, worded by the binding cycle (RunBindPlugins)"),
]


@pytest.mark.parametrize("point, wording", WORDING)
@pytest.mark.parametrize("answer, error", [
    pytest.param(RuntimeError("bad state"), "RuntimeError: bad state", id="a plugin that raises"),
    pytest.param(Status(Code.ERROR, "bad state", "worse"), "bad state, worse", id="a plugin that returns Error"),
])
async def test_a_plugins_error_is_worded_as_kube_scheduler_words_it(point: str, wording: str,
                                                                     answer: Exception | Status, error: str) -> None:
    st = await _run(point, answer)
    assert st.code == Code.ERROR and st.plugin == "TestFailing"
    assert st.message() == wording.format(error)
    if isinstance(answer, Exception):
        assert st.error is answer   # the traceback stays with the status, for the log


@pytest.mark.parametrize("point", ["PreFilter", "Reserve", "Permit"])
async def test_a_rejection_is_no_error_and_is_not_wrapped(point: str) -> None:
    st = await _run(point, Status(UU, "not here"))
    assert st.code == UU and st.message() == "not here" and st.plugin == "TestFailing"


# ---------------------------------------------------------------------------- Score


def test_scores_are_weighted_after_normalizing() -> None:
    fw = framework(score=["TestScoreA", "TestScoreNormalized"], weights={"TestScoreA": 2})
    fw.plugins["TestScoreA"].scores = {"n0": 1, "n1": 2, "n2": 3}
    fw.plugins["TestScoreNormalized"].scores = {"n0": 10, "n1": 20, "n2": 40}
    total, st = fw.run_score(CycleState(), POD, fw.handle.nodes.rows())
    assert st.is_success()
    assert total.tolist() == [2 * 1 + 25, 2 * 2 + 50, 2 * 3 + 100]
    assert total.dtype == np.int64


def test_a_pre_score_skip_leaves_that_plugins_score_out() -> None:
    fw = framework(preScore=["TestScoreSkipped"], score=["TestScoreA", "TestScoreSkipped"])
    fw.plugins["TestScoreA"].scores = {"n0": 5}
    fw.plugins["TestScoreSkipped"].scores = {"n1": 99}
    state = CycleState()
    total, st = fw.run_score(state, POD, fw.handle.nodes.rows())
    assert st.is_success() and total.tolist() == [5, 0, 0]
    assert fw.plugins["TestScoreSkipped"].calls == [] and "TestScoreSkipped" in state.skip_score


def test_a_single_feasible_node_is_not_scored() -> None:
    fw = framework(score=["TestScoreA"])
    total, st = fw.run_score(CycleState(), POD, fw.handle.nodes.rows()[:1])
    assert st.is_success() and total.tolist() == [0] and fw.plugins["TestScoreA"].calls == []


# ---------------------------------------------------------------------------- Reserve


def test_a_reserve_failure_returns_its_status_and_unreserve_runs_in_reverse() -> None:
    fw = framework(reserve=["TestReserveA", "TestReserveB"])
    log: list[str] = []
    fw.plugins["TestReserveA"].log = log
    fw.plugins["TestReserveB"].log = log
    fw.plugins["TestReserveB"].status = Status(U, "volume is gone")
    st = fw.run_reserve(CycleState(), POD, "n0")
    assert st.code == U and st.message() == "volume is gone" and st.plugin == "TestReserveB"
    fw.run_unreserve(CycleState(), POD, "n0")
    assert log == ["reserve TestReserveA", "reserve TestReserveB", "unreserve TestReserveB", "unreserve TestReserveA"]


# ---------------------------------------------------------------------------- Permit


async def test_permit_wait_then_allow() -> None:
    fw = framework(permit=["TestPermitA"])
    fw.plugins["TestPermitA"].answer = (Status(Code.WAIT), 10.0)
    st = fw.run_permit(CycleState(), POD, "n0")
    assert st.code == Code.WAIT and st.plugin == "TestPermitA"
    wp = fw.get_waiting_pod(POD.uid)
    assert wp is not None and wp.node == "n0" and fw.iterate_waiting_pods() == [wp]
    asyncio.get_running_loop().call_soon(wp.allow, "TestPermitA")
    assert (await asyncio.wait_for(fw.wait_on_permit(POD), 1)).is_success()
    assert fw.get_waiting_pod(POD.uid) is None


async def test_permit_wait_then_reject() -> None:
    fw = framework(permit=["TestPermitA"])
    fw.plugins["TestPermitA"].answer = (Status(Code.WAIT), 10.0)
    fw.run_permit(CycleState(), POD, "n0")
    fw.get_waiting_pod(POD.uid).reject("TestPermitA", "gang is incomplete")
    st = await asyncio.wait_for(fw.wait_on_permit(POD), 1)
    assert st.code == U and st.message() == "gang is incomplete" and st.plugin == "TestPermitA"


async def test_permit_timeout_rejects_with_upstreams_message() -> None:
    clock = FakeClock()
    fw = framework(permit=["TestPermitA"], clock=clock)
    fw.plugins["TestPermitA"].answer = (Status(Code.WAIT), 0.05)
    fw.run_permit(CycleState(), POD, "n0")
    wp = fw.get_waiting_pod(POD.uid)
    clock.advance(0.049)
    assert not wp.future.done(), "not yet: the timeout is on the handle's clock"
    clock.advance(0.001)
    st = await asyncio.wait_for(fw.wait_on_permit(POD), 1)
    assert st.code == U and st.plugin == "TestPermitA"
    assert st.message() == "rejected due to timeout after waiting 50ms at plugin TestPermitA"


async def test_a_plugin_that_allowed_no_longer_times_out_the_pod() -> None:
    clock = FakeClock()
    fw = framework(permit=["TestPermitA", "TestPermitB"], clock=clock)
    fw.plugins["TestPermitA"].answer = (Status(Code.WAIT), 0.02)
    fw.plugins["TestPermitB"].answer = (Status(Code.WAIT), 5.0)
    fw.run_permit(CycleState(), POD, "n0")
    wp = fw.get_waiting_pod(POD.uid)
    wp.allow("TestPermitA")
    assert clock.advance(1.0) == 0, "A's timer was stopped when A allowed"
    assert not wp.future.done()
    wp.allow("TestPermitB")
    assert (await asyncio.wait_for(fw.wait_on_permit(POD), 1)).is_success()
    assert clock.pending == [], "every timer is cancelled once the pod leaves Permit"


async def test_wait_is_success_only_once_every_waiting_plugin_allows() -> None:
    fw = framework(permit=["TestPermitA", "TestPermitB"])
    fw.plugins["TestPermitA"].answer = (Status(Code.WAIT), 5.0)
    fw.plugins["TestPermitB"].answer = (Status(Code.WAIT), 5.0)
    fw.run_permit(CycleState(), POD, "n0")
    wp = fw.get_waiting_pod(POD.uid)
    wp.allow("TestPermitA")
    assert not wp.future.done()
    wp.allow("TestPermitB")
    assert (await fw.wait_on_permit(POD)).is_success()


@pytest.mark.parametrize("answer, code", [
    pytest.param((Status(U, "not now"), 0.0), U, id="a Permit rejection rejects at once"),
    pytest.param((Status(), 0.0), Code.SUCCESS, id="a Permit success needs no waiting"),
])
async def test_permit_without_wait(answer: tuple[Status, float], code: Code) -> None:
    fw = framework(permit=["TestPermitA"])
    fw.plugins["TestPermitA"].answer = answer
    st = fw.run_permit(CycleState(), POD, "n0")
    assert st.code == code and fw.get_waiting_pod(POD.uid) is None
    assert (await fw.wait_on_permit(POD)).is_success(), "nothing waits"


@pytest.mark.parametrize("seconds, text", [
    pytest.param(10, "10s", id="whole seconds"),
    pytest.param(1.5, "1.5s", id="fractional seconds"),
    pytest.param(90, "1m30s", id="minutes and seconds"),
    pytest.param(3600, "1h0m0s", id="an hour"),
    pytest.param(0.05, "50ms", id="milliseconds"),
    pytest.param(0.0000015, "1.5\u00b5s", id="microseconds"),
    pytest.param(0, "0s", id="zero"),
])
def test_go_duration(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


# ---------------------------------------------------------------------------- PostFilter


def test_post_filter_joins_the_reasons_and_names_the_first_rejector() -> None:
    fw = framework(postFilter=["TestPostFilterA", "TestPostFilterB"])
    fw.plugins["TestPostFilterA"].answer = Status(U, "a says no")
    fw.plugins["TestPostFilterB"].answer = Status(U, "b says no")
    result, st = fw.run_post_filter(CycleState(), POD, Diagnosis())
    assert result is None and st.code == U and st.reasons == ("a says no", "b says no") and st.plugin == "TestPostFilterA"


def test_post_filter_stops_at_the_first_success() -> None:
    fw = framework(postFilter=["TestPostFilterA", "TestPostFilterB"])
    fw.plugins["TestPostFilterA"].answer = Status()
    _, st = fw.run_post_filter(CycleState(), POD, Diagnosis())
    assert st.is_success() and st.plugin == "TestPostFilterA"


def test_a_shared_success_is_named_after_each_plugin_that_returns_it() -> None:
    shared = Status()   # as a plugin module's _OK: returned by every call, by more than one plugin here
    for name in ("TestPostFilterA", "TestPostFilterB"):
        fw = framework(postFilter=[name])
        fw.plugins[name].answer = shared
        _, st = fw.run_post_filter(CycleState(), POD, Diagnosis())
        assert st.is_success() and st.plugin == name
    assert shared.plugin == ""


# ---------------------------------------------------------------------------- Bind


async def test_bind_skips_binders_that_skip() -> None:
    fw = framework(bind=["TestBindSkip", "TestBindOK"])
    st = await fw.run_bind(CycleState(), POD, "n1")
    assert st.is_success() and st.plugin == "TestBindOK"
    assert fw.plugins["TestBindSkip"].calls == ["n1"] and fw.plugins["TestBindOK"].calls == ["n1"]


@pytest.mark.parametrize("binders", [
    pytest.param(["TestBindSkip"], id="every binder skips"),
    pytest.param([], id="no binder at all"),
])
async def test_no_binder_is_an_error(binders: list[str]) -> None:
    fw = framework(bind=binders)
    st = await fw.run_bind(CycleState(), POD, "n1")
    assert st.code == Code.ERROR


async def test_a_binder_that_raises_is_an_error_naming_it() -> None:
    fw = framework(bind=["TestBindOK"])
    fw.plugins["TestBindOK"].answer = ConnectionError("apiserver went away")
    st = await fw.run_bind(CycleState(), POD, "n1")
    assert st.code == Code.ERROR and st.plugin == "TestBindOK" and "apiserver went away" in st.message()
