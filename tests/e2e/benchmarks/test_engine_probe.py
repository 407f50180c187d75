"""benchmarks.engine_probe as the next GPU session runs it: a case subprocess steps the engine to the end and the
driver records its per-call counters; a case that outlives its timeout is killed and reported with the traceback
faulthandler dumped before the kill."""

import json
import os
import subprocess
import sys
from pathlib import Path
import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]


def _probe(tmp_path, *args):
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "benchmarks.engine_probe", "--out-dir", str(tmp_path), "--smoke", *args],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=170)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads((tmp_path / "engine_probe.json").read_text())["cases"]


def test_smoke_case_steps_to_the_end(tmp_path):
    r = _probe(tmp_path, "--only", "tiny_split", "--timeout", "150")["tiny_split"]
    assert r["status"] == "ok", r["last_traceback"]
    n, k = r["case"]["n_prompts"], r["case"]["max_tokens"]
    assert r["done"] == n and r["stats"]["decode_tokens"] == n * (k - 1)  # the first token comes from prefill
    assert r["device_rounds"] == r["stats"]["rounds"] == r["calls"] and len(r["call_seconds"]) == r["calls"]
    assert r["stats"]["prefill_tokens"] == n * r["case"]["prompt_len"]


def test_case_past_its_timeout_is_killed_with_a_traceback(tmp_path):
    r = _probe(tmp_path, "--only", "tiny_mixed_legacy", "--timeout", "6")["tiny_mixed_legacy"]
    assert r["status"] == "timeout" and r["seconds"] < 20
    assert "Thread 0x" in r["last_traceback"] and "engine_probe.py" in r["last_traceback"]
