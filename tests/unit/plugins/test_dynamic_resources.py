"""DynamicResources: pods with resource claims are refused until tandem allocates them (plugins/dynamic_resources.py)."""

from __future__ import annotations

from typing import Any

import pytest

from plugins.dynamic_resources import NOT_ALLOCATED, DynamicResources
from scheduler.config import load_config
from scheduler.framework import Code, CycleState
from scheduler.model import parse_pod
from scheduler.state.cache import Cache

UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def pod(*claims: dict[str, Any]) -> Any:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if claims:
        spec["resourceClaims"] = list(claims)
    return parse_pod({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": spec})


CASES = [
    pytest.param(pod(), Code.SKIP, "", id="a pod without resource claims is skipped"),
    pytest.param(parse_pod({"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
                            "spec": {"containers": [{"name": "c", "image": "x"}], "resourceClaims": []}}),
                 Code.SKIP, "", id="an empty resourceClaims list is no claim"),
    pytest.param(pod({"name": "gpu", "resourceClaimName": "shared-gpu"}), UU,
                 f'pod uses resource claim "gpu" (spec.resourceClaims): {NOT_ALLOCATED}',
                 id="a pod naming a ResourceClaim is refused, naming it"),
    pytest.param(pod({"name": "gpu", "resourceClaimTemplateName": "gpu-template"},
                     {"name": "nic", "resourceClaimName": "fast-nic"}), UU,
                 f'pod uses resource claims "gpu", "nic" (spec.resourceClaims): {NOT_ALLOCATED}',
                 id="a pod with several claims, templates included, is refused naming each"),
]


@pytest.mark.parametrize("p, code, message", CASES)
def test_pre_filter(p: Any, code: Code, message: str) -> None:
    cache = Cache()
    result, st = DynamicResources(None, None).pre_filter(CycleState(), p, cache.nodes)
    assert result is None
    assert (st.code, st.message()) == (code, message)


def test_parse_pod_keeps_the_claim_names_in_order() -> None:
    p = pod({"name": "b", "resourceClaimName": "x"}, {"name": "a", "resourceClaimTemplateName": "t"})
    assert p.resource_claims == ("b", "a")


def test_no_cluster_event_can_help_since_resource_claims_are_immutable() -> None:
    assert DynamicResources(None, None).events_to_register() == []


def test_the_default_profile_runs_it_at_pre_filter_just_before_preemption_is_configured() -> None:
    p = load_config(None).profiles[0]
    assert "DynamicResources" in p.plugins["preFilter"]
    assert "DynamicResources" not in p.plugins["filter"]
    names = [n for n, _ in p.plugin_sets["multiPoint"].enabled]
    i = names.index("DynamicResources")
    assert p.plugin_sets["multiPoint"].enabled[i:i + 2] == (("DynamicResources", 2), ("DefaultPreemption", None))
