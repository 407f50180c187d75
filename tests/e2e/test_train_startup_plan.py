"""memjax.train checks every system's plan at start-up, before the system's set-up: a config that cannot shard on
the devices (here 8 simulated ones) or cannot fit (plan_hbm_gib: the memory to plan against on CPU) is refused
with exit code 1 and one line on stderr."""

import os
import subprocess
import sys
from pathlib import Path
import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def _train(tmp_path, *sets, devices=1):
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               # both runs stop at the start-up plan, whose programs are compiled for their memory analysis only and
               # never run: LLVM's optimisation of the machine code changes neither it nor what the test reads
               XLA_FLAGS=f"--xla_force_host_platform_device_count={devices} --xla_backend_optimization_level=0")
    args = [a for s in (f"out_dir={tmp_path / 'out'}", "steps=1", *sets) for a in ("--set", s)]
    return subprocess.run([sys.executable, "-m", "memjax.train", str(ROOT / "configs" / "tiny.py"), *args], env=env,
                          capture_output=True, text=True, timeout=600, cwd=ROOT)


def test_train_refuses_a_config_that_does_not_fit(tmp_path):
    p = _train(tmp_path, "plan_hbm_gib=0.002")
    assert p.returncode == 1, p.stderr[-2000:]
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "stopped: config does not fit 1 x 0.002 GiB" in err[0], p.stderr
    assert not (tmp_path / "out" / "checkpoints").exists() or not any((tmp_path / "out" / "checkpoints").iterdir())


def test_train_refuses_a_config_that_cannot_shard(tmp_path):
    p = _train(tmp_path, "engine.data_parallel=-1", "agent.max_slots=60", devices=8)
    assert p.returncode == 1, p.stderr[-2000:]
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and "engine on 8 device groups" in err[0] and "engine.max_slots=64" in err[0], p.stderr
