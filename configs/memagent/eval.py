"""Evaluation config: MemAgent on RULER-HotpotQA at the paper's test lengths (N = 50, 100, 200 documents).

Run: python -m memjax.evaluate configs/memagent/eval.py --set model.hf_path=/path/to/Qwen2.5-7B-Instruct \
     --set data_path=/path/to/hotpot_dev_distractor_v1.json
Without model.hf_path the model is random (pipeline check only).
"""

from memjax.systems.memagent.workflow import MemAgentConfig
from memjax.engine import EngineConfig
from memjax.eval_config import EvalConfig
from memjax.modelsource import ModelSource

config = EvalConfig(
    model=ModelSource(preset="qwen2.5-7b", dtype="bfloat16"),
    engine=EngineConfig(max_slots=128, page_size=64, window=8192, prefill_slots=16, prefill_chunk=2048),
    memagent=MemAgentConfig(chunk_tokens=5000, max_query_tokens=1024, max_memory_tokens=1024,
                            max_final_tokens=1024, temperature=0.0),
    num_docs=(50, 100, 200),
    num_samples=128,
)
