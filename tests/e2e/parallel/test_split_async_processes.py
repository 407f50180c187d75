"""TrainConfig.schedule="split_async" over several real processes (jax.distributed over 127.0.0.1, gloo on CPU):
2 processes x 4 host devices train configs/tiny.py for 3 steps, stopped by SIGTERM after step 2 and resumed, equal
1 process x 8 host devices, per-step metrics and final parameters to fp32 rounding: each process's batch ahead (its
own block, generated during step 2's update) is in the checkpoint's meta and trained after the resume.

The two layouts are chosen so that only the processes differ:
- rollouts: rollout_split=2 per process (each process's engine data-parallel over its devices 0-1, its own block
  of 2 of every batch's 4 prompts) against rollout_split=4 in one process (one engine over devices 0-3, all 4
  prompts). Both engines are data_parallel x tensor_parallel 1: every sample runs whole on one device, with the
  single-device loop, and a token's key is (seed, position), so which slot group a sample lands in does not change
  its tokens or log-probs (tensor parallelism would: its reductions split over devices); each process seeds its
  trajectories from its block's first, so every sample is the one-process run's.
- the trainer: the 4 other devices in both, mesh data 2 x fsdp 2 (two processes: fsdp over a process's 2 trainer
  devices, data across the processes, the default mesh; one process: mesh.data=2, mesh.fsdp=2), so both update
  with the same mesh shape; tiny's micro_rows (128) holds every process's rows in one micro-batch in both.
With max_staleness=1 the batches are admitted at versions 0, 0, 1: steps 2 and 3 train one-version-stale tokens,
so the weights the engines sample with come from the trainer's mesh across processes after each update.
"""

from __future__ import annotations

import base64
import json
import pickle
import signal
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from tests.e2e.parallel.test_multiprocess import ROOT, _env, _metrics, assert_same_run

pytestmark = [pytest.mark.e2e, pytest.mark.slow(seconds=160)]  # 2 processes stopped, resumed; 1 process: 159 s wall, 141 CPU-s (2 shared cores)

SETS = ["steps=3", "prompts_per_step=4", "agent.group_size=4", "agent.heldout_size=4", "agent.eval_samples=1",
        "eval_every=0", "filter_flat_groups=false", "schedule=split_async", "checkpoint_every=2",
        "keep_checkpoints=2"]


def _command(out: Path, nproc: int) -> tuple[list[str], dict]:
    sets = [*SETS, f"out_dir={out}"]
    if nproc == 1:
        sets += ["rollout_split=4", "mesh.data=2", "mesh.fsdp=2"]
        cmd = [sys.executable, "-m", "memjax.train", "configs/tiny.py"]
        env = _env(XLA_FLAGS="--xla_force_host_platform_device_count=8")
    else:  # the resumed run reads the stopped run's programs from the compilation cache
        sets += ["rollout_split=2", f"compile_cache={out.parent / 'xla'}"]
        cmd = [sys.executable, "-m", "memjax.launch", "--nproc", str(nproc), "--devices-per-proc", "4", "--",
               "memjax.train", "configs/tiny.py"]
        env = _env()
    return cmd + [a for x in sets for a in ("--set", x)], env


def _stopped_after_step_1(out: Path) -> str:
    """The 2-process run, its launcher sent SIGTERM once step 1 is done: its output (the run stops at step 2)."""
    cmd, env = _command(out, 2)
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in p.stdout:
        lines.append(line)
        if line.startswith("[0] step 1/3"):
            p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=600) == 143, "".join(lines[-40:])
    return "".join(lines)


def _ahead(out: Path, step: int) -> list[dict]:
    """Every process's SplitStream state in checkpoint `step`'s meta: {generation batch: its samples}."""
    meta = json.loads((out / "checkpoints" / str(step) / "meta" / "metadata").read_text())
    states = [pickle.loads(zlib.decompress(base64.b64decode(t))) for t in meta["rollouts"]]
    return [{i: r[0].batch.num_samples for i, r in s["ready"].items()} for s in states]


def test_two_processes_equal_one_process_in_split_async(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    cut = _stopped_after_step_1(two)
    assert "[0] memjax.train: stopped by SIGTERM at step 2" in cut, cut[-3000:]
    assert "[0] split_async: the trainer on 4 device(s), the engine on 2" in cut
    # checkpoint 2 holds the batch generated during step 2's update: each process's own block (2 prompts x 4)
    assert _ahead(two, 2) == [{2: 8}, {2: 8}]
    cmd, env = _command(two, 2)
    r2 = subprocess.run(cmd, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r2.returncode == 0, r2.stdout[-3000:] + r2.stderr[-3000:]
    assert "[0] resumed from" in r2.stdout and "at step 2" in r2.stdout
    cmd, env = _command(one, 1)
    r1 = subprocess.run(cmd, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r1.returncode == 0, r1.stderr[-3000:]
    assert "split_async: the trainer on 4 device(s), the engine on 4" in r1.stdout
    assert _ahead(one, 2) == [{2: 16}]
    m2 = _metrics(two)
    assert [m["step"] for m in m2] == [1, 2, 3]
    assert [m["rollout_async_admitted_version"] for m in m2] == [0, 0, 1]
    assert [m["rollout_staleness_token_mean"] for m in m2] == [0, 1, 1]
    assert_same_run(one, two)
