"""tests/compile_census.py (`make census`): with MEMJAX_COMPILE_CENSUS set, a test process and its child record every
compile request with the asking test, a program compiled twice is reported as such, and the report adds up."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_env import PYTHONPATH as CHILD_PYTHONPATH
from tests.compile_census import load, report

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
TESTS = """
import subprocess, sys
import jax, jax.numpy as jnp

def test_parent_compiles_twice():
    jax.jit(lambda x: x * 3 + 1)(jnp.ones(7))
    jax.jit(lambda x: x * 3 + 1)(jnp.ones(7))   # a new jit object: the persistent cache's hit

def test_child_compiles():
    subprocess.run([sys.executable, "-c", "import jax, jax.numpy as jnp; jax.jit(lambda x: x - 2)(jnp.ones(5))"],
                   check=True)
"""


def test_a_test_and_its_child_record_their_compiles(tmp_path):
    (tmp_path / "test_twice.py").write_text(TESTS)
    census, cache = tmp_path / "census", tmp_path / "cache"
    env = dict(os.environ, MEMJAX_COMPILE_CENSUS=str(census), JAX_COMPILATION_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([CHILD_PYTHONPATH, str(ROOT / "tests")]), JAX_PLATFORMS="cpu")
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                        "--confcutdir", str(tmp_path), "-p", "conftest", "test_twice.py"],
                       check=False, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    rows = load(census)
    parent = [r for r in rows if r["test"].startswith("test_twice.py::test_parent_compiles_twice")
              and r["name"] == "jit__lambda"]
    assert [r["hit"] for r in parent] == [False, True], parent
    child = [r for r in rows if r["test"].startswith("test_twice.py::test_child_compiles") and r["name"] == "jit__lambda"]
    assert len(child) == 1 and child[0]["hit"] is False and "-c" in child[0]["argv"], child
    assert len({f.name for f in census.iterdir()}) == 2  # one file per process
    text = report(rows)
    assert text.startswith(f"{len(rows)} compile requests: ") and "test_twice.py" in text
