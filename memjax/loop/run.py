"""`Run`, one training run's life, and `train(cfg)`: what `python -m memjax.train` runs once its command line and
launch environment have been checked.

Owns the run's composition and its step loop. A Run holds, each with one owner of its state: `parts`
(loop/start.py `Parts`: mesh, model, tokenizer, trainer, credit, engine, data stream, ablation generator), `state`
(loop/run_state.py `RunState`), `ckpt` (loop/checkpointer.py), `log` (loop/run_log.py: JSONL, TensorBoard,
console) and `curriculum` (memjax/run/curriculum.py). `next_step()` runs one training step (loop/step.py
`run_step`), then what its number makes due, in this order: history and the first four traces, the held-out
evaluation, the stage restart, the checkpoint, TensorBoard and metrics.jsonl.
Invariants: `Run.__init__` joins the multi-process runtime before any backend call and validates everything that
needs no model before one loads; metrics.jsonl gets a step's line after its checkpoint; `close()` always releases
out_dir's lock.
"""

from __future__ import annotations

import dataclasses
import time
from contextlib import nullcontext

import jax
from rich.console import Console

from ..core import environment
from ..core.compile_cache import use_compile_cache
from ..core.cli import Stopped
from ..core.outdir import OutDirLock, prepare_out_dir
from ..parallel import code_digest, initialize, is_primary
from ..parallel.lifecycle import (
    HeldoutStopped,
    StopRequests,
    agree_run,
    heldout_stops,
    peer_loss,
    run_console,
    stop_line,
)
from ..rl.phases import phase_metrics
from ..run import identity as run_identity
from ..run.train_config import TrainConfig
from . import result, start
from .checkpointer import Checkpointer
from .run_log import RunLog
from .run_state import RunState
from .step import run_step
from .trackers import Trackers


class Run:
    """One training run: builds everything from a TrainConfig and steps it; `run()` loops to cfg.steps."""

    def __init__(self, cfg: TrainConfig, console: Console | None = None):
        initialize(cfg.out_dir)  # several processes (memjax.launch, JAX_*/SLURM/Open MPI): before any backend call
        self.primary = is_primary()  # process 0 prints, logs, writes result files and holds the out_dir lock
        self.cfg, self.con = cfg, (console or run_console()) if self.primary else Console(quiet=True)
        # before the first compile (jax reads it at each compile); the line unwrapped: a path to copy
        use_compile_cache(cfg.compile_cache, say=lambda s: self.con.print(s, markup=False, soft_wrap=True))
        self.code = code_digest()  # recorded in run.json and result.json
        self.environment = environment.describe()  # versions, devices, processor: in run.json and result.json
        agree_run(dataclasses.asdict(cfg))  # processes of one run refuse unless code and config match (names fields)
        self.system, self.curriculum = start.open_system(cfg)  # every check that needs no model
        self.out = prepare_out_dir(cfg.out_dir)  # before any model is loaded: a bad out_dir fails at once
        self._lock = OutDirLock(self.out).acquire() if self.primary else None
        self.parts: start.Parts | None = None
        self.ckpt: Checkpointer | None = None
        self.log: RunLog | None = None
        self.trackers = Trackers({})  # wandb / MLflow (cfg.loggers): opened with the logs, closed after the report
        self.state = RunState()
        self.summary: dict | None = None
        self._stop = None  # run()'s stop requests, which a held-out evaluation asks (HeldoutStopped)
        try:  # a resume under another system or settings refuses; a finished run re-run is a no-op (run_identity)
            previous = run_identity.check_resume(self.out, cfg)
            self._finished = run_identity.finished(self.out, cfg)
            if self._finished is not None:
                self.state.history = list(self._finished.get("history", []))
                return
            self.parts = start.build(cfg, self.system, say=self.con.print)
            self.ckpt = Checkpointer(cfg, self.parts, self.curriculum, self.out / "checkpoints", say=self._say,
                                     warn=self._warn)
            self.curriculum.open(self.out / "checkpoints_best", warn=self._warn)
            self.state = self.ckpt.resume()
            self.curriculum.resumed(self.state.best_meta, self.state.step, self.parts.model, self.parts.trainer)
            self.trackers = Trackers.open(cfg, self.out, self.primary, self.code, self.environment)
            self.log = RunLog(self.out, self.primary, self.con, cfg.steps, self.state, self.trackers)
            if self.primary:
                run_identity.record(self.out, cfg, self.system.name, self.code, self.parts.model_run, previous,
                                    say=self._warn, environment=self.environment)
        except BaseException:
            self.close()
            raise

    def _say(self, m: str) -> None:
        self.con.print(m, markup=False)

    def _warn(self, m: str) -> None:
        self.con.print(m, style="yellow", markup=False)

    # read-only views of the parts and the state
    @property
    def step(self) -> int:
        return self.state.step

    @property
    def history(self) -> list[dict]:
        return self.state.history

    @property
    def evals(self) -> list[dict]:
        return self.state.evals

    @property
    def model(self):
        return self.parts.model

    @property
    def engine(self):
        return self.parts.engine

    @property
    def trainer(self):
        return self.parts.trainer

    def evaluate(self) -> dict:
        """Held-out evaluation of the current weights (System.evaluate), recorded at the current step; returns its
        scalar row ({} when the system has no held-out evaluation). Inside run(), a stop request ends it with
        `HeldoutStopped` and nothing recorded."""
        if self.parts.stream is not None:  # an async schedule: the engine idle, with the current weights
            self.parts.stream.before_evaluation()
        with heldout_stops(self._stop) if self._stop is not None else nullcontext():
            ev = self.system.evaluate(self.parts.engine, self.parts.tok)
        if not ev:
            return {}
        row = {"step": self.state.step, **{k: v for k, v in ev.items() if k not in ("traces", "samples")}}
        self.state.record_evaluation(row, {k: ev[k] for k in ("traces", "samples") if k in ev})
        self.log.evaluation(row)
        return row

    def save(self) -> None:
        self.ckpt.save(self.state)

    def next_step(self) -> dict:
        """Step `step + 1` and what its number makes due (module docstring); returns its metrics."""
        cfg, p, cur = self.cfg, self.parts, self.curriculum
        metrics, traces, clock, conv_lens = run_step(p, cfg, self.state.step, cur.schedule_step(self.state.step))
        self.state.finish_step(metrics)  # the checkpoint below records it (without the evaluation/checkpoint times)
        step = self.state.step
        self.log.traces(step, traces[:4])
        end = cur.is_end(step)  # the last step of a stage
        if end or (cfg.eval_every and step % cfg.eval_every == 0):
            try:
                with clock("evaluation"):
                    self._evaluated(step)
            except HeldoutStopped:  # a stop request: step's checkpoint, its evaluation still to do, then exit
                self.state.eval_pending = True
                self.save()
                self.ckpt.finish()
                raise self._stopped_in_evaluation(step) from None
        self._restart(step, end)
        if end or step % cfg.checkpoint_every == 0:
            with clock("checkpoint"):
                self.save()
        metrics.update(phase_metrics(clock, model_cfg=p.model.cfg, conv_lens=conv_lens, rollout_tokens=int(
            metrics.get("rollout_prompt_tokens", 0) + metrics.get("rollout_generated_tokens", 0)),
            ppo_epochs=cfg.update.ppo_epochs, trained_samples=int(metrics.get("trained_samples") or 0),
            device_count=jax.device_count()))
        self.log.step(metrics)  # after the checkpoint: a resume writes a line it lacks from the history
        return metrics

    def _evaluated(self, step: int) -> None:
        best = self.curriculum.evaluated(step, self.evaluate(), self.parts.model)
        if best:
            self.con.print(f"best of stage {self.curriculum.stages[step - 1]} so far: step {step}")

    def _restart(self, step: int, end: bool) -> None:
        p, cur = self.parts, self.curriculum
        if end and step < self.cfg.steps and cur.restarts:
            self.con.print(cur.start_stage(step, p.model, p.trainer, p.engine))

    def _stopped_in_evaluation(self, step: int) -> Stopped:
        stop = self._stop
        return Stopped(f"stopped by {stop.signal_name} at step {step}, in its held-out evaluation (discarded: the "
                       f"resume runs it again); checkpoint {step} committed in {self.ckpt.dir}; run the same command "
                       "again to resume from it", stop.code or 143)

    def _finish_pending(self) -> None:
        """A resume from a checkpoint taken when a stop cut its step's held-out evaluation short: that
        evaluation and what follows it in the step (the stage restart); the checkpoint of the step exists."""
        step = self.state.step
        try:
            self._evaluated(step)
        except HeldoutStopped:
            raise self._stopped_in_evaluation(step) from None
        self.state.eval_pending = False
        self._restart(step, self.curriculum.is_end(step))

    def close(self) -> None:
        """Finish (and verify) the save in flight, close the checkpoint manager, release out_dir's lock."""
        try:
            if self.parts is not None and self.parts.stream is not None:  # split_async's worker thread
                self.parts.stream.close()
            if self.ckpt is not None:
                ckpt, self.ckpt = self.ckpt, None
                ckpt.close()
            if self.log is not None:
                self.log.close()
        finally:
            if self.curriculum is not None:
                self.curriculum.close()
            if self._lock is not None:
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
            return self.state.history
        stop, stopped = StopRequests(jax.process_count()), False
        self._stop = stop
        try:
            if self.state.step == 0 and not self.state.evals:
                try:
                    self.curriculum.check_metric(self.evaluate())  # a select_metric it lacks fails now
                except HeldoutStopped:
                    raise Stopped(f"stopped by {stop.signal_name} in the held-out evaluation before training "
                                  "(discarded; nothing to keep); run the same command again to start",
                                  stop.code or 143) from None
            elif self.state.eval_pending:
                self._finish_pending()
            with Progress(transient=True, console=self.con) as bar:
                task = bar.add_task("training", total=self.cfg.steps, completed=self.state.step)
                while self.state.step < self.cfg.steps:
                    m = self.next_step()
                    bar.update(task, completed=self.state.step)
                    self.log.print_step(m)
                    if stop.due(self.state.step):  # SIGTERM / preemption / Ctrl-C: every process at this step
                        if self.state.saved_at != self.state.step:
                            self.save()
                        self.ckpt.finish()  # committed and verified before the one line and exit 143 / 130
                        if self.state.step < self.cfg.steps:
                            raise stop_line(stop, self.state.step, self.ckpt.dir)
                        stopped = True  # the last step: the run's outputs are written before the stop's exit
            self.ckpt.finish()
            p = self.parts
            self.summary = result.write(self.out, self.primary, p.model, p.tok, lambda: result.summary(
                self.cfg, self.system, self.state, self.curriculum, self.code, p.model_run,
                time.perf_counter() - t_start, self.environment))
        finally:
            stop.restore()
            self._stop = None
            self.close()
        result.announce(self.out, self.primary, self.con, self.trackers)
        self.trackers.close()  # the tracked runs end with the report as their artifact
        if stopped:
            raise Stopped(f"stopped by {stop.signal_name} at step {self.state.step}, the last; the run finished: "
                          f"checkpoint, result.json, hf/ and report.html written in {self.out}", stop.code)
        return self.state.history


def train(cfg: TrainConfig, console: Console | None = None) -> dict:
    """Run `cfg` to its last step (resuming from out_dir's checkpoints) and return result.json's dict."""
    run = Run(cfg, console)
    with peer_loss(run.out / "checkpoints"):  # a lost peer: the one line of memjax.parallel.logtee, not a trace
        run.run()
    return run.summary
