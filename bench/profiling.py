"""py-spy over a run's collecting windows: ``tandem-bench run ... --py-spy FILE [--py-spy-cluster FILE]``.

A profile of the whole run mixes the setup (creating nodes, placing thousands of pods) with what the window
measures. :class:`WindowProfiler` starts ``py-spy record`` on a process when a collecting window opens and
stops it (SIGINT: py-spy writes its file then) when the window closes. The output is py-spy's raw format:
one line per distinct stack, ``frame;frame;... count``, which flamegraph.pl and speedscope read. A second
window writes ``FILE.1``, and so on. ``python -m bench.profiling FILE`` lists the functions by the samples
they are on the stack of (inclusive); ``python -m bench.profiling FILE FUNCTION`` splits FUNCTION's samples
by what it called, two frames deep (bench/RESULTS.md quotes both).

py-spy is found on PATH or at ``$TANDEM_BENCH_PY_SPY``. It samples from outside the process (it reads its
memory), so the profiled process runs unchanged; it needs ptrace rights over it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

PY_SPY_ENV = "TANDEM_BENCH_PY_SPY"
STOP_TIMEOUT = 30.0          # seconds py-spy may take to write its file after SIGINT


def find_py_spy() -> str | None:
    """The py-spy executable: ``$TANDEM_BENCH_PY_SPY`` when set, else the one on PATH, else None."""
    return os.environ.get(PY_SPY_ENV) or shutil.which("py-spy")


class WindowProfiler:
    """``py-spy record -p PID -f raw`` while each collecting window is open (an EdgeRecorder listener)."""

    def __init__(self, pid: int, path: Path, py_spy: str, rate: int = 100) -> None:
        self.pid = pid
        self.path = Path(path)
        self.py_spy = py_spy
        self.rate = rate
        self.files: list[Path] = []
        self._proc: subprocess.Popen | None = None
        self._stopping: list[subprocess.Popen] = []

    def edge(self, opening: bool, _t: float = 0.0) -> None:
        """Start recording when a window opens; ask it to stop (without waiting) when the window closes."""
        if opening and self._proc is None:
            path = self.path if not self.files else self.path.with_name(f"{self.path.name}.{len(self.files)}")
            path.parent.mkdir(parents=True, exist_ok=True)
            self.files.append(path)
            self._proc = subprocess.Popen([self.py_spy, "record", "-p", str(self.pid), "-o", str(path), "-f", "raw",
                                           "-r", str(self.rate), "--nonblocking"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        elif not opening and self._proc is not None:
            proc, self._proc = self._proc, None
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            self._stopping.append(proc)

    def finish(self) -> list[Path]:
        """Stop what still records and wait until every file is written; the files written."""
        self.edge(False)
        for proc in self._stopping:
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._stopping.clear()
        return [p for p in self.files if p.exists()]


# ---------------------------------------------------------------------------- reading a raw profile


def stacks(path: Path) -> list[tuple[list[str], int]]:
    """(frames outermost first, as function names without their file; samples) per line of a raw profile."""
    out = []
    for line in Path(path).read_text().splitlines():
        stack, _, n = line.rstrip().rpartition(" ")
        if stack:
            out.append(([f.split(" (")[0] for f in stack.split(";")], int(n)))
    return out


def inclusive(rows: list[tuple[list[str], int]]) -> Counter[str]:
    """Samples per function with the function anywhere on the stack (counted once per sample)."""
    c: Counter[str] = Counter()
    for frames, n in rows:
        for f in set(frames):
            c[f] += n
    return c


def below(rows: list[tuple[list[str], int]], function: str, depth: int = 2) -> Counter[str]:
    """Samples of ``function`` (its outermost frame) by the ``depth`` frames it called; ``<self>`` for its own."""
    c: Counter[str] = Counter()
    for frames, n in rows:
        if function in frames:
            i = frames.index(function)
            c[";".join(frames[i + 1:i + 1 + depth]) or "<self>"] += n
    return c


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profiling",
                                description="Read a py-spy raw profile (tandem-bench run --py-spy).")
    p.add_argument("file", type=Path)
    p.add_argument("function", nargs="?", help="split this function's samples by what it called")
    p.add_argument("--top", type=int, default=30)
    args = p.parse_args(argv)
    rows = stacks(args.file)
    total = sum(n for _, n in rows)
    counts = below(rows, args.function) if args.function else inclusive(rows)
    base = sum(counts.values()) if args.function else total
    print(f"{total} samples" + (f"; {args.function}: {base} ({100 * base / max(total, 1):.1f}%)"
                                if args.function else ""))
    for name, n in counts.most_common(args.top):
        print(f"{n:7d} {100 * n / max(base, 1):5.1f}%  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
