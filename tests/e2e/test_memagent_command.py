"""The product's command as typed, `python -m memjax.train configs/memagent.py --set ...`, at tiny scale through the
GPU run's code: the overrides are benchmarks/e2e_memagent.py's, the ones BUILD.md's GPU block runs at
1.5B and 3B, and the packages the GPU image lacks (grain, bm25s, wordllama, tensorboardX) are blocked by a
sitecustomize on PYTHONPATH, so the run takes the image's paths (numpy-shuffled data stream, no TensorBoard).
The module runs docs/performance.md's CPU line, `python -m benchmarks.e2e_memagent --scale tiny --out DIR --steps 2`:
the run, then its resume check (the run's folder as a stop after step 1 leaves it, resumed by the same command).
Checked: every phase of every step is timed and adds up to step_s (metrics.jsonl), the console prints each step's
phase line, the report page has its "Cost per phase" section, the resume ends with the run's exported weights byte
for byte, and benchmarks.scale_7b turns the run's measured rates into the 7B table (8 and 32 GPUs) beside the verl
anchor."""

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
    cmd = [sys.executable, "-m", "benchmarks.e2e_memagent", "--scale", "tiny", "--out", str(tmp), "--steps", "2"]
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=f"{tmp / 'site'}{os.pathsep}{ROOT}")
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=2900)
    assert (tmp / "e2e_tiny.json").is_file(), p.stdout[-2000:] + p.stderr[-3000:]
    res = json.loads((tmp / "e2e_tiny.json").read_text())
    log = (tmp / "e2e_tiny.log").read_text()
    assert p.returncode == 0 and res["run"]["returncode"] == 0, p.stderr[-2000:] + log[-3000:]
    typed = command("tiny", (tmp / "run_tiny").resolve(), res["data"], prompts=2, steps=2)
    assert res["run"]["command"] == " ".join(typed[1:])
    assert res["run"]["command"].startswith("-m memjax.train configs/memagent.py --set")
    return tmp, res, log


def test_every_phase_is_timed_and_adds_up(run):
    tmp, _, stdout = run
    out = tmp / "run_tiny"
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
    assert stdout.count("phases: rollout") == 2
    assert "grain is not installed" in stdout and "no TensorBoard events" in stdout  # the GPU image's paths
    html = (out / "report.html").read_text()
    assert 'id="phases"' in html and "old_logp s" in html


def test_the_run_stopped_after_step_1_resumes_to_the_same_weights(run):
    tmp, res, _ = run
    resumed = (tmp / "e2e_tiny_resume.log").read_text()
    assert res["resume"]["returncode"] == 0, resumed[-3000:]
    assert "resumed from" in resumed and "at step 1" in resumed
    assert res["resume_bit_identical"] is True


def test_scale_7b_from_the_run(run, tmp_path):
    out = run[0] / "run_tiny"
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
