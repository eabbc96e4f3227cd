"""TopologyPlacementGenerator: upstream's name, accepted so kube-scheduler configurations load; no code of its own.

kube-scheduler 1.36 (TopologyAwareWorkloadScheduling gate) generates one placement per domain of a
PodGroup's topology key with this plugin, at its placementGenerate extension point, and tries them
in turn. tandem chooses the domain in one pass of array work before a gang's group cycle
(scheduler/framework/placement.py), for every profile with a gang plugin (Coscheduling or
GangScheduling), whether or not this name is enabled: a gang's topology constraint is never ignored.
Enabling or disabling it changes nothing; it implements none of tandem's extension points.
"""

from __future__ import annotations

from typing import Any

from scheduler.framework import register

NAME = "TopologyPlacementGenerator"


@register
class TopologyPlacementGenerator:
    NAME = NAME
    EXTENSION_POINTS: frozenset[str] = frozenset()
    Args = None

    def __init__(self, args: Any, handle: Any) -> None:
        self.handle = handle
