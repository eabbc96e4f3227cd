"""Turn a directory of ``tandem-bench run`` JSON files into the markdown table of bench/RESULTS.md.

    python -m bench.results_table bench/out/table
    python -m bench.results_table --consolidation bench/out/i28

One row per workload and scheduler (the newest file wins), with the
scheduler's throughput as a fraction of the baseline binder's on the same
workload when both ran. Throughput is the average of 1 s samples when the
run was long enough to have any, else the overall rate (marked *). Beside
it, the scheduler's CPU per measured pod, counted from the resume to the
last bind when the scheduler was paused while the pods were created, else
from the collecting start (marked †; runs recorded before pausing existed
are read so); and its peak RSS.

``--consolidation``: one row per run of a Consolidation workload, in the order they ran (bench/consolidation.py
says where each number comes from): the stream's attempt p50 / p99 (its own profile, the probe's fine buckets)
and created-to-bound p50 / p99, the evictions and their rate, the plans' count and duration, bounce-backs, the
nodes in use at the window's start and end, the ReplicaSets balanced over the zones and the gangs' wait.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench.metrics import COLLECTING, RESUMED


def _row(doc: dict[str, Any]) -> dict[str, Any]:
    meta, run = doc["metadata"], doc["runs"][0]
    tp = run.get("throughput") or {}
    attempt = (run.get("attempt_latency") or {}).get("scheduled") or {}
    e2e = run.get("e2e_latency_seconds") or {}
    return {
        "workload": meta["workload"]["name"],
        "scheduler": meta["scheduler"]["label"],
        "kind": meta["scheduler"]["kind"],
        "pods": f'{run["bound_pods"]}/{run["measured_pods"]}',
        "avg": tp.get("Average"),
        "overall": run.get("throughput_overall"),
        "p50": tp.get("Perc50"),
        "p99": tp.get("Perc99"),
        "attempt_avg_ms": attempt.get("average_seconds", 0) * 1e3 if attempt else None,
        "e2e_p50": e2e.get("Perc50"),
        "e2e_p99": e2e.get("Perc99"),
        "rss": run.get("rss_peak_bytes"),
        **_cpu_per_pod(run),
        "command": meta["command"],
        "date": meta["date"][:16].replace("T", " "),
    }


def _cpu_per_pod(run: dict[str, Any]) -> dict[str, Any]:
    """``cpu_per_pod`` (seconds) and ``cpu_window`` of a run; a file written before they were derives them from
    the CPU while collecting."""
    per_pod, basis = run.get("cpu_per_pod_seconds"), run.get("cpu_window")
    if per_pod is None and "cpu_per_pod_seconds" not in run and run.get("cpu_window_seconds") is not None \
            and run.get("bound_pods"):
        per_pod, basis = run["cpu_window_seconds"] / run["bound_pods"], COLLECTING
    return {"cpu_per_pod": per_pod, "cpu_window": basis}


def cpu_cell(per_pod: float | None, basis: str | None) -> str:
    """``1.23 ms``, marked † when counted from the collecting start (the scheduler was not paused)."""
    if per_pod is None:
        return "-"
    return f"{per_pod * 1e3:.2f} ms" + ("" if basis == RESUMED else "†")


LEGEND = ("\n\n\\* the overall rate (the run was too short for 1 s samples). "
          "† CPU counted from the collecting start: the scheduler was not paused while its pods were created.")


def table(folder: Path) -> str:
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for f in sorted(folder.glob("*.json")):  # names end in a UTC timestamp: later files win
        doc = json.loads(f.read_text())
        if "runs" not in doc or len(doc["runs"]) != 1:
            continue
        r = _row(doc)
        rows[(r["workload"], r["kind"])] = r
    out = ["| workload | scheduler | pods bound | pods/s avg | CPU per pod | p50 / p99 (1 s samples) | of baseline "
           "| attempt avg | created-to-bound p50 / p99 | RSS peak | date (UTC) |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    marked = False

    def fmt(v: float | None, digits: int = 0) -> str:
        return "-" if v is None else f"{v:,.{digits}f}"

    for (wl, kind), r in sorted(rows.items(), key=lambda kv: (int(kv[0][0].split("/")[1].split("N")[0])
                                                               if kv[0][0].split("/")[1][0].isdigit() else 0,
                                                               kv[0][0], kv[0][1] != "tandem")):
        rate = r["avg"] if r["avg"] is not None else r["overall"]
        mark = "" if r["avg"] is not None else "*"
        base = rows.get((wl, "baseline"))
        frac = "-"
        if kind != "baseline" and base is not None:
            brate = base["avg"] if base["avg"] is not None and r["avg"] is not None else base["overall"]
            mine = r["avg"] if base["avg"] is not None and r["avg"] is not None else r["overall"]
            if brate:
                frac = f"{100 * mine / brate:.0f}%"
        samples = "-" if r["p50"] is None else f'{fmt(r["p50"])} / {fmt(r["p99"])}'
        e2e = "-" if r["e2e_p50"] is None else f'{r["e2e_p50"]:.2f} s / {r["e2e_p99"]:.2f} s'
        attempt = "-" if r["attempt_avg_ms"] is None else f'{r["attempt_avg_ms"]:.2f} ms'
        rss = "-" if not r["rss"] else f'{r["rss"] / 2**20:.0f} MiB'
        cpu = cpu_cell(r["cpu_per_pod"], r["cpu_window"])
        marked = marked or bool(mark) or cpu.endswith("†")
        out.append(f'| {wl} | {r["scheduler"]} | {r["pods"]} | {fmt(rate)}{mark} | {cpu} | {samples} | {frac} '
                   f'| {attempt} | {e2e} | {rss} | {r["date"]} |')
    return "\n".join(out) + (LEGEND if marked else "")


STREAM_PROFILE = "tandem-stream"


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.2f}"


def consolidation_row(doc: dict[str, Any]) -> str:
    meta, run = doc["metadata"], doc["runs"][0]
    c = run.get("consolidation") or {}
    stream = (c.get("attempts") or {}).get(f"scheduled/{STREAM_PROFILE}") or {}
    e2e = (c.get("e2e_seconds_by_namespace") or {}).get("stream") or {}
    counters = c.get("counters") or {}
    config = Path(meta["scheduler"]["config"] or "default").stem.removeprefix("benchmark-consolidation-")
    if c.get("consolidation_enabled"):
        plans = "; ".join(f'{st} {p["count"]:.0f}: {_ms(p.get("p50_seconds"))} / {_ms(p.get("mean_seconds"))} / '
                          f'<= {_ms(p.get("max_bound_seconds"))}' for st, p in sorted((c.get("plans") or {}).items()))
        evictions = (f'{counters.get("evicted/success", 0):,.0f} ({counters.get("evicted/error", 0):,.0f}): '
                     f'{c.get("evictions_per_second") or 0:.1f}/s, peak {c.get("evictions_peak_in_one_second", 0)}')
        bounce = f'{counters.get("bounce_backs", 0):.0f}'
    else:
        plans = evictions = bounce = "-"
    nodes = c.get("nodes_in_use") or ["-", "-"]
    zones = c.get("zone_skew")
    balanced = f'{zones["within_1"]}/{zones["owners"]}' if zones else "-"
    gangs = run.get("gang_latency_seconds") or {}
    gang = f'{run.get("gangs_complete", 0)}: {gangs["Perc50"]:.1f} / {gangs["Max"]:.1f} s' if gangs else "-"
    cpu = run.get("cpu_seconds")
    return (f'| {meta["workload"]["name"]} | {config} | {meta["date"][11:16]} | {_ms(stream.get("p50_seconds"))} / '
            f'{_ms(stream.get("p99_seconds"))} | {_ms(e2e.get("Perc50"))} / {_ms(e2e.get("Perc99"))} | {evictions} | '
            f'{plans} | {bounce} | {nodes[0]:,} -> {nodes[1]:,} | {balanced} | {gang} | '
            f'{"-" if cpu is None else f"{cpu:.1f}"} |')


def consolidation_table(folder: Path) -> str:
    out = ["| workload | config | UTC | stream attempt p50 / p99, ms | stream e2e p50 / p99, ms | evictions "
           "(refused): per s over the window, most in 1 s | plans: count: p50 / mean / max, ms | bounce-backs "
           "| nodes in use | balanced | gangs: p50 / max | scheduler CPU, s |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    docs = [json.loads(f.read_text()) for f in folder.glob("*.json")]
    for doc in sorted(docs, key=lambda d: d["metadata"]["date"]):
        if len(doc.get("runs") or ()) == 1 and doc["runs"][0].get("consolidation") is not None:
            out.append(consolidation_row(doc))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "--consolidation":
        print(consolidation_table(Path(args[1] if len(args) > 1 else "bench/out")))
        return 0
    folder = Path(args[0] if args else "bench/out/table")
    print(table(folder))
    return 0


if __name__ == "__main__":
    sys.exit(main())
