"""Scheduling plugins, one module each; importing the package registers them all.

A plugin module defines one class with ``NAME`` (the upstream name),
``Args`` (a frozen dataclass of its pluginConfig args, or None), a
constructor ``(args, handle)`` and the extension-point methods it
implements, and decorates it with ``scheduler.framework.register``.
"""

import importlib
import pkgutil

for _mod in pkgutil.iter_modules(__path__):
    if not _mod.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_mod.name}")
