"""Evaluation config: MemAgent on RULER-HotpotQA at every length of the paper's Table 2, as its authors ran it.

Run: python -m memjax.evaluate configs/memagent/eval.py --set model.hf_path=/path/to/RL-MemAgent-7B \
     --set data_path=/path/to/memagent_eval --set docs_path=/path/to/hotpotqa_dev.json
data_path: a directory of MemAgent's official eval_{N}.json files (N = 50 ... 25600; the N >= 12800 files hold
document numbers into docs_path, the HotpotQA dev JSON), or a raw HotpotQA JSON (contexts synthesised here, not the
paper's items), or one question file (official parquet / eval JSON / plain JSONL; memjax/data/memagent_files.py).
The lengths are the official script's (taskutils/memory_eval/run.py: RULER_HQA_TESTS 50 ... 6400, ~7K ... 896K
tokens, and RULER_HQA_TESTS_OVER_1M 12800, 25600, ~1.75M and 3.5M tokens); sampling is ruler_hqa.py's
(temperature 0.7, top-p 0.95, one sample per question); chunk 5000, memory and answer budgets 1024 (the
RECURRENT_* settings of its MemAgent runs); scores are the official per-item rules (metrics=memagent). The run
resumes after a crash (finished questions are read back from out_dir/traces.jsonl) and writes the per-length table
and the accuracy-vs-length plot beside the paper's numbers (results.md, accuracy.png, report.html).
Without model.hf_path the model is random (pipeline check only).
"""

from memjax.checkpoint.source import ModelSource
from memjax.cli.eval_config import EvalConfig
from memjax.engine import EngineConfig
from memjax.systems.memagent.paper import OFFICIAL_LENGTHS, OVER_1M_LENGTHS
from memjax.systems.memagent.workflow import MemAgentConfig

config = EvalConfig(
    model=ModelSource(preset="qwen2.5-7b", dtype="bfloat16"),
    # split schedule on every backend (auto picks it on GPUs, mixed on CPU): each turn is a ~5,000-token prefill, which
    # the mixed schedule's attention reads once per token row; a 5,130-token chunk + 32 sampled tokens with
    # tiny-qwen-vocab on CPU took 2.9 CPU-s split vs 7.0 mixed, prefill alone 1.7 vs 5.5 (BUILD.md issue 49)
    engine=EngineConfig(max_slots=128, page_size=64, window=8192, prefill_slots=16, prefill_chunk=2048,
                        schedule="split"),
    memagent=MemAgentConfig(chunk_tokens=5000, max_query_tokens=1024, max_memory_tokens=1024,
                            max_final_tokens=1024, temperature=0.7, top_p=0.95, record_conversations=False),
    num_docs=OFFICIAL_LENGTHS + OVER_1M_LENGTHS,
    num_samples=128,
    out_dir="out/memagent_eval",
)
