"""`python -m memjax.train [CONFIG.py] [--set key=value ...]`: the one RL training loop of every agent system.

Owns: the loop (its config, TrainConfig, lives in memjax/train_config.py)
  system data stream -> the system's workflow on the engine with the current weights (memjax/agents
  run_workflow) -> rewards (+ the system's shaping) -> [ablation] -> group filter / dynamic sampling
  (optional) -> credit assignment (memjax/rl/credit.py: GRPO, or GAE with the PPO critic; or the system's
  own) -> Trainer.update (old/ref log-probs, PPO epochs x mini-batches x micro-batches, AdamW; token- or
  step-level ratios; the engine sleeps through it, its KV pool and rollout weights freed, when
  `engine_sleep`) -> in-process weight hand-off to the engine -> metrics (JSONL + TensorBoard +
  terminal) -> held-out evaluation (System.evaluate: before, every `eval_every` steps, after) -> orbax
  checkpoint.
Rollouts: `engine.data_parallel=-1` spreads the engine over the mesh's devices (D groups of
engine.tensor_parallel = T devices, T = mesh.tensor keeps the trainer's tensor groups; one slot group and 1/D of
the KV pool each, weights resharded from the trainer's layout at every hand-off; engine.max_slots,
prefill_slots, num_pages and kv_cache_bytes are then totals; it also applies when the system brings its own
engine config); the default 1 runs it on one device.
Several processes (memjax.launch, jax.distributed): each process rolls out its block of whole groups on its own
devices and keeps its rollouts' token arrays: the trainer (and the critic with GAE) assemble the global arrays
from every process's own rows (memjax/rl/assemble.py). Only rewards, statistics, row lengths, kept-group counts
(dynamic sampling), scalar sums (GAE's whitening and metrics) and, with a reward ablation, the per-sample (and
per-credit-unit) rewards are exchanged: the ablation permutes or averages the global reward vector and each
process keeps its slice, so every path gives the one-process result.
The system is chosen by `agent.name` from the registry in memjax/systems (memagent, tiny, ...); `--set
agent.name=X` swaps the `agent` section for X's defaults. The sampling temperature has one source: the
system's (`agent...temperature`); the trainer's log-probs use it (`update.temperature` must be left at
its default 1.0 or equal it).
Invariants: rollout seeds derive from (seed, step, generation batch) -- that is the whole RNG state besides
the data stream and the ablation's permutations -- and the data stream's and the ablation generator's states
are saved with each checkpoint, so a run resumed from its latest checkpoint reproduces the uninterrupted run
bit for bit (on the same device kind), also after SIGKILL. A checkpoint (orbax, written asynchronously, committed atomically by rename) holds the parameters,
the optimizer state (and the critic's with GAE), the step, the seed, the data stream state and the
evaluations so far; the last `keep_checkpoints` are kept. A checkpoint that fails to restore is moved aside
into checkpoints_corrupt/ with a warning and the previous one is used; every save is verified
(memjax.checkpoint.run_checkpoints). The whole config is validated and out_dir locked (memjax.runio) before
the model loads; on resume, metrics.jsonl, traces.jsonl and evals.jsonl are cut back to the restored step,
so no line is repeated, and TensorBoard is told to purge events past it (tensorboardX purge_step). A
non-finite loss or gradient stops the run before the update is applied (OptimConfig.on_nonfinite), leaving
the last good checkpoint as the latest and no hf/ export. Outputs in out_dir: metrics.jsonl, evals.jsonl,
TensorBoard events (tb/), traces.jsonl, result.json (config, evaluations before/after, per-step history),
reward_curve.png, checkpoints/, hf/ (the final policy as a Hugging Face checkpoint), report.html (memjax.report) and
run.json (memjax/run_identity.py: what the run is; a resume of another config refuses, a finished run re-run is a
no-op, an extended one keeps what its result.json held).
Curriculum stages (System.stage; memjax/curriculum.py): each stage ends with an evaluation and a checkpoint;
with `select_metric` each stage's best evaluated weights go to checkpoints_best/, and `stage_restart="best"`
starts each stage from the previous stage's best (`stage_optimizer`, `stage_reference`: what else restarts).
"""

from __future__ import annotations

# The loop's parts, one idea a module (memjax/loop/__init__.py): start-up (loop/start.py), a step's rollouts
# (loop/rollout.py) and the rest of the step (loop/step.py), train-state checkpoints and resume (loop/state.py),
# logs / evaluations / console lines (loop/records.py), the finished run's outputs (loop/result.py). This module
# holds the run's life: identity and out_dir lock, building, the step loop with its stop on request, closing.

import dataclasses
import sys
import time

import jax
import numpy as np
from rich.console import Console

from . import run_identity
from .checkpoint.run_checkpoints import RunCheckpoints
from .cli_check import check_train
from .config import run_cli
from .loop import start
from .loop.records import Records
from .loop.result import Results
from .loop.rollout import Rollouts
from .loop.state import Checkpointed
from .loop.step import Stepping
from .parallel import code_digest, initialize, is_primary
from .parallel.lifecycle import StopRequests, agree_run, peer_loss, run_console, stop_line
from .runio import OutDirLock, prepare_out_dir
from .train_config import ABLATIONS, TrainConfig  # noqa: F401  (re-exported: memjax.train.TrainConfig)


class Run(Stepping, Rollouts, Checkpointed, Records, Results):
    """One training run: builds everything from a TrainConfig and steps it; `run()` loops to cfg.steps."""

    def __init__(self, cfg: TrainConfig, console: Console | None = None):
        initialize(cfg.out_dir)  # several processes (memjax.launch, JAX_*/SLURM/Open MPI): before any backend call
        self.primary = is_primary()  # process 0 prints, logs, writes result files and holds the out_dir lock
        self.cfg, self.con = cfg, (console or run_console()) if self.primary else Console(quiet=True)
        self.code = code_digest()  # recorded in run.json and result.json
        agree_run(dataclasses.asdict(cfg))  # processes of one run refuse unless code and config match (names fields)
        self.system, self.curriculum = start.open_system(cfg)  # every check that needs no model
        self.out = prepare_out_dir(cfg.out_dir)  # before any model is loaded: a bad out_dir fails at once
        self._lock = OutDirLock(self.out).acquire() if self.primary else None
        try:  # a resume under another system or settings refuses; a finished run re-run is a no-op (run_identity)
            self._previous = run_identity.check_resume(self.out, cfg)
            self._finished = run_identity.finished(self.out, cfg)
            if self._finished is not None:
                self.history = list(self._finished.get("history", []))
                return
            self._build()
            if self.primary:
                run_identity.record(self.out, cfg, self.system.name, self.code, self.model_run, self._previous,
                                    say=lambda m: self.con.print(m, style="yellow", markup=False))
        except BaseException:
            self.close()
            raise

    def _build(self) -> None:
        cfg = self.cfg
        parts = start.build(cfg, self.system, say=self.con.print)
        self.mesh, self.model, self.tok, self.model_run = parts.mesh, parts.model, parts.tok, parts.model_run
        self.trainer, self.credit, self.engine = parts.trainer, parts.credit, parts.engine
        self._block, self.data = parts.block, parts.data
        self.rng = np.random.default_rng([cfg.seed, 99])  # the ablation's permutations
        self.ckpts = RunCheckpoints(self.out / "checkpoints", cfg.keep_checkpoints,
                                    warn=lambda m: self.con.print(m, style="yellow", markup=False),
                                    info=lambda m: self.con.print(m, markup=False))
        self.step, self.evals, self.history, self._best_meta = 0, [], [], None
        self._eval_extra: dict[int, dict] = {}  # evaluation traces/samples by step (saved with each checkpoint)
        self.curriculum.open(self.out / "checkpoints_best", warn=lambda m: self.con.print(m, style="yellow",
                                                                                           markup=False))
        self._resume()
        self._open_logs()
        self._saved_at = None  # the step of the last checkpoint save started

    def close(self) -> None:
        """Finish (and verify) the save in flight, close the checkpoint manager, release out_dir's lock."""
        try:
            if getattr(self, "ckpts", None) is not None:
                try:
                    self.curriculum.sync(self.ckpts)
                finally:
                    self.ckpts.close()
                    self.ckpts = None
            if getattr(self, "_tb", None):  # False: no tensorboardX (the GPU image)
                self._tb.close()
                self._tb = None
        finally:
            if getattr(self, "curriculum", None) is not None:
                self.curriculum.close()
            if getattr(self, "_lock", None) is not None:
                self._lock.release()
                self._lock = None

    def run(self) -> list[dict]:
        """Train to cfg.steps; returns the per-step metrics (the summary is `self.summary`, result.json)."""
        from rich.progress import Progress

        t_start = time.perf_counter()
        if self._finished is not None:  # nothing to train: no file of the finished run is touched
            self.summary = self._finished
            self.close()
            self.con.print(f"{self.out}: the run already finished at step {self._finished['history'][-1]['step']} "
                           f"(steps={self.cfg.steps}); nothing to do (raise steps to extend it)")
            return self.history
        self._stop = StopRequests(jax.process_count())
        try:
            if self.step == 0 and not self.evals:
                self.curriculum.check_metric(self.evaluate())  # a select_metric it lacks fails now
            with Progress(transient=True, console=self.con) as bar:
                task = bar.add_task("training", total=self.cfg.steps, completed=self.step)
                while self.step < self.cfg.steps:
                    m = self.train_step()
                    bar.update(task, completed=self.step)
                    self._print(m)
                    if self._stop.due(self.step):  # SIGTERM / preemption / Ctrl-C: every process at this step
                        if self._saved_at != self.step:
                            self.save()
                        self.ckpts.finish()  # committed and verified before the one line and exit 143 / 130
                        raise stop_line(self._stop, self.step, self.ckpts.dir)
            self.ckpts.finish()
            self._write_results(t_start)
        finally:
            self._stop.restore()
            self.close()
        self._print_outputs()
        return self.history


def train(cfg: TrainConfig, console: Console | None = None) -> dict:
    """Run `cfg` to its last step (resuming from out_dir's checkpoints) and return result.json's dict."""
    run = Run(cfg, console)
    with peer_loss(run.out / "checkpoints"):  # a lost peer: the one line of memjax.parallel.logtee, not a trace
        run.run()
    return run.summary


def main(argv: list[str] | None = None) -> int:
    return run_cli("python -m memjax.train", __doc__, argv, TrainConfig(), train, check=check_train)


if __name__ == "__main__":
    sys.exit(main())
