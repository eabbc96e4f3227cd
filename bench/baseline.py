"""A scheduler with no logic, to measure what the target itself can take.

:class:`BaselineBinder` follows unbound pods with its ``schedulerName`` and
nodes, and binds each pod to the next node round-robin, as fast as the
API server accepts, with up to ``concurrency`` binds in flight. It checks
nothing (no resources, no taints, no affinity): its throughput is the
ceiling set by the API server, the watch and the harness, and every
report can state a real scheduler's throughput as a fraction of it.

Pods with scheduling gates are left alone until the gates are gone (the
API server would refuse the bind); a pod that appears before any node
waits for the first node. A bind answered 409 (already bound, being
deleted, or gated after all) or 404 (deleted) is dropped: a later watch
event brings the pod back if it is still unbound. Other failures (after
the API client's own retries) are counted and the bind is tried again a
second later.

It never reads or writes anything but pods, nodes and pods/binding.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from scheduler.apiclient import APIClient, APIError, Conflict, NotFound
from scheduler.informers import Informer, object_key

log = logging.getLogger("tandem.bench.baseline")

BASELINE_SCHEDULER_NAME = "baseline-binder"
RETRY_DELAY = 1.0        # seconds before a bind that failed for another reason than 409/404 is tried again


class BaselineBinder:
    """Round-robin binder for pods with ``spec.schedulerName == scheduler_name``; ``start()`` / ``stop()``.

    ``bound`` counts successful binds, ``conflicts`` 409/404 answers,
    ``failures`` other errors.
    """

    def __init__(self, client: APIClient, scheduler_name: str = BASELINE_SCHEDULER_NAME, *,
                 concurrency: int = 64) -> None:
        self.client = client
        self.scheduler_name = scheduler_name
        self.concurrency = max(1, concurrency)
        self.bound = 0
        self.conflicts = 0
        self.failures = 0
        self._nodes: list[str] = []
        self._node_index: dict[str, int] = {}
        self._next = 0
        self._have_nodes = asyncio.Event()
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._pending: set[str] = set()      # uids queued or being bound: one bind per pod at a time
        self._done: set[str] = set()         # uids bound: late events of the unbound pod are stale
        self._informers: list[Informer] = []
        self._workers: list[asyncio.Task[None]] = []

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Follow nodes and unbound pods; return once both are listed."""
        nodes = Informer(self.client, "/api/v1/nodes", name="baseline-nodes", clock=self.client.clock,
                         on_add=self._node_add, on_delete=self._node_delete)
        # exactly what the binder owns: its scheduler name, no node yet (upstream's unassigned-pod selector)
        selector = f"spec.schedulerName={self.scheduler_name},spec.nodeName="
        pods = Informer(self.client, "/api/v1/pods", {"fieldSelector": selector}, name="baseline-pods",
                        clock=self.client.clock, on_add=self._pod_seen, on_update=lambda _old, new: self._pod_seen(new))
        self._informers = [nodes, pods]
        for inf in self._informers:
            inf.start()
        self._workers = [asyncio.create_task(self._work(), name=f"baseline-bind-{i}")
                         for i in range(self.concurrency)]
        await nodes.synced.wait()
        await pods.synced.wait()

    async def stop(self) -> None:
        for inf in self._informers:
            await inf.stop()
        for task in self._workers:
            task.cancel()
        for task in self._workers:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._informers = []
        self._workers = []

    async def __aenter__(self) -> "BaselineBinder":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ informer handlers (sync, quick)

    def _node_add(self, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        if name not in self._node_index:
            self._node_index[name] = len(self._nodes)
            self._nodes.append(name)
            self._have_nodes.set()

    def _node_delete(self, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        if self._node_index.pop(name, None) is None:
            return
        self._nodes = [n for n in self._nodes if n != name]    # rare (churn); O(nodes) is fine
        self._node_index = {n: i for i, n in enumerate(self._nodes)}
        if not self._nodes:
            self._have_nodes.clear()

    def _pod_seen(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        spec = pod.get("spec") or {}
        uid = meta.get("uid") or object_key(pod)
        if spec.get("nodeName") or meta.get("deletionTimestamp") or spec.get("schedulingGates"):
            return
        if uid in self._pending or uid in self._done:
            return
        self._pending.add(uid)
        self._queue.put_nowait(pod)

    # ------------------------------------------------------------------ binding

    def _pick(self) -> str:
        node = self._nodes[self._next % len(self._nodes)]
        self._next += 1
        return node

    async def _work(self) -> None:
        while True:
            pod = await self._queue.get()
            meta = pod["metadata"]
            uid = meta.get("uid") or object_key(pod)
            try:
                while not self._nodes:
                    await self._have_nodes.wait()
                await self.client.bind(meta["namespace"], meta["name"], meta.get("uid"), self._pick())
                self.bound += 1
                self._done.add(uid)
            except (Conflict, NotFound):
                self.conflicts += 1
            except APIError as exc:
                self.failures += 1
                log.warning("baseline bind %s/%s: %s; retrying in %.1fs", meta["namespace"], meta["name"], exc,
                            RETRY_DELAY)
                # still pending: nothing else will enqueue it; a deleted pod ends in a 404 next time
                asyncio.get_running_loop().call_later(RETRY_DELAY, self._queue.put_nowait, pod)
                continue
            self._pending.discard(uid)
