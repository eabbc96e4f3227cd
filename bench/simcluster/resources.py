"""The API resources the simulated cluster serves, and what is special about each.

A :class:`ResourceType` says where a resource lives in the URL space
(group, version, plural), how discovery describes it, which field selectors
it supports, whether it has a status subresource, and which per-kind rules
(defaulting, validation, strategic merge) apply. The store and the HTTP
layer stay generic and ask this table.

``events.k8s.io/v1`` events are a *view* of the core/v1 events: both share
one storage table, as in kube-apiserver, and the view converts on the way in
and out.

TokenReviews and SubjectAccessReviews are create-only (``verbs``): nothing
is stored, the create answers the review (see :mod:`bench.simcluster.auth`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from bench.simcluster import names

# the --runtime-config group/version of upstream's native gang API (PodGroup, Workload)
NATIVE_GANGS = "scheduling.k8s.io/v1alpha2"

STANDARD_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
# subresources that only take a POST: pods/binding, pods/eviction, serviceaccounts/token
CREATE_ONLY_SUBRESOURCES = frozenset({"binding", "eviction", "token"})
# the group of the kind a subresource takes, when it is not its resource's (discovery names it)
_OTHER_GROUPS = {"eviction": "policy", "token": "authentication.k8s.io"}


def _meta_fields(obj: dict[str, Any]) -> dict[str, str]:
    meta = obj.get("metadata") or {}
    return {"metadata.name": meta.get("name", ""), "metadata.namespace": meta.get("namespace", "")}


def _pod_fields(obj: dict[str, Any]) -> dict[str, str]:
    f = _meta_fields(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    f["spec.nodeName"] = spec.get("nodeName") or ""
    f["spec.schedulerName"] = spec.get("schedulerName") or ""
    f["spec.restartPolicy"] = spec.get("restartPolicy") or ""
    f["spec.serviceAccountName"] = spec.get("serviceAccountName") or ""
    f["spec.hostNetwork"] = "true" if spec.get("hostNetwork") else "false"
    f["status.phase"] = status.get("phase") or ""
    f["status.podIP"] = status.get("podIP") or ""
    f["status.nominatedNodeName"] = status.get("nominatedNodeName") or ""
    return f


def _node_fields(obj: dict[str, Any]) -> dict[str, str]:
    f = _meta_fields(obj)
    f["spec.unschedulable"] = "true" if (obj.get("spec") or {}).get("unschedulable") else "false"
    return f


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _service_fields(obj: dict[str, Any]) -> dict[str, str]:
    # service.SelectableFields (pkg/registry/core/service/strategy.go)
    f = _meta_fields(obj)
    spec = _dict(obj.get("spec"))  # nothing validates a Service's spec here: it may be anything
    f["spec.clusterIP"] = str(spec.get("clusterIP") or "")
    f["spec.type"] = str(spec.get("type") or "")
    return f


def _replication_controller_fields(obj: dict[str, Any]) -> dict[str, str]:
    # ControllerToSelectableFields (pkg/registry/core/replicationcontroller/strategy.go)
    f = _meta_fields(obj)
    replicas = _dict(obj.get("status")).get("replicas")
    f["status.replicas"] = str(replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 0)
    return f


def _namespace_fields(obj: dict[str, Any]) -> dict[str, str]:
    f = _meta_fields(obj)
    f["status.phase"] = (obj.get("status") or {}).get("phase") or ""
    return f


_EVENT_OBJECT_FIELDS = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")


def _event_fields(obj: dict[str, Any]) -> dict[str, str]:
    f = _meta_fields(obj)
    involved = obj.get("involvedObject") or {}
    for k in _EVENT_OBJECT_FIELDS:
        f[f"involvedObject.{k}"] = str(involved.get(k) or "")
    f["reason"] = obj.get("reason") or ""
    f["reportingComponent"] = obj.get("reportingComponent") or ""
    f["source"] = ((obj.get("source") or {}).get("component")) or ""
    f["type"] = obj.get("type") or ""
    return f


def _events_v1_fields(obj: dict[str, Any]) -> dict[str, str]:
    # events.k8s.io/v1 selects on its own field names; the object here is
    # already in that shape (the watch/list path converts before matching).
    f = _meta_fields(obj)
    regarding = obj.get("regarding") or {}
    for k in _EVENT_OBJECT_FIELDS:
        f[f"regarding.{k}"] = str(regarding.get(k) or "")
    f["reason"] = obj.get("reason") or ""
    f["reportingController"] = obj.get("reportingController") or ""
    f["type"] = obj.get("type") or ""
    return f


def _resource_slice_fields(obj: dict[str, Any]) -> dict[str, str]:
    # resourceslice.ToSelectableFields (pkg/registry/resource/resourceslice/strategy.go): a cluster-scoped
    # object's name, its node and its driver
    spec = _dict(obj.get("spec"))
    return {"metadata.name": (obj.get("metadata") or {}).get("name", ""),
            "spec.nodeName": str(spec.get("nodeName") or ""), "spec.driver": str(spec.get("driver") or "")}


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()  # "status", "binding", "eviction", "token"
    fields: Callable[[dict[str, Any]], dict[str, str]] = _meta_fields
    field_names: frozenset[str] = frozenset({"metadata.name", "metadata.namespace"})
    generation: bool = False          # metadata.generation bumps on spec changes
    create_keeps_status: bool = True  # False: status in a create body is dropped
    strategic: bool = True            # built-in types accept strategic-merge-patch
    storage: tuple[str, str] | None = None  # (group, plural) of the table this is a view of
    to_view: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    from_view: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    verbs: tuple[str, ...] = STANDARD_VERBS   # ("create",): a review, answered and never stored
    # served only when --runtime-config enables this group/version (alpha APIs); "" always served
    runtime_config: str = ""
    # what the kind's strategy checks metadata.name and generateName with; None: nothing beyond the
    # path-segment check every create gets (see bench.simcluster.names)
    name_rule: names.NameRule | None = names.name_is_dns_subdomain

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def key(self) -> tuple[str, str]:
        """The storage table this resource reads and writes."""
        return self.storage or (self.group, self.plural)

    @property
    def stored(self) -> bool:
        """False for the create-only reviews: the server answers them and keeps nothing."""
        return self.verbs != ("create",)

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    def qualified(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def label(self, subresource: str = "") -> str:
        """``plural[/subresource][.group]``: how fault rules and write hooks name a request's resource."""
        base = f"{self.plural}/{subresource}" if subresource else self.plural
        return f"{base}.{self.group}" if self.group else base


def _fieldset(fn: Callable[[dict[str, Any]], dict[str, str]]) -> frozenset[str]:
    return frozenset(fn({}).keys())


def _events_from_view(obj: dict[str, Any]) -> dict[str, Any]:
    from bench.simcluster.convert import event_from_events_v1
    return event_from_events_v1(obj)


def _events_to_view(obj: dict[str, Any]) -> dict[str, Any]:
    from bench.simcluster.convert import event_to_events_v1
    return event_to_events_v1(obj)


RESOURCES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "namespaces", "Namespace", False, "namespace", ("ns",),
                 subresources=("status",), fields=_namespace_fields,
                 field_names=_fieldset(_namespace_fields), name_rule=names.name_is_dns_label),
    ResourceType("", "v1", "nodes", "Node", False, "node", ("no",),
                 subresources=("status",), fields=_node_fields, field_names=_fieldset(_node_fields)),
    ResourceType("", "v1", "pods", "Pod", True, "pod", ("po",), ("all",),
                 subresources=("status", "binding", "eviction"), fields=_pod_fields,
                 field_names=_fieldset(_pod_fields), generation=True, create_keeps_status=False),
    # core/v1 Events keep legacy validation, which checks no name (ValidateEventCreate); events.k8s.io/v1
    # ones are checked as DNS subdomains by the stricter rules, in bench.simcluster.convert
    ResourceType("", "v1", "events", "Event", True, "event", ("ev",),
                 fields=_event_fields, field_names=_fieldset(_event_fields), name_rule=None),
    ResourceType("", "v1", "persistentvolumes", "PersistentVolume", False, "persistentvolume",
                 ("pv",), subresources=("status",), create_keeps_status=False),
    ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True,
                 "persistentvolumeclaim", ("pvc",), subresources=("status",),
                 create_keeps_status=False),
    # Services and the controllers whose selectors spread pods (PodTopologySpread's system
    # defaults). Neither a clusterIP allocator nor the controllers are simulated.
    ResourceType("", "v1", "services", "Service", True, "service", ("svc",), ("all",),
                 subresources=("status",), fields=_service_fields, field_names=_fieldset(_service_fields),
                 create_keeps_status=False, name_rule=names.name_is_dns_label),
    ResourceType("", "v1", "replicationcontrollers", "ReplicationController", True, "replicationcontroller",
                 ("rc",), ("all",), subresources=("status",), fields=_replication_controller_fields,
                 field_names=_fieldset(_replication_controller_fields), generation=True,
                 create_keeps_status=False, name_rule=names.name_only_dns_subdomain),
    ResourceType("events.k8s.io", "v1", "events", "Event", True, "event", ("ev",),
                 fields=_events_v1_fields, field_names=_fieldset(_events_v1_fields),
                 storage=("", "events"), to_view=_events_to_view, from_view=_events_from_view,
                 name_rule=None),
    ResourceType("apps", "v1", "replicasets", "ReplicaSet", True, "replicaset", ("rs",), ("all",),
                 subresources=("status",), generation=True, create_keeps_status=False),
    ResourceType("apps", "v1", "statefulsets", "StatefulSet", True, "statefulset", ("sts",), ("all",),
                 subresources=("status",), generation=True, create_keeps_status=False,
                 name_rule=names.name_is_dns_label),
    ResourceType("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, "storageclass",
                 ("sc",)),
    # what a scheduler reads of a cluster's CSI drivers (VolumeBinding, NodeVolumeLimits); scopes and short
    # names (none) as kube-apiserver 1.36 serves them. The stand-in's CSINodes come from
    # bench.simcluster.volumes; VolumeAttachments are served, and nothing in the stand-in attaches.
    ResourceType("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False, "csidriver"),
    ResourceType("storage.k8s.io", "v1", "csinodes", "CSINode", False, "csinode"),
    ResourceType("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", True,
                 "csistoragecapacity"),
    ResourceType("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False, "volumeattachment",
                 subresources=("status",), create_keeps_status=False),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True,
                 "poddisruptionbudget", ("pdb",), subresources=("status",), generation=True,
                 create_keeps_status=False, name_rule=None),
    ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False,
                 "priorityclass", ("pc",)),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, "lease"),
    # who may read a secure port's /metrics: ServiceAccount tokens (serviceaccounts/token), the reviews a
    # delegating component asks, and the RBAC objects SubjectAccessReviews are answered from
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True, "serviceaccount", ("sa",),
                 subresources=("token",)),
    ResourceType("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False, "tokenreview",
                 verbs=("create",)),
    ResourceType("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False,
                 "subjectaccessreview", verbs=("create",)),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, "clusterrole",
                 name_rule=names.rbac_name),
    ResourceType("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False,
                 "clusterrolebinding", name_rule=names.rbac_name),
    ResourceType("rbac.authorization.k8s.io", "v1", "roles", "Role", True, "role", name_rule=names.rbac_name),
    ResourceType("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, "rolebinding",
                 name_rule=names.rbac_name),
    # Dynamic Resource Allocation, served by default as kube-apiserver 1.36 serves it (no short names; in
    # discovery's order); what is checked and defaulted is in bench.simcluster.dra
    ResourceType("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False, "deviceclass", generation=True,
                 name_rule=names.name_only_dns_subdomain),
    ResourceType("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True, "resourceclaim",
                 subresources=("status",), create_keeps_status=False),
    ResourceType("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True,
                 "resourceclaimtemplate"),
    ResourceType("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False, "resourceslice",
                 fields=_resource_slice_fields, field_names=_fieldset(_resource_slice_fields), generation=True),
    ResourceType("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", True, "podgroup",
                 ("pg", "pgs"), subresources=("status",), generation=True,
                 create_keeps_status=False, strategic=False),
    # Jobs (served by default), and upstream's native gang API: alpha, served only with
    # --runtime-config=scheduling.k8s.io/v1alpha2=true. The 1.36 server sets no generation on
    # PodGroups or Workloads, lists no short names for them, and gives Workloads no status.
    ResourceType("batch", "v1", "jobs", "Job", True, "job", categories=("all",),
                 subresources=("status",), generation=True, create_keeps_status=False),
    ResourceType("scheduling.k8s.io", "v1alpha2", "podgroups", "PodGroup", True, "podgroup",
                 subresources=("status",), create_keeps_status=False, runtime_config=NATIVE_GANGS),
    ResourceType("scheduling.k8s.io", "v1alpha2", "workloads", "Workload", True, "workload",
                 runtime_config=NATIVE_GANGS),
)

BY_PATH: dict[tuple[str, str, str], ResourceType] = {
    (r.group, r.version, r.plural): r for r in RESOURCES
}

GROUPS: dict[str, list[str]] = {}
for _r in RESOURCES:
    GROUPS.setdefault(_r.group, [])
    if _r.version not in GROUPS[_r.group]:
        GROUPS[_r.group].append(_r.version)


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    return BY_PATH.get((group, version, plural))


def served(rt: ResourceType, enabled: frozenset[str]) -> bool:
    """Whether a server with these --runtime-config group/versions enabled serves ``rt``."""
    return not rt.runtime_config or rt.runtime_config in enabled


def served_groups(enabled: frozenset[str]) -> dict[str, list[str]]:
    """:data:`GROUPS` as a server with these --runtime-config group/versions enabled serves them."""
    out: dict[str, list[str]] = {}
    for r in RESOURCES:
        if served(r, enabled) and r.version not in out.setdefault(r.group, []):
            out[r.group].append(r.version)
    return out


def by_kind(kind: str) -> ResourceType | None:
    for r in RESOURCES:
        if r.kind == kind and r.storage is None:
            return r
    return None


def discovery_resources(group: str, version: str, enabled: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """APIResourceList.resources for /api/v1 or /apis/GROUP/VERSION."""
    out: list[dict[str, Any]] = []
    for r in RESOURCES:
        if r.group != group or r.version != version or not served(r, enabled):
            continue
        entry: dict[str, Any] = {
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": list(r.verbs),
        }
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        if r.categories:
            entry["categories"] = list(r.categories)
        out.append(entry)
        for sub in r.subresources:
            verbs = ["create"] if sub in CREATE_ONLY_SUBRESOURCES else ["get", "patch", "update"]
            kind = {"binding": "Binding", "eviction": "Eviction", "token": "TokenRequest"}.get(sub, r.kind)
            entry = {"name": f"{r.plural}/{sub}", "singularName": "", "namespaced": r.namespaced,
                     "kind": kind, "verbs": verbs}
            if sub in _OTHER_GROUPS:       # a subresource of another group's kind says which
                entry.update(group=_OTHER_GROUPS[sub], version="v1")
            out.append(entry)
    return out

