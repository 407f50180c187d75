"""Measured cost of MemAgent vs full-context reading as the document grows (issue: FLOP linearity).

Runs the real MemAgent workflow on the engine at increasing document lengths with FIXED generation
lengths (no stop tokens: every memory update writes exactly --memory-tokens, the answer --final-tokens),
so the only thing that grows is the number of chunks. Reports wall time, document tokens/s and cost
per document token (minimum over interleaved repeats; garbage collected before and disabled during each timed run), with a least-squares linear fit of time vs length; and the full-context baseline
(the whole document prefilled in one window, then the answer) on the same engine settings, whose cost
per token grows with length. Documents are random in-vocabulary token ids (content does not change cost).
Default: tiny Qwen2.5-architecture model with the real vocabulary, CPU-sized. On a GPU pass
--preset qwen2.5-1.5b --dtype bfloat16 and larger lengths. Writes benchmarks/results/memagent_linearity_<preset>_<device>.json
and a PNG.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path

import jax
import matplotlib
import numpy as np
from rich.console import Console
from rich.progress import track
from rich.table import Table

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import memjax  # noqa: E402
from benchmarks.engine_options import (  # noqa: E402
    add_engine_option,
    engine_overrides,
    with_overrides,
)
from benchmarks.forward_throughput import device_slug  # noqa: E402
from benchmarks.rollout_throughput import make_model  # noqa: E402
from memjax.engine import Engine, EngineConfig, SamplingParams  # noqa: E402
from memjax.model import flops  # noqa: E402
from memjax.systems.memagent.workflow import MemAgent, MemAgentConfig  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "results"


def run(args) -> dict:
    tok = memjax.Tokenizer.default()
    model = make_model(args.preset, args.dtype)
    window = args.window
    ecfg = with_overrides(EngineConfig(max_slots=args.batch, page_size=64, window=window, prefill_slots=args.batch,
                                       prefill_chunk=args.prefill_chunk, rounds_per_sync=256, progress=False),
                          engine_overrides(args.engine))
    eng = Engine(model, ecfg)
    cfg = MemAgentConfig(chunk_tokens=args.chunk, max_query_tokens=64, max_memory_tokens=args.memory_tokens,
                         max_final_tokens=args.final_tokens, group_size=1, temperature=1.0)
    agent = MemAgent(eng, tok, cfg, stop_token_ids=())
    rng = np.random.default_rng(0)

    def samples(n_tokens):
        return [{"context_ids": rng.integers(0, 150_000, n_tokens).tolist(), "query": "What is the answer?",
                 "answers": ["x"]} for _ in range(args.batch)]

    agent.run(samples(args.chunk))  # compile and warm up
    # lengths in interleaved order, `repeats` times; the minimum per length filters out interference
    best: dict[int, tuple[float, dict]] = {}
    order = [n for _ in range(args.repeats) for n in rng.permutation(args.lengths).tolist()]
    for n in track(order, description="MemAgent"):
        docs = samples(n)
        gc.collect()  # the previous run's garbage is not billed to this one
        gc.disable()
        t0 = time.perf_counter()
        res = agent.run(docs)
        dt = time.perf_counter() - t0
        gc.enable()
        if n not in best or dt < best[n][0]:
            best[n] = (dt, res.stats)
    rows = []
    for n in args.lengths:
        dt, st = best[n]
        rows.append(dict(doc_tokens=n, seconds=dt, doc_tok_s=args.batch * n / dt, s_per_doc_token=dt / (args.batch * n),
                         conversations=st["conversations"], generated=st["generated_tokens"]))
    base = []
    if args.baseline_lengths:
        bwin = max(args.baseline_lengths) + 128
        bwin = -(-bwin // 64) * 64
        bcfg = EngineConfig(max_slots=args.batch, page_size=64, window=bwin, prefill_slots=args.batch,
                            prefill_chunk=args.prefill_chunk, rounds_per_sync=256, progress=False)
        beng = Engine(model, with_overrides(bcfg, engine_overrides(args.engine)))
        sp = SamplingParams(temperature=1.0, max_tokens=args.final_tokens)
        beng.generate([rng.integers(0, 150_000, args.chunk).tolist()] * args.batch, sp)  # warm-up
        bbest: dict[int, float] = {}
        border = [n for _ in range(args.repeats) for n in rng.permutation(args.baseline_lengths).tolist()]
        for n in track(border, description="full context"):
            prompts = [rng.integers(0, 150_000, n + 64).tolist() for _ in range(args.batch)]
            gc.collect()
            gc.disable()
            t0 = time.perf_counter()
            beng.generate(prompts, sp)
            bbest[n] = min(bbest.get(n, float("inf")), time.perf_counter() - t0)
            gc.enable()
        base = [dict(doc_tokens=n, seconds=bbest[n], s_per_doc_token=bbest[n] / (args.batch * n))
                for n in args.baseline_lengths]
    x = np.array([r["doc_tokens"] for r in rows], float)
    y = np.array([r["seconds"] for r in rows])
    slope, intercept = np.polyfit(x, y, 1)
    per = [r["s_per_doc_token"] for r in rows]
    res = dict(preset=args.preset, dtype=args.dtype, device=flops.device_kind(), jax=jax.__version__, batch=args.batch,
               chunk=args.chunk, memory_tokens=args.memory_tokens, final_tokens=args.final_tokens, rows=rows,
               fit=dict(seconds_per_token=slope, intercept_s=intercept,
                        r2=1 - ((y - (slope * x + intercept)) ** 2).sum() / ((y - y.mean()) ** 2).sum()),
               cost_per_token_max_over_min=max(per) / min(per), baseline=base)
    if base:
        bp = [r["s_per_doc_token"] for r in base]
        res["baseline_cost_per_token_last_over_first"] = bp[-1] / bp[0]
    return res


def plot(res: dict, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    r = res["rows"]
    ax.loglog([a["doc_tokens"] for a in r], [a["seconds"] for a in r], "o-", label="MemAgent (measured)")
    if res["baseline"]:
        b = res["baseline"]
        ax.loglog([a["doc_tokens"] for a in b], [a["seconds"] for a in b], "s-", label="full context (measured)")
    ax.set_xlabel("document tokens")
    ax.set_ylabel(f"wall seconds (batch {res['batch']})")
    ax.set_title(f"{res['preset']} on {res['device']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="tiny-qwen-vocab")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--lengths", type=int, nargs="+", default=[4096, 8192, 16384, 32768, 65536])
    ap.add_argument("--baseline-lengths", type=int, nargs="*", default=[4096, 8192, 16384, 32768])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2, help="runs per length (interleaved); the minimum is kept")
    ap.add_argument("--chunk", type=int, default=1024)
    ap.add_argument("--memory-tokens", type=int, default=32)
    ap.add_argument("--final-tokens", type=int, default=8)
    ap.add_argument("--window", type=int, default=1536)
    ap.add_argument("--prefill-chunk", type=int, default=512)
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    add_engine_option(ap)  # EngineConfig fields (issue 47's before/after)
    args = ap.parse_args(argv)
    res = run(args)
    res["engine"] = engine_overrides(args.engine)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"memagent_linearity_{args.preset}_{device_slug(res['device'])}"
    (args.out_dir / f"{stem}.json").write_text(json.dumps(res, indent=2))
    plot(res, args.out_dir / f"{stem}.png")
    t = Table(title=f"MemAgent measured cost vs document length ({res['preset']}, {res['device']})")
    for c in ("doc tokens", "conversations", "seconds", "doc tok/s", "µs / doc token", "full-context µs / token"):
        t.add_column(c, justify="right")
    base = {b["doc_tokens"]: b for b in res["baseline"]}
    for r in res["rows"]:
        b = base.get(r["doc_tokens"])
        t.add_row(str(r["doc_tokens"]), str(r["conversations"]), f"{r['seconds']:.2f}", f"{r['doc_tok_s']:.0f}",
                  f"{1e6 * r['s_per_doc_token']:.1f}", f"{1e6 * b['s_per_doc_token']:.1f}" if b else "-")
    con = Console()
    con.print(t)
    con.print(f"linear fit: {1e6 * res['fit']['seconds_per_token']:.2f} µs/token + {res['fit']['intercept_s']:.2f} s "
              f"(R² {res['fit']['r2']:.4f}); cost per token max/min = {res['cost_per_token_max_over_min']:.3f}")
    if "baseline_cost_per_token_last_over_first" in res:
        con.print(f"full-context cost per token grows {res['baseline_cost_per_token_last_over_first']:.2f}x over its range")
    return res


if __name__ == "__main__":
    main()
