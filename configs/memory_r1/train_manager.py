"""Memory-R1 stage 1: the Memory Manager trained with the answer agent frozen (papers/memory-r1.txt, SPECS.md 2).

  python -m memjax.train configs/memory_r1/train_manager.py --set model.hf_path=/path/to/Qwen2.5-7B-Instruct \
      --set agent.data_path=/path/to/locomo10.json
PPO (the default here): critic initialised from the policy with a value head, GAE (gamma = lam = 1, VERL's
defaults; the paper gives none), advantages whitened, value clipping 0.5 (VERL's cliprange_value), actor lr 1e-6,
critic lr 1e-5, constant after warm-up. GRPO instead:
  --set advantage.estimator=grpo --set advantage.norm=mean_std --set agent.group_size=8
Batch 128 manager tuples per step (Alg. 1 single-step tuples of the `memory_r1` split's train conversation,
conv-26; held-out evaluation on conv-30), prompt <= 4,096 and response <= 2,048 tokens, temperature 1.0 for
training and 0 for evaluation. Reward: exact match of the frozen answer agent (a copy of the initial policy on
its own engine; `agent.frozen_hf_path` for another checkpoint) after applying the sampled operations. Steps are
not given by the paper: 20 steps of 128 cover the ~150-200 tuples of conv-26 about 15 times.
Memory plan (8 x 80 GiB, BUILD.md; counts the critic and the frozen answer agent with its 4 GiB pool;
update.micro_rows=2 rounds up to one row per device):
  python -m memjax.plan configs/memory_r1/train_manager.py --devices 8 --hbm-gib 80
"""

from memjax.checkpoint.source import ModelSource
from memjax.engine import EngineConfig
from memjax.rl.advantages import AdvantageConfig
from memjax.rl.credit import CriticConfig
from memjax.rl.trainer import LossConfig, OptimConfig, UpdateConfig
from memjax.run.train_config import TrainConfig
from memjax.systems.memory_r1.system import MemoryR1ManagerSection

config = TrainConfig(
    agent=MemoryR1ManagerSection(group_size=1, temperature=1.0, split="memory_r1", max_prompt_tokens=4096,
                                 max_response_tokens=2048, history_turns=50, eval_limit=128),
    model=ModelSource(preset="qwen2.5-7b", dtype="float32", compute_dtype="bfloat16"),
    engine=EngineConfig(max_slots=128, page_size=64, window=6144, prefill_slots=8, prefill_chunk=2048,
                        rounds_per_sync=256),
    advantage=AdvantageConfig(estimator="gae", gamma=1.0, lam=1.0, whiten=True),
    critic=CriticConfig(lr=1e-5, warmup_steps=0, clip_value=0.5),
    loss=LossConfig(clip_low=0.2, clip_high=0.2, agg="token-mean"),
    optim=OptimConfig(lr=1e-6, warmup_steps=5, weight_decay=0.01, grad_clip=1.0),
    update=UpdateConfig(ppo_epochs=1, mini_batches=4, micro_rows=2, pad_tokens=256, remat=True),
    prompts_per_step=128,
    steps=20,
    eval_every=5,
    checkpoint_every=5,
    out_dir="out/memory_r1_manager",
)
