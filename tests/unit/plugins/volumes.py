"""A cache with nodes, claims, volumes and classes, for the volume plugins' tests."""

from __future__ import annotations

from typing import Any

from scheduler.model import parse_node, parse_pv, parse_pvc, parse_storage_class
from scheduler.state.cache import Cache


def volume_cache(nodes: dict[str, dict[str, str]], pvcs: tuple[dict[str, Any], ...] = (),
                 pvs: tuple[dict[str, Any], ...] = (), classes: tuple[dict[str, Any], ...] = ()) -> Cache:
    """``nodes``: name -> labels; the API objects as the informers would hand them over."""
    cache = Cache()
    for name, labels in nodes.items():
        cache.add_node(parse_node({"metadata": {"name": name, "labels": labels}}))
    vols = cache.volumes
    for o in pvcs:
        vols.set_pvc(parse_pvc(o))
    for o in pvs:
        vols.set_pv(parse_pv(o))
    for o in classes:
        k = parse_storage_class(o)
        vols.classes[k.name] = k
    return cache
