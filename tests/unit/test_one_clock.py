"""One clock, read from the source with ``ast``: no time outside ``scheduler/framework/clock.py``.

Every deadline, backoff, timer and timestamp in ``scheduler/`` and
``plugins/`` comes from the injected clock (``clock()``, ``clock.wall()``,
``clock.call_later``, ``clock.sleep``, ``clock.wait``), so a fake clock in a
test moves all of them, and the timestamps tandem writes (event times,
PodScheduled, lease renewals) agree with each other. A module that builds a
``Clock()`` of its own, or reads the machine's time, breaks that quietly; this
test names the file and line.

Refused anywhere but in the clock itself: building ``Clock()``; reading
``time.time``, ``time.time_ns``, ``time.monotonic(_ns)``, ``datetime.now``,
``utcnow`` or ``today``; an event loop's ``time()``; sleeping or arming timers
off the clock (``time.sleep``, ``asyncio.sleep`` for more than a yield, a
loop's ``call_later`` / ``call_at``). Aliases count (``import time as t``,
``from time import monotonic``), and so does naming a reader without calling
it (a default argument such as ``clock_ns=time.time_ns``).

Allowed, because they do not schedule anything: ``time.perf_counter`` and
``time.process_time`` measure durations for metrics; ``asyncio.timeout`` and
``asyncio.wait_for`` bound real I/O and shutdown drains, which a fake clock
could never make happen sooner (see the clock's module docstring); formatting a
given time (``time.strftime``, ``time.gmtime``) reads nothing. The few other
places that must read the machine's time are listed in :data:`EXCEPTIONS`
with the reason, and each entry must still be needed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("scheduler", "plugins")
CLOCK_MODULE = "scheduler/framework/clock.py"     # the clock itself: the one place that reads the machine

# qualified names whose mere mention reads (or waits on) the machine's clock
READERS = {
    "time.time", "time.time_ns", "time.monotonic", "time.monotonic_ns", "time.sleep",
    "datetime.datetime.now", "datetime.datetime.utcnow", "datetime.datetime.today", "datetime.date.today",
}

# (file, what) -> why it may read the machine's clock; every entry must match a finding
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("scheduler/app.py", "Clock()"):
        "the process entry point: App builds the process's one real clock when none is given, and hands it "
        "to everything it builds",
    ("scheduler/secureserving.py", "datetime.datetime.now"):
        "the self-signed serving certificate's validity is judged by peers against their own clocks, so it "
        "is minted on the machine's; a fake clock would mint one not yet (or no longer) valid",
}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    what: str         # "Clock()", a qualified reader ("time.time_ns"), "loop.time()", "loop.call_later", ...
    source: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.source.strip()}  ({self.what})"


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> qualified name, for every import in the file (wherever it is)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    names[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _qualified(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """``t.monotonic`` -> ``time.monotonic`` under ``import time as t``; None for what is not a dotted name."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        base = _qualified(node.value, aliases)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _is_a_yield(call: ast.Call) -> bool:
    """``asyncio.sleep(0)``: gives the loop a turn, waits for no time."""
    return len(call.args) == 1 and isinstance(call.args[0], ast.Constant) and call.args[0].value == 0


def _on_the_clock(receiver: ast.expr) -> bool:
    """Whether a ``call_later`` / ``call_at`` / ``time`` receiver is the injected clock (``self.clock``, ``clock``)."""
    return "clock" in ast.unparse(receiver).lower()


def findings(source: str, path: str) -> Iterator[Finding]:
    """Every place ``source`` builds a clock or reads or waits on time outside the clock."""
    tree = ast.parse(source)
    lines = source.splitlines()
    aliases = _aliases(tree)

    def found(node: ast.AST, what: str) -> Finding:
        return Finding(path, node.lineno, what, lines[node.lineno - 1])

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("time", "datetime"):
            for a in node.names:
                if f"{node.module}.{a.name}" in READERS:
                    yield found(node, f"{node.module}.{a.name}")
        if isinstance(node, (ast.Attribute, ast.Name)) and isinstance(getattr(node, "ctx", None), ast.Load):
            q = _qualified(node, aliases)
            if q in READERS and not (isinstance(node, ast.Name) and node.id == q):   # `from time import
                yield found(node, q)                                                # time` is caught above
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name == "Clock":
            yield found(node, "Clock()")
        elif name == "sleep" and _qualified(func, aliases) == "asyncio.sleep" and not _is_a_yield(node):
            yield found(node, "asyncio.sleep")
        elif isinstance(func, ast.Attribute) and name in ("time", "call_later", "call_at") \
                and _qualified(func, aliases) not in READERS and not _on_the_clock(func.value):
            yield found(node, f"loop.{name}" + ("()" if name == "time" else ""))


def scanned_files() -> list[Path]:
    return sorted(p for d in SCANNED for p in (REPO / d).rglob("*.py") if ".venv" not in p.parts)


def all_findings() -> list[Finding]:
    out: list[Finding] = []
    for p in scanned_files():
        rel = p.relative_to(REPO).as_posix()
        if rel != CLOCK_MODULE:
            out.extend(findings(p.read_text(), rel))
    return out


def test_no_module_reads_time_outside_the_clock() -> None:
    bad = [f for f in all_findings() if (f.path, f.what) not in EXCEPTIONS]
    assert not bad, "time read or a clock built outside scheduler/framework/clock.py (inject the clock):\n" + \
        "\n".join(map(str, bad))


def test_every_exception_is_still_needed() -> None:
    seen = {(f.path, f.what) for f in all_findings()}
    stale = [f"{path}: {what}" for path, what in EXCEPTIONS if (path, what) not in seen]
    assert not stale, "exceptions that match nothing any more (delete them):\n" + "\n".join(stale)


def test_the_scan_covers_the_scheduler_and_the_plugins() -> None:
    paths = {p.relative_to(REPO).as_posix() for p in scanned_files()}
    assert CLOCK_MODULE in paths and "scheduler/observe.py" in paths and "plugins/coscheduling.py" in paths


@pytest.mark.parametrize("source, what", [
    pytest.param("import time\nx = time.time()", "time.time", id="time.time"),
    pytest.param("import time\ndef f(clock_ns=time.time_ns): ...", "time.time_ns",
                 id="a reader named as a default argument, not called"),
    pytest.param("import time as t\nx = t.monotonic()", "time.monotonic", id="an aliased time module"),
    pytest.param("from time import monotonic\nx = monotonic()", "time.monotonic", id="a reader imported by name"),
    pytest.param("import datetime\nx = datetime.datetime.now()", "datetime.datetime.now", id="datetime.now"),
    pytest.param("from datetime import datetime\nx = datetime.utcnow()", "datetime.datetime.utcnow",
                 id="datetime imported from datetime"),
    pytest.param("import asyncio\nx = asyncio.get_running_loop().time()", "loop.time()", id="the loop's time"),
    pytest.param("def f(loop): return loop.time()", "loop.time()", id="a loop's time by any name"),
    pytest.param("def f(loop, g): loop.call_later(5, g)", "loop.call_later", id="a timer on the loop"),
    pytest.param("import asyncio\nasync def f(): await asyncio.sleep(0.5)", "asyncio.sleep",
                 id="a sleep off the clock"),
    pytest.param("import time\ntime.sleep(1)", "time.sleep", id="a blocking sleep"),
    pytest.param("from scheduler.framework.clock import Clock\nc = Clock()", "Clock()", id="a clock of its own"),
    pytest.param("def f(clock=None):\n    from .clock import Clock\n    return clock or Clock()", "Clock()",
                 id="a default clock built quietly"),
])
def test_the_scan_finds_time_read_outside_the_clock(source: str, what: str) -> None:
    assert what in {f.what for f in findings(source, "x.py")}


@pytest.mark.parametrize("source", [
    pytest.param("import time\nt0 = time.perf_counter()", id="perf_counter measures a duration"),
    pytest.param("import time\ns = time.strftime('%Y', time.gmtime(0))", id="formatting a given time"),
    pytest.param("def f(self): return self.clock(), self.clock.wall()", id="the injected clock"),
    pytest.param("def f(clock, g): clock.call_later(1, g)", id="a timer on the injected clock"),
    pytest.param("def f(self, g): self._clock.call_later(1, g)", id="a timer on a private clock attribute"),
    pytest.param("import asyncio\nasync def f(): await asyncio.sleep(0)", id="a yield to the loop"),
    pytest.param("import asyncio\nasync def f(t):\n    async with asyncio.timeout(5): await t",
                 id="a timeout bounding real I/O"),
    pytest.param("from scheduler.framework.clock import FakeClock\nc = FakeClock()", id="a fake clock"),
    pytest.param("def f(clock): return clock", id="a clock passed in"),
])
def test_the_scan_lets_the_clock_and_durations_be(source: str) -> None:
    assert list(findings(source, "x.py")) == []
