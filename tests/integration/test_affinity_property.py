"""Property: with inter-pod affinity, anti-affinity and topology spreading, placements hold every required
constraint, and no pod that would fit is left pending.

Hypothesis draws a small zoned cluster and a few "apps": every pod of an app
shares its shape (labels, requests, node selector, required and preferred
pod affinity and anti-affinity to its own or another app, on hostname or
zone, and topology spread constraints over its own app), as a Deployment's
pods do. The pods arrive in a random order. Once the scheduler has settled,
the test's own straightforward Python (walking the pods, never the plugins
or the cache) checks:

* no node is over-committed, and node-level rules (selector, taints) hold;
* every bound pod's required anti-affinity terms hold (no other pod they
  select shares its domain), and so its required affinity terms (for each
  term, a pod matching all of them, possibly itself, in its domain);
* for each app with a DoNotSchedule constraint, the matching pods' counts
  over the eligible domains stay within maxSkew of the global minimum (0
  while fewer than minDomains domains exist): each placement kept this
  invariant, and pods are never removed here;
* every pending pod fits on no node given all of the above, and says so
  with PodScheduled=False.

"Settled" is every pod bound, or every pending pod fitting nowhere and
carrying its condition; see test_scheduler_property.py for why the wait
cannot stop early.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.simcluster import SimCluster
from tests.integration.test_scheduler_property import NS, SCHED
from tests.integration.test_scheduler_property import View as BaseView
from tests.integration.test_scheduler_property import scenario as base_scenario

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
APPS = ("a0", "a1", "a2")
KEYS = (HOST, ZONE)


# ---------------------------------------------------------------------------- drawing


@st.composite
def nodes(draw: Any) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(2, 6))):
        labels = {HOST: f"node-{i}"}
        zone = draw(st.sampled_from(("a", "b", "c", None)))
        if zone is not None:
            labels[ZONE] = zone
        cap = {"cpu": draw(st.sampled_from(("1", "2", "4"))), "memory": "8Gi", "pods": "110"}
        out.append({"metadata": {"name": f"node-{i}", "labels": labels}, "spec": {},
                    "status": {"capacity": cap, "allocatable": cap, "conditions": [{"type": "Ready", "status": "True"}]}})
    return out


def term(app: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


@st.composite
def app_shape(draw: Any, app: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": SCHED, "containers": [{"name": "c", "image": "pause", "resources": {
        "requests": {"cpu": draw(st.sampled_from(("100m", "300m", "700m")))}}}]}
    aff: dict[str, Any] = {}
    if draw(st.booleans()):
        aff.setdefault("podAntiAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = [
            term(draw(st.sampled_from(APPS)), draw(st.sampled_from(KEYS)))]
    if draw(st.integers(0, 2)) == 0:
        aff.setdefault("podAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = [
            term(draw(st.sampled_from(APPS)), draw(st.sampled_from(KEYS)))]
    if draw(st.booleans()):
        kind = draw(st.sampled_from(("podAffinity", "podAntiAffinity")))
        aff.setdefault(kind, {})["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": draw(st.integers(1, 100)), "podAffinityTerm": term(draw(st.sampled_from(APPS)), ZONE)}]
    if aff:
        spec["affinity"] = aff
    constraints = []
    for key in draw(st.lists(st.sampled_from(KEYS), max_size=2, unique=True)):
        c = {"maxSkew": draw(st.integers(1, 2)), "topologyKey": key,
             "whenUnsatisfiable": draw(st.sampled_from(("DoNotSchedule", "ScheduleAnyway"))),
             "labelSelector": {"matchLabels": {"app": app}}}
        if c["whenUnsatisfiable"] == "DoNotSchedule" and draw(st.integers(0, 3)) == 0:
            c["minDomains"] = draw(st.integers(2, 4))
        constraints.append(c)
    if constraints:
        spec["topologySpreadConstraints"] = constraints
    if draw(st.integers(0, 3)) == 0:
        spec["nodeSelector"] = {ZONE: draw(st.sampled_from(("a", "b")))}
    return spec


@st.composite
def pods(draw: Any) -> list[dict[str, Any]]:
    out = []
    for app in APPS[: draw(st.integers(1, len(APPS)))]:
        spec = draw(app_shape(app))
        for i in range(draw(st.integers(1, 6))):
            out.append({"metadata": {"name": f"{app}-{i}", "namespace": NS, "labels": {"app": app}},
                        "spec": spec})
    return draw(st.permutations(out))


# ---------------------------------------------------------------------------- the test's own rules


def selects(t: dict[str, Any], pod: dict[str, Any]) -> bool:
    want = t["labelSelector"]["matchLabels"]
    labels = pod["metadata"].get("labels") or {}
    return all(labels.get(k) == v for k, v in want.items())


def required(pod: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return (((pod["spec"].get("affinity") or {}).get(kind) or {})
            .get("requiredDuringSchedulingIgnoredDuringExecution") or [])


class View(BaseView):
    """The base view (nodes, pods, room; pending and settled), with the pod rules added to its judgement of fit."""

    def __init__(self, cluster: SimCluster) -> None:
        super().__init__(cluster)
        self.on = {name: p["spec"]["nodeName"] for name, p in self.pods.items() if p["spec"].get("nodeName")}

    def label(self, node: str, key: str) -> str | None:
        return (self.nodes[node]["metadata"].get("labels") or {}).get(key)

    def same_domain(self, a: str, b: str, key: str) -> bool:
        va = self.label(a, key)
        return va is not None and va == self.label(b, key)

    def pod_rule_problems(self, name: str, node: str, placed: dict[str, str]) -> list[str]:
        """Why pod ``name`` may not be on ``node`` given the other pods in ``placed`` (name -> node)."""
        pod = self.pods[name]
        others = {q: n for q, n in placed.items() if q != name}
        problems = []
        for t in required(pod, "podAntiAffinity"):
            if any(self.same_domain(node, n, t["topologyKey"]) and selects(t, self.pods[q]) for q, n in others.items()):
                problems.append(f"its anti-affinity to {t['labelSelector']} on {t['topologyKey']}")
        for q, n in others.items():
            for t in required(self.pods[q], "podAntiAffinity"):
                if self.same_domain(node, n, t["topologyKey"]) and selects(t, pod):
                    problems.append(f"{q}'s anti-affinity")
        terms = required(pod, "podAffinity")
        if terms:
            if any(self.label(node, t["topologyKey"]) is None for t in terms):
                problems.append("a missing affinity topology key")
            else:
                # a pod counts only if it matches every term; the first-pod rule: none is on a node with any of
                # the terms' keys, and the pod matches its own terms
                matching = [n for q, n in others.items() if all(selects(t, self.pods[q]) for t in terms)]
                near = all(any(self.same_domain(node, n, t["topologyKey"]) for n in matching) for t in terms)
                nowhere = not any(self.label(n, t["topologyKey"]) is not None for n in matching for t in terms)
                if not near and not (nowhere and all(selects(t, pod) for t in terms)):
                    problems.append("its affinity")
        problems += self.spread_problems(name, node, others)
        return problems

    def eligible(self, pod: dict[str, Any], hard: list[dict[str, Any]]) -> list[str]:
        """Nodes a pod's hard constraints count: they have every key and match the pod's node selector."""
        sel = pod["spec"].get("nodeSelector") or {}
        return [n for n in self.nodes
                if all(self.label(n, c["topologyKey"]) is not None for c in hard)
                and all(self.label(n, k) == v for k, v in sel.items())]

    def spread_problems(self, name: str, node: str, others: dict[str, str]) -> list[str]:
        pod = self.pods[name]
        hard = [c for c in pod["spec"].get("topologySpreadConstraints") or [] if c["whenUnsatisfiable"] == "DoNotSchedule"]
        problems = []
        elig = self.eligible(pod, hard)
        for c in hard:
            key = c["topologyKey"]
            if self.label(node, key) is None:
                problems.append(f"missing {key}")
                continue
            counts = collections.Counter({self.label(n, key): 0 for n in elig})
            for q, n in others.items():
                if n in elig and selects(c, self.pods[q]):
                    counts[self.label(n, key)] += 1
            low = min(counts.values()) if len(counts) >= c.get("minDomains", 1) else 0
            if counts.get(self.label(node, key), 0) + (1 if selects(c, pod) else 0) - low > c["maxSkew"]:
                problems.append(f"skew on {key}")
        return problems

    def fitting_nodes(self, name: str) -> list[str]:
        return [n for n in super().fitting_nodes(name) if not self.pod_rule_problems(name, n, self.on)]

    def bound_problems(self) -> list[str]:
        out = []
        for name, node in self.on.items():
            pod = self.pods[name]
            for t in required(pod, "podAntiAffinity"):
                for q, n in self.on.items():
                    if q != name and self.same_domain(node, n, t["topologyKey"]) and selects(t, self.pods[q]):
                        out.append(f"{name} on {node} shares {t['topologyKey']} with {q}, which it is anti-affine to")
            terms = required(pod, "podAffinity")
            for t in terms:
                if not any(self.same_domain(node, n, t["topologyKey"]) and all(selects(u, self.pods[q]) for u in terms)
                           for q, n in self.on.items()):
                    out.append(f"{name} on {node} has no pod it is affine to in its {t['topologyKey']}")
        apps = collections.defaultdict(list)
        for name in self.pods:
            apps[self.pods[name]["metadata"]["labels"]["app"]].append(name)
        for app, names in apps.items():
            pod = self.pods[names[0]]
            hard = [c for c in pod["spec"].get("topologySpreadConstraints") or []
                    if c["whenUnsatisfiable"] == "DoNotSchedule"]
            elig = self.eligible(pod, hard)
            for c in hard:
                key = c["topologyKey"]
                counts = collections.Counter({self.label(n, key): 0 for n in elig})
                for q in names:
                    if q in self.on:
                        if self.on[q] not in elig:
                            out.append(f"{q} is on {self.on[q]}, which its {key} spreading cannot count")
                        else:
                            counts[self.label(self.on[q], key)] += 1
                if counts:
                    low = min(counts.values()) if len(counts) >= c.get("minDomains", 1) else 0
                    if max(counts.values()) - low > c["maxSkew"]:
                        out.append(f"{app} is spread {dict(counts)} over {key}, beyond maxSkew {c['maxSkew']}")
        return out


# ---------------------------------------------------------------------------- the property


async def scenario(node_objs: list[dict[str, Any]], pod_objs: list[dict[str, Any]]) -> None:
    # resources, node rules and "nothing that fits waits", with this file's View judging fit; then the pod rules
    view = await base_scenario(node_objs, pod_objs, View, settle_timeout=15)
    assert not view.bound_problems(), view.bound_problems()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node_objs=nodes(), pod_objs=pods())
def test_required_pod_constraints_hold_and_no_pod_that_fits_is_left_pending(node_objs, pod_objs):
    asyncio.run(scenario(node_objs, pod_objs))
