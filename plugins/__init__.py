"""Scheduling plugins, one module each; importing the package registers them all.

A plugin module defines one class with ``NAME`` (the upstream name),
``EXTENSION_POINTS`` (the frozenset of extension points it implements,
e.g. ``frozenset({"PreFilter", "Filter"})``; see
``scheduler.framework.interface.POINTS``), ``Args`` (a frozen dataclass of
its pluginConfig args, or None), a constructor ``(args, handle)`` and the
methods of the points it declares, and decorates it with
``scheduler.framework.register``, which checks the declaration against the
methods.
"""

import importlib
import pkgutil

for _mod in pkgutil.iter_modules(__path__):
    if not _mod.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_mod.name}")
