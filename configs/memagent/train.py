"""MemAgent training recipe (the paper's RL-MemAgent settings) for GPU nodes.

  python -m memjax.train configs/memagent/train.py --set model.hf_path=/path/to/Qwen2.5-7B-Instruct \
      --set agent.data.path=/path/to/hotpot_train_v1.1.json
Multi-Conv DAPO: group 16, clip-higher 0.2/0.28, dual clip 3 (verl's default), Dr.GRPO advantages (mean
only), token-mean loss (Dr.GRPO constant = 1024 max response tokens, used by agg=seq-mean-token-sum-norm),
KL 1e-3 (k3) to the frozen reference, entropy 0, temperature 1.0,
lr 1e-6 constant after a 20-TRAINING-step warm-up, fp32 master weights with bf16 compute, chunk 5000, memory/final budgets 1024, 28K-token contexts (N = 200).
Trainer: packed rows of 2048/4096/8192 tokens (one compiled update per bucket), flash/cuDNN training attention,
bf16 reference. Mesh: every device on fsdp (ZeRO-3); memory plan: python -m memjax.plan configs/memagent/train.py
--devices 8 --hbm-gib 80 (BUILD.md).
"""

from memjax.checkpoint.source import ModelSource
from memjax.engine import EngineConfig
from memjax.rl.advantages import AdvantageConfig
from memjax.rl.trainer import LossConfig, OptimConfig, UpdateConfig
from memjax.run.train_config import TrainConfig
from memjax.systems import HotpotQAData, MemAgentSection
from memjax.systems.memagent.workflow import MemAgentConfig

config = TrainConfig(
    model=ModelSource(preset="qwen2.5-7b", dtype="float32", compute_dtype="bfloat16"),  # fp32 master weights
    # 768 slots: 96 per GPU on 8 data-parallel groups, the most whose full 8,192-token windows fit the 45 GiB of KV
    # the plan leaves per H100 (96 x 8,192 x 56 KiB = 42 GiB): decode never preempts, and a round reads the 15 GB of
    # weights for 96 sequences instead of 32
    engine=EngineConfig(max_slots=768, page_size=64, window=8192, prefill_slots=16, prefill_chunk=2048,
                        rounds_per_sync=256),
    agent=MemAgentSection(
        memagent=MemAgentConfig(chunk_tokens=5000, max_query_tokens=1024, max_memory_tokens=1024,
                                max_final_tokens=1024, group_size=16, temperature=1.0, top_p=1.0),
        data=HotpotQAData(num_docs=200)),
    prompts_per_step=128,
    advantage=AdvantageConfig(norm="mean"),
    loss=LossConfig(clip_low=0.2, clip_high=0.28, dual_clip=3.0, agg="token-mean", kl_coef=1e-3, kl_estimator="k3",
                    entropy_coef=0.0, loss_scale_tokens=1024),
    optim=OptimConfig(lr=1e-6, warmup_steps=20, weight_decay=0.01, grad_clip=1.0),
    update=UpdateConfig(ppo_epochs=1, mini_batches=16, micro_rows=8, pad_tokens=256, remat=True, attention="auto",
                        pack=True, row_buckets=(2048, 4096, 8192), max_segments=16, ref_dtype="bfloat16"),
    dynamic_sampling=True,
    steps=200,
    checkpoint_every=10,
    out_dir="out/memagent",
)
