"""The tiny searchable-memory task (SUMER's loop at toy scale) on the one training loop, on CPU.

  python -m memjax.train configs/sumer/tiny.py [--set seed=1 --set ablation=shuffle_rewards ...]
A 115,520-parameter Qwen2-architecture model (width 64, 3 layers; memjax/assets/tiny/sumer_warmstart, supervised
on correct episodes and stopped at dev greedy accuracy 0.50) answers `where is K [in session S] ?` by calling
search (keyword, optional session filter) over 12 facts in 4 sessions and then submit, through the same
SumerWorkflow, tools, continuation and reward (J x F1 with the rule judge, -1 without an answer) as the LoCoMo
agent. GRPO as the SUMER recipe (group 8, mean/std advantages, clip 0.2/0.28, token-mean, no KL), with
settings sized for a from-scratch-sized model: lr 5e-4 and 2 mini-batches per step (the 7B recipe's 1e-6 and
one update would not move it), 16 questions per step, flat groups dropped. Held-out: 128 questions, greedy
reward / accuracy and the mean reward of 2 temperature-1 episodes each, before, every 10 steps and after.
Measured (CPU, 2 cores shared with other jobs: 19-21 min per run, most of it compiling and waiting for the CPU; seeds 0, 1, 2; `python scripts/tiny_sumer_seeds.py`,
benchmarks/results/tiny_sumer_seeds_cpu.json). Before RL: greedy reward 0.500, sampled 0.230 (every seed).
Rise, mean +- std over seeds:        step 10                    step 20
  real rewards       greedy        +0.143 +- 0.012            +0.193 +- 0.047   (seeds +0.242 +0.188 +0.148)
                     sampled       +0.079 +- 0.013            +0.119 +- 0.010   (seeds +0.112 +0.130 +0.116)
  shuffled rewards   greedy        -0.242 +- 0.186            -0.344 +- 0.089
                     sampled       -0.105 +- 0.067            -0.147 +- 0.071
At lr 1e-3 / 3e-3 / 1e-2 with one mini-batch (scripted runs, seed 0) held-out greedy reward went 0.50 -> 0.53,
0.23 and -0.20 in 10-15 steps: Adam's early steps on noisy policy gradients damage a model this small.
"""

from memjax.rl.advantages import AdvantageConfig
from memjax.rl.trainer import LossConfig, OptimConfig, UpdateConfig
from memjax.systems.sumer.tiny.system import TinySumerSection
from memjax.systems.sumer.tiny.task import TinySumerTask
from memjax.run.train_config import TrainConfig

config = TrainConfig(
    agent=TinySumerSection(task=TinySumerTask(num_sessions=4, facts_per_session=3, filtered_frac=0.7), group_size=8,
                           temperature=1.0, max_turns=4, heldout_size=128, eval_samples=2),
    advantage=AdvantageConfig(estimator="grpo", norm="mean_std", std_ddof=0),  # SUMER: population std
    loss=LossConfig(clip_low=0.2, clip_high=0.28, agg="token-mean"),
    optim=OptimConfig(lr=5e-4, warmup_steps=3, weight_decay=0.0, grad_clip=1.0),
    update=UpdateConfig(ppo_epochs=1, mini_batches=2, micro_rows=128, pad_tokens=64),
    prompts_per_step=16,
    steps=20,
    eval_every=10,
    filter_flat_groups=True,
    ablation="none",
    seed=0,
    checkpoint_every=10,
    out_dir="out/tiny_sumer",
)
