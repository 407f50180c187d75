"""scripts/gpu_block_71.sh (docs/async.md, the colocated_async GPU block) without a GPU: with ASYNC_CHECK=1 at tiny
scale its two training commands are the product's command with the schedule set, and each passes `--check`; the
summary names both runs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]


def test_the_block_composes_both_schedules_and_each_passes_check(tmp_path):
    env = dict(os.environ, ASYNC_SCALE="tiny", ASYNC_CHECK="1", JAX_PLATFORMS="cpu", PYTHON=sys.executable)
    p = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_block_71.sh"), str(tmp_path)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    for sched in ("sync", "colocated_async"):
        log = (tmp_path / f"run_{sched}.log").read_text()
        assert "check: ok" in log and f"schedule {sched}" in log, log
        assert f"{sched}: rc=0" in p.stdout
    assert "schedule colocated_async (max_staleness 1)" in (tmp_path / "run_colocated_async.log").read_text()
    res = json.loads((tmp_path / "async_gpu.json").read_text())
    assert set(res) == {"sync", "colocated_async", "steps_per_hour_ratio"} and res["sync"]["steps"] == 0
