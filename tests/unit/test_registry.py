"""scheduler/framework/registry.py and interface.py: a plugin declares its extension points, checked against its methods.

The Python stand-in for kube-scheduler's compile-time ``var _ framework.FilterPlugin = &Plugin{}``: a
declared point whose method is missing, a method of a point left undeclared, or a method whose name is a
near miss of an extension-point method ("scroe") refuses the plugin when it is registered or when a
framework is built from it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scheduler.config import POINTS as CONFIG_FIELDS
from scheduler.config import Profile
from scheduler.framework import Handle, Status, register
from scheduler.framework import interface as fi
from scheduler.framework.clock import FakeClock
from scheduler.framework.registry import REGISTRY, load_builtin_plugins
from scheduler.framework.runtime import Framework
from scheduler.state.cache import Cache

load_builtin_plugins()

BUILTIN = sorted(REGISTRY.items())


def has_methods(cls: type, point: str) -> bool:
    return all(callable(getattr(cls, m, None)) for m in fi.POINT_METHODS[point])


# ---------------------------------------------------------------------------- the built-in plugins

@pytest.mark.parametrize("cls", [pytest.param(cls, id=name) for name, cls in BUILTIN])
def test_builtin_plugin_declares_exactly_the_points_whose_methods_it_has(cls: type) -> None:
    declared = cls.EXTENSION_POINTS
    assert isinstance(declared, frozenset) and declared <= set(fi.POINTS)
    assert declared == {p for p in fi.POINTS if has_methods(cls, p)}
    for point in declared:
        assert isinstance(cls, fi.POINTS[point]), f"{cls.NAME} declares {point} but is no {fi.POINTS[point].__name__}"
    assert fi.check_extension_points(cls) is declared


def test_every_upstream_extension_point_in_the_configuration_is_a_declarable_point() -> None:
    # kubescheduler.config.k8s.io/v1 Plugins, in upstream's field order (multiPoint aside)
    assert CONFIG_FIELDS == ("preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score",
                             "reserve", "permit", "preBind", "bind", "postBind")
    assert set(fi.CONFIG_POINTS.values()) <= set(fi.POINTS)
    assert {k: v for k, v in fi.CONFIG_POINTS.items() if k[0].upper() + k[1:] != v} == {}


@pytest.mark.parametrize("point, methods", [
    pytest.param("Reserve", ("reserve", "unreserve"), id="Reserve needs reserve and unreserve"),
    pytest.param("QueueSort", ("sort_key",), id="QueueSort needs sort_key"),
    pytest.param("NormalizeScore", ("normalize",), id="NormalizeScore needs normalize"),
    pytest.param("Gang", ("gang_key", "gang_failed", "can_be_whole", "reject_gang", "give_up", "forget", "trying"),
                 id="Gang needs its group cycle's hooks"),
    pytest.param("Bind", ("bind",), id="Bind needs bind"),
])
def test_point_methods_come_from_the_protocols(point: str, methods: tuple[str, ...]) -> None:
    assert fi.POINT_METHODS[point] == methods


# ---------------------------------------------------------------------------- refusals

def plugin(points: Any, **methods: Any) -> type:
    """A plugin class named TestDeclared with ``EXTENSION_POINTS = points`` (unset if ...) and ``methods``."""
    attrs: dict[str, Any] = {"NAME": "TestDeclared", "Args": None, "__init__": lambda self, args, handle: None}
    if points is not ...:
        attrs["EXTENSION_POINTS"] = points
    return type("TestDeclared", (), {**attrs, **methods})


def sync(self: Any, *args: Any) -> Any:
    return Status()


async def asynchronous(self: Any, *args: Any) -> Any:
    return Status()


REFUSED = [
    pytest.param(plugin(frozenset({"Score"})),
                 r"plugin TestDeclared: declares Score but has no method score\(\)",
                 id="a declared point without its method"),
    pytest.param(plugin(frozenset({"Score"}), scroe=sync),
                 r"plugin TestDeclared: declares Score but has no method score\(\)",
                 id="a declared point whose method is misspelt"),
    pytest.param(plugin(frozenset({"Filter"}), filter=sync, scroe=sync),
                 r"plugin TestDeclared: method scroe\(\) looks like score\(\) of Score",
                 id="an undeclared misspelt extension-point method"),
    pytest.param(plugin(frozenset({"Filter"}), filter=sync, preFilter=sync),
                 r"plugin TestDeclared: method preFilter\(\) looks like pre_filter\(\) of PreFilter",
                 id="an extension-point method spelt as in Go"),
    pytest.param(plugin(frozenset({"Score"}), score=sync, normalize_score=sync),
                 r"plugin TestDeclared: method normalize_score\(\) looks like normalize\(\) of NormalizeScore",
                 id="upstream's NormalizeScore name for normalize"),
    pytest.param(plugin(frozenset({"Score"}), score=sync, normalize=sync),
                 r"plugin TestDeclared: defines normalize\(\) but does not declare NormalizeScore",
                 id="a method of a point the plugin does not declare"),
    pytest.param(plugin(frozenset({"Reserve"}), reserve=sync),
                 r"plugin TestDeclared: declares Reserve but has no method unreserve\(\)",
                 id="half of a two-method point"),
    pytest.param(plugin(frozenset({"NormalizeScore"}), normalize=sync),
                 r"plugin TestDeclared: declares NormalizeScore without Score",
                 id="NormalizeScore without Score"),
    pytest.param(plugin(frozenset({"Bind"}), bind=sync),
                 r"plugin TestDeclared: Bind method bind\(\) must be async def",
                 id="a synchronous bind"),
    pytest.param(plugin(frozenset({"Filter"}), filter=asynchronous),
                 r"plugin TestDeclared: Filter method filter\(\) must be def \(not async\)",
                 id="a coroutine filter"),
    pytest.param(plugin(frozenset({"Scroe"}), score=sync),
                 r"plugin TestDeclared: unknown extension point 'Scroe' in EXTENSION_POINTS",
                 id="a misspelt point name in the declaration"),
    pytest.param(plugin(frozenset({"score"}), score=sync),
                 r"plugin TestDeclared: unknown extension point 'score'",
                 id="a configuration field name instead of the point name"),
    pytest.param(plugin(..., filter=sync),
                 r"plugin TestDeclared: EXTENSION_POINTS must be a frozenset .* got None",
                 id="no declaration at all"),
    pytest.param(plugin({"Filter"}, filter=sync),
                 r"plugin TestDeclared: EXTENSION_POINTS must be a frozenset",
                 id="a mutable set as the declaration"),
]


@pytest.mark.parametrize("cls, message", REFUSED)
def test_register_refuses_a_plugin_whose_declaration_does_not_match_its_methods(cls: type, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        register(cls)
    assert "TestDeclared" not in REGISTRY


@pytest.mark.parametrize("cls, message", REFUSED[:3])
def test_framework_refuses_a_plugin_that_reached_the_registry_without_register(
        cls: type, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(REGISTRY, "TestDeclared", cls)
    profile = Profile(scheduler_name="test", plugins={"filter": ["TestDeclared"]}, weights={}, plugin_args={})
    with pytest.raises(TypeError, match=message):
        Framework(profile, Handle(Cache(), scheduler_name="test", clock=FakeClock()))


@pytest.mark.parametrize("cls", [
    pytest.param(plugin(frozenset({"Filter"}), filter=sync, _scroe=sync, score_request=sync, fit_request=sync),
                 id="private near misses and helpers with other names"),
    pytest.param(plugin(frozenset({"Reserve", "Permit"}), reserve=sync, unreserve=sync, permit=sync),
                 id="two points, three methods"),
    pytest.param(plugin(frozenset({"PreBind", "Bind", "Background"}), pre_bind=asynchronous, bind=asynchronous,
                        run=asynchronous), id="the async points"),
    pytest.param(plugin(frozenset(), hold=sync), id="no points"),
])
def test_a_matching_declaration_is_accepted(cls: type, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(REGISTRY, "TestDeclared", cls)   # so that the entry is gone after the test
    assert register(cls) is cls


def test_subclass_inherits_methods_and_declaration() -> None:
    base = plugin(frozenset({"Filter"}), filter=sync)
    sub = type("TestSub", (base,), {"NAME": "TestSub", "score": sync})
    with pytest.raises(TypeError, match=r"plugin TestSub: defines score\(\) but does not declare Score"):
        fi.check_extension_points(sub)
    sub.EXTENSION_POINTS = base.EXTENSION_POINTS | {"Score"}
    assert fi.check_extension_points(sub) == {"Filter", "Score"}


# ---------------------------------------------------------------------------- the framework reads the declaration

class _FilterScoreGang:
    """Filter, Score, EnqueueExtensions, Gang and Background methods, for a framework to sort into its lists."""

    Args = None

    def __init__(self, args: Any, handle: Any) -> None: ...

    def filter(self, state: Any, pod: Any, nodes: Any, rows: np.ndarray) -> Any: ...

    def score(self, state: Any, pod: Any, nodes: Any, rows: np.ndarray) -> Any: ...

    def events_to_register(self) -> list[Any]:
        return []

    def gang_key(self, pod: Any) -> str | None: ...

    def gang_failed(self, pod: Any, status: Status) -> str: ...

    def can_be_whole(self, key: str, unplaceable: Any) -> bool: ...

    def reject_gang(self, pod: Any, why: str) -> str: ...

    def give_up(self, key: str, msg: str) -> None: ...

    def forget(self, key: str) -> None: ...

    def trying(self, key: str) -> Any: ...

    async def run(self) -> None: ...


def test_framework_lists_come_from_declarations(monkeypatch: pytest.MonkeyPatch) -> None:
    declared = type("TestDeclaredAll", (_FilterScoreGang,), {
        "NAME": "TestDeclaredAll",
        "EXTENSION_POINTS": frozenset({"Filter", "Score", "EnqueueExtensions", "Gang", "Background"})})
    monkeypatch.setitem(REGISTRY, "TestDeclaredAll", declared)
    profile = Profile(scheduler_name="test", plugins={"filter": ["TestDeclaredAll"], "score": ["TestDeclaredAll"]},
                      weights={}, plugin_args={})
    fw = Framework(profile, Handle(Cache(), scheduler_name="test", clock=FakeClock()))
    p = fw.plugins["TestDeclaredAll"]
    assert fw.filter_plugins == [p] and fw.score_plugins == [p]
    assert fw.enqueue_extensions == [p] and fw.background_plugins == [p] and fw.gang is p
    assert fw._normalizes == set()
