"""PodTopologySpread: spread matching pods evenly over topology domains (zones, nodes, racks).

Upstream's pkg/scheduler/framework/plugins/podtopologyspread, with its
semantics, reasons and scores; the counting is tandem's.

**Constraints.** Filter uses the pod's ``DoNotSchedule`` constraints and
Score its ``ScheduleAnyway`` ones. A pod with no constraints at all gets
the default constraints (``defaultConstraints`` with ``defaultingType:
List``, or kube-scheduler's system defaults: hostname maxSkew 3 and zone
maxSkew 5, both ScheduleAnyway), selecting the pods that the Services,
ReplicationControllers, ReplicaSets and StatefulSets selecting this pod
select (``handle.spread_selectors.default_selector``; no selector, no
default constraints). matchLabelKeys are merged into the selector by the
model. As upstream's countPodsMatchSelector, only placed pods in the pod's
namespace count, pods being deleted do not, and a selector that is empty
(``{}``) or nil counts nothing, while the pod's own match against it still
counts for its skew.

**PreFilter** finds the eligible nodes: every node (full ones too: room
plays no part) that has all of the hard constraints' topology keys and, per
constraint, passes its node inclusion policies (``nodeAffinityPolicy:
Honor``: the pod's nodeSelector and required node affinity match the node;
``nodeTaintsPolicy: Honor``: the pod tolerates the node's NoSchedule and
NoExecute taints). Per constraint, the matching pods per domain over those
nodes; the domains are the values present among them, empty ones included;
the global minimum is the least of them, or 0 while there are fewer
domains than minDomains. **Filter** then judges each node by the first
constraint it fails: no topology label is UnschedulableAndUnresolvable
("... (missing required label)"); ``count(domain) + selfMatch - minimum >
maxSkew`` is Unschedulable. **PreScore/Score/NormalizeScore** are
upstream's scoring.go: topology sizes over the scored nodes weigh each
constraint by ``log(size + 2)``, a node scores the sum of ``count * weight
+ (maxSkew - 1)`` over the keys it has (hostname: its own pods; other keys:
its domain over all nodes passing the policies), and fewer is better.

**Vectorized.** Nothing here walks pods or loops over nodes. Per
constraint, ``handle.counts.column`` gives the placed pods per node that
match the selector in the namespace (kept incrementally by the cache); a
topology label is an interned int32 column, so domain counts are one
``bincount`` (``framework.topology.domain_counts``) and "the count in this
node's domain" is a gather by value id. A key's value ids over all nodes,
and the values present, are kept per key until the table's rows change
(any node added, updated or removed). PreFilter reduces each hard
constraint to a verdict per value id (fits, too skewed, no label: int8[V]),
so Filter is one gather per constraint; Score computes each key's term of
upstream's float sum per value id and gathers it (hostname: per node, its
counts being per node). The policy masks come from ``framework.nodeaffinity`` and
``framework.taints``, once per cycle over all rows, and only when a
constraint honors a policy the pod can fail. At 5,000 nodes and 10,000
placed pods one zone constraint costs about 40 us to filter and 50 us to
score (bench/micro_spread.py).

**AddPod/RemovePod** (PreFilterExtensions, for preemption's dry runs and
nominated pods) move one domain's count per constraint as upstream's
updateWithPod does, without touching the cache, and keep the minimum and
the verdicts in step: PreFilter keeps, per constraint, the eligible
domains (``present``, which an update never changes) next to the counts.
The minimum is exact (upstream keeps two critical paths, which hold it
only while a state's updates are all on one node, as upstream's callers
make them), and only the updated domain's verdict is worked out again
unless the minimum moved. The pod added or removed counts
as PreFilter counts pods (same namespace, not being deleted, never for an
empty selector); upstream's updateWithPod counts deleting pods and empty
selectors, so it can disagree with its own PreFilter there. The state is
never mutated: an update writes a new one, so clones are independent.

Must never mutate the node table or the count columns it reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from scheduler.framework import (
    MAX_NODE_SCORE, ActionType, ClusterEvent, ClusterEventWithHint, Code, ConfigError, CycleState, FilterResult,
    PreFilterResult, QueueingHint, Rejection, Resource, Status, register,
)
from scheduler.framework.nodeaffinity import IntLabels, qualified_name_error, required_mask, required_of
from scheduler.framework.taints import TaintColumns, untolerated
from scheduler.framework.topology import domain_counts
from scheduler.model import (
    DO_NOT_SCHEDULE, EVERYTHING, NOTHING, POLICY_HONOR, POLICY_IGNORE, SCHEDULE_ANYWAY, SELECTOR_IN, LabelSelector,
    Node, Pod, PodSelection, Requirement, SpreadConstraint, parse_label_selector,
)

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

NAME = "PodTopologySpread"
ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

PRE_FILTER_KEY = "PreFilter" + NAME
PRE_SCORE_KEY = "PreScore" + NAME

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_ZONE = "topology.kubernetes.io/zone"

SYSTEM_DEFAULTING, LIST_DEFAULTING = "System", "List"

_OK = Status()
_SKIP = Status(Code.SKIP)
_INT32_MAX = 2**31 - 1
_MEMO_LIMIT = 1024


# ---------------------------------------------------------------------------- args

@dataclass(frozen=True, slots=True)
class DefaultConstraint:
    """A core/v1 TopologySpreadConstraint as PodTopologySpreadArgs.defaultConstraints carries it."""

    max_skew: int = 0
    topology_key: str = ""
    when_unsatisfiable: str = ""
    label_selector: Any = None                 # forbidden: deduced for each pod
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PodTopologySpreadArgs:
    """PodTopologySpreadArgs (kubescheduler.config.k8s.io/v1) with its v1 defaults."""

    default_constraints: tuple[DefaultConstraint, ...] = ()
    defaulting_type: str = SYSTEM_DEFAULTING   # "" is System too (v1 defaulting)

    def validate(self, path: str) -> None:
        """ValidatePodTopologySpreadArgs; every problem is reported, in one line."""
        errs: list[str] = []
        dt = self.defaulting_type
        if dt not in (SYSTEM_DEFAULTING, LIST_DEFAULTING, ""):
            errs.append(f'{path}.defaultingType: Unsupported value: "{dt}": supported values: '
                        f'"{SYSTEM_DEFAULTING}", "{LIST_DEFAULTING}"')
        elif dt != LIST_DEFAULTING and self.default_constraints:
            errs.append(f'{path}.defaultingType: Invalid value: "{dt or SYSTEM_DEFAULTING}": '
                        "when .defaultConstraints are not empty")
        seen: set[tuple[str, str]] = set()
        for i, c in enumerate(self.default_constraints):
            p = f"{path}.defaultConstraints[{i}]"
            if c.max_skew <= 0:
                errs.append(f"{p}.maxSkew: Invalid value: {c.max_skew}: not in valid range (0, inf)")
            if not c.topology_key:
                errs.append(f"{p}.topologyKey: Required value: can not be empty")
            else:
                e = qualified_name_error(c.topology_key)
                if e:
                    errs.append(f'{p}.topologyKey: Invalid value: "{c.topology_key}": {e}')
            if not c.when_unsatisfiable:
                errs.append(f"{p}.whenUnsatisfiable: Required value: can not be empty")
            elif c.when_unsatisfiable not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
                errs.append(f'{p}.whenUnsatisfiable: Unsupported value: "{c.when_unsatisfiable}": supported values: '
                            f'"{DO_NOT_SCHEDULE}", "{SCHEDULE_ANYWAY}"')
            if c.label_selector is not None:
                errs.append(f"{p}.labelSelector: Forbidden: constraint must not define a selector, "
                            "as they deduced for each pod")
            pair = (c.topology_key, c.when_unsatisfiable)
            if pair in seen:
                errs.append(f'{path}.defaultConstraints[{i}]: Duplicate value: "{{{pair[0]}, {pair[1]}}}"')
            seen.add(pair)
        if errs:
            raise ConfigError("; ".join(errs))


def _as_spread(c: DefaultConstraint) -> SpreadConstraint:
    """filterTopologySpreadConstraints on a default constraint; its selector is set per pod."""
    return SpreadConstraint(
        max_skew=c.max_skew, topology_key=c.topology_key, when_unsatisfiable=c.when_unsatisfiable, selector=NOTHING,
        min_domains=1 if c.min_domains is None else c.min_domains,
        node_affinity_policy=POLICY_HONOR if c.node_affinity_policy is None else c.node_affinity_policy,
        node_taints_policy=POLICY_IGNORE if c.node_taints_policy is None else c.node_taints_policy)


# kube-scheduler's systemDefaultConstraints
SYSTEM_DEFAULT_CONSTRAINTS = (
    DefaultConstraint(max_skew=3, topology_key=LABEL_HOSTNAME, when_unsatisfiable=SCHEDULE_ANYWAY),
    DefaultConstraint(max_skew=5, topology_key=LABEL_ZONE, when_unsatisfiable=SCHEDULE_ANYWAY),
)


# ---------------------------------------------------------------------------- cycle state

_FITS, _SKEWED, _MISSING_LABEL = 0, 1, 2   # a node's verdict on one constraint


@dataclass(frozen=True, slots=True)
class _Hard:
    """One DoNotSchedule constraint, counted over the eligible nodes."""

    key: str
    constraint: SpreadConstraint   # its selector, maxSkew, minDomains and policies (for AddPod/RemovePod)
    match: np.ndarray        # int64[V]: matching pods per value id of ``key`` (0 where no eligible node)
    present: np.ndarray      # bool[V]: the eligible nodes' domains, empty ones included (fixed for the cycle)
    min_match: int           # the global minimum (0 while there are fewer domains than minDomains)
    self_match: int          # 1 if the constraint's selector matches the pod itself
    verdict: np.ndarray      # int8[V] by value id: _FITS, _SKEWED, or _MISSING_LABEL (id 0: the node lacks the key)


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    """Never mutated: clones share it, and AddPod/RemovePod write a new one (copying what they change)."""

    constraints: tuple[_Hard, ...]


def _judged(c: SpreadConstraint, match: np.ndarray, present: np.ndarray, self_match: int) -> _Hard:
    """The constraint with its global minimum and its verdict per value id worked out from ``match``."""
    domains = int(np.count_nonzero(present))
    if domains < c.min_domains:
        min_match = 0
    elif domains == 0:
        min_match = _INT32_MAX   # minDomains <= 0 from the args: upstream's untouched critical path
    else:
        min_match = int(match[present].min())
    return _Hard(c.topology_key, c, match, present, min_match, self_match, _verdicts(c, match, self_match, min_match))


def _verdicts(c: SpreadConstraint, match: np.ndarray, self_match: int, min_match: int) -> np.ndarray:
    """int8[V]: _SKEWED where ``match + selfMatch - minimum > maxSkew``, else _FITS; _MISSING_LABEL at id 0."""
    verdict = (match + (self_match - min_match) > c.max_skew).astype(np.int8)
    verdict[0] = _MISSING_LABEL
    return verdict


def _moved(h: _Hard, v: int, delta: int) -> _Hard:
    """``h`` with ``delta`` more matching pods in domain ``v`` (a value id in ``h.present``): upstream's
    updateWithPod, with the exact global minimum instead of two critical paths. ``h`` is left as it was."""
    match = h.match.copy()
    match[v] += delta
    c = h.constraint
    min_match = h.min_match
    if int(np.count_nonzero(h.present)) >= c.min_domains:   # else the minimum stays 0
        if delta < 0:
            min_match = min(min_match, int(match[v]))
        elif h.match[v] == min_match:                       # v may have been the only domain at the minimum
            min_match = int(match[h.present].min())
    if min_match == h.min_match:                            # only v's verdict can change
        verdict = h.verdict.copy()
        verdict[v] = _SKEWED if match[v] + h.self_match - min_match > c.max_skew else _FITS
    else:
        verdict = _verdicts(c, match, h.self_match, min_match)
    return replace(h, match=match, min_match=min_match, verdict=verdict)


@dataclass(frozen=True, slots=True)
class _Soft:
    """One ScheduleAnyway constraint, counted for scoring."""

    key: str
    max_skew: int
    weight: float            # log(topology size + 2)
    per_node: np.ndarray | None   # hostname: matching pods per row (int32[cap]); None: none count
    domain: np.ndarray | None     # other keys: int64[V] matching pods per value id


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    constraints: tuple[_Soft, ...]
    ignored: np.ndarray      # bool[k] over the rows PreScore saw: nodes missing a key (scored 0)
    any_ignored: bool


@dataclass(frozen=True, slots=True)
class _KeyIds:
    """One topology key over every node (``nodes.rows()``), kept while that array is the table's: any node
    added, changed or removed makes a new one."""

    rows: np.ndarray         # the nodes.rows() it was computed for (held, so its identity is not reused)
    ids: np.ndarray          # int32[n]: value ids (0 = no label)
    present: np.ndarray      # bool[V]: the values some node has (present[0] False)
    complete: bool           # every node has the key


# ---------------------------------------------------------------------------- the plugin

@register
class PodTopologySpread:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"EnqueueExtensions", "PreFilter", "PreFilterExtensions", "Filter", "PreScore",
                                  "Score", "NormalizeScore"})
    Args = PodTopologySpreadArgs

    def __init__(self, args: PodTopologySpreadArgs | None, handle: Any) -> None:
        args = args if args is not None else PodTopologySpreadArgs()
        self.handle = handle
        self._system_defaulted = args.defaulting_type != LIST_DEFAULTING
        defaults = SYSTEM_DEFAULT_CONSTRAINTS if self._system_defaulted else args.default_constraints
        self._defaults = tuple(_as_spread(c) for c in defaults)
        self._ints = IntLabels()
        self._taint_cols = TaintColumns()
        self._selectors: dict[tuple[Any, ...], LabelSelector | None] = {}
        self._selectors_version: Any = None
        self._key_cache: dict[str, _KeyIds] = {}

    # ------------------------------------------------------------------ constraints

    def _constraints(self, pod: Pod, when: str) -> tuple[SpreadConstraint, ...]:
        """The pod's own constraints of kind ``when``; with none at all, the default ones with its selector."""
        if pod.topology_spread:
            return tuple(c for c in pod.topology_spread if c.when_unsatisfiable == when)
        defaults = [c for c in self._defaults if c.when_unsatisfiable == when]
        if not defaults:
            return ()
        selector = self._default_selector(pod)
        if selector is None:
            return ()
        return tuple(replace(c, selector=selector) for c in defaults)

    def _default_selector(self, pod: Pod) -> LabelSelector | None:
        """helper.DefaultSelector: the Services' and RCs' selectors merged, ANDed with the controlling
        ReplicaSet's or StatefulSet's; None when that selects everything (no default constraints)."""
        source = getattr(self.handle, "spread_selectors", None)
        if source is None:
            return None
        version = getattr(source, "version", None)
        if version != self._selectors_version or len(self._selectors) >= _MEMO_LIMIT:
            self._selectors.clear()
            self._selectors_version = version
        key = (pod.namespace, tuple(sorted(pod.labels.items())), pod.owners)
        if key in self._selectors:
            return self._selectors[key]
        got = source.default_selector(pod.namespace, pod.labels, pod.owners)
        selector = None
        if got is not None:
            match_labels, controller_selectors = got
            reqs = [Requirement(k, SELECTOR_IN, frozenset((v,))) for k, v in match_labels.items()]
            for raw in controller_selectors:
                s = parse_label_selector(raw, "spec.selector")
                if not s.nothing:   # a nil or unparsable controller selector adds nothing (upstream)
                    reqs.extend(s.reqs)
            if reqs:
                selector = EVERYTHING.with_requirements(reqs)
        self._selectors[key] = selector
        return selector

    def _counts(self, pod: Pod, c: SpreadConstraint) -> np.ndarray | None:
        """int32[cap] placed pods per row counted by ``c`` (pod's namespace, not deleting); None: none count."""
        if _counts_nothing(c.selector):
            return None
        return self.handle.counts.column((PodSelection(c.selector, frozenset((pod.namespace,))),), skip_deleting=True)

    def _policy_masks(self, pod: Pod, constraints: tuple[SpreadConstraint, ...], nodes: NodeTable,
                      rows: np.ndarray) -> list[np.ndarray | None]:
        """Per constraint, bool[k] of ``rows`` passing its node inclusion policies (None: all of them pass).
        matchNodeInclusionPolicies, with each mask computed once per cycle however many constraints honor it."""
        affinity = taints = None
        if any(c.node_affinity_policy == POLICY_HONOR for c in constraints):
            req = required_of(pod)
            if not req.everything:
                affinity = required_mask(req, nodes, rows, self._ints)
        if any(c.node_taints_policy == POLICY_HONOR for c in constraints):
            bad = untolerated(nodes, rows, pod.tolerations, self._taint_cols)
            taints = ~bad if bad.any() else None
        out: list[np.ndarray | None] = []
        for c in constraints:
            a = affinity if c.node_affinity_policy == POLICY_HONOR else None
            t = taints if c.node_taints_policy == POLICY_HONOR else None
            out.append(a if t is None else t if a is None else a & t)
        return out

    # ------------------------------------------------------------------ queueing

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # UpdatePodToleration: upstream's set with queueing hints on (a pod's own new toleration, for nodeTaintsPolicy)
        pod_actions = (ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.UPDATE_POD_TOLERATION
                       | ActionType.DELETE)
        node_actions = ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT
        return [
            ClusterEventWithHint(ClusterEvent(Resource.POD, pod_actions), self._after_pod_change),
            ClusterEventWithHint(ClusterEvent(Resource.NODE, node_actions), self._after_node_change),
        ]

    def _after_pod_change(self, pod: Pod, old: Pod | None, new: Pod | None) -> int:
        """isSchedulableAfterPodChange."""
        if (new is not None and not _involved(new, pod)) or (old is not None and not _involved(old, pod)):
            return QueueingHint.SKIP   # unscheduled, or in another namespace
        constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        if old is not None and new is not None:
            if (new.uid == pod.uid and new.tolerations != old.tolerations
                    and any(c.node_taints_policy == POLICY_HONOR for c in constraints)):
                return QueueingHint.QUEUE   # a new toleration may make a tainted node count
            if new.labels == old.labels:
                return QueueingHint.SKIP
            changed = any(c.selector.matches(old.labels) != c.selector.matches(new.labels) for c in constraints)
            return QueueingHint.QUEUE if changed else QueueingHint.SKIP
        changed_pod = new if new is not None else old
        if changed_pod is None:
            return QueueingHint.QUEUE
        matches = any(c.selector.matches(changed_pod.labels) for c in constraints)
        return QueueingHint.QUEUE if matches else QueueingHint.SKIP

    def _after_node_change(self, pod: Pod, old: Node | None, new: Node | None) -> int:
        """isSchedulableAfterNodeChange: a node that has (or had) every topology key, and changed in a way
        that matters (added, deleted, a key's value or its taints)."""
        constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        old_has = old is not None and _has_keys(old.labels, constraints)
        new_has = new is not None and _has_keys(new.labels, constraints)
        if old is not None and new is not None:
            if old_has != new_has:
                return QueueingHint.QUEUE
            if new_has and (any(old.labels.get(c.topology_key) != new.labels.get(c.topology_key)
                                for c in constraints) or old.taints != new.taints):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP
        if new is not None:
            return QueueingHint.QUEUE if new_has else QueueingHint.SKIP
        if old is not None:
            return QueueingHint.QUEUE if old_has else QueueingHint.SKIP
        return QueueingHint.QUEUE   # a node we never saw: when unsure, queue

    # ------------------------------------------------------------------ filtering

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeTable) -> tuple[PreFilterResult | None, Status]:
        constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        if not constraints:
            return None, _SKIP
        state.write(PRE_FILTER_KEY, self._pre_filter_state(pod, constraints, nodes))
        return None, _OK

    def _pre_filter_state(self, pod: Pod, constraints: tuple[SpreadConstraint, ...],
                          nodes: NodeTable) -> _PreFilterState:
        """calPreFilterState over every node: matching pods per domain among the eligible nodes."""
        rows = nodes.rows()
        keys = [self._key_ids(nodes, c.topology_key) for c in constraints]
        has_all = _all_keys(keys)   # nodeLabelsMatchSpreadConstraints; None: every node has every key
        out = []
        for c, k, policy in zip(constraints, keys, self._policy_masks(pod, constraints, nodes, rows)):
            eligible = has_all if policy is None else policy if has_all is None else has_all & policy
            size = len(k.present)
            counts = self._counts(pod, c)
            if eligible is None:   # every node counts: no gathers
                present = k.present
                match = (np.zeros(size, dtype=np.int64) if counts is None
                         else domain_counts(nodes, c.topology_key, counts))
            else:
                present = np.bincount(k.ids[eligible], minlength=size) > 0   # the domains, empty ones included
                match = (np.zeros(size, dtype=np.int64) if counts is None
                         else domain_counts(nodes, c.topology_key, counts, rows[eligible]))
            out.append(_judged(c, match, present, 1 if c.selector.matches(pod.labels) else 0))
        return _PreFilterState(tuple(out))

    def filter(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> FilterResult:
        s = state.get(PRE_FILTER_KEY)
        if s is None:
            return FilterResult(np.zeros(len(rows), dtype=bool),
                                error=Status(Code.ERROR, f'reading "{PRE_FILTER_KEY}" from cycleState: not found'))
        verdict: np.ndarray | None = None
        for h in s.constraints:   # a node is judged by the first constraint it fails
            v = h.verdict.take(_label_ids(nodes, h.key, rows))
            if verdict is None:
                verdict = v
            else:
                np.copyto(verdict, v, where=verdict == _FITS)
        assert verdict is not None   # PreFilter skips a pod without constraints
        passed = verdict == _FITS
        if passed.all():
            return FilterResult(passed)
        rejections = []
        missing = verdict == _MISSING_LABEL
        if missing.any():
            rejections.append(Rejection(ERR_REASON_NODE_LABEL_NOT_MATCH, missing, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
        skewed = verdict == _SKEWED
        if skewed.any():
            rejections.append(Rejection(ERR_REASON_CONSTRAINTS_NOT_MATCH, skewed, Code.UNSCHEDULABLE))
        return FilterResult(passed, rejections)

    # ------------------------------------------------------------------ PreFilterExtensions

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, row: int) -> Status:
        """AddPod: PreFilter's counts as if ``pod_to_add`` were on ``row`` too."""
        return self._update(state, pod, pod_to_add, row, 1)

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, row: int) -> Status:
        """RemovePod: PreFilter's counts as if ``pod_to_remove`` were gone from ``row``."""
        return self._update(state, pod, pod_to_remove, row, -1)

    def _update(self, state: CycleState, pod: Pod, other: Pod, row: int, delta: int) -> Status:
        """upstream's updateWithPod: ``other`` counts for each constraint whose selector matches it, in the
        domain of ``row``, when the node has every constraint's key and passes the constraint's inclusion
        policies for the pod. Counted as PreFilter counts (countPodsMatchSelector): only in the pod's
        namespace, not while being deleted, and never for an empty or nil selector (where upstream's
        updateWithPod, unlike its PreFilter, would count)."""
        s = state.get(PRE_FILTER_KEY)
        if s is None:
            return Status(Code.ERROR, f'reading "{PRE_FILTER_KEY}" from cycleState: not found', plugin=NAME)
        if other.namespace != pod.namespace or other.deleting:
            return _OK
        hits = [i for i, h in enumerate(s.constraints)
                if not _counts_nothing(h.constraint.selector) and h.constraint.selector.matches(other.labels)]
        if not hits:
            return _OK
        nodes = self.handle.nodes
        one = np.array([row], dtype=np.int64)
        ids = [int(_label_ids(nodes, h.key, one)[0]) for h in s.constraints]
        if not all(ids):
            return _OK   # nodeLabelsMatchSpreadConstraints: the node counts for no constraint
        policies = self._policy_masks(pod, tuple(h.constraint for h in s.constraints), nodes, one)
        moved = list(s.constraints)
        for i in hits:
            policy = policies[i]
            if policy is None or policy[0]:
                moved[i] = _moved(moved[i], ids[i], delta)
        state.write(PRE_FILTER_KEY, _PreFilterState(tuple(moved)))
        return _OK

    # ------------------------------------------------------------------ scoring

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> Status:
        all_rows = nodes.rows()
        if len(all_rows) == 0:
            return _SKIP
        constraints = self._constraints(pod, SCHEDULE_ANYWAY)
        if not constraints:
            return _SKIP
        # Only the pod's own or listed default constraints need every key: with the system defaults,
        # nodes without a zone still spread by hostname (their zone reads as "", one more domain).
        require_all = bool(pod.topology_spread) or not self._system_defaulted
        keys = [self._key_ids(nodes, c.topology_key) for c in constraints]
        every = rows is all_rows   # scoring every node: the cached ids are the rows' ids
        ids = [k.ids if every else _label_ids(nodes, c.topology_key, rows) for k, c in zip(keys, constraints)]
        ignored = np.zeros(len(rows), dtype=bool)
        if require_all and not (every and all(k.complete for k in keys)):
            for i in ids:
                ignored |= i == 0
        any_ignored = bool(ignored.any())
        n_scored = len(rows) - int(np.count_nonzero(ignored))
        counted = _all_keys(keys) if require_all else None   # None: every node
        out = []
        for c, k, cids, policy in zip(constraints, keys, ids, self._policy_masks(pod, constraints, nodes, all_rows)):
            counts = self._counts(pod, c)
            if c.topology_key == LABEL_HOSTNAME:   # counted per node in Score
                out.append(_Soft(c.topology_key, c.max_skew, math.log(n_scored + 2), counts, None))
                continue
            size = len(k.present)
            if every and not any_ignored and require_all:
                present = k.present
            else:
                present = np.bincount(cids[~ignored] if any_ignored else cids, minlength=size) > 0
            domains = int(np.count_nonzero(present))
            empty = nodes.label_id(c.topology_key, "")   # the id of a present but empty value, if any node has one
            if empty and present[0] and present[empty]:
                domains -= 1   # a missing key reads as "": one domain with the empty value
            eligible = counted if policy is None else policy if counted is None else counted & policy
            if counts is None:
                domain = np.zeros(size, dtype=np.int64)
            elif eligible is None and not empty:   # every node counts: no gathers
                domain = domain_counts(nodes, c.topology_key, counts)
            else:   # with rows: bin 0 holds the nodes lacking the key, not the rows of deleted nodes' pods
                domain = domain_counts(nodes, c.topology_key, counts,
                                       all_rows if eligible is None else all_rows[eligible])
                if empty:
                    domain[empty] += domain[0]
            out.append(_Soft(c.topology_key, c.max_skew, math.log(domains + 2), None, domain))
        state.write(PRE_SCORE_KEY, _PreScoreState(tuple(out), ignored, any_ignored))
        return _OK

    def score(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> np.ndarray | Status:
        s = state.get(PRE_SCORE_KEY)
        if s is None:
            return Status(Code.ERROR, f'error reading "{PRE_SCORE_KEY}" from cycleState: not found', plugin=NAME)
        # upstream's float64 operations in its order (score += cnt*weight + (maxSkew-1) per key the node has),
        # done once per value id where a domain's count is the same for all its nodes, so the same rounding
        total: np.ndarray | None = None
        for c in s.constraints:
            ids = _label_ids(nodes, c.key, rows)
            if c.domain is not None:
                per_value = c.domain.astype(np.float64)
                per_value *= c.weight
                per_value += float(c.max_skew - 1)
                per_value[0] = 0.0   # only the keys a node has score
                if len(s.constraints) == 1:   # round per value too: one gather is the whole score
                    out = _round_half_away(per_value).take(ids)
                    if s.any_ignored:
                        out[s.ignored] = 0
                    return out
                part = per_value.take(ids)
            else:
                cnt = c.per_node.take(rows) if c.per_node is not None else np.zeros(len(rows), dtype=np.int64)
                part = cnt.astype(np.float64)
                part *= c.weight
                part += float(c.max_skew - 1)
                part[ids == 0] = 0.0
            if total is None:
                total = part   # 0.0 + x is x
            else:
                total += part
        assert total is not None   # PreScore skips a pod without constraints
        if s.any_ignored:
            total[s.ignored] = 0.0
        return _round_half_away(total)

    def normalize(self, state: CycleState, pod: Pod, scores: np.ndarray) -> None:
        s = state.get(PRE_SCORE_KEY)
        if s is None:
            return
        kept = scores[~s.ignored] if s.any_ignored else scores
        if len(kept) == 0:
            scores[:] = 0
            return
        top = max(int(kept.max()), 0)
        if top == 0:
            scores[:] = MAX_NODE_SCORE
        else:
            low = int(kept.min())
            scores *= -MAX_NODE_SCORE
            scores += MAX_NODE_SCORE * (top + low)
            scores //= top   # non-negative: Go's truncation is numpy's floor here
        if s.any_ignored:
            scores[s.ignored] = 0

    def _key_ids(self, nodes: NodeTable, key: str) -> _KeyIds:
        """``key`` over every node, from the cache while the node table's rows are unchanged."""
        rows = nodes.rows()
        hit = self._key_cache.get(key)
        if hit is not None and hit.rows is rows and len(hit.present) == len(nodes.label_values(key)):
            return hit
        if len(self._key_cache) >= _MEMO_LIMIT:
            self._key_cache.clear()
        ids = _label_ids(nodes, key, rows)
        present = np.bincount(ids, minlength=len(nodes.label_values(key))) > 0
        present[0] = False
        hit = self._key_cache[key] = _KeyIds(rows, ids, present, bool(len(ids) == 0 or ids.all()))
        return hit


# ---------------------------------------------------------------------------- helpers

def _all_keys(keys: list[_KeyIds]) -> np.ndarray | None:
    """bool[n]: the nodes having every key (nodeLabelsMatchSpreadConstraints); None when all of them do."""
    if all(k.complete for k in keys):
        return None
    out = np.ones(len(keys[0].ids), dtype=bool)
    for k in keys:
        out &= k.ids != 0
    return out


def _label_ids(nodes: NodeTable, key: str, rows: np.ndarray) -> np.ndarray:
    """int32[k]: the value ids of ``key`` on ``rows`` (0 = the node lacks the key)."""
    col = nodes.label(key)
    return np.zeros(len(rows), dtype=np.int32) if col is None else col.take(rows)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    """Go's math.Round on non-negative float64, exactly: floor, plus one where the fraction is >= 0.5
    (``floor(x + 0.5)`` would round 0.49999999999999994 up). ``x`` is overwritten."""
    low = np.floor(x)
    x -= low
    out = low.astype(np.int64)
    out += x >= 0.5
    return out


def _counts_nothing(selector: LabelSelector) -> bool:
    """countPodsMatchSelector counts no pod for an empty (``{}``) or nil selector."""
    return selector.empty or selector.nothing


def _has_keys(labels: dict[str, str], constraints: Iterable[SpreadConstraint]) -> bool:
    """nodeLabelsMatchSpreadConstraints."""
    return all(c.topology_key in labels for c in constraints)


def _involved(changed: Pod, pod: Pod) -> bool:
    """involvedInTopologySpreading: the pod itself, or a placed pod in its namespace."""
    return changed.uid == pod.uid or (bool(changed.node_name) and changed.namespace == pod.namespace)
