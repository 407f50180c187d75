"""Peak memory of the fused token log-prob + entropy (forward + backward) vs the naive [N, V] logits path.

Owns the measurement behind issue 6's memory goal (fused <= 1/10 of naive). For each shape it lowers
jax.jit(jax.grad(loss, argnums=(hidden, w))) with jax.ShapeDtypeStruct arguments (nothing is allocated),
compiles it for this machine's backend, and reads `compiled.memory_analysis()`: peak = temp + argument +
output bytes (aliased bytes subtracted). loss = sum(logp) + 0.01 * sum(entropy) over a mask, so both
outputs are differentiated. Paths measured on CPU: "reference" (dense [N, V] float32 logits) and
"chunked" (lax.scan tiles, custom VJP). The pallas path only runs on CPU in interpret mode, whose
compiled memory says nothing about the GPU kernel, so it is not measured here; instead its GPU lowering
is checked (Pallas -> Triton IR for an abstract H100, `--lower-gpu`) and its XLA-visible buffers are
counted from their shapes (the kernels keep tiles in registers/shared memory; no [N, V] buffer exists).

Writes benchmarks/results/kernel_memory_<device>.json (device named, jax version, shapes) and prints a
table. Run: `python -m benchmarks.kernel_memory [--n 4096 8192 65536] [--d 1536] [--v 151936] [--lower-gpu]`
(65536 = 8 x 8192, the issue's realistic trainer batch).
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

import jax
import jax.numpy as jnp

from memjax.kernels import token_logprob_entropy

RESULTS = Path(__file__).parent / "results"


def _loss(impl: str, **kw):
    def loss(h, w, t, m):
        lp, ent = token_logprob_entropy(h, w, t, m, impl=impl, **kw)
        return jnp.sum(lp) + 0.01 * jnp.sum(ent)
    return loss


def _specs(n: int, d: int, v: int, dtype):
    return (jax.ShapeDtypeStruct((n, d), dtype), jax.ShapeDtypeStruct((d, v), dtype),
            jax.ShapeDtypeStruct((n,), jnp.int32), jax.ShapeDtypeStruct((n,), jnp.bool_))


def compiled_memory(impl: str, n: int, d: int, v: int, dtype, **kw) -> dict[str, int]:
    """Bytes from the compiled fwd+bwd program's memory analysis (nothing is executed)."""
    fn = jax.jit(jax.grad(_loss(impl, **kw), argnums=(0, 1)))
    ma = fn.lower(*_specs(n, d, v, dtype)).compile().memory_analysis()
    out = {"temp": int(ma.temp_size_in_bytes), "argument": int(ma.argument_size_in_bytes),
           "output": int(ma.output_size_in_bytes), "alias": int(ma.alias_size_in_bytes)}
    out["peak"] = out["temp"] + out["argument"] + out["output"] - out["alias"]
    return out


def pallas_buffer_estimate(n: int, d: int, v: int, dtype, bn: int = 128) -> dict[str, int]:
    """XLA-visible buffers of the pallas path (from shapes; GPU-only, not compiled here)."""
    it = jnp.dtype(dtype).itemsize
    n_pad = -(-n // bn) * bn
    temp = (n_pad * d * it            # compacted hidden
            + 3 * n_pad * 4           # logp, entropy, lse (fwd outputs / residuals)
            + 2 * n_pad * 4           # masked cotangents
            + n_pad * d * 4           # dh accumulator (fp32)
            + d * v * 4)              # dW accumulator (fp32), cast to W's dtype into the output
    arg, out = n * d * it + d * v * it + 5 * n, n * d * it + d * v * it
    return {"temp": temp, "argument": arg, "output": out, "alias": 0, "peak": temp + arg + out}


def lower_pallas_for_gpu(n: int, d: int, v: int, dtype) -> int:
    """Lower the pallas fwd+bwd for an abstract H100 (Pallas -> Triton IR); returns the kernel count."""
    from jax.sharding import AbstractDevice, AbstractMesh
    dev = AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=None, platform="gpu")
    with jax.sharding.use_abstract_mesh(AbstractMesh((1,), ("x",), abstract_device=dev)):
        fn = jax.jit(jax.grad(_loss("pallas", interpret=False), argnums=(0, 1)))
        text = fn.trace(*_specs(n, d, v, dtype)).lower(lowering_platforms=("cuda",)).as_text()
    return text.count("__gpu$xla.gpu.triton")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[4096, 8192, 65536])
    ap.add_argument("--d", type=int, default=1536)
    ap.add_argument("--v", type=int, default=151936)
    ap.add_argument("--dtype", choices=["bfloat16", "float32"], nargs="+", default=["bfloat16", "float32"])
    ap.add_argument("--lower-gpu", action="store_true", help="also lower the pallas path to Triton IR")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)

    backend = jax.default_backend()
    device = "CPU" if backend == "cpu" else jax.devices()[0].device_kind
    rows = []
    for dtype_name in args.dtype:
        dtype = jnp.dtype(dtype_name)
        for n in args.n:
            naive = compiled_memory("reference", n, args.d, args.v, dtype)
            chunked = compiled_memory("chunked", n, args.d, args.v, dtype)
            row = {"n": n, "d": args.d, "v": args.v, "dtype": dtype_name, "naive": naive, "chunked": chunked,
                   "ratio_peak": chunked["peak"] / naive["peak"],
                   "ratio_temp": chunked["temp"] / naive["temp"],
                   "pallas_estimate": pallas_buffer_estimate(n, args.d, args.v, dtype)}
            row["ratio_peak_pallas_estimate"] = row["pallas_estimate"]["peak"] / naive["peak"]
            if args.lower_gpu:
                row["pallas_triton_kernels_lowered"] = lower_pallas_for_gpu(n, args.d, args.v, dtype)
            rows.append(row)

    gib = 1 << 30
    print(f"device={device} jax={jax.__version__}  fwd+bwd of token_logprob_entropy, GiB (temp+arg+out)")
    print(f"{'dtype':>8} {'N':>6} {'D':>5} {'V':>7} | {'naive':>7} {'chunked':>8} {'ratio':>6} | "
          f"{'naive tmp':>9} {'chunk tmp':>9} {'ratio':>6} | {'pallas est':>10} {'ratio':>6}")
    for r in rows:
        print(f"{r['dtype']:>8} {r['n']:>6} {r['d']:>5} {r['v']:>7} | {r['naive']['peak'] / gib:7.2f} "
              f"{r['chunked']['peak'] / gib:8.2f} {r['ratio_peak']:6.3f} | {r['naive']['temp'] / gib:9.2f} "
              f"{r['chunked']['temp'] / gib:9.2f} {r['ratio_temp']:6.3f} | "
              f"{r['pallas_estimate']['peak'] / gib:10.2f} {r['ratio_peak_pallas_estimate']:6.3f}")
    result = {"device": device, "backend": backend, "jax": jax.__version__, "python": platform.python_version(),
              "what": "compiled memory_analysis of jit(grad(sum(logp)+0.01*sum(entropy))) w.r.t. (hidden, w)",
              "goal": "chunked peak <= 1/10 of naive peak", "rows": rows}
    out = args.out or RESULTS / f"kernel_memory_{'cpu' if backend == 'cpu' else backend}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
