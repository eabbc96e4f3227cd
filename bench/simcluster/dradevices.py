"""ResourceSlices and DeviceClasses (resource.k8s.io/v1) as kube-apiserver 1.36 defaults and checks them.

Observed on kube-apiserver 1.36.2 (the messages are its words):

* **ResourceSlice**: ``metadata.generation`` starts at 1 and grows with
  every spec change. ``spec.pool.generation`` is always written (0 by
  default); empty device lists, attribute and capacity maps are left out;
  capacity and counter quantities are stored in canonical form; a device
  taint without ``timeAdded`` gets the time of the write (create or update).
  Validation: ``driver`` required (at most 63 bytes, a DNS subdomain),
  ``pool.name`` required (DNS subdomains separated by slashes),
  ``pool.resourceSliceCount`` above zero, ``pool.generation`` not negative;
  exactly one of ``nodeName`` (not empty), ``nodeSelector`` (exactly one
  term), ``allNodes`` and ``perDeviceNodeSelection`` (both only ``true``);
  not both ``sharedCounters`` and ``devices``; at most 128 devices (64 when
  any has taints or consumes counters) with unique DNS-label names, each
  with at most 32 attributes and capacities together, qualified attribute
  and capacity names, attribute values of exactly one type (a version in
  semver), at most 16 taints (a label key, a label value, an effect of
  NoSchedule, NoExecute or None), and node selection of its own exactly when
  the slice selects per device. ``driver``, ``pool.name`` and ``nodeName``
  cannot change. Field selectors: ``spec.nodeName``, ``spec.driver``.
* **DeviceClass**: ``metadata.generation`` as for slices; ``spec`` is always
  written (``{}``). At most 32 selectors, each with a ``cel``; configs with
  an opaque configuration; ``extendedResourceName`` an extended resource
  name. Its ``metadata.generateName`` is not checked, only the name made
  from it.

List-typed attribute values (``bools``, ``ints``, ``strings``, ``versions``)
are dropped, as 1.36 drops them with its DRAListTypeAttributes gate off.
Not checked: CEL (see :mod:`bench.simcluster.drafields`), consumable capacity
request policies,
binding conditions, node-allocatable resource mappings.
"""

from __future__ import annotations

import re
from typing import Any

from bench.simcluster import defaults, names
from bench.simcluster.drafields import (
    DEVICE_CONFIG_MAX, NODE_SELECTOR_TERM, RAW, as_dict, as_list, canonical_quantities, check_int, dicts, drop_empty,
    duplicates, go_value, slice_of, strip_nulls, struct, text, too_many, validate_configs, validate_dns_label,
    validate_driver_name, validate_pool_name, validate_qualified_name, validate_selectors, validate_taint,
)
from bench.simcluster.errors import FieldError, invalid_value, required, too_long

MAX_DEVICES = 128
MAX_DEVICES_WITH_TAINTS_OR_COUNTERS = 64
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_TAINTS = 16
MAX_COUNTER_SETS = 8
MAX_COUNTER_CONSUMPTIONS = 2
ATTRIBUTE_VALUE_MAX_LENGTH = 64
_ATTRIBUTE_KEY_PATH_MAX = 63 + 1 + 32   # longer keys are shortened in the middle in error paths
IMMUTABLE = "field is immutable"

_ATTRIBUTE_TYPES = ("bool", "int", "string", "version")
_LIST_TYPES = ("bools", "ints", "strings", "versions")
ATTRIBUTE = struct(("IntValue", "int", RAW), ("BoolValue", "bool", RAW), ("StringValue", "string", RAW),
                   ("VersionValue", "version", RAW), ("IntValues", "ints", RAW), ("BoolValues", "bools", RAW),
                   ("StringValues", "strings", RAW), ("VersionValues", "versions", RAW))

# semver.org 2.0.0: MAJOR.MINOR.PATCH, then an optional -pre.release and +build.metadata
_NUMBER = r"(0|[1-9][0-9]*)"
_PRE = r"(0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)"
_BUILD = r"[0-9a-zA-Z-]+"
_SEMVER_RE = re.compile(rf"{_NUMBER}\.{_NUMBER}\.{_NUMBER}(-{_PRE}(\.{_PRE})*)?(\+{_BUILD}(\.{_BUILD})*)?")

_SLICE_KEYS = ("driver", "pool", "nodeName", "nodeSelector", "allNodes", "devices", "perDeviceNodeSelection",
               "sharedCounters")
_NODE_SELECTION = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
_DEVICE_NODE_SELECTION = ("exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when "
                          "`perDeviceNodeSelection` is set to true in the ResourceSlice spec")


# ---------------------------------------------------------------------------- ResourceSlice

def prepare_slice_spec(kind: str, spec: Any) -> dict[str, Any]:
    """A slice's spec decoded and defaulted as the real server stores it."""
    spec = strip_nulls(as_dict(spec))
    pool = as_dict(spec.get("pool"))
    check_int(kind, pool.get("generation"), "ResourcePool.spec.pool.generation")
    check_int(kind, pool.get("resourceSliceCount"), "ResourcePool.spec.pool.resourceSliceCount")
    pool.setdefault("generation", 0)
    pool.setdefault("resourceSliceCount", 0)
    spec["pool"] = {k: pool[k] for k in ("name", "generation", "resourceSliceCount") if k in pool} | pool
    for device in as_list(spec.get("devices")):
        if not isinstance(device, dict):
            continue
        for attribute in as_dict(device.get("attributes")).values():
            if isinstance(attribute, dict):
                check_int(kind, attribute.get("int"), "DeviceAttribute.spec.devices.attributes.int")
                for key in _LIST_TYPES:   # DRAListTypeAttributes is off in 1.36: list values are dropped
                    attribute.pop(key, None)
        canonical_quantities(kind, device.get("capacity"), "value")
        for consumption in as_list(device.get("consumesCounters")):
            canonical_quantities(kind, as_dict(consumption).get("counters"), "value")
        drop_empty(device, "attributes", "capacity", "taints", "consumesCounters")
    for counter_set in as_list(spec.get("sharedCounters")):
        canonical_quantities(kind, as_dict(counter_set).get("counters"), "value")
    drop_empty(spec, "devices", "sharedCounters")
    return {k: spec[k] for k in _SLICE_KEYS if k in spec} | spec


def stamp_taints(spec: dict[str, Any], now: str) -> None:
    """A device taint written without ``timeAdded`` gets the time of the write."""
    for device in as_list(spec.get("devices")):
        for taint in as_list(as_dict(device).get("taints")):
            if isinstance(taint, dict) and not taint.get("timeAdded"):
                taint["timeAdded"] = now


def _validate_node_name(name: str, path: str, errs: list[FieldError]) -> None:
    for msg in names.is_dns1123_subdomain(name):
        errs.append(invalid_value(path, name, msg))


def _node_selection(holder: dict[str, Any], path: str, errs: list[FieldError], *, per_device: bool) -> list[str]:
    """The node-selection fields ``holder`` sets (each checked), as upstream names them."""
    chosen: list[str] = []
    if holder.get("nodeName") is not None:
        name = text(holder["nodeName"])
        if name:
            chosen.append("`nodeName`")
            _validate_node_name(name, f"{path}.nodeName", errs)
        else:
            errs.append(invalid_value(f"{path}.nodeName", name, "must not be empty" if per_device
                                      else "must be either unset or set to a non-empty string"))
    if holder.get("nodeSelector") is not None:
        chosen.append("`nodeSelector`")
        selector = holder["nodeSelector"]
        defaults.validate_node_selector(selector, f"{path}.nodeSelector", errs)
        terms = as_dict(selector).get("nodeSelectorTerms")
        if not per_device and len(as_list(terms)) != 1:
            # one term per slice keeps merging the selectors of a claim's devices simple
            errs.append(invalid_value(f"{path}.nodeSelector.nodeSelectorTerms",
                                      go_value(slice_of(NODE_SELECTOR_TERM), terms),
                                      "must have exactly one node selector term"))
    for key in ("allNodes",) if per_device else ("allNodes", "perDeviceNodeSelection"):
        if holder.get(key) is not None:
            if holder[key] is True:
                chosen.append(f"`{key}`")
            else:
                errs.append(invalid_value(f"{path}.{key}", holder[key], "must be either unset or set to true"))
    return chosen


def _truncated(key: str) -> str:
    """truncateIfTooLong: an overlong map key is shortened in the middle where it names a field."""
    if len(key) <= _ATTRIBUTE_KEY_PATH_MAX:
        return key
    keep = _ATTRIBUTE_KEY_PATH_MAX - 3
    return key[:(keep + 1) // 2] + "..." + key[len(key) - keep // 2:]


def _validate_attribute(attribute: dict[str, Any], path: str, errs: list[FieldError]) -> None:
    """validateDeviceAttribute: exactly one typed value; strings at most 64 bytes, versions semver too."""
    given = [t for t in _ATTRIBUTE_TYPES if attribute.get(t) is not None]
    if "string" in given and names.byte_len(text(attribute["string"])) > ATTRIBUTE_VALUE_MAX_LENGTH:
        errs.append(too_long(f"{path}.string", ATTRIBUTE_VALUE_MAX_LENGTH))
    if "version" in given:
        version = text(attribute["version"])
        if not _SEMVER_RE.fullmatch(version):
            errs.append(invalid_value(f"{path}.version", version, "must be a string compatible with semver.org spec 2.0.0"))
        if names.byte_len(version) > ATTRIBUTE_VALUE_MAX_LENGTH:
            errs.append(too_long(f"{path}.version", ATTRIBUTE_VALUE_MAX_LENGTH))
    if not given:
        errs.append(invalid_value(path, "", "exactly one value must be specified"))
    elif len(given) > 1:
        errs.append(invalid_value(path, go_value(ATTRIBUTE, attribute), "exactly one value must be specified"))


def _validate_counter_sets(sets: Any, name_key: str, limit: int, path: str, errs: list[FieldError]) -> None:
    """A slice's ``sharedCounters`` (named by ``name``) or a device's ``consumesCounters`` (by ``counterSet``):
    at most ``limit``, each named by a DNS label, once, with counters named by DNS labels."""
    entries = dicts(sets)
    if too_many(entries, limit, path, errs):
        return
    for i, entry in entries:
        p = f"{path}[{i}]"
        name = text(entry.get(name_key))
        if not name:
            errs.append(required(f"{p}.{name_key}"))
        else:
            validate_dns_label(name, f"{p}.{name_key}", errs)
        counters = as_dict(entry.get("counters"))
        if not counters:
            errs.append(required(f"{p}.counters"))
        for counter in counters:
            validate_dns_label(counter, f"{p}.counters", errs)
    duplicates([text(e.get(name_key)) for _, e in entries], path, errs)


def _validate_device(device: dict[str, Any], path: str, per_device: bool, errs: list[FieldError]) -> None:
    validate_dns_label(text(device.get("name")), f"{path}.name", errs)
    attributes, capacity = as_dict(device.get("attributes")), as_dict(device.get("capacity"))
    if len(attributes) + len(capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
        errs.append(invalid_value(path, len(attributes) + len(capacity), "the total number of attributes and "
                                  f"capacities must not exceed {MAX_ATTRIBUTES_AND_CAPACITIES}"))
    for key, attribute in attributes.items():
        validate_qualified_name(key, f"{path}.attributes", errs)
        _validate_attribute(as_dict(attribute), f"{path}.attributes[{_truncated(key)}]", errs)
    for key in capacity:
        validate_qualified_name(key, f"{path}.capacity", errs)
    taints = dicts(device.get("taints"))
    if not too_many(taints, MAX_TAINTS, f"{path}.taints", errs):
        for i, taint in taints:
            validate_taint(taint, f"{path}.taints[{i}]", errs)
    _validate_counter_sets(device.get("consumesCounters"), "counterSet", MAX_COUNTER_CONSUMPTIONS,
                           f"{path}.consumesCounters", errs)
    if per_device:
        chosen = _node_selection(device, path, errs, per_device=True)
        if not chosen:
            errs.append(required(path, _DEVICE_NODE_SELECTION))
        elif len(chosen) > 1:
            errs.append(invalid_value(path, "{" + ", ".join(chosen) + "}", _DEVICE_NODE_SELECTION))
    elif any(device.get(k) is not None for k in ("nodeName", "nodeSelector", "allNodes")):
        errs.append(invalid_value(path, None, "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
                                              "`perDeviceNodeSelection` is set to true in the ResourceSlice spec"))


def validate_slice(spec: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    """validateResourceSliceSpec; ``old`` is the stored spec on an update."""
    errs: list[FieldError] = []
    validate_driver_name(text(spec.get("driver")), "spec.driver", errs)
    pool = as_dict(spec.get("pool"))
    validate_pool_name(text(pool.get("name")), "spec.pool.name", errs)
    count, generation = pool.get("resourceSliceCount", 0), pool.get("generation", 0)
    if count <= 0:
        errs.append(invalid_value("spec.pool.resourceSliceCount", count, "must be greater than zero"))
    if generation < 0:
        errs.append(invalid_value("spec.pool.generation", generation, "must be greater than or equal to zero"))
    if old is not None:
        for path, new_value, old_value in (("spec.pool.name", pool.get("name"), as_dict(old.get("pool")).get("name")),
                                           ("spec.driver", spec.get("driver"), old.get("driver")),
                                           ("spec.nodeName", spec.get("nodeName"), old.get("nodeName"))):
            if new_value != old_value:
                errs.append(invalid_value(path, new_value, IMMUTABLE))
    chosen = _node_selection(spec, "spec", errs, per_device=False)
    if not chosen:
        errs.append(required("spec", _NODE_SELECTION))
    elif len(chosen) > 1:
        errs.append(invalid_value("spec", "{" + ", ".join(chosen) + "}", _NODE_SELECTION + ", but multiple fields are set"))
    if spec.get("sharedCounters") is not None and spec.get("devices") is not None:
        errs.append(invalid_value("spec", "", "only one of `sharedCounters` or `devices` is allowed"))
    devices = dicts(spec.get("devices"))
    advanced = any(d.get("taints") or d.get("consumesCounters") for _, d in devices)
    limit = MAX_DEVICES_WITH_TAINTS_OR_COUNTERS if advanced else MAX_DEVICES
    if not too_many(devices, limit, "spec.devices", errs):
        per_device = spec.get("perDeviceNodeSelection") is True
        for i, device in devices:
            _validate_device(device, f"spec.devices[{i}]", per_device, errs)
        duplicates([text(d.get("name")) for _, d in devices], "spec.devices", errs)
    _validate_counter_sets(spec.get("sharedCounters"), "name", MAX_COUNTER_SETS, "spec.sharedCounters", errs)
    return errs


def slice_fields(obj: dict[str, Any]) -> dict[str, str]:
    """The fields a ResourceSlice list or watch selects on (resourceslice.ToSelectableFields)."""
    spec = as_dict(obj.get("spec"))
    return {"metadata.name": text(as_dict(obj.get("metadata")).get("name")),
            "spec.nodeName": text(spec.get("nodeName")), "spec.driver": text(spec.get("driver"))}


# ---------------------------------------------------------------------------- DeviceClass

def prepare_class_spec(spec: Any) -> dict[str, Any]:
    spec = strip_nulls(as_dict(spec))
    drop_empty(spec, "selectors", "config")
    return spec


def validate_class(spec: dict[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    validate_selectors(spec.get("selectors"), "spec.selectors", errs)
    validate_configs(spec.get("config"), DEVICE_CONFIG_MAX, "spec.config", errs)
    name = spec.get("extendedResourceName")
    if name is not None and not defaults.is_extended_resource_name(text(name)):
        errs.append(invalid_value("spec.extendedResourceName", name, "must be a valid extended resource name"))
    return errs
