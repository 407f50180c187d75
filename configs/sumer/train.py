"""SUMER training recipe (papers/sumer.txt; SPECS.md section 1) for GPU nodes: Qwen2.5-7B-Instruct, LoCoMo.

  python -m memjax.train configs/sumer/train.py --set model.hf_path=/path/to/Qwen2.5-7B-Instruct \
      --set agent.data_path=/path/to/locomo10.json --set agent.judge_url=http://judge-host:8000/v1
GRPO: group 8 at temperature 1.0, advantages (r - mean) / (std + eps) per group (population std,
advantage.std_ddof=0, as SUMER's official code writes it), token-level ratios clipped to [1 - 0.2, 1 + 0.28],
token-mean loss, no KL, no entropy term, no critic; lr 1e-6; 32 questions x 8 episodes per step and ONE
optimizer step per rollout batch (mini-batch = batch); 400 steps; greedy validation (one episode per
question of the `sumer` split's 9 validation conversations) every 50 steps. Episodes: up to 20 assistant
turns, 5 tool calls per turn, prompt <= 8,192 tokens, response (policy + tool tokens) <= 24,576
tokens, so the engine window is 32,768 (Qwen2.5-7B's context); reward J x F1 when an answer is submitted,
-1 otherwise, J from an LLM judge at an OpenAI-compatible endpoint (the paper: gpt-oss-120b).
Choices the paper leaves open, as fields: agent.episode.max_turn_tokens (1,024 generated tokens per assistant
turn), agent.episode.tools (semantic top-5, keyword hits shown <= 10, +-2 neighbours within the session),
agent.embedder (WordLlama offline; the paper's Qwen3-Embedding-0.6B vectors via file:PATH), the system
prompt (memjax/systems/sumer/workflow.py DEFAULT_SYSTEM), optim warm-up 0 / weight decay 0.01 / grad clip 1.0 (VERL's
defaults), micro-batches of 4 rows with rematerialisation (rounded up to a multiple of data x fsdp: 8 rows of
32,768 tokens, one per device, on one 8-GPU node). Memory plan (8 x 80 GiB, BUILD.md):
  python -m memjax.plan configs/sumer/train.py --devices 8 --hbm-gib 80
"""

from memjax.checkpoint.source import ModelSource
from memjax.engine import EngineConfig
from memjax.rl.advantages import AdvantageConfig
from memjax.rl.trainer import LossConfig, OptimConfig, UpdateConfig
from memjax.run.train_config import TrainConfig
from memjax.systems.sumer.system import SumerSection
from memjax.systems.sumer.tools import ToolsConfig
from memjax.systems.sumer.workflow import SumerConfig

config = TrainConfig(
    model=ModelSource(preset="qwen2.5-7b", dtype="float32", compute_dtype="bfloat16"),  # fp32 master weights
    engine=EngineConfig(max_slots=256, page_size=64, window=32768, prefill_slots=16, prefill_chunk=2048,
                        rounds_per_sync=256),
    agent=SumerSection(
        group_size=8, temperature=1.0, split="sumer", train_part="train", eval_part="validation",
        episode=SumerConfig(max_turns=20, max_calls_per_turn=5, max_prompt_tokens=8192, max_response_tokens=24576,
                            max_turn_tokens=1024, no_answer_reward=-1.0,
                            tools=ToolsConfig(semantic_k=5, keyword_max_hits=10, context_turns=2,
                                              cross_sessions=False)),
        embedder="wordllama", judge="openai", judge_model="gpt-oss-120b"),
    prompts_per_step=32,
    advantage=AdvantageConfig(estimator="grpo", norm="mean_std", std_ddof=0),  # SUMER: population std
    loss=LossConfig(clip_low=0.2, clip_high=0.28, agg="token-mean", kl_coef=0.0, entropy_coef=0.0),
    optim=OptimConfig(lr=1e-6, warmup_steps=0, weight_decay=0.01, grad_clip=1.0),
    update=UpdateConfig(ppo_epochs=1, mini_batches=1, micro_rows=4, pad_tokens=1024, remat=True),
    steps=400,
    eval_every=50,
    checkpoint_every=10,
    out_dir="out/sumer",
)
