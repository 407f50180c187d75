"""Memory-R1 (its paper): a Memory Manager emits ADD / UPDATE / DELETE / NOOP on a memory bank and an
Answer Agent distils the retrieved memories and answers; each is trained with PPO (with a critic) or GRPO on
exact match, the other held fixed.

This folder is everything only Memory-R1 needs; the memory bank, embedders and retrieval, LoCoMo data and metrics,
the critic and GAE (memjax/rl), the workflow driver and the training loop are shared.
- `prompts.py`: the paper's Figs. 9, 11, 12 and Mem0's wrappers, with their output parsers; `data.py`: dialogue
  turns, QA items, retrieval over a changing bank, the training tuples; `workflow.py`: memory construction, the
  manager (single step, frozen-answer-agent reward) and answer-agent workflows; `system.py`: the
  `memory_r1_manager` (stage 1) and `memory_r1_answer` (stage 2) Systems; `locomo_eval.py`: the "memory_r1"
  predictor of `python -m memjax.evaluate` on LoCoMo (registered with memjax/evaluation/locomo.py on import);
  `longmemeval_eval.py`: the same on LongMemEval (memjax/evaluation/longmemeval.py).
- `tiny/`: the tiny manager task and the tiny answer-agent task (`task.py`, `answer_task.py`), their shipped
  noisy-teacher warm starts (`warmstart.py`, `answer_warmstart.py`), the fixed-policy baselines (`fixed.py`) and
  their Systems (`system.py`: "memory_r1_tiny", `answer_system.py`: "memory_r1_answer_tiny").
Reproduces: both stages, PPO with GAE and GRPO, the LoCoMo `memory_r1` split (train conv-26), memory distillation
and its ablation. Differs: one frozen copy of the initial policy plays every untrained part (the paper used
GPT-4o-mini for the extractor and the bank-building manager); see system.py.
"""

from . import locomo_eval, longmemeval_eval, system  # noqa: F401  (register "memory_r1" on LoCoMo and LongMemEval, "memory_r1_manager", "memory_r1_answer")
from .tiny import answer_system as _tiny_answer_system, system as _tiny_system  # noqa: F401  (register the tiny ones)
from .tiny import longmemeval_tiny as _tiny_lme  # noqa: F401  ("memory_r1_tiny" on LongMemEval)
