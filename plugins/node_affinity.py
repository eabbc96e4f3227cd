"""NodeAffinity: a pod's nodeSelector and node affinity, required and preferred.

Filter keeps the nodes that match ``spec.nodeSelector`` (every pair) and
``requiredDuringSchedulingIgnoredDuringExecution`` (terms ORed, the
requirements of one term ANDed), plus the scheduler-enforced
``addedAffinity`` from the plugin args. Score sums the weights of the
preferred terms a node matches, and NormalizeScore scales by the best node.

Matching follows k8s.io/component-helpers/scheduling/corev1/nodeaffinity:

* a term with neither matchExpressions nor matchFields matches nothing, and
  so does an empty term list;
* a term that does not parse (an unknown operator, In/NotIn without values,
  Exists/DoesNotExist with values, Gt/Lt without exactly one integer, an
  invalid label key or value, matchFields other than In/NotIn with one
  value) never matches, while the pod's other terms still can;
* Gt/Lt compare the node's label value as a base-10 int64; a value that does
  not parse never matches;
* matchFields knows only ``metadata.name``.

A pod's requirements are compiled once per cycle in PreFilter (CycleState)
and evaluated over whole label columns of the node table: one gather per
requirement, never a Python loop over nodes. This module must never reach
for per-node records in Filter or Score.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from scheduler.framework import (
    MAX_NODE_SCORE, ActionType, ClusterEvent, ClusterEventWithHint, Code, ConfigError, CycleState, FilterResult,
    PreFilterResult, QueueingHint, Rejection, Resource, Status, register,
)
from scheduler.model import Node, Pod

if TYPE_CHECKING:
    from scheduler.framework.interface import NodeTable

NAME = "NodeAffinity"
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"

PRE_FILTER_KEY = "PreFilter" + NAME
PRE_SCORE_KEY = "PreScore" + NAME

OBJECT_NAME_FIELD = "metadata.name"

IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT = "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"
_LABEL_OPS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT)
_FIELD_OPS = (IN, NOT_IN)

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
                _, errs = _compile_term(_reqs_of(t.match_expressions), _reqs_of(t.match_fields), f"{p}[{i}]")
                if errs:
                    raise ConfigError(errs[0])
        for i, pt in enumerate(aff.preferred_during_scheduling_ignored_during_execution):
            p = f"{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            if pt.weight == 0:
                continue  # upstream skips parsing zero-weight terms
            t = pt.preference
            _, errs = _compile_term(_reqs_of(t.match_expressions), _reqs_of(t.match_fields), p)
            if errs:
                raise ConfigError(errs[0])


def _reqs_of(reqs: Iterable[NodeSelectorRequirement]) -> list[tuple[Any, Any, Any]]:
    return [(r.key, r.operator, list(r.values)) for r in reqs]


# ---------------------------------------------------------------------------- validation (apimachinery)

_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _qualified_name_error(key: str) -> str:
    """IsQualifiedName: "" when ``key`` is a valid label key."""
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return "prefix part must be non-empty"
        if len(prefix) > 253 or not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix):
            return "prefix part must be a valid DNS-1123 subdomain"
    else:
        return "a qualified name must consist of alphanumeric characters, '-', '_' or '.', with an optional DNS subdomain prefix and '/'"
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _NAME_RE.fullmatch(name):
        return ("name part must consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character")
    return ""


def _label_value_error(value: str) -> str:
    if value == "":
        return ""
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _NAME_RE.fullmatch(value):
        return ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character")
    return ""


def parse_int64(s: str) -> int | None:
    """strconv.ParseInt(s, 10, 64): an optional sign and ASCII digits, within int64; else None."""
    if not _INT_RE.fullmatch(s):
        return None
    v = int(s)
    return v if _INT64_MIN <= v <= _INT64_MAX else None


# ---------------------------------------------------------------------------- compiled selectors

@dataclass(frozen=True, slots=True)
class _Req:
    key: str
    op: str
    values: tuple[str, ...]
    num: int = 0                  # Gt/Lt operand

    def matches_labels(self, labels: dict[str, str]) -> bool:
        """labels.Requirement.Matches on one node's labels (queueing hints only)."""
        op = self.op
        has = self.key in labels
        if op == IN:
            return has and labels[self.key] in self.values
        if op == NOT_IN:
            return not has or labels[self.key] not in self.values
        if op == EXISTS:
            return has
        if op == DOES_NOT_EXIST:
            return not has
        if not has:
            return False
        v = parse_int64(labels[self.key])
        if v is None:
            return False
        return v > self.num if op == GT else v < self.num

    def matches_field(self, node_name: str) -> bool:
        got = node_name if self.key == OBJECT_NAME_FIELD else ""  # the only field a node exposes
        return (got == self.values[0]) == (self.op == IN)


@dataclass(frozen=True, slots=True)
class _Term:
    labels: tuple[_Req, ...]
    fields: tuple[_Req, ...]

    def matches_node(self, node: Node) -> bool:
        return (all(r.matches_labels(node.labels) for r in self.labels)
                and all(r.matches_field(node.name) for r in self.fields))


def _compile_term(exprs: Sequence[tuple[Any, Any, Any]], fields: Sequence[tuple[Any, Any, Any]],
                  path: str) -> tuple[_Term | None, list[str]]:
    """One NodeSelectorTerm -> (_Term, []) or (None, errors). ``exprs``/``fields`` are (key, operator, values)."""
    errs: list[str] = []
    labels: list[_Req] = []
    for i, (key, op, values) in enumerate(exprs):
        p = f"{path}.matchExpressions[{i}]"
        key = key if isinstance(key, str) else ""
        values = [v if isinstance(v, str) else str(v) for v in values] if isinstance(values, list) else []
        if op not in _LABEL_OPS:
            errs.append(f'{p}.operator: Unsupported value: "{op}": supported values: "{", ".join(_LABEL_OPS)}"')
            continue
        e = _qualified_name_error(key)
        if e:
            errs.append(f"{p}.key: Invalid value: {key!r}: {e}")
        num = 0
        if op in (IN, NOT_IN) and not values:
            errs.append(f"{p}.values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty")
        elif op in (EXISTS, DOES_NOT_EXIST) and values:
            errs.append(f"{p}.values: Invalid value: {values}: values set must be empty for exists and does not exist")
        elif op in (GT, LT):
            if len(values) != 1:
                errs.append(f"{p}.values: Invalid value: {values}: for 'Gt', 'Lt' operators, exactly one value is required")
            for j, v in enumerate(values):
                n = parse_int64(v)
                if n is None:
                    errs.append(f"{p}.values[{j}]: Invalid value: {v!r}: for 'Gt', 'Lt' operators, the value must be an integer")
                else:
                    num = n
        for j, v in enumerate(values):
            e = _label_value_error(v)
            if e:
                errs.append(f"{p}.values[{j}]: Invalid value: {v!r}: {e}")
        labels.append(_Req(key, op, tuple(values), num))
    field_reqs: list[_Req] = []
    for i, (key, op, values) in enumerate(fields):
        p = f"{path}.matchFields[{i}]"
        values = values if isinstance(values, list) else []
        if op not in _FIELD_OPS:
            errs.append(f'{p}.operator: Unsupported value: "{op}": supported values: "In", "NotIn"')
        elif len(values) != 1:
            errs.append(f"{p}.values: Invalid value: {values}: must have one element")
        else:
            field_reqs.append(_Req(key if isinstance(key, str) else "", op, (str(values[0]),)))
    if errs:
        return None, errs
    return _Term(tuple(labels), tuple(field_reqs)), []


def _raw_reqs(v: Any) -> list[tuple[Any, Any, Any]]:
    out = []
    for r in v if isinstance(v, list) else ():
        r = r if isinstance(r, dict) else {}
        out.append((r.get("key"), r.get("operator"), r.get("values") or []))
    return out


def _raw_term(term: Any) -> tuple[list[tuple[Any, Any, Any]], list[tuple[Any, Any, Any]]]:
    term = term if isinstance(term, dict) else {}
    return _raw_reqs(term.get("matchExpressions")), _raw_reqs(term.get("matchFields"))


def _compile_selector(raw_terms: Iterable[tuple[list, list]], path: str) -> tuple[_Term, ...]:
    """LazyErrorNodeSelector: empty terms and terms that fail to parse are dropped (they match nothing)."""
    out = []
    for i, (exprs, fields) in enumerate(raw_terms):
        if not exprs and not fields:
            continue
        term, _ = _compile_term(exprs, fields, f"{path}[{i}]")
        if term is not None:
            out.append(term)
    return tuple(out)


def _compile_preferred(raw: Iterable[tuple[int, list, list]]) -> tuple[tuple[_Term, int], ...]:
    """PreferredSchedulingTerms: zero weights and empty terms are skipped; unparsable terms never score."""
    out = []
    for weight, exprs, fields in raw:
        if weight == 0 or (not exprs and not fields):
            continue
        term, _ = _compile_term(exprs, fields, "")
        if term is not None:
            out.append((term, weight))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class _Required:
    """RequiredNodeAffinity: nodeSelector pairs ANDed with the required terms (None = no affinity)."""

    selector: tuple[tuple[str, str], ...]
    terms: tuple[_Term, ...] | None

    def matches_node(self, node: Node) -> bool:
        labels = node.labels
        if any(k not in labels or labels[k] != v for k, v in self.selector):
            return False
        return self.terms is None or any(t.matches_node(node) for t in self.terms)


@dataclass(frozen=True, slots=True)
class _Preferred:
    terms: tuple[tuple[_Term, int], ...]


def _pod_node_affinity(pod: Pod) -> dict[str, Any]:
    aff = pod.affinity if isinstance(pod.affinity, dict) else {}
    na = aff.get("nodeAffinity")
    return na if isinstance(na, dict) else {}


def required_of(pod: Pod) -> _Required:
    """GetRequiredNodeAffinity(pod)."""
    req = _pod_node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = None
    if isinstance(req, dict):
        raw = req.get("nodeSelectorTerms")
        terms = _compile_selector((_raw_term(t) for t in (raw if isinstance(raw, list) else ())),
                                  "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms")
    return _Required(tuple(pod.node_selector.items()), terms)


def preferred_of(pod: Pod) -> _Preferred | None:
    raw = _pod_node_affinity(pod).get("preferredDuringSchedulingIgnoredDuringExecution")
    if raw is None:
        return None
    items = []
    for pt in raw if isinstance(raw, list) else ():
        pt = pt if isinstance(pt, dict) else {}
        w = pt.get("weight")
        items.append((w if isinstance(w, int) and not isinstance(w, bool) else 0, *_raw_term(pt.get("preference"))))
    return _Preferred(_compile_preferred(items))


# ---------------------------------------------------------------------------- vectorized matching

class _IntLabels:
    """Per label key, the int64 value of each interned label value (for Gt/Lt), extended as values appear.

    ``label_values(key)`` only ever grows, so the parsed prefix stays valid; a
    different list (a new table) starts over.
    """

    __slots__ = ("_by_key",)

    def __init__(self) -> None:
        self._by_key: dict[str, tuple[list[str], np.ndarray, np.ndarray]] = {}

    def get(self, nodes: NodeTable, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(ok bool[V], value int64[V]) indexed by value id."""
        names = nodes.label_values(key)
        hit = self._by_key.get(key)
        if hit is not None and hit[0] is names and len(hit[1]) == len(names):
            return hit[1], hit[2]
        start = len(hit[1]) if hit is not None and hit[0] is names else 0
        ok = np.zeros(len(names), dtype=bool)
        vals = np.zeros(len(names), dtype=np.int64)
        if start:
            ok[:start] = hit[1]
            vals[:start] = hit[2]
        for i in range(start, len(names)):  # distinct values, not nodes
            v = parse_int64(names[i]) if i else None  # id 0 is "absent"
            if v is not None:
                ok[i] = True
                vals[i] = v
        self._by_key[key] = (names, ok, vals)
        return ok, vals


def _label_mask(r: _Req, nodes: NodeTable, rows: np.ndarray, ints: _IntLabels) -> np.ndarray:
    """bool[k]: rows whose labels satisfy one requirement."""
    col = nodes.label(r.key)
    if col is None:  # no node has the key
        return np.full(len(rows), r.op in (NOT_IN, DOES_NOT_EXIST))
    ids = col[rows]
    op = r.op
    if op == EXISTS:
        return ids != 0
    if op == DOES_NOT_EXIST:
        return ids == 0
    if op in (IN, NOT_IN):
        want = np.zeros(len(nodes.label_values(r.key)), dtype=bool)
        for v in r.values:
            want[nodes.label_id(r.key, v)] = True
        want[0] = False  # label_id gives 0 for values no node has; 0 also means "absent"
        hit = want[ids]
        return hit if op == IN else ~hit
    ok, vals = ints.get(nodes, r.key)
    v = vals[ids]
    return ok[ids] & (v > r.num if op == GT else v < r.num)


def _field_mask(r: _Req, nodes: NodeTable, rows: np.ndarray) -> np.ndarray:
    if r.key != OBJECT_NAME_FIELD:  # a node has no other field: it reads as ""
        return np.full(len(rows), (r.values[0] == "") == (r.op == IN))
    row = nodes.row(r.values[0])
    hit = rows == (-1 if row is None else row)
    return hit if r.op == IN else ~hit


def _term_mask(t: _Term, nodes: NodeTable, rows: np.ndarray, ints: _IntLabels) -> np.ndarray:
    m = np.ones(len(rows), dtype=bool)
    for r in t.labels:
        m &= _label_mask(r, nodes, rows, ints)
    for r in t.fields:
        m &= _field_mask(r, nodes, rows)
    return m


def _terms_mask(terms: tuple[_Term, ...], nodes: NodeTable, rows: np.ndarray, ints: _IntLabels) -> np.ndarray:
    m = np.zeros(len(rows), dtype=bool)
    for t in terms:
        m |= _term_mask(t, nodes, rows, ints)
    return m


def _required_mask(req: _Required, nodes: NodeTable, rows: np.ndarray, ints: _IntLabels) -> np.ndarray:
    m = np.ones(len(rows), dtype=bool)
    for k, v in req.selector:
        col = nodes.label(k)
        vid = nodes.label_id(k, v)
        if col is None or vid == 0:
            return np.zeros(len(rows), dtype=bool)
        m &= col[rows] == vid
    if req.terms is not None:
        m &= _terms_mask(req.terms, nodes, rows, ints)
    return m


def _preferred_score(terms: tuple[tuple[_Term, int], ...], nodes: NodeTable, rows: np.ndarray,
                     ints: _IntLabels, out: np.ndarray) -> None:
    for t, w in terms:
        out += _term_mask(t, nodes, rows, ints) * np.int64(w)


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
        self._ints = _IntLabels()
        self._added_required: tuple[_Term, ...] | None = None
        self._added_preferred: tuple[tuple[_Term, int], ...] | None = None
        aff = args.added_affinity if args is not None else None
        if aff is not None:
            ns = aff.required_during_scheduling_ignored_during_execution
            if ns is not None:
                self._added_required = _compile_selector(
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
        req_raw = _pod_node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")
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
            for key, op, values in _raw_term(term)[1]:
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
            ok = _terms_mask(self._added_required, nodes, rows, self._ints)
            if not ok.all():
                rejections.append(Rejection(ERR_REASON_ENFORCED, ~ok, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
                passed = ok
        req = state.get(PRE_FILTER_KEY)
        if req is None:  # PreFilter disabled or skipped: compute here, as upstream falls back
            req = required_of(pod)
        ok = _required_mask(req, nodes, rows, self._ints)
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

