"""`Run`, one training run's life, and `train(cfg)`: what `python -m memjax.train` runs once its command line and
launch environment have been checked (the loop itself is described in memjax/train.py's docstring, the CLI's help).

Owns: identity and out_dir lock, building (loop/start.py), the step loop with its stop on request, closing.
Invariants: `Run.__init__` joins the multi-process runtime (memjax.parallel.initialize) before any backend call and
validates everything that needs no model before one loads; `close()` always releases out_dir's lock.
"""

from __future__ import annotations

# The loop's parts, one idea a module (memjax/loop/__init__.py): start-up (loop/start.py), a step's rollouts
# (loop/rollout.py) and the rest of the step (loop/step.py), train-state checkpoints and resume (loop/state.py),
# logs / evaluations / console lines (loop/records.py), the finished run's outputs (loop/result.py).

import dataclasses
import time

import jax
import numpy as np
from rich.console import Console

from .. import run_identity
from ..compile_cache import use_compile_cache
from ..checkpoint.run_checkpoints import RunCheckpoints
from ..parallel import code_digest, initialize, is_primary
from ..parallel.lifecycle import StopRequests, agree_run, peer_loss, run_console, stop_line
from ..runio import OutDirLock, prepare_out_dir
from ..train_config import TrainConfig
from . import start
from .records import Records
from .result import Results
from .rollout import Rollouts
from .state import Checkpointed
from .step import Stepping


class Run(Stepping, Rollouts, Checkpointed, Records, Results):
    """One training run: builds everything from a TrainConfig and steps it; `run()` loops to cfg.steps."""

    def __init__(self, cfg: TrainConfig, console: Console | None = None):
        initialize(cfg.out_dir)  # several processes (memjax.launch, JAX_*/SLURM/Open MPI): before any backend call
        self.primary = is_primary()  # process 0 prints, logs, writes result files and holds the out_dir lock
        self.cfg, self.con = cfg, (console or run_console()) if self.primary else Console(quiet=True)
        # before the first compile (jax reads it at each compile); the line unwrapped: a path to copy
        use_compile_cache(cfg.compile_cache, say=lambda s: self.con.print(s, markup=False, soft_wrap=True))
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
