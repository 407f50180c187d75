"""tests/child_site: a test child that is not process 0 writes the persistent compilation cache (jax alone would not),
and a child without it on PYTHONPATH still does not (the hook is what makes the difference)."""

import os
import subprocess
import sys

import pytest

from tests.child_env import PYTHONPATH as CHILD_PYTHONPATH
from tests.child_env import ROOT

pytestmark = pytest.mark.e2e

PROBE = """
import jax
from jax._src import distributed
distributed.global_state.process_id = 1  # what jax.distributed.initialize sets in the second process
jax.jit(lambda x: x * 3 + 1)(jax.numpy.arange(7.0)).block_until_ready()
print(jax._src.compiler._cache_write.__name__)
"""


def _probe(cache, pythonpath: str) -> tuple[str, list]:
    env = dict(os.environ, PYTHONPATH=pythonpath, JAX_PLATFORMS="cpu", JAX_COMPILATION_CACHE_DIR=str(cache),
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    p = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip(), sorted(x.name for x in cache.glob("jit_*")) if cache.is_dir() else []


def test_every_process_writes_the_cache_with_child_site_and_only_then(tmp_path):
    name, entries = _probe(tmp_path / "with", CHILD_PYTHONPATH)
    assert name == "cache_write_every_process" and any(e.startswith("jit__lambda") for e in entries), entries
    name, entries = _probe(tmp_path / "without", str(ROOT))
    assert name == "_cache_write" and not any(e.startswith("jit__lambda") for e in entries), entries
