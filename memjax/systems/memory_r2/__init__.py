"""Memory-R2 (its paper and its public code ahmedehabb/Memory-R2): one policy in two roles (fact extraction, memory
management) builds a memory bank over a conversation's chunked sessions; trained with LoGo-GRPO (global trajectory
groups plus local re-rollouts from cached bank snapshots, each standardised in its own group), length-normalised
step-level ratios with a dual clip, a compression penalty and a session curriculum.

This folder is everything only Memory-R2 needs; the memory bank, LoCoMo data and metrics, the step-level ratio
kernel and losses, the curriculum loop, the workflow driver and the training loop are shared. docs/memory_r2.md is
the long form.
- `prompts.py` (+ `system_prompts.py`): the public code's templates byte for byte; `messages.py`: message building
  and parsing; `evidence.py`: evidence readings; `reward.py`: crediting, the frozen answer agent, the reward;
  `workflow.py`: the episode; `system.py`: the `memory_r2` System, LoGo-GRPO credit and the curriculum stages.
- `tiny/`: the tiny multi-session task, its noisy-teacher warm start and the "memory_r2_tiny" System.
Reproduces: LoGo-GRPO, dual-clip step-level ratios, the compression penalty, the 8 -> 16 -> 32 session curriculum,
the public code's prompts, parsers and metrics. Differs: the frozen answer agent is a copy of the initial policy.
"""

from . import longmemeval_eval, system  # noqa: F401  (registers "memory_r2"; "memory_r2" on LongMemEval)
from .tiny import system as _tiny_system  # noqa: F401  (registers "memory_r2_tiny")
from .tiny import longmemeval_tiny as _tiny_lme  # noqa: F401  ("memory_r2_tiny" on LongMemEval)
