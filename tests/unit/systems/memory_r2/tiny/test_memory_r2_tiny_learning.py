"""The tiny Memory-R2 policy learns through `memjax.train` with LoGo-GRPO (configs/memory_r2/tiny.py, shipped
noisy-teacher warm start), and its shuffled-reward control does not learn in the same steps.

The warm start (memjax/systems/memory_r2/tiny/warmstart.py, teacher right with probability 0.3) decodes greedily to the mistakes
(moves added, chit-chat added, most new people skipped: held-out greedy F1 about 0.28) while sampling puts about
0.3 of its mass on each case's right op. Greedy F1 is a step function of near-ties (a case's top op flips as a
whole), so the control is judged on the sampled F1 (EVAL_SAMPLES temperature-1 rollouts per held-out episode).
Settings: PROMPTS episodes x 36 rollout calls per step, STEPS steps, HELDOUT held-out episodes, seed 0.
Seed study with exactly these settings (seeds 0/1/2, CPU x86_64), before: greedy F1 0.242, sampled 0.385; after:
  real rewards      greedy 1.000 / 1.000 / 0.927   sampled +0.336 / +0.286 / +0.277   move right 1.0 / 1.0 / 0.9
  shuffled rewards  greedy 0.352 / 0.000 / 0.268   sampled +0.026 / -0.020 / +0.014
  real - shuffled sampled F1 after: 0.310 / 0.306 / 0.263
The thresholds leave at least 0.06 of margin to every seed; another CPU may take other float paths and so other
samples, the margins are sized for that.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from memjax.cli.train import TrainConfig, train
from memjax.core.config import load_config_file

pytestmark = pytest.mark.learning

CONFIG = Path(__file__).resolve().parents[5] / "configs" / "memory_r2" / "tiny.py"

STEPS, PROMPTS, HELDOUT, EVAL_SAMPLES = 10, 4, 32, 4
MIN_GREEDY_AFTER, MIN_RISE_SAMPLED, MAX_ABLATION_RISE_SAMPLED, MIN_GAP_SAMPLED = 0.8, 0.2, 0.12, 0.15


def r2_config(tmp: Path, **changes) -> TrainConfig:
    cfg = load_config_file(CONFIG)
    agent = dataclasses.replace(cfg.agent, heldout_size=HELDOUT, eval_samples=EVAL_SAMPLES)
    return dataclasses.replace(cfg, agent=agent, steps=STEPS, prompts_per_step=PROMPTS, eval_every=0,
                               checkpoint_every=STEPS, out_dir=str(tmp), **changes)


@pytest.mark.slow(seconds=60)
def test_logo_grpo_raises_heldout_f1_and_shuffled_rewards_do_not(tmp_path):
    real = train(r2_config(tmp_path / "real"))
    b, a = real["before"], real["after"]
    assert a["f1"] >= MIN_GREEDY_AFTER and a["f1_sampled"] - b["f1_sampled"] >= MIN_RISE_SAMPLED, (b, a)
    assert a["correct_new"] >= 0.9 and a["correct_move"] >= 0.75, a  # the two ops the warm start gets wrong
    abl = train(r2_config(tmp_path / "shuffled", ablation="shuffle_rewards"))
    assert abl["before"] == b
    assert all("grad_norm" in h for h in abl["history"])  # the ablation updated the policy on every step
    assert abl["after"]["f1_sampled"] - b["f1_sampled"] <= MAX_ABLATION_RISE_SAMPLED, (b, abl["after"])
    assert a["f1_sampled"] - abl["after"]["f1_sampled"] >= MIN_GAP_SAMPLED, (a, abl["after"])
