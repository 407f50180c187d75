"""Compiled memory of one training step of a decoder layer: dense vs blockwise (flash-style) attention.

Owns the measurement behind issue 16's "no [B, H, T, T] tensor at T=8192": for each sequence length it
lowers jax.jit(jax.grad(loss)) of one Qwen2.5 layer at a preset's width (bf16 weights and compute,
batch 1, loss = mean of the final hidden states) with abstract inputs (nothing allocated), compiles it
for this machine's backend and reads `compiled.memory_analysis()` (temporaries, arguments) and the HLO
(how many T x T-shaped buffers it declares). Attention back-ends: "dense" (memjax/model/attention.py,
the reference) and "blockwise" (memjax/model/flash_attention.py). The cuDNN back-end only compiles on a
GPU and is not measured here.

Writes benchmarks/results/attention_memory_<device>.json and prints a table.
Run: `python -m benchmarks.attention_memory [--preset qwen2.5-7b] [--t 2048 4096 8192]`.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
from pathlib import Path

import jax
import jax.numpy as jnp
from flax import nnx

from memjax.model import presets
from memjax.model.attention import DenseCausal
from memjax.model.flash_attention import BlockwiseCausal
from memjax.model.qwen2 import abstract_model

RESULTS = Path(__file__).parent / "results"
BACKENDS = {"dense": DenseCausal(), "blockwise": BlockwiseCausal()}


def measure(preset: str, t: int, backend: str) -> dict:
    cfg = presets.get(preset).replace(num_layers=1, dtype="bfloat16", param_dtype="bfloat16")
    gd, st = nnx.split(abstract_model(cfg))
    att = BACKENDS[backend]

    def loss(st, ids):
        h, _ = nnx.merge(gd, st).forward(ids, attention=att, return_hidden=True)
        return h.astype(jnp.float32).mean()

    c = jax.jit(jax.grad(loss)).lower(st, jax.ShapeDtypeStruct((1, t), jnp.int32)).compile()
    ma = c.memory_analysis()
    quadratic = re.findall(rf"\w+\[[0-9,]*{t},{t}[0-9,]*\]", c.as_text())
    return {"preset": preset, "t": t, "backend": backend, "temp_bytes": int(ma.temp_size_in_bytes),
            "argument_bytes": int(ma.argument_size_in_bytes), "txt_buffers": len(quadratic)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="qwen2.5-7b")
    ap.add_argument("--t", type=int, nargs="+", default=[2048, 4096, 8192])
    args = ap.parse_args(argv)
    rows = [measure(args.preset, t, b) for t in args.t for b in BACKENDS]
    dev = jax.devices()[0]
    out = {"device": f"{dev.platform} ({dev.device_kind})", "host": platform.machine(), "jax": jax.__version__,
           "layers": 1, "dtype": "bfloat16", "batch": 1, "rows": rows}
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"attention_memory_{dev.platform}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"{'T':>6} {'backend':>10} {'temp GiB':>9} {'TxT buffers':>12}")
    for r in rows:
        print(f"{r['t']:>6} {r['backend']:>10} {r['temp_bytes'] / 2**30:>9.2f} {r['txt_buffers']:>12}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
