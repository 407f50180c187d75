"""Memory-R1's tiny trained policies on the tiny-vocabulary LongMemEval fixture, through python -m memjax.evaluate.

  python -m memjax.evaluate configs/memory_r1/longmemeval_tiny.py
The fixture (tests/fixtures/data/longmemeval_tiny.json, written by scripts/gen_longmemeval_tiny_fixture.py) is
LongMemEval's layout in the tiny tasks' words: every turn a fact `K in P .`, every question `where is K ?`. The
manager (policy) builds each haystack's bank fact by fact (add / update i / delete i / none on the records it is
shown), then the answer agent (answer_policy) selects from the bank and answers, greedy
(memjax/systems/memory_r1/tiny/longmemeval_tiny.py); recall@k columns rank the bank for the question. policy /
answer_policy: "" = the shipped warm starts (memjax/assets/tiny/r1_warmstart, r1_answer_warmstart), "random" =
random weights (the control), or a tiny training run's out_dir/hf (memjax.train with configs/memory_r1/tiny.py
writes out/memory_r1_tiny/hf, with configs/memory_r1/tiny_answer.py out/memory_r1_answer_tiny/hf: the answer agent's):
--set policy=out/memory_r1_tiny/hf --set answer_policy=out/memory_r1_answer_tiny/hf. Judge: exact match (the real
configs keep the official LLM judge).
"""

from memjax.evaluation.longmemeval import LongMemEvalConfig

FIXTURE = "tests/fixtures/data/longmemeval_tiny.json"  # repository-relative: the commands run from its root

config = LongMemEvalConfig(system="memory_r1_tiny", judge="exact", data_path=FIXTURE,
                           out_dir="out/longmemeval_memory_r1_tiny", question_date=False, batch_size=16)
