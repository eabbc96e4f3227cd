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
        c = parse_pvc(o)
        vols.claims[c.key] = c
    for o in pvs:
        v = parse_pv(o)
        vols.volumes[v.name] = v
    for o in classes:
        k = parse_storage_class(o)
        vols.classes[k.name] = k
    return cache
