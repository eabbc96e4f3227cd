"""scheduler/framework/status.py: Status is an immutable value, safe to share between plugins and cycles."""

from __future__ import annotations

import dataclasses

import pytest

from scheduler.framework.status import SUCCESS, Code, Status

U = Code.UNSCHEDULABLE


@pytest.mark.parametrize("field, value", [
    pytest.param("code", Code.ERROR, id="the code"),
    pytest.param("reasons", ("changed",), id="the reasons"),
    pytest.param("plugin", "Somebody", id="the plugin"),
    pytest.param("error", RuntimeError("x"), id="the error"),
])
def test_a_status_cannot_be_changed_in_place(field: str, value: object) -> None:
    st = Status(U, "Insufficient cpu", plugin="NodeResourcesFit")
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(st, field, value)
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(st, field)
    assert not hasattr(st, "__dict__")   # slotted: no other attributes either
    assert (st.code, st.reasons, st.plugin, st.error) == (U, ("Insufficient cpu",), "NodeResourcesFit", None)


def test_with_plugin_on_the_shared_success_leaves_it_untouched() -> None:
    a = SUCCESS.with_plugin("A")
    b = SUCCESS.with_plugin("B")
    assert (a.plugin, b.plugin, SUCCESS.plugin) == ("A", "B", "")
    assert a is not SUCCESS and a.is_success() and a == SUCCESS


def test_with_plugin_copies_code_reasons_and_error() -> None:
    boom = OSError("connection reset")
    st = Status(Code.ERROR, "first", "second", error=boom)
    named = st.with_plugin("DefaultBinder")
    assert (named.code, named.reasons, named.plugin, named.error) == (Code.ERROR, ("first", "second"),
                                                                       "DefaultBinder", boom)
    assert st.plugin == ""


def test_with_plugin_keeps_the_plugin_a_status_already_names() -> None:
    st = Status(U, "gang is incomplete", plugin="Coscheduling")
    assert st.with_plugin("Other") is st


def test_equality_and_hash_ignore_the_plugin() -> None:
    assert Status(U, "r", plugin="A") == Status(U, "r") and hash(Status(U, "r", plugin="A")) == hash(Status(U, "r"))
    assert Status(U, "r") != Status(U, "s") and Status(U, "r") != Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "r")
