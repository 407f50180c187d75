"""benchmarks.gpu_aot: the engine loop compiled for an H100 target without a GPU holds no second KV pool and only
unique KV scatters, and reads each layer's weights in place (no slice or concatenation copied per round). Needs a CUDA PJRT plugin (jax-cuda13-plugin / jax-cuda12-plugin matching jax); skipped
without one (the CPU-only dev venv has none: install it into a separate venv to run this)."""

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
