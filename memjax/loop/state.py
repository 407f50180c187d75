"""What a training run checkpoints and how it comes back: the train state saved every `checkpoint_every` steps
and at a stop, and the resume from the latest good checkpoint.

Owns `Checkpointed`, a part of memjax.train's `Run`:
- `save()`: one orbax checkpoint of step `self.step` (written asynchronously, committed by rename, verified by
  RunCheckpoints before the next one): the state -- model parameters, optimizer state, the critic's with GAE,
  placed on the mesh -- and the JSON meta -- step, seed, every process's data-stream state, optimizer steps,
  evaluations, history, the ablation generator's state, the config, the curriculum's bests, the evaluations'
  traces / samples.
- `_resume()`: with `resume`, the latest checkpoint that restores (one that does not is moved aside by
  RunCheckpoints and the previous one used); without it, out_dir holding checkpoints is refused; then the
  curriculum is told where the run stands.
Invariants: a restored run has the uninterrupted run's parameters, optimizer state, data stream, ablation
generator, step, evaluations and history, and the engine its weights, so it continues bit for bit. A checkpoint
of another model (model.hf_path / preset / dtype) or one that does not fit this config is a ConfigError naming
out_dir, never taken for corruption.
Reads: cfg, model, trainer, credit, mesh, data, rng, ckpts, curriculum, engine, evals, history, out, con;
writes: step, evals, history, _best_meta, _eval_extra, _saved_at.
"""

from __future__ import annotations

import dataclasses
import json

import jax
import orbax.checkpoint as ocp
from flax import nnx

from ..checkpoint.run_checkpoints import one_line, placed_like
from ..config import ConfigError
from ..parallel import on_mesh
from ..rl.shares import gather_states, own_state


class Checkpointed:
    """The train-state checkpoints of `Run` (module docstring)."""

    def _state(self):
        state = {"model": nnx.state(self.model, nnx.Param).to_pure_dict(),
                 "opt": nnx.state(self.trainer.optimizer).to_pure_dict()}
        critic = self.credit.state()
        if critic is not None:
            state["critic"] = critic
        return on_mesh(state, self.mesh)  # several processes: orbax saves only arrays of the global mesh

    def save(self) -> None:
        best = self.curriculum.sync(self.ckpts)  # the bests this checkpoint records are on disk
        self._saved_at = self.step
        meta = {"step": self.step, "seed": self.cfg.seed, "data": self.data.get_state(),
                "data_processes": gather_states(self.data.get_state()),
                "optimizer_steps": self.trainer.optimizer_steps, "evals": self.evals, "history": self.history,
                "ablation_rng": json.dumps(self.rng.bit_generator.state),
                "config": dataclasses.asdict(self.cfg), "best": best, "eval_extra": self._eval_extra}
        self.ckpts.save(self.step, args=ocp.args.Composite(  # waits for (and verifies) the previous save
            state=ocp.args.StandardSave(self._state()), meta=ocp.args.JsonSave(json.loads(json.dumps(meta, default=str)))))

    def _resume(self) -> None:
        cfg = self.cfg
        if cfg.resume:
            self.ckpts.restore_latest(lambda _, step: self._restore(step))
        elif self.ckpts.all_steps():
            raise ConfigError(f"out_dir={cfg.out_dir}: holds checkpoints {self.ckpts.all_steps()} and resume=false; "
                              "use a new out_dir (or resume=true)")
        self.curriculum.resumed(self._best_meta, self.step, self.model, self.trainer)

    def _restore(self, step: int) -> None:
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, self._state())
        try:
            got = self.ckpts.mgr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract),
                                                                       meta=ocp.args.JsonRestore()))
        except Exception:
            self._check_same_model(step)  # another model's checkpoint is a config mistake, not corruption
            raise
        try:  # the checkpoint read back: failing to apply it is a config mismatch, not corruption
            params = nnx.state(self.model, nnx.Param)
            params.replace_by_pure_dict(placed_like(got["state"]["model"], params.to_pure_dict()))
            opt = nnx.state(self.trainer.optimizer)
            opt.replace_by_pure_dict(placed_like(got["state"]["opt"], opt.to_pure_dict()))
            self.data.set_state(own_state(got["meta"]))
            if "ablation_rng" in got["meta"]:  # the same on every process: each draws every permutation
                self.rng.bit_generator.state = json.loads(got["meta"]["ablation_rng"])
            if "critic" in got["state"]:
                self.credit.load_state(got["state"]["critic"])
        except Exception as e:
            raise ConfigError(f"out_dir={self.cfg.out_dir}: checkpoint {step} does not fit this config "
                              f"({one_line(e)}); use a new out_dir") from None
        nnx.update(self.model, params)
        nnx.update(self.trainer.optimizer, opt)
        self.step = int(got["meta"]["step"])
        self.trainer.optimizer_steps = int(got["meta"].get("optimizer_steps", 0))
        self.evals, self.history = list(got["meta"].get("evals", [])), list(got["meta"].get("history", []))
        self._best_meta = got["meta"].get("best")
        self._eval_extra = {int(k): v for k, v in got["meta"].get("eval_extra", {}).items()}
        self.engine.update_weights(self.model)
        self.con.print(f"resumed from {self.out / 'checkpoints'} at step {self.step}")

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
