"""Memory-R2's tiny trained policy on the tiny-vocabulary LongMemEval fixture, through python -m memjax.evaluate.

  python -m memjax.evaluate configs/memory_r2/longmemeval_tiny.py
The fixture (tests/fixtures/data/longmemeval_tiny.json, written by scripts/gen_longmemeval_tiny_fixture.py) is
LongMemEval's layout in the tiny tasks' words: every turn a fact `K in P .`, every question `where is K ?`. Session
by session the policy decides an op per fact (add / update / skip) on the bank it sees, greedy, and the task's frozen
reader answers from the final bank (memjax/systems/memory_r2/tiny/longmemeval_tiny.py). policy: "" = the shipped
warm start (memjax/assets/tiny/r2_warmstart), "random" = random weights (the control), or a tiny training run's
out_dir/hf (memjax.train with configs/memory_r2/tiny.py writes out/memory_r2_tiny/hf): --set
policy=out/memory_r2_tiny/hf. Judge: exact match (the
real configs keep the official LLM judge).
"""

from memjax.evaluation.longmemeval import LongMemEvalConfig

FIXTURE = "tests/fixtures/data/longmemeval_tiny.json"  # repository-relative: the commands run from its root

config = LongMemEvalConfig(system="memory_r2_tiny", judge="exact", data_path=FIXTURE,
                           out_dir="out/longmemeval_memory_r2_tiny", question_date=False, batch_size=16)
