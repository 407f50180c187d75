"""benchmarks/kv_fp8_gap.py: an engine with a float8 KV pool generates, and its log-probs stay near the trainer's on
real HotpotQA tokens, farther than the fp32 pool's (so float8 is in effect); the calibration sets the scales."""

import pytest

from memjax.engine.config import FP8_E4M3_MAX

pytestmark = pytest.mark.e2e


@pytest.mark.slow(seconds=40)
def test_engine_with_float8_pool_stays_near_the_trainer(tmp_path):
    """benchmarks/kv_fp8_gap.py as typed, small: an fp32 tiny-qwen-vocab model on real HotpotQA tokens. The fp32
    pool's gap is float rounding (~1e-7); the float8 pool's is e4m3 rounding, larger but small against PPO's clip
    (no ratio leaves [0.8, 1.28]); the calibrated scales are max |K|, |V| of the fp32 pool / 448."""
    from benchmarks.kv_fp8_gap import HOTPOT_CANDIDATES, main

    res = main(["--prompts", "3", "--prompt-len", "40", "--max-tokens", "6", "--compute-dtype", "float32",
                "--data", str(HOTPOT_CANDIDATES[-1]), "--out", str(tmp_path)])  # the repository's excerpt: CI has no shared/
    f32, f8, cal = res["rows"]
    assert [r["kv_dtype"] for r in res["rows"]] == ["compute", "float8_e4m3fn", "float8_e4m3fn"]
    assert f32["tokens"] == f8["tokens"] == cal["tokens"] == 18
    assert f32["max_abs"] < 1e-5, f32
    for r in (f8, cal):
        assert 10 * f32["mean_abs"] < r["mean_abs"] < 0.05 and r["clip_outside_frac"] == 0.0, (f32, r)
    assert cal["k_scale"] == pytest.approx(f32["k_absmax"] / FP8_E4M3_MAX) and cal["k_scale"] != 1.0
    assert (tmp_path / "kv_fp8_gap_tiny-qwen-vocab_cpu.json").exists()
