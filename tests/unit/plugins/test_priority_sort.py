"""plugins/priority_sort.py: higher priority first, then first in the queue."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from plugins.priority_sort import PrioritySort
from scheduler.framework.interface import QueueSortPlugin
from scheduler.model import Pod


@dataclass
class Info:
    pod: Pod
    timestamp: float


def info(name: str, priority: int, timestamp: float) -> Info:
    return Info(Pod(uid=name, namespace="ns", name=name, priority=priority), timestamp)


@pytest.mark.parametrize("infos, order", [
    pytest.param([info("low", 0, 1.0), info("high", 100, 2.0)], ["high", "low"],
                 id="a higher priority pod pops first even if it came later"),
    pytest.param([info("late", 5, 2.0), info("early", 5, 1.0)], ["early", "late"],
                 id="equal priorities pop in queue order"),
    pytest.param([info("neg", -10, 0.0), info("zero", 0, 9.0)], ["zero", "neg"],
                 id="negative priorities sort below the default"),
    pytest.param([info("c", 1, 3.0), info("a", 2, 5.0), info("b", 1, 1.0), info("d", 2, 4.0)], ["d", "a", "b", "c"],
                 id="priority then timestamp across a mix"),
])
def test_sort_order(infos: list[Info], order: list[str]) -> None:
    plugin = PrioritySort(None, None)
    assert [i.pod.name for i in sorted(infos, key=plugin.sort_key)] == order


def test_is_a_queue_sort_plugin() -> None:
    assert isinstance(PrioritySort(None, None), QueueSortPlugin)
    assert PrioritySort.NAME == "PrioritySort" and PrioritySort.Args is None
