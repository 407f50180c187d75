"""Speed of the trainer's fused kernels, Pallas vs XLA: fused log-prob + entropy, step-level ratio loss.

What it measures, forward + backward (jax.value_and_grad, jitted with the arrays as arguments, warmed up,
median of --iters calls each ending in block_until_ready), every implementation on the same random inputs:
  * `memjax.kernels.token_logprob_entropy`: hidden [N, D] bf16, LM head W [D, V] bf16 (Qwen2.5-1.5B:
    D 1536, V 151,936; 7B: D 3584), 90% of the tokens valid; impls "chunked" (XLA, the default),
    "pallas" and "reference" (dense [N, V] logits). Gradient w.r.t. hidden and W. FLOPs: 2·N·D·V for
    the forward, 3 such products for the recomputing backward (logits again, dh, dW) -> 8·N·D·V;
    reported as TFLOP/s and % of the device's bf16 peak. Checked: max |logp - reference| and the relative
    error of dW against the reference.
  * `memjax.kernels.step_ratio_loss`: [rows, L] tokens with sorted step ids (steps of 64-512 tokens),
    impls "xla" (segment_sum, the default) and "pallas". Memory-bound: bytes = 5 f32 inputs read + 1
    gradient written; reported as % of the HBM roofline. Checked: |loss - xla| and |grad - xla|.
Writes benchmarks/results/kernel_speed_<device>.json. On CPU only a smoke run (--smoke; Pallas in interpret
mode: timings are not GPU evidence). Run: `python -m benchmarks.kernel_speed [--n 8192 32768] [--d 1536 3584]`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from memjax.kernels import step_ratio_loss, token_logprob_entropy
from memjax.model import flops

from .forward_throughput import device_slug
from .paged_attention import time_fn

RESULTS = Path(__file__).resolve().parent / "results"


def _measure(impl: str, fn, args, iters: int, warmup: int):
    """(row, output) of one implementation timed by benchmarks.paged_attention.time_fn; a failing
    implementation gives an error row and None, and the others still run."""
    try:
        r, out = time_fn(fn, args, iters, warmup)
    except Exception as e:  # noqa: BLE001
        return dict(impl=impl, error=f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"), None
    return dict(impl=impl, **r), jax.device_get(out)


def logprob_case(n: int, d: int, v: int, impls, iters, warmup, interpret, seed=0) -> dict:
    k = jax.random.split(jax.random.key(seed), 3)
    h = jax.random.normal(k[0], (n, d), jnp.bfloat16)
    w = (jax.random.normal(k[1], (d, v), jnp.float32) * 0.02).astype(jnp.bfloat16)
    tgt = jax.random.randint(k[2], (n,), 0, v, jnp.int32)
    mask = (jnp.arange(n) % 10 != 0).astype(jnp.float32)
    peak = flops.peak_tflops()
    rows, outs = [], {}
    for impl in impls:
        kw = {"interpret": True} if (impl == "pallas" and interpret) else {}

        def loss(h, w, impl=impl, kw=kw):
            lp, ent = token_logprob_entropy(h, w, tgt, mask, impl=impl, **kw)
            return jnp.sum(lp) + 0.01 * jnp.sum(ent), lp

        r, out = _measure(impl, jax.value_and_grad(loss, argnums=(0, 1), has_aux=True), (h, w), iters, warmup)
        rows.append(r)
        if out is None:
            continue
        fl = 8.0 * n * d * v
        r.update(tflops=fl / r["median_s"] / 1e12, peak_fraction=(fl / r["median_s"] / 1e12 / peak) if peak else None)
        outs[impl] = out
    ref = outs.get("reference")
    for r in rows:
        o = outs.get(r.get("impl"))
        if ref is not None and o is not None:
            (_, lp), (dh, dw) = o
            (_, lpr), (dhr, dwr) = ref
            r["max_abs_logp_vs_reference"] = float(np.max(np.abs(lp - lpr)))
            dwf, dwrf = np.asarray(dw, np.float32), np.asarray(dwr, np.float32)
            r["rel_err_dw_vs_reference"] = float(np.linalg.norm(dwf - dwrf) / max(np.linalg.norm(dwrf), 1e-30))
    return dict(kernel="token_logprob_entropy", n=n, d=d, v=v, dtype="bfloat16", rows=rows)


def step_case(rows_: int, length: int, impls, iters, warmup, interpret, seed=0) -> dict:
    rng = np.random.default_rng(seed)
    seg = np.full((rows_, length), -1, np.int32)
    s = 0
    for r in range(rows_):
        t = 0
        while t < length - 64:
            n = int(rng.integers(64, 513))
            seg[r, t:t + n] = s
            s, t = s + 1, t + n
    num_segments = s
    k = jax.random.split(jax.random.key(seed), 3)
    shape = (rows_, length)
    logp = -jax.random.uniform(k[0], shape) * 3
    old = logp + 0.05 * jax.random.normal(k[1], shape)
    adv = jax.random.normal(k[2], shape)
    mask = jnp.asarray(seg >= 0, jnp.float32)
    seg = jnp.asarray(seg)
    bw = flops.hbm_tbps()
    nbytes = 6 * rows_ * length * 4
    res, outs = [], {}
    for impl in impls:
        kw = {"interpret": True} if (impl == "pallas" and interpret) else {}

        def loss(lp, impl=impl, kw=kw):
            v, _ = step_ratio_loss(lp, old, adv, mask, seg, num_segments=num_segments, clip_low=0.2,
                                   clip_high=0.28, dual_clip=3.0, impl=impl, **kw)
            return v

        r, out = _measure(impl, jax.value_and_grad(loss), (logp,), iters, warmup)
        res.append(r)
        if out is None:
            continue
        r.update(gbps=nbytes / r["median_s"] / 1e9,
                 roofline_fraction=(nbytes / (bw * 1e12) / r["median_s"]) if bw else None)
        outs[impl] = out
    base = outs.get("xla")
    for r in res:
        o = outs.get(r.get("impl"))
        if base is not None and o is not None:
            r["abs_loss_vs_xla"] = float(abs(o[0] - base[0]))
            r["max_abs_grad_vs_xla"] = float(np.max(np.abs(o[1] - base[1])))
    return dict(kernel="step_ratio_loss", rows=rows_, length=length, num_segments=num_segments, results=res)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[8192, 32768], help="log-prob tokens")
    ap.add_argument("--d", type=int, nargs="+", default=[1536, 3584], help="hidden sizes (1.5B, 7B)")
    ap.add_argument("--v", type=int, default=151936)
    ap.add_argument("--step-rows", type=int, default=8)
    ap.add_argument("--step-len", type=int, default=8192)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--smoke", action="store_true", help="tiny shapes (the default without a GPU)")
    ap.add_argument("--out-dir", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    on_gpu = jax.default_backend() == "gpu"
    if a.smoke or not on_gpu:
        a.n, a.d, a.v, a.step_rows, a.step_len, a.iters, a.warmup = [64], [32], 1000, 2, 512, 2, 1
    interpret = not on_gpu
    cases = []
    for d in a.d:
        for n in a.n:
            c = logprob_case(n, d, a.v, ["chunked", "pallas", "reference"], a.iters, a.warmup, interpret)
            cases.append(c)
            for r in c["rows"]:
                print(f"logprob N={n} D={d}: {r['impl']:<10}" + (f" ERROR {r['error']}" if "error" in r else
                      f" {r['median_s'] * 1e3:8.2f} ms {r['tflops']:7.1f} TFLOP/s"
                      f" dlogp {r.get('max_abs_logp_vs_reference', float('nan')):.2e}"
                      f" dW rel {r.get('rel_err_dw_vs_reference', float('nan')):.2e}"))
    c = step_case(a.step_rows, a.step_len, ["xla", "pallas"], a.iters, a.warmup, interpret)
    cases.append(c)
    for r in c["results"]:
        print(f"step_ratio_loss [{a.step_rows}, {a.step_len}] {c['num_segments']} steps: {r['impl']:<7}" +
              (f" ERROR {r['error']}" if "error" in r else
               f" {r['median_s'] * 1e6:8.1f} us {r['gbps']:7.1f} GB/s dgrad {r.get('max_abs_grad_vs_xla', 0):.2e}"))
    dev = jax.devices()[0]
    res = dict(benchmark="kernel_speed", device_kind=str(dev.device_kind), platform=dev.platform,
               jax=jax.__version__, smoke=not on_gpu or a.smoke, interpret=interpret, cases=cases)
    a.out_dir.mkdir(parents=True, exist_ok=True)
    path = a.out_dir / f"kernel_speed_{device_slug(res['device_kind'])}.json"
    path.write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {path}")
    return res


if __name__ == "__main__":
    main()
