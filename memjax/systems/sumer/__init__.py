"""SUMER (its paper, section 3): multi-turn tool use over raw LoCoMo dialogues: the policy searches a memory of the
conversation's messages (`search_memory`, with filters and neighbouring turns) and answers with `submit_answer`;
trained with GRPO, tool responses masked out of the loss, reward J x F1.

This folder is everything only SUMER needs; Qwen2.5's function-calling format (memjax/agents/toolcall.py), the
memory bank and retrieval, LoCoMo data and metrics, the workflow driver and the training loop are shared.
- `workflow.py`: the SUMER episode (one tool-calling conversation per question); `tools.py`: the two tools over
  one conversation's memory; `system.py`: the `sumer` System (the `sumer` LoCoMo split, the judge, evaluation).
- `tiny/`: SUMER's loop at toy scale (agent.name "tiny_sumer", configs/sumer/tiny.py): a 48-word searchable-memory
  task (`task.py`), its wiring (`agent.py`), the shipped warm start (`warmstart.py`) and the System (`system.py`).
Reproduces: the tool loop, GRPO with masked tool tokens, the J x F1 reward and the evaluation table. Differs: the
default embedder is the offline WordLlama static embedding (the paper's Qwen3-Embedding-0.6B is not downloaded;
`embedder="file:PATH"` takes precomputed vectors); the paper-silent choices are in docs/sumer.md.
"""

from . import longmemeval_eval, system  # noqa: F401  (registers "sumer"; "sumer" on LongMemEval)
from .tiny import system as _tiny_system  # noqa: F401  (registers "tiny_sumer")
from .tiny import longmemeval_tiny as _tiny_lme  # noqa: F401  ("sumer_tiny" on LongMemEval)
