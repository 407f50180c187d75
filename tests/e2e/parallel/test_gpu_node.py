"""The MemAgent recipe at tiny size compiled by XLA:GPU for an 8 x H100 node without a GPU (memjax.plan
--backend gpu: the CUDA plugin's compile-only topology "1x1x8", in a child with PYTHONPATH=.venv/cuda-aot), and the
structural facts of the design read from XLA's own compile: the rollout spans all 8 devices; the fp32 master weights
and AdamW moments are sharded over the 8 (per-device bytes = the whole / 8, an independent count of the preset's
parameters), never replicated; the update all-gathers the weights and reduce-scatters the gradients inside the node
(FSDP), with nothing between hosts, and sends no more than the ZeRO-3 reference of the weights (no gradient
all-reduced whole, no activations gathered); the temporaries the plan counts are XLA:GPU's; no program holds a row's
full-vocabulary fp32 logits; the XLA:CPU compile of the same programs is reported beside it. On 2 hosts x 4
(`memjax.plan --hosts 2 --devices 4`) the per-replica micro-batch loop (manual over "data") keeps those bytes, sends
the gradient all-reduce between hosts once per update and nothing else, and the table says both."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memjax.model import count_params, presets
from memjax.run.plan import table

ROOT = Path(__file__).resolve().parents[3]
AOT_DIR = ROOT / ".venv" / "cuda-aot"
pytestmark = [pytest.mark.e2e, pytest.mark.aot, pytest.mark.slow(seconds=90),
              pytest.mark.skipif(not (AOT_DIR / "jax_plugins").is_dir(), reason="needs the CUDA PJRT plugin in "
                                 ".venv/cuda-aot (make venv) for the deviceless XLA:GPU compile")]
SETS = ["model.preset=tiny", "update.row_buckets=[128,256]", "engine.window=256", "update.micro_rows=8"]


def _plan(*layout: str) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    args = [sys.executable, "-m", "memjax.plan", "configs/memagent/train.py", *layout, "--hbm-gib", "80",
            "--backend", "gpu", "--micro-batches", "2", "--json", *[x for s in SETS for x in ("--set", s)]]
    p = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


def _within_zero3(r: dict) -> None:
    """The update sends at most the ZeRO-3 reference (weights gathered for the forward and the backward, gradients
    reduce-scattered, per micro-batch): a gradient all-reduced whole and sliced (twice the reduce-scatter's bytes)
    or the hidden states gathered inside the log-prob loop exceed it (1.9 MB / 3.3 MB against 1.5 / 1.3 here)."""
    up = r["traffic"]["update"]
    assert up["max_intra"] <= r["traffic"]["analytic_update"]["intra_zero3"], r["traffic"]
    assert up["by_op"].get("all-reduce", {}).get("intra", 0) < 0.01 * up["by_op"]["reduce-scatter"]["intra"], up


def test_tiny_memagent_on_an_8_h100_node_compiled_by_xla_gpu():
    r = _plan("--devices", "8")
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
    _within_zero3(r)
    temps = max(r["update_program"]["temp"], r["logprob_program_temp"])
    assert 0 < temps <= b["train_temporaries"], r
    assert r["full_logits_buffers"] == 0
    cpu = r["cpu_compile"]  # the XLA:CPU plan of the same config, beside it
    assert cpu["bytes"]["params"] == b["params"] and cpu["update_program"]["temp"] > 0
    assert set(r["gpu_vs_cpu_over_10pct"]) <= {"train_temporaries", "total", "kv_cache"}


def test_tiny_memagent_on_2_hosts_of_4_h100_compiled_by_xla_gpu():
    r = _plan("--hosts", "2", "--devices", "4")  # as the CLI is documented (docs/multihost.md)
    assert r["hosts"] == 2 and r["mesh"] == {"data": 2, "fsdp": 4, "tensor": 1}, r  # data across hosts
    assert r["placement"]["spans"] == 4, r  # each host rolls out on its 4
    tr = r["traffic"]
    for prog in ("update", "logprobs"):
        assert set(tr[prog]) >= {"by_op", "max_inter", "max_intra", "mean_inter", "mean_intra", "ops",
                                 "unknown_trip_counts"}
        assert tr[prog]["unknown_trip_counts"] == [], tr[prog]  # the micro-batch loop counted micro_batches times
    up, an = tr["update"], tr["analytic_update"]
    assert an["intra_zero3"] > an["intra_floor"] > 0 and an["inter"] > 0
    assert up["max_intra"] >= an["intra_floor"], (up, an)  # at least the weights' least inside a host
    _within_zero3(r)
    # between hosts: the gradient shard all-reduced over data once per update (the micro-batch loop runs per data
    # replica: memjax/rl/update_programs.py) and a few metric scalars; the log-prob program sends nothing
    assert an["inter"] <= up["max_inter"] <= 1.1 * an["inter"], (up, an)
    assert tr["logprobs"]["max_inter"] == 0, tr["logprobs"]
    lines = table(r).splitlines()
    assert "2 hosts x 4" in lines[0]
    sent = [x for x in lines if x.startswith("sent per device per update")]
    assert len(sent) == 1 and "between hosts" in sent[0] and "ZeRO-3 reference" in sent[0], sent
