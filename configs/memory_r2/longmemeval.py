"""Memory-R2 on LongMemEval (per-type accuracy with the official judge prompts), through python -m memjax.evaluate.

  python -m memjax.evaluate configs/memory_r2/longmemeval.py --set data_path=/path/to/longmemeval_s.json \
      --set model.hf_path=/path/to/Qwen2.5-7B-Instruct [--set judge=openai --set judge_url=http://host:8000/v1]
Per question: the policy's extractor and manager build the memory bank session by session over the haystack (greedy,
no local branch: MemoryR2System's held-out episode), then the frozen answer agent (answer_hf_path, "" = a copy of the
policy's initial weights) answers from the final bank. Point model.hf_path at a trained policy. The official judge
(judge=openai, an OpenAI-compatible endpoint at judge_url) is the default; an unreachable judge exits 1. judge=rule is
a smoke-test reading, never LongMemEval accuracy; the official judge model is judge_model=gpt-4o-2024-08-06.
"""

from memjax.checkpoint.source import ModelSource
from memjax.engine import EngineConfig
from memjax.evaluation.longmemeval import LongMemEvalConfig

config = LongMemEvalConfig(
    system="memory_r2", judge="openai", out_dir="out/longmemeval_memory_r2",
    model=ModelSource(preset="qwen2.5-7b", dtype="bfloat16"),
    engine=EngineConfig(max_slots=64, page_size=64, window=32768, prefill_slots=8, prefill_chunk=2048),
    max_prompt_tokens=28_672, max_response_tokens=4_096,
)
