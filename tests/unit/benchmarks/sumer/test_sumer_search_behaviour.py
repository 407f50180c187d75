"""SUMER's search behaviour, CI-sized (benchmarks/sumer/search_behaviour.py): one GRPO run of the tiny SUMER agent
from its warm start. The reward of the rollouts rises while the NUMBER of searches stays at one per episode and
almost every search shows the record that answers (the warm start already finds the evidence); what changes is
HOW it searches: the share of searches with the session filter rises and a search shows fewer records (one
instead of the 2-3 places of the person), the strategy whose answer is a copy (docs/sumer.md, "Search behaviour
(tiny task)").

Settings: configs/sumer/tiny.py (GRPO, 16 prompts x group 8), STEPS steps, seed 0; changes are the mean of the
last 3 steps minus the mean of the first 3. The training steps do not depend on the held-out size (the CI seed
study's seeds 0-2 repeat the first 10 steps of the 20-step study exactly), so HELDOUT is small here.
Seed study with these settings (seeds 0-4, CPU, benchmarks/results/sumer_search_behaviour_ci_seeds_cpu.json),
change first 3 -> last 3 steps per seed:
  reward                     +0.046 / +0.044 / +0.070 / +0.102 / +0.044   (min +0.044)
  session-filtered searches  +0.257 / +0.180 / +0.161 / +0.110 / +0.070   (min +0.070)
  records per search         -0.392 / -0.393 / -0.296 / -0.296 / -0.410   (min drop 0.296)
  searches per episode, any step: 0.977 .. 1.016 (largest excursion from 1: 0.023)
  search hit rate / evidence found, lowest step: 0.896 / 0.875 (seed 0), >= 0.90 / 0.906 (seeds 1-4)
Thresholds: the rises and the drop at about half of the smallest measured one, the search-count drift at twice
the largest excursion, the hit rate floor 0.8 below every measured step (under shuffled rewards the lowest steps
of the 20-step control are 0.43-0.70).
"""

from __future__ import annotations

import pytest

from benchmarks.sumer.search_behaviour import run_seed, summarize

pytestmark = pytest.mark.learning

STEPS, PROMPTS, HELDOUT, WINDOW = 10, 16, 8, 3
MIN_REWARD_RISE, MIN_FILTER_RISE, MIN_RECORDS_DROP = 0.02, 0.035, 0.15
MAX_SEARCHES_DRIFT, MIN_HIT_RATE = 0.05, 0.8


@pytest.mark.slow(seconds=60)  # one 10-step run: 57 s wall, 42 s of CPU (2 shared cores, load ~7)
def test_reward_rises_while_search_count_stays_and_filter_use_rises(tmp_path):
    run = run_seed(tmp_path / "run", seed=0, steps=STEPS, prompts=PROMPTS, heldout=HELDOUT)
    st, s = run["steps"], summarize({"0": run}, WINDOW)
    assert len(st["reward"]) == STEPS
    assert s["reward"]["mean_change"] >= MIN_REWARD_RISE, st["reward"]
    assert s["filtered_search_frac"]["mean_change"] >= MIN_FILTER_RISE, st["filtered_search_frac"]
    assert s["records_per_search"]["mean_change"] <= -MIN_RECORDS_DROP, st["records_per_search"]
    assert all(abs(x - 1.0) <= MAX_SEARCHES_DRIFT for x in st["searches"]), st["searches"]  # one search per episode
    assert min(st["search_hit_rate"]) >= MIN_HIT_RATE and min(st["evidence_found"]) >= MIN_HIT_RATE, st
