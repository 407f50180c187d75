"""Memory-R2 (its paper and its public code ahmedehabb/Memory-R2): one policy in two roles (fact
extraction, memory management) builds a memory bank over a conversation's chunked sessions; trained with
LoGo-GRPO (global trajectory groups plus local re-rollouts from cached bank snapshots, each standardised in its own
group), length-normalised step-level ratios with a dual clip, a compression penalty and a session curriculum.

This folder is everything only Memory-R2 needs; the memory bank, LoCoMo data and metrics, the step-level ratio
kernel and losses (memjax/kernels, memjax/rl), the curriculum loop (memjax/run/curriculum.py), the workflow driver and
the training loop are shared. docs/memory_r2.md is the long form.
- `prompts.py` (+ `system_prompts.py`): the public code's templates byte for byte; `messages.py`: message building
  and output parsing; `reward.py`: question crediting, the frozen answer agent, F1 minus the compression penalty;
  `workflow.py`: the episode (global chains and local re-rollouts); `system.py`: the `memory_r2` System, the
  LoGo-GRPO credit rule and the curriculum stages.
- `tiny/`: the tiny multi-session task (`task.py`), its noisy-teacher warm start (`warmstart.py`) and the
  "memory_r2_tiny" System (`system.py`).
Reproduces: LoGo-GRPO, step-level ratios with dual clip, the compression penalty, the 8 -> 16 -> 32 session
curriculum with best-checkpoint hand-offs, the public code's prompts, parsers and metrics. Differs: the frozen
answer agent is a copy of the initial policy on a second engine (the paper serves a separate model).
"""

from . import longmemeval_eval, system  # noqa: F401  (registers "memory_r2"; "memory_r2" on LongMemEval)
from .tiny import system as _tiny_system  # noqa: F401  (registers "memory_r2_tiny")
from .tiny import longmemeval_tiny as _tiny_lme  # noqa: F401  ("memory_r2_tiny" on LongMemEval)
