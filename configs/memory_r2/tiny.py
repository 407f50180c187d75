"""The tiny Memory-R2 task (memjax/systems/memory_r2/tiny/task.py) on the one training loop, from the shipped noisy-teacher warm
start: LoGo-GRPO by default (n = 8 global rollouts per episode, every session re-rolled locally m = 4 times from
its anchor's snapshot: 8 x 3 + 3 x 4 = 36 calls per 3-session episode), plain GRPO at the same budget with
  python -m memjax.train configs/memory_r2/tiny.py --set agent.logo=false --set agent.group_size=12
(12 x 3 = 36 calls per episode), and the shuffled-reward control with --set ablation=shuffle_rewards.
Step-level loss (one length-normalised ratio per call, the kernel the LoCoMo recipe uses), clip 0.2, dual clip
3, log-ratio clamp 3, entropy 0.001, no KL (the tiny runs keep no reference copy); lr 2e-4 (a from-scratch-sized
model; the paper's 2e-6 would not move it), 1 epoch of 2 mini-batches. Held-out: 128 episodes, greedy, mean F1
of every question on the final bank.
"""

from memjax.rl.advantages import AdvantageConfig
from memjax.rl.trainer import LossConfig, OptimConfig, UpdateConfig
from memjax.systems.memory_r2.tiny.system import MemoryR2TinySection
from memjax.run.train_config import TrainConfig

config = TrainConfig(
    agent=MemoryR2TinySection(logo=True, group_size=8, temperature=1.0, heldout_size=128, adv_singleton="reward"),
    advantage=AdvantageConfig(estimator="grpo", norm="mean_std"),
    loss=LossConfig(level="step", clip_low=0.2, clip_high=0.2, dual_clip=3.0, log_ratio_clamp=3.0,
                    log_ratio_clamp_mode="upper",  # the official clamp: mean log-ratio <= 3, no lower bound
                    entropy_coef=1e-3),
    optim=OptimConfig(lr=2e-4, warmup_steps=2, weight_decay=0.0, grad_clip=1.0),
    update=UpdateConfig(ppo_epochs=1, mini_batches=2, micro_rows=128, pad_tokens=48),
    prompts_per_step=4,
    steps=12,
    eval_every=0,
    checkpoint_every=12,
    out_dir="out/memory_r2_tiny",
)
