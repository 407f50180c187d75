"""benchmarks.gpu_aot, compiled for an H100 target without a GPU (the known GPU pathologies, deviceless):
- the engine loop holds no second KV pool and only unique KV scatters, and reads each layer's weights in place (no
  slice or concatenation copied per round);
- the recipe's train step (configs/memagent/train.py update) has no bf16 scatter with repeated indices, copies no
  layer stack at once, and its temporaries are within the XLA:CPU program's that memjax.plan counts.
Needs the CUDA PJRT plugin (jax-cuda13-plugin + jax-cuda13-pjrt matching jax, without their CUDA libraries): `make
venv` installs it into .venv/cuda-aot, kept off the venv's path (jax without JAX_PLATFORMS would try to start it),
and each compile runs in a child with PYTHONPATH=.venv/cuda-aot; skipped with the reason where it is missing
(`make venv CUDA_AOT=0`), or found in the venv itself.
benchmarks.gpu_aot_rounds (issue 47): the unrolled + fused decode round has no GEMM at a loop-dependent weight
offset (also in a child with the plugin); benchmarks.sampler_truncation: the top-p pass reads the logits a few
times. benchmarks.hlo_facts, which reads the facts from the optimised HLO, is checked on an XLA:CPU program."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.child_env import with_fast_llvm

pytestmark = [pytest.mark.aot, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[3]
AOT_DIR = ROOT / ".venv" / "cuda-aot"
HAS_CUDA_PLUGIN = (AOT_DIR / "jax_plugins").is_dir() or (
    importlib.util.find_spec("jax_plugins") is not None
    and any(importlib.util.find_spec(f"jax_plugins.xla_cuda{v}") is not None for v in (12, 13)))
needs_plugin = pytest.mark.skipif(not HAS_CUDA_PLUGIN, reason="needs a CUDA PJRT plugin for deviceless XLA:GPU "
                                  "compiles (make venv installs it into .venv/cuda-aot; CUDA_AOT=0 leaves it out)")


def _child_env() -> dict:
    """A compile child's environment: the plugin on its path, and LLVM at -O0 without its expensive passes (as
    memjax.plan's children): the optimised HLO and the memory analysis the tests read come from XLA's passes before
    LLVM and are the same (checked byte for byte on the loop's HLO and facts and the train step's facts, GPU and
    CPU); the XLA:CPU train step compiles in 6.8 instead of 11 CPU-s."""
    return with_fast_llvm(dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join([str(AOT_DIR), str(ROOT)])))


def _compile(tmp_path, *args) -> tuple[dict, str]:
    out, hlo = tmp_path / f"{len(list(tmp_path.iterdir()))}.json", tmp_path / "x.hlo"
    env = _child_env()
    p = subprocess.run([sys.executable, "-m", "benchmarks.gpu_aot", *args, "--json", str(out), "--hlo", str(hlo)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(out.read_text()), hlo.read_text()


@pytest.mark.slow(seconds=130)
@needs_plugin
@pytest.mark.parametrize("schedule,attention", [("split", "reference"), ("mixed", "pallas")])
def test_gpu_loop_has_no_pool_copy_and_unique_kv_scatters(schedule, attention, tmp_path):
    """mixed with the Pallas back-end: the GPU's path, the ragged kernel (Triton through PTX)."""
    facts, hlo = _compile(tmp_path, "--preset", "tiny", "--slots", "8", "--window", "256", "--page-size", "16",
                          "--schedule", schedule, "--attention", attention)
    assert facts["device"] == "NVIDIA H100 80GB HBM3" and " while(" in hlo
    assert facts["pool_copies"] == 0, facts  # LOOP_COMPILER_OPTIONS: no copy of the pool at cond/switch branch roots
    assert facts["kv_scatters"] > 0 and facts["kv_scatters_unique"] == facts["kv_scatters"], facts
    # each layer's weights are read in place: no slice copied before a GEMM, no merged q/k/v or gate/up buffer
    assert facts["weight_copies"] == {"slices": 0, "concats": 0}, facts
    if attention == "pallas":  # per mixed round: the loop's predicate, the row-size-or-preemption switch, release
        assert facts["host_syncs_per_round"] == 3, facts  # + admit (8 before 2026-12-02)


@pytest.mark.slow(seconds=30)
@needs_plugin
def test_gpu_loop_with_a_float8_pool_reads_it_in_place(tmp_path):
    """EngineConfig.kv.kv_dtype=float8_e4m3fn with the Pallas (Triton) kernel, compiled through PTX for an H100: the
    pool is 1 byte per value and is never upcast whole (no bf16 array of the pool's shape), copied or scattered
    with repeated indices; the kernel upcasts each page it loads."""
    facts, hlo = _compile(tmp_path, "--preset", "tiny", "--slots", "8", "--window", "256", "--page-size", "16",
                          "--attention", "pallas", "--kv-dtype", "float8_e4m3fn")
    assert facts["kv_dtype"] == "float8_e4m3fn", facts
    shape = re.search(r"f8e4m3fn\[(\d+),(\d+),(\d+),16,(\d+)\]", hlo)
    assert shape and facts["pool_bytes"] == 2 * 16 * np.prod([int(x) for x in shape.groups()]), facts
    assert f"bf16[{','.join(shape.groups()[:3])},16," not in hlo
    assert facts["pool_copies"] == 0 and facts["kv_scatters"] == facts["kv_scatters_unique"] > 0, facts


@pytest.mark.slow(seconds=120)
@pytest.mark.timeout(1800)  # two compiles: 80 s measured at load ~15 on 2 cores, over 10 min at load 30-48
@needs_plugin
def test_gpu_train_step_has_no_16bit_duplicate_scatter_and_temporaries_within_the_plan(tmp_path):
    """The fused log-prob's row gather padded with row 0 made a bf16 scatter-add with repeated indices in the
    gradient (a compare-and-swap loop per element on a GPU); its padding rows are rows of their own now."""
    args = ("--train-step", "--preset", "tiny", "--slots", "2", "--window", "256")
    gpu, _ = _compile(tmp_path, *args)
    cpu, _ = _compile(tmp_path, *args, "--cpu")
    assert gpu["device"] == "NVIDIA H100 80GB HBM3" and cpu["device"] == "cpu" and gpu["while_loops"] > 0
    assert gpu["scatters"]["non_unique_16bit"] == 0, gpu
    assert gpu["stack_copies"] == 0, gpu
    assert gpu["temp_bytes"] <= 1.1 * cpu["temp_bytes"], (gpu, cpu)


@pytest.mark.slow(seconds=150)
@pytest.mark.timeout(1800)
@needs_plugin
def test_unrolled_fused_decode_round_reads_weights_at_fixed_addresses():
    """The 1.5B layer shape, 2 layers, batch 32 (benchmarks/gpu_aot_rounds.py; BUILD.md issue 47): the scanned round
    runs 7 GEMMs per layer at a loop-dependent weight offset (a command buffer re-recorded per layer); unrolled +
    fused, 4 GEMMs per layer, none at a dynamic offset, fewer kernels per layer, no host sync (the engine's rounds
    without top-p / top-k: no sampler branch; the preemption loop is a round of its own); with fuse_rope_kv
    too, 4 fewer kernels per layer again; with fuse_split_combine, the split-K merge and slice fusion gone (one fewer
    per layer)."""
    code = ("import json, sys\nfrom benchmarks.gpu_aot_rounds import compile_round\n"
            "old, _ = compile_round('qwen2.5-1.5b', 'decode', {}, layers=2)\n"
            "new, _ = compile_round('qwen2.5-1.5b', 'decode', dict(layers='unrolled', fuse_projections=True), layers=2)\n"
            "fused, txt = compile_round('qwen2.5-1.5b', 'decode', dict(layers='unrolled', fuse_projections=True, "
            "fuse_rope_kv=True), layers=2)\n"
            "fused['rope_kv_calls'] = sum(' custom-call(' in l and '/rope_kv/' in l for l in txt.splitlines())\n"
            "merged, txt = compile_round('qwen2.5-1.5b', 'decode', dict(layers='unrolled', fuse_projections=True, "
            "fuse_rope_kv=True, fuse_split_combine=True), layers=2)\n"
            "calls = lambda name: sum(' custom-call(' in l and f'/{name}/' in l for l in txt.splitlines())\n"
            "merged['merged_calls'], merged['paged_calls'] = calls('decode_merged'), calls('paged_attention')\n"
            "print(json.dumps([old, new, fused, merged]))")
    env = _child_env()
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert p.returncode == 0, p.stderr[-3000:]
    old, new, fused, merged = json.loads(p.stdout.strip().splitlines()[-1])
    assert old["layer_loop"] == "scan" and old["dynamic_slice_gemms_per_layer"] == 7, old
    assert new["layer_loop"] == "unrolled" and new["dynamic_slice_gemms_per_layer"] == 0, new
    assert (old["gemms"] - 1, new["gemms"] - 1) == (2 * 7, 2 * 4)  # + the LM head
    assert new["kernels_per_layer"] < old["kernels_per_layer"] - 5 and new["host_syncs"] == old["host_syncs"] == 0
    # + fuse_rope_kv (memjax/kernels/rope_kv.py): the qkv slices, K/V scatters and query pad (6 kernels) -> 1 call per
    # layer, the pool updated in place (no new copy), no new host sync
    assert fused["rope_kv_calls"] == 2 and fused["kernels_per_layer"] <= new["kernels_per_layer"] - 4, fused
    assert (fused["copy_bytes"], fused["host_syncs"], fused["gemms"]) == (new["copy_bytes"], new["host_syncs"],
                                                                          new["gemms"])
    # + fuse_split_combine (memjax/kernels/decode_merged.py): every layer's attention is the merging kernel, the
    # merge + slice fusion after it is gone; its counters cost one memset per round, no copy, no host sync
    assert (merged["merged_calls"], merged["paged_calls"]) == (2, 0), merged
    assert merged["kernels_per_layer"] == fused["kernels_per_layer"] - 1, (merged, fused)
    assert merged["kernels"] == fused["kernels"] - 2 + 1, (merged, fused)
    assert (merged["copy_bytes"], merged["host_syncs"], merged["gemms"]) == (fused["copy_bytes"], fused["host_syncs"],
                                                                             fused["gemms"])


@pytest.mark.slow(seconds=25)
@needs_plugin
def test_truncation_pass_reads_the_logits_a_few_times(tmp_path):
    """benchmarks/sampler_truncation.py --aot, batch 64, Qwen's vocabulary: an evaluation's top-p pass (a GPU's 15
    ways) reads the [b, V] values 12 times more than sampling without it (8 search passes, the e = exp buffer written
    and summed, the nucleus' smallest logit, the masked block sums), in 41 more kernels, with no host sync; top-k
    adds its own 8 passes, not 32. Before 2026-12-02 (both searches by bisection on every truncating call): 74 more
    reads in 413 more kernels."""
    out = tmp_path / "s.json"
    env = _child_env()
    p = subprocess.run([sys.executable, "-m", "benchmarks.sampler_truncation", "--aot", "--batches", "64", "--ways",
                        "15", "--json", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = {r["case"]: r for r in json.loads(out.read_text())["rows"]}
    none, top_p, both = rows["none"], rows["top_p"], rows["both"]
    assert none["large_reads"] <= 2 and top_p["large_reads"] <= none["large_reads"] + 12, rows
    assert both["large_reads"] <= top_p["large_reads"] + 10 and top_p["kernels"] <= none["kernels"] + 45, rows
    assert all(r["host_syncs"] == 0 for r in rows.values()), rows


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

    def reads(n, read_bytes):  # kernels reading the [64, 1024] x: those of a loop body count once per iteration
        g = lambda x: (jax.lax.fori_loop(0, n, lambda i, c: c + (x >= c[:, None]).sum(-1), jnp.zeros(64)), x.max())
        hlo = jax.jit(g).lower(jnp.ones((64, 1024))).compile().as_text()
        return program_facts(hlo, num_layers=3, read_bytes=read_bytes)["large_reads"]

    per_iteration, outside = (reads(5, 64 * 1024 * 4) - reads(2, 64 * 1024 * 4)) / 3, reads(0, 64 * 1024 * 4)
    assert per_iteration >= 1 and reads(5, 64 * 1024 * 4) == 5 * per_iteration + outside >= 6
    assert reads(5, 64 * 1024 * 4 + 1) == 0 and "large_reads" not in facts
    picked = lambda x, i: jnp.take_along_axis(x, i[:, None], axis=1) * 2.0  # a gather reads a part of x, not x
    hlo = jax.jit(picked).lower(jnp.ones((64, 1024)), jnp.zeros(64, jnp.int32)).compile().as_text()
    assert program_facts(hlo, num_layers=3, read_bytes=64 * 1024 * 4)["large_reads"] == 0
