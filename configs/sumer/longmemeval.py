"""SUMER on LongMemEval (per-type accuracy with the official judge prompts), through python -m memjax.evaluate.

  python -m memjax.evaluate configs/sumer/longmemeval.py --set data_path=/path/to/longmemeval_s.json \
      --set model.hf_path=/path/to/Qwen2.5-7B-Instruct [--set judge=openai --set judge_url=http://host:8000/v1]
Per question: the haystack's messages are the searchable memory (semantic and keyword search, context windows), the
policy searches greedily for up to max_turns turns and submits its answer (the LoCoMo episode); recall@k columns say
whether its searches showed the evidence turns. Point model.hf_path at a trained policy (e.g. out/sumer/hf). The
official judge (judge=openai) is the default, an unreachable one exits 1; judge=rule is a smoke-test reading, never
LongMemEval accuracy; the official judge model is judge_model=gpt-4o-2024-08-06.
"""

from memjax.checkpoint.source import ModelSource
from memjax.engine import EngineConfig
from memjax.evaluation.longmemeval import LongMemEvalConfig

config = LongMemEvalConfig(
    system="sumer", judge="openai", out_dir="out/longmemeval_sumer",
    model=ModelSource(preset="qwen2.5-7b", dtype="bfloat16"),
    engine=EngineConfig(max_slots=128, page_size=64, window=32768, prefill_slots=16, prefill_chunk=2048,
                        rounds_per_sync=256),
    max_prompt_tokens=8192, max_response_tokens=24576, max_turns=20,
)
