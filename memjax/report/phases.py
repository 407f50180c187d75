"""The report's "Cost per phase" section: what each training step spent its time on, from metrics.jsonl alone.

Owns `phases_html(metrics)`: a table of seconds per phase for every step (the `time_<phase>_s` keys that
memjax/rl/phases.py writes, in the order they appear, then step_s, MFU and device-seconds per sample), and a
table of tokens/s and MFU per phase: the last step, and the mean over the steps after the first (the first
compiles every program). Invariants: only keys the run logged are shown; a missing or None value is shown as
"—" (MFU is None on a device without a known peak, e.g. CPU); runs without phase keys get a note, not an error.
"""

from __future__ import annotations

import math
from html import escape

from .traces import fmt


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _cell(v) -> str:
    return f'<td class="num">{escape(fmt(v) if _num(v) else "—")}</td>'


def _table(headers, rows) -> str:
    head = "".join(f"<th>{escape(str(h))}</th>" for h in headers)
    body = "".join(f"<tr><td>{escape(str(r[0]))}</td>" + "".join(_cell(c) for c in r[1:]) + "</tr>" for r in rows)
    return f'<div class="scroll"><table class="phases"><tr>{head}</tr>{body}</table></div>'


def _mean(rows: list[dict], key: str):
    vals = [r[key] for r in rows if _num(r.get(key))]
    return sum(vals) / len(vals) if vals else None


def phases_html(metrics: list[dict]) -> str:
    rows = [m for m in metrics if _num(m.get("step_s"))]
    if not rows:
        return '<p class="note">no per-phase timings in this run (metrics.jsonl has no step_s)</p>'
    phases = list(dict.fromkeys(k[5:-2] for m in rows for k in m if k.startswith("time_") and k.endswith("_s")))
    last = rows[-1]
    head = ["step", *[f"{p} s" for p in phases], "step s", "MFU step", "device-s / sample"]
    per_step = _table(head, [[m.get("step", i + 1), *[m.get(f"time_{p}_s") for p in phases], m["step_s"],
                              m.get("mfu_step"), m.get("gpu_s_per_sample")] for i, m in enumerate(rows)])
    later = rows[1:] or rows
    rated = [p for p in phases if any(f"tokens_per_s_{p}" in m for m in rows)]
    rates = _table(["phase", "share of step (last)", "tokens/s (last)", "MFU (last)", "tokens/s (mean, steps 2+)",
                    "MFU (mean, steps 2+)"],
                   [[p, (last.get(f"time_{p}_s") or 0.0) / last["step_s"], last.get(f"tokens_per_s_{p}"),
                     last.get(f"mfu_{p}"), _mean(later, f"tokens_per_s_{p}"), _mean(later, f"mfu_{p}")]
                    for p in rated] + [["whole step", 1.0, None, last.get("mfu_step"), None, _mean(later, "mfu_step")]])
    kind = escape(str(last.get("device_kind", "?")))
    per = last.get("gpu_s_per_sample")
    note = (f'<p>{escape(str(last.get("devices", "?")))} × {kind}; last step {fmt(last["step_s"])} s, '
            f'{escape(fmt(per) if _num(per) else "—")} device-s per trained sample (mean over steps 2+: '
            f'{escape(fmt(_mean(later, "gpu_s_per_sample")) if _num(_mean(later, "gpu_s_per_sample")) else "—")}). '
            "MFU: verl's FLOP estimate over the device's dense bf16 peak; — where the peak is unknown (CPU).</p>")
    return note + per_step + "<h3>tokens/s and MFU per phase</h3>" + rates
