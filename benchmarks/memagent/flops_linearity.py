"""FLOP linearity: MemAgent's chunked memory reading (O(n)) vs full-context processing (O(n²)).

Analytic mode (the only mode for now): for each model (default Qwen2.5-7B and 14B) and each document
length c = 8K, 16K, ..., 4M tokens (powers of two × 1024), the training FLOPs of verl's Qwen2
estimator (`memjax.model.flops.estimate`) for
  * MemAgent: one conversation of q+200+o, ceil(c/N) memory updates of q+200+N+o, a final q+100+o;
  * baseline: one sequence of q+c+o tokens;
with q = o = 1024, N = 5000 (MemAgent paper, appendix A). Forward-only FLOPs are exactly one third of
these, so the ratios and slopes are the same for inference.

Outputs (in --out-dir, default benchmarks/results/): a markdown table (printed and saved as
flops_linearity_analytic.md) with the baseline/MemAgent ratio at every length including 4M, the JSON
flops_linearity_analytic.json, and the log-log plot flops_linearity.png with least-squares slopes of
log FLOPs against log c in the legend. The "local slope" is the slope between the two longest lengths,
i.e. the asymptotic exponent (MemAgent → 1, baseline → 2).

A measured mode (wall time of the real MemAgent workflow at increasing document lengths) arrives with
the MemAgent workflow (memjax.systems.memagent.workflow); it is not part of this script yet.

Run: `python -m benchmarks.memagent.flops_linearity [--models qwen2.5-7b qwen2.5-14b] [--max-k 4096]`.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
from pathlib import Path

import jax
from rich.console import Console
from rich.progress import track

from memjax.model import flops, presets

RESULTS = Path(__file__).resolve().parents[1] / "results"


def fit_slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(y) against log(x)."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def local_slope(xs: list[float], ys: list[float]) -> float:
    return math.log(ys[-1] / ys[-2]) / math.log(xs[-1] / xs[-2])


def analytic(models: list[str], lengths: list[int], q: int, o: int, chunk: int) -> dict:
    rows = {m: [] for m in models}
    cfgs = {m: presets.get(m) for m in models}
    for m, c in track([(m, c) for m in models for c in lengths], description="estimating FLOPs"):
        mem_seqs = flops.memagent_seqlens(c, q=q, o=o, chunk=chunk)
        mem = flops.estimate(cfgs[m], mem_seqs)
        base = flops.estimate(cfgs[m], flops.baseline_seqlens(c, q=q, o=o))
        rows[m].append(dict(context_tokens=c, memagent_conversations=len(mem_seqs),
                            memagent_tokens=sum(mem_seqs), memagent_flops=mem, baseline_flops=base,
                            ratio_baseline_over_memagent=base / mem))
    summary = {}
    for m, r in rows.items():
        xs = [x["context_tokens"] for x in r]
        summary[m] = {k: dict(fit_slope=fit_slope(xs, [x[f"{k}_flops"] for x in r]),
                              local_slope=local_slope(xs, [x[f"{k}_flops"] for x in r]))
                      for k in ("memagent", "baseline")}
        summary[m]["ratio_at_max_length"] = r[-1]["ratio_baseline_over_memagent"]
    return dict(mode="analytic", estimator="verl Qwen2 (memjax.model.flops.estimate), training FLOPs",
                stages=dict(q=q, o=o, chunk=chunk, initial=q + 200 + o, update=q + 200 + chunk + o,
                            final=q + 100 + o, baseline="q + c + o"),
                lengths=lengths, models=rows, summary=summary,
                env=dict(jax=jax.__version__, python=platform.python_version()))


def _tokens(c: int) -> str:
    return f"{c // 1024**2}M" if c % 1024**2 == 0 else f"{c // 1024}K"


def markdown(res: dict) -> str:
    models = list(res["models"])
    head = "| document | " + " | ".join(f"{m} MemAgent | {m} baseline | baseline ÷ MemAgent" for m in models) + " |"
    sep = "|---:|" + "---:|---:|---:|" * len(models)
    lines = [head, sep]
    for i, c in enumerate(res["lengths"]):
        cells = []
        for m in models:
            r = res["models"][m][i]
            cells.append(f"{r['memagent_flops']:.3e} | {r['baseline_flops']:.3e} | "
                         f"{r['ratio_baseline_over_memagent']:.2f}×")
        lines.append(f"| {_tokens(c)} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("| model | MemAgent slope (fit / local) | baseline slope (fit / local) | baseline ÷ MemAgent at "
                 f"{_tokens(res['lengths'][-1])} |")
    lines.append("|---|---:|---:|---:|")
    for m, s in res["summary"].items():
        lines.append(f"| {m} | {s['memagent']['fit_slope']:.3f} / {s['memagent']['local_slope']:.3f} | "
                     f"{s['baseline']['fit_slope']:.3f} / {s['baseline']['local_slope']:.3f} | "
                     f"{s['ratio_at_max_length']:.1f}× |")
    return "\n".join(lines)


def plot(res: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5))
    xs = res["lengths"]
    for i, (m, rows) in enumerate(res["models"].items()):
        s = res["summary"][m]
        color = f"C{i}"
        ax.loglog(xs, [r["baseline_flops"] for r in rows], "o--", color=color,
                  label=f"{m} full context (slope: fit {s['baseline']['fit_slope']:.2f}, "
                        f"{s['baseline']['local_slope']:.2f} last doubling)")
        ax.loglog(xs, [r["memagent_flops"] for r in rows], "s-", color=color,
                  label=f"{m} MemAgent (slope: fit {s['memagent']['fit_slope']:.2f}, "
                        f"{s['memagent']['local_slope']:.2f} last doubling)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [_tokens(c) for c in xs])
    ax.set_xlabel("document length (tokens)")
    ax.set_ylabel("training FLOPs (verl Qwen2 estimator)")
    st = res["stages"]
    ax.set_title(f"MemAgent vs full context: q={st['q']}, o={st['o']}, chunk={st['chunk']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["qwen2.5-7b", "qwen2.5-14b"], choices=presets.names())
    ap.add_argument("--min-k", type=int, default=8, help="shortest document, in units of 1024 tokens")
    ap.add_argument("--max-k", type=int, default=4096, help="longest document, in units of 1024 tokens")
    ap.add_argument("--q", type=int, default=1024, help="query budget (tokens)")
    ap.add_argument("--o", type=int, default=1024, help="output / memory budget (tokens)")
    ap.add_argument("--chunk", type=int, default=5000, help="MemAgent chunk size N (tokens)")
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    if not 0 < args.min_k < args.max_k:
        ap.error(f"need 0 < --min-k < --max-k, got {args.min_k}, {args.max_k}")
    lengths, k = [], args.min_k
    while k <= args.max_k:
        lengths.append(k * 1024)
        k *= 2
    if len(lengths) < 2:
        ap.error("need at least two lengths (powers of two from --min-k up to --max-k)")

    res = analytic(args.models, lengths, args.q, args.o, args.chunk)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    md = markdown(res)
    (args.out_dir / "flops_linearity_analytic.md").write_text(md + "\n")
    (args.out_dir / "flops_linearity_analytic.json").write_text(json.dumps(res, indent=1) + "\n")
    plot(res, args.out_dir / "flops_linearity.png")
    print(md)  # plain print: a markdown table must not be re-wrapped to the terminal width
    Console().print(f"wrote {args.out_dir}/flops_linearity_analytic.{{md,json}} and flops_linearity.png")
    return res


if __name__ == "__main__":
    main()
