"""Memory-R1 (its paper): a Memory Manager emits ADD / UPDATE / DELETE / NOOP on a memory bank and an Answer Agent
distils the retrieved memories and answers; each is trained with PPO (with a critic) or GRPO on exact match, the
other held fixed.

This folder is everything only Memory-R1 needs; the memory bank and retrieval, LoCoMo data and metrics, the critic
and GAE, the workflow driver and the training loop are shared.
- `prompts.py`: the paper's Figs. 9, 11, 12 and Mem0's wrappers, with their parsers; `data.py`: turns, QA items,
  retrieval over a changing bank, the training tuples; `workflow.py`: construction, manager and answer-agent
  workflows; `system.py`: the `memory_r1_manager` (stage 1) and `memory_r1_answer` (stage 2) Systems;
  `locomo_eval.py` / `longmemeval_eval.py`: the "memory_r1" predictors of `python -m memjax.evaluate`.
- `tiny/`: the tiny manager and answer-agent tasks, their noisy-teacher warm starts, the fixed-policy baselines and
  their Systems ("memory_r1_tiny", "memory_r1_answer_tiny"); studies in docs/memory_r1.md.
Reproduces: both stages, PPO with GAE and GRPO, the LoCoMo `memory_r1` split, memory distillation and its ablation.
Differs: one frozen copy of the initial policy plays every untrained part (the paper used GPT-4o-mini); system.py.
"""

from . import locomo_eval, longmemeval_eval, system  # noqa: F401  (register "memory_r1" on LoCoMo and LongMemEval, "memory_r1_manager", "memory_r1_answer")
from .tiny import answer_system as _tiny_answer_system, system as _tiny_system  # noqa: F401  (register the tiny ones)
from .tiny import longmemeval_tiny as _tiny_lme  # noqa: F401  ("memory_r1_tiny" on LongMemEval)
