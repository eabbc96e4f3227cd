"""The node agent: what the kubelets of a cluster would do to pods, without kubelets.

* A pod bound to a node becomes Running and Ready ``ready_delay`` seconds
  later (status written through the pods/status subresource, so watchers see
  exactly what a kubelet's status updates look like).
* With ``run_time``, a running pod whose restartPolicy is not Always
  Succeeds after that long (an Always pod would just restart its container).
* A pod can be made to fail: ``fail_rate`` of pods, or any pod annotated
  ``simcluster.tandem.dev/fail: "true"``, goes to Failed instead of Running;
  ``simcluster.tandem.dev/never-ready: "true"`` runs but never turns Ready;
  ``simcluster.tandem.dev/run-seconds`` overrides run_time per pod.
* A graceful delete completes after ``termination_delay`` seconds, never
  later than the pod's grace period (``deletionGracePeriodSeconds``);
  ``termination_delay=None`` waits the full grace period, as a container
  that ignores SIGTERM makes a kubelet do. Until then the pod stays in the
  store with its deletionTimestamp; then the agent deletes it with
  gracePeriodSeconds=0, the kubelet's final delete.
  ``simcluster.tandem.dev/termination-seconds`` overrides the delay per pod
  (float seconds, still at most the grace period). A second delete that
  shortens the grace period shortens the wait, as the kubelet honours it.
* ``spec.activeDeadlineSeconds``: a running pod is marked Failed at
  ``status.startTime`` + activeDeadlineSeconds (not before), reason
  ``DeadlineExceeded`` and message "Pod was active on the node longer than
  the specified deadline", its containers terminated and Ready False, as
  the kubelet's active-deadline handler does (no startTime, no deadline).
  Lowering the deadline of a running pod (the API lets it only go down)
  moves the end earlier. A pod that Succeeded or Failed first, or that is
  gone, is left alone; one being deleted is left to its deletion.
* Pods on a node that is deleted, or bound to a node that never existed,
  fail with a DisruptionTarget condition (reason DeletionByPodGC), as the
  pod garbage collector marks them.

It reads the store directly (a cursor over the pods and nodes tables), not
over HTTP: it is part of the simulated cluster, not a client of it (see
:mod:`bench.simcluster.looping`). Its timers run on the store's clock, the
one ``startTime`` and ``deletionTimestamp`` are stamped from, so a fake
clock given to the store drives every delay here; it never reads the
machine's clock itself.
"""

from __future__ import annotations

import heapq
import logging
import random
import zlib
from dataclasses import dataclass
from typing import Any

from bench.simcluster import errors
from bench.simcluster.looping import StoreLoop
from bench.simcluster.resources import lookup
from bench.simcluster.store import DELETED, MATCH_ALL, Store, Watcher
from bench.simcluster.tables import parse_time

log = logging.getLogger("simcluster.agent")

PODS = lookup("", "v1", "pods")
NODES = lookup("", "v1", "nodes")

FAIL = "simcluster.tandem.dev/fail"
NEVER_READY = "simcluster.tandem.dev/never-ready"
RUN_SECONDS = "simcluster.tandem.dev/run-seconds"
TERMINATION_SECONDS = "simcluster.tandem.dev/termination-seconds"

# the kubelet's words for a pod past its activeDeadlineSeconds (pkg/kubelet/active_deadline.go)
DEADLINE_REASON = "DeadlineExceeded"
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"


@dataclass(frozen=True, slots=True)
class AgentConfig:
    ready_delay: float = 1.0
    run_time: float = 0.0          # 0: pods run until deleted
    fail_rate: float = 0.0         # fraction of pods that fail instead of starting
    termination_delay: float | None = 0.2  # graceful deletes finish after min(this, grace); None: the grace
    tick: float = 0.02             # how often due actions are checked
    seed: int | None = None


class NodeAgent(StoreLoop):
    def __init__(self, store: Store, config: AgentConfig) -> None:
        super().__init__("simcluster-node-agent", config.tick, log)
        self.store = store
        self.config = config
        self._rng = random.Random(config.seed)
        self._due: list[tuple[float, int, str, tuple[str, str], str]] = []  # (when, seq, action, key, uid)
        self._seq = 0
        # pod key -> (action, seq, when) of its latest plan; seq 0 for a state nothing is due for
        # ("running", "failed"). A due entry acts only while it is still the latest plan of its key,
        # so a superseded one (a shortened grace period, a pod replaced under the same name) is inert.
        self._planned: dict[tuple[str, str], tuple[str, int, float]] = {}
        self.started = 0
        self.failed = 0
        self._deadline: dict[tuple[str, str], int] = {}       # pod key -> the activeDeadlineSeconds planned for

    # ------------------------------------------------------------------ loop

    def _step(self, cursors: tuple[Watcher, Watcher]) -> None:
        self._drain(*cursors)
        self._act(self.store.clock())

    def _resync(self) -> tuple[Watcher, Watcher]:
        rv = str(self.store.rv)
        pods = self.store.watcher(PODS, "", MATCH_ALL, rv, send_initial=False)
        nodes = self.store.watcher(NODES, "", MATCH_ALL, rv, send_initial=False)
        for entry in list(self.store.table(PODS).objects.values()):
            self._on_pod(entry.obj())
        return pods, nodes

    def _drain(self, pods: Watcher, nodes: Watcher) -> None:
        while True:
            batch = nodes.poll()
            for type_, entry in batch:
                if type_ == DELETED:
                    self._node_gone(entry.key[1])
            pbatch = pods.poll()
            for type_, entry in pbatch:
                if type_ == DELETED:
                    self._planned.pop(entry.key, None)
                    self._deadline.pop(entry.key, None)
                elif entry.fields["spec.nodeName"]:
                    self._on_pod(entry.obj())
            if not batch and not pbatch:
                return

    def _plan(self, delay: float, action: str, key: tuple[str, str], uid: str) -> None:
        self._plan_at(self.store.clock() + delay, action, key, uid)

    def _plan_at(self, when: float, action: str, key: tuple[str, str], uid: str) -> None:
        self._seq += 1
        self._planned[key] = (action, self._seq, when)
        heapq.heappush(self._due, (when, self._seq, action, key, uid))

    def _on_pod(self, pod: dict[str, Any]) -> None:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        if not spec.get("nodeName"):
            return
        key = (meta["namespace"], meta["name"])
        planned = self._planned.get(key)
        state = planned[0] if planned else None
        if meta.get("deletionTimestamp"):
            delay = self._termination_delay(pod)
            if state != "finish" or self.store.clock() + delay < planned[2]:
                self._plan(delay, "finish", key, meta["uid"])
            return
        phase = status.get("phase")
        if phase == "Pending" and state is None:
            self._plan(self.config.ready_delay, "start", key, meta["uid"])
        elif phase == "Running" and state in (None, "start"):
            run = self._seconds(pod, RUN_SECONDS, self.config.run_time)
            if run is not None and run > 0 and spec.get("restartPolicy") != "Always":
                self._plan(run, "complete", key, meta["uid"])
            else:
                self._planned[key] = ("running", 0, 0.0)
            self._plan_deadline(pod, key)
        elif phase == "Running" and state in ("running", "complete", "deadline"):
            self._plan_deadline(pod, key)   # activeDeadlineSeconds may have been lowered

    def _plan_deadline(self, pod: dict[str, Any], key: tuple[str, str]) -> None:
        """Fail the running pod at status.startTime + activeDeadlineSeconds, unless something ends it first.

        pastActiveDeadline (pkg/kubelet/active_deadline.go): without a deadline or a startTime the pod
        runs on; it is past its deadline once ``now - startTime >= activeDeadlineSeconds``. Called on
        every event of a running pod, so the first check is the cheap one.
        """
        deadline = (pod.get("spec") or {}).get("activeDeadlineSeconds")
        if not isinstance(deadline, int) or isinstance(deadline, bool) or deadline == self._deadline.get(key):
            return
        start = parse_time((pod.get("status") or {}).get("startTime"))
        if start is None:
            return
        self._deadline[key] = deadline
        when = start + deadline
        planned = self._planned.get(key)
        if planned is not None and planned[0] in ("complete", "deadline") and planned[2] <= when:
            return   # its run ends first (or an earlier deadline stands)
        self._plan_at(when, "deadline", key, pod["metadata"]["uid"])

    def _termination_delay(self, pod: dict[str, Any]) -> float:
        """Seconds from seeing a pod terminating to its final delete: never more than its grace period."""
        grace = pod["metadata"].get("deletionGracePeriodSeconds") or 0
        delay = self._seconds(pod, TERMINATION_SECONDS, self.config.termination_delay)
        return grace if delay is None else min(delay, grace)

    @staticmethod
    def _seconds(pod: dict[str, Any], annotation: str, default: float | None) -> float | None:
        """The pod's ``annotation`` as seconds, or ``default`` when it is absent or not a duration."""
        raw = (pod["metadata"].get("annotations") or {}).get(annotation)
        if raw is None:
            return default
        value = parse_seconds(raw)
        if value is None:
            log.warning("pod %s/%s: annotation %s=%r is not a number of seconds; using the agent's default",
                        pod["metadata"]["namespace"], pod["metadata"]["name"], annotation, raw)
            return default
        return value

    def _act(self, now: float) -> None:
        due = self._due
        while due and due[0][0] <= now:
            _, seq, action, key, uid = heapq.heappop(due)
            planned = self._planned.get(key)
            if planned is None or planned[1] != seq:
                continue  # superseded by a later plan, or the pod is gone
            pod = self.store.get_obj(PODS, key[0], key[1])
            if pod is None or pod["metadata"].get("uid") != uid:
                del self._planned[key]
                continue
            try:
                if action == "start":
                    self._start(pod)
                elif action == "complete":
                    self._finish_run(pod, "Succeeded", 0, "Completed")
                elif action == "deadline":
                    self._finish_run(pod, "Failed", 137, "Error", (DEADLINE_REASON, DEADLINE_MESSAGE))
                elif action == "finish":
                    self.store.delete(PODS, key[0], key[1], grace=0, preconditions={"uid": uid})
            except errors.APIError as exc:
                if exc.code not in (404, 409):
                    log.warning("node agent: %s of pod %s/%s failed: %s", action, key[0], key[1], exc.message)

    # ------------------------------------------------------------------ status writes

    def _start(self, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        node = spec["nodeName"]
        if self.store.get_obj(NODES, "", node) is None:
            self._gc(pod, f"PodGC: node {node} no longer exists")
            return
        ann = meta.get("annotations") or {}
        if ann.get(FAIL) == "true" or (self.config.fail_rate and self._rng.random() < self.config.fail_rate):
            self._finish_run(pod, "Failed", 1, "Error")
            return
        now = self.store.now()
        ready = "False" if ann.get(NEVER_READY) == "true" else "True"
        status = pod.setdefault("status", {})
        status["phase"] = "Running"
        status["hostIP"] = _node_ip(node)
        status["hostIPs"] = [{"ip": status["hostIP"]}]
        status["podIP"] = _pod_ip(meta["uid"])
        status["podIPs"] = [{"ip": status["podIP"]}]
        status["startTime"] = now
        _set_conditions(status, now, {"PodReadyToStartContainers": "True", "Initialized": "True",
                                      "Ready": ready, "ContainersReady": ready})
        status["containerStatuses"] = [
            {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": ready == "True",
             "started": True, "restartCount": 0, "state": {"running": {"startedAt": now}},
             "containerID": f"sim://{meta['uid'][:8]}-{c['name']}"}
            for c in spec.get("containers", [])]
        self.store.update(PODS, meta["namespace"], meta["name"], pod, "status")
        self.started += 1

    def _finish_run(self, pod: dict[str, Any], phase: str, code: int, reason: str,
                    why: tuple[str, str] | None = None) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        now = self.store.now()
        status = pod.setdefault("status", {})
        if status.get("phase") in ("Succeeded", "Failed"):
            return
        status["phase"] = phase
        if why is not None:
            status["reason"], status["message"] = why
        status.setdefault("startTime", now)
        _set_conditions(status, now, {"Ready": "False", "ContainersReady": "False"}, reason="PodCompleted")
        status["containerStatuses"] = [
            {"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False, "started": False,
             "restartCount": 0, "state": {"terminated": {"exitCode": code, "reason": reason,
                                                         "startedAt": status["startTime"], "finishedAt": now}}}
            for c in spec.get("containers", [])]
        self.store.update(PODS, meta["namespace"], meta["name"], pod, "status")
        self._planned[(meta["namespace"], meta["name"])] = ("finished", 0, 0.0)
        if phase == "Failed":
            self.failed += 1

    def _gc(self, pod: dict[str, Any], message: str) -> None:
        meta = pod["metadata"]
        status = pod.setdefault("status", {})
        if status.get("phase") in ("Succeeded", "Failed"):
            return
        now = self.store.now()
        status["phase"] = "Failed"
        _set_conditions(status, now, {"DisruptionTarget": "True", "Ready": "False"},
                        reason="DeletionByPodGC", message=message)
        self.store.update(PODS, meta["namespace"], meta["name"], pod, "status")
        self._planned[(meta["namespace"], meta["name"])] = ("failed", 0, 0.0)
        self.failed += 1

    def _node_gone(self, node: str) -> None:
        for entry in list(self.store.table(PODS).objects.values()):
            if entry.fields["spec.nodeName"] == node:
                try:
                    self._gc(entry.obj(), f"PodGC: node {node} no longer exists")
                except errors.APIError as exc:
                    log.warning("node agent: failing pod %s/%s: %s", *entry.key, exc.message)


def parse_seconds(text: str) -> float | None:
    """``text`` as a duration in seconds (a number >= 0, "inf" included), or None when it is not one."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None  # NaN fails the comparison: it would corrupt the heap's order


def _set_conditions(status: dict[str, Any], now: str, want: dict[str, str], reason: str = "",
                    message: str = "") -> None:
    conditions = status.setdefault("conditions", [])
    by_type = {c.get("type"): c for c in conditions}
    for ctype, value in want.items():
        c = by_type.get(ctype)
        if c is None:
            c = {"type": ctype, "status": value, "lastProbeTime": None, "lastTransitionTime": now}
            conditions.append(c)
        elif c.get("status") != value:
            c["status"] = value
            c["lastTransitionTime"] = now
        if reason and value != "True" or ctype == "DisruptionTarget":
            if reason:
                c["reason"] = reason
            if message:
                c["message"] = message


def _node_ip(node: str) -> str:
    h = zlib.crc32(node.encode())
    return f"10.{(h >> 16) & 0xFF}.{(h >> 8) & 0xFF}.{h & 0xFF or 1}"


def _pod_ip(uid: str) -> str:
    h = zlib.crc32(uid.encode())
    return f"172.{16 + ((h >> 16) & 0x0F)}.{(h >> 8) & 0xFF}.{h & 0xFF or 1}"
