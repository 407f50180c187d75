"""The tiny Memory-R1 answer agent (memjax/systems/memory_r1/tiny/answer_task.py) on the one training loop, from the shipped
noisy-teacher warm start, WITH memory distillation (select the relevant records, then answer); the plain prompt
(answer from all retrieved records) with --set agent.distill=false. GRPO, per step 16 prompts x group 8, 1-7
distractors per question, clip 0.2, 2 mini-batches, lr 2e-4 (the other tiny tasks' settings). Held-out: 128
samples per distractor count 1/3/5/7, greedy EM and EM of 4 temperature-1 answers per sample. The study of both
variants (100 steps at lr 1e-3: 20 steps at 2e-4 do not move either): python -m benchmarks.memory_r1.distill.
"""

from memjax.rl.advantages import AdvantageConfig
from memjax.rl.credit import CriticConfig
from memjax.rl.trainer import LossConfig, OptimConfig, UpdateConfig
from memjax.systems.memory_r1.tiny.answer_system import MemoryR1AnswerTinySection
from memjax.run.train_config import TrainConfig

config = TrainConfig(
    agent=MemoryR1AnswerTinySection(distill=True, group_size=8, temperature=1.0, heldout_size=128, eval_samples=4),
    advantage=AdvantageConfig(estimator="grpo", norm="mean_std", gamma=1.0, lam=1.0, whiten=True),
    critic=CriticConfig(lr=1e-3, warmup_steps=0, clip_value=0.5),
    loss=LossConfig(clip_low=0.2, clip_high=0.2, agg="token-mean"),
    optim=OptimConfig(lr=2e-4, warmup_steps=3, weight_decay=0.0, grad_clip=1.0),
    update=UpdateConfig(ppo_epochs=1, mini_batches=2, micro_rows=64, pad_tokens=48),
    prompts_per_step=16,
    steps=20,
    eval_every=5,
    checkpoint_every=10,
    out_dir="out/memory_r1_answer_tiny",
)
