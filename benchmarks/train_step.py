"""One real mini-batch update of the trainer on this process's devices: tokens/s, MFU, peak memory vs the plan.

What it measures: `memjax.rl.update_programs.UpdatePrograms.update` (the program `memjax.train` runs: gradient
accumulation over `--micro-batches` micro-batches in one jitted call, remat, packed rows with segment ids,
fused log-prob, clip-higher + dual-clip surrogate, k3 KL to a bf16 reference log-prob, AdamW, params and
optimizer state donated) for a preset with random fp32 master weights and bf16 compute, the recipe's
UpdateConfig / LossConfig / OptimConfig taken from `--config` (default configs/memagent/train.py). The rows are
packed by `memjax.rl.packing.pack` from conversations of random lengths in [--min-conv, --max-conv] (MemAgent's
are 1-7K tokens), so attention, masking and the pad fraction are what a real step sees.

Reported (benchmarks/results/train_step_<preset>_<device>.json):
  * tokens/s = real (unpadded) tokens per update / median update time;
  * MFU = memjax.model.flops.estimate(cfg, conversation lengths, training=True) (verl's convention: 3x forward,
    full s^2 attention per conversation) / time / device peak; also per padded row token;
  * peak memory: `device.memory_stats()["peak_bytes_in_use"]` after the timed updates (GPU only), against
    `memjax.run.plan.plan(cfg, devices=1, hbm_gib=...)`'s update phase (params + optimizer + reference + train
    temporaries) compiled on this device; the ratio should be within 10% (BUILD.md).
Run: `python -m benchmarks.train_step --preset qwen2.5-1.5b` on a GPU; on CPU e.g.
`python -m benchmarks.train_step --preset tiny --row-len 256 --micro-rows 2 --micro-batches 2 --min-conv 32
--max-conv 200 --iters 2`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from memjax.core.config import load_config_file
from memjax.model import count_params, flops, init_model, presets
from memjax.rl.packing import pack
from memjax.rl.update_programs import UpdatePrograms

from .forward_throughput import device_slug

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent
GIB = 1 << 30


def make_data(step: UpdatePrograms, n_micro: int, row_len: int, min_conv: int, max_conv: int, vocab: int, seed: int):
    """Packed micro-batches [n_micro, micro_rows, row_len] filled with conversations of random lengths."""
    u = step.update_cfg
    rng = np.random.default_rng(seed)
    rows = n_micro * u.micro_rows
    lengths = []
    while True:  # conversations until the rows are (nearly) full
        n = int(rng.integers(min_conv, max_conv + 1))
        p = pack(lengths + [n], row_len, u.max_segments, packed=u.pack)
        if p.num_rows > rows:
            break
        lengths.append(n)
    p = pack(lengths, row_len, u.max_segments, packed=u.pack)
    t = int(max(lengths))
    conv = lambda x: p.tokens(x, 0, rows).reshape(n_micro, u.micro_rows, row_len)
    mask = conv((np.arange(t) < np.asarray(lengths)[:, None]).astype(np.float32))
    mask[..., :1] = 0  # the first token of a row has no target (any row: a conservative mask)
    ids = conv(rng.integers(0, vocab, (len(lengths), t)).astype(np.int32))
    old = conv((-rng.random((len(lengths), t)) * 3).astype(np.float32))
    adv = conv(np.repeat(rng.standard_normal((len(lengths), 1)).astype(np.float32), t, 1))
    data = {"input_ids": ids, "positions": p.positions(rows).reshape(n_micro, u.micro_rows, row_len),
            "segment_ids": p.segment_ids(rows).reshape(n_micro, u.micro_rows, row_len),
            "loss_mask": mask, "old_logp": old, "adv": adv,
            "tok_w": mask.copy()}
    if step.use_ref:
        data["ref_logp"] = old + 0.01
    if step.loss_cfg.level == "step":
        data["local"] = p.local_index(u.micro_rows, rows).reshape(n_micro, u.micro_rows, row_len)
    data = {k: jnp.asarray(v) for k, v in data.items()}
    return data, lengths, p.pad_fraction


def run(args) -> dict:
    rc = load_config_file(str(args.config))
    u = dataclasses.replace(rc.update, micro_rows=args.micro_rows or rc.update.micro_rows,
                            **({"attention": args.attention} if args.attention else {}),
                            **({"remat": args.remat == "on"} if args.remat else {}))
    lc, oc = rc.loss, rc.optim
    mcfg = presets.get(args.preset, param_dtype="float32", dtype=args.compute_dtype)
    graphdef, params = nnx.split(nnx.eval_shape(lambda: init_model(mcfg, args.seed)), nnx.Param)
    step = UpdatePrograms(graphdef, params, None, oc, lc, u, temperature=u.temperature, use_ref=bool(lc.kl_coef),
                     use_entropy=bool(lc.entropy_coef))
    params = jax.jit(lambda: nnx.split(init_model(mcfg, args.seed), nnx.Param)[1])()
    opt = step.init_opt(params)
    data, lengths, pad = make_data(step, args.micro_batches, args.row_len, args.min_conv, args.max_conv,
                                   mcfg.vocab_size, args.seed)
    n_micro, denom, lr = jnp.int32(args.micro_batches), jnp.float32(sum(lengths)), jnp.float32(1e-6)
    t0 = time.perf_counter()
    compiled = step.update.lower(params, opt, data, n_micro, denom, lr).compile()
    compile_s = time.perf_counter() - t0
    ma = compiled.memory_analysis()
    times, metrics = [], None
    for i in range(args.warmup + args.iters):
        t = time.perf_counter()
        params, opt, metrics = compiled(params, opt, data, n_micro, denom, lr)
        jax.block_until_ready((params, opt, metrics))
        if i >= args.warmup:
            times.append(time.perf_counter() - t)
    prof = None
    if args.profile:
        from .profile_summary import print_summary, summarize, trace
        box = {}

        def one():
            box["p"], box["o"], box["m"] = compiled(params, opt, data, n_micro, denom, lr)
            return box["m"]

        trace(one, args.profile)
        params, opt, metrics = box["p"], box["o"], box["m"]
        prof = summarize(args.profile)
        print_summary(prof, f"train step {args.preset} ({u.attention})")
    metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
    dev = jax.devices()[0]
    stats = dev.memory_stats() or {}
    med = statistics.median(times)
    real_tokens = int(sum(lengths))
    est = flops.estimate(mcfg, lengths, training=True)
    peak_v, peak_src = flops.peak_tflops_with_source(dev)
    res = dict(benchmark="train_step", preset=args.preset, params=count_params(mcfg), config=str(args.config),
               param_dtype="float32", compute_dtype=args.compute_dtype, row_len=args.row_len,
               micro_rows=u.micro_rows, micro_batches=args.micro_batches, conversations=len(lengths),
               conv_len_range=[args.min_conv, args.max_conv], real_tokens=real_tokens, pad_fraction=pad,
               attention=u.attention, remat=u.remat, pack=u.pack, kl=bool(lc.kl_coef),
               device_kind=str(dev.device_kind), platform=dev.platform, jax=jax.__version__,
               compile_s=compile_s, times_s=times, median_s=med, tokens_per_s=real_tokens / med,
               flops_estimate=est, tflops=est / med / 1e12, peak_tflops=peak_v, peak_source=peak_src,
               mfu=(est / med / 1e12 / peak_v) if peak_v else None, metrics=metrics,
               program=dict(temp=int(ma.temp_size_in_bytes), argument=int(ma.argument_size_in_bytes),
                            output=int(ma.output_size_in_bytes), alias=int(ma.alias_size_in_bytes)),
               peak_bytes_in_use=stats.get("peak_bytes_in_use"), bytes_limit=stats.get("bytes_limit"), profile=prof)
    del params, opt, data, compiled
    if args.plan and stats.get("bytes_limit"):
        from memjax.run.plan import plan
        pc = dataclasses.replace(rc, model=dataclasses.replace(rc.model, preset=args.preset, hf_path="",
                                                               dtype="float32", compute_dtype=args.compute_dtype),
                                 update=dataclasses.replace(u, row_buckets=(args.row_len,)))
        pl_ = plan(pc, 1, stats["bytes_limit"] / GIB, micro_batches=args.micro_batches, min_kv_gib=0.0)
        upd = pl_["phases"]["update"]
        res["plan"] = dict(update_phase=upd, rows=pl_["bytes"], fits=pl_["fits"])
        res["peak_over_plan"] = stats["peak_bytes_in_use"] / upd if stats.get("peak_bytes_in_use") else None
    return res


def parse_args(argv=None) -> argparse.Namespace:
    """The command line, validated (argparse exits with status 2 and the usage on a bad one)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="qwen2.5-1.5b", choices=presets.names())
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "memagent" / "train.py",
                    help="training config whose update / loss / optim sections are used")
    ap.add_argument("--compute-dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--row-len", type=int, default=8192)
    ap.add_argument("--micro-rows", type=int, default=0, help="rows per micro-batch (0: the config's)")
    ap.add_argument("--micro-batches", type=int, default=2)
    ap.add_argument("--min-conv", type=int, default=1024)
    ap.add_argument("--max-conv", type=int, default=7168)
    ap.add_argument("--attention", default="", help="override update.attention (auto|dense|blockwise|cudnn)")
    ap.add_argument("--remat", default="", choices=["", "on", "off"])
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-plan", dest="plan", action="store_false", help="skip the memory plan comparison")
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    ap.add_argument("--tag", default="")
    ap.add_argument("--profile", type=Path, default=None, help="trace one more update into this folder and "
                    "print its top kernels (benchmarks/profile_summary.py)")
    args = ap.parse_args(argv)
    for f in ("row_len", "micro_batches", "iters", "min_conv"):
        if getattr(args, f) < 1:
            ap.error(f"--{f.replace('_', '-')} must be >= 1")
    if not args.min_conv <= args.max_conv <= args.row_len:
        ap.error("need --min-conv <= --max-conv <= --row-len")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    res = run(args)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    path = args.out_dir / f"train_step_{args.preset}{args.tag}_{device_slug(res['device_kind'])}.json"
    path.write_text(json.dumps(res, indent=1) + "\n")
    mfu = "n/a" if res["mfu"] is None else f"{100 * res['mfu']:.1f}%"
    peak = res.get("peak_bytes_in_use")
    print(f"train step {args.preset} rows {res['micro_batches']}x{res['micro_rows']}x{args.row_len} "
          f"({res['conversations']} convs, pad {res['pad_fraction']:.3f}): median {res['median_s']:.3f} s, "
          f"{res['tokens_per_s']:,.0f} tok/s, {res['tflops']:.1f} TFLOP/s, MFU {mfu}, compile {res['compile_s']:.1f} s"
          + (f", peak {peak / GIB:.2f} GiB" if peak else "")
          + (f", plan update phase {res['plan']['update_phase'] / GIB:.2f} GiB (peak/plan {res['peak_over_plan']:.3f})"
             if res.get("plan") and res.get("peak_over_plan") else ""))
    print(f"wrote {path}")
    return res


if __name__ == "__main__":
    main()
