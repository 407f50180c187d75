"""Top kernels of a JAX profiler trace, from its Perfetto JSON (no TensorBoard plugin needed).

Owns `trace(fn, out_dir)` (runs `fn()` under `jax.profiler.trace(out_dir, create_perfetto_trace=True)`) and
`summarize(out_dir, top)` -> dict: total busy microseconds per trace process, and for the device processes
(names holding "/device:GPU" — on a CPU run, every process) the `top` event names by summed duration with
their count and share of the device time, counted on the CUDA stream lines only when the trace has them (a GPU
process also has "XLA Modules" / "XLA Ops" lines over the same time), and each device line's busy time.
Durations are the trace's own ("X" events, microseconds); nested events of one thread are not subtracted, so
shares are per name, not a partition. Used by
benchmarks/train_step.py --profile and benchmarks/rollout_throughput.py --profile (sweep).
"""

from __future__ import annotations

import collections
import gzip
import json
from pathlib import Path

import jax


def trace(fn, out_dir: Path):
    out_dir.mkdir(parents=True, exist_ok=True)
    with jax.profiler.trace(str(out_dir), create_perfetto_trace=True):
        res = fn()
        jax.block_until_ready(res)
    return res


def summarize(out_dir: Path, top: int = 15) -> dict:
    files = sorted(Path(out_dir).rglob("*perfetto_trace.json.gz"))
    if not files:
        return {"error": f"no perfetto trace under {out_dir}"}
    with gzip.open(files[-1], "rt") as fh:
        events = json.load(fh)
    events = events["traceEvents"] if isinstance(events, dict) else events
    pname = {e["pid"]: e.get("args", {}).get("name", "") for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    busy: collections.Counter = collections.Counter()
    for e in events:
        if e.get("ph") == "X":
            busy[pname.get(e["pid"], str(e["pid"]))] += float(e.get("dur", 0))
    dev = {p for p, n in pname.items() if "/device:GPU" in n} or set(pname)
    tname = {(e["pid"], e["tid"]): e.get("args", {}).get("name", "") for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") in dev}
    lines: collections.Counter = collections.Counter()
    for e in events:
        if e.get("ph") == "X" and e.get("pid") in dev:
            lines[f"{pname.get(e['pid'], e['pid'])} / {tname.get((e['pid'], e.get('tid')), e.get('tid'))}"] += float(
                e.get("dur", 0))
    # A GPU device process also carries summary lines ("XLA Modules", "XLA Ops") over the same time as its
    # kernels: only the CUDA stream lines are counted as kernels when they exist.
    streams = {k for k, n in tname.items() if n.lower().startswith("stream")}
    keep = (lambda e: (e.get("pid"), e.get("tid")) in streams) if streams else (lambda e: e.get("pid") in dev)
    by_name: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
    total = 0.0
    for e in events:
        if e.get("ph") == "X" and keep(e):
            d = float(e.get("dur", 0))
            by_name[e.get("name", "?")][0] += d
            by_name[e.get("name", "?")][1] += 1
            total += d
    rows = sorted(by_name.items(), key=lambda kv: -kv[1][0])[:top]
    return {"trace": str(files[-1]), "busy_us_per_process": dict(busy.most_common()),
            "device_lines_us": dict(lines.most_common(12)), "kernels_from": "streams" if streams else "all lines",
            "device_us": total,
            "top": [{"name": n[:160], "us": round(us, 1), "count": c, "share": us / total if total else None}
                    for n, (us, c) in rows]}


def print_summary(s: dict, title: str = "profile") -> None:
    if "error" in s:
        print(f"{title}: {s['error']}")
        return
    print(f"{title}: device time {s['device_us'] / 1e3:.1f} ms")
    for r in s["top"]:
        print(f"  {100 * (r['share'] or 0):5.1f}%  {r['us'] / 1e3:9.2f} ms  x{r['count']:<5} {r['name'][:110]}")
