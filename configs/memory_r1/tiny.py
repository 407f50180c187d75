"""The tiny Memory-R1 manager task (memjax/systems/memory_r1/tiny/task.py) on the one training loop, from the shipped noisy-teacher
warm start: GRPO by default, PPO with
  python -m memjax.train configs/memory_r1/tiny.py --set advantage.estimator=gae --set agent.group_size=1 \
      --set prompts_per_step=128
and the shuffled-reward control with --set ablation=shuffle_rewards. Per step 16 prompts x group 8 (GRPO) or
128 prompts (PPO), clip 0.2, 2 mini-batches, lr 2e-4 (a from-scratch-sized model; 1e-6 would not move it),
critic lr 1e-3, value clip 0.5, GAE gamma = lam = 1 with whitening. Held-out: 256 samples, greedy EM and EM of 4
temperature-1 answers per sample.
"""

from memjax.rl.advantages import AdvantageConfig
from memjax.rl.credit import CriticConfig
from memjax.rl.trainer import LossConfig, OptimConfig, UpdateConfig
from memjax.systems.memory_r1.tiny.system import MemoryR1TinySection
from memjax.run.train_config import TrainConfig

config = TrainConfig(
    agent=MemoryR1TinySection(group_size=8, temperature=1.0, heldout_size=256, eval_samples=4),
    advantage=AdvantageConfig(estimator="grpo", norm="mean_std", gamma=1.0, lam=1.0, whiten=True),
    critic=CriticConfig(lr=1e-3, warmup_steps=0, clip_value=0.5),
    loss=LossConfig(clip_low=0.2, clip_high=0.2, agg="token-mean"),
    optim=OptimConfig(lr=2e-4, warmup_steps=3, weight_decay=0.0, grad_clip=1.0),
    update=UpdateConfig(ppo_epochs=1, mini_batches=2, micro_rows=128, pad_tokens=48),
    prompts_per_step=16,
    steps=20,
    eval_every=5,
    checkpoint_every=10,
    out_dir="out/memory_r1_tiny",
)
