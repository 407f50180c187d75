"""memjax/rl/phases.py: the phases of a step add up to its wall time, rates and MFU follow memjax.model.flops (None without
a known peak: CPU), device-s per sample; the console line and the report's "Cost per phase" section show them;
JsonlLog.fill writes the lines a resume lacks. (The training loop's own use: tests/e2e/test_memagent_command.py.)"""

import json
import time

import pytest

from memjax.core.outdir import JsonlLog
from memjax.model import flops, presets
from memjax.report.load import load_run
from memjax.report.page import render
from memjax.report.phases import phases_html
from memjax.rl.phases import PHASES, PhaseClock, console_line, phase_metrics

CFG = presets.get("tiny")
LENS = [40, 60, 100]


def _clocked():
    t0 = time.perf_counter()
    clock = PhaseClock()
    with clock("rollout"):
        time.sleep(0.03)
    t = time.perf_counter()
    time.sleep(0.01)
    clock.add("old_logp", time.perf_counter() - t)  # timed elsewhere (Trainer.update) and added
    time.sleep(0.01)  # "other": not in any phase
    with clock("update"):
        time.sleep(0.02)
    return clock, t0


def test_phases_add_up_to_the_step_wall_time():
    clock, t0 = _clocked()
    m = phase_metrics(clock, model_cfg=CFG, conv_lens=LENS, rollout_tokens=400, ppo_epochs=1, trained_samples=4,
                      device_count=1, device="cpu")
    wall = time.perf_counter() - t0
    assert set(PHASES) <= {k[5:-2] for k in m if k.startswith("time_")}
    assert sum(m[f"time_{p}_s"] for p in (*PHASES, "other")) == pytest.approx(m["step_s"], abs=1e-9)
    assert m["step_s"] <= wall and wall - m["step_s"] < 0.02  # the external clock around the same work
    assert m["time_rollout_s"] >= 0.03 and m["time_other_s"] >= 0.01 and m["time_checkpoint_s"] == 0.0
    assert m["mfu_step"] is None and m["mfu_update"] is None and m["device_kind"] == "cpu"  # no invented CPU peak
    assert m["gpu_s_per_sample"] == pytest.approx(m["step_s"] / 4)
    assert m["tokens_per_s_rollout"] == pytest.approx(400 / m["time_rollout_s"])
    assert "tokens_per_s_weight_sync" not in m and "tokens_per_s_ref_logp" not in m  # did not run / no tokens


def test_mfu_uses_the_flops_estimate_and_the_device_peak():
    clock, _ = _clocked()
    h100 = "NVIDIA H100 80GB HBM3"
    m = phase_metrics(clock, model_cfg=CFG, conv_lens=LENS, rollout_tokens=400, ppo_epochs=2, trained_samples=8,
                      device_count=2, device=h100)
    fwd = flops.estimate(CFG, LENS, training=False)
    assert m["flops_update"] == 2 * 3 * fwd and m["flops_old_logp"] == fwd
    assert m["flops_rollout"] == pytest.approx(fwd * 400 / sum(LENS))
    assert m["mfu_update"] == pytest.approx(6 * fwd / m["time_update_s"] / (989e12 * 2))
    total = m["flops_rollout"] + m["flops_old_logp"] + m["flops_update"]
    assert m["mfu_step"] == pytest.approx(total / m["step_s"] / (989e12 * 2))
    assert m["gpu_s_per_sample"] == pytest.approx(m["step_s"] * 2 / 8)
    line = console_line({"step": 1, **m})
    assert "rollout " in line and "update " in line and "old " in line and "device-s/sample" in line and "MFU " in line


def test_report_section_and_missing_lines(tmp_path):
    rows = []
    for step in (1, 2):
        clock, _ = _clocked()
        rows.append({"step": step, "reward": 0.0, **phase_metrics(
            clock, model_cfg=CFG, conv_lens=LENS, rollout_tokens=400, ppo_epochs=1, trained_samples=4,
            device_count=1, device="cpu")})
    html = phases_html(rows)
    assert "<table" in html and "rollout s" in html and "old_logp s" in html and "device-s / sample" in html
    assert "—" in html  # MFU None on CPU
    assert "no per-phase timings" in phases_html([{"step": 1, "reward": 0.0}])
    log = JsonlLog(tmp_path / "metrics.jsonl")
    log.write(rows[0])
    assert log.fill(rows) == 1 and log.fill(rows) == 0  # step 2 was missing; then nothing is
    assert [json.loads(x)["step"] for x in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    (tmp_path / "result.json").write_text(json.dumps({"config": {}, "history": rows, "evals": []}))
    page = render(load_run(tmp_path))
    assert 'id="phases"' in page and "Cost per phase" in page and 'data-title="time per phase (s)"' in page
