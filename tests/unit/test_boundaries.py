"""The import boundaries between the packages, read from the source with ``ast``.

* ``scheduler/`` never imports ``bench`` or ``tests``: the scheduler ships
  without them.
* A plugin module imports only the standard library, numpy,
  ``scheduler.framework`` (and its submodules) and ``scheduler.model``: the
  framework is the whole of what a plugin may know about the scheduler. No
  plugin imports another plugin (none does; what two plugins share belongs in
  the framework). ``plugins/__init__.py`` is the registry loader: it alone
  may import ``plugins.*`` modules, which it does by computed names.
* ``bench/simcluster/`` imports nothing of tandem outside itself (not
  ``scheduler``, ``plugins``, the rest of ``bench``, or ``tests``): the
  simulated cluster stands alone, as the API server it stands in for.
* The runtime ``dependencies`` in pyproject.toml are exactly the
  distributions ``scheduler/`` and ``plugins/`` import; everything else that
  ``bench/`` imports comes from the ``bench`` extra.

Every import counts: ``import x``, ``from x import y``, relative imports,
imports inside functions and ``if TYPE_CHECKING:`` blocks, and
``importlib.import_module`` / ``__import__`` with a literal name. (Imports
by a computed name, like the registry loader's, cannot be read statically.)
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]
FIRST_PARTY = ("scheduler", "plugins", "bench", "tests")


@dataclass(frozen=True)
class Import:
    line: int
    module: str       # the module imported, absolute
    source: str       # the statement as written

    def where(self, path: str) -> str:
        return f"{path}:{self.line}: {self.source}  (imports {self.module})"


def module_name(path: Path, root: Path = REPO) -> str:
    """``scheduler/framework/__init__.py`` -> ``scheduler.framework``; ``plugins/node_name.py`` -> ``plugins.node_name``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str, root: Path) -> bool:
    """Whether ``name`` is a first-party module or package in the repository."""
    base = root.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _resolve(module: str | None, level: int, importer: str, is_package: bool) -> str:
    """The absolute name of ``from <level dots><module> import ...`` written in ``importer``."""
    if not level:
        return module or ""
    package = importer.split(".") if is_package else importer.split(".")[:-1]
    base = package[:len(package) - level + 1]     # one dot: this package; each further dot: one up
    return ".".join([*base, *([module] if module else [])])


def imports(source: str, importer: str, is_package: bool = False, root: Path = REPO) -> Iterator[Import]:
    """Every module ``source`` imports, wherever in the file the import is."""
    tree = ast.parse(source)
    lines = source.splitlines()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(node.lineno, alias.name, lines[node.lineno - 1].strip())
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node.module, node.level, importer, is_package)
            for alias in node.names:
                # `from pkg import sub` imports the module pkg.sub when there is one
                sub = f"{base}.{alias.name}" if base else alias.name
                module = sub if alias.name != "*" and _is_module(sub, root) else base
                yield Import(node.lineno, module, lines[node.lineno - 1].strip())
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) and _is_import_call(node.func):
            name = node.args[0].value
            if name.startswith("."):      # import_module(".x", package): relative to this package
                dots = len(name) - len(name.lstrip("."))
                name = _resolve(name[dots:] or None, dots, importer, is_package)
            yield Import(node.lineno, name, lines[node.lineno - 1].strip())


def _is_import_call(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ("__import__", "import_module")
    return isinstance(func, ast.Attribute) and func.attr == "import_module"


def _top(module: str) -> str:
    return module.split(".")[0]


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


# ---------------------------------------------------------------------------- the rules

Rule = Callable[[str, Import], bool]      # (importing module, import) -> allowed


def scheduler_rule(importer: str, imp: Import) -> bool:
    return _top(imp.module) not in ("bench", "tests")


def plugin_rule(importer: str, imp: Import) -> bool:
    m = imp.module
    if _top(m) in sys.stdlib_module_names or _top(m) == "numpy":
        return True
    if _within(m, "scheduler.framework") or _within(m, "scheduler.model"):
        return True
    return importer == "plugins" and _within(m, "plugins")


def simcluster_rule(importer: str, imp: Import) -> bool:
    return _top(imp.module) not in FIRST_PARTY or _within(imp.module, "bench.simcluster")


RULES: tuple[tuple[str, str, Rule], ...] = (
    ("scheduler", "never imports bench or tests", scheduler_rule),
    ("plugins", "imports only the standard library, numpy, scheduler.framework and scheduler.model",
     plugin_rule),
    ("bench/simcluster", "imports nothing of tandem outside bench/simcluster", simcluster_rule),
)


def violations(path: Path, rule: Rule, root: Path = REPO) -> list[Import]:
    importer = module_name(path, root)
    found = imports(path.read_text(), importer, path.name == "__init__.py", root)
    return [imp for imp in found if not rule(importer, imp)]


def _cases() -> Iterator[object]:
    for folder, promise, rule in RULES:
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            yield pytest.param(path, promise, rule, id=f"{rel} {promise}")


@pytest.mark.parametrize("path, promise, rule", list(_cases()))
def test_package_boundary(path: Path, promise: str, rule: Rule) -> None:
    bad = violations(path, rule)
    rel = path.relative_to(REPO).as_posix()
    assert not bad, f"{rel} {promise}, but:\n" + "\n".join(f"  {imp.where(rel)}" for imp in bad)


def test_every_package_the_rules_name_has_files() -> None:
    for folder, _, _ in RULES:
        assert list((REPO / folder).rglob("*.py")), f"no .py files under {folder}: the rule checks nothing"


# ---------------------------------------------------------------------------- the checker itself

@pytest.mark.parametrize("rule, path, source, line", [
    pytest.param(scheduler_rule, "scheduler/mod.py", "import os\nimport bench.simcluster\n", 2,
                 id="a forbidden import is found"),
    pytest.param(scheduler_rule, "scheduler/mod.py", "import os\nfrom bench.simcluster import SimCluster\n", 2,
                 id="a forbidden from-import is found"),
    pytest.param(simcluster_rule, "bench/simcluster/mod.py", "import os\nfrom .. import report\n", 2,
                 id="a forbidden relative import is found"),
    pytest.param(scheduler_rule, "scheduler/mod.py",
                 "def f():\n    from tests.support import envtest\n    return envtest\n", 2,
                 id="a forbidden import inside a function is found"),
    pytest.param(plugin_rule, "plugins/mod.py",
                 "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from scheduler.cache import NodeTable\n", 3,
                 id="a forbidden import under TYPE_CHECKING is found"),
    pytest.param(scheduler_rule, "scheduler/mod.py", "import importlib\nm = importlib.import_module('bench.report')\n",
                 2, id="a forbidden import_module with a literal name is found"),
    pytest.param(scheduler_rule, "scheduler/mod.py", "import os\nx = __import__('tests.support')\n", 2,
                 id="a forbidden __import__ with a literal name is found"),
])
def test_the_checker_finds_a_forbidden_import_wherever_it_is(tmp_path: Path, rule: Rule, path: str, source: str,
                                                             line: int) -> None:
    file = tmp_path / path
    file.parent.mkdir(parents=True)
    file.write_text(source)
    found = violations(file, rule, tmp_path)
    assert [(imp.line, imp.source) for imp in found] == [(line, source.splitlines()[line - 1].strip())], found


@pytest.mark.parametrize("importer, source, is_package, allowed", [
    pytest.param("plugins.x", "import numpy as np\n", False, True, id="a plugin may import numpy"),
    pytest.param("plugins.x", "from collections import deque\n", False, True,
                 id="a plugin may import the standard library"),
    pytest.param("plugins.x", "from scheduler.framework.vector import fit\n", False, True,
                 id="a plugin may import a framework submodule"),
    pytest.param("plugins.x", "from scheduler.model import Pod\n", False, True, id="a plugin may import the model"),
    pytest.param("plugins.x", "from scheduler.cache import NodeTable\n", False, False,
                 id="a plugin may not import the cache"),
    pytest.param("plugins.x", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                 "    from scheduler.cache import NodeTable\n", False, False,
                 id="a plugin may not import the cache even for type checking"),
    pytest.param("plugins.x", "from scheduler import cache\n", False, False,
                 id="a plugin may not import the cache as a submodule of scheduler"),
    pytest.param("plugins.x", "import yaml\n", False, False, id="a plugin may not import other third-party code"),
    pytest.param("plugins.x", "from . import node_name\n", False, False,
                 id="a plugin may not import another plugin"),
    pytest.param("plugins.x", "from plugins.node_name import NodeName\n", False, False,
                 id="a plugin may not import another plugin by its absolute name"),
    pytest.param("plugins", "importlib.import_module('plugins.node_name')\n", True, True,
                 id="the registry loader may import plugin modules"),
])
def test_the_plugin_rule(importer: str, source: str, is_package: bool, allowed: bool) -> None:
    found = list(imports(source, importer, is_package))
    assert found, "the checker saw no import"
    assert all(plugin_rule(importer, imp) for imp in found) is allowed, [str(i) for i in found]


@pytest.mark.parametrize("source, module", [
    pytest.param("from . import store\n", "bench.simcluster.store", id="a sibling module by from-dot-import"),
    pytest.param("from .store import Store\n", "bench.simcluster.store", id="a sibling module's name"),
    pytest.param("from .. import report\n", "bench.report", id="the parent package's module"),
    pytest.param("from ..simcluster import errors\n", "bench.simcluster.errors", id="up and down again"),
])
def test_relative_imports_resolve_against_the_importing_module(source: str, module: str) -> None:
    assert [i.module for i in imports(source, "bench.simcluster.cluster")] == [module]


def test_the_simcluster_rule_refuses_the_rest_of_tandem() -> None:
    refused = ["from scheduler.model import Pod", "import plugins", "from bench.metrics import scrape",
               "from tests.support import envtest", "from .. import report"]
    allowed = ["from bench.simcluster.store import Store", "from . import errors", "import aiohttp", "import os"]
    for line in refused + allowed:
        [imp] = imports(line + "\n", "bench.simcluster.server")
        assert simcluster_rule("bench.simcluster.server", imp) is (line in allowed), line


def test_a_violation_names_the_file_line_and_import(tmp_path: Path) -> None:
    (tmp_path / "scheduler").mkdir()
    path = tmp_path / "scheduler" / "leaky.py"
    path.write_text('"""doc"""\n\nimport os\nfrom bench.simcluster import SimCluster\n')
    [found] = violations(path, scheduler_rule, tmp_path)
    assert found.where("scheduler/leaky.py") == ("scheduler/leaky.py:4: from bench.simcluster import SimCluster"
                                                 "  (imports bench.simcluster)")


# ---------------------------------------------------------------------------- dependencies

def _normalize(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def _requirement_names(reqs: list[str]) -> set[str]:
    return {_normalize(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", r).group(0)) for r in reqs}  # type: ignore[union-attr]


def _third_party_distributions(*folders: str) -> dict[str, list[str]]:
    """Distribution -> 'file:line module' for every non-stdlib, non-first-party import under ``folders``."""
    owners = importlib.metadata.packages_distributions()
    out: dict[str, list[str]] = {}
    for folder in folders:
        for path in sorted((REPO / folder).rglob("*.py")):
            for imp in imports(path.read_text(), module_name(path), path.name == "__init__.py"):
                top = _top(imp.module)
                if not top or top in sys.stdlib_module_names or top in FIRST_PARTY:
                    continue
                dists = owners.get(top)
                assert dists, f"{path.relative_to(REPO)}:{imp}: no installed distribution provides {top}"
                out.setdefault(_normalize(dists[0]), []).append(f"{path.relative_to(REPO)}:{imp.line} {top}")
    return out


PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_the_runtime_dependencies_are_what_the_scheduler_and_plugins_import() -> None:
    imported = _third_party_distributions("scheduler", "plugins")
    declared = _requirement_names(PROJECT["dependencies"])
    assert set(imported) - declared == set(), {d: imported[d][:3] for d in set(imported) - declared}
    assert declared - set(imported) == set(), "runtime dependencies nothing in scheduler/ or plugins/ imports"


def test_the_benchmark_needs_only_the_runtime_and_the_bench_extra() -> None:
    imported = _third_party_distributions("bench")
    allowed = _requirement_names(PROJECT["dependencies"]) | _requirement_names(
        PROJECT["optional-dependencies"]["bench"])
    assert set(imported) - allowed == set(), {d: imported[d][:3] for d in set(imported) - allowed}
    assert set(imported) >= _requirement_names(PROJECT["optional-dependencies"]["bench"]), \
        "the bench extra lists something bench/ does not import"
