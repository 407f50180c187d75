"""Several real processes on one machine (jax.distributed over 127.0.0.1, gloo collectives on CPU devices).

- 2 processes x 4 devices train configs/tiny.py for 3 steps with PPO's critic (advantage.estimator=gae) and
  the shuffled-reward ablation, rollouts kept process-local (each process's rows assembled into the policy's and
  the critic's arrays, memjax/rl/assemble.py; the ablation permutes the global reward vector, exchanging only
  rewards); per-step metrics (value_loss, explained_variance, ... included) and the final (HF-exported)
  parameters equal a 1-process x 8-device run with the same mesh shape (data 2 x fsdp 4) to fp32 rounding, and
  only process 0 writes the run's files (one line per step in metrics.jsonl).
- kill -9 of one process mid-step: the other exits non-zero within the heartbeat bound (MEMJAX_HEARTBEAT_S=5
  here); a restart of both resumes from the last checkpoint (the critic and the ablation's generator included)
  and ends with the uninterrupted 2-process run's parameters bit for bit, having consumed the same prompt
  records per step (each process reads its own shard of the stream; every process's stream state is in the
  checkpoint). Under memjax.launch the launcher stops the rest at once and names the dead one.
- processes started with different configs refuse at start with a one-line error.
- the launcher's environment and exit status; the hybrid mesh's sizes.
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

from memjax.launch import child_env, free_port, launch
from memjax.parallel import MeshConfig

pytestmark = pytest.mark.slow(seconds=370)  # real jax.distributed processes: trains, kills, resumes (module: 367 s, 2 busy cores)

ROOT = Path(__file__).resolve().parents[2]
SETS = ["--set", "steps=3", "--set", "prompts_per_step=4", "--set", "agent.heldout_size=8",
        "--set", "agent.eval_samples=1", "--set", "advantage.estimator=gae", "--set", "ablation=shuffle_rewards"]
TIMING = ("_s", "_seconds", "mfu", "per_s", "logp_mismatch")  # wall times, and the engine-vs-trainer gap


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_COORDINATOR", "JAX_NUM_PROC",
                                                                      "JAX_PROCESS_ID", "SLURM_", "OMPI_"))}
    env.update(PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu", **extra)
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


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """The uninterrupted 2-process x 4-device run (3 steps) and its launcher output."""
    out = tmp_path_factory.mktemp("mp") / "two"
    r = _train(out, nproc=2)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out, r


def test_two_processes_equal_one_process(tmp_path, two):
    from safetensors.numpy import load_file

    one, (two, r2) = tmp_path / "one", two
    r1 = _train(one, nproc=1)
    assert r1.returncode == 0, r1.stderr[-3000:]
    m1, m2 = _metrics(one), _metrics(two)
    assert [m["step"] for m in m2] == [1, 2, 3]  # process 0 alone writes: one line per step
    for a, b in zip(m1, m2):
        keys = [k for k in a if not k.endswith(TIMING) and not any(t in k for t in ("mfu", "per_s", "mismatch"))]
        assert set(keys) <= set(b)
        assert {"value_loss", "explained_variance"} <= set(keys)  # the critic ran (GAE)
        for k in keys:
            if isinstance(a[k], float):
                assert b[k] == pytest.approx(a[k], rel=2e-5, abs=1e-6), (a["step"], k, a[k], b[k])
            else:
                assert b[k] == a[k], (a["step"], k)
    w1, w2 = load_file(one / "hf" / "model.safetensors"), load_file(two / "hf" / "model.safetensors")
    assert w1.keys() == w2.keys()
    diff = max(float(np.abs(w1[k] - w2[k]).max()) for k in w1)
    assert diff < 1e-5, diff
    assert (two / "result.json").is_file() and (two / "checkpoints" / "3").is_dir()
    e1, e2 = (json.loads((d / "result.json").read_text())["evals"] for d in (one, two))
    assert e1[0] == e2[0] and [e["step"] for e in e2] == [0, 3]  # the held-out set split over the processes
    assert "[0] step 3/3" in r2.stdout and "[1] step" not in r2.stdout  # the terminal: process 0 only
    assert "[0] rollouts: process-local" in r2.stdout  # the training batch from each process's own rows
    assert "gathered" not in r2.stdout


def _start(i: int, port: int, out: Path, extra=()) -> subprocess.Popen:
    args = [sys.executable, "-m", "memjax.train", "configs/tiny.py", *SETS, "--set", f"out_dir={out}", *extra]
    env = child_env(_env(MEMJAX_HEARTBEAT_S="5"), i, 2, port, 4)
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_peer_killed_mid_step_then_restart_resumes_bit_for_bit(tmp_path, two):
    from safetensors.numpy import load_file

    port, out = free_port(), tmp_path / "run"
    procs = [_start(i, port, out, ["--set", "steps=50", "--set", "checkpoint_every=1"]) for i in range(2)]
    try:
        deadline = time.monotonic() + 300
        while not (out / "checkpoints" / "1" / "commit_success.txt").is_file():  # step 1 saved: step 2 runs
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), procs[0].stdout.read()[-2000:]
            time.sleep(0.2)
        procs[1].send_signal(signal.SIGKILL)  # step 2 is under way
        t0 = time.monotonic()
        rc = procs[0].wait(timeout=60)
        took = time.monotonic() - t0
        text = procs[0].stdout.read()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    print(f"survivor exited {rc} {took:.1f} s after its peer was killed (heartbeat 5 s)")
    assert rc != 0
    assert took < 30, took
    assert "memjax: process 1 of 2 stopped" in text, text[-2000:]  # one memjax line; XLA's log in run/logs (issue 48)
    # the restart (3 steps in all, the lr schedule does not depend on `steps`) reaches the uninterrupted run
    r = _train(out, nproc=2, extra=["--set", "checkpoint_every=1"])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "resumed from" in r.stdout, r.stdout[-3000:]
    assert [m["step"] for m in _metrics(out)] == [1, 2, 3]
    # each process read its own shard of the prompt stream; the records consumed (process order) continue exactly
    assert [m["data_records"] for m in _metrics(out)] == [m["data_records"] for m in _metrics(two[0])]
    assert [m["data_records"] for m in _metrics(out)] == [list(range(4 * s, 4 * s + 4)) for s in range(3)]
    meta = json.loads((out / "checkpoints" / "3" / "meta" / "metadata").read_text())
    assert meta["data_processes"] == [meta["data"]] * 2 == [{"pos": 12}] * 2  # every process's stream state
    w, want = load_file(out / "hf" / "model.safetensors"), load_file(two[0] / "hf" / "model.safetensors")
    assert all(np.array_equal(w[k], want[k]) for k in want)


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


def test_different_configs_refuse_at_start(tmp_path):
    port, out = free_port(), tmp_path / "run"
    procs = [_start(i, port, out, ["--set", f"seed={i}"]) for i in range(2)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    for p, text in zip(procs, outs):
        assert p.returncode == 2, text[-2000:]
        line = [x for x in text.splitlines() if "memjax.train: error:" in x]
        assert line and "differ in the config: seed (" in line[0], text[-2000:]  # the field, by name
    assert not (out / "metrics.jsonl").exists()


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


def test_initialize_detects_launchers_and_refuses_after_the_backend_started(monkeypatch):
    import jax

    from memjax.parallel import distributed as dist

    for k in ("JAX_COORDINATOR_ADDRESS", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    assert not dist._launched_as_many() and dist.initialize() is False  # one process: a no-op
    monkeypatch.setenv("SLURM_NTASKS", "4")  # a bare sbatch script (no srun step): still one process
    assert not dist._launched_as_many()
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "4")
    assert dist._launched_as_many()
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "1")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    assert dist._launched_as_many()
    monkeypatch.delenv("OMPI_COMM_WORLD_SIZE")
    monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "127.0.0.1:1")
    jax.devices()  # the backend is up: jax.distributed can no longer start
    with pytest.raises(RuntimeError, match="before jax.distributed"):
        dist.initialize()
