"""`memjax.parallel.on_mesh` + orbax on 2 processes with ONE device each (the common one-process-per-GPU layout):
the checkpoint state saves and restores (tests/e2e/parallel/on_mesh_check.py). The trainer's own multi-process tests
run 4 devices per process (tests/e2e/parallel/test_multiprocess.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_env import PYTHONPATH as CHILD_PYTHONPATH

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow(seconds=30)
def test_checkpoint_state_saves_and_restores_with_one_device_per_process(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_COORDINATOR", "JAX_NUM_PROC",
                                                                      "JAX_PROCESS_ID", "SLURM_", "OMPI_"))}
    env.update(PYTHONPATH=CHILD_PYTHONPATH, JAX_PLATFORMS="cpu")
    r = subprocess.run([sys.executable, "-m", "memjax.launch", "--nproc", "2", "--devices-per-proc", "1", "--",
                        "tests.e2e.parallel.on_mesh_check", str(tmp_path)], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads((tmp_path / "on_mesh.json").read_text())
    assert res["processes"] == 2 and res["local_devices"] == 1
    assert res["devices"] == {"w": 2, "count": 2, "mu": 2}  # every leaf on the global mesh
    assert res["values"] == {"w": [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], "count": 7, "mu": [0.5, 0.5, 0.5]}
