"""bench/profiling.py: py-spy started when a collecting window opens and stopped, its file written, when it closes."""

from __future__ import annotations

import os
import stat
import textwrap
import time
from pathlib import Path

from bench.metrics import EdgeRecorder
from bench.profiling import WindowProfiler, below, inclusive, stacks

# stands in for py-spy: writes "stack count" to the -o file when interrupted, as py-spy writes its raw output
FAKE = textwrap.dedent("""\
    #!/bin/sh
    out=""; while [ $# -gt 0 ]; do [ "$1" = "-o" ] && out="$2"; shift; done
    trap 'echo "main;loop 3" > "$out"; exit 0' INT
    touch "$out.ready"
    while :; do sleep 0.01; done
    """)


def ready(path: Path) -> None:
    """Until the fake has set its trap (a signal before that would end it without a file), at most 10 s."""
    deadline = time.monotonic() + 10
    while not path.with_name(path.name + ".ready").exists():
        assert time.monotonic() < deadline, f"{path}: the fake py-spy did not start"
        time.sleep(0.01)


def test_each_window_is_recorded_to_its_own_file_written_when_it_closes(tmp_path):
    fake = tmp_path / "py-spy"
    fake.write_text(FAKE)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    recorder = EdgeRecorder()
    prof = WindowProfiler(os.getpid(), tmp_path / "out" / "sched.txt", str(fake))
    recorder.listeners.append(prof.edge)
    recorder.start_collecting(1.0)
    ready(tmp_path / "out" / "sched.txt")
    recorder.stop_collecting(2.0)
    recorder.start_collecting(3.0)   # a second window: sched.txt.1, stopped by finish()
    ready(tmp_path / "out" / "sched.txt.1")
    files = prof.finish()
    assert [f.name for f in files] == ["sched.txt", "sched.txt.1"]
    assert all(f.read_text() == "main;loop 3\n" for f in files)
    assert prof.finish() == files    # nothing left to stop


def test_a_raw_profile_reads_as_samples_per_function_and_per_callee(tmp_path):
    raw = tmp_path / "p.txt"
    raw.write_text("run (a.py:1);plan (b.py:2);assume (c.py:3) 5\nrun (a.py:1);plan (b.py:2) 2\nrun (a.py:1);cycle (d.py:4) 3\n")
    rows = stacks(raw)
    assert inclusive(rows) == {"run": 10, "plan": 7, "assume": 5, "cycle": 3}
    assert below(rows, "plan", 1) == {"assume": 5, "<self>": 2}
