"""Shared fixtures: golden transformers outputs (committed under tests/fixtures/golden).

Also: one persistent XLA compilation cache per test session (a fresh temporary directory, removed at the end,
so every run starts cold as CI does). Many tests build their own Engine / Trainer / jitted function from the
same model and shapes; each is a new jit object that would otherwise compile identical HLO again. The cache is
keyed by the HLO and the compile options, so a hit returns the executable XLA would have built: what a test
checks does not change, only how often the same program is compiled. The directory (and the matmul precision)
travel to subprocesses and pytest-xdist workers through the environment. A JAX_COMPILATION_CACHE_DIR set by
the caller is used as is (and kept). Children of multi-process runs also put tests/child_site on PYTHONPATH
(tests/child_env.py): jax writes the cache from process 0 only, and on CPU the key of a program includes the process,
so processes 1.. compiled every program cold in every run; its sitecustomize lets each process write its own.
"""

import os
import shutil
import signal
import tempfile
from pathlib import Path

if not os.environ.get("JAX_COMPILATION_CACHE_DIR"):
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="memjax-test-xla-cache-")
    os.environ["MEMJAX_TEST_CACHE_OWNER"] = str(os.getpid())  # this process made it and removes it
# Every program is cached, however quickly it compiled: a training process that finds its programs in the cache still
# compiled ~90 small ones (array creation, slicing, RNG; 1.8 s) at the old threshold of 0.2 s, and reads them in
# 0.6 s at 0 (configs/tiny.py at the fault matrix's shape: 9.2-9.7 -> 8.0-8.3 CPU-s per warm process; the fault
# matrix alone 336 -> 298 CPU-s).
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
# Multi-process children: a healthy process starved of CPU (2 cores, the other worker compiling) went unheard past a
# 10 s heartbeat on CI and the coordination service ended the run. Only the fault matrix measures how fast a dead
# process is noticed, and it sets its own heartbeat.
os.environ.setdefault("MEMJAX_HEARTBEAT_S", "60")
# Through the environment, so that subprocesses (python -m memjax.train in test_train) compute, and compile,
# exactly what the test process does.
os.environ["JAX_DEFAULT_MATMUL_PRECISION"] = "highest"
# The stop tests send SIGINT to the runs they start, as a user's Ctrl-C does. A suite started as a background job of a
# non-interactive shell inherits SIGINT ignored and would pass that on to every child (memjax keeps an inherited
# ignore, as Python does); a Python handler here becomes the default disposition again in each child at exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import jax
import numpy as np
import pytest
from jax._src import compiler as jax_compiler

from tests.compile_census import install as install_compile_census
from tests.cpu_time import (  # noqa: F401  (hooks: CPU seconds per module at the end of a run)
    pytest_runtest_logreport,
    pytest_runtest_makereport,
    pytest_runtest_protocol,
    pytest_terminal_summary,
)

jax.config.update("jax_default_matmul_precision", "highest")
install_compile_census(jax_compiler)  # only with MEMJAX_COMPILE_CENSUS set (`make census`)
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
jax.config.update("jax_persistent_cache_min_compile_time_secs",
                  float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]))


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("MEMJAX_TEST_CACHE_OWNER") == str(os.getpid()):
        shutil.rmtree(os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)

GOLDEN = Path(__file__).parent / "fixtures" / "golden"
GOLDEN_MODELS = ("tied_kv1", "untied_kv2", "sharded_kv2")


def golden_dir(name: str) -> Path:
    d = GOLDEN / "models" / name
    if not (d / "reference.npz").is_file():
        pytest.fail(f"committed golden fixture missing: {d} (regenerate with tests/fixtures/make_golden.py)")
    return d


def golden_ref(name: str) -> dict[str, np.ndarray]:
    return dict(np.load(golden_dir(name) / "reference.npz"))


GPU_TIER_ANYWHERE = os.environ.get("MEMJAX_GPU_TIER_ANYWHERE") == "1"


def on_gpu() -> bool:
    return jax.default_backend() == "gpu"


def _skip_gpu_tier_off_gpu(items) -> None:
    """Tests marked `gpu` (the GPU tier, `make test-gpu`) skip, with the reason, where JAX has no GPU backend.

    MEMJAX_GPU_TIER_ANYWHERE=1 runs them on CPU anyway, at the shapes they choose there (Pallas kernels in
    interpret mode): a check that the tier's code runs, not of GPU numerics or memory.
    """
    if GPU_TIER_ANYWHERE or on_gpu():
        return
    skip = pytest.mark.skip(reason=f"GPU tier: needs an NVIDIA GPU, JAX backend here is {jax.default_backend()!r} "
                                   "(run `make test-gpu` on a GPU machine)")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


def pytest_collection_modifyitems(session, config, items):
    """Modules that hold a `slow` test are collected first, the costliest first, then the rest in their order.

    `make test` runs pytest-xdist with `--dist loadfile`: whole modules go to the workers in collection order.
    A module of several minutes collected last (tests/unit/tiny/ sorts late) leaves one worker busy alone at the
    end of the run; started first, it runs beside everything else (longest-processing-time-first scheduling).
    A module's cost is the largest `seconds` of its `slow` marks (`@pytest.mark.slow(seconds=N)`: N measured on
    the 2-core CI machine; a bare `slow` counts 0). Which tests run, and what they check, does not change.
    """
    cost: dict = {}
    for item in items:
        for mark in item.iter_markers("slow"):
            cost[item.path] = max(cost.get(item.path, 0.0), float(mark.kwargs.get("seconds", 0)))
    items.sort(key=lambda item: (item.path not in cost, -cost.get(item.path, 0.0)))  # stable within ties
    _skip_gpu_tier_off_gpu(items)
