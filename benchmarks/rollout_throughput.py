"""Rollout engine throughput.

Modes:
  skew   (default; CPU-friendly) continuous batching vs a static-batch baseline on skewed output
         lengths: most requests stop early, a few run long. The baseline feeds the SAME compiled engine
         one batch of max_slots requests at a time, each batch waiting for its longest member (what a
         static-batch rollout does); continuous batching refills a slot as soon as it frees. Reports
         generated tokens/s of both and their ratio, from one run.
  sweep  (GPU) decode tokens/s at several batch sizes and prefill tokens/s for a preset with random
         weights, each against its roofline: decode = (weight bytes + KV bytes read per step) / HBM
         bandwidth; prefill = MFU from memjax.flops.estimate(training=False).
Results: benchmarks/results/rollout_<mode>_<preset>_<device>.json. Run `python -m benchmarks.rollout_throughput -h`.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
import numpy as np
from flax import nnx
from rich.console import Console
from rich.table import Table

from memjax import flops
from memjax.engine import Engine, EngineConfig, SamplingParams
from memjax.engine.state import kv_bytes_per_page

from .forward_throughput import build, device_slug

RESULTS = Path(__file__).resolve().parent / "results"


def make_model(preset: str, dtype: str, seed: int = 0):
    cfg, graphdef, state = build(preset, dtype, seed)
    return nnx.merge(graphdef, state)


def _timed(eng: Engine, prompts, params) -> tuple[float, int]:
    t0 = time.perf_counter()
    outs = eng.generate(prompts, params)
    return time.perf_counter() - t0, sum(len(o.token_ids) for o in outs)


def skew(args) -> dict:
    model = make_model(args.preset, args.dtype)
    ecfg = EngineConfig(max_slots=args.slots, page_size=16, window=args.window, prefill_slots=min(4, args.slots),
                        prefill_chunk=64, rounds_per_sync=64, progress=False)
    eng = Engine(model, ecfg)
    rng = np.random.default_rng(0)
    n = args.requests
    prompts = [rng.integers(0, model.cfg.vocab_size, args.prompt_len).tolist() for _ in range(n)]
    long = rng.random(n) < args.long_frac
    lens = np.where(long, args.long_tokens, args.short_tokens)
    params = [SamplingParams(temperature=1.0, max_tokens=int(k), seed=i) for i, k in enumerate(lens)]
    _timed(eng, prompts[: args.slots], params[: args.slots])  # compile + warm up
    cont_s, cont_tok = _timed(eng, prompts, params)
    stat_s, stat_tok = 0.0, 0
    for i in range(0, n, args.slots):
        s, t = _timed(eng, prompts[i:i + args.slots], params[i:i + args.slots])
        stat_s, stat_tok = stat_s + s, stat_tok + t
    assert cont_tok == stat_tok == int(lens.sum())
    return dict(mode="skew", continuous_s=cont_s, static_s=stat_s, tokens=cont_tok,
                continuous_tok_s=cont_tok / cont_s, static_tok_s=stat_tok / stat_s, speedup=stat_s / cont_s,
                requests=n, slots=args.slots, long_frac=args.long_frac, short_tokens=args.short_tokens,
                long_tokens=args.long_tokens, prompt_len=args.prompt_len)


def sweep(args) -> dict:
    model = make_model(args.preset, args.dtype)
    cfg = model.cfg
    bw = flops.hbm_tbps()
    weight_bytes = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    rows = []
    for b in args.batches:
        ecfg = EngineConfig(max_slots=b, page_size=64, window=args.window, prefill_slots=min(8, b),
                            prefill_chunk=min(2048, args.window), rounds_per_sync=256, progress=False)
        eng = Engine(model, ecfg)
        rng = np.random.default_rng(b)
        prompts = [rng.integers(0, cfg.vocab_size, args.prompt_len).tolist() for _ in range(b)]
        one = SamplingParams(temperature=1.0, max_tokens=1, seed=0)
        full = SamplingParams(temperature=1.0, max_tokens=args.decode_tokens + 1, seed=0)
        _timed(eng, prompts, one), _timed(eng, prompts, full)  # compile both paths
        pre_s, _ = _timed(eng, prompts, one)
        tot_s, _ = _timed(eng, prompts, full)
        dec_s = max(tot_s - pre_s, 1e-9)
        steps = args.decode_tokens
        ctx = args.prompt_len + steps / 2
        kv_read = b * ctx * kv_bytes_per_page(cfg, ecfg) / ecfg.page_size
        roof_s = steps * (weight_bytes + kv_read) / (bw * 1e12) if bw else float("nan")
        pf = flops.estimate(cfg, [args.prompt_len] * b, training=False)
        rows.append(dict(batch=b, prefill_tok_s=b * args.prompt_len / pre_s, prefill_mfu=flops.mfu(pf, pre_s),
                         decode_tok_s=b * steps / dec_s, decode_roofline_frac=roof_s / dec_s,
                         decode_step_ms=1e3 * dec_s / steps))
    return dict(mode="sweep", hbm_tbps=bw, weight_bytes=weight_bytes, prompt_len=args.prompt_len,
                decode_tokens=args.decode_tokens, rows=rows)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["skew", "sweep"], default="skew")
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--requests", type=int, default=128)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--short-tokens", type=int, default=16)
    ap.add_argument("--long-tokens", type=int, default=256)
    ap.add_argument("--long-frac", type=float, default=0.1)
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--batches", type=int, nargs="+", default=[32, 64, 128, 256])
    ap.add_argument("--decode-tokens", type=int, default=128)
    args = ap.parse_args(argv)
    res = skew(args) if args.mode == "skew" else sweep(args)
    kind = flops.device_kind()
    res.update(device=kind, preset=args.preset, dtype=args.dtype, jax=jax.__version__)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"rollout_{args.mode}_{args.preset}_{device_slug(kind)}.json"
    out.write_text(json.dumps(res, indent=2))
    con = Console()
    t = Table(title=f"rollout throughput ({args.mode}, {args.preset}, {kind})")
    if args.mode == "skew":
        for c in ("continuous tok/s", "static tok/s", "speedup"):
            t.add_column(c, justify="right")
        t.add_row(f"{res['continuous_tok_s']:.0f}", f"{res['static_tok_s']:.0f}", f"{res['speedup']:.2f}x")
    else:
        for c in ("batch", "prefill tok/s", "prefill MFU", "decode tok/s", "decode % roofline", "step ms"):
            t.add_column(c, justify="right")
        for r in res["rows"]:
            t.add_row(str(r["batch"]), f"{r['prefill_tok_s']:.0f}", f"{100 * r['prefill_mfu']:.1f}%",
                      f"{r['decode_tok_s']:.0f}", f"{100 * r['decode_roofline_frac']:.1f}%", f"{r['decode_step_ms']:.2f}")
    con.print(t)
    con.print(f"wrote {out}")
    return res


if __name__ == "__main__":
    main()
