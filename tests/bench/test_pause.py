"""bench/pause.py: the scheduler processes (children included) are stopped around the creates and always resumed."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from bench.metrics import ProcessSampler
from bench.pause import SchedulerPause
from bench.record import Recorder

# a parent that starts a child, both ticking: a scheduler that is not one process
TICK = "import time\nwhile True: time.sleep(0.01)\n"
FAMILY = f"import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', {TICK!r}])\n{TICK}"


def wait_until(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def statuses(root: psutil.Process) -> list[str]:
    return [p.status() for p in [root, *root.children(recursive=True)]]


@pytest.fixture
def family():
    proc = subprocess.Popen([sys.executable, "-c", FAMILY])
    root = psutil.Process(proc.pid)
    wait_until(lambda: len(root.children()) == 1)
    try:
        yield root
    finally:
        for p in [*root.children(recursive=True), root]:
            p.kill()
        proc.wait()


async def test_hold_stops_the_process_and_its_children_and_release_resumes_them(family):
    recorder = Recorder()
    sampler = ProcessSampler(family.pid)
    pause = SchedulerPause([family.pid], recorder, sampler)
    await pause.hold()
    wait_until(lambda: statuses(family) == [psutil.STATUS_STOPPED] * 2)
    stopped_cpu = sampler.samples[-1][2]
    assert sampler.sample() and sampler.samples[-1][2] == pytest.approx(stopped_cpu, abs=0.02)
    pause.release()
    wait_until(lambda: psutil.STATUS_STOPPED not in statuses(family))
    assert len(recorder.pauses) == 1
    (stopped, resumed), = recorder.pauses
    assert resumed is not None and stopped <= resumed
    # the resume's sample was taken before SIGCONT: the CPU counted from the resume starts there exactly
    assert [t for t, _, _ in sampler.samples if stopped <= t <= resumed]


async def test_the_opening_scrape_is_answered_before_the_scheduler_is_stopped(family):
    seen: list[str] = []

    async def before() -> None:
        seen.append(family.status())

    pause = SchedulerPause([family.pid], Recorder(), before=before)
    await pause.hold()
    pause.release()
    assert seen and seen[0] != psutil.STATUS_STOPPED


async def test_leaving_the_block_resumes_what_a_failed_run_left_stopped(family):
    recorder = Recorder()
    with pytest.raises(RuntimeError):
        with SchedulerPause([family.pid], recorder) as pause:
            await pause.hold()
            wait_until(lambda: family.status() == psutil.STATUS_STOPPED)
            raise RuntimeError("the creates failed")
    wait_until(lambda: psutil.STATUS_STOPPED not in statuses(family))
    assert recorder.pauses[0][1] is not None


async def test_a_process_gone_before_the_hold_is_not_signalled_and_no_pause_is_recorded():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    pause = SchedulerPause([proc.pid], Recorder())
    proc.wait()
    recorder = pause.recorder
    await pause.hold()
    pause.release()
    assert recorder.pauses == []


async def test_hold_twice_is_one_pause(family):
    recorder = Recorder()
    pause = SchedulerPause([family.pid], recorder)
    await pause.hold()
    await pause.hold()
    pause.release()
    pause.release()
    assert len(recorder.pauses) == 1
