"""What a `python -m memjax.*` process imports before it fails or answers (memjax/core/lazy.py, memjax.core.cli.run_cli).

The suite starts hundreds of CLI processes; most of them print `--help`, refuse bad arguments or a bad launch
environment. These checks hold that such a process does not import jax, flax, optax or orbax (~3 CPU-s each):
- importing memjax and its re-exporting packages imports nothing heavy (their names resolve on first use);
- `memjax.train` / `memjax.evaluate` with a bad JAX_* variable, and an argparse error, exit 2 with their one line;
- the CLIs that need no config (launch, plan, convert, demo, report, locomo_stats) answer `--help`;
all in one child process whose import system refuses the heavy packages (the BLOCKER of
tests/e2e/benchmarks/test_gpu_pass.py). `--help` of train / evaluate lists the config fields, whose dataclasses still
import jax (TrainConfig's sections live beside the code that runs them), but not the run itself, nor orbax.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.import_blocker import blocker

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("jax", "jaxlib", "flax", "optax", "orbax")

BLOCKER = blocker(HEAVY, "a heavy import")

CLI = BLOCKER + """
import contextlib, io, os, runpy

def cli(module, *argv, env=None):
    saved = dict(os.environ)
    os.environ.update(env or {})
    sys.argv, err, out = [module, *argv], io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = e.code
    finally:
        os.environ.clear()
        os.environ.update(saved)
    lines = (err.getvalue() or out.getvalue()).strip().splitlines()
    print(module, argv[-1] if argv else "", "->", code, "|", lines[-1] if lines else "")

import memjax, memjax.parallel, memjax.engine, memjax.agents, memjax.parallel.startup, memjax.checkpoint
from memjax.checkpoint.errors import CheckpointError
print("EngineConfig", memjax.EngineConfig.__module__)
BAD = {"JAX_COORDINATOR_ADDRESS": "127.0.0.1:1234", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "one"}
cli("memjax.train", "configs/tiny.py", env=BAD)
cli("memjax.evaluate", "configs/tiny.py", env={**BAD, "JAX_PROCESS_ID": "0", "JAX_COORDINATOR_ADDRESS": "localhost"})
cli("memjax.train", "configs/tiny.py", env={"MEMJAX_INIT_TIMEOUT_S": "soon", "JAX_COORDINATOR_ADDRESS": "h:1",
                                            "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "1"})
cli("memjax.train", "--nope")
cli("memjax.train", "configs/tiny.py", env={"SLURM_JOB_ID": "7", "SLURM_NTASKS": "2"})  # sbatch without srun
for m in ("memjax.launch", "memjax.plan", "memjax.convert", "memjax.demo", "memjax.report", "memjax.data.locomo_stats"):
    cli(m, "--help")
print("heavy", sorted({m.split(".")[0] for m in sys.modules} & set(%r)))
print("engine", "memjax.engine.engine" in sys.modules, "loop", "memjax.loop.run" in sys.modules)
""" % (HEAVY,)


def _run(code: str) -> str:
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
    for k in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "MEMJAX_INIT_TIMEOUT_S", "SLURM_JOB_ID",
              "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "MEMJAX_SINGLE_PROCESS"):
        env.pop(k, None)
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p.stdout


def test_bad_input_and_help_of_the_clis_import_no_jax():
    out = _run(CLI)
    assert "EngineConfig memjax.engine.config" in out
    assert "memjax.train configs/tiny.py -> 2 | memjax.train: error: JAX_PROCESS_ID='one' must be an integer" in out
    assert ("memjax.evaluate configs/tiny.py -> 2 | memjax.evaluate: error: JAX_COORDINATOR_ADDRESS='localhost' is "
            "not host:port") in out
    assert "memjax.train configs/tiny.py -> 2 | memjax.train: error: MEMJAX_INIT_TIMEOUT_S='soon' must be" in out
    assert "memjax.train --nope -> 2 | python -m memjax.train: error: unrecognized arguments: --nope" in out
    assert ("memjax.train configs/tiny.py -> 2 | memjax.train: error: SLURM_NTASKS=2 but this is the allocation's "
            "batch script, not an srun step: start the command with srun") in out
    for m in ("memjax.launch", "memjax.plan", "memjax.convert", "memjax.demo", "memjax.report",
              "memjax.data.locomo_stats"):
        assert f"{m} --help -> 0 |" in out, out
    assert "heavy []" in out and "engine False loop False" in out, out


def test_help_lists_the_config_without_loading_the_run():
    """--help needs the config's dataclasses (and so jax, and what their modules import: the engine, the trainer),
    not the training loop, the evaluations or orbax (curriculum.SELECT_MODES stands for stage_best.MODES)."""
    out = _run("""
import contextlib, io, sys
from memjax.cli import evaluate, train
for main in (train.main, evaluate.main):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            main(["--help"])
        except SystemExit as e:
            print("exit", e.code, file=sys.stderr)
    print("fields", "config fields (override with --set KEY=VALUE):" in buf.getvalue(), "out_dir: str" in buf.getvalue())
print("run", sorted(m for m in sys.modules if m.startswith(("memjax.loop", "memjax.cli.evaluate_run", "orbax"))))
from memjax.checkpoint.stage_best import MODES
from memjax.run.curriculum import SELECT_MODES
print("modes", MODES == SELECT_MODES)
""")
    assert out.count("fields True True") == 2, out
    assert "run []" in out and "modes True" in out, out
