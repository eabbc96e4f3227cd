"""What a benchmark run leaves behind: a JSON file, a PNG plot and a one-screen summary.

The JSON is perf-dash's ``DataItems`` document (``version``, ``dataItems``)
with two more top-level keys that perf-dash ignores: ``metadata`` (command,
date, machine, workload and its params, scheduler and config, target,
baseline ceiling) and ``runs`` (per run: every number of the summary, the
raw throughput samples and the per-second series). That is enough to
rebuild a row of bench/RESULTS.md, or to re-plot, without running again.

Files are named ``<workload>-<scheduler>-<UTC timestamp>.json`` / ``.png``
with characters other than letters, digits, ``.``, ``_`` and ``-`` replaced
by ``_`` (``SchedulingBasic/5000Nodes`` becomes ``SchedulingBasic_5000Nodes``).

Plots use matplotlib's Agg backend (no display needed), selected before
pyplot is imported.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import psutil

from bench.consolidation import highest_bound
from bench.metrics import ATTEMPT_RESULTS, QUANTILES, RESUMED, RunMetrics, comparable_throughputs, \
    histogram_quantiles, summarize

MiB = 1024 * 1024


# ---------------------------------------------------------------------------- names and machine


def timestamp(now: dt.datetime | None = None) -> str:
    """UTC, compact and sortable: ``20250131T140502Z``."""
    now = now or dt.datetime.now(dt.timezone.utc)
    return now.astimezone(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "unnamed"


def report_stem(workload: str, scheduler: str, stamp: str) -> str:
    return f"{safe_name(workload)}-{safe_name(scheduler)}-{stamp}"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, Any]:
    """What a result row needs to say about the machine it was measured on."""
    return {
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "memory_bytes": psutil.virtual_memory().total,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
    }


# ---------------------------------------------------------------------------- JSON


def _finite(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) or math.isinf(x) else x


def run_results(m: RunMetrics) -> dict[str, Any]:
    """Every number of one run, JSON-ready (seconds, bytes, pods/s; None where not measured)."""
    attempt: dict[str, Any] = {}
    for result, hist in m.attempt.items():
        if hist.count <= 0:
            continue
        q = histogram_quantiles(hist, QUANTILES)
        attempt[result] = {"count": hist.count, "average_seconds": _finite(hist.average),
                           **{f"p{round(qq * 100)}_seconds": _finite(v) for qq, v in zip(QUANTILES, q)}}
    return {
        "scheduler": m.scheduler,
        "measured_pods": m.measured,
        "bound_pods": m.bound,
        "collecting_seconds": m.window_seconds,
        "throughput": summarize(m.throughput),
        "throughput_samples": m.throughput,
        "throughput_overall": m.overall,
        "throughput_series": [list(p) for p in m.series],
        "attempt_latency": attempt,
        "e2e_latency_seconds": summarize(m.e2e),
        "gang_latency_seconds": {**summarize(m.gangs), "Max": max(m.gangs)} if m.gangs else {},
        "gangs_complete": len(m.gangs),
        "gang_wait_utilization": m.gang_wait_utilization,
        "rss_peak_bytes": m.rss_peak,
        "cpu_seconds": m.cpu_seconds,
        "cpu_window_seconds": m.cpu_window_seconds,
        "cpu_window": m.cpu_basis,
        "cpu_per_pod_seconds": m.cpu_per_pod,
        "window_rate": m.window_rate,
        "api_requests": dict(m.requests),
        "events_dropped": m.events_dropped,
        "gc_pauses": {g: {"collections": c, "longest_seconds": mx} for g, (c, mx) in m.gc_pauses.items()},
        "consolidation": m.moves.as_dict() if m.moves is not None else None,
    }


def build_document(runs: Sequence[RunMetrics], metadata: Mapping[str, Any],
                   run_labels: Sequence[Mapping[str, str]] | None = None) -> dict[str, Any]:
    """The JSON document: every run's DataItems in one list, plus ``metadata`` and ``runs``.

    ``run_labels`` adds labels per run (``{"Run": "2"}`` when comparing), so
    items of different runs stay distinguishable in perf-dash.
    """
    items: list[dict[str, Any]] = []
    for i, m in enumerate(runs):
        extra = run_labels[i] if run_labels else None
        items.extend(m.data_items(extra)["dataItems"])
    return {"version": "v1", "dataItems": items, "metadata": dict(metadata),
            "runs": [run_results(m) for m in runs]}


def write_json(path: Path, doc: Mapping[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    # allow_nan=False: a NaN would make the file unreadable to strict parsers (perf-dash is Go)
    path.write_text(json.dumps(doc, indent=2, default=str, allow_nan=False) + "\n", encoding="utf-8")
    return path


# ---------------------------------------------------------------------------- plot


def plot_throughput(path: Path, runs: Sequence[RunMetrics], title: str,
                    ceiling: float | None = None) -> Path:
    """Throughput over time: one line per run, one colour per scheduler; the ceiling as a dashed line."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=100)
    try:
        colours: dict[str, Any] = {}
        cycle = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0", "C1", "C2", "C3"])
        for m in runs:
            first = m.scheduler not in colours
            if first:
                colours[m.scheduler] = cycle[len(colours) % len(cycle)]
            xs = [0.0] + [t for t, _ in m.series]
            ys = [m.series[0][1] if m.series else 0.0] + [r for _, r in m.series]
            ax.step(xs, ys, where="pre", color=colours[m.scheduler], linewidth=1.4 if len(runs) == 1 else 1.0,
                    alpha=1.0 if first else 0.6, label=m.scheduler if first else None)
        if ceiling:
            ax.axhline(ceiling, color="grey", linestyle="--", linewidth=1, label=f"baseline ceiling {ceiling:.0f}")
        ax.set_xlabel("seconds since collecting started")
        ax.set_ylabel("pods bound / s")
        ax.set_title(title)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        if runs or ceiling:
            ax.legend(loc="best", fontsize="small")
        fig.tight_layout()
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return path


# ---------------------------------------------------------------------------- summary


def _num(x: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)


def _ms(seconds: float | None) -> str:
    if seconds is None or math.isnan(seconds):
        return "-"
    ms = seconds * 1000.0
    if ms >= 1000:
        return f"{seconds:.2f} s"
    return f"{ms:.0f} ms" if ms >= 100 else f"{ms:.2f} ms" if ms < 10 else f"{ms:.1f} ms"


def summary_text(m: RunMetrics, *, config: str | None = None, ceiling: RunMetrics | float | None = None,
                 attempt_note: str | None = None) -> str:
    """The one-screen summary of a run (a dozen lines)."""
    lines = [f"{m.workload} on {m.scheduler}" + (f" (config: {config})" if config else "")]
    secs = f"{m.window_seconds:.1f}" if m.window_seconds >= 10 else f"{m.window_seconds:.2f}"
    lines.append(f"  pods         {m.bound}/{m.measured} measured pods bound, collecting {secs} s")
    t = summarize(m.throughput)
    if t:
        lines.append(f"  throughput   avg {t['Average']:.1f}  p50 {t['Perc50']:.1f}  p90 {t['Perc90']:.1f}  "
                     f"p99 {t['Perc99']:.1f} pods/s  ({len(m.throughput)} samples of 1 s)")
    else:
        lines.append("  throughput   no 1 s samples (the run was too short); "
                     f"overall {_num(m.overall)} pods/s")
    if m.cpu_basis is not None:
        lines.append("  CPU per pod  " + per_pod_line(m))
    shown = False
    for result in ATTEMPT_RESULTS:
        hist = m.attempt.get(result)
        if hist is None or hist.count <= 0:
            continue
        p50, p99 = histogram_quantiles(hist, (0.5, 0.99))
        lines.append(f"  attempt      p50 {_ms(p50)}  p99 {_ms(p99)}  ({result}, {hist.count:.0f} attempts)")
        shown = True
    if not shown:
        lines.append(f"  attempt      - ({attempt_note or 'no /metrics from this scheduler'})")
    if m.moves is not None:
        lines.extend(moves_lines(m.moves))
    e = summarize(m.e2e)
    if e:
        paused = "; the pause included" if m.cpu_basis == RESUMED else ""
        lines.append(f"  e2e          p50 {_ms(e['Perc50'])}  p99 {_ms(e['Perc99'])}  (created to bound{paused})")
    else:
        lines.append("  e2e          - (no measured pod was bound)")
    if m.gangs:
        g = summarize(m.gangs)
        lines.append(f"  gangs        {len(m.gangs)} complete; last member created to gang bound: p50 {_ms(g['Perc50'])}"
                     f"  p99 {_ms(g['Perc99'])}  max {_ms(max(m.gangs))}")
        if m.gang_wait_utilization is not None:
            lines.append(f"  cpu in use while gangs waited: {m.gang_wait_utilization:.0%}")
    if m.rss_peak is not None or m.cpu_seconds is not None:
        rss = "-" if m.rss_peak is None else f"{m.rss_peak / MiB:.1f} MiB"
        lines.append(f"  scheduler    RSS peak {rss}  CPU {_num(m.cpu_seconds)} s (whole run)")
    else:
        lines.append("  scheduler    RSS/CPU - (not a local process started by tandem-bench nor given with --pid)")
    if m.requests:
        counts = "  ".join(f"{method} {n:,.0f}" for method, n in sorted(m.requests.items(), key=lambda kv: -kv[1]))
        dropped = "" if m.events_dropped is None else f"; events dropped {m.events_dropped:,.0f}"
        lines.append(f"  requests     {counts}  (whole run{dropped})")
    if m.gc_pauses:
        lines.append("  collector    " + "  ".join(f"gen{g} {c:,.0f} pauses, longest {_ms(mx)}"
                                                  for g, (c, mx) in m.gc_pauses.items()) + "  (whole run)")
    if ceiling is not None:
        lines.append("  ceiling      " + ceiling_line(m, ceiling))
    return "\n".join(lines)


def per_pod_line(m: RunMetrics) -> str:
    """CPU per pod and the rate over the same window, e.g. ``1.23 ms (resume to last bind; 12.30 s of CPU),
    1,000.0 pods/s over the same 10.00 s``."""
    rate = "-" if m.window_rate is None else f"{m.window_rate:,.1f}"
    seconds = f"{m.bound / m.window_rate:.2f} s" if m.window_rate else "-"
    if m.cpu_per_pod is None:
        cpu = f"- ({m.cpu_basis}; no process sampled)"
    else:
        cpu = f"{_ms(m.cpu_per_pod)} ({m.cpu_basis}; {_num(m.cpu_window_seconds, '{:.2f}')} s of CPU)"
    return f"{cpu}, {rate} pods/s over the same {seconds}"


def moves_lines(mv: Any) -> list[str]:
    """A Consolidation workload's lines (bench/consolidation.py's Moves): the attempts per profile (fine
    buckets), the measured pods' latency per namespace, the evictions, moves and plans, the nodes in use and
    the zones' balance."""
    out: list[str] = []
    s = mv.scrape
    if s is not None:
        for (result, profile), h in sorted(s.attempts.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            if h.count > 0 and result != "error":
                p50, p99 = histogram_quantiles(h, (0.5, 0.99))
                out.append(f"  attempt      p50 {_ms(p50)}  p99 {_ms(p99)}  ({result}, profile {profile}, "
                           f"{h.count:,.0f} attempts, fine buckets)")
    for ns, v in sorted(mv.e2e.items()):
        e = summarize(v)
        out.append(f"  e2e          p50 {_ms(e['Perc50'])}  p99 {_ms(e['Perc99'])}  (namespace {ns}, {len(v):,} pods)")
    if s is not None and s.families:
        whole, peak = mv.evictions_per_second()
        out.append(f"  evictions    {mv.counter('evicted/success'):,.0f} ({mv.counter('evicted/error'):,.0f} refused or "
                   f"failed); seen {len(mv.evictions):,}: {_num(whole)}/s over the {mv.seconds:.1f} s window, "
                   f"at most {peak:,} in one second")
        out.append(f"  moves        planned {mv.counter('moves/planned'):,.0f}  executed {mv.counter('moves/executed'):,.0f}"
                   f"  aborted {mv.counter('moves/aborted'):,.0f};  bounce-backs {mv.counter('bounce_backs'):,.0f}")
        for strategy, h in sorted(s.plans.items()):
            (p50,) = histogram_quantiles(h, (0.5,))
            share = f" ({h.sum / mv.seconds:.1%} of the window)" if mv.seconds else ""
            out.append(f"  plans        {strategy}: {h.count:,.0f}, p50 {_ms(p50)}  mean {_ms(h.average)}  "
                       f"max <= {_ms(highest_bound(h))}; {h.sum:.2f} s planning{share}")
        if s.replacement_bound.count:
            p50, p99 = histogram_quantiles(s.replacement_bound, (0.5, 0.99))
            out.append(f"  replacement  bound p50 {_ms(p50)}  p99 {_ms(p99)} after its eviction "
                       f"({s.replacement_bound.count:,.0f})")
    if s is not None and "gc/0" in s.counters:
        out.append("  gc           " + ", ".join(
            f"gen{g} {s.counters.get(f'gc/{g}', 0):,.0f} ({_ms(s.counters.get(f'gc_seconds/{g}', 0.0))})" for g in range(3))
            + " (the scheduler's collections in the window)")
    emptied = f"; compaction emptied {mv.counter('nodes_emptied'):,.0f}" if s is not None and "compact" in s.plans \
        else ""
    out.append(f"  nodes        in use {mv.nodes_before:,} at the window's start, {mv.nodes_after:,} at its end{emptied}")
    if mv.skews:
        within = sum(1 for v in mv.skews.values() if v <= 1)
        out.append(f"  zones        {within:,} of {len(mv.skews):,} owners have their pods within 1 of each other "
                   f"over {mv.zones} zones at the end (max skew {max(mv.skews.values())})")
    return out


def ceiling_fraction(m: RunMetrics, ceiling: RunMetrics | float) -> tuple[float | None, float | None, str]:
    """(scheduler throughput, ceiling throughput, basis); both on the same basis when ``ceiling`` is a run."""
    if isinstance(ceiling, RunMetrics):
        (mine, top), basis = comparable_throughputs([m, ceiling])
    else:
        mine, top, basis = m.throughput_avg(), float(ceiling), "as given"
    return mine, top, basis


def ceiling_line(m: RunMetrics, ceiling: RunMetrics | float) -> str:
    mine, top, basis = ceiling_fraction(m, ceiling)
    if not mine or not top:
        return "baseline ceiling unknown (no throughput measured)"
    return f"baseline binder {top:.1f} pods/s; {m.scheduler} at {100.0 * mine / top:.1f} % of it ({basis})"


# ---------------------------------------------------------------------------- all of it


def write_report(output: Path, runs: Sequence[RunMetrics], metadata: Mapping[str, Any], stem: str, *,
                 title: str, ceiling: float | None = None,
                 run_labels: Sequence[Mapping[str, str]] | None = None) -> tuple[Path, Path]:
    """Write ``<output>/<stem>.json`` and ``<output>/<stem>.png``; return both paths."""
    output = Path(output)
    doc = build_document(runs, metadata, run_labels)
    json_path = write_json(output / f"{stem}.json", doc)
    png_path = plot_throughput(output / f"{stem}.png", runs, title, ceiling=ceiling)
    return json_path, png_path
