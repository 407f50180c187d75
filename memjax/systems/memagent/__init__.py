"""MemAgent (arXiv:2507.02259): an LLM reads an arbitrarily long document chunk by chunk, overwriting a bounded
token memory after each chunk, and answers from the memory alone; trained with Multi-Conv DAPO.

This folder is everything only MemAgent needs; the shared machinery it runs on (the workflow driver
memjax/agents/workflow.py, the engine, memjax/rl's batch, advantages and losses, the one training loop) lives
below it.
- `workflow.py`: the MemAgent workflow (the paper's memory and final-answer templates, chunking at token-id level,
  `\\boxed{}` answers); `system.py`: the `memagent` System (RULER-HotpotQA stream, DAPO overlong shaping, held-out
  sub-EM); its reward and official scoring are memjax/rewards/{boxed,memagent_official}.py (shared: the metric
  profiles of memjax/evaluation/profiles.py let any run be scored the way any paper scores).
- `tiny/`: the embedded default that `make demo` trains (configs/tiny.py, agent.name "tiny"): the tiny "where is
  K?" task over `a in b .` facts (`task.py`), its wiring to the engine and the MemAgent workflow (`agent.py`), the
  shipped supervised warm start (`warmstart.py`), the full-context baseline (`full_context.py`) and the System
  (`system.py`).
Reproduces: the workflow, Multi-Conv credit (one outcome reward per trajectory broadcast to each of its
conversations), DAPO's clip-higher / token-mean / dynamic sampling / overlong shaping, and the 7B and 14B recipes
(configs/memagent/). Differs: rollouts run on memjax's engine, not vLLM; length extrapolation is shown on the tiny
task (benchmarks/memagent/length_extrapolation.py), not on 3.5M-token RULER-HotpotQA.
"""

from . import longmemeval_eval, system  # noqa: F401  (registers "memagent"; "memagent" on LongMemEval)
from .tiny import system as _tiny_system  # noqa: F401  (registers "tiny")
from .tiny import longmemeval_tiny as _tiny_lme  # noqa: F401  ("memagent_tiny" on LongMemEval)
