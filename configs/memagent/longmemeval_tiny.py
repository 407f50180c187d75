"""MemAgent's tiny trained policy on the tiny-vocabulary LongMemEval fixture, through python -m memjax.evaluate.

  python -m memjax.evaluate configs/memagent/longmemeval_tiny.py
The fixture (tests/fixtures/data/longmemeval_tiny.json, written by scripts/gen_longmemeval_tiny_fixture.py) is
LongMemEval's layout in the tiny tasks' words: every turn a fact `K in P .`, every question `where is K ?`. The
haystack's facts are the tiny task's document, read 3 facts per chunk into a 2-fact memory, then answered in
\\boxed{} (memjax/systems/memagent/tiny/longmemeval_tiny.py). policy: "" = the shipped warm start
(memjax/assets/tiny/warmstart), "random" = random weights (the control), or a tiny training run's out_dir/hf
(memjax.train with configs/tiny.py writes out/tiny/hf): --set policy=out/tiny/hf. Judge: exact match (the tiny
vocabulary cannot write a sentence for an LLM judge; the real configs keep the official one).
"""

from memjax.evaluation.longmemeval import LongMemEvalConfig

FIXTURE = "tests/fixtures/data/longmemeval_tiny.json"  # repository-relative: the commands run from its root

config = LongMemEvalConfig(system="memagent_tiny", judge="exact", data_path=FIXTURE,
                           out_dir="out/longmemeval_memagent_tiny", question_date=False, batch_size=16)
