"""InterPodAffinity: required and preferred pod affinity and anti-affinity, both ways.

Upstream semantics (pkg/scheduler/framework/plugins/interpodaffinity):

* **Filter**, per node, the first failure wins:

  1. the pod's required affinity terms: the node must carry every term's
     topology key, and for each term some placed pod that matches *every*
     term must sit in the node's domain of that term's key
     (UnschedulableAndUnresolvable, "node(s) didn't match pod affinity
     rules"). The first pod of a group that has affinity to itself passes
     on any node carrying the keys when no pod matching all its terms is
     on any node with one of the keys, and the pod matches its own terms;
  2. the pod's required anti-affinity terms: no pod a term matches in the
     node's domain of that term's key (Unschedulable, "node(s) didn't
     match pod anti-affinity rules"); a node without the key is fine;
  3. placed pods' required anti-affinity terms (symmetry): no placed pod
     whose term matches this pod in the node's domain of the term's key
     (Unschedulable, "node(s) didn't satisfy existing pods anti-affinity
     rules").

  PreFilter returns Skip when the pod has no required terms and no placed
  pod's term matching it sits on a node carrying that term's key.

* **Score** sums, per topology domain, the weights of the pairs that agree
  on it: the pod's preferred affinity terms (+weight per matching placed
  pod), its preferred anti-affinity terms (-weight), placed pods' required
  affinity terms matching the pod (+``hardPodAffinityWeight``, unless 0),
  and placed pods' preferred affinity and anti-affinity terms matching the
  pod (+/-weight). A node scores the sum over the domains it belongs to;
  NormalizeScore maps min..max to 0..100 as upstream does, in float64.
  PreScore returns Skip when nothing is accumulated, and when
  ``ignorePreferredTermsOfExistingPods`` is set and the pod has no
  preferred terms.

Namespaces: a term selects pods in its namespaces or in the namespaces its
namespaceSelector selects (``{}``: all of them); neither means the term's
own pod's namespace. matchLabelKeys/mismatchLabelKeys are merged into the
selector when the pod is parsed (``scheduler.model``).

**What is counted where, and why this never walks pods.** kube-scheduler
walks every pod on every node in PreFilter and PreScore. Here the cache
keeps the counts (``handle.counts``, ``scheduler/framework/podcounts.py``): per-node
columns of placed pods matching a selection (all of the pod's required
affinity terms together, each anti-affinity term, each preferred term),
and the placed pods' own terms grouped by (selection, topology key) with
per-node holder counts or summed weights. A cycle evaluates the incoming
pod against each *distinct* held term, never against each holder, and
turns each column into per-domain counts with one ``bincount`` over the
key's interned label column (``framework.topology.domain_counts``). Nodes
without the key land in bin 0, which is ignored, as upstream only counts
pods on nodes carrying the key. PreFilter and PreScore keep, per topology
key, one small array indexed by label value id; Filter and Score are a
gather per key over ``rows``. Cost per cycle grows with distinct terms and
keys, never with pods, and there is no Python loop over nodes.

**AddPod/RemovePod** (PreFilterExtensions, for preemption's dry runs and
nominated pods) move PreFilter's per-domain counts as upstream's
updateWithPod does, without touching the cache: the pod added to (or
removed from) a node counts in that node's domain of each key it has, for
the pod's affinity terms if it matches all of them, for each of the pod's
anti-affinity terms it matches, and for each of its own anti-affinity terms
that matches the pod. Filter reads bool masks, ``counts > 0``, and a
first-pod flag re-evaluated from the counts; an update works out again only
the masks of the keys it moved. PreFilter keeps the masks but not the int64
counts behind them, which would slow every cycle down for the few that
preempt: the first update of a cycle's state works them out from the cache
(unchanged within the cycle) and keeps them for all its clones. An update
writes a new state, copying only the arrays it changes, so the clones of
one cycle's state can be updated independently.

The cache holds the pods every scheduler placed, so pods bound by other
schedulers count too, as upstream. A malformed term makes the pod
``invalid`` when it is parsed, and the scheduler rejects invalid pods before
any plugin runs, so no parsing problem reaches this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Collection, Iterable

import numpy as np

from scheduler.framework import (
    MAX_NODE_SCORE, ActionType, ClusterEvent, ClusterEventWithHint, Code, ConfigError, CycleState, FilterResult,
    PreFilterResult, QueueingHint, Rejection, Resource, Status, register,
)
from scheduler.framework.topology import PREFERRED, REQUIRED_AFFINITY, REQUIRED_ANTI, domain_counts, pod_matches
from scheduler.model import AffinityTerm, Node, Pod, PodSelection

if TYPE_CHECKING:
    from scheduler.framework.nodetable import NodeTable

NAME = "InterPodAffinity"
ERR_REASON_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
ERR_REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

PRE_FILTER_KEY = "PreFilter" + NAME
PRE_SCORE_KEY = "PreScore" + NAME

MIN_HARD_POD_AFFINITY_WEIGHT, MAX_HARD_POD_AFFINITY_WEIGHT = 0, 100

_OK = Status()
_SKIP = Status(Code.SKIP)


@dataclass(frozen=True, slots=True)
class InterPodAffinityArgs:
    hard_pod_affinity_weight: int = 1                   # v1 default (DefaultHardPodAffinitySymmetricWeight)
    ignore_preferred_terms_of_existing_pods: bool = False

    def validate(self, path: str) -> None:
        """ValidateInterPodAffinityArgs."""
        w = self.hard_pod_affinity_weight
        if not MIN_HARD_POD_AFFINITY_WEIGHT <= w <= MAX_HARD_POD_AFFINITY_WEIGHT:
            raise ConfigError(f"{path}.hardPodAffinityWeight: Invalid value: {w}: not in valid range "
                              f"[{MIN_HARD_POD_AFFINITY_WEIGHT}, {MAX_HARD_POD_AFFINITY_WEIGHT}]")


# ---------------------------------------------------------------------------- per-domain arrays

# Per topology key, an array indexed by the key's label value id (0 = the node lacks the key).
Domains = tuple[tuple[str, np.ndarray], ...]


@dataclass(frozen=True, slots=True)
class _Counts:
    """Matching pods per domain, per topology key: int64[V] (upstream's topologyToMatchedTermCount)."""

    affinity: Domains          # pods matching all required affinity terms (one entry per key)
    anti: Domains              # pods one of the pod's required anti-affinity terms matches (summed per key)
    existing: Domains          # placed pods' required anti-affinity terms matching the pod (summed per key)


@dataclass(frozen=True, slots=True)
class _FilterState:
    """PreFilter's answer for Filter, per topology key: bool[V], which domains hold the pods that matter.

    The masks are ``> 0`` of the :class:`_Counts` that AddPod/RemovePod move, and ``first_pod`` follows from
    them. PreFilter does not keep the counts: int64[V] arrays held through the cycle cost every cycle more
    than PreFilter itself (about 55 us per cycle at 5,000 nodes, bench.micro_cycle's anti-affinity shape),
    for the few cycles that preempt. The first update works them out again from the cache, which cannot
    have changed since PreFilter within the cycle, and keeps them in ``counts``, a one-slot cell that every
    clone of this state shares; a state an update writes holds its own. Nothing else is ever mutated: an
    update writes a new state, whose changed arrays are copies.
    """

    affinity: Domains          # domains with a pod matching all required affinity terms (every key)
    first_pod: bool            # the first-pod rule holds: no such pod in any domain, and self_match
    anti: Domains              # domains with a pod one of the pod's anti-affinity terms matches (keys with one)
    existing: Domains          # domains with a placed pod whose anti-affinity term matches the pod (the same)
    self_match: bool           # the pod matches all its own required affinity terms
    counts: list[_Counts]      # [] until an update needs them, then [the counts behind the masks]


@dataclass(frozen=True, slots=True)
class _ScoreState:
    """PreScore's answer: per topology key, int64[V] summed weights per domain (upstream's topologyScore)."""

    topology_score: Domains


def _derived(c: _Counts, self_match: bool, old: _FilterState | None = None,
             changed: tuple[set[str], set[str], set[str]] | None = None) -> _FilterState:
    """The state for counts ``c``. For PreFilter (no ``old``) the masks are worked out and the counts not kept;
    for an update of ``old`` only the masks of the keys in ``changed`` (affinity, anti-affinity and existing
    keys whose counts moved) are worked out again, and the counts are kept."""
    if old is None or changed is None:
        affinity, first_pod = _affinity_hits(c.affinity, self_match)
        return _FilterState(affinity, first_pod, _hits(c.anti, False), _hits(c.existing, False), self_match, [])
    ch_affinity, ch_anti, ch_existing = changed
    if ch_affinity:
        affinity, first_pod = _affinity_hits(c.affinity, self_match, old.affinity, ch_affinity)
    else:
        affinity, first_pod = old.affinity, old.first_pod
    anti = _hits(c.anti, False, old.anti, ch_anti) if ch_anti else old.anti
    existing = _hits(c.existing, False, old.existing, ch_existing) if ch_existing else old.existing
    return _FilterState(affinity, first_pod, anti, existing, self_match, [c])


def _affinity_hits(counts: Domains, self_match: bool, old: Domains | None = None,
                   changed: Collection[str] = ()) -> tuple[Domains, bool]:
    """The affinity masks (every key) and the first-pod rule: no matching pod in any domain, and self_match."""
    hits = _hits(counts, True, old, changed)
    return hits, self_match and not any(hit.any() for _, hit in hits)


def _hits(counts: Domains, every_key: bool, old: Domains | None = None, changed: Collection[str] = ()) -> Domains:
    """bool[V] per key: the domains where ``counts`` is positive; keys with none are left out unless
    ``every_key``. With ``old``, only the keys in ``changed`` are worked out, the others' masks are old's."""
    kept = dict(old) if old is not None else None
    out = []
    for key, c in counts:
        if kept is not None and key not in changed:
            hit = kept.get(key)
            if hit is not None:        # a key left out of ``old`` had no positive count, and still has none
                out.append((key, hit))
            continue
        hit = c > 0
        if every_key or hit.any():
            out.append((key, hit))
    return tuple(out)


def _per_domain(nodes: "NodeTable", key: str, counts: np.ndarray) -> np.ndarray:
    """int64[V]: ``counts`` (per node) summed per domain of ``key``; nodes without the key count for none."""
    dom = domain_counts(nodes, key, counts)
    dom[0] = 0                  # nodes without the key count for no domain (upstream skips them)
    return dom


def _add_by_key(into: dict[str, np.ndarray], key: str, dom: np.ndarray) -> None:
    prev = into.get(key)
    into[key] = dom if prev is None else prev + dom


def _moved(counts: Domains, keys: Iterable[str], nodes: "NodeTable", row: int, delta: int) -> tuple[Domains, set[str]]:
    """``counts`` with ``delta`` added in ``row``'s domain once for each of ``keys`` (a key may repeat), and
    the keys whose counts changed. Copy-on-write: a changed array is a copy, the others are shared."""
    out = dict(counts)
    changed: set[str] = set()
    for key in keys:
        ids = nodes.label(key)
        v = 0 if ids is None else int(ids[row])
        if v == 0:
            continue                # a node without the key is in no domain of it
        prev = out.get(key)
        if key not in changed:      # the first change to this key: a fresh array (the old one may be shared)
            size = max(len(nodes.label_values(key)), v + 1, 0 if prev is None else len(prev))
            fresh = np.zeros(size, dtype=np.int64)
            if prev is not None:
                fresh[:len(prev)] = prev
            out[key] = prev = fresh
            changed.add(key)
        prev[v] += delta
    return tuple(out.items()), changed


def _gather(nodes: "NodeTable", domains: Domains, rows: np.ndarray) -> np.ndarray:
    """bool[k]: rows in any of the marked domains (one gather per key)."""
    out = np.zeros(len(rows), dtype=bool)
    for key, hit in domains:
        ids = nodes.label(key)
        if ids is not None:
            out |= hit[ids[rows]]
    return out


def _affinity_ok(nodes: "NodeTable", s: _FilterState, rows: np.ndarray) -> np.ndarray:
    """bool[k]: satisfyPodAffinity. Every key present, and a matching pod in each key's domain (or first pod)."""
    has_all = np.ones(len(rows), dtype=bool)
    found = np.ones(len(rows), dtype=bool)
    for key, hit in s.affinity:
        ids = nodes.label(key)
        if ids is None:         # no node carries the key: it is missing everywhere
            return np.zeros(len(rows), dtype=bool)
        v = ids[rows]
        has_all &= v != 0
        found &= hit[v]         # hit[0] is False, so found implies has_all
    return has_all if s.first_pod else found


# ---------------------------------------------------------------------------- the plugin

@register
class InterPodAffinity:
    NAME = NAME
    EXTENSION_POINTS = frozenset({"EnqueueExtensions", "PreFilter", "PreFilterExtensions", "Filter", "PreScore",
                                  "Score", "NormalizeScore"})
    Args = InterPodAffinityArgs

    def __init__(self, args: InterPodAffinityArgs | None, handle: Any) -> None:
        self.handle = handle
        self.args = args if args is not None else InterPodAffinityArgs()

    # ------------------------------------------------------------------ queueing

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # With queueing hints there is no preCheck, so Node Add | UpdateNodeLabel is enough (upstream).
        return [
            ClusterEventWithHint(ClusterEvent(Resource.ASSIGNED_POD,
                                              ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE),
                                 self._after_pod_change),
            ClusterEventWithHint(ClusterEvent(Resource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
                                 self._after_node_change),
        ]

    def _after_pod_change(self, pod: Pod, old: Pod | None, new: Pod | None) -> int:
        """isSchedulableAfterPodChange, plus the symmetric and first-pod cases upstream's hint leaves out."""
        if new is not None and new.uid == pod.uid:
            return QueueingHint.QUEUE
        changed = new if new is not None else old
        if changed is None or not changed.node_name:
            return QueueingHint.SKIP            # an unscheduled pod constrains nobody
        if old is not None and not old.node_name:
            old = None                          # a pod that just got its node: an add
        aff = pod.pod_affinity
        required = aff.required if aff is not None else ()
        anti = aff.required_anti if aff is not None else ()
        counts = self.handle.counts
        parts = _parts(required)

        def all_affinity(p: Pod) -> bool:
            return pod_matches(parts, p, counts.ns_labels(p.namespace))

        def any_anti(p: Pod) -> bool:
            ns = counts.ns_labels(p.namespace)
            return any(t.selection.matches(p.namespace, p.labels, ns) for t in anti)

        def first_pod() -> bool:   # losing its last match lets the first-pod rule apply
            return bool(parts) and pod_matches(parts, pod, counts.ns_labels(pod.namespace))

        if new is not None:
            if required and all_affinity(new) and (old is None or not all_affinity(old)):
                return QueueingHint.QUEUE       # a pod now matching every affinity term
            if old is not None:
                if any_anti(old) and not any_anti(new):
                    return QueueingHint.QUEUE   # no longer matched by an anti-affinity term
                if required and all_affinity(old) and not all_affinity(new) and first_pod():
                    return QueueingHint.QUEUE
            return QueueingHint.SKIP
        gone = changed
        if any_anti(gone):
            return QueueingHint.QUEUE           # a pod the pod's anti-affinity kept away from is gone
        if gone.pod_affinity is not None and gone.pod_affinity.required_anti:
            ns = counts.ns_labels(pod.namespace)
            if any(t.selection.matches(pod.namespace, pod.labels, ns) for t in gone.pod_affinity.required_anti):
                return QueueingHint.QUEUE       # a pod whose anti-affinity kept this pod away is gone
        if required and all_affinity(gone) and first_pod():
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def _after_node_change(self, pod: Pod, old: Node | None, new: Node | None) -> int:
        """isSchedulableAfterNodeChange, erring towards Queue where upstream's hint would miss a chance."""
        if new is None:
            return QueueingHint.QUEUE
        aff = pod.pod_affinity
        affinity_keys = {t.topology_key for t in aff.required} if aff is not None else set()
        if old is None:
            # a node without every affinity key can never pass; any other new node may
            return QueueingHint.QUEUE if all(k in new.labels for k in affinity_keys) else QueueingHint.SKIP
        if any(old.labels.get(k) != new.labels.get(k) for k in affinity_keys):
            return QueueingHint.QUEUE
        # anti-affinity (the pod's own and placed pods' matching it) can only ease when a key goes or changes
        for k in self._anti_keys(pod):
            if k in old.labels and old.labels[k] != new.labels.get(k):
                return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def _anti_keys(self, pod: Pod) -> set[str]:
        aff = pod.pod_affinity
        keys = {t.topology_key for t in aff.required_anti} if aff is not None else set()
        counts = self.handle.counts
        ns = counts.ns_labels(pod.namespace)
        for h in counts.held_terms(REQUIRED_ANTI):
            if h.topology_key not in keys and h.selection.matches(pod.namespace, pod.labels, ns):
                keys.add(h.topology_key)
        return keys

    # ------------------------------------------------------------------ filtering

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeTable) -> tuple[PreFilterResult | None, Status]:
        s = self._filter_state(pod, nodes)
        if s is None:
            return None, _SKIP
        state.write(PRE_FILTER_KEY, s)
        return None, _OK

    def _filter_state(self, pod: Pod, nodes: NodeTable) -> _FilterState | None:
        """What Filter needs, per topology key; None (Skip) when no term can reject a node."""
        c, self_match = self._count(pod, nodes)
        s = _derived(c, self_match)
        if not c.affinity and not c.anti and not s.existing:
            return None         # no required terms, and no holder of a matching term on a node with its key
        return s

    def _count(self, pod: Pod, nodes: NodeTable) -> tuple[_Counts, bool]:
        """The pods that matter per domain, per topology key (from the cache's count columns), and whether the
        pod matches all its own required affinity terms."""
        counts = self.handle.counts
        aff = pod.pod_affinity
        required = aff.required if aff is not None else ()
        required_anti = aff.required_anti if aff is not None else ()
        ns_labels = counts.ns_labels(pod.namespace)

        existing: dict[str, np.ndarray] = {}
        for h in counts.held_terms(REQUIRED_ANTI):   # distinct terms, not holders
            if h.selection.matches(pod.namespace, pod.labels, ns_labels):
                _add_by_key(existing, h.topology_key, _per_domain(nodes, h.topology_key, h.counts))
        affinity: dict[str, np.ndarray] = {}
        self_match = False
        if required:
            # one existing pod must match every term: one column for the conjunction, a domain count per key
            parts = _parts(required)
            col = counts.column(parts)
            for key in _keys(required):
                affinity[key] = _per_domain(nodes, key, col)
            self_match = pod_matches(parts, pod, ns_labels)
        anti: dict[str, np.ndarray] = {}
        for t in required_anti:
            _add_by_key(anti, t.topology_key, _per_domain(nodes, t.topology_key, counts.column((t.selection,))))
        return _Counts(tuple(affinity.items()), tuple(anti.items()), tuple(existing.items())), self_match

    def _counts_of(self, s: _FilterState, pod: Pod, nodes: NodeTable) -> _Counts:
        """The counts behind ``s``: kept by an update, or worked out now (the cache is as at PreFilter, the
        cycle not having ended) and kept for every clone of ``s``."""
        if not s.counts:
            s.counts.append(self._count(pod, nodes)[0])
        return s.counts[0]

    def filter(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> FilterResult:
        s = state.get(PRE_FILTER_KEY)
        if s is None:   # PreFilter did not run (a Skip never reaches Filter): work it out here
            s = self._filter_state(pod, nodes)
            if s is None:
                return FilterResult.all_pass(len(rows))
        k = len(rows)
        passed = np.ones(k, dtype=bool)
        rejections: list[Rejection] = []
        if s.affinity:
            ok = _affinity_ok(nodes, s, rows)
            if not ok.all():
                rejections.append(Rejection(ERR_REASON_AFFINITY, ~ok, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
                passed = ok
        if s.anti:
            bad = passed & _gather(nodes, s.anti, rows)     # a node already rejected keeps its first reason
            if bad.any():
                rejections.append(Rejection(ERR_REASON_ANTI_AFFINITY, bad, Code.UNSCHEDULABLE))
                passed = passed & ~bad
        if s.existing:
            bad = passed & _gather(nodes, s.existing, rows)
            if bad.any():
                rejections.append(Rejection(ERR_REASON_EXISTING_ANTI_AFFINITY, bad, Code.UNSCHEDULABLE))
                passed = passed & ~bad
        return FilterResult(passed, rejections)

    # ------------------------------------------------------------------ PreFilterExtensions

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, row: int) -> Status:
        """AddPod: PreFilter's counts as if ``pod_to_add`` were on ``row`` too."""
        return self._update(state, pod, pod_to_add, row, 1)

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, row: int) -> Status:
        """RemovePod: PreFilter's counts as if ``pod_to_remove`` were gone from ``row``."""
        return self._update(state, pod, pod_to_remove, row, -1)

    def _update(self, state: CycleState, pod: Pod, other: Pod, row: int, delta: int) -> Status:
        """upstream's updateWithPod: ``other`` counts in ``row``'s domain of each key (none where the node lacks
        it) for the pod's affinity terms if it matches all of them, for each of the pod's anti-affinity terms
        it matches, and for each of its own anti-affinity terms that matches the pod."""
        s = state.get(PRE_FILTER_KEY)
        if s is None:
            return Status(Code.ERROR, f'error reading "{PRE_FILTER_KEY}" from cycleState: not found', plugin=NAME)
        nodes = self.handle.nodes
        counts = self.handle.counts
        aff = pod.pod_affinity
        required = aff.required if aff is not None else ()
        other_ns = counts.ns_labels(other.namespace)
        affinity_keys = _keys(required) if required and pod_matches(_parts(required), other, other_ns) else ()
        anti_keys = [t.topology_key for t in (aff.required_anti if aff is not None else ())
                     if t.selection.matches(other.namespace, other.labels, other_ns)]
        theirs = other.pod_affinity.required_anti if other.pod_affinity is not None else ()
        ns_labels = counts.ns_labels(pod.namespace)
        existing_keys = [t.topology_key for t in theirs if t.selection.matches(pod.namespace, pod.labels, ns_labels)]
        if not affinity_keys and not anti_keys and not existing_keys:
            return _OK
        c = self._counts_of(s, pod, nodes)
        affinity, changed_affinity = _moved(c.affinity, affinity_keys, nodes, row, delta)
        anti, changed_anti = _moved(c.anti, anti_keys, nodes, row, delta)
        existing, changed_existing = _moved(c.existing, existing_keys, nodes, row, delta)
        if changed_affinity or changed_anti or changed_existing:
            state.write(PRE_FILTER_KEY, _derived(_Counts(affinity, anti, existing), s.self_match, s,
                                                 (changed_affinity, changed_anti, changed_existing)))
        return _OK

    # ------------------------------------------------------------------ scoring

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> Status:
        if len(rows) == 0:
            return _SKIP
        s = self._score_state(pod, nodes)
        if s is None:
            return _SKIP
        state.write(PRE_SCORE_KEY, s)
        return _OK

    def _score_state(self, pod: Pod, nodes: NodeTable) -> _ScoreState | None:
        """upstream's topologyScore, per key as int64[V]; None (Skip) when nothing is accumulated."""
        aff = pod.pod_affinity
        preferred = aff.preferred if aff is not None else ()
        preferred_anti = aff.preferred_anti if aff is not None else ()
        if self.args.ignore_preferred_terms_of_existing_pods and not preferred and not preferred_anti:
            return None
        counts = self.handle.counts
        ns_labels = counts.ns_labels(pod.namespace)
        acc: dict[str, np.ndarray] = {}

        def add(key: str, per_node: np.ndarray, weight: int) -> None:
            dom = domain_counts(nodes, key, per_node)
            dom[0] = 0          # pods on nodes without the key score no domain
            if not dom.any():
                return
            dom *= weight
            prev = acc.get(key)
            acc[key] = dom if prev is None else prev + dom

        # the pod's preferred terms against placed pods
        for t in preferred:
            add(t.topology_key, counts.column((t.selection,)), t.weight)
        for t in preferred_anti:
            add(t.topology_key, counts.column((t.selection,)), -t.weight)
        # placed pods' terms against the pod (distinct terms, with holders or summed weights per node)
        hard = self.args.hard_pod_affinity_weight
        if hard > 0:
            for h in counts.held_terms(REQUIRED_AFFINITY):
                if h.selection.matches(pod.namespace, pod.labels, ns_labels):
                    add(h.topology_key, h.counts, hard)
        for h in counts.held_terms(PREFERRED):
            if h.selection.matches(pod.namespace, pod.labels, ns_labels):
                add(h.topology_key, h.counts, 1)      # already signed: affinity +w, anti-affinity -w
        if not acc:
            return None
        return _ScoreState(tuple(acc.items()))

    def score(self, state: CycleState, pod: Pod, nodes: NodeTable, rows: np.ndarray) -> np.ndarray:
        s = state.get(PRE_SCORE_KEY)
        if s is None:   # PreScore did not run: work it out here, and keep it for NormalizeScore
            s = self._score_state(pod, nodes)
            if s is not None:
                state.write(PRE_SCORE_KEY, s)
        out = np.zeros(len(rows), dtype=np.int64)
        if s is not None:
            for key, per_domain in s.topology_score:
                ids = nodes.label(key)
                if ids is not None:
                    out += per_domain[ids[rows]]
        return out

    def normalize(self, state: CycleState, pod: Pod, scores: np.ndarray) -> None:
        s = state.get(PRE_SCORE_KEY)
        if s is None or not s.topology_score or len(scores) == 0:
            return
        lo, hi = int(scores.min()), int(scores.max())
        if hi == lo:
            scores[:] = 0
            return
        # float64(MaxNodeScore) * (float64(s - min) / float64(max - min)), truncated, as upstream computes it
        f = (scores - lo).astype(np.float64) / float(hi - lo)
        f *= float(MAX_NODE_SCORE)
        scores[:] = f.astype(np.int64)


def _parts(terms: Iterable[AffinityTerm]) -> tuple[PodSelection, ...]:
    """The terms' selections, once each, in order: the conjunction one existing pod must match."""
    return tuple(dict.fromkeys(t.selection for t in terms))


def _keys(terms: Iterable[AffinityTerm]) -> tuple[str, ...]:
    """The terms' topology keys, once each, in order: a pod matching all affinity terms counts once per key."""
    return tuple(dict.fromkeys(t.topology_key for t in terms))
