"""Memory-R2 pipeline smoke run on CPU: the paper recipe (configs/memory_r2/train.py) shrunk to a random tiny model
with the Qwen2.5 vocabulary (`tiny-qwen-vocab`), one training conversation truncated to 1 then 2 sessions,
K = 2 chunks, n = 2 rollouts, every session re-rolled locally (m = 2), 8-token responses, the rule-based
answer agent and the hashed bag-of-words embedder. NOT a learning run: random weights write no valid JSON
(every fact / operation output is a counted no-op), so rewards are flat; it exercises rollout (global and
local, continued chats), LoGo credit, the step-level update with entropy and KL, evaluation, checkpoints and
the curriculum stage restart (stages of 1 and 2 sessions, one step each).

  python -m memjax.train configs/memory_r2/smoke.py --set agent.locomo_path=/path/to/locomo10.json
"""

from memjax.checkpoint.source import ModelSource
from memjax.engine import EngineConfig, KVCacheOptions
from memjax.rl.trainer import LossConfig, OptimConfig, UpdateConfig
from memjax.run.train_config import TrainConfig
from memjax.systems import MemoryR2Section

config = TrainConfig(
    model=ModelSource(preset="tiny-qwen-vocab"),
    engine=EngineConfig(max_slots=8, page_size=16, window=4096, prefill_slots=4, prefill_chunk=512, progress=False,
                        kv=KVCacheOptions(kv_cache_bytes=128 << 20)),
    agent=MemoryR2Section(
        locomo_path="../shared/data/locomo/locomo10.json", train_conversations=("conv-43",), eval_part="validation",
        eval_max_sessions=1, curriculum_steps=(0, 1), curriculum_sessions=(1, 2), chunks_per_session=2,
        max_prompt_tokens=4000, max_response_tokens=8, group_size=2, local_prob=1.0, local_rollouts=2,
        embedder="hashed", answer_agent="overlap", adv_singleton="reward"),
    prompts_per_step=1,
    loss=LossConfig(level="step", clip_low=0.2, clip_high=0.2, dual_clip=3.0, log_ratio_clamp=3.0,
                    log_ratio_clamp_mode="upper",  # the official clamp: mean log-ratio <= 3, no lower bound
                    kl_coef=1e-3, kl_estimator="k3", entropy_coef=1e-3),
    optim=OptimConfig(lr=2e-6, warmup_steps=0, grad_clip=1.0),
    update=UpdateConfig(ppo_epochs=1, mini_batches=1, micro_rows=4, pad_tokens=256),
    steps=2,
    select_metric="f1/all",  # stage 1 starts from stage 0's best (here its only evaluation, step 1)
    checkpoint_every=1,
    out_dir="out/memory_r2_smoke",
)
