"""LoCoMo evaluation of predictions made elsewhere (any system's answers JSONL), on a named split.

  python -m memjax.evaluate configs/locomo_answers.py --set data_path=/path/to/locomo10.json \
      --set answers=/path/to/answers.jsonl [--set judge=openai --set judge_url=http://host:8000/v1]
Writes predictions.jsonl (per question, resumable), results.json / results.md (F1, BLEU-1, J and M-Fail per
category and overall, in the papers' layout) and scores.png to out_dir. The rule judge is for tests only;
the papers' J comes from an LLM judge (judge=openai: an OpenAI-compatible endpoint, e.g. gpt-oss-120b).
"""

from memjax.evaluation import LocomoEvalConfig

config = LocomoEvalConfig(system="answers", split="memory_r1", part="test", judge="rule",
                          out_dir="out/locomo_answers")
