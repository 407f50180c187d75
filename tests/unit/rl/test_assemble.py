"""memjax.rl.assemble: the training arrays assembled from process-local rows.

With real processes (assemble_check.py; 2 processes x 2 CPU devices over jax.distributed + gloo, against
1 process x 4 devices, the same data 2 x fsdp 2 mesh): the global array each process assembles from its own
rows equals what one process holding every row builds, and Trainer updates (token-level and step-level
losses, packed rows, 2 mini-batches; one where a process holds no sample) give the one-process metrics and
parameters to fp32 rounding. The three processes compile with LLVM's machine-code optimisation off
(-O0, as in test_plan_configs): the programs, their collectives and every comparison are the same, their
arithmetic is the same HLO (results agree with -O2 to fp32 rounding: 1e-7 on the final parameters), and each
process takes about a third less CPU time (the 1-process run alone: 57 -> 39 CPU-s).
In one process: RowShard's checks, the slot block of one process, and that a RowShard update of the whole batch
is the plain update.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memjax.cli.launch import child_env, free_port
from tests.child_env import PYTHONPATH as CHILD_PYTHONPATH

ROOT = Path(__file__).resolve().parents[3]
CHECK = Path(__file__).with_name("assemble_check.py")


NO_LLVM_OPT = "--xla_backend_optimization_level=0"  # module docstring: compile time, not what is compared


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_COORDINATOR", "JAX_NUM_PROC",
                                                                      "JAX_PROCESS_ID", "SLURM_", "OMPI_"))}
    env.update(PYTHONPATH=CHILD_PYTHONPATH, JAX_PLATFORMS="cpu")
    env["XLA_FLAGS"] = " ".join(filter(None, [env.get("XLA_FLAGS", ""), NO_LLVM_OPT]))
    env.update(extra)
    return env


@pytest.mark.timeout(600)
@pytest.mark.slow(seconds=140)  # 3 processes compile 2 trainers each (measured 135 s wall on 2 busy cores at -O2;
# the module at -O0: 192 -> 140 CPU-s, user+sys with children, 2026-11-28; the wall seconds not measured again)
@pytest.mark.e2e
def test_two_processes_assemble_and_train_as_one(tmp_path):
    port = free_port()
    procs = [subprocess.Popen([sys.executable, str(CHECK), str(tmp_path)], cwd=ROOT,
                              env=child_env(_env(), i, 2, port, 2),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(2)]
    one = subprocess.run([sys.executable, str(CHECK), str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                         env=_env(XLA_FLAGS=f"--xla_force_host_platform_device_count=4 {NO_LLVM_OPT}"), timeout=600)
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert one.returncode == 0, one.stderr[-3000:]
    assert all(p.returncode == 0 for p in procs), outs[0][-3000:] + outs[1][-3000:]
    r1, r2 = (json.loads((tmp_path / f"result_{n}.json").read_text()) for n in (1, 2))
    assert r2["assembled_equal"], r2
    assert r2["assembled_shape"][1] == 4 and min(r2["rows_per_process"]) > 0  # both processes hold rows
    assert len(r1["token"]) == len(r2["token"]) == 3
    for level in ("token", "step"):
        for i, (a, b) in enumerate(zip(r1[level], r2[level])):
            assert a["optimizer_steps"] == b["optimizer_steps"] == 2
            layout = ("pad_fraction",) if i < 2 else ()  # one process holding every row needs more micro-batches
            # step level: clipfrac / approx_kl / ratio_mean are means per data replica (memjax/rl/update_programs.py),
            # so they depend on which rows share a replica; the loss and gradient do not
            ratios = ("clipfrac", "approx_kl", "ratio_mean") if level == "token" else ()
            for k in ("loss", "grad_norm", "reward_mean", "response_tokens", "logp_mismatch_mean",
                      "logp_mismatch_max") + ratios + layout:
                assert b[k] == pytest.approx(a[k], rel=2e-5, abs=1e-6), (level, k, a[k], b[k])
        p1, p2 = (np.load(tmp_path / f"params_{level}_{n}.npz") for n in (1, 2))
        diff = max(float(np.abs(p1[k] - p2[k]).max()) for k in p1.files)
        assert diff < 1e-5, (level, diff)
    assert r1["token"][0]["loss"] != r1["token"][1]["loss"]  # the second update saw new weights


def test_row_shard_checks_and_one_process_slots():
    from memjax.rl.assemble import RowShard, local_slots, take_local

    with pytest.raises(ValueError, match="distinct"):
        RowShard(np.array([0, 0]), 3)
    with pytest.raises(ValueError, match=r"in \[0, 3\)"):
        RowShard(np.array([3]), 3)
    assert local_slots(None, 8) == (0, 8)
    x = np.arange(12).reshape(1, 4, 3)
    assert np.array_equal(take_local(x), x)


def test_row_shard_of_the_whole_batch_is_the_plain_update():
    import jax
    from flax import nnx

    from memjax.model.qwen2 import init_model
    from memjax.rl.advantages import with_advantages
    from memjax.rl.assemble import RowShard
    from memjax.rl.trainer import OptimConfig, Trainer

    sys.path.insert(0, str(CHECK.parent))
    import assemble_check as ac

    batch = ac.make_batch(samples=4)
    out = []
    for shard in (None, RowShard(np.arange(4), 4)):
        m = init_model(ac.CFG, seed=0)
        st = Trainer(m, OptimConfig(lr=1e-2, warmup_steps=0), update=ac.UPD).update(with_advantages(batch), seed=1, shard=shard)
        out.append((st, [np.asarray(a) for a in jax.tree.leaves(nnx.state(m, nnx.Param))]))
    assert out[0][0] == out[1][0]
    assert all(np.array_equal(a, b) for a, b in zip(out[0][1], out[1][1]))
