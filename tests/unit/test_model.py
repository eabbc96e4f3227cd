"""scheduler/model/: quantities, PodRequests as upstream computes it, and parsing that never raises."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.framework.nodetable import NodeTable
from scheduler.model import (
    CPU, DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, DISRUPTION_POD, DISRUPTION_POD_GROUP, INT64_MAX, MEMORY,
    POD_GROUP_ANNOTATION, POD_GROUP_LABEL, HostPort, Node, OwnerRef, Pod, QuantityError, Taint, Toleration, canonical, parse_node, parse_pod, parse_pod_group,
    parse_label_selector, parse_quantity,
)

Ki, Mi, Gi = 2**10, 2**20, 2**30

# ---------------------------------------------------------------------------- quantities


@pytest.mark.parametrize("raw, want", [
    pytest.param("100m", Fraction(1, 10), id="100m is a tenth"),
    pytest.param("1", 1, id="a bare integer string"),
    pytest.param("1.5", Fraction(3, 2), id="a decimal fraction"),
    pytest.param("2Gi", 2 * Gi, id="a binary suffix"),
    pytest.param("1Ki", Ki, id="Ki is 1024"),
    pytest.param("1k", 1000, id="lowercase k is the decimal kilo"),
    pytest.param("1M", 10**6, id="M is the decimal mega"),
    pytest.param("1E", 10**18, id="a lone E is the exa suffix, not an exponent"),
    pytest.param("1e3", 1000, id="a lowercase exponent"),
    pytest.param("1E-3", Fraction(1, 1000), id="an uppercase negative exponent"),
    pytest.param("1.5e1", 15, id="a fractional mantissa with an exponent"),
    pytest.param("-1e3", -1000, id="a negative mantissa keeps its sign through the exponent"),
    pytest.param("+2k", 2000, id="an explicit plus sign"),
    pytest.param("-100m", Fraction(-1, 10), id="a negative quantity parses (validation rejects it later)"),
    pytest.param(".5", Fraction(1, 2), id="the integer part may be left out"),
    pytest.param("5.", 5, id="the fraction part may be empty"),
    pytest.param("100u", Fraction(1, 10**4), id="the micro suffix"),
    pytest.param("0", 0, id="zero"),
    pytest.param(3, 3, id="a JSON integer"),
    pytest.param(1.5, Fraction(3, 2), id="a JSON float"),
    pytest.param(0.1, Fraction(1, 10), id="a JSON float is read as the decimal it prints as"),
])
def test_parse_quantity(raw: Any, want: Fraction | int) -> None:
    got = parse_quantity(raw)
    assert got == want
    if isinstance(want, int):
        assert isinstance(got, int), "whole quantities come back as int"


@pytest.mark.parametrize("raw", [
    pytest.param("", id="the empty string"),
    pytest.param("abc", id="letters"),
    pytest.param("1.5.5", id="two decimal points"),
    pytest.param(".", id="a lone decimal point"),
    pytest.param("1e", id="an exponent without digits"),
    pytest.param("1K", id="uppercase K is no suffix"),
    pytest.param("1Kb", id="an unknown two-letter suffix"),
    pytest.param("1 Gi", id="a space before the suffix"),
    pytest.param(True, id="a JSON boolean"),
    pytest.param(None, id="null"),
    pytest.param([1], id="a list"),
    pytest.param({"cpu": 1}, id="an object"),
    pytest.param(math.nan, id="NaN"),
    pytest.param(math.inf, id="infinity"),
])
def test_parse_quantity_rejects(raw: Any) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(raw)


@pytest.mark.parametrize("resource, raw, want", [
    pytest.param(CPU, "1", 1000, id="one cpu is 1000 millicores"),
    pytest.param(CPU, "1m", 1, id="one millicore"),
    pytest.param(CPU, "0.0001", 1, id="a tenth of a millicore rounds up to one"),
    pytest.param(CPU, "100u", 1, id="micro-cpu rounds up to a millicore"),
    pytest.param(CPU, "1.5", 1500, id="fractional cpus"),
    pytest.param(CPU, 0.25, 250, id="a JSON float of cpus"),
    pytest.param(MEMORY, "1.5", 2, id="memory rounds up to whole bytes"),
    pytest.param(MEMORY, "1Mi", Mi, id="mebibytes"),
    pytest.param(MEMORY, "1k", 1000, id="kilobytes"),
    pytest.param(MEMORY, "1e3", 1000, id="an exponent"),
    pytest.param("nvidia.com/gpu", "2", 2, id="an extended resource counts units"),
    pytest.param(CPU, "0", 0, id="zero stays zero"),
])
def test_canonical_units(resource: str, raw: Any, want: int) -> None:
    assert canonical(resource, raw) == want


@pytest.mark.parametrize("raw", [
    pytest.param("-1", id="a negative integer"),
    pytest.param("-1e3", id="a negative exponent form"),
    pytest.param("-100m", id="negative millicores"),
])
def test_canonical_rejects_negative(raw: str) -> None:
    with pytest.raises(QuantityError, match="greater than or equal to 0"):
        canonical(CPU, raw)


@pytest.mark.parametrize("resource, raw, ok", [
    pytest.param(MEMORY, "9223372036854775807", True, id="the largest int64 fits"),
    pytest.param(MEMORY, "8Ei", False, id="8Ei is one past int64"),
    pytest.param(CPU, "9223372036854775", True, id="the most cores whose millicores fit"),
    pytest.param(CPU, "9223372036854776", False, id="one more core overflows in millicores"),
])
def test_canonical_stays_within_int64(resource: str, raw: str, ok: bool) -> None:
    if ok:
        assert canonical(resource, raw) <= INT64_MAX
    else:
        with pytest.raises(QuantityError, match="too large"):
            canonical(resource, raw)


def test_huge_requests_saturate_instead_of_overflowing() -> None:
    pod = pod_of({"containers": [ctr({"memory": "4Ei"}), ctr({"memory": "4Ei"})]})
    assert pod.requests == {MEMORY: INT64_MAX} and pod.nonzero_memory == INT64_MAX and pod.invalid == ""


# ---------------------------------------------------------------------------- PodRequests


def ctr(requests: dict[str, Any] | None = None, restart: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "image": "busybox"}
    if requests is not None:
        c["resources"] = {"requests": requests}
    if restart:
        c["restartPolicy"] = restart
    return c


def sidecar(requests: dict[str, Any] | None = None) -> dict[str, Any]:
    return ctr(requests, restart="Always")


def pod_of(spec: dict[str, Any], **meta: Any) -> Pod:
    return parse_pod({"metadata": {"name": "p", "namespace": "ns", "uid": "u", **meta}, "spec": spec})


REQUEST_CASES = [
    pytest.param({"containers": [ctr({"cpu": "100m", "memory": "1Gi"}), ctr({"cpu": "200m"})]},
                 {CPU: 300, MEMORY: Gi}, 300, Gi + DEFAULT_MEMORY_REQUEST,
                 id="containers sum and a container without memory gets the default only in nonzero"),
    pytest.param({"containers": [ctr(), ctr()]},
                 {}, 2 * DEFAULT_MILLI_CPU_REQUEST, 2 * DEFAULT_MEMORY_REQUEST,
                 id="containers asking nothing request nothing but count 100m and 200Mi each for scoring"),
    pytest.param({"containers": [ctr({"cpu": "0", "memory": "0"})]},
                 {CPU: 0, MEMORY: 0}, 0, 0,
                 id="an explicit zero request is not missing and gets no default"),
    pytest.param({"containers": [ctr({"cpu": "1"})], "initContainers": [ctr({"cpu": "2"})]},
                 {CPU: 2000}, 2000, DEFAULT_MEMORY_REQUEST,
                 id="an init container larger than the containers sets the request"),
    pytest.param({"containers": [ctr({"cpu": "1"}), ctr({"cpu": "1"})], "initContainers": [ctr({"cpu": "1500m"})]},
                 {CPU: 2000}, 2000, 2 * DEFAULT_MEMORY_REQUEST,
                 id="init containers run one at a time so only the largest one counts"),
    pytest.param({"containers": [ctr({"cpu": "1"})], "initContainers": [sidecar({"cpu": "500m"})]},
                 {CPU: 1500}, 1500, 2 * DEFAULT_MEMORY_REQUEST,
                 id="a sidecar runs alongside the containers and adds to them"),
    pytest.param({"containers": [ctr({"cpu": "1"})],
                  "initContainers": [sidecar({"cpu": "500m"}), ctr({"cpu": "2"})]},
                 {CPU: 2500}, 2500, 2 * DEFAULT_MEMORY_REQUEST,
                 id="a sidecar is counted for the init containers after it"),
    pytest.param({"containers": [ctr({"cpu": "1"})],
                  "initContainers": [ctr({"cpu": "2"}), sidecar({"cpu": "500m"})]},
                 {CPU: 2000}, 2000, 2 * DEFAULT_MEMORY_REQUEST,
                 id="a sidecar is not counted for the init containers before it"),
    pytest.param({"containers": [ctr({"cpu": "1"})], "overhead": {"cpu": "250m", "memory": "120Mi"}},
                 {CPU: 1250, MEMORY: 120 * Mi}, 1250, DEFAULT_MEMORY_REQUEST + 120 * Mi,
                 id="overhead is added to requests and to nonzero"),
    pytest.param({"containers": [ctr({"cpu": "500m"})], "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
                 {CPU: 2000, MEMORY: Gi}, 2000, Gi,
                 id="pod-level requests replace the containers' cpu and memory"),
    pytest.param({"containers": [ctr(), ctr()], "resources": {"requests": {"cpu": "2"}}},
                 {CPU: 2000}, 2000, 2 * DEFAULT_MEMORY_REQUEST,
                 id="with pod-level cpu only, memory nobody asks for still gets the per-container default"),
    pytest.param({"containers": [ctr({"memory": "1Gi"}), ctr()], "resources": {"requests": {"cpu": "2"}}},
                 {CPU: 2000, MEMORY: Gi}, 2000, Gi,
                 id="with pod-level requests, memory one container asks for gets no default for the others"),
    pytest.param({"containers": [ctr({"cpu": "1"})], "resources": {"requests": {"cpu": "2"}},
                  "overhead": {"cpu": "100m"}},
                 {CPU: 2100}, 2100, DEFAULT_MEMORY_REQUEST,
                 id="overhead is added on top of pod-level requests"),
    pytest.param({"containers": [ctr({"nvidia.com/gpu": 1}), ctr({"nvidia.com/gpu": 1})],
                  "initContainers": [ctr({"nvidia.com/gpu": 3})]},
                 {"nvidia.com/gpu": 3}, DEFAULT_MILLI_CPU_REQUEST * 2, DEFAULT_MEMORY_REQUEST * 2,
                 id="extended resources follow the same sum and max"),
    pytest.param({"containers": [ctr({"ephemeral-storage": "1Gi"})], "resources": {"requests": {"ephemeral-storage": "5Gi"}}},
                 {"ephemeral-storage": Gi}, DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST,
                 id="pod-level requests other than cpu, memory and hugepages are ignored"),
    pytest.param({"containers": [ctr({"cpu": "1", "hugepages-2Mi": "20Mi"}), ctr({"hugepages-2Mi": "20Mi"})],
                  "resources": {"requests": {"hugepages-2Mi": "100Mi"}}},
                 {CPU: 1000, "hugepages-2Mi": 100 * Mi}, 1000, 2 * DEFAULT_MEMORY_REQUEST,
                 id="pod-level hugepages replace the containers' (IsSupportedPodLevelResource), and make the "
                    "pod-level requests set: cpu one container asks for gets no default for the other"),
]


@pytest.mark.parametrize("spec, requests, nonzero_cpu, nonzero_memory", REQUEST_CASES)
def test_pod_requests(spec: dict[str, Any], requests: dict[str, int], nonzero_cpu: int, nonzero_memory: int) -> None:
    pod = pod_of(spec)
    assert pod.invalid == ""
    assert pod.requests == requests
    assert (pod.nonzero_cpu, pod.nonzero_memory) == (nonzero_cpu, nonzero_memory)


# ---------------------------------------------------------------------------- in-place resize (status resources)


def status_of(*statuses: dict[str, Any], infeasible: bool | None = None, init: tuple[dict[str, Any], ...] = (),
              **pod_level: Any) -> dict[str, Any]:
    """A pod status as a kubelet writes it during an in-place resize: ``infeasible`` sets PodResizePending."""
    out: dict[str, Any] = {"phase": "Running", "containerStatuses": list(statuses), **pod_level}
    if init:
        out["initContainerStatuses"] = list(init)
    if infeasible is not None:
        out["conditions"] = [{"type": "PodResizePending", "status": "True",
                              "reason": "Infeasible" if infeasible else "Deferred"}]
    return out


def cs(name: str = "c", requests: dict[str, Any] | None = None, allocated: dict[str, Any] | None = None,
       resources: bool = True) -> dict[str, Any]:
    """A container status; ``resources=False`` leaves the field out, as a kubelet before resize support does."""
    out: dict[str, Any] = {"name": name}
    if resources:
        out["resources"] = {"requests": requests} if requests is not None else {}
    if allocated is not None:
        out["allocatedResources"] = allocated
    return out


def named(name: str, requests: dict[str, Any] | None = None, restart: str | None = None) -> dict[str, Any]:
    return {**ctr(requests, restart), "name": name}


RESIZE_CASES = [
    pytest.param([named("c", {"cpu": "1"})], status_of(cs("c", {"cpu": "4"}, {"cpu": "4"})),
                 {CPU: 4000}, 4000,
                 id="a resize down in progress keeps the container charged what its status still holds"),
    pytest.param([named("c", {"cpu": "1"})], status_of(cs("c", {"cpu": "1"}, {"cpu": "3"})),
                 {CPU: 3000}, 3000,
                 id="an allocation larger than what is actuated is charged"),
    pytest.param([named("c", {"cpu": "4"})], status_of(cs("c", {"cpu": "1"}, {"cpu": "1"})),
                 {CPU: 4000}, 4000,
                 id="a resize up not yet actuated is charged its spec"),
    pytest.param([named("c", {"cpu": "4"})], status_of(cs("c", {"cpu": "1"}, {"cpu": "1"}), infeasible=True),
                 {CPU: 1000}, 1000,
                 id="an infeasible resize up is left out and the pod charged what it holds"),
    pytest.param([named("c", {"cpu": "4"})], status_of(cs("c", {"cpu": "1"}, {"cpu": "1"}), infeasible=False),
                 {CPU: 4000}, 4000,
                 id="a deferred resize up is charged its spec as it may be admitted"),
    pytest.param([named("c", {"cpu": "1"})], status_of(cs("c", {"cpu": "4"}, {"cpu": "4"}, resources=False)),
                 {CPU: 1000}, 1000,
                 id="a status without resources is ignored even with allocatedResources"),
    pytest.param([named("c", {"cpu": "1"})], status_of(cs("c", None, {"cpu": "2"})),
                 {CPU: 2000}, 2000,
                 id="empty status resources still let allocatedResources count"),
    pytest.param([named("a", {"cpu": "1"}), named("b", {"cpu": "1"})],
                 status_of(cs("a", {"cpu": "2"}), cs("b", {"cpu": "500m"})),
                 {CPU: 3000}, 3000,
                 id="each container is charged its own larger value and the pod the sum"),
    pytest.param([named("c", {"cpu": "1"})], status_of(cs("other", {"cpu": "4"})),
                 {CPU: 1000}, 1000,
                 id="a status of a container the spec does not have is ignored"),
    pytest.param([named("c", {"cpu": "1"})], status_of(cs("c", {"memory": "1Gi"})),
                 {CPU: 1000, MEMORY: Gi}, 1000,
                 id="a resource only the status names is charged too"),
    pytest.param([named("c")], status_of(cs("c", {"cpu": "0"})),
                 {CPU: 0}, 0,
                 id="a zero request in the status is not missing so nonzero adds no default"),
]


@pytest.mark.parametrize("containers, status, requests, nonzero_cpu", RESIZE_CASES)
def test_a_resized_pod_is_charged_as_upstream_charges_it(containers: list[dict[str, Any]], status: dict[str, Any],
                                                         requests: dict[str, int], nonzero_cpu: int) -> None:
    pod = parse_pod({"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
                     "spec": {"containers": containers, "nodeName": "n"}, "status": status})
    assert pod.invalid == ""
    assert pod.requests == requests
    assert pod.nonzero_cpu == nonzero_cpu


SIDECAR_RESIZE_CASES = [
    pytest.param({"containers": [named("c", {"cpu": "1"})], "initContainers": [named("s", {"cpu": "1"}, "Always")]},
                 status_of(cs("c"), init=(cs("s", {"cpu": "3"}),)), {CPU: 4000},
                 id="a resized sidecar is charged its status alongside the containers"),
    pytest.param({"containers": [named("c", {"cpu": "1"})], "initContainers": [named("i", {"cpu": "2"})]},
                 status_of(cs("c"), init=(cs("i", {"cpu": "5"}),)), {CPU: 2000},
                 id="a plain init container's status is never read"),
    pytest.param({"containers": [named("c", {"cpu": "1"})],
                  "initContainers": [named("s", {"cpu": "1"}, "Always"), named("i", {"cpu": "2"})]},
                 status_of(cs("c"), init=(cs("s", {"cpu": "2"}),)), {CPU: 4000},
                 id="a resized sidecar also counts for the init containers after it"),
    pytest.param({"containers": [named("c", {"cpu": "1"})], "resources": {"requests": {"cpu": "2"}}},
                 status_of(cs("c"), resources={"requests": {"cpu": "3"}}), {CPU: 3000},
                 id="pod-level requests follow the pod's status resources"),
    pytest.param({"containers": [named("c", {"cpu": "1"})], "resources": {"requests": {"cpu": "2"}}},
                 status_of(cs("c"), allocatedResources={"cpu": "3"}), {CPU: 2000},
                 id="pod-level allocatedResources alone are not read without status resources"),
    pytest.param({"containers": [named("c", {"cpu": "1"})], "resources": {"requests": {"cpu": "4", "memory": "1Gi"}}},
                 status_of(cs("c"), resources={"requests": {"cpu": "2"}}, infeasible=True), {CPU: 2000, MEMORY: 0},
                 id="an infeasible pod-level resize charges what the status names and zero for the rest"),
]


@pytest.mark.parametrize("spec, status, requests", SIDECAR_RESIZE_CASES)
def test_sidecars_and_pod_level_requests_are_resized_as_upstream(spec: dict[str, Any], status: dict[str, Any],
                                                                 requests: dict[str, int]) -> None:
    pod = parse_pod({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": spec, "status": status})
    assert pod.invalid == ""
    assert pod.requests == requests


# ---------------------------------------------------------------------------- host ports (GetHostPorts)


def ported(name: str, *ports: dict[str, Any], restart: str | None = None) -> dict[str, Any]:
    return {**named(name, None, restart), "ports": list(ports)}


HOST_PORT_CASES = [
    pytest.param({"initContainers": [ported("s", {"containerPort": 9100, "hostPort": 9100}, restart="Always")]},
                 (HostPort("0.0.0.0", "TCP", 9100),),
                 id="a sidecar's host port is held with hostIP 0.0.0.0 and TCP by default"),
    pytest.param({"initContainers": [ported("i", {"containerPort": 9100, "hostPort": 9100})]},
                 (), id="a plain init container's host port is not held"),
    pytest.param({"initContainers": [ported("i", {"containerPort": 9100, "hostPort": 9100}, restart="Never")]},
                 (), id="an init container with another restart policy holds no port"),
    pytest.param({"initContainers": [ported("s", {"containerPort": 53, "hostPort": 53, "protocol": "UDP",
                                                  "hostIP": "10.0.0.1"}, restart="Always")],
                  "containers": [ported("c", {"containerPort": 80, "hostPort": 8080})]},
                 (HostPort("10.0.0.1", "UDP", 53), HostPort("0.0.0.0", "TCP", 8080)),
                 id="sidecars' ports come first then the containers' with their own ip and protocol"),
    pytest.param({"initContainers": [ported("s", {"containerPort": 9100}, restart="Always")]},
                 (), id="a sidecar port without hostPort is no host port"),
]


@pytest.mark.parametrize("spec, ports", HOST_PORT_CASES)
def test_host_ports_include_sidecars_as_upstream(spec: dict[str, Any], ports: tuple[HostPort, ...]) -> None:
    pod = pod_of(spec)
    assert pod.invalid == ""
    assert pod.host_ports == ports


# ---------------------------------------------------------------------------- PodGroup disruption mode


@pytest.mark.parametrize("spec, annotations, mode", [
    pytest.param({"disruptionMode": "Pod"}, {}, DISRUPTION_POD, id="upstream's Pod takes members one by one"),
    pytest.param({"disruptionMode": "Single"}, {}, DISRUPTION_POD, id="tandem's older Single still means Pod"),
    pytest.param({"disruptionMode": "PodGroup"}, {}, DISRUPTION_POD_GROUP, id="PodGroup takes the gang whole"),
    pytest.param({}, {}, DISRUPTION_POD, id="unset is Pod as upstream defaults it"),
    pytest.param({}, {"scheduling.tandem.dev/disruption-mode": "PodGroup"}, DISRUPTION_POD_GROUP,
                 id="the annotation says PodGroup where the CRD lacks the field"),
    pytest.param({}, {"scheduling.tandem.dev/disruption-mode": "Pod"}, DISRUPTION_POD,
                 id="the annotation may say Pod"),
])
def test_disruption_mode_reads_upstreams_values(spec: dict[str, Any], annotations: dict[str, str], mode: str) -> None:
    pg = parse_pod_group({"metadata": {"name": "g", "namespace": "ns", "annotations": annotations},
                          "spec": {"minMember": 2, **spec}})
    assert pg.disruption_mode == mode == ("PodGroup" if mode == DISRUPTION_POD_GROUP else "Pod")


# ---------------------------------------------------------------------------- what parse_pod records as invalid


@pytest.mark.parametrize("obj, path", [
    pytest.param({"spec": {"containers": [ctr({"cpu": "lots"})]}}, "spec.containers[0].resources.requests[cpu]",
                 id="an unparseable container request"),
    pytest.param({"spec": {"containers": [ctr(), ctr({"memory": "-1Gi"})]}},
                 "spec.containers[1].resources.requests[memory]", id="a negative request"),
    pytest.param({"spec": {"initContainers": [ctr({"cpu": "1.5.5"})]}},
                 "spec.initContainers[0].resources.requests[cpu]", id="an unparseable init container request"),
    pytest.param({"spec": {"overhead": {"cpu": []}}}, "spec.overhead[cpu]", id="an overhead that is no quantity"),
    pytest.param({"spec": {"resources": {"requests": {"memory": "x"}}}}, "spec.resources.requests[memory]",
                 id="an unparseable pod-level request"),
    pytest.param({"spec": {"priority": "high"}}, "spec.priority", id="a priority that is not an integer"),
    pytest.param({"spec": {"priority": True}}, "spec.priority", id="a boolean priority"),
    pytest.param({"spec": {"tolerations": [{"key": "k", "operator": "Contains"}]}}, "spec.tolerations[0].operator",
                 id="a toleration with an unknown operator"),
    pytest.param({"spec": {"tolerations": [{"key": "k", "effect": "NoWay"}]}}, "spec.tolerations[0].effect",
                 id="a toleration with an unknown effect"),
    pytest.param({"metadata": {"labels": {"a": 1}}}, "metadata.labels", id="a label value that is not a string"),
    pytest.param({"spec": {"nodeSelector": {"zone": ["a"]}}}, "spec.nodeSelector", id="a node selector value list"),
    pytest.param({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Near"}]}]}}}}},
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        ".matchExpressions[0].operator", id="a node affinity operator that does not exist"),
    pytest.param({"spec": {"affinity": "close"}}, "spec.affinity", id="an affinity that is not an object"),
    pytest.param({"spec": {"schedulerName": ["tandem-scheduler"]}}, "spec.schedulerName",
                 id="a scheduler name that is a list"),
    pytest.param({"spec": {"nodeName": {"n": 1}}}, "spec.nodeName", id="a node name that is an object"),
    pytest.param({"spec": {"containers": [{"name": "c", "ports": [{"hostPort": 80, "hostIP": 7}]}]}},
                 "spec.containers[0].ports[0].hostIP", id="a host IP that is a number"),
    pytest.param({"spec": {"initContainers": [{"name": "i"}, {"name": "s", "restartPolicy": "Always",
                                                              "ports": [{"hostPort": 80, "protocol": 6}]}]}},
                 "spec.initContainers[1].ports[0].protocol", id="a sidecar's host port protocol that is a number"),
    pytest.param({"spec": {"containers": [{"name": "c"}]},
                  "status": {"containerStatuses": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}},
                 "status.containerStatuses[0].resources.requests[cpu]",
                 id="an unparseable resized request in a container status"),
    pytest.param({"spec": {"containers": [{"name": "c"}]},
                  "status": {"containerStatuses": [{"name": "c", "resources": {},
                                                    "allocatedResources": {"memory": "-1"}}]}},
                 "status.containerStatuses[0].allocatedResources[memory]",
                 id="a negative allocated resource in a container status"),
])
def test_parse_pod_records_the_field_path(obj: dict[str, Any], path: str) -> None:
    obj = {"metadata": {"name": "p", "namespace": "ns", "uid": "u", **obj.get("metadata", {})},
           "spec": obj.get("spec", {}), "status": obj.get("status", {})}
    pod = parse_pod(obj)
    assert pod.invalid.startswith(path + ":"), pod.invalid


def test_the_first_problem_is_the_one_recorded() -> None:
    pod = pod_of({"containers": [ctr({"cpu": "x"}), ctr({"memory": "y"})]})
    assert pod.invalid.startswith("spec.containers[0]")


def test_a_bad_toleration_is_dropped_and_the_good_ones_kept() -> None:
    pod = pod_of({"tolerations": [{"key": "a", "operator": "Maybe"},
                                  {"key": "b", "operator": "Exists", "effect": "NoSchedule"},
                                  {"key": "c", "value": "v", "tolerationSeconds": 30}]})
    assert pod.tolerations == (Toleration("b", "Exists", "", "NoSchedule"), Toleration("c", "Equal", "v", "", 30))
    assert pod.invalid.startswith("spec.tolerations[0].operator")


def test_a_bad_request_leaves_the_other_requests_parsed() -> None:
    pod = pod_of({"containers": [ctr({"cpu": "x", "memory": "1Gi"})]})
    assert pod.requests == {MEMORY: Gi}
    assert pod.invalid


@pytest.mark.parametrize("labels, annotations, group", [
    pytest.param({POD_GROUP_LABEL: "train"}, {}, "train", id="the scheduler-plugins label names the group"),
    pytest.param({}, {POD_GROUP_ANNOTATION: "batch"}, "batch", id="the kube-batch annotation names the group"),
    pytest.param({POD_GROUP_LABEL: "train"}, {POD_GROUP_ANNOTATION: "batch"}, "train", id="the label wins over the annotation"),
    pytest.param({}, {}, "", id="no label and no annotation: no group"),
])
def test_pod_group(labels: dict[str, str], annotations: dict[str, str], group: str) -> None:
    assert pod_of({}, labels=labels, annotations=annotations).pod_group == group


def test_parse_pod_reads_the_fields_the_scheduler_uses() -> None:
    pod = parse_pod({
        "metadata": {"name": "web", "namespace": "prod", "uid": "u1", "resourceVersion": "7",
                     "creationTimestamp": "2024-01-02T03:04:05Z", "deletionTimestamp": "2024-01-02T03:05:00Z",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "o1",
                                          "controller": True}]},
        "spec": {"schedulerName": "tandem-scheduler", "priority": 7, "priorityClassName": "high",
                 "preemptionPolicy": "Never", "nodeSelector": {"zone": "a"},
                 "schedulingGates": [{"name": "wait"}],
                 "containers": [{"name": "c", "image": "nginx",
                                 "ports": [{"containerPort": 80, "hostPort": 8080},
                                           {"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"},
                                           {"containerPort": 9090}]}],
                 "initContainers": [{"name": "i", "image": "busybox", "ports": [{"hostPort": 1}]}],
                 "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}, {"name": "e", "emptyDir": {}}]},
        "status": {"phase": "Pending", "nominatedNodeName": "n1"},
    })
    assert (pod.key, pod.resource_version, pod.scheduler_name) == ("prod/web", "7", "tandem-scheduler")
    assert (pod.priority, pod.priority_class_name, pod.preemption_policy) == (7, "high", "Never")
    assert pod.created == 1704164645.0 and pod.deleting
    assert pod.host_ports == (HostPort("0.0.0.0", "TCP", 8080), HostPort("10.0.0.1", "UDP", 53)), \
        "init containers' ports and container ports without hostPort are not host ports"
    assert pod.images == ("busybox", "nginx")
    assert pod.scheduling_gates == ("wait",)
    assert pod.pvcs == ("data",)
    assert pod.nominated_node_name == "n1"
    assert pod.owners == (OwnerRef("ReplicaSet", "web-1", "o1", True, "apps/v1"),)
    assert not pod.assigned and not pod.terminal and pod.invalid == ""


@pytest.mark.parametrize("phase, terminal", [
    pytest.param("Succeeded", True, id="succeeded is terminal"),
    pytest.param("Failed", True, id="failed is terminal"),
    pytest.param("Running", False, id="running is not"),
    pytest.param(None, False, id="a pod without status is pending"),
])
def test_terminal_phases(phase: str | None, terminal: bool) -> None:
    obj: dict[str, Any] = {"metadata": {"uid": "u"}, "spec": {}}
    if phase:
        obj["status"] = {"phase": phase}
    assert parse_pod(obj).terminal is terminal



@pytest.mark.parametrize("extra, namespaces, by_labels", [
    pytest.param({}, {"own"}, False, id="neither namespaces nor namespaceSelector means the pod's own namespace"),
    pytest.param({"namespaces": []}, {"own"}, False, id="an empty namespaces list means the pod's own namespace"),
    pytest.param({"namespaceSelector": None}, {"own"}, False, id="a null namespaceSelector is no selector"),
    pytest.param({"namespaceSelector": {}}, set(), True, id="an empty namespaceSelector alone selects by labels"),
    pytest.param({"namespaceSelector": {"matchLabels": {"team": "a"}}}, set(), True,
                 id="a namespaceSelector without namespaces replaces the pod's own namespace"),
    pytest.param({"namespaces": ["x"], "namespaceSelector": {}}, {"x"}, True, id="namespaces and a selector together"),
])
def test_affinity_term_namespaces_default_as_upstream(extra: dict[str, Any], namespaces: set[str], by_labels: bool) -> None:
    t = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone", **extra}
    pod = parse_pod({"metadata": {"uid": "u", "namespace": "own"},
                     "spec": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [t]}}}})
    assert not pod.invalid
    assert pod.pod_affinity is not None
    (term,) = pod.pod_affinity.required_anti
    assert (set(term.selection.namespaces), term.selection.by_namespace_labels) == (namespaces, by_labels)


# ---------------------------------------------------------------------------- parse_pod never raises

_scalars = (st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
            | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6)
            | st.sampled_from(["1", "100m", "2Gi", "-1", "1e3", "Always", "Exists", "In", "NoSchedule", ""]))
json_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=6) | st.sampled_from(["cpu", "memory", "requests"]),
                                             inner, max_size=3), max_leaves=8)

SPEC_FIELDS = ["containers", "initContainers", "overhead", "resources", "tolerations", "affinity", "nodeSelector",
               "priority", "priorityClassName", "schedulerName", "nodeName", "preemptionPolicy", "schedulingGates",
               "topologySpreadConstraints", "volumes"]
CONTAINER_FIELDS = ["resources", "ports", "image", "restartPolicy"]


def _containers() -> st.SearchStrategy[Any]:
    container = st.dictionaries(st.sampled_from(CONTAINER_FIELDS), json_values, max_size=3)
    with_requests = st.builds(lambda r: {"resources": {"requests": r}},
                              st.dictionaries(st.sampled_from(["cpu", "memory", "x/y"]), json_values, max_size=2))
    with_ports = st.builds(lambda p: {"ports": [p]}, st.dictionaries(
        st.sampled_from(["hostPort", "hostIP", "protocol"]), json_values | st.integers(1, 65535), max_size=3))
    return st.lists(container | with_requests | with_ports, max_size=3) | json_values


pod_objects = st.fixed_dictionaries({
    "metadata": st.dictionaries(st.sampled_from(["name", "namespace", "uid", "labels", "annotations",
                                                 "ownerReferences", "creationTimestamp", "deletionTimestamp"]),
                                json_values, max_size=4),
    "spec": st.dictionaries(st.sampled_from(SPEC_FIELDS), json_values, max_size=5)
    | st.builds(lambda c, i: {"containers": c, "initContainers": i}, _containers(), _containers()),
    "status": st.dictionaries(st.sampled_from(["phase", "nominatedNodeName"]), json_values, max_size=2),
}) | json_values.filter(lambda v: isinstance(v, dict))


def _assert_usable(pod: Pod) -> None:
    for name in ("uid", "namespace", "name", "scheduler_name", "node_name", "nominated_node_name",
                 "preemption_policy", "phase", "priority_class_name", "pod_group", "invalid"):
        assert isinstance(getattr(pod, name), str), name
    assert isinstance(pod.priority, int) and not isinstance(pod.priority, bool)
    assert all(isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in pod.requests.items())
    assert isinstance(pod.nonzero_cpu, int) and isinstance(pod.nonzero_memory, int)
    assert all(isinstance(v, str) for v in pod.labels.values())
    hash((pod.host_ports, pod.tolerations, pod.scheduling_gates, pod.images, pod.pvcs, pod.owners))
    if pod.invalid:
        assert pod.invalid.split(":", 1)[0].split(".")[0] in ("spec", "metadata", "status"), pod.invalid
    json.dumps(pod.affinity)  # still plain JSON


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod_objects)
def test_parse_pod_never_raises_on_garbage(obj: dict[str, Any]) -> None:
    pod = parse_pod(obj)
    _assert_usable(pod)
    # and the cache can charge whatever came out
    table = NodeTable(capacity=2)
    row = table.ensure_row("n")
    table.charge(row, pod, 1)
    table.charge(row, pod, -1)
    assert not table.requested.any() and not table.nonzero.any()


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.sampled_from(["metadata", "spec", "status"]),
                       st.dictionaries(st.sampled_from(["name", "labels", "taints", "unschedulable", "allocatable",
                                                        "capacity", "images", "conditions"]), json_values, max_size=4)
                       | json_values, max_size=3))
def test_parse_node_never_raises_on_garbage(obj: dict[str, Any]) -> None:
    node = parse_node(obj)
    assert isinstance(node.name, str) and isinstance(node.invalid, str)
    assert all(isinstance(v, int) and v >= 0 for v in node.allocatable.values())
    hash((node.taints, node.images))


# ---------------------------------------------------------------------------- parse_node


def node_obj(status: dict[str, Any] | None = None, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "n1", "labels": {"zone": "a"}}, "spec": spec or {}, "status": status or {}}


@pytest.mark.parametrize("status, allocatable", [
    pytest.param({"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}, "capacity": {"cpu": "4"}},
                 {CPU: 2000, MEMORY: 4 * Gi, "pods": 110}, id="allocatable is used when present"),
    pytest.param({"capacity": {"cpu": "4", "memory": "8Gi"}}, {CPU: 4000, MEMORY: 8 * Gi},
                 id="capacity is used when allocatable is missing"),
    pytest.param({"allocatable": {}, "capacity": {"cpu": "1"}}, {CPU: 1000},
                 id="capacity is used when allocatable is empty"),
    pytest.param({}, {}, id="a node without either allocates nothing"),
])
def test_parse_node_allocatable(status: dict[str, Any], allocatable: dict[str, int]) -> None:
    node = parse_node(node_obj(status))
    assert node.allocatable == allocatable and node.invalid == ""


@pytest.mark.parametrize("status, path", [
    pytest.param({"allocatable": {"cpu": "many"}}, "status.allocatable[cpu]", id="a bad allocatable quantity"),
    pytest.param({"capacity": {"memory": "-1"}}, "status.capacity[memory]",
                 id="a bad capacity quantity names capacity"),
])
def test_parse_node_records_bad_quantities(status: dict[str, Any], path: str) -> None:
    assert parse_node(node_obj(status)).invalid.startswith(path + ":")


def test_parse_node_reads_taints_images_and_readiness() -> None:
    node = parse_node(node_obj(
        status={"images": [{"names": ["nginx:1", "nginx@sha256:x"], "sizeBytes": 500}, {"names": [7], "sizeBytes": "big"}],
                "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "False"}]},
        spec={"unschedulable": True,
              "taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}, {"key": "bad", "effect": "Sometimes"},
                         {"key": "spot", "effect": "PreferNoSchedule"}]}))
    assert node.taints == (Taint("gpu", "yes", "NoSchedule"), Taint("spot", "", "PreferNoSchedule"))
    assert node.invalid.startswith("spec.taints[1].effect")
    assert node.images == ((("nginx:1", "nginx@sha256:x"), 500), ((), 0))
    assert node.unschedulable and not node.ready
    assert node.labels == {"zone": "a"}
    assert isinstance(node, Node)


# ---------------------------------------------------------------------------- PodGroup


def pod_group_obj(spec: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "ns", "uid": "u1", "resourceVersion": "9", "generation": 2,
                         "creationTimestamp": "2024-05-01T10:00:00Z", **meta},
            "spec": spec if spec is not None else {"minMember": 3}, "status": {"phase": "Pending"}}


def test_parse_pod_group_reads_what_the_gang_plugins_use_once() -> None:
    pg = parse_pod_group(pod_group_obj({"minMember": 4, "scheduleTimeoutSeconds": 30, "minResources": {"cpu": "8"}},
                                       annotations={"a": "b"}))
    assert (pg.key, pg.uid, pg.generation, pg.min_member, pg.quorum) == ("ns/g", "u1", 2, 4, 4)
    assert pg.created == 1_714_557_600.0, "creationTimestamp is parsed here, not on every queue push"
    assert pg.schedule_timeout_seconds == 30 and pg.min_resources == {"cpu": "8"}
    assert pg.annotations == {"a": "b"} and pg.status == {"phase": "Pending"}
    assert pg.reference == {"kind": "PodGroup", "apiVersion": "scheduling.x-k8s.io/v1alpha1", "namespace": "ns",
                            "name": "g", "uid": "u1", "resourceVersion": "9"}


@pytest.mark.parametrize("spec, min_member, quorum", [
    pytest.param({}, 0, 1, id="no minMember: no gang constraint, one member is a quorum"),
    pytest.param({"minMember": -2}, 0, 1, id="a negative minMember is clamped to 0"),
    pytest.param({"minMember": "3"}, 0, 1, id="a string is not an integer field"),
    pytest.param({"minMember": True}, 0, 1, id="a bool is not an integer field"),
    pytest.param({"minMember": 5}, 5, 5, id="minMember 5"),
])
def test_min_member_is_clamped_once_for_every_reader(spec: dict[str, Any], min_member: int, quorum: int) -> None:
    pg = parse_pod_group(pod_group_obj(spec))
    assert (pg.min_member, pg.quorum) == (min_member, quorum)


def test_a_pod_group_record_is_frozen() -> None:
    pg = parse_pod_group(pod_group_obj())
    with pytest.raises(AttributeError):
        pg.min_member = 7  # type: ignore[misc]


# ---------------------------------------------------------------------------- pod affinity and spread terms

def _pod_with(spec: dict, labels: dict | None = None, namespace: str = "ns") -> "Pod":
    return parse_pod({"metadata": {"name": "p", "namespace": namespace, "uid": "u", "labels": labels or {}},
                      "spec": spec})


def _anti(term: dict) -> dict:
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


@pytest.mark.parametrize("selector, labels, matches", [
    pytest.param(None, {"app": "web"}, False, id="a nil selector matches nothing"),
    pytest.param({}, {}, True, id="an empty selector matches everything"),
    pytest.param({"matchLabels": {"app": "web"}}, {"app": "web", "x": "y"}, True, id="matchLabels is a subset test"),
    pytest.param({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, {}, True,
                 id="NotIn matches a pod without the key"),
    pytest.param({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {"app": "x"}, False,
                 id="DoesNotExist rejects a pod with the key"),
    pytest.param({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]},
                 {"app": "web"}, False, id="matchLabels and matchExpressions are ANDed"),
])
def test_label_selectors_match_as_upstream(selector, labels, matches):
    assert parse_label_selector(selector, "s").matches(labels) is matches


@pytest.mark.parametrize("term, want_namespaces, want_ns_selector_nothing", [
    pytest.param({"labelSelector": {}, "topologyKey": "k"}, {"ns"}, True,
                 id="neither namespaces nor namespaceSelector means the pod's own namespace"),
    pytest.param({"labelSelector": {}, "topologyKey": "k", "namespaces": ["a", "b"]}, {"a", "b"}, True,
                 id="namespaces replace the pod's own"),
    pytest.param({"labelSelector": {}, "topologyKey": "k", "namespaceSelector": {}}, set(), False,
                 id="an empty namespaceSelector selects every namespace, not the pod's own"),
])
def test_affinity_term_namespaces(term, want_namespaces, want_ns_selector_nothing):
    t = _pod_with(_anti(term)).pod_affinity.required_anti[0]
    assert set(t.selection.namespaces) == want_namespaces
    assert t.selection.ns_selector.nothing is want_ns_selector_nothing
    assert t.selection.matches("other", {}, {}) is (not want_ns_selector_nothing)


def test_match_and_mismatch_label_keys_merge_the_pods_own_values():
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "k",
            "matchLabelKeys": ["hash", "absent"], "mismatchLabelKeys": ["tenant"]}
    sel = _pod_with(_anti(term), labels={"app": "web", "hash": "1", "tenant": "t1"}).pod_affinity.required_anti[0]
    s = sel.selection.selector
    assert s.matches({"app": "web", "hash": "1", "tenant": "t2"})
    assert not s.matches({"app": "web", "hash": "2", "tenant": "t2"})     # another revision
    assert not s.matches({"app": "web", "hash": "1", "tenant": "t1"})     # the same tenant


def test_a_bad_selector_operator_makes_the_pod_invalid_naming_the_field():
    term = {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, "topologyKey": "k"}
    pod = _pod_with(_anti(term))
    assert pod.invalid.startswith("spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
                                  ".labelSelector.matchExpressions[0].operator")
    assert not pod.pod_affinity.required_anti[0].selection.selector.matches({"a": "2"})


def test_spread_constraints_parse_with_upstream_defaults_and_merged_match_label_keys():
    pod = _pod_with({"topologySpreadConstraints": [
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["hash"]}]},
        labels={"app": "web", "hash": "7"})
    (c,) = pod.topology_spread
    assert (c.max_skew, c.min_domains, c.node_affinity_policy, c.node_taints_policy) == (2, 1, "Honor", "Ignore")
    assert c.selector.matches({"app": "web", "hash": "7"}) and not c.selector.matches({"app": "web", "hash": "8"})


@pytest.mark.parametrize("constraint, field", [
    pytest.param({"maxSkew": 0, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule"}, "maxSkew", id="maxSkew 0"),
    pytest.param({"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "Never"}, "whenUnsatisfiable",
                 id="an unknown whenUnsatisfiable"),
    pytest.param({"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule", "minDomains": 0},
                 "minDomains", id="minDomains 0"),
    pytest.param({"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule",
                  "nodeTaintsPolicy": "Sometimes"}, "nodeTaintsPolicy", id="an unknown node policy"),
])
def test_a_bad_spread_constraint_makes_the_pod_invalid_naming_the_field(constraint, field):
    pod = _pod_with({"topologySpreadConstraints": [constraint]})
    assert pod.invalid.startswith(f"spec.topologySpreadConstraints[0].{field}")


def test_parsed_terms_are_shared_between_pods_of_one_template_but_not_across_namespaces():
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "k"}
    a, b = _pod_with(_anti(term)), _pod_with(_anti(term))
    c = _pod_with(_anti(term), namespace="other")
    assert a.pod_affinity is b.pod_affinity
    assert c.pod_affinity.required_anti[0].selection.namespaces == frozenset({"other"})


@pytest.mark.parametrize("spec, field", [
    pytest.param({"topologySpreadConstraints": [{"maxSkew": 2**40, "topologyKey": "z",
                                                 "whenUnsatisfiable": "DoNotSchedule"}]},
                 "spec.topologySpreadConstraints[0].maxSkew", id="a maxSkew beyond int32"),
    pytest.param({"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10**30, "podAffinityTerm": {"labelSelector": {}, "topologyKey": "k"}}]}}},
        "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
        id="a preferred weight outside 1-100"),
])
def test_out_of_range_term_numbers_make_the_pod_invalid_and_never_reach_the_counts(spec, field):
    pod = _pod_with(spec)
    assert pod.invalid.startswith(field)
    assert not pod.topology_spread and not (pod.pod_affinity and pod.pod_affinity.preferred)


# ---------------------------------------------------------------------------- volumes


def test_a_pods_claims_include_its_generic_ephemeral_volumes_claims() -> None:
    pod = parse_pod({"metadata": {"name": "web", "namespace": "ns"}, "spec": {"volumes": [
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
        {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "tmp", "emptyDir": {}}]}})
    assert pod.pvcs == ("web-scratch", "data") and pod.ephemeral_pvcs == ("web-scratch",)


def test_a_pods_claim_keys_and_volume_references_are_derived_once_and_follow_a_replace() -> None:
    import dataclasses

    from scheduler.model import pvc_volume_claim_keys
    pod = parse_pod({"metadata": {"name": "web", "namespace": "ns"}, "spec": {"volumes": [
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
        {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "aws", "awsElasticBlockStore": {"volumeID": "vol-1"}}]}})
    assert pod.claim_keys == ("ns/web-scratch", "ns/data")
    assert pvc_volume_claim_keys(pod) == ("ns/data",), "VolumeZone's and VolumeRestrictions' claims: no ephemeral"
    assert pod.volume_refs == (("claim", "ns/web-scratch"), ("claim", "ns/data"), ("inline", "kubernetes.io/aws-ebs", "vol-1"))
    assert pod.disks == (("ebs\0vol-1", False, False),)
    moved = dataclasses.replace(pod, namespace="other")
    assert moved.claim_keys == ("other/web-scratch", "other/data")
    plain = parse_pod({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"volumes": [{"name": "t", "emptyDir": {}}]}})
    assert plain.claim_keys == () and plain.volume_refs == ()


def test_a_claim_is_bound_only_once_the_binding_completed() -> None:
    from scheduler.model import parse_pvc
    raw = {"metadata": {"name": "c", "namespace": "ns", "annotations": {
        "volume.beta.kubernetes.io/storage-class": "beta", "pv.kubernetes.io/bind-completed": "yes"},
        "ownerReferences": [{"uid": "o", "controller": False}, {"uid": "pod-1", "controller": True}]},
        "spec": {"volumeName": "v", "storageClassName": "ga"}, "status": {"phase": "Bound"}}
    c = parse_pvc(raw)
    assert (c.key, c.volume_name, c.storage_class, c.phase, c.controller_uid) == ("ns/c", "v", "beta", "Bound", "pod-1")
    assert c.bound
    assert not parse_pvc({**raw, "metadata": {"name": "c", "namespace": "ns"}}).bound, "pre-bound only"
    assert parse_pvc({"metadata": {"name": "x"}, "spec": {"storageClassName": "ga"}}).storage_class == "ga"


@pytest.mark.parametrize("spec, terms", [
    pytest.param({}, None, id="no node affinity"),
    pytest.param({"nodeAffinity": {}}, None, id="node affinity without required"),
    pytest.param({"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": []}]}}},
                 ({"matchExpressions": []},), id="required terms as written"),
])
def test_a_volumes_node_affinity_is_kept_as_written(spec: dict, terms: object) -> None:
    from scheduler.model import parse_pv, parse_storage_class
    assert parse_pv({"metadata": {"name": "v"}, "spec": spec}).node_affinity_terms == terms
    assert parse_storage_class({"metadata": {"name": "s"}}).binding_mode == "Immediate"
    assert parse_storage_class({"metadata": {"name": "s"},
                                "volumeBindingMode": "WaitForFirstConsumer"}).binding_mode == "WaitForFirstConsumer"
