r"""MemAgent (arXiv:2507.02259): an LLM reads an arbitrarily long document chunk by chunk, overwriting a bounded
token memory after each chunk, and answers from the memory alone; trained with Multi-Conv DAPO.

This folder is everything only MemAgent needs; the workflow driver, the engine, memjax/rl and the training loop
are shared.
- `workflow.py`: the MemAgent workflow (the paper's templates, chunking at token-id level, `\boxed{}` answers);
  `system.py`: the `memagent` System; `length_eval.py`: accuracy vs document length. Its reward and official
  scoring are memjax/rewards/{boxed,memagent_official}.py.
- `tiny/`: the embedded default that `make demo` trains (configs/tiny.py, agent.name "tiny"): the "where is K?" task
  (`task.py`), its engine wiring (`agent.py`), the shipped warm start (`warmstart.py`), the full-context baseline
  (`full_context.py`) and the System (`system.py`).
Reproduces: the workflow, Multi-Conv credit, DAPO's clip-higher / token-mean / dynamic sampling / overlong shaping,
and the 7B and 14B recipes (configs/memagent/). Differs: rollouts run on memjax's engine, not vLLM; length
extrapolation is shown on the tiny task (docs/memagent.md), not on 3.5M-token RULER-HotpotQA.
"""

from . import longmemeval_eval, system  # noqa: F401  (registers "memagent"; "memagent" on LongMemEval)
from .tiny import system as _tiny_system  # noqa: F401  (registers "tiny")
from .tiny import longmemeval_tiny as _tiny_lme  # noqa: F401  ("memagent_tiny" on LongMemEval)
