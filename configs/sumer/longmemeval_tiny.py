"""SUMER's tiny trained policy on the tiny-vocabulary LongMemEval fixture, through python -m memjax.evaluate.

  python -m memjax.evaluate configs/sumer/longmemeval_tiny.py
The fixture (tests/fixtures/data/longmemeval_tiny.json, written by scripts/gen_longmemeval_tiny_fixture.py) is
LongMemEval's layout in the tiny tasks' words: every turn a fact `K in P .`, every question `where is K ?`. Each turn
is one searchable record with its session number; the policy searches (keyword, optional session filter) and submits,
greedy, up to 4 tool rounds (memjax/systems/sumer/tiny/longmemeval_tiny.py); recall@k columns say whether its searches
showed the evidence turns. policy: "" = the shipped warm start (memjax/assets/tiny/sumer_warmstart), "random" =
random weights (the control), or a tiny training run's out_dir/hf (memjax.train with configs/sumer/tiny.py
writes out/tiny_sumer/hf): --set policy=out/tiny_sumer/hf. Judge: exact match (the real configs keep the official
LLM judge).
"""

from memjax.evaluation.longmemeval import LongMemEvalConfig

FIXTURE = "tests/fixtures/data/longmemeval_tiny.json"  # repository-relative: the commands run from its root

config = LongMemEvalConfig(system="sumer_tiny", judge="exact", data_path=FIXTURE,
                           out_dir="out/longmemeval_sumer_tiny", question_date=False, max_turns=4, batch_size=16)
