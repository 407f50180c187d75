"""Several real processes on one machine (jax.distributed over 127.0.0.1, gloo collectives on CPU devices).

- 2 processes x 4 devices train configs/tiny.py for 3 steps with PPO's critic (advantage.estimator=gae) and
  the shuffled-reward ablation, rollouts kept process-local (each process's rows assembled into the policy's and
  the critic's arrays, memjax/rl/assemble.py; the ablation permutes the global reward vector, exchanging only
  rewards); per-step metrics (value_loss, explained_variance, ... included) and the final (HF-exported)
  parameters equal a 1-process x 8-device run with the same mesh shape (data 2 x fsdp 4) to fp32 rounding, and
  only process 0 writes the run's files (one line per step in metrics.jsonl).
- under memjax.launch, a process that exits at once makes the launcher stop the rest and name the dead one; a
  SIGTERM to the launcher stops its processes.
- the launcher's environment and exit status; the hybrid mesh's sizes.
kill -9 of one process mid-step (the survivor's one line within the heartbeat bound, the restart resuming the
critic, the ablation's generator and every process's prompt stream bit for bit) and processes started with
different configs are rows of the fault matrix (tests/e2e/parallel/fault_matrix.py, whose two-process shape trains
the critic under the ablation), not repeated here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from memjax.cli.launch import _ephemeral_range, child_env, free_port, launch
from memjax.parallel import MeshConfig
from tests.child_env import PYTHONPATH as CHILD_PYTHONPATH

pytestmark = [pytest.mark.e2e, pytest.mark.slow(seconds=310)]  # the 2-process and 1-process runs, the launcher: 310 s wall, 362 CPU-s (suite, 2026-11-28)

ROOT = Path(__file__).resolve().parents[3]
SETS = ["--set", "steps=3", "--set", "prompts_per_step=4", "--set", "agent.heldout_size=8",
        "--set", "agent.eval_samples=1", "--set", "advantage.estimator=gae", "--set", "ablation=shuffle_rewards",
        # one engine device per process in both layouts (8 devices place a tensor-parallel engine, 4 do not: its
        # sampled tokens would differ by the layout, not by the processes this file compares)
        "--set", "rollout_devices=config"]
TIMING = ("_s", "_seconds", "mfu", "per_s", "logp_mismatch")  # wall times, and the engine-vs-trainer gap


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_COORDINATOR", "JAX_NUM_PROC",
                                                                      "JAX_PROCESS_ID", "SLURM_", "OMPI_"))}
    env.update(PYTHONPATH=CHILD_PYTHONPATH, JAX_PLATFORMS="cpu", **extra)
    return env


def _train(out: Path, *, nproc: int, extra=()) -> subprocess.CompletedProcess:
    args = ["memjax.train", "configs/tiny.py", *SETS, "--set", f"out_dir={out}", *extra]
    if nproc == 1:
        cmd = [sys.executable, "-m", *args, "--set", "mesh.data=2", "--set", "mesh.fsdp=4"]
        env = _env(XLA_FLAGS="--xla_force_host_platform_device_count=8")
    else:
        cmd = [sys.executable, "-m", "memjax.launch", "--nproc", str(nproc), "--devices-per-proc", "4", "--", *args]
        env = _env()
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def _metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def assert_same_run(one: Path, two: Path, must_have=()) -> None:
    """The runs written to `one` and `two` have equal per-step metrics (`two` may log more keys; timings and the
    engine-vs-trainer gap left out; `must_have`: keys the first run must log) and HF-exported parameters, to fp32
    rounding."""
    from safetensors.numpy import load_file

    for a, b in zip(_metrics(one), _metrics(two), strict=True):
        keys = [k for k in a if not k.endswith(TIMING) and not any(t in k for t in ("mfu", "per_s", "mismatch"))]
        assert set(keys) <= set(b) and set(must_have) <= set(keys)
        for k in keys:
            if isinstance(a[k], float):
                assert b[k] == pytest.approx(a[k], rel=2e-5, abs=1e-6), (a["step"], k, a[k], b[k])
            else:
                assert b[k] == a[k], (a["step"], k)
    w1, w2 = load_file(one / "hf" / "model.safetensors"), load_file(two / "hf" / "model.safetensors")
    assert w1.keys() == w2.keys()
    diff = max(float(np.abs(w1[k] - w2[k]).max()) for k in w1)
    assert diff < 1e-5, diff


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """The uninterrupted 2-process x 4-device run (3 steps) and its launcher output."""
    out = tmp_path_factory.mktemp("mp") / "two"
    r = _train(out, nproc=2)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out, r


def test_two_processes_equal_one_process(tmp_path, two):
    one, (two, r2) = tmp_path / "one", two
    r1 = _train(one, nproc=1)
    assert r1.returncode == 0, r1.stderr[-3000:]
    assert [m["step"] for m in _metrics(two)] == [1, 2, 3]  # process 0 alone writes: one line per step
    assert_same_run(one, two, must_have=("value_loss", "explained_variance"))  # the critic ran (GAE)
    assert (two / "result.json").is_file() and (two / "checkpoints" / "3").is_dir()
    e1, e2 = (json.loads((d / "result.json").read_text())["evals"] for d in (one, two))
    assert e1[0] == e2[0] and [e["step"] for e in e2] == [0, 3]  # the held-out set split over the processes
    assert "[0] step 3/3" in r2.stdout and "[1] step" not in r2.stdout  # the terminal: process 0 only
    assert "[0] rollouts: process-local" in r2.stdout  # the training batch from each process's own rows
    assert "gathered" not in r2.stdout


def test_launcher_stops_the_rest_and_names_the_dead_process(tmp_path, capfd):
    # process 1 exits 2 at once (a bad flag of its module); process 0 would otherwise wait for it forever
    t0 = time.monotonic()
    rc = launch(2, ["memjax.launch", "--nproc", "0"], devices_per_proc=1)
    assert rc == 2 and time.monotonic() - t0 < 30
    err = capfd.readouterr().err.strip().splitlines()
    assert err[-1].startswith("memjax.launch: process ") and "exited with status 2" in err[-1]


def test_sigterm_to_the_launcher_stops_its_processes(tmp_path):
    code = f"import os, time; open('{tmp_path}/' + str(os.getpid()), 'w').close(); time.sleep(120)"
    launcher = subprocess.Popen([sys.executable, "-m", "memjax.launch", "--nproc", "2", "--", "timeit", "-n", "1",
                                 "-r", "1", code], cwd=ROOT, env=_env(), stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(list(tmp_path.iterdir())) < 2:
        assert time.monotonic() < deadline and launcher.poll() is None
        time.sleep(0.1)
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(timeout=30) == 143
    assert "the launcher was terminated (SIGTERM)" in launcher.stderr.read()
    for f in tmp_path.iterdir():
        with pytest.raises(ProcessLookupError):
            os.kill(int(f.name), 0)


def test_a_killed_launcher_takes_its_processes_down_within_seconds(tmp_path):
    code = f"import os, time; open('{tmp_path}/' + str(os.getpid()), 'w').close(); time.sleep(120)"
    launcher = subprocess.Popen([sys.executable, "-m", "memjax.launch", "--nproc", "2", "--", "timeit", "-n", "1",
                                 "-r", "1", code], cwd=ROOT, env=_env(), stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(list(tmp_path.iterdir())) < 2:
        assert time.monotonic() < deadline and launcher.poll() is None
        time.sleep(0.1)
    launcher.kill()
    launcher.wait(timeout=10)
    pids, t0 = [int(f.name) for f in tmp_path.iterdir()], time.monotonic()
    while time.monotonic() - t0 < 5:
        alive = []
        for pid in pids:
            try:
                os.kill(pid, 0)
                alive.append(pid)
            except ProcessLookupError:
                pass
        if not alive:
            break
        time.sleep(0.1)
    assert not alive, f"processes {alive} outlived their killed launcher by 5 s"


def test_child_env_and_mesh_sizes():
    env = child_env({"JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=8 --foo"},
                    1, 2, 1234, 4)
    assert env["JAX_COORDINATOR_ADDRESS"] == "127.0.0.1:1234" and env["JAX_PROCESS_ID"] == "1"
    assert env["JAX_NUM_PROCESSES"] == "2" and env["JAX_COORDINATOR_BIND_ADDRESS"] == "127.0.0.1:1234"
    assert env["XLA_FLAGS"] == "--foo --xla_force_host_platform_device_count=4"
    assert MeshConfig().global_sizes(8, 2) == (2, 4, 1)  # data across hosts, fsdp inside
    assert MeshConfig(tensor=2).global_sizes(16, 2) == (2, 4, 2)
    assert MeshConfig(across_hosts="flat").global_sizes(8, 2) == (1, 8, 1)
    assert MeshConfig(data=2, fsdp=4).global_sizes(8, 1) == (2, 4, 1)
    with pytest.raises(ValueError, match="across_hosts"):
        MeshConfig(across_hosts="ring")


def test_free_port_binds_below_the_ephemeral_range(monkeypatch):
    """The coordinator's port is one outgoing connections never take (they draw from the ephemeral range), drawn
    independently of Python's seeded `random`; with no room below the range, the kernel's pick."""
    import random
    import socket

    lo, hi = _ephemeral_range()
    random.seed(0)
    ports = {free_port() for _ in range(20)}
    assert len(ports) > 10 and all(10000 <= p < lo for p in ports)
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports.pop()))  # still free
    monkeypatch.setattr("memjax.cli.launch._ephemeral_range", lambda: (10500, 60999))
    assert lo <= free_port() <= hi  # no room below: the kernel's pick, from its real range


def test_initialize_detects_launchers_and_refuses_after_the_backend_started(monkeypatch):
    import jax

    from memjax.parallel import distributed as dist, startup

    for k in ("JAX_COORDINATOR_ADDRESS", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    assert not startup.launched_as_many() and dist.initialize() is False  # one process: a no-op
    monkeypatch.setenv("SLURM_NTASKS", "4")  # a bare sbatch script (no srun step): still one process
    assert not startup.launched_as_many()
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "4")
    assert startup.launched_as_many()
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "1")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    assert startup.launched_as_many()
    monkeypatch.delenv("OMPI_COMM_WORLD_SIZE")
    monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "127.0.0.1:1")
    jax.devices()  # the backend is up: jax.distributed can no longer start
    with pytest.raises(RuntimeError, match="before jax.distributed"):
        dist.initialize()
