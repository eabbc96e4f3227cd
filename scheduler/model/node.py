"""The Node record and its parser (allocatable, taints, images, readiness, declared features)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scheduler.model.fields import _d, _l, _Problems, _str_map
from scheduler.model.quantity import _resource_list

@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"   # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    uid: str = ""
    resource_version: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    allocatable: dict[str, int] = field(default_factory=dict)   # canonical units
    images: tuple[tuple[tuple[str, ...], int], ...] = ()         # (names, sizeBytes)
    ready: bool = True
    declared_features: frozenset[str] = frozenset()   # status.declaredFeatures (NodeDeclaredFeatures)
    invalid: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def parse_node(obj: dict[str, Any]) -> Node:
    meta = _d(obj.get("metadata"))
    spec = _d(obj.get("spec"))
    status = _d(obj.get("status"))
    probs = _Problems()
    alloc_raw, alloc_path = status.get("allocatable"), "status.allocatable"
    if not alloc_raw:
        alloc_raw, alloc_path = status.get("capacity"), "status.capacity"
    allocatable = _resource_list(alloc_raw, alloc_path, probs)
    taints = []
    for i, t in enumerate(_l(spec.get("taints"))):
        t = _d(t)
        effect = t.get("effect") or ""
        if effect not in _EFFECTS:
            probs.add(f"spec.taints[{i}].effect", f'Unsupported value: "{effect}"')
            continue
        taints.append(Taint(str(t.get("key") or ""), str(t.get("value") or ""), effect))
    images = []
    for img in map(_d, _l(status.get("images"))):
        size = img.get("sizeBytes")
        images.append((tuple(n for n in _l(img.get("names")) if isinstance(n, str)),
                       size if isinstance(size, int) else 0))
    ready = True
    for c in map(_d, _l(status.get("conditions"))):
        if c.get("type") == "Ready":
            ready = c.get("status") == "True"
    return Node(
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        labels=_str_map(meta.get("labels"), "metadata.labels", probs),
        annotations=_str_map(meta.get("annotations"), "metadata.annotations", probs),
        unschedulable=bool(spec.get("unschedulable")),
        taints=tuple(taints),
        allocatable=allocatable,
        images=tuple(images),
        ready=ready,
        declared_features=frozenset(f for f in _l(status.get("declaredFeatures")) if isinstance(f, str)),
        invalid=probs.first,
        raw=obj,
    )
