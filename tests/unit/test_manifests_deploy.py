"""manifests/: what ``kubectl apply -k manifests/`` installs hangs together and lets tandem work.

No cluster is needed: every YAML document under manifests/ is parsed and
checked for the shape the API server would demand, the references between
objects (ServiceAccount, ConfigMap, volume names), the configuration the
Deployment will read, and the RBAC rules against every call tandem makes.

The built-in roles the manifests bind (system:kube-scheduler,
system:volume-scheduler) are not in this repository; the rules tandem relies
on are copied below from kube-apiserver's bootstrap policy
(plugin/pkg/auth/authorizer/rbac/bootstrappolicy/testdata/cluster-roles.yaml).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from scheduler.config import parse_config

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
NAMESPACE = "tandem-system"

# kind -> (apiVersion, namespaced)
KINDS = {
    "Namespace": ("v1", False),
    "ServiceAccount": ("v1", True),
    "ConfigMap": ("v1", True),
    "ClusterRole": ("rbac.authorization.k8s.io/v1", False),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io/v1", False),
    "Role": ("rbac.authorization.k8s.io/v1", True),
    "RoleBinding": ("rbac.authorization.k8s.io/v1", True),
    "Deployment": ("apps/v1", True),
    "PodDisruptionBudget": ("policy/v1", True),
    "Service": ("v1", True),
    "CustomResourceDefinition": ("apiextensions.k8s.io/v1", False),
}
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
RBAC_NAME = re.compile(r"[^/%]+")     # RBAC object names are path segments (system:... is fine)

# The bootstrap rules tandem relies on, as kube-apiserver creates them.
BOOTSTRAP_ROLES: dict[str, list[dict[str, Any]]] = {
    "system:kube-scheduler": [
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["kube-scheduler"],
         "verbs": ["get", "update"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete", "get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["bindings", "pods/binding"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch", "update"]},
        {"apiGroups": [""], "resources": ["replicationcontrollers", "services"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["apps", "extensions"], "resources": ["replicasets"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["persistentvolumeclaims", "persistentvolumes"],
         "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
    ],
    "system:volume-scheduler": [
        {"apiGroups": [""], "resources": ["persistentvolumes"], "verbs": ["get", "list", "patch", "update", "watch"]},
        {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["persistentvolumeclaims"],
         "verbs": ["get", "list", "patch", "update", "watch"]},
    ],
}


@dataclass(frozen=True)
class Call:
    """One API request tandem makes: (group, resource[/subresource], verb), where, and on which name."""

    group: str
    resource: str
    verb: str
    namespace: str | None = None     # None: any namespace (or cluster-scoped)
    name: str | None = None

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        named = f" {self.name}" if self.name else ""
        return f"{self.verb} {self.resource}{'.' + self.group if self.group else ''}{named}{where}"



def _informer_calls() -> list[Call]:
    """list and watch for every collection an Informer follows, read from the code so a new one is not missed."""
    paths = set()
    for f in (REPO / "scheduler").rglob("*.py"):
        paths.update(re.findall(r'Informer\(\s*[\w.]+,\s*"(/[^"]+)"', f.read_text()))
    assert "/api/v1/pods" in paths and "/api/v1/nodes" in paths, paths
    calls = []
    for path in sorted(paths):
        parts = path.strip("/").split("/")
        group = "" if parts[0] == "api" else parts[1]    # /api/v1/R or /apis/GROUP/VERSION/R
        calls += [Call(group, parts[-1], "list"), Call(group, parts[-1], "watch")]
    return calls


def _review_calls() -> list[Call]:
    """create of the two reviews the secure port asks, read from the paths secureserving posts to."""
    from scheduler import secureserving

    calls = []
    for path in (secureserving.TOKEN_REVIEWS, secureserving.SUBJECT_ACCESS_REVIEWS):
        _, _, group, _, resource = path.split("/")        # /apis/GROUP/VERSION/RESOURCE
        calls.append(Call(group, resource, "create"))
    return calls


# scheduler/apiclient (bind, status patch, events, delete), the informers (list+watch), the gang
# scheduling to come (PodGroups and their status), the secure port's reviews. Leader election's lease
# has its own test, whose verbs are read from scheduler/leader.py.
TANDEM_CALLS = _informer_calls() + _review_calls() + [
    Call("", "pods", "delete"),
    Call("", "pods", "create"),   # GangReadiness recreates the bare pods it evicts
    Call("", "pods/binding", "create"),
    Call("", "pods/status", "patch"),
    Call("events.k8s.io", "events", "create"), Call("events.k8s.io", "events", "patch"),
    Call("scheduling.x-k8s.io", "podgroups", "list"), Call("scheduling.x-k8s.io", "podgroups", "watch"),
    Call("scheduling.x-k8s.io", "podgroups", "get"), Call("scheduling.x-k8s.io", "podgroups", "update"),
    Call("scheduling.x-k8s.io", "podgroups", "patch"),
    Call("scheduling.x-k8s.io", "podgroups/status", "update"),
    Call("scheduling.x-k8s.io", "podgroups/status", "patch"),
    # VolumeBinding's PreBind: the PV's claimRef, the claim's selected-node
    Call("", "persistentvolumes", "update"), Call("", "persistentvolumeclaims", "update"),
    # upstream's native PodGroups (scheduling.k8s.io/v1alpha2): watched, and their status conditions written
    Call("scheduling.k8s.io", "podgroups", "list"), Call("scheduling.k8s.io", "podgroups", "watch"),
    Call("scheduling.k8s.io", "podgroups", "get"),
    # GangReadiness' durable record of the bare pods it recreates, on the PodGroup of either API
    Call("scheduling.k8s.io", "podgroups", "patch"),
    Call("scheduling.k8s.io", "podgroups/status", "update"), Call("scheduling.k8s.io", "podgroups/status", "patch"),
] + [Call("storage.k8s.io", resource, verb) for resource in ("csinodes", "csidrivers", "csistoragecapacities",
                                                             "volumeattachments") for verb in ("get", "list", "watch")]


def _docs() -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for path in sorted(MANIFESTS.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                out.append((path, doc))
    return out


DOCS = _docs()
OBJECTS = [(p, d) for p, d in DOCS if d.get("kind") != "Kustomization"]


def _one(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for _, d in OBJECTS if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def _objects(kind: str) -> list[dict[str, Any]]:
    return [d for _, d in OBJECTS if d["kind"] == kind]


# ---------------------------------------------------------------------------- shapes


@pytest.mark.parametrize("path, doc", OBJECTS, ids=[f"{p.relative_to(MANIFESTS)}:{d.get('kind')}/"
                                                    f"{(d.get('metadata') or {}).get('name')}" for p, d in OBJECTS])
def test_every_object_has_a_known_kind_its_api_version_and_a_valid_name(path: Path, doc: dict[str, Any]) -> None:
    kind = doc.get("kind")
    assert kind in KINDS, f"{path.name}: unexpected kind {kind!r}"
    api_version, namespaced = KINDS[kind]
    assert doc.get("apiVersion") == api_version
    meta = doc.get("metadata") or {}
    name = meta.get("name", "")
    pattern = RBAC_NAME if kind.endswith(("Role", "RoleBinding")) else DNS_SUBDOMAIN
    assert pattern.fullmatch(name) and len(name) <= 253, f"bad name {name!r}"
    if namespaced:
        assert meta.get("namespace") == NAMESPACE, f"{kind}/{name} must live in {NAMESPACE}"
    else:
        assert "namespace" not in meta, f"{kind}/{name} is cluster-scoped"


def test_no_object_is_defined_twice() -> None:
    keys = Counter((d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for _, d in OBJECTS)
    assert [k for k, n in keys.items() if n > 1] == []


def test_kustomization_lists_every_manifest_and_only_existing_files() -> None:
    (kust,) = [d for _, d in DOCS if d.get("kind") == "Kustomization"]
    assert kust["apiVersion"] == "kustomize.config.k8s.io/v1beta1"
    listed = {(MANIFESTS / r).resolve() for r in kust["resources"]}
    assert all(p.is_file() for p in listed), sorted(str(p) for p in listed if not p.is_file())
    files = {p.resolve() for p in MANIFESTS.rglob("*.yaml") if p.name != "kustomization.yaml"}
    assert listed == files
    assert any("crds/" in r for r in kust["resources"])


def test_namespace_is_created_by_the_manifests() -> None:
    assert _one("Namespace")["metadata"]["name"] == NAMESPACE


# ---------------------------------------------------------------------------- references


def _deployment() -> dict[str, Any]:
    return _one("Deployment", "tandem-scheduler")


def _pod_spec() -> dict[str, Any]:
    return _deployment()["spec"]["template"]["spec"]


def _container() -> dict[str, Any]:
    (c,) = _pod_spec()["containers"]
    return c


def test_deployment_selector_matches_its_pod_template() -> None:
    d = _deployment()
    selector = d["spec"]["selector"]["matchLabels"]
    labels = d["spec"]["template"]["metadata"]["labels"]
    assert selector and selector.items() <= labels.items()


def test_two_replicas_roll_one_at_a_time_under_leader_election_and_a_budget() -> None:
    d = _deployment()
    assert d["spec"]["replicas"] == 2
    # a new replica is up and warm before an old one stops (and releases the Lease)
    assert d["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    cfg = parse_config(yaml.safe_load(_one("ConfigMap", "tandem-config")["data"]["config.yaml"]))
    assert cfg.leader_election.leader_elect, "two replicas without leader election would both schedule"
    pdb = _one("PodDisruptionBudget", "tandem-scheduler")
    assert pdb["spec"]["maxUnavailable"] == 1
    labels = d["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items(), "the budget covers the replicas"


def test_service_account_the_deployment_runs_as_exists() -> None:
    sa = _pod_spec()["serviceAccountName"]
    assert _one("ServiceAccount", sa)["metadata"]["namespace"] == NAMESPACE


def test_config_volume_mounts_the_configmap_the_manifests_create() -> None:
    spec, c = _pod_spec(), _container()
    config_path = c["command"][c["command"].index("--config") + 1]
    (mount,) = [m for m in c["volumeMounts"] if config_path.startswith(m["mountPath"].rstrip("/") + "/")]
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    cm = _one("ConfigMap", volume["configMap"]["name"])
    key = config_path[len(mount["mountPath"].rstrip("/")) + 1:]
    assert key in cm["data"], f"ConfigMap {cm['metadata']['name']} has no key {key!r} for --config {config_path}"


def test_configmap_holds_a_configuration_tandem_accepts() -> None:
    cm = _one("ConfigMap", "tandem-config")
    cfg = parse_config(yaml.safe_load(cm["data"]["config.yaml"]), "manifests/configmap.yaml")
    assert [p.scheduler_name for p in cfg.profiles] == ["tandem-scheduler"]
    # config/default.yaml, with the lease moved next to the scheduler
    default = parse_config(yaml.safe_load((REPO / "config" / "default.yaml").read_text()), "config/default.yaml")
    assert cfg.profiles == default.profiles
    assert cfg.leader_election.resource_namespace == NAMESPACE


def test_container_command_and_probes_match_the_cli() -> None:
    from scheduler.__main__ import parser

    c = _container()
    assert c["command"][0] == "tandem-scheduler"
    args = parser().parse_args(c["command"][1:])          # the flags the CLI really has
    assert args.kubeconfig is None                         # in-cluster config
    assert args.verbosity == 2
    (port,) = c["ports"]
    assert (port["name"], port["containerPort"]) == ("https", 10259) and args.port == 10259
    # the secure port with a certificate generated at start, and the probes' paths open without credentials
    assert not args.insecure_serving and args.tls_cert_file is None
    for probe, path in (("startupProbe", "/livez"), ("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        assert c[probe]["httpGet"] == {"path": path, "port": args.port, "scheme": "HTTPS"}, probe
        assert path in args.always_allow_paths


def test_container_is_unprivileged_with_a_read_only_root_and_requests() -> None:
    c, spec = _container(), _pod_spec()
    assert spec["securityContext"]["runAsNonRoot"] is True
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert set(c["resources"]["requests"]) >= {"cpu", "memory"}


# ---------------------------------------------------------------------------- RBAC


def _rules_for(service_account: str) -> list[tuple[str | None, dict[str, Any]]]:
    """(namespace the rule applies in, or None for cluster-wide; rule) for every binding of the account."""
    out: list[tuple[str | None, dict[str, Any]]] = []
    for binding in _objects("ClusterRoleBinding") + _objects("RoleBinding"):
        subjects = binding.get("subjects") or []
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == service_account
                   and s.get("namespace") == NAMESPACE for s in subjects):
            continue
        ref = binding["roleRef"]
        assert ref["apiGroup"] == "rbac.authorization.k8s.io"
        scope = None if binding["kind"] == "ClusterRoleBinding" else binding["metadata"]["namespace"]
        if ref["kind"] == "Role":
            assert scope is not None, "a ClusterRoleBinding cannot reference a Role"
            role = _one("Role", ref["name"])
            assert role["metadata"]["namespace"] == scope
            rules = role["rules"]
        elif ref["name"] in BOOTSTRAP_ROLES:
            rules = BOOTSTRAP_ROLES[ref["name"]]
        else:
            rules = _one("ClusterRole", ref["name"])["rules"]
        out += [(scope, r) for r in rules]
    return out


def _allows(rules: list[tuple[str | None, dict[str, Any]]], call: Call) -> bool:
    for scope, r in rules:
        if scope is not None and scope != call.namespace:
            continue
        if not ({"*", call.group} & set(r.get("apiGroups", []))):
            continue
        if not ({"*", call.resource} & set(r.get("resources", []))):
            continue
        if not ({"*", call.verb} & set(r.get("verbs", []))):
            continue
        names = r.get("resourceNames")
        if names and call.name not in names:
            continue
        return True
    return False


def test_every_referenced_cluster_role_exists_here_or_is_a_bootstrap_role() -> None:
    defined = {d["metadata"]["name"] for d in _objects("ClusterRole")}
    for binding in _objects("ClusterRoleBinding") + _objects("RoleBinding"):
        ref = binding["roleRef"]
        if ref["kind"] == "ClusterRole":
            assert ref["name"] in defined or ref["name"] in BOOTSTRAP_ROLES, ref["name"]
        for s in binding["subjects"]:
            if s["kind"] == "ServiceAccount":
                _one("ServiceAccount", s["name"])


def test_bindings_follow_upstreams_second_scheduler_setup() -> None:
    bound = {b["roleRef"]["name"] for b in _objects("ClusterRoleBinding")}
    assert {"system:kube-scheduler", "system:volume-scheduler"} <= bound


@pytest.mark.parametrize("call", TANDEM_CALLS, ids=str)
def test_rbac_grants_what_tandem_calls(call: Call) -> None:
    rules = _rules_for(_pod_spec()["serviceAccountName"])
    assert _allows(rules, call), f"tandem's ServiceAccount may not {call}"


def _lease_verbs() -> set[str]:
    """The verbs scheduler/leader.py calls on its client, read from the code so a new one is not missed."""
    verbs = set(re.findall(r"self\.client\.(\w+)\(", (REPO / "scheduler" / "leader.py").read_text()))
    assert verbs == {"get", "create", "update"}, verbs     # what client-go's LeaseLock uses too
    return verbs


def test_rbac_grants_the_configured_leader_election_lease() -> None:
    cm = _one("ConfigMap", "tandem-config")
    le = parse_config(yaml.safe_load(cm["data"]["config.yaml"])).leader_election
    rules = _rules_for(_pod_spec()["serviceAccountName"])
    for verb in sorted(_lease_verbs()):
        call = Call("coordination.k8s.io", "leases", verb, le.resource_namespace,
                    None if verb == "create" else le.resource_name)
        assert _allows(rules, call), f"tandem's ServiceAccount may not {call}"
    # and no other component's lease, nor more than the elector does to its own
    assert not _allows(rules, Call("coordination.k8s.io", "leases", "update", "kube-system", "kube-controller-manager"))
    assert not _allows(rules, Call("coordination.k8s.io", "leases", "delete", le.resource_namespace, le.resource_name))


# what tandem's own ClusterRole must say even though system:kube-scheduler grants it too: the reads only
# tandem's plugins need of them, so that the role documents them (see the comment in rbac.yaml)
OWN_ROLE_READS = [Call(group, resource, verb)
                  for group, resource in (("", "services"), ("", "replicationcontrollers"), ("", "namespaces"),
                                          ("apps", "replicasets"), ("apps", "statefulsets"),
                                          ("storage.k8s.io", "csinodes"), ("storage.k8s.io", "volumeattachments"))
                  for verb in ("get", "list", "watch")]


@pytest.mark.parametrize("call", OWN_ROLE_READS, ids=str)
def test_tandems_own_role_grants_the_spreading_affinity_and_volume_limit_reads(call: Call) -> None:
    assert _allows([(None, r) for r in _one("ClusterRole", "tandem-scheduler")["rules"]], call), \
        f"the tandem-scheduler ClusterRole may not {call}"


def test_tandems_own_role_grants_exactly_the_two_review_creates() -> None:
    rules = _one("ClusterRole", "tandem-scheduler")["rules"]
    reviews = [r for r in rules if {"authentication.k8s.io", "authorization.k8s.io"} & set(r.get("apiGroups", []))]
    granted = {(g, res, v) for r in reviews for g in r["apiGroups"] for res in r["resources"] for v in r["verbs"]}
    assert granted == {(c.group, c.resource, c.verb) for c in _review_calls()}


def test_the_metrics_reader_role_grants_get_on_metrics_and_nothing_else() -> None:
    assert _one("ClusterRole", "tandem-metrics-reader")["rules"] == [{"nonResourceURLs": ["/metrics"],
                                                                      "verbs": ["get"]}]


# ---------------------------------------------------------------------------- the secure port's Service


def test_the_service_exposes_the_secure_port_of_the_deployments_pods() -> None:
    svc = _one("Service", "tandem-scheduler")
    labels = _deployment()["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    (port,) = svc["spec"]["ports"]
    (container_port,) = _container()["ports"]
    assert (port["name"], port["port"], port["targetPort"]) == ("https", 10259, container_port["name"])


def test_the_example_service_monitor_scrapes_that_service_with_a_bearer_token() -> None:
    example = MANIFESTS / "servicemonitor.yaml.example"
    sm = yaml.safe_load(example.read_text())
    assert (sm["apiVersion"], sm["kind"]) == ("monitoring.coreos.com/v1", "ServiceMonitor")
    svc = _one("Service", "tandem-scheduler")
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["namespaceSelector"]["matchNames"] == [svc["metadata"]["namespace"]]
    (endpoint,) = sm["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["scheme"], endpoint["path"]) == (svc["spec"]["ports"][0]["name"], "https",
                                                                        "/metrics")
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}     # the generated certificate has no known CA


def test_rbac_check_itself_rejects_what_is_not_granted() -> None:
    rules = _rules_for(_pod_spec()["serviceAccountName"])
    assert not _allows(rules, Call("", "secrets", "get"))
    assert not _allows(rules, Call("", "nodes", "delete"))
    assert not _allows(rules, Call("coordination.k8s.io", "leases", "update", NAMESPACE, "someone-else"))
