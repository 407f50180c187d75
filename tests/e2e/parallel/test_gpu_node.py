"""The MemAgent recipe at tiny size compiled by XLA:GPU for an 8 x H100 node without a GPU (memjax.plan
--backend gpu: the CUDA plugin's compile-only topology "1x1x8", in a child with PYTHONPATH=.venv/cuda-aot), and the
structural facts of the design read from XLA's own compile: the rollout spans all 8 devices; the fp32 master weights
and AdamW moments are sharded over the 8 (per-device bytes = the whole / 8, an independent count of the preset's
parameters), never replicated; the update all-gathers the weights and reduce-scatters the gradients inside the node
(FSDP), with nothing between hosts; the temporaries the plan counts are XLA:GPU's; no program holds a row's
full-vocabulary fp32 logits; the XLA:CPU compile of the same programs is reported beside it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memjax.model import count_params, presets

ROOT = Path(__file__).resolve().parents[3]
AOT_DIR = ROOT / ".venv" / "cuda-aot"
pytestmark = [pytest.mark.e2e, pytest.mark.aot, pytest.mark.slow(seconds=90),
              pytest.mark.skipif(not (AOT_DIR / "jax_plugins").is_dir(), reason="needs the CUDA PJRT plugin in "
                                 ".venv/cuda-aot (make venv) for the deviceless XLA:GPU compile")]
SETS = ["model.preset=tiny", "update.row_buckets=[128,256]", "engine.window=256", "update.micro_rows=8"]


def test_tiny_memagent_on_an_8_h100_node_compiled_by_xla_gpu():
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    args = [sys.executable, "-m", "memjax.plan", "configs/memagent/train.py", "--devices", "8", "--hbm-gib", "80",
            "--backend", "gpu", "--micro-batches", "2", "--json", *[x for s in SETS for x in ("--set", s)]]
    p = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads(p.stdout)
    assert r["backend"] == "gpu (NVIDIA H100 80GB HBM3, deviceless)"
    assert r["placement"]["spans"] == 8 and r["engine_devices"] == 8  # every device rolls out
    n = count_params(presets.get("tiny"))
    b = r["bytes"]
    # fp32 master weights and two fp32 AdamW moments, sharded over 8 (small vectors may stay whole: within 10%)
    assert abs(b["params"] / (4 * n / 8) - 1) < 0.10, (b, n)
    assert abs(b["optimizer"] / (2 * 4 * n / 8) - 1) < 0.10, (b, n)
    ops = r["traffic"]["update"]["ops"]
    assert ops["all-gather"] > 0 and ops["reduce-scatter"] > 0, ops  # FSDP: gather weights, scatter gradients
    assert r["traffic"]["update"]["max_inter"] == 0  # one host
    temps = max(r["update_program"]["temp"], r["logprob_program_temp"])
    assert 0 < temps <= b["train_temporaries"], r
    assert r["full_logits_buffers"] == 0
    cpu = r["cpu_compile"]  # the XLA:CPU plan of the same config, beside it
    assert cpu["bytes"]["params"] == b["params"] and cpu["update_program"]["temp"] > 0
    assert set(r["gpu_vs_cpu_over_10pct"]) <= {"train_temporaries", "total", "kv_cache"}
