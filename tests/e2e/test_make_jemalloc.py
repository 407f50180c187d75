"""The test tiers run on jemalloc where the machine has it (Makefile MEMJAX_JEMALLOC, installed by .ci/run): `make`
preloads the library it finds into `make test` and `make check`, a process started that way has it mapped, and
MEMJAX_JEMALLOC= leaves it out. Under CI=true the library must be there and this very pytest process must run on it,
so CI cannot lose the allocator (and its share of the suite's time) without a failure naming it."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CI = os.environ.get("CI") == "true"


def _pytest_line(target: str, *args: str) -> str:
    p = subprocess.run(["make", "-n", target, *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return next(ln for ln in reversed(p.stdout.splitlines()) if "-m pytest" in ln)


def _mapped(env: dict) -> bool:
    code = "import sys; print('libjemalloc' in open('/proc/self/maps').read())"
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return p.stdout.strip() == "True"


def test_make_preloads_jemalloc_into_both_tiers_and_it_loads():
    found = re.search(r'LD_PRELOAD="([^" ]+)', _pytest_line("test"))
    if CI:
        assert found, "CI=true: `make test` preloads no jemalloc (.ci/run installs libjemalloc2)"
        assert "libjemalloc" in Path("/proc/self/maps").read_text(), "CI=true: this pytest process runs without jemalloc"
    if found is None:  # a machine without the library: both tiers run on glibc's malloc
        assert "LD_PRELOAD" not in _pytest_line("check")
        return
    lib = found.group(1)
    assert Path(lib).is_file() and f'LD_PRELOAD="{lib}' in _pytest_line("check")
    assert _mapped(dict(os.environ, LD_PRELOAD=lib))
    assert not _mapped({k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    assert "LD_PRELOAD" not in _pytest_line("test", "MEMJAX_JEMALLOC=")
