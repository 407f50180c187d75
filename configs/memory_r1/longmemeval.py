"""Memory-R1 on LongMemEval (per-type accuracy with the official judge prompts), through python -m memjax.evaluate.

  python -m memjax.evaluate configs/memory_r1/longmemeval.py --set data_path=/path/to/longmemeval_s.json \
      --set model.hf_path=/path/to/answer_agent_hf [--set manager_hf_path=/path/to/manager_hf] \
      [--set judge=openai --set judge_url=http://host:8000/v1]
Per question: the manager builds a memory bank from the haystack sessions in order (banks cached in out_dir/banks/),
then the answer agent answers greedily from the top memories per speaker (the LoCoMo path). The official judge
(judge=openai, an OpenAI-compatible endpoint at judge_url) is the default; an unreachable judge exits 1. judge=rule is
a smoke-test reading, never LongMemEval accuracy; the official judge model is judge_model=gpt-4o-2024-08-06 (the
default), or
judge=engine with judge_hf_path (a local judge on a memjax Engine).
"""

from memjax.evaluation.longmemeval import LongMemEvalConfig

config = LongMemEvalConfig(system="memory_r1", judge="openai", out_dir="out/longmemeval_memory_r1")
