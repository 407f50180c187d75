"""benchmarks.gpu_aot, compiled for an H100 target without a GPU (the known GPU pathologies, deviceless):
- the engine loop holds no second KV pool and only unique KV scatters, and reads each layer's weights in place (no
  slice or concatenation copied per round);
- the recipe's train step (configs/memagent/train.py update) has no bf16 scatter with repeated indices, copies no
  layer stack at once, and its temporaries are within the XLA:CPU program's that memjax.plan counts.
Needs the CUDA PJRT plugin (jax-cuda13-plugin + jax-cuda13-pjrt matching jax, without their CUDA libraries): `make
venv` installs it into .venv/cuda-aot, kept off the venv's path (jax without JAX_PLATFORMS would try to start it),
and each compile runs in a child with PYTHONPATH=.venv/cuda-aot; skipped with the reason where it is missing
(`make venv CUDA_AOT=0`), or found in the venv itself."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AOT_DIR = ROOT / ".venv" / "cuda-aot"
HAS_CUDA_PLUGIN = (AOT_DIR / "jax_plugins").is_dir() or (
    importlib.util.find_spec("jax_plugins") is not None
    and any(importlib.util.find_spec(f"jax_plugins.xla_cuda{v}") is not None for v in (12, 13)))
needs_plugin = pytest.mark.skipif(not HAS_CUDA_PLUGIN, reason="needs a CUDA PJRT plugin for deviceless XLA:GPU "
                                  "compiles (make venv installs it into .venv/cuda-aot; CUDA_AOT=0 leaves it out)")


def _compile(tmp_path, *args) -> tuple[dict, str]:
    out, hlo = tmp_path / f"{len(list(tmp_path.iterdir()))}.json", tmp_path / "x.hlo"
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join([str(AOT_DIR), str(ROOT)]))
    p = subprocess.run([sys.executable, "-m", "benchmarks.gpu_aot", *args, "--json", str(out), "--hlo", str(hlo)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(out.read_text()), hlo.read_text()


@pytest.mark.slow(seconds=130)
@needs_plugin
@pytest.mark.parametrize("schedule", ["split", "mixed"])
def test_gpu_loop_has_no_pool_copy_and_unique_kv_scatters(schedule, tmp_path):
    facts, hlo = _compile(tmp_path, "--preset", "tiny", "--slots", "8", "--window", "256", "--page-size", "16",
                          "--schedule", schedule)
    assert facts["device"] == "NVIDIA H100 80GB HBM3" and " while(" in hlo
    assert facts["pool_copies"] == 0, facts  # LOOP_COMPILER_OPTIONS: no copy of the pool at cond/switch branch roots
    assert facts["kv_scatters"] > 0 and facts["kv_scatters_unique"] == facts["kv_scatters"], facts
    # each layer's weights are read in place: no slice copied before a GEMM, no merged q/k/v or gate/up buffer
    assert facts["weight_copies"] == {"slices": 0, "concats": 0}, facts


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
