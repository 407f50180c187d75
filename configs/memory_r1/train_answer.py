"""Memory-R1 stage 2: the Answer Agent trained on banks a fixed manager built (papers/memory-r1.txt, SPECS.md 2).

  python -m memjax.train configs/memory_r1/train_answer.py --set model.hf_path=/path/to/Qwen2.5-7B-Instruct \
      --set agent.data_path=/path/to/locomo10.json [--set agent.frozen_hf_path=/path/to/stage1/hf]
The fixed manager (and fact extractor) is a copy of the initial policy, or the stage-1 checkpoint given as
`agent.frozen_hf_path`; it builds each conversation's bank once at set-up. Per question: the top 30 memories per
speaker (60 in all, with dates), Fig. 11's prompt (memory distillation; `--set agent.distill=false` for the
ablation), the answer after `**Answer:**`, reward = exact match. PPO (critic, GAE gamma = lam = 1, whitened, value
clip 0.5; actor lr 1e-6, critic lr 1e-5) by default; GRPO:
  --set advantage.estimator=grpo --set advantage.norm=mean_std --set agent.group_size=8
Batch 128 questions (conv-26 has 152 of categories 1-4; held-out: conv-30's 81), prompt <= 4,096, response
<= 2,048, temperature 1.0 / 0. Steps are not given by the paper: 24 steps of 128 are about 20 epochs.
Memory plan (8 x 80 GiB, BUILD.md; counts the critic; the fixed manager is freed once the banks are built;
update.micro_rows=2 rounds up to one row per device):
  python -m memjax.plan configs/memory_r1/train_answer.py --devices 8 --hbm-gib 80
"""

from memjax.checkpoint.source import ModelSource
from memjax.engine import EngineConfig
from memjax.rl.advantages import AdvantageConfig
from memjax.rl.credit import CriticConfig
from memjax.rl.trainer import LossConfig, OptimConfig, UpdateConfig
from memjax.run.train_config import TrainConfig
from memjax.systems.memory_r1.system import MemoryR1AnswerSection

config = TrainConfig(
    agent=MemoryR1AnswerSection(group_size=1, temperature=1.0, split="memory_r1", max_prompt_tokens=4096,
                                max_response_tokens=2048, answer_top_k=30, distill=True),
    model=ModelSource(preset="qwen2.5-7b", dtype="float32", compute_dtype="bfloat16"),
    engine=EngineConfig(max_slots=128, page_size=64, window=6144, prefill_slots=8, prefill_chunk=2048,
                        rounds_per_sync=256),
    advantage=AdvantageConfig(estimator="gae", gamma=1.0, lam=1.0, whiten=True),
    critic=CriticConfig(lr=1e-5, warmup_steps=0, clip_value=0.5),
    loss=LossConfig(clip_low=0.2, clip_high=0.2, agg="token-mean"),
    optim=OptimConfig(lr=1e-6, warmup_steps=5, weight_decay=0.01, grad_clip=1.0),
    update=UpdateConfig(ppo_epochs=1, mini_batches=4, micro_rows=2, pad_tokens=256, remat=True),
    prompts_per_step=128,
    steps=24,
    eval_every=6,
    checkpoint_every=6,
    out_dir="out/memory_r1_answer",
)
