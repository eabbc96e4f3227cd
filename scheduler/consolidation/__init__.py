"""The rebalancer: planning (planner.py), then eviction through the Eviction API, then steering
(rebalancer.py), for the profiles that enable the Consolidation plugin (plugins/consolidation.py)."""

from scheduler.consolidation.planner import Plan, Unit
from scheduler.consolidation.rebalancer import Rebalancer

__all__ = ["Plan", "Rebalancer", "Unit"]
