"""A pod's required node affinity, compiled once and matched over whole label columns.

The Python counterpart of k8s.io/component-helpers/scheduling/corev1/nodeaffinity:
the NodeAffinity plugin filters with it, and PodTopologySpread uses it for
``nodeAffinityPolicy: Honor`` (a node counts toward a spread constraint only if
the pod could be placed there by its nodeSelector and required node affinity).

Matching follows upstream:

* a term with neither matchExpressions nor matchFields matches nothing, and
  so does an empty term list;
* a term that does not parse (an unknown operator, In/NotIn without values,
  Exists/DoesNotExist with values, Gt/Lt without exactly one integer, an
  invalid label key or value, matchFields other than In/NotIn with one
  value) never matches, while the pod's other terms still can
  (LazyErrorNodeSelector);
* Gt/Lt compare the node's label value as a base-10 int64; a value that does
  not parse never matches;
* matchFields knows only ``metadata.name``.

:func:`required_mask` evaluates a :class:`RequiredNodeAffinity` over the node
table's interned label columns: one gather per requirement, never a Python
loop over nodes. ``matches_node`` on the records answers for one node, for
queueing hints only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from scheduler.framework.nodetable import NodeTable
from scheduler.model import Node, Pod


OBJECT_NAME_FIELD = "metadata.name"

IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT = "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"
_LABEL_OPS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT)
_FIELD_OPS = (IN, NOT_IN)

REQUIRED_TERMS_PATH = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"

RawReq = tuple[Any, Any, Any]          # (key, operator, values) as written


# ---------------------------------------------------------------------------- validation (apimachinery)

_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def qualified_name_error(key: str) -> str:
    """IsQualifiedName (ValidateLabelName): "" when ``key`` is a valid label key, else why not."""
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


def label_value_error(value: str) -> str:
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
class SelectorRequirement:
    """One NodeSelectorRequirement, validated."""

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
class SelectorTerm:
    """One NodeSelectorTerm: its label and field requirements, ANDed."""

    labels: tuple[SelectorRequirement, ...]
    fields: tuple[SelectorRequirement, ...]

    def matches_node(self, node: Node) -> bool:
        return (all(r.matches_labels(node.labels) for r in self.labels)
                and all(r.matches_field(node.name) for r in self.fields))


def compile_term(exprs: Sequence[RawReq], fields: Sequence[RawReq], path: str) -> tuple[SelectorTerm | None, list[str]]:
    """One NodeSelectorTerm -> (term, []) or (None, errors naming the field under ``path``)."""
    errs: list[str] = []
    labels: list[SelectorRequirement] = []
    for i, (key, op, values) in enumerate(exprs):
        p = f"{path}.matchExpressions[{i}]"
        key = key if isinstance(key, str) else ""
        values = [v if isinstance(v, str) else str(v) for v in values] if isinstance(values, list) else []
        if op not in _LABEL_OPS:
            errs.append(f'{p}.operator: Unsupported value: "{op}": supported values: "{", ".join(_LABEL_OPS)}"')
            continue
        e = qualified_name_error(key)
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
            e = label_value_error(v)
            if e:
                errs.append(f"{p}.values[{j}]: Invalid value: {v!r}: {e}")
        labels.append(SelectorRequirement(key, op, tuple(values), num))
    field_reqs: list[SelectorRequirement] = []
    for i, (key, op, values) in enumerate(fields):
        p = f"{path}.matchFields[{i}]"
        values = values if isinstance(values, list) else []
        if op not in _FIELD_OPS:
            errs.append(f'{p}.operator: Unsupported value: "{op}": supported values: "In", "NotIn"')
        elif len(values) != 1:
            errs.append(f"{p}.values: Invalid value: {values}: must have one element")
        else:
            field_reqs.append(SelectorRequirement(key if isinstance(key, str) else "", op, (str(values[0]),)))
    if errs:
        return None, errs
    return SelectorTerm(tuple(labels), tuple(field_reqs)), []


def _raw_reqs(v: Any) -> list[RawReq]:
    out = []
    for r in v if isinstance(v, list) else ():
        r = r if isinstance(r, dict) else {}
        out.append((r.get("key"), r.get("operator"), r.get("values") or []))
    return out


def raw_term(term: Any) -> tuple[list[RawReq], list[RawReq]]:
    """A NodeSelectorTerm as API JSON -> (matchExpressions, matchFields) as (key, operator, values)."""
    term = term if isinstance(term, dict) else {}
    return _raw_reqs(term.get("matchExpressions")), _raw_reqs(term.get("matchFields"))


def compile_selector(raw_terms: Iterable[tuple[list, list]], path: str) -> tuple[SelectorTerm, ...]:
    """LazyErrorNodeSelector: empty terms and terms that fail to parse are dropped (they match nothing)."""
    out = []
    for i, (exprs, fields) in enumerate(raw_terms):
        if not exprs and not fields:
            continue
        term, _ = compile_term(exprs, fields, f"{path}[{i}]")
        if term is not None:
            out.append(term)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class RequiredNodeAffinity:
    """nodeSelector pairs ANDed with the required terms (``terms`` None = no required node affinity)."""

    selector: tuple[tuple[str, str], ...]
    terms: tuple[SelectorTerm, ...] | None

    @property
    def everything(self) -> bool:
        """Matches every node: no nodeSelector and no required node affinity."""
        return not self.selector and self.terms is None

    def matches_node(self, node: Node) -> bool:
        labels = node.labels
        if any(k not in labels or labels[k] != v for k, v in self.selector):
            return False
        return self.terms is None or any(t.matches_node(node) for t in self.terms)


def pod_node_affinity(pod: Pod) -> dict[str, Any]:
    """``spec.affinity.nodeAffinity`` as written ({} when absent)."""
    aff = pod.affinity if isinstance(pod.affinity, dict) else {}
    na = aff.get("nodeAffinity")
    return na if isinstance(na, dict) else {}


def required_of(pod: Pod) -> RequiredNodeAffinity:
    """GetRequiredNodeAffinity(pod)."""
    req = pod_node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = None
    if isinstance(req, dict):
        raw = req.get("nodeSelectorTerms")
        terms = compile_selector((raw_term(t) for t in (raw if isinstance(raw, list) else ())), REQUIRED_TERMS_PATH)
    return RequiredNodeAffinity(tuple(pod.node_selector.items()), terms)


# ---------------------------------------------------------------------------- vectorized matching

class IntLabels:
    """Per label key, the int64 value of each interned label value (for Gt/Lt), extended as values appear.

    ``label_values(key)`` only ever grows, so the parsed prefix stays valid; a
    different list (a new table) starts over. One per plugin instance.
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


def _label_mask(r: SelectorRequirement, nodes: NodeTable, rows: np.ndarray, ints: IntLabels) -> np.ndarray:
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


def _field_mask(r: SelectorRequirement, nodes: NodeTable, rows: np.ndarray) -> np.ndarray:
    if r.key != OBJECT_NAME_FIELD:  # a node has no other field: it reads as ""
        return np.full(len(rows), (r.values[0] == "") == (r.op == IN))
    row = nodes.row(r.values[0])
    hit = rows == (-1 if row is None else row)
    return hit if r.op == IN else ~hit


def term_mask(t: SelectorTerm, nodes: NodeTable, rows: np.ndarray, ints: IntLabels) -> np.ndarray:
    """bool[k]: rows matching every requirement of one term."""
    m = np.ones(len(rows), dtype=bool)
    for r in t.labels:
        m &= _label_mask(r, nodes, rows, ints)
    for r in t.fields:
        m &= _field_mask(r, nodes, rows)
    return m


def terms_mask(terms: tuple[SelectorTerm, ...], nodes: NodeTable, rows: np.ndarray, ints: IntLabels) -> np.ndarray:
    """bool[k]: rows matching any of the terms (none matches nothing)."""
    m = np.zeros(len(rows), dtype=bool)
    for t in terms:
        m |= term_mask(t, nodes, rows, ints)
    return m


def required_mask(req: RequiredNodeAffinity, nodes: NodeTable, rows: np.ndarray, ints: IntLabels) -> np.ndarray:
    """bool[k]: RequiredNodeAffinity.Match for each of ``rows`` (int64[k])."""
    m = np.ones(len(rows), dtype=bool)
    for k, v in req.selector:
        col = nodes.label(k)
        vid = nodes.label_id(k, v)
        if col is None or vid == 0:
            return np.zeros(len(rows), dtype=bool)
        m &= col[rows] == vid
    if req.terms is not None:
        m &= terms_mask(req.terms, nodes, rows, ints)
    return m
