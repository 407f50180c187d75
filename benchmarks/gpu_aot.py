"""Deviceless XLA:GPU compile of the engine's generation loop: what the GPU program holds, without a GPU.

  python -m benchmarks.gpu_aot [--preset P] [--dtype D] [--slots B] [--window W] [--page-size S]
                               [--schedule split|mixed] [--attention reference|pallas]
                               [--kv-dtype compute|float8_e4m3fn] [--hlo FILE] [--json FILE]
  python -m benchmarks.gpu_aot --train-step [--preset P] [--slots ROWS] [--window ROW_LEN] [--cpu]
                               (the recipe's mini-batch update instead of the loop)

Needs the CUDA PJRT plugin matching jax (`pip install jax-cuda13-plugin==<jax version> jax-cuda13-pjrt==...`,
or the cuda12 pair; `make venv` puts it, without its CUDA libraries, in .venv/cuda-aot: run with
PYTHONPATH=.venv/cuda-aot) but no GPU: `jax.experimental.topologies.get_topology_desc(platform="cuda",
target_config=<GpuTargetConfigProto text>)` gives compile-only devices, and `jit(...).trace(abstract
args).lower().compile()` runs XLA:GPU's whole pipeline (fusion, copy insertion, buffer assignment, PTX) on the
CPU. Weights, slots, pool, queue and ring are abstract (ShapeDtypeStruct), so any preset fits.
Uses `H100_TARGET` (memjax/parallel/gpu_topology.py: an H100 SXM, sm_90, 132 SMs, 80 GB); owns `compile_loop`, which returns the
compiled loop's memory analysis (temporaries vs the KV pool: a second pool in temporaries is the copy
benchmarks/results/gpu_notes_nvidia-h100-80gb-hbm3.md finding 2 saw), the count of pool-sized copies and while
loops in the optimised HLO, whether every KV scatter is declared unique (a non-unique 16-bit scatter is a
compare-and-swap loop per element on a GPU), and the host syncs per round (benchmarks/hlo_facts.py `round_syncs`). Results were found this way in benchmarks/results/engine_gpu_hang.md.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from memjax.parallel.gpu_topology import H100_TARGET  # noqa: F401  (the H100 SXM target; owned there)


def gpu_device(target: str = H100_TARGET):
    """A compile-only CUDA device for `target` (raises when no CUDA PJRT plugin is installed)."""
    from jax.experimental import topologies

    return topologies.get_topology_desc("topo", "cuda", target_config=target, topology="1x1x1").devices[0]


def weight_copies(txt: str, cfg) -> dict:
    """Copies of layer weights in the optimised HLO: `slices` = async dynamic slices (fusion-start) of a stacked
    [L, a, b] weight (a 2-D slice materialised before a GEMM reads it), `concats` = concatenate fusions whose
    output is a 2-D weight of the model's width (the dot merger's fused q/k/v or gate/up). Norm vectors
    ([L, h] slices) are not counted: they are a few KiB."""
    L = cfg.num_layers
    slices = len(re.findall(r"fusion-start[.0-9]* = \(\([a-z0-9]+\[" + str(L) + r",\d+,\d+\]", txt))
    concats = len(re.findall(r"concatenate_fusion[.0-9]* = [a-z0-9]+\[" + str(cfg.hidden_size) + r",\d+\]", txt))
    return dict(slices=slices, concats=concats)


def compile_loop(preset: str = "tiny", dtype: str = "bfloat16", slots: int = 8, window: int = 256, page_size: int = 16,
                 schedule: str = "split", attention: str = "reference", prefill_slots: int = 8,
                 prefill_chunk: int = 2048, device=None, kv_dtype: str = "compute") -> tuple[dict, str]:
    """(facts, optimised HLO text) of memjax's engine loop compiled for `device` (default: an H100 target)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from benchmarks.hlo_facts import round_syncs
    from memjax.engine.config import EngineConfig, KernelOptions, KVCacheOptions
    from memjax.engine.live_request import pack_queue
    from memjax.engine.loop import make_run
    from memjax.engine.state import init_pool, init_ring, init_slots
    from memjax.model import init_model, presets

    dev = device or gpu_device()
    sh = jax.sharding.SingleDeviceSharding(dev)
    spec = lambda t: jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sh), t)
    cfg = presets.get(preset, param_dtype=dtype, dtype=dtype)
    ecfg = EngineConfig(max_slots=slots, page_size=page_size, window=window, prefill_slots=min(prefill_slots, slots),
                        prefill_chunk=min(prefill_chunk, window), schedule=schedule, progress=False,
                        kv=KVCacheOptions(num_pages=slots * (window // page_size) + 2, kv_dtype=kv_dtype),
                        kernels=KernelOptions(attention=attention))
    model = nnx.eval_shape(lambda: init_model(cfg, 0))
    attend = None
    if attention == "pallas":
        from memjax.kernels import engine_attend
        attend = engine_attend(impl="pallas", num_splits=4, interpret=False)  # the kernel, not its interpretation
    run = make_run(nnx.graphdef(model), cfg, ecfg, attend=attend, truncate=False)  # calls without top-p / top-k
    pool = spec(jax.eval_shape(lambda: init_pool(cfg, ecfg, ecfg.kv.num_pages)))
    queue = spec(jax.tree.map(lambda a: a[0], pack_queue([[]], ecfg, ecfg.queue_len)))
    i32 = jax.ShapeDtypeStruct((), jnp.int32, sharding=sh)
    t0 = time.perf_counter()
    with jax.default_device(dev):  # the Pallas Triton lowering reads the target GPU from the default device
        comp = run.trace(spec(nnx.state(model, nnx.Param)), spec(jax.eval_shape(lambda: init_slots(ecfg))), pool,
                         queue, spec(jax.eval_shape(lambda: init_ring(ecfg))), i32, i32).lower().compile()
    secs = time.perf_counter() - t0
    txt = comp.as_text()
    ma = comp.memory_analysis()
    kv = pool.k
    hlo_names = {"bfloat16": "bf16", "float32": "f32", "float16": "f16", "float8_e4m3fn": "f8e4m3fn"}
    kv_type = f"{hlo_names[jnp.dtype(kv.dtype).name]}[{','.join(map(str, kv.shape))}]"
    kv_scatters = [m for m in re.findall(r"= " + re.escape(kv_type) + r"\{[0-9,]*\} scatter\([^\n]*", txt)]
    facts = dict(preset=preset, dtype=dtype, slots=slots, window=window, page_size=page_size, schedule=schedule,
                 attention=attention, kv_dtype=jnp.dtype(kv.dtype).name, device=dev.device_kind, compile_s=round(secs, 2),
                 pool_bytes=2 * kv.size * jnp.dtype(kv.dtype).itemsize,
                 temp_bytes=ma.temp_size_in_bytes, argument_bytes=ma.argument_size_in_bytes,
                 alias_bytes=ma.alias_size_in_bytes,
                 pool_copies=len(re.findall(r"= " + re.escape(kv_type) + r"\{[0-9,]*\} copy\(", txt)),
                 while_loops=len(re.findall(r" while\(", txt)), weight_copies=weight_copies(txt, cfg),
                 kv_scatters=len(kv_scatters),
                 kv_scatters_unique=sum("unique_indices=true" in s for s in kv_scatters),
                 host_syncs_per_round=round_syncs(txt)["per_round"])
    return facts, txt


def scatter_facts(txt: str) -> dict:
    """Scatters in the optimised HLO by element type: `non_unique_16bit` = scatters of a bf16/f16 array not declared
    unique (a compare-and-swap loop per element on a GPU: the engine's 200x slower prefill); f32 scatter-adds with
    repeated indices (the embedding gradient) are atomics and are counted apart."""
    lines = re.findall(r"= ([a-z0-9]+)\[[0-9,]*\]\{[0-9,]*\} scatter\([^\n]*", txt)
    full = re.findall(r"= [a-z0-9]+\[[0-9,]*\]\{[0-9,]*\} scatter\([^\n]*", txt)
    non_unique = [(t, ln) for t, ln in zip(lines, full) if "unique_indices=true" not in ln]
    return dict(scatters=len(full), non_unique=len(non_unique),
                non_unique_16bit=sum(t in ("bf16", "f16") for t, _ in non_unique))


def compile_train_step(preset: str = "tiny", config: str = "configs/memagent/train.py", micro_rows: int = 2,
                       row_len: int = 256, n_micro_cap: int = 2, device=None) -> tuple[dict, str]:
    """(facts, optimised HLO text) of the recipe's mini-batch update (memjax/rl/update_programs.py: packed rows, remat,
    the recipe's attention and loss, AdamW on fp32 master weights, bf16 compute, bf16 reference) at `preset` with
    [n_micro_cap, micro_rows, row_len] rows, compiled for `device` (default: an H100 target; a CPU device gives the
    XLA:CPU program memjax.plan measures). Facts: temporaries, parameter bytes, whole-stack weight copies
    (`stack_copies`: a copy of an [L, a, b] parameter, i.e. every layer's weights copied), per-layer slices copied
    before a GEMM (weight_copies), and the scatters (scatter_facts)."""
    import dataclasses

    import jax
    import jax.numpy as jnp
    from flax import nnx

    from memjax.core.config import load_config_file
    from memjax.model import init_model, presets
    from memjax.rl.update_programs import UpdatePrograms

    dev = device or gpu_device()
    sh = jax.sharding.SingleDeviceSharding(dev)
    spec = lambda t: jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sh), t)
    recipe = load_config_file(config)
    upd = dataclasses.replace(recipe.update, micro_rows=micro_rows, row_buckets=(row_len,))
    cfg = presets.get(preset, param_dtype=recipe.model.dtype, dtype=recipe.model.compute_dtype or recipe.model.dtype)
    model = nnx.eval_shape(lambda: init_model(cfg, 0))
    graphdef, params = nnx.split(model, nnx.Param)
    step = UpdatePrograms(graphdef, params, None, recipe.optim, recipe.loss, upd, temperature=1.0,
                     use_ref=bool(recipe.loss.kl_coef), use_entropy=bool(recipe.loss.entropy_coef))
    scalar = lambda dt: jax.ShapeDtypeStruct((), dt, sharding=sh)
    t0 = time.perf_counter()
    comp = step.update.trace(spec(params), spec(jax.eval_shape(step.tx.init, params)),
                             spec(step.abstract_data(n_micro_cap, row_len)), scalar(jnp.int32), scalar(jnp.float32),
                             scalar(jnp.float32), scalar(jnp.float32)).lower().compile()
    secs = time.perf_counter() - t0
    txt, ma = comp.as_text(), comp.memory_analysis()
    L = cfg.num_layers
    # copies of every layer's weights at once; the accumulators' zero-fills (copies of a broadcast) are not counted
    stack_copies = len(re.findall(r"= [a-z0-9]+\[" + str(L) + r",\d+,\d+\]\{[0-9,]*\} copy\((?![^)]*broadcast)",
                                  txt))
    facts = dict(preset=preset, config=config, rows=[n_micro_cap, micro_rows, row_len], attention=upd.attention,
                 remat=upd.remat, device=dev.device_kind, compile_s=round(secs, 2),
                 param_bytes=sum(a.size * jnp.dtype(a.dtype).itemsize for a in jax.tree.leaves(params)),
                 temp_bytes=ma.temp_size_in_bytes, argument_bytes=ma.argument_size_in_bytes,
                 alias_bytes=ma.alias_size_in_bytes, while_loops=len(re.findall(r" while\(", txt)),
                 stack_copies=stack_copies, weight_copies=weight_copies(txt, cfg), scatters=scatter_facts(txt))
    return facts, txt


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--schedule", default="split", choices=["split", "mixed"])
    ap.add_argument("--attention", default="reference", choices=["reference", "pallas"])
    ap.add_argument("--kv-dtype", default="compute", choices=["compute", "float8_e4m3fn"],
                    help="the KV pool's dtype (EngineConfig.kv.kv_dtype)")
    ap.add_argument("--train-step", action="store_true", help="compile the recipe's mini-batch update instead "
                    "(configs/memagent/train.py; --slots = rows per micro-batch, --window = row length)")
    ap.add_argument("--cpu", action="store_true", help="with --train-step: compile for this machine's CPU instead "
                    "(the XLA:CPU program memjax.plan measures)")
    ap.add_argument("--hlo", type=Path, help="write the optimised HLO here")
    ap.add_argument("--json", type=Path, help="write the facts here")
    a = ap.parse_args(argv)
    if a.train_step:
        import jax

        facts, txt = compile_train_step(a.preset, micro_rows=a.slots, row_len=a.window, n_micro_cap=16,
                                        device=jax.devices("cpu")[0] if a.cpu else None)
    else:
        facts, txt = compile_loop(a.preset, a.dtype, a.slots, a.window, a.page_size, a.schedule, a.attention,
                                  kv_dtype=a.kv_dtype)
    if a.hlo:
        a.hlo.write_text(txt)
    if a.json:
        a.json.write_text(json.dumps(facts, indent=2))
    print(json.dumps(facts, indent=2))
    return facts


if __name__ == "__main__":
    main()
