"""The import boundaries between the packages, read from the source with ``ast``.

* ``scheduler/`` never imports ``bench`` or ``tests``: the scheduler ships
  without them.
* A plugin module imports only the standard library, numpy,
  ``scheduler.framework`` (and its submodules: the node table
  ``framework.nodetable``, the pod counts ``framework.podcounts``) and
  ``scheduler.model`` (and its submodules): the framework is the whole of
  what a plugin may know about the scheduler (never ``scheduler.state``). No
  plugin imports another plugin (none does; what two plugins share belongs in
  the framework). ``plugins/__init__.py`` is the registry loader: it alone
  may import ``plugins.*`` modules, which it does by computed names.
* ``scheduler/model/`` imports nothing of tandem outside itself: the records
  are the leaf everything else builds on.
* ``bench/simcluster/`` imports nothing of tandem outside itself (not
  ``scheduler``, ``plugins``, the rest of ``bench``, or ``tests``): the
  simulated cluster stands alone, as the API server it stands in for.
* The runtime ``dependencies`` in pyproject.toml are exactly the
  distributions ``scheduler/`` and ``plugins/`` import; everything else that
  ``bench/`` imports comes from the ``bench`` extra.

Two promises hold for every module in ``scheduler/`` and ``plugins/``:

* **No import circle**, not even one that exists only for type checking: a
  circle means two modules cannot be understood (or moved) apart. The test
  names the files of the circle and the import lines that close it.
* **No module over 700 lines** (:data:`MAX_LINES`): past that a module
  holds more than one idea; the failure names the file.

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


def model_rule(importer: str, imp: Import) -> bool:
    return _top(imp.module) not in FIRST_PARTY or _within(imp.module, "scheduler.model")


def simcluster_rule(importer: str, imp: Import) -> bool:
    return _top(imp.module) not in FIRST_PARTY or _within(imp.module, "bench.simcluster")


RULES: tuple[tuple[str, str, Rule], ...] = (
    ("scheduler", "never imports bench or tests", scheduler_rule),
    ("plugins", "imports only the standard library, numpy, scheduler.framework and scheduler.model",
     plugin_rule),
    ("scheduler/model", "imports nothing of tandem outside scheduler.model", model_rule),
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
                 "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from scheduler.state.cache import Cache\n", 3,
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
    pytest.param("plugins.x", "from scheduler.model.storage import PersistentVolume\n", False, True,
                 id="a plugin may import a model submodule"),
    pytest.param("plugins.x", "from scheduler.framework.nodetable import NodeTable\n", False, True,
                 id="a plugin may import the node table"),
    pytest.param("plugins.x", "from scheduler.framework.podcounts import PodCounts\n", False, True,
                 id="a plugin may import the pod counts"),
    pytest.param("plugins.x", "from scheduler.state.cache import Cache\n", False, False,
                 id="a plugin may not import the cache"),
    pytest.param("plugins.x", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                 "    from scheduler.state.gangs import GangIndex\n", False, False,
                 id="a plugin may not import the state even for type checking"),
    pytest.param("plugins.x", "from scheduler.state import cache\n", False, False,
                 id="a plugin may not import the cache as a submodule of scheduler.state"),
    pytest.param("plugins.x", "from scheduler import state\n", False, False,
                 id="a plugin may not import the state package"),
    pytest.param("plugins.x", "from scheduler import queue\n", False, False,
                 id="a plugin may not import the queue as a submodule of scheduler"),
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


def test_the_model_rule_refuses_the_rest_of_tandem() -> None:
    refused = ["from scheduler.framework.nodetable import NodeTable", "from scheduler.state.cache import Cache",
               "import plugins", "from scheduler import queue"]
    allowed = ["from scheduler.model.fields import _d", "from . import quantity", "import orjson", "import re"]
    for line in refused + allowed:
        [imp] = imports(line + "\n", "scheduler.model.pod")
        assert model_rule("scheduler.model.pod", imp) is (line in allowed), line


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


# ---------------------------------------------------------------------------- no circle, no giant module

CHECKED = ("scheduler", "plugins")
MAX_LINES = 700

Graph = dict[str, dict[str, Import]]      # module -> {module it imports: the first import of it}


def import_graph(root: Path = REPO, folders: tuple[str, ...] = CHECKED) -> tuple[Graph, dict[str, Path]]:
    """Who imports whom among the modules under ``folders``, every import counted (TYPE_CHECKING ones too)."""
    paths = {module_name(p, root): p for folder in folders for p in sorted((root / folder).rglob("*.py"))}
    graph: Graph = {}
    for name, path in paths.items():
        edges: dict[str, Import] = {}
        for imp in imports(path.read_text(), name, path.name == "__init__.py", root):
            if imp.module in paths and imp.module != name:
                edges.setdefault(imp.module, imp)
        graph[name] = edges
    return graph, paths


def circles(graph: Graph) -> list[list[str]]:
    """One circle per group of modules that import one another, as its modules with the first repeated last.

    The groups are the strongly connected components (Tarjan's algorithm); each circle is the shortest one
    through the group's first module by name, so the report is stable.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:            # recursion is as deep as the longest import chain
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    out = []
    for group in groups:
        members, start = set(group), min(group)
        came_from: dict[str, str] = {start: ""}
        frontier = [start]
        found = ""
        while frontier and not found:       # breadth first: the shortest way back to start
            nxt = []
            for u in frontier:
                for w in sorted(graph[u]):
                    if w == start:
                        found = u
                        break
                    if w in members and w not in came_from:
                        came_from[w] = u
                        nxt.append(w)
                if found:
                    break
            frontier = nxt
        path = [found]
        while path[-1] != start:
            path.append(came_from[path[-1]])
        out.append([*reversed(path), start])
    return sorted(out)


def describe(circle: list[str], graph: Graph, paths: dict[str, Path], root: Path = REPO) -> str:
    """The circle's files, then the import line that takes each one to the next."""
    rel = {m: paths[m].relative_to(root).as_posix() for m in circle}
    lines = ["import circle: " + " -> ".join(rel[m] for m in circle)]
    for a, b in zip(circle, circle[1:]):
        lines.append(f"  {graph[a][b].where(rel[a])}")
    return "\n".join(lines)


def test_there_is_no_import_circle() -> None:
    graph, paths = import_graph()
    found = [describe(c, graph, paths) for c in circles(graph)]
    assert not found, "\n".join(found)


def _all_modules() -> Iterator[object]:
    for folder in CHECKED:
        for path in sorted((REPO / folder).rglob("*.py")):
            yield pytest.param(path, id=path.relative_to(REPO).as_posix())


@pytest.mark.parametrize("path", list(_all_modules()))
def test_no_module_is_over_the_line_ceiling(path: Path) -> None:
    n = len(path.read_text().splitlines())
    assert n <= MAX_LINES, (f"{path.relative_to(REPO).as_posix()} has {n} lines, over the {MAX_LINES}-line "
                            f"ceiling: split it by concern")


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, source in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)


# the circle issue 19 found: type-only at its last step, and a circle all the same
TYPE_ONLY_CIRCLE = {
    "scheduler/__init__.py": "",
    "scheduler/cache.py": "from scheduler.podcounts import PodCounts\n",
    "scheduler/podcounts.py": "from scheduler.framework.topology import domain_counts\n",
    "scheduler/framework/__init__.py": "",
    "scheduler/framework/topology.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                                       "    from scheduler.cache import NodeTable\n",
    "plugins/__init__.py": "",
    "plugins/x.py": "from scheduler.framework.topology import domain_counts\n",
}


def test_a_type_only_circle_is_found_and_its_files_named(tmp_path: Path) -> None:
    _tree(tmp_path, TYPE_ONLY_CIRCLE)
    graph, paths = import_graph(tmp_path)
    [circle] = circles(graph)
    assert circle == ["scheduler.cache", "scheduler.podcounts", "scheduler.framework.topology", "scheduler.cache"]
    assert describe(circle, graph, paths, tmp_path).splitlines() == [
        "import circle: scheduler/cache.py -> scheduler/podcounts.py -> scheduler/framework/topology.py"
        " -> scheduler/cache.py",
        "  scheduler/cache.py:1: from scheduler.podcounts import PodCounts  (imports scheduler.podcounts)",
        "  scheduler/podcounts.py:1: from scheduler.framework.topology import domain_counts"
        "  (imports scheduler.framework.topology)",
        "  scheduler/framework/topology.py:4: from scheduler.cache import NodeTable  (imports scheduler.cache)",
    ]


def test_the_circle_goes_once_the_table_moves_to_the_framework(tmp_path: Path) -> None:
    _tree(tmp_path, {**TYPE_ONLY_CIRCLE,
                     "scheduler/framework/nodetable.py": "import numpy as np\n",
                     "scheduler/framework/topology.py": "from scheduler.framework.nodetable import NodeTable\n"})
    assert circles(import_graph(tmp_path)[0]) == []


@pytest.mark.parametrize("files, circle", [
    pytest.param({"scheduler/__init__.py": "", "scheduler/model/__init__.py": "from scheduler.model.pod import Pod\n",
                  "scheduler/model/pod.py": "from scheduler.model import Taint\n"},
                 ["scheduler.model", "scheduler.model.pod", "scheduler.model"],
                 id="a submodule importing its own package's re-exports"),
    pytest.param({"scheduler/__init__.py": "", "scheduler/a.py": "def f():\n    from . import b\n",
                  "scheduler/b.py": "import scheduler.a\n"},
                 ["scheduler.a", "scheduler.b", "scheduler.a"], id="through a relative import inside a function"),
    pytest.param({"scheduler/__init__.py": "", "scheduler/a.py": "from scheduler import b\n",
                  "scheduler/b.py": "x = 1\n", "plugins/__init__.py": "", "plugins/p.py": "import scheduler.a\n"},
                 None, id="no circle: a chain across the two folders"),
])
def test_the_circle_finder(tmp_path: Path, files: dict[str, str], circle: list[str] | None) -> None:
    _tree(tmp_path, files)
    assert circles(import_graph(tmp_path)[0]) == ([circle] if circle else [])


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
