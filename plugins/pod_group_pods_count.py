"""PodGroupPodsCount: upstream's name, accepted so kube-scheduler configurations load; no code of its own.

kube-scheduler 1.36 scores each placement of a gang with this plugin (placementScore: the gang's pods
a placement takes, normalised to the most any takes). tandem's domain choice ranks domains the same
way first, by the members each can take (scheduler/framework/placement.py), in every profile with a
gang plugin. Enabling or disabling this name changes nothing; it implements none of tandem's
extension points, and its weight is not used.
"""

from __future__ import annotations

from typing import Any

from scheduler.framework import register

NAME = "PodGroupPodsCount"


@register
class PodGroupPodsCount:
    NAME = NAME
    EXTENSION_POINTS: frozenset[str] = frozenset()
    Args = None

    def __init__(self, args: Any, handle: Any) -> None:
        self.handle = handle
