"""benchmarks.gpu_aot: the engine loop compiled for an H100 target without a GPU holds no second KV pool and only
unique KV scatters, and reads each layer's weights in place (no slice or concatenation copied per round);
benchmarks.gpu_aot_rounds: the unrolled + fused decode round has no GEMM at a loop-dependent weight offset. Those need
a CUDA PJRT plugin (jax-cuda13-plugin / jax-cuda12-plugin matching jax) and skip without one (the CPU-only dev venv
has none: `pip install --target DIR jax-cuda13-plugin==0.11.2 jax-cuda13-pjrt==0.11.2` and PYTHONPATH=DIR run them).
benchmarks.hlo_facts, which reads the facts from the optimised HLO, is checked on an XLA:CPU program."""

import importlib.util

import pytest

HAS_CUDA_PLUGIN = any(importlib.util.find_spec(f"jax_plugins.xla_cuda{v}") is not None for v in (12, 13)) \
    if importlib.util.find_spec("jax_plugins") is not None else False


@pytest.mark.slow(seconds=130)
@pytest.mark.skipif(not HAS_CUDA_PLUGIN, reason="needs a CUDA PJRT plugin for deviceless XLA:GPU compiles")
@pytest.mark.parametrize("schedule", ["split", "mixed"])
def test_gpu_loop_has_no_pool_copy_and_unique_kv_scatters(schedule):
    from benchmarks.gpu_aot import compile_loop

    facts, hlo = compile_loop("tiny", "bfloat16", slots=8, window=256, page_size=16, schedule=schedule)
    assert facts["device"] == "NVIDIA H100 80GB HBM3" and " while(" in hlo
    assert facts["pool_copies"] == 0, facts  # LOOP_COMPILER_OPTIONS: no copy of the pool at cond/switch branch roots
    assert facts["kv_scatters"] > 0 and facts["kv_scatters_unique"] == facts["kv_scatters"], facts
    # each layer's weights are read in place: no slice copied before a GEMM, no merged q/k/v or gate/up buffer
    assert facts["weight_copies"] == {"slices": 0, "concats": 0}, facts


@pytest.mark.slow(seconds=150)
@pytest.mark.skipif(not HAS_CUDA_PLUGIN, reason="needs a CUDA PJRT plugin for deviceless XLA:GPU compiles")
def test_unrolled_fused_decode_round_reads_weights_at_fixed_addresses():
    """The 1.5B layer shape, 2 layers, batch 32 (benchmarks/gpu_aot_rounds.py; BUILD.md issue 47): the scanned round
    runs 7 GEMMs per layer at a loop-dependent weight offset (a command buffer re-recorded per layer); unrolled +
    fused, 4 GEMMs per layer, none at a dynamic offset, fewer kernels per layer, no new host sync."""
    from benchmarks.gpu_aot_rounds import compile_round

    old, _ = compile_round("qwen2.5-1.5b", "decode", {}, layers=2)
    new, _ = compile_round("qwen2.5-1.5b", "decode", dict(layers="unrolled", fuse_projections=True), layers=2)
    assert old["layer_loop"] == "scan" and old["dynamic_slice_gemms_per_layer"] == 7, old
    assert new["layer_loop"] == "unrolled" and new["dynamic_slice_gemms_per_layer"] == 0, new
    assert (old["gemms"] - 1, new["gemms"] - 1) == (2 * 7, 2 * 4)  # + the LM head
    assert new["kernels_per_layer"] < old["kernels_per_layer"] - 5 and new["host_syncs"] == old["host_syncs"]


def test_hlo_facts_counts_loops_branches_and_layer_kernels():
    """benchmarks/hlo_facts.py on an XLA:CPU program: a scan of trip count L is the layer loop (its body counted L
    times), a data-dependent while and a cond are host syncs, copies are counted with their bytes."""
    import jax
    import jax.numpy as jnp

    from benchmarks.hlo_facts import program_facts, shape_bytes

    def f(w, x):
        x = jax.lax.scan(lambda c, wi: (jnp.tanh(c @ wi), None), x, w)[0]
        x = jax.lax.while_loop(lambda c: c.sum() < 10.0, lambda c: c * 2.0 + 1.0, x)
        return jax.lax.cond(x.sum() > 0, lambda v: jnp.sin(v), lambda v: jnp.cos(v) * 2.0, x)

    hlo = jax.jit(f).lower(jnp.ones((3, 4, 4)), jnp.ones((2, 4))).compile().as_text()
    facts = program_facts(hlo, num_layers=3)
    assert facts["layer_loop"] == "scan" and facts["kernels_per_layer"] >= 1, facts
    assert dict(facts["host_sync_ops"]) == {"while": 1, "conditional": 1}, facts
    assert facts["kernels"] >= 3 * facts["kernels_per_layer"]
    assert shape_bytes("(bf16[2,3]{1,0}, f32[4])") == 2 * 6 + 4 * 4
