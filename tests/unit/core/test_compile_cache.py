"""memjax/core/compile_cache.py (TrainConfig.compile_cache and the evaluation configs'): which folder each setting means on
a GPU and on CPU, that a process pointed at a folder writes its compiled programs there (a real jax compile in a child
process, with the test suite's own cache variable removed), that `python -m memjax.evaluate` does so with its
config's setting, and the configs' one-line error."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memjax.cli.eval_config import EvalConfig, SystemEvalConfig
from memjax.core.compile_cache import resolve_compile_cache
from memjax.core.config import ConfigError, apply_overrides
from memjax.evaluation.locomo import LocomoEvalConfig
from memjax.evaluation.longmemeval import LongMemEvalConfig
from memjax.run.train_config import TrainConfig

ROOT = Path(__file__).resolve().parents[3]


def test_resolve():
    home = str(Path.home() / ".cache" / "memjax" / "xla")
    assert resolve_compile_cache("auto", "gpu", {}) == home
    assert resolve_compile_cache("auto", "cpu", {}) is None          # tiny CPU programs: no cache by default
    assert resolve_compile_cache("auto", "gpu", {"XDG_CACHE_HOME": "/x"}) == "/x/memjax/xla"
    assert resolve_compile_cache("auto", "gpu", {"MEMJAX_CACHE_DIR": "/m", "XDG_CACHE_HOME": "/x"}) == "/m/xla"
    assert resolve_compile_cache("auto", "cpu", {"JAX_COMPILATION_CACHE_DIR": "/j"}) == "/j"  # jax's own wins
    assert resolve_compile_cache("none", "gpu", {"JAX_COMPILATION_CACHE_DIR": "/j"}) is None
    assert resolve_compile_cache("~/c", "cpu", {}) == str(Path.home() / "c")


@pytest.mark.e2e
def test_a_process_writes_its_programs_to_the_folder(tmp_path):
    code = ("import jax, jax.numpy as jnp\nfrom memjax.core.compile_cache import use_compile_cache\n"
            "assert use_compile_cache('auto') is None and jax.config.jax_compilation_cache_dir is None\n"
            f"print(use_compile_cache({str(tmp_path / 'c')!r}))\n"
            "print(float(jax.jit(lambda x: jnp.tanh(x) @ x.T)(jnp.ones((8, 8))).sum()))\n")
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env.update(JAX_PLATFORMS="cpu", JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.splitlines()[0] == str(tmp_path / "c")
    assert any(f.is_file() and f.stat().st_size > 0 for f in (tmp_path / "c").rglob("*")), "no cache entry written"


@pytest.mark.parametrize("cls", [TrainConfig, EvalConfig, SystemEvalConfig, LocomoEvalConfig, LongMemEvalConfig])
def test_config(cls):
    assert cls().compile_cache == "auto"
    assert apply_overrides(cls(), ["compile_cache=none"]).compile_cache == "none"
    with pytest.raises((ConfigError, ValueError), match=f"{cls.__name__}.compile_cache must be"):
        apply_overrides(cls(), ["compile_cache= "])


@pytest.mark.e2e
def test_an_evaluation_writes_its_programs_to_the_folder(tmp_path):
    """The tiny system's held-out evaluation (16 questions, greedy) with compile_cache=FOLDER: it says so and its
    programs (the engine's loop among them) are written there."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env.update(JAX_PLATFORMS="cpu", JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "memjax.evaluate", "configs/memagent/tiny_eval.py", "--set", "agent.heldout_size=16",
           "--set", "agent.eval_samples=0", "--set", f"out_dir={tmp_path / 'e'}", "--set",
           f"compile_cache={tmp_path / 'c'}"]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert f"compilation cache: {tmp_path / 'c'}" in p.stdout
    assert sum(f.is_file() and f.stat().st_size > 0 for f in (tmp_path / "c").rglob("*")) >= 3, "too few entries"
