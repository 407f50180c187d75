"""SUMER's LoCoMo evaluation: greedy, one episode per question of the `sumer` split's validation part (the 9
conversations other than conv-48, 1,349 questions without category 5), the same evaluation memjax.train runs
every 50 steps; F1 (token-set) / BLEU-1 / J per category and overall, mean turns and tool calls per question,
episodes ended without an answer, wall time per question.

  python -m memjax.evaluate configs/sumer/eval.py --set agent.data_path=/path/to/locomo10.json \
      --set model.hf_path=/path/to/Qwen2.5-7B-Instruct [--set policy=out/sumer/hf] \
      [--set agent.judge=openai --set agent.judge_url=http://judge-host:8000/v1]
The rule judge is for smoke runs only (J from token-set F1 >= 0.5); the paper's J comes from gpt-oss-120b.
"""

from memjax.checkpoint.source import ModelSource
from memjax.cli.eval_config import SystemEvalConfig
from memjax.engine import EngineConfig
from memjax.systems.sumer.system import SumerSection

config = SystemEvalConfig(
    agent=SumerSection(split="sumer", eval_part="validation", eval_limit=0, judge="rule"),
    model=ModelSource(preset="qwen2.5-7b", dtype="bfloat16"),
    engine=EngineConfig(max_slots=128, page_size=64, window=32768, prefill_slots=16, prefill_chunk=2048,
                        rounds_per_sync=256),
    out_dir="out/locomo_sumer",
)
