"""The framework runtime: one per profile, running its plugins at each extension point.

Semantics follow kube-scheduler's frameworkImpl:

* PreFilter: Skip removes that plugin's Filter for this pod; Unschedulable
  lets the remaining PreFilters run (preemption needs their state) and then
  ends the cycle with the last such message; UnschedulableAndUnresolvable or
  an error ends it at once. Results narrow the nodes (intersection); an empty
  intersection is UnschedulableAndUnresolvable.
* Filter runs plugins in order over the rows still feasible, so a node is
  judged by the first plugin that rejects it, as upstream's per-node loop
  stops at the first failure. Reasons are counted per node for the
  "0/N nodes are available: ..." message.
* Score sums weight * normalized score; plugins whose PreScore said Skip
  are left out. Scores are int64 arrays over the feasible rows.
* Reserve runs in order; a failure runs Unreserve of all in reverse.
* Permit: any rejection rejects; Wait holds the pod (WaitingPod) until every
  waiting plugin allows it, one rejects it, or a plugin's own timeout (at
  most 15 minutes) passes before that plugin allowed it.
* Bind plugins run in order until one does not Skip.

An exception escaping a plugin at any extension point run here becomes
Status(ERROR) naming the plugin (logged once, with its traceback): the
cycle fails for that pod with reason SchedulerError and the scheduler goes
on. A plugin's error, raised or returned as Status(ERROR), reads as
kube-scheduler 1.36's does (:func:`plugin_error`): ``running PreFilter plugin
"VolumeBinding": ...``, worded per extension point. PreBind and Bind errors
are worded by the binding cycle that reports them (scheduler/binding.py).
Two kinds of plugin method are called from outside this class, and are
contained where they are called: a QueueSort key (the queue orders the pod
as PrioritySort would, scheduler/queue.py) and the Gang methods of the group
cycle (the whole gang is rejected with SchedulerError, scheduler/schedule_one.py).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from scheduler.framework import interface as fi
from scheduler.framework.clock import Timer
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.handle import Handle
from scheduler.framework.registry import REGISTRY, ConfigError, parse_args
from scheduler.framework.status import SUCCESS, Code, Status

if TYPE_CHECKING:
    from scheduler.config import Profile
    from scheduler.model import Pod

log = logging.getLogger("tandem.framework")


@dataclass(slots=True)
class Diagnosis:
    """Why a pod fits nowhere: the reason histogram and who rejected it."""

    num_all_nodes: int = 0
    reasons: dict[str, int] = field(default_factory=dict)       # reason -> node count
    unresolvable_rows: np.ndarray | None = None                 # rows preemption cannot help
    rejected_rows: np.ndarray | None = None                     # rows rejected by Filter (any code)
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""

    def add(self, reason: str, count: int) -> None:
        if count:
            self.reasons[reason] = self.reasons.get(reason, 0) + count

    def message(self) -> str:
        """FitError.Error(): ``0/N nodes are available: 2 Insufficient cpu, 3 node(s) ...``."""
        msg = f"0/{self.num_all_nodes} nodes are available:"
        if self.pre_filter_msg:
            msg += f" {self.pre_filter_msg}."
        else:
            # sort.Strings over "count reason", exactly as upstream orders them
            parts = sorted(f"{n} {r}" for r, n in self.reasons.items())
            if parts:
                msg += " " + ", ".join(parts) + "."
        if self.post_filter_msg:
            msg += f" {self.post_filter_msg}"   # " %v": the PostFilter plugins' reasons end as they end
        return msg


# the nodes a topology-constrained gang's member may not use: outside the one domain its gang goes into
OUTSIDE_DOMAIN = "node(s) outside the pod group's topology domain"

# upstream's maxTimeout: no Permit plugin may hold a pod longer
MAX_PERMIT_TIMEOUT = 15 * 60.0

# How kube-scheduler 1.36's frameworkImpl wraps a plugin's error, per extension point (framework.go:
# fmt.Errorf(..., pl.Name(), err), the name as Go's %q prints it). PostFilter adds nothing: its
# error is the plugin's own (AsStatus(s.AsError())).
_ERROR_WORDING = {
    "PreFilter": 'running PreFilter plugin "{}": ',
    "AddPod": 'running AddPod on PreFilter plugin "{}": ',
    "RemovePod": 'running RemovePod on PreFilter plugin "{}": ',
    "Filter": 'running "{}" filter plugin: ',
    "PostFilter": "",
    "PreScore": 'running PreScore plugin "{}": ',
    "Score": 'running Score plugins: plugin "{}" failed with: ',
    "NormalizeScore": 'running Normalize on Score plugins: plugin "{}" failed with: ',
    "Reserve": 'running Reserve plugin "{}": ',
    "Permit": 'running Permit plugin "{}": ',
}


def plugin_error(point: str, plugin: str, st: Status) -> Status:
    """Status(ERROR) for ``plugin`` failing at ``point``, worded as kube-scheduler 1.36 words it.

    ``st`` is what the plugin answered: a Status(ERROR) it returned (its reasons, joined with ", ", are
    the error, as AsError joins them), a raised exception (:meth:`Status.from_error`), or any other code
    upstream treats as an error at that point. What follows the wrapper is that message: for an
    exception, tandem's ``Type: text`` where upstream would print a Go error's text.
    """
    return Status(Code.ERROR, _ERROR_WORDING[point].format(plugin) + st.message(), plugin=plugin, error=st.error)


@dataclass(slots=True)
class WaitingPod:
    pod: "Pod"
    node: str
    pending: set[str]                            # plugins that have not allowed it yet
    future: asyncio.Future[Status]
    # plugin -> its timeout timer on the handle's clock; a plugin that allows stops only its own timer
    # (upstream waitingPod.pendingPlugins)
    timers: dict[str, Timer] = field(default_factory=dict)
    # run synchronously at rejection: the scheduler unreserves and forgets the pod right there, so a
    # rejected gang frees its room before the next cycle, not when the binding task next runs
    on_reject: Any = None
    # what the binding task sees instead of a rejection it has not seen yet (Framework.reject_waiting)
    overruled: Status | None = None

    def allow(self, plugin: str) -> None:
        self.pending.discard(plugin)
        timer = self.timers.pop(plugin, None)
        if timer is not None:
            timer.cancel()
        if not self.pending and not self.future.done():
            self.future.set_result(SUCCESS)

    def reject(self, plugin: str, msg: str) -> None:
        """Resolve the wait as Unschedulable, then release the pod's room (``on_reject``). Once: later calls
        do nothing."""
        if self.settle(Status(Code.UNSCHEDULABLE, msg, plugin=plugin)):
            self.release()

    def settle(self, st: Status) -> bool:
        """The first half of a rejection: settle the outcome, release nothing yet. False if already settled."""
        self.cancel_timers()
        if self.future.done():
            return False
        self.future.set_result(st)
        return True

    def release(self) -> None:
        """The second half of :meth:`reject`: give the room back (the scheduler's ``_release``, itself once)."""
        if self.on_reject is not None:
            self.on_reject()

    def cancel_timers(self) -> None:
        for timer in self.timers.values():
            timer.cancel()
        self.timers.clear()


def go_duration(seconds: float) -> str:
    """A duration as Go's time.Duration.String() prints it ("10s", "1m30s", "500ms"), for upstream's messages."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000:
        return f"{sign}{ns}ns"
    if ns < 1_000_000:
        return f"{sign}{_trim(ns / 1e3)}\u00b5s"
    if ns < 1_000_000_000:
        return f"{sign}{_trim(ns / 1e6)}ms"
    h, rest = divmod(ns, 3_600_000_000_000)
    m, rest = divmod(rest, 60_000_000_000)
    out = f"{h}h{m}m" if h else (f"{m}m" if m else "")
    return f"{sign}{out}{_trim(rest / 1e9)}s"


def _trim(x: float) -> str:
    return f"{x:.9f}".rstrip("0").rstrip(".")


class Framework:
    """A profile's plugins, instantiated, and the code that runs them."""

    def __init__(self, profile: "Profile", handle: Handle, metrics: Any = None) -> None:
        self.profile = profile
        self.name = profile.scheduler_name
        # the handle the plugins get names this framework (Handle.with_framework): built whole, never set later
        self.handle = handle = handle.with_framework(self)
        self.metrics = metrics
        self.plugins: dict[str, Any] = {}
        for point, names in profile.plugins.items():
            for name in names:
                if name not in self.plugins:
                    cls = REGISTRY.get(name)
                    if cls is None:
                        raise ConfigError(f"profiles[{profile.scheduler_name}]: plugin {name!r} is not registered")
                    fi.check_extension_points(cls)   # a class put in REGISTRY without register() is checked too
                    args = profile.plugin_args.get(name)
                    if args is None:
                        args = parse_args(getattr(cls, "Args", None), None, f"pluginConfig[{name}].args")
                    self.plugins[name] = cls(args, handle)

        # every list below is built here, once, from the plugins' declarations (never by looking for methods)
        def at(point: str) -> list[Any]:
            out = []
            for n in profile.plugins.get(point, []):
                p = self.plugins[n]
                if fi.CONFIG_POINTS[point] not in p.EXTENSION_POINTS:
                    raise ConfigError(f"profiles[{profile.scheduler_name}].plugins.{point}: "
                                      f"{n} does not implement {point}")
                out.append(p)
            return out

        def declaring(point: str) -> list[Any]:
            return [p for p in self.plugins.values() if point in p.EXTENSION_POINTS]

        self.pre_enqueue_plugins = at("preEnqueue")
        self.queue_sort = at("queueSort")
        self.pre_filter_plugins = at("preFilter")
        # the PreFilter plugins whose state depends on pods (AddPod/RemovePod), for dry runs and nominations
        self.pre_filter_extensions = [p for p in self.pre_filter_plugins if "PreFilterExtensions" in p.EXTENSION_POINTS]
        self.filter_plugins = at("filter")
        self.post_filter_plugins = at("postFilter")
        self.pre_score_plugins = at("preScore")
        self.score_plugins = at("score")
        self.reserve_plugins = at("reserve")
        self.permit_plugins = at("permit")
        self.pre_bind_plugins = at("preBind")
        self.bind_plugins = at("bind")
        self.post_bind_plugins = at("postBind")
        self.weights = {p.NAME: profile.weights.get(p.NAME, 1) for p in self.score_plugins}
        self._normalizes = {p.NAME for p in self.score_plugins if "NormalizeScore" in p.EXTENSION_POINTS}
        self.enqueue_extensions = declaring("EnqueueExtensions")
        # plugins with a task of their own, which the App runs for the scheduler's lifetime
        self.background_plugins = declaring("Background")
        self.waiting: dict[str, WaitingPod] = {}
        # the plugin that groups pods into gangs (tandem's group cycle), if the profile has one
        self.gang = next(iter(declaring("Gang")), None)
        # bool[rows]: while a topology-constrained gang's group cycle runs, the rows of the one domain it
        # goes into (scheduler/framework/placement.py); PreFilter leaves the others out, for preemption too
        self.placement: np.ndarray | None = None

    # ------------------------------------------------------------------ queueing

    def sort_key(self, info: Any) -> tuple:
        if self.queue_sort:
            return self.queue_sort[0].sort_key(info)
        return (-info.pod.priority, info.timestamp)

    def pre_enqueue(self, pod: "Pod") -> Status:
        for p in self.pre_enqueue_plugins:
            st = self._call(p, "PreEnqueue", p.pre_enqueue, pod)
            if not st.is_success():
                return st.with_plugin(p.NAME)
        return SUCCESS

    def events_to_register(self) -> list[tuple[str, fi.ClusterEventWithHint]]:
        out = []
        for p in self.enqueue_extensions:
            for ev in p.events_to_register():
                out.append((p.NAME, ev))
        return out

    # ------------------------------------------------------------------ scheduling cycle

    def _call(self, plugin: Any, point: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:  # a plugin bug must not take the scheduler down
            log.exception("plugin %s failed at %s", plugin.NAME, point)
            return Status.from_error(exc, plugin.NAME)

    def run_pre_filter(self, state: CycleState, pod: "Pod") -> tuple[np.ndarray, Status, Diagnosis]:
        """Returns the rows to filter, the status, and a Diagnosis started with PreFilter's verdict."""
        nodes = self.handle.nodes
        rows = nodes.rows()
        diag = Diagnosis(num_all_nodes=len(rows))
        allowed: frozenset[str] | None = None
        narrowed_by: set[str] = set()
        rejected: Status | None = None
        for p in self.pre_filter_plugins:
            res = self._call(p, "PreFilter", p.pre_filter, state, pod, nodes)
            if isinstance(res, Status):
                return rows[:0], plugin_error("PreFilter", p.NAME, res), diag
            result, st = res
            if st.is_skip():
                state.skip_filter.add(p.NAME)
                continue
            if not st.is_success():
                if not st.is_rejected():
                    return rows[:0], plugin_error("PreFilter", p.NAME, st), diag
                st = st.with_plugin(p.NAME)
                if st.code == Code.UNSCHEDULABLE:
                    # go on: preemption needs every PreFilter's state (upstream, kubernetes#119770);
                    # the last rejection is the one reported, as upstream
                    rejected = st
                    diag.unschedulable_plugins.add(p.NAME)
                    continue
                diag.pre_filter_msg = st.message()
                if st.code == Code.PENDING:
                    diag.pending_plugins.add(p.NAME)
                else:
                    diag.unschedulable_plugins.add(p.NAME)
                return rows[:0], st, diag
            if result is not None and result.node_names is not None:
                allowed = result.node_names if allowed is None else allowed & result.node_names
                narrowed_by.add(p.NAME)
                if not allowed:
                    names = sorted(narrowed_by)
                    msg = (f"node(s) didn't satisfy plugin {names[0]}" if len(names) == 1 else
                           f"node(s) didn't satisfy plugin(s) [{' '.join(names)}] simultaneously")
                    diag.pre_filter_msg = msg
                    diag.unschedulable_plugins.update(narrowed_by)
                    return rows[:0], Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg, plugin=p.NAME), diag
        if rejected is not None:
            diag.pre_filter_msg = rejected.message()
            return rows[:0], rejected, diag
        if allowed is not None:
            idx = [nodes.index[n] for n in allowed if n in nodes.index and nodes.valid[nodes.index[n]]]
            # may be empty: names that are no node of ours leave nothing to filter (upstream goes on too)
            narrowed = np.array(sorted(idx), dtype=np.int64)
            # nodes PreFilter ruled out count as "didn't satisfy plugin(s)" in the message, and are
            # UnschedulableAndUnresolvable for preemption (upstream's absent-nodes status)
            diag.add("node(s) didn't satisfy plugin(s) [" + " ".join(sorted(narrowed_by)) + "]",
                     len(rows) - len(narrowed))
            diag.unschedulable_plugins.update(narrowed_by)
            diag.unresolvable_rows = np.setdiff1d(rows, narrowed, assume_unique=True)
            rows = narrowed
        if self.placement is not None:
            rows = self._in_placement(rows, diag)
        return rows, SUCCESS, diag

    def _in_placement(self, rows: np.ndarray, diag: Diagnosis) -> np.ndarray:
        """``rows`` inside the gang's domain; the rest count as outside it, and preemption cannot help there."""
        mask = self.placement
        assert mask is not None
        inside = mask[rows]   # the mask has a value for every row: the node table cannot change in a group cycle
        outside = rows[~inside]
        if len(outside):
            diag.add(OUTSIDE_DOMAIN, len(outside))
            diag.unresolvable_rows = outside if diag.unresolvable_rows is None else \
                np.union1d(diag.unresolvable_rows, outside)
        return rows[inside]

    def run_filter(self, state: CycleState, pod: "Pod", rows: np.ndarray, diag: Diagnosis) -> tuple[np.ndarray, Status]:
        """Rows that pass every Filter; rejections are counted into ``diag``."""
        nodes = self.handle.nodes
        unresolvable: list[np.ndarray] = []
        rejected: list[np.ndarray] = []
        for p in self.filter_plugins:
            if len(rows) == 0:
                break
            if p.NAME in state.skip_filter:
                continue
            res = self._call(p, "Filter", p.filter, state, pod, nodes, rows)
            if isinstance(res, Status):
                return rows[:0], plugin_error("Filter", p.NAME, res)
            if res.error is not None:
                return rows[:0], plugin_error("Filter", p.NAME, res.error)
            passed = res.passed
            if passed.all():
                continue
            failed = ~passed
            rejected.append(rows[failed])
            for rej in res.rejections:
                m = rej.mask & failed
                diag.add(rej.reason, int(m.sum()))
                if rej.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    unresolvable.append(rows[m])
            diag.unschedulable_plugins.add(p.NAME)
            rows = rows[passed]
        if unresolvable:
            if diag.unresolvable_rows is not None and len(diag.unresolvable_rows):
                unresolvable.insert(0, diag.unresolvable_rows)  # keep the rows PreFilter ruled out
            diag.unresolvable_rows = np.concatenate(unresolvable)
        if rejected:
            diag.rejected_rows = np.concatenate(rejected)
        return rows, SUCCESS

    def extended(self, state: CycleState) -> list[Any]:
        """The PreFilterExtensions plugins whose PreFilter ran for this cycle's pod and did not Skip."""
        return [p for p in self.pre_filter_extensions if p.NAME not in state.skip_filter]

    def run_add_pod(self, state: CycleState, pod: "Pod", pod_to_add: "Pod", row: int,
                    plugins: list[Any] | None = None) -> Status:
        """RunPreFilterExtensionAddPod: as if ``pod_to_add`` were on node ``row`` (the cache is not changed)."""
        for p in (self.extended(state) if plugins is None else plugins):
            st = self._call(p, "AddPod", p.add_pod, state, pod, pod_to_add, row)
            if not st.is_success():
                return plugin_error("AddPod", p.NAME, st)
        return SUCCESS

    def run_remove_pod(self, state: CycleState, pod: "Pod", pod_to_remove: "Pod", row: int,
                       plugins: list[Any] | None = None) -> Status:
        """RunPreFilterExtensionRemovePod: as if ``pod_to_remove`` were gone from node ``row``."""
        for p in (self.extended(state) if plugins is None else plugins):
            st = self._call(p, "RemovePod", p.remove_pod, state, pod, pod_to_remove, row)
            if not st.is_success():
                return plugin_error("RemovePod", p.NAME, st)
        return SUCCESS

    def run_filter_with_nominated(self, state: CycleState, pod: "Pod", rows: np.ndarray,
                                  diag: Diagnosis) -> tuple[np.ndarray, Status]:
        """RunFilterPluginsWithNominatedPods over rows: nominated pods of equal or higher priority count.

        Their requests (and host ports) are charged on their nodes' rows for the run, and added to the
        PreFilter extensions' state; a row that passes with them and has PreFilter extensions in play is
        run again without them (a pod with affinity to a nominated pod must not rely on it), as upstream.
        Nothing to do (one dict check) while no pod is nominated.
        """
        nominations = self.handle.nominations
        if not len(nominations):
            return self.run_filter(state, pod, rows, diag)
        nodes = self.handle.nodes
        plan = nominations.plan(pod, nodes)
        if plan is None:
            return self.run_filter(state, pod, rows, diag)
        ext = self.extended(state)
        with_nominated = state
        if ext:
            with_nominated = state.clone()
            for row, p in plan.pods(nodes):
                st = self.run_add_pod(with_nominated, pod, p, row, ext)
                if not st.is_success():
                    return rows[:0], st
        plan.apply(nodes, 1)
        try:
            feasible, st = self.run_filter(with_nominated, pod, rows, diag)
        finally:
            plan.apply(nodes, -1)
        if not ext or not st.is_success() or len(feasible) == 0:
            return feasible, st
        again = feasible[np.isin(feasible, plan.rows)]
        if len(again) == 0:
            return feasible, st
        second = Diagnosis(num_all_nodes=diag.num_all_nodes)
        passed, st = self.run_filter(state, pod, again, second)
        if not st.is_success():
            return feasible[:0], st
        failed = np.setdiff1d(again, passed, assume_unique=True)
        if len(failed):
            for reason, n in second.reasons.items():
                diag.add(reason, n)
            diag.unschedulable_plugins |= second.unschedulable_plugins
            for attr in ("rejected_rows", "unresolvable_rows"):
                extra = getattr(second, attr)
                if extra is not None and len(extra):
                    mine = getattr(diag, attr)
                    setattr(diag, attr, extra if mine is None else np.concatenate([mine, extra]))
            feasible = np.setdiff1d(feasible, failed, assume_unique=True)
        return feasible, st

    def run_post_filter(self, state: CycleState, pod: "Pod", diag: Diagnosis) -> tuple[fi.PostFilterResult | None, Status]:
        # until one succeeds or fails for good; the others' reasons are joined, the first rejector named (upstream)
        reasons: list[str] = []
        rejector = ""
        kept = None   # a rejecting plugin's result still counts (DefaultPreemption's "" clears a nomination)
        for p in self.post_filter_plugins:
            res = self._call(p, "PostFilter", p.post_filter, state, pod, diag)
            if isinstance(res, Status):
                return None, plugin_error("PostFilter", p.NAME, res)
            result, st = res
            if st.is_success():
                return result, st.with_plugin(p.NAME)
            if st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return result, st.with_plugin(p.NAME)
            if not st.is_rejected():
                return None, plugin_error("PostFilter", p.NAME, st)
            if result is not None and kept is None:
                kept = result
            reasons.extend(st.reasons)
            rejector = rejector or p.NAME
        return kept, Status(Code.UNSCHEDULABLE, *reasons, plugin=rejector)

    def run_score(self, state: CycleState, pod: "Pod", rows: np.ndarray) -> tuple[np.ndarray, Status]:
        """Weighted total score per row (int64[k])."""
        nodes = self.handle.nodes
        total = np.zeros(len(rows), dtype=np.int64)
        if len(rows) <= 1:
            return total, SUCCESS
        for p in self.pre_score_plugins:
            st = self._call(p, "PreScore", p.pre_score, state, pod, nodes, rows)
            if st.is_skip():
                state.skip_score.add(p.NAME)
            elif not st.is_success():
                return total, plugin_error("PreScore", p.NAME, st)
        for p in self.score_plugins:
            if p.NAME in state.skip_score:
                continue
            scores = self._call(p, "Score", p.score, state, pod, nodes, rows)
            if isinstance(scores, Status):
                return total, plugin_error("Score", p.NAME, scores)
            if p.NAME in self._normalizes:
                st = self._call(p, "NormalizeScore", p.normalize, state, pod, scores)
                if isinstance(st, Status) and not st.is_success():
                    return total, plugin_error("NormalizeScore", p.NAME, st)
            total += scores * self.weights[p.NAME]
        return total, SUCCESS

    def run_reserve(self, state: CycleState, pod: "Pod", node: str) -> Status:
        for p in self.reserve_plugins:
            st = self._call(p, "Reserve", p.reserve, state, pod, node)
            if not st.is_success():
                return st.with_plugin(p.NAME) if st.is_rejected() else plugin_error("Reserve", p.NAME, st)
        return SUCCESS

    def run_unreserve(self, state: CycleState, pod: "Pod", node: str) -> None:
        for p in reversed(self.reserve_plugins):
            self._call(p, "Unreserve", p.unreserve, state, pod, node)

    def run_permit(self, state: CycleState, pod: "Pod", node: str) -> Status:
        """Success, a rejection, or Wait (the pod is now a WaitingPod)."""
        waits: dict[str, float] = {}
        for p in self.permit_plugins:
            res = self._call(p, "Permit", p.permit, state, pod, node)
            if isinstance(res, Status):
                return plugin_error("Permit", p.NAME, res)
            st, timeout = res
            if st.is_wait():
                waits[p.NAME] = min(max(0.0, timeout), MAX_PERMIT_TIMEOUT)
            elif st.is_rejected():
                return st.with_plugin(p.NAME)
            elif not st.is_success():
                return plugin_error("Permit", p.NAME, st)
        if not waits:
            return SUCCESS
        clock = self.handle.clock
        wp = WaitingPod(pod, node, set(waits), asyncio.get_running_loop().create_future())
        for name, t in waits.items():
            wp.timers[name] = clock.call_later(
                t, wp.reject, name, f"rejected due to timeout after waiting {go_duration(t)} at plugin {name}")
        self.waiting[pod.uid] = wp
        first = min(waits, key=waits.get)  # type: ignore[arg-type]
        return Status(Code.WAIT, plugin=first)

    async def wait_on_permit(self, pod: "Pod") -> Status:
        wp = self.waiting.get(pod.uid)
        if wp is None:
            return SUCCESS
        try:
            st = await wp.future
            return st if wp.overruled is None else wp.overruled
        finally:
            wp.cancel_timers()
            self.waiting.pop(pod.uid, None)

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return self.waiting.get(uid)

    def iterate_waiting_pods(self) -> list[WaitingPod]:
        return list(self.waiting.values())

    def reject_waiting(self, uids: "set[str] | frozenset[str]", st: Status) -> int:
        """Every waiting pod in ``uids`` ends with ``st`` (a rejection); returns how many were still waiting.

        All outcomes are settled before any room is released: a release runs Unreserve, and a gang
        plugin's Unreserve rejects the waiting siblings with its own words; settled first, each of them
        keeps ``st``, and each is released exactly once. A pod rejected earlier whose binding task has
        not seen it yet (it is still listed here) is released already: it only reports ``st`` instead.
        """
        rejected = []
        for wp in self.iterate_waiting_pods():
            if wp.pod.uid not in uids:
                continue
            if wp.settle(st):
                rejected.append(wp)
            elif not wp.future.cancelled() and not wp.future.result().is_success():
                wp.overruled = st
        for wp in rejected:
            wp.release()
        return len(rejected)

    async def run_pre_bind(self, state: CycleState, pod: "Pod", node: str) -> Status:
        for p in self.pre_bind_plugins:
            try:
                st = await p.pre_bind(state, pod, node)
            except Exception as exc:
                log.exception("plugin %s failed at PreBind", p.NAME)
                st = Status.from_error(exc, p.NAME)
            if not st.is_success():
                return st.with_plugin(p.NAME)
        return SUCCESS

    async def run_bind(self, state: CycleState, pod: "Pod", node: str) -> Status:
        for p in self.bind_plugins:
            try:
                st = await p.bind(state, pod, node)
            except Exception as exc:
                log.exception("plugin %s failed at Bind", p.NAME)
                st = Status.from_error(exc, p.NAME)
            if st.is_skip():
                continue
            return st.with_plugin(p.NAME)
        return Status(Code.ERROR, "no bind plugin bound the pod")

    def run_post_bind(self, state: CycleState, pod: "Pod", node: str) -> None:
        for p in self.post_bind_plugins:
            self._call(p, "PostBind", p.post_bind, state, pod, node)
