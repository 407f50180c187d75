"""Memory-R1 on the LoCoMo `memory_r1` test split (F1 / BLEU-1 / J per category), through python -m memjax.evaluate.

  python -m memjax.evaluate configs/memory_r1/eval.py --set data_path=/path/to/locomo10.json \
      --set model.hf_path=/path/to/answer_agent_hf [--set manager_hf_path=/path/to/manager_hf] \
      [--set distill=false]  [--set judge=openai --set judge_url=http://host:8000/v1]
Builds each test conversation's memory bank with the manager (extraction + Fig. 9 operations; banks cached in
out_dir/banks/), then answers every question greedily from the top 30 memories per speaker (Fig. 11).
`distill=false` is the memory-distillation ablation. The rule judge is for smoke runs only: the paper's J is an LLM
judge (judge=openai).
"""

from memjax.evaluation import LocomoEvalConfig

config = LocomoEvalConfig(system="memory_r1", split="memory_r1", part="test", judge="rule",
                          out_dir="out/locomo_memory_r1")
