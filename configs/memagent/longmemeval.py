"""MemAgent on LongMemEval (per-type accuracy with the official judge prompts), through python -m memjax.evaluate.

  python -m memjax.evaluate configs/memagent/longmemeval.py --set data_path=/path/to/longmemeval_s.json \
      --set model.hf_path=/path/to/Qwen2.5-7B-Instruct [--set judge=openai --set judge_url=http://host:8000/v1]
Per question: the haystack (sessions with their dates, one "role: content" paragraph per turn) is MemAgent's long
document, read in chunks of chunk_tokens into a memory of memory_tokens, then the question (with its date) is answered
greedily from the memory. Point model.hf_path at a trained policy (e.g. out/memagent/hf). The rule judge is for smoke
runs only; the official score is judge=openai with judge_model=gpt-4o-2024-08-06.
"""

from memjax.checkpoint.source import ModelSource
from memjax.engine import EngineConfig
from memjax.evaluation.longmemeval import LongMemEvalConfig

config = LongMemEvalConfig(
    system="memagent", judge="openai", out_dir="out/longmemeval_memagent",
    model=ModelSource(preset="qwen2.5-7b", dtype="bfloat16"),
    engine=EngineConfig(max_slots=64, page_size=64, window=8192, prefill_slots=8, prefill_chunk=2048),
    chunk_tokens=5000, memory_tokens=1024, max_response_tokens=1024,
)
