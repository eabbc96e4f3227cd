"""Tests for bench/simcluster/defaults.py: what the stand-in apiserver does to pods and nodes.

Every table row names the upstream behaviour it mirrors; expected field
paths, cause types and messages are kube-apiserver's.
"""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any, Callable

import pytest

from bench.simcluster import defaults
from bench.simcluster.errors import APIError, FieldError

GiB = 2 ** 30

CLASSES = {
    "high": {"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "PreemptLowerPriority"},
    "batch": {"metadata": {"name": "batch"}, "value": 10, "preemptionPolicy": "Never"},
    "fallback": {"metadata": {"name": "fallback"}, "value": 5, "globalDefault": True,
                 "preemptionPolicy": "PreemptLowerPriority"},
}


def container(name: str = "app", image: str = "nginx:1.25", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": image, **fields}


def raw_pod(**spec: Any) -> dict[str, Any]:
    spec.setdefault("containers", [container()])
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default"}, "spec": spec}


def defaulted(pod: dict[str, Any], default_class: str | None = None) -> dict[str, Any]:
    defaults.default_pod(pod, CLASSES.get, lambda: CLASSES.get(default_class) if default_class else None)
    return pod


def pod(**spec: Any) -> dict[str, Any]:
    return defaulted(raw_pod(**spec))


def causes(errs: list[FieldError]) -> list[tuple[str, str]]:
    return [(e.field, e.type) for e in errs]


def texts(errs: list[FieldError]) -> list[str]:
    return [e.text() for e in errs]


# ---------------------------------------------------------------------------- scheme defaults

def _spec(p: dict[str, Any]) -> dict[str, Any]:
    return p["spec"]


def _c0(p: dict[str, Any]) -> dict[str, Any]:
    return p["spec"]["containers"][0]


DEFAULT_CASES = [
    ("scheduler name defaults to default-scheduler", {}, lambda p: _spec(p)["schedulerName"], "default-scheduler"),
    ("an explicit scheduler name is kept", {"schedulerName": "tandem"}, lambda p: _spec(p)["schedulerName"], "tandem"),
    ("restart policy defaults to Always", {}, lambda p: _spec(p)["restartPolicy"], "Always"),
    ("an explicit restart policy is kept", {"restartPolicy": "Never"}, lambda p: _spec(p)["restartPolicy"], "Never"),
    ("dns policy defaults to ClusterFirst", {}, lambda p: _spec(p)["dnsPolicy"], "ClusterFirst"),
    ("grace period defaults to 30 seconds", {}, lambda p: _spec(p)["terminationGracePeriodSeconds"], 30),
    ("a grace period of zero is kept", {"terminationGracePeriodSeconds": 0},
     lambda p: _spec(p)["terminationGracePeriodSeconds"], 0),
    ("security context defaults to empty", {}, lambda p: _spec(p)["securityContext"], {}),
    ("service links are enabled by default", {}, lambda p: _spec(p)["enableServiceLinks"], True),
    ("disabled service links stay disabled", {"enableServiceLinks": False},
     lambda p: _spec(p)["enableServiceLinks"], False),
    ("termination message path defaults", {}, lambda p: _c0(p)["terminationMessagePath"], "/dev/termination-log"),
    ("termination message policy defaults to File", {}, lambda p: _c0(p)["terminationMessagePolicy"], "File"),
    ("an image without tag is pulled Always", {"containers": [container(image="nginx")]},
     lambda p: _c0(p)["imagePullPolicy"], "Always"),
    ("a latest image is pulled Always", {"containers": [container(image="nginx:latest")]},
     lambda p: _c0(p)["imagePullPolicy"], "Always"),
    ("a tagged image is pulled IfNotPresent", {"containers": [container(image="nginx:1.25")]},
     lambda p: _c0(p)["imagePullPolicy"], "IfNotPresent"),
    ("a registry port is not a tag", {"containers": [container(image="registry:5000/team/app")]},
     lambda p: _c0(p)["imagePullPolicy"], "Always"),
    ("a tag after a registry port counts", {"containers": [container(image="registry:5000/app:v2")]},
     lambda p: _c0(p)["imagePullPolicy"], "IfNotPresent"),
    ("a digest without tag is pulled IfNotPresent",
     {"containers": [container(image="nginx@sha256:" + "a" * 64)]},
     lambda p: _c0(p)["imagePullPolicy"], "IfNotPresent"),
    ("an explicit pull policy is kept", {"containers": [container(image="nginx", imagePullPolicy="Never")]},
     lambda p: _c0(p)["imagePullPolicy"], "Never"),
    ("init containers get a pull policy too", {"initContainers": [container("init", image="busybox")]},
     lambda p: _spec(p)["initContainers"][0]["imagePullPolicy"], "Always"),
    ("a limit without a request becomes the request",
     {"containers": [container(resources={"limits": {"cpu": "2", "memory": "1Gi"}})]},
     lambda p: _c0(p)["resources"]["requests"], {"cpu": "2", "memory": "1Gi"}),
    ("an explicit request is not overwritten by the limit",
     {"containers": [container(resources={"limits": {"cpu": "2"}, "requests": {"cpu": "500m"}})]},
     lambda p: _c0(p)["resources"]["requests"], {"cpu": "500m"}),
    ("init container limits become requests too",
     {"initContainers": [container("init", resources={"limits": {"memory": "64Mi"}})]},
     lambda p: _spec(p)["initContainers"][0]["resources"]["requests"], {"memory": "64Mi"}),
    ("requests alone are left alone", {"containers": [container(resources={"requests": {"cpu": "1"}})]},
     lambda p: _c0(p)["resources"], {"requests": {"cpu": "1"}}),
    ("a container port defaults to TCP", {"containers": [container(ports=[{"containerPort": 80}])]},
     lambda p: _c0(p)["ports"][0]["protocol"], "TCP"),
    ("a host-network pod's ports are host ports",
     {"hostNetwork": True, "containers": [container(ports=[{"containerPort": 8080}])]},
     lambda p: _c0(p)["ports"][0]["hostPort"], 8080),
    ("a new pod is Pending", {}, lambda p: p["status"]["phase"], "Pending"),
    ("a gated pod reads PodScheduled=False/SchedulingGated", {"schedulingGates": [{"name": "example.com/q"}]},
     lambda p: [(c["type"], c["status"], c["reason"], c["message"]) for c in p["status"]["conditions"]],
     [("PodScheduled", "False", "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates")]),
    ("an ungated pod has no conditions", {}, lambda p: p["status"].get("conditions"), None),
]


@pytest.mark.parametrize("spec,get,want", [c[1:] for c in DEFAULT_CASES], ids=[c[0] for c in DEFAULT_CASES])
def test_default_pod_sets(spec: dict[str, Any], get: Callable[[dict[str, Any]], Any], want: Any) -> None:
    assert get(pod(**copy.deepcopy(spec))) == want


def test_status_sent_by_the_client_is_replaced_on_create() -> None:
    p = raw_pod()
    p["status"] = {"phase": "Running", "podIP": "10.0.0.1", "qosClass": "Guaranteed"}
    defaulted(p)
    assert p["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


@pytest.mark.parametrize("spec", [
    {"containers": "not-a-list"},
    {"containers": [42, container()]},
    {"containers": [container(resources="lots")]},
    {"containers": [container(resources={"limits": ["1"]})]},
    {"containers": [container(resources={"limits": {"cpu": "bogus"}})]},
    {"tolerations": {"key": "x"}},
    {"tolerations": [{"key": ["x"]}]},
    {"priorityClassName": 7},
], ids=[
    "containers that are not a list",
    "a container that is not an object",
    "resources that are not an object",
    "limits that are not an object",
    "a limit that is not a quantity",
    "tolerations that are not a list",
    "a toleration key that is not a string",
    "a priority class name that is not a string",
])
def test_malformed_pods_are_defaulted_without_crashing_and_rejected_by_validation(spec: dict[str, Any]) -> None:
    p = defaulted({"metadata": {"name": "web", "namespace": "default"}, "spec": spec})
    assert defaults.validate_pod_create(p)


# ---------------------------------------------------------------------------- QoS

def _res(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if requests is not None:
        out["requests"] = requests
    if limits is not None:
        out["limits"] = limits
    return out


GUARANTEED = _res(limits={"cpu": "1", "memory": "1Gi"})
QOS_CASES = [
    ("no requests or limits is BestEffort", [{}], [], "BestEffort"),
    ("requests for other resources only is BestEffort", [_res(requests={"ephemeral-storage": "1Gi"})], [],
     "BestEffort"),
    ("cpu and memory limits alone are Guaranteed", [GUARANTEED], [], "Guaranteed"),
    ("equal requests and limits are Guaranteed",
     [_res(requests={"cpu": "1000m", "memory": "1024Mi"}, limits={"cpu": "1", "memory": "1Gi"})], [], "Guaranteed"),
    ("a request below its limit is Burstable",
     [_res(requests={"cpu": "500m", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"})], [], "Burstable"),
    ("a cpu limit without a memory limit is Burstable", [_res(limits={"cpu": "1"})], [], "Burstable"),
    ("requests without limits are Burstable", [_res(requests={"cpu": "100m"})], [], "Burstable"),
    ("one BestEffort container makes the pod Burstable", [GUARANTEED, {}], [], "Burstable"),
    ("Guaranteed containers and Guaranteed init containers stay Guaranteed", [GUARANTEED], [GUARANTEED],
     "Guaranteed"),
    ("a BestEffort init container spoils Guaranteed", [GUARANTEED], [{}], "Burstable"),
    ("an init container's request alone makes the pod Burstable", [{}], [_res(requests={"memory": "10Mi"})],
     "Burstable"),
    ("zero requests count as none", [_res(requests={"cpu": "0", "memory": "0"})], [], "BestEffort"),
]


@pytest.mark.parametrize("resources,init_resources,want", [c[1:] for c in QOS_CASES], ids=[c[0] for c in QOS_CASES])
def test_qos_class(resources: list[dict[str, Any]], init_resources: list[dict[str, Any]], want: str) -> None:
    containers = [container(f"c{i}", resources=copy.deepcopy(r)) for i, r in enumerate(resources)]
    inits = [container(f"i{i}", resources=copy.deepcopy(r)) for i, r in enumerate(init_resources)]
    p = pod(containers=containers, initContainers=inits)
    assert p["status"]["qosClass"] == want


# ---------------------------------------------------------------------------- Priority admission

PRIORITY_CASES = [
    ("a named class sets priority and preemption policy", {"priorityClassName": "batch"}, None,
     ("batch", 10, "Never")),
    ("the global default class applies when no class is named", {}, "fallback",
     ("fallback", 5, "PreemptLowerPriority")),
    ("a named class wins over the global default", {"priorityClassName": "high"}, "fallback",
     ("high", 1000, "PreemptLowerPriority")),
    ("without any class the priority is zero", {}, None, (None, 0, "PreemptLowerPriority")),
    ("a priority equal to the class value is accepted", {"priorityClassName": "high", "priority": 1000}, None,
     ("high", 1000, "PreemptLowerPriority")),
    ("a preemption policy equal to the class's is accepted",
     {"priorityClassName": "batch", "preemptionPolicy": "Never"}, None, ("batch", 10, "Never")),
]


@pytest.mark.parametrize("spec,default_class,want", [c[1:] for c in PRIORITY_CASES],
                         ids=[c[0] for c in PRIORITY_CASES])
def test_priority_admission_resolves(spec: dict[str, Any], default_class: str | None,
                                     want: tuple[str | None, int, str]) -> None:
    s = defaulted(raw_pod(**spec), default_class)["spec"]
    assert (s.get("priorityClassName"), s["priority"], s["preemptionPolicy"]) == want


PRIORITY_REJECTIONS = [
    ("a missing class is forbidden", {"priorityClassName": "gold"}, None,
     'pods "web" is forbidden: no PriorityClass with name gold was found'),
    ("an explicit priority that differs from the class is forbidden", {"priorityClassName": "high", "priority": 7},
     None, 'pods "web" is forbidden: the integer value of priority (7) must not be provided in pod spec; '
           "priority admission controller computed 1000 from the given PriorityClass name"),
    ("an explicit priority without any class must be zero", {"priority": 3}, None,
     'pods "web" is forbidden: the integer value of priority (3) must not be provided in pod spec; '
     "priority admission controller computed 0 from the given PriorityClass name"),
    ("an explicit preemption policy that differs from the class is forbidden",
     {"priorityClassName": "high", "preemptionPolicy": "Never"}, None,
     'pods "web" is forbidden: the string value of PreemptionPolicy (Never) must not be provided in pod spec; '
     "priority admission controller computed PreemptLowerPriority from the given PriorityClass name"),
]


@pytest.mark.parametrize("spec,default_class,message", [c[1:] for c in PRIORITY_REJECTIONS],
                         ids=[c[0] for c in PRIORITY_REJECTIONS])
def test_priority_admission_rejects(spec: dict[str, Any], default_class: str | None, message: str) -> None:
    with pytest.raises(APIError) as info:
        defaulted(raw_pod(**spec), default_class)
    err = info.value
    assert (err.code, err.reason, err.message) == (403, "Forbidden", message)
    assert err.details == {"name": "web", "kind": "pods"}


def test_a_forbidden_pod_with_generate_name_is_named_by_its_prefix() -> None:
    p = raw_pod(priorityClassName="gold")
    p["metadata"] = {"generateName": "web-", "namespace": "default"}
    with pytest.raises(APIError) as info:
        defaulted(p)
    assert info.value.message == 'pods "web-" is forbidden: no PriorityClass with name gold was found'


# ---------------------------------------------------------------------------- DefaultTolerationSeconds

NOT_READY = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300}
UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
               "tolerationSeconds": 300}
TOLERATION_CASES = [
    ("a pod without tolerations gets both", None, [NOT_READY, UNREACHABLE]),
    ("an existing not-ready toleration is kept and only unreachable is added",
     [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}],
     [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
      UNREACHABLE]),
    ("a toleration with an empty effect covers the taint",
     [{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}],
     [{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}, NOT_READY]),
    ("a tolerate-everything toleration needs nothing more", [{"operator": "Exists"}], [{"operator": "Exists"}]),
    ("a NoSchedule toleration for not-ready does not count",
     [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}],
     [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}, NOT_READY, UNREACHABLE]),
]


@pytest.mark.parametrize("tolerations,want", [c[1:] for c in TOLERATION_CASES], ids=[c[0] for c in TOLERATION_CASES])
def test_default_toleration_seconds(tolerations: list[dict[str, Any]] | None, want: list[dict[str, Any]]) -> None:
    spec = {} if tolerations is None else {"tolerations": copy.deepcopy(tolerations)}
    assert pod(**spec)["spec"]["tolerations"] == want


# ---------------------------------------------------------------------------- quantities

VALID_QUANTITIES = [
    ("1.5", Fraction(3, 2)), ("100m", Fraction(1, 10)), ("2Gi", 2 * GiB), ("1e3", 1000), ("1E3", 1000),
    ("1e-3", Fraction(1, 1000)), ("1.5e3", 1500), ("5n", Fraction(5, 10 ** 9)), ("250u", Fraction(1, 4000)),
    ("1k", 1000), ("1M", 10 ** 6), ("1G", 10 ** 9), ("1T", 10 ** 12), ("1P", 10 ** 15), ("1E", 10 ** 18),
    ("1Ki", 1024), ("1Mi", 2 ** 20), ("1.5Gi", 3 * 2 ** 29), ("1Ti", 2 ** 40), ("1Pi", 2 ** 50), ("1Ei", 2 ** 60),
    ("0", 0), ("000", 0), ("+3", 3), ("-1", -1), ("1.", 1), (".5", Fraction(1, 2)),
    ("0.1n", Fraction(1, 10 ** 9)), (0.5, Fraction(1, 2)), (2, 2), (1e-05, Fraction(1, 100000)),
]


@pytest.mark.parametrize("text,want", VALID_QUANTITIES, ids=[f"{t!r} parses" for t, _ in VALID_QUANTITIES])
def test_parse_quantity_accepts(text: Any, want: Fraction) -> None:
    assert defaults.parse_quantity(text) == want


FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
SUFFIX = "unable to parse quantity's suffix"
INVALID_QUANTITIES = [
    ("1.5.3", FORMAT), ("abc", FORMAT), ("", FORMAT), (" 1", FORMAT), ("1 ", FORMAT), ("1Kib", FORMAT),
    ("1K", SUFFIX), ("1e", SUFFIX), ("1ee", SUFFIX), ("1Mm", SUFFIX), (True, FORMAT), (None, FORMAT),
]


@pytest.mark.parametrize("text,message", INVALID_QUANTITIES, ids=[f"{t!r} is rejected" for t, _ in INVALID_QUANTITIES])
def test_parse_quantity_rejects(text: Any, message: str) -> None:
    with pytest.raises(defaults.QuantityError) as info:
        defaults.parse_quantity(text)
    assert str(info.value) == message


# ---------------------------------------------------------------------------- create validation

def with_resources(resources: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def mutate(p: dict[str, Any]) -> None:
        p["spec"]["containers"][0]["resources"] = resources
    return mutate


def set_spec(**fields: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(p: dict[str, Any]) -> None:
        p["spec"].update(copy.deepcopy(fields))
    return mutate


def node_affinity_term(*exprs: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": list(exprs)}]}}}


TERM = ("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0]")
DNS_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
                 "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                 "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")

CREATE_CASES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("a pod needs at least one container", set_spec(containers=[]), "spec.containers: Required value"),
    ("container names must be unique",
     set_spec(containers=[container("app"), container("app")]),
     'spec.containers[1].name: Duplicate value: "app"'),
    ("container names must be DNS labels", set_spec(containers=[container("Web_1")]),
     f'spec.containers[0].name: Invalid value: "Web_1": {DNS_LABEL_MSG}'),
    ("container names may not contain dots", set_spec(containers=[container("a.b")]),
     'spec.containers[0].name: Invalid value: "a.b": must not contain dots'),
    ("an init container may not reuse a container name",
     set_spec(initContainers=[container("app", imagePullPolicy="Always", terminationMessagePolicy="File")]),
     'spec.initContainers[0].name: Duplicate value: "app"'),
    ("a container needs an image", set_spec(containers=[container(image="", imagePullPolicy="Always",
                                                                  terminationMessagePolicy="File")]),
     "spec.containers[0].image: Required value"),
    ("an image may not be padded with spaces", set_spec(containers=[container(image=" nginx ", imagePullPolicy="Always",
                                                                              terminationMessagePolicy="File")]),
     'spec.containers[0].image: Invalid value: " nginx ": must not have leading or trailing whitespace'),
    ("a malformed quantity is invalid where it stands", with_resources({"requests": {"cpu": "1.5.3"}}),
     f'spec.containers[0].resources.requests[cpu]: Invalid value: "1.5.3": {FORMAT}'),
    ("a word is not a quantity", with_resources({"limits": {"memory": "abc"}}),
     f'spec.containers[0].resources.limits[memory]: Invalid value: "abc": {FORMAT}'),
    ("a bad suffix is reported as such", with_resources({"requests": {"memory": "1K"}}),
     f'spec.containers[0].resources.requests[memory]: Invalid value: "1K": {SUFFIX}'),
    ("a negative quantity is invalid", with_resources({"requests": {"cpu": "-1"}}),
     'spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0'),
    ("a request above its limit is invalid on the requests map",
     with_resources({"requests": {"cpu": "1"}, "limits": {"cpu": "500m"}}),
     'spec.containers[0].resources.requests: Invalid value: "1": must be less than or equal to cpu limit of 500m'),
    ("binary quantities are printed canonically in messages",
     with_resources({"requests": {"memory": "1.5Gi"}, "limits": {"memory": "1Gi"}}),
     'spec.containers[0].resources.requests: Invalid value: "1536Mi": '
     "must be less than or equal to memory limit of 1Gi"),
    ("an unknown resource name is not a container resource", with_resources({"requests": {"gpu": "1"}}),
     'spec.containers[0].resources.requests[gpu]: Invalid value: "gpu": must be a standard resource for containers'),
    ("an extended resource request needs a limit", with_resources({"requests": {"example.com/gpu": "1"}}),
     "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"),
    ("an extended resource must be whole",
     with_resources({"requests": {"example.com/gpu": "500m"}, "limits": {"example.com/gpu": "500m"}}),
     'spec.containers[0].resources.limits[example.com/gpu]: Invalid value: "500m": must be an integer'),
    ("an extended resource request must equal its limit",
     with_resources({"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "2"}}),
     'spec.containers[0].resources.requests: Invalid value: "1": must be equal to example.com/gpu limit of 2'),
    ("Exists with a value is invalid",
     set_spec(tolerations=[{"key": "k", "operator": "Exists", "value": "v"}]),
     "spec.tolerations[0].operator: Invalid value: \"v\": value must be empty when `operator` is 'Exists'"),
    ("an unknown toleration operator is unsupported", set_spec(tolerations=[{"key": "k", "operator": "Gt"}]),
     'spec.tolerations[0].operator: Unsupported value: "Gt": supported values: "Equal", "Exists"'),
    ("an unknown toleration effect is unsupported",
     set_spec(tolerations=[{"key": "k", "operator": "Exists", "effect": "NoRun"}]),
     'spec.tolerations[0].effect: Unsupported value: "NoRun": supported values: '
     '"NoSchedule", "PreferNoSchedule", "NoExecute"'),
    ("an empty key needs the Exists operator", set_spec(tolerations=[{"operator": "Equal", "value": "v"}]),
     'spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when `key` is empty, '
     'which means "match all values and all keys"'),
    ("toleration seconds need NoExecute",
     set_spec(tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]),
     "spec.tolerations[0].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when "
     "`tolerationSeconds` is set"),
    ("an unknown node selector operator is invalid",
     set_spec(affinity=node_affinity_term({"key": "zone", "operator": "Near", "values": ["a"]})),
     f'{TERM}.operator: Invalid value: "Near": not a valid selector operator'),
    ("In needs values", set_spec(affinity=node_affinity_term({"key": "zone", "operator": "In"})),
     f"{TERM}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'"),
    ("Exists takes no values",
     set_spec(affinity=node_affinity_term({"key": "zone", "operator": "Exists", "values": ["a"]})),
     f"{TERM}.values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
    ("Gt takes exactly one value",
     set_spec(affinity=node_affinity_term({"key": "cores", "operator": "Gt", "values": ["1", "2"]})),
     f"{TERM}.values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"),
    ("required node affinity needs a term",
     set_spec(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}),
     "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: "
     "Required value: must have at least one node selector term"),
    ("a preferred term needs a weight from 1 to 100",
     set_spec(affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
         {"weight": 0, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}]}}),
     "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
     "Invalid value: 0: must be in the range 1-100"),
    ("a pod affinity term needs a topology key",
     set_spec(affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
         {"labelSelector": {"matchLabels": {"app": "db"}}}]}}),
     "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: "
     "Required value: can not be empty"),
    ("whenUnsatisfiable must be a known action",
     set_spec(topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Maybe"}]),
     'spec.topologySpreadConstraints[0].whenUnsatisfiable: Unsupported value: "Maybe": '
     'supported values: "DoNotSchedule", "ScheduleAnyway"'),
    ("maxSkew must be positive",
     set_spec(topologySpreadConstraints=[{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]),
     "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero"),
    ("a spread constraint may not repeat key and action",
     set_spec(topologySpreadConstraints=[
         {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
         {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]),
     'spec.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}: Duplicate value: "{zone, DoNotSchedule}"'),
    ("minDomains needs DoNotSchedule",
     set_spec(topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
                                          "minDomains": 2}]),
     "spec.topologySpreadConstraints[0].minDomains: Invalid value: 2: "
     "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"),
    ("scheduling gate names must be unique",
     set_spec(schedulingGates=[{"name": "example.com/q"}, {"name": "example.com/q"}]),
     'spec.schedulingGates[1]: Duplicate value: "example.com/q"'),
    ("a gated pod may not name a node",
     set_spec(schedulingGates=[{"name": "example.com/q"}], nodeName="node-1"),
     "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"),
    ("node selector values must be label values", set_spec(nodeSelector={"zone": "a b"}),
     'spec.nodeSelector: Invalid value: "a b": a valid label must be an empty string or consist of alphanumeric '
     "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
     "'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
     ),
    ("an unknown restart policy is unsupported", set_spec(restartPolicy="Sometimes"),
     'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"'),
    ("an unknown preemption policy is unsupported", set_spec(preemptionPolicy="Maybe"),
     'spec.preemptionPolicy: Unsupported value: "Maybe": supported values: "PreemptLowerPriority", "Never"'),
    ("an active deadline must be positive", set_spec(activeDeadlineSeconds=0),
     "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive"),
    ("two containers may not claim one host port",
     set_spec(containers=[
         container("a", imagePullPolicy="Always", terminationMessagePolicy="File",
                   ports=[{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}]),
         container("b", imagePullPolicy="Always", terminationMessagePolicy="File",
                   ports=[{"containerPort": 81, "hostPort": 8080, "protocol": "TCP"}])]),
     'spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//8080"'),
    ("an unknown port protocol is unsupported",
     set_spec(containers=[container(imagePullPolicy="Always", terminationMessagePolicy="File",
                                    ports=[{"containerPort": 80, "protocol": "HTTP"}])]),
     'spec.containers[0].ports[0].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"'),
    ("ephemeral containers cannot be created with the pod",
     set_spec(ephemeralContainers=[container("debug", imagePullPolicy="Always", terminationMessagePolicy="File")]),
     "spec.ephemeralContainers: Forbidden: cannot be set on create"),
]


@pytest.mark.parametrize("mutate,want", [c[1:] for c in CREATE_CASES], ids=[c[0] for c in CREATE_CASES])
def test_validate_pod_create_reports(mutate: Callable[[dict[str, Any]], None], want: str) -> None:
    p = pod()
    mutate(p)
    assert want in texts(defaults.validate_pod_create(p))


@pytest.mark.parametrize("spec", [
    {},
    {"containers": [container(resources={"limits": {"cpu": "1", "memory": "1Gi", "example.com/gpu": "2"}})]},
    {"affinity": node_affinity_term({"key": "zone", "operator": "In", "values": ["a", "b"]},
                                    {"key": "cores", "operator": "Gt", "values": ["4"]})},
    {"tolerations": [{"operator": "Exists"}], "schedulingGates": [{"name": "example.com/q"}]},
    {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                    "labelSelector": {"matchLabels": {"app": "web"}}, "minDomains": 3}]},
    {"initContainers": [container("init", restartPolicy="Always")], "priorityClassName": "high"},
], ids=[
    "a minimal pod is valid",
    "limits with an extended resource are valid",
    "node affinity with In and Gt is valid",
    "a gated pod tolerating everything is valid",
    "a spread constraint with minDomains is valid",
    "a sidecar init container is valid",
])
def test_valid_pods_have_no_errors(spec: dict[str, Any]) -> None:
    p = pod(**copy.deepcopy(spec))
    assert defaults.validate_pod_create(p) == []
    assert defaults.validate_object_meta(p, namespaced=True) == []


# ---------------------------------------------------------------------------- object meta

def meta(**fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "default", **fields}}


DNS_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                     "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                     "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
META_CASES = [
    ("a name must be a DNS subdomain", meta(name="Web_1"), True,
     f'metadata.name: Invalid value: "Web_1": {DNS_SUBDOMAIN_MSG}'),
    ("a name is required", {"metadata": {"namespace": "default"}}, True,
     "metadata.name: Required value: name or generateName is required"),
    ("a namespaced object needs a namespace", {"metadata": {"name": "web"}}, True,
     "metadata.namespace: Required value"),
    ("a cluster-scoped object may not have a namespace", meta(), False,
     "metadata.namespace: Forbidden: not allowed on this type"),
    ("a label key may have one prefix only", meta(labels={"a/b/c": "x"}), True,
     'metadata.labels: Invalid value: "a/b/c": a valid label key must consist of alphanumeric characters, '
     "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
     "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS "
     "subdomain prefix and '/' (e.g. 'example.com/MyName')"),
    ("a label key name part may not be empty", meta(labels={"example.com/": "x"}), True,
     'metadata.labels: Invalid value: "example.com/": name part must be non-empty'),
    ("a label key name part is at most 63 bytes", meta(labels={"k" * 64: "x"}), True,
     f'metadata.labels: Invalid value: "{"k" * 64}": name part must be no more than 63 bytes'),
    ("a label value is at most 63 bytes", meta(labels={"k": "v" * 64}), True,
     f'metadata.labels: Invalid value: "{"v" * 64}": must be no more than 63 bytes'),
    ("an annotation key must be a qualified name", meta(annotations={"bad key": "x"}), True,
     'metadata.annotations: Invalid value: "bad key": name part must consist of alphanumeric characters, '
     "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
     "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
    ("annotations may total 256 KiB", meta(annotations={"a": "x" * (256 * 1024)}), True,
     "metadata.annotations: Too long: may not be more than 262144 bytes"),
    ("a bad generateName is reported", meta(generateName="Web-"), True,
     f'metadata.generateName: Invalid value: "Web-": {DNS_SUBDOMAIN_MSG}'),
]


@pytest.mark.parametrize("obj,namespaced,want", [c[1:] for c in META_CASES], ids=[c[0] for c in META_CASES])
def test_validate_object_meta_reports(obj: dict[str, Any], namespaced: bool, want: str) -> None:
    assert want in texts(defaults.validate_object_meta(obj, namespaced))


@pytest.mark.parametrize("obj", [
    meta(generateName="web-"),
    meta(labels={"app.kubernetes.io/name": "web", "tier": ""}, annotations={"Example.com/Owner": "team-a"}),
    {"metadata": {"name": "node-1.example.com"}},
], ids=[
    "a generateName may end in a dash",
    "prefixed labels, empty label values and mixed-case annotation keys are fine",
    "a cluster-scoped object without namespace is fine",
])
def test_valid_object_meta(obj: dict[str, Any]) -> None:
    namespaced = "namespace" in obj["metadata"]
    assert defaults.validate_object_meta(obj, namespaced) == []


# ---------------------------------------------------------------------------- update validation

FORBIDDEN_SPEC = "pod updates may not change fields other than "


def gated_pod(**spec: Any) -> dict[str, Any]:
    return pod(schedulingGates=[{"name": "example.com/a"}, {"name": "example.com/b"}], **spec)


def change(**fields: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(p: dict[str, Any]) -> None:
        for k, v in fields.items():
            if v is None:
                p["spec"].pop(k, None)
            else:
                p["spec"][k] = copy.deepcopy(v)
    return mutate


def _set_image(p: dict[str, Any]) -> None:
    p["spec"]["containers"][0]["image"] = "nginx:1.26"


def _set_init_image(p: dict[str, Any]) -> None:
    p["spec"]["initContainers"][0]["image"] = "busybox:2"


def _add_container(p: dict[str, Any]) -> None:
    p["spec"]["containers"].append(container("sidecar", imagePullPolicy="Always", terminationMessagePolicy="File"))


def _raise_cpu(p: dict[str, Any]) -> None:
    p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2"}}


def _respell_quantity(p: dict[str, Any]) -> None:
    p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1000m"


def _add_toleration(p: dict[str, Any]) -> None:
    p["spec"]["tolerations"].append({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"})


def _drop_toleration(p: dict[str, Any]) -> None:
    p["spec"]["tolerations"].pop()


def _shorten_toleration(p: dict[str, Any]) -> None:
    p["spec"]["tolerations"][0]["tolerationSeconds"] = 10


def _add_gate(p: dict[str, Any]) -> None:
    p["spec"]["schedulingGates"].append({"name": "example.com/c"})


def _drop_gate(p: dict[str, Any]) -> None:
    p["spec"]["schedulingGates"].pop(0)


def _narrow_affinity(p: dict[str, Any]) -> None:
    p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"].append({"key": "disk", "operator": "In", "values": ["ssd"]})


def _widen_affinity(p: dict[str, Any]) -> None:
    p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"] = []


def _spell_out_empty_fields(p: dict[str, Any]) -> None:
    p["spec"].update(hostNetwork=False, volumes=[], nodeSelector=None)


ZONE = node_affinity_term({"key": "zone", "operator": "In", "values": ["a"]})
UPDATE_CASES: list[tuple[str, Callable[[], dict[str, Any]], Callable[[dict[str, Any]], None], list[str]]] = [
    ("a container image may change", pod, _set_image, []),
    ("an init container image may change", lambda: pod(initContainers=[container("init", image="busybox:1")]),
     _set_init_image, []),
    ("an active deadline may be set", pod, change(activeDeadlineSeconds=60), []),
    ("an active deadline may be lowered", lambda: pod(activeDeadlineSeconds=60), change(activeDeadlineSeconds=30), []),
    ("an active deadline may not be raised", lambda: pod(activeDeadlineSeconds=60),
     change(activeDeadlineSeconds=90),
     ["spec.activeDeadlineSeconds: Invalid value: 90: must be less than or equal to previous value"]),
    ("an active deadline may not be removed", lambda: pod(activeDeadlineSeconds=60),
     change(activeDeadlineSeconds=None),
     ["spec.activeDeadlineSeconds: Invalid value: null: must not update from a positive integer to nil value"]),
    ("a toleration may be added", pod, _add_toleration, []),
    ("a NoExecute toleration's seconds may change", pod, _shorten_toleration, []),
    ("a toleration may not be removed", pod, _drop_toleration,
     ["spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"]),
    ("a scheduling gate may be removed", gated_pod, _drop_gate, []),
    ("all scheduling gates may be removed", gated_pod, change(schedulingGates=None), []),
    ("a scheduling gate may not be added", gated_pod, _add_gate,
     ["spec.schedulingGates[2].name: Forbidden: only deletion is allowed, but found new scheduling gate "
      "'example.com/c'"]),
    ("a gated pod may gain node selector entries", lambda: gated_pod(nodeSelector={"zone": "a"}),
     change(nodeSelector={"zone": "a", "disk": "ssd"}), []),
    ("a gated pod may not change a node selector entry", lambda: gated_pod(nodeSelector={"zone": "a"}),
     change(nodeSelector={"zone": "b"}),
     ['spec.nodeSelector: Invalid value: {"zone":"b"}: only additions to spec.nodeSelector are allowed '
      "(no mutations or deletions)"]),
    ("a gated pod's required node affinity may be narrowed", lambda: gated_pod(affinity=ZONE), _narrow_affinity, []),
    ("a gated pod's required node affinity may not be widened", lambda: gated_pod(affinity=ZONE), _widen_affinity,
     ['spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]: '
      'Invalid value: {"matchExpressions":[]}: only additions are allowed (no mutations or deletions)']),
    ("a gated pod may gain node affinity", gated_pod, change(affinity=ZONE), []),
    ("a quantity spelled differently is not a change",
     lambda: pod(containers=[container(resources={"requests": {"cpu": "1"}})]), _respell_quantity, []),
    ("spelling out empty fields is not a change", pod, _spell_out_empty_fields, []),
]


@pytest.mark.parametrize("make,mutate,want", [c[1:] for c in UPDATE_CASES], ids=[c[0] for c in UPDATE_CASES])
def test_validate_pod_update(make: Callable[[], dict[str, Any]], mutate: Callable[[dict[str, Any]], None],
                             want: list[str]) -> None:
    old = make()
    new = copy.deepcopy(old)
    mutate(new)
    assert texts(defaults.validate_pod_update(old, new)) == want


FORBIDDEN_UPDATES: list[tuple[str, Callable[[], dict[str, Any]], Callable[[dict[str, Any]], None]]] = [
    ("the node name may not be changed by an update", lambda: pod(nodeName="node-1"), change(nodeName="node-2")),
    ("the node name may not be set by an update", pod, change(nodeName="node-1")),
    ("container resources may not change", pod, _raise_cpu),
    ("an ungated pod may not gain a node selector", pod, change(nodeSelector={"zone": "a"})),
    ("the priority may not change", pod, change(priority=5)),
]


@pytest.mark.parametrize("make,mutate", [c[1:] for c in FORBIDDEN_UPDATES], ids=[c[0] for c in FORBIDDEN_UPDATES])
def test_forbidden_pod_updates_use_upstream_wording(make: Callable[[], dict[str, Any]],
                                                    mutate: Callable[[dict[str, Any]], None]) -> None:
    old = make()
    new = copy.deepcopy(old)
    mutate(new)
    errs = defaults.validate_pod_update(old, new)
    assert causes(errs) == [("spec", "FieldValueForbidden")]
    assert errs[0].message().startswith(
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
        "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to "
        "existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
        "previously negative)\n")


def test_adding_a_container_is_refused_before_anything_else() -> None:
    old = pod()
    new = copy.deepcopy(old)
    _add_container(new)
    assert texts(defaults.validate_pod_update(old, new)) == [
        "spec.containers: Forbidden: pod updates may not add or remove containers"]


def test_a_put_without_defaults_or_priority_is_accepted_after_admission() -> None:
    old = pod(priorityClassName="high")
    body = raw_pod(priorityClassName="high")  # as a client would build it from its own template
    defaults.admit_pod_update(old, body)
    assert body["spec"]["priority"] == 1000
    assert defaults.validate_pod_update(old, body) == []


# ---------------------------------------------------------------------------- status updates

def with_status(**status: Any) -> dict[str, Any]:
    p = pod()
    p["status"].update(status)
    return p


STATUS_CASES = [
    ("a pending pod may start running", with_status(), {"phase": "Running", "qosClass": "BestEffort"}, []),
    ("a running pod may succeed", with_status(phase="Running"), {"phase": "Succeeded", "qosClass": "BestEffort"}, []),
    ("an empty qos class is backfilled, not refused", with_status(phase="Running"), {"phase": "Running"}, []),
    ("a succeeded pod may not run again", with_status(phase="Succeeded"), {"phase": "Running"},
     ["status.phase: Forbidden: may not be transitioned from terminal phase Succeeded to Running"]),
    ("a failed pod may not go back to pending", with_status(phase="Failed"), {"phase": "Pending"},
     ["status.phase: Forbidden: may not be transitioned from terminal phase Failed to Pending"]),
    ("the qos class is immutable", with_status(), {"phase": "Pending", "qosClass": "Guaranteed"},
     ['status.qosClass: Invalid value: "Guaranteed": field is immutable']),
    ("a nominated node must be a node name", with_status(), {"phase": "Pending", "nominatedNodeName": "Node_1"},
     [f'status.nominatedNodeName: Invalid value: "Node_1": {DNS_SUBDOMAIN_MSG}']),
]


@pytest.mark.parametrize("old,status,want", [c[1:] for c in STATUS_CASES], ids=[c[0] for c in STATUS_CASES])
def test_validate_pod_status_update(old: dict[str, Any], status: dict[str, Any], want: list[str]) -> None:
    new = dict(old)
    new["status"] = status
    assert texts(defaults.validate_pod_status_update(old, new)) == want


# ---------------------------------------------------------------------------- nodes

def node(taints: list[dict[str, Any]] | None = None, **status: Any) -> dict[str, Any]:
    n: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}, "spec": {},
                         "status": status}
    if taints is not None:
        n["spec"]["taints"] = taints
    return n


@pytest.mark.parametrize("status,want", [
    ({"capacity": {"cpu": "8", "memory": "32Gi"}}, {"cpu": "8", "memory": "32Gi"}),
    ({"capacity": {"cpu": "8"}, "allocatable": {"cpu": "7500m"}}, {"cpu": "7500m"}),
    ({}, None),
], ids=[
    "allocatable defaults to capacity",
    "a reported allocatable is kept",
    "no capacity leaves allocatable unset",
])
def test_default_node_allocatable(status: dict[str, Any], want: dict[str, str] | None) -> None:
    n = node(**copy.deepcopy(status))
    defaults.default_node(n)
    assert n["status"].get("allocatable") == want


def test_defaulted_allocatable_is_not_the_capacity_object() -> None:
    n = node(capacity={"cpu": "8"})
    defaults.default_node(n)
    n["status"]["allocatable"]["cpu"] = "7"
    assert n["status"]["capacity"] == {"cpu": "8"}


NODE_CASES = [
    ("a taint effect must be known", node([{"key": "gpu", "effect": "NoRun"}]),
     'metadata.taints[0].effect: Unsupported value: "NoRun": supported values: '
     '"NoSchedule", "PreferNoSchedule", "NoExecute"'),
    ("a taint needs an effect", node([{"key": "gpu"}]), "metadata.taints[0].effect: Required value"),
    ("a taint key must be a qualified name", node([{"key": "a/b/c", "effect": "NoSchedule"}]),
     'metadata.taints[0].key: Invalid value: "a/b/c": a valid label key'),
    ("a taint may not repeat key and effect",
     node([{"key": "gpu", "effect": "NoSchedule"}, {"key": "gpu", "value": "x", "effect": "NoSchedule"}]),
     'metadata.taints[1]: Duplicate value: {"key":"gpu","value":"x","effect":"NoSchedule"}: '
     "taints must be unique by key and effect pair"),
    ("capacity must be quantities", node(capacity={"cpu": "eight"}),
     f'status.capacity.cpu: Invalid value: "eight": {FORMAT}'),
    ("allocatable may not be negative", node(allocatable={"memory": "-1Gi"}),
     'status.allocatable.memory: Invalid value: "-1Gi": must be greater than or equal to 0'),
    ("pod capacity must be whole", node(capacity={"pods": "1.5"}),
     'status.capacity.pods: Invalid value: "1500m": must be an integer'),
]


@pytest.mark.parametrize("n,want", [c[1:] for c in NODE_CASES], ids=[c[0] for c in NODE_CASES])
def test_validate_node_create_reports(n: dict[str, Any], want: str) -> None:
    assert any(t.startswith(want) for t in texts(defaults.validate_node_create(n)))


def test_a_well_formed_node_is_valid() -> None:
    n = node([{"key": "gpu", "value": "a100", "effect": "NoSchedule"}, {"key": "gpu", "effect": "NoExecute"}],
             capacity={"cpu": "8", "memory": "32Gi", "pods": "110", "example.com/gpu": "4"})
    defaults.default_node(n)
    assert defaults.validate_node_create(n) == []
    assert defaults.validate_object_meta(n, namespaced=False) == []


# ---------------------------------------------------------------------------- scheme defaults of the other kinds

@pytest.mark.parametrize("key", sorted(defaults.SCHEME_DEFAULTS), ids=lambda k: k[1])
@pytest.mark.parametrize("body", [
    {"metadata": {}, "spec": "not an object"},
    {"metadata": {}, "spec": {"ports": "80", "template": 3, "updateStrategy": [], "selector": 1,
                              "persistentVolumeClaimRetentionPolicy": "Delete", "sessionAffinity": "ClientIP",
                              "sessionAffinityConfig": "x", "type": ["NodePort"]}},
    {"metadata": {}, "spec": {"ports": [1, {"port": "http"}], "template": {"metadata": {"labels": "app=web"}},
                              "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": 0}}},
], ids=["a spec that is no object", "fields of the wrong type", "items of the wrong type"])
def test_malformed_services_and_controllers_are_defaulted_without_crashing(key, body):
    # nothing validates these kinds' specs in the stand-in: a crash here would be a 500 on create
    obj = copy.deepcopy(body)
    defaults.SCHEME_DEFAULTS[key](obj)  # must not raise
    defaults.fill_zero_status(*key, obj)  # nor this


def test_a_status_write_without_status_gets_the_zero_status_of_its_type():
    obj: dict[str, Any] = {"status": {"readyReplicas": 1, "replicas": None}}
    defaults.fill_zero_status("apps", "StatefulSet", obj)
    assert obj["status"] == {"readyReplicas": 1, "replicas": 0, "availableReplicas": 0}
    pod: dict[str, Any] = {}
    defaults.fill_zero_status("", "Pod", pod)
    assert pod == {}  # only the kinds that have one
