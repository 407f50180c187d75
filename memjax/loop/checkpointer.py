"""`Checkpointer`: a training run's train-state checkpoints, and its resume from the latest good one.

Owns the run's `RunCheckpoints` (orbax, asynchronous, committed by rename, each save verified): `save(state)` (the
model parameters, optimizer state, the critic's with GAE, and a JSON meta of the RunState, seed, every process's
data-stream state, optimizer steps, the ablation generator's state, the config, the curriculum's bests and, under
an async schedule, every process's batches ahead of the update),
`resume()` (the latest checkpoint that restores, put back into model, trainer, critic, data stream, ablation
generator and engine; without `resume`, an out_dir holding checkpoints is refused) and a ledger,
out_dir/checkpoints.json, of the newest committed step.
Invariants: a restored run has the uninterrupted run's state and continues bit for bit; a run whose committed
checkpoint vanished refuses with one line before anything is read or cut back; a checkpoint of another model or
one that does not fit this config is a ConfigError naming out_dir, never taken for corruption.
docs/reliability.md, "What a run is, and what a resume may change".
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import jax
import orbax.checkpoint as ocp
from flax import nnx

from ..checkpoint.run_checkpoints import RunCheckpoints, one_line, placed_like
from ..core.config import ConfigError
from ..core.outdir import write_atomic
from ..parallel import on_mesh
from ..rl.shares import gather_states, own_rollouts, own_state
from .run_state import RunState

LEDGER = "checkpoints.json"  # out_dir/checkpoints.json: {"committed": the newest verified checkpoint step}


class Checkpointer:
    def __init__(self, cfg, parts, curriculum, directory: Path, say: Callable[[str], None],
                 warn: Callable[[str], None]):
        self.cfg, self.parts, self.curriculum, self.say = cfg, parts, curriculum, say
        self.ledger = directory.parent / LEDGER
        self._check_ledger(directory)
        self.ckpts = RunCheckpoints(directory, cfg.keep_checkpoints, warn=warn, info=say, on_commit=self._committed)

    def _committed(self, step: int) -> None:
        if jax.process_index() == 0:
            write_atomic(self.ledger, json.dumps({"committed": step}) + "\n")

    def _recorded(self) -> int:
        """The newest checkpoint this out_dir's run committed: the ledger's, else a finished run's last step."""
        for path, read in ((self.ledger, lambda d: d["committed"]),
                           (self.ledger.parent / "result.json", lambda d: d["history"][-1]["step"])):
            try:
                return int(read(json.loads(path.read_text())))
            except (OSError, ValueError, KeyError, IndexError, TypeError):
                continue
        return 0

    def _check_ledger(self, directory: Path) -> None:
        """A run that committed checkpoint k but finds neither it nor its quarantined copy refuses (it would
        retrain from an older step and cut its logs back): one line naming what is missing."""
        k = self._recorded()
        if not k:
            return
        quarantined = directory.with_name(directory.name + "_corrupt")
        if (directory / str(k)).is_dir() or any(quarantined.glob(f"{k}")) or any(quarantined.glob(f"{k}.*")):
            return
        what = "is gone" if not directory.exists() else f"lacks checkpoint {k}"
        raise ConfigError(f"out_dir={self.cfg.out_dir}: its run committed checkpoint {k} ({self.ledger.name}) but "
                          f"{directory} {what}; put the checkpoints back to resume, or start again deliberately "
                          "in a new out_dir")

    @property
    def dir(self) -> Path:
        return self.ckpts.dir

    def _arrays(self):
        p = self.parts
        state = {"model": nnx.to_pure_dict(nnx.state(p.model, nnx.Param)),
                 "opt": nnx.to_pure_dict(nnx.state(p.trainer.optimizer))}
        critic = p.credit.state()
        if critic is not None:
            state["critic"] = critic
        return on_mesh(state, p.mesh)  # several processes: orbax saves only arrays of the global mesh

    def save(self, state: RunState) -> None:
        """Checkpoint `state.step` (waits for, and verifies, the previous save)."""
        p = self.parts
        best = self.curriculum.sync(self.ckpts)  # the bests this checkpoint records are on disk
        state.saved_at = state.step
        # an async schedule's batches ahead, every process's own (first: split_async drains its worker)
        rollouts = {"rollouts": gather_states(p.stream.dumps())} if p.stream is not None else {}
        meta = {**state.meta(), "seed": self.cfg.seed, "data": p.data.get_state(),
                "data_processes": gather_states(p.data.get_state()),
                "optimizer_steps": p.trainer.optimizer_steps,
                "ablation_rng": json.dumps(p.ablation_rng.bit_generator.state),
                "config": dataclasses.asdict(self.cfg), "best": best, **rollouts}
        self.ckpts.save(state.step, args=ocp.args.Composite(
            state=ocp.args.StandardSave(self._arrays()),
            meta=ocp.args.JsonSave(json.loads(json.dumps(meta, default=str)))))

    def resume(self) -> RunState:
        """The RunState to continue from (module docstring); the parts hold the checkpoint's arrays after it."""
        restored: list[RunState] = []
        if self.cfg.resume:
            self.ckpts.restore_latest(lambda _, step: restored.append(self._restore(step)))
        elif self.ckpts.all_steps():
            raise ConfigError(f"out_dir={self.cfg.out_dir}: holds checkpoints {self.ckpts.all_steps()} and "
                              "resume=false; use a new out_dir (or resume=true)")
        return restored[-1] if restored else RunState()

    def _restore(self, step: int) -> RunState:
        p = self.parts
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, self._arrays())
        try:
            got = self.ckpts.mgr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract),
                                                                       meta=ocp.args.JsonRestore()))
        except Exception:
            self._check_same_model(step)  # another model's checkpoint is a config mistake, not corruption
            raise
        try:  # the checkpoint read back: failing to apply it is a config mismatch, not corruption
            params = nnx.state(p.model, nnx.Param)
            nnx.replace_by_pure_dict(params, placed_like(got["state"]["model"], nnx.to_pure_dict(params)))
            opt = nnx.state(p.trainer.optimizer)
            nnx.replace_by_pure_dict(opt, placed_like(got["state"]["opt"], nnx.to_pure_dict(opt)))
            p.data.set_state(own_state(got["meta"]))
            if "ablation_rng" in got["meta"]:  # the same on every process: each draws every permutation
                p.ablation_rng.bit_generator.state = json.loads(got["meta"]["ablation_rng"])
            if "critic" in got["state"]:
                p.credit.load_state(got["state"]["critic"])
            if p.stream is not None:  # an async schedule's batches running ahead
                p.stream.loads(own_rollouts(got["meta"].get("rollouts")))
        except Exception as e:
            raise ConfigError(f"out_dir={self.cfg.out_dir}: checkpoint {step} does not fit this config "
                              f"({one_line(e)}); use a new out_dir") from None
        nnx.update(p.model, params)
        nnx.update(p.trainer.optimizer, opt)
        p.trainer.optimizer_steps = int(got["meta"].get("optimizer_steps", 0))
        p.engine.update_weights(p.model)
        self.say(f"resumed from {self.dir} at step {int(got['meta']['step'])}")
        return RunState.from_meta(got["meta"])

    def _check_same_model(self, step: int) -> None:
        try:
            meta = self.ckpts.mgr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]
            saved = meta["config"]["model"]
        except Exception:
            return  # unreadable metadata: corruption, handled by the caller
        now = dataclasses.asdict(self.cfg.model)
        diff = [k for k in ("hf_path", "preset", "dtype") if k in saved and saved[k] != now[k]
                and not (k == "preset" and now["hf_path"])]
        if diff:
            raise ConfigError(f"out_dir={self.cfg.out_dir}: checkpoint {step} is of another model ("
                              + ", ".join(f"model.{k}={saved[k]!r}, this config {now[k]!r}" for k in diff)
                              + "); use a new out_dir")

    def finish(self) -> None:
        """Wait for the save in flight, verified."""
        self.ckpts.finish()

    def close(self) -> None:
        """Finish the save in flight (and the curriculum's bests it records), close the manager."""
        try:
            self.curriculum.sync(self.ckpts)
        finally:
            self.ckpts.close()
