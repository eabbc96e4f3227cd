"""DefaultBinder: bind through the pods/binding subresource.

The API client raises typed errors (``scheduler.apiclient``); this plugin
turns them into a Status at the boundary. One Conflict is not a failure:
if the API server says the pod "is already assigned to node X" and X is the
node we chose, an earlier attempt of ours (a retried request whose response
was lost) already bound it, so the binding is done. A Conflict naming
another node means someone else bound the pod: that is an error.
"""

from __future__ import annotations

from typing import Any

from scheduler.framework import CycleState, Status, register
from scheduler.model import Pod

_OK = Status()


@register
class DefaultBinder:
    NAME = "DefaultBinder"
    EXTENSION_POINTS = frozenset({"Bind"})
    Args = None

    def __init__(self, args: None, handle: Any) -> None:
        self.handle = handle

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        try:
            await self.handle.client.bind(pod.namespace, pod.name, pod.uid, node_name)
        except Exception as exc:  # noqa: BLE001 - an I/O failure becomes Status(ERROR) here
            if _already_bound_to(exc, node_name):
                return _OK
            return Status.from_error(exc, plugin=self.NAME)
        return _OK


def _already_bound_to(exc: BaseException, node_name: str) -> bool:
    # Duck-typed so it works with scheduler.apiclient.Conflict and with test doubles alike.
    if getattr(exc, "status", None) != 409:
        return False
    message = getattr(exc, "message", None) or str(exc)
    return f'is already assigned to node "{node_name}"' in message
