"""What a benchmark run observed, per pod: the raw material of every metric.

The runner fills a :class:`Recorder` from a watch on pods (creation time
from its own create calls, bind time from the first event showing
spec.nodeName); the metrics code turns it into throughput, latency
percentiles and perf-dash DataItems. Times are ``time.time()`` seconds.
Only pods created while collecting (a createPods op with collectMetrics,
or between startCollectingMetrics and stopCollectingMetrics) count. Pods a
controller made (a ReplicaSet's, created with createAny) are kept too, never
measured, with their owner: when they were bound, when their deletion began
(an eviction, from the watch) and when they were gone. When the scheduler
was paused while a measured op created its pods (bench/pause.py), the
pauses are kept too: when it was stopped and when resumed.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class PodTimes:
    created: float
    bound: float | None = None
    node: str = ""
    measured: bool = True     # created while collecting metrics
    group: str = ""           # "ns/podgroup" for gang members
    cpu: int = 0              # requested millicores (the utilization measure)
    gone: float | None = None  # when the watch saw it deleted
    owner: str = ""           # "ReplicaSet ns/name" for a pod a controller made (not the runner)
    deleting: float | None = None  # when the watch first saw its deletionTimestamp

    def alive_at(self, t: float) -> bool:
        """Bound by ``t``, and neither being deleted nor gone by then."""
        return (self.bound is not None and self.bound <= t and (self.deleting is None or self.deleting > t)
                and (self.gone is None or self.gone > t))


@dataclass
class Recorder:
    pods: dict[str, PodTimes] = field(default_factory=dict)          # "ns/name" -> times
    windows: list[tuple[float, float | None]] = field(default_factory=list)  # collecting intervals
    scheduler_name: str = ""
    # API writes a workload's own driver made, by verb ("create", "status", "delete"); createPipelineRuns
    # counts them so that runs made with and without placeholder pods can be compared
    writes: dict[str, int] = field(default_factory=dict)
    node_cpu: int = 0         # the allocatable millicores of the nodes the run created
    node_zones: dict[str, str] = field(default_factory=dict)   # node -> its topology.kubernetes.io/zone, if any
    # when the scheduler processes were stopped (SIGSTOP) while a measured op created its pods, and when they
    # were resumed (bench/pause.py): CPU per pod is counted from the first resume
    pauses: list[tuple[float, float | None]] = field(default_factory=list)

    @property
    def collecting(self) -> bool:
        return bool(self.windows) and self.windows[-1][1] is None

    def start_collecting(self, t: float) -> None:
        if not self.collecting:
            self.windows.append((t, None))

    def stop_collecting(self, t: float) -> None:
        if self.collecting:
            self.windows[-1] = (self.windows[-1][0], t)

    def paused(self, t: float) -> None:
        self.pauses.append((t, None))

    def resumed(self, t: float) -> None:
        if self.pauses and self.pauses[-1][1] is None:
            self.pauses[-1] = (self.pauses[-1][0], t)

    def created(self, key: str, t: float, measured: bool | None = None, group: str = "", cpu: int = 0) -> None:
        self.pods[key] = PodTimes(t, measured=self.collecting if measured is None else measured, group=group,
                                  cpu=cpu)

    def adopted(self, key: str, t: float, owner: str, cpu: int = 0) -> None:
        """A pod a controller made, first seen at ``t``: never measured."""
        self.pods[key] = PodTimes(t, measured=False, owner=owner, cpu=cpu)

    def deleting(self, key: str, t: float) -> None:
        p = self.pods.get(key)
        if p is not None and p.deleting is None:
            p.deleting = t

    def gone(self, key: str, t: float) -> None:
        p = self.pods.get(key)
        if p is not None and p.gone is None:
            p.gone = t

    def bound(self, key: str, t: float, node: str) -> None:
        p = self.pods.get(key)
        if p is not None and p.bound is None:
            p.bound = t
            p.node = node

    def measured(self) -> list[PodTimes]:
        return [p for p in self.pods.values() if p.measured]
