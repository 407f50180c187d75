"""Cost of the sampler's truncation pass (top-p / top-k thresholds) per decode round: timed on this machine's device,
or compiled for an H100 without one (--aot).

  python -m benchmarks.sampler_truncation [--batches 32 64 256] [--vocab 151936] [--ways 1 15] [--iters 20] [--aot]
      [--json FILE]

What a round's `memjax.engine.sampler.sample` costs on f32 logits [b, V] (V = Qwen2.5's 151,936), for:
  none  - no truncation pass (the RL recipes' sampling, top_p = 1);
  top_p - the top-p search only (an evaluation's: MemAgent's eval samples at top_p 0.95, temperature 0.7);
  both  - the top-k search, then the top-p search within it;
each with `ways` thresholds per read of the values (`sampler.Truncation`): 1 = plain bisection, 32 reads per search,
the only algorithm before 2026-12-02, which also always ran both searches: `both` at ways 1 stands in for that path
(H100 compile at batch 64: 419 kernels and 72 reads here, 428 and 76 for the old code); 15 = a GPU's default, 8
reads per search. Timed: the jitted `sample` (warmed up, median of --iters calls ending in
block_until_ready), its ratio to `none` in the same run. --aot: the H100 compile's kernels per call and its reads of
an array of >= b*V*4 bytes (benchmarks/hlo_facts.py `large_reads`), with the HBM time those reads take at least
(H100 SXM, 3.35 TB/s). Writes benchmarks/results/sampler_truncation_<device>.json (aot-h100 with --aot).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
H100_TBPS = 3.35


def cases(ways: list[int]) -> list[tuple[str, int | None]]:
    return [("none", None)] + [(c, w) for w in ways for c in ("top_p", "both")]


def _args(b: int, v: int, sharding=None, concrete: bool = True):
    import jax
    import jax.numpy as jnp

    shapes = [((b, v), jnp.float32), ((b,), jnp.float32), ((b,), jnp.float32), ((b,), jnp.int32),
              ((b,), jnp.int32), ((b,), jnp.int32), ((b,), jnp.bool_)]
    if not concrete:
        return [jax.ShapeDtypeStruct(s, d, sharding=sharding) for s, d in shapes]
    logits = jax.random.normal(jax.random.key(0), (b, v), jnp.float32) * 3.0
    return [logits, jnp.full(b, 0.7), jnp.full(b, 0.95), jnp.full(b, 20, jnp.int32), jnp.arange(b, dtype=jnp.int32),
            jnp.full(b, 7, jnp.int32), jnp.zeros(b, bool)]


def _fn(case: str, ways: int | None):
    from memjax.engine.sampler import Truncation, sample

    truncate = False if case == "none" else Truncation(top_k=case == "both", ways=ways)
    return lambda *a: sample(*a, truncate=truncate)


def aot_row(b: int, v: int, case: str, ways: int | None, device=None) -> dict:
    """Kernels and large reads of `case` compiled for an H100 (needs the CUDA PJRT plugin, no GPU)."""
    import jax

    from benchmarks.gpu_aot import gpu_device
    from benchmarks.hlo_facts import program_facts

    dev = device or gpu_device()
    args = _args(b, v, jax.sharding.SingleDeviceSharding(dev), concrete=False)
    txt = jax.jit(_fn(case, ways)).trace(*args).lower().compile().as_text()
    f = program_facts(txt, num_layers=10 ** 9, read_bytes=b * v * 4)
    read = f["large_reads"] * b * v * 4
    return dict(batch=b, vocab=v, case=case, ways=ways, kernels=f["kernels"], large_reads=f["large_reads"],
                read_gb=round(read / 1e9, 3), hbm_ms_at_least=round(read / (H100_TBPS * 1e12) * 1e3, 3),
                host_syncs=f["host_syncs"])


def timed_row(b: int, v: int, case: str, ways: int | None, iters: int, warmup: int = 2) -> dict:
    from .paged_attention import time_fn

    r, _ = time_fn(_fn(case, ways), _args(b, v), iters, warmup)
    return dict(batch=b, vocab=v, case=case, ways=ways, median_ms=round(1e3 * r["median_s"], 3),
                min_ms=round(1e3 * r["min_s"], 3))


def markdown(rows: list[dict]) -> str:
    aot = "kernels" in rows[0]
    head = ("| batch | truncation | ways | kernels | reads of [b, V] | HBM ms at least (H100) |" if aot
            else "| batch | truncation | ways | median ms | x none |")
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        w = "-" if r["ways"] is None else r["ways"]
        if aot:
            out.append(f"| {r['batch']} | {r['case']} | {w} | {r['kernels']} | {r['large_reads']} | "
                       f"{r['hbm_ms_at_least']} |")
        else:
            out.append(f"| {r['batch']} | {r['case']} | {w} | {r['median_ms']} | {r['x_none']} |")
    return "\n".join(out)


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, nargs="+", default=[32, 64, 256])
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--ways", type=int, nargs="+", default=[1, 15])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--aot", action="store_true", help="compile for an H100 without a GPU instead of timing")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--markdown", type=Path, help="print the BUILD.md table of this results file and exit")
    a = ap.parse_args(argv)
    if a.markdown:
        print(markdown(json.loads(a.markdown.read_text())["rows"]))
        return []
    if min(a.batches) < 1 or a.vocab < 2 or min(a.ways) < 1 or a.iters < 1:
        raise SystemExit("sampler_truncation: --batches, --ways and --iters must be >= 1 and --vocab >= 2")
    import jax

    from .forward_throughput import device_slug

    rows = []
    for b in a.batches:
        base = None
        for case, ways in cases(a.ways):
            r = aot_row(b, a.vocab, case, ways) if a.aot else timed_row(b, a.vocab, case, ways, a.iters)
            if not a.aot:
                base = base or r["median_ms"]
                r["x_none"] = round(r["median_ms"] / base, 2)
            print(json.dumps(r), flush=True)
            rows.append(r)
    dev = jax.devices()[0]
    device = "aot-h100" if a.aot else device_slug(str(dev.device_kind))
    res = dict(benchmark="sampler_truncation", device=device, platform="cuda (compiled only)" if a.aot else dev.platform,
               jax=jax.__version__, rows=rows)
    out = a.json or RESULTS / f"sampler_truncation_{device}.json"
    out.write_text(json.dumps(res, indent=1) + "\n")
    print(markdown(rows))
    print(f"wrote {out}")
    return rows


if __name__ == "__main__":
    main()
