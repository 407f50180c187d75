"""Memory-R2 training recipe (paper + its public code's launchers) for GPU nodes.

  python -m memjax.train configs/memory_r2/train.py --set model.hf_path=/path/to/Qwen2.5-7B-Instruct \
      --set agent.locomo_path=/path/to/locomo10.json
One policy in two roles (extractor, manager), K = 6 chunks per session, per-fact candidates (top 5, cosine
>= 0.1, at most 25), 28,672 prompt / 4,096 response tokens per call; LoGo-GRPO: n = 16 global rollouts, sessions
chosen for local re-rollouts with p = 0.5, m = 4 sampled re-rollouts from the anchor's snapshot; reward =
token-set F1 of the frozen answer agent - 0.3 * max(0, Tok(M) - 0.7 C_t) / C_t; step-level length-normalised
ratios (mean log-ratio clamped at 3 from above only, as the official code) with clip 0.2 and dual clip 3,
entropy 1e-3, k3 KL 1e-3 (the launchers' value; the curriculum script uses 1e-2); a group of one gets
A = r / (1 + 1e-6) (agent.adv_singleton="reward", the official rule); lr 2e-6 constant, gradient clip 1.0,
2 PPO epochs, mini-batches of 16 trajectories (the 2 training conversations x 16 rollouts = 32 trajectories
per step -> 2 optimizer steps per epoch); temperature 1 for training, greedy evaluation on conv-44
(validation) with all sessions.
Curriculum 8 -> 16 -> 32 sessions by step (agent.curriculum_steps / curriculum_sessions); each stage starts
from the previous stage's best validation checkpoint (select_metric f1/all on conv-44, all sessions,
evaluated every 5 steps as the public curriculum script's test_freq and at each stage's end; fresh optimizer
state and KL reference = the restored weights, as that script's new launch per stage: memjax/run/curriculum.py).
Paper-silent choices are MemoryR2Section fields (docs/memory_r2.md). The answer agent is a frozen copy of the
initial policy on its own engine (the paper serves GPT-OSS-120B separately); the embedder is wordllama
(the paper uses OpenAI text-embedding-3-small, not available offline).
Memory plan (8 x 80 GiB at 32K-token rows, BUILD.md; counts the answer agent, a bf16 copy with its own
agent.answer_kv_cache_bytes = 4 GiB pool; update.micro_rows=1 rounds up to one row per device):
  python -m memjax.plan configs/memory_r2/train.py --devices 8 --hbm-gib 80
"""

from memjax.checkpoint.source import ModelSource
from memjax.engine import EngineConfig
from memjax.rl.trainer import LossConfig, OptimConfig, UpdateConfig
from memjax.run.train_config import TrainConfig
from memjax.systems import MemoryR2Section

config = TrainConfig(
    model=ModelSource(preset="qwen2.5-7b", dtype="float32", compute_dtype="bfloat16"),
    engine=EngineConfig(max_slots=128, page_size=64, window=32_768, prefill_slots=8, prefill_chunk=4096,
                        rounds_per_sync=256),
    agent=MemoryR2Section(
        train_conversations=("conv-43", "conv-47"), eval_part="validation",
        curriculum_steps=(0, 10, 20), curriculum_sessions=(8, 16, 32),
        chunks_per_session=6, max_prompt_tokens=28_672, max_response_tokens=4_096,
        top_k_per_fact=5, similarity_threshold=0.1, max_candidates=25,
        group_size=16, local_prob=0.5, local_rollouts=4, local_decoding="sample", temperature=1.0,
        questions_global=64, questions_local=16, lam=0.3, alpha=0.7,
        embedder="wordllama", answer_agent="policy_copy", answer_top_k=30,
        adv_singleton="reward"),  # a group of one: A = r / (1 + eps), as the official code
    prompts_per_step=2,  # the training conversations
    loss=LossConfig(level="step", clip_low=0.2, clip_high=0.2, dual_clip=3.0, log_ratio_clamp=3.0,
                    log_ratio_clamp_mode="upper",  # the official clamp: mean log-ratio <= 3, no lower bound
                    kl_coef=1e-3, kl_estimator="k3", entropy_coef=1e-3),
    optim=OptimConfig(lr=2e-6, warmup_steps=0, grad_clip=1.0),
    update=UpdateConfig(ppo_epochs=2, mini_batches=2, micro_rows=1, pad_tokens=512, remat=True),
    steps=30,
    eval_every=5,
    select_metric="f1/all",
    stage_restart="best",
    stage_optimizer="reset",
    stage_reference="best",
    checkpoint_every=1,
    out_dir="out/memory_r2",
)
