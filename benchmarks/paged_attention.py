"""Paged-attention decode: the Pallas kernel (memjax.kernels.paged_attention) vs the engine's XLA reference.

Owns the measurement behind issue 6's paged-attention numbers. One decode step of one layer (t = 1) for
Qwen2.5-1.5B (KV 2, H 12, D 128) and 7B (KV 4, H 28, D 128) attention shapes at batch 64-256 and 8K
context, bf16 pool, page size 16, every sequence's pages scattered over the pool by a random permutation
and kv_len ragged inside the last page (8192 - i % 16). Each variant (reference; pallas and
mosaic (--impls; the Mosaic GPU decode kernel, whose failure is recorded, not fatal) with num_splits in
--splits / --mosaic-splits, plus suggest_num_splits' choice on GPU) is jitted with the arrays as arguments,
warmed up, then timed (median of --iters, block_until_ready each call). Roofline: the bytes of K and V
the step must read (each sequence's ceil(kv_len / S) pages, K and V, all KV heads) over the device's
HBM bandwidth from memjax.model.flops.hbm_tbps (table, or $MEMJAX_PEAK_HBM_TBPS); reported as roofline time /
measured time.
The pallas result is checked against the reference (max |diff|) on every configuration.

On a machine without a GPU only a tiny smoke run is made (pallas in interpret mode): its timings say
nothing about GPU speed. Writes benchmarks/results/paged_attention_<device>.json (device kind, jax
version, shapes, all times). Run: `python -m benchmarks.paged_attention [--batch 64 128 256]
[--context 8192] [--models 1.5b 7b] [--splits 1 2 4 8] [--iters 20] [--smoke]`.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import re
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from memjax.kernels.paged_attention import (
    paged_attention,
    paged_attention_ref,
    suggest_num_splits,
)
from memjax.model import flops

RESULTS = Path(__file__).resolve().parent / "results"
SHAPES = {"1.5b": dict(kv=2, h=12, d=128), "7b": dict(kv=4, h=28, d=128),
          "tiny": dict(kv=2, h=4, d=16)}


def device_slug(kind: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-") or "unknown"


def make_inputs(seed: int, b: int, ctx: int, kv: int, h: int, d: int, s: int, dtype):
    """(q, k_pages, v_pages, layer, page_table, q_pos, kv_len) for one decode step; pool with one layer."""
    per = -(-ctx // s)
    n_pages = 1 + b * per
    rng = np.random.default_rng(seed)
    pt = jnp.asarray(1 + rng.permutation(b * per).reshape(b, per), jnp.int32)
    kv_len = jnp.asarray(ctx - np.arange(b) % s, jnp.int32)
    k0, k1, k2 = jax.random.split(jax.random.key(seed), 3)
    shape = (1, kv, n_pages, s, d)
    kp = jax.jit(lambda k: jax.random.normal(k, shape, dtype))(k0)
    vp = jax.jit(lambda k: jax.random.normal(k, shape, dtype))(k1)
    q = jax.random.normal(k2, (b, 1, h, d), dtype)
    return q, kp, vp, jnp.int32(0), pt, (kv_len - 1)[:, None], kv_len


def kv_bytes(kv_len, s: int, kv: int, d: int, itemsize: int) -> int:
    """Bytes of K and V a step must read: every visited page, whole (K and V, all kv heads)."""
    pages = (np.asarray(kv_len, np.int64) + s - 1) // s
    return int(pages.sum()) * s * kv * d * itemsize * 2


def time_fn(fn, args, iters: int, warmup: int) -> dict:
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    compile_s = time.perf_counter() - t0
    out = None
    for _ in range(warmup):
        out = jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        out = jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - t)
    return dict(compile_s=compile_s, times_s=times, median_s=statistics.median(times), min_s=min(times)), out


def run_config(model: str, b: int, ctx: int, s: int, dtype, splits: list[int], iters: int, warmup: int,
               interpret: bool, seed: int = 0, impls: tuple[str, ...] = ("pallas",),
               mosaic_splits: tuple[int, ...] = (1, 2, 4)) -> dict:
    shp = SHAPES[model]
    args = make_inputs(seed, b, ctx, shp["kv"], shp["h"], shp["d"], s, dtype)
    nbytes = kv_bytes(args[-1], s, shp["kv"], shp["d"], jnp.dtype(dtype).itemsize)
    bw = flops.hbm_tbps(jax.devices()[0])
    roof = nbytes / (bw * 1e12) if bw else None
    if not interpret:  # also time the heuristic's choice
        splits = sorted(set(splits) | {suggest_num_splits(b, shp["kv"], -(-ctx // s))})
    rows = []
    ref_res, ref_out = time_fn(paged_attention_ref, args, iters, warmup)
    rows.append(dict(variant="reference (XLA)", num_splits=None, **ref_res))
    for impl in impls:
        for n in (splits if impl == "pallas" else mosaic_splits):
            fn = lambda *a, n=n, impl=impl: paged_attention(*a, impl=impl, num_splits=n,  # noqa: E731
                                                             interpret=interpret)
            try:
                res, out = time_fn(fn, args, iters, warmup)
            except Exception as e:  # noqa: BLE001 -- the Mosaic GPU kernel awaits its first GPU run: record, go on
                if impl == "pallas":
                    raise
                rows.append(dict(variant=f"{impl} splits={n}", impl=impl, num_splits=n, error=repr(e)[:500],
                                 median_s=float("nan")))
                continue
            err = float(jnp.max(jnp.abs(out.astype(jnp.float32) - ref_out.astype(jnp.float32))))
            rows.append(dict(variant=f"{impl} splits={n}", impl=impl, num_splits=n, max_abs_diff_vs_reference=err,
                             **res))
            del out
    for r in rows:
        r["gbps"] = nbytes / r["median_s"] / 1e9
        r["roofline_fraction"] = None if roof is None else roof / r["median_s"]
    del args, ref_out
    best = min((r for r in rows if r.get("impl") == "pallas"), key=lambda r: r["median_s"])
    out = dict(model=model, batch=b, context=ctx, page_size=s, heads=shp["h"], kv_heads=shp["kv"],
               head_dim=shp["d"], dtype=jnp.dtype(dtype).name, kv_bytes=nbytes, hbm_tbps=bw,
               roofline_s=roof, variants=rows, best_pallas=best["variant"],
               speedup_best_pallas_vs_reference=rows[0]["median_s"] / best["median_s"])
    mosaic = [r for r in rows if r.get("impl") == "mosaic" and "error" not in r]
    if mosaic:  # the Mosaic GPU decode kernel (BUILD.md "Pallas backend"): the default switches on these numbers
        best_m = min(mosaic, key=lambda r: r["median_s"])
        out.update(best_mosaic=best_m["variant"], speedup_best_mosaic_vs_best_pallas=best["median_s"] / best_m["median_s"])
    return out


def plot(res: dict, path: Path) -> None:
    """% of the HBM roofline vs batch: the XLA reference and the best Pallas split, one line per model."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for model in dict.fromkeys(c["model"] for c in res["configs"]):
        cs = [c for c in res["configs"] if c["model"] == model]
        bs = [c["batch"] for c in cs]
        ref = [100 * (c["variants"][0]["roofline_fraction"] or 0) for c in cs]
        best = [100 * max((v["roofline_fraction"] or 0) for v in c["variants"] if v.get("impl") == "pallas")
                for c in cs]
        ax.plot(bs, best, "o-", label=f"{model} Pallas (best split)")
        ax.plot(bs, ref, "s--", label=f"{model} XLA reference")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch (sequences, one decode step)")
    ax.set_ylabel("% of HBM roofline")
    ax.set_ylim(0, 100)
    ax.set_title(f"paged attention, {res['configs'][0]['context']} context, {res['device_kind']}", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    on_gpu = jax.default_backend() in ("gpu", "cuda", "rocm")
    ap.add_argument("--models", nargs="+", default=["1.5b", "7b"], choices=sorted(SHAPES))
    ap.add_argument("--batch", type=int, nargs="+", default=[64, 128, 256])
    ap.add_argument("--context", type=int, default=8192)
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--splits", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--impls", nargs="+", default=["pallas", "mosaic"], choices=["pallas", "mosaic"],
                    help="kernels to time (mosaic: the Mosaic GPU decode kernel, Hopper+; a failure is recorded)")
    ap.add_argument("--mosaic-splits", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="tiny shapes only (the default without a GPU)")
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    ap.add_argument("--plot-from", type=Path, default=None, help="only redraw the PNG of an earlier result JSON")
    args = ap.parse_args(argv)
    if args.plot_from:
        res = json.loads(args.plot_from.read_text())
        plot(res, args.plot_from.with_suffix(".png"))
        print(f"wrote {args.plot_from.with_suffix('.png')}")
        return res
    smoke = args.smoke or not on_gpu
    if smoke:  # interpret mode on CPU: correctness plumbing only, timings are not GPU evidence
        models, batches, ctx, splits, iters, warmup = ["tiny"], [2], 64, [1, 2], 3, 1
    else:
        models, batches, ctx, splits, iters, warmup = (args.models, args.batch, args.context, args.splits,
                                                       args.iters, args.warmup)
    dev = jax.devices()[0]
    configs = []
    for model in models:
        for b in batches:
            c = run_config(model, b, ctx, args.page_size, jnp.dtype(args.dtype), splits, iters, warmup,
                           interpret=not on_gpu, impls=tuple(dict.fromkeys(["pallas", *args.impls])),
                           mosaic_splits=(2,) if smoke else tuple(args.mosaic_splits))
            configs.append(c)
            for r in c["variants"]:
                frac = "n/a" if r["roofline_fraction"] is None else f"{100 * r['roofline_fraction']:.1f}%"
                print(f"{model:>5} b={b:<4} ctx={ctx} {r['variant']:<18} {r['median_s'] * 1e6:10.1f} us "
                      f"{r['gbps']:8.1f} GB/s  roofline {frac}"
                      + (f"  maxdiff {r['max_abs_diff_vs_reference']:.2e}" if "max_abs_diff_vs_reference" in r
                         else f"  FAILED {r['error'][:200]}" if "error" in r else ""))
            print(f"      best pallas {c['best_pallas']}: {c['speedup_best_pallas_vs_reference']:.2f}x reference"
                  + (f"; best mosaic {c['best_mosaic']}: {c['speedup_best_mosaic_vs_best_pallas']:.2f}x best pallas"
                     if "best_mosaic" in c else ""))
    res = dict(benchmark="paged_attention_decode", smoke=smoke, device_kind=str(dev.device_kind),
               platform=dev.platform, jax=jax.__version__, python=platform.python_version(),
               interpret=not on_gpu, note=("CPU smoke run: pallas in interpret mode; timings are not GPU "
                                           "evidence" if smoke else "one layer, one decode step (t = 1)"),
               configs=configs)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    path = args.out_dir / f"paged_attention_{device_slug(res['device_kind'])}.json"
    path.write_text(json.dumps(res, indent=1, default=lambda v: None if isinstance(v, float) and math.isnan(v)
                               else str(v)) + "\n")
    plot(res, path.with_suffix(".png"))
    print(f"wrote {path} and its .png")
    return res


if __name__ == "__main__":
    main()
