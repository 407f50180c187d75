"""MemAgent's Table 2 evaluation, CPU-sized: the same pipeline as configs/memagent/eval.py at N = 50 documents
(~7K tokens, the paper's first column) for 2 questions, on a random 2-layer model with Qwen2.5's real vocabulary.

  python -m memjax.evaluate configs/memagent/eval_cpu.py

It checks the harness end to end on any machine in about a minute (a random model scores 0): the RULER-HotpotQA
synthesis from the repository's HotpotQA excerpt, the official chunking (5000-token chunks, 1024-token memory),
sampling at ruler_hqa.py's temperature 0.7 / top-p 0.95, the official per-item scores, the table beside the paper's
numbers, the plot and the report page. For a real model: configs/memagent/eval.py.
"""

from memjax.checkpoint.source import ModelSource
from memjax.cli.eval_config import EvalConfig
from memjax.engine import EngineConfig
from memjax.systems.memagent.workflow import MemAgentConfig

config = EvalConfig(
    model=ModelSource(preset="tiny-qwen-vocab", dtype="float32"),
    engine=EngineConfig(max_slots=4, page_size=64, window=8192, prefill_slots=2, prefill_chunk=1024, schedule="split"),
    memagent=MemAgentConfig(chunk_tokens=5000, max_query_tokens=1024, max_memory_tokens=1024,
                            max_final_tokens=1024, temperature=0.7, top_p=0.95, record_conversations=False),
    data_path="tests/fixtures/data/hotpotqa_dev_excerpt.json",
    num_docs=(50,),
    num_samples=2,
    baseline=False,
    out_dir="out/memagent_eval_cpu",
)
