"""PodDisruptionBudgets (policy/v1), as preemption reads them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scheduler.model.fields import _d, _int
from scheduler.model.selectors import LabelSelector, parse_label_selector

@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    """A policy/v1 PodDisruptionBudget as preemption reads it: whom it covers and how many may go now."""

    namespace: str
    name: str
    selector: LabelSelector                  # spec.selector (nil matches nothing; {} every pod of the namespace)
    disruptions_allowed: int                 # status.disruptionsAllowed
    disrupted_pods: frozenset[str]           # status.disruptedPods: pod names already being evicted

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse_pdb(obj: dict[str, Any]) -> PodDisruptionBudget:
    meta = _d(obj.get("metadata"))
    spec = _d(obj.get("spec"))
    status = _d(obj.get("status"))
    disrupted = status.get("disruptedPods")
    return PodDisruptionBudget(
        namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
        selector=parse_label_selector(spec.get("selector"), "spec.selector"),
        disruptions_allowed=_int(status.get("disruptionsAllowed")),
        disrupted_pods=frozenset(str(k) for k in disrupted) if isinstance(disrupted, dict) else frozenset())
