"""PrioritySort: the queue order kube-scheduler uses by default.

Higher ``spec.priority`` first; among equal priorities, the pod that
entered the queue earlier first (upstream's ``queuesort.PrioritySort.Less``).
The key is a tuple so the queue can keep a heap without calling back into
the plugin per comparison; ties beyond the timestamp are the queue's
business (it adds a sequence number).
"""

from __future__ import annotations

from typing import Any

from scheduler.framework import register


@register
class PrioritySort:
    NAME = "PrioritySort"
    EXTENSION_POINTS = frozenset({"QueueSort"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None:
        pass

    def sort_key(self, info: Any) -> tuple[int, float]:
        """``info`` is a QueuedPodInfo-like object: ``.pod`` and ``.timestamp`` (when it entered the queue)."""
        return (-info.pod.priority, info.timestamp)
