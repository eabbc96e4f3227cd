"""Dynamic Resource Allocation's API (resource.k8s.io/v1) between decoding and storing, as kube-apiserver 1.36 has it.

The stand-in serves ``resource.k8s.io/v1`` by default, as a 1.36 server
does: DeviceClasses and ResourceSlices (cluster-scoped), ResourceClaims
(with their ``status`` subresource) and ResourceClaimTemplates (namespaced),
none with short names or categories. The rules of each kind, observed on
kube-apiserver 1.36.2, are in :mod:`bench.simcluster.draclaims` (claims,
templates, pods' claim statuses) and :mod:`bench.simcluster.dradevices`
(slices, classes), built from the shared pieces of
:mod:`bench.simcluster.drafields`. This module is what the store calls:

* :func:`default` on every create and update of the main resource, before
  the generation is compared: decoding checks (a mistyped int or an
  unparsable quantity is a 400) and scheme defaulting;
* :func:`prepare_create`: the strategies' PrepareForCreate (a taint's
  ``timeAdded``);
* :func:`validate_create` and :func:`validate_update`: validation, and the
  update-time preparation of a status write.

The real server compiles every CEL expression (device selectors of classes
and requests) when it validates, refusing one that does not compile or is too
costly. The stand-in does not: it must not import tandem's CEL environment
(``scheduler/``), so it accepts any expression of an allowed length, and a
test that checks the compile error runs on the real server only.
"""

from __future__ import annotations

from typing import Any, Callable

from bench.simcluster import draclaims, dradevices
from bench.simcluster.drafields import GROUP, as_dict
from bench.simcluster.errors import FieldError

NamespaceLabels = Callable[[str], "dict[str, str]"]


def owns(group: str) -> bool:
    return group == GROUP


def default(kind: str, obj: dict[str, Any]) -> None:
    """Decoding and scheme defaults of a create or of an update of the main resource (not of a status write)."""
    if kind == "ResourceClaim":
        obj["spec"] = draclaims.prepare_spec(kind, obj.get("spec"), "spec")
    elif kind == "ResourceClaimTemplate":
        obj["spec"] = draclaims.prepare_template_spec(kind, obj.get("spec"))
    elif kind == "ResourceSlice":
        obj["spec"] = dradevices.prepare_slice_spec(kind, obj.get("spec"))
    elif kind == "DeviceClass":
        obj["spec"] = dradevices.prepare_class_spec(obj.get("spec"))


def prepare_create(kind: str, obj: dict[str, Any], now: str) -> None:
    if kind == "ResourceSlice":
        dradevices.stamp_taints(obj["spec"], now)


def validate_create(kind: str, obj: dict[str, Any], namespace_labels: NamespaceLabels) -> list[FieldError]:
    """The kind's validation of a create (metadata is the store's)."""
    spec = as_dict(obj.get("spec"))
    errs: list[FieldError] = []
    if kind == "ResourceClaim":
        errs = draclaims.admin_access(spec, namespace_labels(obj["metadata"]["namespace"]))
        draclaims.validate_spec(spec, "spec", errs)
    elif kind == "ResourceClaimTemplate":
        errs = draclaims.admin_access(as_dict(spec.get("spec")), namespace_labels(obj["metadata"]["namespace"]))
        draclaims.validate_template_metadata(as_dict(spec.get("metadata")), "spec.metadata", errs)
        draclaims.validate_spec(as_dict(spec.get("spec")), "spec.spec", errs)
    elif kind == "ResourceSlice":
        errs = dradevices.validate_slice(spec, None)
    elif kind == "DeviceClass":
        errs = dradevices.validate_class(spec)
    return errs


def validate_update(kind: str, old: dict[str, Any], new: dict[str, Any], subresource: str,
                    now: str) -> list[FieldError]:
    """Update-time preparation (may complete ``new``) and validation; a status write of a claim checks its status."""
    if kind == "ResourceClaim":
        if subresource == "status":
            new["status"] = draclaims.prepare_status(kind, new.get("status"), old.get("status"))
            return draclaims.validate_status(new, old)
        return draclaims.spec_immutable(new.get("spec"), old.get("spec"))
    if kind == "ResourceClaimTemplate":
        return draclaims.template_spec_immutable(new.get("spec"), old.get("spec"))
    spec = as_dict(new.get("spec"))
    if kind == "ResourceSlice":
        dradevices.stamp_taints(spec, now)
        return dradevices.validate_slice(spec, as_dict(old.get("spec")))
    if kind == "DeviceClass":
        return dradevices.validate_class(spec)
    return []
