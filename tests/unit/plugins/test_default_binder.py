"""plugins/default_binder.py: bind via the API client; errors become Status values."""

from __future__ import annotations

from typing import Any

import pytest

from plugins.default_binder import DefaultBinder
from scheduler.framework import Code, CycleState
from scheduler.framework.interface import BindPlugin
from scheduler.model import Pod


class APIError(Exception):
    """Shaped like scheduler.apiclient's errors: an HTTP status and the server's message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class FakeClient:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.calls: list[tuple[str, str, str, str]] = []

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        self.calls.append((namespace, name, uid, node))
        if self.error is not None:
            raise self.error


class Handle:
    def __init__(self, client: Any) -> None:
        self.client = client


POD = Pod(uid="uid-1", namespace="team", name="web-0")
ALREADY = 'Operation cannot be fulfilled on pods/binding "web-0": pod web-0 is already assigned to node "{}"'


@pytest.mark.parametrize("error, code", [
    pytest.param(None, Code.SUCCESS, id="a successful bind is success"),
    pytest.param(APIError(409, ALREADY.format("node-a")), Code.SUCCESS,
                 id="a conflict saying the pod is already on our node is success"),
    pytest.param(APIError(409, ALREADY.format("node-b")), Code.ERROR,
                 id="a conflict saying the pod is on another node is an error"),
    pytest.param(APIError(409, "the object has been modified"), Code.ERROR, id="any other conflict is an error"),
    pytest.param(APIError(404, 'pods "web-0" not found'), Code.ERROR, id="a deleted pod is an error"),
    pytest.param(ConnectionResetError("reset by peer"), Code.ERROR, id="a connection failure is an error"),
])
async def test_bind(error: Exception | None, code: Code) -> None:
    client = FakeClient(error)
    st = await DefaultBinder(None, Handle(client)).bind(CycleState(), POD, "node-a")
    assert client.calls == [("team", "web-0", "uid-1", "node-a")]
    assert st.code == code
    if code == Code.ERROR:
        assert st.plugin == "DefaultBinder"
        assert st.error is error
        assert str(error) in st.message()


def test_is_a_bind_plugin() -> None:
    assert isinstance(DefaultBinder(None, Handle(FakeClient())), BindPlugin)
