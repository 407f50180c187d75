"""tests/cpu_time.py counts a test's CPU and that of the processes it waited for, by module, under xdist too."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
BURN = """
import subprocess, sys

def test_child_burns():
    subprocess.run([sys.executable, "-c", "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 1.5: pass"])

def test_idle():
    pass
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_a_child_s_cpu_is_counted_for_its_module(tmp_path, workers):
    (tmp_path / "test_burn.py").write_text(BURN)
    (tmp_path / "test_quiet.py").write_text("def test_quiet():\n    pass\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), MEMJAX_CPU_TOP="5")
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.cpu_time", "-p", "no:cacheprovider", *workers,
                        "test_burn.py", "test_quiet.py"], check=False, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout[-2000:]
    got = {m.group(2): float(m.group(1)) for m in re.finditer(r"^ +([\d.]+)  (\S+\.py)$", p.stdout, re.MULTILINE)}
    assert 1.4 <= got["test_burn.py"] < 5 and got["test_quiet.py"] < 0.5, p.stdout[-2000:]
    assert "CPU seconds by module" in p.stdout and "all 2 modules" in p.stdout
