"""Deviceless H100 compile of the engine's decode and prefill rounds, one by one: what each round executes.

  python -m benchmarks.gpu_aot_rounds [--preset qwen2.5-1.5b] [--layers N] [--slots 32] [--prefill-slots 8]
      [--window 2048] [--prefill-chunk 2048] [--page-size 64] [--prompt-len 1024]
      [--variants base,unrolled,unrolled+fused] [--rounds decode,prefill] [--truncate none|top_p|both] [--json FILE]

Needs the CUDA PJRT plugin matching jax (benchmarks/gpu_aot.py) but no GPU. For each engine variant (base = the
defaults: scanned layers, five projection GEMMs, one prefill shape; `unrolled` = EngineConfig.kernels.layers="unrolled";
`fused` = fuse_projections=True; `buckets` = prefill_buckets=8; `rope_kv` = fuse_rope_kv=True; `merge` =
fuse_split_combine=True) it compiles `make_rounds(...).decode` and
`.prefill` for `gpu_aot.gpu_device()` with the loop's compiler options and the Pallas paged attention the engine
uses on a GPU, and reports per round (benchmarks/hlo_facts.py): kernels per round and per layer, host syncs
(conditionals and loops without a trip count: a device-to-host predicate read each), GEMMs reading weights at a
loop-dependent offset (the command-buffer re-recording the H200 traces of 2026-11-27 showed), loop-carry copies
and bytes copied, compile seconds on this machine. Prefill rows also get the padding of the sweep's workload
(`--prompt-len` prompts in [prefill_slots, length] rounds, simulated by `prefill_padding`) and the useful vs
executed GEMM FLOPs. `--layers N` compiles an N-layer model with the preset's layer shape (CI: 2). `--truncate`:
the sampler's truncation pass the rounds compile in (memjax/engine/sampler.py `Truncation`, with a GPU's search
ways): none = the RL recipes' sampling (top_p = 1, the default), top_p = an evaluation's (MemAgent: top_p 0.95),
both = top-p and top-k. Merges its rows into benchmarks/results/gpu_aot_rounds_<preset>[_L<N>]_aot-h100.json by
default (a row of the same variant, round and truncation is replaced).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from memjax.engine.sampler import Truncation, search_ways

VARIANTS = {"base": {}, "unrolled": dict(layers="unrolled"), "fused": dict(fuse_projections=True),
            "unrolled+fused": dict(layers="unrolled", fuse_projections=True),
            "buckets": dict(prefill_buckets=8), "unrolled+fused+buckets": dict(layers="unrolled",
                                                                                fuse_projections=True,
                                                                                prefill_buckets=8),
            "rope_kv": dict(fuse_rope_kv=True),
            "unrolled+fused+rope_kv": dict(layers="unrolled", fuse_projections=True, fuse_rope_kv=True),
            "unrolled+fused+rope_kv+merge": dict(layers="unrolled", fuse_projections=True, fuse_rope_kv=True,
                                                 fuse_split_combine=True)}
# the sampler's truncation pass as the engine compiles it on a GPU per call (memjax/engine/engine.py `_loop_for_call`)
TRUNCATIONS = {"none": False, "top_p": Truncation(top_k=False, ways=search_ways("gpu")),
               "both": Truncation(ways=search_ways("gpu"))}


def prefill_padding(prompt_lens: list[int], ecfg) -> dict:
    """The split schedule's prefill rounds for these prompts (all admitted, slots in order, prefill_slots rows
    per round, each row's chunk min(prefill_chunk, rest), the round at the shortest of ecfg.prefill_lengths that
    holds its longest chunk): rounds, useful and executed token rows, padding fraction."""
    rest = [int(n) for n in prompt_lens]
    rounds = useful = executed = 0
    lengths = ecfg.prefill_lengths
    while any(rest):
        rows = [i for i, r in enumerate(rest) if r > 0][: ecfg.prefill_slots]
        chunks = [min(ecfg.prefill_chunk, rest[i]) for i in rows]
        length = next(x for x in lengths if x >= max(chunks))
        for i, c in zip(rows, chunks):
            rest[i] -= c
        rounds += 1
        useful += sum(chunks)
        executed += ecfg.prefill_slots * length
    return dict(rounds=rounds, useful_tokens=useful, executed_tokens=executed,
                padding=round(1 - useful / executed, 4))


def mixed_padding(prompt_lens: list[int], ecfg) -> dict:
    """The mixed schedule's rounds for these prompts (all admitted at once, no decode rows: max_tokens = 1): each round
    runs at the smallest of ecfg.round_sizes that holds the total need (capped at the largest), its rows filled
    first come first served; the same fields as `prefill_padding`. With the ragged kernel every row is a token, so
    the only padding is the round's unused rows."""
    rest = [int(n) for n in prompt_lens]
    sizes = ecfg.round_sizes
    rounds = useful = executed = 0
    while any(rest):
        need = sum(rest)
        size = next((x for x in sizes if x >= need), sizes[-1])
        left = take = min(need, size)
        for i, r in enumerate(rest):
            t = min(r, left)
            rest[i], left = r - t, left - t
        rounds += 1
        useful += take
        executed += size
    return dict(rounds=rounds, useful_tokens=useful, executed_tokens=executed,
                padding=round(1 - useful / executed, 4))


def layer_gemm_flops(mcfg) -> int:
    """Dense FLOPs of one token through every layer's projections (2 per multiply-add)."""
    h, i, q, kv = mcfg.hidden_size, mcfg.intermediate_size, mcfg.q_size, mcfg.kv_size
    return 2 * mcfg.num_layers * (h * (q + 2 * kv) + q * h + 3 * h * i)


def compile_round(preset: str, kind: str, variant: dict, *, layers: int | None = None, slots: int = 32,
                  prefill_slots: int = 8, window: int = 2048, prefill_chunk: int = 2048, page_size: int = 64,
                  truncate: str = "none", device=None) -> tuple[dict, str]:
    """(facts, optimised HLO) of the engine's `kind` round ("decode" | "prefill") compiled for an H100, with the
    sampler's truncation pass `truncate` (a key of TRUNCATIONS)."""
    import jax
    from flax import nnx

    from benchmarks.gpu_aot import gpu_device
    from benchmarks.hlo_facts import program_facts
    from memjax.engine.config import EngineConfig, KVCacheOptions, KernelOptions
    from memjax.engine.engine import decode_splits_auto
    from memjax.engine.loop import LOOP_COMPILER_OPTIONS, make_rounds
    from memjax.engine.state import init_counters, init_pool, init_ring, init_slots
    from memjax.engine.weights import engine_layout, uses_layout
    from memjax.kernels import engine_attend
    from memjax.model import init_model, presets

    dev = device or gpu_device()
    sh = jax.sharding.SingleDeviceSharding(dev)
    spec = lambda t: jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sh), t)
    over = dict(param_dtype="bfloat16", dtype="bfloat16") | ({"num_layers": layers} if layers else {})
    cfg = presets.get(preset, **over)
    ecfg = EngineConfig(max_slots=slots, page_size=page_size, window=window, prefill_slots=prefill_slots,
                        prefill_chunk=min(prefill_chunk, window), schedule="split", progress=False,
                        kv=KVCacheOptions(num_pages=slots * (window // page_size) + 2),
                        kernels=KernelOptions(attention="pallas", **variant))
    model = nnx.eval_shape(lambda: init_model(cfg, 0))
    params = nnx.state(model, nnx.Param)
    if uses_layout(ecfg):
        params = jax.eval_shape(lambda p: engine_layout(p, cfg, ecfg), params)
    splits = decode_splits_auto(slots, cfg.num_kv_heads)
    rounds = make_rounds(nnx.graphdef(model), cfg, ecfg, attend=engine_attend(impl="pallas", num_splits=splits,
                                                                                  interpret=False),
                         truncate=TRUNCATIONS[truncate])
    fn = jax.jit(getattr(rounds, kind), donate_argnums=(1, 2, 3), compiler_options=LOOP_COMPILER_OPTIONS)
    args = (params, jax.eval_shape(lambda: init_slots(ecfg)),
            jax.eval_shape(lambda: init_pool(cfg, ecfg, ecfg.kv.num_pages)),
            jax.eval_shape(lambda: init_ring(ecfg)), jax.eval_shape(init_counters))
    t0 = time.perf_counter()
    with jax.default_device(dev):  # the Pallas Triton lowering reads the target GPU from the default device
        comp = fn.trace(*map(spec, args)).lower().compile()
    secs = time.perf_counter() - t0
    txt = comp.as_text()
    facts = dict(preset=preset, num_layers=cfg.num_layers, round=kind, slots=slots, prefill_slots=prefill_slots,
                 prefill_chunk=ecfg.prefill_chunk, prefill_lengths=list(ecfg.prefill_lengths), page_size=page_size,
                 window=window, decode_splits=splits, truncate=truncate, device=dev.device_kind,
                 compile_s=round(secs, 1),
                 **{k: v for k, v in dataclasses.asdict(ecfg.kernels).items()
                    if k in ("layers", "fuse_projections", "prefill_buckets", "fuse_rope_kv", "fuse_split_combine")},
                 **program_facts(txt, cfg.num_layers))
    return facts, txt


def markdown(rows: list[dict]) -> str:
    """The BUILD.md table of `main`'s rows (one per variant and round)."""
    head = ("| model | variant | round | kernels / round | kernels / layer | GEMMs / layer | dynamic-slice GEMMs / layer "
            "| host syncs in the round | bytes copied | prefill padding (useful / executed GEMM TFLOP) | compile s |")
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        w = r.get("workload")
        pad = f"{100 * w['padding']:.0f}% ({w['useful_gemm_tflop']} / {w['executed_gemm_tflop']})" if w else "-"
        variant = r["variant"] + ("" if r.get("truncate", "none") == "none" else f" ({r['truncate']} sampling)")
        out.append(f"| {r['preset']} | {variant} | {r['round']} | {r['kernels']} | {r['kernels_per_layer']} | "
                   f"{(r['gemms'] - 1) / r['num_layers']:.0f} | {r['dynamic_slice_gemms_per_layer']:.0f} | "
                   f"{r['host_syncs']} | {r['copy_bytes']:,} | {pad} | {r['compile_s']} |")
    return "\n".join(out)


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="qwen2.5-1.5b")
    ap.add_argument("--layers", type=int, default=None, help="layers of the compiled model (default: the preset's)")
    ap.add_argument("--slots", type=int, default=32)
    ap.add_argument("--prefill-slots", type=int, default=8)
    ap.add_argument("--window", type=int, default=2048)
    ap.add_argument("--prefill-chunk", type=int, default=2048)
    ap.add_argument("--page-size", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=1024, help="prompt length of the padding workload")
    ap.add_argument("--prompts", type=int, default=256, help="prompts of the padding workload")
    ap.add_argument("--variants", default="base,unrolled+fused")
    ap.add_argument("--rounds", default="decode,prefill")
    ap.add_argument("--truncate", default="none", choices=list(TRUNCATIONS),
                    help="the sampler's truncation pass: none (top_p = 1), top_p (an evaluation's), both")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--markdown", type=Path, help="print the BUILD.md table of this results file and exit")
    a = ap.parse_args(argv)
    if a.markdown:
        print(markdown(json.loads(a.markdown.read_text())))
        return []
    from memjax.engine.config import EngineConfig, KernelOptions
    from memjax.model import presets

    rows = []
    for name in a.variants.split(","):
        if name not in VARIANTS:
            raise SystemExit(f"gpu_aot_rounds: --variants: unknown variant {name!r}; known: {', '.join(VARIANTS)}")
        for kind in a.rounds.split(","):
            if kind not in ("decode", "prefill"):
                raise SystemExit(f"gpu_aot_rounds: --rounds: {kind!r} is not decode or prefill")
            facts, _ = compile_round(a.preset, kind, VARIANTS[name], layers=a.layers, slots=a.slots,
                                     prefill_slots=a.prefill_slots, window=a.window, prefill_chunk=a.prefill_chunk,
                                     page_size=a.page_size, truncate=a.truncate)
            facts["variant"] = name
            if kind == "prefill":
                ecfg = EngineConfig(max_slots=a.slots, prefill_slots=a.prefill_slots, window=a.window,
                                    page_size=a.page_size, prefill_chunk=min(a.prefill_chunk, a.window),
                                    kernels=KernelOptions(prefill_buckets=VARIANTS[name].get("prefill_buckets", 0)))
                pad = prefill_padding([a.prompt_len] * a.prompts, ecfg)
                per_tok = layer_gemm_flops(presets.get(a.preset))
                facts["workload"] = dict(prompts=a.prompts, prompt_len=a.prompt_len, **pad,
                                         useful_gemm_tflop=round(pad["useful_tokens"] * per_tok / 1e12, 2),
                                         executed_gemm_tflop=round(pad["executed_tokens"] * per_tok / 1e12, 2))
            print(json.dumps(facts), flush=True)
            rows.append(facts)
    tag = a.preset + (f"_L{a.layers}" if a.layers else "")
    out = a.json or Path(__file__).parent / "results" / f"gpu_aot_rounds_{tag}_aot-h100.json"
    key = lambda r: (r["variant"], r["round"], r.get("truncate", "none"))
    new = {key(r) for r in rows}
    kept = [r for r in (json.loads(out.read_text()) if out.exists() else []) if key(r) not in new]
    out.write_text(json.dumps(kept + rows, indent=1) + "\n")
    print(f"wrote {len(rows)} rows to {out} ({len(kept)} others kept)")
    return rows


if __name__ == "__main__":
    main()
