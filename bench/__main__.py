"""``tandem-bench``: scheduler_perf style workloads against any scheduler, on the simulated cluster or any cluster.

    tandem-bench run WORKLOAD [--start-scheduler CONFIG|default | --baseline] [--measure-ceiling] ...
    tandem-bench compare A B WORKLOAD [--runs N] ...

``run`` opens the target (the simulated cluster, in its own process, when
no ``--kubeconfig`` is given), puts a scheduler in front of it (tandem
with a config, the built-in baseline binder, or whatever already serves
``--scheduler-name`` on a real cluster), runs the workload, prints the
one-screen summary and writes JSON + PNG (see bench/report.py).
``--measure-ceiling`` first runs the baseline binder on a fresh target so
the summary can say which fraction of the target's own ceiling the
scheduler reached.

Every scheduler process it starts, and every one given with ``--pid``, is
sampled (RSS, CPU; children included) and, with ``--pause-while-creating``
(the default against ``--kubeconfig`` when there is such a process), stopped
while the measured pods are created and resumed once they all exist, so that
its CPU per pod counts from the resume to the last bind (bench/pause.py).

``compare`` measures two schedulers (or two configs) on the same workload,
alternating A, B, A, B... each on a fresh target, so that drift of the
machine (thermal, other load) hits both alike; it prints the per-run
throughput and the ratio B/A with its spread.

Exit codes: 0 done; 1 a run failed (the message says why); 2 a usage,
workload or scheduler-config error (one line).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import os
import shlex
import shutil
import statistics
import sys
import tempfile
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Sequence

PROG = "tandem-bench"
DEFAULT_SCHEDULER = "tandem-scheduler"
DEFAULT_WORKLOADS = Path("bench/workloads")
DEFAULT_OUTPUT = Path("bench/out")
LOG_TAIL = 20            # lines of a failed scheduler's log shown in the error


class UsageError(Exception):
    """Bad arguments, an unknown workload, an invalid scheduler config: exit 2."""


class RunFailed(Exception):
    """The run itself failed (timeout, scheduler died, target unreachable): exit 1."""


# ---------------------------------------------------------------------------- what to measure


BENCH_DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "config" / "benchmark.yaml"

@dataclass(frozen=True)
class SchedulerSpec:
    """One scheduler under test.

    ``kind``: ``tandem`` (started by us with ``config``; None is the default
    profile), ``baseline`` (the in-process BaselineBinder), ``kube-scheduler``
    (started by us from ``command``, its default profile) or ``external``
    (already served on the target). ``name`` is the schedulerName pods get;
    ``label`` is how results are reported.
    """

    kind: str
    name: str
    label: str
    config: Path | None = None
    command: tuple[str, ...] = ()       # kube-scheduler: its binary and flags

    @property
    def config_text(self) -> str | None:
        if self.kind != "tandem":
            return None
        return "default" if self.config in (None, BENCH_DEFAULT_CONFIG) else str(self.config)


def tandem_spec(config: str, scheduler_name: str | None = None) -> SchedulerSpec:
    """tandem with ``config`` (a path, or ``default``); the profile is ``scheduler_name`` or the first one."""
    from scheduler.config import load_config
    from scheduler.framework.registry import ConfigError

    # "default" is tandem's default profile at scheduler_perf's client limits (config/benchmark.yaml):
    # the stock qps 50 would measure the rate limiter, not the scheduler
    path = BENCH_DEFAULT_CONFIG if config == "default" else Path(config)
    if not path.is_file():
        raise UsageError(f"scheduler config {config}: no such file (give a path or the word 'default')")
    try:
        cfg = load_config(str(path))
    except ConfigError as exc:
        raise UsageError(f"scheduler config {config}: {exc}") from exc
    names = [p.scheduler_name for p in cfg.profiles]
    if scheduler_name is not None and scheduler_name not in names:
        raise UsageError(f"scheduler config {config} has no profile {scheduler_name!r} (profiles: {', '.join(names)})")
    name = scheduler_name or names[0]
    label = name if config == "default" else f"{name}:{path.stem}"
    return SchedulerSpec("tandem", name, label, path)


def baseline_spec(scheduler_name: str | None = None) -> SchedulerSpec:
    from bench.baseline import BASELINE_SCHEDULER_NAME

    name = scheduler_name or BASELINE_SCHEDULER_NAME
    return SchedulerSpec("baseline", name, name)


def kube_scheduler_spec(command: str) -> SchedulerSpec:
    """``--start-kube-scheduler 'BINARY [FLAG...]'``: kube-scheduler's default profile, started by tandem-bench."""
    from bench.target import KUBE_SCHEDULER_NAME

    words = shlex.split(command)
    if not words:
        raise UsageError("--start-kube-scheduler needs the kube-scheduler binary")
    binary = Path(words[0]).expanduser()
    if not binary.is_file() or not os.access(binary, os.X_OK):
        raise UsageError(f"--start-kube-scheduler {words[0]}: no such executable (../shared/realk8s/up.sh --assets "
                         "prints a folder that holds one)")
    for word in words[1:]:
        if word.split("=")[0] in ("--config", "--secure-port"):
            raise UsageError(f"--start-kube-scheduler: {word.split('=')[0]} is tandem-bench's to set")
    return SchedulerSpec("kube-scheduler", KUBE_SCHEDULER_NAME, "kube-scheduler",
                         command=(str(binary), *words[1:]))


def parse_spec(text: str) -> SchedulerSpec:
    """``compare``'s A / B: ``default``, a config path, ``baseline`` or ``name:SCHEDULERNAME``."""
    if text == "baseline":
        return baseline_spec()
    if text.startswith("name:"):
        name = text[len("name:"):]
        if not name:
            raise UsageError("name: needs a scheduler name, e.g. name:default-scheduler")
        return SchedulerSpec("external", name, name)
    return tandem_spec(text)


def parse_params(pairs: Sequence[str]) -> dict[str, str]:
    """``--param key=value`` pairs; bench.workload types the values (int, float, bool, else string)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--param {pair!r}: expected key=value")
        out[key] = value
    return out


def load_workload(workloads_dir: Path, name: str, overrides: dict[str, str]) -> Any:
    from bench.workload import WorkloadError, find_workload

    workloads_dir = Path(workloads_dir)
    if not workloads_dir.is_dir() or not any(workloads_dir.glob("*.y*ml")):
        raise UsageError(f"no workload files (*.yaml) in {workloads_dir}")
    try:
        return find_workload(workloads_dir, name, overrides or None)
    except WorkloadError as exc:
        raise UsageError(" ".join(str(exc).split())) from exc


# ---------------------------------------------------------------------------- one measured run


@dataclass
class Served:
    """The scheduler in front of the target for one run."""

    name: str
    metrics_url: str | None = None
    pid: int | None = None
    log_path: Path | None = None
    proc: Any = None
    died: bool = False      # the process had exited before tandem-bench stopped it


@asynccontextmanager
async def _noting_death(served: Served) -> AsyncIterator[Served]:
    """Yield ``served``; on the way out, before the process is stopped, note whether it had died by itself (a
    stopped kube-scheduler exits with code 1, which must not read as the cause of a failure)."""
    try:
        yield served
    finally:
        served.died = served.proc is not None and served.proc.poll() is not None


@asynccontextmanager
async def serve(spec: SchedulerSpec, target: Any, workdir: Path, probe: bool = False) -> AsyncIterator[Served]:
    """Start (and afterwards stop) what schedules ``spec.name`` pods on ``target``; ``probe``: tandem through
    bench/probe.py (its attempts also counted in fine buckets)."""
    if spec.kind == "tandem":
        from bench.target import start_scheduler

        async with start_scheduler(spec.config, Path(target.kubeconfig), workdir, probe=probe) as sp:
            async with _noting_death(Served(spec.name, sp.metrics_url, sp.pid,
                                            Path(sp.log_path) if sp.log_path else None, sp.proc)) as served:
                yield served
    elif spec.kind == "kube-scheduler":
        from bench.target import start_kube_scheduler

        async with start_kube_scheduler(spec.command, Path(target.kubeconfig), workdir) as sp:
            async with _noting_death(Served(spec.name, None, sp.pid, sp.log_path, sp.proc)) as served:
                yield served
    elif spec.kind == "baseline":
        from bench.baseline import BaselineBinder
        from scheduler.apiclient import from_kubeconfig

        # its own client with no client-side rate limit: the API server alone sets the pace
        client = await from_kubeconfig(str(target.kubeconfig), qps=0, clock=target.client.clock)
        try:
            binder = BaselineBinder(client, spec.name)
            await binder.start()
            try:
                yield Served(spec.name)
            finally:
                await binder.stop()
        finally:
            await client.close()
    else:
        yield Served(spec.name)


class ProgressBar:
    """The runner's ``progress(op_label, done, total)`` drawn as a tqdm bar on stderr, one op at a time.

    Disabled when stderr is not a terminal (CI logs, tests), so it costs a
    call and a comparison per pod there.
    """

    def __init__(self, desc: str) -> None:
        from tqdm import tqdm

        self.desc = desc
        self.label: str | None = None
        self.bar = tqdm(desc=desc, unit="obj", file=sys.stderr, disable=not sys.stderr.isatty(), leave=False,
                        dynamic_ncols=True)

    def __call__(self, label: str, done: int, total: int) -> None:
        bar = self.bar
        if bar.disable:
            return
        if label != self.label:
            self.label = label
            bar.reset(total=total)
            bar.set_description(f"{self.desc} {label}", refresh=False)
        elif total != bar.total:
            bar.total = total
        if done >= bar.n:
            bar.update(done - bar.n)      # tqdm redraws at most every mininterval
        else:
            bar.n = done
            bar.refresh()

    def __enter__(self) -> "ProgressBar":
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.close()


def _log_tail(path: Path | None, lines: int = LOG_TAIL) -> str:
    if path is None:
        return ""
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in text[-lines:])


def _describe_failure(exc: BaseException, served: Served | None) -> tuple[str, str]:
    """(one line saying what went wrong, the detail below it: for a dead scheduler the end of its log)."""
    from bench.runner import RunError
    from bench.target import TargetError

    what, _, rest = str(exc).partition("\n")
    what = what or type(exc).__name__
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        what = f"timed out ({what})"
    elif not isinstance(exc, (RunError, TargetError, SchedulerExited)):  # these already say what and where
        what = f"{type(exc).__name__}: {what}"
    proc = served.proc if served is not None else None
    if proc is not None and served is not None and served.died:
        if "exited with code" not in what:
            what += f"; the scheduler exited with code {proc.returncode}"
        tail = _log_tail(served.log_path)
        if tail and not rest:
            rest = f"the end of {served.log_path}:\n{tail}"
    return what, rest


class SchedulerExited(Exception):
    """The scheduler process we started ended while the workload ran."""


async def _unless_it_dies(proc: Any, work: Awaitable[None], every: float = 0.5) -> None:
    """Await ``work``; if ``proc`` (a Popen, or None) exits first, cancel it and raise SchedulerExited.

    Without this a scheduler that crashed at the first pod would leave the
    run waiting for binds until ``--timeout``.
    """
    task = asyncio.ensure_future(work)
    if proc is None:
        return await task
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every)
            if done:
                return task.result()
            if proc.poll() is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                raise SchedulerExited(f"the scheduler exited with code {proc.returncode} during the run")
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def _final_requests(metrics_url: str | None
                          ) -> tuple[dict[str, float], float | None, dict[str, tuple[float, float]]]:
    """The scheduler's API requests by method, dropped events and collector pauses, scraped once at the end
    (best effort)."""
    from bench.metrics import api_requests, gc_pauses, scrape

    if not metrics_url:
        return {}, None, {}
    try:
        text = await scrape(metrics_url)
        return (*api_requests(text), gc_pauses(text))
    except Exception as exc:  # noqa: BLE001 - a missing count must not fail the run
        print(f"{PROG}: could not read the scheduler's request counts from {metrics_url}: {exc}", file=sys.stderr)
        return {}, None, {}


async def measure(spec: SchedulerSpec, workload: Any, args: argparse.Namespace,
                  desc: str) -> tuple[Any, str | None]:
    """Run ``workload`` once against a fresh target with ``spec`` scheduling: (RunMetrics, attempt-latency note)."""
    from bench.consolidation import moves, parse_scrape
    from bench.metrics import EdgeRecorder, ProcessSampler, WindowScraper, collect
    from bench.pause import SchedulerPause
    from bench.runner import run_workload
    from bench.target import open_target

    kubeconfig = Path(args.kubeconfig).expanduser() if args.kubeconfig else None
    workdir = Path(tempfile.mkdtemp(prefix="tandem-bench-"))
    served: Served | None = None
    ok = False
    try:
        from bench.workload import NATIVE_POD_GROUP_API_VERSION, uses_controllers, uses_native_gangs

        # the simulated cluster serves upstream's native gang API only when asked, as a real server
        sim_args = [f"--runtime-config={NATIVE_POD_GROUP_API_VERSION}=true"] if uses_native_gangs(workload) else []
        # a ReplicaSet's pods need its controller, which the simulated cluster runs with its node agent
        async with open_target(kubeconfig, workdir, sim_args, agent=uses_controllers(workload)) as target:
            async with serve(spec, target, workdir, probe=getattr(args, "fine_attempts", False)) as served:
                recorder = EdgeRecorder(scheduler_name=served.name)
                pids = [*([served.pid] if served.pid else []), *(getattr(args, "pid", None) or [])]
                sampler = ProcessSampler(pids) if pids else None
                scraper = WindowScraper(recorder, served.metrics_url, extra=parse_scrape) \
                    if served.metrics_url else None
                pause = SchedulerPause(pids, recorder, sampler, before=scraper.settled if scraper else None) \
                    if pausing(args, pids) else None
                if sampler is not None:
                    sampler.start()
                    # a sample at each window's edges: the closing one comes just after the last bind, so the CPU
                    # at that bind is interpolated over milliseconds, not over the sampling interval
                    recorder.listeners.append(lambda _opening, _t: sampler.sample())
                if scraper is not None:
                    await scraper.start()
                profilers = _profilers(args, served.pid, target.sim_process, recorder)
                attempt = None
                requests: tuple[dict[str, float], float | None, dict[str, tuple[float, float]]] = ({}, None, {})
                try:
                    # the pause resumes what it stopped on every way out, a failed run's too
                    with ProgressBar(desc) as bar, pause or contextlib.nullcontext():
                        await _unless_it_dies(served.proc, run_workload(
                            workload, target, served.name, recorder, progress=bar, timeout=args.timeout,
                            pause=pause))
                finally:
                    if scraper is not None:
                        attempt = await scraper.stop()
                        requests = await _final_requests(served.metrics_url)
                    if sampler is not None:
                        await sampler.stop()
                    for prof in profilers:
                        for path in prof.finish():
                            print(f"{PROG}: py-spy of pid {prof.pid} over the window: {path}", file=sys.stderr)
        metrics = collect(recorder, workload.full_name, spec.label, attempt=attempt, sampler=sampler)
        metrics.requests, metrics.events_dropped, metrics.gc_pauses = requests
        metrics.moves = moves(recorder, scraper.extra if scraper is not None else None)
        if scraper is None:
            metrics_note = None
        else:
            metrics_note = scraper.error or "the scheduler's /metrics counted no attempt while collecting"
        ok = True
        return metrics, metrics_note
    except (UsageError, RunFailed):
        raise
    except Exception as exc:
        from bench.workload import WorkloadError

        if isinstance(exc, WorkloadError):
            raise UsageError(" ".join(str(exc).split())) from exc
        what, detail = _describe_failure(exc, served)
        if any(workdir.iterdir()):
            what += f" (logs kept in {workdir})"
        else:
            ok = True                        # nothing worth keeping
        raise RunFailed(f"{workload.full_name} on {spec.label}: {what}" + (f"\n{detail}" if detail else "")) from exc
    finally:
        if ok:
            shutil.rmtree(workdir, ignore_errors=True)


def pausing(args: argparse.Namespace, pids: Sequence[int]) -> bool:
    """Stop the scheduler processes while the measured pods are created? ``--pause-while-creating`` says; by
    default yes against ``--kubeconfig`` (a real server's creates compete with the scheduler for the machine),
    no on the simulated cluster; never without a process to stop."""
    wanted = getattr(args, "pause_while_creating", None)
    return bool(pids) and (bool(args.kubeconfig) if wanted is None else wanted)


def check_pids(pids: Sequence[int]) -> None:
    """``--pid``: each must name a running process of this machine."""
    import psutil

    for pid in pids:
        if pid <= 0 or not psutil.pid_exists(pid):
            raise UsageError(f"--pid {pid}: no such process")


def _profilers(args: argparse.Namespace, scheduler_pid: int | None, sim: Any, recorder: Any) -> list[Any]:
    """``--py-spy`` / ``--py-spy-cluster``: py-spy on the scheduler / the simulated cluster over each window."""
    from bench.profiling import WindowProfiler, find_py_spy

    wanted = [(getattr(args, "py_spy", None), scheduler_pid),
              (getattr(args, "py_spy_cluster", None), sim.pid if sim is not None else None)]
    out = []
    for path, pid in wanted:
        if path and pid:
            prof = WindowProfiler(pid, Path(path), find_py_spy() or "py-spy")
            recorder.listeners.append(prof.edge)
            out.append(prof)
    return out


# ---------------------------------------------------------------------------- metadata


def _workload_meta(workload: Any) -> dict[str, Any]:
    return {"name": workload.full_name, "test": workload.test, "workload": workload.name,
            "params": dict(workload.params), "labels": list(workload.labels), "source": str(workload.source)}


def _spec_meta(spec: SchedulerSpec) -> dict[str, Any]:
    meta = {"label": spec.label, "name": spec.name, "kind": spec.kind, "config": spec.config_text}
    if spec.command:
        meta["command"] = list(spec.command)
    return meta


def _metadata(argv: Sequence[str], workload: Any, args: argparse.Namespace) -> dict[str, Any]:
    from bench.report import machine_info

    return {
        "command": shlex.join([PROG, *argv]),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "workload": _workload_meta(workload),
        "target": {"kind": "kubeconfig" if args.kubeconfig else "simcluster", "kubeconfig": args.kubeconfig},
        "timeout_seconds": args.timeout,
    }


# ---------------------------------------------------------------------------- commands


def check_kubeconfig(args: argparse.Namespace) -> None:
    if args.kubeconfig and not Path(args.kubeconfig).expanduser().is_file():
        raise UsageError(f"--kubeconfig {args.kubeconfig}: no such file")


async def cmd_run(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from bench.profiling import find_py_spy
    from bench.report import ceiling_fraction, report_stem, run_results, summary_text, timestamp, write_report

    check_kubeconfig(args)
    if args.baseline:
        spec = baseline_spec(args.scheduler_name)
    elif args.start_kube_scheduler:
        if not args.kubeconfig:
            raise UsageError("--start-kube-scheduler needs --kubeconfig: kube-scheduler runs against a real "
                             "kube-apiserver (../shared/realk8s/up.sh starts one)")
        if args.scheduler_name:
            raise UsageError("--start-kube-scheduler schedules default-scheduler pods: leave out --scheduler-name")
        spec = kube_scheduler_spec(args.start_kube_scheduler)
    elif args.start_scheduler:
        spec = tandem_spec(args.start_scheduler, args.scheduler_name)
    else:
        spec = SchedulerSpec("external", args.scheduler_name or DEFAULT_SCHEDULER,
                             args.scheduler_name or DEFAULT_SCHEDULER)
        if not args.kubeconfig:
            raise UsageError(f"nothing serves {spec.name!r} on the embedded simulated cluster: pass "
                             "--start-scheduler CONFIG|default, --baseline, or --kubeconfig of a cluster "
                             "where that scheduler runs")
    check_pids(args.pid)
    if args.pause_while_creating and spec.kind in ("baseline", "external") and not args.pid:
        raise UsageError("--pause-while-creating needs a scheduler process to stop: --start-scheduler, "
                         "--start-kube-scheduler or --pid")
    workload = load_workload(args.workloads_dir, args.workload, parse_params(args.param))
    if (args.py_spy or args.py_spy_cluster) and find_py_spy() is None:
        raise UsageError("--py-spy: no py-spy on PATH nor at $TANDEM_BENCH_PY_SPY (pip install py-spy, or "
                         "pip install --target DIR py-spy and set TANDEM_BENCH_PY_SPY=DIR/bin/py-spy)")
    meta = _metadata(argv, workload, args)
    meta["scheduler"] = _spec_meta(spec)
    meta["pids"] = list(args.pid)

    ceiling = None
    if args.measure_ceiling and spec.kind != "baseline":
        base = baseline_spec()
        ceiling, _ = await measure(base, workload, args, f"{workload.full_name} ceiling ({base.label})")
    metrics, note = await measure(spec, workload, args, f"{workload.full_name} ({spec.label})")
    if args.measure_ceiling and spec.kind == "baseline":
        ceiling = metrics

    ceiling_value = None
    if ceiling is not None:
        mine, top, basis = ceiling_fraction(metrics, ceiling)
        ceiling_value = top
        meta["ceiling"] = {"scheduler": ceiling.scheduler, "throughput": top, "basis": basis,
                           "fraction": (mine / top) if mine and top else None, "results": run_results(ceiling)}
    else:
        meta["ceiling"] = None

    print(summary_text(metrics, config=spec.config_text, ceiling=ceiling, attempt_note=note))
    stem = report_stem(workload.full_name, spec.label, timestamp())
    json_path, png_path = write_report(Path(args.output), [metrics], meta, stem,
                                       title=f"{workload.full_name}: {spec.label}", ceiling=ceiling_value)
    print(f"  wrote        {json_path}\n               {png_path}")
    return 0


def _ratio_stats(ratios: list[float]) -> dict[str, float]:
    out = {"mean": statistics.fmean(ratios), "min": min(ratios), "max": max(ratios)}
    out["stdev"] = statistics.stdev(ratios) if len(ratios) > 1 else 0.0
    return out


async def cmd_compare(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from bench.metrics import comparable_throughputs
    from bench.report import report_stem, timestamp, write_report

    if args.runs < 1:
        raise UsageError("--runs must be at least 1")
    check_kubeconfig(args)
    a, b = parse_spec(args.a), parse_spec(args.b)
    if a.label == b.label:
        a = SchedulerSpec(a.kind, a.name, f"{a.label} (A)", a.config)
        b = SchedulerSpec(b.kind, b.name, f"{b.label} (B)", b.config)
    if not args.kubeconfig and "external" in (a.kind, b.kind):
        ext = a if a.kind == "external" else b
        raise UsageError(f"nothing serves {ext.name!r} on the embedded simulated cluster: pass --kubeconfig "
                         "of a cluster where that scheduler runs")
    if args.kubeconfig and a.name == b.name and a.kind == b.kind == "external":
        raise UsageError("A and B are the same external scheduler")
    workload = load_workload(args.workloads_dir, args.workload, parse_params(args.param))
    meta = _metadata(argv, workload, args)
    meta["schedulers"] = {"A": _spec_meta(a), "B": _spec_meta(b)}

    runs = []        # (index, "A"/"B", spec, metrics)
    for i in range(args.runs):
        for side, spec in (("A", a), ("B", b)):
            m, _ = await measure(spec, workload, args, f"run {i + 1}/{args.runs} {side} ({spec.label})")
            runs.append((i + 1, side, spec, m))

    values, basis = comparable_throughputs([m for *_, m in runs])
    print(f"{workload.full_name}: A = {a.label}, B = {b.label}; throughput = {basis}")
    for (i, side, spec, m), v in zip(runs, values):
        t = "-" if v is None else f"{v:.1f} pods/s"
        cpu = "" if m.cpu_per_pod is None else f"   CPU {m.cpu_per_pod * 1e3:.2f} ms a pod ({m.cpu_basis})"
        print(f"  run {i}  {side}  {spec.label:<28} {t:>14}   bound {m.bound}/{m.measured}{cpu}")
    ratios = []
    for i in range(args.runs):
        va, vb = values[2 * i], values[2 * i + 1]
        if va and vb is not None:
            ratios.append(vb / va)
    comparison: dict[str, Any] = {"basis": basis, "ratios": ratios}
    if ratios:
        st = _ratio_stats(ratios)
        comparison.update(st)
        spread = f"min {st['min']:.3f}, max {st['max']:.3f}"
        if len(ratios) > 1:
            spread += f", stdev {st['stdev']:.3f}"
        print(f"  ratio B/A = {st['mean']:.3f}  ({spread}; {len(ratios)} run pair{'s' if len(ratios) != 1 else ''})")
    else:
        print("  ratio B/A = -  (A measured no throughput)")
    meta["comparison"] = comparison

    stem = report_stem(workload.full_name, f"{a.label}-vs-{b.label}", timestamp())
    labels = [{"Run": str(i), "Side": side} for i, side, *_ in runs]
    json_path, png_path = write_report(Path(args.output), [m for *_, m in runs], meta, stem,
                                       title=f"{workload.full_name}: {a.label} vs {b.label}", run_labels=labels)
    print(f"  wrote {json_path}\n        {png_path}")
    return 0


# ---------------------------------------------------------------------------- argument parsing


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workloads-dir", type=Path, default=DEFAULT_WORKLOADS, metavar="DIR",
                   help=f"directory of workload files (default: {DEFAULT_WORKLOADS})")
    p.add_argument("--kubeconfig", metavar="PATH",
                   help="run against this cluster (default: start the simulated cluster in its own process)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="override a workload param (repeatable), e.g. --param initNodes=500")
    p.add_argument("--output", default=str(DEFAULT_OUTPUT), metavar="DIR",
                   help=f"where the JSON and PNG go (default: {DEFAULT_OUTPUT})")
    p.add_argument("--timeout", type=float, default=600.0, metavar="S",
                   help="give up on a run after S seconds (default: 600)")
    p.add_argument("--pause-while-creating", action=argparse.BooleanOptionalAction, default=None,
                   help="stop the scheduler processes (SIGSTOP, children included) while a measured createPods "
                        "op creates its pods and resume them (SIGCONT) once all exist; CPU per pod then counts "
                        "from the resume to the last bind (default: on with --kubeconfig when tandem-bench "
                        "starts a scheduler or is given --pid, else off). A stopped scheduler reads none of its "
                        "watches: kube-apiserver may close its pod watch as unresponsive and the scheduler then "
                        "re-lists after resuming, which is counted")
    p.add_argument("--fine-attempts", action="store_true",
                   help="start tandem through bench.probe: its scheduling attempts also counted per profile in "
                        "buckets 4.4%% apart, so the summary gives exact-enough p50/p99 below 1 ms")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="scheduler_perf style benchmarks for any Kubernetes scheduler, on the simulated cluster "
                    "or a real one.",
        epilog="examples:\n"
               "  tandem-bench run SchedulingBasic/500Nodes --start-scheduler default --measure-ceiling\n"
               "  tandem-bench run SchedulingBasic/Smoke --baseline\n"
               "  tandem-bench run GangBasic/500Nodes --kubeconfig ~/.kube/config --scheduler-name tandem-scheduler\n"
               "  tandem-bench run SchedulingWithResourceClaimTemplate/500Nodes --kubeconfig K "
               "--start-kube-scheduler /path/to/kube-scheduler\n"
               "  tandem-bench run SchedulingBasic/5000Nodes --kubeconfig K --scheduler-name default-scheduler "
               "--pid 4242\n"
               "  tandem-bench compare default config/binpack.yaml MixedSchedulingBasePod/500Nodes --runs 5\n"
               "\nexit codes: 0 done, 1 a run failed, 2 usage, workload or scheduler-config error")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    r = sub.add_parser("run", help="run one workload against one scheduler",
                       description="Run one workload against one scheduler, print the summary, write JSON + PNG.")
    r.add_argument("workload", metavar="WORKLOAD", help="Test/Workload, e.g. SchedulingBasic/500Nodes")
    who = r.add_mutually_exclusive_group()
    who.add_argument("--start-scheduler", metavar="CONFIG|default",
                     help="start tandem with this KubeSchedulerConfiguration (or its default profile)")
    who.add_argument("--start-kube-scheduler", metavar="'BINARY [FLAG...]'",
                     help="start kube-scheduler (its default profile, default-scheduler; --secure-port=0) against "
                          "--kubeconfig, so that its CPU and memory are sampled; flags after the binary go to it "
                          "(e.g. --feature-gates=...)")
    who.add_argument("--baseline", action="store_true",
                     help="schedule with the built-in no-logic baseline binder (scheduler name baseline-binder)")
    r.add_argument("--scheduler-name", metavar="NAME",
                   help=f"schedulerName of the measured pods (default: the started scheduler's, else "
                        f"{DEFAULT_SCHEDULER})")
    r.add_argument("--pid", type=int, action="append", default=[], metavar="PID",
                   help="also sample this running process (and its children) as the scheduler's, e.g. a "
                        "kube-scheduler started by hand; paused with the others (repeatable)")
    r.add_argument("--measure-ceiling", action="store_true",
                   help="first run the baseline binder on a fresh target and report throughput as a fraction of it")
    r.add_argument("--py-spy", metavar="FILE",
                   help="record the scheduler with py-spy (raw stacks) while collecting; needs py-spy on PATH "
                        "or at $TANDEM_BENCH_PY_SPY")
    r.add_argument("--py-spy-cluster", metavar="FILE", help="the same for the simulated cluster's process")
    _common(r)

    c = sub.add_parser("compare", help="two schedulers or configs on one workload, runs alternated",
                       description="Compare A and B on one workload: runs alternate A, B, A, B, each on a fresh "
                                   "target; prints per-run throughput and the ratio B/A with its spread.")
    c.add_argument("a", metavar="A", help="default | CONFIG path | baseline | name:SCHEDULERNAME")
    c.add_argument("b", metavar="B", help="the same choices as A")
    c.add_argument("workload", metavar="WORKLOAD", help="Test/Workload, e.g. SchedulingBasic/500Nodes")
    c.add_argument("--runs", type=int, default=3, metavar="N", help="runs of each (default: 3)")
    _common(c)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)          # argparse itself exits 2 on bad usage
    command = cmd_run if args.command == "run" else cmd_compare
    try:
        try:
            import uvloop
            runner = uvloop.run
        except ImportError:
            runner = asyncio.run
        return runner(command(args, argv))
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except RunFailed as exc:
        print(f"{PROG}: run failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
