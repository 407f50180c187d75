"""benchmarks.multihost as documented (configs/tiny.py on 2 hosts x 4 simulated devices): the result file's
fields, bytes between hosts equal to the weights' least (the gradient shard's all-reduce, plus metric scalars),
and none from the log-prob program."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow(seconds=20)]  # one XLA:CPU plan of the tiny config on 8 devices

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.timeout(1200)
def test_multihost_tiny(tmp_path):
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
    env.pop("XLA_FLAGS", None)
    p = subprocess.run([sys.executable, "-m", "benchmarks.multihost", "--out-dir", str(tmp_path)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stderr[-3000:]
    r = json.loads((tmp_path / "multihost_tiny_cpu.json").read_text())
    assert r["hosts"] == 2 and r["devices_per_host"] == 4 and r["config"] == "configs/tiny.py"
    c = r["compiled"]
    assert c["mesh"] == {"data": 2, "fsdp": 4, "tensor": 1} and "baseline" not in r
    least = c["analytic_update"]["inter"]
    assert 0 < least <= c["update"]["max_inter"] <= least + 4096, (c["update"], least)
    assert c["compiled_over_least"]["inter"] == round(c["update"]["max_inter"] / least, 2)
    assert c["logprobs"]["max_inter"] == 0 and c["update"]["unknown_trip_counts"] == []
    assert "between hosts" in p.stdout and str(tmp_path) in p.stdout
