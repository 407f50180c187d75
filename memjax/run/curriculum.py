"""Curriculum stages in the one training loop (memjax/loop/run.py): stage ends, best-checkpoint selection, and each
stage starting from the previous stage's best validation checkpoint.

Owns `Curriculum`. A System splits training into stages with its `stage(step)` hook (0, 1, ... non-decreasing by
at most 1 per step; default one stage); Memory-R2's 8 -> 16 -> 32 sessions is one, the mechanism generic. Every
stage ends with a held-out evaluation and a train-state checkpoint; with `select_metric` each stage's best weights
are kept in <out_dir>/checkpoints_best/ (memjax.checkpoint.stage_best); `stage_restart="best"` makes a stage's
last step load that best into the trainer and the engine. `stage_optimizer` ("reset" / "keep") and
`stage_reference` ("best" / "initial") choose what else restarts; the critic and the data stream carry on.
Invariants: the checkpoint at a stage's last step holds the restarted state and every checkpoint records the bests
so far, so a run resumed inside stage k reloads only the KL reference (stage k-1's best) and one crossing a stage
end restores that stage's best as the uninterrupted run does: both reach the same state.
docs/trainer.md, "Resume, curriculum, checkpoints", has the options and the paper-silent defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from flax import nnx

from ..core.config import ConfigError

if TYPE_CHECKING:
    from ..checkpoint.stage_best import StageBest

# = checkpoint/stage_best.py's MODES (tests/e2e/test_imports.py checks): written here so that a TrainConfig validates
# without importing orbax, which StageBest needs only when a run opens its checkpoints_best/
SELECT_MODES = ("max", "min")
CHOICES = {"stage_restart": ("best", "none"), "stage_optimizer": ("reset", "keep"),
           "stage_reference": ("best", "initial"), "select_mode": SELECT_MODES}


def check_choices(cfg) -> None:
    """ValueError naming the TrainConfig field when a curriculum field has an unknown value."""
    for f, ok in CHOICES.items():
        if getattr(cfg, f) not in ok:
            raise ValueError(f"TrainConfig.{f} must be one of {ok}, got {getattr(cfg, f)!r}")


class Curriculum:
    """The stages of one run (`stages[step]` for each 0-based training step) and its per-stage bests."""

    def __init__(self, cfg, system):
        self.cfg = cfg
        self.stages = [int(system.stage(s)) for s in range(cfg.steps)]
        if self.stages[0] != 0 or any(b - a not in (0, 1) for a, b in zip(self.stages, self.stages[1:])):
            raise ConfigError(f"agent.name={cfg.agent.name}: System.stage must give 0 at step 0 and grow by 0 or 1 "
                              f"per step; got {self.stages[:40]}")
        if self.stages[-1] > 0 and cfg.stage_restart == "best" and not cfg.select_metric:
            raise ConfigError(f"agent.name={cfg.agent.name} has {self.stages[-1] + 1} curriculum stages in "
                              f"{cfg.steps} steps and stage_restart=best: set select_metric (a key of the system's "
                              "evaluation, e.g. f1/all) or stage_restart=none")
        self.best: StageBest | None = None

    def open(self, directory, warn: Callable[[str], None]) -> None:
        """Open the best store (after out_dir is locked)."""
        if self.cfg.select_metric:
            from ..checkpoint.stage_best import StageBest

            self.best = StageBest(directory, self.cfg.select_metric, self.cfg.select_mode, warn=warn)

    @property
    def restarts(self) -> bool:
        return self.cfg.stage_restart == "best" and self.stages[-1] > 0

    def is_end(self, step: int) -> bool:
        """Whether `step` completed training steps end a stage (the last step of a stage or of the run)."""
        return step == self.cfg.steps or self.stages[step] != self.stages[step - 1]

    def schedule_step(self, step: int) -> int:
        """The learning-rate schedule's step for 0-based training step `step`."""
        if self.restarts and self.cfg.stage_optimizer == "reset":
            return step - self.stages.index(self.stages[step])
        return step

    # -- the loop's calls -----------------------------------------------------------------------------
    def resumed(self, meta_best: dict | None, step: int, model, trainer) -> None:
        """After restoring the train state at `step` (0 and None on a fresh start)."""
        if self.best is None:
            return
        self.best.load(meta_best, step)
        if step < self.cfg.steps and self.restarts and self.cfg.stage_reference == "best" and self.stages[step] > 0:
            trainer.set_reference(self._best_params(self.stages[step] - 1, model))

    def check_metric(self, row: dict) -> None:
        if self.best is not None:
            self.best.value(row)

    def evaluated(self, step: int, row: dict, model) -> bool:
        """An evaluation after `step` training steps; True when it is its stage's best so far."""
        if self.best is None:
            return False
        return self.best.consider(self.stages[step - 1], step, row,
                                  lambda: nnx.to_pure_dict(nnx.state(model, nnx.Param)), stage_end=self.is_end(step))

    def start_stage(self, step: int, model, trainer, engine) -> str:
        """At the end of a stage (`step` steps done, step < steps): start the next one from the best weights
        of the one ending. Returns a one-line account."""
        cfg, ended = self.cfg, self.stages[step - 1]
        prev = self.best.entries[ended]  # the stage-end evaluation guarantees one
        if prev["step"] != step:
            if getattr(cfg, "engine_sleep", False):  # the pool and the restored copy never need memory together
                engine.sleep()
            nnx.update(model, self._best_params(ended, model))
            engine.update_weights(model)
        if cfg.stage_optimizer == "reset":
            trainer.reset_optimizer()
        if cfg.stage_reference == "best":
            trainer.set_reference(nnx.state(model, nnx.Param))
        value = "n/a" if prev["value"] is None else f"{prev['value']:.4g}"
        return (f"stage {ended + 1} starts at step {step} from the best of stage {ended}: step {prev['step']} "
                f"({cfg.select_metric} {value}); optimizer {cfg.stage_optimizer}, KL reference {cfg.stage_reference}")

    def sync(self, ckpts) -> dict | None:
        """Before a train-state checkpoint (and at close): the best in flight is on disk, superseded bests that no retained
        checkpoint records are deleted; returns the bookkeeping for the checkpoint's metadata."""
        if self.best is None:
            return None
        self.best.flush()
        ckpts.finish()
        self.best.prune(min(ckpts.all_steps(), default=None))
        return self.best.state()

    def summary(self) -> dict:
        return self.best.state()["stages"] if self.best is not None else {}

    def close(self) -> None:
        if self.best is not None:
            best, self.best = self.best, None
            best.close()

    def _best_params(self, stage: int, model):
        params = nnx.state(model, nnx.Param)
        nnx.replace_by_pure_dict(params, self.best.restore(stage, nnx.to_pure_dict(params)))
        return params
