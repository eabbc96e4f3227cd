"""NodeAffinity: a pod's nodeSelector and node affinity, required and preferred.

Filter keeps the nodes that match ``spec.nodeSelector`` (every pair) and
``requiredDuringSchedulingIgnoredDuringExecution`` (terms ORed, the
requirements of one term ANDed), plus the scheduler-enforced
``addedAffinity`` from the plugin args. Score sums the weights of the
preferred terms a node matches, and NormalizeScore scales by the best node.

Matching follows k8s.io/component-helpers/scheduling/corev1/nodeaffinity,
which lives in :mod:`scheduler.framework.nodeaffinity` (PodTopologySpread
evaluates a pod's required node affinity too): empty and unparsable terms
match nothing, Gt/Lt compare int64 label values, matchFields knows only
``metadata.name``.

A pod's requirements are compiled once per cycle in PreFilter (CycleState)
and evaluated over whole label columns of the node table: one gather per
requirement, never a Python loop over nodes. This module must never reach
for per-node records in Filter or Score.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from scheduler.framework import (
    MAX_NODE_SCORE, ActionType, ClusterEvent, ClusterEventWithHint, Code, ConfigError, CycleState, FilterResult,
    PreFilterResult, QueueingHint, Rejection, Resource, Status, register,
)
from scheduler.framework.nodeaffinity import (
    IN, OBJECT_NAME_FIELD, IntLabels, SelectorTerm, compile_selector, compile_term, pod_node_affinity, raw_term,
    required_mask, required_of, term_mask, terms_mask,
)
from scheduler.model import Node, Pod

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

NAME = "NodeAffinity"
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"

PRE_FILTER_KEY = "PreFilter" + NAME
PRE_SCORE_KEY = "PreScore" + NAME

_OK = Status()
_SKIP = Status(Code.SKIP)
_MISSING = object()


# ---------------------------------------------------------------------------- plugin args

@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str = ""
    operator: str = ""
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelector:
    node_selector_terms: tuple[NodeSelectorTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerm:
    weight: int = 0
    preference: NodeSelectorTerm = field(default_factory=NodeSelectorTerm)


@dataclass(frozen=True, slots=True)
class NodeAffinitySpec:
    """core/v1 NodeAffinity, as NodeAffinityArgs.addedAffinity carries it."""

    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: tuple[PreferredSchedulingTerm, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeAffinityArgs:
    added_affinity: NodeAffinitySpec | None = None

    def validate(self, path: str) -> None:
        """ValidateNodeAffinityArgs: every added term must parse (an unparsable one would silently match nothing)."""
        if self.added_affinity is None:
            return
        aff = self.added_affinity
        base = f"{path}.addedAffinity"
        if aff.required_during_scheduling_ignored_during_execution is not None:
            p = f"{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
            for i, t in enumerate(aff.required_during_scheduling_ignored_during_execution.node_selector_terms):
                _, errs = compile_term(_reqs_of(t.match_expressions), _reqs_of(t.match_fields), f"{p}[{i}]")
                if errs:
                    raise ConfigError(errs[0])
        for i, pt in enumerate(aff.preferred_during_scheduling_ignored_during_execution):
            p = f"{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            if pt.weight == 0:
                continue  # upstream skips parsing zero-weight terms
            t = pt.preference
            _, errs = compile_term(_reqs_of(t.match_expressions), _reqs_of(t.match_fields), p)
            if errs:
                raise ConfigError(errs[0])


def _reqs_of(reqs: Iterable[NodeSelectorRequirement]) -> list[tuple[Any, Any, Any]]:
    return [(r.key, r.operator, list(r.values)) for r in reqs]


# ---------------------------------------------------------------------------- preferred terms

def _compile_preferred(raw: Iterable[tuple[int, list, list]]) -> tuple[tuple[SelectorTerm, int], ...]:
    """PreferredSchedulingTerms: zero weights and empty terms are skipped; unparsable terms never score."""
    out = []
    for weight, exprs, fields in raw:
        if weight == 0 or (not exprs and not fields):
            continue
        term, _ = compile_term(exprs, fields, "")
        if term is not None:
            out.append((term, weight))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class _Preferred:
    terms: tuple[tuple[SelectorTerm, int], ...]


def preferred_of(pod: Pod) -> _Preferred | None:
    raw = pod_node_affinity(pod).get("preferredDuringSchedulingIgnoredDuringExecution")
    if raw is None:
        return None
    items = []
    for pt in raw if isinstance(raw, list) else ():
        pt = pt if isinstance(pt, dict) else {}
        w = pt.get("weight")
        items.append((w if isinstance(w, int) and not isinstance(w, bool) else 0, *raw_term(pt.get("preference"))))
    return _Preferred(_compile_preferred(items))


# ---------------------------------------------------------------------------- vectorized matching

def _preferred_score(terms: tuple[tuple[SelectorTerm, int], ...], nodes: NodeTable, rows: np.ndarray,
                     ints: IntLabels, out: np.ndarray) -> None:
    for t, w in terms:
        out += term_mask(t, nodes, rows, ints) * np.int64(w)


def default_normalize(scores: np.ndarray, reverse: bool) -> None:
    """helper.DefaultNormalizeScore, in place on int64[k]."""
    top = int(scores.max()) if len(scores) else 0
    if top <= 0:
        if reverse:
            scores[:] = MAX_NODE_SCORE
        return
    if scores.min() >= 0:
        scores *= MAX_NODE_SCORE
        scores //= top
    else:  # negative added weights: Go's division truncates toward zero, numpy's floors
        np.copyto(scores, np.sign(scores) * (np.abs(scores) * MAX_NODE_SCORE // top))
    if reverse:
        np.subtract(MAX_NODE_SCORE, scores, out=scores)


# ---------------------------------------------------------------------------- the plugin

@register
class NodeAffinity:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"EnqueueExtensions", "PreFilter", "Filter", "PreScore", "Score", "NormalizeScore"})
    Args = NodeAffinityArgs

    def __init__(self, args: NodeAffinityArgs | None, handle: Any) -> None:
        self.handle = handle
        self._ints = IntLabels()
        self._added_required: tuple[SelectorTerm, ...] | None = None
        self._added_preferred: tuple[tuple[SelectorTerm, int], ...] | None = None
        aff = args.added_affinity if args is not None else None
        if aff is not None:
            ns = aff.required_during_scheduling_ignored_during_execution
            if ns is not None:
                self._added_required = compile_selector(
                    ((_reqs_of(t.match_expressions), _reqs_of(t.match_fields)) for t in ns.node_selector_terms), "")
            prefs = aff.preferred_during_scheduling_ignored_during_execution
            if prefs:
                self._added_preferred = _compile_preferred(
                    (p.weight, _reqs_of(p.preference.match_expressions), _reqs_of(p.preference.match_fields))
                    for p in prefs)

    # ------------------------------------------------------------------ queueing

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # With queueing hints there is no preCheck, so Add | UpdateNodeLabel is enough (upstream).
        return [ClusterEventWithHint(ClusterEvent(Resource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
                                     self._after_node_change)]

    def _after_node_change(self, pod: Pod, old: Node | None, new: Node | None) -> int:
        if new is None:
            return QueueingHint.QUEUE
        if self._added_required is not None and not any(t.matches_node(new) for t in self._added_required):
            return QueueingHint.SKIP
        req = required_of(pod)
        if not req.matches_node(new):
            return QueueingHint.SKIP
        if old is None:
            return QueueingHint.QUEUE
        # an update only helps if it turned a non-matching node into a matching one
        return QueueingHint.SKIP if req.matches_node(old) else QueueingHint.QUEUE

    # ------------------------------------------------------------------ filtering

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeTable) -> tuple[PreFilterResult | None, Status]:
        req_raw = pod_node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")
        has_required = isinstance(req_raw, dict)
        if not has_required and self._added_required is None and not pod.node_selector:
            return None, _SKIP
        state.write(PRE_FILTER_KEY, required_of(pod))
        raw_terms = req_raw.get("nodeSelectorTerms") if has_required else None
        if not isinstance(raw_terms, list) or not raw_terms:
            return None, _OK
        # Affinity to specific node names (matchFields metadata.name In) in every term narrows the nodes.
        names: set[str] | None = None
        for term in raw_terms:
            term_names: set[str] | None = None
            for key, op, values in raw_term(term)[1]:
                if key == OBJECT_NAME_FIELD and op == IN:
                    s = {str(v) for v in values} if isinstance(values, list) else set()
                    term_names = s if term_names is None else term_names & s  # requirements are ANDed
            if term_names is None:
                return None, _OK  # this term can match any node: the terms are ORed
            names = term_names if names is None else names | term_names
        if not names:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_CONFLICT)
        return PreFilterResult(frozenset(names)), _OK

    def filter(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> FilterResult:
        passed = np.ones(len(rows), dtype=bool)
        rejections: list[Rejection] = []
        if self._added_required is not None:
            ok = terms_mask(self._added_required, nodes, rows, self._ints)
            if not ok.all():
                rejections.append(Rejection(ERR_REASON_ENFORCED, ~ok, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
                passed = ok
        req = state.get(PRE_FILTER_KEY)
        if req is None:  # PreFilter disabled or skipped: compute here, as upstream falls back
            req = required_of(pod)
        ok = required_mask(req, nodes, rows, self._ints)
        bad = passed & ~ok  # a node already rejected as enforced gets only that reason
        if bad.any():
            rejections.append(Rejection(ERR_REASON_POD, bad, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
            passed = passed & ok
        return FilterResult(passed, rejections)

    # ------------------------------------------------------------------ scoring

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> Status:
        pref = preferred_of(pod)
        if pref is None and self._added_preferred is None:
            return _SKIP
        state.write(PRE_SCORE_KEY, pref)
        return _OK

    def score(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> np.ndarray:
        out = np.zeros(len(rows), dtype=np.int64)
        if self._added_preferred:
            _preferred_score(self._added_preferred, nodes, rows, self._ints, out)
        pref = state.get(PRE_SCORE_KEY, _MISSING)
        if pref is _MISSING:  # PreScore disabled: compute here, as upstream falls back
            pref = preferred_of(pod)
        if pref is not None:
            _preferred_score(pref.terms, nodes, rows, self._ints, out)
        return out

    def normalize(self, state: CycleState, pod: Pod, scores: np.ndarray) -> None:
        default_normalize(scores, reverse=False)

