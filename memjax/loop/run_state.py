"""`RunState`: where a training run stands, the one owner of the step counter and of what the run has recorded.

Owns: `step` (training steps done), `history` (one metrics dict per step), `evals` (one row per held-out
evaluation), `eval_extra` (each evaluation's traces and samples by step), `best_meta` (the curriculum's bests as
the last checkpoint recorded them) and `saved_at` (the step of the last checkpoint save started).
Invariants: `len(history) == step` for a run that started at step 0; evaluation rows carry the step they were
taken at; everything here is plain JSON-able host data, saved with every checkpoint (`meta`) and restored from
it (`from_meta`), so a resumed run's state equals the uninterrupted run's at that step.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class RunState:
    step: int = 0
    history: list[dict] = dataclasses.field(default_factory=list)
    evals: list[dict] = dataclasses.field(default_factory=list)
    eval_extra: dict[int, dict] = dataclasses.field(default_factory=dict)
    best_meta: dict | None = None
    saved_at: int | None = None
    eval_pending: bool = False  # the held-out evaluation due at `step` was stopped: a resume runs it (and what follows)

    def finish_step(self, metrics: dict) -> None:
        """Step `step + 1` is done: count it and record its metrics."""
        self.step += 1
        self.history.append(metrics)

    def record_evaluation(self, row: dict, extra: dict) -> None:
        """A held-out evaluation at the current step: its scalar row and its traces / samples."""
        self.evals.append(row)
        self.eval_extra[self.step] = extra

    def meta(self) -> dict:
        """What a checkpoint records of the state (JSON)."""
        return {"step": self.step, "evals": self.evals, "history": self.history, "eval_extra": self.eval_extra,
                "eval_pending": self.eval_pending}

    @classmethod
    def from_meta(cls, meta: dict) -> "RunState":
        """The state a checkpoint's meta recorded (`best_meta` from its curriculum entry)."""
        return cls(step=int(meta["step"]), history=list(meta.get("history", [])), evals=list(meta.get("evals", [])),
                   eval_extra={int(k): v for k, v in meta.get("eval_extra", {}).items()},
                   best_meta=meta.get("best"), saved_at=int(meta["step"]),
                   eval_pending=bool(meta.get("eval_pending", False)))
