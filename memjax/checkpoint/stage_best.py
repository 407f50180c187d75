"""The best evaluated policy of each curriculum stage: which step it was, and its weights on disk.

Owns `StageBest`, which the training loop uses to start each curriculum stage from the previous stage's best
validation checkpoint (memjax/run/curriculum.py) and to keep each stage's best policy. An evaluation row is scored
by `metric` (mode "max" or "min"); candidates of a stage are its evaluations after its training steps; ties keep
the earlier step; a non-finite value never wins, and a stage with no finite value gets its stage-end step as best.
Storage: `directory/<step>` (orbax, RunCheckpoints without retention) holds `state` = {"model": Params} and `meta`;
the bookkeeping (`state()`) travels in every train-state checkpoint's metadata.
Invariants: a best is written and verified before the train-state checkpoint that records it starts, so a recorded
best is always on disk; `load(state, step)` on resume deletes stored steps past `step` and a missing recorded best
is an error; a superseded best is pruned only once the oldest retained train-state checkpoint records the newer
one, so falling back to an older checkpoint never misses its best. `StageBest`'s docstring has the details.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import jax
import orbax.checkpoint as ocp

from ..core.config import ConfigError
from .errors import CheckpointError
from .run_checkpoints import RunCheckpoints, one_line, placed_like

MODES = ("max", "min")


class StageBest:
    """Each curriculum stage's best evaluated policy, on disk and in the run's metadata.

    Selection: an evaluation row (System.evaluate's scalars) is scored by `metric`, one of its keys; mode "max": higher
    is better, "min": lower. Candidates of stage k are the evaluations made after its training steps (every
    `eval_every` steps and the forced one at its end); the weights it started from are not a candidate. Ties keep the
    earlier step. A non-finite value never wins; a stage whose every value is non-finite gets its stage-end step as
    best (value None), so every finished stage has a best to start the next one from.
    Storage: the best parameters of each stage in `directory/<step>`, items `state` = {"model": the Params as a pure
    dict} and `meta` = {step, stage, value, metric}. The bookkeeping (`state()`: metric, mode, per stage {step, value})
    travels in every train-state checkpoint's metadata, so a run resumed after a kill knows the bests as of the
    checkpoint it resumes from.
    On disk: a best is written and verified (`flush()`) before the train-state checkpoint that records it is started;
    `load(state, step)` on resume deletes stored steps past `step` (the replayed steps write them again, the same
    bytes) and a missing recorded best is an error; a superseded best is deleted by `prune(oldest)` only once the
    oldest retained train-state checkpoint is at or past the superseding step, i.e. records the newer best.
    """
    def __init__(self, directory: str | Path, metric: str, mode: str = "max", warn: Callable[[str], None] = print):
        if not metric:
            raise ValueError("StageBest: metric must be a key of the evaluation's metrics")
        if mode not in MODES:
            raise ValueError(f"StageBest: mode must be one of {MODES}, got {mode!r}")
        self.metric, self.mode = metric, mode
        self.entries: dict[int, dict] = {}  # stage -> {"step": int, "value": float | None}
        self._superseded: list[tuple[int, int]] = []  # (stored step, the step of the best that replaced it)
        self.store = RunCheckpoints(directory, None, warn=warn)

    # -- selection ----------------------------------------------------------------------------------
    def state(self) -> dict:
        """The JSON-able bookkeeping saved with every train-state checkpoint."""
        return {"metric": self.metric, "mode": self.mode,
                "stages": {str(k): dict(v) for k, v in sorted(self.entries.items())}}

    def value(self, row: dict) -> float | None:
        """The row's score (None when non-finite); a ConfigError when the row has no such metric."""
        if self.metric not in row:
            have = ", ".join(sorted(k for k in row if k != "step")) or "none"
            raise ConfigError(f"select_metric={self.metric!r}: not a metric of the system's evaluation (it has: "
                              f"{have})")
        v = row[self.metric]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ConfigError(f"select_metric={self.metric!r}: the evaluation gave {v!r}, not a number")
        return float(v) if math.isfinite(v) else None

    def _better(self, value: float | None, best: float | None) -> bool:
        if value is None:
            return False
        if best is None:
            return True
        return value > best if self.mode == "max" else value < best

    def consider(self, stage: int, step: int, row: dict, params: Callable[[], dict], *, stage_end: bool) -> bool:
        """Score the evaluation `row` of the weights after training step `step` (of `stage`); when it is the
        stage's best so far, start writing `params()` and return True."""
        v = self.value(row)
        old = self.entries.get(stage)
        if old is None:
            if v is None and not stage_end:
                return False
        elif not self._better(v, old["value"]):
            return False
        self.store.save(step, ocp.args.Composite(
            state=ocp.args.StandardSave({"model": params()}),
            meta=ocp.args.JsonSave({"step": step, "stage": stage, "value": v, "metric": self.metric})))
        if old is not None:
            self._superseded.append((old["step"], step))
        self.entries[stage] = {"step": step, "value": v}
        return True

    # -- storage ------------------------------------------------------------------------------------
    def restore(self, stage: int, like: dict) -> dict:
        """The best parameters of `stage`, read into the structure, dtypes and placement of `like` (sharded
        and committed like its arrays, or uncommitted like them: single device, no mesh)."""
        e = self.entries[stage]
        self.store.finish()
        abstract = {"model": jax.tree.map(ocp.utils.to_shape_dtype_struct, like)}
        try:
            got = self.store.mgr.restore(e["step"], args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract)))
        except Exception as ex:
            raise CheckpointError(f"{self.store.dir / str(e['step'])}: the best checkpoint of stage {stage} cannot "
                                  f"be restored ({one_line(ex)})") from None
        return placed_like(got["state"]["model"], like)

    def flush(self) -> None:
        """Wait for the best being written and verify it."""
        self.store.finish()

    def load(self, state: dict | None, step: int) -> None:
        """Adopt the bookkeeping of the train-state checkpoint at `step` (None: a fresh run, step 0) and bring
        the store in line with it (module docstring)."""
        state = state or {}
        if (state.get("metric", self.metric), state.get("mode", self.mode)) != (self.metric, self.mode):
            raise ConfigError(f"select_metric={self.metric!r}, select_mode={self.mode!r}: this run's checkpoints "
                              f"chose their bests by {state['metric']!r} ({state['mode']}); use the same settings "
                              "or a new out_dir")
        self.entries = {int(k): {"step": int(v["step"]), "value": v["value"]}
                        for k, v in state.get("stages", {}).items()}
        self._superseded = []
        stored = self.store.all_steps()
        recorded = {e["step"] for e in self.entries.values()}
        missing = sorted(recorded - set(stored))
        if missing:
            raise CheckpointError(f"{self.store.dir}: best checkpoints {missing}, recorded by the train-state "
                                  f"checkpoint at step {step}, are missing")
        for s in stored:
            if s in recorded:
                continue
            stage = self._stored_stage(s) if s <= step else None
            if stage in self.entries and self.entries[stage]["step"] > s:
                self._superseded.append((s, self.entries[stage]["step"]))
            else:  # written after the resumed checkpoint: the replay writes it again
                self.store.delete(s)

    def _stored_stage(self, step: int) -> int | None:
        try:
            meta = self.store.mgr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]
            return int(meta["stage"])
        except Exception:
            return None

    def prune(self, oldest_checkpoint: int | None) -> None:
        """Delete the superseded bests that no retained train-state checkpoint (the oldest at
        `oldest_checkpoint`) records any more."""
        if oldest_checkpoint is None:
            return
        keep = []
        for old, new in self._superseded:
            if new <= oldest_checkpoint:
                self.store.delete(old)
            else:
                keep.append((old, new))
        self._superseded = keep

    def close(self) -> None:
        self.store.close()
