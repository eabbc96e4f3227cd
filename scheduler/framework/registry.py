"""Plugin registry and plugin args parsing.

Each plugin module registers its class with :func:`register`; the class
has ``NAME`` (the upstream name, e.g. "NodeResourcesFit"), ``EXTENSION_POINTS``
(checked against its methods here, see ``interface.check_extension_points``)
and ``Args``, a frozen dataclass of its pluginConfig args (or None). :func:`parse_args`
turns the YAML/JSON ``args`` of a KubeSchedulerConfiguration into that
dataclass: camelCase keys map to snake_case fields, unknown keys and wrong
types are a :class:`ConfigError` naming the field path, and the dataclass's
own ``validate()`` checks ranges. Defaults live on the dataclass.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import types
import typing
from typing import Any, Callable

from scheduler.framework.interface import check_extension_points

REGISTRY: dict[str, type] = {}


class ConfigError(ValueError):
    """A configuration problem, phrased as one line naming the field."""


def register(cls: type) -> type:
    name = getattr(cls, "NAME", None)
    if not name:
        raise TypeError(f"{cls.__qualname__} has no NAME")
    if name in REGISTRY and REGISTRY[name] is not cls:
        raise TypeError(f"plugin {name} registered twice ({REGISTRY[name].__module__}, {cls.__module__})")
    check_extension_points(cls)
    REGISTRY[name] = cls
    return cls


def load_builtin_plugins() -> dict[str, type]:
    """Import the plugins package (each module registers itself)."""
    importlib.import_module("plugins")
    return REGISTRY


_CAMEL_RE = re.compile(r"_([a-z0-9])")


def camel(name: str) -> str:
    return _CAMEL_RE.sub(lambda m: m.group(1).upper(), name)


def parse_args(args_cls: type | None, raw: Any, path: str) -> Any:
    """Build ``args_cls`` from a config mapping; ``path`` prefixes every error."""
    if args_cls is None:
        if raw not in (None, {}):
            keys = sorted(raw) if isinstance(raw, dict) else raw
            raise ConfigError(f"{path}: this plugin takes no args (got {keys})")
        return None
    if raw is None:
        raw = {}
    value = _convert(args_cls, raw, path)
    validate = getattr(value, "validate", None)
    if validate is not None:
        validate(path)
    return value


def _convert(tp: Any, raw: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: expected an object, got {_kind(raw)}")
        hints = typing.get_type_hints(tp)
        by_json = {f.metadata.get("json", camel(f.name)): f for f in dataclasses.fields(tp) if f.init}
        unknown = [k for k in raw if k not in by_json and k not in ("apiVersion", "kind")]
        if unknown:
            raise ConfigError(f"{path}.{unknown[0]}: unknown field (known: {', '.join(sorted(by_json))})")
        kwargs = {}
        for key, f in by_json.items():
            if key in raw:
                kwargs[f.name] = _convert(hints[f.name], raw[key], f"{path}.{key}")
        return tp(**kwargs)
    if origin in (typing.Union, types.UnionType):
        opts = [a for a in typing.get_args(tp) if a is not type(None)]
        if raw is None:
            return None
        if len(opts) == 1:
            return _convert(opts[0], raw, path)
        for opt in opts:
            try:
                return _convert(opt, raw, path)
            except ConfigError:
                continue
        raise ConfigError(f"{path}: {raw!r} is not a valid value")
    if origin in (list, tuple):
        if not isinstance(raw, list):
            raise ConfigError(f"{path}: expected a list, got {_kind(raw)}")
        (item,) = typing.get_args(tp)[:1] or (Any,)
        out = [_convert(item, v, f"{path}[{i}]") for i, v in enumerate(raw)]
        return tuple(out) if origin is tuple else out
    if origin is dict:
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: expected an object, got {_kind(raw)}")
        kt, vt = typing.get_args(tp) or (Any, Any)
        return {k: _convert(vt, v, f"{path}.{k}") for k, v in raw.items()}
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        if raw not in allowed:
            raise ConfigError(f"{path}: {raw!r} is not one of {', '.join(map(repr, allowed))}")
        return raw
    if tp is Any:
        return raw
    if tp is bool:
        if not isinstance(raw, bool):
            raise ConfigError(f"{path}: expected true or false, got {_kind(raw)}")
        return raw
    if tp is int:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise ConfigError(f"{path}: expected an integer, got {_kind(raw)}")
        return raw
    if tp is float:
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise ConfigError(f"{path}: expected a number, got {_kind(raw)}")
        return float(raw)
    if tp is str:
        if not isinstance(raw, str):
            raise ConfigError(f"{path}: expected a string, got {_kind(raw)}")
        return raw
    raise TypeError(f"{path}: unsupported args field type {tp!r}")


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number"}.get(type(v), type(v).__name__) + f" ({v!r})"[:60]


def positive(path: str, name: str, value: float, allow_zero: bool = False) -> None:
    """A range check for ``validate`` methods."""
    if value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(f"{path}.{name}: must be {'>= 0' if allow_zero else '> 0'}, got {value}")


PluginFactory = Callable[[Any, Any], Any]
