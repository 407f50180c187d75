"""Forward throughput of a Qwen2.5 preset with random weights: tokens/s, TFLOP/s and MFU.

What it measures: `model(ids)` (int32 [B, T] -> float32 logits [B, T, V], the public forward, LM head
included) jitted once with the parameters as arguments (nnx.split outside, nnx.merge inside the jitted
function: weights are never baked in as constants), after warm-up; each timed iteration is one call
followed by `jax.block_until_ready`. Weights are random (N(0, 0.02)) in --dtype for storage and compute.

Reported (and written to benchmarks/results/forward_<preset>_<device>.json with the device kind, jax /
flax versions, shapes, dtype and every iteration time):
  * tokens/s = B·T / median iteration time;
  * TFLOP/s and MFU with `memjax.model.flops.estimate(training=False)` (verl's Qwen2 estimator, the
    convention the MemAgent paper and verl report MFU with) over the device's dense bf16 peak;
  * the same with `memjax.model.flops.matmul_flops` (what the decoder actually executes: the embedding is a
    gather, not a matmul), and a roofline time max(FLOPs / peak, bytes / HBM bandwidth) with bytes =
    weights read once + logits written once (a lower bound).
The peak comes from the device table in memjax.model.flops, or --peak-tflops / $MEMJAX_PEAK_TFLOPS; on a
device with no known peak (CPU) MFU is shown as n/a and stored as null.

Run: `python -m benchmarks.forward_throughput` (Qwen2.5-1.5B, bf16, [8, 4096]); on CPU, e.g.
`python -m benchmarks.forward_throughput --preset tiny --batch 2 --seqlen 128`.
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

import flax
import jax
import jax.numpy as jnp
from flax import nnx
from rich.console import Console
from rich.progress import track
from rich.table import Table

from memjax.model import count_params, flops, init_model, presets

RESULTS = Path(__file__).resolve().parent / "results"


def device_slug(kind: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-") or "unknown"


def build(preset: str, dtype: str, seed: int):
    """(cfg, graphdef, params state) with the weights initialised on the device by one jitted call."""
    cfg = presets.get(preset, param_dtype=dtype, dtype=dtype)
    graphdef, _ = nnx.split(nnx.eval_shape(lambda: init_model(cfg, seed)))
    state = jax.jit(lambda: nnx.split(init_model(cfg, seed))[1])()
    return cfg, graphdef, state


def run(preset: str, batch: int, seqlen: int, iters: int, warmup: int, dtype: str, seed: int,
        peak: float | None) -> dict:
    cfg, graphdef, state = build(preset, dtype, seed)
    ids = jax.random.randint(jax.random.key(seed + 1), (batch, seqlen), 0, cfg.vocab_size, jnp.int32)
    fwd = jax.jit(lambda s, x: nnx.merge(graphdef, s)(x))

    t0 = time.perf_counter()
    compiled = fwd.lower(state, ids).compile()
    compile_s = time.perf_counter() - t0

    out = None
    for _ in range(warmup):
        out = None  # drop the previous logits first: at [8, 4096, 151936] f32 they are 20 GB
        out = jax.block_until_ready(compiled(state, ids))
    times = []
    for _ in track(range(iters), description=f"{preset} [{batch}, {seqlen}] {dtype}", transient=True):
        out = None
        t = time.perf_counter()
        out = jax.block_until_ready(compiled(state, ids))
        times.append(time.perf_counter() - t)
    finite = bool(jnp.isfinite(out).all())
    del out

    dev = jax.devices()[0]
    kind = str(dev.device_kind)
    seqs = [seqlen] * batch
    est, mm = flops.estimate(cfg, seqs, training=False), flops.matmul_flops(cfg, seqs)
    med = statistics.median(times)
    peak_v, peak_src = flops.peak_tflops_with_source(dev, peak)
    bw = flops.hbm_tbps(dev)
    n_params = count_params(cfg)
    bytes_moved = n_params * jnp.dtype(dtype).itemsize + batch * seqlen * cfg.vocab_size * 4
    roof = flops.roofline_seconds(mm, bytes_moved, dev, peak=peak_v) if peak_v else math.nan
    nan_to_none = lambda v: None if v is None or math.isnan(v) else v
    return dict(
        benchmark="forward_throughput", preset=preset, params=n_params, batch=batch, seqlen=seqlen,
        dtype=dtype, param_dtype=dtype, logits_dtype="float32", warmup=warmup, iters=iters,
        device_kind=kind, platform=dev.platform, device_count=jax.device_count(),
        jax=jax.__version__, flax=flax.__version__, python=platform.python_version(),
        compile_s=compile_s, times_s=times, median_s=med, mean_s=statistics.fmean(times), min_s=min(times),
        tokens_per_s=batch * seqlen / med,
        flops_estimate=est, flops_matmul=mm,
        tflops_estimate=est / med / 1e12, tflops_matmul=mm / med / 1e12,
        peak_tflops=peak_v, peak_source=peak_src, hbm_tbps=bw,
        mfu=nan_to_none(flops.mfu(est, med, dev, peak_v)) if peak_v else None,
        mfu_matmul=nan_to_none(flops.mfu(mm, med, dev, peak_v)) if peak_v else None,
        roofline_bytes=bytes_moved, roofline_s=nan_to_none(roof),
        roofline_fraction=nan_to_none(roof / med) if peak_v else None,
        logits_finite=finite,
    )


def report(res: dict) -> Table:
    pct = lambda v: "n/a" if v is None else f"{100 * v:.1f}%"
    t = Table(title=f"forward {res['preset']} [{res['batch']}, {res['seqlen']}] {res['dtype']} on "
                    f"{res['device_kind']}")
    t.add_column("metric")
    t.add_column("value", justify="right")
    rows = [
        ("median / min iteration", f"{res['median_s'] * 1e3:.2f} ms / {res['min_s'] * 1e3:.2f} ms"),
        ("compile", f"{res['compile_s']:.2f} s"),
        ("tokens/s", f"{res['tokens_per_s']:,.0f}"),
        ("TFLOP/s (verl estimate)", f"{res['tflops_estimate']:.3f}"),
        ("TFLOP/s (executed matmuls)", f"{res['tflops_matmul']:.3f}"),
        ("peak TFLOP/s", "n/a" if res["peak_tflops"] is None else f"{res['peak_tflops']:g} ({res['peak_source']})"),
        ("MFU (verl estimate)", pct(res["mfu"])),
        ("MFU (executed matmuls)", pct(res["mfu_matmul"])),
        ("roofline time / measured", pct(res["roofline_fraction"])),
    ]
    for k, v in rows:
        t.add_row(k, v)
    return t


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="qwen2.5-1.5b", choices=presets.names())
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seqlen", type=int, default=4096)
    ap.add_argument("--iters", type=int, default=10, help="timed iterations")
    ap.add_argument("--warmup", type=int, default=2, help="untimed iterations after compilation")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"],
                    help="parameter and compute dtype (logits are float32)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--peak-tflops", type=float, default=None,
                    help=f"device peak for MFU (default: table, or ${flops.PEAK_ENV})")
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    for name in ("batch", "seqlen", "iters"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be >= 1")
    if args.warmup < 0:
        ap.error("--warmup must be >= 0")

    res = run(args.preset, args.batch, args.seqlen, args.iters, args.warmup, args.dtype, args.seed,
              args.peak_tflops)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    path = args.out_dir / f"forward_{args.preset}_{device_slug(res['device_kind'])}.json"
    path.write_text(json.dumps(res, indent=1) + "\n")
    con = Console()
    con.print(report(res))
    con.print(f"wrote {path}")
    if not res["logits_finite"]:
        con.print("[red]warning: non-finite logits in the last iteration[/red]")
    return res


if __name__ == "__main__":
    main()
