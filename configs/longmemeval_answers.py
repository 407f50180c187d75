"""LongMemEval scoring of hypotheses made elsewhere (the official hypothesis file: JSONL of {question_id, hypothesis}).

  python -m memjax.evaluate configs/longmemeval_answers.py --set data_path=/path/to/longmemeval_s.json \
      --set answers=/path/to/hypotheses.jsonl [--set judge=openai --set judge_url=http://host:8000/v1]
Writes predictions.jsonl (per question, resumable; a failed judge call is left unscored and asked again on a re-run),
results.json / results.md (accuracy per question type, task-averaged, overall and abstention, in the paper's layout)
and scores.png to out_dir. The official judge (judge=openai, an unreachable one exits 1) is the default,
with the official judge_model=gpt-4o-2024-08-06 (or judge=engine with judge_hf_path: a local model on a memjax
Engine); OPENAI_API_KEY
is sent as the bearer token when set. A question without a line in the hypothesis file is judged as an empty response
and counted (counts.no_answer); the official script would leave it out of the accuracy.
"""

from memjax.evaluation.longmemeval import LongMemEvalConfig

config = LongMemEvalConfig(system="answers", judge="openai", out_dir="out/longmemeval_answers")
