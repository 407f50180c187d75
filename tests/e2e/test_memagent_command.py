"""The product's command as typed, `python -m memjax.train configs/memagent.py --set ...`, at tiny scale through the
GPU run's code (issue 46): the overrides are benchmarks/e2e_memagent.py's, the ones BUILD.md's GPU block runs at
1.5B and 3B, and the packages the GPU image lacks (grain, bm25s, wordllama, tensorboardX) are blocked by a
sitecustomize on PYTHONPATH, so the run takes the image's paths (numpy-shuffled data stream, no TensorBoard).
Checked: every phase of every step is timed and adds up to step_s (metrics.jsonl), the console prints each step's
phase line, the report page has its "Cost per phase" section, and benchmarks.scale_7b turns the run's measured
rates into the 7B table (8 and 32 GPUs) beside the verl anchor."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e" / "benchmarks"))
from test_gpu_pass import BLOCKER  # noqa: E402  (the GPU image's missing packages)

from benchmarks.e2e_memagent import command  # noqa: E402

# the module fixture's run is in the first test's time: one subprocess compiling the tiny recipe's programs (the
# update with a 151,936-token vocabulary is the longest: 4.3 min of a 17-min step at load 40 on 2 cores)
pytestmark = [pytest.mark.e2e, pytest.mark.slow(seconds=400), pytest.mark.timeout(3000)]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("memagent_cmd")
    (tmp / "site").mkdir()
    (tmp / "site" / "sitecustomize.py").write_text(BLOCKER)
    out = tmp / "run"
    cmd = command("tiny", out, "tests/fixtures/data/hotpotqa_dev_excerpt.json", prompts=2, steps=2)
    assert cmd[1:4] == ["-m", "memjax.train", "configs/memagent.py"]
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=f"{tmp / 'site'}{os.pathsep}{ROOT}")
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=2900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return out, p


def test_every_phase_is_timed_and_adds_up(run):
    out, p = run
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        phases = ("rollout", "old_logp", "ref_logp", "update", "weight_sync", "checkpoint")  # kl 1e-3: reference
        assert all(r[f"time_{ph}_s"] > 0 for ph in phases), r
        total = sum(r[k] for k in r if k.startswith("time_") and k.endswith("_s"))
        assert total == pytest.approx(r["step_s"], rel=1e-9)
        assert r["mfu_step"] is None and r["device_kind"] == "cpu" and r["gpu_s_per_sample"] > 0
        assert r["trained_samples"] == 4 and r["tokens_per_s_update"] > 0
    assert rows[-1]["time_evaluation_s"] > 0  # the last step ends with the held-out evaluation
    assert p.stdout.count("phases: rollout") == 2
    assert "grain is not installed" in p.stderr and "no TensorBoard events" in p.stdout  # the GPU image's paths
    html = (out / "report.html").read_text()
    assert 'id="phases"' in html and "old_logp s" in html


def test_scale_7b_from_the_run(run, tmp_path):
    out, _ = run
    p = subprocess.run([sys.executable, "-m", "benchmarks.scale_7b", str(out), "--json", str(tmp_path / "s.json")],
                       cwd=ROOT, env=dict(os.environ, JAX_PLATFORMS="cpu"), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads((tmp_path / "s.json").read_text())
    assert res["measured"]["device_kind"] == "cpu" and res["measured"]["steps"] == [2]
    assert [r["gpus"] for r in res["scaled"]] == [8, 32] and res["anchor_h100_s_per_sample"] == 37.5
    r8, r32 = res["scaled"]
    assert r8["step_s"] > 0 and r8["gpu_s_per_sample"] == pytest.approx(r8["step_s"] * 8 / 2048)
    # linear in devices (an assumption the table says): the same device-seconds per sample on 32 GPUs
    assert r32["gpu_s_per_sample"] == pytest.approx(r8["gpu_s_per_sample"])
    assert r8["fits"] is True and r8["phases_gib"]["rollout"] > 0  # memjax.plan's per-device memory
    assert "measured on 1 x cpu" in p.stdout and "scaled from the measured FLOP rate" in p.stdout
