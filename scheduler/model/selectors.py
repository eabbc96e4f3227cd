"""Label selectors, node selector terms, and the pod affinity and topology spread terms built from them.

Selectors are compiled once, when a pod is parsed, into hashable records
(equal selectors share count columns in the pod counts); a workload's pods
repeat the same terms, so their parse is memoized (:func:`_memo`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import orjson

from scheduler.model.fields import _d, _l, _Problems
from scheduler.model.quantity import INT32_MAX

SELECTOR_IN, SELECTOR_NOT_IN, SELECTOR_EXISTS, SELECTOR_DOES_NOT_EXIST = "In", "NotIn", "Exists", "DoesNotExist"


@dataclass(frozen=True, slots=True)
class Requirement:
    """One labels.Requirement of a metav1.LabelSelector (matchLabels entries are ``In`` with one value)."""

    key: str
    op: str                      # In | NotIn | Exists | DoesNotExist
    values: frozenset[str] = frozenset()

    def matches(self, labels: dict[str, str]) -> bool:
        op = self.op
        if op == SELECTOR_IN:
            v = labels.get(self.key)
            return v is not None and v in self.values
        if op == SELECTOR_NOT_IN:
            v = labels.get(self.key)
            return v is None or v not in self.values
        if op == SELECTOR_EXISTS:
            return self.key in labels
        return self.key not in labels


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelectorAsSelector, compiled: the requirements ANDed, in a canonical order (hashable, so
    equal selectors share count columns). ``nothing``: a nil selector, which matches no object; no
    requirements and not ``nothing`` is ``{}``, which matches every object (labels.Everything)."""

    reqs: tuple[Requirement, ...] = ()
    nothing: bool = False

    @property
    def empty(self) -> bool:
        """labels.Selector.Empty(): matches everything (PodTopologySpread counts nothing with it)."""
        return not self.nothing and not self.reqs

    def matches(self, labels: dict[str, str]) -> bool:
        if self.nothing:
            return False
        for r in self.reqs:
            if not r.matches(labels):
                return False
        return True

    def with_requirements(self, more: "list[Requirement]") -> "LabelSelector":
        """The selector ANDed with ``more`` (matchLabelKeys merging); a nil selector stays nil."""
        if self.nothing or not more:
            return self
        return LabelSelector(tuple(sorted(set(self.reqs) | set(more), key=_req_order)))


def _req_order(r: Requirement) -> tuple[str, str, tuple[str, ...]]:
    return (r.key, r.op, tuple(sorted(r.values)))


NOTHING = LabelSelector(nothing=True)
EVERYTHING = LabelSelector()
_LABEL_SELECTOR_OPS = (SELECTOR_IN, SELECTOR_NOT_IN, SELECTOR_EXISTS, SELECTOR_DOES_NOT_EXIST)


def parse_label_selector(raw: Any, path: str, probs: "_Problems | None" = None) -> LabelSelector:
    """A metav1.LabelSelector from API JSON. None is nil (matches nothing). A problem (an unknown operator,
    In/NotIn without values, Exists/DoesNotExist with values) is recorded in ``probs`` naming the field, and
    the selector then matches nothing, as upstream's parse error never lets it match."""
    if raw is None:
        return NOTHING
    probs = probs if probs is not None else _Problems()
    if not isinstance(raw, dict):
        probs.add(path, "must be an object")
        return NOTHING
    reqs: list[Requirement] = []
    ml = raw.get("matchLabels")
    if ml is not None:
        if not isinstance(ml, dict):
            probs.add(f"{path}.matchLabels", "must be a map of strings")
            return NOTHING
        for k, v in ml.items():
            if not isinstance(v, str):
                probs.add(f"{path}.matchLabels[{k}]", "must be a string")
                return NOTHING
            reqs.append(Requirement(str(k), SELECTOR_IN, frozenset((v,))))
    exprs = raw.get("matchExpressions")
    if exprs is not None and not isinstance(exprs, list):
        probs.add(f"{path}.matchExpressions", "must be a list")
        return NOTHING
    for i, e in enumerate(exprs or ()):
        p = f"{path}.matchExpressions[{i}]"
        e = _d(e)
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        if not isinstance(key, str) or not key:
            probs.add(f"{p}.key", "must be a non-empty string")
            return NOTHING
        if op not in _LABEL_SELECTOR_OPS:
            probs.add(f"{p}.operator", f'Unsupported value: "{op}": supported values: "In", "NotIn", "Exists", '
                                       f'"DoesNotExist"')
            return NOTHING
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            probs.add(f"{p}.values", "must be a list of strings")
            return NOTHING
        if op in (SELECTOR_IN, SELECTOR_NOT_IN) and not values:
            probs.add(f"{p}.values", "for 'in', 'notin' operators, values set can't be empty")
            return NOTHING
        if op in (SELECTOR_EXISTS, SELECTOR_DOES_NOT_EXIST) and values:
            probs.add(f"{p}.values", "values set must be empty for exists and does not exist")
            return NOTHING
        reqs.append(Requirement(key, op, frozenset(values)))
    return LabelSelector(tuple(sorted(set(reqs), key=_req_order)))


@dataclass(frozen=True, slots=True)
class PodSelection:
    """Which pods a pod affinity term (or a spread constraint) selects: the label selector, in the
    namespaces named or selected (upstream's AffinityTerm without its topology key). Hashable: the
    cache keeps one count column per distinct selection."""

    selector: LabelSelector
    namespaces: frozenset[str] = frozenset()
    ns_selector: LabelSelector = NOTHING       # nil: selects no namespace by labels

    def matches(self, namespace: str, labels: dict[str, str], ns_labels: dict[str, str]) -> bool:
        """AffinityTerm.Matches: the namespace is named or its labels are selected, then the labels."""
        if namespace not in self.namespaces and not self.ns_selector.matches(ns_labels):
            return False
        return self.selector.matches(labels)

    @property
    def by_namespace_labels(self) -> bool:
        return not self.ns_selector.nothing


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A PodAffinityTerm (with its weight, for preferred terms), parsed for its pod."""

    selection: PodSelection
    topology_key: str
    weight: int = 0


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """spec.affinity.podAffinity and podAntiAffinity, parsed (upstream's PodInfo terms)."""

    required: tuple[AffinityTerm, ...] = ()
    required_anti: tuple[AffinityTerm, ...] = ()
    preferred: tuple[AffinityTerm, ...] = ()
    preferred_anti: tuple[AffinityTerm, ...] = ()


DO_NOT_SCHEDULE, SCHEDULE_ANYWAY = "DoNotSchedule", "ScheduleAnyway"
POLICY_HONOR, POLICY_IGNORE = "Honor", "Ignore"


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A topologySpreadConstraint, parsed; ``selector`` has matchLabelKeys merged in."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str                 # DoNotSchedule | ScheduleAnyway
    selector: LabelSelector
    min_domains: int = 1                    # nil is 1
    node_affinity_policy: str = POLICY_HONOR
    node_taints_policy: str = POLICY_IGNORE
    match_label_keys: tuple[str, ...] = ()


_SELECTOR_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _check_affinity(aff: Any, probs: _Problems) -> dict[str, Any] | None:
    """Keep spec.affinity as it is, after checking the operators the plugins will meet."""
    if aff is None:
        return None
    if not isinstance(aff, dict):
        probs.add("spec.affinity", "must be an object")
        return None
    na = _d(aff.get("nodeAffinity"))
    req = _d(na.get("requiredDuringSchedulingIgnoredDuringExecution"))
    terms = [(f"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]", t)
             for i, t in enumerate(_l(req.get("nodeSelectorTerms")))]
    for i, p in enumerate(_l(na.get("preferredDuringSchedulingIgnoredDuringExecution"))):
        terms.append((f"spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference",
                      _d(p).get("preference")))
    for path, term in terms:
        for kind in ("matchExpressions", "matchFields"):
            for j, e in enumerate(_l(_d(term).get(kind))):
                op = _d(e).get("operator")
                if op not in _SELECTOR_OPS:
                    probs.add(f"{path}.{kind}[{j}].operator", f'"{op}" is not a valid node selector operator')
    return aff


def _label_key_reqs(keys: Any, labels: dict[str, str], op: str, path: str,
                    probs: _Problems) -> list[Requirement]:
    """matchLabelKeys (In) / mismatchLabelKeys (NotIn): the pod's own value of each key it carries."""
    if keys is None:
        return []
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        probs.add(path, "must be a list of strings")
        return []
    return [Requirement(k, op, frozenset((labels[k],))) for k in keys if k in labels]


def _affinity_term(raw: Any, path: str, namespace: str, labels: dict[str, str], probs: _Problems,
                   weight: int = 0) -> AffinityTerm:
    t = _d(raw)
    selector = parse_label_selector(t.get("labelSelector"), f"{path}.labelSelector", probs)
    # the API server merges these into labelSelector at creation (KEP-3633); merging again is idempotent
    # and covers servers that do not
    selector = selector.with_requirements(
        _label_key_reqs(t.get("matchLabelKeys"), labels, SELECTOR_IN, f"{path}.matchLabelKeys", probs)
        + _label_key_reqs(t.get("mismatchLabelKeys"), labels, SELECTOR_NOT_IN, f"{path}.mismatchLabelKeys", probs))
    names = t.get("namespaces")
    if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
        probs.add(f"{path}.namespaces", "must be a list of strings")
        names = []
    raw_ns_sel = t.get("namespaceSelector")
    ns_selector = parse_label_selector(raw_ns_sel, f"{path}.namespaceSelector", probs)
    # getNamespacesFromPodAffinityTerm: neither namespaces nor namespaceSelector means the pod's own namespace
    namespaces = frozenset(names or ()) if names or raw_ns_sel is not None else frozenset((namespace,))
    key = t.get("topologyKey")
    if not isinstance(key, str) or not key:
        probs.add(f"{path}.topologyKey", "Required value: can not be empty")
        key = ""
    return AffinityTerm(PodSelection(selector, namespaces, ns_selector), key, weight)


def _pod_affinity(aff: Any, namespace: str, labels: dict[str, str], probs: _Problems) -> PodAffinity | None:
    aff = _d(aff)
    out: dict[str, list[AffinityTerm]] = {"required": [], "required_anti": [], "preferred": [], "preferred_anti": []}
    found = False
    for kind, field_ in (("podAffinity", ""), ("podAntiAffinity", "_anti")):
        block = aff.get(kind)
        if block is None:
            continue
        found = True
        block = _d(block)
        base = f"spec.affinity.{kind}"
        p = f"{base}.requiredDuringSchedulingIgnoredDuringExecution"
        for i, t in enumerate(_l(block.get("requiredDuringSchedulingIgnoredDuringExecution"))):
            out["required" + field_].append(_affinity_term(t, f"{p}[{i}]", namespace, labels, probs))
        p = f"{base}.preferredDuringSchedulingIgnoredDuringExecution"
        for i, wt in enumerate(_l(block.get("preferredDuringSchedulingIgnoredDuringExecution"))):
            wt = _d(wt)
            w = wt.get("weight")
            if not isinstance(w, int) or isinstance(w, bool) or not 1 <= w <= 100:
                probs.add(f"{p}[{i}].weight", f"Invalid value: {w!r}: must be in the range 1-100")
                continue
            out["preferred" + field_].append(
                _affinity_term(wt.get("podAffinityTerm"), f"{p}[{i}].podAffinityTerm", namespace, labels, probs, w))
    if not found:
        return None
    return PodAffinity(tuple(out["required"]), tuple(out["required_anti"]), tuple(out["preferred"]),
                       tuple(out["preferred_anti"]))


def _spread_constraints(raw: Any, labels: dict[str, str], probs: _Problems) -> tuple[SpreadConstraint, ...]:
    out = []
    for i, c in enumerate(_l(raw)):
        c = _d(c)
        p = f"spec.topologySpreadConstraints[{i}]"
        skew = c.get("maxSkew")
        if not isinstance(skew, int) or isinstance(skew, bool) or not 0 < skew <= INT32_MAX:
            probs.add(f"{p}.maxSkew", f"Invalid value: {skew!r}: must be greater than zero (and fit int32)")
            continue
        key = c.get("topologyKey")
        if not isinstance(key, str) or not key:
            probs.add(f"{p}.topologyKey", "Required value: can not be empty")
            continue
        when = c.get("whenUnsatisfiable")
        if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            probs.add(f"{p}.whenUnsatisfiable", f'Unsupported value: "{when}": supported values: '
                                                f'"DoNotSchedule", "ScheduleAnyway"')
            continue
        min_domains = c.get("minDomains")
        if min_domains is None:
            min_domains = 1
        elif not isinstance(min_domains, int) or isinstance(min_domains, bool) or not 0 < min_domains <= INT32_MAX:
            probs.add(f"{p}.minDomains", f"Invalid value: {min_domains!r}: must be greater than zero (and fit int32)")
            continue
        policies = []
        for name in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            v = c.get(name)
            if v is not None and v not in (POLICY_HONOR, POLICY_IGNORE):
                probs.add(f"{p}.{name}", f'Unsupported value: "{v}": supported values: "Honor", "Ignore"')
            policies.append(v)
        mlk = c.get("matchLabelKeys")
        keys = tuple(mlk) if isinstance(mlk, list) and all(isinstance(k, str) for k in mlk) else ()
        if mlk is not None and not keys and mlk != []:
            probs.add(f"{p}.matchLabelKeys", "must be a list of strings")
        selector = parse_label_selector(c.get("labelSelector"), f"{p}.labelSelector", probs)
        # matchLabelKeys: the pod's own values, ANDed into the selector (the scheduler's merge, as upstream's;
        # idempotent where the API server merged them already)
        selector = selector.with_requirements(
            [Requirement(k, SELECTOR_IN, frozenset((labels[k],))) for k in keys if k in labels])
        out.append(SpreadConstraint(
            max_skew=skew, topology_key=key, when_unsatisfiable=when, selector=selector, min_domains=min_domains,
            node_affinity_policy=policies[0] if policies[0] in (POLICY_HONOR, POLICY_IGNORE) else POLICY_HONOR,
            node_taints_policy=policies[1] if policies[1] in (POLICY_HONOR, POLICY_IGNORE) else POLICY_IGNORE,
            match_label_keys=keys))
    return tuple(out)


_terms_cache: dict[tuple[Any, ...], tuple[Any, str]] = {}


def _memo(kind: str, raw: Any, namespace: str, labels: dict[str, str], probs: _Problems,
          parse: Callable[[_Problems], Any]) -> Any:
    """``parse(probs)`` of a pod's affinity or spread terms (``raw``, their JSON), memoized: a workload's pods
    repeat the same terms, and building their selectors is most of the cost of parsing such a pod. The key
    is the JSON, the namespace (the default for affinity terms) and, when matchLabelKeys or
    mismatchLabelKeys make the result depend on them, the pod's labels."""
    try:
        text = orjson.dumps(raw)
    except TypeError:     # what JSON cannot hold (an integer beyond 64 bits) is keyed by its repr
        text = repr(raw).encode()
    key: tuple[Any, ...] = (kind, namespace, text)
    if b"abelKeys" in text:
        key += (tuple(sorted(labels.items())),)
    hit = _terms_cache.get(key)
    if hit is None:
        mine = _Problems()
        hit = (parse(mine), mine.first)
        if len(_terms_cache) < 4096:
            _terms_cache[key] = hit
    if hit[1] and not probs.first:
        probs.first = hit[1]
    return hit[0]
