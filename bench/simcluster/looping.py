"""The loop the stand-in's own controllers share: follow the store, step every tick.

The node agent and the disruption controller are parts of the simulated
cluster, not clients of it: they read the store through watcher cursors
(no HTTP) and write through it. Each one is a :class:`StoreLoop`: one task,
started and stopped by :class:`~bench.simcluster.cluster.SimCluster`, that
opens its cursors (``_resync``, which also rescans what is stored), then
calls ``_step`` every ``tick`` seconds. A cursor that falls out of the
store's watch window raises ``Dropped``: the loop resyncs, as an informer
relists after 410. A step that fails is logged and the loop goes on, the
way a controller's worker survives a bad object.

Nothing here may await except the sleep between steps: a step runs
atomically with respect to every API request.

:func:`record_event` is how they all report what they did: an Event on the
object, as a controller's event recorder writes one.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from typing import Any

from bench.simcluster import errors
from bench.simcluster.resources import lookup
from bench.simcluster.store import Dropped, Store

EVENTS = lookup("", "v1", "events")
log = logging.getLogger("simcluster.looping")


def record_event(store: Store, obj: dict[str, Any], kind: str, api_version: str, component: str,
                 type_: str, reason: str, message: str) -> None:
    """An Event about ``obj`` (of ``kind``) from ``component``, as client-go's recorder writes one.

    A failure is logged, never raised: a controller's work does not depend on its events.
    """
    meta = obj["metadata"]
    now = store.now()
    body = {"metadata": {"name": f"{meta['name']}.{secrets.token_hex(8)}", "namespace": meta["namespace"]},
            "involvedObject": {"kind": kind, "namespace": meta["namespace"], "name": meta["name"],
                               "uid": meta["uid"], "apiVersion": api_version,
                               "resourceVersion": meta.get("resourceVersion", "")},
            "reason": reason, "message": message, "source": {"component": component},
            "firstTimestamp": now, "lastTimestamp": now, "count": 1, "type": type_,
            "reportingComponent": component, "reportingInstance": ""}
    try:
        store.create(EVENTS, meta["namespace"], body)
    except errors.APIError as exc:
        log.debug("event %s for %s %s: %s", reason, kind, meta["name"], exc.message)


class StoreLoop:
    """One background task over the store; subclasses implement ``_resync`` and ``_step``."""

    def __init__(self, name: str, tick: float, log: logging.Logger) -> None:
        self.name = name  # the task's name, and how failures are logged
        self.tick = tick
        self.log = log
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    def _resync(self) -> Any:
        """Open fresh cursors at the store's current resourceVersion and take in what is stored."""
        raise NotImplementedError

    def _step(self, cursors: Any) -> None:
        """Take in the cursors' new events and act on them; may raise Dropped."""
        raise NotImplementedError

    async def _run(self) -> None:
        cursors = None
        while True:
            try:
                if cursors is None:
                    cursors = self._resync()
                self._step(cursors)
                await asyncio.sleep(self.tick)
            except Dropped:
                cursors = None  # fell behind the watch window: rescan everything
            except asyncio.CancelledError:
                raise
            except Exception:
                self.log.exception("%s: step failed; continuing", self.name)
                await asyncio.sleep(0.5)
