"""Regression benchmark: generation time must not grow with the size of the KV page pool.

What it measures: the same job (R requests, P-token prompts, G generated tokens each, greedy, tiny
preset, fp32) on two engines that differ only in `num_pages`: a small pool (exactly the slots' windows
plus the null page, 513 pages by default) and a large one (20,000 pages). Each engine is compiled and
warmed up first; then the timed runs alternate small, large, small, large... so that load on a shared
machine hits both alike, and the median seconds per generated token of each is compared.
Pass: ratio = large / small <= --max-ratio (1.2). Before the fix in memjax/engine/paged_kv.py
(`k_pages[layer][:, ids]`, which made XLA copy the whole per-layer pool every layer of every round)
this ratio was about 6-9 on CPU. The result (with the device, every timing and pass/fail) goes to
benchmarks/results/pool_size_<preset>_<device>.json; the exit status is 1 when the ratio is exceeded.

Run: `python -m benchmarks.pool_size` (about a minute on CPU).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import jax
import numpy as np

from memjax.engine import Engine, EngineConfig, KVCacheOptions, SamplingParams
from memjax.model import init_model, presets

from .forward_throughput import device_slug

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--small-pages", type=int, default=None, help="default: slots * window / 16 + 1")
    ap.add_argument("--large-pages", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-ratio", type=float, default=1.2)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)

    model = init_model(presets.get(args.preset), seed=0)
    small = args.small_pages or args.slots * args.window // 16 + 1
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, model.cfg.vocab_size, args.prompt_len).tolist() for _ in range(args.requests)]
    params = SamplingParams(temperature=0.0, max_tokens=args.new_tokens)
    engines = {}
    for name, pages in (("small", small), ("large", args.large_pages)):
        engines[name] = Engine(model, EngineConfig(max_slots=args.slots, page_size=16, window=args.window,
                                                   prefill_slots=4, prefill_chunk=64, progress=False,
                                                   kv=KVCacheOptions(num_pages=pages)))
    outs, times = {}, {"small": [], "large": []}
    for name, eng in engines.items():  # compile + warm up
        outs[name] = eng.generate(prompts, params)
    if [o.token_ids for o in outs["small"]] != [o.token_ids for o in outs["large"]]:
        raise SystemExit("pool_size: the two pools generated different tokens")
    n_tok = sum(len(o.token_ids) for o in outs["small"])
    for _ in range(args.repeats):
        for name, eng in engines.items():
            t0 = time.perf_counter()
            eng.generate(prompts, params)
            times[name].append((time.perf_counter() - t0) / n_tok)
    per_tok = {k: statistics.median(v) for k, v in times.items()}
    ratio = per_tok["large"] / per_tok["small"]
    dev = jax.devices()[0]
    res = dict(benchmark="pool_size", preset=args.preset, device=dev.device_kind, platform=dev.platform,
               jax=jax.__version__, requests=args.requests, prompt_len=args.prompt_len,
               new_tokens=args.new_tokens, slots=args.slots, window=args.window, small_pages=small,
               large_pages=args.large_pages, generated_tokens=n_tok, s_per_token=times,
               median_s_per_token=per_tok, ratio=ratio, max_ratio=args.max_ratio, passed=ratio <= args.max_ratio)
    out = args.out or RESULTS / f"pool_size_{args.preset}_{device_slug(dev.device_kind)}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"s/token: small pool ({small} pages) {per_tok['small']:.3e}, large pool ({args.large_pages} pages) "
          f"{per_tok['large']:.3e}; ratio {ratio:.3f} (max {args.max_ratio}) -> {out}")
    return 0 if res["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
