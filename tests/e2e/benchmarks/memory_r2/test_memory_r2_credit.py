"""Where credit matters in tiny Memory-R2, CI-sized (benchmarks/memory_r2/credit.py): on the same rollout batch of the
8-session warm start, LoGo-GRPO's per-token advantages track each session's true contribution (the exact
counterfactual of its ops on the final reward) much better than outcome-only GRPO's, whose one advantage per
rollout carries the other seven sessions' luck as noise (docs/memory_r2.md, "Where credit matters").

Settings: task 8x1, EPISODES episodes, n = 8 global rollouts, m = 4 local re-rollouts of every session, seed 0.
Seed study with exactly these settings (seeds 0-4, CPU, benchmarks/results/tiny_r2_credit_ci_seeds_cpu.json):
  corr(logo)  - corr(outcome)    0.176 / 0.156 / 0.256 / 0.188 / 0.111   (>= MIN_CORR_GAIN)
  noise(outcome) - noise(logo)   0.390 / 0.382 / 0.397 / 0.438 / 0.324   (>= MIN_NOISE_GAIN)
  corr(session) - corr(outcome)  0.197 / 0.141 / 0.237 / 0.199 / 0.117   (>= MIN_CORR_GAIN)
  var logo / session / outcome   0.46-0.59 / 0.52-0.69 / 0.87-0.88
Every threshold is at most about half of the smallest measured gap.
"""

from __future__ import annotations

import pytest

from benchmarks.memory_r2.credit import measure, plot, summary

pytestmark = pytest.mark.e2e

EPISODES = 16
MIN_CORR_GAIN, MIN_NOISE_GAIN = 0.05, 0.15


@pytest.mark.slow(seconds=30)  # one batch of 16 x 96 calls and the replays: ~30 s wall on 2 busy cores
def test_logo_credit_tracks_the_true_contribution_better_than_outcome_grpo(tmp_path):
    r = measure("8x1", episodes=EPISODES, seed=0)
    assert r["rows"] == EPISODES * (8 * 8 + 8 * 4) and r["global_rows"] == EPISODES * 8 * 8
    assert r["logo"]["corr"] - r["outcome"]["corr"] >= MIN_CORR_GAIN, r
    assert r["outcome"]["noise"] - r["logo"]["noise"] >= MIN_NOISE_GAIN, r
    assert r["session"]["corr"] - r["outcome"]["corr"] >= MIN_CORR_GAIN, r
    # standardised per group, so comparable scales (LoGo's lower: its local groups often tie -> advantage 0)
    for k in ("logo", "session", "outcome"):
        assert 0.3 <= r[k]["var"] <= 1.0, (k, r[k])
    # the result file's summary and the plot (what `python -m benchmarks.memory_r2.credit` writes)
    s = summary([r])["8x1"]
    assert s["logo_corr_mean"] == r["logo"]["corr"] and s["outcome_corr_std"] is None
    assert "outcome_z_step_new:add_mean" in s and plot([r], tmp_path / "c.png").stat().st_size > 0
